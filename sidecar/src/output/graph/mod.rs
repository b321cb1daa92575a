//! The dataflow graph of one window or of several: the operators as
//! nodes, the channels as edges, the scopes (dataflows, iterations,
//! regions) as nested boxes, with each operator's time on the critical
//! path and each channel's messages and waits.
//!
//! Built from windows' details ([`Dataflow::add`]): the operators' names,
//! addresses and channels are the probe's metadata; the figures are the
//! windows' activities, messages and critical path. [`Dataflow::graph`]
//! resolves the channels that cross a scope's boundary into edges between
//! operators; [`layout`] places it for the dashboard, [`dot`] writes it
//! for Graphviz.

pub mod dot;
pub mod layout;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use serde_json::{json, Value};

use crate::analysis::analyze::{ActivityKind, CriticalKind, WindowDetail};
use crate::analysis::model::{MsgKind, Ns, Sid, StreamMeta};

/// What the windows said of one operator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpFigures {
    pub name: String,
    /// Its address: the scope path timely gives it (empty: unknown).
    pub addr: Vec<u32>,
    /// Time on the critical path, in all and per worker.
    pub critical_ns: Ns,
    pub critical_by_worker: BTreeMap<u32, Ns>,
    /// Time it ran, summed over workers.
    pub busy_ns: Ns,
}

/// What the windows said of one channel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChannelFigures {
    /// (operator, port) at each end, as the probe resolved them (a scope's
    /// own id stands for its boundary).
    pub src: (u32, u32),
    pub dst: (u32, u32),
    /// Data messages between two workers matched on it (worker-local ones
    /// are counted by the probe, not written: not here).
    pub messages: u64,
    /// Waiting that a message on it ended.
    pub wait_ns: Ns,
    /// Its messages' time on the critical path, and how many there were.
    pub critical_ns: Ns,
    pub crossings: u64,
}

/// The operators and channels of the windows folded in so far, with their
/// figures. Bounded by the program's dataflow (its operators and
/// channels), not by the number of windows.
#[derive(Clone, Debug, Default)]
pub struct Dataflow {
    pub ops: BTreeMap<u32, OpFigures>,
    pub channels: BTreeMap<u32, ChannelFigures>,
    /// Windows folded in, and the first and last of them.
    pub windows: u64,
    pub window_range: Option<(u64, u64)>,
    /// The windows' critical paths, summed: what an operator's share is of.
    pub critical_ns: Ns,
    /// All waiting, and its parts not on a data channel (waits that a
    /// progress message ended, and waits with no visible cause).
    pub wait_ns: Ns,
    pub progress_wait_ns: Ns,
    pub unknown_wait_ns: Ns,
    /// The metadata of the last window's streams, as folded in (held, so
    /// that a pointer seen again is the same metadata, not a new one at a
    /// freed one's address).
    folded: FxHashMap<Sid, Arc<StreamMeta>>,
}

impl Dataflow {
    /// Folds one window's detail in.
    pub fn add(&mut self, d: &WindowDetail) {
        self.windows += 1;
        self.window_range = Some(match self.window_range {
            None => (d.window, d.window),
            Some((a, b)) => (a.min(d.window), b.max(d.window)),
        });
        for (i, meta) in d.metas.iter().enumerate() {
            // (A stream's metadata folded in at the window before, unchanged
            // since, adds nothing: a dataflow of thousands of operators is
            // not walked again every window.)
            if self.folded.get(&d.streams[i]).is_some_and(|m| Arc::ptr_eq(m, meta)) {
                continue;
            }
            for (&id, name) in &meta.ops {
                let o = self.ops.entry(id).or_default();
                if o.name.is_empty() {
                    o.name = name.clone();
                }
                if let Some(a) = meta.op_addrs.get(&id) {
                    if o.addr.is_empty() {
                        o.addr = a.clone();
                    }
                }
            }
            for &(id, src, dst) in &meta.channels {
                let c = self.channels.entry(id).or_default();
                (c.src, c.dst) = (src, dst);
            }
        }
        self.folded = d.streams.iter().copied().zip(d.metas.iter().cloned()).collect();
        for a in &d.activities {
            let ns = a.end.saturating_sub(a.start);
            match a.what {
                ActivityKind::Operator(op) => self.op(op).busy_ns += ns,
                ActivityKind::Waiting { channel, kind, .. } => {
                    self.wait_ns += ns;
                    match (kind, channel) {
                        ("data_message", Some(c)) => self.channels.entry(c).or_default().wait_ns += ns,
                        ("progress_message", _) => self.progress_wait_ns += ns,
                        _ => self.unknown_wait_ns += ns,
                    }
                }
                ActivityKind::Span(_) | ActivityKind::WaitingForInput => {}
            }
        }
        for m in d.messages.iter().filter(|m| m.kind == MsgKind::Data) {
            self.channels.entry(m.channel).or_default().messages += 1;
        }
        for p in &d.critical {
            let ns = p.end.saturating_sub(p.start);
            self.critical_ns += ns;
            match p.what {
                CriticalKind::Operator(op) => {
                    let worker = d.streams.get(p.stream as usize).map_or(p.stream, |s| s.worker);
                    let o = self.op(op);
                    o.critical_ns += ns;
                    *o.critical_by_worker.entry(worker).or_default() += ns;
                }
                CriticalKind::Message { channel, kind: MsgKind::Data, .. } => {
                    let c = self.channels.entry(channel).or_default();
                    c.critical_ns += ns;
                    c.crossings += 1;
                }
                _ => {}
            }
        }
    }

    fn op(&mut self, id: u32) -> &mut OpFigures {
        self.ops.entry(id).or_insert_with(|| OpFigures { name: format!("operator {id}"), ..Default::default() })
    }

    /// The graph to draw: leaf operators, the edges between them (channels
    /// through scope boundaries joined up) and the scopes.
    pub fn graph(&self) -> Graph {
        let by_addr: BTreeMap<&[u32], u32> =
            self.ops.iter().filter(|(_, o)| !o.addr.is_empty()).map(|(&id, o)| (o.addr.as_slice(), id)).collect();
        let parent = |id: u32| -> Option<u32> {
            let a = &self.ops.get(&id)?.addr;
            (a.len() > 1).then(|| by_addr.get(&a[..a.len() - 1]).copied()).flatten()
        };
        let is_scope: BTreeSet<u32> = self.ops.keys().filter_map(|&id| parent(id)).collect();
        let mut scopes = Vec::new();
        let mut scope_index = BTreeMap::new();
        // (Parents before children: an address's prefixes sort first.)
        let mut scope_ids: Vec<u32> = is_scope.iter().copied().collect();
        scope_ids.sort_by(|a, b| self.ops[a].addr.cmp(&self.ops[b].addr));
        for id in scope_ids {
            scope_index.insert(id, scopes.len());
            let o = &self.ops[&id];
            let parent = parent(id).and_then(|p| scope_index.get(&p).copied());
            scopes.push(Scope { op: id, name: o.name.clone(), parent });
        }
        let mut nodes = Vec::new();
        let mut node_index = BTreeMap::new();
        for (&id, o) in self.ops.iter().filter(|(id, _)| !is_scope.contains(id)) {
            node_index.insert(id, nodes.len());
            let scope = parent(id).and_then(|p| scope_index.get(&p).copied());
            nodes.push(Node { op: id, figures: o.clone(), scope });
        }
        // Channels whose ends were never described still get nodes.
        for c in self.channels.values() {
            for id in [c.src.0, c.dst.0] {
                if !self.ops.contains_key(&id) && !node_index.contains_key(&id) {
                    node_index.insert(id, nodes.len());
                    let figures = OpFigures { name: format!("operator {id}"), ..Default::default() };
                    nodes.push(Node { op: id, figures, scope: None });
                }
            }
        }
        let edges = self.edges(&is_scope, &node_index);
        Graph {
            nodes,
            edges,
            scopes,
            critical_ns: self.critical_ns,
            wait_ns: self.wait_ns,
            progress_wait_ns: self.progress_wait_ns,
            unknown_wait_ns: self.unknown_wait_ns,
            windows: self.windows,
            window_range: self.window_range,
        }
    }

    /// Whether operator `x` lies inside scope `s`.
    fn inside(&self, x: u32, s: u32) -> bool {
        match (self.ops.get(&x), self.ops.get(&s)) {
            (Some(x), Some(s)) => x.addr.len() > s.addr.len() && x.addr.starts_with(&s.addr),
            _ => false,
        }
    }

    /// Channels → edges between leaf operators. A channel's end at a scope
    /// is that scope's boundary (timely's index 0): its input port seen
    /// from inside or from outside, as the other end says. Routes through
    /// boundaries are followed to the operators on either side; an edge's
    /// figures are its channels' (a boundary channel that feeds several
    /// operators inside counts on each of their edges).
    fn edges(&self, is_scope: &BTreeSet<u32>, node_index: &BTreeMap<u32, usize>) -> Vec<Edge> {
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
        enum End {
            Leaf(u32),
            In(u32, u32),
            Out(u32, u32),
        }
        let mut next: BTreeMap<End, Vec<(End, u32)>> = BTreeMap::new();
        for (&id, c) in &self.channels {
            let ((s, sp), (t, tp)) = (c.src, c.dst);
            let from = if !is_scope.contains(&s) {
                End::Leaf(s)
            } else if t == s || self.inside(t, s) {
                End::In(s, sp)
            } else {
                End::Out(s, sp)
            };
            let to = if !is_scope.contains(&t) {
                End::Leaf(t)
            } else if s == t || self.inside(s, t) {
                End::Out(t, tp)
            } else {
                End::In(t, tp)
            };
            next.entry(from).or_default().push((to, id));
        }
        let mut routes: BTreeMap<(usize, usize), BTreeSet<u32>> = BTreeMap::new();
        for (&from, outs) in next.iter() {
            let End::Leaf(u) = from else { continue };
            // Depth first through boundaries, each port once per start.
            let mut stack: Vec<(End, Vec<u32>)> = outs.iter().map(|&(e, c)| (e, vec![c])).collect();
            let mut seen = BTreeSet::new();
            while let Some((end, chans)) = stack.pop() {
                match end {
                    End::Leaf(v) => {
                        let key = (node_index[&u], node_index[&v]);
                        routes.entry(key).or_default().extend(chans);
                    }
                    port => {
                        if !seen.insert(port) {
                            continue;
                        }
                        for &(e, c) in next.get(&port).into_iter().flatten() {
                            let mut ch = chans.clone();
                            ch.push(c);
                            stack.push((e, ch));
                        }
                    }
                }
            }
        }
        routes
            .into_iter()
            .map(|((from, to), chans)| {
                let mut e = Edge { from, to, channels: chans.iter().copied().collect(), ..Default::default() };
                for c in &chans {
                    let f = &self.channels[c];
                    e.messages += f.messages;
                    e.wait_ns += f.wait_ns;
                    e.critical_ns += f.critical_ns;
                    e.crossings += f.crossings;
                }
                e
            })
            .collect()
    }
}

/// A leaf operator.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: u32,
    pub figures: OpFigures,
    /// Its innermost scope (index into [`Graph::scopes`]).
    pub scope: Option<usize>,
}

/// A scope: an operator that holds others (a dataflow, an iteration, a
/// region).
#[derive(Clone, Debug, PartialEq)]
pub struct Scope {
    pub op: u32,
    pub name: String,
    /// Its enclosing scope (an index before its own).
    pub parent: Option<usize>,
}

/// Channels from one operator to another (through scope boundaries).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub channels: Vec<u32>,
    pub messages: u64,
    pub wait_ns: Ns,
    pub critical_ns: Ns,
    pub crossings: u64,
}

/// The dataflow graph with its figures, ready to lay out or write.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub scopes: Vec<Scope>,
    pub critical_ns: Ns,
    pub wait_ns: Ns,
    pub progress_wait_ns: Ns,
    pub unknown_wait_ns: Ns,
    pub windows: u64,
    pub window_range: Option<(u64, u64)>,
}

impl Graph {
    /// An operator's share of the critical path.
    pub fn critical_share(&self, n: &Node) -> f64 {
        n.figures.critical_ns as f64 / self.critical_ns.max(1) as f64
    }

    /// An edge's share of all waiting.
    pub fn wait_share(&self, e: &Edge) -> f64 {
        e.wait_ns as f64 / self.wait_ns.max(1) as f64
    }

    /// The operator with the most time on the critical path, if any has.
    pub fn hot(&self) -> Option<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].figures.critical_ns > 0)
            .max_by_key(|&i| (self.nodes[i].figures.critical_ns, std::cmp::Reverse(i)))
    }

    /// An edge on the critical path: one of its messages was; or, softer,
    /// it joins two operators that both were (within a worker the path
    /// goes from one to the next in program order, not by a message).
    pub fn edge_on_path(&self, e: &Edge) -> (bool, bool) {
        let on = |i: usize| self.nodes[i].figures.critical_ns > 0;
        (e.critical_ns > 0, on(e.from) && on(e.to))
    }

    /// Each scope's path from the outermost, per node (scope indices).
    pub fn scope_paths(&self) -> Vec<Vec<usize>> {
        let path = |mut s: Option<usize>| {
            let mut p = Vec::new();
            while let Some(i) = s {
                p.push(i);
                s = self.scopes[i].parent;
            }
            p.reverse();
            p
        };
        self.nodes.iter().map(|n| path(n.scope)).collect()
    }

    /// The graph laid out, as the dashboard's JSON (`/api/graph`): nodes
    /// and scopes with their boxes, edges with their routes, and the
    /// figures shown on hover. `Err` names a graph too large to draw.
    pub fn layout_json(&self) -> Result<Value, String> {
        if self.nodes.len() > layout::MAX_NODES {
            return Err(format!(
                "the dataflow has {} operators: more than the graph view draws ({})",
                self.nodes.len(),
                layout::MAX_NODES
            ));
        }
        let sizes: Vec<(f64, f64)> = self.nodes.iter().map(|n| node_size(&n.figures.name)).collect();
        let edges: Vec<(usize, usize)> = self.edges.iter().map(|e| (e.from, e.to)).collect();
        let l =
            layout::layout(&layout::Input { sizes, edges, groups: self.scope_paths(), clusters: self.scopes.len() });
        let hot = self.hot();
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let p = &l.nodes[i];
                let f = &n.figures;
                let workers: Vec<Value> = f.critical_by_worker.iter().map(|(w, ns)| json!([w, ns])).collect();
                json!({
                    "op": n.op, "name": f.name, "addr": f.addr,
                    "x": p.x, "y": p.y, "w": p.w, "h": p.h, "layer": p.layer,
                    "critical_ns": f.critical_ns, "share": self.critical_share(n), "busy_ns": f.busy_ns,
                    "critical_by_worker": workers, "hot": hot == Some(i), "critical": f.critical_ns > 0,
                })
            })
            .collect();
        let edges: Vec<Value> = self
            .edges
            .iter()
            .zip(&l.edges)
            .map(|(e, r)| {
                let (on, joins) = self.edge_on_path(e);
                json!({
                    "from": e.from, "to": e.to, "channels": e.channels, "messages": e.messages,
                    "wait_ns": e.wait_ns, "wait_share": self.wait_share(e), "critical_ns": e.critical_ns,
                    "crossings": e.crossings, "critical": on, "joins_critical": joins,
                    "reversed": r.reversed, "points": r.points.iter().map(|&(x, y)| json!([x, y])).collect::<Vec<_>>(),
                })
            })
            .collect();
        let scopes: Vec<Value> = self
            .scopes
            .iter()
            .zip(&l.clusters)
            .map(|(s, b)| {
                let b = b.unwrap_or_default();
                json!({"op": s.op, "name": s.name, "parent": s.parent, "x": b.x, "y": b.y, "w": b.w, "h": b.h})
            })
            .collect();
        Ok(json!({
            "windows": self.windows,
            "window_range": self.window_range,
            "critical_ns": self.critical_ns,
            "wait_ns": self.wait_ns,
            "progress_wait_ns": self.progress_wait_ns,
            "unknown_wait_ns": self.unknown_wait_ns,
            "width": l.width, "height": l.height,
            "nodes": nodes, "edges": edges, "scopes": scopes,
        }))
    }
}

/// A node's box: its name's width (about, at the page's 11 px font), two
/// lines high (the name, the share).
fn node_size(name: &str) -> (f64, f64) {
    let chars = name.chars().count().min(40) as f64;
    ((chars * 6.6 + 16.0).max(64.0), 34.0)
}

#[cfg(test)]
mod tests;
