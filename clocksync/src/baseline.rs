//! Point estimators the paper compares FreeZer against (FreeZer §2 Table 1, §3.4 Table 2;
//! freezer-notes §3): linear regression and Duda's convex hull, behind one trait together
//! with FreeZer's interval midpoint, so the three can be run on the same exchanges.
//!
//! These are baselines: they use floating point and give no guarantee. An exchange
//! `{s, r, e}` gives two points in (source, reference) coordinates: `(r, s)` from the ping
//! (the true line passes above it, the ping was sent before it arrived) and `(r, e)` from
//! the pong (the line passes below it).

use core::cell::Cell;

use crate::exchange::Exchange;
use crate::freezer::{Error, FreeZer};

/// A clock conversion that yields one point per timestamp.
pub trait Estimator {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Feed one exchange (in the order they were taken).
    fn observe(&mut self, x: Exchange) -> Result<(), Error>;
    /// Point estimate of the reference reading for source reading `k`, or `None` before
    /// there is enough data.
    fn to_reference(&self, k: u64) -> Option<i128>;
}

/// FreeZer seen as a point estimator: the midpoint of [`FreeZer::to_reference_tight`], as
/// the paper does for its fast-send comparison (FreeZer §3.4, "we use the interval
/// midpoints"). The midpoint has no guarantee; the interval does.
impl Estimator for FreeZer {
    fn name(&self) -> &'static str {
        "FreeZer (midpoint)"
    }
    fn observe(&mut self, x: Exchange) -> Result<(), Error> {
        FreeZer::observe(self, x)
    }
    fn to_reference(&self, k: u64) -> Option<i128> {
        self.to_reference_tight(k).ok().map(|iv| iv.midpoint())
    }
}

/// Ordinary least squares over all points of both directions (FreeZer §2, "Linear
/// Regression" after Duda 1987 and others). Online (Welford), O(1) per exchange.
#[derive(Clone, Debug, Default)]
pub struct LinearRegression {
    origin: Option<(u64, u64)>,
    n: f64,
    mean_x: f64,
    mean_y: f64,
    m2_x: f64,
    c_xy: f64,
}

impl LinearRegression {
    /// An empty fit.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&mut self, x: f64, y: f64) {
        self.n += 1.0;
        let dx = x - self.mean_x;
        self.mean_x += dx / self.n;
        self.mean_y += (y - self.mean_y) / self.n;
        self.m2_x += dx * (x - self.mean_x);
        self.c_xy += dx * (y - self.mean_y);
    }

    /// `(slope, intercept)` in coordinates centred on the first exchange.
    fn line(&self) -> Option<(f64, f64)> {
        if self.n < 2.0 || self.m2_x <= 0.0 {
            return None;
        }
        let a = self.c_xy / self.m2_x;
        Some((a, self.mean_y - a * self.mean_x))
    }
}

impl Estimator for LinearRegression {
    fn name(&self) -> &'static str {
        "linear regression"
    }
    fn observe(&mut self, x: Exchange) -> Result<(), Error> {
        // Centre on the first exchange: 17-digit readings do not survive f64 otherwise.
        let (x0, y0) = *self.origin.get_or_insert((x.r, x.s));
        let xr = (x.r as i128 - x0 as i128) as f64;
        self.add(xr, (x.s as i128 - y0 as i128) as f64);
        self.add(xr, (x.e as i128 - y0 as i128) as f64);
        Ok(())
    }
    fn to_reference(&self, k: u64) -> Option<i128> {
        let (x0, y0) = self.origin?;
        let (a, b) = self.line()?;
        Some(y0 as i128 + (b + a * (k as i128 - x0 as i128) as f64).round() as i128)
    }
}

/// Duda's convex-hull method (FreeZer §2: "split into two subsets based on the message
/// transmission direction ... the line passing through the middle of the corridor formed
/// by the convex hulls"). The corridor is bounded by the steepest and the flattest line
/// that separates the pings' points (below) from the pongs' points (above); the estimate
/// is their bisector. Where no separating line exists it falls back to linear regression
/// and counts it.
#[derive(Clone, Debug, Default)]
pub struct ConvexHull {
    origin: Option<(u64, u64)>,
    /// Upper hull of the ping points `(r, s)` (the line must stay above them).
    below: Vec<(i128, i128)>,
    /// Lower hull of the pong points `(r, e)` (the line must stay below them).
    above: Vec<(i128, i128)>,
    lr: LinearRegression,
    cache: Cell<Option<Option<(f64, f64)>>>,
    fallbacks: Cell<u64>,
}

/// A slope as an exact fraction `(dy, dx)`, `dx > 0`, with a point the line passes through.
type Slope = (i128, i128, (i128, i128));

fn cross(o: (i128, i128), a: (i128, i128), b: (i128, i128)) -> i128 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

impl ConvexHull {
    /// An empty fit.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many times a line was asked for while the hulls overlapped (no separating line:
    /// the linear-regression line was used instead).
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.get()
    }

    /// Hull sizes `(below, above)`, for reports.
    pub fn hull_sizes(&self) -> (usize, usize) {
        (self.below.len(), self.above.len())
    }

    /// Exact extreme slopes of separating lines, each with a point it passes through.
    fn corridor(&self) -> Option<(Slope, Slope)> {
        // Steepest: min over (l, u), u right of l, of slope(l, u). Flattest: max over
        // (u, l), u left of l. Slopes as exact fractions (dy, dx), dx > 0.
        let mut max_slope: Option<Slope> = None;
        let mut min_slope: Option<Slope> = None;
        for &l in &self.below {
            for &u in &self.above {
                let dx = u.0 - l.0;
                if dx > 0 {
                    let dy = u.1 - l.1;
                    if max_slope.is_none_or(|(ny, nx, _)| dy * nx < ny * dx) {
                        max_slope = Some((dy, dx, l));
                    }
                } else if dx < 0 {
                    let (dy, dx) = (l.1 - u.1, l.0 - u.0);
                    if min_slope.is_none_or(|(ny, nx, _)| dy * nx > ny * dx) {
                        min_slope = Some((dy, dx, l));
                    }
                }
            }
        }
        Some((max_slope?, min_slope?))
    }

    fn line(&self) -> Option<(f64, f64)> {
        if let Some(line) = self.cache.get() {
            return line;
        }
        let line = match self.corridor() {
            // Feasible corridor: steepest slope ≥ flattest slope.
            Some(((ay, ax, p), (by, bx, q))) if ay * bx >= by * ax => {
                let a1 = ay as f64 / ax as f64;
                let a2 = by as f64 / bx as f64;
                let b1 = p.1 as f64 - a1 * p.0 as f64;
                let b2 = q.1 as f64 - a2 * q.0 as f64;
                Some(((a1 + a2) / 2.0, (b1 + b2) / 2.0))
            }
            _ => {
                self.fallbacks.set(self.fallbacks.get() + 1);
                self.lr.line()
            }
        };
        self.cache.set(Some(line));
        line
    }
}

impl Estimator for ConvexHull {
    fn name(&self) -> &'static str {
        "convex hull"
    }
    fn observe(&mut self, x: Exchange) -> Result<(), Error> {
        self.lr.observe(x)?;
        let (x0, y0) = *self.origin.get_or_insert((x.r, x.s));
        let px = x.r as i128 - x0 as i128;
        let ping = (px, x.s as i128 - y0 as i128);
        let pong = (px, x.e as i128 - y0 as i128);
        // Monotone chain, appending in x order (exchanges arrive in time order).
        while self.below.len() >= 2
            && cross(self.below[self.below.len() - 2], self.below[self.below.len() - 1], ping) >= 0
        {
            self.below.pop();
        }
        if self.below.last().is_some_and(|p| p.0 == ping.0 && p.1 >= ping.1) {
            // Same x, lower point: not on the upper hull.
        } else {
            if self.below.last().is_some_and(|p| p.0 == ping.0) {
                self.below.pop();
            }
            self.below.push(ping);
        }
        while self.above.len() >= 2
            && cross(self.above[self.above.len() - 2], self.above[self.above.len() - 1], pong) <= 0
        {
            self.above.pop();
        }
        if self.above.last().is_some_and(|p| p.0 == pong.0 && p.1 <= pong.1) {
        } else {
            if self.above.last().is_some_and(|p| p.0 == pong.0) {
                self.above.pop();
            }
            self.above.push(pong);
        }
        self.cache.set(None);
        Ok(())
    }
    fn to_reference(&self, k: u64) -> Option<i128> {
        let (x0, y0) = self.origin?;
        let (a, b) = self.line()?;
        Some(y0 as i128 + (b + a * (k as i128 - x0 as i128) as f64).round() as i128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On noise-free symmetric data all three recover the line exactly.
    #[test]
    fn exact_on_symmetric_data() {
        // Reference = 3·source + 7, delay 5 source ticks each way.
        let mut lr = LinearRegression::new();
        let mut ch = ConvexHull::new();
        for i in 0..50u64 {
            let r = 1000 + 100 * i;
            let x = Exchange { s: 3 * (r - 5) + 7, r, e: 3 * (r + 5) + 7 };
            lr.observe(x).unwrap();
            ch.observe(x).unwrap();
        }
        for k in [0u64, 1000, 3000, 100_000] {
            assert_eq!(lr.to_reference(k), Some(3 * k as i128 + 7));
            assert_eq!(ch.to_reference(k), Some(3 * k as i128 + 7));
        }
        assert_eq!(ch.fallbacks(), 0);
    }

    /// With one-sided delays linear regression is biased by half the round trip, the
    /// corridor's middle too, while both bracket the truth between ping and pong.
    #[test]
    fn asymmetric_delay_biases_point_estimates() {
        let mut lr = LinearRegression::new();
        let mut ch = ConvexHull::new();
        for i in 0..50u64 {
            let r = 1000 + 100 * i;
            // Ping takes 0, pong takes 20: truth at r is s.
            let x = Exchange { s: r, r, e: r + 20 };
            lr.observe(x).unwrap();
            ch.observe(x).unwrap();
        }
        assert_eq!(lr.to_reference(3000), Some(3010));
        assert_eq!(ch.to_reference(3000), Some(3010));
    }
}
