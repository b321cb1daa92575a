//! The writer and the worker handles at the edges of their configuration:
//! the smallest ring, and a final Step that finds the ring full.

mod common;

use std::time::Duration;

use common::{read_trace, tmp_path};
use probe::{OnFull, Probe, Sink};

/// The smallest ring the builder accepts (2 records): an idle writer still
/// sleeps between passes instead of counting every pass as busy.
#[test]
fn an_idle_writer_sleeps_with_the_smallest_ring() {
    let p = tmp_path("smallest-ring.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).ring_capacity(2).start().unwrap();
    let w = probe.worker(0);
    std::thread::sleep(Duration::from_millis(100));
    let before = probe.stats().writer_cpu_ns;
    std::thread::sleep(Duration::from_millis(500));
    let cpu_ms = (probe.stats().writer_cpu_ns - before) as f64 / 1e6;
    drop(w);
    probe.shutdown().unwrap();
    // A pass every 10 ms costs microseconds; spinning costs the whole 500.
    assert!(cpu_ms < 100.0, "the idle writer used {cpu_ms:.1} ms of CPU in 500 ms");
}

/// Pairs elided after the last engine step travel in the final Step the
/// dropped worker writes. When the ring is full that Step is lost (counted)
/// and there is no later one to carry them: they still count as elided, in
/// the stats and in the End frame.
#[test]
fn pairs_elided_before_a_lost_final_step_still_count() {
    let p = tmp_path("lost-final-step.ringlog");
    // The writer calibrates the clock for 20 ms before its first pass, so a
    // 4-record ring filled at once stays full meanwhile.
    // (Every pair short, even one the thread is preempted in.)
    let probe = Probe::builder()
        .sink(Sink::file(&p))
        .ring_capacity(4)
        .on_full(OnFull::Drop)
        .elide_below(std::time::Duration::from_secs(1))
        .start()
        .unwrap();
    let mut w = probe.worker(0);
    for i in 0..8 {
        w.mark(i);
    }
    for _ in 0..5 {
        w.schedule_start(1);
        w.schedule_stop(1);
    }
    drop(w);
    let stats = probe.shutdown().unwrap();
    let ws = &stats.workers[0];
    assert!(ws.lost_ring >= 5, "the ring was meant to be full: {ws:?}");
    assert_eq!(ws.produced, ws.written + ws.lost(), "{ws:?}");
    assert_eq!(stats.elided(), 5, "{ws:?}");
    let t = read_trace(&std::fs::read(&p).unwrap());
    let end = t.workers[&0].end.expect("the stream's End frame");
    assert_eq!((end.elided, end.lost), (5, ws.lost()));
}

/// A program that stops its probe right after starting it (a short run, a
/// test) does not wait out the writer's 20 ms clock calibration in
/// `shutdown`: the calibration ends early, over at least 1 ms, and still
/// gives the TSC's rate.
#[test]
fn a_probe_stopped_at_once_does_not_wait_out_the_calibration() {
    let reference = {
        let (t0, n0) = (probe::rdtsc(), probe::monotonic_ns());
        std::thread::sleep(Duration::from_millis(30));
        let (t1, n1) = (probe::rdtsc(), probe::monotonic_ns());
        (t1 - t0) as f64 * 1e9 / (n1 - n0) as f64
    };
    // The best of five, so that one run preempted on a busy machine (CI
    // runs tests side by side) does not decide it.
    let mut fastest = Duration::MAX;
    let mut closest = f64::MAX;
    for i in 0..5 {
        let p = tmp_path(&format!("stopped-at-once-{i}.ringlog"));
        let started = std::time::Instant::now();
        let probe = Probe::builder().sink(Sink::file(&p)).start().unwrap();
        let mut w = probe.worker(0);
        w.mark(1);
        drop(w);
        let stats = probe.shutdown().unwrap();
        fastest = fastest.min(started.elapsed());
        assert_eq!(stats.workers[0].written, stats.workers[0].produced, "{stats:?}");
        let t = read_trace(&std::fs::read(&p).unwrap());
        assert!(t.workers[&0].end.is_some(), "the stream was not ended");
        if std::env::var_os("PROBE_CLOCK").is_none() && probe::invariant_tsc() {
            closest = closest.min((stats.ticks_per_sec as f64 / reference - 1.0).abs());
        }
    }
    // Waiting out the calibration takes 20 ms at the least.
    assert!(fastest < Duration::from_millis(15), "shutdown took {fastest:?} at best");
    if closest != f64::MAX {
        assert!(closest < 0.01, "the early calibration is {:.3} % off", closest * 100.0);
    }
}
