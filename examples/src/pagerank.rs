//! PageRank iterations on a generated graph (DProf's PageRank).
//!
//! The graph: every node `v` has the edge `v → v+1 (mod nodes)` (so no
//! node is dangling and the ranks keep summing to 1), plus the random
//! edges [`crate::edge`]`(i, nodes)` for `i < --edges`. Edges go to the
//! worker owning their source (`src % workers`). Iteration `t` runs at
//! timestamp `t` around a feedback loop: each worker sends, for each of its
//! edges, `rank(src) / outdegree(src)` to the owner of `dst`, which folds
//! the contributions into `rank = (1 − d) / n + d · Σ` once time `t` is
//! complete. After `--iters` iterations each worker reports the sum and the
//! largest of its ranks.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Capability, ConnectLoop, Feedback, ToStream};

use crate::{edge, join, Opts, Tracing};

pub const FLAGS: &[&str] = &["nodes", "edges", "iters", "slow"];
pub const USAGE: &str = "[--nodes 200000] [--edges 2000000] [--iters 20] [--slow PageRank[@WORKER]=FACTOR]";
pub const DAMPING: f64 = 0.85;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub nodes: u64,
    pub edges: u64,
    pub iters: u64,
}

impl Params {
    pub fn from_opts(o: &Opts) -> Result<Params, String> {
        let p =
            Params { nodes: o.get("nodes", 200_000)?, edges: o.get("edges", 2_000_000)?, iters: o.get("iters", 20)? };
        if p.nodes == 0 || p.nodes > u32::MAX as u64 {
            return Err("--nodes must be in 1..2^32".into());
        }
        Ok(p)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Output {
    pub params: Params,
    /// Sum of all ranks (1 up to rounding).
    pub sum: f64,
    /// The largest rank.
    pub max: f64,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.params;
        write!(
            f,
            "pagerank: nodes={} edges={} iters={} sum={:.9} max={:.9e}",
            p.nodes, p.edges, p.iters, self.sum, self.max
        )
    }
}

/// The edges of the graph: the ring, then the random ones.
pub fn edges(p: Params) -> impl Iterator<Item = (u32, u32)> {
    let n = p.nodes;
    (0..n).map(move |v| (v as u32, ((v + 1) % n) as u32)).chain((0..p.edges).map(move |i| edge(i, n)))
}

/// The same iterations, sequentially (for checking).
pub fn sequential(p: Params) -> Vec<f64> {
    let n = p.nodes as usize;
    let mut out = vec![0u32; n];
    let all: Vec<(u32, u32)> = edges(p).collect();
    for &(s, _) in &all {
        out[s as usize] += 1;
    }
    let mut rank = vec![1.0 / n as f64; n];
    for _ in 0..p.iters {
        let mut acc = vec![0.0; n];
        for &(s, d) in &all {
            acc[d as usize] += rank[s as usize] / out[s as usize] as f64;
        }
        for (r, a) in rank.iter_mut().zip(acc) {
            *r = (1.0 - DAMPING) / n as f64 + DAMPING * a;
        }
    }
    rank
}

pub fn run(opts: &Opts, tracing: &Arc<Tracing>) -> Result<Output, String> {
    let p = Params::from_opts(opts)?;
    let slow: Vec<f64> = (0..opts.workers().max(1)).map(|w| opts.slowdown("PageRank", w)).collect::<Result<_, _>>()?;
    let tracing = tracing.clone();
    let per_worker = join(timely::execute_from_args(opts.timely_args.clone().into_iter(), move |worker| {
        tracing.attach(worker);
        let (index, peers) = (worker.index(), worker.peers());
        let n = p.nodes as usize;
        let local = n / peers + 1;
        let result: Rc<RefCell<Vec<f64>>> = Rc::default();
        let r2 = result.clone();
        // `--slow PageRank@W=F`: each execution of this worker's operator F times as long.
        let slow = slow.get(index).copied().unwrap_or(1.0);
        worker.dataflow::<u64, _, _>(move |scope| {
            let graph = edges(p)
                .enumerate()
                .filter(move |(i, _)| i % peers == index)
                .map(|(_, e)| e)
                .to_stream(scope)
                .container::<Vec<(u32, u32)>>();
            let (handle, contributions) = scope.feedback(1u64);
            graph
                .binary_frontier(
                    contributions,
                    Exchange::new(|e: &(u32, u32)| u64::from(e.0)),
                    Exchange::new(|c: &(u32, f64)| u64::from(c.0)),
                    "PageRank",
                    move |_cap, _info| {
                        let mut edges: Vec<(u32, u32)> = Vec::new();
                        let mut csr = crate::Csr::default();
                        let mut rank = vec![1.0 / n as f64; local];
                        let mut acc: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
                        let mut pending: BTreeMap<u64, Capability<u64>> = BTreeMap::new();
                        move |(input1, frontier1), (input2, frontier2), output| {
                            let began = std::time::Instant::now();
                            input1.for_each_stamp(|cap, data| {
                                if let Some(cap) = cap.retain_least(output.output_index()) {
                                    pending.entry(*cap.time()).or_insert(cap);
                                }
                                for batch in data {
                                    edges.append(batch);
                                }
                            });
                            input2.for_each_stamp(|cap, data| {
                                let Some(cap) = cap.retain_least(output.output_index()) else { return };
                                let a = acc.entry(*cap.time()).or_insert_with(|| vec![0.0; local]);
                                for batch in data {
                                    for (node, c) in batch.drain(..) {
                                        a[node as usize / peers] += c;
                                    }
                                }
                                pending.entry(*cap.time()).or_insert(cap);
                            });
                            while let Some(&time) = pending.keys().next() {
                                if frontier1.frontier().less_equal(&time) || frontier2.frontier().less_equal(&time) {
                                    break;
                                }
                                let cap = pending.remove(&time).unwrap();
                                if csr.is_empty() {
                                    // All edges are in (they come at time 0): build
                                    // the CSR of this worker's sources.
                                    csr = crate::Csr::build(std::mem::take(&mut edges), local, peers, index);
                                }
                                if time > 0 {
                                    let a = acc.remove(&time).unwrap_or_else(|| vec![0.0; local]);
                                    for (r, a) in rank.iter_mut().zip(a) {
                                        *r = (1.0 - DAMPING) / n as f64 + DAMPING * a;
                                    }
                                }
                                if time < p.iters {
                                    let mut session = output.session(&cap);
                                    for (v, r) in rank.iter().enumerate() {
                                        let out = csr.targets(v);
                                        if !out.is_empty() {
                                            let share = r / out.len() as f64;
                                            for &t in out {
                                                session.give((t, share));
                                            }
                                        }
                                    }
                                    drop(session);
                                    // Hold the next iteration open even if no
                                    // contribution arrives for this worker.
                                    pending.entry(time + 1).or_insert_with(|| cap.delayed(&(time + 1)));
                                } else {
                                    // Done: the ranks of this worker's nodes.
                                    let owned = (0..local).filter(|v| v * peers + index < n);
                                    *r2.borrow_mut() = owned.map(|v| rank[v]).collect();
                                }
                            }
                            std::hint::black_box(crate::slow_down(began, slow));
                        }
                    },
                )
                .connect_loop(handle);
        });
        while worker.step_or_park(None) {}
        let ranks = result.borrow();
        (ranks.iter().sum::<f64>(), ranks.iter().copied().fold(0.0, f64::max))
    }))?;
    Ok(Output {
        params: p,
        sum: per_worker.iter().map(|x| x.0).sum(),
        max: per_worker.iter().map(|x| x.1).fold(0.0, f64::max),
    })
}
