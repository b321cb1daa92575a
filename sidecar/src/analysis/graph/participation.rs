//! Critical participation (SnailTrail, sager-notes §3.5's external
//! pointer: an edge's share of the window's paths, from forward and
//! backward path counts as in its `betweenness_centrality.rs`), counted in
//! linear time on the graph's key vertices only.

use crate::analysis::graph::{EKind, Graph};

/// Critical participation of every edge (SnailTrail): the share of the
/// window's source-to-sink paths (waits removed) that cross the edge, times
/// its weight, over the window's span: `paths(e) · w(e) / (N · span)`.
/// Paths are counted forward and backward in one topological pass each
/// (linear time), in log2 space because counts grow exponentially.
#[derive(Clone, Debug, Default)]
pub struct Participation {
    /// Score of the worker edge into each vertex (0 for starts and waits).
    pub worker: Vec<f64>,
    /// Score of each communication edge.
    pub comm: Vec<f64>,
    /// log2 of the number of paths.
    pub log2_paths: f64,
    /// Vertices on a cycle (not counted).
    pub cyclic: usize,
}

/// log2(2^a + 2^b), exact for an absent term (−∞).
fn lse2(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp2().ln_1p() / std::f64::consts::LN_2
}

pub fn participation(g: &Graph) -> Participation {
    let mut worker = vec![0.0; g.len()];
    let mut p = participation_with(g, |v, score| worker[v] = score);
    p.worker = worker;
    p
}

/// [`participation`], handing each worker edge's score to `worker_score`
/// (vertex, score) in vertex order instead of storing it (`worker` is left
/// empty): edges not handed over score 0.
///
/// Path counts change only where a comm edge starts or ends: along a chain
/// between two such vertices a vertex's forward count is its predecessor's
/// (one in-edge) and its backward count its successor's (one out-edge). So
/// the counting runs on the *key* vertices only ([`KeyVertices`]) and every
/// other vertex takes its key neighbours' counts. The counts are the same
/// floating-point operations in the same order as on the full graph.
pub fn participation_with(g: &Graph, worker_score: impl FnMut(usize, f64)) -> Participation {
    let mut p = Participation { comm: vec![0.0; g.comms.len()], ..Default::default() };
    if g.is_empty() {
        return p;
    }
    let keys = KeyVertices::of(g);
    let comms = KeyComms::of(g, &keys);
    let (fwd, order) = count_forward(&keys, &comms);
    p.cyclic = keys.unreached_vertices(&fwd);
    let counts = count_backward(&keys, &comms, &order, fwd);
    p.log2_paths = counts.total;
    let span = (g.window.1 - g.window.0) as f64;
    if counts.total == f64::NEG_INFINITY || span <= 0.0 {
        return p;
    }
    score_worker_edges(g, &keys, &counts, span, worker_score);
    score_comm_edges(g, &comms, &counts, span, &mut p.comm);
    p
}

/// A worker edge paths may take: neither a chain's start nor a wait
/// (waits are removed, as on the critical path).
#[inline]
fn is_live(k: EKind) -> bool {
    !matches!(k, EKind::Start | EKind::Wait)
}

/// The key vertices, in vertex order: comm endpoints and the ends of each
/// live stretch of a chain (a stretch is cut by a wait or the chain's
/// start).
struct KeyVertices {
    vertex: Vec<u32>,
    /// Per key: [`Self::LIVE`], [`Self::NEXT`].
    flags: Vec<u8>,
}

impl KeyVertices {
    /// A worker edge from the previous key (through the vertices between).
    const LIVE: u8 = 1;
    /// A worker edge to the next key.
    const NEXT: u8 = 2;

    fn of(g: &Graph) -> KeyVertices {
        let is_end = CommEndpoints::of(g);
        let cap = 2 * g.comms.len() + 2 * g.chains.len() + 16;
        let mut keys = KeyVertices { vertex: Vec::with_capacity(cap), flags: Vec::with_capacity(cap) };
        for &(a, b) in &g.chains {
            let (a, b) = (a as usize, b as usize);
            let mut s = a;
            while s < b {
                // A stretch starts at `s`; its vertices after `s` are live.
                let k0 = keys.vertex.len();
                keys.push(s, is_live(g.kind[s]) as u8 * Self::LIVE);
                let mut u = s + 1;
                while u < b && is_live(g.kind[u]) {
                    if is_end.contains(u) {
                        keys.push(u, Self::LIVE);
                    }
                    u += 1;
                }
                if u - 1 > *keys.vertex.last().unwrap() as usize {
                    keys.push(u - 1, Self::LIVE);
                }
                let last = keys.vertex.len() - 1;
                for f in &mut keys.flags[k0..last] {
                    *f |= Self::NEXT;
                }
                s = u;
            }
        }
        keys
    }

    #[inline]
    fn push(&mut self, v: usize, flags: u8) {
        self.vertex.push(v as u32);
        self.flags.push(flags);
    }

    #[inline]
    fn len(&self) -> usize {
        self.vertex.len()
    }

    /// Key `k` has a worker edge from key `k - 1`.
    #[inline]
    fn from_previous(&self, k: usize) -> bool {
        self.flags[k] & Self::LIVE != 0
    }

    /// Key `k` has a worker edge to key `k + 1`.
    #[inline]
    fn to_next(&self, k: usize) -> bool {
        self.flags[k] & Self::NEXT != 0
    }

    /// The key of vertex `v`, a comm endpoint.
    fn index_of(&self, v: u32) -> usize {
        self.vertex.binary_search(&v).expect("comm endpoints are keys")
    }

    /// Vertices a topological order never reached (on or behind a cycle):
    /// an unreached key (its forward count never set) and the vertices
    /// between it and the next key.
    fn unreached_vertices(&self, fwd: &[f64]) -> usize {
        (0..self.len())
            .filter(|&k| fwd[k] == f64::NEG_INFINITY)
            .map(|k| if self.to_next(k) { (self.vertex[k + 1] - self.vertex[k]) as usize } else { 1 })
            .sum()
    }
}

/// Which vertices are comm endpoints, as a bit set (marking is linear;
/// [`KeyVertices::of`] asks in vertex order).
struct CommEndpoints(Vec<u64>);

impl CommEndpoints {
    fn of(g: &Graph) -> CommEndpoints {
        let mut bits = vec![0u64; g.len().div_ceil(64)];
        for c in &g.comms {
            for v in [c.src as usize, c.dst as usize] {
                bits[v / 64] |= 1 << (v % 64);
            }
        }
        CommEndpoints(bits)
    }

    #[inline]
    fn contains(&self, v: usize) -> bool {
        self.0[v / 64] & (1 << (v % 64)) != 0
    }
}

/// The comm edges between key vertices.
struct KeyComms {
    /// Each comm's (source key, destination key).
    ends: Vec<(u32, u32)>,
    /// Per key, the comms ending there.
    into: CommsPerKey,
    /// Per key, the comms starting there.
    out_of: CommsPerKey,
}

impl KeyComms {
    fn of(g: &Graph, keys: &KeyVertices) -> KeyComms {
        let ends: Vec<(u32, u32)> =
            g.comms.iter().map(|c| (keys.index_of(c.src) as u32, keys.index_of(c.dst) as u32)).collect();
        let into = CommsPerKey::new(keys.len(), &ends, |e| e.1);
        let out_of = CommsPerKey::new(keys.len(), &ends, |e| e.0);
        KeyComms { ends, into, out_of }
    }
}

/// Comm edges grouped by one of their end keys, each group in comm order
/// (compressed rows: per key the start of its run, a count per key summed,
/// then the comms placed in order; no sort).
struct CommsPerKey {
    /// Key `k`'s comms are `comm[start[k]..start[k + 1]]`.
    start: Vec<u32>,
    comm: Vec<u32>,
}

impl CommsPerKey {
    fn new(nk: usize, ends: &[(u32, u32)], end: fn(&(u32, u32)) -> u32) -> CommsPerKey {
        let mut start = vec![0u32; nk + 1];
        for e in ends {
            start[end(e) as usize + 1] += 1;
        }
        for k in 0..nk {
            start[k + 1] += start[k];
        }
        let mut at = start.clone();
        let mut comm = vec![0u32; ends.len()];
        for (i, e) in ends.iter().enumerate() {
            let k = end(e) as usize;
            comm[at[k] as usize] = i as u32;
            at[k] += 1;
        }
        CommsPerKey { start, comm }
    }

    #[inline]
    fn of(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        self.comm[self.start[k] as usize..self.start[k + 1] as usize].iter().map(|&c| c as usize)
    }

    #[inline]
    fn count(&self, k: usize) -> u32 {
        self.start[k + 1] - self.start[k]
    }

    #[inline]
    fn any(&self, k: usize) -> bool {
        self.start[k + 1] > self.start[k]
    }
}

/// The forward pass (Kahn's topological order over the keys): each key's
/// log2 count of paths from any source to it (−∞: never reached, on or
/// behind a cycle), and the order the keys were reached in.
fn count_forward(keys: &KeyVertices, comms: &KeyComms) -> (Vec<f64>, Vec<u32>) {
    let nk = keys.len();
    let mut indeg: Vec<u32> = (0..nk).map(|k| keys.from_previous(k) as u32 + comms.into.count(k)).collect();
    let mut order: Vec<u32> = (0..nk as u32).filter(|&k| indeg[k as usize] == 0).collect();
    let ninf = f64::NEG_INFINITY;
    let mut fwd = vec![ninf; nk];
    let mut head = 0;
    while head < order.len() {
        let k = order[head] as usize;
        head += 1;
        let mut f = ninf;
        let mut any = false;
        if keys.from_previous(k) {
            f = fwd[k - 1];
            any = true;
        }
        for c in comms.into.of(k) {
            f = lse2(f, fwd[comms.ends[c].0 as usize]);
            any = true;
        }
        // A source: one path.
        fwd[k] = if any { f } else { 0.0 };
        if keys.to_next(k) {
            indeg[k + 1] -= 1;
            if indeg[k + 1] == 0 {
                order.push(k as u32 + 1);
            }
        }
        for c in comms.out_of.of(k) {
            let d = comms.ends[c].1 as usize;
            indeg[d] -= 1;
            if indeg[d] == 0 {
                order.push(d as u32);
            }
        }
    }
    (fwd, order)
}

/// log2 path counts per key.
struct PathCounts {
    /// From any source to the key.
    fwd: Vec<f64>,
    /// From the key to any sink.
    bwd: Vec<f64>,
    /// Of all source-to-sink paths.
    total: f64,
}

impl PathCounts {
    /// The share of all paths that go through key `from` and then key `to`
    /// along an edge between them.
    #[inline]
    fn share(&self, from: usize, to: usize) -> f64 {
        (self.fwd[from] + self.bwd[to] - self.total).exp2()
    }
}

/// The backward pass, in reverse topological order: each key's log2 count
/// of paths from it to any sink, and the total over the sinks (in vertex
/// order).
fn count_backward(keys: &KeyVertices, comms: &KeyComms, order: &[u32], fwd: Vec<f64>) -> PathCounts {
    let nk = keys.len();
    let ninf = f64::NEG_INFINITY;
    let mut bwd = vec![ninf; nk];
    let mut sink = vec![false; nk];
    for &k in order.iter().rev() {
        let k = k as usize;
        let mut b = ninf;
        let mut any = false;
        if keys.to_next(k) {
            b = bwd[k + 1];
            any = true;
        }
        for c in comms.out_of.of(k) {
            b = lse2(b, bwd[comms.ends[c].1 as usize]);
            any = true;
        }
        bwd[k] = if any { b } else { 0.0 };
        // A sink ends some path: an edge comes in, none goes out.
        sink[k] = !any && (keys.from_previous(k) || comms.into.any(k));
    }
    let mut total = ninf;
    for k in 0..nk {
        if sink[k] {
            total = lse2(total, fwd[k]);
        }
    }
    PathCounts { fwd, bwd, total }
}

/// Each live worker edge's score, handed to `worker_score` in vertex order.
/// The worker edges from key k to key k + 1 (through the vertices between)
/// share one exponent: fwd of k plus bwd of k + 1.
fn score_worker_edges(
    g: &Graph,
    keys: &KeyVertices,
    counts: &PathCounts,
    span: f64,
    mut worker_score: impl FnMut(usize, f64),
) {
    let ninf = f64::NEG_INFINITY;
    for k in 0..keys.len().saturating_sub(1) {
        if !keys.to_next(k) || counts.fwd[k] == ninf || counts.bwd[k + 1] == ninf {
            continue;
        }
        let e = counts.share(k, k + 1);
        for v in keys.vertex[k] as usize + 1..=keys.vertex[k + 1] as usize {
            worker_score(v, e * (g.t[v] - g.t[v - 1]) as f64 / span);
        }
    }
}

/// Each comm edge's score (weight: its latency in the window's graph).
fn score_comm_edges(g: &Graph, comms: &KeyComms, counts: &PathCounts, span: f64, scores: &mut [f64]) {
    let ninf = f64::NEG_INFINITY;
    for (i, c) in g.comms.iter().enumerate() {
        let (s, d) = (comms.ends[i].0 as usize, comms.ends[i].1 as usize);
        if counts.fwd[s] > ninf && counts.bwd[d] > ninf {
            scores[i] = counts.share(s, d) * g.t[c.dst as usize].saturating_sub(g.t[c.src as usize]) as f64 / span;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::tests::two_workers;
    use crate::analysis::graph::GraphBuilder;
    use crate::analysis::model::MsgKind;

    #[test]
    fn participation_counts_vertices_behind_a_cycle() {
        // Each worker's wait is ended by the other's message at 30: a
        // two-cycle; the vertices at 30 and the ones after them are never
        // reached, the ones before are counted as usual.
        let mut b = GraphBuilder::new((0, 100), 2);
        for (w, other) in [(0, 1), (1, 0)] {
            b.segment(w, 0, 10, EKind::Op(1));
            b.segment(w, 10, 30, EKind::Wait);
            b.segment(w, 30, 100, EKind::Op(2));
            b.terminated_wait(w, 30, other, 30, 5, MsgKind::Data);
        }
        let g = b.build();
        let p = participation(&g);
        assert_eq!(p.cyclic, 4);
        // Paths among the reached vertices: one per worker, 0 -> 10.
        assert!((p.log2_paths - 1.0).abs() < 1e-12);
        assert!((p.worker[1] - 0.05).abs() < 1e-12);
        assert_eq!(p.worker[3], 0.0);
        assert_eq!(p.comm, vec![0.0, 0.0]);
    }

    #[test]
    fn participation_counts_paths() {
        let g = two_workers();
        let p = participation(&g);
        // Paths (waits removed): w0: 0→30→100 (1 path, plus the comm branch
        // 30→(w1,30)→100), w1: 0→10 (dead end at the wait). Sources: (w0,0),
        // (w1,0). Sinks: (w0,100), (w1,10), (w1,100). N = 3.
        assert!((p.log2_paths - 3f64.log2()).abs() < 1e-9);
        // edge w0 0→30 is on 2 of 3 paths, weight 30: 2/3·30/100 = 0.2
        assert!((p.worker[1] - 0.2).abs() < 1e-9);
        assert!((p.worker[2] - 70.0 / 300.0).abs() < 1e-9);
        assert!((p.worker[6] - 70.0 / 300.0).abs() < 1e-9);
        assert!((p.worker[4] - 10.0 / 300.0).abs() < 1e-9);
        assert_eq!(p.worker[5], 0.0);
    }
}
