//! The fast-send comparison (FreeZer §3.4 Table 2) in simulation, two and three hosts.
//!
//! `cargo run --release -p clocksync --example compare [trials] [round_trips]`
use clocksync::experiment::{table, three_host_trial, two_host_trial};

fn main() {
    let mut args = std::env::args().skip(1);
    let trials: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let two: Vec<_> = (0..trials).map(|s| two_host_trial(s, n)).collect();
    println!("## Two hosts (one is the reference), {trials} trials x {n} round trips at ~1 kHz\n");
    println!("{}", table(&two));
    let fb: u64 = two.iter().map(|r| r.ch_fallbacks).sum();
    let errs: u64 = two.iter().map(|r| r.freezer.errors).sum();
    println!("convex-hull fallbacks to regression: {fb}; FreeZer errors: {errs}\n");
    let three: Vec<_> = (0..trials).map(|s| three_host_trial(s, n)).collect();
    println!("## Three hosts (A and B converted to a third host C), {trials} trials x {n} messages each way\n");
    println!("{}", table(&three));
    let fb: u64 = three.iter().map(|r| r.ch_fallbacks).sum();
    let errs: u64 = three.iter().map(|r| r.freezer.errors).sum();
    println!("convex-hull fallbacks to regression: {fb}; FreeZer errors: {errs}");
}
