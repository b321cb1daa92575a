//! Stage 9: critical participation (SnailTrail; DESIGN "Windows and the
//! critical path"): every activity of the window scored by how many
//! source-to-sink paths of the window graph cross it, times its weight,
//! computed with forward and backward path counts in linear time by
//! [`crate::analysis::graph::participation_with`], then summed per (worker,
//! activity) for the report.

use rustc_hash::FxHashMap;

use super::{Names, TOP};
use crate::analysis::graph::{self, EKind, Graph};
use crate::analysis::model::{MsgKind, Sid};
use crate::analysis::report::{CpSummary, ParticipationEntry};

/// The activity categories of the sums, by their index in [`AggKey`].
const NAMES: [&str; 6] = ["operator", "span", "waiting_for_input", "unknown", "data_message", "progress_message"];

/// The window's top activities by critical participation.
///
/// Summed per (worker, activity) over integer keys first (hashing the names
/// per vertex cost more than the path counting), in vertex order as the
/// scores come, then moved to the named map in order of first appearance.
pub(super) fn rank_participation(g: &Graph, sids: &[Sid], names: &Names) -> Vec<ParticipationEntry> {
    let mut sums = PartSums::new(g.chains.len());
    let p = graph::participation_with(g, |v, sc| {
        if sc <= 0.0 {
            return;
        }
        let w = g.w[v];
        match g.kind[v] {
            EKind::Op(op) => sums.add((w, 0, Some(op as u64)), sc),
            EKind::Span(ix) => sums.add((w, 1, Some(g.span_id(ix))), sc),
            EKind::WaitingForInput => sums.add((w, 2, None), sc),
            _ => sums.add((w, 3, None), sc),
        }
    });
    for (i, c) in g.comms.iter().enumerate() {
        if p.comm[i] > 0.0 {
            let cat = match c.kind {
                MsgKind::Data => 4,
                MsgKind::Progress => 5,
            };
            sums.add((g.w[c.dst as usize], cat, Some(c.channel as u64)), p.comm[i]);
        }
    }
    let mut agg: FxHashMap<(usize, &'static str, Option<u64>), f64> = FxHashMap::default();
    for ((w, cat, id), sum) in sums.sums {
        agg.insert((w as usize, NAMES[cat as usize], id), sum);
    }
    let mut part: Vec<ParticipationEntry> = agg
        .into_iter()
        .map(|((w, activity, id), score)| ParticipationEntry {
            worker: sids[w].worker,
            activity,
            id,
            name: match (activity, id) {
                ("operator", Some(op)) => names.op(w, op as u32).map(str::to_string),
                ("span", Some(id)) => names.span(w, id).map(str::to_string),
                _ => None,
            },
            score,
        })
        .collect();
    part.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.worker.cmp(&b.worker)).then(a.id.cmp(&b.id)));
    part.truncate(TOP);
    part
}

/// Shares within this fraction of each other are a tie.
const TIE: f64 = 0.10;

/// The workers the path's top operator ties on: where it runs on several
/// workers whose critical participation (the share of the window's paths
/// that cross it, times its time) lies within 10 % of the top's worker's,
/// the path's walk picked one of them (the lowest worker among equals) and
/// its share alone would name that one. Empty when there is no tie.
pub(super) fn top_operator_tie(cp: &CpSummary, part: &[ParticipationEntry]) -> Vec<u32> {
    let Some(top) = cp.top_operators.first() else { return Vec::new() };
    let same = |p: &&ParticipationEntry| p.activity == "operator" && p.name.as_deref() == Some(top.name.as_str());
    let Some(at_top) = part.iter().filter(same).find(|p| p.worker == top.worker).map(|p| p.score) else {
        return Vec::new();
    };
    let mut tie: Vec<u32> = part
        .iter()
        .filter(same)
        .filter(|p| p.score > 0.0 && (p.score - at_top).abs() <= TIE * p.score.max(at_top))
        .map(|p| p.worker)
        .collect();
    tie.sort_unstable();
    tie.dedup();
    if tie.len() < 2 {
        tie.clear();
    }
    tie
}

/// (worker, activity category, id) of a participation sum.
type AggKey = (u32, u8, Option<u64>);

/// Participation sums in order of first appearance. Operators with small
/// ids, Waiting-for-Input and Unknown of a worker have a direct slot; the
/// rest go through a map.
struct PartSums {
    sums: Vec<(AggKey, f64)>,
    direct: Vec<u32>,
    index: FxHashMap<AggKey, u32>,
}

impl PartSums {
    const OPS: u64 = 1024;
    const PER_WORKER: usize = Self::OPS as usize + 4;

    fn new(workers: usize) -> Self {
        let size = if workers <= 256 { workers * Self::PER_WORKER } else { 0 };
        PartSums { sums: Vec::new(), direct: vec![u32::MAX; size], index: FxHashMap::default() }
    }

    #[inline(always)]
    fn add(&mut self, key: AggKey, sc: f64) {
        let slot = match key {
            (w, 0, Some(op)) if op < Self::OPS => Some(w as usize * Self::PER_WORKER + op as usize),
            (w, c @ (2 | 3), None) => Some(w as usize * Self::PER_WORKER + Self::OPS as usize + c as usize),
            _ => None,
        }
        .filter(|&s| s < self.direct.len());
        let i = match slot {
            Some(s) => {
                if self.direct[s] == u32::MAX {
                    self.direct[s] = self.sums.len() as u32;
                    self.sums.push((key, 0.0));
                }
                self.direct[s] as usize
            }
            None => {
                let n = self.sums.len() as u32;
                let i = *self.index.entry(key).or_insert(n) as usize;
                if i == self.sums.len() {
                    self.sums.push((key, 0.0));
                }
                i
            }
        };
        self.sums[i].1 += sc;
    }
}
