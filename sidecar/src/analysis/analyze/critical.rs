//! Stage 8: the window's critical path (Sager Algorithm 1 with the Timely
//! changes of §5.3, walked in [`crate::analysis::graph::critical_path`]),
//! summed by kind, worker, operator, span and channel for the report, and
//! piece by piece for a timeline export.

use rustc_hash::FxHashMap;

use super::detail::{CriticalKind, CriticalPiece, Message, WindowDetail};
use super::{kind_name, Names, TOP};
use crate::analysis::graph::{self, EKind, Graph, PathEdge};
use crate::analysis::model::{MsgKind, Ns, Sid};
use crate::analysis::report::{ByKind, ChannelShare, CpSummary, OpShare, SpanShare, WorkerShare};

/// What the path crossed, summed: per (worker, operator), (worker, span),
/// worker, and (channel, kind, from, to) as (crossings, ns).
#[derive(Default)]
struct PathSums {
    by_kind: ByKind,
    ops: FxHashMap<(usize, u32), Ns>,
    spans: FxHashMap<(usize, u64), Ns>,
    workers: FxHashMap<usize, Ns>,
    chans: FxHashMap<(u32, MsgKind, usize, usize), (u64, Ns)>,
}

/// The critical path of `g` and its summary for the report; the pieces go
/// into `detail` when given.
pub(super) fn summarize_critical_path(
    g: &Graph,
    sids: &[Sid],
    names: &Names,
    detail: Option<&mut WindowDetail>,
) -> CpSummary {
    let cp = graph::critical_path(g);
    let covered = covered_span(g);
    let mut s = CpSummary { length_ns: cp.length, span_ns: covered, edges: cp.edges.len(), ..Default::default() };
    s.equals_span = cp.length == covered;
    s.started_before_end = cp.started_early;
    s.stuck = cp
        .stuck
        .map(|(v, why)| format!("worker {} at {} ns: {}", sids[g.w[v as usize] as usize].worker, g.t[v as usize], why));
    let sums = sum_path(g, &cp.edges);
    let len = cp.length.max(1) as f64;
    s.by_kind = sums.by_kind;
    s.top_operators = top_operators(sums.ops, sids, names, len);
    s.top_spans = top_spans(sums.spans, sids, names, len);
    s.by_worker = by_worker(sums.workers, sids, len);
    s.top_channels = top_channels(sums.chans, sids);
    if let Some(d) = detail {
        export_path(g, &cp.edges, d);
    }
    s
}

/// The span the path must equal (Sager Algorithm 1 and Theorem 3.13: the
/// latest vertex time of the window graph minus the earliest): the part of
/// the window the streams' timelines cover, from the earliest to the latest
/// time on any of them. The whole window where every stream runs through
/// it; less in a window where the streams start or end (the first and
/// last), where a path from the latest activity back to the earliest start
/// is as long as that, not the window. (The path's own length telescopes to
/// where it began minus where it stopped, so the check fails exactly when
/// the walk could not start at the latest time, stopped at a wait without
/// terminator, or ended at a timeline that begins later than the earliest.)
fn covered_span(g: &Graph) -> Ns {
    g.chains
        .iter()
        .filter(|&&(a, b)| b > a)
        .map(|&(a, b)| (g.t[a as usize], g.t[b as usize - 1]))
        .reduce(|x, y| (x.0.min(y.0), x.1.max(y.1)))
        .map_or(0, |(lo, hi)| hi - lo)
}

/// The path's edges summed by what they are.
fn sum_path(g: &Graph, edges: &[PathEdge]) -> PathSums {
    let mut s = PathSums::default();
    for e in edges {
        match *e {
            PathEdge::Worker(v) => {
                let v = v as usize;
                let (w, d) = (g.w[v] as usize, g.weight(v));
                *s.workers.entry(w).or_default() += d;
                match g.kind[v] {
                    EKind::Op(op) => {
                        s.by_kind.operator += d;
                        *s.ops.entry((w, op)).or_default() += d;
                    }
                    EKind::Span(ix) => {
                        let id = g.span_id(ix);
                        s.by_kind.span += d;
                        *s.spans.entry((w, id)).or_default() += d;
                    }
                    EKind::WaitingForInput => s.by_kind.waiting_for_input += d,
                    _ => s.by_kind.unknown += d,
                }
            }
            PathEdge::Comm(c) => {
                let c = &g.comms[c as usize];
                let d = g.t[c.dst as usize].saturating_sub(g.t[c.src as usize]);
                match c.kind {
                    MsgKind::Data => s.by_kind.data_message += d,
                    MsgKind::Progress => s.by_kind.progress_message += d,
                }
                let key = (c.channel, c.kind, g.w[c.src as usize] as usize, g.w[c.dst as usize] as usize);
                let e = s.chans.entry(key).or_default();
                e.0 += 1;
                e.1 += d;
            }
        }
    }
    s
}

fn top_operators(ops: FxHashMap<(usize, u32), Ns>, sids: &[Sid], names: &Names, len: f64) -> Vec<OpShare> {
    let mut top: Vec<OpShare> = ops
        .into_iter()
        .map(|((w, op), ns)| OpShare {
            worker: sids[w].worker,
            operator: op,
            name: names.op(w, op).unwrap_or("").to_string(),
            ns,
            share: ns as f64 / len,
        })
        .collect();
    top.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.worker.cmp(&b.worker)).then(a.operator.cmp(&b.operator)));
    top.truncate(TOP);
    top
}

fn top_spans(spans: FxHashMap<(usize, u64), Ns>, sids: &[Sid], names: &Names, len: f64) -> Vec<SpanShare> {
    let mut top: Vec<SpanShare> = spans
        .into_iter()
        .map(|((w, id), ns)| SpanShare {
            worker: sids[w].worker,
            span: id,
            name: names.span(w, id).unwrap_or("").to_string(),
            ns,
            share: ns as f64 / len,
        })
        .collect();
    top.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.worker.cmp(&b.worker)));
    top.truncate(TOP);
    top
}

fn by_worker(workers: FxHashMap<usize, Ns>, sids: &[Sid], len: f64) -> Vec<WorkerShare> {
    let mut v: Vec<WorkerShare> =
        workers.into_iter().map(|(w, ns)| WorkerShare { worker: sids[w].worker, ns, share: ns as f64 / len }).collect();
    v.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.worker.cmp(&b.worker)));
    v
}

fn top_channels(chans: FxHashMap<(u32, MsgKind, usize, usize), (u64, Ns)>, sids: &[Sid]) -> Vec<ChannelShare> {
    let mut top: Vec<ChannelShare> = chans
        .into_iter()
        .map(|((channel, k, a, b), (crossings, ns))| ChannelShare {
            channel,
            kind: kind_name(k),
            src_worker: sids[a].worker,
            dst_worker: sids[b].worker,
            crossings,
            ns,
        })
        .collect();
    top.sort_by(|a, b| {
        b.crossings
            .cmp(&a.crossings)
            .then(b.ns.cmp(&a.ns))
            .then(a.channel.cmp(&b.channel))
            .then(a.src_worker.cmp(&b.src_worker))
    });
    top.truncate(TOP);
    top
}

/// For a timeline export: the progress messages of the graph (data messages
/// were added as they were matched) and the path piece by piece.
fn export_path(g: &Graph, edges: &[PathEdge], d: &mut WindowDetail) {
    for c in &g.comms {
        if c.kind == MsgKind::Progress {
            let (src, dst) = (g.w[c.src as usize], g.w[c.dst as usize]);
            let (sent, read) = (g.t[c.src as usize], g.t[c.dst as usize]);
            d.messages.push(Message { src, dst, sent, read, channel: c.channel, kind: c.kind });
        }
    }
    for e in edges {
        d.critical.push(match *e {
            PathEdge::Worker(v) => {
                let v = v as usize;
                let what = match g.kind[v] {
                    EKind::Op(op) => CriticalKind::Operator(op),
                    EKind::Span(ix) => CriticalKind::Span(g.span_id(ix)),
                    EKind::WaitingForInput => CriticalKind::WaitingForInput,
                    _ => CriticalKind::Unknown,
                };
                CriticalPiece { stream: g.w[v], start: g.t[v] - g.weight(v), end: g.t[v], what }
            }
            PathEdge::Comm(c) => {
                let c = &g.comms[c as usize];
                let (src, dst) = (c.src as usize, c.dst as usize);
                let what = CriticalKind::Message { from: g.w[src], channel: c.channel, kind: c.kind };
                CriticalPiece { stream: g.w[dst], start: g.t[src].min(g.t[dst]), end: g.t[dst], what }
            }
        });
    }
}
