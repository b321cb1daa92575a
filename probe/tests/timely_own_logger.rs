//! A program with a logger of its own on timely's `"timely"` log. Timely
//! binds one logger to a name, so a second binding replaces the first:
//!
//! - bound after `attach`, it takes the log from the probe: the worker's
//!   stream ends with a Mark `MARK_DETACHED` (ringlog FORMAT.md) and its
//!   End frame, and nothing of the worker follows the mark (before, the
//!   stream stopped without a word, and one worker's stream lost its End);
//! - bound with `Adapter::register_with`, the program's logger and the
//!   probe both see every event.
#![cfg(feature = "timely")]

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::{read_trace, tmp_path};
use probe::{OnFull, Probe, Sink};
use ringlog::{Event, MARK_DETACHED};

use timely::dataflow::operators::{Exchange, Inspect, Probe as _};
use timely::logging::{TimelyEvent, TimelyEventBuilder};

/// Two workers exchange 0..1000 in one dataflow after `setup` ran in each.
fn run(path: &std::path::Path, setup: impl Fn(&mut timely::worker::Worker, &Probe) + Send + Sync + 'static) {
    let probe = Arc::new(Probe::builder().sink(Sink::file(path)).on_full(OnFull::Block).workers(2).start().unwrap());
    let p = probe.clone();
    timely::execute(timely::Config::process(2), move |worker| {
        setup(worker, &p);
        let index = worker.index() as u64;
        let handle = worker.dataflow::<u64, _, _>(|scope| {
            timely::dataflow::operators::vec::ToStream::to_stream((0..500u64).map(move |x| x * 2 + index), scope)
                .exchange(|x| *x)
                .inspect(|_| {})
                .probe()
                .0
        });
        while !handle.done() {
            worker.step();
        }
    })
    .unwrap();
    let stats = Arc::try_unwrap(probe).ok().expect("workers gone").shutdown().unwrap();
    assert_eq!(stats.lost(), 0);
}

#[test]
fn a_logger_bound_after_attach_ends_the_stream_with_a_mark() {
    let path = tmp_path("own-logger-after.rlog");
    let seen = Arc::new(AtomicU64::new(0));
    let s = seen.clone();
    run(&path, move |worker, probe| {
        probe::timely::attach(worker, probe);
        let s = s.clone();
        worker.log_register().unwrap().insert::<TimelyEventBuilder, _>("timely", move |_, data| {
            if let Some(d) = data {
                s.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
        });
    });
    let trace = read_trace(&std::fs::read(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    assert!(seen.load(Ordering::Relaxed) > 0, "the program's logger got the events");
    assert_eq!(trace.workers.len(), 2);
    for (w, s) in &trace.workers {
        let marks: Vec<usize> = s
            .records
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r.event(), Some(Event::Mark { id }) if id == MARK_DETACHED))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(marks.len(), 1, "worker {w}: one mark: {:?}", s.records);
        // Nothing of the worker's activity after it (the final Step, which
        // carries counts only, may follow).
        let after: Vec<_> =
            s.records[marks[0] + 1..].iter().filter(|r| !matches!(r.event(), Some(Event::Step { .. }))).collect();
        assert!(after.is_empty(), "worker {w}: records after the mark: {after:?}");
        assert!(s.end.is_some(), "worker {w}: the stream ends with its End frame");
    }
}

#[test]
fn a_logger_bound_with_register_with_shares_the_log() {
    let path = tmp_path("own-logger-shared.rlog");
    let seen = Arc::new(AtomicU64::new(0));
    let s = seen.clone();
    run(&path, move |worker, probe| {
        let a = probe::timely::Adapter::new(worker, probe).expect("enabled");
        let s = s.clone();
        let schedules = Rc::new(Cell::new(0u64));
        a.register_with(worker, move |_, data: &mut Option<Vec<(std::time::Duration, TimelyEvent)>>| {
            if let Some(d) = data {
                let n = d.iter().filter(|(_, e)| matches!(e, TimelyEvent::Schedule(_))).count() as u64;
                schedules.set(schedules.get() + n);
                s.fetch_add(n, Ordering::Relaxed);
            }
        });
    });
    let trace = read_trace(&std::fs::read(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    // Both saw the schedules: the program's logger all of them (starts and
    // stops), the probe those it did not elide.
    assert!(seen.load(Ordering::Relaxed) > 0);
    for (w, s) in &trace.workers {
        let starts = s.records.iter().filter(|r| matches!(r.event(), Some(Event::ScheduleStart { .. }))).count();
        assert!(starts > 0, "worker {w}: the probe traced schedules");
        assert!(
            !s.records.iter().any(|r| matches!(r.event(), Some(Event::Mark { id }) if id == MARK_DETACHED)),
            "worker {w}: not detached"
        );
        assert!(s.end.is_some());
    }
}
