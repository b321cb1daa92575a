//! Inactive schedule elision with its threshold: a pair with nothing in
//! between is elided only if it was also short; a long one is published
//! like any other execution, and published + elided = pairs made.

mod common;

use std::time::{Duration, Instant};

use common::{read_trace, tmp_path};
use probe::{Probe, Sink};
use ringlog::Event;

/// Ticks no clock the probe uses reaches in 100 µs (10 GHz × 10 ms), and
/// ticks every such clock spends in more than 100 ns.
const LONG: u64 = 100_000_000;
const SHORT: u64 = 10;

#[test]
fn long_inactive_pairs_are_published_short_ones_elided() {
    let p = tmp_path("threshold.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).elide_below(Duration::from_micros(100)).start().unwrap();
    let mut w = probe.worker(0);
    let t0 = w.clock_now();
    w.schedule_start_at(t0 + 10, 1);
    w.schedule_stop_at(t0 + 10 + SHORT, 1); // short: elided
    w.schedule_start_at(t0 + 100, 2);
    w.schedule_stop_at(t0 + 100 + LONG, 2); // long, though inactive: published
    let t1 = t0 + 100 + LONG;
    w.schedule_start_at(t1 + 100, 3);
    w.schedule_stop_at(t1 + 100 + SHORT, 3); // short: elided
    w.event_at(t1 + 200, Event::Step { elided: 0, spin_ticks: 0 });
    drop(w);
    let stats = probe.shutdown().unwrap();
    let t = read_trace(&std::fs::read(&p).unwrap());
    let got: Vec<(u64, Event)> = t.workers[&0].records.iter().map(|r| (r.ts - t0, r.event().unwrap())).collect();
    assert_eq!(
        got,
        vec![
            (100, Event::ScheduleStart { op: 2 }),
            (100 + LONG, Event::ScheduleStop { op: 2 }),
            // Two pairs elided; each one's spin time runs from its start to
            // the worker's next timestamp (10 → 100, t1+100 → t1+200).
            (LONG + 300, Event::Step { elided: 2, spin_ticks: 90 + 100 }),
        ]
    );
    assert_eq!(stats.elided(), 2);
    assert_eq!(t.workers[&0].end.expect("End frame").elided, 2);
}

#[test]
fn a_zero_threshold_publishes_every_pair() {
    let p = tmp_path("zero.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).elide_below(Duration::ZERO).start().unwrap();
    let mut w = probe.worker(0);
    for _ in 0..10 {
        w.schedule_start(1);
        w.schedule_stop(1);
    }
    w.step();
    drop(w);
    let stats = probe.shutdown().unwrap();
    assert_eq!(stats.elided(), 0);
    let t = read_trace(&std::fs::read(&p).unwrap());
    let starts =
        t.workers[&0].records.iter().filter(|r| matches!(r.event(), Some(Event::ScheduleStart { .. }))).count();
    assert_eq!(starts, 10);
}

/// On the real clock: operator 1 computes silently for 200 µs, operator 2
/// returns at once; the threshold is 20 µs. Every one of operator 1's
/// executions is in the trace with its whole duration; operator 2's are
/// elided (all but those the test thread was preempted in, which are long
/// and so published too); published + elided = pairs made, and the Steps,
/// the stats and the End frame agree on the elided count.
#[test]
fn silent_work_is_published_and_the_identity_holds() {
    let p = tmp_path("identity.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).elide_below(Duration::from_micros(20)).start().unwrap();
    let mut w = probe.worker(0);
    let (mut made, mut long) = (0u64, 0u64);
    for i in 0..600u64 {
        if i % 6 == 0 {
            w.schedule_start(1);
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
            w.schedule_stop(1);
            long += 1;
        } else {
            w.schedule_start(2);
            w.schedule_stop(2);
        }
        made += 1;
        if i % 50 == 49 {
            w.step();
        }
    }
    // The count since the last step travels in the Step that dropping the
    // handle writes.
    w.schedule_start(2);
    w.schedule_stop(2);
    made += 1;
    let tps = loop {
        match w.ticks_per_sec() {
            0 => std::thread::sleep(Duration::from_millis(5)),
            t => break t,
        }
    };
    drop(w);
    let stats = probe.shutdown().unwrap();
    let t = read_trace(&std::fs::read(&p).unwrap());
    let s = &t.workers[&0];
    let (mut published, mut elided, mut open) = (0u64, 0u64, None);
    let mut long_published = 0u64;
    for r in &s.records {
        match r.event().unwrap() {
            Event::ScheduleStart { op } => open = Some((op, r.ts)),
            Event::ScheduleStop { op } => {
                let (o, ts) = open.take().expect("a stop after its start");
                assert_eq!(o, op);
                published += 1;
                if op == 1 {
                    long_published += 1;
                    let ns = (r.ts - ts) as u128 * 1_000_000_000 / tps as u128;
                    assert!(ns >= 190_000, "operator 1's execution lasted {ns} ns in the trace");
                }
            }
            Event::Step { elided: n, .. } => elided += n,
            e => panic!("unexpected {e:?}"),
        }
    }
    assert_eq!(long_published, long, "every silent 200 µs execution is in the trace");
    assert_eq!(published + elided, made, "published {published} + elided {elided}");
    assert_eq!(stats.elided(), elided);
    assert_eq!(s.end.expect("End frame").elided, elided);
    // Preemptions of this thread between a start and its stop are rare.
    assert!(elided > (made - long) / 2, "elided {elided} of {} short pairs", made - long);
}

#[test]
fn a_threshold_above_one_second_is_refused() {
    let e = Probe::builder()
        .sink(Sink::file(tmp_path("refused.ringlog")))
        .elide_below(Duration::from_millis(1001))
        .start()
        .err()
        .expect("refused");
    assert!(e.to_string().contains("elision threshold 1001000000 ns is above 1 s"), "{e}");
}
