//! What one live sidecar holds for the connections it serves, at most
//! ([`Limits`]); what those limits refused ([`ConnCounts`]); and error
//! lines that may come in floods, said at a bounded rate ([`RateLimited`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The limits of `sidecar run` on its connections (flags of the same names).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections open at once; one more is accepted and closed at once
    /// (`--max-connections`).
    pub max_connections: usize,
    /// A connection that has not sent a Hello frame by then, everything it
    /// sent having been read, is closed (`--hello-timeout`).
    pub hello_timeout: Duration,
    /// Bytes read off one connection and waiting for its analysis worker;
    /// at the limit the socket is not read until the worker takes some, so
    /// the probe's socket fills and the probe counts what it cannot send
    /// (`--max-buffered`).
    pub max_buffered: usize,
    /// Bytes buffered over all connections together, at most: without it
    /// the worst case is `max_connections` × `max_buffered` (64 GB by
    /// default). At the limit no connection is read until the analysis
    /// takes some (`--max-buffered-total`).
    pub max_buffered_total: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 1024,
            hello_timeout: Duration::from_secs(10),
            max_buffered: 64 << 20,
            max_buffered_total: 256 << 20,
        }
    }
}

impl Limits {
    /// What one connection holding `own` bytes may buffer at most, when
    /// all hold `total`: its own limit, or less when the total is near its
    /// own.
    pub fn room_for(&self, own: usize, total: usize) -> usize {
        self.max_buffered.min(own.saturating_add(self.max_buffered_total.saturating_sub(total)))
    }
}

/// File descriptors the process needs besides its connections' (outputs,
/// timely's, the listener, standard streams).
const OTHER_FDS: u64 = 64;

/// Raises this process's soft limit of open files (often 1024) towards
/// its hard limit, to hold `max_connections` connections; the limit it
/// has then. A limit still too low is the caller's to say: past it,
/// connections wait in the listener's queue (see `IoThread::next_pending`).
pub fn raise_open_files_limit(max_connections: usize) -> std::io::Result<u64> {
    let want = (max_connections as u64).saturating_add(OTHER_FDS);
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit struct, which `lim` is.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur >= want as libc::rlim_t {
        return Ok(lim.rlim_cur as u64);
    }
    let raised = libc::rlimit { rlim_cur: (want as libc::rlim_t).min(lim.rlim_max), rlim_max: lim.rlim_max };
    // SAFETY: setrlimit reads one valid rlimit struct; a soft limit up to
    // the hard one needs no privilege, and only this process's later
    // open(2)/accept(2) calls see it.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(raised.rlim_cur as u64)
}

/// What the I/O thread did with connections, for the closing line. (Atomics:
/// the I/O thread counts, the closing line reads.)
#[derive(Debug, Default)]
pub struct ConnCounts {
    pub accepted: AtomicU64,
    /// Closed at once: `--max-connections` were open.
    pub refused: AtomicU64,
    /// Closed without a Hello by `--hello-timeout`.
    pub no_hello: AtomicU64,
    /// Times a connection's buffer reached `--max-buffered` (its socket then
    /// waits).
    pub buffer_full: AtomicU64,
    /// Times all buffers together reached `--max-buffered-total` (every
    /// socket then waits).
    pub total_full: AtomicU64,
    /// Windows of a stream closed by the wall clock while its connection
    /// still held a backlog older than `--max-backlog` (counted by the
    /// analysis workers, which read the connections): the backlog's
    /// records for them come late, to revise them or be counted as late.
    pub backlog_cut: AtomicU64,
}

impl ConnCounts {
    pub(super) fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// "N connections (R refused over --max-connections, …)", for the
    /// closing line.
    pub fn summary(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "{} connections ({} refused over --max-connections, {} closed without a Hello by --hello-timeout, {} times a buffer reached --max-buffered, {} times all reached --max-buffered-total, {} windows closed over a backlog unread for longer than --max-backlog)",
            get(&self.accepted),
            get(&self.refused),
            get(&self.no_hello),
            get(&self.buffer_full),
            get(&self.total_full),
            get(&self.backlog_cut)
        )
    }
}

/// Error lines of one kind said at most [`RateLimited::BURST`] times per
/// [`RateLimited::PERIOD`]; the others are counted and said as one line
/// when the next period begins: a port scanner or a misconfigured client
/// must not flood standard error (or the journal) with one line per
/// connection.
pub struct RateLimited {
    /// What the held lines are ("connections refused").
    what: &'static str,
    period_start: Option<Instant>,
    said: u32,
    held: u64,
}

impl RateLimited {
    pub const BURST: u32 = 10;
    pub const PERIOD: Duration = Duration::from_secs(10);

    pub const fn new(what: &'static str) -> RateLimited {
        RateLimited { what, period_start: None, said: 0, held: 0 }
    }

    /// Says `line()` (with `crate::say!`) unless this period's lines are
    /// used up; then it is counted.
    pub fn say(&mut self, line: impl FnOnce() -> String) {
        self.say_at(Instant::now(), line);
    }

    fn say_at(&mut self, now: Instant, line: impl FnOnce() -> String) {
        if self.period_start.is_none_or(|s| now.duration_since(s) >= Self::PERIOD) {
            self.flush();
            self.period_start = Some(now);
            self.said = 0;
        }
        if self.said < Self::BURST {
            self.said += 1;
            crate::say!("{}", line());
        } else {
            self.held += 1;
        }
    }

    /// Says how many lines were held back, if any.
    pub fn flush(&mut self) {
        if self.held > 0 {
            crate::say!(
                "sidecar: … and {} more {} not shown (at most {} lines per {} s)",
                self.held,
                self.what,
                Self::BURST,
                Self::PERIOD.as_secs()
            );
            self.held = 0;
        }
    }

    /// Lines held back so far in this period.
    pub fn held(&self) -> u64 {
        self.held
    }
}

impl Drop for RateLimited {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten lines are said per period, the rest held and counted; a new
    /// period says the held count (and resets it) and says lines again.
    #[test]
    fn a_flood_of_lines_is_cut_to_a_burst_per_period() {
        let mut r = RateLimited::new("test lines");
        let t0 = Instant::now();
        let mut said = 0;
        for i in 0..100 {
            r.say_at(t0 + Duration::from_millis(i), || {
                said += 1;
                String::new()
            });
        }
        assert_eq!((said, r.held()), (10, 90));
        r.say_at(t0 + RateLimited::PERIOD + Duration::from_millis(1), || {
            said += 1;
            String::new()
        });
        assert_eq!((said, r.held()), (11, 0));
    }

    #[test]
    fn the_open_files_limit_is_raised_to_hold_the_connections() {
        let have = raise_open_files_limit(100).unwrap();
        assert!(have >= 100 + OTHER_FDS, "{have}");
    }

    #[test]
    fn the_summary_names_each_limit_with_its_count() {
        let c = ConnCounts::default();
        for _ in 0..3 {
            ConnCounts::add(&c.accepted);
        }
        ConnCounts::add(&c.refused);
        ConnCounts::add(&c.no_hello);
        ConnCounts::add(&c.no_hello);
        c.backlog_cut.fetch_add(4, Ordering::Relaxed);
        assert_eq!(
            c.summary(),
            "3 connections (1 refused over --max-connections, 2 closed without a Hello by --hello-timeout, 0 times a buffer reached --max-buffered, 0 times all reached --max-buffered-total, 4 windows closed over a backlog unread for longer than --max-backlog)"
        );
    }

    #[test]
    fn a_connection_has_room_up_to_its_own_limit_and_the_total() {
        let l = Limits { max_buffered: 100, max_buffered_total: 250, ..Limits::default() };
        assert_eq!(l.room_for(0, 0), 100, "its own limit first");
        assert_eq!(l.room_for(40, 200), 90, "what it holds and what the total leaves");
        assert_eq!(l.room_for(40, 250), 40, "at the total: nothing more");
        assert_eq!(l.room_for(0, 400), 0, "over the total (the limit lowered): nothing");
    }
}
