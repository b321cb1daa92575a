//! Attaches a probe to a differential dataflow worker: timely's events (as
//! [`crate::timely::attach`] records them) and differential's own log of
//! its arrangements, in one line.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let probe = Arc::new(probe::Probe::builder().workers(2).start()?);
//! let p = probe.clone();
//! timely::execute(timely::Config::process(2), move |worker| {
//!     probe::differential::attach(worker, &p); // before building dataflows
//!     // ... build differential dataflows and step them as usual ...
//! })?
//! .join();
//! # Ok(()) }
//! ```
//!
//! # What becomes what
//!
//! Differential logs its arrangements to the `"differential/arrange"` log
//! (every trace an `arrange`, `reduce` or `upsert` keeps, and its batcher).
//! The adapter keeps, per operator, the levels those events add up to, and
//! writes an Arrangement record (`ringlog::Event::Arrangement`) for each
//! level an event changes, at the event's time:
//!
//! | differential event | levels ([`ringlog::Figure`]) |
//! |---|---|
//! | `Batch { length }` | Records += length, Batches += 1 |
//! | `Merge { complete: None }` (a merge starts) | Merges += 1 |
//! | `Merge { length1, length2, complete: Some(n) }` | Merges − 1, Records += n − length1 − length2, Batches − 1 |
//! | `Drop { length }` | Records − length, Batches − 1 |
//! | `MergeShortfall { shortfall }` | Shortfall += shortfall |
//! | `TraceShare { diff }` | Shares += diff |
//! | `Batcher { records_diff, size_diff, capacity_diff, allocations_diff }` | BatcherRecords, BatcherBytes, BatcherCapacity, BatcherAllocations += each |
//!
//! This is differential's own balance (its `DifferentialEvent` docs): one
//! batch in per `Batch`, one out per completed `Merge` and per `Drop`, so
//! Records is the updates the trace's batches hold. A record carries the
//! level, not the change: a reader needs no earlier record to read one, and
//! a record lost to a full ring costs that one step of the level, not the
//! rest of the run. A level never goes below zero (a change that would
//! take it there, which differential's balance rules out, stops at zero).

use std::collections::HashMap;

use ::timely::worker::Worker;
use differential_dataflow::logging::DifferentialEvent;
use ringlog::Figure;

use crate::Probe;

/// [`crate::timely::attach`], and the `"differential/arrange"` log. Call it
/// first thing in the worker closure, before building dataflows. Does
/// nothing when the probe is disabled or the worker has no log registry.
pub fn attach(worker: &Worker, probe: &Probe) {
    if let Some(a) = crate::timely::Adapter::new(worker, probe) {
        a.register(worker);
        a.register_differential(worker);
    }
}

/// The levels of one arrangement, by figure (`Figure as usize − 1`).
pub(crate) type Levels = [u64; Figure::ALL.len()];

/// Per operator, the levels differential's events add up to.
#[derive(Default)]
pub(crate) struct Arrangements {
    by_op: HashMap<usize, Levels>,
}

impl Arrangements {
    /// Applies one event; calls `changed(op, figure, level)` for each level
    /// it changed, in `Figure` order.
    pub(crate) fn apply(&mut self, ev: &DifferentialEvent, mut changed: impl FnMut(u32, Figure, u64)) {
        use DifferentialEvent as D;
        use Figure::*;
        let op = match ev {
            D::Batch(e) => e.operator,
            D::Merge(e) => e.operator,
            D::Drop(e) => e.operator,
            D::MergeShortfall(e) => e.operator,
            D::TraceShare(e) => e.operator,
            D::Batcher(e) => e.operator,
        };
        let l = self.by_op.entry(op).or_default();
        let before = *l;
        let add = |l: &mut Levels, f: Figure, d: i128| {
            let v = &mut l[f as usize - 1];
            *v = (*v as i128 + d).clamp(0, u64::MAX as i128) as u64;
        };
        match ev {
            D::Batch(e) => {
                add(l, Records, e.length as i128);
                add(l, Batches, 1);
            }
            D::Merge(e) => match e.complete {
                None => add(l, Merges, 1),
                Some(n) => {
                    add(l, Merges, -1);
                    add(l, Records, n as i128 - e.length1 as i128 - e.length2 as i128);
                    add(l, Batches, -1);
                }
            },
            D::Drop(e) => {
                add(l, Records, -(e.length as i128));
                add(l, Batches, -1);
            }
            D::MergeShortfall(e) => add(l, Shortfall, e.shortfall as i128),
            D::TraceShare(e) => add(l, Shares, e.diff as i128),
            D::Batcher(e) => {
                add(l, BatcherRecords, e.records_diff as i128);
                add(l, BatcherBytes, e.size_diff as i128);
                add(l, BatcherCapacity, e.capacity_diff as i128);
                add(l, BatcherAllocations, e.allocations_diff as i128);
            }
        }
        let op = op.min(u32::MAX as usize) as u32;
        for f in Figure::ALL {
            let i = f as usize - 1;
            if l[i] != before[i] {
                changed(op, f, l[i]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use differential_dataflow::logging::{BatchEvent, BatcherEvent, DropEvent, MergeEvent, TraceShare};

    fn run(evs: &[DifferentialEvent]) -> Vec<(u32, Figure, u64)> {
        let mut a = Arrangements::default();
        let mut out = Vec::new();
        for e in evs {
            a.apply(e, |op, f, v| out.push((op, f, v)));
        }
        out
    }

    #[test]
    fn batches_merges_and_drops_balance_to_the_records_held() {
        use Figure::*;
        let merge = |l1, l2, c| MergeEvent { operator: 4, scale: 0, length1: l1, length2: l2, complete: c };
        // Two batches of 10 and 6 (16 held), merged into 12 (4 cancelled),
        // then the trace dropped: 0 held, 0 batches.
        let out = run(&[
            BatchEvent { operator: 4, length: 10 }.into(),
            BatchEvent { operator: 4, length: 6 }.into(),
            merge(10, 6, None).into(),
            merge(10, 6, Some(12)).into(),
            DropEvent { operator: 4, length: 12 }.into(),
        ]);
        assert_eq!(
            out,
            [
                (4, Records, 10),
                (4, Batches, 1),
                (4, Records, 16),
                (4, Batches, 2),
                (4, Merges, 1),
                (4, Records, 12),
                (4, Batches, 1),
                (4, Merges, 0),
                (4, Records, 0),
                (4, Batches, 0),
            ]
        );
    }

    #[test]
    fn batcher_and_sharing_levels_are_signed_sums_that_stop_at_zero() {
        use Figure::*;
        let b = |r, s, c, a| BatcherEvent {
            operator: 2,
            records_diff: r,
            size_diff: s,
            capacity_diff: c,
            allocations_diff: a,
        };
        let out = run(&[
            b(100, 800, 1024, 2).into(),
            b(-100, -800, 0, 0).into(),
            TraceShare { operator: 2, diff: 1 }.into(),
            TraceShare { operator: 2, diff: -3 }.into(),
        ]);
        assert_eq!(
            out,
            [
                (2, BatcherRecords, 100),
                (2, BatcherBytes, 800),
                (2, BatcherCapacity, 1024),
                (2, BatcherAllocations, 2),
                (2, BatcherRecords, 0),
                (2, BatcherBytes, 0),
                (2, Shares, 1),
                (2, Shares, 0),
            ]
        );
    }
}
