//! The probe sends its own figures in the stream: a Stats frame about once
//! a second and a last one at shutdown, equal to what `shutdown` returns.

mod common;

use std::time::{Duration, Instant};

use common::{read_trace, tmp_path};
use probe::{AdapterCost, Probe, Sink};
use ringlog::StatFigure as F;

#[test]
fn the_last_stats_frame_holds_the_figures_shutdown_returns() {
    let p = tmp_path("stats-frames.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).workers(2).start().unwrap();
    let (mut w0, mut w1) = (probe.worker(0), probe.worker(1));
    w0.operator(1, "Map", &[0, 1]);
    // 2.2 s of work: two periodic frames, about 1 s apart, then the last.
    let t0 = Instant::now();
    let mut seq = 0;
    while t0.elapsed() < Duration::from_millis(2200) {
        for w in [&mut w0, &mut w1] {
            w.schedule_start(1);
            w.message_send(3, 1, seq, 10);
            w.schedule_stop(1);
            w.schedule_start(1);
            w.schedule_stop(1); // elided
            w.step();
        }
        seq += 1;
        std::thread::sleep(Duration::from_micros(200));
    }
    w0.add_adapter_cost(AdapterCost { ticks: 1000, engine_events: 10, engine_log_ns: 300, ..AdapterCost::default() });
    drop((w0, w1));
    let s = probe.shutdown().unwrap();
    let t = read_trace(&std::fs::read(&p).unwrap());
    let _ = std::fs::remove_file(&p);
    assert!(t.error.is_none(), "{:?}", t.error);
    let (last, periodic) = t.stats.split_last().expect("stats frames");
    assert!(last.last && periodic.iter().all(|f| !f.last), "{:?}", t.stats);
    assert!((2..=3).contains(&periodic.len()), "about one a second: {:?}", t.stats);
    assert_eq!(s.stats_frames, t.stats.len() as u64);
    // The last frame: the figures `shutdown` returned (but the bytes and
    // the writer's CPU, which went on past it: the frame and the End after
    // it are not in its bytes).
    let want = [
        (F::Workers, 2),
        (F::Produced, s.produced()),
        (F::Written, s.written()),
        (F::Lost, s.lost()),
        (F::Elided, s.elided()),
        (F::LocalMessages, s.local_messages()),
        (F::AdapterNs, s.adapter_ns()),
        (F::EngineEvents, 10),
        (F::EngineLogNs, 300),
    ];
    for (f, v) in want {
        assert_eq!(last.get(f), Some(v), "{f:?}: {last:?} against {s:?}");
    }
    assert!(s.written() > 1000 && s.elided() > 1000, "{s:?}");
    let bytes = last.get(F::Bytes).unwrap();
    assert!(bytes < s.bytes && s.bytes - bytes < 200, "{bytes} of {}", s.bytes);
    assert!(last.get(F::WriterCpuNs).unwrap() <= s.writer_cpu_ns);
    // Running totals: the periodic frames never go back, and say less.
    let written: Vec<u64> = t.stats.iter().map(|f| f.get(F::Written).unwrap()).collect();
    assert!(written.windows(2).all(|w| w[0] <= w[1]) && written[0] < *written.last().unwrap(), "{written:?}");
    // No adapter had reported before the last frame's second: no adapter
    // figures in the periodic frames (a figure not known is absent).
    assert!(periodic.iter().all(|f| f.get(F::AdapterNs).is_none()), "{periodic:?}");
}

#[test]
fn stats_frames_can_be_turned_off() {
    let p = tmp_path("stats-frames-off.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).stats_frames(false).start().unwrap();
    let mut w = probe.worker(0);
    w.mark(1);
    drop(w);
    let s = probe.shutdown().unwrap();
    let t = read_trace(&std::fs::read(&p).unwrap());
    let _ = std::fs::remove_file(&p);
    assert!(t.stats.is_empty() && s.stats_frames == 0, "{:?}", t.stats);
    assert!(t.process_end);
}
