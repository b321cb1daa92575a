//! Randomized: on generated window graphs, the critical path's length equals
//! a brute-force longest path that avoids waits, and participation scores
//! equal enumeration of all paths (issue "Tests").

#![allow(clippy::needless_range_loop, clippy::type_complexity)]
mod common;
use proptest::prelude::*;
use sidecar::analysis::graph::{critical_path, participation, EKind, Graph, GraphBuilder};
use sidecar::analysis::model::MsgKind;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const SPAN: u64 = 100;

/// Random timelines on `p` workers over [0, SPAN]; every wait that ends
/// inside the window is ended by a message from a worker that was busy then.
fn random_graph(seed: u64, p: usize, max_segs: u64) -> Graph {
    let mut r = Rng(seed | 1);
    let mut segs: Vec<Vec<(u64, u64, EKind)>> = Vec::new();
    for _ in 0..p {
        let n = 1 + r.below(max_segs);
        let mut cuts: Vec<u64> = (0..n - 1).map(|_| 1 + r.below(SPAN - 1)).collect();
        cuts.push(0);
        cuts.push(SPAN);
        cuts.sort_unstable();
        cuts.dedup();
        let mut s = Vec::new();
        for w in cuts.windows(2) {
            let k = match r.below(5) {
                0 => EKind::Op(r.below(3) as u32),
                1 => EKind::Unknown,
                2 => EKind::WaitingForInput,
                _ => EKind::Wait,
            };
            s.push((w[0], w[1], k));
        }
        segs.push(s);
    }
    let kind_before = |segs: &Vec<Vec<(u64, u64, EKind)>>, w: usize, t: u64| {
        segs[w].iter().find(|s| s.0 < t && t <= s.1).map(|s| s.2)
    };
    let mut msgs = Vec::new();
    for j in 0..p {
        for si in 0..segs[j].len() {
            let (s, e, k) = segs[j][si];
            if k != EKind::Wait || e == SPAN {
                continue;
            }
            let senders: Vec<usize> =
                (0..p).filter(|&i| i != j && kind_before(&segs, i, e).is_some_and(|k| k != EKind::Wait)).collect();
            if senders.is_empty() {
                segs[j][si].2 = EKind::WaitingForInput;
            } else {
                let i = senders[r.below(senders.len() as u64) as usize];
                msgs.push((j, e, i));
            }
            let _ = s;
        }
    }
    let mut b = GraphBuilder::new((0, SPAN), p);
    for (w, s) in segs.iter().enumerate() {
        for &(a, e, k) in s {
            b.segment(w, a, e, k);
        }
    }
    for (j, e, i) in msgs {
        b.terminated_wait(j, e, i, e, 1, MsgKind::Data);
    }
    b.build()
}

/// Edges of the wait-free graph: (src, dst, weight, id); id < n: worker
/// edge into vertex id; id >= n: comm edge id - n.
fn edges(g: &Graph) -> Vec<(usize, usize, u64, usize)> {
    let n = g.len();
    let mut e = Vec::new();
    for v in 0..n {
        if !matches!(g.kind[v], EKind::Start | EKind::Wait) {
            e.push((v - 1, v, g.t[v] - g.t[v - 1], v));
        }
    }
    for (i, c) in g.comms.iter().enumerate() {
        e.push((c.src as usize, c.dst as usize, g.t[c.dst as usize] - g.t[c.src as usize], n + i));
    }
    e
}

/// All maximal paths (source: no in-edge, sink: no out-edge, ≥ 1 edge).
fn all_paths(g: &Graph) -> Vec<Vec<(usize, usize, u64, usize)>> {
    let e = edges(g);
    let n = g.len();
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0; n];
    for (i, x) in e.iter().enumerate() {
        out[x.0].push(i);
        indeg[x.1] += 1;
    }
    let mut paths = Vec::new();
    fn dfs(
        v: usize,
        out: &Vec<Vec<usize>>,
        e: &Vec<(usize, usize, u64, usize)>,
        cur: &mut Vec<(usize, usize, u64, usize)>,
        paths: &mut Vec<Vec<(usize, usize, u64, usize)>>,
    ) {
        if out[v].is_empty() {
            if !cur.is_empty() {
                paths.push(cur.clone());
            }
            return;
        }
        for &i in &out[v] {
            cur.push(e[i]);
            dfs(e[i].1, out, e, cur, paths);
            cur.pop();
        }
    }
    for v in 0..n {
        if indeg[v] == 0 {
            dfs(v, &out, &e, &mut Vec::new(), &mut paths);
        }
    }
    paths
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn critical_path_is_the_longest_wait_free_path(seed in any::<u64>(), p in 2usize..5) {
        let g = random_graph(seed, p, 8);
        let cp = critical_path(&g);
        prop_assert!(cp.stuck.is_none(), "{:?}", cp.stuck);
        let longest = all_paths(&g).iter().map(|p| p.iter().map(|e| e.2).sum::<u64>()).max().unwrap_or(0);
        prop_assert_eq!(cp.length, longest);
        // Theorem 3.13: when a worker is not waiting at the end, it is the span.
        if !cp.started_early {
            prop_assert_eq!(cp.length, SPAN);
        }
        // the path is connected and avoids waits
        for e in &cp.edges {
            if let sidecar::analysis::graph::PathEdge::Worker(v) = e {
                prop_assert!(g.kind[*v as usize] != EKind::Wait);
            }
        }
    }

    #[test]
    fn participation_equals_enumeration(seed in any::<u64>(), p in 2usize..4) {
        let g = random_graph(seed, p, 5);
        let paths = all_paths(&g);
        let n = g.len();
        let mut want = vec![0.0f64; n + g.comms.len()];
        for path in &paths {
            for e in path {
                want[e.3] += e.2 as f64;
            }
        }
        let total = paths.len() as f64;
        let got = participation(&g);
        for v in 0..n {
            let w = if total > 0.0 { want[v] / (total * SPAN as f64) } else { 0.0 };
            prop_assert!((got.worker[v] - w).abs() < 1e-9, "vertex {}: {} vs {}", v, got.worker[v], w);
        }
        for c in 0..g.comms.len() {
            let w = if total > 0.0 { want[n + c] / (total * SPAN as f64) } else { 0.0 };
            prop_assert!((got.comm[c] - w).abs() < 1e-9);
        }
        if total > 0.0 {
            prop_assert!((got.log2_paths - total.log2()).abs() < 1e-9);
        }
    }
}

fn any_event() -> impl Strategy<Value = ringlog::Event> {
    use ringlog::Event::*;
    let w = 0u32..4;
    prop_oneof![
        (0u32..3).prop_map(|op| ScheduleStart { op }),
        (0u32..3).prop_map(|op| ScheduleStop { op }),
        (0u32..2, w.clone(), 0u64..5).prop_map(|(channel, to, seq)| MessageSend { channel, to, seq, records: 1 }),
        (0u32..2, w.clone(), 0u64..5).prop_map(|(channel, from, seq)| MessageRecv { channel, from, seq, records: 1 }),
        (0u64..5).prop_map(|seq| ProgressSend { channel: 0, seq }),
        (w, 0u64..5).prop_map(|(from, seq)| ProgressRecv { channel: 0, from, seq }),
        (0u64..3).prop_map(|id| SpanStart { id }),
        (0u64..3).prop_map(|id| SpanStop { id }),
        (0u64..3, 0u64..100).prop_map(|(elided, spin_ticks)| Step { elided, spin_ticks }),
        Just(Unpark),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Never panic on bad input: arbitrary event sequences (unpaired,
    /// misnested, out of order, messages that never match, timestamps that
    /// jump) through the whole analysis, and arbitrary bytes.
    #[test]
    fn arbitrary_traces_never_panic(
        workers in prop::collection::vec(prop::collection::vec((0u64..3000, any_event()), 0..40), 1..4),
        jump in prop::option::weighted(0.1, 1u64 << 40..1u64 << 62),
        garbage in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut ws: Vec<Vec<(u64, ringlog::Event)>> = workers;
        if let (Some(j), Some(w)) = (jump, ws.first_mut()) {
            w.push((j, ringlog::Event::ScheduleStart { op: 1 }));
        }
        let bytes = common::encode_opts(&ws, jump.is_none(), &[(0, 1, 2)]);
        let (reps, _) = sidecar::pipeline::analyze_bytes(&[("t", &bytes)], 500);
        for r in &reps {
            prop_assert!(r.critical_path.length_ns <= r.critical_path.span_ns);
        }
        let mut cut = bytes.clone();
        cut.truncate(bytes.len() * 2 / 3);
        cut.extend_from_slice(&garbage);
        let _ = sidecar::pipeline::analyze_bytes(&[("g", &cut), ("h", &garbage)], 500);
    }
}
