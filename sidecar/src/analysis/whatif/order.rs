//! Each worker's points laid out in the order a replay visits them, built
//! once per window without sorting them.
//!
//! A replay needs each worker's points (its chain's vertices, its sends
//! and its reads) in measured-time order; across workers it walks them in
//! turn, each as far as its dependencies allow ([`super::Replay`]). The
//! chain is in time order already; each send and read is placed on the
//! edge it falls on by a bucket index of the chain (O(1) a point), the
//! points counted into their edges, and each edge's few points put in time
//! order. Sorting each worker's sends and reads by time instead (they come
//! in runs, one per channel and peer) took some 118 instructions a point.

use super::{step, Link, L_READ, L_SEND};
use crate::analysis::graph::Graph;
use crate::analysis::model::Ns;

/// Where a point at time `x` goes on one worker's chain: before the first
/// vertex later than `x` (one at the time of a vertex comes after it: a
/// wait may end on a message sent at that time). Found in O(1) for chains
/// whose vertices are spread in time: the chain's span cut into about as
/// many buckets as it has vertices, each bucket's first vertex kept, and a
/// search inside the bucket.
struct Placer<'g> {
    t: &'g [Ns],
    /// The chain's first and last vertex's times.
    lo: Ns,
    hi: Ns,
    shift: u32,
    /// Per bucket, the first vertex (relative) at or after its start; one
    /// more at the end.
    first: Vec<u32>,
}

impl<'g> Placer<'g> {
    fn new(g: &'g Graph, (s, e): (u32, u32)) -> Placer<'g> {
        let t = &g.t[s as usize..e as usize];
        let (lo, hi) = match (t.first(), t.last()) {
            (Some(&a), Some(&b)) => (a, b),
            _ => (0, 0),
        };
        let span = hi - lo;
        // Buckets of 2^shift ns, about one vertex each.
        let mut shift = 0;
        while shift < 63 && (span >> shift) >= t.len().max(1) as u64 {
            shift += 1;
        }
        let buckets = (span >> shift) as usize + 1;
        let mut first = Vec::with_capacity(buckets + 1);
        let mut v = 0;
        for b in 0..buckets as u64 {
            let start = lo + (b << shift);
            while v < t.len() && t[v] < start {
                v += 1;
            }
            first.push(v as u32);
        }
        first.push(t.len() as u32);
        Placer { t, lo, hi, shift, first }
    }

    /// The edge a point at `x` is on: the vertex it leads into, counted
    /// from the chain's start (the chain's length: past its end).
    #[inline(always)]
    fn place(&self, x: Ns) -> u32 {
        if x < self.lo {
            return 0;
        }
        if x >= self.hi {
            // (An empty chain's length is 0.)
            return self.t.len() as u32;
        }
        let t = self.t;
        let k = ((x - self.lo) >> self.shift) as usize;
        let (mut i, j) = (self.first[k] as usize, self.first[k + 1] as usize);
        // (The bucket after holds the first vertex past `x` if this one has
        // none. A bucket holds a vertex or two, unless they come in a
        // burst: then a search.)
        if j - i > 8 {
            return (i + t[i..j].partition_point(|&y| y <= x)) as u32;
        }
        while i < j && t[i] <= x {
            i += 1;
        }
        i as u32
    }
}

/// Each worker's points in time order, as the replays walk them: its
/// chain's vertices (strictly increasing), and before each vertex the sends
/// and reads on the edge into it (those earlier than the vertex, at or after
/// the one before), in time order, at the same time sends before reads,
/// each in link order (what a stable sort of the worker's sends, then its
/// reads, by time gives); after the last vertex, the points past it.
pub(super) struct Layout {
    /// The sends and reads as steps ([`super::L_SEND`], [`super::L_READ`]),
    /// edge after edge, worker after worker.
    pub points: Vec<u64>,
    /// Per edge (a worker's vertices, then one past its chain's end), where
    /// its points start in `points`; one more at the end.
    pub bounds: Vec<u32>,
    /// Per worker, its first edge in `bounds`.
    pub base: Vec<u32>,
}

/// The window's [`Layout`]: a counting sort of the sends and reads by the
/// edge they are on, then each edge's few points sorted by time (most often
/// they are already).
pub(super) fn layout(g: &Graph, links: &[Link]) -> Layout {
    let nw = g.chains.len();
    let placers: Vec<Placer> = g.chains.iter().map(|&c| Placer::new(g, c)).collect();
    let mut base = Vec::with_capacity(nw + 1);
    base.push(0u32);
    for &(s, e) in &g.chains {
        base.push(base.last().unwrap() + (e - s) + 1);
    }
    let slots = base[nw] as usize;
    let ok = |l: &Link| (l.src as usize) < nw && (l.dst as usize) < nw;
    // Per link, the edge of its send and of its read; per edge, its count
    // (at `bounds[edge + 2]`: summed, `bounds[edge + 1]` is where the edge
    // starts, and once its points are in, where the next one does).
    let mut edge: Vec<[u32; 2]> = Vec::with_capacity(links.len());
    let mut bounds = vec![0u32; slots + 2];
    for l in links {
        if ok(l) {
            let (i, j) = (l.src as usize, l.dst as usize);
            let e = [base[i] + placers[i].place(l.sent), base[j] + placers[j].place(l.read.max(l.sent))];
            bounds[e[0] as usize + 2] += 1;
            bounds[e[1] as usize + 2] += 1;
            edge.push(e);
        } else {
            edge.push([0; 2]);
        }
    }
    for k in 2..bounds.len() {
        bounds[k] += bounds[k - 1];
    }
    let mut points: Vec<u64> = vec![0; bounds[slots + 1] as usize];
    for (side, tag) in [(0, L_SEND), (1, L_READ)] {
        for (m, (l, e)) in links.iter().zip(&edge).enumerate() {
            if ok(l) {
                let k = &mut bounds[e[side] as usize + 1];
                points[*k as usize] = step(tag, m);
                *k += 1;
            }
        }
    }
    bounds.pop();
    let time = |p: &u64| {
        let l = &links[*p as u32 as usize];
        if *p >> 32 == L_READ {
            l.read.max(l.sent)
        } else {
            l.sent
        }
    };
    for w in bounds.windows(2).filter(|w| w[1] - w[0] > 1) {
        let edge = &mut points[w[0] as usize..w[1] as usize];
        if !edge.is_sorted_by_key(time) {
            edge.sort_by_key(time);
        }
    }
    base.pop();
    Layout { points, bounds, base }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::{EKind, GraphBuilder};
    use proptest::prelude::*;

    proptest! {
        /// The bucket index places a point where a search of the whole
        /// chain does (before the first vertex later than it), for chains
        /// spread evenly, in bursts, or over a huge span, and points before,
        /// on, between and past its vertices.
        #[test]
        fn a_point_is_placed_where_a_search_of_the_chain_puts_it(
            gaps in proptest::collection::vec(prop_oneof![1u64..4, 1u64..1_000, Just(1u64 << 50)], 1..60),
            xs in proptest::collection::vec(any::<u64>(), 1..40),
        ) {
            let mut b = GraphBuilder::new((0, u64::MAX), 1);
            let mut t = 5;
            for d in &gaps {
                b.segment(0, t, t + d, EKind::Op(1));
                t += d;
            }
            let g = b.build();
            let p = Placer::new(&g, g.chains[0]);
            let ts = &g.t[g.chains[0].0 as usize..g.chains[0].1 as usize];
            let near = ts.iter().flat_map(|&t| [t.saturating_sub(1), t, t + 1]);
            for x in xs.iter().map(|x| x % (t + 10)).chain(near).chain([0, u64::MAX]) {
                prop_assert_eq!(p.place(x) as usize, ts.partition_point(|&y| y <= x), "{}", x);
            }
        }
    }
}
