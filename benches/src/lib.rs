//! Benchmarks live in `benches/`; the measurement binaries in `src/bin/`.
//! This library holds what they share: the statistics of alternated runs,
//! and the engine scenarios with a known bottleneck ([`scenarios`]).

pub mod paced;
pub mod scenarios;

/// Summaries of repeated measurements on a noisy machine.
pub mod stats {
    /// The median of `v` (NaN when empty).
    pub fn median(v: &[f64]) -> f64 {
        let mut v = v.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        if n == 0 {
            return f64::NAN;
        }
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// A distribution-free confidence interval for the median of the
    /// population `v` was drawn from: `(lo, hi, coverage)`, the `k`-th
    /// smallest and `k`-th largest of `v` with `k` from [`median_ci_rank`].
    /// It assumes only independent draws (no normality), which suits run
    /// times with occasional slow outliers. `None` when `v` is too short for
    /// that confidence (fewer than 6 values for 95 %).
    pub fn median_ci(v: &[f64], confidence: f64) -> Option<(f64, f64, f64)> {
        let (k, coverage) = median_ci_rank(v.len(), confidence)?;
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        Some((s[k - 1], s[v.len() - k], coverage))
    }

    /// For `n` values: the largest `k` whose interval from the `k`-th
    /// smallest to the `k`-th largest holds the median with probability
    /// `1 - 2 P(Binomial(n, 1/2) < k)` of at least `confidence`, and that
    /// probability.
    pub fn median_ci_rank(n: usize, confidence: f64) -> Option<(usize, f64)> {
        // Binomial terms in logs: exact enough for any run count a harness
        // uses, without overflow.
        let log_half_n = -(n as f64) * std::f64::consts::LN_2;
        let mut log_choose = 0.0f64; // ln C(n, k - 1)
        let mut below = 0.0f64; // P(X < k)
        let mut best = None;
        for k in 1..=n / 2 {
            let j = k - 1;
            if j > 0 {
                log_choose += ((n - j + 1) as f64).ln() - (j as f64).ln();
            }
            below += (log_choose + log_half_n).exp();
            let coverage = 1.0 - 2.0 * below;
            if coverage < confidence {
                break;
            }
            best = Some((k, coverage));
        }
        best
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use proptest::prelude::*;

        #[test]
        fn known_intervals() {
            // n = 10: k = 2, coverage 1 - 2 * 11/1024.
            let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
            let (lo, hi, c) = median_ci(&v, 0.95).unwrap();
            assert_eq!((lo, hi), (2.0, 9.0));
            assert!((c - (1.0 - 22.0 / 1024.0)).abs() < 1e-12);
            // n = 20: k = 6, coverage 1 - 2 * 21700/2^20 (P(X <= 5)).
            let v: Vec<f64> = (1..=20).map(f64::from).collect();
            let (lo, hi, c) = median_ci(&v, 0.95).unwrap();
            assert_eq!((lo, hi), (6.0, 15.0));
            assert!((c - (1.0 - 2.0 * 21700.0 / 1048576.0)).abs() < 1e-12);
            // Five values cannot give 95 % (the widest has 1 - 2/32).
            assert!(median_ci(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95).is_none());
            assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
            assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
            assert!(median(&[]).is_nan());
        }

        /// Coverage with exact integers (C(n, j) fits in u128 for n <= 120).
        fn exact_coverage(n: usize, k: usize) -> f64 {
            let mut c: u128 = 1; // C(n, 0)
            let mut below: u128 = 0;
            for j in 0..k {
                below += c;
                c = c * (n - j) as u128 / (j + 1) as u128;
            }
            1.0 - 2.0 * below as f64 / 2f64.powi(n as i32)
        }

        #[test]
        fn rank_is_the_largest_with_enough_coverage() {
            for n in 1..=120 {
                for conf in [0.9, 0.95, 0.99] {
                    let got = median_ci_rank(n, conf);
                    let want = (1..=n / 2).filter(|&k| exact_coverage(n, k) >= conf).max();
                    assert_eq!(got.map(|g| g.0), want, "n = {n}, confidence {conf}");
                    if let Some((k, c)) = got {
                        assert!((c - exact_coverage(n, k)).abs() < 1e-9, "n = {n}");
                    }
                }
            }
        }

        proptest! {
            #[test]
            fn interval_holds_the_sample_median(v in prop::collection::vec(0.5f64..2.0, 6..200)) {
                let (lo, hi, c) = median_ci(&v, 0.95).unwrap();
                let m = median(&v);
                prop_assert!(lo <= m && m <= hi);
                prop_assert!((0.95..=1.0).contains(&c));
            }
        }
    }
}

/// The workspace's release binaries (`target/release`, or under
/// `CARGO_TARGET_DIR`), the workloads and the sidecar built first when
/// `build`: for the harnesses that run them as a user would.
pub fn release_bins(build: bool) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    if build {
        let ok = std::process::Command::new(env!("CARGO"))
            .args(["build", "--release", "--quiet", "-p", "examples", "-p", "sidecar", "--bins"])
            .current_dir(&root)
            .status()
            .expect("cargo build");
        assert!(ok.success(), "building the workloads and the sidecar failed");
    }
    std::env::var_os("CARGO_TARGET_DIR").map_or(root.join("target"), std::path::PathBuf::from).join("release")
}
