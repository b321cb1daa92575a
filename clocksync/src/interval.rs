//! Intervals on the reference clock and the three-valued order between them.

use core::fmt;

/// A closed interval `[lo, hi]` of reference-clock ticks that contains the true time.
///
/// "True time" of an event is the reading the reference clock showed at the real instant
/// of the event. `lo`/`hi` are `i128` so that conversions far before a zero, or through
/// several hops, can never wrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interval {
    /// Lower bound, inclusive (rounded down).
    pub lo: i128,
    /// Upper bound, inclusive (rounded up).
    pub hi: i128,
}

/// The order of two events known only through intervals (freezer-notes §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    /// Certainly before: `self.hi < other.lo`.
    Before,
    /// Certainly after: `self.lo > other.hi`.
    After,
    /// The intervals overlap: either order is consistent with the measurements.
    Uncertain,
}

impl Interval {
    /// `[lo, hi]`.
    pub const fn new(lo: i128, hi: i128) -> Interval {
        Interval { lo, hi }
    }

    /// The degenerate interval of an exact reading (a timestamp already on the reference
    /// clock).
    pub const fn point(t: u64) -> Interval {
        Interval { lo: t as i128, hi: t as i128 }
    }

    /// `hi - lo`, in reference ticks.
    pub fn width(&self) -> u128 {
        (self.hi - self.lo).max(0) as u128
    }

    /// Whether `t` lies inside.
    pub fn contains(&self, t: i128) -> bool {
        self.lo <= t && t <= self.hi
    }

    /// Whether `other` lies entirely inside `self`.
    pub fn contains_interval(&self, other: &Interval) -> bool {
        self.lo <= other.lo && other.hi <= self.hi
    }

    /// The intersection, or `None` if it is empty. Two valid intervals for the same event
    /// always intersect; an empty intersection means one of them was not valid.
    #[inline]
    pub fn intersect(&self, other: &Interval) -> Option<Interval> {
        let lo = self.lo.max(other.lo);
        let hi = self.hi.min(other.hi);
        (lo <= hi).then_some(Interval { lo, hi })
    }

    /// Midpoint (rounded toward −∞). Only for comparisons with point estimators, as the
    /// paper's Table 2 does; the midpoint carries no guarantee.
    pub fn midpoint(&self) -> i128 {
        self.lo + (self.hi - self.lo).div_euclid(2)
    }

    /// `Before`, `After` or `Uncertain`.
    ///
    /// `Before` means every time consistent with `self` is strictly earlier than every
    /// time consistent with `other`, so the event of `self` happened first. `Uncertain`
    /// is not an error: the measurements cannot decide, and a causal edge (a send before
    /// its receive, program order on one clock) is the only thing that may decide it.
    pub fn order(&self, other: &Interval) -> Order {
        if self.hi < other.lo {
            Order::Before
        } else if self.lo > other.hi {
            Order::After
        } else {
            Order::Uncertain
        }
    }

    /// The possible durations from the event of `self` to the event of `other`, in
    /// reference ticks: `[other.lo - self.hi, other.hi - self.lo]`.
    ///
    /// For two events on the *same* source clock, prefer converting the raw tick
    /// difference with the frequency bounds: subtracting two converted intervals counts the
    /// zero's uncertainty twice (freezer-notes §4.1).
    pub fn duration_to(&self, other: &Interval) -> Interval {
        Interval { lo: other.lo - self.hi, hi: other.hi - self.lo }
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.lo, self.hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `Before`/`After` are sound: they never hold for two points that could be in the
        /// other order; and they are antisymmetric.
        #[test]
        fn order_is_sound(a in -1000i128..1000, wa in 0i128..50, b in -1000i128..1000, wb in 0i128..50,
                          ta in 0i128..50, tb in 0i128..50) {
            let x = Interval::new(a, a + wa);
            let y = Interval::new(b, b + wb);
            let (px, py) = (a + ta.min(wa), b + tb.min(wb));
            match x.order(&y) {
                Order::Before => { prop_assert!(px < py); prop_assert_eq!(y.order(&x), Order::After); }
                Order::After => { prop_assert!(px > py); prop_assert_eq!(y.order(&x), Order::Before); }
                Order::Uncertain => { prop_assert_eq!(y.order(&x), Order::Uncertain); prop_assert!(x.intersect(&y).is_some()); }
            }
        }
    }

    #[test]
    fn duration_bounds() {
        let a = Interval::new(10, 20);
        let b = Interval::new(30, 35);
        assert_eq!(a.duration_to(&b), Interval::new(10, 25));
        assert_eq!(a.order(&b), Order::Before);
        assert_eq!(Interval::new(10, 30).order(&b), Order::Uncertain);
        assert_eq!(Interval::new(-3, 0).midpoint(), -2);
    }
}
