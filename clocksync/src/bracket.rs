//! The arithmetic both converters share: brackets of the reference clock at exact source
//! positions, the bounds one pair of exchanges gives on the frequency, and moving a bracket
//! or converting through it with outward-rounded frequency bounds (freezer-notes §2.4,
//! §2.6, §2.7, §2.9).

use core::cmp::Ordering;

use crate::exchange::Exchange;
use crate::interval::Interval;
use crate::ratio::{mul_fp_ceil, mul_fp_floor, Ratio};

/// `c_R ∈ [lo, hi]` at the real instant when the continuous source clock equals `pos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bracket {
    pub pos: u64,
    pub lo: i128,
    pub hi: i128,
}

impl Bracket {
    /// Both brackets must be at the same position.
    #[inline]
    pub fn intersect(self, b: Bracket) -> Bracket {
        debug_assert_eq!(self.pos, b.pos);
        Bracket { pos: self.pos, lo: self.lo.max(b.lo), hi: self.hi.min(b.hi) }
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.lo > self.hi
    }
}

/// The upper bound one pair gives, `p` before `q` on the source clock: the reference
/// interval from `p`'s ping to `q`'s pong contains the source interval between the two
/// readings (FreeZer §3.3 "a larger interval on the first clock"; freezer-notes §2.4):
/// `F ≤ (e_q + 1 − s_p) / (r_q − r_p − 1)`, one tick of slack per reading (a reading is a
/// floor). `None` when the pair says nothing (too close, or not in that order).
#[inline]
pub(crate) fn upper_bound(p: &Exchange, q: &Exchange) -> Option<Ratio> {
    let num = q.e as i128 + 1 - p.s as i128;
    let den = q.r as i128 - p.r as i128 - 1;
    ratio(num, den)
}

/// The lower bound one pair gives, `p` before `q`: the reference interval from `p`'s pong
/// to `q`'s ping lies inside the source interval between the readings:
/// `F ≥ (s_q − e_p − 1) / (r_q − r_p + 1)`.
#[inline]
pub(crate) fn lower_bound(p: &Exchange, q: &Exchange) -> Option<Ratio> {
    let num = q.s as i128 - p.e as i128 - 1;
    let den = q.r as i128 - p.r as i128 + 1;
    ratio(num, den)
}

#[inline]
pub(crate) fn ratio(num: i128, den: i128) -> Option<Ratio> {
    if num <= 0 || den <= 0 {
        return None;
    }
    Some(Ratio::new(u64::try_from(num).ok()?, u64::try_from(den).ok()?))
}

/// Frequency bounds `F^L ≤ F ≤ F^U`, exact, and as outward-rounded 64.64 multipliers
/// (`floor(F^L · 2^64)`, `ceil(F^U · 2^64)`) so that a conversion needs no division; the
/// two paths differ by at most one tick, outward.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slopes {
    pub fl: Ratio,
    pub fu: Ratio,
    pub fl_fp: u128,
    pub fu_fp: u128,
}

impl Slopes {
    /// Nothing measured: `[0, ∞)`.
    pub const UNKNOWN: Slopes = Slopes { fl: Ratio::ZERO, fu: Ratio::INFINITY, fl_fp: 0, fu_fp: u128::MAX };

    pub fn new(fl: Ratio, fu: Ratio) -> Slopes {
        Slopes { fl, fu, fl_fp: fl.fp_floor(), fu_fp: fu.fp_ceil() }
    }

    /// Replace the bounds, recomputing a multiplier only where its bound changed (a
    /// 128-bit division each).
    #[inline]
    pub fn set(&mut self, fl: Ratio, fu: Ratio) {
        if fl != self.fl {
            self.fl = fl;
            self.fl_fp = fl.fp_floor();
        }
        if fu != self.fu {
            self.fu = fu;
            self.fu_fp = fu.fp_ceil();
        }
    }

    /// The bracket of one exchange at the exact source position `r`: the instant the
    /// source read exactly `r` is at most one source tick before `t_r`, so
    /// `c_R ∈ [s − F^U, e + 1]` there.
    #[inline(always)]
    pub fn bracket_of(&self, x: &Exchange) -> Option<Bracket> {
        let back = i128::try_from(mul_fp_ceil(1, self.fu_fp)?).ok()?;
        Some(Bracket { pos: x.r, lo: x.s as i128 - back, hi: x.e as i128 + 1 })
    }

    /// Move bracket `b` to source position `pos`:
    /// `c_R(pos) = c_R(b.pos) + F · (pos − b.pos)`, `F ∈ [F^L, F^U]`, rounded outward.
    #[inline(always)]
    pub fn carry(&self, b: Bracket, pos: u64) -> Option<Bracket> {
        Some(Bracket { pos, lo: self.lo_via(b, pos as i128)?, hi: self.hi_via(b, pos as i128 - 1)? })
    }

    /// The least reference reading possible when the continuous source value is `a`,
    /// through bracket `z`.
    #[inline(always)]
    pub fn lo_via(&self, z: Bracket, a: i128) -> Option<i128> {
        let d = a - z.pos as i128;
        if d >= 0 {
            z.lo.checked_add(i128::try_from(mul_fp_floor(d as u128, self.fl_fp)?).ok()?)
        } else {
            z.lo.checked_sub(i128::try_from(mul_fp_ceil(d.unsigned_abs(), self.fu_fp)?).ok()?)
        }
    }

    /// The greatest reference reading possible when the source *reading* is `b` (its
    /// continuous value below `b + 1`), through bracket `z`.
    #[inline(always)]
    pub fn hi_via(&self, z: Bracket, b: i128) -> Option<i128> {
        let d = b.checked_add(1)? - z.pos as i128;
        if d >= 0 {
            z.hi.checked_add(i128::try_from(mul_fp_ceil(d as u128, self.fu_fp)?).ok()?)
        } else {
            z.hi.checked_sub(i128::try_from(mul_fp_floor(d.unsigned_abs(), self.fl_fp)?).ok()?)
        }
    }

    /// Convert the source interval `[a, b]` (true reading in `[a, b]`, so the continuous
    /// value in `[a, b + 1)`) through bracket `z`.
    #[inline]
    pub fn convert_via(&self, z: Bracket, a: i128, b: i128) -> Option<Interval> {
        Some(Interval { lo: self.lo_via(z, a)?, hi: self.hi_via(z, b)? })
    }
}

/// Compare `ya − F·pa` with `yb − F·pb` for `F = f_fp / 2^64`, rounded: for choosing which
/// exchange or bracket to keep (the one whose end lies furthest on one side of a line of
/// slope `F`), never for a bound. `None` if `F` is unknown or the product overflows.
#[inline]
pub(crate) fn residual_cmp(ya: i128, pa: u64, yb: i128, pb: u64, f_fp: u128) -> Option<Ordering> {
    if f_fp == u128::MAX {
        return None;
    }
    let dy = ya.checked_sub(yb)?;
    let dp = pa as i128 - pb as i128;
    let fdp = i128::try_from(mul_fp_floor(dp.unsigned_abs(), f_fp)?).ok()?;
    Some(if dp >= 0 { dy.cmp(&fdp) } else { dy.checked_add(fdp)?.cmp(&0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_comparison() {
        let one = 1u128 << 64;
        // y − p: 10 − 5 = 5 vs 20 − 16 = 4.
        assert_eq!(residual_cmp(10, 5, 20, 16, one), Some(Ordering::Greater));
        assert_eq!(residual_cmp(20, 16, 10, 5, one), Some(Ordering::Less));
        assert_eq!(residual_cmp(20, 15, 10, 5, one), Some(Ordering::Equal));
        assert_eq!(residual_cmp(20, 15, 10, 5, u128::MAX), None);
        // Slope 2: 30 − 2·10 = 10 vs 5 − 2·0 = 5.
        assert_eq!(residual_cmp(30, 10, 5, 0, 2 * one), Some(Ordering::Greater));
    }
}
