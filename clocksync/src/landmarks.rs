//! The best exchanges of the whole run so far, in bounded memory: the run is cut into
//! stretches of equally many exchanges, and each stretch keeps its best exchange for each
//! use (freezer-notes §2.9 "keep an early, low-RTT anchor", generalized from one anchor
//! among the first exchanges to one per stretch of the whole run).
//!
//! At most [`MAX_LANDMARKS`] closed stretches and one open one are kept. When the closed
//! ones fill the table, neighbours are merged pairwise (keeping the better exchange of the
//! two for each use) and stretches become twice as long, so the table always covers the
//! whole run with between `MAX_LANDMARKS / 2` and `MAX_LANDMARKS` landmarks, the first one
//! always among the earliest exchanges of the epoch. Choosing which exchange to keep is
//! not on the bound path: any choice gives valid bounds, a better one tighter bounds.

use core::cmp::Ordering;

use crate::bracket::residual_cmp;
use crate::exchange::Exchange;

/// Closed stretches kept at most (memory: this many landmarks of two exchanges each).
pub(crate) const MAX_LANDMARKS: usize = 16;

/// The best exchanges of one stretch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Landmark {
    /// The exchange whose ping left closest to its arrival (the largest `s − F·r`): the
    /// earlier end of upper frequency bounds (its `s` is the tight side).
    pub below: Exchange,
    /// The exchange whose pong arrived closest to its departure (the smallest
    /// `e − F·r`): the earlier end of lower frequency bounds (its `e` is the tight side).
    pub above: Exchange,
}

impl Landmark {
    fn of(x: Exchange) -> Landmark {
        Landmark { below: x, above: x }
    }

    /// Keep the better of `self` and `other` for each use, judging with the slope `f_fp`
    /// (64.64 fixed point; `u128::MAX` when unknown).
    fn absorb(&mut self, other: &Landmark, f_fp: u128) {
        if residual_cmp(other.below.s as i128, other.below.r, self.below.s as i128, self.below.r, f_fp)
            .unwrap_or(other.below.rtt().cmp(&self.below.rtt()).reverse())
            == Ordering::Greater
        {
            self.below = other.below;
        }
        if residual_cmp(other.above.e as i128, other.above.r, self.above.e as i128, self.above.r, f_fp)
            .unwrap_or(other.above.rtt().cmp(&self.above.rtt()))
            == Ordering::Less
        {
            self.above = other.above;
        }
    }
}

/// The landmarks of one calibration epoch.
#[derive(Clone, Debug)]
pub(crate) struct Landmarks {
    /// `marks[..closed]`, oldest first.
    marks: [Landmark; MAX_LANDMARKS],
    closed: usize,
    open: Option<Landmark>,
    /// Exchanges in the open stretch.
    open_n: u64,
    /// Exchanges per stretch.
    span: u64,
    /// The landmark carried to the zero next (round robin over the closed landmarks and
    /// the open one).
    next: usize,
}

impl Landmarks {
    /// Stretches of `span` exchanges to start with.
    pub fn new(span: u64) -> Landmarks {
        let none = Landmark::of(Exchange { s: 0, r: 0, e: 0 });
        Landmarks { marks: [none; MAX_LANDMARKS], closed: 0, open: None, open_n: 0, span: span.max(1), next: 0 }
    }

    /// Every landmark, oldest first, the open stretch last.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = &Landmark> {
        self.marks[..self.closed].iter().chain(self.open.iter())
    }

    /// The next landmark in turn.
    #[inline]
    pub fn next(&mut self) -> Option<Landmark> {
        let i = self.next;
        self.next = if i >= self.closed { 0 } else { i + 1 };
        if i < self.closed {
            Some(self.marks[i])
        } else {
            self.open
        }
    }

    /// Add the newest exchange to the open stretch (closing it, and merging, when full).
    /// `f_fp`: the current upper frequency bound as a 64.64 multiplier, to judge delays.
    #[inline]
    pub fn add(&mut self, q: Exchange, f_fp: u128) {
        match &mut self.open {
            Some(m) => m.absorb(&Landmark::of(q), f_fp),
            None => self.open = Some(Landmark::of(q)),
        }
        self.open_n += 1;
        if self.open_n >= self.span {
            self.close(f_fp);
        }
    }

    #[cold]
    fn close(&mut self, f_fp: u128) {
        let Some(m) = self.open.take() else { return };
        self.open_n = 0;
        self.marks[self.closed] = m;
        self.closed += 1;
        if self.closed == MAX_LANDMARKS {
            for i in 0..MAX_LANDMARKS / 2 {
                let mut a = self.marks[2 * i];
                a.absorb(&self.marks[2 * i + 1], f_fp);
                self.marks[i] = a;
            }
            self.closed = MAX_LANDMARKS / 2;
            self.span = self.span.saturating_mul(2);
        }
        self.next = self.next.min(self.closed);
    }

    /// Landmarks currently kept (closed and open).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.closed + self.open.is_some() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table stays bounded, covers the run, and keeps the best exchanges of the first
    /// stretch forever (merged into the first landmark), each side judged apart.
    #[test]
    fn bounded_and_keeps_the_early_best() {
        let mut l = Landmarks::new(4);
        let one = 1u128 << 64;
        for i in 0..10_000u64 {
            // Source = reference; 5 ticks each way, except exchange 2's ping (0 ticks) and
            // exchange 3's pong (0 ticks).
            let t = 100 * i + 1000;
            let (fwd, back) = match i {
                2 => (0, 5),
                3 => (5, 0),
                _ => (5, 5),
            };
            l.add(Exchange { s: t - fwd, r: t, e: t + back }, one);
            assert!(l.len() <= MAX_LANDMARKS + 1);
        }
        assert!(l.closed >= MAX_LANDMARKS / 2);
        let first = *l.iter().next().unwrap();
        assert_eq!(first.below.r, 1200);
        assert_eq!(first.above.r, 1300);
        // Round robin visits every landmark.
        let n = l.len();
        let seen: Vec<_> = (0..n).map(|_| l.next().unwrap()).collect();
        assert!(seen.contains(&first));
    }
}
