//! A program that builds and drops dataflows one after another (as an
//! interactive differential program installs and retires its queries):
//! each dataflow's root is declared with an address of one number, and its
//! drop is written as a shutdown Mark of that root, which is how a reader
//! knows to forget its operators (ringlog FORMAT.md, Mark).
#![cfg(feature = "timely")]

mod common;

use std::collections::BTreeSet;

use common::{read_trace, tmp_path};
use probe::{OnFull, Probe, Sink};
use ringlog::{Event, Meta, MARK_SHUTDOWN};

use timely::dataflow::operators::{Input, Inspect, Probe as _};

const DATAFLOWS: u64 = 5;

#[test]
fn a_dropped_dataflow_is_written_as_its_roots_shutdown() {
    let path = tmp_path("drop-dataflow.rlog");
    let probe = std::sync::Arc::new(
        Probe::builder().sink(Sink::file(&path)).on_full(OnFull::Block).workers(1).start().unwrap(),
    );
    let p = probe.clone();
    timely::execute(timely::Config::thread(), move |worker| {
        probe::timely::attach(worker, &p);
        for round in 0..DATAFLOWS {
            let (mut input, handle) = worker.dataflow::<u64, _, _>(|scope| {
                let (input, stream) = scope.new_input::<Vec<u64>>();
                (input, stream.inspect(|_| {}).probe().0)
            });
            for x in 0..100 {
                input.send(round * 100 + x);
            }
            input.advance_to(1);
            while handle.less_than(&1) {
                worker.step();
            }
            let id = *worker.installed_dataflows().last().expect("a dataflow");
            worker.drop_dataflow(id);
        }
    })
    .unwrap();
    let stats = std::sync::Arc::try_unwrap(probe).ok().expect("workers gone").shutdown().unwrap();
    assert_eq!(stats.lost(), 0);
    let trace = read_trace(&std::fs::read(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    let w = &trace.workers[&0];
    let roots: BTreeSet<u32> = w
        .meta
        .iter()
        .filter_map(|m| match m {
            Meta::Operator { id, addr, .. } if addr.len() == 1 => Some(*id),
            _ => None,
        })
        .collect();
    let shut: BTreeSet<u32> = w
        .records
        .iter()
        .filter_map(|r| match r.event() {
            Some(Event::Mark { id }) if id & !0xffff_ffff == MARK_SHUTDOWN => Some(id as u32),
            _ => None,
        })
        .collect();
    assert_eq!(roots.len(), DATAFLOWS as usize, "{roots:?}");
    assert!(roots.is_subset(&shut), "roots {roots:?}, shut down {shut:?}");
    // Each at its drop: before the next dataflow first runs (not at the
    // program's end, when every operator shuts down).
    let at = |want: Event| w.records.iter().position(|r| r.event() == Some(want));
    let roots: Vec<u32> = roots.into_iter().collect();
    for pair in roots.windows(2) {
        let dropped = at(Event::Mark { id: MARK_SHUTDOWN | u64::from(pair[0]) }).unwrap();
        let next = at(Event::ScheduleStart { op: pair[1] }).expect("the next dataflow runs");
        assert!(dropped < next, "dataflow {} dropped at record {dropped}, {} runs from {next}", pair[0], pair[1]);
    }
}
