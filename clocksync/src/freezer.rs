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
//! # What is kept (bounded memory, O(1) per exchange; freezer-notes §2.9)
//!
//! Every bound below is the bound of one pair of exchanges, or one exchange's bracket
//! carried through such bounds: FreeZer's own rules (§3.3: "an upper bound can be computed
//! by measuring a larger interval on the first clock compared to that on the second
//! clock, and a lower bound ... by reversing this procedure"; the zero by "trapping a
//! timestamp from one clock between a pair of timestamps taken on the other clock"). What
//! this module adds (issue 31.3) is *which* pairs and brackets are combined, so that the
//! bounds follow the best exchanges of the whole run rather than of its first exchanges:
//!
//! * **Frequency bounds** `F^L ≤ F ≤ F^U`, exact [`Ratio`]s of cycle counts, intersected
//!   with every new pair, so they only tighten. A pair `p` before `q` gives
//!   `F ≤ (e_q + 1 − s_p)/(r_q − r_p − 1)` and `F ≥ (s_q − e_p − 1)/(r_q − r_p + 1)`
//!   (freezer-notes §2.4, compact form, a tick of slack per reading). The first is tight
//!   when `p`'s ping and `q`'s pong were fast, the second when `p`'s pong and `q`'s ping
//!   were: a heavy-tailed link has many exchanges fast one way and few fast both ways.
//! * **Landmarks** (`landmarks`): the run is cut into stretches of equally many exchanges
//!   (64 at first); each keeps its exchange with the fastest ping and the one with the
//!   fastest pong. At most 16 are kept: when full, neighbours merge and stretches double,
//!   so they always cover the whole run, the first among its earliest exchanges. Each new
//!   exchange is paired with every landmark (and with the zero), each side with the
//!   landmark's exchange that is tight on that side. This replaces the single *anchor* of
//!   freezer-notes §2.9 (the lowest round trip among the first 64 exchanges, paired with
//!   every later one), whose bracket capped the bounds for the whole run when none of the
//!   first exchanges was tight. An exchange whose two ends are no better than the best ends
//!   already known (the recent bracket's sources carried to it) cannot tighten either bound
//!   and is not paired (`worth_pairing` says why).
//! * **Anchors** (`anchors`): brackets `c_R ∈ [lo, hi]` at fixed source positions. The
//!   first is the *zero* (the epoch's first exchange); a new one is placed at the newest
//!   exchange whenever it is 1/8 further from the zero than the newest anchor (geometric
//!   spacing: about 8 per doubling of the run, at most 256), starting as the recent
//!   bracket. The newest anchor is tightened with every exchange worth pairing, and every
//!   4 exchanges one anchor in turn is tightened again with one landmark's best ends and
//!   with its neighbours, carried through the current bounds ("carry an old bracket ...
//!   and intersect", freezer-notes §2.9), so anchors keep improving as the bounds do.
//! * The **recent** bracket at the latest exchange: each end carried once from the bracket
//!   that gives the best end there (the exchange with the fastest ping carried with `F^L`
//!   for the lower end, the one with the fastest pong with `F^U` for the upper; or the
//!   newest anchor), intersected with the latest exchange's own. Tight intervals for events
//!   near "now" ([`FreeZer::to_reference_tight`]).
//!
//! # Anchored conversion, and what replaced "never widens"
//!
//! With one zero at the start, converting an event at time `T` costs `T·(F^U − F^L)` on top
//! of the zero's width, and the zero itself paid about as much to carry the best brackets
//! back to the start: with the bounds as tight as the run allows, the anchored interval of
//! an event at the latest exchange was still about `2·T·(F^U − F^L)` wider than the tight
//! one (3× on the heavy-tailed link of the tests). [`FreeZer::to_reference`] now converts
//! through the anchor at or before the event and the one after it, intersected: within
//! 1.3× of the tight width there (`tests/heavy_tail.rs`; before: 40–600×). Anchors never
//! move, only shrink, and are only placed past every exchange fed, so the interval of an
//! event the exchanges have passed **never widens** later; an event after the latest
//! exchange may get at most a tick wider per anchor placed in between (its anchor changes
//! to the new one, which is the old one carried forward, rounded).
//!
//! Offline, with the whole run's exchanges, [`crate::OfflineFreeZer`] converts through the
//! exchanges on both sides of each event and the best pair of the run.
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

use core::cmp::Ordering;
use core::fmt;

use crate::anchors::Anchors;
use crate::bracket::{lower_bound, ratio, residual_cmp, upper_bound, Bracket, Slopes};
use crate::exchange::Exchange;
use crate::interval::Interval;
use crate::landmarks::Landmarks;
use crate::ratio::{mul_fp_ceil, mul_fp_floor, Ratio};

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
    /// The intersection of the brackets for an anchor (the zero or a later one) or for the
    /// recent exchange became empty: no single line through all exchanges exists any more.
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

/// Default number of exchanges per landmark stretch at the start of an epoch (the first
/// landmark is the best of the first this many exchanges; stretches double in length as
/// the run grows, see [`FreeZer::with_warmup`]).
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
    /// The largest source reading of the epoch's exchanges so far.
    max_r: u64,
    /// The epoch's first exchange: the zero is placed at its source reading.
    first: Option<Exchange>,
    /// The best exchanges of each stretch of the epoch so far.
    marks: Landmarks,
    sl: Slopes,
    /// The zero and the anchors after it (fixed positions, spaced geometrically).
    anchors: Anchors,
    recent: Option<Bracket>,
    /// The brackets the recent one takes its lower and its upper end from.
    lo_src: Option<Bracket>,
    hi_src: Option<Bracket>,
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

    /// As [`FreeZer::new`], with landmark stretches of `warmup` exchanges at the start of
    /// the epoch (the first landmark is the best of the first `warmup` exchanges).
    pub fn with_warmup(warmup: u64) -> FreeZer {
        let warmup = warmup.max(1);
        FreeZer {
            epoch: 0,
            warmup,
            n: 0,
            last: None,
            max_r: 0,
            first: None,
            marks: Landmarks::new(warmup),
            sl: Slopes::UNKNOWN,
            anchors: Anchors::default(),
            recent: None,
            lo_src: None,
            hi_src: None,
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
        !self.anchors.is_empty() && self.broken.is_none()
    }

    /// The detected violation, if the model of this epoch is broken.
    pub fn violation(&self) -> Option<Violation> {
        self.broken
    }

    /// `(F^L, F^U)`: exact bounds on `F = fr(reference)/fr(source)`, the number of
    /// reference ticks per source tick. Before calibration: `(0, ∞)`.
    pub fn frequency_bounds(&self) -> (Ratio, Ratio) {
        (self.sl.fl, self.sl.fu)
    }

    /// The zero: a source position and the interval of reference ticks that the
    /// reference clock read at that instant.
    pub fn zero(&self) -> Option<(u64, Interval)> {
        self.anchors.zero().map(|z| (z.pos, Interval::new(z.lo, z.hi)))
    }

    /// The newest anchor, like [`FreeZer::zero`] (the zero itself until the second anchor
    /// is placed). Converting through it instead of the zero gives narrower intervals for
    /// events after it: see [`FreeZer::to_reference`].
    pub fn newest_anchor(&self) -> Option<(u64, Interval)> {
        self.anchors.newest().map(|z| (z.pos, Interval::new(z.lo, z.hi)))
    }

    /// Anchors placed in this epoch, the zero included (at most 256; about 8 per doubling
    /// of the run's length).
    pub fn anchors(&self) -> usize {
        self.anchors.len()
    }

    /// The bracket at the most recent exchange (see [`FreeZer::zero`]).
    pub fn recent(&self) -> Option<(u64, Interval)> {
        self.recent.map(|z| (z.pos, Interval::new(z.lo, z.hi)))
    }

    fn fail(&mut self, violation: Violation) -> Error {
        self.broken = Some(violation);
        Error::ClockModel { epoch: self.epoch, violation }
    }

    /// Feed one exchange. O(1) (at most 17 landmarks to pair with); bounds only tighten
    /// (intersection).
    ///
    /// Exchanges must be fed in the order they were made (non-decreasing `s`). An
    /// exchange inconsistent with the constant-rate model breaks the epoch
    /// ([`Error::ClockModel`]).
    pub fn observe(&mut self, q: Exchange) -> Result<(), Error> {
        let max_r = self.admit(q)?;
        if self.first.is_none() {
            self.first = Some(q);
            self.marks.add(q, self.sl.fu_fp);
            return Ok(());
        }
        let carried = self.carried_ends(q.r);
        let (upper, lower) = worth_pairing(&self.sl, &q, carried);
        let bounds_moved = self.tighten_frequency(&q, upper, lower)?;
        if self.sl.fu.is_infinite() {
            // No upper bound yet (q too close to the first exchanges): nothing to convert.
            self.marks.add(q, self.sl.fu_fp);
            return Ok(());
        }
        let bq = self.sl.bracket_of(&q).ok_or(Error::Overflow)?;
        let visited = self.tighten_anchors(bq, upper || lower)?;
        let recent = self.move_recent(bq, carried, bounds_moved, upper || lower, visited)?;
        self.place_anchor(&q, recent, max_r)?;
        self.marks.add(q, self.sl.fu_fp);
        Ok(())
    }

    /// `observe`'s first step: refuses an exchange that is malformed, out of order or
    /// inconsistent with the previous one, else counts it. Returns the largest source
    /// reading before it.
    fn admit(&mut self, q: Exchange) -> Result<u64, Error> {
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
        let max_r = self.max_r;
        self.max_r = max_r.max(q.r);
        Ok(max_r)
    }

    /// Frequency: q against the best earlier exchanges of every stretch of the run
    /// (freezer-notes §2.4, compact form, one tick of slack per reading), so the bounds
    /// follow the best pairs of the whole run, not of its first exchanges. `upper`,
    /// `lower`: the sides q is worth pairing on. Returns whether the bounds moved.
    fn tighten_frequency(&mut self, q: &Exchange, upper: bool, lower: bool) -> Result<bool, Error> {
        let (mut fl, mut fu) = (self.sl.fl, self.sl.fu);
        if upper || lower {
            for m in self.marks.iter() {
                if let Some(u) = upper.then(|| upper_bound(&m.below, q)).flatten() {
                    fu = fu.min(u);
                }
                if let Some(l) = lower.then(|| lower_bound(&m.above, q)).flatten() {
                    fl = fl.max(l);
                }
            }
            // And against the zero bracket (exact position).
            if let Some(z) = self.anchors.zero() {
                if q.r > z.pos {
                    let dr = (q.r - z.pos) as i128;
                    if let Some(u) = upper.then(|| ratio(q.e as i128 + 1 - z.lo, dr)).flatten() {
                        fu = fu.min(u);
                    }
                    if let Some(l) = lower.then(|| ratio(q.s as i128 - z.hi, dr + 1)).flatten() {
                        fl = fl.max(l);
                    }
                }
            }
        }
        if fl > fu {
            return Err(self.fail(Violation::FrequencyBoundsCrossed { lower: fl, upper: fu }));
        }
        let moved = fl != self.sl.fl || fu != self.sl.fu;
        self.sl.set(fl, fu);
        Ok(moved)
    }

    /// The anchors (the zero first), at fixed positions: the newest tightened with q's
    /// bracket `bq`, and every few exchanges one of them in turn with the best exchanges
    /// of one landmark (its lower end from the one whose ping was fastest, its upper end
    /// from the one whose pong was) and with its neighbours, all carried through the
    /// current bounds (freezer-notes §2.9 "carry an old bracket ... and intersect").
    /// Anchors are visited again and again, so they keep improving as the bounds do.
    /// `paired`: q was worth pairing on some side. Returns whether an anchor was visited.
    fn tighten_anchors(&mut self, bq: Bracket, paired: bool) -> Result<bool, Error> {
        let sl = self.sl;
        if self.anchors.is_empty() {
            self.anchors.start(sl.bracket_of(&self.first.expect("first is set")).ok_or(Error::Overflow)?);
        }
        if paired {
            // (An exchange worth pairing on neither side holds the recent bracket, so it
            // tells the anchors nothing their sources did not.)
            let newest = self.anchors.tighten_newest(&sl, bq).ok_or(Error::Overflow)?;
            if newest.is_empty() {
                return Err(self.fail(Violation::ZeroEmpty { lo: newest.lo, hi: newest.hi }));
            }
        }
        let visit = self.n & (VISIT_EVERY - 1) == 0;
        if visit {
            let a = self.anchors.visit(&sl, self.marks.next()).ok_or(Error::Overflow)?;
            if a.is_empty() {
                return Err(self.fail(Violation::ZeroEmpty { lo: a.lo, hi: a.hi }));
            }
        }
        Ok(visit)
    }

    /// The recent bracket moves to q (`bq`, at source position `bq.pos`). Each end comes
    /// from the bracket that gives the best end ahead of it (q's own, the newest anchor
    /// if it was just `visited`, or the one kept from before), carried once: carrying the
    /// previous recent bracket forward at every exchange would add a tick of rounding per
    /// exchange. `carried`: the kept sources' ends at q, reused if nothing moved.
    fn move_recent(
        &mut self,
        bq: Bracket,
        carried: Option<(i128, i128)>,
        bounds_moved: bool,
        paired: bool,
        visited: bool,
    ) -> Result<Bracket, Error> {
        let sl = self.sl;
        let newest = self.anchors.newest().expect("anchors started");
        let better_lo =
            |a: &Bracket, b: &Bracket| residual_cmp(a.lo, a.pos, b.lo, b.pos, sl.fl_fp) == Some(Ordering::Greater);
        let better_hi =
            |a: &Bracket, b: &Bracket| residual_cmp(a.hi, a.pos, b.hi, b.pos, sl.fu_fp) == Some(Ordering::Less);
        let (mut lo_src, mut hi_src) = (self.lo_src.unwrap_or(bq), self.hi_src.unwrap_or(bq));
        let mut moved = (bounds_moved, bounds_moved);
        for (c, consider) in [(bq, paired), (newest, visited)] {
            if consider && better_lo(&c, &lo_src) {
                (lo_src, moved.0) = (c, true);
            }
            if consider && better_hi(&c, &hi_src) {
                (hi_src, moved.1) = (c, true);
            }
        }
        let qp = bq.pos as i128;
        let (lo, hi) = match carried {
            Some((lo, hi)) if !moved.0 && !moved.1 => (lo, hi),
            _ => (sl.lo_via(lo_src, qp).ok_or(Error::Overflow)?, sl.hi_via(hi_src, qp - 1).ok_or(Error::Overflow)?),
        };
        let rb = bq.intersect(Bracket { pos: bq.pos, lo, hi });
        if rb.is_empty() {
            return Err(self.fail(Violation::ZeroEmpty { lo: rb.lo, hi: rb.hi }));
        }
        (self.lo_src, self.hi_src) = (Some(lo_src), Some(hi_src));
        self.recent = Some(rb);
        Ok(rb)
    }

    /// A new anchor at q once it is far enough beyond the newest (geometric spacing), at
    /// least as narrow as the newest carried to it; only past every earlier exchange
    /// (`max_r`: the largest source reading before q), so the anchors around an event
    /// already passed never change.
    fn place_anchor(&mut self, q: &Exchange, recent: Bracket, max_r: u64) -> Result<(), Error> {
        if self.n >= self.warmup && q.r > max_r && self.anchors.due(q.r) {
            let newest = self.anchors.newest().expect("anchors started");
            let anchor = recent.intersect(self.sl.carry(newest, q.r).ok_or(Error::Overflow)?);
            if anchor.is_empty() {
                return Err(self.fail(Violation::ZeroEmpty { lo: anchor.lo, hi: anchor.hi }));
            }
            self.anchors.push(anchor);
        }
        Ok(())
    }

    /// The ends of the recent bracket's sources carried to source position `pos`.
    #[inline]
    fn carried_ends(&self, pos: u64) -> Option<(i128, i128)> {
        let (l, h) = (self.lo_src?, self.hi_src?);
        let p = pos as i128;
        Some((self.sl.lo_via(l, p)?, self.sl.hi_via(h, p - 1)?))
    }

    #[inline]
    fn ready(&self) -> Result<(), Error> {
        if let Some(violation) = self.broken {
            return Err(Error::ClockModel { epoch: self.epoch, violation });
        }
        if self.anchors.is_empty() {
            return Err(Error::NotCalibrated { exchanges: self.n });
        }
        Ok(())
    }

    /// The source interval `[a, b]` (continuous value in `[a, b + 1)`) through the anchors
    /// around its ends (both ends through the anchors around either end, so that an
    /// interval's image is never wider than its lower end's point image plus
    /// `(b − a + 1)·F^U`).
    #[inline]
    fn anchored(&self, a: i128, b: i128) -> Result<Interval, Error> {
        self.ready()?;
        let sl = &self.sl;
        let (mut lo, mut hi) = (i128::MIN, i128::MAX);
        for z in self.anchors.around(a).iter().chain(self.anchors.around(b)) {
            lo = lo.max(sl.lo_via(*z, a).ok_or(Error::Overflow)?);
            hi = hi.min(sl.hi_via(*z, b).ok_or(Error::Overflow)?);
        }
        self.nonempty(lo, hi)
    }

    /// [`FreeZer::anchored`] for one event: one or two anchors (the common case, kept
    /// short).
    #[inline]
    fn anchored_point(&self, k: u64) -> Result<Interval, Error> {
        self.ready()?;
        let x = k as i128;
        let near = self.anchors.around(x);
        let mut iv = self.sl.convert_via(near[0], x, x).ok_or(Error::Overflow)?;
        if let Some(z) = near.get(1) {
            let b = self.sl.convert_via(*z, x, x).ok_or(Error::Overflow)?;
            (iv.lo, iv.hi) = (iv.lo.max(b.lo), iv.hi.min(b.hi));
            return self.nonempty(iv.lo, iv.hi);
        }
        Ok(iv)
    }

    /// Two valid intervals for one event always meet; if they do not, the model is broken
    /// in a way the last observe could not see yet.
    #[inline]
    fn nonempty(&self, lo: i128, hi: i128) -> Result<Interval, Error> {
        if lo > hi {
            return Err(Error::ClockModel { epoch: self.epoch, violation: Violation::ZeroEmpty { lo, hi } });
        }
        Ok(Interval { lo, hi })
    }

    /// Convert a source timestamp to an interval of reference ticks that contains the
    /// reference reading at the instant the source read `k`.
    ///
    /// Anchored: through the anchor at or before `k` and the one after it (only the
    /// zero before the zero, only the newest after the newest), intersected. Width: an
    /// anchor's width `+ |k − anchor|·(F^U − F^L)` (+ one tick of rounding per end), with
    /// an anchor within about an eighth of the run before `k`.
    ///
    /// **Never widens** (the replacement for "anchored at one fixed zero"): once `k` is
    /// at or before the newest exchange (the largest source reading `r` fed so far),
    /// later calls for the same `k` never give a wider interval (its anchors are fixed and
    /// only shrink, and anchors are only placed past every exchange fed). For `k` after the newest exchange, a new anchor placed
    /// between the newest and `k` replaces the newest for `k`; it is the newest carried
    /// forward and intersected, so the interval can be one tick wider (rounding) than
    /// before, once per anchor placed. Every interval handed out stays valid.
    #[inline]
    pub fn to_reference(&self, k: u64) -> Result<Interval, Error> {
        self.anchored_point(k)
    }

    /// As [`FreeZer::to_reference`], intersected with the conversion through the most
    /// recent exchange. Tighter for events near the latest exchange (the recent bracket
    /// is not widened by carrying it back to the zero and forward again); always valid.
    /// Unlike the anchored conversion, calling it again later for the same `k` can give
    /// a *wider* (still valid) interval once the recent bracket has moved on: intersect
    /// with what you had if you keep both.
    #[inline]
    pub fn to_reference_tight(&self, k: u64) -> Result<Interval, Error> {
        self.convert_interval_tight(Interval::point(k))
    }

    /// Convert an interval of source ticks (for example the output of a previous hop).
    /// Conversions are monotone, so `[lo(a), hi(b)]` is the exact image (freezer-notes
    /// §2.8); the width grows by `(b − a + 1)·F^U` plus this hop's own width, no more.
    #[inline]
    pub fn convert_interval(&self, iv: Interval) -> Result<Interval, Error> {
        self.anchored(iv.lo, iv.hi)
    }

    /// [`FreeZer::convert_interval`] intersected with the conversion through the recent
    /// bracket (see [`FreeZer::to_reference_tight`]).
    #[inline]
    pub fn convert_interval_tight(&self, iv: Interval) -> Result<Interval, Error> {
        let a = match u64::try_from(iv.lo) {
            Ok(k) if iv.lo == iv.hi => self.anchored_point(k)?,
            _ => self.anchored(iv.lo, iv.hi)?,
        };
        let Some(r) = self.recent else { return Ok(a) };
        let b = self.sl.convert_via(r, iv.lo, iv.hi).ok_or(Error::Overflow)?;
        self.nonempty(a.lo.max(b.lo), a.hi.min(b.hi))
    }

    /// The anchored conversion computed with the exact rationals (a division per bound)
    /// instead of the outward-rounded fixed-point multipliers. For audits and tests:
    /// [`FreeZer::to_reference`] contains this interval and exceeds it by at most one tick
    /// at each end. Distances must fit in 64 bits.
    pub fn to_reference_exact(&self, k: u64) -> Result<Interval, Error> {
        self.ready()?;
        let (fl, fu) = (self.sl.fl, self.sl.fu);
        let (mut lo, mut hi) = (i128::MIN, i128::MAX);
        for z in self.anchors.around(k as i128) {
            let d = k as i128 - z.pos as i128;
            lo = lo.max(if d >= 0 {
                z.lo + fl.mul_floor(d as u128).ok_or(Error::Overflow)? as i128
            } else {
                z.lo - fu.mul_ceil(d.unsigned_abs()).ok_or(Error::Overflow)? as i128
            });
            let d = d + 1;
            hi = hi.min(if d >= 0 {
                z.hi + fu.mul_ceil(d as u128).ok_or(Error::Overflow)? as i128
            } else {
                z.hi - fl.mul_floor(d.unsigned_abs()).ok_or(Error::Overflow)? as i128
            });
        }
        self.nonempty(lo, hi)
    }

    /// Bounds on `truth(k2) − truth(k1)` for two events read as `k1` and `k2` on the
    /// source clock: `[F·(d − 1), F·(d + 1)]` over `F ∈ [F^L, F^U]` with `d = k2 − k1`
    /// (each reading hides up to one tick), rounded outward, intersected with the
    /// difference of the two anchored intervals. For events far apart, or far from the
    /// anchors, the first is much tighter than the second, which counts the anchors'
    /// uncertainty twice (freezer-notes §4.1); for events close to narrow anchors, the
    /// second can be.
    pub fn duration_between(&self, k1: u64, k2: u64) -> Result<Interval, Error> {
        self.ready()?;
        let d = duration(&self.sl, k1, k2).ok_or(Error::Overflow)?;
        let n = self.to_reference(k1)?.duration_to(&self.to_reference(k2)?);
        self.nonempty(d.lo.max(n.lo), d.hi.min(n.hi))
    }
}

/// An anchor is re-tightened every this many exchanges (a power of two).
const VISIT_EVERY: u64 = 4;

/// Whether q's upper end (its pong) and its lower end (its ping) could tighten a frequency
/// bound at all, given the best ends of each side carried to q (`carried`: the recent
/// bracket's sources). An end no better than that cannot, with any earlier exchange: the
/// bound through q is then no tighter than through the source, which was paired with the
/// same landmarks when it came, or, if it came before them, lies on the right side of the
/// bound already (the pair's slope is then a weighted mean of the two). Most exchanges of
/// a heavy-tailed link are late on both sides and skip the pairing; an exchange that
/// contradicts the model lies outside the carried ends, so it is always paired. A margin
/// of a few ticks covers rounding; skipping can only leave a bound looser, never invalid.
#[inline]
fn worth_pairing(sl: &Slopes, q: &Exchange, carried: Option<(i128, i128)>) -> (bool, bool) {
    const MARGIN: i128 = 8;
    let (Some((lo, hi)), Some(b)) = (carried, sl.bracket_of(q)) else { return (true, true) };
    ((q.e as i128 + 1) < hi + MARGIN, b.lo > lo - MARGIN)
}

/// `[F·(d − 1), F·(d + 1)]` for `d = k2 − k1`, rounded outward (see
/// [`FreeZer::duration_between`]).
pub(crate) fn duration(sl: &Slopes, k1: u64, k2: u64) -> Option<Interval> {
    let d = k2 as i128 - k1 as i128;
    let scale = |x: i128, up: bool| -> Option<i128> {
        // x·F rounded down (up = false) or up, choosing the bound that minimises
        // (maximises) the product given the sign of x.
        let m = x.unsigned_abs();
        let v = match (x >= 0, up) {
            (true, false) => mul_fp_floor(m, sl.fl_fp)? as i128,
            (true, true) => mul_fp_ceil(m, sl.fu_fp)? as i128,
            (false, false) => -(mul_fp_ceil(m, sl.fu_fp)? as i128),
            (false, true) => -(mul_fp_floor(m, sl.fl_fp)? as i128),
        };
        Some(v)
    };
    Some(Interval { lo: scale(d - 1, false)?, hi: scale(d + 1, true)? })
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
