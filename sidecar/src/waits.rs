//! Wait states (Sager §5.1; the reconstruction in sager-notes §2.4; issue
//! stage 3). Timely workers never block, so waiting is inferred per gap:
//!
//! * A worker is *not* waiting while a local cause of future work is pending
//!   (the gap's `cause_until`, from the builder) or while a message to it is
//!   buffered — arrived but not yet read (condition 2, OC1: "while any data
//!   message is buffered, the worker cannot be waiting").
//! * Otherwise it waits from then until the first message *arrival* (data or
//!   progress, from another worker) inside the gap: **Waiting**, ending at the
//!   arrival (Property 3.11; the spin between arrival and read is not a wait,
//!   §5.3 item 4), "on" the sender and channel.
//! * If nothing arrives before the next useful work starts, that work had no
//!   visible cause: **Waiting-for-Input**, ending at its start (OC3). It is an
//!   ordinary activity and can be on the critical path.
//! * A gap crossing the window's end is cut there (sager-notes §3.4): its type
//!   comes from what ended it later (`GapEnd`, seen by the stream's builder).
//!
//! Arrival times: on one host, a message between workers is shared memory or
//! loopback; without communication-thread events its transfer is not
//! observed, so arrival = send time (local messages have zero duration,
//! Sager §4.1.3, sager-notes §2.2 item 6).

use crate::model::{GapEnd, MsgKind, Ns};

/// A message arriving at a worker, as the wait analysis needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrival {
    pub at: Ns,
    /// Local index of the sending worker in the window.
    pub src: u32,
    pub channel: u32,
    pub kind: MsgKind,
    /// Send time (= `at` on one host); the critical path jumps there.
    pub sent: Ns,
}

/// Who a wait was on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOn {
    /// A message from this worker (local index, or global worker index if the
    /// sender is not in the window) on this channel.
    Message { src: u32, src_known: bool, channel: u32, kind: MsgKind },
    /// Nothing visible ended it (the stream ended or the live deadline hit).
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    Waiting(WaitOn),
    WaitingForInput,
}

/// One wait on one worker, projected on the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    pub start: Ns,
    pub end: Ns,
    pub kind: WaitKind,
    /// The arrival that ended it (Waiting inside the window).
    pub terminator: Option<Arrival>,
    /// Cut at the window's end (continues in the next window).
    pub cut: bool,
}

/// Messages to one worker: arrival and read times, for the "buffered" test.
/// Arrivals before the window are at the window start; reads after the
/// window are `Ns::MAX`.
#[derive(Default, Debug)]
pub struct Inbox {
    pub arrivals: Vec<Ns>,
    pub reads: Vec<Ns>,
}

impl Inbox {
    pub fn prepare(&mut self) {
        let mut tmp = Vec::new();
        sort_ns(&mut self.arrivals, &mut tmp);
        sort_ns(&mut self.reads, &mut tmp);
    }
}

/// Sorts times ascending (the same result as `sort`): already sorted input
/// is left alone; large inputs spanning less than 2^44 ns (plus `Ns::MAX`
/// for "never") are radix sorted, 11 bits a pass, since they are many
/// interleaved sorted runs, which comparison sorts handle slowly.
pub fn sort_ns(v: &mut Vec<Ns>, tmp: &mut Vec<Ns>) {
    if v.is_sorted() {
        return;
    }
    if v.len() < 512 {
        v.sort_unstable();
        return;
    }
    let (mut lo, mut hi, mut never) = (Ns::MAX, 0, 0usize);
    for &x in v.iter() {
        if x == Ns::MAX {
            never += 1;
        } else {
            lo = lo.min(x);
            hi = hi.max(x);
        }
    }
    let n = v.len() - never;
    let bits = if n == 0 { 0 } else { 64 - (hi - lo).leading_zeros() };
    if bits > 44 {
        v.sort_unstable();
        return;
    }
    const B: u32 = 11;
    const R: usize = 1 << B;
    let passes = bits.div_ceil(B).max(1) as usize;
    let mut counts = vec![[0usize; R]; passes];
    // Keys relative to `lo`, "never" dropped (appended at the end).
    tmp.clear();
    tmp.extend(v.iter().copied().filter(|&x| x != Ns::MAX).map(|x| x - lo));
    for &x in tmp.iter() {
        for (p, c) in counts.iter_mut().enumerate() {
            c[((x >> (p as u32 * B)) as usize) & (R - 1)] += 1;
        }
    }
    v.clear();
    v.resize(n, 0);
    let (mut src, mut dst) = (&mut *tmp, &mut *v);
    for (p, c) in counts.iter_mut().enumerate() {
        let mut sum = 0;
        for x in c.iter_mut() {
            let k = *x;
            *x = sum;
            sum += k;
        }
        let shift = p as u32 * B;
        for &x in src.iter() {
            let d = ((x >> shift) as usize) & (R - 1);
            dst[c[d]] = x;
            c[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    // `src` holds the sorted keys.
    let sorted: Vec<Ns> = if passes % 2 == 1 {
        // after an odd number of passes the result is in `v`
        std::mem::take(v)
    } else {
        std::mem::take(tmp)
    };
    let mut sorted = sorted;
    for x in sorted.iter_mut() {
        *x += lo;
    }
    sorted.resize(n + never, Ns::MAX);
    let spare = std::mem::replace(v, sorted);
    if spare.capacity() > tmp.capacity() {
        *tmp = spare;
    }
}

/// Walks one worker's gaps (sorted by start) and classifies them.
pub struct WaitFinder<'a> {
    /// Cross-worker arrivals at this worker, sorted by `at`.
    pub arrivals: &'a [Arrival],
    pub inbox: &'a Inbox,
    pub window: (Ns, Ns),
    ia: usize,
    ir: usize,
}

impl<'a> WaitFinder<'a> {
    pub fn new(arrivals: &'a [Arrival], inbox: &'a Inbox, window: (Ns, Ns)) -> Self {
        WaitFinder { arrivals, inbox, window, ia: 0, ir: 0 }
    }

    /// Messages arrived at or before `t` and not read by `t` (t increasing
    /// across calls).
    fn buffered(&mut self, t: Ns) -> bool {
        let a = &self.inbox.arrivals;
        let r = &self.inbox.reads;
        while self.ia < a.len() && a[self.ia] <= t {
            self.ia += 1;
        }
        while self.ir < r.len() && r[self.ir] <= t {
            self.ir += 1;
        }
        self.ia > self.ir
    }

    /// Classifies the gap `[start, end]` (original times) whose local causes
    /// expired at `cause_until`. Calls must come in increasing `start`.
    pub fn gap(&mut self, start: Ns, end: Ns, cause_until: Ns, next: GapEnd) -> Option<Wait> {
        let (ws, we) = self.window;
        let (ca, cb) = (start.max(ws), end.min(we));
        let w0 = cause_until.max(ca);
        if w0 >= cb || self.buffered(w0) {
            return None;
        }
        // First arrival strictly after the wait began and not after the gap.
        let i = self.arrivals.partition_point(|a| a.at <= w0);
        if let Some(a) = self.arrivals.get(i) {
            if a.at <= cb {
                let on = WaitOn::Message { src: a.src, src_known: true, channel: a.channel, kind: a.kind };
                return Some(Wait { start: w0, end: a.at, kind: WaitKind::Waiting(on), terminator: Some(*a), cut: false });
            }
        }
        let cut = end > we;
        let kind = match next {
            GapEnd::Read { from, channel, kind } => {
                if cut {
                    WaitKind::Waiting(WaitOn::Message { src: from, src_known: false, channel, kind })
                } else {
                    // The message read next arrived unseen (sender not on
                    // this timeline): a wait on it, without a terminator.
                    WaitKind::Waiting(WaitOn::Message { src: from, src_known: false, channel, kind })
                }
            }
            GapEnd::NoCause => WaitKind::WaitingForInput,
            GapEnd::Open => WaitKind::Waiting(WaitOn::Unknown),
        };
        Some(Wait { start: w0, end: cb, kind, terminator: None, cut: cut || (cb == we && next == GapEnd::Open) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arr(at: Ns, src: u32) -> Arrival {
        Arrival { at, src, channel: 7, kind: MsgKind::Data, sent: at }
    }

    #[test]
    fn radix_sort_matches_sort() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut tmp = Vec::new();
        for (n, span, never) in [(0usize, 1u64, 0u64), (600, 1, 0), (600, 1 << 11, 3), (5000, 1 << 30, 7), (5000, 1 << 44, 2), (3000, 1 << 50, 0), (2000, u64::MAX, 0)] {
            let mut v: Vec<Ns> = (0..n).map(|_| (next() % span).wrapping_add(1_000_000)).collect();
            for i in 0..never as usize {
                if i < v.len() {
                    let l = v.len();
                    v[i * 7 % l] = Ns::MAX;
                }
            }
            let mut want = v.clone();
            want.sort();
            sort_ns(&mut v, &mut tmp);
            assert_eq!(v, want, "n {n} span {span}");
        }
    }

    #[test]
    fn waiting_ends_at_first_arrival() {
        let arrivals = [arr(15, 1), arr(40, 2)];
        let inbox = Inbox::default();
        let mut f = WaitFinder::new(&arrivals, &inbox, (0, 100));
        let w = f.gap(10, 30, 12, GapEnd::NoCause).unwrap();
        assert_eq!((w.start, w.end, w.cut), (12, 15, false));
        assert_eq!(w.terminator, Some(arr(15, 1)));
        assert_eq!(
            w.kind,
            WaitKind::Waiting(WaitOn::Message { src: 1, src_known: true, channel: 7, kind: MsgKind::Data })
        );
        // next gap: nothing arrives in it -> waiting for input
        let w = f.gap(50, 60, 50, GapEnd::NoCause).unwrap();
        assert_eq!((w.start, w.end, w.kind), (50, 60, WaitKind::WaitingForInput));
    }

    #[test]
    fn causes_and_buffered_messages_prevent_waits() {
        let arrivals = [arr(5, 1)];
        let mut inbox = Inbox { arrivals: vec![5], reads: vec![35] };
        inbox.prepare();
        let mut f = WaitFinder::new(&arrivals, &inbox, (0, 100));
        assert_eq!(f.gap(10, 30, 10, GapEnd::NoCause), None); // buffered
        assert_eq!(f.gap(40, 50, 50, GapEnd::NoCause), None); // cause pending throughout
    }

    #[test]
    fn cut_at_window_end_takes_type_from_later() {
        let inbox = Inbox::default();
        let mut f = WaitFinder::new(&[], &inbox, (0, 100));
        let w = f.gap(90, 150, 90, GapEnd::Read { from: 3, channel: 1, kind: MsgKind::Progress }).unwrap();
        assert_eq!((w.start, w.end, w.cut), (90, 100, true));
        assert!(matches!(w.kind, WaitKind::Waiting(WaitOn::Message { src: 3, src_known: false, .. })));
        let mut f = WaitFinder::new(&[], &inbox, (100, 200));
        let w = f.gap(90, 150, 90, GapEnd::NoCause).unwrap();
        assert_eq!((w.start, w.end, w.kind, w.cut), (100, 150, WaitKind::WaitingForInput, false));
    }
}
