//! FreeZer: bounded frequency and zero, conversion of a timestamp into an interval that is
//! guaranteed to contain the true time (Benavides, Vora, Gupta, OOPSLA 2019, §3–§4;
//! the missing algorithm bodies are reconstructed in freezer-notes §2.4–§2.10).
//!
//! # Model
//!
//! Two clocks, a *reference* R and a *source* S, both counting up at constant (unknown)
//! rates: `c_R(t) = F · c_S(t) + C` for a constant `F = fr(R)/fr(S) > 0` (FreeZer §2,
//! Eq. 2; freezer-notes §0.3). A reading is the integer part of the continuous clock
//! value. Nothing is assumed about message delays except causality: a message is received
//! after it is sent (FreeZer §3.4; freezer-notes §0.4). Delays may be zero, asymmetric,
//! heavy-tailed.
//!
//! An [`Exchange`] `{s, r, e}` is one ping-pong: `s` and `e` read on R before the ping
//! leaves and after the pong arrives, `r` read on S in between. Causality gives
//! `c_R(t_r) ∈ [s, e + 1)` and `c_S(t_r) ∈ [r, r + 1)`.
//!
//! # What is kept (all O(1), freezer-notes §2.9)
//!
//! * Frequency bounds `F^L ≤ F ≤ F^U` as exact [`Ratio`]s of cycle counts. Every pair of
//!   causally ordered brackets yields an upper bound (outer interval on R over inner on S)
//!   and a lower bound (inner over outer) (FreeZer §3.3; freezer-notes §2.4). They are
//!   intersected with the previous bounds, so they only tighten.
//! * An *anchor*: the exchange with the smallest round trip among the first few of the
//!   epoch, paired with every later exchange for the frequency (freezer-notes §2.9 "keep an
//!   early, low-RTT anchor").
//! * The *zero*: a bracket `c_R ∈ [lo, hi]` at a fixed position of S (the epoch's first
//!   exchange), tightened by carrying every later bracket back to it through the frequency
//!   bounds and intersecting (freezer-notes §2.9 "carry an old bracket ... and intersect").
//!   Its position never moves, which is what makes every anchored interval only ever
//!   shrink.
//! * A *recent* bracket at the latest exchange: the newest bracket intersected with the
//!   previous recent one and the zero, both carried forward. It gives tight intervals for
//!   events near "now" (see [`FreeZer::to_reference_tight`]).
//!
//! # Conversion (freezer-notes §2.6, corrected form)
//!
//! For a bracket `[Z^L, Z^U]` at source position `z` and an event read as `k` on S (so its
//! continuous source value lies in `[k, k + 1)`):
//!
//! ```text
//! Δ = k − z:        lo = Z^L + floor(Δ·F^L)  if Δ ≥ 0,   Z^L − ceil(|Δ|·F^U)  if Δ < 0
//! Δ' = k + 1 − z:   hi = Z^U + ceil(Δ'·F^U)  if Δ' ≥ 0,  Z^U − floor(|Δ'|·F^L) if Δ' < 0
//! ```
//!
//! The bounds swap before the zero because multiplying an interval by a negative number
//! swaps its ends; the paper's formula (FreeZer §4.3) only shows the `Δ ≥ 0` case.

use core::fmt;

use crate::interval::Interval;
use crate::ratio::{mul_fp_ceil, mul_fp_floor, Ratio};

/// One ping-pong between the reference (prober) and the source (responder).
///
/// `s` and `e` are read on the reference clock, `r` on the source clock, and in real time
/// `s ≤ r ≤ e` (the ping is sent after `s`, `r` is read when it arrives, the pong arrives
/// before `e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Exchange {
    /// Reference clock, read just before the ping is sent.
    pub s: u64,
    /// Source clock, read when the ping is received.
    pub r: u64,
    /// Reference clock, read just after the pong is received.
    pub e: u64,
}

impl Exchange {
    /// Round trip in reference ticks (`e − s`), the width of this exchange's zero bracket.
    pub fn rtt(&self) -> u64 {
        self.e.saturating_sub(self.s)
    }
}

/// Why the clock model was found broken. See [`Error::ClockModel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The intersection of the frequency bounds became empty: `F^L > F^U`.
    FrequencyBoundsCrossed {
        /// The lower bound that now exceeds the upper one.
        lower: Ratio,
        /// The upper bound.
        upper: Ratio,
    },
    /// The intersection of the brackets for the zero (or for the recent exchange) became
    /// empty: no single line through all exchanges exists any more.
    ZeroEmpty {
        /// Lower end of the (empty) intersection.
        lo: i128,
        /// Upper end of the (empty) intersection.
        hi: i128,
    },
    /// An exchange that began after the previous one ended read an earlier source time.
    SourceWentBackwards {
        /// `r` of the previous exchange.
        previous: u64,
        /// `r` of this exchange.
        now: u64,
    },
    /// An exchange started before the previous one on the reference clock (the reference
    /// clock stepped back, or exchanges were fed out of order).
    ReferenceWentBackwards {
        /// `s` of the previous exchange.
        previous: u64,
        /// `s` of this exchange.
        now: u64,
    },
}

/// Errors of [`FreeZer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Not enough exchanges yet for a finite upper frequency bound (at least two, a few
    /// source ticks apart).
    NotCalibrated {
        /// Exchanges observed in this epoch so far.
        exchanges: u64,
    },
    /// An exchange with `e < s`: not something a monotone reference clock can produce.
    /// The exchange is ignored and the state is unchanged.
    InvalidExchange(Exchange),
    /// The measurements contradict the constant-rate linear clock model. Typical causes: a
    /// TSC reset or write, a VM migration, a non-invariant TSC, a clock stepped by NTP.
    /// Every later call fails with this error until [`FreeZer::new_epoch`].
    ClockModel {
        /// The calibration epoch whose model broke.
        epoch: u32,
        /// What was inconsistent.
        violation: Violation,
    },
    /// A conversion that does not fit in 128 bits (distances beyond any real clock).
    Overflow,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::FrequencyBoundsCrossed { lower, upper } => write!(
                f,
                "frequency bounds crossed (F^L = {lower} ≈ {:.9} > F^U = {upper} ≈ {:.9})",
                lower.to_f64(),
                upper.to_f64()
            ),
            Violation::ZeroEmpty { lo, hi } => {
                write!(f, "no offset is consistent with all exchanges (bracket [{lo}, {hi}] is empty)")
            }
            Violation::SourceWentBackwards { previous, now } => {
                write!(f, "source clock went backwards ({previous} then {now})")
            }
            Violation::ReferenceWentBackwards { previous, now } => {
                write!(f, "reference clock went backwards or exchanges arrived out of order ({previous} then {now})")
            }
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotCalibrated { exchanges } => {
                write!(f, "not calibrated yet: {exchanges} exchange(s) in this epoch, need two a few ticks apart")
            }
            Error::InvalidExchange(x) => write!(f, "invalid exchange {x:?}: e < s on the reference clock"),
            Error::ClockModel { epoch, violation } => write!(
                f,
                "clock model broken in calibration epoch {epoch}: {violation}. The clocks no longer \
                 follow one constant-rate relation (TSC reset, VM migration, non-invariant TSC, \
                 stepped clock); start a new calibration epoch (FreeZer::new_epoch)"
            ),
            Error::Overflow => write!(f, "conversion overflows 128 bits"),
        }
    }
}

impl std::error::Error for Error {}

/// `c_R ∈ [lo, hi]` at the real instant when the continuous source clock equals `pos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bracket {
    pos: u64,
    lo: i128,
    hi: i128,
}

/// Default number of exchanges at the start of an epoch among which the anchor (the one
/// with the smallest round trip) is chosen.
pub const DEFAULT_WARMUP: u64 = 64;

/// Bounded clock conversion from one source clock to one reference clock.
///
/// ```
/// use clocksync::{Exchange, FreeZer, Order};
/// // Reference at 2 GHz, source at 1 GHz, offset 10_000 ticks; 1 µs each way.
/// let src = |t_ns: u64| 10_000 + t_ns;          // source reading at real time t
/// let rf = |t_ns: u64| 2 * t_ns;                // reference reading
/// let mut fz = FreeZer::new();
/// for i in 0..100u64 {
///     let t = i * 1_000_000;                    // one exchange per ms
///     fz.observe(Exchange { s: rf(t), r: src(t + 1_000), e: rf(t + 2_000) }).unwrap();
/// }
/// let k = src(50_000_500);                      // an event on the source clock
/// let iv = fz.to_reference(k).unwrap();
/// assert!(iv.contains(rf(50_000_500) as i128));
/// let (lo, hi) = fz.frequency_bounds();         // exact rationals around 2/1
/// assert!(lo.to_f64() <= 2.0 && 2.0 <= hi.to_f64());
/// assert_eq!(iv.order(&clocksync::Interval::point(rf(60_000_000))), Order::Before);
/// ```
#[derive(Clone, Debug)]
pub struct FreeZer {
    epoch: u32,
    warmup: u64,
    /// Exchanges accepted in this epoch.
    n: u64,
    last: Option<Exchange>,
    /// The epoch's first exchange: the zero is placed at its source reading.
    first: Option<Exchange>,
    anchor: Option<Exchange>,
    fl: Ratio,
    fu: Ratio,
    /// `floor(F^L · 2^64)` and `ceil(F^U · 2^64)`: outward-rounded 64.64 multipliers so
    /// a conversion needs no division (see [`FreeZer::to_reference_exact`] for the path
    /// through the exact ratios; the two differ by at most one tick, outward).
    fl_fp: u128,
    fu_fp: u128,
    zero: Option<Bracket>,
    recent: Option<Bracket>,
    broken: Option<Violation>,
}

impl Default for FreeZer {
    fn default() -> Self {
        Self::new()
    }
}

impl FreeZer {
    /// An uncalibrated converter (epoch 0).
    pub fn new() -> FreeZer {
        FreeZer::with_warmup(DEFAULT_WARMUP)
    }

    /// As [`FreeZer::new`], choosing the anchor among the first `warmup` exchanges.
    pub fn with_warmup(warmup: u64) -> FreeZer {
        FreeZer {
            epoch: 0,
            warmup: warmup.max(1),
            n: 0,
            last: None,
            first: None,
            anchor: None,
            fl: Ratio::ZERO,
            fu: Ratio::INFINITY,
            fl_fp: 0,
            fu_fp: u128::MAX,
            zero: None,
            recent: None,
            broken: None,
        }
    }

    /// Forget everything and start calibration epoch `epoch + 1`. Call this after
    /// [`Error::ClockModel`]; intervals from the old epoch must not be mixed with the new.
    pub fn new_epoch(&mut self) -> u32 {
        let epoch = self.epoch + 1;
        *self = FreeZer { epoch, ..FreeZer::with_warmup(self.warmup) };
        epoch
    }

    /// The current calibration epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Exchanges accepted in this epoch.
    pub fn exchanges(&self) -> u64 {
        self.n
    }

    /// True once intervals can be handed out.
    pub fn is_calibrated(&self) -> bool {
        self.zero.is_some() && self.broken.is_none()
    }

    /// The detected violation, if the model of this epoch is broken.
    pub fn violation(&self) -> Option<Violation> {
        self.broken
    }

    /// `(F^L, F^U)`: exact bounds on `F = fr(reference)/fr(source)`, the number of
    /// reference ticks per source tick. Before calibration: `(0, ∞)`.
    pub fn frequency_bounds(&self) -> (Ratio, Ratio) {
        (self.fl, self.fu)
    }

    /// The zero: a source position and the interval of reference ticks that the
    /// reference clock read at that instant.
    pub fn zero(&self) -> Option<(u64, Interval)> {
        self.zero.map(|z| (z.pos, Interval::new(z.lo, z.hi)))
    }

    /// The bracket at the most recent exchange (see [`FreeZer::zero`]).
    pub fn recent(&self) -> Option<(u64, Interval)> {
        self.recent.map(|z| (z.pos, Interval::new(z.lo, z.hi)))
    }

    fn fail(&mut self, violation: Violation) -> Error {
        self.broken = Some(violation);
        Error::ClockModel { epoch: self.epoch, violation }
    }

    /// Feed one exchange. O(1); bounds only tighten (intersection).
    ///
    /// Exchanges must be fed in the order they were taken. Returns
    /// [`Error::ClockModel`] when the exchange contradicts the previous ones.
    pub fn observe(&mut self, q: Exchange) -> Result<(), Error> {
        if let Some(violation) = self.broken {
            return Err(Error::ClockModel { epoch: self.epoch, violation });
        }
        if q.e < q.s {
            return Err(Error::InvalidExchange(q));
        }
        if let Some(last) = self.last {
            if q.s < last.s {
                return Err(self.fail(Violation::ReferenceWentBackwards { previous: last.s, now: q.s }));
            }
            // q began after `last` ended, so it happened later in real time and the source
            // clock must not read less.
            if q.s > last.e && q.r < last.r {
                return Err(self.fail(Violation::SourceWentBackwards { previous: last.r, now: q.r }));
            }
        }
        self.last = Some(q);
        self.n += 1;
        let Some(anchor) = self.anchor else {
            self.anchor = Some(q);
            self.first = Some(q);
            return Ok(());
        };

        // Frequency from two raw exchanges (freezer-notes §2.4, compact form), with one
        // tick of slack on each source reading because a reading is a floor.
        let (old_fl, old_fu) = (self.fl, self.fu);
        if q.r > anchor.r {
            let dr = (q.r - anchor.r) as i128;
            self.tighten_upper(q.e as i128 + 1 - anchor.s as i128, dr - 1);
            self.tighten_lower(q.s as i128 - anchor.e as i128 - 1, dr + 1);
        }
        // Frequency from the zero bracket (exact position) and q: the zero is at least as
        // tight as any single early exchange once it has absorbed a few of them.
        if let Some(z) = self.zero {
            if q.r > z.pos {
                let dr = (q.r - z.pos) as i128;
                self.tighten_upper(q.e as i128 + 1 - z.lo, dr);
                self.tighten_lower(q.s as i128 - z.hi, dr + 1);
            }
        }
        if self.fl > self.fu {
            let (lower, upper) = (self.fl, self.fu);
            return Err(self.fail(Violation::FrequencyBoundsCrossed { lower, upper }));
        }
        if self.fl != old_fl {
            self.fl_fp = self.fl.fp_floor();
        }
        if self.fu != old_fu {
            self.fu_fp = self.fu.fp_ceil();
        }

        if self.fu.is_infinite() {
            // No upper bound yet (q too close to the anchor): nothing can be converted.
            self.pick_anchor(q, anchor);
            return Ok(());
        }
        let bq = self.bracket_of(q).ok_or(Error::Overflow)?;
        let ba = self.bracket_of(anchor).ok_or(Error::Overflow)?;
        let z = match self.zero {
            Some(z) => z,
            None => self.bracket_of(self.first.expect("first is set with the anchor")).ok_or(Error::Overflow)?,
        };
        // Tighten the zero at its fixed position with q and the anchor carried back
        // (freezer-notes §2.9). Position fixed => anchored conversions never widen.
        let z = intersect(z, self.carry(bq, z.pos).ok_or(Error::Overflow)?);
        let z = intersect(z, self.carry(ba, z.pos).ok_or(Error::Overflow)?);
        if z.lo > z.hi {
            return Err(self.fail(Violation::ZeroEmpty { lo: z.lo, hi: z.hi }));
        }
        self.zero = Some(z);
        // The recent bracket moves to q: q's own bracket, intersected with the old recent
        // bracket and the zero carried forward.
        let mut rb = intersect(bq, self.carry(z, bq.pos).ok_or(Error::Overflow)?);
        if let Some(old) = self.recent {
            rb = intersect(rb, self.carry(old, bq.pos).ok_or(Error::Overflow)?);
        }
        if rb.lo > rb.hi {
            return Err(self.fail(Violation::ZeroEmpty { lo: rb.lo, hi: rb.hi }));
        }
        self.recent = Some(rb);
        self.pick_anchor(q, anchor);
        Ok(())
    }

    fn pick_anchor(&mut self, q: Exchange, anchor: Exchange) {
        if self.n <= self.warmup && q.rtt() < anchor.rtt() {
            self.anchor = Some(q);
        }
    }

    /// `F < num/den` (strictly, from open intervals; kept as ≤).
    fn tighten_upper(&mut self, num: i128, den: i128) {
        if den <= 0 || num <= 0 {
            return;
        }
        if let (Ok(n), Ok(d)) = (u64::try_from(num), u64::try_from(den)) {
            let r = Ratio::new(n, d);
            if r < self.fu {
                self.fu = r;
            }
        }
    }

    fn tighten_lower(&mut self, num: i128, den: i128) {
        if den <= 0 || num <= 0 {
            return;
        }
        if let (Ok(n), Ok(d)) = (u64::try_from(num), u64::try_from(den)) {
            let r = Ratio::new(n, d);
            if r > self.fl {
                self.fl = r;
            }
        }
    }

    /// The bracket of one exchange at the exact source position `r`: the instant the
    /// source read exactly `r` is at most one source tick before `t_r`, so
    /// `c_R ∈ [s − F^U, e + 1]` there.
    fn bracket_of(&self, x: Exchange) -> Option<Bracket> {
        let back = mul_fp_ceil(1, self.fu_fp)? as i128;
        Some(Bracket { pos: x.r, lo: x.s as i128 - back, hi: x.e as i128 + 1 })
    }

    /// Move bracket `b` to source position `pos` through the frequency bounds:
    /// `c_R(pos) = c_R(b.pos) + F · (pos − b.pos)`, `F ∈ [F^L, F^U]`, rounded outward.
    #[inline]
    fn carry(&self, b: Bracket, pos: u64) -> Option<Bracket> {
        let d = pos as i128 - b.pos as i128;
        let (lo, hi) = if d >= 0 {
            let d = d as u128;
            (
                b.lo.checked_add(i128::try_from(mul_fp_floor(d, self.fl_fp)?).ok()?)?,
                b.hi.checked_add(i128::try_from(mul_fp_ceil(d, self.fu_fp)?).ok()?)?,
            )
        } else {
            let d = d.unsigned_abs();
            (
                b.lo.checked_sub(i128::try_from(mul_fp_ceil(d, self.fu_fp)?).ok()?)?,
                b.hi.checked_sub(i128::try_from(mul_fp_floor(d, self.fl_fp)?).ok()?)?,
            )
        };
        Some(Bracket { pos, lo, hi })
    }

    /// Convert the source interval `[a, b]` (true reading in `[a, b]`, so the continuous
    /// value in `[a, b + 1)`) through bracket `z`.
    #[inline]
    fn convert_via(&self, z: Bracket, a: i128, b: i128) -> Option<Interval> {
        let lo = {
            let d = a - z.pos as i128;
            if d >= 0 {
                z.lo.checked_add(i128::try_from(mul_fp_floor(d as u128, self.fl_fp)?).ok()?)?
            } else {
                z.lo.checked_sub(i128::try_from(mul_fp_ceil(d.unsigned_abs(), self.fu_fp)?).ok()?)?
            }
        };
        let hi = {
            let d = b.checked_add(1)? - z.pos as i128;
            if d >= 0 {
                z.hi.checked_add(i128::try_from(mul_fp_ceil(d as u128, self.fu_fp)?).ok()?)?
            } else {
                z.hi.checked_sub(i128::try_from(mul_fp_floor(d.unsigned_abs(), self.fl_fp)?).ok()?)?
            }
        };
        Some(Interval { lo, hi })
    }

    #[inline]
    fn ready(&self) -> Result<Bracket, Error> {
        if let Some(violation) = self.broken {
            return Err(Error::ClockModel { epoch: self.epoch, violation });
        }
        self.zero.ok_or(Error::NotCalibrated { exchanges: self.n })
    }

    /// Convert a source timestamp to an interval of reference ticks that contains the
    /// reference reading at the instant the source read `k`.
    ///
    /// Anchored at the zero: for a fixed `k` the interval never widens as exchanges
    /// arrive, and every interval handed out earlier stays valid. Width:
    /// `zero width + |k − z|·(F^U − F^L)` (+ one tick of rounding per end).
    #[inline]
    pub fn to_reference(&self, k: u64) -> Result<Interval, Error> {
        let z = self.ready()?;
        self.convert_via(z, k as i128, k as i128).ok_or(Error::Overflow)
    }

    /// As [`FreeZer::to_reference`], intersected with the conversion through the most
    /// recent exchange. Much tighter for events near the latest exchange (about one round
    /// trip instead of about three); always valid. Unlike the anchored conversion, calling
    /// it again later for the same `k` can give a *wider* (still valid) interval once the
    /// recent bracket has moved on: intersect with what you had if you keep both.
    #[inline]
    pub fn to_reference_tight(&self, k: u64) -> Result<Interval, Error> {
        self.convert_interval_tight(Interval::point(k))
    }

    /// Convert an interval of source ticks (for example the output of a previous hop).
    /// Conversions are monotone, so `[lo(a), hi(b)]` is the exact image (freezer-notes
    /// §2.8); the width grows by `(b − a + 1)·F^U` plus this hop's own width, no more.
    #[inline]
    pub fn convert_interval(&self, iv: Interval) -> Result<Interval, Error> {
        let z = self.ready()?;
        self.convert_via(z, iv.lo, iv.hi).ok_or(Error::Overflow)
    }

    /// [`FreeZer::convert_interval`] intersected with the conversion through the recent
    /// bracket (see [`FreeZer::to_reference_tight`]).
    #[inline]
    pub fn convert_interval_tight(&self, iv: Interval) -> Result<Interval, Error> {
        let z = self.ready()?;
        let a = self.convert_via(z, iv.lo, iv.hi).ok_or(Error::Overflow)?;
        let Some(r) = self.recent else { return Ok(a) };
        let b = self.convert_via(r, iv.lo, iv.hi).ok_or(Error::Overflow)?;
        // Two valid intervals for one event always meet; if they do not, the model is
        // broken in a way the last observe could not see yet.
        a.intersect(&b).ok_or_else(|| Error::ClockModel {
            epoch: self.epoch,
            violation: Violation::ZeroEmpty { lo: a.lo.max(b.lo), hi: a.hi.min(b.hi) },
        })
    }

    /// The anchored conversion computed with the exact rationals (a division per bound)
    /// instead of the outward-rounded fixed-point multipliers. For audits and tests:
    /// [`FreeZer::to_reference`] contains this interval and exceeds it by at most one tick
    /// at each end. Distances must fit in 64 bits.
    pub fn to_reference_exact(&self, k: u64) -> Result<Interval, Error> {
        let z = self.ready()?;
        let d = k as i128 - z.pos as i128;
        let lo = if d >= 0 {
            z.lo + self.fl.mul_floor(d as u128).ok_or(Error::Overflow)? as i128
        } else {
            z.lo - self.fu.mul_ceil(d.unsigned_abs()).ok_or(Error::Overflow)? as i128
        };
        let d = d + 1;
        let hi = if d >= 0 {
            z.hi + self.fu.mul_ceil(d as u128).ok_or(Error::Overflow)? as i128
        } else {
            z.hi - self.fl.mul_floor(d.unsigned_abs()).ok_or(Error::Overflow)? as i128
        };
        Ok(Interval { lo, hi })
    }

    /// Bounds on `truth(k2) − truth(k1)` for two events read as `k1` and `k2` on the
    /// source clock: `[F·(d − 1), F·(d + 1)]` over `F ∈ [F^L, F^U]` with `d = k2 − k1`
    /// (each reading hides up to one tick), rounded outward. For two events on the same
    /// source clock this is much tighter than subtracting their converted intervals, which
    /// would count the zero's uncertainty twice (freezer-notes §4.1).
    pub fn duration_between(&self, k1: u64, k2: u64) -> Result<Interval, Error> {
        self.ready()?;
        let d = k2 as i128 - k1 as i128;
        let scale = |x: i128, up: bool| -> Option<i128> {
            // x·F rounded down (up = false) or up, choosing the bound that minimises
            // (maximises) the product given the sign of x.
            let m = x.unsigned_abs();
            let v = match (x >= 0, up) {
                (true, false) => mul_fp_floor(m, self.fl_fp)? as i128,
                (true, true) => mul_fp_ceil(m, self.fu_fp)? as i128,
                (false, false) => -(mul_fp_ceil(m, self.fu_fp)? as i128),
                (false, true) => -(mul_fp_floor(m, self.fl_fp)? as i128),
            };
            Some(v)
        };
        let lo = scale(d - 1, false).ok_or(Error::Overflow)?;
        let hi = scale(d + 1, true).ok_or(Error::Overflow)?;
        Ok(Interval { lo, hi })
    }
}

fn intersect(a: Bracket, b: Bracket) -> Bracket {
    debug_assert_eq!(a.pos, b.pos);
    Bracket { pos: a.pos, lo: a.lo.max(b.lo), hi: a.hi.min(b.hi) }
}

/// Convert `k` through a chain of hops (a path up a tree of hosts, freezer-notes §2.8):
/// `hops[0]` converts from the clock of `k` to the next clock, and so on; the result is on
/// the reference clock of the last hop. Every hop keeps the guarantee, so the result does.
pub fn convert_path(hops: &[&FreeZer], k: u64) -> Result<Interval, Error> {
    let mut iv = Interval::point(k);
    for hop in hops {
        iv = hop.convert_interval(iv)?;
    }
    Ok(iv)
}

/// As [`convert_path`], with [`FreeZer::convert_interval_tight`] at every hop.
pub fn convert_path_tight(hops: &[&FreeZer], k: u64) -> Result<Interval, Error> {
    let mut iv = Interval::point(k);
    for hop in hops {
        iv = hop.convert_interval_tight(iv)?;
    }
    Ok(iv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-computed example: reference at 2 ticks/ns, source at 1 tick/ns, source ahead by
    /// 1000; 10 ns each way.
    #[test]
    fn worked_example() {
        let src = |t: u64| 1000 + t;
        let rf = |t: u64| 2 * t;
        let mut fz = FreeZer::new();
        assert_eq!(fz.to_reference(5), Err(Error::NotCalibrated { exchanges: 0 }));
        fz.observe(Exchange { s: rf(0), r: src(10), e: rf(20) }).unwrap();
        assert!(matches!(fz.to_reference(5), Err(Error::NotCalibrated { exchanges: 1 })));
        fz.observe(Exchange { s: rf(1000), r: src(1010), e: rf(1020) }).unwrap();
        // f^U = (2040 + 1 - 0) / (2010 - 1010 - 1) = 2041/999, f^L = (2000 - 40 - 1)/1001.
        let (lo, hi) = fz.frequency_bounds();
        assert_eq!(hi, Ratio::new(2041, 999));
        assert_eq!(lo, Ratio::new(1959, 1001));
        for t in [0u64, 5, 500, 1010, 5000] {
            let iv = fz.to_reference(src(t)).unwrap();
            assert!(iv.contains(rf(t) as i128), "t={t} iv={iv}");
        }
        // Before the zero (source reading 1000 - 900): still contained.
        let iv = fz.to_reference(100).unwrap();
        assert!(iv.contains(-1800), "{iv}");
    }

    #[test]
    fn invalid_exchange_is_rejected_without_state_change() {
        let mut fz = FreeZer::new();
        let bad = Exchange { s: 10, r: 5, e: 9 };
        assert_eq!(fz.observe(bad), Err(Error::InvalidExchange(bad)));
        assert_eq!(fz.exchanges(), 0);
    }

    #[test]
    fn source_reset_is_a_violation_and_new_epoch_recovers() {
        let mut fz = FreeZer::new();
        fz.observe(Exchange { s: 0, r: 1_000_000, e: 10 }).unwrap();
        fz.observe(Exchange { s: 1000, r: 1_001_000, e: 1010 }).unwrap();
        let err = fz.observe(Exchange { s: 2000, r: 5, e: 2010 }).unwrap_err();
        assert!(matches!(err, Error::ClockModel { epoch: 0, violation: Violation::SourceWentBackwards { .. } }));
        assert!(err.to_string().contains("new calibration epoch"), "{err}");
        assert!(fz.to_reference(1_000_500).is_err());
        assert_eq!(fz.new_epoch(), 1);
        fz.observe(Exchange { s: 3000, r: 1005, e: 3010 }).unwrap();
        fz.observe(Exchange { s: 4000, r: 2005, e: 4010 }).unwrap();
        assert!(fz.to_reference(1500).is_ok());
    }
}
