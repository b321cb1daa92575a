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

/// Collects segments per worker, then lays out the graph.
pub struct GraphBuilder {
    window: (Ns, Ns),
    segs: Vec<Vec<(Ns, Ns, EKind)>>,
    splits: Vec<Vec<Ns>>,
    waits: Vec<(u32, Ns, u32, Ns, u32, MsgKind)>,
    spans: Vec<u64>,
    span_index: rustc_hash::FxHashMap<u64, u32>,
}

impl GraphBuilder {
    pub fn new(window: (Ns, Ns), workers: usize) -> Self {
        GraphBuilder {
            window,
            segs: vec![Vec::new(); workers],
            splits: vec![Vec::new(); workers],
            waits: Vec::new(),
            spans: Vec::new(),
            span_index: Default::default(),
        }
    }

    /// The kind of an activity in the user span `id`.
    pub fn span(&mut self, id: u64) -> EKind {
        let next = self.spans.len() as u32;
        let ix = *self.span_index.entry(id).or_insert(next);
        if ix == next {
            self.spans.push(id);
        }
        EKind::Span(ix)
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
        let mut g = Graph { window: self.window, spans: std::mem::take(&mut self.spans), ..Default::default() };
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
                    // A few sorted runs (one per worker whose waits this
                    // worker's messages ended, each in time order): the
                    // run-adaptive stable sort merges them.
                    splits.sort();
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
        // Each wait's two vertices, looked up per chain in time order (one
        // forward search along the chain instead of a binary search over it
        // per end: the searches missed the cache at every step).
        let nw = self.waits.len();
        let mut found = vec![NONE; 2 * nw];
        let mut lookups: Vec<Vec<(Ns, u32)>> = vec![Vec::new(); g.chains.len()];
        for (i, &(dst, at, src, sent, ..)) in self.waits.iter().enumerate() {
            if let Some(l) = lookups.get_mut(dst as usize) {
                l.push((at, 2 * i as u32));
            }
            if let Some(l) = lookups.get_mut(src as usize) {
                l.push((sent, 2 * i as u32 + 1));
            }
        }
        for (w, l) in lookups.iter_mut().enumerate() {
            if !l.is_sorted() {
                // Sorted runs (the waits of each worker in time order): the
                // run-adaptive stable sort merges them. (Slots are unique:
                // the same order as an unstable sort.)
                l.sort();
            }
            let (a, b) = g.chains[w];
            let ts = &g.t[a as usize..b as usize];
            let mut at = 0;
            for &(t, slot) in l.iter() {
                at = seek(ts, at, t);
                if ts.get(at) == Some(&t) {
                    found[slot as usize] = a + at as u32;
                }
            }
        }
        for (i, &(.., channel, kind)) in self.waits.iter().enumerate() {
            let (d, s) = (found[2 * i], found[2 * i + 1]);
            if d == NONE || s == NONE {
                continue;
            }
            if g.kind[d as usize].is_wait() && g.term[d as usize] == NONE {
                g.term[d as usize] = g.comms.len() as u32;
                g.comms.push(Comm { src: s, dst: d, channel, kind });
            }
        }
        g
    }
}

/// The first index at or after `from` whose time is at least `t` (`ts` is
/// sorted): a galloping search forward, so a run of increasing lookups
/// costs about the log of the distances between them.
fn seek(ts: &[Ns], from: usize, t: Ns) -> usize {
    let n = ts.len();
    if from >= n || ts[from] >= t {
        return from.min(n);
    }
    // ts[lo] < t throughout.
    let (mut lo, mut step) = (from, 1);
    let hi = loop {
        let probe = lo + step;
        if probe >= n {
            break n;
        }
        if ts[probe] >= t {
            break probe;
        }
        lo = probe;
        step *= 2;
    };
    lo + 1 + ts[lo + 1..hi].partition_point(|&x| x < t)
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
    let mut worker = vec![0.0; g.len()];
    let mut p = participation_with(g, |v, score| worker[v] = score);
    p.worker = worker;
    p
}

/// [`participation`], handing each worker edge's score to `worker_score`
/// (vertex, score) in vertex order instead of storing it (`worker` is left
/// empty): edges not handed over score 0.
pub fn participation_with(g: &Graph, mut worker_score: impl FnMut(usize, f64)) -> Participation {
    let n = g.len();
    let nc = g.comms.len();
    let mut p = Participation { comm: vec![0.0; nc], ..Default::default() };
    if n == 0 {
        return p;
    }
    // Path counts change only where a comm edge starts or ends: along a
    // chain between two such vertices a vertex's forward count is its
    // predecessor's (one in-edge) and its backward count its successor's
    // (one out-edge). So the counting runs on the *key* vertices only —
    // comm endpoints and the ends of each live stretch of a chain (a stretch
    // is cut by a wait or the chain's start) — and every other vertex takes
    // its key neighbours' counts. The counts are the same floating-point
    // operations in the same order as on the full graph.
    let live = |k: &EKind| !matches!(k, EKind::Start | EKind::Wait);
    // Which vertices are comm endpoints, as a bit set (marking is linear;
    // the walk below asks in vertex order).
    let mut is_end = vec![0u64; n.div_ceil(64)];
    for c in &g.comms {
        for v in [c.src as usize, c.dst as usize] {
            is_end[v / 64] |= 1 << (v % 64);
        }
    }
    let is_end = |v: usize| is_end[v / 64] & (1 << (v % 64)) != 0;
    // Key vertices in vertex order, each with: a worker edge from the
    // previous key (LIVE), one to the next key (NEXT).
    const LIVE: u8 = 1;
    const NEXT: u8 = 2;
    let mut key: Vec<u32> = Vec::with_capacity(2 * nc + 2 * g.chains.len() + 16);
    let mut kflags: Vec<u8> = Vec::with_capacity(key.capacity());
    for &(a, b) in &g.chains {
        let (a, b) = (a as usize, b as usize);
        let mut s = a;
        while s < b {
            // A stretch starts at `s`; its vertices after `s` are live.
            let k0 = key.len();
            key.push(s as u32);
            kflags.push(live(&g.kind[s]) as u8 * LIVE);
            let mut u = s + 1;
            while u < b && live(&g.kind[u]) {
                if is_end(u) {
                    key.push(u as u32);
                    kflags.push(LIVE);
                }
                u += 1;
            }
            if u - 1 > *key.last().unwrap() as usize {
                key.push((u - 1) as u32);
                kflags.push(LIVE);
            }
            for f in &mut kflags[k0..key.len() - 1] {
                *f |= NEXT;
            }
            s = u;
        }
    }
    let nk = key.len();
    let key_of = |v: u32| key.binary_search(&v).expect("comm endpoints are keys");
    let ck: Vec<(u32, u32)> = g.comms.iter().map(|c| (key_of(c.src) as u32, key_of(c.dst) as u32)).collect();
    // Comm edges by destination and by source key, each in comm order: per
    // key the start of its run (a count per key, summed), then the comms
    // placed in order (CSR; no sort).
    let csr = |end: fn(&(u32, u32)) -> u32| {
        let mut o = vec![0u32; nk + 1];
        for e in &ck {
            o[end(e) as usize + 1] += 1;
        }
        for k in 0..nk {
            o[k + 1] += o[k];
        }
        let mut at = o.clone();
        let mut list = vec![0u32; ck.len()];
        for (i, e) in ck.iter().enumerate() {
            let k = end(e) as usize;
            list[at[k] as usize] = i as u32;
            at[k] += 1;
        }
        (o, list)
    };
    let (in_o, in_e) = csr(|e| e.1);
    let (out_o, out_e) = csr(|e| e.0);
    let ins = |k: usize| in_e[in_o[k] as usize..in_o[k + 1] as usize].iter().map(|&c| c as usize);
    let outs = |k: usize| out_e[out_o[k] as usize..out_o[k + 1] as usize].iter().map(|&c| c as usize);
    let mut indeg: Vec<u32> = (0..nk).map(|k| (kflags[k] & LIVE) as u32 + in_o[k + 1] - in_o[k]).collect();
    let mut order: Vec<u32> = (0..nk as u32).filter(|&k| indeg[k as usize] == 0).collect();
    let ninf = f64::NEG_INFINITY;
    let mut fwd = vec![ninf; nk];
    let mut head = 0;
    while head < order.len() {
        let k = order[head] as usize;
        head += 1;
        let mut f = ninf;
        let mut any = false;
        if kflags[k] & LIVE != 0 {
            f = fwd[k - 1];
            any = true;
        }
        for c in ins(k) {
            f = lse2(f, fwd[ck[c].0 as usize]);
            any = true;
        }
        fwd[k] = if any { f } else { 0.0 };
        if kflags[k] & NEXT != 0 {
            indeg[k + 1] -= 1;
            if indeg[k + 1] == 0 {
                order.push(k as u32 + 1);
            }
        }
        for c in outs(k) {
            let d = ck[c].1 as usize;
            indeg[d] -= 1;
            if indeg[d] == 0 {
                order.push(d as u32);
            }
        }
    }
    // Vertices Kahn's order never reached (on or behind a cycle): an
    // unreached key (its forward count never set) and the vertices between
    // it and the next key.
    p.cyclic = (0..nk)
        .filter(|&k| fwd[k] == ninf)
        .map(|k| if kflags[k] & NEXT != 0 { (key[k + 1] - key[k]) as usize } else { 1 })
        .sum();
    let mut bwd = vec![ninf; nk];
    let mut sink = vec![false; nk];
    for &k in order.iter().rev() {
        let k = k as usize;
        let mut b = ninf;
        let mut any = false;
        if kflags[k] & NEXT != 0 {
            b = bwd[k + 1];
            any = true;
        }
        for c in outs(k) {
            b = lse2(b, bwd[ck[c].1 as usize]);
            any = true;
        }
        bwd[k] = if any { b } else { 0.0 };
        sink[k] = !any && (kflags[k] & LIVE != 0 || in_o[k + 1] > in_o[k]);
    }
    // The total over the sinks, in vertex order.
    let mut total = ninf;
    for k in 0..nk {
        if sink[k] {
            total = lse2(total, fwd[k]);
        }
    }
    p.log2_paths = total;
    let span = (g.window.1 - g.window.0) as f64;
    if total == ninf || span <= 0.0 {
        return p;
    }
    // The worker edges from key k to key k + 1 (through the vertices
    // between) share one exponent: fwd of k plus bwd of k + 1.
    for k in 0..nk.saturating_sub(1) {
        if kflags[k] & NEXT == 0 || fwd[k] == ninf || bwd[k + 1] == ninf {
            continue;
        }
        let e = (fwd[k] + bwd[k + 1] - total).exp2();
        for v in key[k] as usize + 1..=key[k + 1] as usize {
            worker_score(v, e * (g.t[v] - g.t[v - 1]) as f64 / span);
        }
    }
    for (i, c) in g.comms.iter().enumerate() {
        let (s, d) = (ck[i].0 as usize, ck[i].1 as usize);
        if fwd[s] > ninf && bwd[d] > ninf {
            p.comm[i] = (fwd[s] + bwd[d] - total).exp2()
                * g.t[c.dst as usize].saturating_sub(g.t[c.src as usize]) as f64
                / span;
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

    proptest::proptest! {
        /// The galloping search finds what a binary search over the rest of
        /// the slice finds, from any start.
        #[test]
        fn seek_is_partition_point(mut ts in proptest::collection::vec(0u64..200, 0..60), from in 0usize..70, t in 0u64..210) {
            ts.sort_unstable();
            let want = from.min(ts.len()) + ts[from.min(ts.len())..].partition_point(|&x| x < t);
            proptest::prop_assert_eq!(seek(&ts, from, t), want);
        }

        /// Waits resolved by the per-chain forward search get the vertices
        /// a lookup of each end on its own (`Graph::vertex`) gives, the
        /// first wait ending at a vertex taking it; waits arrive in any order.
        #[test]
        fn waits_resolve_to_their_vertices(
            cuts in proptest::collection::vec(proptest::collection::btree_set(1u64..99, 1..12), 3),
            waits in proptest::collection::vec((0usize..3, 0usize..12, 0usize..3, 0u64..100), 0..20),
        ) {
            let mut b = GraphBuilder::new((0, 100), 3);
            let mut ends = Vec::new();
            for (w, c) in cuts.iter().enumerate() {
                let mut prev = 0;
                for (i, &t) in c.iter().chain([100u64].iter()).enumerate() {
                    b.segment(w, prev, t, if i % 2 == 1 { EKind::Wait } else { EKind::Op(i as u32) });
                    prev = t;
                }
                ends.push(c.iter().copied().chain([100]).collect::<Vec<_>>());
            }
            let mut asked = Vec::new();
            for &(dst, k, src, sent) in &waits {
                let at = ends[dst][k % ends[dst].len()];
                b.terminated_wait(dst, at, src, sent, 7, MsgKind::Data);
                asked.push((dst, at, src, sent));
            }
            let g = b.build();
            let mut want = Vec::new();
            let mut taken = std::collections::HashSet::new();
            for &(dst, at, src, sent) in &asked {
                let (Some(d), Some(s)) = (g.vertex(dst, at), g.vertex(src, sent)) else { continue };
                if g.kind[d as usize].is_wait() && taken.insert(d) {
                    want.push(Comm { src: s, dst: d, channel: 7, kind: MsgKind::Data });
                }
            }
            proptest::prop_assert_eq!(&g.comms, &want);
            for (i, c) in g.comms.iter().enumerate() {
                proptest::prop_assert_eq!(g.term[c.dst as usize], i as u32);
            }
        }
    }
}
