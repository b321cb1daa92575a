//! Writer throughput: how many events per second one writer thread drains,
//! encodes, compresses and writes to a file, and the bytes each event takes
//! on the wire, for a realistic mix (schedules, messages, progress, steps).
//!
//! `cargo run --release -p benches --bin writer_throughput [EVENTS] [PATH]`
//!
//! Two measurements:
//! - `end to end`: one worker thread produces the mix as fast as it can
//!   under `OnFull::Block`, so the writer is the bottleneck; events/s is
//!   events over wall time, and also over the writer's own CPU time.
//! - `encode only`: `ringlog::Encoder` on the same records, no I/O.

use std::time::Instant;

use probe::{OnFull, Probe, Sink};

fn main() {
    let mut args = std::env::args().skip(1);
    let events: u64 = args.next().map_or(20_000_000, |s| s.parse().expect("EVENTS"));
    let path =
        args.next().unwrap_or_else(|| std::env::temp_dir().join("writer_throughput.ringlog").display().to_string());

    let probe = Probe::builder().sink(Sink::file(&path)).on_full(OnFull::Block).ring_capacity(1 << 16).start().unwrap();
    let mut w = probe.worker(0);
    let t = Instant::now();
    let made = workload(&mut w, events);
    drop(w);
    let stats = probe.shutdown().unwrap();
    let wall = t.elapsed().as_secs_f64();
    let written = stats.written();
    assert_eq!(written, made.published, "nothing may be lost under Block");
    let file_len = std::fs::metadata(&path).unwrap().len();
    println!(
        "end to end ({} backend, compression {}, zstd level {}):",
        stats.io_backend,
        stats.compression,
        ringlog::frame::ZSTD_LEVEL
    );
    println!("  events made by the engine        {:>12}", made.calls);
    println!("  records written (after elision)  {:>12}", written);
    println!(
        "  schedule pairs elided            {:>12} ({:.1}% of pairs)",
        stats.elided(),
        100.0 * stats.elided() as f64 / made.pairs as f64
    );
    println!("  wall time                        {:>12.3} s", wall);
    println!("  records/s (wall)                 {:>12.2} M", written as f64 / wall / 1e6);
    println!("  writer CPU                       {:>12.3} s", stats.writer_cpu_ns as f64 / 1e9);
    println!(
        "  records/s per writer CPU second  {:>12.2} M",
        written as f64 / (stats.writer_cpu_ns as f64 / 1e9) / 1e6
    );
    println!("  bytes on the wire                {:>12}", stats.bytes);
    println!("  bytes per written record         {:>12.3}", stats.bytes as f64 / written as f64);
    println!("  bytes per engine event           {:>12.3}", stats.bytes as f64 / made.calls as f64);
    assert_eq!(file_len, stats.bytes);

    // Encode only: the same records read back, encoded in 16 Ki batches.
    let recs: Vec<ringlog::Record> = ringlog::Decoder::new(std::fs::File::open(&path).unwrap())
        .filter_map(|f| match f.unwrap().body {
            ringlog::Body::Records(r) => Some(r),
            _ => None,
        })
        .flatten()
        .collect();
    let mut enc = ringlog::Encoder::new();
    let mut out = Vec::with_capacity(1 << 20);
    let stream = ringlog::StreamId { host: 1, process: 1, worker: 0 };
    let t = Instant::now();
    let mut bytes = 0;
    for (i, chunk) in recs.chunks(1 << 14).enumerate() {
        out.clear();
        enc.records(stream, i as u64, 0, ringlog::ClockDomain::Tsc, &[chunk], &mut out);
        bytes += out.len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!("encode only:");
    println!("  records/s                        {:>12.2} M", recs.len() as f64 / secs / 1e6);
    println!("  bytes per record                 {:>12.3}", bytes as f64 / recs.len() as f64);
    std::fs::remove_file(&path).ok();
}

struct Made {
    calls: u64,
    pairs: u64,
    published: u64,
}

/// A timely-like worker: per step, eight operators are scheduled; most find
/// nothing to do (elided), one in eight receives a batch, sends to two
/// peers and reports progress.
fn workload(w: &mut probe::WorkerProbe, events: u64) -> Made {
    let mut m = Made { calls: 0, pairs: 0, published: 0 };
    let mut seq = 0u64;
    let mut step = 0u64;
    while m.calls < events {
        for op in 0..8usize {
            w.schedule_start(op);
            m.pairs += 1;
            if (op as u64 + step).is_multiple_of(8) {
                // (Peers 1..=4 of worker 0: a worker-local half would be
                // counted, not written.)
                w.message_recv(op, 1 + (seq % 4) as usize, seq, 1024);
                w.message_send(op + 1, 1, seq, 512);
                w.message_send(op + 1, 2, seq, 512);
                w.progress_send(100, seq);
                seq += 1;
                m.calls += 4;
                m.published += 6;
            }
            w.schedule_stop(op);
            m.calls += 2;
        }
        w.step();
        m.calls += 1;
        m.published += 1;
        step += 1;
    }
    m
}
