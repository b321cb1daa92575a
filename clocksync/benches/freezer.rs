//! `to_reference` per timestamp (goal ≤ 20 ns), `observe` per exchange (goal ≤ 150 ns,
//! issue 31.3), and the offline conversion per timestamp. `observe_floor` measures the same
//! as a minimum over runs, for loaded machines.
//!
//! `cargo bench -p clocksync --bench freezer`

use std::hint::black_box;
use std::time::{Duration, Instant};

use clocksync::sim::{self, Rng, MILLISECOND, SECOND};
use clocksync::{Exchange, FreeZer, OfflineFreeZer};
use criterion::{criterion_group, criterion_main, Criterion};

fn calibrated() -> (FreeZer, Vec<u64>) {
    let mut rng = Rng::new(7);
    let link = sim::random_link(&mut rng);
    let mut fz = FreeZer::new();
    for rt in link.run(SECOND, MILLISECOND, 10_000, &mut rng) {
        fz.observe(rt.x).unwrap();
    }
    // Timestamps spread over the run, before the zero and after the last exchange.
    let ks = (0..1024).map(|i| link.event(i as i128 * 12 * MILLISECOND).0).collect();
    (fz, ks)
}

fn exchanges(n: usize) -> Vec<Exchange> {
    let mut rng = Rng::new(11);
    let link = sim::random_link(&mut rng);
    link.run(SECOND, MILLISECOND, n, &mut rng).into_iter().map(|rt| rt.x).collect()
}

/// The asymmetric heavy-tailed link of issue 31.3 (100 ns of jitter per stamp).
fn heavy_tail_exchanges(n: usize) -> Vec<Exchange> {
    let mut rng = Rng::new(12);
    let link = sim::asymmetric_heavy_tail_link(&mut rng, 100_000.0);
    link.run(SECOND, MILLISECOND, n, &mut rng).into_iter().map(|rt| rt.x).collect()
}

/// Time `iters` observes over `xs`, fresh converters each time the run is used up.
fn observe_all(xs: &[Exchange], iters: u64) -> Duration {
    // Fresh converters over a long pre-generated run: each timed call is a real online
    // update (the bounds keep tightening), never a replay.
    let mut total = Duration::ZERO;
    let mut left = iters as usize;
    while left > 0 {
        let n = left.min(xs.len());
        let mut fz = FreeZer::new();
        let start = Instant::now();
        for x in &xs[..n] {
            black_box(fz.observe(black_box(*x))).unwrap();
        }
        total += start.elapsed();
        left -= n;
    }
    total
}

fn bench(c: &mut Criterion) {
    let (fz, ks) = calibrated();
    let mut g = c.benchmark_group("freezer");
    g.throughput(criterion::Throughput::Elements(ks.len() as u64));
    g.bench_function("to_reference x1024", |b| {
        b.iter(|| {
            for &k in &ks {
                black_box(fz.to_reference(black_box(k)).unwrap());
            }
        })
    });
    g.bench_function("to_reference_tight x1024", |b| {
        b.iter(|| {
            for &k in &ks {
                black_box(fz.to_reference_tight(black_box(k)).unwrap());
            }
        })
    });
    g.bench_function("to_reference_exact x1024", |b| {
        b.iter(|| {
            for &k in &ks {
                black_box(fz.to_reference_exact(black_box(k)).unwrap());
            }
        })
    });
    let xs = exchanges(10_000);
    let off = OfflineFreeZer::new(&xs).unwrap();
    let (lo, hi) = (xs[0].r - 1_000_000, xs.last().unwrap().r + 1_000_000);
    let ks_off: Vec<u64> = (0..1024u64).map(|i| lo + (hi - lo) / 1024 * i).collect();
    g.bench_function("offline to_reference x1024", |b| {
        b.iter(|| {
            for &k in &ks_off {
                black_box(off.to_reference(black_box(k)).unwrap());
            }
        })
    });
    g.throughput(criterion::Throughput::Elements(1));
    let xs = exchanges(200_000);
    g.bench_function("observe", |b| b.iter_custom(|iters| observe_all(&xs, iters)));
    let xs = heavy_tail_exchanges(200_000);
    g.bench_function("observe (heavy-tailed link)", |b| b.iter_custom(|iters| observe_all(&xs, iters)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
