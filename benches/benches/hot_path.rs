//! Per-event cost on one worker thread, side by side in one run:
//! the floor (one rdtsc + one 32-byte store into an L1-resident array), the
//! probe's active event, an elided schedule pair (two clock reads: the
//! stop's tells it was short), a disabled probe, and two
//! peers (`Instant::now()` + Vec push as timely's logging does, and a
//! fastrace local span with a reporter installed).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use probe::{OnFull, Probe, Sink};
use ringlog::Record;

/// Events per timed batch: a quarter of the ring's capacity, so the probe's
/// measured path is the normal one (room in the ring), not the full one,
/// and what happens between batches is amortized over many events.
const BATCH: u64 = 16384;

/// Runs `iters` events in timed batches; `between` runs untimed after each
/// batch (the probe waits there for its writer to drain the ring).
fn batched(iters: u64, mut f: impl FnMut(u64), mut between: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    let mut base = 0;
    while left > 0 {
        let n = left.min(BATCH);
        let t = Instant::now();
        for i in base..base + n {
            f(i);
        }
        total += t.elapsed();
        between();
        left -= n;
        base += n;
    }
    total
}

fn per_event(c: &mut Criterion) {
    let mut g = c.benchmark_group("per_event");
    g.throughput(Throughput::Elements(1));
    g.measurement_time(Duration::from_secs(4));
    g.warm_up_time(Duration::from_secs(1));

    // The floor: what this design cannot go below.
    let mut arr = [Record::default(); 64];
    g.bench_function("floor_rdtsc_store32", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                |i| {
                    let ts = probe::rdtsc();
                    let slot = &mut arr[(i & 63) as usize];
                    *slot = Record::new(ringlog::Kind::MessageSend, ts, i, 1, 2, 3);
                    black_box(slot);
                },
                || {},
            )
        })
    });

    let devnull = Sink::file("/dev/null");
    let probe = Probe::builder().sink(devnull).ring_capacity(1 << 16).on_full(OnFull::Drop).start().unwrap();
    let mut w = probe.worker(0);
    let drained = |probe: &Probe, target: u64| {
        // Spin (yielding) rather than sleep, so the core does not drop into
        // a deep idle state between batches.
        while probe.stats().workers.first().map_or(0, |w| w.produced) < target {
            std::thread::yield_now();
        }
    };
    let mut sent = 0u64;
    // Each batch starts on a drained ring, so the measured path is the
    // normal one (room in the ring); the stats printed below show no loss.
    g.bench_function("probe_message_send", |b| {
        b.iter_custom(|iters| {
            let mut local = sent;
            let t = batched(
                iters,
                |i| w.message_send(black_box(3), black_box(1), i, black_box(64)),
                || {
                    local += BATCH;
                    drained(&probe, local.min(sent + iters));
                },
            );
            sent += iters;
            drained(&probe, sent);
            t
        })
    });
    // A message to the worker itself: counted, not written, no clock read.
    g.bench_function("probe_local_message_send", |b| {
        b.iter_custom(|iters| batched(iters, |i| w.message_send(black_box(3), black_box(0), i, black_box(64)), || {}))
    });
    g.bench_function("probe_elided_schedule_pair", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                |_| {
                    w.schedule_start(black_box(5));
                    w.schedule_stop(black_box(5));
                },
                || {},
            )
        })
    });
    drop(w);
    let stats = probe.shutdown().unwrap();
    eprintln!("probe during the bench: {:?}", stats.workers);

    // The disabled probe: `black_box(&mut d)` makes the compiler re-read
    // the handle on every call, as it must in a real engine where opaque
    // code runs between calls (otherwise the check is hoisted out of the
    // loop and the figure is 0).
    let off = Probe::disabled();
    let mut d = off.worker(0);
    g.bench_function("probe_disabled_message_send", |b| {
        b.iter_custom(|iters| {
            batched(iters, |i| black_box(&mut d).message_send(black_box(3), black_box(1), i, black_box(64)), || {})
        })
    });
    // The same loop and black boxes without the call.
    let mut unit = 0u8;
    g.bench_function("loop_overhead", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                |i| {
                    black_box(&mut unit);
                    black_box((black_box(3), black_box(1), i, black_box(64)));
                },
                || {},
            )
        })
    });

    // timely's own logging: Instant::now() per event into a Vec buffer that
    // is handed off (here: cleared) when it fills.
    #[allow(dead_code)]
    #[derive(Clone, Copy)]
    enum TimelyLike {
        Message { channel: usize, seq: usize, to: usize, len: usize },
    }
    let start = Instant::now();
    let mut buf: Vec<(Duration, TimelyLike)> = Vec::with_capacity(1024);
    g.bench_function("peer_instant_now_vec_push", |b| {
        b.iter_custom(|iters| {
            batched(
                iters,
                |i| {
                    if buf.len() == buf.capacity() {
                        black_box(&buf);
                        buf.clear();
                    }
                    buf.push((start.elapsed(), TimelyLike::Message { channel: 3, seq: i as usize, to: 1, len: 64 }));
                },
                || {},
            )
        })
    });

    struct Discard;
    impl fastrace::collector::Reporter for Discard {
        fn report(&mut self, spans: Vec<fastrace::prelude::SpanRecord>) {
            black_box(spans);
        }
    }
    fastrace::set_reporter(Discard, fastrace::collector::Config::default());
    // fastrace keeps at most 10240 local spans per local parent and drops
    // the rest cheaply, so each batch (8192) gets a root of its own; making
    // and reporting the root is left out of the timing.
    g.bench_function("peer_fastrace_local_span", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH);
                let root = fastrace::Span::root("root", fastrace::prelude::SpanContext::random());
                let guard = root.set_local_parent();
                let t = Instant::now();
                for _ in 0..n {
                    let s = fastrace::local::LocalSpan::enter_with_local_parent("message_send");
                    black_box(&s);
                }
                total += t.elapsed();
                drop(guard);
                drop(root);
                left -= n;
            }
            total
        })
    });
    g.finish();
    fastrace::flush();
}

criterion_group!(benches, per_event);
criterion_main!(benches);
