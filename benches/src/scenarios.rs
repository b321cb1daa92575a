//! Ground truth for the analysis on engines that are not timely: a seeded
//! generator of small runs whose bottleneck is known, driven through the
//! probe's public API by real worker threads that pass real messages, and a
//! judge that compares the sidecar's answer with the injected cause.
//!
//! A [`Scenario`] is drawn from a [`Shape`] and a seed ([`Scenario::generate`]):
//!
//! - [`Shape::Gather`]: every worker runs 2–4 operators per round (the same
//!   operators on every worker, each costing 100–160 µs, ±5 % per
//!   worker), then an `Exchange` that sends one message to every peer
//!   (all-to-all), then idles (blocked, outside any schedule) until the
//!   round's message of every peer is there, and runs a `Gather` that reads
//!   them all (in a random order). One (worker, operator) costs 3–5× more:
//!   it is the top of the critical path, and every other worker waits on
//!   that worker.
//! - [`Shape::Pipeline`]: worker `i` reads an item from worker `i - 1`, runs
//!   its stage (100–160 µs) and sends the item on to `i + 1`; one stage is
//!   3–5× slower. Its operator is the top; the worker after it waits on it
//!   (and every later worker on its predecessor, which is itself waiting
//!   on it: the sidecar names the slow stage for all of them).
//! - [`Shape::InputBound`]: sources that sleep between inputs (0.3–1 ms),
//!   then do little (an operator of 30–60 µs marked as reading input, one of
//!   40–80 µs), either on every worker independently or as the head of a
//!   pipeline through fast stages. No straggler: the critical path is
//!   mostly waiting-for-input, and in the pipeline each worker waits on its
//!   predecessor, which waits on the source: held up by the source.
//! - [`Shape::Silent`]: one worker (the merger) runs per round an `Ingest`
//!   (100–160 µs) and a `Merge` that computes 3–5× 100–200 µs without sending
//!   or reading anything, then an `Emit` that sends to every peer; the peers
//!   read it (`Apply`, 50–100 µs), run a `Local` step (50–100 µs) and wait
//!   for the next round. `Merge` is the top of the critical path, and every
//!   peer waits on the merger.
//!
//! How an operator spends its cost ([`Work`], each execution ±10 %): by
//! default it sleeps ([`Work::Sleep`]); with [`Work::Spin`] it computes for
//! that much CPU time of its thread. Spinning is the more faithful engine,
//! but only where every worker has a core: on a machine of 2 cores shared
//! with other jobs, 2–4 spinning workers are time-sliced, and the scheduler
//! rather than the plan decides who is slow (measured: in a pipeline whose
//! second stage was planned 4.7× slower than the first, the first stage's
//! 129 µs operator took 550 µs of wall time, and the first stage was as
//! often the bottleneck). A sleeping operator needs a core only to wake up,
//! and a thread waking from a sleep is scheduled ahead of the ones that
//! were running (a sleep of 116 µs among 4 threads on this machine: p99
//! 0.21 ms; sleeping 86 µs and spinning the last 30: p99 4 ms on one
//! thread, a time slice lost to another job). The sidecar sees the same
//! either way: a schedule start, the time, a stop.
//!
//! Waits are outside any schedule, as a worker of a thread-per-worker engine
//! polls for messages between its steps: the thread polls its channel every
//! [`POLL`] and sleeps in between. It does not block in a receive: a send
//! would then wake it, and on a busy machine the woken thread preempts the
//! sender inside its sending operator (measured: a 2-worker gather's
//! `Exchange`, one send, took 1.9 ms on average and came out on top of the
//! critical path).
//!
//! [`run`] records the scenario with a probe into a file and returns the
//! bytes, with what each worker measured of itself by the engine's clock
//! ([`Measured`]: wall time per operator, time waited per worker waited on,
//! time slept for input). [`realized`] checks on those measurements alone
//! that the machine ran the plan (the injected operator took at least
//! [`REALIZED_MARGIN`] times the time of any other, the waiting workers
//! waited longest on the expected one and, their senders' own waits
//! followed through as the sidecar does ([`held_up`]), were held up by the
//! expected one or its root by that margin, input-bound sources slept more
//! than they computed; for a gather, whose path the engine can follow
//! itself, the injected operator led the engine's own path by that margin,
//! [`critical_work`], so a stall off the path no longer voids the run); a
//! run that did not (a worker descheduled for
//! milliseconds on a busy machine makes another operator the slowest, and
//! then the sidecar is right to name it) is repeated, [`ATTEMPTS`] runs in
//! all, and if none did, the scenario is *void*: reported, not judged.
//!
//! [`analyze`] runs `sidecar::pipeline::analyze_bytes` on the bytes with
//! windows of [`WINDOW_NS`] (10 ms: a run of 60–300 ms covers several) and
//! sums the windows as `sidecar watch`'s closing summary does
//! (`RunTotals`): critical-path time per (worker, operator name), waiting
//! time per (worker, worker waited on), and the path's time by kind.
//! [`judge`] calls the run right when the operator with the most
//! critical-path time over the run is the injected one (input-bound: when
//! waiting-for-input has more of the path than operators do) and, for every
//! worker expected to wait, the worker it waited on longest over the run is
//! the expected one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::time::{Duration, Instant};

use probe::{OnFull, Probe, Sink, WorkerProbe};
use sidecar::analysis::report::{ByKind, RunTotals};

/// The window width the runs are analyzed with (ns).
pub const WINDOW_NS: u64 = 10_000_000;

/// What a run's critical work costs in total, roughly (CPU time of the
/// slowest worker): sets the number of rounds or items.
const TARGET_NS: u64 = 70_000_000;

/// A blocked receive longer than this means a peer is gone: the run fails.
const STALL: Duration = Duration::from_secs(10);

/// splitmix64: a tiny seeded generator, good enough to draw plans.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `x` times a factor uniform in `[1 - frac, 1 + frac)`.
    pub fn jitter(&mut self, x: u64, frac: f64) -> u64 {
        (x as f64 * (1.0 + frac * (2.0 * self.unit() - 1.0))) as u64
    }

    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// The engine shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    Gather,
    Pipeline,
    InputBound,
    Silent,
}

impl Shape {
    pub const ALL: [Shape; 4] = [Shape::Gather, Shape::Pipeline, Shape::InputBound, Shape::Silent];

    pub fn name(self) -> &'static str {
        match self {
            Shape::Gather => "gather",
            Shape::Pipeline => "pipeline",
            Shape::InputBound => "input-bound",
            Shape::Silent => "silent",
        }
    }

    pub fn parse(s: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// The injected cause: what the analysis must name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The operator with the most critical-path time, (worker, name); `None`:
    /// no operator, the path is mostly waiting-for-input.
    pub top: Option<(u32, String)>,
    /// (worker, the worker whose messages it waits for longest): what the
    /// engine's own measurements must show for the run to be judged.
    pub waited_on: Vec<(u32, u32)>,
    /// (worker, the worker at the root of its waits), in `waited_on`'s
    /// order. The sidecar charges the stretch of a wait during which its
    /// sender was itself waiting to the sender's cause (docs/analysis.md),
    /// so in a pipeline a stage after the slow one (or after the sleeping
    /// source) may be named held up by it rather than by its predecessor;
    /// either is right. Elsewhere it is `waited_on`.
    pub held_up_by: Vec<(u32, u32)>,
}

impl std::fmt::Display for Expected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.top {
            Some((w, n)) => write!(f, "top w{w}:{n}")?,
            None => write!(f, "path mostly waiting-for-input")?,
        }
        if !self.waited_on.is_empty() {
            let v: Vec<String> = self
                .waited_on
                .iter()
                .zip(&self.held_up_by)
                .map(
                    |(&(w, on), &(_, root))| {
                        if on == root {
                            format!("w{w}->w{on}")
                        } else {
                            format!("w{w}->w{on}|w{root}")
                        }
                    },
                )
                .collect();
            write!(f, "; waits {}", v.join(" "))?;
        }
        Ok(())
    }
}

/// What each worker thread does; costs in ns of thread CPU time.
#[derive(Clone, Debug)]
enum Plan {
    Gather {
        ops: Vec<&'static str>,
        /// `[worker][op]`.
        cost: Vec<Vec<u64>>,
        rounds: u64,
    },
    Pipeline {
        /// Per worker (stage).
        cost: Vec<u64>,
        items: u64,
    },
    InputBound {
        /// Worker 0 feeds a pipeline through the others (else every worker
        /// has its own input).
        pipeline: bool,
        /// Per worker: the mean sleep between inputs, the source's and the
        /// next operator's cost.
        gap: Vec<u64>,
        source: Vec<u64>,
        map: Vec<u64>,
        items: u64,
    },
    Silent {
        merger: usize,
        ingest: u64,
        merge: u64,
        /// Per worker (the merger's unused).
        apply: Vec<u64>,
        local: Vec<u64>,
        rounds: u64,
    },
}

/// One generated run: its shape, seed, workers, plan and known answer.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub shape: Shape,
    pub seed: u64,
    pub workers: usize,
    pub expected: Expected,
    /// The plan in a line (for diagnostics).
    pub summary: String,
    plan: Plan,
}

const GATHER_OPS: [&str; 6] = ["Parse", "Filter", "Join", "Aggregate", "Project", "Hash"];
const STAGES: [&str; 4] = ["Decode", "Enrich", "Score", "Write"];

fn us(ns: u64) -> String {
    format!("{}us", ns / 1000)
}

impl Scenario {
    /// The scenario of `shape` drawn from `seed` (the same seed gives the
    /// same plan; timing is real, so not the same trace).
    pub fn generate(shape: Shape, seed: u64) -> Scenario {
        let mut r = Rng::new(seed ^ (shape as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F));
        let n = r.range(2, 4) as usize;
        let slow = |r: &mut Rng| 3.0 + 2.0 * r.unit();
        let (plan, expected, summary) = match shape {
            Shape::Gather => {
                let k = r.range(2, 4) as usize;
                let mut pool = GATHER_OPS.to_vec();
                r.shuffle(&mut pool);
                let ops: Vec<&'static str> = pool[..k].to_vec();
                let base: Vec<u64> = (0..k).map(|_| r.range(100_000, 160_000)).collect();
                let mut cost: Vec<Vec<u64>> =
                    (0..n).map(|_| base.iter().map(|&b| r.jitter(b, 0.05)).collect()).collect();
                let (s, x, f) = (r.below(n as u64) as usize, r.below(k as u64) as usize, slow(&mut r));
                cost[s][x] = (cost[s][x] as f64 * f) as u64;
                let round: u64 = cost[s].iter().sum::<u64>() + GATHER_NS;
                let rounds = (TARGET_NS / round).clamp(40, 200);
                let waited_on: Vec<(u32, u32)> = (0..n).filter(|&w| w != s).map(|w| (w as u32, s as u32)).collect();
                let summary = format!(
                    "{n} workers, ops [{}] x {rounds} rounds, straggler w{s}:{} x{f:.1} ({})",
                    ops.iter().zip(&base).map(|(o, b)| format!("{o} {}", us(*b))).collect::<Vec<_>>().join(", "),
                    ops[x],
                    us(cost[s][x])
                );
                let top = Some((s as u32, ops[x].to_string()));
                let held_up_by = waited_on.clone();
                (Plan::Gather { ops, cost, rounds }, Expected { top, waited_on, held_up_by }, summary)
            }
            Shape::Pipeline => {
                let mut cost: Vec<u64> = (0..n).map(|_| r.range(100_000, 160_000)).collect();
                let (s, f) = (r.below(n as u64) as usize, slow(&mut r));
                cost[s] = (cost[s] as f64 * f) as u64;
                let items = (TARGET_NS / cost[s]).clamp(50, 250);
                let waited_on: Vec<(u32, u32)> = (s + 1..n).map(|w| (w as u32, w as u32 - 1)).collect();
                let held_up_by = (s + 1..n).map(|w| (w as u32, s as u32)).collect();
                let summary = format!(
                    "{n} stages [{}] x {items} items, slow stage w{s}:{} x{f:.1}",
                    (0..n).map(|i| format!("{} {}", STAGES[i], us(cost[i]))).collect::<Vec<_>>().join(", "),
                    STAGES[s]
                );
                let top = Some((s as u32, STAGES[s].to_string()));
                (Plan::Pipeline { cost, items }, Expected { top, waited_on, held_up_by }, summary)
            }
            Shape::InputBound => {
                let pipeline = r.below(2) == 1;
                let gap: Vec<u64> = (0..n).map(|_| r.range(300_000, 1_000_000)).collect();
                let source: Vec<u64> = (0..n).map(|_| r.range(30_000, 60_000)).collect();
                let map: Vec<u64> = (0..n).map(|_| r.range(40_000, 80_000)).collect();
                let per = if pipeline { gap[0] + source[0] } else { *gap.iter().max().unwrap() };
                let items = (TARGET_NS / per).clamp(40, 200);
                let waited_on: Vec<(u32, u32)> =
                    if pipeline { (1..n).map(|w| (w as u32, w as u32 - 1)).collect() } else { Vec::new() };
                let held_up_by = if pipeline { (1..n).map(|w| (w as u32, 0)).collect() } else { Vec::new() };
                let summary = if pipeline {
                    format!(
                        "{n} workers, w0 source sleeping {} between inputs, {items} items down a pipeline",
                        us(gap[0])
                    )
                } else {
                    format!(
                        "{n} independent sources sleeping [{}] between inputs, {items} inputs each",
                        gap.iter().map(|&g| us(g)).collect::<Vec<_>>().join(", ")
                    )
                };
                (
                    Plan::InputBound { pipeline, gap, source, map, items },
                    Expected { top: None, waited_on, held_up_by },
                    summary,
                )
            }
            Shape::Silent => {
                let merger = r.below(n as u64) as usize;
                let ingest = r.range(100_000, 160_000);
                let f = slow(&mut r);
                let merge = (r.range(100_000, 200_000) as f64 * f) as u64;
                let apply: Vec<u64> = (0..n).map(|_| r.range(50_000, 100_000)).collect();
                let local: Vec<u64> = (0..n).map(|_| r.range(50_000, 100_000)).collect();
                let rounds = (TARGET_NS / (ingest + merge)).clamp(40, 200);
                let waited_on: Vec<(u32, u32)> =
                    (0..n).filter(|&w| w != merger).map(|w| (w as u32, merger as u32)).collect();
                let summary = format!(
                    "{n} workers, merger w{merger}: Ingest {} + silent Merge {} per round x {rounds}, peers Apply+Local",
                    us(ingest),
                    us(merge)
                );
                let top = Some((merger as u32, "Merge".to_string()));
                (
                    Plan::Silent { merger, ingest, merge, apply, local, rounds },
                    Expected { top, held_up_by: waited_on.clone(), waited_on },
                    summary,
                )
            }
        };
        Scenario { shape, seed, workers: n, expected, summary, plan }
    }
}

/// The `Gather` operator's own work (besides its reads).
const GATHER_NS: u64 = 10_000;

/// How an operator spends its cost (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Work {
    /// Sleep (the thread's timer slack set to 1 ns: a sleep ends within
    /// microseconds of when it was asked to when a core is free).
    #[default]
    Sleep,
    /// Compute for that much CPU time of the thread.
    Spin,
}

impl Work {
    pub fn parse(s: &str) -> Option<Work> {
        match s {
            "sleep" => Some(Work::Sleep),
            "spin" => Some(Work::Spin),
            _ => None,
        }
    }

    /// Spends `ns`.
    pub fn spend(self, ns: u64) {
        match self {
            Work::Sleep => std::thread::sleep(Duration::from_nanos(ns)),
            Work::Spin => {
                let end = thread_cpu_ns() + ns;
                let mut x = 1u64;
                while thread_cpu_ns() < end {
                    for _ in 0..64 {
                        x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
                    }
                }
            }
        }
    }
}

/// How often an idle worker polls its channel.
pub const POLL: Duration = Duration::from_micros(40);

/// The thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec we own; the clock id is a constant.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Lets this thread's sleeps end within a microsecond of when they were
/// asked to (Linux's default timer slack is 50 µs).
fn tight_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and touches only
    // the calling thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// A message between workers: who sent it, its sequence number on its
/// channel, and when it was sent (for the engine's own account of waits).
#[derive(Clone, Copy, Debug)]
struct Msg {
    from: usize,
    seq: u64,
    sent: Instant,
}

/// What a worker measured of its own run, by the engine's clock
/// ([`Instant`]): what the sidecar should find, if the machine ran the plan.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    /// Wall time per operator name, schedule start to stop, ns.
    pub ops: BTreeMap<&'static str, u64>,
    /// Each wait, in the order they ended: from when the worker started to
    /// idle until the message it needed arrived (sent), or for a gather the
    /// last of the round's messages; none when it was there.
    pub waits: Vec<WaitSpan>,
    /// Time spent sleeping for input, ns.
    pub input: u64,
    /// Operator executions that took more than [`STALL_NS`] longer than
    /// their cost (the thread descheduled), and the time they took beyond
    /// it, ns.
    pub stalls: u64,
    pub stalled: u64,
    /// A gather's rounds as this worker ran them: when it sent its
    /// messages of the round, and what its operators took before (for
    /// [`critical_work`]).
    pub rounds: Vec<RoundWork>,
}

impl Measured {
    /// Time spent waiting per worker waited on, ns.
    pub fn waited(&self) -> BTreeMap<usize, u64> {
        let mut by = BTreeMap::new();
        for v in &self.waits {
            *by.entry(v.on).or_default() += v.end.duration_since(v.start).as_nanos() as u64;
        }
        by
    }
}

/// One wait as the engine measured it: from when the worker began to idle
/// until the message it needed was sent by `on`.
#[derive(Clone, Copy, Debug)]
pub struct WaitSpan {
    pub start: Instant,
    pub end: Instant,
    pub on: usize,
}

/// Links of a chain of waits followed at most by [`held_up`].
const HELD_UP_DEPTH: usize = 8;

/// Each worker's waiting time per worker that held it up, by the engine's
/// own measurements, with the rule the sidecar's wait figures follow
/// (docs/analysis.md; Böhme et al., ICPP 2010, §3): the stretch of a wait
/// during which its sender was itself waiting counts on whatever the sender
/// waited on, followed through the chain; the rest counts on the sender.
/// In a pipeline fed by a sleeping source, a stage's wait counts mostly on
/// the source; a stage that was slow to pick up its message (its thread
/// descheduled between polls on a busy machine) holds up the stages after
/// it for that long. (Written here rather than calling the sidecar's
/// `root_causes`: the judge's account must not share the code it judges.)
pub fn held_up(m: &[Measured]) -> Vec<BTreeMap<usize, u64>> {
    m.iter()
        .enumerate()
        .map(|(w, x)| {
            let mut out = BTreeMap::new();
            let mut chain = vec![w];
            for v in &x.waits {
                charge(m, v.on, v.start, v.end, &mut chain, &mut out);
            }
            out
        })
        .collect()
}

/// Counts `[a, b)`, waited on `on`, where it belongs: the stretches during
/// which `on` was itself waiting on a worker not already on `chain` go down
/// that worker's chain, the rest stays on `on`.
fn charge(m: &[Measured], on: usize, a: Instant, b: Instant, chain: &mut Vec<usize>, out: &mut BTreeMap<usize, u64>) {
    let mut passed_on = Duration::ZERO;
    if !chain.contains(&on) && chain.len() <= HELD_UP_DEPTH {
        chain.push(on);
        // A worker's waits are disjoint and in time order.
        let first = m[on].waits.partition_point(|v| v.end <= a);
        for v in m[on].waits[first..].iter().take_while(|v| v.start < b) {
            let (x, y) = (v.start.max(a), v.end.min(b));
            if x < y && !chain.contains(&v.on) {
                charge(m, v.on, x, y, chain, out);
                passed_on += y - x;
            }
        }
        chain.pop();
    }
    let own = b.saturating_duration_since(a).saturating_sub(passed_on);
    if !own.is_zero() {
        *out.entry(on).or_default() += own.as_nanos() as u64;
    }
}

/// One worker's round of a gather: when its messages left, and the wall
/// time of each of its operators before they did, ns.
#[derive(Clone, Debug)]
pub struct RoundWork {
    pub sent: Instant,
    pub work: Vec<(&'static str, u64)>,
}

/// The engine's own critical path of a gather, per (worker, operator): in
/// each round, every worker's `Gather` waits for the last message of the
/// round, so the path runs through the work of the worker whose messages
/// left last (its round began at its previous `Gather`, which the round
/// before's last sender held up). Summed over the rounds every worker ran.
/// A stall (a worker descheduled) is in it where it fell, as it is in the
/// trace.
pub fn critical_work(m: &[Measured]) -> BTreeMap<(usize, &'static str), u64> {
    let mut out = BTreeMap::new();
    let rounds = m.iter().map(|x| x.rounds.len()).min().unwrap_or(0);
    for r in 0..rounds {
        let Some((last, _)) = m.iter().enumerate().max_by_key(|(_, x)| x.rounds[r].sent) else { continue };
        for &(name, ns) in &m[last].rounds[r].work {
            *out.entry((last, name)).or_default() += ns;
        }
    }
    out
}

/// An execution this much later than its cost was stalled (ns).
pub const STALL_NS: u64 = 1_000_000;

/// What one worker thread has.
struct Ctx<'a> {
    me: usize,
    n: usize,
    w: WorkerProbe,
    rx: Receiver<Msg>,
    tx: Vec<Sender<Msg>>,
    rng: Rng,
    plan: &'a Plan,
    work: Work,
    /// Operator names by id.
    names: BTreeMap<usize, &'static str>,
    measured: Measured,
}

impl Ctx<'_> {
    fn declare(&mut self, id: usize, name: &'static str) {
        self.w.operator(id, name, &[0, id]);
        self.names.insert(id, name);
    }

    /// An operator starts: the time it did, for [`Self::stop`].
    fn start(&mut self, id: usize) -> Instant {
        let t = Instant::now();
        self.w.schedule_start(id);
        t
    }

    fn stop(&mut self, id: usize, t0: Instant) {
        self.w.schedule_stop(id);
        let d = t0.elapsed().as_nanos() as u64;
        *self.measured.ops.entry(self.names[&id]).or_default() += d;
    }

    /// An execution that only spends `cost` (±10 %), sending and reading
    /// nothing.
    fn op(&mut self, id: usize, cost: u64) {
        let t = self.start(id);
        self.spend(cost);
        self.stop(id, t);
    }

    /// `cost` ±10 %, spent as the run's [`Work`] says.
    fn spend(&mut self, cost: u64) {
        let c = self.rng.jitter(cost, 0.1);
        self.spend_exact(c);
    }

    /// `ns` spent, and any stall beyond it counted.
    fn spend_exact(&mut self, ns: u64) {
        let t = Instant::now();
        self.work.spend(ns);
        let late = (t.elapsed().as_nanos() as u64).saturating_sub(ns);
        if late > STALL_NS {
            self.measured.stalled += late;
            self.measured.stalls += 1;
        }
    }

    /// A message to `to` on `channel` (recorded before it leaves, so the
    /// send's time is never after the arrival).
    fn send(&mut self, channel: usize, to: usize, seq: u64) -> Result<(), String> {
        self.w.message_send(channel, to, seq, 1);
        let m = Msg { from: self.me, seq, sent: Instant::now() };
        self.tx[to].send(m).map_err(|_| format!("worker {to} is gone"))
    }

    /// Idles (outside any schedule, polling every [`POLL`]) until the next
    /// message is there.
    fn recv(&mut self) -> Result<Msg, String> {
        let t0 = Instant::now();
        loop {
            match self.rx.try_recv() {
                Ok(m) => return Ok(m),
                Err(TryRecvError::Disconnected) => return Err(format!("worker {}: peers gone", self.me)),
                Err(TryRecvError::Empty) if t0.elapsed() > STALL => return Err(format!("worker {} stalled", self.me)),
                Err(TryRecvError::Empty) => std::thread::sleep(POLL),
            }
        }
    }

    /// The engine's account of a wait that began at `idle` and ended when
    /// `m` was sent (if after).
    fn waited(&mut self, idle: Instant, m: &Msg) {
        if m.sent >= idle {
            self.measured.waits.push(WaitSpan { start: idle, end: m.sent, on: m.from });
        }
    }

    fn run(&mut self) -> Result<(), String> {
        tight_timers();
        match self.plan {
            Plan::Gather { .. } => self.gather(),
            Plan::Pipeline { .. } => self.pipeline(),
            Plan::InputBound { .. } => self.input_bound(),
            Plan::Silent { .. } => self.silent(),
        }
    }

    fn gather(&mut self) -> Result<(), String> {
        let plan = self.plan;
        let Plan::Gather { ops, cost, rounds } = plan else { unreachable!() };
        let (me, n) = (self.me, self.n);
        let (exchange, gather) = (ops.len() + 1, ops.len() + 2);
        for (i, name) in ops.iter().enumerate() {
            self.declare(i + 1, name);
        }
        self.declare(exchange, "Exchange");
        self.declare(gather, "Gather");
        self.w.channel(1, (exchange, 0), (gather, 0));
        let mut inbox: Vec<Msg> = Vec::new();
        let peers: Vec<usize> = (0..n).filter(|&p| p != me).collect();
        for round in 0..*rounds {
            let mut work = Vec::with_capacity(cost[me].len());
            for (i, &c) in cost[me].iter().enumerate() {
                let t = Instant::now();
                self.op(i + 1, c);
                work.push((ops[i], t.elapsed().as_nanos() as u64));
            }
            let t = self.start(exchange);
            self.measured.rounds.push(RoundWork { sent: Instant::now(), work });
            for &p in &peers {
                self.send(1, p, round)?;
            }
            self.stop(exchange, t);
            self.w.step();
            // Idle until every peer's message of this round is here (a
            // fast peer's next round may come too: it stays for then).
            let idle = Instant::now();
            loop {
                inbox.extend(self.rx.try_iter());
                if inbox.iter().filter(|m| m.seq == round).count() == peers.len() {
                    break;
                }
                let m = self.recv()?;
                inbox.push(m);
            }
            let mut now: Vec<Msg> = inbox.iter().filter(|m| m.seq == round).copied().collect();
            inbox.retain(|m| m.seq != round);
            if let Some(last) = now.iter().max_by_key(|m| m.sent).copied() {
                self.waited(idle, &last);
            }
            self.rng.shuffle(&mut now);
            let t = self.start(gather);
            for m in now {
                self.w.message_recv(1, m.from, m.seq, 1);
            }
            self.spend_exact(GATHER_NS);
            self.stop(gather, t);
            self.w.step();
        }
        Ok(())
    }

    fn pipeline(&mut self) -> Result<(), String> {
        let plan = self.plan;
        let Plan::Pipeline { cost, items } = plan else { unreachable!() };
        let (me, n) = (self.me, self.n);
        self.declare(1, STAGES[me]);
        for item in 0..*items {
            let got = if me > 0 {
                let idle = Instant::now();
                let m = self.recv()?;
                self.waited(idle, &m);
                Some(m)
            } else {
                None
            };
            let t = self.start(1);
            if let Some(m) = got {
                self.w.message_recv(me, m.from, m.seq, 1);
            }
            self.spend(cost[me]);
            if me + 1 < n {
                self.send(me + 1, me + 1, item)?;
            }
            self.stop(1, t);
            self.w.step();
        }
        Ok(())
    }

    fn input_bound(&mut self) -> Result<(), String> {
        let plan = self.plan;
        let Plan::InputBound { pipeline, gap, source, map, items } = plan else { unreachable!() };
        let (me, n) = (self.me, self.n);
        self.declare(1, "Source");
        self.declare(2, "Map");
        for item in 0..*items {
            if !pipeline || me == 0 {
                // The input is not there yet.
                let idle = Instant::now();
                std::thread::sleep(Duration::from_nanos(self.rng.jitter(gap[me], 0.3)));
                self.measured.input += idle.elapsed().as_nanos() as u64;
                let t = self.start(1);
                self.w.mark(1);
                self.spend(source[me]);
                if *pipeline && n > 1 {
                    self.send(1, 1, item)?;
                }
                self.stop(1, t);
                if !pipeline {
                    self.op(2, map[me]);
                }
            } else {
                let idle = Instant::now();
                let m = self.recv()?;
                self.waited(idle, &m);
                let t = self.start(2);
                self.w.message_recv(me, m.from, m.seq, 1);
                self.spend(map[me]);
                if me + 1 < n {
                    self.send(me + 1, me + 1, item)?;
                }
                self.stop(2, t);
            }
            self.w.step();
        }
        Ok(())
    }

    fn silent(&mut self) -> Result<(), String> {
        let plan = self.plan;
        let Plan::Silent { merger, ingest, merge, apply, local, rounds } = plan else { unreachable!() };
        let (me, n) = (self.me, self.n);
        let names = if me == *merger {
            [(1, "Ingest"), (2, "Merge"), (3, "Emit")]
        } else {
            [(4, "Apply"), (5, "Local"), (0, "")]
        };
        for (id, name) in names.into_iter().filter(|x| x.0 > 0) {
            self.declare(id, name);
        }
        for round in 0..*rounds {
            if me == *merger {
                self.op(1, *ingest);
                // Sorts and merges: sends and reads nothing.
                self.op(2, *merge);
                let t = self.start(3);
                for p in (0..n).filter(|&p| p != me) {
                    self.send(1, p, round)?;
                }
                self.stop(3, t);
            } else {
                let idle = Instant::now();
                let m = self.recv()?;
                self.waited(idle, &m);
                let t = self.start(4);
                self.w.message_recv(1, m.from, m.seq, 1);
                self.spend(apply[me]);
                self.stop(4, t);
                self.op(5, local[me]);
            }
            self.w.step();
        }
        Ok(())
    }
}

static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A recorded run: the probe's bytes and what each worker measured.
pub struct Run {
    pub bytes: Vec<u8>,
    pub measured: Vec<Measured>,
}

/// Runs `sc` on real threads with a probe writing into a temporary file.
pub fn run(sc: &Scenario, work: Work) -> Result<Run, String> {
    let k = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path: PathBuf = std::env::temp_dir().join(format!(
        "scenario-{}-{}-{}-{:x}.rlog",
        std::process::id(),
        k,
        sc.shape.name(),
        sc.seed
    ));
    let result = record(sc, work, &path);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()));
    let _ = std::fs::remove_file(&path);
    Ok(Run { measured: result?, bytes: bytes? })
}

fn record(sc: &Scenario, work: Work, path: &std::path::Path) -> Result<Vec<Measured>, String> {
    let probe = Probe::builder()
        .sink(Sink::file(path))
        .on_full(OnFull::Block)
        .workers(sc.workers)
        .program(format!("scenario-{}", sc.shape.name()))
        .start()
        .map_err(|e| e.to_string())?;
    let n = sc.workers;
    let (txs, rxs): (Vec<Sender<Msg>>, Vec<Receiver<Msg>>) = (0..n).map(|_| channel()).unzip();
    let results: Vec<Result<Measured, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(me, rx)| {
                let mut ctx = Ctx {
                    me,
                    n,
                    w: probe.worker(me),
                    rx,
                    tx: txs.clone(),
                    rng: Rng::new(sc.seed.wrapping_mul(31).wrapping_add(me as u64 + 1)),
                    plan: &sc.plan,
                    work,
                    names: BTreeMap::new(),
                    measured: Measured::default(),
                };
                s.spawn(move || {
                    let r = ctx.run();
                    // The stream ends when the worker is done.
                    r.map(|()| ctx.measured)
                })
            })
            .collect();
        drop(txs);
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into()))).collect()
    });
    probe.shutdown().map_err(|e| e.to_string())?;
    results.into_iter().collect()
}

/// By how much the injected cause must have stood out in the engine's own
/// measurements for the run to be judged (see [`realized`]).
pub const REALIZED_MARGIN: f64 = 1.25;

/// Whether the machine ran the plan: the engine's own measurements
/// ([`Measured`]) must show the injected cause. The expected top operator
/// took at least [`REALIZED_MARGIN`] times the wall time of any other
/// (worker, operator), and the operators' stalls (all workers) add up to
/// less than the difference (a stall of the whole machine lengthens the top
/// operator and a rival alike, and the path of the round it falls in may
/// take it through the rival: the lead can shrink by the stall twice);
/// an input-bound source slept that many times longer than it computed, and
/// longer by more than all the stalls; a worker expected to wait on another
/// waited on it longest. Where they do not (a worker descheduled for
/// milliseconds on a busy machine), the plan's answer is not the run's, and
/// the run says nothing about the sidecar. Independent of the sidecar's
/// answer.
pub fn realized(expected: &Expected, m: &[Measured]) -> Result<(), String> {
    let ms = |ns: u64| format!("{:.1} ms", ns as f64 / 1e6);
    match &expected.top {
        Some((w, name)) if m.iter().any(|x| !x.rounds.is_empty()) => {
            // A gather: the engine knows its own critical path, stalls and
            // all; the run is judged when the planned straggler leads it.
            let path = critical_work(m);
            let top = path.get(&(*w as usize, name.as_str())).copied().unwrap_or(0);
            let rival = path.iter().filter(|((i, n), _)| !(*i == *w as usize && n == name)).max_by_key(|x| *x.1);
            if let Some(((i, n), &ns)) = rival {
                if (ns as f64) * REALIZED_MARGIN > top as f64 {
                    return Err(format!("on the engine's path w{w}:{name} took {}, w{i}:{n} {}", ms(top), ms(ns)));
                }
            }
        }
        Some((w, name)) => {
            let top = m[*w as usize].ops.get(name.as_str()).copied().unwrap_or(0);
            let rival = m
                .iter()
                .enumerate()
                .flat_map(|(i, x)| x.ops.iter().map(move |(n, ns)| (i, *n, *ns)))
                .filter(|&(i, n, _)| !(i == *w as usize && n == name))
                .max_by_key(|x| x.2);
            if let Some((i, n, ns)) = rival {
                if (ns as f64) * REALIZED_MARGIN > top as f64 {
                    return Err(format!("w{w}:{name} took {}, w{i}:{n} {}", ms(top), ms(ns)));
                }
                let stalled: u64 = m.iter().map(|x| x.stalled).sum();
                if stalled >= top - ns {
                    return Err(format!(
                        "stalls of {} against a lead of {} (w{w}:{name} over w{i}:{n})",
                        ms(stalled),
                        ms(top - ns)
                    ));
                }
            }
        }
        None => {
            let stalled: u64 = m.iter().map(|x| x.stalled).sum();
            for (i, x) in m.iter().enumerate().filter(|x| x.1.input > 0) {
                let ops: u64 = x.ops.values().sum();
                if (ops as f64) * REALIZED_MARGIN > x.input as f64 {
                    return Err(format!("w{i} slept {} for input, computed {}", ms(x.input), ms(ops)));
                }
                if stalled >= x.input - ops {
                    return Err(format!(
                        "stalls of {} against w{i}'s input lead of {}",
                        ms(stalled),
                        ms(x.input - ops)
                    ));
                }
            }
        }
    }
    for &(w, on) in &expected.waited_on {
        let top = m[w as usize].waited().into_iter().max_by_key(|x| x.1);
        match top {
            Some((o, _)) if o == on as usize => {}
            Some((o, ns)) => return Err(format!("w{w} waited longest on w{o} ({})", ms(ns))),
            None => return Err(format!("w{w} never waited")),
        }
    }
    // What the sidecar names is who held a worker up (its senders' own
    // waits followed through): the engine's account of it must name the
    // expected worker or the expected root, by the margin. Without one, a
    // near tie (a middle stage of a pipeline slow to pick up its messages
    // on a busy machine, as long as the source's sleeps) is decided by
    // where the windows' edges cut the chains of waits, not by the plan.
    let held = held_up(m);
    for (&(w, on), &(_, root)) in expected.waited_on.iter().zip(&expected.held_up_by) {
        let by = &held[w as usize];
        let named = |o: usize| o == on as usize || o == root as usize;
        let lead = by.iter().filter(|x| named(*x.0)).map(|x| *x.1).max().unwrap_or(0);
        let rival = by.iter().filter(|x| !named(*x.0)).max_by_key(|x| *x.1);
        if let Some((o, &ns)) = rival {
            if ns as f64 * REALIZED_MARGIN > lead as f64 {
                return Err(format!(
                    "w{w} was held up by w{o} for {}, by w{on} or w{root} for at most {}",
                    ms(ns),
                    ms(lead)
                ));
            }
        }
    }
    Ok(())
}

/// The sidecar's answer for a run, summed over its windows.
#[derive(Clone, Debug, Default)]
pub struct Answer {
    pub windows: u64,
    pub incomplete: u64,
    pub errors: Vec<String>,
    /// Critical-path length and its kinds, summed over windows (ns).
    pub cp_ns: u64,
    pub by_kind: ByKind,
    /// Critical-path time per (worker, operator name), largest first.
    pub operators: Vec<((u32, String), u64)>,
    /// Per worker: waiting time per worker waited on (`None`: nothing
    /// visible ended it), largest first.
    pub waits: BTreeMap<u32, Vec<(Option<u32>, u64)>>,
    /// Schedule pairs the probe elided, and records.
    pub elided: u64,
    pub records: u64,
}

/// Analyzes a run's bytes in windows of `width_ns` and sums the windows.
pub fn analyze(bytes: &[u8], width_ns: u64) -> Answer {
    let (reports, errors) = sidecar::pipeline::analyze_bytes(&[("scenario", bytes)], width_ns);
    let mut t = RunTotals::default();
    let mut by_kind = ByKind::default();
    for r in &reports {
        t.add(r);
        let k = &r.critical_path.by_kind;
        by_kind.operator += k.operator;
        by_kind.data_message += k.data_message;
        by_kind.progress_message += k.progress_message;
        by_kind.waiting_for_input += k.waiting_for_input;
        by_kind.span += k.span;
        by_kind.unknown += k.unknown;
    }
    let mut operators: Vec<((u32, String), u64)> = t.operators.into_iter().collect();
    operators.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut waits: BTreeMap<u32, Vec<(Option<u32>, u64)>> = BTreeMap::new();
    for ((w, on), ns) in t.waits {
        waits.entry(w).or_default().push((on, ns));
    }
    for v in waits.values_mut() {
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    Answer {
        windows: t.windows,
        incomplete: t.incomplete,
        errors,
        cp_ns: t.critical_path_ns,
        by_kind,
        operators,
        waits,
        elided: t.instrumentation.elided_schedules,
        records: t.instrumentation.records,
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = |x: u64| 100.0 * x as f64 / self.cp_ns.max(1) as f64;
        let ops: Vec<String> =
            self.operators.iter().take(4).map(|((w, n), ns)| format!("w{w}:{n} {:.0}%", pct(*ns))).collect();
        write!(
            f,
            "top [{}]; path {:.1} ms (op {:.0}% wfi {:.0}% msg {:.0}% unk {:.0}%)",
            ops.join(", "),
            self.cp_ns as f64 / 1e6,
            pct(self.by_kind.operator),
            pct(self.by_kind.waiting_for_input),
            pct(self.by_kind.data_message),
            pct(self.by_kind.unknown)
        )?;
        for (w, v) in &self.waits {
            let on: Vec<String> = v
                .iter()
                .take(3)
                .map(|(o, ns)| format!("{} {:.1}ms", o.map_or("?".into(), |o| format!("w{o}")), *ns as f64 / 1e6))
                .collect();
            write!(f, "; w{w} waited on {}", on.join(", "))?;
        }
        write!(f, "; {} windows", self.windows)?;
        if self.incomplete > 0 {
            write!(f, " ({} incomplete)", self.incomplete)?;
        }
        write!(f, ", {} records, {} elided", self.records, self.elided)?;
        if !self.errors.is_empty() {
            write!(f, "; errors {:?}", self.errors)?;
        }
        Ok(())
    }
}

/// Whether the answer names the injected cause, and if not, why.
pub fn judge(expected: &Expected, got: &Answer) -> Result<(), Vec<String>> {
    let mut why = Vec::new();
    if !got.errors.is_empty() {
        why.push(format!("analysis errors: {:?}", got.errors));
    }
    match &expected.top {
        Some(top) => match got.operators.first() {
            Some((g, _)) if g == top => {}
            Some(((w, n), _)) => why.push(format!("top operator w{w}:{n}, expected w{}:{}", top.0, top.1)),
            None => why.push("no operator on the critical path".into()),
        },
        None => {
            let k = &got.by_kind;
            if k.waiting_for_input <= k.operator {
                why.push(format!(
                    "path not mostly waiting-for-input (wfi {:.1} ms, operators {:.1} ms)",
                    k.waiting_for_input as f64 / 1e6,
                    k.operator as f64 / 1e6
                ));
            }
        }
    }
    // The sidecar may name the worker a wait was on or, for the stretch
    // that worker was itself waiting, that worker's cause (`held_up_by`):
    // either is right, their split depends on the stages' timings.
    for (&(w, on), &(_, root)) in expected.waited_on.iter().zip(&expected.held_up_by) {
        let top = got.waits.get(&w).and_then(|v| v.iter().filter(|x| x.0.is_some()).max_by_key(|x| x.1));
        match top {
            Some((Some(o), _)) if *o == on || *o == root => {}
            Some((Some(o), ns)) => {
                let also = if root != on { format!(" or w{root}") } else { String::new() };
                why.push(format!("w{w} waited most on w{o} ({:.1} ms), expected w{on}{also}", *ns as f64 / 1e6))
            }
            _ => why.push(format!("w{w} waited on no worker, expected w{on}")),
        }
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(why)
    }
}

/// Runs of a scenario whose plan the machine did not realize are repeated,
/// up to this many in all (on a loaded machine a run realizes its plan
/// often enough that a few more attempts make a void one rare; a void one
/// is reported, not judged).
pub const ATTEMPTS: u32 = 6;

/// One scenario run and judged.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub scenario: Scenario,
    pub answer: Answer,
    /// The engine's measurements, largest operators and waits (a line).
    pub measured: String,
    /// Why the sidecar's answer is wrong; empty when right.
    pub wrong: Vec<String>,
    /// Set when no attempt realized the plan ([`realized`]): the run is not
    /// judged (`wrong` is then only informative).
    pub void: Option<String>,
    pub attempts: u32,
}

impl Outcome {
    pub fn judged(&self) -> bool {
        self.void.is_none()
    }

    pub fn right(&self) -> bool {
        self.judged() && self.wrong.is_empty()
    }

    pub fn verdict(&self) -> &'static str {
        match (self.judged(), self.wrong.is_empty()) {
            (false, _) => "void ",
            (true, true) => "ok   ",
            (true, false) => "WRONG",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sc = &self.scenario;
        write!(
            f,
            "{} seed {:#x}: {}\n    expected: {}\n    measured: {}\n    got:      {}",
            sc.shape.name(),
            sc.seed,
            sc.summary,
            sc.expected,
            self.measured,
            self.answer
        )?;
        if self.attempts > 1 {
            write!(f, "\n    attempts: {}", self.attempts)?;
        }
        if let Some(v) = &self.void {
            write!(f, "\n    VOID:     plan not realized: {v}")?;
        }
        if !self.wrong.is_empty() {
            write!(f, "\n    WRONG:    {}", self.wrong.join("; "))?;
        }
        Ok(())
    }
}

/// The engine's measurements in a line: the largest operators, and per
/// worker the worker it waited on longest.
fn measured_line(m: &[Measured]) -> String {
    let mut ops: Vec<(u64, usize, &str)> =
        m.iter().enumerate().flat_map(|(i, x)| x.ops.iter().map(move |(n, ns)| (*ns, i, *n))).collect();
    ops.sort_by(|a, b| b.cmp(a));
    let mut out: Vec<String> =
        ops.iter().take(3).map(|(ns, i, n)| format!("w{i}:{n} {:.1}ms", *ns as f64 / 1e6)).collect();
    let mut path: Vec<(u64, usize, &str)> = critical_work(m).into_iter().map(|((i, n), ns)| (ns, i, n)).collect();
    path.sort_by(|a, b| b.cmp(a));
    if !path.is_empty() {
        let top: Vec<String> =
            path.iter().take(2).map(|(ns, i, n)| format!("w{i}:{n} {:.1}ms", *ns as f64 / 1e6)).collect();
        out.push(format!("on its path {}", top.join(", ")));
    }
    let held = held_up(m);
    for (i, x) in m.iter().enumerate() {
        let waited = x.waited().into_iter().max_by_key(|x| x.1);
        if let Some((o, ns)) = waited {
            out.push(format!("w{i} waited on w{o} {:.1}ms", ns as f64 / 1e6));
        }
        match held[i].iter().max_by_key(|x| *x.1) {
            Some((&o, ns)) if Some(o) != waited.map(|w| w.0) => {
                out.push(format!("w{i} held up by w{o} {:.1}ms", *ns as f64 / 1e6))
            }
            _ => {}
        }
        if x.input > 0 {
            out.push(format!("w{i} slept {:.1}ms", x.input as f64 / 1e6));
        }
        if x.stalls > 0 {
            out.push(format!("w{i} stalled {}x {:.1}ms", x.stalls, x.stalled as f64 / 1e6));
        }
    }
    out.join(", ")
}

/// Generates, runs, analyzes and judges the scenario of `shape` and `seed`
/// (a run that does not realize the plan is repeated, [`ATTEMPTS`] in all).
/// With `SCENARIO_KEEP_DIR` set, the trace of a run the sidecar got wrong
/// is kept there (`SHAPE-SEED-wrong.rlog`, or `-void` if not judged).
pub fn run_one(shape: Shape, seed: u64, work: Work) -> Outcome {
    let scenario = Scenario::generate(shape, seed);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let r = match run(&scenario, work) {
            Ok(r) => r,
            Err(e) => {
                let wrong = vec![format!("the run failed: {e}")];
                return Outcome {
                    scenario,
                    answer: Answer::default(),
                    measured: String::new(),
                    wrong,
                    void: None,
                    attempts,
                };
            }
        };
        let void = realized(&scenario.expected, &r.measured).err();
        if void.is_some() && attempts < ATTEMPTS {
            continue;
        }
        let answer = analyze(&r.bytes, WINDOW_NS);
        let wrong = judge(&scenario.expected, &answer).err().unwrap_or_default();
        if let Some(dir) = std::env::var_os("SCENARIO_KEEP_DIR").filter(|_| !wrong.is_empty()) {
            // For a closer look: `sidecar` on the file, windows of 10 ms.
            let name = format!("{}-{:x}-{}.rlog", shape.name(), seed, if void.is_some() { "void" } else { "wrong" });
            let _ = std::fs::write(std::path::Path::new(&dir).join(name), &r.bytes);
        }
        return Outcome { measured: measured_line(&r.measured), scenario, answer, wrong, void, attempts };
    }
}

/// A batch's score for one shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub right: usize,
    /// Runs that realized their plan.
    pub judged: usize,
    /// Runs that did not (not judged).
    pub void: usize,
}

/// Per-shape tallies of a batch.
pub fn tally(outcomes: &[Outcome]) -> BTreeMap<Shape, Tally> {
    let mut t: BTreeMap<Shape, Tally> = BTreeMap::new();
    for o in outcomes {
        let e = t.entry(o.scenario.shape).or_default();
        e.right += o.right() as usize;
        e.judged += o.judged() as usize;
        e.void += !o.judged() as usize;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_seeded_and_sound() {
        for shape in Shape::ALL {
            for seed in 0..200 {
                let a = Scenario::generate(shape, seed);
                let b = Scenario::generate(shape, seed);
                assert_eq!(a.summary, b.summary);
                assert_eq!(a.expected, b.expected);
                assert!((2..=4).contains(&a.workers));
                if let Some((w, _)) = &a.expected.top {
                    assert!((*w as usize) < a.workers);
                }
                for &(w, on) in &a.expected.waited_on {
                    assert!(w != on && (w as usize) < a.workers && (on as usize) < a.workers);
                }
                if let Plan::Gather { cost, .. } = &a.plan {
                    // The straggler's round costs more than any other's,
                    // and its slow operator more than any other operator.
                    let (s, _) = a.expected.top.clone().unwrap();
                    let tot: Vec<u64> = cost.iter().map(|c| c.iter().sum()).collect();
                    let max = *cost[s as usize].iter().max().unwrap();
                    for w in 0..a.workers {
                        if w != s as usize {
                            assert!(tot[w] + 100_000 < tot[s as usize], "{}", a.summary);
                            assert!(cost[w].iter().all(|&c| c * 3 / 2 <= max), "{}", a.summary);
                        }
                    }
                }
            }
        }
    }

    /// Two workers, two rounds: w1's messages left last in round 0 (its
    /// Parse, 5 ns, is on the path), w0's in round 1 (Parse 3 + Join 7);
    /// w0's round-0 work and w1's round-1 work are off it. A third round
    /// that only w0 ran is not counted.
    #[test]
    fn the_engines_gather_path_runs_through_each_rounds_last_sender() {
        let t = Instant::now();
        let at = |us: u64| t + Duration::from_micros(us);
        let round = |us, work: Vec<(&'static str, u64)>| RoundWork { sent: at(us), work };
        let w0 = Measured {
            rounds: vec![
                round(10, vec![("Parse", 100)]),
                round(50, vec![("Parse", 3), ("Join", 7)]),
                round(90, vec![]),
            ],
            ..Measured::default()
        };
        let w1 = Measured {
            rounds: vec![round(20, vec![("Parse", 5)]), round(40, vec![("Parse", 100)])],
            ..Measured::default()
        };
        let got: Vec<((usize, &str), u64)> = critical_work(&[w0, w1]).into_iter().collect();
        assert_eq!(got, vec![((0, "Join"), 7), ((0, "Parse"), 3), ((1, "Parse"), 5)]);
    }

    /// A pipeline w0 -> w1 -> w2 (µs). w1 waits 0..50 on w0 (which sleeps
    /// for input), picks the message up late and sends at 70. w2 waits
    /// 10..70 on w1: 10..50 overlaps w1's wait and counts on w0 (40), 50..70
    /// is w1's own delay and counts on w1 (20). A chain never returns to a
    /// worker on it: w0's wait 45..48 on w2 (as clock error can make it)
    /// goes down w2's wait to w1, whose wait then was on w0 itself: the 3
    /// stay on w1. Likewise w1's wait on w0 counts 45..48 on w2 (w2 then
    /// waited on w1, on the chain): 47 on w0, 3 on w2. w2's 10..50 finds
    /// w0 waiting on w2 itself: its 40 stay on w0.
    #[test]
    fn a_wait_counts_on_whoever_held_its_sender_up() {
        let t = Instant::now();
        let at = |us: u64| t + Duration::from_micros(us);
        let span = |a, b, on| WaitSpan { start: at(a), end: at(b), on };
        let w0 = Measured { waits: vec![span(45, 48, 2)], ..Measured::default() };
        let w1 = Measured { waits: vec![span(0, 50, 0)], ..Measured::default() };
        let w2 = Measured { waits: vec![span(10, 70, 1)], ..Measured::default() };
        let held = held_up(&[w0, w1, w2]);
        let us = |m: &BTreeMap<usize, u64>| m.iter().map(|(&k, &v)| (k, v / 1000)).collect::<Vec<_>>();
        assert_eq!(us(&held[0]), vec![(1, 3)]);
        assert_eq!(us(&held[1]), vec![(0, 47), (2, 3)]);
        assert_eq!(us(&held[2]), vec![(0, 40), (1, 20)]);
    }

    #[test]
    fn rng_is_uniform_enough() {
        let mut r = Rng::new(7);
        let mut c = [0u32; 4];
        for _ in 0..40_000 {
            c[r.range(2, 5) as usize - 2] += 1;
        }
        assert!(c.iter().all(|&x| (9_000..11_000).contains(&x)), "{c:?}");
    }
}
