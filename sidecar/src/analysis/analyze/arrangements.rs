//! Stage 12: the window's differential arrangements, by worker and
//! operator, from the levels each stream's fragment carries (the probe's
//! Arrangement records; `analysis::window` keeps them across windows).

use crate::analysis::model::Fragment;
use crate::analysis::report::ArrangementReport;

use super::Names;

/// Arrangements a report lists at most (the largest): a differential
/// program has a few per worker, and a report stays one screen of JSON.
pub(super) const LISTED: usize = 64;

/// The window's arrangements, the most records held first (ties: by
/// worker, then operator), at most [`LISTED`].
pub(super) fn list_arrangements(frags: &[Fragment], names: &Names) -> Vec<ArrangementReport> {
    let mut out: Vec<ArrangementReport> = Vec::new();
    for (i, f) in frags.iter().enumerate() {
        let Some(sid) = f.stream else { continue };
        for a in &f.arrangements {
            let v = &a.values;
            out.push(ArrangementReport {
                worker: sid.worker,
                operator: a.op,
                name: names.op(i, a.op).map_or_else(|| format!("operator {}", a.op), |n| n.to_string()),
                records: v[0],
                peak_records: a.peak_records.max(v[0]),
                batches: v[1],
                merges: v[2],
                batcher_records: v[3],
                batcher_bytes: v[4],
                batcher_capacity_bytes: v[5],
                batcher_allocations: v[6],
                shares: v[7],
                merge_shortfall: v[8],
            });
        }
    }
    out.sort_by(|a, b| b.records.cmp(&a.records).then(a.worker.cmp(&b.worker)).then(a.operator.cmp(&b.operator)));
    out.truncate(LISTED);
    out
}
