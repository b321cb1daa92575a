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

use crate::model::{MsgKind, Ns};
use rustc_hash::FxHashMap;

pub const NONE: u32 = u32::MAX;

/// The activity on a worker edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EKind {
    /// No incoming worker edge: the first vertex of a chain.
    Start,
    Op(u32),
    Span(u64),
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
    pub comms: Vec<Comm>,
    pub window: (Ns, Ns),
}

/// Collects segments per worker, then lays out the graph.
pub struct GraphBuilder {
    window: (Ns, Ns),
    segs: Vec<Vec<(Ns, Ns, EKind)>>,
    splits: Vec<Vec<Ns>>,
    waits: Vec<(u32, Ns, u32, Ns, u32, MsgKind)>,
}

impl GraphBuilder {
    pub fn new(window: (Ns, Ns), workers: usize) -> Self {
        GraphBuilder { window, segs: vec![Vec::new(); workers], splits: vec![Vec::new(); workers], waits: Vec::new() }
    }

    /// Room for `n` more segments of worker `w`.
    pub fn reserve(&mut self, w: usize, n: usize) {
        self.segs[w].reserve(n);
    }

    /// A worker activity, clipped to the window. Per worker, segments come in
    /// time order and do not overlap; holes become Unknown.
    pub fn segment(&mut self, w: usize, s: Ns, e: Ns, k: EKind) {
        let (s, e) = (s.max(self.window.0), e.min(self.window.1));
        if e > s {
            self.segs[w].push((s, e, k));
        }
    }

    /// A wait on `dst` ending at `at` that was ended by a message `src` sent
    /// at `sent`: the source worker's activity is split there (§5.3 item 2).
    pub fn terminated_wait(&mut self, dst: usize, at: Ns, src: usize, sent: Ns, channel: u32, kind: MsgKind) {
        self.splits[src].push(sent);
        self.waits.push((dst as u32, at, src as u32, sent, channel, kind));
    }

    pub fn build(mut self) -> Graph {
        let mut g = Graph { window: self.window, ..Default::default() };
        let mut times: Vec<Ns> = Vec::new();
        let mut splits: Vec<Ns> = Vec::new();
        let mut merged: Vec<Ns> = Vec::new();
        let cap: usize = self.segs.iter().zip(&self.splits).map(|(s, x)| 2 * s.len() + x.len()).sum();
        g.t.reserve(cap);
        g.w.reserve(cap);
        g.kind.reserve(cap);
        g.term.reserve(cap);
        for w in 0..self.segs.len() {
            // (Each worker's segments are freed once its chain is laid out.)
            let mut segs = std::mem::take(&mut self.segs[w]);
            let segs = &mut segs;
            let first = g.t.len() as u32;
            if segs.is_empty() {
                g.chains.push((first, first));
                continue;
            }
            // Segments nearly always come in order, one after another (which
            // is sorted, as every segment is non-empty): check before sorting.
            let follow = |segs: &[(Ns, Ns, EKind)]| segs.windows(2).all(|p| p[0].1 <= p[1].0);
            let mut tiled = follow(segs);
            if !tiled && !segs.is_sorted_by_key(|s| (s.0, s.1)) {
                segs.sort_by_key(|s| (s.0, s.1));
                tiled = follow(segs);
            }
            let (lo, hi) = (segs[0].0, segs.iter().map(|s| s.1).max().unwrap());
            splits.clear();
            splits.extend(self.splits[w].iter().copied().filter(|&t| t >= lo && t <= hi));
            if tiled {
                // The usual case: the segments follow one another (with
                // holes). The vertices come straight from them with the
                // splits merged in: an edge inside a segment has its kind, one
                // in a hole is Unknown (what the general case below finds).
                if !splits.is_sorted() {
                    splits.sort_unstable();
                }
                let mut push = |t: Ns, k: EKind| {
                    g.t.push(t);
                    g.kind.push(k);
                };
                let mut prev = segs[0].0;
                push(prev, EKind::Start);
                let mut b = 0;
                for &(s, e, k) in segs.iter() {
                    if s > prev {
                        while b < splits.len() && splits[b] < s {
                            if splits[b] > prev {
                                prev = splits[b];
                                push(prev, EKind::Unknown);
                            }
                            b += 1;
                        }
                        prev = s;
                        push(s, EKind::Unknown);
                    }
                    while b < splits.len() && splits[b] < e {
                        if splits[b] > prev {
                            prev = splits[b];
                            push(prev, k);
                        }
                        b += 1;
                    }
                    prev = e;
                    push(e, k);
                }
                g.w.resize(g.t.len(), w as u32);
                g.term.resize(g.t.len(), NONE);
                g.chains.push((first, g.t.len() as u32));
                continue;
            }
            times.clear();
            for s in segs.iter() {
                times.push(s.0);
                times.push(s.1);
            }
            // Segment bounds are usually one sorted run; the splits are
            // sorted on their own and merged in (same result as sorting all).
            if times.is_sorted() {
                splits.sort_unstable();
                merged.clear();
                merged.reserve(times.len() + splits.len());
                let (mut a, mut b) = (0, 0);
                while a < times.len() && b < splits.len() {
                    if times[a] <= splits[b] {
                        merged.push(times[a]);
                        a += 1;
                    } else {
                        merged.push(splits[b]);
                        b += 1;
                    }
                }
                merged.extend_from_slice(&times[a..]);
                merged.extend_from_slice(&splits[b..]);
                std::mem::swap(&mut times, &mut merged);
            } else {
                times.extend_from_slice(&splits);
                times.sort_unstable();
            }
            times.dedup();
            let mut si = 0;
            for (i, &t) in times.iter().enumerate() {
                let k = if i == 0 {
                    EKind::Start
                } else {
                    let ta = times[i - 1];
                    while si < segs.len() && segs[si].1 <= ta {
                        si += 1;
                    }
                    match segs.get(si) {
                        Some(&(s, e, k)) if s <= ta && t <= e => k,
                        _ => EKind::Unknown,
                    }
                };
                g.t.push(t);
                g.w.push(w as u32);
                g.kind.push(k);
                g.term.push(NONE);
            }
            g.chains.push((first, g.t.len() as u32));
        }
        for &(dst, at, src, sent, channel, kind) in &self.waits {
            let (Some(d), Some(s)) = (g.vertex(dst as usize, at), g.vertex(src as usize, sent)) else { continue };
            if g.kind[d as usize].is_wait() && g.term[d as usize] == NONE {
                g.term[d as usize] = g.comms.len() as u32;
                g.comms.push(Comm { src: s, dst: d, channel, kind });
            }
        }
        g
    }
}

impl Graph {
    /// The vertex of worker `w` at time `t`, if there is one.
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
    let we = g.window.1;
    // Start: a worker whose chain reaches the window's end with a non-wait
    // activity; prefer a known activity over Unknown, then the lowest worker.
    let rank = |k: EKind| match k {
        EKind::Op(_) | EKind::Span(_) | EKind::WaitingForInput => 0,
        EKind::Unknown => 1,
        _ => 2,
    };
    let mut start: Option<(u8, u32)> = None;
    for &(a, b) in &g.chains {
        if b > a && g.t[b as usize - 1] == we {
            let v = b - 1;
            let r = rank(g.kind[v as usize]);
            if r < 2 && start.is_none_or(|(br, _)| r < br) {
                start = Some((r, v));
            }
        }
    }
    let mut v = match start {
        Some((_, v)) => v,
        None => {
            cp.started_early = true;
            // The latest vertex reached by a non-wait worker edge (times
            // increase along a chain: each chain's last such vertex).
            let best = g
                .chains
                .iter()
                .filter_map(|&(a, b)| (a..b).rev().find(|&v| rank(g.kind[v as usize]) < 2))
                .map(|v| v as usize)
                .max_by_key(|&v| (g.t[v], std::cmp::Reverse(v)));
            match best {
                Some(v) => v as u32,
                None => return cp,
            }
        }
    };
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
    cp
}

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
    let n = g.len();
    let nc = g.comms.len();
    let mut p = Participation { worker: vec![0.0; n], comm: vec![0.0; nc], ..Default::default() };
    if n == 0 {
        return p;
    }
    // Per vertex, computed once: a live worker edge into it, one out of it
    // (to the next vertex of the same chain), comm edges in, comm edges out.
    const LIVE: u8 = 1;
    const NEXT: u8 = 2;
    const IN: u8 = 4;
    const OUT: u8 = 8;
    // Comm edges by destination and by source, each in comm order (the
    // order the sums below take them in). Few vertices have one: the others
    // never look these up.
    let mut in_e: Vec<(u32, u32)> = g.comms.iter().enumerate().map(|(i, c)| (c.dst, i as u32)).collect();
    let mut out_e: Vec<(u32, u32)> = g.comms.iter().enumerate().map(|(i, c)| (c.src, i as u32)).collect();
    in_e.sort_unstable();
    out_e.sort_unstable();
    let ranges = |list: &[(u32, u32)]| {
        let mut m: FxHashMap<u32, (u32, u32)> = FxHashMap::default();
        for (i, e) in list.iter().enumerate() {
            m.entry(e.0).or_insert((i as u32, i as u32)).1 = i as u32 + 1;
        }
        m
    };
    let (in_r, out_r) = (ranges(&in_e), ranges(&out_e));
    fn edges<'a>(list: &'a [(u32, u32)], r: &FxHashMap<u32, (u32, u32)>, v: usize) -> impl Iterator<Item = u32> + 'a {
        let (lo, hi) = r.get(&(v as u32)).copied().unwrap_or((0, 0));
        list[lo as usize..hi as usize].iter().map(|e| e.1)
    }
    let ins = |v: usize| edges(&in_e, &in_r, v);
    let outs = |v: usize| edges(&out_e, &out_r, v);
    let mut flags = vec![0u8; n];
    let mut indeg = vec![0u32; n];
    for c in &g.comms {
        flags[c.src as usize] |= OUT;
        flags[c.dst as usize] |= IN;
        indeg[c.dst as usize] += 1;
    }
    let live = |k: &EKind| !matches!(k, EKind::Start | EKind::Wait);
    // Kahn's order starts with the vertices without in-edges, by index.
    let mut order: Vec<u32> = Vec::with_capacity(n);
    for v in 0..n {
        let l = live(&g.kind[v]);
        let next = v + 1 < n && live(&g.kind[v + 1]) && g.w[v + 1] == g.w[v];
        flags[v] |= (l as u8 * LIVE) | (next as u8 * NEXT);
        indeg[v] += l as u32;
        if indeg[v] == 0 {
            order.push(v as u32);
        }
    }
    // A vertex's forward count is final when Kahn's order takes it (all its
    // predecessors were), so it is computed there. Path counts are in log2
    // space; `lse2` with one finite term returns it unchanged, so a chain
    // vertex without comm edges copies its neighbour.
    let ninf = f64::NEG_INFINITY;
    let mut fwd = vec![ninf; n];
    let mut head = 0;
    while head < order.len() {
        let v = order[head] as usize;
        head += 1;
        let fl = flags[v];
        let mut f = ninf;
        let mut any = false;
        if fl & LIVE != 0 {
            f = fwd[v - 1];
            any = true;
        }
        if fl & IN != 0 {
            for c in ins(v) {
                f = lse2(f, fwd[g.comms[c as usize].src as usize]);
                any = true;
            }
        }
        fwd[v] = if any { f } else { 0.0 };
        if fl & NEXT != 0 {
            indeg[v + 1] -= 1;
            if indeg[v + 1] == 0 {
                order.push(v as u32 + 1);
            }
        }
        if fl & OUT != 0 {
            for c in outs(v) {
                let d = g.comms[c as usize].dst as usize;
                indeg[d] -= 1;
                if indeg[d] == 0 {
                    order.push(d as u32);
                }
            }
        }
    }
    p.cyclic = n - order.len();
    let mut bwd = vec![ninf; n];
    let mut total = ninf;
    for &v in order.iter().rev() {
        let v = v as usize;
        let fl = flags[v];
        let mut b = ninf;
        let mut any = false;
        if fl & NEXT != 0 {
            b = bwd[v + 1];
            any = true;
        }
        if fl & OUT != 0 {
            for c in outs(v) {
                b = lse2(b, bwd[g.comms[c as usize].dst as usize]);
                any = true;
            }
        }
        bwd[v] = if any { b } else { 0.0 };
        if !any && fl & (LIVE | IN) != 0 {
            total = lse2(total, fwd[v]);
        }
    }
    p.log2_paths = total;
    let span = (g.window.1 - g.window.0) as f64;
    if total == ninf || span <= 0.0 {
        return p;
    }
    // Along a chain between comm edges the exponent repeats: exp2 once per
    // run (outside the inner loop, so that it is not evaluated speculatively).
    let counted = |v: usize| flags[v] & LIVE != 0 && fwd[v - 1] > ninf && bwd[v] > ninf;
    let mut v = 1;
    while v < n {
        if !counted(v) {
            v += 1;
            continue;
        }
        let x = fwd[v - 1] + bwd[v] - total;
        let e = x.exp2();
        loop {
            p.worker[v] = e * (g.t[v] - g.t[v - 1]) as f64 / span;
            v += 1;
            if v >= n || !counted(v) || (fwd[v - 1] + bwd[v] - total).to_bits() != x.to_bits() {
                break;
            }
        }
    }
    for (i, c) in g.comms.iter().enumerate() {
        let (s, d) = (c.src as usize, c.dst as usize);
        if fwd[s] > ninf && bwd[d] > ninf {
            p.comm[i] = (fwd[s] + bwd[d] - total).exp2() * g.t[d].saturating_sub(g.t[s]) as f64 / span;
        }
    }
    p
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
