//! An engine adapter's cost reports reach the probe's stats, summed per
//! worker and over workers.

mod common;

use common::tmp_path;
use probe::{AdapterCost, Probe, Sink};

#[test]
fn adapter_costs_add_up_in_the_stats() {
    let p = tmp_path("adapter-cost.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).workers(2).start().unwrap();
    let (mut w0, mut w1) = (probe.worker(0), probe.worker(1));
    w0.add_adapter_cost(AdapterCost { ticks: 1000, engine_events: 10, engine_log_ns: 300, ..AdapterCost::default() });
    w0.add_adapter_cost(AdapterCost {
        ticks: 500,
        engine_events: 5,
        engine_log_ns: 150,
        engine_flushes: 4,
        engine_flush_ns: 40,
        idle_ticks: 300,
        idle_flushes: 3,
        idle_flush_ns: 30,
    });
    w1.add_adapter_cost(AdapterCost {
        ticks: 7,
        engine_events: 1,
        engine_log_ns: 30,
        engine_flushes: 1,
        engine_flush_ns: 9,
        idle_ticks: 2,
        idle_flushes: 1,
        idle_flush_ns: 9,
    });
    drop((w0, w1));
    let s = probe.shutdown().unwrap();
    let _ = std::fs::remove_file(&p);
    let by = |i: u32| s.workers.iter().find(|w| w.index == i).unwrap();
    assert_eq!((by(0).adapter_ticks, by(0).engine_events, by(0).engine_log_ns), (1500, 15, 450), "{s:?}");
    assert_eq!((by(1).adapter_ticks, by(1).engine_events, by(1).engine_log_ns), (7, 1, 30), "{s:?}");
    assert_eq!((s.engine_events(), s.engine_log_ns()), (16, 480));
    assert_eq!((by(0).engine_flushes, by(0).engine_flush_ns), (4, 40));
    assert_eq!((s.engine_flushes(), s.engine_flush_ns()), (5, 49));
    // Ticks become ns at the writer's calibration.
    assert!(s.ticks_per_sec > 0);
    assert_eq!(s.adapter_ns(), (1507u128 * 1_000_000_000 / s.ticks_per_sec as u128) as u64);
    // The parts spent in idle steps, likewise.
    assert_eq!((by(0).adapter_idle_ticks, by(0).engine_idle_flushes, by(0).engine_idle_flush_ns), (300, 3, 30));
    assert_eq!((s.engine_idle_flushes(), s.engine_idle_flush_ns()), (4, 39));
    assert_eq!(s.adapter_idle_ns(), (302u128 * 1_000_000_000 / s.ticks_per_sec as u128) as u64);
}

#[test]
fn a_disabled_probe_ignores_adapter_costs() {
    let probe = Probe::builder().sink(Sink::Off).workers(1).start().unwrap();
    let mut w = probe.worker(0);
    w.add_adapter_cost(AdapterCost {
        ticks: 1,
        engine_events: 1,
        engine_log_ns: 1,
        engine_flushes: 1,
        engine_flush_ns: 1,
        idle_ticks: 1,
        idle_flushes: 1,
        idle_flush_ns: 1,
    });
    drop(w);
    let s = probe.shutdown().unwrap();
    assert_eq!((s.adapter_ns(), s.engine_events(), s.engine_log_ns()), (0, 0, 0));
    assert_eq!((s.adapter_idle_ns(), s.engine_idle_flushes(), s.engine_idle_flush_ns()), (0, 0, 0));
}
