//! The critical path of a window graph (Sager §3.4 Def. 3.12 and
//! Algorithm 1, with the Timely changes of §5.3; sager-notes §3): walked
//! backwards from the window's end, never through a wait.

use crate::analysis::graph::{EKind, Graph, NONE};
use crate::analysis::model::Ns;

/// One edge of the critical path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathEdge {
    /// The worker edge into this vertex.
    Worker(u32),
    /// A communication edge (index into `comms`).
    Comm(u32),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CriticalPath {
    /// Edges from the window's end backwards.
    pub edges: Vec<PathEdge>,
    pub length: Ns,
    /// Where the walk started and ended (vertex).
    pub from: Option<u32>,
    pub to: Option<u32>,
    /// The walk could not start at the window's end: every worker there was
    /// waiting or absent (Property 3.10 violated); it started at the latest
    /// non-wait activity instead.
    pub started_early: bool,
    /// The walk stopped at a wait with no visible terminator (Property 3.11)
    /// or a zero-length cycle of messages.
    pub stuck: Option<(u32, &'static str)>,
}

/// Sager Algorithm 1 with §5.3: from the window's end, walk backwards along
/// the worker's own activities; at a wait, jump over the message that ended
/// it to its sender at the send time. Never through a wait. Cost: the edges
/// on the path. The length equals the window span when the trace
/// properties hold (Theorem 3.13).
pub fn critical_path(g: &Graph) -> CriticalPath {
    let mut cp = CriticalPath::default();
    let v = match start_at_window_end(g) {
        Some(v) => v,
        None => {
            cp.started_early = true;
            match latest_non_wait_vertex(g) {
                Some(v) => v,
                None => return cp,
            }
        }
    };
    walk_back(g, v, &mut cp);
    cp
}

/// How much a vertex's incoming activity is preferred as the path's start:
/// a known activity (0) over Unknown (1); never a wait or a chain start (2).
#[inline]
fn start_rank(k: EKind) -> u8 {
    match k {
        EKind::Op(_) | EKind::Span(_) | EKind::WaitingForInput => 0,
        EKind::Unknown => 1,
        _ => 2,
    }
}

/// Algorithm 1's first edge set (the non-wait edges into the window's last
/// vertices): the last vertex of a chain that reaches the window's end with
/// a non-wait activity, a known activity before Unknown, then the lowest
/// worker.
fn start_at_window_end(g: &Graph) -> Option<u32> {
    let we = g.window.1;
    let mut start: Option<(u8, u32)> = None;
    for &(a, b) in &g.chains {
        if b > a && g.t[b as usize - 1] == we {
            let v = b - 1;
            let r = start_rank(g.kind[v as usize]);
            if r < 2 && start.is_none_or(|(br, _)| r < br) {
                start = Some((r, v));
            }
        }
    }
    start.map(|(_, v)| v)
}

/// Where to start when no worker reaches the window's end with a non-wait
/// activity: the latest vertex reached by a non-wait worker edge (times
/// increase along a chain: each chain's last such vertex), the lowest
/// vertex among equals.
fn latest_non_wait_vertex(g: &Graph) -> Option<u32> {
    g.chains
        .iter()
        .filter_map(|&(a, b)| (a..b).rev().find(|&v| start_rank(g.kind[v as usize]) < 2))
        .map(|v| v as usize)
        .max_by_key(|&v| (g.t[v], std::cmp::Reverse(v)))
        .map(|v| v as u32)
}

/// The backward walk from `v` (§5.3 items 1–2): along the worker's chain,
/// and at a wait over the message that ended it to the sender's vertex at
/// the send time; it ends at a chain's start, or is stuck at a wait no
/// message ended or on a cycle of zero-length messages.
fn walk_back(g: &Graph, mut v: u32, cp: &mut CriticalPath) {
    cp.from = Some(v);
    let limit = g.len() + g.comms.len() + 1;
    loop {
        let vi = v as usize;
        match g.kind[vi] {
            EKind::Start => break,
            EKind::Wait => {
                let c = g.term[vi];
                if c == NONE {
                    cp.stuck = Some((v, "wait without a visible terminator"));
                    break;
                }
                let src = g.comms[c as usize].src;
                cp.length += g.t[vi].saturating_sub(g.t[src as usize]);
                cp.edges.push(PathEdge::Comm(c));
                v = src;
            }
            _ => {
                cp.length += g.t[vi] - g.t[vi - 1];
                cp.edges.push(PathEdge::Worker(v));
                v -= 1;
            }
        }
        if cp.edges.len() > limit {
            cp.stuck = Some((v, "cycle of zero-length messages"));
            break;
        }
    }
    cp.to = Some(v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::GraphBuilder;
    use crate::analysis::model::MsgKind;

    #[test]
    fn critical_path_jumps_over_the_terminating_message() {
        let mut b = GraphBuilder::new((0, 100), 2);
        b.segment(0, 0, 60, EKind::Op(1));
        b.segment(0, 60, 100, EKind::Wait); // cut at the end
        b.segment(1, 0, 10, EKind::Op(2));
        b.segment(1, 10, 30, EKind::Wait);
        b.segment(1, 30, 100, EKind::Op(3));
        b.terminated_wait(1, 30, 0, 30, 5, MsgKind::Data);
        let g = b.build();
        let cp = critical_path(&g);
        assert_eq!(cp.length, 100);
        assert_eq!(cp.stuck, None);
        let kinds: Vec<_> = cp
            .edges
            .iter()
            .map(|e| match *e {
                PathEdge::Worker(v) => (g.w[v as usize], g.kind[v as usize], g.weight(v as usize)),
                PathEdge::Comm(_) => (99, EKind::Unknown, 0),
            })
            .collect();
        assert_eq!(kinds, vec![(1, EKind::Op(3), 70), (99, EKind::Unknown, 0), (0, EKind::Op(1), 30)]);
    }
}
