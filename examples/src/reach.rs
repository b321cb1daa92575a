//! A differential dataflow program: breadth-first distances from the hot
//! nodes (below) on a generated graph whose edges change in rounds, after differential's own
//! `bfs` example (a join, a reduce and their arrangements inside `iterate`).
//!
//! The graph: edge `i` is [`crate::edge`]`(i, nodes)`, except that
//! `--skew` percent of the edges (chosen by hash) take their source from
//! `--hot` *hot* nodes, all of them keys that differential routes to
//! worker 0. The join arranges the edges by source, so worker 0 holds the
//! hot edges' arrangement and produces their join output: a skewed
//! arrangement, as in real graphs with a few high-degree nodes.
//!
//! The rounds: round 0 loads edges `0..edges`; round `r ≥ 1` inserts edges
//! `edges + (r−1)·batch .. edges + r·batch` and removes edges
//! `(r−1)·batch .. r·batch`, so after `--rounds` rounds the live edges are
//! `rounds·batch .. edges + rounds·batch`. Worker `w` feeds the edges
//! `i ≡ w (mod workers)`. Each round is driven as real programs do: feed
//! the input, advance it, then step the worker until the probe has passed
//! the round.
//!
//! The work: each join output and each value a reduce reads costs
//! `--work` rounds of hashing; `--slow Join[@WORKER]=F` or
//! `--slow Reduce[@WORKER]=F` makes that F times as many (for the what-if
//! benchmark: an operator inside `iterate` made heavier, then lighter).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use differential_dataflow::input::Input;
use differential_dataflow::operators::Iterate;
use differential_dataflow::Hashable;
use timely::dataflow::ProbeHandle;

use crate::{edge, join, mix, Opts, Tracing};

pub const FLAGS: &[&str] = &["nodes", "edges", "rounds", "batch", "skew", "hot", "work", "slow"];
pub const USAGE: &str = "[--nodes 50000] [--edges 200000] [--rounds 10] [--batch 5000 (edges changed per round)] \
                         [--skew 90 (percent of edges whose source is a hot node)] [--hot 16 (hot nodes: on worker 0, the roots)] \
                         [--work 4 (hash rounds per join output and per reduce input)] \
                         [--slow Join|Reduce[@WORKER]=FACTOR]";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub nodes: u64,
    pub edges: u64,
    pub rounds: u64,
    pub batch: u64,
    /// Percent of the edges whose source is a hot node.
    pub skew: u64,
    pub hot: u64,
    pub work: u64,
    /// Worker threads in the whole run (the hot nodes are those routed to
    /// worker 0 among this many).
    pub peers: u64,
}

impl Params {
    pub fn from_opts(o: &Opts) -> Result<Params, String> {
        let p = Params {
            nodes: o.get("nodes", 50_000)?,
            edges: o.get("edges", 200_000)?,
            rounds: o.get("rounds", 10)?,
            batch: o.get("batch", 5_000)?,
            skew: o.get("skew", 90)?,
            hot: o.get("hot", 16)?,
            work: o.get("work", 4)?,
            peers: peers(o)?,
        };
        if p.nodes == 0 || p.nodes > u32::MAX as u64 {
            return Err("--nodes must be in 1..2^32".into());
        }
        if p.skew > 100 {
            return Err(format!("--skew {}: a percentage, 0..=100", p.skew));
        }
        if p.hot == 0 || p.hot > p.nodes / 2 {
            return Err(format!("--hot {}: the hot nodes (the search's roots) must be 1..=nodes/2", p.hot));
        }
        if p.rounds * p.batch > p.edges {
            return Err(format!(
                "--rounds {} × --batch {} removes more than the {} edges loaded",
                p.rounds, p.batch, p.edges
            ));
        }
        Ok(p)
    }

    /// The hot nodes: the first `hot` nodes that differential routes to
    /// worker 0 (by the hash its exchanges use) among `peers` workers.
    pub fn hot_nodes(&self) -> Vec<u32> {
        let peers = self.peers.max(1);
        (0..self.nodes as u32).filter(|n| n.hashed() % peers == 0).take(self.hot as usize).collect()
    }

    /// Edge `i` of the skewed graph.
    pub fn edge(&self, i: u64, hot: &[u32]) -> (u32, u32) {
        let (src, dst) = edge(i, self.nodes);
        let h = mix(i ^ 0x5eed_5eed_5eed_5eed);
        if !hot.is_empty() && h % 100 < self.skew {
            (hot[((h / 100) % hot.len() as u64) as usize], dst)
        } else {
            (src, dst)
        }
    }
}

/// Worker threads in the whole run: `-w` times the processes (`-n`).
fn peers(o: &Opts) -> Result<u64, String> {
    let a = &o.timely_args;
    let procs = a
        .iter()
        .position(|x| x == "-n" || x == "--processes")
        .and_then(|i| a.get(i + 1))
        .map(|v| v.parse::<u64>().map_err(|_| format!("-n {v}: not a number")))
        .transpose()?
        .unwrap_or(1);
    Ok(o.workers() as u64 * procs.max(1))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub params: Params,
    /// Nodes reachable from the hot nodes after the last round (those included).
    pub reached: u64,
    /// The largest distance among them.
    pub depth: u32,
    /// Wrapping sum of `mix(node << 32 | distance)` over the reached nodes.
    pub checksum: u64,
    /// Join outputs produced, per worker of this process (the skew shows
    /// here: worker 0 joins the hot nodes' edges).
    pub joined: Vec<u64>,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.params;
        write!(
            f,
            "reach: nodes={} edges={} rounds={} batch={} skew={}% hot={} work={} reached={} depth={} checksum={:016x} joined_per_worker={:?}",
            p.nodes, p.edges, p.rounds, p.batch, p.skew, p.hot, p.work, self.reached, self.depth, self.checksum, self.joined
        )
    }
}

impl Output {
    fn from_distances(params: Params, dist: impl IntoIterator<Item = (u32, u32)>) -> Output {
        let (mut reached, mut depth, mut checksum) = (0, 0, 0u64);
        for (n, d) in dist {
            reached += 1;
            depth = depth.max(d);
            checksum = checksum.wrapping_add(mix((n as u64) << 32 | d as u64));
        }
        Output { params, reached, depth, checksum, joined: Vec::new() }
    }
}

/// The distances after the last round, sequentially (for checking).
pub fn sequential(p: Params) -> Output {
    let hot = p.hot_nodes();
    let mut adj: HashMap<u32, Vec<u32>> = HashMap::new();
    for i in p.rounds * p.batch..p.edges + p.rounds * p.batch {
        let (s, d) = p.edge(i, &hot);
        adj.entry(s).or_default().push(d);
    }
    let mut dist: HashMap<u32, u32> = hot.iter().map(|&n| (n, 0)).collect();
    let mut queue: VecDeque<u32> = hot.into();
    while let Some(n) = queue.pop_front() {
        let d = dist[&n];
        for &m in adj.get(&n).map(Vec::as_slice).unwrap_or(&[]) {
            dist.entry(m).or_insert_with(|| {
                queue.push_back(m);
                d + 1
            });
        }
    }
    Output::from_distances(p, dist)
}

/// `rounds` rounds of hashing on `x`: the work of one record.
#[inline]
fn cost(x: u64, rounds: u64) -> u64 {
    (0..rounds).fold(x, |h, _| mix(h))
}

pub fn run(opts: &Opts, tracing: &Arc<Tracing>) -> Result<Output, String> {
    let p = Params::from_opts(opts)?;
    // `--slow` names a worker of the whole run: read it for every one.
    let rounds_of = |op: &str| -> Result<Vec<u64>, String> {
        (0..p.peers as usize).map(|w| Ok((p.work as f64 * opts.slowdown(op, w)?).round() as u64)).collect()
    };
    let (join_work, reduce_work) = (rounds_of("Join")?, rounds_of("Reduce")?);
    let hot = Arc::new(p.hot_nodes());
    let tracing = tracing.clone();
    let per_worker = join(timely::execute_from_args(opts.timely_args.clone().into_iter(), move |worker| {
        tracing.attach(worker);
        let index = worker.index();
        let peers = worker.peers() as u64;
        let (jw, rw) = (join_work[index], reduce_work[index]);
        // The result's changes, accumulated: (node, distance) → count.
        let result: Rc<RefCell<HashMap<(u32, u32), isize>>> = Rc::default();
        let sink = result.clone();
        let joined = Rc::new(Cell::new(0u64));
        let joins = joined.clone();
        let probe = ProbeHandle::new();
        let (mut roots, mut graph) = worker.dataflow::<u64, _, _>(|scope| {
            let (root_input, roots) = scope.new_collection::<u32, isize>();
            let (edge_input, edges) = scope.new_collection::<(u32, u32), isize>();
            let start = roots.map(|n| (n, 0u32));
            start
                .clone()
                .iterate(|inner, dists| {
                    let start = start.enter(inner);
                    let edges = edges.enter(inner);
                    dists
                        .join_map(edges, move |_src, d, dst| {
                            joins.set(joins.get() + 1);
                            let _ = std::hint::black_box(cost(*dst as u64, jw));
                            (*dst, d + 1)
                        })
                        .concat(start)
                        .reduce(move |n, ds, out| {
                            let mut h = *n as u64;
                            for (d, _) in ds {
                                h = cost(h ^ **d as u64, rw);
                            }
                            let _ = std::hint::black_box(h);
                            // The values come sorted: the first is the least.
                            out.push((*ds[0].0, 1))
                        })
                })
                .inspect(move |((n, d), _t, r)| *sink.borrow_mut().entry((*n, *d)).or_default() += r)
                .probe_with(&probe);
            (root_input, edge_input)
        });
        if index == 0 {
            hot.iter().for_each(|&n| roots.insert(n));
        }
        roots.close();
        let feed = |graph: &mut differential_dataflow::input::InputSession<u64, (u32, u32), isize>,
                    range: std::ops::Range<u64>,
                    diff: isize| {
            let first = range.start + (index as u64 + peers - range.start % peers) % peers;
            for i in (first..range.end).step_by(peers as usize) {
                graph.update(p.edge(i, &hot), diff);
            }
        };
        for round in 0..=p.rounds {
            if round == 0 {
                feed(&mut graph, 0..p.edges, 1);
            } else {
                let r = round - 1;
                feed(&mut graph, p.edges + r * p.batch..p.edges + (r + 1) * p.batch, 1);
                feed(&mut graph, r * p.batch..(r + 1) * p.batch, -1);
            }
            graph.advance_to(round + 1);
            graph.flush();
            // The driver loop: the next round's input waits for this one.
            while probe.less_than(graph.time()) {
                worker.step();
            }
        }
        let dist: Vec<(u32, u32)> = result.borrow().iter().filter(|(_, r)| **r != 0).map(|(k, _)| *k).collect();
        (dist, joined.get())
    }))?;
    let joined = per_worker.iter().map(|w| w.1).collect();
    let out = Output::from_distances(p, per_worker.into_iter().flat_map(|w| w.0));
    Ok(Output { joined, ..out })
}
