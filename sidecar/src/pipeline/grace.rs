//! Live: how long past a window's end a silent stream's data is waited for
//! before the window closes without it. On a busy machine the probe's
//! writer sends its frames later than on a quiet one, and a fixed grace
//! then closes windows whose data is still on its way ("late data"). So
//! the grace follows what the streams show: each window that lost data to
//! lateness doubles it, up to a bound, and once raised it stays (a machine
//! busy once is likely busy again). `--grace` given on the command line
//! fixes it instead. Late data for a window that can still be revised
//! ([`crate::pipeline::revise`]) raises it too: that window is corrected,
//! and the longer grace makes the next windows' first reports whole (on a
//! loaded machine, a window left to revision reported no wait at first).
//! A stream whose data the sidecar has but has not read yet is not silent:
//! its windows wait longer, up to `--max-backlog` ([`deadline`]).

use crate::analysis::model::Ns;

/// How long a stream whose connection still holds bytes not yet read holds
/// its windows back past the grace, by default (`--max-backlog`): the
/// bounded read of a worker that was busy stopped at its budget, and what
/// it has not read yet is data the sidecar has, not late data.
pub const DEFAULT_MAX_BACKLOG_NS: Ns = 2_000_000_000;

/// The longest `--max-backlog` accepted: windows held that long hold every
/// other stream's fragments meanwhile.
pub const MAX_MAX_BACKLOG_NS: Ns = 60_000_000_000;

/// Live deadline on a host's timeline (its `now`, ns): streams silent since
/// before it close their windows up to it. `now - grace`, or, for a stream
/// whose connection has a backlog (its last read stopped at the read
/// budget with bytes left), `max_backlog` earlier: its windows wait for
/// the backlog to be read, at most that long.
pub fn deadline(now: i128, grace: Ns, backlog: bool, max_backlog: Ns) -> i128 {
    now - grace as i128 - if backlog { max_backlog as i128 } else { 0 }
}

/// The longest grace the adaptation reaches: windows held longer wait this
/// long for their report, and hold their fragments in memory meanwhile.
pub const MAX_GRACE_NS: Ns = 5_000_000_000;

/// The grace a live run uses now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grace {
    /// Where it started: `--grace`, or the subcommand's default.
    pub base: Ns,
    /// The grace now.
    pub now: Ns,
    /// Whether it follows late data (false: `--grace` was given).
    pub adaptive: bool,
    /// Whether [`Grace::tell`] has said it.
    told: bool,
}

impl Grace {
    /// A grace that follows late data, from `base`.
    pub fn adaptive(base: Ns) -> Grace {
        Grace { base, now: base, adaptive: true, told: false }
    }

    /// A grace that stays `base` (`--grace` given).
    pub fn fixed(base: Ns) -> Grace {
        Grace { base, now: base, adaptive: false, told: false }
    }

    /// A window lost data that came too late: the grace doubles (to at
    /// most [`MAX_GRACE_NS`], never below what it was). Whether it changed.
    pub fn late(&mut self) -> bool {
        if !self.adaptive {
            return false;
        }
        let next = self.now.saturating_mul(2).clamp(self.now, MAX_GRACE_NS.max(self.base));
        let changed = next != self.now;
        self.now = next;
        changed
    }

    /// What the closing line says of it, if it moved: `the grace rose
    /// from 30 ms to 240 ms after late data`.
    pub fn said(&self) -> Option<String> {
        (self.now != self.base).then(|| {
            format!(
                "late data: the grace rose from {} ms to {} ms (--grace fixes it)",
                self.base as f64 / 1e6,
                self.now as f64 / 1e6
            )
        })
    }
}

impl Grace {
    /// [`Grace::said`], once (the run's end may be reached twice).
    pub fn tell(&mut self) -> Option<String> {
        if self.told {
            return None;
        }
        self.told = true;
        self.said()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a grace of 30 ms and a limit of 2 s, at 10 s: a stream read to
    /// the end of what its connection had closes its windows to 9.97 s; one
    /// with a backlog to 7.97 s; with the limit 0, a backlog holds nothing.
    #[test]
    fn a_backlog_holds_the_deadline_back_by_the_limit_only() {
        let s = 1_000_000_000i128;
        assert_eq!(deadline(10 * s, 30_000_000, false, 2_000_000_000), 9_970_000_000);
        assert_eq!(deadline(10 * s, 30_000_000, true, 2_000_000_000), 7_970_000_000);
        assert_eq!(deadline(10 * s, 30_000_000, true, 0), 9_970_000_000);
    }

    #[test]
    fn the_grace_doubles_on_late_data_up_to_its_bound() {
        let mut g = Grace::adaptive(30_000_000);
        assert!(g.late());
        assert_eq!(g.now, 60_000_000);
        for _ in 0..20 {
            g.late();
        }
        assert_eq!(g.now, MAX_GRACE_NS);
        assert!(!g.late());
        assert!(g.said().unwrap().contains("from 30 ms to 5000 ms"), "{:?}", g.said());
        assert!(g.tell().is_some() && g.tell().is_none(), "said once");
    }

    #[test]
    fn a_grace_given_on_the_command_line_stays() {
        let mut g = Grace::fixed(30_000_000);
        assert!(!g.late());
        assert_eq!(g.now, 30_000_000);
        assert_eq!(g.said(), None);
        // (A base above the bound is kept, not lowered.)
        let mut big = Grace::adaptive(2 * MAX_GRACE_NS);
        big.late();
        assert_eq!(big.now, 2 * MAX_GRACE_NS);
    }

    /// Property: whatever the sequence of late windows, the grace never
    /// falls and stays within [base, max(base, bound)].
    #[test]
    fn the_grace_never_falls_and_stays_bounded() {
        let mut x: u64 = 0x9e3779b97f4a7c15;
        for _ in 0..500 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let base = 1 + x % 10_000_000_000;
            let mut g = Grace::adaptive(base);
            for _ in 0..(x % 40) {
                let before = g.now;
                g.late();
                assert!(g.now >= before && g.now >= base && g.now <= MAX_GRACE_NS.max(base), "{g:?}");
            }
        }
    }
}
