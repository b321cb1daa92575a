//! The differential attach on a real 2-worker arrangement: what the
//! Arrangement records say the trace holds against what went in.
#![cfg(feature = "differential")]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{read_trace, tmp_path};
use differential_dataflow::input::Input;
use differential_dataflow::trace::TraceReader;
use probe::{OnFull, Probe, Sink};
use ringlog::{Event, Figure};
use timely::progress::frontier::AntichainRef;

const WORKERS: usize = 2;
/// Distinct keys inserted (round 0); the even ones are retracted (round 1).
const N: u64 = 20_000;

/// Steps `worker` for `d`, parking when nothing is active: once the
/// arrangements' merges are done (idle merge effort keeps an arrangement
/// operator scheduled until its trace is one batch), the worker parks and
/// the stream gets a Park record.
fn settle(worker: &mut timely::worker::Worker, d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        worker.step_or_park(Some(Duration::from_millis(5)));
    }
}

#[test]
fn an_arrangement_holds_n_records_then_half_once_merges_are_done() {
    let path = tmp_path("differential_arrange");
    let probe =
        Arc::new(Probe::builder().sink(Sink::file(&path)).on_full(OnFull::Block).workers(WORKERS).start().unwrap());
    // Per worker: the keys its arrangement received (+1 at time 0) and the
    // retractions (−1 at time 1), as an inspect after the arrangement saw
    // them: the keys spread by their hash, so each worker's share is
    // counted, not assumed.
    let seen: Arc<Mutex<BTreeMap<usize, (u64, u64)>>> = Arc::default();
    let (p, s) = (probe.clone(), seen.clone());
    let mut config = timely::Config::process(WORKERS);
    differential_dataflow::configure(
        &mut config.worker,
        &differential_dataflow::Config::default().idle_merge_effort(Some(1_000)),
    );
    timely::execute(config, move |worker| {
        probe::differential::attach(worker, &p);
        let index = worker.index();
        let s = s.clone();
        let (mut input, mut trace, done) = worker.dataflow::<u64, _, _>(|scope| {
            let (input, keys) = scope.new_collection::<u64, isize>();
            let arranged = keys.map(|k| (k, ())).arrange_by_key();
            let trace = arranged.trace.clone();
            let (done, _) = arranged
                .as_collection(|k: &u64, _: &()| *k)
                .inspect(move |(_, t, d)| {
                    let mut s = s.lock().unwrap();
                    let e = s.entry(index).or_default();
                    match (*t, *d) {
                        (0, 1) => e.0 += 1,
                        (1, -1) => e.1 += 1,
                        other => panic!("unexpected update {other:?}"),
                    }
                })
                .probe();
            (input, trace, done)
        });
        if index == 0 {
            (0..N).for_each(|k| input.insert(k));
        }
        input.advance_to(1);
        input.flush();
        worker.step_while(|| done.less_than(input.time()));
        // Nothing reads round 0 apart any more: a merge may fold it into
        // round 1 (so a key and its retraction cancel).
        trace.set_logical_compaction(AntichainRef::new(&[1]));
        trace.set_physical_compaction(AntichainRef::new(&[1]));
        settle(worker, Duration::from_millis(300));
        if index == 0 {
            (0..N).step_by(2).for_each(|k| input.remove(k));
        }
        input.advance_to(2);
        input.flush();
        worker.step_while(|| done.less_than(input.time()));
        trace.set_logical_compaction(AntichainRef::new(&[2]));
        trace.set_physical_compaction(AntichainRef::new(&[2]));
        settle(worker, Duration::from_millis(300));
    })
    .unwrap()
    .join();
    let stats = Arc::try_unwrap(probe).ok().expect("workers done").shutdown().unwrap();
    assert_eq!(stats.lost(), 0);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.values().map(|s| s.0).sum::<u64>(), N, "{seen:?}");
    assert_eq!(seen.values().map(|s| s.1).sum::<u64>(), N / 2, "{seen:?}");
    let trace = read_trace(&std::fs::read(&path).unwrap());
    assert!(trace.error.is_none(), "{:?}", trace.error);
    for (w, (inserted, retracted)) in seen {
        let stream = &trace.workers[&(w as u32)];
        // The Records level of each arrangement in force at each Park: the
        // worker parks only once its merges are done.
        let mut level: BTreeMap<u32, u64> = BTreeMap::new();
        let mut at_parks: Vec<u64> = Vec::new();
        for r in &stream.records {
            match r.event() {
                Some(Event::Arrangement { op, figure, value }) if figure == Figure::Records as u32 => {
                    level.insert(op, value);
                }
                Some(Event::Park { .. }) if !level.is_empty() => {
                    let held = level.values().sum();
                    if at_parks.last() != Some(&held) {
                        at_parks.push(held);
                    }
                }
                _ => {}
            }
        }
        // Known answer: round 0 leaves every key the worker received
        // (`inserted`, distinct, so nothing consolidates); round 1's
        // retractions cancel their keys once merged (times 0 and 1 both
        // advanced to the compaction frontier), leaving the rest.
        // After the closure timely steps the dataflow to its end (parking
        // between steps): dropping it drops the trace's batches, nothing
        // held.
        assert_eq!(at_parks[..2], [inserted, inserted - retracted], "worker {w}: {at_parks:?}");
        assert!(at_parks[2..].iter().all(|&l| l == 0), "worker {w}: {at_parks:?}");
        assert_eq!(level.values().sum::<u64>(), 0, "worker {w}: {level:?}");
    }
    let _ = std::fs::remove_file(&path);
}
