//! FreeZer's guarantees against the simulator's truth oracle (freezer-notes §7, properties
//! 1–3 and 6): frequency containment, timestamp containment (before the zero, after the
//! last exchange, through several hops), monotone tightening, width ~ 1/elapsed, exact
//! arithmetic.

use clocksync::sim::{self, Link, Rng, SimClock, MILLISECOND, SECOND};
use clocksync::{convert_path, convert_path_tight, FreeZer, Interval, Ratio};
use proptest::prelude::*;

fn true_f(link: &Link) -> Ratio {
    let (n, d) = sim::true_ratio(link);
    Ratio::new(n, d)
}

/// A random real time in `[lo, hi)` picoseconds.
fn t_in(rng: &mut Rng, lo: i128, hi: i128) -> i128 {
    lo + (rng.next_u64() as i128).rem_euclid((hi - lo).max(1))
}

/// At least a million conversions across many random links (17-digit offsets,
/// 0.8–2.3 GHz, asymmetric heavy-tailed delays with zeros, jitter), checked while the
/// exchanges arrive: every interval contains the truth, including events long before the
/// zero and after the last exchange; the frequency bounds always contain the true ratio;
/// anchored intervals of fixed events never widen once the exchanges have passed them (and
/// by at most a tick per new anchor before); tight intervals lie inside anchored ones.
#[test]
fn a_million_conversions_contain_the_truth() {
    let mut conversions = 0u64;
    let mut before_zero = 0u64;
    for seed in 0..40u64 {
        let mut rng = Rng::new(seed);
        let link = sim::random_link(&mut rng);
        let f = true_f(&link);
        let period = rng.range(200, 5000) as i128 * MILLISECOND / 1000;
        let t0 = 2 * SECOND;
        let rts = link.run(t0, period, 300, &mut rng);
        let fixed: Vec<(u64, i128)> = (0..16).map(|_| link.event(t_in(&mut rng, 0, t0 + 300 * period))).collect();
        // (interval, whether the exchanges had passed the event, anchors then)
        let mut last: Vec<Option<(Interval, bool, usize)>> = vec![None; fixed.len()];
        let mut fz = FreeZer::new();
        let mut max_r = 0;
        for rt in &rts {
            fz.observe(rt.x).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            max_r = max_r.max(rt.x.r);
            let (fl, fu) = fz.frequency_bounds();
            assert!(fl <= f && f <= fu, "seed {seed}: F = {f} outside [{fl}, {fu}]");
            if !fz.is_calibrated() {
                continue;
            }
            for _ in 0..80 {
                let t = t_in(&mut rng, 0, rt.t_e + SECOND);
                let (k, truth) = link.event(t);
                let a = fz.to_reference(k).unwrap();
                let b = fz.to_reference_tight(k).unwrap();
                assert!(a.contains(truth), "seed {seed}: t={t} k={k} truth={truth} anchored={a}");
                assert!(b.contains(truth), "seed {seed}: t={t} k={k} truth={truth} tight={b}");
                assert!(a.contains_interval(&b));
                conversions += 2;
                before_zero += 2 * (k < fz.zero().unwrap().0) as u64;
            }
            for ((k, truth), prev) in fixed.iter().zip(last.iter_mut()) {
                let iv = fz.to_reference(*k).unwrap();
                assert!(iv.contains(*truth));
                if let Some((p, passed, anchors)) = *prev {
                    let slack = if passed { 0 } else { (fz.anchors() - anchors) as i128 };
                    assert!(
                        p.lo - slack <= iv.lo && iv.hi <= p.hi + slack,
                        "seed {seed}: interval for {k} widened: {p} -> {iv} (passed: {passed})"
                    );
                }
                *prev = Some((iv, *k <= max_r, fz.anchors()));
                conversions += 1;
            }
        }
    }
    let hops = multi_hop_conversions(0..10, 20_000);
    conversions += hops;
    println!("{conversions} conversions ({before_zero} before the zero, {hops} through two hops)");
    assert!(conversions >= 1_000_000, "only {conversions} conversions");
    assert!(before_zero >= 100_000, "only {before_zero} conversions before the zero");
}

/// A → B → C: hosts A and B are probed by their parents B and C. Converting A's
/// timestamps through both hops keeps the guarantee, and the width is this hop's width
/// plus the previous width scaled by the frequency, no more (and no less than the scaled
/// previous width: the event can be anywhere in it).
fn multi_hop_conversions(seeds: std::ops::Range<u64>, per_seed: usize) -> u64 {
    let mut n = 0;
    for seed in seeds {
        let mut rng = Rng::new(1000 + seed);
        let a = SimClock::new(sim::random_offset(&mut rng), sim::random_hz(&mut rng));
        let b = SimClock::new(sim::random_offset(&mut rng), sim::random_hz(&mut rng));
        let c = SimClock::new(sim::random_offset(&mut rng), sim::random_hz(&mut rng));
        let ab = sim::random_link_between(b.clone(), a.clone(), &mut rng);
        let bc = sim::random_link_between(c.clone(), b.clone(), &mut rng);
        let mut f_ab = FreeZer::new();
        let mut f_bc = FreeZer::new();
        for rt in ab.run(SECOND, MILLISECOND, 1000, &mut rng) {
            f_ab.observe(rt.x).unwrap();
        }
        for rt in bc.run(SECOND, MILLISECOND, 1000, &mut rng) {
            f_bc.observe(rt.x).unwrap();
        }
        let (fl_bc, fu_bc) = f_bc.frequency_bounds();
        for _ in 0..per_seed {
            let t = t_in(&mut rng, 0, 4 * SECOND);
            let k = a.read(t);
            let truth = c.read_i128(t);
            let iv = convert_path(&[&f_ab, &f_bc], k).unwrap();
            let tight = convert_path_tight(&[&f_ab, &f_bc], k).unwrap();
            assert!(iv.contains(truth), "seed {seed}: two hops {iv} miss {truth}");
            assert!(tight.contains(truth), "seed {seed}: two hops (tight) {tight} miss {truth}");
            // Width accounting: w_AC ≤ w_BC(point at lo_AB) + ceil(w_AB · F^U) + 1 and
            // w_AC ≥ floor(w_AB · F^L).
            let mid = f_ab.to_reference(k).unwrap();
            let w_ab = mid.width();
            let point = f_bc.to_reference(u64::try_from(mid.lo).unwrap()).unwrap().width();
            let upper = point + fu_bc.mul_ceil(w_ab).unwrap() + 1;
            let lower = fl_bc.mul_floor(w_ab).unwrap();
            assert!(iv.width() <= upper, "seed {seed}: width {} > {upper}", iv.width());
            assert!(iv.width() >= lower, "seed {seed}: width {} < {lower}", iv.width());
            n += 2;
        }
    }
    n
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Containment over random parameters (with shrinking to a small failing case).
    #[test]
    fn containment(seed in any::<u64>(), period_us in 1u64..20_000, n in 2usize..200,
                   events in proptest::collection::vec(0u64..1_000_000, 1..40)) {
        let mut rng = Rng::new(seed);
        let link = sim::random_link(&mut rng);
        let rts = link.run(SECOND, period_us as i128 * 1_000_000, n, &mut rng);
        let mut fz = FreeZer::new();
        for rt in &rts {
            fz.observe(rt.x).unwrap();
        }
        let (fl, fu) = fz.frequency_bounds();
        prop_assert!(fl <= true_f(&link) && true_f(&link) <= fu);
        if fz.is_calibrated() {
            let end = rts.last().unwrap().t_e + SECOND;
            for e in events {
                // Spread over [0, end]: before the zero, during, after.
                let t = end * e as i128 / 1_000_000;
                let (k, truth) = link.event(t);
                prop_assert!(fz.to_reference(k).unwrap().contains(truth));
                prop_assert!(fz.to_reference_tight(k).unwrap().contains(truth));
            }
        }
    }

    /// The fast path (outward-rounded fixed point, no division) contains the exact
    /// rational path and exceeds it by at most one tick at each end.
    #[test]
    fn fixed_point_path_matches_exact_path(seed in any::<u64>(), n in 2usize..100, e in any::<u64>()) {
        let mut rng = Rng::new(seed);
        let link = sim::random_link(&mut rng);
        let rts = link.run(SECOND, MILLISECOND, n, &mut rng);
        let mut fz = FreeZer::new();
        for rt in &rts {
            fz.observe(rt.x).unwrap();
        }
        prop_assume!(fz.is_calibrated());
        // Anywhere within ±2^40 ticks (~10 minutes) of the zero.
        let k = (fz.zero().unwrap().0 as i128 + (e % (1 << 41)) as i128 - (1 << 40)) as u64;
        let fast = fz.to_reference(k).unwrap();
        let exact = fz.to_reference_exact(k).unwrap();
        prop_assert!(fast.contains_interval(&exact), "fast {} exact {}", fast, exact);
        prop_assert!(exact.lo - fast.lo <= 1 && fast.hi - exact.hi <= 1, "fast {} exact {}", fast, exact);
    }
}

/// Durations between two events on one source clock contain the true difference of
/// their reference readings, in either order.
#[test]
fn durations_contain_the_truth() {
    for seed in 0..20 {
        let mut rng = Rng::new(500 + seed);
        let link = sim::random_link(&mut rng);
        let mut fz = FreeZer::new();
        for rt in link.run(SECOND, MILLISECOND, 500, &mut rng) {
            fz.observe(rt.x).unwrap();
        }
        for _ in 0..1000 {
            let t1 = t_in(&mut rng, 0, 3 * SECOND);
            let t2 = t_in(&mut rng, 0, 3 * SECOND);
            let (k1, r1) = link.event(t1);
            let (k2, r2) = link.event(t2);
            let d = fz.duration_between(k1, k2).unwrap();
            assert!(d.contains(r2 - r1), "seed {seed}: {d} misses {}", r2 - r1);
            // Never wider than the difference of two converted intervals (often much
            // tighter: it does not count the anchors' uncertainty twice).
            let naive = fz.to_reference(k1).unwrap().duration_to(&fz.to_reference(k2).unwrap());
            assert!(d.width() <= naive.width());
        }
    }
}

/// The width shrinks roughly as 1/elapsed: the frequency interval after 1 s, 10 s and
/// 100 s of probing at 1 kHz, and the converted width of one fixed event.
#[test]
fn width_shrinks_as_one_over_elapsed() {
    for seed in 0..5u64 {
        let mut rng = Rng::new(77 + seed);
        let link = sim::random_link(&mut rng);
        let rts = link.run(SECOND, MILLISECOND, 100_000, &mut rng);
        let mut fz = FreeZer::new();
        let (k, truth) = link.event(SECOND + SECOND / 2);
        let mut widths = vec![];
        let mut fixed = vec![];
        let mut marks = [SECOND, 10 * SECOND, 100 * SECOND].into_iter().peekable();
        for rt in &rts {
            fz.observe(rt.x).unwrap();
            if let Some(&m) = marks.peek() {
                if rt.t_e - rts[0].t_s >= m {
                    let (fl, fu) = fz.frequency_bounds();
                    widths.push(fu.to_f64() - fl.to_f64());
                    let iv = fz.to_reference(k).unwrap();
                    assert!(iv.contains(truth));
                    fixed.push(iv.width());
                    marks.next();
                }
            }
        }
        if marks.peek().is_some() {
            let (fl, fu) = fz.frequency_bounds();
            widths.push(fu.to_f64() - fl.to_f64());
            fixed.push(fz.to_reference(k).unwrap().width());
        }
        println!("seed {seed}: frequency width {widths:?}, fixed-event width {fixed:?}");
        for w in widths.windows(2) {
            let ratio = w[0] / w[1];
            assert!((3.0..=40.0).contains(&ratio), "seed {seed}: 10x longer probing shrank the width by {ratio:.2}x");
        }
        assert!(fixed.windows(2).all(|w| w[1] <= w[0]));
    }
}
