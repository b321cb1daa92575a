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
        self.arrivals.sort();
        self.reads.sort();
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
                return Some(Wait {
                    start: w0,
                    end: a.at,
                    kind: WaitKind::Waiting(on),
                    terminator: Some(*a),
                    cut: false,
                });
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
