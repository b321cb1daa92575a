//! Attaches a probe to a timely dataflow worker: one line in the worker
//! closure, nothing else to change.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let probe = Arc::new(probe::Probe::builder().workers(2).start()?);
//! let p = probe.clone();
//! timely::execute(timely::Config::process(2), move |worker| {
//!     probe::timely::attach(worker, &p); // before building dataflows
//!     // ... build dataflows and step them as usual ...
//! })?
//! .join();
//! if let Ok(probe) = Arc::try_unwrap(probe) {
//!     eprintln!("{:?}", probe.shutdown()?);
//! }
//! # Ok(()) }
//! ```
//!
//! [`attach`] registers closures on the worker's log registry (the
//! `"timely"` log and the `"timely/progress/T"` logs of a fixed list of
//! common timestamp types, [`Adapter::register_common_progress`]; scopes with
//! other timestamp types need [`Adapter::register_progress`], see [`attach`])
//! and turns timely's events into the records of one probe stream
//! (`probe.worker(worker.index())`). Call it before building any dataflow:
//! timely hands its loggers to operators when they are built. With a
//! disabled probe (`PROBE_SINK` unset or `off`) it registers nothing, so
//! timely does not even build its log events.
//!
//! # What becomes what
//!
//! | timely event | probe |
//! |---|---|
//! | `Operates { id, addr, name }` | `operator(id, name, addr)` |
//! | `Channels { id, scope_addr, source, target }` | `channel(id, (src op, port), (dst op, port))`, see below |
//! | `Schedule { id, Start / Stop }` | `schedule_start` / `schedule_stop` (short inactive pairs elided by the probe) |
//! | `Messages { is_send, channel, source, target, seq_no, record_count }` | `message_send(channel, target, seq, n)` / `message_recv(channel, source, seq, n)`; with `source == target` (worker-local) counted, not written, unless the probe keeps them ([`crate::Builder::keep_local_messages`]) |
//! | progress send / receive (`timely/progress/T`) | `progress_send(channel, seq)` / `progress_recv(channel, source, seq)`; `channel` is timely's progress communication channel id (one per scope, the same on every worker) |
//! | `PushProgress { op_id }` | `Mark(MARK_PUSH_PROGRESS \| op)`, written just inside the operator's next schedule (at its start time), so a schedule that was handed progress is never elided |
//! | `Shutdown { id }` | `Mark(MARK_SHUTDOWN \| id)` (the operator or dataflow is done); the stream itself ends (its End frame) when the worker and its loggers are dropped |
//! | `Park(Some(d))` / `Park(None)` / `Unpark` | `park(d in ticks)` / `park(0)` / `unpark()` |
//! | `CommChannels`, `Text` | nothing |
//!
//! **Channels.** Timely names a channel's ends by `(index in scope, port)`
//! inside the scope at `scope_addr`. The operator at index `i > 0` is the one
//! whose `Operates` address is `scope_addr ++ [i]`; index 0 is the scope's own
//! boundary, i.e. the subgraph operator whose address is `scope_addr` (a
//! source `(0, p)` is the scope's input `p`, a target `(0, p)` its output
//! `p`). Timely logs a channel before the operators it connects, so channels
//! are held until both ends are known; a channel whose ends never appear is
//! dropped and counted in [`AdapterStats::unresolved_channels`].
//!
//! # Steps
//!
//! Timely logs no "step" event. It does flush its log at the end of every
//! `step_or_park` (the registry flush), and the `"timely"` log also right
//! before parking and right after building a dataflow. **Rule:** a Step
//! record is written at the time of each flush of the `"timely"` log that
//! follows at least one non-metadata event (from any of the attached logs)
//! since the previous Step, except the flush timely makes right before
//! parking. So each worker step that did anything ends with exactly one
//! Step, after its last event; a parked step reads `Park, Unpark, Step`;
//! steps that logged nothing (an idle worker polling) write nothing. The
//! probe fills in each Step's elided count and spin time.
//!
//! # Time
//!
//! Timely stamps an event with `Instant::elapsed()` since the worker's start
//! instant (`worker.timer()`, the log registry's epoch) when the event is
//! logged, and hands events over in batches when its log buffer fills or is
//! flushed, i.e. up to one step later. The adapter therefore never reads the
//! clock for an event: it maps timely's instant onto the probe's clock
//! (TSC ticks, or CLOCK_MONOTONIC ns) with clock *pairs*: `(Instant, probe
//! clock)` read back to back (probe clock, `Instant::now()`, probe clock; the
//! pair's clock value is the midpoint of the two probe reads and its error
//! half their distance; best of three tries). One pair `P0` is read at
//! attach, one `Pn` whenever a batch with events newer than the current `Pn`
//! is written out. An event at instant `t` maps to
//!
//! ```text
//! ts = Pn.ticks − (Pn.t − t) × (Pn.ticks − P0.ticks) / (Pn.t − P0.t)      (exact integers, Q32 slope)
//! ```
//!
//! then `ts = max(ts, previous ts)` so a worker's timestamps never decrease.
//! `P0` slides forward to a pair about one second old once the run is longer
//! than two seconds, so the slope tracks NTP slewing of CLOCK_MONOTONIC.
//!
//! **Error bound.** Every event lies between `P0` and `Pn` (events are logged
//! after attach, and `Pn` is read after they were logged), so the mapping is
//! an interpolation and its error is at most the larger of the two pairs'
//! errors (the clamp cannot make it worse), plus `(Pn.t − t) ×` the slope's
//! nonlinearity (NTP slew of CLOCK_MONOTONIC against the TSC, ≤ 500 ppm by
//! the kernel's limit, typically < 10 ppm: ≤ 50 ns for an event 10 ms old),
//! plus timely's own stamp, which is exact to the nanosecond. The pair error
//! is measured as it goes ([`AdapterStats::max_pair_error_ticks`]): 10–40 ns
//! on an idle x86 host, up to a few µs when the thread is preempted between
//! the reads of all three tries. `tests/timely_attach.rs`
//! (`mapped_times_bracket_independent_clock_reads`, and `…_monotonic` on the
//! CLOCK_MONOTONIC fallback) checks mapped schedule times against
//! independent clock reads taken inside the operator.
//! The mapping is an interpolation on CLOCK_MONOTONIC, so the probe's
//! start-up ticks-per-second estimate is not used.
//!
//! # Cost
//!
//! The adapter tells the probe what tracing costs the worker beyond the
//! probe's pushes ([`WorkerProbe::add_adapter_cost`], at each Step and at
//! the end; the probe's [`crate::Stats`] and `sidecar watch` report it):
//!
//! - its own time, measured with the probe's clock around every logger
//!   call that brings events or writes records (the probe's pushes are
//!   inside it). Of the flush calls with nothing to write, one in 64 is
//!   timed and counts for all (timing each would cost more than the call).
//!   Each timing is net of the clock reads' own cost (the least distance
//!   of two back-to-back reads, measured at attach).
//! - timely's own cost of logging for it, estimated: the events timely
//!   handed over and the flush calls it made (every registered log, at
//!   every step), each priced at what timely's `Logger` costs on this
//!   machine, measured once per process at attach (about 50 µs).
//!   A floor: building the event at timely's call site, and the cache
//!   lines all this touches, are not in it.
//!
//! Of both, the part spent in steps that did nothing (no event since the
//! last Step: an idle worker polling) is reported apart
//! ([`AdapterCost::idle_flushes`] and the rest): a worker that spins in
//! `step()` waiting for others flushes every registered log at every
//! step, millions of times a second, and spends that time instead of
//! spinning, which delays nothing. The split is made at the `"timely"`
//! log's flush that ends each step, so where a worker turns from idle to
//! busy or back, up to one step's flushes (15) fall on the wrong side.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use ::timely::logging::{
    ParkEvent, StartStop, TimelyEvent, TimelyEventBuilder, TimelyProgressEventBuilder, TimelySummaryEventBuilder,
};
use ::timely::order::Product;
use ::timely::worker::Worker;
use ringlog::Event;

use crate::{AdapterCost, Probe, WorkerProbe};

/// Tag of the Mark written for timely's `PushProgress { op_id }` (the mark
/// id is `MARK_PUSH_PROGRESS | op_id`), for its `Shutdown { id }`
/// (`MARK_SHUTDOWN | id`), and for a scope whose progress this adapter
/// cannot record (`MARK_UNTRACED_PROGRESS | id`), and where the program
/// took the `"timely"` log from it (`MARK_DETACHED`): the wire's (ringlog
/// FORMAT.md).
pub use ringlog::{MARK_DETACHED, MARK_PUSH_PROGRESS, MARK_SHUTDOWN, MARK_UNTRACED_PROGRESS};

/// What a Mark written by this adapter means: the wire's reading of its
/// tags ([`ringlog::Mark`]: [`TimelyMark::decode`] reads an id, `None` for
/// any other mark; more may come: match with a wildcard arm).
pub use ringlog::Mark as TimelyMark;

/// Registers the probe on `worker`'s loggers: the `"timely"` log and the
/// progress logs of a fixed list of timestamp types: `()`, `usize`, `u64`,
/// `u32`, `i64`, `i32`, `isize`, `Duration`, and `Product`s over `()`,
/// `u32`, `u64` and `usize` nested up to three deep (listed at
/// [`Adapter::register_common_progress`]). Call it
/// first thing in the worker closure, before building dataflows. Does
/// nothing when the probe is disabled; says so on standard error, and does
/// nothing else, when the worker has no log registry (a worker made by
/// `Worker::new(config, allocator, None)`: timely logs nothing for it).
///
/// Timely logs a scope's progress messages to a log named after its
/// timestamp type (`"timely/progress/{type_name}"`). For a scope whose type
/// is not in the list above (`Duration`, `u128`, a tuple, a deeper
/// `Product`, a type of your own) nobody listens: its progress messages are
/// not traced, and the sidecar reports the waits they end as waiting for
/// input (no visible cause) instead of naming the worker waited on.
/// Register such types yourself, in place of `attach` (calling both would
/// open a second stream for the worker):
///
/// ```no_run
/// # use timely::order::Product;
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let probe = std::sync::Arc::new(probe::Probe::builder().workers(1).start()?);
/// timely::execute(timely::Config::thread(), move |worker| {
///     if let Some(a) = probe::timely::Adapter::new(worker, &probe) {
///         a.register(worker); // what `attach` does
///         a.register_progress::<std::time::Duration>(worker);
///         a.register_progress::<Product<u64, Product<u64, u32>>>(worker);
///     }
///     // ... build dataflows ...
/// })?;
/// # Ok(()) }
/// ```
pub fn attach(worker: &Worker, probe: &Probe) {
    if let Some(a) = Adapter::new(worker, probe) {
        a.register(worker);
    } else if probe.is_enabled() {
        // (Timely keeps a log registry only for a worker given a start
        // time: `timely::execute` gives one, `Worker::new(.., None)` not.)
        eprintln!(
            "probe: worker {} keeps no log registry (built with `Worker::new(config, allocator, None)`): timely \
             logs nothing for it, so nothing of it is traced; give it a start time, \
             `Worker::new(config, allocator, Some(std::time::Instant::now()))`",
            worker.index()
        );
    }
}

/// Counters of one worker's adapter (for tests and diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdapterStats {
    /// Timely events received (all logs, metadata included).
    pub events: u64,
    /// Schedule start events received.
    pub schedule_starts: u64,
    /// Step records written.
    pub steps: u64,
    /// Clock pairs read.
    pub pairs: u64,
    /// The largest error of a clock pair used (half the distance of the two
    /// probe-clock reads around `Instant::now()`), in probe ticks.
    pub max_pair_error_ticks: u64,
    /// Timestamps raised to the previous one to keep them non-decreasing.
    pub clamped: u64,
    /// Channels whose operators never appeared (not written).
    pub unresolved_channels: u64,
}

/// The state behind [`attach`]: one per worker, shared by the closures it
/// registers. Use it directly to register on more timestamp types or to
/// share the `"timely"` log with another consumer ([`Adapter::on_timely`]).
/// The probe stream ends when the last clone is dropped (normally: when the
/// worker drops its log registry).
#[derive(Clone)]
pub struct Adapter {
    state: Rc<RefCell<State>>,
    lazy: Rc<Lazy>,
}

impl Adapter {
    /// A new adapter writing to `probe.worker(worker.index())`; `None` when
    /// the probe is disabled or the worker keeps no log registry.
    pub fn new(worker: &Worker, probe: &Probe) -> Option<Adapter> {
        if !probe.is_enabled() {
            return None;
        }
        let epoch = worker.timer()?;
        worker.log_register()?;
        let w = probe.worker(worker.index());
        let w_keeps_local = w.keeps_local_messages();
        let p0 = read_pair(&w, epoch);
        let read_ticks = (0..64)
            .map(|_| {
                let a = w.clock_now();
                w.clock_now().saturating_sub(a)
            })
            .min()
            .unwrap_or(0);
        let stats = AdapterStats { pairs: 1, max_pair_error_ticks: p0.err, ..AdapterStats::default() };
        let state = State {
            w,
            epoch,
            p0,
            candidate: p0,
            pn: p0,
            slope_q32: 0,
            last_ts: 0,
            frontiers: Vec::new(),
            live: Vec::new(),
            pending: Vec::new(),
            pending_len: 0,
            activity: false,
            src0_parked: false,
            drop_local: !w_keeps_local,
            detached: false,
            after_start: false,
            local_uncounted: 0,
            push_pending: None,
            addr_to_id: HashMap::new(),
            channels: Vec::new(),
            stats,
            flush_calls: 0,
            flushes_reported: 0,
            step_flushes: StepFlushes::default(),
            cost: Unreported::default(),
            engine_ps: engine_cost(),
            read_ticks,
            #[cfg(feature = "differential")]
            arrangements: Default::default(),
        };
        Some(Adapter { state: Rc::new(RefCell::new(state)), lazy: Rc::default() })
    }

    /// Registers on the `"timely"` log and on the progress logs of the
    /// timestamp types scopes use ([`Adapter::register_common_progress`]).
    /// Replaces any logger already bound to those names (saying so on
    /// standard error for `"timely"`: that logger receives nothing more; to
    /// keep it, bind it with [`Adapter::register_with`] instead).
    ///
    /// A program that binds its own logger to `"timely"` after this, before
    /// its first dataflow (where a program sets up its logging), takes the
    /// log from the adapter: the adapter says so on standard error and ends
    /// the worker's stream with a Mark ([`MARK_DETACHED`]) that the sidecar
    /// reports, instead of leaving a stream that stops without a word.
    pub fn register(&self, worker: &Worker) {
        self.bind_timely(worker, None::<fn(&Duration, &mut Option<Vec<(Duration, TimelyEvent)>>)>);
        self.register_common_progress(worker);
    }

    /// [`Adapter::register`], sharing the `"timely"` log with the program's
    /// own logger: `action` sees each batch (and each flush) first, then
    /// the adapter takes the events. Leave the batch in place (read it, do
    /// not drain it). This is how to keep a logger of your own on
    /// `"timely"` together with the probe: timely binds one logger to a
    /// name, and a second binding replaces the first.
    pub fn register_with<F>(&self, worker: &Worker, action: F)
    where
        F: FnMut(&Duration, &mut Option<Vec<(Duration, TimelyEvent)>>) + 'static,
    {
        self.bind_timely(worker, Some(action));
        self.register_common_progress(worker);
    }

    /// Binds the adapter (after `action`, if any) to the `"timely"` log.
    fn bind_timely<F>(&self, worker: &Worker, mut action: Option<F>)
    where
        F: FnMut(&Duration, &mut Option<Vec<(Duration, TimelyEvent)>>) + 'static,
    {
        let Some(mut reg) = worker.log_register() else { return };
        let binding = TimelyBinding(self.clone());
        let before = reg.insert::<TimelyEventBuilder, _>("timely", move |time, data| {
            if let Some(a) = action.as_mut() {
                a(time, data);
            }
            binding.0.on_timely(time, data)
        });
        if before.is_some() {
            eprintln!(
                "probe: worker {}: a logger was bound to timely's `timely` log before the probe's, which replaced it: \
                 that logger receives nothing more. To keep both, bind yours with \
                 `probe::timely::Adapter::register_with` (see docs/timely.md)",
                worker.index()
            );
        }
        // (A binding of an earlier adapter is dropped here, and takes the
        // handle below if it was set: so it is set after.)
        drop(before);
        // Until the first dataflow is built (`prune`): while it is held, the
        // registry is alive, so a drop of the binding is the program's own
        // logger taking its place.
        PRUNER.with(|p| *p.borrow_mut() = Some(worker.clone()));
    }

    /// The logger bound to `"timely"` by [`Adapter::register`] was dropped.
    /// While the adapter learns the scopes' types, this thread's `PRUNER`
    /// holds a handle on the worker, so its log registry is alive: the
    /// program bound another logger to the name (or removed it), and the
    /// adapter receives nothing more of this worker. Otherwise the registry
    /// was dropped with the worker: the normal end. (A logger bound in the
    /// adapter's place after the first dataflow is not told apart: the
    /// dataflows built before keep the adapter's logger, and their events
    /// keep coming, until they end.)
    fn timely_binding_dropped(&self) {
        // (`try_with`: during the thread's exit `PRUNER` may be gone, or be
        // dropping the worker that held this logger.)
        let Ok(Some(worker)) = PRUNER.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.take())) else {
            return;
        };
        let index = worker.index();
        // The prune cannot come (it waits for this log's flush): without
        // this handle the worker's registry, and with it the adapter, is
        // dropped when the worker ends, which ends the stream.
        drop(worker);
        self.lazy.learning.set(false);
        let mut s = self.state.borrow_mut();
        s.detached = true;
        let now = s.epoch.elapsed();
        // (Everything queued goes out now, the mark last; nothing is read
        // after it, so no log's frontier matters any more.)
        s.push(0, now, Ev::Detached);
        s.write_until(Duration::MAX);
        drop(s);
        eprintln!(
            "probe: worker {index}: the program bound its own logger to timely's `timely` log, replacing the \
             probe's: this worker is not traced from here on (its stream ends with a mark saying so). To keep \
             both, bind yours with `probe::timely::Adapter::register_with` instead (see docs/timely.md)"
        );
    }

    /// Registers on the progress logs of the timestamp types timely and
    /// differential programs use: `()`, `usize`, `u64`, `u32`, `i64`,
    /// `i32`, `isize`, `Duration`, and `Product<A, B>` nested to the left
    /// (as `iterative` and differential's `iterate` nest scopes) over `A` in
    /// `()`, `u32`, `u64`, `usize` with `B` in `u32`, `u64`, `usize`: every
    /// such type up to three `Product`s deep, 156 of them, and with the
    /// `differential` feature `Product<A, PointStamp<B>>` for the same `A`
    /// and `B` (differential's dynamic scopes; the list:
    /// [`common_progress_names`]).
    ///
    /// A log no scope uses still costs a flush call at every worker step,
    /// which a worker that spins in `step()` pays millions of times a
    /// second. So the adapter learns which of these types the scopes use
    /// and keeps only those: with each progress log it registers the
    /// type's `"timely/summary/T"` log, which timely writes to while it
    /// builds a scope of type `T` (one event per operator in it). Right
    /// after the first dataflow is built (timely flushes the `"timely"` log
    /// there, outside any borrow of its log registry, so the adapter may
    /// change the registry), it reads those events, removes every summary
    /// log, and removes the progress logs of the types no scope used,
    /// keeping one level of nesting more of the used ones (`Product<U, B>`
    /// for a used `U`: an `iterate` in a dataflow built later). A scope of a
    /// type outside the list is named on standard error, once per name:
    /// register its type with [`Adapter::register_progress`]. See
    /// docs/timely.md.
    ///
    /// `PROBE_TIMELY_PROGRESS` replaces all this with a fixed list:
    /// comma-separated names as [`common_progress_names`] gives them
    /// (`u64`, `Product<u64,u32>`; spaces ignored; empty: none), nothing
    /// learnt, nothing removed. An unknown name is reported on standard
    /// error, once, and then the types are learnt as without the variable.
    pub fn register_common_progress(&self, worker: &Worker) {
        let chosen = match progress_selection(std::env::var("PROBE_TIMELY_PROGRESS").ok().as_deref()) {
            Ok(c) => c,
            Err(e) => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| eprintln!("probe: {e}; learning the types the scopes use instead"));
                None
            }
        };
        let candidates = candidates();
        match chosen {
            Some(chosen) => {
                for (c, on) in candidates.iter().zip(chosen) {
                    if on {
                        (c.register)(self, worker, false);
                    }
                }
            }
            None => {
                self.lazy.learning.set(true);
                for c in &candidates {
                    (c.register)(self, worker, true);
                }
                // (Released when the adapter prunes, at the first dataflow
                // built; see `Lazy`.)
                PRUNER.with(|p| *p.borrow_mut() = Some(worker.clone()));
            }
        }
    }

    /// Registers on the progress log of scopes with timestamp `T`
    /// (`"timely/progress/{type_name::<T>()}"`). Call it before building
    /// the dataflows that have such scopes.
    pub fn register_progress<T: ::timely::progress::Timestamp>(&self, worker: &Worker) {
        self.register_progress_of::<T>(worker, false);
    }

    /// [`Self::register_progress`]; a `candidate` of the common list may be
    /// removed again once the scopes' types are known.
    fn register_progress_of<T: ::timely::progress::Timestamp>(&self, worker: &Worker, candidate: bool) {
        let Some(mut reg) = worker.log_register() else { return };
        let src = self.state.borrow_mut().new_source();
        let me = self.clone();
        let full = std::any::type_name::<T>();
        let progress_log = format!("timely/progress/{full}");
        reg.insert::<TimelyProgressEventBuilder<T>, _>(&progress_log, move |time, data| {
            let mut s = me.state.borrow_mut();
            if s.detached {
                return;
            }
            let mut timing = s.work_starts(data.as_ref().map(Vec::len));
            if let Some(batch) = data {
                for (d, ev) in batch.drain(..) {
                    s.stats.events += 1;
                    s.activity = true;
                    let e = if ev.is_send {
                        Ev::PSend { channel: ev.channel as u32, seq: ev.seq_no as u64 }
                    } else {
                        Ev::PRecv { channel: ev.channel as u32, from: ev.source as u32, seq: ev.seq_no as u64 }
                    };
                    s.push(src, d, e);
                }
            }
            s.advance(src, *time, &mut timing);
            s.work_ends(timing);
        });
        if !self.lazy.learning.get() {
            return;
        }
        // The type's summary log: which scopes have this type.
        let summary_log = format!("timely/summary/{full}");
        let mut regs = self.lazy.regs.borrow_mut();
        let i = regs.len();
        let seen = self.lazy.clone();
        reg.insert::<TimelySummaryEventBuilder<<T as ::timely::progress::Timestamp>::Summary>, _>(
            &summary_log,
            move |_, data| {
                if let Some(batch) = data {
                    seen.seen.borrow_mut().extend(batch.drain(..).map(|(_, e)| (i, e.id)));
                }
            },
        );
        regs.push(Registration { name: short_type_name(full), progress_log, summary_log, src, candidate });
    }

    /// Registers on differential's `"differential/arrange"` log: each event
    /// becomes the Arrangement records of the levels it changed (see
    /// [`crate::differential`]). [`crate::differential::attach`] calls it.
    #[cfg(feature = "differential")]
    pub fn register_differential(&self, worker: &Worker) {
        use differential_dataflow::logging::DifferentialEventBuilder;
        let Some(mut reg) = worker.log_register() else { return };
        let src = self.state.borrow_mut().new_source();
        let me = self.clone();
        reg.insert::<DifferentialEventBuilder, _>("differential/arrange", move |time, data| {
            let mut s = me.state.borrow_mut();
            if s.detached {
                return;
            }
            let mut timing = s.work_starts(data.as_ref().map(Vec::len));
            if let Some(batch) = data {
                let s = &mut *s;
                for (d, ev) in batch.drain(..) {
                    s.stats.events += 1;
                    s.activity = true;
                    let (pending, len) = (&mut s.pending[src], &mut s.pending_len);
                    s.arrangements.apply(&ev, |op, figure, value| {
                        pending.push_back((d, Ev::Arrange { op, figure: figure as u32, value }));
                        *len += 1;
                    });
                }
            }
            s.advance(src, *time, &mut timing);
            s.work_ends(timing);
        });
    }

    /// Handles one call of the `"timely"` log's action: a batch of events
    /// (`Some`) or a flush (`None`); it takes the batch's events.
    /// [`Adapter::register`] and [`Adapter::register_with`] bind it (the
    /// latter after your own action: the way to share the log). A program
    /// that binds its own action instead and calls this from it must not
    /// call `register` first: replacing the adapter's binding before the
    /// first dataflow detaches the adapter (see [`Adapter::register`]).
    pub fn on_timely(&self, time: &Duration, data: &mut Option<Vec<(Duration, TimelyEvent)>>) {
        let mut s = self.state.borrow_mut();
        if s.detached {
            return;
        }
        if s.frontiers.is_empty() {
            s.new_source();
        }
        let mut timing = s.work_starts(data.as_ref().map(Vec::len));
        let mut safe_point = false;
        match data {
            Some(batch) => {
                let mut operators = false;
                for (d, ev) in batch.drain(..) {
                    s.stats.events += 1;
                    s.src0_parked = false;
                    let e = match ev {
                        TimelyEvent::Schedule(e) => match e.start_stop {
                            StartStop::Start => {
                                s.stats.schedule_starts += 1;
                                Ev::Start(e.id as u32)
                            }
                            StartStop::Stop => Ev::Stop(e.id as u32),
                        },
                        // Worker-local, and the probe does not write it
                        // (`Builder::keep_local_messages`): only the first
                        // of an execution is queued, for the probe to
                        // publish its start; the rest are only counted.
                        TimelyEvent::Messages(m) if m.source == m.target && s.drop_local && !s.after_start => {
                            s.local_uncounted += 1;
                            continue;
                        }
                        TimelyEvent::Messages(m) => {
                            let records = m.record_count.clamp(0, u32::MAX as i64) as u32;
                            if m.is_send {
                                Ev::Send {
                                    channel: m.channel as u32,
                                    to: m.target as u32,
                                    seq: m.seq_no as u64,
                                    records,
                                }
                            } else {
                                Ev::Recv {
                                    channel: m.channel as u32,
                                    from: m.source as u32,
                                    seq: m.seq_no as u64,
                                    records,
                                }
                            }
                        }
                        TimelyEvent::PushProgress(p) => Ev::Push(p.op_id as u32),
                        TimelyEvent::Shutdown(e) => Ev::Shutdown(e.id as u32),
                        TimelyEvent::Park(ParkEvent::Park(hint)) => {
                            s.src0_parked = true;
                            Ev::Park(hint)
                        }
                        TimelyEvent::Park(ParkEvent::Unpark) => Ev::Unpark,
                        TimelyEvent::Operates(o) => {
                            s.w.operator(o.id, &o.name, &o.addr);
                            // A dataflow's own Operates: timely logs it once
                            // the dataflow is built, and flushes.
                            safe_point |= o.addr.len() == 1;
                            if self.lazy.learning.get() {
                                self.lazy.operators.borrow_mut().push((o.id, o.addr.clone(), o.name.clone()));
                            }
                            s.addr_to_id.insert(o.addr, o.id);
                            operators = true;
                            continue;
                        }
                        TimelyEvent::Channels(c) => {
                            s.channels.push((c.id, c.scope_addr, c.source, c.target));
                            operators = true;
                            continue;
                        }
                        TimelyEvent::CommChannels(_) | TimelyEvent::Text(_) => continue,
                    };
                    s.activity = true;
                    s.after_start = matches!(e, Ev::Start(_));
                    s.push(0, d, e);
                }
                if operators {
                    s.resolve_channels();
                }
            }
            None => {
                if s.src0_parked {
                    // The flush right before parking. Timely flushes only
                    // this log there; the progress logs were flushed at the
                    // end of the previous step, and progress is logged only
                    // while a step schedules dataflows (never in a step that
                    // parks), so they log nothing before the worker wakes:
                    // everything up to the Park goes out now, not when the
                    // worker wakes up (maybe seconds later, after a live
                    // reader closed those windows).
                    let t = *time;
                    for f in s.frontiers.iter_mut() {
                        *f = (*f).max(t);
                    }
                } else if s.activity {
                    s.activity = false;
                    s.step_ends(false);
                    s.push(0, *time, Ev::Step);
                } else {
                    s.step_ends(true);
                }
            }
        }
        s.advance(0, *time, &mut timing);
        s.work_ends(timing);
        drop(s);
        if safe_point {
            self.prune(*time);
        }
    }

    /// Keeps the progress logs of the types the scopes built so far use
    /// (and one level of nesting more), removes the rest and every summary
    /// log, and names the scopes of types outside the list. Called where
    /// timely does not hold its log registry: right after it built a
    /// dataflow, at `time`, where each such scope gets a Mark
    /// ([`MARK_UNTRACED_PROGRESS`]) so that a reader of the stream knows
    /// too. Once.
    fn prune(&self, time: Duration) {
        let Some(worker) = PRUNER.with(|p| p.borrow_mut().take()) else { return };
        if !self.lazy.learning.replace(false) {
            // A fixed list: nothing to learn. The handle was kept to tell a
            // program's own `"timely"` logger (`timely_binding_dropped`).
            return;
        }
        let regs = std::mem::take(&mut *self.lazy.regs.borrow_mut());
        let Some(mut reg) = worker.log_register() else { return };
        // Removing a summary log drops its logger (no scope keeps one),
        // which flushes the events of the scopes just built into `seen`.
        for r in &regs {
            drop(reg.remove(&r.summary_log));
        }
        let seen = std::mem::take(&mut *self.lazy.seen.borrow_mut());
        let used: std::collections::BTreeSet<&str> = seen.iter().map(|(i, _)| regs[*i].name.as_str()).collect();
        let nested =
            |n: &str| used.iter().any(|u| ["u32", "u64", "usize"].iter().any(|b| n == format!("Product<{u},{b}>")));
        let mut closed = Vec::new();
        for r in regs.iter().filter(|r| r.candidate && !used.contains(r.name.as_str()) && !nested(&r.name)) {
            // (Dropping the logger flushes it into the adapter one last
            // time; the adapter's state is not borrowed here.)
            drop(reg.remove(&r.progress_log));
            closed.push(r.src);
        }
        drop(reg);
        drop(worker);
        let mut s = self.state.borrow_mut();
        for src in closed {
            // That log will say nothing more: it no longer holds back the
            // others.
            s.frontiers[src] = Duration::MAX;
        }
        s.retire_closed();
        let untraced = untraced_scopes(&self.lazy, &seen);
        for &op in &untraced {
            s.push(0, time, Ev::Untraced(op));
        }
        let mut timing = None;
        s.advance(0, time, &mut timing);
        s.work_ends(timing);
        drop(s);
    }

    /// A snapshot of this adapter's counters.
    pub fn stats(&self) -> AdapterStats {
        let s = self.state.borrow();
        AdapterStats { unresolved_channels: s.channels.len() as u64, ..s.stats }
    }
}

/// Held by the logger [`Adapter::register`] binds to `"timely"`: when
/// timely drops that logger, the adapter learns it
/// ([`Adapter::timely_binding_dropped`]).
struct TimelyBinding(Adapter);

impl Drop for TimelyBinding {
    fn drop(&mut self) {
        self.0.timely_binding_dropped();
    }
}

/// What [`Adapter::register_common_progress`] learns from (see there).
#[derive(Default)]
struct Lazy {
    /// Until the first dataflow is built: summary logs are registered with
    /// the progress logs, and the scopes' operators noted.
    learning: std::cell::Cell<bool>,
    /// The progress logs registered while learning.
    regs: RefCell<Vec<Registration>>,
    /// (registration, operator id) of each summary event: the operator is
    /// in a scope of that registration's type.
    seen: RefCell<Vec<(usize, usize)>>,
    /// (id, address, name) of the operators built while learning.
    operators: RefCell<Vec<(usize, Vec<usize>, String)>>,
}

/// One progress log registered while learning.
struct Registration {
    /// As `PROBE_TIMELY_PROGRESS` names it (`Product<u64,u32>`).
    name: String,
    progress_log: String,
    summary_log: String,
    /// The adapter's source for it.
    src: usize,
    /// From the common list (removed if unused), not registered by hand.
    candidate: bool,
}

thread_local! {
    /// The worker whose registry the adapter prunes, from `register` to the
    /// first dataflow built (and which tells a program's own `"timely"`
    /// logger bound meanwhile: `timely_binding_dropped`). Not in the
    /// adapter's state: the registry holds the adapter, and a worker held
    /// there would hold the registry, and neither would ever be dropped
    /// (nor the stream end). Here it goes at the prune, or with the thread.
    static PRUNER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// A timestamp type of the common list: its name and its registration.
struct Candidate {
    name: String,
    register: fn(&Adapter, &Worker, bool),
}

fn candidate<T: ::timely::progress::Timestamp>() -> Candidate {
    Candidate {
        name: short_type_name(std::any::type_name::<T>()),
        register: |a, w, c| a.register_progress_of::<T>(w, c),
    }
}

/// `timely::order::product::Product<u64, u32>` → `Product<u64,u32>`,
/// `core::time::Duration` → `Duration`.
fn short_type_name(full: &str) -> String {
    full.replace("timely::order::product::", "")
        .replace("timely::order::", "")
        .replace("differential_dataflow::dynamic::pointstamp::", "")
        .replace("core::time::", "")
        .replace(' ', "")
}

/// The common list (see [`Adapter::register_common_progress`]): the plain
/// types, then over each of `()`, `u32`, `u64` and `usize` every `Product`
/// nested to the left up to three deep with `u32`, `u64` or `usize` inside.
/// (`iterate` nests `u64`, timely's `iterative` what the program asks, and
/// differential's graph algorithms `usize` inside each other: its `scc`
/// over a `u32` dataflow builds `Product<Product<u32,usize>,usize>`; a
/// dataflow over `()` is an `iterate` over nothing else.)
fn candidates() -> Vec<Candidate> {
    let mut out = vec![
        candidate::<()>(),
        candidate::<usize>(),
        candidate::<u64>(),
        candidate::<u32>(),
        candidate::<i64>(),
        candidate::<i32>(),
        candidate::<isize>(),
        candidate::<std::time::Duration>(),
    ];
    nested_up_to_3::<()>(&mut out);
    nested_up_to_3::<u32>(&mut out);
    nested_up_to_3::<u64>(&mut out);
    nested_up_to_3::<usize>(&mut out);
    #[cfg(feature = "differential")]
    {
        dynamic_scopes::<()>(&mut out);
        dynamic_scopes::<u32>(&mut out);
        dynamic_scopes::<u64>(&mut out);
        dynamic_scopes::<usize>(&mut out);
    }
    out
}

/// `Product<U, PointStamp<B>>` for each inner `B` of the common list:
/// differential's dynamic scopes (`dynamic::feedback_summary`; its
/// `dynamic` example builds `iterative::<PointStamp<usize>>` in a `u32`
/// dataflow).
#[cfg(feature = "differential")]
fn dynamic_scopes<U: ::timely::progress::Timestamp>(out: &mut Vec<Candidate>) {
    use differential_dataflow::dynamic::pointstamp::PointStamp;
    out.push(candidate::<Product<U, PointStamp<u32>>>());
    out.push(candidate::<Product<U, PointStamp<u64>>>());
    out.push(candidate::<Product<U, PointStamp<usize>>>());
}

/// `Product<U, B>` for each inner `B` of the common list.
fn nested_1<U: ::timely::progress::Timestamp>(out: &mut Vec<Candidate>) {
    out.push(candidate::<Product<U, u32>>());
    out.push(candidate::<Product<U, u64>>());
    out.push(candidate::<Product<U, usize>>());
}

/// [`nested_1`], and each of those nested once more.
fn nested_up_to_2<U: ::timely::progress::Timestamp>(out: &mut Vec<Candidate>) {
    nested_1::<U>(out);
    nested_1::<Product<U, u32>>(out);
    nested_1::<Product<U, u64>>(out);
    nested_1::<Product<U, usize>>(out);
}

/// [`nested_1`], and each of those nested up to twice more.
fn nested_up_to_3<U: ::timely::progress::Timestamp>(out: &mut Vec<Candidate>) {
    nested_1::<U>(out);
    nested_up_to_2::<Product<U, u32>>(out);
    nested_up_to_2::<Product<U, u64>>(out);
    nested_up_to_2::<Product<U, usize>>(out);
}

/// The names `PROBE_TIMELY_PROGRESS` takes, in the order
/// [`Adapter::register_common_progress`] registers their types.
pub fn common_progress_names() -> impl Iterator<Item = String> {
    candidates().into_iter().map(|c| c.name)
}

/// Which of [`candidates`] to register: `None` without a list (learn them);
/// else the ones it names (comma-separated outside `<>`, spaces ignored,
/// empty entries skipped).
fn progress_selection(list: Option<&str>) -> Result<Option<Vec<bool>>, String> {
    let Some(list) = list else { return Ok(None) };
    let names: Vec<String> = common_progress_names().collect();
    let mut chosen = vec![false; names.len()];
    // Commas inside `Product<A, B>` do not separate.
    let mut depth = 0i32;
    let entries = list.split(|c: char| {
        depth += match c {
            '<' => 1,
            '>' => -1,
            _ => 0,
        };
        c == ',' && depth == 0
    });
    for name in entries {
        let name: String = name.chars().filter(|c| !c.is_whitespace()).collect();
        if name.is_empty() {
            continue;
        }
        match names.iter().position(|k| *k == name) {
            Some(i) => chosen[i] = true,
            None => {
                // (The Products are too many to list: 156.)
                let plain: Vec<&str> =
                    names.iter().map(String::as_str).filter(|n| !n.starts_with("Product<")).collect();
                return Err(format!(
                    "PROBE_TIMELY_PROGRESS: {name:?} is not one of {}, or a Product nested to the left up to three \
                     deep over (), u32, u64 or usize with u32, u64 or usize inside (e.g. Product<u64,u32>, \
                     Product<Product<u32,usize>,usize>){}",
                    plain.join(", "),
                    if cfg!(feature = "differential") {
                        ", or Product<A,PointStamp<B>> with A and B as there (differential's dynamic scopes)"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    Ok(Some(chosen))
}

/// The scopes built while learning whose timestamp type has no progress
/// log registered (no summary log saw an operator in them), as their
/// operators' ids; each named on standard error, once per scope name in the
/// process.
fn untraced_scopes(lazy: &Lazy, seen: &[(usize, usize)]) -> Vec<u32> {
    use std::collections::BTreeSet;
    let ops = std::mem::take(&mut *lazy.operators.borrow_mut());
    let addr_of: HashMap<usize, &[usize]> = ops.iter().map(|(id, a, _)| (*id, a.as_slice())).collect();
    let name_at: HashMap<&[usize], &str> = ops.iter().map(|(_, a, n)| (a.as_slice(), n.as_str())).collect();
    let id_at: HashMap<&[usize], usize> = ops.iter().map(|(id, a, _)| (a.as_slice(), *id)).collect();
    let parent = |a: &[usize]| a.len().checked_sub(1).map(|n| a[..n].to_vec());
    // A scope: an operator with operators inside it.
    let scopes: BTreeSet<Vec<usize>> =
        ops.iter().filter_map(|(_, a, _)| parent(a)).filter(|p| name_at.contains_key(p.as_slice())).collect();
    let known: BTreeSet<Vec<usize>> =
        seen.iter().filter_map(|(_, id)| addr_of.get(id).and_then(|a| parent(a))).collect();
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut untraced = Vec::new();
    for scope in scopes.difference(&known) {
        let name = name_at[scope.as_slice()];
        untraced.push(id_at[scope.as_slice()] as u32);
        let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
        if warned.iter().any(|n| n == name) {
            continue;
        }
        warned.push(name.to_string());
        eprintln!(
            "probe: the scope `{name}` (address {scope:?}) has a timestamp type the probe does not listen to: its \
             progress messages are not traced (the waits they end read as waiting for input). Register its type \
             before building dataflows: `probe::timely::Adapter::register_progress::<T>(worker)`, T the scope's \
             timestamp type (see docs/timely.md)"
        );
    }
    untraced
}

/// Timely's own cost of logging, per event and per flush call of a logger,
/// in picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct EngineCost {
    per_event: u64,
    per_flush: u64,
}

/// Measures timely's cost of logging an event and of a flush call on this
/// machine, once per process: a `timely_logging::Logger` of the `"timely"`
/// log's type, as timely builds them, logs `Schedule` events (the most
/// common kind, and as cheap to build as `Messages`) into an action that
/// drops them, and is flushed with nothing buffered (the progress logs no
/// scope uses, at every worker step). Best of three rounds, timed with
/// `Instant` (the probe's tick rate is not calibrated yet at attach). It
/// costs about 50 µs, once.
///
/// This is what timely spends inside its `log` call: reading its clock
/// (`Instant::elapsed`), moving the event into its buffer, and handing full
/// buffers over. The building of the event at timely's call site, and the
/// cache lines all this touches, are not in it, so the figure is a floor.
fn engine_cost() -> EngineCost {
    static COST: std::sync::OnceLock<EngineCost> = std::sync::OnceLock::new();
    *COST.get_or_init(|| {
        use ::timely::logging::ScheduleEvent;
        const EVENTS: u64 = 512;
        const FLUSHES: u64 = 128;
        let logger = ::timely::logging_core::Logger::<TimelyEventBuilder>::new(
            Instant::now(),
            Duration::ZERO,
            |_: &Duration, data: &mut Option<Vec<(Duration, TimelyEvent)>>| {
                if let Some(v) = data {
                    v.clear();
                }
            },
        );
        let mut best = EngineCost { per_event: u64::MAX, per_flush: u64::MAX };
        for _ in 0..3 {
            let t = Instant::now();
            for i in 0..EVENTS as usize {
                let e = if i % 2 == 0 { ScheduleEvent::start(i) } else { ScheduleEvent::stop(i) };
                logger.log(TimelyEvent::Schedule(std::hint::black_box(e)));
            }
            logger.flush();
            let per_event = nanos(t.elapsed()) * 1000 / EVENTS;
            let t = Instant::now();
            for _ in 0..FLUSHES {
                logger.flush();
            }
            let per_flush = nanos(t.elapsed()) * 1000 / FLUSHES;
            best.per_event = best.per_event.min(per_event);
            best.per_flush = best.per_flush.min(per_flush);
        }
        best
    })
}

/// An instant of timely's clock and the probe's clock read back to back.
#[derive(Clone, Copy, Debug)]
struct Pair {
    /// Nanoseconds since timely's epoch.
    t: u64,
    ticks: u64,
    /// Half the distance of the two probe-clock reads, in ticks.
    err: u64,
}

fn read_pair(w: &WorkerProbe, epoch: Instant) -> Pair {
    let mut best: Option<Pair> = None;
    for _ in 0..3 {
        let a = w.clock_now();
        let i = Instant::now();
        let b = w.clock_now();
        let win = b.saturating_sub(a);
        let p = Pair { t: nanos(i.saturating_duration_since(epoch)), ticks: a + win / 2, err: win.div_ceil(2) };
        if best.is_none_or(|q| p.err < q.err) {
            best = Some(p);
        }
    }
    best.expect("three tries")
}

fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

#[derive(Clone, Copy, Debug)]
enum Ev {
    Start(u32),
    Stop(u32),
    Send {
        channel: u32,
        to: u32,
        seq: u64,
        records: u32,
    },
    Recv {
        channel: u32,
        from: u32,
        seq: u64,
        records: u32,
    },
    PSend {
        channel: u32,
        seq: u64,
    },
    PRecv {
        channel: u32,
        from: u32,
        seq: u64,
    },
    Push(u32),
    Shutdown(u32),
    Untraced(u32),
    /// The program took the `"timely"` log: nothing follows.
    Detached,
    Park(Option<Duration>),
    Unpark,
    Step,
    /// (Made only by the `differential` feature's arrangement log.)
    #[cfg_attr(not(feature = "differential"), allow(dead_code))]
    Arrange {
        op: u32,
        figure: u32,
        value: u64,
    },
}

type PendingChannel = (usize, Vec<usize>, (usize, usize), (usize, usize));

struct State {
    w: WorkerProbe,
    /// Timely's logging epoch (`worker.timer()`).
    epoch: Instant,
    /// The older end of the interpolation, and the pair that replaces it.
    p0: Pair,
    candidate: Pair,
    /// The newest pair.
    pn: Pair,
    /// Probe ticks per nanosecond between `p0` and `pn`, Q32.32.
    slope_q32: u128,
    last_ts: u64,
    /// Per attached log: a lower bound on the time of its next event
    /// (`Duration::MAX`: the log is closed).
    frontiers: Vec<Duration>,
    /// The logs that still count: open, or closed with events not yet
    /// written. Only these are read at each call: a worker registers up to
    /// 328 logs while it learns the scopes' types and keeps a few, and
    /// reading every log's frontier and queue at each of its calls cost
    /// more than everything else the adapter does (on timely's `barrier`
    /// example, a call per log per step).
    live: Vec<usize>,
    /// Events not yet written, per attached log (each log's events come in
    /// time order; they are merged when written).
    pending: Vec<VecDeque<(Duration, Ev)>>,
    pending_len: usize,
    /// The program took the `"timely"` log from the adapter (see
    /// [`Adapter::timely_binding_dropped`]): nothing more is written.
    detached: bool,
    /// A non-metadata event arrived since the last Step.
    activity: bool,
    /// The `"timely"` log's last event was a Park (its next flush is the
    /// one before parking).
    src0_parked: bool,
    /// Worker-local message halves are dropped here, before they are queued
    /// (the probe does not keep them).
    drop_local: bool,
    /// The last event queued from the `"timely"` log was a schedule start:
    /// a worker-local half now is the first thing its execution did, and
    /// is queued.
    after_start: bool,
    /// Worker-local halves dropped and not yet counted by the probe.
    local_uncounted: u64,
    /// A PushProgress waiting for its operator's schedule start.
    push_pending: Option<u32>,
    addr_to_id: HashMap<Vec<usize>, usize>,
    channels: Vec<PendingChannel>,
    stats: AdapterStats,
    /// Flush calls so far (picks the one in `FLUSH_SAMPLE` that is timed;
    /// the counts reported and booked are marks on it).
    flush_calls: u64,
    /// `flush_calls` when the cost was last handed to the probe.
    flushes_reported: u64,
    /// Flush calls not yet booked as in an idle step or not.
    step_flushes: StepFlushes,
    /// What this adapter cost since it last told the probe
    /// ([`WorkerProbe::add_adapter_cost`]; at each Step and at the end).
    cost: Unreported,
    /// Timely's own cost per event and per flush call, in picoseconds
    /// ([`engine_cost`]).
    engine_ps: EngineCost,
    /// The least distance of two back-to-back probe clock reads, in ticks.
    read_ticks: u64,
    /// Differential's arrangements: the levels their events add up to.
    #[cfg(feature = "differential")]
    arrangements: crate::differential::Arrangements,
}

/// One in this many flush calls with nothing to write is timed, and counts
/// for all of them.
const FLUSH_SAMPLE: u64 = 64;

/// A logger call being timed: from `t0`, counting `scale` times.
#[derive(Clone, Copy)]
struct Timing {
    t0: u64,
    scale: u64,
}

/// The adapter's cost not yet handed to the probe.
#[derive(Default)]
struct Unreported {
    ticks: u64,
    events: u64,
    /// The parts of `ticks` and of the flush calls in worker steps that
    /// did nothing.
    idle_ticks: u64,
    idle_flushes: u64,
}

/// Where the flush calls since the last flush of the `"timely"` log that
/// ended a step begin (`State::flush_calls` then), and the sampled time of
/// those with nothing to write: booked as idle
/// or not when the next one ends (timely flushes its logs in the order of
/// its registry's map, so some of a step's flush calls come before the
/// `"timely"` log's and some after; the split is off by at most one
/// step's flushes wherever a worker turns from idle to busy or back).
#[derive(Default)]
struct StepFlushes {
    since: u64,
    sampled_ticks: u64,
}

impl State {
    /// A new log source; the `"timely"` log is always source 0.
    fn new_source(&mut self) -> usize {
        if self.frontiers.is_empty() {
            self.frontiers.push(Duration::ZERO);
            self.pending.push(VecDeque::new());
            self.live.push(0);
        }
        self.frontiers.push(Duration::ZERO);
        self.pending.push(VecDeque::new());
        self.live.push(self.frontiers.len() - 1);
        self.frontiers.len() - 1
    }

    /// Forgets the closed logs with nothing left to write.
    fn retire_closed(&mut self) {
        let (f, p) = (&self.frontiers, &self.pending);
        self.live.retain(|&i| f[i] != Duration::MAX || !p[i].is_empty());
    }

    fn push(&mut self, src: usize, d: Duration, e: Ev) {
        self.pending[src].push_back((d, e));
        self.pending_len += 1;
    }

    /// A logger call begins: counts it, and reads the clock if it brings
    /// events (`Some(len)`). Flushes are mostly of progress logs no scope
    /// uses, and two clock reads would cost more than such a call does: one
    /// in `FLUSH_SAMPLE` is timed and counts for them all, and any flush is
    /// timed exactly from the moment it has something to write
    /// ([`Self::advance`]).
    fn work_starts(&mut self, batch: Option<usize>) -> Option<Timing> {
        match batch {
            Some(n) => {
                self.cost.events += n as u64;
                Some(Timing { t0: self.w.clock_now(), scale: 1 })
            }
            None => {
                self.flush_calls += 1;
                (self.flush_calls % FLUSH_SAMPLE == 0).then(|| Timing { t0: self.w.clock_now(), scale: FLUSH_SAMPLE })
            }
        }
    }

    fn work_ends(&mut self, t: Option<Timing>) {
        if let Some(t) = t {
            // (Less what two back-to-back reads show with nothing between:
            // the reads' own cost, which would count `scale` times.)
            let mut spent = self.w.clock_now().saturating_sub(t.t0).saturating_sub(self.read_ticks);
            if t.scale > 1 {
                // A sample counts many times over: one the thread was
                // preempted in must not count as if every flush had been.
                // An empty flush takes tens of ns; 2 µs is a generous cap.
                spent = spent.min(match self.w.ticks_per_sec() {
                    0 => 2_000,
                    tps => tps / 500_000,
                });
                let f = &mut self.step_flushes;
                f.sampled_ticks = f.sampled_ticks.saturating_add(spent.saturating_mul(t.scale));
            }
            self.cost.ticks = self.cost.ticks.saturating_add(spent.saturating_mul(t.scale));
        }
    }

    /// Hands the cost so far to the probe (at each Step and at the end).
    fn report_cost(&mut self) {
        let c = std::mem::take(&mut self.cost);
        let flushes = self.flush_calls - std::mem::replace(&mut self.flushes_reported, self.flush_calls);
        let ps = self.engine_ps;
        let ns = |n: u64, ps: u64| (n as u128 * ps as u128 / 1000).min(u64::MAX as u128) as u64;
        let flush_ns = ns(flushes, ps.per_flush);
        self.w.add_adapter_cost(AdapterCost {
            ticks: c.ticks,
            engine_events: c.events,
            engine_log_ns: ns(c.events, ps.per_event).saturating_add(flush_ns),
            engine_flushes: flushes,
            engine_flush_ns: flush_ns,
            idle_ticks: c.idle_ticks,
            idle_flushes: c.idle_flushes,
            idle_flush_ns: ns(c.idle_flushes, ps.per_flush),
        });
    }

    /// A step ended (the `"timely"` log's flush at its end): books the
    /// flush calls since the previous one as idle if it did nothing.
    fn step_ends(&mut self, idle: bool) {
        let f = std::mem::replace(&mut self.step_flushes, StepFlushes { since: self.flush_calls, sampled_ticks: 0 });
        if idle {
            self.cost.idle_flushes += self.flush_calls - f.since;
            self.cost.idle_ticks = self.cost.idle_ticks.saturating_add(f.sampled_ticks);
        }
    }

    /// Source `src` will log nothing before `time`: write out what no log
    /// can precede any more (timing the writing exactly: a sampled flush's
    /// share so far is booked first, at its scale).
    fn advance(&mut self, src: usize, time: Duration, timing: &mut Option<Timing>) {
        if self.frontiers[src] < time {
            self.frontiers[src] = time;
        }
        if self.pending_len == 0 {
            return;
        }
        let wm = self.live.iter().map(|&i| self.frontiers[i]).min().unwrap_or(Duration::MAX);
        // Most calls are flushes of the progress logs that still wait for
        // another log: nothing pending is old enough to go out yet.
        if self.live.iter().all(|&i| self.pending[i].front().is_none_or(|e| e.0 > wm)) {
            return;
        }
        if timing.is_none_or(|t| t.scale != 1) {
            self.work_ends(timing.take());
            *timing = Some(Timing { t0: self.w.clock_now(), scale: 1 });
        }
        self.write_until(wm);
    }

    fn write_until(&mut self, wm: Duration) {
        if self.pending_len == 0 {
            return;
        }
        // The newest event to write decides whether a fresh clock pair is due.
        let newest = self
            .live
            .iter()
            .map(|&i| &self.pending[i])
            .filter_map(|q| q.partition_point(|e| e.0 <= wm).checked_sub(1).map(|n| q[n].0))
            .max();
        let Some(newest) = newest else { return };
        if nanos(newest) > self.pn.t {
            self.new_pair();
        }
        // Merge the logs' queues (each in time order) up to `wm`: take the
        // queue with the earliest head and write from it up to the next
        // queue's head (ties: the lower log first). No sorting: the progress
        // logs flush late, so one merged buffer was out of order, and sorted
        // again, at nearly every flush.
        loop {
            let mut best: Option<(Duration, usize)> = None;
            let mut upto = wm;
            for &i in &self.live {
                let Some(&(d, _)) = self.pending[i].front() else { continue };
                if d > wm {
                    continue;
                }
                match best {
                    None => best = Some((d, i)),
                    Some((bd, _)) if d < bd => {
                        upto = upto.min(bd);
                        best = Some((d, i));
                    }
                    Some(_) => upto = upto.min(d),
                }
            }
            let Some((_, i)) = best else { break };
            while self.pending[i].front().is_some_and(|e| e.0 <= upto) {
                let (d, e) = self.pending[i].pop_front().expect("front checked");
                self.pending_len -= 1;
                self.write(d, e);
            }
        }
        self.retire_closed();
    }

    fn new_pair(&mut self) {
        let p = read_pair(&self.w, self.epoch);
        self.stats.pairs += 1;
        self.stats.max_pair_error_ticks = self.stats.max_pair_error_ticks.max(p.err);
        // Slide the older end: keep a pair about a second old once there is one.
        if p.t.saturating_sub(self.candidate.t) >= 1_000_000_000 {
            if p.t.saturating_sub(self.p0.t) >= 2_000_000_000 {
                self.p0 = self.candidate;
            }
            self.candidate = p;
        }
        self.pn = p;
        let dt = self.pn.t.saturating_sub(self.p0.t);
        if dt > 0 && self.pn.ticks > self.p0.ticks {
            self.slope_q32 = (((self.pn.ticks - self.p0.ticks) as u128) << 32) / dt as u128;
        }
    }

    /// Ticks for `d` ns of timely's clock (durations: park hints).
    fn ticks_of(&self, d: u64) -> u64 {
        let slope = if self.slope_q32 != 0 {
            self.slope_q32
        } else {
            match self.w.ticks_per_sec() {
                0 => 1 << 32,
                tps => ((tps as u128) << 32) / 1_000_000_000,
            }
        };
        ((d as u128 * slope) >> 32).min(u64::MAX as u128) as u64
    }

    fn map(&mut self, d: Duration) -> u64 {
        let t = nanos(d);
        let pn = self.pn;
        let ts = if t <= pn.t {
            pn.ticks.saturating_sub(self.ticks_of(pn.t - t))
        } else {
            pn.ticks.saturating_add(self.ticks_of(t - pn.t))
        };
        if ts < self.last_ts {
            self.stats.clamped += 1;
            return self.last_ts;
        }
        self.last_ts = ts;
        ts
    }

    fn write(&mut self, d: Duration, e: Ev) {
        let ts = self.map(d);
        if let Some(op) = self.push_pending {
            if !matches!(e, Ev::Start(o) if o == op) {
                self.push_pending = None;
                self.w.event_at(ts, Event::Mark { id: TimelyMark::PushProgress(op).id() });
            }
        }
        let w = &mut self.w;
        match e {
            Ev::Start(op) => {
                w.schedule_start_at(ts, op as usize);
                if self.push_pending == Some(op) {
                    self.push_pending = None;
                    w.event_at(ts, Event::Mark { id: TimelyMark::PushProgress(op).id() });
                }
            }
            Ev::Stop(op) => w.schedule_stop_at(ts, op as usize),
            Ev::Send { channel, to, seq, records } => w.event_at(ts, Event::MessageSend { channel, to, seq, records }),
            Ev::Recv { channel, from, seq, records } => {
                w.event_at(ts, Event::MessageRecv { channel, from, seq, records })
            }
            Ev::PSend { channel, seq } => w.event_at(ts, Event::ProgressSend { channel, seq }),
            Ev::PRecv { channel, from, seq } => w.event_at(ts, Event::ProgressRecv { channel, from, seq }),
            Ev::Push(op) => self.push_pending = Some(op),
            Ev::Shutdown(op) => w.event_at(ts, Event::Mark { id: TimelyMark::Shutdown(op).id() }),
            Ev::Untraced(op) => w.event_at(ts, Event::Mark { id: TimelyMark::UntracedProgress(op).id() }),
            Ev::Detached => w.event_at(ts, Event::Mark { id: TimelyMark::Detached.id() }),
            Ev::Park(hint) => {
                let hint = hint.map_or(0, |h| self.ticks_of(nanos(h)));
                self.w.event_at(ts, Event::Park { hint })
            }
            Ev::Unpark => w.event_at(ts, Event::Unpark),
            Ev::Arrange { op, figure, value } => w.event_at(ts, Event::Arrangement { op, figure, value }),
            Ev::Step => {
                w.count_local_messages(std::mem::take(&mut self.local_uncounted));
                w.event_at(ts, Event::Step { elided: 0, spin_ticks: 0 });
                self.stats.steps += 1;
                self.report_cost();
            }
        }
    }

    /// Writes the channels whose two ends are known operators.
    fn resolve_channels(&mut self) {
        let mut i = 0;
        while i < self.channels.len() {
            let (id, scope, src, dst) = &self.channels[i];
            match (self.end_op(scope, src.0), self.end_op(scope, dst.0)) {
                (Some(s), Some(t)) => {
                    let (id, src, dst) = (*id, (s, src.1), (t, dst.1));
                    self.w.channel(id, src, dst);
                    self.channels.swap_remove(i);
                }
                _ => i += 1,
            }
        }
    }

    /// The operator id at `index` of the scope at `scope` (index 0: the
    /// scope itself).
    fn end_op(&self, scope: &[usize], index: usize) -> Option<usize> {
        if index == 0 {
            return self.addr_to_id.get(scope).copied();
        }
        let mut addr = Vec::with_capacity(scope.len() + 1);
        addr.extend_from_slice(scope);
        addr.push(index);
        self.addr_to_id.get(&addr).copied()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        // The last logger is gone: nothing precedes what is pending.
        let t = Some(Timing { t0: self.w.clock_now(), scale: 1 });
        self.write_until(Duration::MAX);
        self.work_ends(t);
        if let Some(op) = self.push_pending.take() {
            let ts = self.last_ts;
            self.w.event_at(ts, Event::Mark { id: TimelyMark::PushProgress(op).id() });
        }
        self.w.count_local_messages(std::mem::take(&mut self.local_uncounted));
        self.report_cost();
        // Dropping `w` writes the final Step and ends the stream.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_types_by_name() {
        let n = common_progress_names().count();
        assert_eq!(progress_selection(None).unwrap(), None);
        assert_eq!(progress_selection(Some("")).unwrap(), Some(vec![false; n]));
        let c = progress_selection(Some(" u64 , Product<u64, u32>,, Product<Product<u32,u64>,u64>")).unwrap().unwrap();
        let on: Vec<String> = common_progress_names().zip(c).filter(|(_, on)| *on).map(|(n, _)| n).collect();
        // (In the list's order: the plain types, then the nestings over u32,
        // over u64, over usize.)
        assert_eq!(on, ["u64", "Product<Product<u32,u64>,u64>", "Product<u64,u32>"]);
        let e = progress_selection(Some("u64,u128")).unwrap_err();
        assert!(
            e.contains("PROBE_TIMELY_PROGRESS")
                && e.contains("\"u128\"")
                && e.contains("Duration")
                && e.contains("Product<u64,u32>"),
            "{e}"
        );
    }

    #[test]
    fn the_common_list_names_each_type_once_and_nests_to_the_left() {
        let names: Vec<String> = common_progress_names().collect();
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        // Every nesting of u32, u64 and usize to the left, up to three
        // Products deep: over each of (), u32, u64 and usize, 3 + 9 + 27.
        let ints = ["u32", "u64", "usize"];
        let products: Vec<&String> =
            names.iter().filter(|n| n.starts_with("Product<") && !n.contains("PointStamp")).collect();
        assert_eq!(products.len(), 4 * (3 + 9 + 27), "{names:?}");
        // With differential: its dynamic scopes over each base, with each
        // inner type: 4 × 3, `Product<u32,PointStamp<usize>>` among them
        // (its `dynamic` example).
        let dynamic: Vec<&String> = names.iter().filter(|n| n.contains("PointStamp")).collect();
        let want = if cfg!(feature = "differential") { 12 } else { 0 };
        assert_eq!(dynamic.len(), want, "{dynamic:?}");
        if cfg!(feature = "differential") {
            assert!(dynamic.iter().any(|n| n.starts_with("Product<u32,PointStamp<usize")), "{dynamic:?}");
        }
        for n in &products {
            // `Product<Product<A,B>,C>` → the base and each inner type.
            let depth = n.matches("Product<").count();
            let parts: Vec<&str> = n.split(|c| c == '<' || c == '>' || c == ',').filter(|p| !p.is_empty()).collect();
            assert!(depth <= 3 && parts.len() == 2 * depth + 1, "{n}");
            let leaves: Vec<&str> = parts.iter().copied().filter(|p| *p != "Product").collect();
            assert!(leaves[0] == "()" || ints.contains(&leaves[0]), "{n}");
            assert!(leaves[1..].iter().all(|p| ints.contains(p)), "{n}");
        }
        // (Differential's `scc` over a u32 dataflow.)
        assert!(names.iter().any(|n| n == "Product<Product<u32,usize>,usize>"));
        assert!(names.iter().any(|n| n == "Product<Product<Product<u64,u32>,u64>,u32>"));
    }
}
