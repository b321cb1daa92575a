//! The replay as it was first written, kept as the tests' reference model:
//! every point of the window sorted once by its measured time (a `u128`
//! key per point), then visited in that order for each speedup. The
//! replay in [`super`] visits the same points in another order that keeps
//! every dependency (see [`super::Replay::new`]); the property tests check
//! that the two agree exactly.

// The graph's predicates are the replay's own; only the order and the
// rounding are the reference's.
use super::{is_wait_end, is_work, own_push, same_time_depth, Link, Prediction, Scales, INPUT_MIN};
use crate::analysis::graph::{EKind, Graph, NONE};
use crate::analysis::model::Ns;

/// One point of the replay, in measured-time order, packed in the low 64
/// bits of its sort key (the measured time is the high 64): the kind in
/// bits 62–63, then (for a wait's end) how many waits ending at the same
/// time its ending message's sender waited through first (a sender whose
/// own wait ended at the very time it sent goes first), then the index (of
/// the vertex or the link) in the low 32 bits. Sorting `u128` keys took a
/// third of the instructions that sorting `(time, enum)` pairs did.
const WORK: u64 = 0; // a vertex ending work, or a chain's start
const WAIT_END: u64 = 1; // a vertex ending a wait: after the sends it may wait for
const SEND: u64 = 2;
const READ: u64 = 3;

fn key(t: Ns, kind: u64, depth: u32, index: usize) -> u128 {
    ((t as u128) << 64) | ((kind << 62) | ((depth as u64) << 32) | index as u64) as u128
}

/// A window prepared for replays: its graph, its messages, and the order
/// of their points (sorted once).
pub struct Sorted<'g> {
    g: &'g Graph,
    links: &'g [Link],
    /// The points, packed (see [`key`]), in order.
    order: Vec<u64>,
    /// Per chain, its last vertex ending work (`NONE`: none).
    last_work: Vec<u32>,
    measured_ns: Ns,
}

/// A worker's position while it is replayed: the measured time `a` of its
/// last fixed point and that point's replayed time `b`; `next`: the vertex
/// the current edge leads into.
#[derive(Clone, Copy, Debug)]
struct Cursor {
    a: Ns,
    b: Ns,
    next: u32,
    end: u32,
}

impl<'g> Sorted<'g> {
    pub fn new(g: &'g Graph, links: &'g [Link]) -> Sorted<'g> {
        let mut keyed: Vec<u128> = Vec::with_capacity(g.len() + 2 * links.len());
        for v in 0..g.len() {
            keyed.push(if is_wait_end(g, v) {
                key(g.t[v], WAIT_END, same_time_depth(g, v), v)
            } else {
                key(g.t[v], WORK, 0, v)
            });
        }
        for (m, l) in links.iter().enumerate() {
            if (l.src as usize) < g.chains.len() && (l.dst as usize) < g.chains.len() {
                keyed.push(key(l.sent, SEND, 0, m));
                keyed.push(key(l.read_at(), READ, 0, m));
            }
        }
        keyed.sort();
        let last_work =
            g.chains.iter().map(|&(a, b)| (a..b).rev().find(|&v| is_work(g, v as usize)).unwrap_or(NONE)).collect();
        let mut r =
            Sorted { g, links, order: keyed.into_iter().map(|k| k as u64).collect(), last_work, measured_ns: 0 };
        r.measured_ns = r.span(&g.t);
        r
    }

    /// The window replayed with `scales`.
    pub fn run(&self, scales: &Scales) -> Prediction {
        // Before the first sped-up piece of work starts, every point keeps
        // its measured time: the replay starts there, each worker at its
        // last point before it.
        self.replay_from(scales, self.first_change(scales))
    }

    /// [`Sorted::run`] with the points before `from` taken as measured.
    fn replay_from(&self, scales: &Scales, from: Ns) -> Prediction {
        let g = self.g;
        let mut times = g.t.clone();
        let mut sent: Vec<Ns> = self.links.iter().map(|l| l.sent).collect();
        let mut at: Vec<Cursor> = g
            .chains
            .iter()
            .map(|&(s, e)| {
                let before = g.t[s as usize..e as usize].partition_point(|&t| t < from) as u32;
                let t0 = match before {
                    0 if e > s => g.t[s as usize],
                    0 => 0,
                    k => g.t[(s + k - 1) as usize],
                };
                Cursor { a: t0, b: t0, next: s + before, end: e }
            })
            .collect();
        let first = self.order.partition_point(|&p| self.time_of(p) < from);
        for &p in &self.order[first..] {
            let ix = (p & 0xffff_ffff) as usize;
            match p >> 62 {
                WORK | WAIT_END => {
                    let v = ix;
                    let t = self.vertex(v, &at[g.w[v] as usize], &times, scales);
                    times[v] = t;
                    let c = &mut at[g.w[v] as usize];
                    (c.a, c.b, c.next) = (g.t[v], t, v as u32 + 1);
                }
                SEND => {
                    let l = self.links[ix];
                    sent[ix] = self.map(&at[l.src as usize], l.src as usize, l.sent, scales);
                }
                _ => {
                    let l = self.links[ix];
                    let c = &mut at[l.dst as usize];
                    let read = l.read_at();
                    if self.map(c, l.dst as usize, read, scales) < sent[ix] {
                        // Read before it is sent: the execution stalls there.
                        (c.a, c.b) = (read, sent[ix]);
                    }
                }
            }
        }
        Prediction { measured_ns: self.measured_ns, predicted_ns: self.span(&times), times }
    }

    /// The measured time of point `p`.
    #[inline]
    fn time_of(&self, p: u64) -> Ns {
        let ix = (p & 0xffff_ffff) as usize;
        match p >> 62 {
            WORK | WAIT_END => self.g.t[ix],
            SEND => self.links[ix].sent,
            _ => self.links[ix].read_at(),
        }
    }

    /// Where the first piece of work that `scales` shrinks starts (`Ns::MAX`:
    /// none): each sped-up worker's chain read until its first such piece.
    fn first_change(&self, scales: &Scales) -> Ns {
        super::first_change(self.g, scales)
    }

    /// From the earliest chain start to the latest end of work (an
    /// execution, a span, unknown worker time) with vertex times `ts`. A
    /// wait still going at the window's end is not the window's work: what
    /// ends it is in a later window, or outside.
    fn span(&self, ts: &[Ns]) -> Ns {
        let g = self.g;
        let start = g.chains.iter().filter(|&&(a, b)| b > a).map(|&(a, _)| ts[a as usize]).min();
        // (Replayed times never decrease along a chain.)
        let end = self.last_work.iter().filter(|&&v| v != NONE).map(|&v| ts[v as usize]).max();
        match (start, end) {
            (Some(s), Some(e)) => e.saturating_sub(s),
            _ => 0,
        }
    }

    /// The replayed time of vertex `v`, its worker at `c`.
    fn vertex(&self, v: usize, c: &Cursor, times: &[Ns], scales: &Scales) -> Ns {
        let g = self.g;
        let w = g.w[v] as usize;
        match g.kind[v] {
            EKind::Start => g.t[v],
            k @ (EKind::Op(_) | EKind::Span(_) | EKind::Unknown) => {
                c.b + scaled(g.t[v].saturating_sub(c.a), scales.of(w, k))
            }
            // (A send after the wait's end is clock trouble: nothing here
            // ended the wait, and the sender is not replayed yet: below.)
            EKind::Wait if g.term[v] != NONE && g.t[g.comms[g.term[v] as usize].src as usize] <= g.t[v] => {
                // The message keeps its transit (send to the wait's end).
                let src = g.comms[g.term[v] as usize].src as usize;
                times[v - 1].max(times[src].saturating_add(g.t[v] - g.t[src]))
            }
            // A gap too short to be input: the engine's own scheduling. A
            // gap the worker's own push ended: the program's driver making
            // its next input (closed loop): both keep their duration.
            EKind::WaitingForInput if g.t[v] - g.t[v - 1] < INPUT_MIN || own_push(g, v) => {
                times[v - 1] + (g.t[v] - g.t[v - 1])
            }
            // Waiting for input, or a wait nothing here ended: the outside
            // world keeps its time.
            EKind::Wait | EKind::WaitingForInput => times[v - 1].max(g.t[v]),
        }
    }

    /// The replayed time of measured time `t` on worker `w` (at `c`).
    #[inline]
    fn map(&self, c: &Cursor, w: usize, t: Ns, scales: &Scales) -> Ns {
        if t <= c.a {
            return c.b.saturating_sub(c.a - t);
        }
        if c.next >= c.end {
            return c.b + (t - c.a);
        }
        match self.g.kind[c.next as usize] {
            k @ (EKind::Op(_) | EKind::Span(_) | EKind::Unknown) => c.b + scaled(t - c.a, scales.of(w, k)),
            // Nothing happens inside a wait: a point there is at its start.
            _ => c.b,
        }
    }
}

/// `d` scaled by `s` (exact for 1), as the first replay rounded.
fn scaled(d: Ns, s: f64) -> Ns {
    if s == 1.0 {
        d
    } else {
        (d as f64 * s).round() as Ns
    }
}
