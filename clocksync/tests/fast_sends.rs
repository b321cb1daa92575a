//! The paper's headline comparison (FreeZer §3.4, Table 2) in simulation. FreeZer's
//! intervals never put a receive certainly before its send, and comparing lower bounds
//! with lower bounds and upper with upper never shows one either (two hosts, one the
//! reference, as in the paper). Linear regression and the convex hull are reported on the
//! same data; `cargo run --release -p clocksync --example compare` prints the full table.

use clocksync::experiment::{table, three_host_trial, two_host_trial};

#[test]
fn two_hosts_freezer_shows_no_fast_sends() {
    let reports: Vec<_> = (0..100).map(|seed| two_host_trial(seed, 2000)).collect();
    println!("{}", table(&reports));
    for (seed, r) in reports.iter().enumerate() {
        let f = &r.freezer;
        assert_eq!(f.errors, 0, "seed {seed}");
        assert_eq!(f.certain, 0, "seed {seed}: a receive certainly before its send");
        assert_eq!(f.both_ends, 0, "seed {seed}: lower and upper bounds both inverted");
        assert_eq!(f.contained, f.conversions, "seed {seed}: truth outside an interval");
        assert_eq!(r.lr.missing + r.ch.missing, 0);
    }
    // The metric is live: the point estimators do produce fast sends on this data.
    let lr: u64 = reports.iter().map(|r| r.lr.fast_sends).sum();
    let ch: u64 = reports.iter().map(|r| r.ch.fast_sends).sum();
    assert!(lr > 0 && ch > 0, "lr {lr} ch {ch}");
}

#[test]
fn three_hosts_freezer_never_certainly_inverts() {
    let reports: Vec<_> = (0..30).map(|seed| three_host_trial(seed, 2000)).collect();
    println!("{}", table(&reports));
    for (seed, r) in reports.iter().enumerate() {
        assert_eq!(r.freezer.errors, 0, "seed {seed}");
        assert_eq!(r.freezer.certain, 0, "seed {seed}: a receive certainly before its send");
        assert_eq!(r.freezer.contained, r.freezer.conversions, "seed {seed}");
    }
}
