//! Breadth-first search on a generated random graph (Sager's Timely-BFS,
//! after timely's own `examples/bfs.rs`).
//!
//! Edge `i` of `--edges` is [`crate::edge`]`(i, nodes)`; worker `w`
//! generates the edges `i ≡ w (mod workers)`. Edges go to the worker that
//! owns their source (`node % workers`), which builds a CSR at time 0. The
//! search runs around a feedback loop: `(node, parent)` pairs at time `t`
//! are the nodes `t − 1` hops from node 0; each newly reached node sends its
//! neighbours around the loop.

use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Capability, Concat, ConnectLoop, Feedback, ToStream};

use crate::{edge, join, Opts, Tracing};

pub const FLAGS: &[&str] = &["nodes", "edges"];
pub const USAGE: &str = "[--nodes 2000000] [--edges 10000000]";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub nodes: u64,
    pub edges: u64,
}

impl Params {
    pub fn from_opts(o: &Opts) -> Result<Params, String> {
        let p = Params { nodes: o.get("nodes", 2_000_000)?, edges: o.get("edges", 10_000_000)? };
        if p.nodes == 0 || p.nodes > u32::MAX as u64 {
            return Err("--nodes must be in 1..2^32".into());
        }
        Ok(p)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    pub params: Params,
    /// Nodes reachable from node 0 (node 0 included).
    pub reached: u64,
    /// The largest distance from node 0 among them.
    pub depth: u64,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "bfs: nodes={} edges={} reached={} depth={}",
            self.params.nodes, self.params.edges, self.reached, self.depth
        )
    }
}

/// The same search, sequentially (for checking).
pub fn sequential(p: Params) -> Output {
    let n = p.nodes as usize;
    let mut adj = vec![Vec::new(); n];
    for i in 0..p.edges {
        let (s, d) = edge(i, p.nodes);
        adj[s as usize].push(d);
    }
    let mut dist = vec![u64::MAX; n];
    let mut q = VecDeque::from([0usize]);
    dist[0] = 0;
    let (mut reached, mut depth) = (1, 0);
    while let Some(v) = q.pop_front() {
        for &t in &adj[v] {
            if dist[t as usize] == u64::MAX {
                dist[t as usize] = dist[v] + 1;
                depth = depth.max(dist[v] + 1);
                reached += 1;
                q.push_back(t as usize);
            }
        }
    }
    Output { params: p, reached, depth }
}

pub fn run(opts: &Opts, tracing: &Arc<Tracing>) -> Result<Output, String> {
    let p = Params::from_opts(opts)?;
    let tracing = tracing.clone();
    let per_worker = join(timely::execute_from_args(opts.timely_args.clone().into_iter(), move |worker| {
        tracing.attach(worker);
        let (index, peers) = (worker.index(), worker.peers());
        let nodes = p.nodes;
        let reached = Rc::new(Cell::new(0u64));
        let last_time = Rc::new(Cell::new(0u64));
        let (r2, t2) = (reached.clone(), last_time.clone());
        worker.dataflow::<u64, _, _>(move |scope| {
            let graph = (index as u64..p.edges)
                .step_by(peers)
                .map(move |i| edge(i, nodes))
                .to_stream(scope)
                .container::<Vec<(u32, u32)>>();
            let (handle, stream) = scope.feedback(1u64);
            graph
                .binary_frontier(
                    stream,
                    Exchange::new(|x: &(u32, u32)| u64::from(x.0)),
                    Exchange::new(|x: &(u32, u32)| u64::from(x.0)),
                    "BFS",
                    move |_cap, _info| {
                        let local = nodes as usize / peers + 1;
                        let mut edges: Vec<(u32, u32)> = Vec::new();
                        let mut csr = crate::Csr::default();
                        let mut done = vec![false; local];
                        let mut todo: BTreeMap<u64, Vec<Vec<(u32, u32)>>> = BTreeMap::new();
                        let mut pending: BTreeMap<u64, Capability<u64>> = BTreeMap::new();
                        move |(input1, frontier1), (input2, frontier2), output| {
                            input1.for_each_stamp(|cap, data| {
                                if let Some(cap) = cap.retain_least(output.output_index()) {
                                    pending.entry(*cap.time()).or_insert(cap);
                                }
                                for batch in data {
                                    edges.append(batch);
                                }
                            });
                            input2.for_each_stamp(|cap, data| {
                                if let Some(cap) = cap.retain_least(output.output_index()) {
                                    todo.entry(*cap.time()).or_default().extend(data.map(std::mem::take));
                                    pending.entry(*cap.time()).or_insert(cap);
                                }
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
                                if let Some(batches) = todo.remove(&time) {
                                    let mut session = output.session(&cap);
                                    for batch in batches {
                                        for (node, _parent) in batch {
                                            let v = node as usize / peers;
                                            if !done[v] {
                                                done[v] = true;
                                                r2.set(r2.get() + 1);
                                                t2.set(t2.get().max(time));
                                                for &t in csr.targets(v) {
                                                    session.give((t, node));
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    },
                )
                .concat((0..1).map(|_| (0u32, 0u32)).to_stream(scope))
                .connect_loop(handle);
        });
        while worker.step_or_park(None) {}
        (reached.get(), last_time.get())
    }))?;
    Ok(Output {
        params: p,
        reached: per_worker.iter().map(|x| x.0).sum(),
        // The root arrives at time 1 (once around the loop): distance = time − 1.
        depth: per_worker.iter().map(|x| x.1).max().unwrap_or(1).saturating_sub(1),
    })
}
