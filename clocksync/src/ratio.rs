//! Exact rationals of cycle counts and the integer arithmetic of the bound path.
//!
//! FreeZer's guarantee survives only if no rounding ever moves a bound inward
//! (freezer-notes §2.7: "Round `lo` with floor and `hi` with ceil. Never use f64 for the
//! bound path"). Everything here is integer arithmetic: frequency bounds are kept as exact
//! ratios of raw cycle differences, products are formed in 256 bits, and every rounding
//! step says which way it goes.

use core::cmp::Ordering;
use core::fmt;

/// An exact, non-negative rational `num / den` of cycle counts.
///
/// `den == 0` encodes `+∞` (the upper frequency bound before any measurement).
/// Comparison is exact (cross-multiplication in `u128`), never through floating point.
#[derive(Clone, Copy, Debug)]
pub struct Ratio {
    /// Numerator: cycles of the reference clock.
    pub num: u64,
    /// Denominator: cycles of the source clock (0 means infinity).
    pub den: u64,
}

impl Ratio {
    /// `0 / 1`: the trivial lower bound of a frequency ratio (clocks run forward).
    pub const ZERO: Ratio = Ratio { num: 0, den: 1 };
    /// `1 / 0`: the trivial upper bound, "nothing measured yet".
    pub const INFINITY: Ratio = Ratio { num: 1, den: 0 };

    /// A ratio `num / den`. `den == 0` means infinity.
    pub const fn new(num: u64, den: u64) -> Ratio {
        Ratio { num, den }
    }

    /// True for the `+∞` sentinel.
    pub fn is_infinite(&self) -> bool {
        self.den == 0
    }

    /// Approximate value, for display and reports only (never used for bounds).
    pub fn to_f64(&self) -> f64 {
        if self.den == 0 {
            f64::INFINITY
        } else {
            self.num as f64 / self.den as f64
        }
    }

    /// `floor(self · 2^64)`, saturating at `u128::MAX` for infinity.
    ///
    /// A 64.64 fixed-point multiplier rounded *down*: multiplying by it can only make a
    /// non-negative product smaller, which is the safe direction for a lower bound.
    pub fn fp_floor(&self) -> u128 {
        if self.den == 0 {
            return u128::MAX;
        }
        // num < 2^64, so num << 64 fits in u128 exactly.
        ((self.num as u128) << 64) / self.den as u128
    }

    /// `ceil(self · 2^64)`, saturating at `u128::MAX` for infinity.
    ///
    /// Rounded *up*: the safe direction for an upper bound.
    pub fn fp_ceil(&self) -> u128 {
        if self.den == 0 {
            return u128::MAX;
        }
        let n = (self.num as u128) << 64;
        let d = self.den as u128;
        let q = n / d;
        if q * d == n {
            q
        } else {
            q + 1
        }
    }

    /// `floor(x · self)` for `x < 2^64`, exactly (the reference path used by tests and
    /// by [`crate::FreeZer::to_reference_exact`]). `None` for infinity.
    pub fn mul_floor(&self, x: u128) -> Option<u128> {
        if self.den == 0 || x > u64::MAX as u128 {
            return None;
        }
        Some(x * self.num as u128 / self.den as u128)
    }

    /// `ceil(x · self)` for `x < 2^64`, exactly. `None` for infinity.
    pub fn mul_ceil(&self, x: u128) -> Option<u128> {
        if self.den == 0 || x > u64::MAX as u128 {
            return None;
        }
        let n = x * self.num as u128;
        let d = self.den as u128;
        let q = n / d;
        Some(if q * d == n { q } else { q + 1 })
    }
}

impl PartialEq for Ratio {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ratio {}

impl PartialOrd for Ratio {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ratio {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.den == 0, other.den == 0) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            // a/b vs c/d  <=>  a·d vs c·b; both products < 2^128.
            (false, false) => (self.num as u128 * other.den as u128).cmp(&(other.num as u128 * self.den as u128)),
        }
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.den == 0 {
            write!(f, "inf")
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

/// Full 128 × 128 → 256-bit product, as (high, low) halves.
#[inline]
pub(crate) fn mul_wide(a: u128, b: u128) -> (u128, u128) {
    let (a1, a0) = ((a >> 64) as u64 as u128, a as u64 as u128);
    let (b1, b0) = ((b >> 64) as u64 as u128, b as u64 as u128);
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // Middle column: the high half of p00 plus the low halves of p01 and p10 (< 3·2^64).
    let mid = (p00 >> 64) + (p01 as u64 as u128) + (p10 as u64 as u128);
    let lo = (p00 as u64 as u128) | (mid << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

/// `(floor(x · fp / 2^64), (x · fp) mod 2^64)`; `None` if the first does not fit in
/// `u128`. Two 64 × 64-bit products when `x < 2^64` (every distance between two readings).
#[inline]
fn mul_fp_parts(x: u128, fp: u128) -> Option<(u128, u64)> {
    if x >> 64 == 0 {
        let x = x as u64 as u128;
        let lo = x * (fp as u64 as u128);
        let hi = x * ((fp >> 64) as u64 as u128);
        return Some((hi.checked_add(lo >> 64)?, lo as u64));
    }
    let (hi, lo) = mul_wide(x, fp);
    if hi >> 64 != 0 {
        return None;
    }
    Some(((hi << 64) | (lo >> 64), lo as u64))
}

/// `floor(x · fp / 2^64)`: a magnitude times a 64.64 fixed-point multiplier, rounded down.
/// `None` if the result does not fit in `u128`.
#[inline]
pub fn mul_fp_floor(x: u128, fp: u128) -> Option<u128> {
    Some(mul_fp_parts(x, fp)?.0)
}

/// `ceil(x · fp / 2^64)`: as [`mul_fp_floor`], rounded up.
#[inline]
pub fn mul_fp_ceil(x: u128, fp: u128) -> Option<u128> {
    let (q, frac) = mul_fp_parts(x, fp)?;
    if frac != 0 {
        q.checked_add(1)
    } else {
        Some(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mul_ref(a: u128, b: u128) -> (u128, u128) {
        // Schoolbook on 32-bit limbs as an independent reference.
        let al: Vec<u64> = (0..4).map(|i| ((a >> (32 * i)) as u32) as u64).collect();
        let bl: Vec<u64> = (0..4).map(|i| ((b >> (32 * i)) as u32) as u64).collect();
        let mut r = [0u64; 9];
        for i in 0..4 {
            let mut carry = 0u64;
            for j in 0..4 {
                let t = al[i] * bl[j] + r[i + j] + carry;
                r[i + j] = t & 0xffff_ffff;
                carry = t >> 32;
            }
            r[i + 4] += carry;
        }
        let lo = (0..4).fold(0u128, |acc, i| acc | ((r[i] as u128) << (32 * i)));
        let hi = (0..4).fold(0u128, |acc, i| acc | ((r[i + 4] as u128) << (32 * i)));
        (hi, lo)
    }

    proptest! {
        #[test]
        fn wide_product_matches_reference(a in any::<u128>(), b in any::<u128>()) {
            prop_assert_eq!(mul_wide(a, b), mul_ref(a, b));
        }

        /// The two-product path for 64-bit distances agrees with the full 256-bit one.
        #[test]
        fn short_product_matches_wide(x in any::<u64>(), fp in any::<u128>()) {
            let (hi, lo) = mul_wide(x as u128, fp);
            let wide = (hi >> 64 == 0).then_some(((hi << 64) | (lo >> 64), lo as u64));
            prop_assert_eq!(mul_fp_parts(x as u128, fp), wide);
        }

        #[test]
        fn ratio_order_is_exact(a in 0u64..1<<40, b in 1u64..1<<40, c in 0u64..1<<40, d in 1u64..1<<40) {
            let x = Ratio::new(a, b);
            let y = Ratio::new(c, d);
            // Compare against an independent formulation: a·d - c·b in i128.
            let diff = a as i128 * d as i128 - c as i128 * b as i128;
            prop_assert_eq!(x.cmp(&y), diff.cmp(&0));
        }

        /// The fixed-point multipliers bracket the exact ratio, and products through them
        /// stay on the safe side of the exact product, off by at most one cycle for any
        /// 64-bit distance.
        #[test]
        fn fixed_point_rounds_outward(num in 1u64.., den in 1u64.., x in any::<u64>()) {
            let r = Ratio::new(num, den);
            let exact_lo = r.mul_floor(x as u128).unwrap();
            let exact_hi = r.mul_ceil(x as u128).unwrap();
            if let (Some(lo), Some(hi)) = (mul_fp_floor(x as u128, r.fp_floor()), mul_fp_ceil(x as u128, r.fp_ceil())) {
                prop_assert!(lo <= exact_lo && exact_lo - lo <= 1, "lo {lo} exact {exact_lo}");
                prop_assert!(hi >= exact_hi && hi - exact_hi <= 1, "hi {hi} exact {exact_hi}");
            }
        }
    }

    #[test]
    fn infinity_orders_above_everything() {
        assert!(Ratio::INFINITY > Ratio::new(u64::MAX, 1));
        assert!(Ratio::ZERO < Ratio::new(1, u64::MAX));
        assert_eq!(Ratio::new(2, 4), Ratio::new(1, 2));
    }
}
