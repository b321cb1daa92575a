//! Wait states (Sager §5.1; the reconstruction in sager-notes §2.4; issue
//! stage 3). Timely workers never block, so waiting is inferred per gap:
//!
//! * A worker is *not* waiting while a local cause of future work is pending
//!   (the gap's `cause_until`, from the builder) or while a message to it is
//!   buffered — arrived but not yet read — that the execution ending the gap
//!   does not read (condition 2, OC1: "while any data message is buffered,
//!   the worker cannot be waiting").
//! * The messages the execution that ends the gap reads are the ones the
//!   worker was waiting for (told by time: the reads between that
//!   execution's start and its end). The gap is a wait on the one of them
//!   that arrived **last**: a gather, a barrier, an N×N exchange, or timely's
//!   frontier (which needs progress from every peer) is held up by its last
//!   sender for the whole gap, as Scalasca's Late Sender and Wait-at-N×N
//!   patterns attribute it (DESIGN "Activities and waits"). **Waiting**,
//!   ending at that arrival (Property 3.11; the spin between arrival and
//!   read is not a wait, §5.3 item 4), "on" its sender and channel; the
//!   critical path crosses to the sender at that send. The arrival order decides, not the read order.
//! * If all of them were there before the gap, the worker had what it
//!   needed: not waiting (Sager's rule, as for any buffered message).
//! * If it read none that arrived in the gap, the wait ends at the first
//!   arrival inside it, on that sender (Sager's rule as written).
//! * Limit: where a message the ending execution does not read arrived
//!   before the last awaited one, the worker held a buffered message it
//!   chose not to read, and what it waited for cannot be told apart from
//!   what it skipped: the wait ends at the first arrival, as in Sager's rule.
//! * If nothing arrives before the next useful work starts, that work had no
//!   visible cause: **Waiting-for-Input**, ending at its start (OC3). It is an
//!   ordinary activity and can be on the critical path.
//! * A gap crossing the window's end is cut there (sager-notes §3.4): its type
//!   comes from what ended it later (`GapEnd`, seen by the stream's builder).
//!
//! Arrival times. Within one process a message between workers is shared
//! memory: arrival = send time (local messages have zero duration, Sager
//! §4.1.3, sager-notes §2.2 item 6). Between processes (and hosts) it is
//! not: the message is in flight from its send until its receiver could
//! first read it, and a receiver polling meanwhile is waiting on it. Without
//! communication-thread events that moment is not observed; it lies between
//! the send and the read, and the receiver, polling, reads it as soon as it
//! is there: the arrival is taken at the start of the receiver's busy
//! stretch that holds the read (the end of the gap before it), never before
//! the send nor after the read (`analyze::matching`). So the gap the read
//! ends is a wait on that message, and the message's transit
//! (`at − sent`) is on the critical path as a message edge. A message that
//! crosses processes and is not read in the window has no known arrival:
//! it neither ends a gap nor counts as buffered.

use std::sync::Arc;

use crate::analysis::model::{GapEnd, MsgKind, Ns};

/// A message arriving at a worker, as the wait analysis needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrival {
    /// When it arrived: its send time within a process (read time when the
    /// read came first: clock trouble); between processes, when its
    /// receiver could first read it (module docs). A wait it ends ends here.
    pub at: Ns,
    /// Local index of the sending worker in the window.
    pub src: u32,
    pub channel: u32,
    pub kind: MsgKind,
    /// When it was sent (≤ `at`), where the critical path jumps to the
    /// sender; `at − sent` is its transit.
    pub sent: Ns,
}

impl Arrival {
    /// A message within one process: it arrives as it is sent.
    pub fn local(at: Ns, src: u32, channel: u32, kind: MsgKind) -> Arrival {
        Arrival { at, src, channel, kind, sent: at }
    }
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

/// Messages to one worker, for the "buffered" test: per message read in the
/// window its read and arrival times (arrival ≤ read; arrivals before the
/// window are at the window start), and the earliest arrival of a message
/// not read in the window.
#[derive(Debug)]
pub struct Inbox {
    pub reads: Vec<Ns>,
    /// `arrived[i]` belongs to `reads[i]`.
    pub arrived: Vec<Ns>,
    pub unread: Ns,
    /// Suffix minima of `arrived` in read order, then `unread` (`prepare`).
    first_arrival_after: Vec<Ns>,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox { reads: Vec::new(), arrived: Vec::new(), unread: Ns::MAX, first_arrival_after: Vec::new() }
    }
}

impl Inbox {
    /// A message arriving at `arrival`, read at `read` (`Ns::MAX`: not read
    /// in the window).
    pub fn push(&mut self, arrival: Ns, read: Ns) {
        if read == Ns::MAX {
            self.unread = self.unread.min(arrival);
        } else {
            self.reads.push(read);
            self.arrived.push(arrival);
        }
    }

    /// Since every message arrives no later than it is read, "more arrivals
    /// than reads by `t`" is "some message arrived by `t` and is read after
    /// it": the earliest arrival among the messages read after `t`. With the
    /// reads in order (a receiver's reads are its timeline's order) that is
    /// a suffix minimum, so no sort is needed.
    pub fn prepare(&mut self) {
        if !self.reads.is_sorted() {
            let mut p: Vec<(Ns, Ns)> = self.reads.iter().copied().zip(self.arrived.iter().copied()).collect();
            p.sort_unstable();
            (self.reads, self.arrived) = p.into_iter().unzip();
        }
        let n = self.reads.len();
        let m = &mut self.first_arrival_after;
        m.clear();
        m.resize(n + 1, self.unread);
        for i in (0..n).rev() {
            m[i] = m[i + 1].min(self.arrived[i]);
        }
    }
}

/// Cross-worker arrivals at one worker, as runs each sorted by `Arrival`'s
/// order (one per message group: they are pushed in sequence order). The
/// first arrival after a time is the least of the runs' first ones, which
/// saves sorting the whole list (a merge of a few long runs).
///
/// A progress update reaches every other worker of its process: its runs
/// are `shared`, one list for all of them, not copied to each (a copy per
/// receiver made a process of P workers cost P² arrivals: 466 MB for 1 M
/// records of 256 workers).
#[derive(Default, Debug, Clone)]
pub struct ArrivalRuns {
    pub list: Vec<Arrival>,
    /// Start offsets of the runs (`start_run`); after `prepare`, run `r` is
    /// `bounds[r]..bounds[r + 1]`.
    bounds: Vec<u32>,
    /// Runs shared with other receivers, each sorted.
    pub shared: Vec<Arc<[Arrival]>>,
}

/// Arrivals in `Arrival` order, for [`ArrivalRuns::share`].
pub fn shared_run(mut run: Vec<Arrival>) -> Arc<[Arrival]> {
    sort_run(&mut run);
    run.into()
}

/// A run put in `Arrival` order (it nearly always is).
fn sort_run(run: &mut [Arrival]) {
    // (Times nearly always increase strictly: the full comparison only on
    // equal times.)
    if !run.windows(2).all(|p| p[0].at < p[1].at || p[0] <= p[1]) {
        run.sort_unstable();
    }
}

impl ArrivalRuns {
    /// A run shared with other receivers ([`shared_run`]); empty ones are
    /// left out.
    pub fn share(&mut self, run: &Arc<[Arrival]>) {
        if !run.is_empty() {
            self.shared.push(run.clone());
        }
    }

    /// Every run, each sorted (after `prepare`): this receiver's own, then
    /// the shared ones.
    pub fn runs_slices(&self) -> Vec<&[Arrival]> {
        let own = self.bounds.windows(2).map(|r| &self.list[r[0] as usize..r[1] as usize]);
        own.chain(self.shared.iter().map(|r| &r[..])).collect()
    }

    /// How many arrivals in all, own and shared.
    pub fn len(&self) -> usize {
        self.list.len() + self.shared.iter().map(|r| r.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn start_run(&mut self) {
        let n = self.list.len() as u32;
        if self.bounds.last() != Some(&n) {
            self.bounds.push(n);
        }
    }

    pub fn push(&mut self, a: Arrival) {
        if self.bounds.is_empty() {
            self.bounds.push(0);
        }
        self.list.push(a);
    }

    /// Sorts each run (they nearly always are) and joins runs that continue
    /// one another.
    pub fn prepare(&mut self) {
        let n = self.list.len() as u32;
        if self.bounds.first() != Some(&0) {
            self.bounds.insert(0, 0);
        }
        self.bounds.push(n);
        self.bounds.dedup();
        let mut out: Vec<u32> = Vec::with_capacity(self.bounds.len());
        for r in self.bounds.windows(2) {
            sort_run(&mut self.list[r[0] as usize..r[1] as usize]);
        }
        for (k, r) in self.bounds.windows(2).enumerate() {
            let joins = k > 0 && self.list[r[0] as usize - 1] <= self.list[r[0] as usize];
            if !joins {
                out.push(r[0]);
            }
        }
        out.push(n);
        if n == 0 {
            out.clear();
        }
        self.bounds = out;
    }

    pub fn runs(&self) -> usize {
        self.bounds.len().saturating_sub(1) + self.shared.len()
    }
}

impl From<Vec<Arrival>> for ArrivalRuns {
    fn from(list: Vec<Arrival>) -> Self {
        let mut r = ArrivalRuns { list, bounds: Vec::new(), shared: Vec::new() };
        r.prepare();
        r
    }
}

/// Walks one worker's gaps (sorted by start) and classifies them.
pub struct WaitFinder<'a> {
    /// Cross-worker arrivals at this worker (prepared), run by run.
    runs: Vec<&'a [Arrival]>,
    pub inbox: &'a Inbox,
    pub window: (Ns, Ns),
    ir: usize,
    /// Latest time asked about (`buffered`).
    t_max: Ns,
    /// Per run: the first arrival after `after` (gaps come in time order,
    /// so these only move forward).
    heads: Vec<u32>,
    /// Time of each run's head (`Ns::MAX`: run exhausted).
    head_at: Vec<Ns>,
    after: Ns,
    /// The last [`Self::awaited`] range's bounds.
    awaited: (usize, usize),
}

impl<'a> WaitFinder<'a> {
    pub fn new(arrivals: &'a ArrivalRuns, inbox: &'a Inbox, window: (Ns, Ns)) -> Self {
        let runs = arrivals.runs_slices();
        let heads: Vec<u32> = vec![0; runs.len()];
        let head_at = runs.iter().map(|r| r.first().map_or(Ns::MAX, |a| a.at)).collect();
        WaitFinder { runs, inbox, window, ir: 0, t_max: 0, heads, head_at, after: 0, awaited: (0, 0) }
    }

    /// Messages arrived at or before `t` and not read by `t` (asked with
    /// `t` increasing; an earlier `t` is taken as the latest one asked).
    fn buffered(&mut self, t: Ns) -> bool {
        let t = t.max(self.t_max);
        self.t_max = t;
        let r = &self.inbox.reads;
        while self.ir < r.len() && r[self.ir] <= t {
            self.ir += 1;
        }
        self.inbox.first_arrival_after.get(self.ir).copied().unwrap_or(self.inbox.unread) <= t
    }

    /// The first arrival (in `Arrival` order) strictly after `t`: the least
    /// of the runs' first arrivals after `t` (by time, then in full order).
    fn first_after(&mut self, t: Ns) -> Option<Arrival> {
        let runs = &self.runs;
        let at = |run: &[Arrival], p: usize| run.get(p).map_or(Ns::MAX, |a| a.at);
        if t < self.after {
            for (r, h) in self.heads.iter_mut().enumerate() {
                *h = runs[r].partition_point(|a| a.at <= t) as u32;
                self.head_at[r] = at(runs[r], *h as usize);
            }
        }
        self.after = t;
        let mut best: Option<usize> = None;
        let mut best_at = Ns::MAX;
        for (r, run) in runs.iter().enumerate() {
            if self.head_at[r] <= t {
                let mut p = self.heads[r] as usize;
                while p < run.len() && run[p].at <= t {
                    p += 1;
                }
                self.heads[r] = p as u32;
                self.head_at[r] = at(run, p);
            }
            let a = self.head_at[r];
            if a < best_at {
                best_at = a;
                best = Some(r);
            } else if a == best_at && a != Ns::MAX {
                let b = best.expect("a run holds the best");
                if run[self.heads[r] as usize] < runs[b][self.heads[b] as usize] {
                    best = Some(r);
                }
            }
        }
        best.filter(|_| best_at != Ns::MAX).map(|r| runs[r][self.heads[r] as usize])
    }

    /// After [`Self::first_after`]`(t)`: how many arrivals lie in `(t, upto]`
    /// (counted to `limit + 1` at most), and the greatest at exactly `upto`.
    /// Each run is walked from its head, so this costs the arrivals counted
    /// plus one look per run.
    fn arrivals_upto(&self, upto: Ns, limit: usize) -> (usize, Option<Arrival>) {
        let (mut count, mut at_upto) = (0, None::<Arrival>);
        for (r, &head) in self.heads.iter().enumerate() {
            if self.head_at[r] > upto {
                continue;
            }
            let list = self.runs[r];
            let mut p = head as usize;
            while p < list.len() && list[p].at <= upto {
                if list[p].at == upto && at_upto.is_none_or(|b| list[p] > b) {
                    at_upto = Some(list[p]);
                }
                count += 1;
                if count > limit {
                    return (count, None);
                }
                p += 1;
            }
        }
        (count, at_upto)
    }

    /// Waiting from `w0` until arrival `a`, on its sender.
    fn waiting_until(w0: Ns, a: Arrival) -> Wait {
        let on = WaitOn::Message { src: a.src, src_known: true, channel: a.channel, kind: a.kind };
        Wait { start: w0, end: a.at, kind: WaitKind::Waiting(on), terminator: Some(a), cut: false }
    }

    /// The slots of the reads the execution `[end, read_until]` after a gap
    /// made: the messages the gap waited for. (Gaps come in time order, so
    /// the bounds only move forward.)
    fn awaited(&mut self, end: Ns, read_until: Ns) -> std::ops::Range<usize> {
        let reads = &self.inbox.reads;
        let (mut lo, mut hi) = self.awaited;
        while lo < reads.len() && reads[lo] < end {
            lo += 1;
        }
        hi = hi.max(lo);
        while hi < reads.len() && reads[hi] <= read_until {
            hi += 1;
        }
        self.awaited = (lo, hi);
        lo..hi
    }

    /// Messages other than `awaited` arrived at or before `t` and not read
    /// by `t` (asked with `t` increasing, as [`Self::buffered`]).
    fn buffered_besides(&mut self, t: Ns, awaited: &std::ops::Range<usize>) -> bool {
        if awaited.is_empty() {
            return self.buffered(t);
        }
        let t = t.max(self.t_max);
        self.t_max = t;
        let r = &self.inbox.reads;
        while self.ir < r.len() && r[self.ir] <= t {
            self.ir += 1;
        }
        let between = self.inbox.arrived[self.ir.min(awaited.start)..awaited.start].iter().copied().min();
        let after = self.inbox.first_arrival_after.get(awaited.end).copied().unwrap_or(self.inbox.unread);
        between.unwrap_or(Ns::MAX).min(after) <= t
    }

    /// Of the awaited messages: whether one had arrived by `w0`, how many
    /// arrived inside the wait `(w0, cb]`, and the last of those.
    fn awaited_arrivals(&self, awaited: std::ops::Range<usize>, w0: Ns, cb: Ns) -> (bool, usize, Ns) {
        let (mut before, mut inside, mut last) = (false, 0, 0);
        for &a in &self.inbox.arrived[awaited] {
            if a <= w0 {
                before = true;
            } else if a <= cb {
                inside += 1;
                last = last.max(a);
            }
        }
        (before, inside, last)
    }

    /// Classifies the gap `[start, end]` (original times) whose local causes
    /// expired at `cause_until`; the execution that ends it runs until
    /// `read_until` (its reads are the messages the gap waited for). Calls
    /// must come in increasing `start`.
    pub fn gap(&mut self, start: Ns, end: Ns, cause_until: Ns, next: GapEnd, read_until: Ns) -> Option<Wait> {
        let (ws, we) = self.window;
        let (ca, cb) = (start.max(ws), end.min(we));
        let w0 = cause_until.max(ca);
        if w0 >= cb {
            return None;
        }
        // A message buffered that the next execution does not read: the
        // worker was not blocked (Sager §5.1 condition 2).
        let awaited = self.awaited(end, read_until);
        if self.buffered_besides(w0, &awaited) {
            return None;
        }
        // The last of the awaited messages, when it arrived inside the wait
        // and nothing else arrived before it.
        // (One awaited arrival and none before: the first arrival's rule
        // below gives the same, without the search.)
        let (had_one, inside, last) = self.awaited_arrivals(awaited, w0, cb);
        if inside > 1 || (inside == 1 && had_one) {
            self.first_after(w0);
            if let (n, Some(a)) = self.arrivals_upto(last, inside) {
                if n == inside {
                    return Some(Self::waiting_until(w0, a));
                }
            }
        }
        if had_one {
            return None; // what the execution read was there before the gap
        }
        // First arrival strictly after the wait began and not after the gap.
        if let Some(a) = self.first_after(w0) {
            if a.at <= cb {
                return Some(Self::waiting_until(w0, a));
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
        Arrival::local(at, src, 7, MsgKind::Data)
    }

    #[test]
    fn waiting_ends_at_first_arrival() {
        let arrivals = ArrivalRuns::from(vec![arr(15, 1), arr(40, 2)]);
        let mut inbox = Inbox::default();
        inbox.prepare();
        let mut f = WaitFinder::new(&arrivals, &inbox, (0, 100));
        let w = f.gap(10, 30, 12, GapEnd::NoCause, 0).unwrap();
        assert_eq!((w.start, w.end, w.cut), (12, 15, false));
        assert_eq!(w.terminator, Some(arr(15, 1)));
        assert_eq!(
            w.kind,
            WaitKind::Waiting(WaitOn::Message { src: 1, src_known: true, channel: 7, kind: MsgKind::Data })
        );
        // next gap: nothing arrives in it -> waiting for input
        let w = f.gap(50, 60, 50, GapEnd::NoCause, 0).unwrap();
        assert_eq!((w.start, w.end, w.kind), (50, 60, WaitKind::WaitingForInput));
    }

    #[test]
    fn causes_and_buffered_messages_prevent_waits() {
        let arrivals = ArrivalRuns::from(vec![arr(5, 1)]);
        let mut inbox = Inbox::default();
        inbox.push(5, 35);
        inbox.prepare();
        let mut f = WaitFinder::new(&arrivals, &inbox, (0, 100));
        assert_eq!(f.gap(10, 30, 10, GapEnd::NoCause, 0), None); // buffered
        assert_eq!(f.gap(40, 50, 50, GapEnd::NoCause, 0), None); // cause pending throughout
    }

    #[test]
    fn cut_at_window_end_takes_type_from_later() {
        let mut inbox = Inbox::default();
        inbox.prepare();
        let none = ArrivalRuns::default();
        let mut f = WaitFinder::new(&none, &inbox, (0, 100));
        let w = f.gap(90, 150, 90, GapEnd::Read { from: 3, channel: 1, kind: MsgKind::Progress }, 0).unwrap();
        assert_eq!((w.start, w.end, w.cut), (90, 100, true));
        assert!(matches!(w.kind, WaitKind::Waiting(WaitOn::Message { src: 3, src_known: false, .. })));
        let mut f = WaitFinder::new(&none, &inbox, (100, 200));
        let w = f.gap(90, 150, 90, GapEnd::NoCause, 0).unwrap();
        assert_eq!((w.start, w.end, w.kind, w.cut), (100, 150, WaitKind::WaitingForInput, false));
    }
}
