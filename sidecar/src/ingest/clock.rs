//! Stream clock → host nanoseconds (DESIGN "Clocks"; issue stage 1).
//!
//! A process sends clock samples (stream ticks and CLOCK_MONOTONIC read
//! together) at its start and about once a second. A tick count is mapped by
//! linear interpolation between the two samples around it; past the last
//! sample it is extrapolated with the last slope (or `Hello.ticks_per_sec`
//! while there is only one sample). Records are converted as they arrive, so
//! a later sample does not re-convert records already converted: the error
//! is bounded by the drift of one sample interval. All streams of one host
//! land on that host's CLOCK_MONOTONIC timeline; hosts are never mixed here.

use ringlog::{ClockDomain, ClockSample};

use crate::analysis::model::Ns;

#[derive(Clone, Debug)]
pub struct Clock {
    domain: ClockDomain,
    /// Samples in increasing tick order (out-of-order ones are dropped).
    samples: Vec<ClockSample>,
    ticks_per_sec: u64,
    /// Index of the sample the last search started from.
    hint: usize,
    /// The segment of the last conversion: ticks `[lo, hi)` map to
    /// `base_ns + (ticks - base_ticks) · slope` (what the search below finds
    /// for them), so most records skip the search.
    seg: Option<Segment>,
    /// `slope` of the last sample, what [`Clock::span_ns`] uses: kept, as
    /// Step records ask for it once per engine step.
    latest_slope: f64,
    /// Samples that went back in ticks while CLOCK_MONOTONIC went on: the
    /// stream clock was reset or written (a TSC reset, a VM migration). They
    /// are ignored like any sample out of order, so the records after them
    /// are mapped wrongly; the reader reports it.
    went_back: u64,
}

#[derive(Clone, Copy, Debug)]
struct Segment {
    lo: u64,
    hi: u64,
    /// `monotonic_ns` of the sample at `lo`, as the formula uses it.
    base_ns: f64,
    slope: f64,
}

/// How far a sample's rate may be from the stream's nominal rate (or, with
/// none, from the last segment's) before the sample is taken as corrupt.
const MAX_RATE_RATIO: f64 = 10.0;

/// A clock sample ignored: since the last one it puts the stream clock's
/// rate at `ratio` times what it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImplausibleSample {
    pub ratio: f64,
}

impl std::fmt::Display for ImplausibleSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a clock sample implausible (it puts the stream clock's rate at {:.3e} times the expected one), ignored",
            self.ratio
        )
    }
}

/// Why a timestamp cannot be converted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClockError {
    NoSample,
}

impl Clock {
    pub fn new(domain: ClockDomain, ticks_per_sec: u64) -> Clock {
        let mut c =
            Clock { domain, samples: Vec::new(), ticks_per_sec, hint: 0, seg: None, latest_slope: 0.0, went_back: 0 };
        c.latest_slope = c.slope(0);
        c
    }

    pub fn domain(&self) -> ClockDomain {
        self.domain
    }

    pub fn set_ticks_per_sec(&mut self, t: u64) {
        self.ticks_per_sec = t;
        self.seg = None;
        self.latest_slope = self.slope(self.samples.len().saturating_sub(1));
    }

    /// Adds a sample; samples going backwards (in ticks or ns) are ignored,
    /// and so is one whose rate since the last is implausible (the error
    /// says how far off it is).
    pub fn add(&mut self, s: ClockSample) -> Result<(), ImplausibleSample> {
        if let Some(l) = self.samples.last() {
            if s.ticks <= l.ticks || s.monotonic_ns < l.monotonic_ns {
                if s.ticks < l.ticks && s.monotonic_ns > l.monotonic_ns {
                    self.went_back += 1;
                }
                return Ok(());
            }
            // A TSC runs at one rate (the probe measured it for the Hello;
            // drift is parts per million): a sample that puts it an order
            // of magnitude off is corrupt, and taking it would stretch or
            // squeeze every later time by as much (a stream of a few
            // records then spanned millions of windows).
            let slope = (s.monotonic_ns - l.monotonic_ns) as f64 / (s.ticks - l.ticks) as f64;
            let expected = if self.ticks_per_sec > 0 {
                Some(1e9 / self.ticks_per_sec as f64)
            } else {
                (self.samples.len() >= 2).then_some(self.latest_slope)
            };
            if let Some(e) = expected.filter(|_| self.domain == ClockDomain::Tsc) {
                let ratio = slope / e;
                if !(1.0 / MAX_RATE_RATIO..=MAX_RATE_RATIO).contains(&ratio) {
                    return Err(ImplausibleSample { ratio });
                }
            }
        }
        self.seg = None;
        // Keep memory bounded on long runs: old samples are never needed for
        // records that arrive now (streams are converted as they come).
        if self.samples.len() >= 64 {
            self.samples.drain(..32);
            self.hint = 0;
        }
        self.samples.push(s);
        self.latest_slope = self.slope(self.samples.len() - 1);
        Ok(())
    }

    /// How many samples showed the stream clock going back (see `went_back`).
    pub fn went_back(&self) -> u64 {
        self.went_back
    }

    pub fn has_sample(&self) -> bool {
        !self.samples.is_empty() || self.domain == ClockDomain::MonotonicNs
    }

    /// Offset realtime − monotonic from the first sample (for reporting
    /// windows as UNIX times), if any.
    pub fn realtime_offset(&self) -> Option<i128> {
        self.samples.first().map(|s| s.realtime_ns as i128 - s.monotonic_ns as i128)
    }

    /// Nanoseconds per tick between two samples (or from ticks_per_sec).
    fn slope(&self, i: usize) -> f64 {
        if i + 1 < self.samples.len() {
            let (a, b) = (&self.samples[i], &self.samples[i + 1]);
            (b.monotonic_ns - a.monotonic_ns) as f64 / (b.ticks - a.ticks) as f64
        } else if i > 0 {
            self.slope(i - 1)
        } else if self.ticks_per_sec > 0 {
            1e9 / self.ticks_per_sec as f64
        } else {
            1.0
        }
    }

    /// Converts a duration in ticks to ns with the latest slope.
    pub fn span_ns(&self, ticks: u64) -> Ns {
        match self.domain {
            ClockDomain::MonotonicNs => ticks,
            ClockDomain::Tsc => (ticks as f64 * self.latest_slope) as Ns,
        }
    }

    /// Maps stream ticks to host CLOCK_MONOTONIC ns.
    #[inline]
    pub fn to_ns(&mut self, ticks: u64) -> Result<Ns, ClockError> {
        if let Some(c) = self.seg {
            if ticks >= c.lo && ticks < c.hi {
                return Ok(Self::map(c.base_ns, ticks.wrapping_sub(c.lo), c.slope));
            }
        }
        self.search_ns(ticks)
    }

    /// The segment of the last conversion as (lo, hi, base, slope): ticks in
    /// `[lo, hi)` convert with [`Clock::map`] (`(1, 0, ..)`: none), for a
    /// caller converting many timestamps in a row.
    pub fn segment(&self) -> (u64, u64, f64, f64) {
        self.seg.map_or((1, 0, 0.0, 0.0), |c| (c.lo, c.hi, c.base_ns, c.slope))
    }

    /// `to_ns` within a segment from [`Clock::segment`].
    #[inline(always)]
    pub fn map(base_ns: f64, d: u64, slope: f64) -> Ns {
        // i64 keeps the hot path free of 128-bit float conversion.
        let ns = base_ns + d as i64 as f64 * slope;
        if ns <= 0.0 {
            0
        } else if ns < 9.0e18 {
            // The same value as `as Ns` here, without its u64 range fix-ups.
            ns as i64 as Ns
        } else {
            ns as Ns
        }
    }

    fn search_ns(&mut self, ticks: u64) -> Result<Ns, ClockError> {
        if self.domain == ClockDomain::MonotonicNs {
            return Ok(ticks);
        }
        let n = self.samples.len();
        if n == 0 {
            return Err(ClockError::NoSample);
        }
        // Find the segment [i, i+1] holding `ticks`; conversions come in
        // increasing order, so the hint is nearly always right.
        let mut i = self.hint.min(n - 1);
        if self.samples[i].ticks > ticks {
            i = self.samples.partition_point(|s| s.ticks <= ticks).saturating_sub(1);
        } else {
            while i + 1 < n && self.samples[i + 1].ticks <= ticks {
                i += 1;
            }
        }
        // Only when a conversion leaves the cached segment (once per sample
        // interval): the division is not on the per-record path.
        let slope = self.slope(i);
        self.hint = i;
        let s = &self.samples[i];
        if s.ticks <= ticks {
            let hi = self.samples.get(i + 1).map_or(u64::MAX, |x| x.ticks);
            self.seg = Some(Segment { lo: s.ticks, hi, base_ns: s.monotonic_ns as f64, slope });
        }
        Ok(Self::map(s.monotonic_ns as f64, ticks.wrapping_sub(s.ticks), slope))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(ticks: u64, ns: u64) -> ClockSample {
        ClockSample { ticks, monotonic_ns: ns, realtime_ns: ns + 1_000 }
    }

    #[test]
    fn interpolates_and_extrapolates() {
        let mut c = Clock::new(ClockDomain::Tsc, 2_000_000_000); // 2 GHz estimate
        assert_eq!(c.to_ns(5), Err(ClockError::NoSample));
        c.add(cs(1_000, 10_000)).unwrap();
        // one sample: ticks_per_sec slope (0.5 ns/tick)
        assert_eq!(c.to_ns(3_000).unwrap(), 11_000);
        c.add(cs(5_000, 14_000)).unwrap(); // 1 ns/tick between samples
        assert_eq!(c.to_ns(3_000).unwrap(), 12_000);
        c.add(cs(7_000, 20_000)).unwrap(); // 3 ns/tick
        assert_eq!(c.to_ns(6_000).unwrap(), 17_000);
        // past the last sample: last slope
        assert_eq!(c.to_ns(8_000).unwrap(), 23_000);
        // before the first: first slope, clamped at 0
        assert_eq!(c.to_ns(0).unwrap(), 9_000);
        assert_eq!(c.span_ns(10), 30);
        assert_eq!(c.realtime_offset(), Some(1_000));
    }

    proptest::proptest! {
        /// Converting in a row (through the cached segment) gives what a
        /// fresh search gives, between, before and far past the samples,
        /// near the top of u64 too; and `span_ns` uses the last slope.
        #[test]
        fn the_cached_segment_converts_like_a_fresh_search(
            base in proptest::prop_oneof![0u64..1 << 40, (7u64 << 60)..(8u64 << 60), ((1u64 << 63) - (1 << 40))..(1u64 << 63)],
            // (Between a fifth and five times the nominal rate.)
            steps in proptest::collection::vec((1u64..1 << 32, 200u64..5_000), 1..4),
            mut at in proptest::collection::vec(proptest::prop_oneof![0u64..1 << 36, proptest::num::u64::ANY], 1..40),
        ) {
            let mut samples = vec![cs(1_000, base)];
            for &(dt, rate_milli) in &steps {
                let l = *samples.last().unwrap();
                samples.push(cs(l.ticks + dt, l.monotonic_ns + dt * rate_milli / 1000));
            }
            let clock = || {
                let mut c = Clock::new(ClockDomain::Tsc, 1_000_000_000);
                for &s in &samples {
                    c.add(s).unwrap();
                }
                c
            };
            let mut c = clock();
            at.sort_unstable();
            for &ticks in &at {
                proptest::prop_assert_eq!(c.to_ns(ticks), clock().to_ns(ticks), "ticks {}", ticks);
            }
            let (a, b) = (samples[samples.len() - 2], samples[samples.len() - 1]);
            let slope = (b.monotonic_ns - a.monotonic_ns) as f64 / (b.ticks - a.ticks) as f64;
            proptest::prop_assert_eq!(c.span_ns(1 << 20), ((1u64 << 20) as f64 * slope) as Ns);
        }
    }

    #[test]
    fn monotonic_domain_is_identity_and_bad_samples_ignored() {
        let mut c = Clock::new(ClockDomain::MonotonicNs, 0);
        assert_eq!(c.to_ns(123).unwrap(), 123);
        let mut t = Clock::new(ClockDomain::Tsc, 0);
        t.add(cs(100, 100)).unwrap();
        t.add(cs(50, 200)).unwrap(); // backwards in ticks: dropped
        t.add(cs(200, 300)).unwrap();
        assert_eq!(t.to_ns(150).unwrap(), 200);
    }

    /// A sample that puts the clock's rate an order of magnitude off its
    /// nominal one (a corrupt sample behind sound checksums: found by the
    /// `ingest_stream` fuzz target, where one made a 3 KB stream span
    /// 600,000 windows) is refused, and the conversion goes on from the
    /// samples around it. With no nominal rate, the last segment's rate is
    /// the reference.
    #[test]
    fn a_sample_with_an_implausible_rate_is_refused() {
        for tps in [1_000_000_000, 0] {
            let mut c = Clock::new(ClockDomain::Tsc, tps);
            c.add(cs(1_000, 1_000)).unwrap();
            c.add(cs(2_000, 2_050)).unwrap(); // 1.05 ns/tick
            let e = c.add(cs(3_000, 500_000)).unwrap_err(); // 497.95 ns/tick
            assert!(e.ratio > 450.0, "{e:?} (nominal {tps})");
            assert!(e.to_string().contains("implausible"), "{e}");
            assert!(c.add(cs(3_000, 1_000_000_000)).is_err());
            assert!(c.add(cs(3_000, 2_060)).unwrap_err().ratio < 0.1); // nearly stopped
            c.add(cs(4_000, 4_000)).unwrap();
            assert_eq!(c.to_ns(3_000).unwrap(), 3_025);
        }
        // Only a TSC has a rate to check.
        let mut m = Clock::new(ClockDomain::MonotonicNs, 1_000_000_000);
        m.add(cs(1_000, 1_000)).unwrap();
        m.add(cs(2_000, 900_000)).unwrap();
    }
}
