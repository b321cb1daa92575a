//! Widths after a minute of 1 kHz exchanges over the asymmetric, heavy-tailed link of
//! issue 31.3 (`sim::asymmetric_heavy_tail_link`: forward delays Pareto with scale 3 µs,
//! back 40 µs, 5 % of delays zero, exponential scheduling jitter).
//!
//! `cargo run --release -p clocksync --example heavy_tail_widths [seeds] [seconds] [jitter_ns]`
//!
//! Per seed: the smallest round trip among the first 64 exchanges; for an event at the
//! last exchange, the anchored (`to_reference`) and tight (`to_reference_tight`) widths
//! and their ratio; for an event in the middle of the run, the anchored width and the
//! offline width (`OfflineFreeZer`, exchanges on both sides). Widths in ns of the
//! reference clock.
use clocksync::sim::{self, Rng, MILLISECOND, SECOND};
use clocksync::{FreeZer, OfflineFreeZer};

fn main() {
    let mut args = std::env::args().skip(1);
    let seeds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let secs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(60);
    let jitter_ns: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100.0);
    println!("{secs} s at 1 kHz, jitter {jitter_ns} ns; widths in ns\n");
    println!("| seed | best rtt of first 64 (µs) | anchored, now | tight, now | ratio | anchored, mid-run | offline, mid-run |");
    println!("|---|---|---|---|---|---|---|");
    for seed in 0..seeds {
        let mut rng = Rng::new(seed);
        let link = sim::asymmetric_heavy_tail_link(&mut rng, jitter_ns * 1000.0);
        let rts = link.run(SECOND, MILLISECOND, secs * 1000, &mut rng);
        let mut fz = FreeZer::new();
        for rt in &rts {
            fz.observe(rt.x).unwrap();
        }
        let xs: Vec<_> = rts.iter().map(|rt| rt.x).collect();
        let off = OfflineFreeZer::new(&xs).unwrap();
        let hz = link.reference.hz() as f64;
        let ns = |ticks: u128| ticks as f64 * 1e9 / hz;
        let first = rts[..64].iter().map(|rt| rt.x.rtt()).min().unwrap() as u128;
        let last = rts.last().unwrap();
        let (k, truth) = link.event(last.t_r);
        let a = fz.to_reference(k).unwrap();
        let t = fz.to_reference_tight(k).unwrap();
        let (km, truth_m) = link.event(rts[rts.len() / 2].t_r + MILLISECOND / 3);
        let am = fz.to_reference(km).unwrap();
        let om = off.to_reference(km).unwrap();
        assert!(a.contains(truth) && t.contains(truth) && am.contains(truth_m) && om.contains(truth_m));
        println!(
            "| {seed} | {:.3} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} |",
            ns(first) / 1000.0,
            ns(a.width()),
            ns(t.width()),
            a.width() as f64 / t.width().max(1) as f64,
            ns(am.width()),
            ns(om.width()),
        );
    }
}
