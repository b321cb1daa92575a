//! The window graph's construction (Sager §3.1 Def. 3.3–3.5; §5.2 and
//! sager-notes §2.3 for how a trace becomes a graph): each worker's
//! activities, projected onto the window, become a chain of vertices; holes
//! between them are Unknown edges; a worker activity is split where it sent
//! a message that ended a wait elsewhere (§5.3 item 2), and that message
//! becomes the communication edge into the vertex ending the wait.

use crate::analysis::graph::{Comm, EKind, Graph, NONE};
use crate::analysis::model::{MsgKind, Ns};

/// A worker activity clipped to the window: `[start, end)` of `kind`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    start: Ns,
    end: Ns,
    kind: EKind,
}

impl Segment {
    /// `[s, e)` of kind `k` clipped to `window`, if anything is left.
    #[inline]
    fn clipped(window: (Ns, Ns), s: Ns, e: Ns, k: EKind) -> Option<Segment> {
        let (s, e) = (s.max(window.0), e.min(window.1));
        (e > s).then_some(Segment { start: s, end: e, kind: k })
    }
}

/// A wait on worker `dst` ending at `at`, ended by the message worker `src`
/// sent at `sent` on `channel`.
#[derive(Clone, Copy, Debug)]
struct TerminatedWait {
    dst: u32,
    at: Ns,
    src: u32,
    sent: Ns,
    channel: u32,
    kind: MsgKind,
}

/// Collects segments per worker, then lays out the graph.
pub struct GraphBuilder {
    window: (Ns, Ns),
    /// Each worker's activities, clipped to the window.
    segs: Vec<Vec<Segment>>,
    /// Each worker's send times of messages that ended a wait: its chain
    /// gets a vertex at each.
    splits: Vec<Vec<Ns>>,
    waits: Vec<TerminatedWait>,
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
        number_span(&mut self.spans, &mut self.span_index, id)
    }

    /// A worker activity, clipped to the window (Sager Def. 3.4, edge
    /// projection). Per worker, segments come in time order and do not
    /// overlap; holes become Unknown.
    pub fn segment(&mut self, w: usize, s: Ns, e: Ns, k: EKind) {
        self.segs[w].extend(Segment::clipped(self.window, s, e, k));
    }

    /// A wait on `dst` ending at `at` that was ended by a message `src` sent
    /// at `sent`: the source worker's activity is split there (§5.3 item 2).
    pub fn terminated_wait(&mut self, dst: usize, at: Ns, src: usize, sent: Ns, channel: u32, kind: MsgKind) {
        self.splits[src].push(sent);
        self.waits.push(TerminatedWait { dst: dst as u32, at, src: src as u32, sent, channel, kind });
    }

    /// The graph: every worker's chain laid out, then the terminated waits
    /// connected.
    pub fn build(mut self) -> Graph {
        let mut g = Graph { window: self.window, spans: std::mem::take(&mut self.spans), ..Default::default() };
        let cap = self.vertex_bound();
        g.t.reserve(cap);
        g.w.reserve(cap);
        g.kind.reserve(cap);
        g.term.reserve(cap);
        let mut scratch = ChainScratch::default();
        for w in 0..self.segs.len() {
            // (Each worker's segments are freed once its chain is laid out.)
            let segs = std::mem::take(&mut self.segs[w]);
            lay_out_chain(&mut g, w, segs, &self.splits[w], &mut scratch);
        }
        connect_terminated_waits(&mut g, &self.waits);
        g
    }

    /// Worker `w`'s part, laid apart ([`LanePart`]): as if its calls had
    /// been made here, after those of the workers appended before it.
    pub fn append(&mut self, w: usize, part: LanePart) {
        // (The part's spans are numbered in the order it met them; here in
        // the order the builder meets them, which is that order after the
        // workers before it.)
        let map: Vec<u32> = part
            .spans
            .iter()
            .map(|&id| match self.span(id) {
                EKind::Span(ix) => ix,
                _ => unreachable!("a span's kind"),
            })
            .collect();
        let mut segs = part.segs;
        if map.iter().enumerate().any(|(l, &g)| l as u32 != g) {
            for s in &mut segs {
                if let EKind::Span(l) = s.kind {
                    s.kind = EKind::Span(map[l as usize]);
                }
            }
        }
        if self.segs[w].is_empty() {
            self.segs[w] = segs;
        } else {
            self.segs[w].extend(segs);
        }
        for (src, sent) in part.splits {
            self.splits[src as usize].push(sent);
        }
        self.waits.extend(part.waits);
    }

    /// At most how many vertices the chains get: two per segment, one per
    /// split.
    fn vertex_bound(&self) -> usize {
        self.segs.iter().zip(&self.splits).map(|(s, x)| 2 * s.len() + x.len()).sum()
    }
}

/// One worker's activities and terminated waits, laid apart from the
/// window's other workers (so on any thread), then appended to the
/// window's [`GraphBuilder`] in worker order ([`GraphBuilder::append`]).
pub struct LanePart {
    window: (Ns, Ns),
    segs: Vec<Segment>,
    /// The user spans met, in the order first met (`EKind::Span` numbers
    /// them so until appended).
    spans: Vec<u64>,
    span_index: rustc_hash::FxHashMap<u64, u32>,
    /// (worker split, time) of each terminated wait's sender.
    splits: Vec<(u32, Ns)>,
    waits: Vec<TerminatedWait>,
}

impl LanePart {
    /// Room for `n` segments.
    pub fn with_capacity(window: (Ns, Ns), n: usize) -> Self {
        LanePart {
            window,
            segs: Vec::with_capacity(n),
            spans: Vec::new(),
            span_index: Default::default(),
            splits: Vec::new(),
            waits: Vec::new(),
        }
    }

    /// [`GraphBuilder::span`], numbered within the part.
    pub fn span(&mut self, id: u64) -> EKind {
        number_span(&mut self.spans, &mut self.span_index, id)
    }

    /// [`GraphBuilder::segment`] of this worker.
    pub fn segment(&mut self, s: Ns, e: Ns, k: EKind) {
        self.segs.extend(Segment::clipped(self.window, s, e, k));
    }

    /// [`GraphBuilder::terminated_wait`] of a wait of worker `dst` (this one).
    pub fn terminated_wait(&mut self, dst: usize, at: Ns, src: usize, sent: Ns, channel: u32, kind: MsgKind) {
        self.splits.push((src as u32, sent));
        self.waits.push(TerminatedWait { dst: dst as u32, at, src: src as u32, sent, channel, kind });
    }
}

/// The kind of span `id`'s activities: its number in `spans`, in the order
/// first met.
fn number_span(spans: &mut Vec<u64>, index: &mut rustc_hash::FxHashMap<u64, u32>, id: u64) -> EKind {
    let next = spans.len() as u32;
    let ix = *index.entry(id).or_insert(next);
    if ix == next {
        spans.push(id);
    }
    EKind::Span(ix)
}

/// Buffers the chains of one window reuse, so it allocates them once.
#[derive(Default)]
struct ChainScratch {
    /// The splits of the chain being laid out that fall inside its span.
    splits: Vec<Ns>,
    /// The chain's vertex times (general layout only).
    times: Vec<Ns>,
    /// Room to merge the splits into `times`.
    merged: Vec<Ns>,
}

/// Lays out worker `w`'s chain: a vertex at every bound of its segments and
/// at every split inside their span. The edge into a vertex has the kind of
/// the segment it lies in, Unknown in a hole (Sager §5.2: Unknown
/// activities fill the gaps), Start for the first.
fn lay_out_chain(g: &mut Graph, w: usize, mut segs: Vec<Segment>, splits: &[Ns], scratch: &mut ChainScratch) {
    let first = g.t.len() as u32;
    if segs.is_empty() {
        g.chains.push((first, first));
        return;
    }
    let tiled = order_segments(&mut segs);
    let (lo, hi) = (segs[0].start, segs.iter().map(|s| s.end).max().unwrap());
    scratch.splits.clear();
    scratch.splits.extend(splits.iter().copied().filter(|&t| t >= lo && t <= hi));
    if tiled {
        push_tiled_chain(g, w, &segs, &mut scratch.splits);
    } else {
        push_general_chain(g, w, &segs, scratch);
    }
    g.chains.push((first, g.t.len() as u32));
}

/// Puts a worker's segments in time order; true when they then follow one
/// another (with holes), which is what the fast layout needs. Segments
/// nearly always come in order, one after another (which is sorted, as
/// every segment is non-empty): checked before sorting.
fn order_segments(segs: &mut [Segment]) -> bool {
    let follow = |segs: &[Segment]| segs.windows(2).all(|p| p[0].end <= p[1].start);
    let mut tiled = follow(segs);
    if !tiled && !segs.is_sorted_by_key(|s| (s.start, s.end)) {
        segs.sort_by_key(|s| (s.start, s.end));
        tiled = follow(segs);
    }
    tiled
}

/// The usual case: the segments follow one another (with holes). The
/// vertices come straight from them with the splits merged in: an edge
/// inside a segment has its kind, one in a hole is Unknown (what
/// [`push_general_chain`] finds).
fn push_tiled_chain(g: &mut Graph, w: usize, segs: &[Segment], splits: &mut [Ns]) {
    if !splits.is_sorted() {
        // A few sorted runs (one per worker whose waits this worker's
        // messages ended, each in time order): the run-adaptive stable sort
        // merges them.
        splits.sort();
    }
    let (times, kinds) = (&mut g.t, &mut g.kind);
    let mut push = |t: Ns, k: EKind| {
        times.push(t);
        kinds.push(k);
    };
    let mut prev = segs[0].start;
    push(prev, EKind::Start);
    let mut b = 0;
    for &Segment { start: s, end: e, kind: k } in segs {
        if s > prev {
            // A hole before the segment: Unknown up to its start.
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
}

/// The general case (segments that overlap once sorted): a vertex at every
/// distinct segment bound and split; the edge into each has the kind of the
/// segment covering it, Unknown where none does.
fn push_general_chain(g: &mut Graph, w: usize, segs: &[Segment], scratch: &mut ChainScratch) {
    scratch.merge_vertex_times(segs);
    let times = &scratch.times;
    let mut si = 0;
    for (i, &t) in times.iter().enumerate() {
        let k = if i == 0 {
            EKind::Start
        } else {
            let ta = times[i - 1];
            while si < segs.len() && segs[si].end <= ta {
                si += 1;
            }
            match segs.get(si) {
                Some(s) if s.start <= ta && t <= s.end => s.kind,
                _ => EKind::Unknown,
            }
        };
        g.t.push(t);
        g.w.push(w as u32);
        g.kind.push(k);
        g.term.push(NONE);
    }
}

impl ChainScratch {
    /// `times` = the segments' bounds and `splits`, sorted, without
    /// duplicates.
    fn merge_vertex_times(&mut self, segs: &[Segment]) {
        let ChainScratch { splits, times, merged } = self;
        times.clear();
        for s in segs {
            times.push(s.start);
            times.push(s.end);
        }
        // Segment bounds are usually one sorted run; the splits are sorted
        // on their own and merged in (same result as sorting all).
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
            std::mem::swap(times, merged);
        } else {
            times.extend_from_slice(splits);
            times.sort_unstable();
        }
        times.dedup();
    }
}

/// Makes each terminated wait a communication edge (Sager §5.3 item 2, §5.3.1:
/// only messages that ended a wait are edges): from the sender's vertex at
/// the send time to the vertex ending the wait, when both are vertices and
/// that vertex ends a wait no earlier-named message ended.
fn connect_terminated_waits(g: &mut Graph, waits: &[TerminatedWait]) {
    let found = wait_vertices(g, waits);
    for (i, wait) in waits.iter().enumerate() {
        let (d, s) = (found[2 * i], found[2 * i + 1]);
        if d == NONE || s == NONE {
            continue;
        }
        if g.kind[d as usize].is_wait() && g.term[d as usize] == NONE {
            g.term[d as usize] = g.comms.len() as u32;
            g.comms.push(Comm { src: s, dst: d, channel: wait.channel, kind: wait.kind });
        }
    }
}

/// Each wait's two vertices: at `2 i` the one where wait `i` ends, at
/// `2 i + 1` the one where its message was sent (NONE: not a vertex).
/// Looked up per chain in time order (one forward search along the chain
/// instead of a binary search over it per end: the searches missed the
/// cache at every step).
fn wait_vertices(g: &Graph, waits: &[TerminatedWait]) -> Vec<u32> {
    let mut found = vec![NONE; 2 * waits.len()];
    // Per chain: (time, slot in `found`).
    let mut lookups: Vec<Vec<(Ns, u32)>> = vec![Vec::new(); g.chains.len()];
    for (i, wait) in waits.iter().enumerate() {
        if let Some(l) = lookups.get_mut(wait.dst as usize) {
            l.push((wait.at, 2 * i as u32));
        }
        if let Some(l) = lookups.get_mut(wait.src as usize) {
            l.push((wait.sent, 2 * i as u32 + 1));
        }
    }
    for (w, l) in lookups.iter_mut().enumerate() {
        if !l.is_sorted() {
            // Sorted runs (the waits of each worker in time order): the
            // run-adaptive stable sort merges them. (Slots are unique: the
            // same order as an unstable sort.)
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
    found
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

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Workers laid apart ([`LanePart`]) and appended in order give the
        /// graph their calls made on the builder in turn give: the same
        /// spans numbered alike, splits and waits in the same order.
        #[test]
        fn lanes_laid_apart_and_appended_build_the_same_graph(
            lanes in proptest::collection::vec(
                proptest::collection::vec((1u64..50, 0u8..6, 0usize..3, 0u64..30), 0..12), 3..=3),
        ) {
            let window = (10, 2_000);
            let mut direct = GraphBuilder::new(window, lanes.len());
            let mut apart = GraphBuilder::new(window, lanes.len());
            for (w, lane) in lanes.iter().enumerate() {
                let mut part = LanePart::with_capacity(window, lane.len());
                let mut t = 0;
                for &(d, what, src, back) in lane {
                    // (Spans 100..103 met in any order across the lanes.)
                    let (k1, k2) = if what < 3 {
                        (EKind::Op(what as u32), EKind::Op(what as u32))
                    } else {
                        (direct.span(100 + what as u64), part.span(100 + what as u64))
                    };
                    direct.segment(w, t, t + d, k1);
                    part.segment(t, t + d, k2);
                    if back < 10 {
                        let sent = t.saturating_sub(back);
                        direct.terminated_wait(w, t + d, src, sent, 1, crate::analysis::model::MsgKind::Data);
                        part.terminated_wait(w, t + d, src, sent, 1, crate::analysis::model::MsgKind::Data);
                    }
                    t += d;
                }
                apart.append(w, part);
            }
            proptest::prop_assert_eq!(format!("{:?}", direct.build()), format!("{:?}", apart.build()));
        }

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
