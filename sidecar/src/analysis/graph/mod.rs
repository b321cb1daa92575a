//! The window graph (Sager §3.1 Def. 3.3–3.5; issue stage 4), the critical
//! path (Sager Algorithm 1 with the Timely changes of §5.3; stage 5) and
//! critical participation (SnailTrail's path counting; stage 6).
//!
//! Vertices are points on worker timelines inside the window; every worker's
//! vertices form a chain, the edge into vertex `v` (from `v - 1`) is the
//! worker activity between them (`kind[v]`). Communication edges are only
//! those that ended a wait: Sager §5.3.1 puts a message on the critical path
//! only if it terminated a waiting activity, and a message that arrived
//! while the receiver was busy only shortened a receive-buffer time.
//! Worker-local messages are never edges (sager-notes §2.3).
//!
//! One idea per file: [`build`] lays the graph out from a window's worker
//! activities and terminated waits, [`critical_path`] walks it backwards
//! from the window's end, [`participation`] counts its paths. This file
//! holds the graph itself, which all three share.

pub mod build;
pub mod critical_path;
pub mod participation;

pub use build::GraphBuilder;
pub use critical_path::{critical_path, CriticalPath, PathEdge};
pub use participation::{participation, participation_with, Participation};

use crate::analysis::model::{MsgKind, Ns};

pub const NONE: u32 = u32::MAX;

/// The activity on a worker edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EKind {
    /// No incoming worker edge: the first vertex of a chain.
    Start,
    Op(u32),
    /// A user span: its index in [`Graph::spans`] (span ids are 64-bit;
    /// an index keeps this type, and every vertex's kind, at 8 bytes). Made
    /// by [`GraphBuilder::span`] only; read back with [`Graph::span_id`].
    Span(u32),
    /// Worker time no instrumentation explains (spin with a cause pending,
    /// spin after a message arrived, work outside operators).
    Unknown,
    WaitingForInput,
    /// Waiting: never on the critical path.
    Wait,
}

impl EKind {
    pub fn is_wait(self) -> bool {
        self == EKind::Wait
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comm {
    pub src: u32,
    pub dst: u32,
    pub channel: u32,
    pub kind: MsgKind,
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub t: Vec<Ns>,
    pub w: Vec<u32>,
    pub kind: Vec<EKind>,
    /// For the vertex ending a wait: the communication edge that ended it.
    pub term: Vec<u32>,
    /// Vertex range of each worker's chain.
    pub chains: Vec<(u32, u32)>,
    /// The span ids the `EKind::Span` indices stand for.
    pub spans: Vec<u64>,
    pub comms: Vec<Comm>,
    pub window: (Ns, Ns),
}

impl Graph {
    /// The span id behind `EKind::Span(ix)`.
    pub fn span_id(&self, ix: u32) -> u64 {
        self.spans[ix as usize]
    }

    /// The vertex of worker `w` at time `t`, if there is one (the
    /// reference the layout's own lookups are tested against).
    pub fn vertex(&self, w: usize, t: Ns) -> Option<u32> {
        let (a, b) = *self.chains.get(w)?;
        let ts = &self.t[a as usize..b as usize];
        ts.binary_search(&t).ok().map(|i| a + i as u32)
    }

    pub fn len(&self) -> usize {
        self.t.len()
    }

    pub fn is_empty(&self) -> bool {
        self.t.is_empty()
    }

    /// Weight of the worker edge into `v` (0 for a chain start).
    pub fn weight(&self, v: usize) -> Ns {
        if self.kind[v] == EKind::Start {
            0
        } else {
            self.t[v] - self.t[v - 1]
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Two workers; w1 waits [10,30] on a message w0 sent at 30.
    pub fn two_workers() -> Graph {
        let mut b = GraphBuilder::new((0, 100), 2);
        b.segment(0, 0, 100, EKind::Op(1));
        b.segment(1, 0, 10, EKind::Op(2));
        b.segment(1, 10, 30, EKind::Wait);
        b.segment(1, 30, 100, EKind::Op(3));
        b.terminated_wait(1, 30, 0, 30, 5, MsgKind::Data);
        b.build()
    }

    #[test]
    fn kinds_take_eight_bytes() {
        assert_eq!(std::mem::size_of::<EKind>(), 8);
        let mut b = GraphBuilder::new((0, 100), 1);
        let (x, y) = (b.span(u64::MAX), b.span(7));
        assert_eq!((b.span(u64::MAX), x, y), (EKind::Span(0), EKind::Span(0), EKind::Span(1)));
        b.segment(0, 0, 50, x);
        b.segment(0, 50, 100, y);
        let g = b.build();
        assert_eq!(g.spans, vec![u64::MAX, 7]);
        assert_eq!(g.kind[1..], [EKind::Span(0), EKind::Span(1)]);
    }

    #[test]
    fn layout_and_critical_path() {
        let g = two_workers();
        assert_eq!(g.t, vec![0, 30, 100, 0, 10, 30, 100]);
        assert_eq!(g.kind[4..], [EKind::Op(2), EKind::Wait, EKind::Op(3)]);
        assert_eq!(g.comms, vec![Comm { src: 1, dst: 5, channel: 5, kind: MsgKind::Data }]);
        let cp = critical_path(&g);
        // starts on worker 0 (lowest), straight back along it.
        assert_eq!(cp.length, 100);
        assert_eq!(cp.edges, vec![PathEdge::Worker(2), PathEdge::Worker(1)]);
    }
}
