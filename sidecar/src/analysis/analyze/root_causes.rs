//! Stage 6b: a wait's time charged to the worker it was really on.
//!
//! The wait finder ties a wait to the message that ended it: of the
//! messages the next execution read, the one that arrived last
//! ([`crate::analysis::waits`]). With more than two workers that sender
//! can be a peer that was itself waiting on the same slow worker: in
//! timely's progress protocol, when worker 0 ends a long execution, every
//! peer wakes on its progress message and broadcasts its own update, so the
//! last message a waiting worker reads is often a peer's echo. Charging the
//! whole wait to that peer names the wrong culprit.
//!
//! The rule, from Scalasca's root-cause analysis of wait states (Böhme et
//! al., "Identifying the root causes of wait states in large-scale parallel
//! applications", ICPP 2010, §3: a wait state propagates through the
//! sender's own earlier wait): while the sender was itself waiting, the
//! waiting worker waited on whatever the sender waited on. So the part of a
//! wait that overlaps a wait of its sender moves to the sender's cause,
//! followed through the chain; only the rest (the sender's own work before
//! it sent, and a message's transit between processes after it) stays on
//! the sender. Sager's critical path is unchanged by
//! this (it crosses to the sender at the send and walks the sender's
//! timeline back, through its wait, to the same root, §5.3); this charges
//! the per-worker wait figures the way the path already runs.
//!
//! Limits: a chain is followed inside the window's waits (with the earlier
//! windows' open part of a wait that ends here); a sender's wait that ended
//! in an earlier window is not seen. A chain never returns to a worker
//! already on it (clock error can make two waits look mutual), and stops
//! after [`MAX_DEPTH`] links.

use crate::analysis::model::Ns;

/// Links followed at most (a chain of peers each waiting on the next).
pub const MAX_DEPTH: usize = 8;

/// One wait on a message from a worker in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainedWait<K> {
    /// When it began (maybe in an earlier window: its carried part).
    pub start: Ns,
    pub end: Ns,
    /// When the message that ended it was sent: the sender's waits after
    /// it did not delay it (between processes a message is in flight from
    /// its send to its arrival, [`crate::analysis::waits`]; within one
    /// process it is sent as it arrives, at or after the wait's end).
    pub sent: Ns,
    /// What the wait finder charged it to.
    pub key: K,
    /// The sender's lane in the window.
    pub sender: usize,
}

/// A stretch of a wait charged to `to` instead of its finder's key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moved<K> {
    pub lane: usize,
    /// The wait's index in its lane.
    pub wait: usize,
    pub to: K,
    pub start: Ns,
    pub end: Ns,
}

/// For every lane's waits (each lane's sorted by start, disjoint), the
/// stretches that move to a root cause further down the chain.
pub fn root_causes<K: Copy>(lanes: &[Vec<ChainedWait<K>>]) -> Vec<Moved<K>> {
    let mut moved = Vec::new();
    let mut path = Vec::with_capacity(MAX_DEPTH + 1);
    let mut pieces = Vec::new();
    for (lane, waits) in lanes.iter().enumerate() {
        for (i, w) in waits.iter().enumerate() {
            pieces.clear();
            path.clear();
            path.push(lane);
            chain(lanes, w.sender, w.start, w.end.min(w.sent), &mut path, &mut pieces);
            moved.extend(pieces.iter().map(|&(to, start, end)| Moved { lane, wait: i, to, start, end }));
        }
    }
    moved
}

/// The stretches of `[x, y)` during which lane `s` was itself waiting,
/// each charged to the root of that wait's chain: pushed to `out` as
/// disjoint `(key, start, end)`, in time order.
fn chain<K: Copy>(
    lanes: &[Vec<ChainedWait<K>>],
    s: usize,
    x: Ns,
    y: Ns,
    path: &mut Vec<usize>,
    out: &mut Vec<(K, Ns, Ns)>,
) {
    let Some(waits) = lanes.get(s) else { return };
    if path.contains(&s) || path.len() > MAX_DEPTH {
        return;
    }
    path.push(s);
    let first = waits.partition_point(|v| v.end <= x);
    for v in waits[first..].iter().take_while(|v| v.start < y) {
        let (px, py) = (v.start.max(x), v.end.min(y));
        // A wait on a worker already on the chain (clock error makes waits
        // look mutual) moves nothing: the time stays where it was.
        if px >= py || path.contains(&v.sender) {
            continue;
        }
        // Deeper first: what the sender's cause was itself waiting on.
        let deeper = out.len();
        chain(lanes, v.sender, px, py, path, out);
        // The rest of the overlap stays on the sender's own cause.
        let mut at = px;
        for k in deeper..out.len() {
            let (_, a, b) = out[k];
            if a > at {
                out.push((v.key, at, a));
            }
            at = at.max(b);
        }
        if at < py {
            out.push((v.key, at, py));
        }
        out[deeper..].sort_by_key(|p| p.1);
    }
    path.pop();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(start: Ns, end: Ns, key: char, sender: usize) -> ChainedWait<char> {
        ChainedWait { start, end, sent: end, key, sender }
    }

    /// Worker 0 works 0..100 and sends at 100. Worker 2 waits 10..100 on
    /// it, then works 100..105 and sends. Worker 1 waits 5..105 and the
    /// last message it read is worker 2's. Worker 1's wait: 5..10 (worker 2
    /// was still working) and 100..105 (worker 2's own work) stay on worker
    /// 2; 10..100, while worker 2 waited on worker 0, moves to worker 0.
    #[test]
    fn a_wait_on_a_waiting_peer_moves_to_the_peers_cause() {
        let lanes = vec![vec![], vec![w(5, 105, '2', 2)], vec![w(10, 100, '0', 0)]];
        let m = root_causes(&lanes);
        assert_eq!(m, vec![Moved { lane: 1, wait: 0, to: '0', start: 10, end: 100 }]);
    }

    /// Three links: 3 waits on 2, 2 on 1, 1 on 0, nested intervals.
    #[test]
    fn a_chain_is_followed_to_its_root() {
        let lanes = vec![vec![], vec![w(20, 80, '0', 0)], vec![w(10, 90, '1', 1)], vec![w(0, 100, '2', 2)]];
        let mut m = root_causes(&lanes);
        m.retain(|x| x.lane == 3);
        let got: Vec<(char, Ns, Ns)> = m.iter().map(|x| (x.to, x.start, x.end)).collect();
        assert_eq!(got, vec![('1', 10, 20), ('0', 20, 80), ('1', 80, 90)]);
    }

    /// Between processes: worker 2 sent at 60 and its message was in flight
    /// until 100. Worker 1 waited 5..100 on it; worker 2 waited 10..100 on
    /// worker 0. Only 10..60 (worker 2 waiting before it sent) moves to
    /// worker 0; 60..100, the message in flight while worker 2 waited
    /// again for other reasons, stays on worker 2.
    #[test]
    fn a_wait_moves_only_up_to_the_send_of_the_message_that_ended_it() {
        let mut w1 = w(5, 100, '2', 2);
        w1.sent = 60;
        let lanes = vec![vec![], vec![w1], vec![w(10, 100, '0', 0)]];
        let m = root_causes(&lanes);
        assert_eq!(m, vec![Moved { lane: 1, wait: 0, to: '0', start: 10, end: 60 }]);
    }

    /// Mutual waits (clock error) do not loop.
    #[test]
    fn mutual_waits_stop() {
        let lanes = vec![vec![w(0, 50, '1', 1)], vec![w(0, 50, '0', 0)]];
        let m = root_causes(&lanes);
        assert!(m.is_empty(), "{m:?}");
    }

    proptest! {
        /// Whatever the waits, the moved stretches of a wait lie inside it,
        /// are disjoint, and never charge a worker for a wait on itself
        /// through the chain back to it.
        #[test]
        fn moved_stretches_lie_inside_their_wait(
            raw in proptest::collection::vec(
                proptest::collection::vec((0u64..1000, 1u64..200, 0usize..5), 0..6), 1..5)
        ) {
            let n = raw.len();
            let lanes: Vec<Vec<ChainedWait<usize>>> = raw.iter().map(|ws| {
                let mut at = 0;
                ws.iter().map(|&(gap, len, s)| {
                    let start = at + gap;
                    at = start + len;
                    let sender = s % n;
                    ChainedWait { start, end: at, sent: at, key: sender, sender }
                }).collect()
            }).collect();
            let m = root_causes(&lanes);
            for (lane, waits) in lanes.iter().enumerate() {
                for (i, wt) in waits.iter().enumerate() {
                    let mut mine: Vec<&Moved<usize>> =
                        m.iter().filter(|x| x.lane == lane && x.wait == i).collect();
                    mine.sort_by_key(|x| x.start);
                    let mut at = wt.start;
                    for x in mine {
                        prop_assert!(x.start >= at && x.start < x.end && x.end <= wt.end, "{x:?} in {wt:?}");
                        prop_assert!(x.to != lane, "{x:?} charged to its own worker");
                        at = x.end;
                    }
                }
            }
        }
    }
}
