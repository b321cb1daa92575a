//! Anchors: brackets at fixed source positions, spaced geometrically over the run, through
//! which the anchored conversion goes (the epoch's zero is the first).
//!
//! With one zero at the start of the epoch, an event at time `T` after it is converted
//! with the frequency uncertainty times `T`, and the zero itself carries every later
//! bracket back over the same distance: about `2·T·(F^U − F^L)` on top of the best
//! brackets, even with the frequency bounds as tight as the run's exchanges allow
//! (freezer-notes §2.6, "width ... grows linearly with distance from the zero").
//! Anchors keep that distance a fraction of the run: a new anchor is placed at the
//! newest exchange once it is [`GROWTH`] further from the zero than the newest anchor,
//! so an event is never more than about `1/8` of the run from an anchor before it.
//!
//! An anchor's position never moves and its bracket only shrinks, and anchors are only
//! added after all others. So the anchors around an event at or before the newest
//! exchange never change once the next anchor after it exists, and its interval never
//! widens; see [`crate::FreeZer::to_reference`] for the exact rule.

use crate::bracket::{Bracket, Slopes};
use crate::landmarks::Landmark;

/// Anchors kept at most: with geometric spacing this covers far more than any run (64
/// exchanges × (9/8)^255); past it, the newest anchor stays the newest.
pub(crate) const MAX_ANCHORS: usize = 256;

/// A new anchor when the newest exchange is `1 + 1/GROWTH` times as far from the zero as
/// the newest anchor.
pub(crate) const GROWTH: u64 = 8;

#[derive(Clone, Debug, Default)]
pub(crate) struct Anchors {
    /// Increasing positions; `list[0]` is the zero.
    list: Vec<Bracket>,
    /// `list[i].pos`, apart for a search that touches few cache lines.
    pos: Vec<u64>,
    /// Round robin over the anchors for re-tightening.
    turn: usize,
}

impl Anchors {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.list.len()
    }

    #[inline]
    pub fn zero(&self) -> Option<Bracket> {
        self.list.first().copied()
    }

    #[inline]
    pub fn newest(&self) -> Option<Bracket> {
        self.list.last().copied()
    }

    /// The first anchor (the zero).
    pub fn start(&mut self, zero: Bracket) {
        self.list.clear();
        self.list.push(zero);
        self.pos.clear();
        self.pos.push(zero.pos);
    }

    /// Whether the next anchor is due at source position `pos`.
    #[inline]
    pub fn due(&self, pos: u64) -> bool {
        let (Some(z), Some(n)) = (self.list.first(), self.list.last()) else { return false };
        if self.list.len() >= MAX_ANCHORS || pos <= n.pos {
            return false;
        }
        let far = (n.pos - z.pos) as u128;
        (pos - z.pos) as u128 > far + far / GROWTH as u128
    }

    /// Append an anchor after all others.
    pub fn push(&mut self, b: Bracket) {
        debug_assert!(self.list.last().is_none_or(|n| n.pos < b.pos));
        self.list.push(b);
        self.pos.push(b.pos);
    }

    /// Intersect the newest anchor with `b` carried to it. `None` on overflow; the
    /// result may be empty (a broken model).
    #[inline]
    pub fn tighten_newest(&mut self, sl: &Slopes, b: Bracket) -> Option<Bracket> {
        let n = self.list.last_mut()?;
        *n = n.intersect(sl.carry(b, n.pos)?);
        Some(*n)
    }

    /// Re-tighten the next anchor in turn with a landmark's best ends and its neighbours,
    /// all carried through the current bounds (which may have shrunk since the anchor was
    /// last visited). Returns the anchor (possibly empty: a broken model).
    #[inline]
    pub fn visit(&mut self, sl: &Slopes, mark: Option<Landmark>) -> Option<Bracket> {
        let len = self.list.len();
        if len == 0 {
            return None;
        }
        let j = if self.turn >= len { 0 } else { self.turn };
        self.turn = j + 1;
        let mut a = self.list[j];
        let p = a.pos as i128;
        if let Some(m) = mark {
            a.lo = a.lo.max(sl.lo_via(sl.bracket_of(&m.below)?, p)?);
            a.hi = a.hi.min(sl.hi_via(sl.bracket_of(&m.above)?, p - 1)?);
        }
        if j + 1 < len {
            a = a.intersect(sl.carry(self.list[j + 1], a.pos)?);
        }
        if j > 0 {
            a = a.intersect(sl.carry(self.list[j - 1], a.pos)?);
        }
        self.list[j] = a;
        Some(a)
    }

    /// How many anchors are at or before `x` (a binary search on the positions alone,
    /// which take few cache lines).
    #[inline]
    fn count_at_or_before(&self, x: i128) -> usize {
        if x < 0 {
            return 0;
        }
        let x = u64::try_from(x).unwrap_or(u64::MAX);
        self.pos.partition_point(|&p| p <= x)
    }

    /// The anchors at or just before and just after source position `x` (one of them if
    /// `x` is before the zero or after the newest).
    #[inline]
    pub fn around(&self, x: i128) -> &[Bracket] {
        let len = self.list.len();
        // Most events are recent: after the newest anchor.
        if len > 0 && self.list[len - 1].pos as i128 <= x {
            return &self.list[len - 1..];
        }
        let i = self.count_at_or_before(x);
        &self.list[i.saturating_sub(1)..(i + 1).min(len)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_finds_the_neighbours() {
        let mut a = Anchors::default();
        let b = |pos| Bracket { pos, lo: 0, hi: 0 };
        a.start(b(10));
        for p in [20, 30, 45, 70] {
            a.push(b(p));
        }
        let around = |x: i128| a.around(x).iter().map(|b| b.pos).collect::<Vec<_>>();
        assert_eq!(around(0), [10]);
        assert_eq!(around(10), [10, 20]);
        assert_eq!(around(29), [20, 30]);
        assert_eq!(around(30), [30, 45]);
        assert_eq!(around(69), [45, 70]);
        assert_eq!(around(70), [70]);
        assert_eq!(around(1000), [70]);
        for x in 0..100 {
            assert_eq!(a.count_at_or_before(x), a.list.partition_point(|b| b.pos as i128 <= x));
        }
    }
}
