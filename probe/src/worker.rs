//! The engine-facing half: one [`WorkerProbe`] per engine worker thread.
//!
//! Every event costs one clock read and one record written into the
//! worker's own ring with plain stores and a release store of the ring's
//! write index; an elided schedule pair costs two clock reads (its start
//! and its stop, to know it was short) and no record. Nothing here
//! allocates, locks, or makes a system call, except the slow-path metadata
//! calls and a full ring under `OnFull::Block`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ringlog::{Event, Kind, Meta, Record};

use crate::clock::Source;

/// What a worker does when its ring is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnFull {
    /// Drop the record and count it (never blocks: production default).
    #[default]
    Drop,
    /// Wait for the writer to make room.
    Block,
}

/// What an engine adapter cost a worker thread since its last report
/// ([`WorkerProbe::add_adapter_cost`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdapterCost {
    /// Time spent in the adapter's own code, in probe clock ticks
    /// (measured: clock reads around its work).
    pub ticks: u64,
    /// Events the engine logged for the adapter.
    pub engine_events: u64,
    /// The engine's own cost of logging those events (reading its clock,
    /// buffering them, handing them over) and of flushing its logs, in ns:
    /// an estimate, since the engine's code cannot be timed from outside
    /// without costing more than it measures; a floor, since building the
    /// events is not in it. Includes `engine_flush_ns`.
    pub engine_log_ns: u64,
    /// Flush calls the engine made to the adapter's logs (timely: every
    /// registered log at every worker step, busy or not).
    pub engine_flushes: u64,
    /// The part of `engine_log_ns` those flush calls cost.
    pub engine_flush_ns: u64,
    /// The parts of `ticks`, `engine_flushes` and `engine_flush_ns` spent
    /// in worker steps that did nothing (an idle worker polling): time a
    /// spinning worker spends there instead of spinning, which costs it
    /// no progress.
    pub idle_ticks: u64,
    pub idle_flushes: u64,
    pub idle_flush_ns: u64,
}

/// State a worker shares with the writer thread. Every counter here has one
/// writer (the worker or the writer thread), so plain stores suffice.
pub(crate) struct WorkerShared {
    pub index: u32,
    /// Records lost to a full ring (stored by the worker).
    pub lost: AtomicU64,
    /// Schedule pairs elided so far (stored by the worker at steps and drop).
    pub elided: AtomicU64,
    /// Worker-local message halves not written (stored as `elided` is).
    pub local: AtomicU64,
    /// An engine adapter's own cost ([`AdapterCost`], totals stored by
    /// [`WorkerProbe::add_adapter_cost`]).
    pub adapter_ticks: AtomicU64,
    /// An adapter has reported (its figures are known, zero or not).
    pub adapter: AtomicBool,
    pub engine_events: AtomicU64,
    pub engine_log_ns: AtomicU64,
    pub engine_flushes: AtomicU64,
    pub engine_flush_ns: AtomicU64,
    pub adapter_idle_ticks: AtomicU64,
    pub engine_idle_flushes: AtomicU64,
    pub engine_idle_flush_ns: AtomicU64,
    /// The worker is gone and published everything it had.
    pub closed: AtomicBool,
    /// Metadata not yet taken by the writer.
    pub meta: Mutex<Vec<Meta>>,
    /// The writer thread is running (false after shutdown): a blocked
    /// worker gives up rather than wait forever.
    pub writer_alive: Arc<AtomicBool>,
    pub writer: std::thread::Thread,
    /// The writer's calibration of the clock (0 until it has one).
    pub ticks_per_sec: Arc<AtomicU64>,
}

pub(crate) struct Active {
    ring: ringlog::ring::Producer,
    clock: Source,
    block: bool,
    /// This worker's index, where a message to or from it is worker-local
    /// and not written; `KEEP_LOCAL` (no u32 index equals it) where such
    /// messages are written ([`crate::Builder::keep_local_messages`]). One
    /// compare on the hot path either way.
    local_index: u64,
    /// Worker-local message halves not written.
    local: u64,
    /// A schedule start held back until something shows it was not idle
    /// or its stop shows it was not short.
    pending: bool,
    pending_op: u32,
    pending_ts: u64,
    /// A held pair is elided only if it lasted fewer ticks than this
    /// ([`crate::Builder::elide_below`]): an operator that computes
    /// silently for longer did work, and is published like any other
    /// execution.
    elide_below: u64,
    /// Start of the last elided pair whose time is not yet accounted; its
    /// spin time ends at the worker's next clock read.
    spin_from: u64,
    /// All ones while `spin_from` is open, else zero.
    spin_mask: u64,
    /// `pending` or a spin time open: the one flag an event tests.
    dirty: bool,
    spin_ticks: u64,
    elided: u64,
    elided_total: u64,
    lost: u64,
    shared: Arc<WorkerShared>,
}

/// A worker thread's handle. `Send`, not shared: one per engine worker.
///
/// Dropping it publishes what it holds (a held schedule start, the elided
/// count since the last step) and ends its stream.
pub struct WorkerProbe {
    active: Option<Active>,
}

impl WorkerProbe {
    pub(crate) fn disabled() -> WorkerProbe {
        WorkerProbe { active: None }
    }

    pub(crate) fn new(
        ring: ringlog::ring::Producer,
        clock: Source,
        on_full: OnFull,
        keep_local: bool,
        elide_below: u64,
        shared: Arc<WorkerShared>,
    ) -> Self {
        WorkerProbe {
            active: Some(Active {
                ring,
                clock,
                block: on_full == OnFull::Block,
                local_index: if keep_local { KEEP_LOCAL } else { shared.index as u64 },
                local: 0,
                pending: false,
                pending_op: 0,
                pending_ts: 0,
                elide_below,
                spin_from: 0,
                spin_mask: 0,
                dirty: false,
                spin_ticks: 0,
                elided: 0,
                elided_total: 0,
                lost: 0,
                shared,
            }),
        }
    }

    /// Whether this probe records anything.
    pub fn is_enabled(&self) -> bool {
        self.active.is_some()
    }

    /// Describes an operator (slow path: allocates and locks).
    pub fn operator(&mut self, id: usize, name: &str, addr: &[usize]) {
        if let Some(a) = &self.active {
            let addr = addr.iter().map(|&x| x as u32).collect();
            a.meta(Meta::Operator { id: id as u32, name: name.to_string(), addr });
        }
    }

    /// Describes a channel from `(operator, port)` to `(operator, port)`.
    pub fn channel(&mut self, id: usize, src: (usize, usize), dst: (usize, usize)) {
        if let Some(a) = &self.active {
            let (src, dst) = ((src.0 as u32, src.1 as u32), (dst.0 as u32, dst.1 as u32));
            a.meta(Meta::Channel { id: id as u32, src, dst });
        }
    }

    /// Names a user span id.
    pub fn span_name(&mut self, id: u64, name: &str) {
        if let Some(a) = &self.active {
            a.meta(Meta::Span { id, name: name.to_string() });
        }
    }

    /// The operator starts running. Held back until something happens
    /// inside it; a stop right after it, within the elision threshold
    /// ([`crate::Builder::elide_below`]), elides the pair.
    #[inline]
    pub fn schedule_start(&mut self, op: usize) {
        if let Some(a) = &mut self.active {
            let ts = a.clock.now();
            a.schedule_start(ts, op as u32);
        }
    }

    /// The operator stops. If nothing happened since its start and it ran
    /// for less than the elision threshold ([`crate::Builder::elide_below`]),
    /// the pair is elided: counted (with its time, in the next `Step`), not
    /// written. One that ran longer is published with both its records: it
    /// did work the trace must show, even if it sent and read nothing.
    #[inline]
    pub fn schedule_stop(&mut self, op: usize) {
        if let Some(a) = &mut self.active {
            let ts = a.clock.now();
            if a.try_elide(ts, op as u32) {
                return;
            }
            a.event_at(ts, Kind::ScheduleStop, 0, op as u32, 0, 0);
        }
    }

    /// `schedule_start` with a timestamp the caller took (for adapters that
    /// receive an engine's events after the fact). `ts` is in the probe's
    /// clock domain (see [`WorkerProbe::clock_now`]) and must not be
    /// earlier than the worker's previous timestamp.
    pub fn schedule_start_at(&mut self, ts: u64, op: usize) {
        if let Some(a) = &mut self.active {
            a.schedule_start(ts, op as u32);
        }
    }

    /// `schedule_stop` with a caller-supplied timestamp; elides like
    /// `schedule_stop`, measuring the pair's duration with `ts`.
    pub fn schedule_stop_at(&mut self, ts: u64, op: usize) {
        if let Some(a) = &mut self.active {
            if a.try_elide(ts, op as u32) {
                return;
            }
            a.event_at(ts, Kind::ScheduleStop, 0, op as u32, 0, 0);
        }
    }

    /// Any other event with a caller-supplied timestamp. Schedule events are
    /// routed through the elision logic; for `Step` the probe fills in the
    /// elided count and spin time itself (the values passed are ignored).
    pub fn event_at(&mut self, ts: u64, ev: Event) {
        match ev {
            Event::ScheduleStart { op } => return self.schedule_start_at(ts, op as usize),
            Event::ScheduleStop { op } => return self.schedule_stop_at(ts, op as usize),
            _ => {}
        }
        if let Some(a) = &mut self.active {
            match ev {
                Event::Step { .. } => a.step_at(ts),
                Event::MessageSend { to: w, .. } | Event::MessageRecv { from: w, .. } if a.is_local(w as u64) => {
                    a.local_message(|| ts)
                }
                ev => a.record_at(Record::from_event(ts, ev)),
            }
        }
    }

    /// Whether worker-local message halves are written
    /// ([`crate::Builder::keep_local_messages`]); false when disabled.
    pub fn keeps_local_messages(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.local_index == KEEP_LOCAL)
    }

    /// For adapters that drop worker-local message halves themselves when
    /// the probe does not keep them: `n` such halves, only counted. (The
    /// first of an operator's execution goes through [`Self::event_at`],
    /// which publishes the held start; the rest change nothing else.)
    pub fn count_local_messages(&mut self, n: u64) {
        if let Some(a) = &mut self.active {
            a.local += n;
        }
    }

    /// For engine adapters (such as the timely adapter): adds what turning
    /// the engine's own log into probe calls cost this worker, so that the
    /// probe's [`crate::Stats`] (and `sidecar watch`'s closing summary) can
    /// report tracing's whole cost in the worker threads, not only the
    /// probe's pushes. Call it now and then (at steps, at the end): it
    /// publishes running totals.
    pub fn add_adapter_cost(&mut self, c: AdapterCost) {
        if let Some(a) = &mut self.active {
            let s = &a.shared;
            let add = |x: &AtomicU64, n: u64| x.store(x.load(Ordering::Relaxed).saturating_add(n), Ordering::Relaxed);
            if !s.adapter.load(Ordering::Relaxed) {
                s.adapter.store(true, Ordering::Relaxed);
            }
            add(&s.adapter_ticks, c.ticks);
            add(&s.engine_events, c.engine_events);
            add(&s.engine_log_ns, c.engine_log_ns);
            add(&s.engine_flushes, c.engine_flushes);
            add(&s.engine_flush_ns, c.engine_flush_ns);
            add(&s.adapter_idle_ticks, c.idle_ticks);
            add(&s.engine_idle_flushes, c.idle_flushes);
            add(&s.engine_idle_flush_ns, c.idle_flush_ns);
        }
    }

    /// A reading of the probe's clock (TSC ticks, or CLOCK_MONOTONIC ns on
    /// hosts without an invariant TSC); 0 when disabled.
    pub fn clock_now(&self) -> u64 {
        self.active.as_ref().map_or(0, |a| a.clock.now())
    }

    /// Ticks per second of the probe's clock, once the writer thread has
    /// calibrated it (about 20 ms after start); 0 before that or when
    /// disabled.
    pub fn ticks_per_sec(&self) -> u64 {
        self.active.as_ref().map_or(0, |a| a.shared.ticks_per_sec.load(Ordering::Relaxed))
    }

    /// A data message put into a channel towards worker `to_worker`. One to
    /// this worker itself is worker-local: counted, not written (see
    /// [`crate::Builder::keep_local_messages`]), and the operator running
    /// now still counts as having done something.
    #[inline]
    pub fn message_send(&mut self, channel: usize, to_worker: usize, seq_no: u64, records: usize) {
        if let Some(a) = &mut self.active {
            if a.is_local(to_worker as u64) {
                return a.local_message_now();
            }
            a.event(Kind::MessageSend, seq_no, channel as u32, to_worker as u32, saturate(records));
        }
    }

    /// A data message read from a channel, sent by worker `from_worker`
    /// (worker-local if that is this worker: as for [`Self::message_send`]).
    #[inline]
    pub fn message_recv(&mut self, channel: usize, from_worker: usize, seq_no: u64, records: usize) {
        if let Some(a) = &mut self.active {
            if a.is_local(from_worker as u64) {
                return a.local_message_now();
            }
            a.event(Kind::MessageRecv, seq_no, channel as u32, from_worker as u32, saturate(records));
        }
    }

    #[inline]
    pub fn progress_send(&mut self, channel: usize, seq_no: u64) {
        if let Some(a) = &mut self.active {
            a.event(Kind::ProgressSend, seq_no, channel as u32, 0, 0);
        }
    }

    #[inline]
    pub fn progress_recv(&mut self, channel: usize, from_worker: usize, seq_no: u64) {
        if let Some(a) = &mut self.active {
            a.event(Kind::ProgressRecv, seq_no, channel as u32, from_worker as u32, 0);
        }
    }

    #[inline]
    pub fn span_start(&mut self, id: u64) {
        if let Some(a) = &mut self.active {
            a.event(Kind::SpanStart, id, 0, 0, 0);
        }
    }

    #[inline]
    pub fn span_stop(&mut self, id: u64) {
        if let Some(a) = &mut self.active {
            a.event(Kind::SpanStop, id, 0, 0, 0);
        }
    }

    /// A user mark: a point event that also keeps the enclosing schedule.
    #[inline]
    pub fn mark(&mut self, id: u64) {
        if let Some(a) = &mut self.active {
            a.event(Kind::Mark, id, 0, 0, 0);
        }
    }

    /// The worker parks (sleeps waiting for work); `hint_ticks` is how long
    /// it asked to sleep, 0 if unknown.
    #[inline]
    pub fn park(&mut self, hint_ticks: u64) {
        if let Some(a) = &mut self.active {
            a.event(Kind::Park, hint_ticks, 0, 0, 0);
        }
    }

    #[inline]
    pub fn unpark(&mut self) {
        if let Some(a) = &mut self.active {
            a.event(Kind::Unpark, 0, 0, 0, 0);
        }
    }

    /// End of one engine step. Carries the pairs elided and the ticks spent
    /// in them since the previous step.
    #[inline]
    pub fn step(&mut self) {
        if let Some(a) = &mut self.active {
            a.step();
        }
    }
}

/// `Active::local_index` when worker-local messages are written.
const KEEP_LOCAL: u64 = u64::MAX;

#[inline(always)]
fn saturate(n: usize) -> u32 {
    n.min(u32::MAX as usize) as u32
}

impl Active {
    #[inline(always)]
    fn schedule_start(&mut self, ts: u64, op: u32) {
        if self.pending {
            self.before_event(ts);
        }
        // Closing the last elided pair's spin time is the common case here
        // (idle operators come in runs), so it is done without a branch:
        // `spin_mask` is all ones exactly when one is open.
        self.spin_ticks = self.spin_ticks.wrapping_add(ts.wrapping_sub(self.spin_from) & self.spin_mask);
        self.spin_mask = 0;
        self.pending = true;
        self.dirty = true;
        self.pending_op = op;
        self.pending_ts = ts;
    }

    /// Elides the held start if `op` closes it at `ts` within the
    /// threshold; true if it did. (A stop read before its start, which an
    /// invariant TSC does not do, counts as short.)
    #[inline(always)]
    fn try_elide(&mut self, ts: u64, op: u32) -> bool {
        if self.pending && self.pending_op == op && ts.saturating_sub(self.pending_ts) < self.elide_below {
            self.pending = false;
            self.elided += 1;
            self.spin_from = self.pending_ts;
            self.spin_mask = u64::MAX;
            return true;
        }
        false
    }

    #[inline(always)]
    fn event(&mut self, kind: Kind, a: u64, b: u32, c: u32, d: u32) {
        let ts = self.clock.now();
        self.event_at(ts, kind, a, b, c, d);
    }

    #[inline(always)]
    fn event_at(&mut self, ts: u64, kind: Kind, a: u64, b: u32, c: u32, d: u32) {
        self.record_at(Record::new(kind, ts, a, b, c, d));
    }

    /// A worker-local half that is not to be written.
    #[inline(always)]
    fn is_local(&self, worker: u64) -> bool {
        worker == self.local_index
    }

    /// A worker-local message half. Not written: the activity graph has no
    /// worker-local messages (Sager §5.2, sager-notes §2.3; on one worker,
    /// program order already links the send to the read), and in a timely
    /// program they are most of the records (pagerank: 71 %). It still
    /// shows that the held schedule did something, which is all the clock
    /// is read for (`now`, only then).
    #[inline(always)]
    fn local_message(&mut self, now: impl FnOnce() -> u64) {
        if self.dirty {
            self.before_event(now());
        }
        self.local += 1;
    }

    /// [`Self::local_message`] at the clock's time, should it be needed.
    #[inline(always)]
    fn local_message_now(&mut self) {
        let clock = self.clock;
        self.local_message(|| clock.now());
    }

    /// A record made by the caller (not a schedule event nor a Step).
    #[inline(always)]
    fn record_at(&mut self, rec: Record) {
        if self.dirty {
            self.before_event(rec.ts);
        }
        self.push(rec);
    }

    /// Publishes a held schedule start (something happened inside it) and
    /// closes the spin time of the last elided pair.
    #[cold]
    #[inline(never)]
    fn before_event(&mut self, ts: u64) {
        self.spin_ticks = self.spin_ticks.wrapping_add(ts.wrapping_sub(self.spin_from) & self.spin_mask);
        self.spin_mask = 0;
        self.dirty = false;
        if self.pending {
            self.pending = false;
            self.push(Record::new(Kind::ScheduleStart, self.pending_ts, 0, self.pending_op, 0, 0));
        }
    }

    fn step(&mut self) {
        let ts = self.clock.now();
        self.step_at(ts);
    }

    fn step_at(&mut self, ts: u64) {
        if self.dirty {
            self.before_event(ts);
        }
        let (elided, spin) = (self.elided, self.spin_ticks);
        // A Step lost to a full ring leaves its counts to the next one, so
        // the elided total a reader sums stays exact.
        if self.push(Record::new(Kind::Step, ts, elided, 0, spin as u32, (spin >> 32) as u32)) {
            self.elided_total += elided;
            self.elided = 0;
            self.spin_ticks = 0;
            self.shared.elided.store(self.elided_total, Ordering::Relaxed);
        }
        self.shared.local.store(self.local, Ordering::Relaxed);
    }

    /// True if the record is in the ring.
    #[inline(always)]
    fn push(&mut self, rec: Record) -> bool {
        self.ring.push(rec) || self.full(rec)
    }

    #[cold]
    #[inline(never)]
    fn full(&mut self, rec: Record) -> bool {
        if self.block {
            let mut spins = 0u32;
            while self.shared.writer_alive.load(Ordering::Acquire) {
                if self.ring.push(rec) {
                    return true;
                }
                // Waking the writer is a syscall, allowed here: the engine
                // asked to wait rather than lose records.
                self.shared.writer.unpark();
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        self.lost += 1;
        self.shared.lost.store(self.lost, Ordering::Relaxed);
        false
    }

    fn meta(&self, m: Meta) {
        self.shared.meta.lock().unwrap_or_else(|p| p.into_inner()).push(m);
    }
}

impl Drop for WorkerProbe {
    fn drop(&mut self) {
        if let Some(a) = &mut self.active {
            if a.pending || a.elided > 0 || a.spin_mask != 0 {
                // The final step marker carries the elided count that no
                // engine step reported, so elided + published stays exact.
                a.step();
            }
            // A final Step lost to a full ring has no later one to carry its
            // count: the pairs still count as elided (the End frame's figure
            // is the total; a reader summing Steps sees the loss as lost
            // records).
            a.elided_total += std::mem::take(&mut a.elided);
            a.shared.elided.store(a.elided_total, Ordering::Relaxed);
            a.shared.local.store(a.local, Ordering::Relaxed);
            a.shared.closed.store(true, Ordering::Release);
            a.shared.writer.unpark();
        }
    }
}
