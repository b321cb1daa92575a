//! Fault injection (freezer-notes §2.9 sanity check, §7 property 7): a source clock that
//! jumps, resets or changes rate mid-run breaks the constant-rate model; FreeZer must say
//! so (never before the fault), and a new epoch must calibrate the new clock correctly.

use clocksync::sim::{self, Rng, SimClock, MILLISECOND, SECOND};
use clocksync::{Error, FreeZer};

const FAULT_AT: i128 = 10 * SECOND;

/// Run a link whose source clock is `faulty(source)` at 1 kHz from 1 s to 40 s; return the
/// real time (ps after the fault) at which the violation was reported.
fn detection_delay(seed: u64, faulty: impl Fn(SimClock) -> SimClock) -> Option<i128> {
    let mut rng = Rng::new(seed);
    let mut link = sim::random_link(&mut rng);
    link.source = faulty(link.source.clone());
    let rts = link.run(SECOND, MILLISECOND, 40_000, &mut rng);
    let mut fz = FreeZer::new();
    for (i, rt) in rts.iter().enumerate() {
        match fz.observe(rt.x) {
            Ok(()) => {}
            Err(e @ Error::ClockModel { epoch: 0, .. }) => {
                assert!(rt.t_e >= FAULT_AT, "seed {seed}: false alarm before the fault: {e}");
                assert!(e.to_string().contains("clock model broken"), "{e}");
                // A new epoch calibrates the new clock: intervals contain the truth again.
                assert_eq!(fz.new_epoch(), 1);
                for rt in &rts[i..(i + 2000).min(rts.len())] {
                    fz.observe(rt.x).unwrap_or_else(|e| panic!("seed {seed}: new epoch broke: {e}"));
                }
                let last = rts[(i + 1999).min(rts.len() - 1)].t_e;
                for j in 0..1000 {
                    let t = last - SECOND + j * MILLISECOND;
                    let (k, truth) = link.event(t);
                    assert!(fz.to_reference(k).unwrap().contains(truth), "seed {seed}: new epoch misses");
                }
                return Some(rt.t_e - FAULT_AT);
            }
            Err(e) => panic!("seed {seed}: unexpected {e}"),
        }
    }
    None
}

fn check_all(name: &str, max_delay: i128, faulty: impl Fn(SimClock) -> SimClock + Copy) {
    let mut worst = 0;
    for seed in 0..20 {
        let d = detection_delay(seed, faulty).unwrap_or_else(|| panic!("{name}: seed {seed}: fault not detected"));
        assert!(d <= max_delay, "{name}: seed {seed}: detected only after {} ms", d / MILLISECOND);
        worst = worst.max(d);
    }
    println!("{name}: worst detection delay {:.3} ms", worst as f64 / MILLISECOND as f64);
}

#[test]
fn forward_jump_is_detected() {
    // The source skips 1 ms of ticks (a TSC write, a VM resumed on another host).
    check_all("jump +1 ms", SECOND, |c| {
        let j = c.hz() as i128 / 1000;
        c.with_jump(FAULT_AT, j)
    });
}

#[test]
fn backward_jump_is_detected() {
    check_all("jump -1 ms", SECOND, |c| {
        let j = c.hz() as i128 / 1000;
        c.with_jump(FAULT_AT, -j)
    });
}

#[test]
fn reset_is_detected() {
    check_all("reset to 1000", 10 * MILLISECOND, |c| c.with_reset(FAULT_AT, 1000));
}

#[test]
fn rate_change_is_detected() {
    // +0.1 % (a non-invariant TSC following a frequency change).
    check_all("rate +1000 ppm", 5 * SECOND, |c| {
        let hz = c.hz();
        c.with_rate(FAULT_AT, hz + hz / 1000)
    });
    // -100 ppm: slower to show, still caught within 25 s.
    check_all("rate -100 ppm", 25 * SECOND, |c| {
        let hz = c.hz();
        c.with_rate(FAULT_AT, hz - hz / 10_000)
    });
}
