//! The clock records are stamped with: the TSC where it is invariant (one
//! `rdtsc`, no fences), CLOCK_MONOTONIC otherwise.

use ringlog::{ClockDomain, ClockSample};

/// Reads the time-stamp counter. No `lfence`/`rdtscp`: the probe wants the
/// cheapest read, and the few cycles of reordering it allows are far below
/// the durations the sidecar reasons about.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` exists on every x86_64 CPU and has no memory effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub fn rdtsc() -> u64 {
    monotonic_ns()
}

/// Whether the CPU says its TSC runs at a constant rate in all power states
/// (CPUID leaf 0x8000_0007, EDX bit 8), so ticks can stand for time.
#[cfg(target_arch = "x86_64")]
pub fn invariant_tsc() -> bool {
    use core::arch::x86_64::__cpuid;
    // Leaf 0x8000_0000 reports the highest extended leaf; check it before
    // reading 0x8000_0007.
    if __cpuid(0x8000_0000).eax < 0x8000_0007 {
        return false;
    }
    __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

#[cfg(not(target_arch = "x86_64"))]
pub fn invariant_tsc() -> bool {
    false
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids used are
    // ones Linux always provides.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CPU time of the calling thread.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Which clock a probe stamps with; fixed for the life of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Tsc,
    Monotonic,
}

impl Source {
    /// The clock `PROBE_CLOCK` (`v`) names, or the detected one when unset;
    /// a value that names no clock is an error naming it.
    pub fn with_setting(v: Option<&str>) -> Result<Source, String> {
        match v {
            Some("monotonic") => Ok(Source::Monotonic),
            Some("tsc") => Ok(Source::Tsc),
            None => Ok(Source::detected()),
            Some(v) => Err(format!("PROBE_CLOCK: {v:?} is neither `tsc` nor `monotonic`")),
        }
    }

    /// The TSC where CPUID says it is invariant, else CLOCK_MONOTONIC.
    /// (`PROBE_CLOCK=monotonic` or `=tsc` overrides the detection, the
    /// latter for hosts, such as some hypervisors and valgrind, that hide
    /// the flag on a TSC that is in fact invariant.)
    fn detected() -> Source {
        if invariant_tsc() {
            Source::Tsc
        } else {
            Source::Monotonic
        }
    }

    #[inline(always)]
    pub fn now(self) -> u64 {
        match self {
            Source::Tsc => rdtsc(),
            Source::Monotonic => monotonic_ns(),
        }
    }

    pub fn domain(self) -> ClockDomain {
        match self {
            Source::Tsc => ClockDomain::Tsc,
            Source::Monotonic => ClockDomain::MonotonicNs,
        }
    }

    /// `ns` in this clock's ticks, for a threshold the workers compare
    /// durations with. The TSC's rate is measured here over 1 ms (its read
    /// error, tens of ns, is some 10^-5 of that: ample for a threshold);
    /// the writer's finer calibration comes later, off this thread.
    pub fn ns_to_ticks(self, ns: u64) -> u64 {
        if ns == 0 || self == Source::Monotonic {
            return ns;
        }
        let a = self.sample();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let b = self.sample();
        let ticks = ns as u128 * ticks_per_sec(&a, &b) as u128 / 1_000_000_000;
        ticks.clamp(1, u64::MAX as u128) as u64
    }

    /// Reads the stream clock, CLOCK_MONOTONIC and CLOCK_REALTIME together.
    /// The ticks are the midpoint of two reads around the system clocks, so
    /// the sample's error is half the read time.
    pub fn sample(self) -> ClockSample {
        let t0 = self.now();
        let monotonic_ns = monotonic_ns();
        let realtime_ns = realtime_ns();
        let t1 = self.now();
        ClockSample { ticks: t0 + (t1.wrapping_sub(t0) / 2), monotonic_ns, realtime_ns }
    }
}

/// Ticks per second from two samples (the writer takes them some tens of
/// milliseconds apart at start, then keeps sampling so readers can refine).
pub fn ticks_per_sec(a: &ClockSample, b: &ClockSample) -> u64 {
    let dt = b.monotonic_ns.saturating_sub(a.monotonic_ns);
    if dt == 0 {
        return 1_000_000_000;
    }
    ((b.ticks.wrapping_sub(a.ticks)) as u128 * 1_000_000_000 / dt as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_matches_the_system_clock() {
        let src = Source::detected();
        let a = src.sample();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = src.sample();
        let tps = ticks_per_sec(&a, &b);
        // A TSC runs at 0.1 to 10 GHz; the monotonic fallback at exactly 1 GHz.
        assert!((100_000_000..10_000_000_000).contains(&tps), "ticks/s {tps}");
        if src == Source::Monotonic {
            assert!(tps.abs_diff(1_000_000_000) < 10_000_000, "ticks/s {tps}");
        }
        assert!(b.ticks > a.ticks && b.realtime_ns > a.realtime_ns);
    }

    #[test]
    fn the_clock_setting_names_a_clock_or_is_refused() {
        assert_eq!(Source::with_setting(Some("tsc")), Ok(Source::Tsc));
        assert_eq!(Source::with_setting(Some("monotonic")), Ok(Source::Monotonic));
        assert_eq!(Source::with_setting(None), Ok(Source::detected()));
        let e = Source::with_setting(Some("rdtsc")).unwrap_err();
        assert_eq!(e, "PROBE_CLOCK: \"rdtsc\" is neither `tsc` nor `monotonic`");
    }

    #[test]
    fn threshold_conversion() {
        let src = Source::detected();
        assert_eq!(src.ns_to_ticks(0), 0);
        let t = src.ns_to_ticks(1_000_000);
        // 1 ms at 0.1 to 10 GHz.
        assert!((100_000..10_000_000).contains(&t), "ticks {t}");
        assert_eq!(Source::Monotonic.ns_to_ticks(20_000), 20_000);
    }
}
