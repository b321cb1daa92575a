//! Each worker's points laid out in the order a replay visits them, once
//! per window.
//!
//! A replay needs each worker's points (its chain's vertices, its sends
//! and its reads) in measured-time order; across workers it walks them in
//! turn, each as far as its dependencies allow ([`super::Replay`]). The
//! chain is in time order already, and the matching makes a data group's
//! links one after another in sequence order, so a worker's sends to one
//! peer, and its reads from one, come in time order: a worker's points are
//! a merge of these runs (a few per peer), swept along its chain to find
//! the edge each falls on. On 50 M records (17 windows) the merge takes
//! 250 ms, where placing each point on its edge by a bucket index of the
//! chain and counting the points into their edges took 620 ms (their
//! scattered writes missed the cache), the standard library's sort of a
//! worker's runs (it merges the runs it finds) 610 ms, and a binary heap of
//! the runs' heads 365 ms.

use super::Link;
use crate::analysis::graph::Graph;
use crate::analysis::model::Ns;

/// Each worker's points in time order, as the replays walk them: its
/// chain's vertices (strictly increasing), and before each vertex the sends
/// and reads on the edge into it (those earlier than the vertex, at or after
/// the one before), in time order, at the same time sends before reads,
/// each in link order (what a stable sort of the worker's sends, then its
/// reads, by time gives); after the last vertex, the points past it.
pub(super) struct Layout {
    /// The sends and reads, edge after edge, worker after worker.
    pub points: Vec<Point>,
    /// Per edge (a worker's vertices, then one past its chain's end), where
    /// its points start in `points`; one more at the end.
    pub bounds: Vec<u32>,
    /// Per worker, its first edge in `bounds`.
    pub base: Vec<u32>,
    /// Per link (see [`Point`]), its measured send time.
    pub sent: Vec<Ns>,
    /// The earliest time of a vertex or a send (`Ns::MAX`: none), read on
    /// the way.
    pub first: Ns,
}

/// A send or a read at its measured time `t` (a read: no earlier than its
/// send), and its message's slot: its link's index. The time is kept beside
/// the point, not read from its link where the walk needs it (reaching
/// each point's link, 32 bytes, cost a cache miss a point:
/// docs/performance.md, "What-if: accuracy and cost"). A message's replayed
/// send time is kept at its slot: a worker's sends to one peer, and its
/// reads from one, are a run of links one after another, so the walk
/// reaches them in a few sequential streams. (Numbering the messages in the
/// walk's order instead made the walk about as much faster, 70 ms on 50 M
/// records, as its scatter and pass made the layout slower.)
///
/// Ordered as the walk takes them: by time, at the same time sends before
/// reads, each in link order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Point {
    pub t: Ns,
    pub read: bool,
    pub slot: u32,
}

/// The window's [`Layout`]: per worker, its runs of sends and of reads
/// merged in time order (of equal times, sends first, each in link order),
/// its chain's vertices met in the same sweep.
pub(super) fn layout(g: &Graph, links: &[Link]) -> Layout {
    let runs = runs_by_worker(links, g.chains.len());
    let mut points = Vec::with_capacity(2 * links.len());
    let mut bounds = Vec::with_capacity(g.len() + g.chains.len() + 1);
    let mut base = Vec::with_capacity(g.chains.len());
    let mut first = Ns::MAX;
    for (&(s, e), runs) in g.chains.iter().zip(&runs) {
        let t = &g.t[s as usize..e as usize];
        base.push(bounds.len() as u32);
        bounds.push(points.len() as u32);
        // (Each run's head keyed in one integer, compared at once: its
        // time, then sends before reads, then its link.)
        let head = |i: usize, m: u32| {
            let (r, l) = (&runs[i], &links[m as usize]);
            let t = if r.read { l.read_at() } else { l.sent };
            (t as u128) << 64 | (r.read as u128) << 32 | m as u128
        };
        let mut heads = Tournament::new((0..runs.len()).map(|i| head(i, runs[i].from)).collect());
        let mut v = 0;
        while let Some((i, key)) = heads.first() {
            let m = key as u32;
            let p = Point { t: (key >> 64) as Ns, read: runs[i].read, slot: m };
            // (A point goes before the first vertex later than it: one at
            // the time of a vertex comes after it, as a wait may end on a
            // message sent at that time.)
            while v < t.len() && t[v] <= p.t {
                first = first.min(t[v]);
                v += 1;
                bounds.push(points.len() as u32);
            }
            points.push(p);
            heads.replace_first(if m + 1 < runs[i].to { head(i, m + 1) } else { Tournament::DONE });
        }
        first = t[v..].iter().fold(first, |a, &b| a.min(b));
        bounds.extend(std::iter::repeat_n(points.len() as u32, t.len() - v));
    }
    bounds.push(points.len() as u32);
    let sent: Vec<Ns> = links.iter().map(|l| l.sent).collect();
    first = sent.iter().fold(first, |a, &b| a.min(b));
    Layout { points, bounds, base, sent, first }
}

/// The heads of `k` sorted runs, the least first: a tournament of losers
/// (Knuth, TAOCP vol. 3, §5.4.1), which replaces the least with its run's
/// next in log2 k comparisons, one a level (a binary heap's sift makes two:
/// the standard library's `BinaryHeap`, measured in its place, took 365 ms
/// where this takes 250 ms; see the module's note).
struct Tournament {
    /// Per inner node (1.. ; node `n`'s children are `2n` and `2n + 1`, the
    /// leaves, one per run, `len..2 len`), the head that lost there and its
    /// run: the key is kept beside its run so that a level costs one load,
    /// not a run's index and then its key.
    losers: Vec<(u128, u32)>,
    /// The least head and its run ([`Tournament::DONE`] once every run is:
    /// a run's head past its end, and the leaves that pad `k` to a power of
    /// two).
    winner: (u128, u32),
}

impl Tournament {
    /// A run's head once it has none.
    const DONE: u128 = u128::MAX;

    fn new(mut keys: Vec<u128>) -> Tournament {
        let len = keys.len().next_power_of_two();
        keys.resize(len, Self::DONE);
        // (Played bottom up: each node's winner goes up, its loser stays.)
        let mut won: Vec<(u128, u32)> = vec![(Self::DONE, 0); 2 * len];
        let mut losers = vec![(Self::DONE, 0); len];
        for (i, w) in won[len..].iter_mut().enumerate() {
            *w = (keys[i], i as u32);
        }
        for n in (1..len).rev() {
            let (a, b) = (won[2 * n], won[2 * n + 1]);
            (won[n], losers[n]) = if a.0 <= b.0 { (a, b) } else { (b, a) };
        }
        Tournament { winner: won[1], losers }
    }

    /// The least head: its run and its key (`None`: every run is done).
    #[inline]
    fn first(&self) -> Option<(usize, u128)> {
        let (k, w) = self.winner;
        (k != Self::DONE).then_some((w as usize, k))
    }

    /// The least head's run's next head is `key`.
    #[inline]
    fn replace_first(&mut self, key: u128) {
        let mut up = (key, self.winner.1);
        let mut n = (self.losers.len() + up.1 as usize) / 2;
        // (At each node the lesser goes up, the other stays there.)
        while n >= 1 {
            let here = self.losers[n];
            let less = here.0 < up.0;
            self.losers[n] = if less { up } else { here };
            up = if less { here } else { up };
            n /= 2;
        }
        self.winner = up;
    }
}

/// Links `from..to` of one (sender, receiver), their sends (or, `read`,
/// their reads) in time order.
struct Run {
    from: u32,
    to: u32,
    read: bool,
}

/// Per worker, the runs of its sends and of its reads. The matching makes
/// a data group's links one after another, in sequence order (in which both
/// sends and reads are in time order): every stretch of links between the
/// same two workers, in time order on both sides, is a run. (A link naming
/// a worker not in the window is in none.)
fn runs_by_worker(links: &[Link], workers: usize) -> Vec<Vec<Run>> {
    let mut runs: Vec<Vec<Run>> = (0..workers).map(|_| Vec::new()).collect();
    let ok = |l: &Link| (l.src as usize) < workers && (l.dst as usize) < workers;
    let follows =
        |a: &Link, b: &Link| (a.src, a.dst) == (b.src, b.dst) && a.sent <= b.sent && a.read_at() <= b.read_at();
    let mut m = 0;
    while m < links.len() {
        if !ok(&links[m]) {
            m += 1;
            continue;
        }
        let from = m;
        m += 1;
        while m < links.len() && follows(&links[m - 1], &links[m]) {
            m += 1;
        }
        let (from, to, l) = (from as u32, m as u32, &links[from]);
        runs[l.src as usize].push(Run { from, to, read: false });
        runs[l.dst as usize].push(Run { from, to, read: true });
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::{EKind, GraphBuilder};
    use proptest::prelude::*;

    proptest! {
        /// The tournament hands out the heads of sorted runs (some empty,
        /// some with equal keys) in the order one sort of all of them gives.
        #[test]
        fn a_tournament_merges_runs_as_a_sort_does(
            runs in proptest::collection::vec(proptest::collection::vec(0u128..50, 0..20), 0..12),
        ) {
            let runs: Vec<Vec<u128>> = runs.into_iter().map(|mut r| { r.sort(); r }).collect();
            let mut next = vec![0; runs.len()];
            let head = |i: usize, k: usize| runs[i].get(k).copied().unwrap_or(Tournament::DONE);
            let mut t = Tournament::new((0..runs.len()).map(|i| head(i, 0)).collect());
            let mut got = Vec::new();
            while let Some((i, key)) = t.first() {
                prop_assert_eq!(key, runs[i][next[i]]);
                got.push(key);
                next[i] += 1;
                t.replace_first(head(i, next[i]));
            }
            let mut all: Vec<u128> = runs.concat();
            all.sort();
            prop_assert_eq!(got, all);
        }

        /// The merged runs give each worker's points as a sort of all of
        /// them by (time, send before read, link) does, and each on the edge
        /// before its worker's first vertex later than it: for links in
        /// runs, out of order, at and between vertices' times, past the
        /// chains' ends, and naming workers not in the window.
        #[test]
        fn a_layout_is_each_workers_points_sorted_and_placed(
            chains in proptest::collection::vec(proptest::collection::vec(prop_oneof![1u64..4, 1u64..100, Just(1u64 << 40)], 0..30), 1..5),
            raw in proptest::collection::vec((0u32..6, 0u64..300, 0u32..6, 0u64..300), 0..80),
            runs in any::<bool>(),
        ) {
            let mut b = GraphBuilder::new((0, u64::MAX), chains.len());
            for (w, gaps) in chains.iter().enumerate() {
                let mut t = 5;
                for d in gaps {
                    b.segment(w, t, t + d, EKind::Op(1));
                    t += d;
                }
            }
            let g = b.build();
            let mut links: Vec<Link> = raw.iter().map(|&(src, sent, dst, read)| Link { src, sent, dst, read }).collect();
            if runs {
                // (As the matching makes them: by workers, in time order.)
                links.sort_by_key(|l| (l.src, l.dst, l.sent, l.read));
            }
            let lay = layout(&g, &links);
            let nw = g.chains.len();
            let mut expect = Vec::new();
            let mut bounds = Vec::new();
            for (w, &(s, e)) in g.chains.iter().enumerate() {
                let mut ps: Vec<Point> = Vec::new();
                for (m, l) in links.iter().enumerate() {
                    if (l.src as usize) < nw && (l.dst as usize) < nw {
                        if l.src as usize == w {
                            ps.push(Point { t: l.sent, read: false, slot: m as u32 });
                        }
                        if l.dst as usize == w {
                            ps.push(Point { t: l.read_at(), read: true, slot: m as u32 });
                        }
                    }
                }
                ps.sort();
                let ts = &g.t[s as usize..e as usize];
                for k in 0..=ts.len() {
                    bounds.push((expect.len() + ps.iter().filter(|p| ts.partition_point(|&y| y <= p.t) < k).count()) as u32);
                }
                expect.extend(ps);
            }
            bounds.push(expect.len() as u32);
            prop_assert_eq!(&lay.points, &expect);
            prop_assert_eq!(&lay.bounds, &bounds);
            prop_assert_eq!(&lay.sent, &links.iter().map(|l| l.sent).collect::<Vec<_>>());
            let first = g.t.iter().chain(&lay.sent).copied().min().unwrap_or(Ns::MAX);
            prop_assert_eq!(lay.first, first);
        }
    }
}
