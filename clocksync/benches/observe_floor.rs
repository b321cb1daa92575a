//! `observe` and the conversions per call, as the minimum and the median over repeated
//! runs (the minimum is what the code costs when the machine lets it run; the median shows
//! how loaded the machine was). A timing loop beside the criterion bench `freezer`, for
//! shared machines where criterion's mean moves with the load.
//!
//! `cargo bench -p clocksync --bench observe_floor [-- runs]`

use std::hint::black_box;
use std::time::Instant;

use clocksync::sim::{self, Rng, MILLISECOND, SECOND};
use clocksync::{Exchange, FreeZer};

/// ns per item over `runs` runs of `f` (which does `items` items): (min, median).
fn floor(runs: usize, items: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_nanos() as f64 / items as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[0], t[runs / 2])
}

fn main() {
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(40);
    let n = 200_000;
    // The criterion bench's link, and the asymmetric heavy-tailed one of issue 31.3.
    let mut rng = Rng::new(11);
    let link = sim::random_link(&mut rng);
    let random: Vec<Exchange> = link.run(SECOND, MILLISECOND, n, &mut rng).iter().map(|rt| rt.x).collect();
    let mut rng = Rng::new(12);
    let link = sim::asymmetric_heavy_tail_link(&mut rng, 100_000.0);
    let heavy: Vec<Exchange> = link.run(SECOND, MILLISECOND, n, &mut rng).iter().map(|rt| rt.x).collect();
    println!("runs: {runs}; ns per call, min / median");
    for (name, xs) in [("random link", &random), ("heavy-tailed link", &heavy)] {
        let (min, med) = floor(runs, xs.len(), || {
            let mut fz = FreeZer::new();
            for x in xs.iter() {
                black_box(fz.observe(black_box(*x))).unwrap();
            }
            black_box(&fz);
        });
        println!("observe, {name}, {n} exchanges from a fresh FreeZer: {min:.1} / {med:.1}");
    }
    let mut fz = FreeZer::new();
    for x in &heavy {
        fz.observe(*x).unwrap();
    }
    // Events over the whole run and a second either side.
    let span = (heavy.last().unwrap().r - heavy[0].r) as u128;
    let ks: Vec<u64> =
        (0..4096u128).map(|i| (heavy[0].r as u128 - span / 100 + i * (span + span / 50) / 4096) as u64).collect();
    let (min, med) = floor(runs * 10, ks.len(), || {
        for &k in &ks {
            black_box(fz.to_reference(black_box(k))).unwrap();
        }
    });
    println!("to_reference, events over the run: {min:.1} / {med:.1}");
    let (min, med) = floor(runs * 10, ks.len(), || {
        for &k in &ks {
            black_box(fz.to_reference_tight(black_box(k))).unwrap();
        }
    });
    println!("to_reference_tight, events over the run: {min:.1} / {med:.1}");
    let now = heavy.last().unwrap().r;
    let recent: Vec<u64> = (0..4096u64).map(|i| now + i * 500).collect();
    let (min, med) = floor(runs * 10, recent.len(), || {
        for &k in &recent {
            black_box(fz.to_reference(black_box(k))).unwrap();
        }
    });
    println!("to_reference, events after the latest exchange: {min:.1} / {med:.1}");
}
