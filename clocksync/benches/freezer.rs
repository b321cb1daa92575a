//! `to_reference` per timestamp (goal ≤ 20 ns) and `observe` per exchange (goal ≤ 100 ns).
//!
//! `cargo bench -p clocksync --bench freezer`

use std::hint::black_box;
use std::time::{Duration, Instant};

use clocksync::sim::{self, Rng, MILLISECOND, SECOND};
use clocksync::{Exchange, FreeZer};
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
    g.throughput(criterion::Throughput::Elements(1));
    let xs = exchanges(200_000);
    g.bench_function("observe", |b| {
        b.iter_custom(|iters| {
            // Fresh converters over a long pre-generated run: each timed call is a real
            // online update (the bounds keep tightening), never a replay.
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
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
