//! What-if: how long a window would have taken had some operators been
//! faster, from the trace alone. No I/O.
//!
//! # The model (DProf §5.2 "dCOZ", and Coz's virtual speedups)
//!
//! DProf predicts the effect of removing a straggler by replaying the
//! run's time-weighted DAG with the straggler's work shortened, keeping
//! the happens-before edges (`../shared/papers/benavides-2019-dprof-freezer.txt`
//! §5.2, §6). Coz (Curtsinger & Berger, SOSP 2015) asks the same question
//! with virtual speedups over many real runs; here one trace is replayed:
//!
//! - The window graph's worker chains are program order; every edge keeps
//!   its kind ([`crate::analysis::graph`]).
//! - **Sped-up work shrinks**: an execution of a chosen operator (or span)
//!   takes `1/factor` of its measured time (`inf`: none).
//! - **Other work is inelastic**: other executions, spans and unknown
//!   worker time (scheduling, work outside operators) keep their duration.
//! - **Waits are elastic**: a wait whose ending message is known ends when
//!   that message now arrives (its send plus the transit measured from the
//!   send to the wait's end), or at once if it already has.
//! - **Every message keeps its causality**: a read is never before its send,
//!   for all messages matched in the window, not only those that ended a
//!   wait: a message that arrived while its receiver was busy can become
//!   the one it waits for once things move. A read that would come first
//!   holds its execution there until the send (the execution stalls).
//! - **The outside world does not get faster**: waiting-for-input, and a
//!   wait whose ending nothing in the trace explains, end no earlier than
//!   they did. (A waiting-for-input gap shorter than [`INPUT_MIN`] is the
//!   engine's scheduling, not input: it keeps its duration.)
//! - **Input the program makes itself moves with it** (a closed loop): a
//!   waiting-for-input gap that the worker's own push ends (a send outside
//!   any execution: the driver loop's `input.send` once `step_while`
//!   returned) is the driver making its next input; it keeps its duration.
//!   DProf §5.2 keeps the outside world's edges inelastic; this one follows
//!   the worker's own progress, so it moves like its other work.
//!
//! The replay visits every point (vertex, send, read) once, in an order
//! that keeps the DAG's dependencies (program order, each send before its
//! read, the sender of a wait's message before the wait's end): measured
//! time order is one, but sorting every point took as long as the replays
//! themselves. Each worker's points are laid out in time order once per
//! window ([`Replay::new`], without sorting them), and the speedups asked
//! are replayed together in one pass that walks the workers in turn, each
//! as far as its messages allow ([`Replay::run_all`]).
//!
//! # Limits
//!
//! What the trace cannot show, the prediction cannot know: cache and memory
//! effects of faster code, contention that changes when work moves, input
//! that would arrive later anyway (it stays where it was), an engine that
//! would schedule differently (a timely worker that would have found the
//! message on an earlier poll is modelled as stalling until it comes), and
//! progress messages that did not end a wait. Windows are replayed one by
//! one from their measured start, and a window's time is from its first
//! point to its last end of work (a wait still going at its end belongs to
//! what ends it, later): the prediction for a run is the sum of its
//! windows' savings. A wait that a message of an earlier window ended, or
//! work that crosses a window's edge, is cut there (the earlier part does
//! not move the later one), so `sidecar whatif` analyzes a recorded run as
//! one window unless told otherwise.

use std::sync::Arc;

use crate::analysis::graph::{EKind, Graph, NONE};
use crate::analysis::model::Ns;

mod order;
#[cfg(test)]
mod reference;

/// The shortest waiting-for-input gap taken for input. A shorter one is
/// taken for the engine's own scheduling (Sager's typing calls any gap that
/// no message explains waiting-for-input: a timely worker running pagerank,
/// which reads no input after loading its graph, has one between most
/// operator executions, 2 µs on average, and now and then one of 40 µs)
/// and keeps its duration: pinned to its measured end, each would hold the
/// worker back to its measured times (the two 40 µs gaps of a pagerank run
/// held a worker 118 ms back and cut the predicted saving from 24 % to 3 %).
/// Input that a job waits on for real (a network source, a file, a timer)
/// comes in milliseconds.
pub const INPUT_MIN: Ns = 1_000_000;

/// A message matched in the window between two workers (local indices):
/// sent at `sent` on `src`, read at `read` on `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub src: u32,
    pub sent: Ns,
    pub dst: u32,
    pub read: Ns,
}

impl Link {
    /// When the replay takes its read: when it was read, and never before
    /// it was sent (clock trouble).
    pub(crate) fn read_at(&self) -> Ns {
        self.read.max(self.sent)
    }
}

/// One item of a speedup spec: `[wN:]NAME=FACTOR`.
#[derive(Clone, Debug, PartialEq)]
pub struct Speedup {
    /// Only this worker's executions (`wN:`), else every worker's.
    pub worker: Option<u32>,
    /// The operator's (or span's) name, or its id.
    pub target: String,
    /// How many times faster: `f64::INFINITY` for `inf` (no time at all).
    pub factor: f64,
}

impl Speedup {
    /// The factor as written: `2`, `1.5`, `inf`.
    pub fn factor_text(&self) -> String {
        if self.factor.is_infinite() {
            "inf".into()
        } else {
            format!("{}", self.factor)
        }
    }

    /// What it says, as a spec: `w0:Consume=2`.
    pub fn text(&self) -> String {
        let w = self.worker.map(|w| format!("w{w}:")).unwrap_or_default();
        format!("{w}{}={}", self.target, self.factor_text())
    }
}

/// Parses `OP=FACTOR[,wN:OP=FACTOR...]`: a name (or id) and how many times
/// faster, `inf` for no time at all; `wN:` limits it to worker N.
pub fn parse_spec(s: &str) -> Result<Vec<Speedup>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (lhs, factor) =
            item.rsplit_once('=').ok_or_else(|| format!("`{item}`: expected OPERATOR=FACTOR (e.g. Consume=2)"))?;
        let factor = match factor.trim() {
            "inf" | "infinity" => f64::INFINITY,
            f => f.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 1.0).ok_or_else(|| {
                format!("`{item}`: the factor `{f}` is not a number of times faster (1 or more) or `inf`")
            })?,
        };
        let (worker, target) = match lhs.split_once(':') {
            Some((w, t)) if w.starts_with('w') => {
                let n = w[1..].parse::<u32>().map_err(|_| format!("`{item}`: `{w}` is not a worker (w0, w1, ...)"))?;
                (Some(n), t)
            }
            _ => (None, lhs),
        };
        if target.is_empty() {
            return Err(format!("`{item}`: no operator named"));
        }
        out.push(Speedup { worker, target: target.to_string(), factor });
    }
    if out.is_empty() {
        return Err("an empty speedup spec (expected e.g. Consume=2 or w0:Consume=inf)".into());
    }
    Ok(out)
}

/// How much of its measured time each kind of work on each worker takes in
/// the replay: `scale[w]` lists (kind, 1/factor) for the sped-up kinds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scales(pub Vec<Vec<(EKind, f64)>>);

impl Scales {
    #[inline]
    fn of(&self, w: usize, k: EKind) -> f64 {
        self.0.get(w).and_then(|ks| ks.iter().find(|(x, _)| *x == k)).map_or(1.0, |&(_, s)| s)
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Vec::is_empty)
    }
}

/// What a replay predicts for the window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// The measured span: from the earliest chain start to the latest end
    /// of work.
    pub measured_ns: Ns,
    /// The span the replay gives.
    pub predicted_ns: Ns,
    /// Each vertex's replayed time.
    pub times: Vec<Ns>,
}

impl Prediction {
    pub fn saved_ns(&self) -> Ns {
        self.measured_ns.saturating_sub(self.predicted_ns)
    }
}

/// How the replay times a vertex: its tag. A vertex's tag is fixed by the
/// graph, whatever the speedup.
const V_START: u64 = 0; // a chain's first vertex: keeps its time
const V_WORK: u64 = 1; // work ends: its worker's last point + the (scaled) work
const V_TERM: u64 = 2; // a wait ends when its ending message now arrives
const V_KEEP: u64 = 3; // a gap that keeps its duration
const V_PIN: u64 = 4; // a wait that ends no earlier than it did
/// A vertex tag's bit: its replayed time is read after its worker has
/// passed it (see [`Slots`]).
const KEEP: u8 = 0x80;

/// `class` of a vertex whose edge is not work (a start, a wait): a point
/// inside it is at its start.
const NOT_WORK: u32 = u32::MAX;

/// A window prepared for replays: its graph, its messages, and each
/// worker's points in time order (laid out once).
///
/// # The order
///
/// A replay visits every point (vertex, send, read) once; what it computes
/// at a point depends only on its own worker's earlier points (program
/// order), on the send of the message it reads, and (a wait's end) on the
/// vertex that sent the message ending the wait. Any order keeping those
/// dependencies gives the same times as visiting the points in measured
/// time, which is one such order (program order is time order, and every
/// send precedes its read). Each worker's points are put in time order
/// apart (its chain's vertices, strictly increasing, and on each edge the
/// sends and reads that fall on it: [`order`]); a replay walks the workers
/// in turn, each as far as its dependencies allow. No sort: sorting all
/// points by time was 40 % of the ranking's instructions, sorting each
/// worker's sends and reads a quarter.
pub struct Replay {
    g: Arc<Graph>,
    /// Each worker's sends and reads in time order (built once), and the
    /// messages' send times by slot.
    lay: order::Layout,
    /// Per vertex, how the replay times it ([`V_START`]...), and whether
    /// its time is kept ([`KEEP`]).
    tags: Vec<u8>,
    /// Per chain, its last vertex ending work (`NONE`: none).
    last_work: Vec<u32>,
    /// Where the kept vertices' replayed times go ([`KEEP`]).
    kept: Slots,
    /// The earliest time of a point (`Ns::MAX`: none).
    first_point: Ns,
    measured_ns: Ns,
}

/// What a replay needs of a window's graph alone: how each vertex is
/// timed, each chain's last end of work, which vertices' times are kept
/// and where. Made beside [`Placement`], which needs the window's
/// messages: the two halves of [`Replay::new`] (a window's layout) can run
/// on two threads at once.
pub struct Rules {
    /// Per vertex, its tag, with [`KEEP`] if its time is kept.
    tags: Vec<u8>,
    last_work: Vec<u32>,
    kept: Slots,
}

impl Rules {
    /// The rules of `g`'s vertices.
    pub fn of(g: &Graph) -> Rules {
        let mut tags: Vec<u8> = (0..g.len()).map(|v| vertex_tag(g, v) as u8).collect();
        // (Work, and only work, is timed as work: [`vertex_tag`].)
        let work = |v: usize| u64::from(tags[v]) == V_WORK;
        let last_work: Vec<u32> =
            g.chains.iter().map(|&(a, b)| (a..b).rev().find(|&v| work(v as usize)).unwrap_or(NONE)).collect();
        let kept = Slots::kept(g, &mut tags, &last_work);
        Rules { tags, last_work, kept }
    }
}

/// A window's messages placed on its workers' chains, each worker's sends
/// and reads in the order a replay visits them ([`order`]): the half of a
/// window's layout that needs its messages (the other: [`Rules`]).
pub struct Placement {
    lay: order::Layout,
}

impl Placement {
    /// `links` placed on `g`'s chains (the links themselves are not kept:
    /// each point keeps its time).
    pub fn of(g: &Graph, links: Vec<Link>) -> Placement {
        Placement { lay: order::layout(g, &links) }
    }
}

/// Where a replay keeps the replayed times that are read after the walk
/// has passed their vertex: each chain's first vertex and its last end of
/// work (the window's span), and the sender of each message that ended a
/// wait (the wait's end is timed from it). Every other vertex's time is
/// needed only by its worker's next point, which reads it from the
/// worker's state: a window's replays keep a tenth or so of its vertices'
/// times, not all (`K` × 8 bytes a vertex was the largest array of the
/// ranking, pages faulted in afresh each window).
struct Slots {
    /// Per worker, the slot of its chain's first vertex (its kept vertices
    /// take the slots after it, in chain order).
    base: Vec<u32>,
    /// Per communication edge, the slot of its sender's vertex.
    comm: Vec<u32>,
    /// Per worker, the slot of its last vertex ending work (`NONE`: none).
    last_work: Vec<u32>,
    /// Slots in all.
    len: usize,
    /// Every vertex kept, each at its own index (for [`Prediction::times`]).
    all: bool,
}

impl Slots {
    /// The vertices whose times are kept, tagged [`KEEP`] in `tags`, and
    /// their slots.
    fn kept(g: &Graph, tags: &mut [u8], last_work: &[u32]) -> Slots {
        let starts = g.chains.iter().filter(|&&(s, e)| e > s).map(|&(s, _)| s);
        let ends = last_work.iter().copied().filter(|&v| v != NONE);
        for v in starts.chain(ends).chain(g.comms.iter().map(|c| c.src)) {
            tags[v as usize] |= KEEP;
        }
        // (Each vertex's rank among the kept ones, read where a comm's or a
        // chain's vertex needs it.)
        let mut rank = Vec::with_capacity(g.len());
        let mut n = 0u32;
        for &tag in tags.iter() {
            rank.push(n);
            n += u32::from(tag & KEEP != 0);
        }
        Slots {
            base: g.chains.iter().map(|&(s, _)| rank.get(s as usize).copied().unwrap_or(n)).collect(),
            comm: g.comms.iter().map(|c| rank[c.src as usize]).collect(),
            last_work: last_work.iter().map(|&v| if v == NONE { NONE } else { rank[v as usize] }).collect(),
            len: n as usize,
            all: false,
        }
    }

    /// Every vertex kept, at its index.
    fn every(g: &Graph, last_work: &[u32]) -> Slots {
        Slots {
            base: g.chains.iter().map(|c| c.0).collect(),
            comm: g.comms.iter().map(|c| c.src).collect(),
            last_work: last_work.to_vec(),
            len: g.len(),
            all: true,
        }
    }
}

/// The state of `K` replays sharing a pass over the points.
struct Lanes<'a, const K: usize> {
    /// Per vertex, the class of its work ([`Replay::classes`]).
    class: &'a [u32],
    /// Per class, what each replay scales it by.
    scale: Vec<[Scale; K]>,
    /// Where each replay starts.
    from: [Ns; K],
    /// Where the kept vertices' times go.
    slots: &'a Slots,
    /// Per kept vertex ([`Slots`]) and per message's send (by its slot:
    /// [`order::Point`]), its replayed time.
    times: Vec<[Ns; K]>,
    sent: Vec<[Ns; K]>,
    /// Per worker, where each replay stands ([`Standing`]).
    at: Vec<Standing<K>>,
    /// Per worker, its next vertex, and its next send or read in the
    /// layout.
    next: Vec<u32>,
    pos: Vec<u32>,
    /// Per message (by slot), whether its send was replayed.
    done: Vec<bool>,
}

/// Where a worker stands in `K` replays: per replay its cursor, and its last
/// vertex's replayed time (a read that stalls moves the cursor, not that);
/// and its next kept vertex's slot ([`Slots`]). Held by the walk while it
/// takes the worker's points.
#[derive(Clone, Copy)]
struct Standing<const K: usize> {
    cs: [Cursor; K],
    last: [Ns; K],
    slot: u32,
}

/// A worker's position while it is replayed: the measured time `a` of its
/// last fixed point and that point's replayed time `b`.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    a: Ns,
    b: Ns,
}

impl Replay {
    /// Lays out the window's points (see "The order" above).
    pub fn new(g: impl Into<Arc<Graph>>, links: Vec<Link>) -> Replay {
        let g: Arc<Graph> = g.into();
        let rules = Rules::of(&g);
        let placement = Placement::of(&g, links);
        Replay::of_parts(g, rules, placement)
    }

    /// [`Replay::new`] from its two parts, which may have been made on two
    /// threads at once: `rules` and `placement` of the graph `g`.
    pub fn of_parts(g: Arc<Graph>, rules: Rules, placement: Placement) -> Replay {
        let Rules { tags, last_work, kept } = rules;
        let Placement { lay } = placement;
        assert!(tags.len() == g.len() && lay.base.len() == g.chains.len(), "a layout's halves of another graph");
        let starts: Vec<u32> = g.chains.iter().map(|c| c.0).collect();
        let measured_ns = span_of(&g, &starts, &last_work, |v| g.t[v]);
        let first_point = lay.first;
        Replay { g, lay, tags, last_work, kept, first_point, measured_ns }
    }

    /// The window graph it replays.
    pub fn graph(&self) -> &Graph {
        &self.g
    }

    /// The window replayed with `scales`.
    pub fn run(&self, scales: &Scales) -> Prediction {
        self.run_all(std::slice::from_ref(scales)).pop().expect("one prediction per speedup")
    }

    /// The window replayed with each of `all`, in one pass over its points.
    pub fn run_all(&self, all: &[Scales]) -> Vec<Prediction> {
        self.replay_all(all, true)
    }

    /// [`Replay::run_all`] without each vertex's time (`times` empty): the
    /// spans alone, as the ranking needs.
    pub fn spans_all(&self, all: &[Scales]) -> Vec<Prediction> {
        self.replay_all(all, false)
    }

    fn replay_all(&self, all: &[Scales], times: bool) -> Vec<Prediction> {
        // Before the first sped-up piece of work starts, every point keeps
        // its measured time: each replay starts there, each worker at its
        // last point before it.
        let lanes: Vec<(&Scales, Ns)> = all.iter().map(|s| (s, self.first_change(s))).collect();
        self.replay_from(&lanes, times)
    }

    /// Each `(scales, from)` replayed with the points before `from` taken as
    /// measured.
    fn replay_from(&self, asked: &[(&Scales, Ns)], times: bool) -> Vec<Prediction> {
        let every;
        let slots = if times {
            every = Slots::every(&self.g, &self.last_work);
            &every
        } else {
            &self.kept
        };
        let (class, tables) = self.classes(asked);
        let class = &class[..];
        // (Up to four replays share a pass: each point's state for all of
        // them in one place.)
        let mut out = Vec::with_capacity(asked.len());
        for (i, chunk) in asked.chunks(4).enumerate() {
            let tables = &tables[4 * i..4 * i + chunk.len()];
            // (Replays that start at or before every point need not ask.)
            let from = chunk.iter().any(|&(_, f)| f > self.first_point);
            out.extend(match (chunk.len(), from) {
                (1, false) => self.replay_lanes::<1, false>(class, slots, tables, chunk),
                (2, false) => self.replay_lanes::<2, false>(class, slots, tables, chunk),
                (3, false) => self.replay_lanes::<3, false>(class, slots, tables, chunk),
                (_, false) => self.replay_lanes::<4, false>(class, slots, tables, chunk),
                (1, true) => self.replay_lanes::<1, true>(class, slots, tables, chunk),
                (2, true) => self.replay_lanes::<2, true>(class, slots, tables, chunk),
                (3, true) => self.replay_lanes::<3, true>(class, slots, tables, chunk),
                (_, true) => self.replay_lanes::<4, true>(class, slots, tables, chunk),
            });
        }
        out
    }

    /// `K` replays in one pass over the points: `tables[k][c]` is what
    /// replay `k` scales work of class `c` by; it starts at `asked[k].1`
    /// (`FROM`: some start after [`Replay::first_point`]). The workers are
    /// walked in turn, each as far as its dependencies allow: a read waits
    /// for its send, a wait's end for the vertex that sent its message. The
    /// points in measured-time order would be a valid order, so one always
    /// can go: the earliest point not yet taken.
    fn replay_lanes<const K: usize, const FROM: bool>(
        &self,
        class: &[u32],
        slots: &Slots,
        tables: &[Vec<f64>],
        asked: &[(&Scales, Ns)],
    ) -> Vec<Prediction> {
        let g = &*self.g;
        let from: [Ns; K] = std::array::from_fn(|k| asked[k].1);
        let mut st = Lanes {
            class,
            scale: (0..tables[0].len()).map(|c| std::array::from_fn(|k| Scale::of(tables[k][c]))).collect(),
            from,
            slots,
            times: vec![[0; K]; slots.len],
            sent: self.lay.sent.iter().map(|&t| [t; K]).collect(),
            at: (g.chains.iter().zip(&slots.base))
                .map(|(&(s, e), &slot)| Standing { cs: from.map(|f| start_cursor(g, s, e, f)), last: [0; K], slot })
                .collect(),
            next: g.chains.iter().map(|c| c.0).collect(),
            pos: self.lay.base.iter().map(|&b| self.lay.bounds[b as usize]).collect(),
            done: vec![false; self.lay.sent.len()],
        };
        let mut left = g.len() + self.lay.points.len();
        while left > 0 {
            let before = left;
            for w in 0..g.chains.len() {
                left -= self.walk::<K, FROM, false>(&mut st, w);
            }
            if left == before {
                // (Unreachable for a graph whose chains increase in time.
                // Taken anyway, so that a malformed graph still ends.)
                let w = (0..g.chains.len()).find(|&w| self.points_left(&st, w)).expect("points left");
                left -= self.walk::<K, FROM, true>(&mut st, w);
            }
        }
        let times = st.times;
        (0..K)
            .map(|k| {
                let predicted_ns = span_of(g, &slots.base, &slots.last_work, |i| times[i][k]);
                let times = if slots.all { times.iter().map(|x| x[k]).collect() } else { Vec::new() };
                Prediction { measured_ns: self.measured_ns, predicted_ns, times }
            })
            .collect()
    }

    /// Whether worker `w` has points not yet replayed.
    fn points_left<const K: usize>(&self, st: &Lanes<K>, w: usize) -> bool {
        let (s, e) = self.g.chains[w];
        let last = self.lay.base[w] as usize + (e - s) as usize;
        st.next[w] < e || (st.pos[w] as usize) < self.lay.bounds[last + 1] as usize
    }

    /// Worker `w`'s points replayed from where it stands, as far as its
    /// dependencies allow (`FORCE`: its next point alone, whatever they
    /// say); how many it took. The ranking's hot loop: where the worker
    /// stands ([`Standing`], and its next vertex) is held here while it
    /// walks and stored when it stops, and an edge's sends and reads are
    /// taken in a loop of their own, made for the edge's kind of work
    /// ([`Replay::edge_points`]).
    #[inline]
    fn walk<const K: usize, const FROM: bool, const FORCE: bool>(&self, st: &mut Lanes<K>, w: usize) -> usize {
        let (g, lay) = (&*self.g, &self.lay);
        let (s, e) = (g.chains[w].0 as usize, g.chains[w].1 as usize);
        let edge0 = lay.base[w] as usize;
        let mut v = st.next[w] as usize;
        let mut pos = st.pos[w] as usize;
        let mut me = st.at[w];
        // (Sliced to the chain's end: `v < e` checks every index below.)
        let (tags, class, t) = (&self.tags[..e], &st.class[..e], &g.t[..e]);
        let (v0, pos0) = (v, pos);
        loop {
            // The sends and reads on the edge into `v` (past the chain's
            // end: after its last vertex, where time passes as measured).
            let end = lay.bounds[edge0 + (v - s) + 1] as usize;
            if pos < end {
                let c = if v < e { class[v] } else { 0 };
                let n = if c == 0 {
                    self.edge_points::<K, FROM, FORCE, true>(st, &mut me.cs, c, pos, end)
                } else {
                    self.edge_points::<K, FROM, FORCE, false>(st, &mut me.cs, c, pos, end)
                };
                pos += n;
                if pos < end || FORCE {
                    break;
                }
            }
            if v == e {
                break;
            }
            let tag = tags[v];
            if tag & !KEEP == V_TERM as u8 && !FORCE {
                // (Its sender's worker's next vertex: this worker's is
                // `v`, kept here while it walks, and stored when it stops.)
                let src = g.comms[g.term[v] as usize].src;
                let by = g.w[src as usize] as usize;
                if (if by == w { v as u32 } else { st.next[by] }) <= src {
                    break;
                }
            }
            self.vertex_step::<K, FROM>(st, &mut me, v, (tag, t[v], class[v]));
            v += 1;
            if FORCE {
                break;
            }
        }
        (st.at[w], st.next[w], st.pos[w]) = (me, v as u32, pos as u32);
        (v - v0) + (pos - pos0)
    }

    /// The points `pos..end` of one edge, of class `c` (`PLAIN`: work no
    /// replay speeds up, the most common), replayed from the worker's
    /// cursor `cs` until a read whose send is not yet replayed (`FORCE`:
    /// the first point alone, whatever it reads); how many it took.
    #[inline(always)]
    fn edge_points<const K: usize, const FROM: bool, const FORCE: bool, const PLAIN: bool>(
        &self,
        st: &mut Lanes<K>,
        cs: &mut [Cursor; K],
        c: u32,
        pos: usize,
        end: usize,
    ) -> usize {
        // (The row's fields borrowed apart from the sends written below.)
        let (inside, row) = (c != NOT_WORK, &st.scale[if c == NOT_WORK { 0 } else { c as usize }]);
        let at = |c: &Cursor, k: usize, t: Ns| if PLAIN { map_plain(c, t) } else { map(c, inside, &row[k], t) };
        let points = &self.lay.points[pos..end];
        for (i, p) in points.iter().enumerate() {
            let m = p.slot as usize;
            if p.read {
                if !FORCE && !st.done[m] {
                    return i;
                }
                let sent = &st.sent[m];
                for k in 0..K {
                    if (!FROM || p.t >= st.from[k]) && at(&cs[k], k, p.t) < sent[k] {
                        // Read before it is sent: the execution stalls there.
                        cs[k] = Cursor { a: p.t, b: sent[k] };
                    }
                }
            } else {
                let out = &mut st.sent[m];
                for k in 0..K {
                    if !FROM || p.t >= st.from[k] {
                        out[k] = at(&cs[k], k, p.t);
                    }
                }
                st.done[m] = true;
            }
            if FORCE {
                return 1;
            }
        }
        points.len()
    }

    /// Vertex `v` of a worker standing at `me` replayed: its tag (how it is
    /// timed), measured time and class; its time kept if the tag says so
    /// ([`KEEP`]).
    #[inline(always)]
    fn vertex_step<const K: usize, const FROM: bool>(
        &self,
        st: &mut Lanes<K>,
        me: &mut Standing<K>,
        v: usize,
        (tag, t, c): (u8, Ns, u32),
    ) {
        let g = &*self.g;
        let from = st.from;
        let cs = &mut me.cs;
        // (A replay that starts later keeps the measured time here.)
        let mut x = [t; K];
        match (tag & !KEEP) as u64 {
            V_WORK => {
                // (Work no replay speeds up, the most common, apart.)
                if c == 0 {
                    for k in 0..K {
                        if !FROM || t >= from[k] {
                            x[k] = cs[k].b + t.saturating_sub(cs[k].a);
                            cs[k] = Cursor { a: t, b: x[k] };
                        }
                    }
                } else {
                    let row = &st.scale[c as usize];
                    for k in 0..K {
                        if !FROM || t >= from[k] {
                            x[k] = cs[k].b + row[k].apply(t.saturating_sub(cs[k].a));
                            cs[k] = Cursor { a: t, b: x[k] };
                        }
                    }
                }
            }
            tag => {
                // (The worker's vertex before: the chain's start has none.)
                let before = me.last;
                let y: [Ns; K] = match tag {
                    V_START => [t; K],
                    V_TERM => {
                        // The message keeps its transit (send to the wait's end).
                        let c = g.term[v] as usize;
                        let (sent, transit) = (st.times[st.slots.comm[c] as usize], t - g.t[g.comms[c].src as usize]);
                        std::array::from_fn(|k| before[k].max(sent[k].saturating_add(transit)))
                    }
                    V_KEEP => before.map(|b| b + (t - g.t[v - 1])),
                    _ => before.map(|b| b.max(t)),
                };
                for k in 0..K {
                    if !FROM || t >= from[k] {
                        x[k] = y[k];
                        cs[k] = Cursor { a: t, b: y[k] };
                    }
                }
            }
        }
        me.last = x;
        if st.slots.all || tag & KEEP != 0 {
            st.times[me.slot as usize] = x;
            me.slot += 1;
        }
    }

    /// The class of each vertex's work for `asked`, and each replay's scale
    /// per class: a class is one (worker, kind of work) that some replay
    /// speeds up; 0 is work that none speeds up, [`NOT_WORK`] is not work
    /// (a vertex is timed as work, [`V_WORK`], only if it ends work). One
    /// pass over the vertices: a worker that no replay speeds up has its
    /// classes from its tags alone.
    fn classes(&self, asked: &[(&Scales, Ns)]) -> (Vec<u32>, Vec<Vec<f64>>) {
        let g = &*self.g;
        let mut tables: Vec<Vec<f64>> = vec![vec![1.0]; asked.len()];
        // (A vertex in no chain, if any, is in none: not work.)
        let mut class: Vec<u32> = vec![NOT_WORK; g.len()];
        let work = |tag: u8| u64::from(tag & !KEEP) == V_WORK;
        for (w, &(s, e)) in g.chains.iter().enumerate() {
            // The kinds some replay scales on this worker, each its class.
            let mut kinds: Vec<(EKind, u32)> = Vec::new();
            for (s, _) in asked {
                for &(k, _) in s.0.get(w).map_or(&[][..], |ks| &ks[..]) {
                    if !kinds.iter().any(|x| x.0 == k) {
                        kinds.push((k, tables[0].len() as u32));
                        for (t, (s, _)) in tables.iter_mut().zip(asked) {
                            t.push(s.of(w, k));
                        }
                    }
                }
            }
            let (s, e) = (s as usize, e as usize);
            let mine = class[s..e].iter_mut().zip(&self.tags[s..e]);
            if kinds.is_empty() {
                mine.for_each(|(c, &tag)| *c = if work(tag) { 0 } else { NOT_WORK });
            } else {
                for ((c, &tag), kind) in mine.zip(&g.kind[s..e]) {
                    if work(tag) {
                        *c = kinds.iter().find(|x| x.0 == *kind).map_or(0, |x| x.1);
                    }
                }
            }
        }
        (class, tables)
    }

    /// Where the first piece of work that `scales` shrinks starts (`Ns::MAX`:
    /// none): each sped-up worker's chain read until its first such piece.
    fn first_change(&self, scales: &Scales) -> Ns {
        first_change(&self.g, scales)
    }
}

/// From the earliest chain start to the latest end of work (an execution,
/// a span, unknown worker time) of `g`'s chains, with `ts(i)` the time at
/// index `i`: `starts[w]` indexes chain `w`'s first vertex, `ends[w]` its
/// last end of work (`NONE`: none), as vertices or as a replay's slots
/// ([`Slots`]). A wait still going at the window's end is not the window's
/// work: what ends it is in a later window, or outside.
fn span_of(g: &Graph, starts: &[u32], ends: &[u32], ts: impl Fn(usize) -> Ns) -> Ns {
    let start = g.chains.iter().zip(starts).filter(|&(&(a, b), _)| b > a).map(|(_, &i)| ts(i as usize)).min();
    // (Replayed times never decrease along a chain.)
    let end = ends.iter().filter(|&&i| i != NONE).map(|&i| ts(i as usize)).max();
    match (start, end) {
        (Some(s), Some(e)) => e.saturating_sub(s),
        _ => 0,
    }
}

/// A worker's cursor when a replay starts at `from`: at its last vertex
/// before it (its first vertex if none).
fn start_cursor(g: &Graph, s: u32, e: u32, from: Ns) -> Cursor {
    let before = g.t[s as usize..e as usize].partition_point(|&t| t < from) as u32;
    let t0 = match before {
        0 if e > s => g.t[s as usize],
        0 => 0,
        k => g.t[(s + k - 1) as usize],
    };
    Cursor { a: t0, b: t0 }
}

/// The replayed time of measured time `t` on a worker at `c`, inside
/// work scaled by `s` or (`work` false) inside a wait.
#[inline]
fn map(c: &Cursor, work: bool, s: &Scale, t: Ns) -> Ns {
    if t <= c.a {
        c.b.saturating_sub(c.a - t)
    } else if work {
        c.b + s.apply(t - c.a)
    } else {
        // Nothing happens inside a wait: a point there is at its start.
        c.b
    }
}

/// [`map`] inside work that no replay scales.
#[inline]
fn map_plain(c: &Cursor, t: Ns) -> Ns {
    if t <= c.a {
        c.b.saturating_sub(c.a - t)
    } else {
        c.b + (t - c.a)
    }
}

/// How the replay times vertex `v` (its tag), given the graph alone.
#[inline]
fn vertex_tag(g: &Graph, v: usize) -> u64 {
    match g.kind[v] {
        EKind::Start => V_START,
        EKind::Op(_) | EKind::Span(_) | EKind::Unknown => V_WORK,
        // (A send after the wait's end is clock trouble: nothing here
        // ended the wait.)
        EKind::Wait if g.term[v] != NONE && g.t[g.comms[g.term[v] as usize].src as usize] <= g.t[v] => {
            // A sender visited after the wait in time order (a cycle of
            // messages at one instant) is taken at its measured time, as
            // that order did: the wait then ends no earlier than measured.
            if sent_first(g, g.comms[g.term[v] as usize].src as usize, v) {
                V_TERM
            } else {
                V_PIN
            }
        }
        // A gap too short to be input: the engine's own scheduling. A
        // gap the worker's own push ended: the program's driver making
        // its next input (closed loop): both keep their duration.
        EKind::WaitingForInput if g.t[v] - g.t[v - 1] < INPUT_MIN || own_push(g, v) => V_KEEP,
        // Waiting for input, or a wait nothing here ended: the outside
        // world keeps its time.
        EKind::Wait | EKind::WaitingForInput => V_PIN,
    }
}

/// Whether vertex `src` comes before the wait's end `v` in measured time
/// (`t[src] <= t[v]`): at the same time, work first, then waits ending
/// there in the order their ending messages were sent (a sender whose own
/// wait ended at the very time it sent goes first), then by index.
fn sent_first(g: &Graph, src: usize, v: usize) -> bool {
    if g.t[src] < g.t[v] || !is_wait_end(g, src) {
        return true;
    }
    (same_time_depth(g, src), src) < (same_time_depth(g, v), v)
}

/// An operator execution or a span ends at `v`.
fn is_execution(g: &Graph, v: usize) -> bool {
    matches!(g.kind[v], EKind::Op(_) | EKind::Span(_))
}

/// The gap into `v` was ended by its worker's own push outside any
/// execution (a message or progress sent by the program's driver: input
/// fed, advanced, flushed): the next stretch of its chain is another gap,
/// not an execution starting at `v`.
fn own_push(g: &Graph, v: usize) -> bool {
    let w = g.w[v] as usize;
    v + 1 < g.chains[w].1 as usize && !is_execution(g, v + 1)
}

/// (The reference replay's; the replay reads work off the vertices' tags.)
#[cfg(test)]
fn is_work(g: &Graph, v: usize) -> bool {
    matches!(g.kind[v], EKind::Op(_) | EKind::Span(_) | EKind::Unknown)
}

fn is_wait_end(g: &Graph, v: usize) -> bool {
    matches!(g.kind[v], EKind::Wait | EKind::WaitingForInput)
}

/// How many waits ending at `v`'s time lead to `v` through their ending
/// messages (0: its message's sender did not end a wait at that time).
fn same_time_depth(g: &Graph, mut v: usize) -> u32 {
    let mut depth = 0;
    // (Bounded: a cycle of messages at one instant cannot be causal.)
    while depth < 64 && g.term[v] != NONE {
        let src = g.comms[g.term[v] as usize].src as usize;
        if g.t[src] != g.t[v] || !is_wait_end(g, src) {
            break;
        }
        depth += 1;
        v = src;
    }
    depth
}

/// `d` scaled by `s`, rounded as `f64::round` does (exact for 1). The
/// replay takes it through [`Scale`], which does the ranking's factors, 2
/// and `inf`, in integers.
#[inline]
fn scaled(d: Ns, s: f64) -> Ns {
    if s == 1.0 {
        d
    } else {
        round(d as f64 * s)
    }
}

/// A scale ([`scaled`]) made ready for the replay's hot loop: where the
/// rounded product is exact in integers (by 1; by 0, `inf`; by a power of
/// two's inverse, the ranking's 2× among them, for a duration below 2^53,
/// which converts exactly), it is `((d & keep) + add) >> shift`: one
/// comparison of integers, not a product of floats and its rounding, once
/// per replay at every send, read and end of work of a sped-up kind (before,
/// [`scaled`] tested for these factors there, three float comparisons).
#[derive(Clone, Copy, Debug)]
struct Scale {
    s: f64,
    keep: u64,
    add: u64,
    shift: u32,
    /// Durations below this are scaled in integers (0: none).
    below: Ns,
}

impl Scale {
    fn of(s: f64) -> Scale {
        let float = Scale { s, keep: !0, add: 0, shift: 0, below: 0 };
        if s == 1.0 {
            Scale { below: Ns::MAX, ..float }
        } else if s == 0.0 {
            Scale { keep: 0, below: Ns::MAX, ..float }
        } else {
            // 2^-k exactly: `d * s` rounds, halves up, to (d + 2^(k-1)) >> k.
            let k = (1.0 / s).log2().round();
            if (1.0..64.0).contains(&k) && s == (-k).exp2() {
                let k = k as u32;
                Scale { add: 1 << (k - 1), shift: k, below: 1 << 53, ..float }
            } else {
                float
            }
        }
    }

    /// [`scaled`]`(d, s)`.
    #[inline(always)]
    fn apply(&self, d: Ns) -> Ns {
        if d < self.below {
            ((d & self.keep) + self.add) >> self.shift
        } else {
            scaled(d, self.s)
        }
    }
}

/// `x.round() as Ns` for `x >= 0` (halves away from zero), without the
/// call to libm's `round` (the build's baseline x86-64 has no rounding
/// instruction): the conversion truncates, and the fraction left is exact.
#[inline]
fn round(x: f64) -> Ns {
    // (From 2^52 on every double is an integer already.)
    if x < 4_503_599_627_370_496.0 {
        let i = x as Ns;
        if x - i as f64 >= 0.5 {
            i + 1
        } else {
            i
        }
    } else {
        x.round() as Ns
    }
}

/// Where the first piece of work that `scales` shrinks starts in `g`
/// (`Ns::MAX`: none): each sped-up worker's chain read until its first
/// such piece (the replay and its reference start there).
pub(crate) fn first_change(g: &Graph, scales: &Scales) -> Ns {
    let mut from = Ns::MAX;
    for (w, &(s, e)) in g.chains.iter().enumerate() {
        if scales.0.get(w).is_none_or(|k| k.iter().all(|&(_, x)| x == 1.0)) {
            continue;
        }
        if let Some(v) = (s as usize + 1..e as usize).find(|&v| scales.of(w, g.kind[v]) != 1.0) {
            from = from.min(g.t[v - 1]);
        }
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::GraphBuilder;
    use crate::analysis::model::MsgKind;

    fn scales(n: usize, which: &[(usize, u32, f64)]) -> Scales {
        let mut s = Scales(vec![Vec::new(); n]);
        for &(w, op, f) in which {
            s.0[w].push((EKind::Op(op), 1.0 / f));
        }
        s
    }

    #[test]
    fn specs_parse_and_refuse_clearly() {
        let s = parse_spec("Consume=2, w1:Map=inf,3=1.5").unwrap();
        assert_eq!(s[0], Speedup { worker: None, target: "Consume".into(), factor: 2.0 });
        assert_eq!((s[1].worker, s[1].target.as_str(), s[1].factor_text()), (Some(1), "Map", "inf".into()));
        assert_eq!(s[2].text(), "3=1.5");
        for (bad, says) in [
            ("Consume", "expected OPERATOR=FACTOR"),
            ("Map=0", "1 or more"),
            ("Map=0.5", "1 or more"),
            ("wx:Map=2", "not a worker"),
            ("", "empty"),
        ] {
            let e = parse_spec(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// A chain: one worker, operators 1 [0, 60) and 2 [60, 100). Operator 1
    /// twice as fast: 30 + 40 = 70; no time at all: 40.
    #[test]
    fn a_chain_shrinks_by_the_operator_alone() {
        let mut b = GraphBuilder::new((0, 100), 1);
        b.segment(0, 0, 60, EKind::Op(1));
        b.segment(0, 60, 100, EKind::Op(2));
        let g = b.build();
        let r = Replay::new(g.clone(), Vec::new());
        assert_eq!(r.run(&scales(1, &[])).predicted_ns, 100);
        assert_eq!(r.run(&scales(1, &[(0, 1, 2.0)])).predicted_ns, 70);
        assert_eq!(r.run(&scales(1, &[(0, 1, f64::INFINITY)])).predicted_ns, 40);
    }

    /// A gather with two stragglers: w0 computes 100 (op 1), w1 computes 80
    /// (op 1), w2 computes 10 and waits for both, then merges 20 (op 2).
    /// Measured: 120. w0 2× faster: w0 sends at 50, w1 still at 80, so w2
    /// reads at 80 and ends at 100: saving 20, not the 50 a share reading
    /// of w0's 100 ns on the path would say. Both 2×: 50 + 20 = 70.
    #[test]
    fn a_gather_with_two_stragglers_gains_only_to_the_second() {
        let mut b = GraphBuilder::new((0, 1000), 3);
        b.segment(0, 0, 100, EKind::Op(1));
        b.segment(1, 0, 80, EKind::Op(1));
        b.segment(2, 0, 10, EKind::Op(3));
        b.segment(2, 10, 100, EKind::Wait);
        b.segment(2, 100, 120, EKind::Op(2));
        b.terminated_wait(2, 100, 0, 100, 7, MsgKind::Data);
        let g = b.build();
        let links = [Link { src: 0, sent: 100, dst: 2, read: 100 }, Link { src: 1, sent: 80, dst: 2, read: 100 }];
        let r = Replay::new(g.clone(), links.to_vec());
        assert_eq!(r.run(&scales(3, &[])).predicted_ns, 120);
        assert_eq!(r.run(&scales(3, &[(0, 1, 2.0)])).predicted_ns, 100);
        assert_eq!(r.run(&scales(3, &[(0, 1, 2.0), (1, 1, 2.0)])).predicted_ns, 70);
        // The second straggler alone gains nothing: w0 still sends at 100.
        assert_eq!(r.run(&scales(3, &[(1, 1, 2.0)])).predicted_ns, 120);
    }

    /// A pipeline: w0 produces (op 1) [0, 50) and sends; w1 waits [0, 50),
    /// then consumes (op 2) [50, 80). Stage 1 2× faster: w1 starts at 25,
    /// ends at 55. Stage 2 2× faster: 50 + 15 = 65.
    #[test]
    fn a_pipeline_moves_with_its_first_stage() {
        let mut b = GraphBuilder::new((0, 1000), 2);
        b.segment(0, 0, 50, EKind::Op(1));
        b.segment(1, 0, 50, EKind::Wait);
        b.segment(1, 50, 80, EKind::Op(2));
        b.terminated_wait(1, 50, 0, 50, 1, MsgKind::Data);
        let g = b.build();
        let links = [Link { src: 0, sent: 50, dst: 1, read: 50 }];
        let r = Replay::new(g.clone(), links.to_vec());
        assert_eq!(r.run(&scales(2, &[(0, 1, 2.0)])).predicted_ns, 55);
        assert_eq!(r.run(&scales(2, &[(1, 2, 2.0)])).predicted_ns, 65);
    }

    /// A wait that stops being one: w1 works (op 2) [0, 30), waits [30, 50)
    /// for w0's message (sent at 50, the end of op 1 [0, 50)), then works
    /// (op 3) [50, 80). w0 2× faster sends at 25, before w1 gets to its
    /// wait: there is none, op 3 runs [30, 60).
    #[test]
    fn a_wait_that_stops_being_one() {
        let mut b = GraphBuilder::new((0, 1000), 2);
        b.segment(0, 0, 50, EKind::Op(1));
        b.segment(1, 0, 30, EKind::Op(2));
        b.segment(1, 30, 50, EKind::Wait);
        b.segment(1, 50, 80, EKind::Op(3));
        b.terminated_wait(1, 50, 0, 50, 1, MsgKind::Data);
        let g = b.build();
        let links = [Link { src: 0, sent: 50, dst: 1, read: 50 }];
        let p = Replay::new(g.clone(), links.to_vec()).run(&scales(2, &[(0, 1, 2.0)]));
        assert_eq!(p.predicted_ns, 60);
        let (a, e) = g.chains[1];
        let w1: Vec<Ns> = p.times[a as usize..e as usize].to_vec();
        assert_eq!(w1, vec![0, 30, 30, 60], "the wait takes no time");
    }

    /// A wait that stops being one, and a read that becomes one: w1 reads
    /// w0's message in the middle of its own work (op 2 [0, 100), read at
    /// 60; w0 sent it at 40 from op 1 [0, 50)). w1's op 2 4× faster: the
    /// read comes at 15, before the send (40): the execution stalls there
    /// until 40, then the rest (40 ns measured, 10 replayed) ends at 50.
    /// Without the message it would have ended at 25.
    #[test]
    fn a_message_read_while_busy_can_become_a_wait() {
        let mut b = GraphBuilder::new((0, 1000), 2);
        b.segment(0, 0, 50, EKind::Op(1));
        b.segment(1, 0, 100, EKind::Op(2));
        let g = b.build();
        let links = [Link { src: 0, sent: 40, dst: 1, read: 60 }];
        let p = Replay::new(g.clone(), links.to_vec()).run(&scales(2, &[(1, 2, 4.0)]));
        assert_eq!(p.predicted_ns, 50);
        assert_eq!(
            Replay::new(g.clone(), Vec::new()).run(&scales(2, &[(1, 2, 4.0)])).predicted_ns,
            50,
            "w0 ends at 50 anyway"
        );
        let p = Replay::new(g.clone(), links.to_vec()).run(&scales(2, &[(1, 2, 4.0), (0, 1, 1.0)]));
        assert_eq!(p.times[g.chains[1].1 as usize - 1], 50);
    }

    /// A closed loop: w0 works 4 ms (op 1), then its driver makes the next
    /// input for 2 ms and pushes it (a send outside any execution: the gap
    /// is followed by another gap, not by an execution), then works 4 ms
    /// more (op 1). Op 1 2× faster: 2 + 2 + 2 = 6 ms, the driver's gap
    /// moving with the work before it. The same gap ended by op 1's start
    /// (input from outside) keeps its end at 6 ms: 6 + 2 = 8 ms.
    #[test]
    fn input_the_driver_pushes_moves_with_the_replay() {
        const MS: Ns = 1_000_000;
        let layout = |pushed: bool| {
            let mut b = GraphBuilder::new((0, 100 * MS), 1);
            b.segment(0, 0, 4 * MS, EKind::Op(1));
            b.segment(0, 4 * MS, 6 * MS, EKind::WaitingForInput);
            let at = if pushed { 6 * MS + 1_000 } else { 6 * MS };
            if pushed {
                // The gap after the push, up to the next execution.
                b.segment(0, 6 * MS, at, EKind::Unknown);
            }
            b.segment(0, at, at + 4 * MS, EKind::Op(1));
            b.build()
        };
        let g = layout(true);
        assert_eq!(Replay::new(g.clone(), Vec::new()).run(&scales(1, &[(0, 1, 2.0)])).predicted_ns, 6 * MS + 1_000);
        let g = layout(false);
        assert_eq!(Replay::new(g.clone(), Vec::new()).run(&scales(1, &[(0, 1, 2.0)])).predicted_ns, 8 * MS);
    }

    /// Waiting for input keeps its end: w0 works 1 ms (op 2), waits for
    /// input until 4 ms, then works [4, 10) ms (op 1). Nothing before the
    /// input gets faster, so only op 1 itself can gain. A gap shorter than
    /// [`INPUT_MIN`] is scheduling: it keeps its duration instead.
    #[test]
    fn input_arrives_when_it_did() {
        const MS: Ns = 1_000_000;
        let mut b = GraphBuilder::new((0, 100 * MS), 1);
        b.segment(0, 0, MS, EKind::Op(2));
        b.segment(0, MS, 4 * MS, EKind::WaitingForInput);
        b.segment(0, 4 * MS, 10 * MS, EKind::Op(1));
        let g = b.build();
        let r = Replay::new(g.clone(), Vec::new());
        assert_eq!(r.run(&scales(1, &[(0, 2, f64::INFINITY)])).predicted_ns, 10 * MS);
        assert_eq!(r.run(&scales(1, &[(0, 1, 2.0)])).predicted_ns, 7 * MS);
        let mut b = GraphBuilder::new((0, 100 * MS), 1);
        b.segment(0, 0, MS, EKind::Op(2));
        b.segment(0, MS, MS + 2_000, EKind::WaitingForInput);
        b.segment(0, MS + 2_000, 2 * MS, EKind::Op(1));
        let g = b.build();
        assert_eq!(Replay::new(g.clone(), Vec::new()).run(&scales(1, &[(0, 2, f64::INFINITY)])).predicted_ns, MS);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// The rounding is `f64::round`'s, halves and all.
            #[test]
            fn rounding_is_the_standard_librarys(x in 0.0f64..1e20, i in 0u64..1 << 53, half in any::<bool>()) {
                prop_assert_eq!(round(x), x.round() as Ns);
                let y = i as f64 + if half { 0.5 } else { 0.0 };
                prop_assert_eq!(round(y), y.round() as Ns);
                for z in [0.0, 0.49999999999999994, 0.5, 1.5, 2.5, 4503599627370495.5, 1.8446744073709552e19, 1e30] {
                    prop_assert_eq!(round(z), z.round() as Ns);
                }
            }

            /// Scaling in integers (by 1, 1/2, 0) gives what the product in
            /// `f64`, rounded, gives; for any duration and scale.
            #[test]
            fn scaling_is_the_rounded_product(d in any::<u64>(), small in 0u64..1 << 54, s in 0.0f64..1.0, k in 1i32..70) {
                for d in [d, small, d >> 11, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, u64::MAX] {
                    for s in [s, 0.0, 0.5, 1.0, 0.25, (-k as f64).exp2(), 1.0 / 3.0] {
                        let product = if s == 1.0 { d } else { (d as f64 * s).round() as Ns };
                        prop_assert_eq!(scaled(d, s), product, "{} * {}", d, s);
                        // (And made ready for the hot loop.)
                        prop_assert_eq!(Scale::of(s).apply(d), product, "{} * {} ready", d, s);
                    }
                }
            }
        }

        /// A random window: `n` workers, each a sequence of operator
        /// executions with waits between them, and messages sent inside
        /// executions, read inside later executions of other workers; a
        /// wait whose next execution reads a message is ended by the last
        /// of them to be sent.
        fn window(n: usize, seed: u64) -> (Graph, Vec<Link>) {
            let mut rng = seed | 1;
            let mut next = move |m: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % m
            };
            let mut execs: Vec<Vec<(Ns, Ns, u32)>> = vec![Vec::new(); n];
            for e in execs.iter_mut() {
                let mut t = 0;
                for _ in 0..1 + next(6) {
                    let gap = next(3) * next(40);
                    let d = 1 + next(50);
                    e.push((t + gap, t + gap + d, 1 + next(3) as u32));
                    t += gap + d;
                }
            }
            let mut links = Vec::new();
            for _ in 0..next(12) {
                let (i, j) = (next(n as u64) as usize, next(n as u64) as usize);
                if i == j {
                    continue;
                }
                let (s0, s1, _) = execs[i][next(execs[i].len() as u64) as usize];
                let sent = s0 + next(s1 - s0 + 1);
                if let Some(&(r0, r1, _)) = execs[j].iter().find(|x| x.1 >= sent) {
                    let read = r0.max(sent) + next(r1 - r0.max(sent) + 1);
                    links.push(Link { src: i as u32, sent, dst: j as u32, read });
                }
            }
            let mut b = GraphBuilder::new((0, 10_000), n);
            for (w, e) in execs.iter().enumerate() {
                let mut t = 0;
                for &(s, end, op) in e {
                    if s > t {
                        // The last message sent among those read in the
                        // execution after the gap, if it was sent in the gap.
                        let last = links
                            .iter()
                            .filter(|l| l.dst as usize == w && l.read >= s && l.read <= end)
                            .max_by_key(|l| l.sent);
                        match last {
                            Some(l) if l.sent > t && l.sent <= s => {
                                b.segment(w, t, s, EKind::Wait);
                                b.terminated_wait(w, s, l.src as usize, l.sent, 1, MsgKind::Data);
                            }
                            _ => b.segment(w, t, s, EKind::WaitingForInput),
                        }
                    }
                    b.segment(w, s, end, EKind::Op(op));
                    t = end;
                }
            }
            (b.build(), links)
        }

        /// A xorshift generator (the analysis imports nothing else of the
        /// sidecar, not even in tests).
        struct Rng(u64);
        impl Rng {
            fn range(&mut self, lo: u64, hi: u64) -> u64 {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                lo + self.0 % (hi - lo).max(1)
            }
        }

        /// A window with what real ones have now and then: executions,
        /// spans, unknown time, waits for input long and short, waits
        /// ended by a message sent at the very time they end (on a worker
        /// whose own wait ended then), or sent after they end (clock
        /// trouble); messages read before they were sent, read inside
        /// waits, to workers the window does not have. Times on a coarse
        /// grid, so that points of different workers often coincide.
        fn rich_window(n: usize, seed: u64) -> (Graph, Vec<Link>) {
            let mut rng = Rng(seed | 1);
            let mut b = GraphBuilder::new((0, 400 * INPUT_MIN), n);
            let span = b.span(77);
            let mut ends: Vec<Vec<(Ns, bool)>> = vec![Vec::new(); n];
            for w in 0..n {
                let mut t = rng.range(0, 3) * 10;
                for _ in 0..rng.range(1, 12) {
                    let d = match rng.range(0, 6) {
                        0 => rng.range(1, 4) * INPUT_MIN,
                        _ => rng.range(1, 8) * 10,
                    };
                    let kind = match rng.range(0, 8) {
                        0 | 1 => EKind::Op(1 + rng.range(0, 3) as u32),
                        2 => span,
                        3 => EKind::Unknown,
                        4 | 5 => EKind::Wait,
                        _ => EKind::WaitingForInput,
                    };
                    b.segment(w, t, t + d, kind);
                    ends[w].push((t + d, kind == EKind::Wait));
                    // (Now and then a hole: unknown time.)
                    t += d + rng.range(0, 3) * rng.range(0, 2) * 10;
                }
            }
            let pick = |rng: &mut Rng, w: usize| ends[w][rng.range(0, ends[w].len() as u64) as usize];
            for w in 0..n {
                for &(at, is_wait) in &ends[w] {
                    if !is_wait || rng.range(0, 4) == 0 {
                        continue;
                    }
                    let src = rng.range(0, n as u64) as usize;
                    // At a bound of the sender (often the same instant),
                    // or anywhere before, or (rarely) after.
                    let sent = match rng.range(0, 5) {
                        0 => rng.range(0, at + 1),
                        1 => at + rng.range(1, 30),
                        _ => pick(&mut rng, src).0.min(at + rng.range(0, 2) * 20),
                    };
                    b.terminated_wait(w, at, src, sent, 1, MsgKind::Data);
                }
            }
            let mut links = Vec::new();
            for _ in 0..rng.range(0, 30) {
                let (src, dst) = (rng.range(0, n as u64 + 1) as u32, rng.range(0, n as u64) as u32);
                let sent = if (src as usize) < n && rng.range(0, 2) == 0 {
                    pick(&mut rng, src as usize).0
                } else {
                    rng.range(0, 60) * 10
                };
                let read = match rng.range(0, 4) {
                    0 => sent.saturating_sub(rng.range(0, 30)),
                    1 => pick(&mut rng, dst as usize).0.max(sent),
                    _ => sent + rng.range(0, 40) * 5,
                };
                links.push(Link { src, sent, dst, read });
            }
            (b.build(), links)
        }

        /// Up to four random speedups of a window's operators and span,
        /// on one worker or all.
        fn random_scales(n: usize, seed: u64) -> Vec<Scales> {
            let mut rng = Rng(seed.rotate_left(17) | 1);
            (0..rng.range(1, 5))
                .map(|_| {
                    let mut s = Scales(vec![Vec::new(); n]);
                    for _ in 0..rng.range(0, 4) {
                        let k = match rng.range(0, 5) {
                            0 => EKind::Span(0),
                            1 => EKind::Unknown,
                            x => EKind::Op(x as u32),
                        };
                        let f = [1.0, 0.5, 0.0, 0.25, 1.0 / 3.0][rng.range(0, 5) as usize];
                        let ws: Vec<usize> =
                            if rng.range(0, 2) == 0 { (0..n).collect() } else { vec![rng.range(0, n as u64) as usize] };
                        for w in ws {
                            s.0[w].push((k, f));
                        }
                    }
                    s
                })
                .collect()
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            /// The replay in its dependency order, all speedups in one pass,
            /// gives exactly what the first replay gave (every point sorted
            /// by measured time, one speedup at a time): every vertex's
            /// time, for windows with every kind of point.
            #[test]
            fn the_replay_agrees_exactly_with_the_sorted_reference(n in 1usize..6, seed in any::<u64>(), rich in any::<bool>()) {
                let (g, links) = if rich { rich_window(n, seed) } else { window(n.max(2), seed) };
                let all = random_scales(g.chains.len(), seed);
                let (new, old) = (Replay::new(g.clone(), links.to_vec()), reference::Sorted::new(&g, &links));
                let got = new.run_all(&all);
                prop_assert_eq!(got.len(), all.len());
                // (The spans alone keep only some vertices' times: the same spans.)
                let spans = new.spans_all(&all);
                prop_assert_eq!(spans.iter().map(|p| p.predicted_ns).collect::<Vec<_>>(), got.iter().map(|p| p.predicted_ns).collect::<Vec<_>>());
                for (s, p) in all.iter().zip(&got) {
                    let want = old.run(s);
                    prop_assert_eq!(&p.times, &want.times, "{:?}", s);
                    prop_assert_eq!((p.measured_ns, p.predicted_ns), (want.measured_ns, want.predicted_ns));
                    prop_assert_eq!(p, &new.run(s));
                    prop_assert_eq!(new.spans_all(std::slice::from_ref(s))[0].predicted_ns, p.predicted_ns);
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            /// A factor of 1 reproduces the measured window exactly; a
            /// larger speedup never predicts a longer window; an operator
            /// nobody runs predicts no saving.
            #[test]
            fn replays_are_exact_monotone_and_local(n in 2usize..5, seed in any::<u64>(), op in 1u32..4, f in 1.0f64..8.0) {
                let (g, links) = window(n, seed);
                let r = Replay::new(g.clone(), links.to_vec());
                let same = r.run(&scales(n, &(0..n).map(|w| (w, op, 1.0)).collect::<Vec<_>>()));
                prop_assert_eq!(&same.times, &g.t);
                prop_assert_eq!(same.predicted_ns, same.measured_ns);
                let all = |f: f64| scales(n, &(0..n).map(|w| (w, op, f)).collect::<Vec<_>>());
                let (a, b, c) = (r.run(&all(f)), r.run(&all(f * 2.0)), r.run(&all(f64::INFINITY)));
                prop_assert!(a.predicted_ns <= same.predicted_ns);
                prop_assert!(b.predicted_ns <= a.predicted_ns, "{} then {}", a.predicted_ns, b.predicted_ns);
                prop_assert!(c.predicted_ns <= b.predicted_ns);
                for (v, &t) in b.times.iter().enumerate() {
                    prop_assert!(t <= a.times[v]);
                }
                let none = r.run(&scales(n, &(0..n).map(|w| (w, 99, 4.0)).collect::<Vec<_>>()));
                prop_assert_eq!(none.predicted_ns, same.predicted_ns);
            }

            /// Starting the replay at the first sped-up piece of work gives
            /// what replaying every point does, for one worker's speedup
            /// as for every worker's.
            #[test]
            fn replaying_from_the_first_change_is_exact(n in 2usize..5, seed in any::<u64>(), op in 1u32..4, f in 1.0f64..8.0, w in 0usize..5) {
                let (g, links) = window(n, seed);
                let r = Replay::new(g.clone(), links.to_vec());
                for s in [scales(n, &[(w % n, op, f)]), scales(n, &(0..n).map(|w| (w, op, f)).collect::<Vec<_>>())] {
                    let (a, b) = (r.run(&s), r.replay_from(&[(&s, 0)], true).pop().unwrap());
                    prop_assert_eq!(&a.times, &b.times);
                    prop_assert_eq!(a.predicted_ns, b.predicted_ns);
                }
            }
        }
    }
}
