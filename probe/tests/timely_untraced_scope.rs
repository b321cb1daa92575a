//! A scope whose timestamp type the adapter does not listen to (its
//! progress messages cannot be recorded) is said in the stream, not only on
//! standard error: a Mark `MARK_UNTRACED_PROGRESS | scope` on each worker
//! (ringlog FORMAT.md), so that a reader of a recorded file knows why the
//! waits inside it have no visible cause.
#![cfg(feature = "timely")]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{read_trace, tmp_path};
use probe::{OnFull, Probe, Sink};
use ringlog::{Event, Meta, MARK_UNTRACED_PROGRESS};

use timely::dataflow::operators::{Inspect, Probe as _};
use timely::order::Product;

#[test]
fn a_scope_of_an_unknown_timestamp_type_is_marked_untraced_on_every_worker() {
    let path = tmp_path("untraced-scope.rlog");
    let probe = std::sync::Arc::new(
        Probe::builder().sink(Sink::file(&path)).on_full(OnFull::Block).workers(2).start().unwrap(),
    );
    let p = probe.clone();
    timely::execute(timely::Config::process(2), move |worker| {
        probe::timely::attach(worker, &p);
        let handle = worker.dataflow::<u64, _, _>(|scope| {
            // `Product<u64, u16>` is in no list; `Product<u64, u64>` is.
            scope.scoped::<Product<u64, u16>, _, _>("Odd", |odd| {
                timely::dataflow::operators::vec::ToStream::to_stream(0..10u8, odd).inspect(|_| {});
            });
            scope.scoped::<Product<u64, u64>, _, _>("Known", |known| {
                timely::dataflow::operators::vec::ToStream::to_stream(0..10u8, known).inspect(|_| {});
            });
            timely::dataflow::operators::vec::ToStream::to_stream(0..10u8, scope).probe().0
        });
        while !handle.done() {
            worker.step();
        }
    })
    .unwrap();
    let stats = std::sync::Arc::try_unwrap(probe).ok().expect("workers gone").shutdown().unwrap();
    assert_eq!(stats.lost(), 0);
    let trace = read_trace(&std::fs::read(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    assert_eq!(trace.workers.len(), 2);
    for (w, s) in &trace.workers {
        let named: BTreeMap<&str, u32> = s
            .meta
            .iter()
            .filter_map(|m| match m {
                Meta::Operator { id, name, .. } => Some((name.as_str(), *id)),
                _ => None,
            })
            .collect();
        let marked: BTreeSet<u32> = s
            .records
            .iter()
            .filter_map(|r| match r.event() {
                Some(Event::Mark { id }) if id & !0xffff_ffff == MARK_UNTRACED_PROGRESS => Some(id as u32),
                _ => None,
            })
            .collect();
        assert_eq!(marked, BTreeSet::from([named["Odd"]]), "worker {w}: {named:?}");
    }
}
