//! What one Stats frame costs the writer thread: the figures of a probe
//! with `W` workers (and an adapter) made into a frame and encoded, `N`
//! times; prints ns per frame and the frame's bytes. The writer also reads
//! its CPU clock once more per frame (`clock_gettime`, timed here too).
//! At one frame a second this is the whole cost of sending the figures.
//!
//! ```sh
//! cargo run --release -p probe --example stats_frame_cost -- 4 1000000
//! ```

use std::time::Instant;

use ringlog::{ClockDomain, Encoder, StreamId, PROCESS_WIDE};

fn main() {
    let mut args = std::env::args().skip(1);
    let workers: u32 = args.next().map_or(4, |s| s.parse().expect("workers: a number"));
    let n: u64 = args.next().map_or(1_000_000, |s| s.parse().expect("frames: a number"));
    let mut stats = probe::Stats::default();
    (stats.bytes, stats.writer_cpu_ns, stats.ticks_per_sec) = (123_456_789, 17_700_000, 2_400_000_000);
    stats.workers = (0..workers)
        .map(|i| probe::WorkerStats {
            index: i,
            produced: 1_000_000 + i as u64,
            written: 1_000_000,
            elided: 35_000,
            local_messages: 5880,
            adapter: true,
            adapter_ticks: 180_000_000,
            engine_events: 8289,
            engine_log_ns: 623_630_000,
            engine_flushes: 17_657_584,
            engine_flush_ns: 623_242_000,
            adapter_idle_ticks: 170_000_000,
            engine_idle_flushes: 17_656_547,
            engine_idle_flush_ns: 623_205_000,
            ..Default::default()
        })
        .collect();
    let mut enc = Encoder::new();
    let stream = StreamId { host: 1, process: 2, worker: PROCESS_WIDE };
    let mut out = Vec::with_capacity(1 << 20);
    let t = Instant::now();
    for i in 0..n {
        if out.len() > 1 << 19 {
            out.clear();
        }
        let figures = stats.frame_figures(i % 2 == 0);
        enc.stats(stream, i, ClockDomain::Tsc, &figures, &mut out);
    }
    let per_frame = t.elapsed().as_nanos() as f64 / n as f64;
    out.clear();
    enc.stats(stream, 0, ClockDomain::Tsc, &stats.frame_figures(true), &mut out);
    let t = Instant::now();
    let mut sum = 0u64;
    for _ in 0..n {
        // SAFETY: a valid clock id and a timespec on the stack.
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        sum = sum.wrapping_add(ts.tv_nsec as u64);
    }
    let cpu_clock = t.elapsed().as_nanos() as f64 / n as f64;
    println!(
        "stats_frame_cost: workers={workers} frames={n} ns/frame={per_frame:.0} cpu_clock_read_ns={cpu_clock:.0} \
         bytes/frame={} (checksum {})",
        out.len(),
        sum % 10
    );
}
