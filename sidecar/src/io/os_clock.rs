//! This host's clocks as the kernel keeps them: CLOCK_MONOTONIC (the
//! timeline live windows are cut on, and the one clock exchanges are stamped
//! with), CLOCK_REALTIME, and the wall clock as ns since the Unix epoch.
//!
//! The sidecar reads them itself rather than through the probe crate, which
//! would bring the probe's writer and io-uring into an analyzer (issue 30).
//! The reads are the probe's (`clock_gettime(2)`), so the stamps a relay or
//! a reference sidecar takes are on the same timeline as the probes' clock
//! samples.

/// A clock's current value in ns, as `clock_gettime(2)` reads it.
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec that lives across the call,
    // and the only ids passed (CLOCK_MONOTONIC, CLOCK_REALTIME, by the two
    // functions below) are clocks every Linux provides, so the call fills it.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC, ns: what live windows are cut on and clock exchanges
/// stamped with.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME, ns since the Unix epoch.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// The wall clock, in ns since the Unix epoch.
pub fn now_unix_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_backwards() {
        let mut last = monotonic_ns();
        assert!(last > 0);
        for _ in 0..100_000 {
            let now = monotonic_ns();
            assert!(now >= last, "CLOCK_MONOTONIC went from {last} to {now}");
            last = now;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(monotonic_ns() >= last + 2_000_000, "a 2 ms sleep shows on CLOCK_MONOTONIC");
    }

    #[test]
    fn realtime_is_the_system_time() {
        let before = now_unix_ns();
        let realtime = realtime_ns() as i128;
        let after = now_unix_ns();
        // (Both read CLOCK_REALTIME: they differ by the reads' own time,
        // or by a clock step between them; a second is generous for both.)
        assert!(before - 1_000_000_000 <= realtime && realtime <= after + 1_000_000_000, "{before} {realtime} {after}");
        assert!(realtime > 1_600_000_000 * 1_000_000_000, "after 2020: {realtime}");
    }
}
