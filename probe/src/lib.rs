//! The engine-facing half of the tracer: per-worker event rings stamped with
//! the TSC (CLOCK_MONOTONIC where it is not invariant), inactive-schedule
//! elision at the source, and one writer thread that ships [`ringlog`]
//! frames to a sidecar (Unix socket or TCP) or a file, their records
//! zstd-compressed except into a Unix socket (`PROBE_COMPRESS` or
//! [`Builder::compression`] to choose).
//!
//! ```no_run
//! # fn main() -> Result<(), probe::Error> {
//! let probe = probe::Probe::builder()
//!     .sink(probe::Sink::from_env_or(probe::Sink::file("trace.ringlog")))
//!     .ring_capacity(1 << 16)
//!     .on_full(probe::OnFull::Drop)
//!     .start()?;
//! let mut w = probe.worker(0);
//! w.operator(1, "Map", &[0, 3]);
//! w.schedule_start(1);
//! w.message_send(7, 1, 0, 100);
//! w.schedule_stop(1);
//! w.schedule_start(1);
//! w.schedule_stop(1); // nothing in between, and short: elided and counted
//! w.step();
//! drop(w);
//! let stats = probe.shutdown()?;
//! assert_eq!(stats.elided(), 1);
//! # Ok(()) }
//! ```
//!
//! Cost: one clock read and one 32-byte record per event; an elided
//! schedule pair costs two clock reads and no record (a pair with nothing
//! in between is elided only if it was also short, [`Builder::elide_below`]:
//! an operator that computes silently for longer is published); a
//! worker-local message
//! half (to or from the worker itself) costs a count, and a clock read
//! only as the first event of an execution
//! ([`Builder::keep_local_messages`]); a disabled probe (`PROBE_SINK=off`,
//! [`Probe::disabled`]) costs one predictable branch.

mod clock;
mod io;
mod sink;
mod stats;
mod worker;
mod writer;

#[cfg(feature = "timely")]
pub mod timely;

#[cfg(feature = "differential")]
pub mod differential;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use clock::{invariant_tsc, monotonic_ns, rdtsc, realtime_ns};
pub use io::IoBackend;
pub use ringlog::Compression;
pub use sink::Sink;
pub use stats::{Stats, WorkerStats};
pub use worker::{AdapterCost, OnFull, WorkerProbe};

/// Why a probe could not start or stop.
#[derive(Debug)]
pub enum Error {
    /// `PROBE_SINK` (or the sink given) could not be read.
    InvalidSink(String),
    /// A setting is out of range.
    Config(String),
    /// The writer thread could not be started.
    Spawn(std::io::Error),
    /// The writer thread panicked.
    WriterPanicked,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::InvalidSink(s) => {
                write!(f, "invalid probe sink {s:?}: expected unix:PATH, tcp:HOST:PORT, file:PATH or off")
            }
            Error::Config(s) => write!(f, "invalid probe configuration: {s}"),
            Error::Spawn(e) => write!(f, "could not start the probe's writer thread: {e}"),
            Error::WriterPanicked => write!(f, "the probe's writer thread panicked"),
        }
    }
}

impl std::error::Error for Error {}

/// Configures and starts a [`Probe`].
#[derive(Clone, Debug)]
pub struct Builder {
    sink: Sink,
    ring_capacity: Option<usize>,
    on_full: OnFull,
    keep_local: Option<bool>,
    io: IoBackend,
    idle: Duration,
    writer_core: Option<usize>,
    workers: u32,
    program: Option<String>,
    host_id: Option<u64>,
    compression: Option<Compression>,
    elide_below: Option<Duration>,
    stats_frames: Option<bool>,
}

impl Builder {
    /// Where frames go. Default: `Sink::from_env_or(Sink::Off)`.
    pub fn sink(mut self, sink: Sink) -> Self {
        self.sink = sink;
        self
    }

    /// Records per worker ring, rounded up to a power of two. Without this
    /// call: `PROBE_RING_CAPACITY` if set, else 65536 (2 MiB per worker).
    pub fn ring_capacity(mut self, records: usize) -> Self {
        self.ring_capacity = Some(records);
        self
    }

    pub fn on_full(mut self, policy: OnFull) -> Self {
        self.on_full = policy;
        self
    }

    /// Write worker-local message halves (a message whose sender and
    /// receiver are the same worker) like any other. Default: they are
    /// counted ([`WorkerStats::local_messages`]) but not written, because the
    /// analysis has no use for them (Sager §5.2: the activity graph has no
    /// worker-local messages; program order already links the two halves),
    /// and in a timely program they are most of the records (pagerank
    /// 71 %, bfs 57 %). They cost a count and no record then (a clock
    /// read only when one is the first event of an operator's execution,
    /// whose held start it publishes: the operator still shows as having
    /// done something). Keep
    /// them to see them in `sidecar dump`, or for an analysis of your own.
    /// Without this call: `PROBE_LOCAL_MESSAGES` (`keep` or `elide`) if set,
    /// else elide.
    pub fn keep_local_messages(mut self, keep: bool) -> Self {
        self.keep_local = Some(keep);
        self
    }

    /// Elide a schedule start/stop pair with nothing in between (no
    /// message, progress, span or mark) only if it lasted less than `d`;
    /// a longer one is published like any other execution, since an
    /// operator that computes without sending or reading anything (a
    /// fueled merge, a partition crunched before the next send) did work
    /// that its absence would turn into a gap in the trace. `ZERO`
    /// publishes every pair. Elided pairs are counted, and their number and
    /// time travel in the next `Step`. Without this call:
    /// `PROBE_ELIDE_BELOW_NS` (nanoseconds) if set, else 20 µs (on the
    /// four example workloads, above the 99.9th percentile of inactive
    /// pairs: their elision share stays where it was). At most 1 s. The
    /// threshold is converted to clock ticks at [`Builder::start`], which
    /// measures the TSC's rate for it over 1 ms.
    pub fn elide_below(mut self, d: Duration) -> Self {
        self.elide_below = Some(d);
        self
    }

    /// Force the write(2) path (also `PROBE_IO=syscall`).
    pub fn io_backend(mut self, io: IoBackend) -> Self {
        self.io = io;
        self
    }

    /// How long the writer sleeps when it found nothing to do (default
    /// 10 ms: larger batches, fewer wake-ups; the data is at most that much
    /// later at the sidecar).
    pub fn idle_interval(mut self, d: Duration) -> Self {
        self.idle = d;
        self
    }

    /// Pin the writer thread to a core.
    pub fn writer_core(mut self, core: usize) -> Self {
        self.writer_core = Some(core);
        self
    }

    /// How many workers the engine runs (tells readers when all are there).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n as u32;
        self
    }

    /// The host id written in every frame (default: `PROBE_HOST_ID`, else
    /// the machine-id hash). Lets one machine play another host in tests of
    /// clock synchronization.
    pub fn host_id(mut self, id: u64) -> Self {
        self.host_id = Some(id);
        self
    }

    /// How Records frames are compressed. Default: `PROBE_COMPRESS`
    /// (`zstd` or `none`) if set, else none for a Unix socket (a sidecar on
    /// this machine: the bytes only cross memory, and compressing would
    /// cost the engine's CPU 2.6× the writer's work per record) and zstd
    /// for files and TCP (where bytes cost).
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = Some(c);
        self
    }

    /// Send the probe's figures about itself ([`Stats`]: produced,
    /// written, lost, elided, bytes, the writer's CPU, the adapter's and
    /// the engine's logging cost) in the stream, as a Stats frame about
    /// once a second and once more at shutdown, so that a reader reports
    /// what tracing cost without the program printing anything. About 150
    /// bytes and 1–2 µs of the writer's CPU a second. Without this call:
    /// `PROBE_STATS` (`on` or `off`) if set, else on. Turn it off only for
    /// a reader older than the Stats frame, which stops reading a stream
    /// at its first one ("unknown frame kind 7").
    pub fn stats_frames(mut self, on: bool) -> Self {
        self.stats_frames = Some(on);
        self
    }

    /// The program name readers show (default: this executable's name).
    pub fn program(mut self, name: impl Into<String>) -> Self {
        self.program = Some(name.into());
        self
    }

    pub fn start(self) -> Result<Probe, Error> {
        match &self.sink {
            Sink::Off => return Ok(Probe::disabled()),
            Sink::Invalid(s) => return Err(Error::InvalidSink(s.clone())),
            _ => {}
        }
        let ring_capacity = ring_capacity(self.ring_capacity, std::env::var("PROBE_RING_CAPACITY").ok().as_deref())?;
        let compression = match self.compression {
            Some(c) => c,
            None => match std::env::var("PROBE_COMPRESS") {
                Ok(v) => v.parse().map_err(|e| Error::Config(format!("PROBE_COMPRESS: {e}")))?,
                Err(_) if matches!(self.sink, Sink::Unix(_)) => Compression::None,
                Err(_) => Compression::Zstd,
            },
        };
        let keep_local = match self.keep_local {
            Some(k) => k,
            None => keep_local_from(std::env::var("PROBE_LOCAL_MESSAGES").ok().as_deref())?,
        };
        let elide_below_ns = elide_below_ns(self.elide_below, std::env::var("PROBE_ELIDE_BELOW_NS").ok().as_deref())?;
        let io = io_backend_from(self.io, std::env::var("PROBE_IO").ok().as_deref())?;
        let stats_frames = match self.stats_frames {
            Some(on) => on,
            None => stats_frames_from(std::env::var("PROBE_STATS").ok().as_deref())?,
        };
        let clock = clock::Source::with_setting(std::env::var("PROBE_CLOCK").ok().as_deref()).map_err(Error::Config)?;
        let elide_below = clock.ns_to_ticks(elide_below_ns);
        let host_name = ringlog::host_name();
        let cfg = writer::Config {
            sink: self.sink,
            io,
            idle: self.idle,
            core: self.writer_core,
            clock,
            host: match self.host_id {
                Some(h) => h,
                None => host_id(&host_name)?,
            },
            host_name,
            program: self.program.unwrap_or_else(program_name),
            workers: self.workers,
            compression,
            stats_frames,
        };
        let tps = if clock == clock::Source::Monotonic { 1_000_000_000 } else { 0 };
        let shared = Arc::new(writer::Shared {
            new_streams: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            stats: Mutex::new(Stats::default()),
            ticks_per_sec: Arc::new(AtomicU64::new(tps)),
        });
        let alive = Arc::new(AtomicBool::new(true));
        let (s2, a2) = (shared.clone(), alive.clone());
        let handle = std::thread::Builder::new()
            .name("probe-writer".into())
            .spawn(move || {
                // Cleared however the thread ends (a panic included), so a
                // worker blocked on a full ring never waits for a writer
                // that is gone.
                struct Alive(Arc<AtomicBool>);
                impl Drop for Alive {
                    fn drop(&mut self) {
                        self.0.store(false, Ordering::Release);
                    }
                }
                let _alive = Alive(a2);
                writer::Writer::new(cfg, s2).run()
            })
            .map_err(Error::Spawn)?;
        Ok(Probe {
            inner: Some(Inner {
                shared,
                alive,
                handle: Some(handle),
                clock,
                capacity: ring_capacity,
                on_full: self.on_full,
                keep_local,
                elide_below,
                used: AtomicU64::new(0),
            }),
        })
    }
}

struct Inner {
    shared: Arc<writer::Shared>,
    alive: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Stats>>,
    clock: clock::Source,
    capacity: usize,
    on_full: OnFull,
    keep_local: bool,
    /// The elision threshold in clock ticks.
    elide_below: u64,
    used: AtomicU64,
}

/// A running probe: one writer thread, any number of worker handles.
pub struct Probe {
    inner: Option<Inner>,
}

impl Probe {
    pub fn builder() -> Builder {
        Builder {
            sink: Sink::from_env_or(Sink::Off),
            ring_capacity: None,
            on_full: OnFull::Drop,
            keep_local: None,
            io: IoBackend::Auto,
            idle: Duration::from_millis(10),
            writer_core: None,
            workers: 0,
            program: None,
            host_id: None,
            compression: None,
            elide_below: None,
            stats_frames: None,
        }
    }

    /// A probe that records nothing: every worker call is one branch.
    pub fn disabled() -> Probe {
        Probe { inner: None }
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The handle for engine worker `index` (a stream of its own). Call once
    /// per worker thread; the handle moves to that thread.
    pub fn worker(&self, index: usize) -> WorkerProbe {
        let Some(inner) = &self.inner else {
            return WorkerProbe::disabled();
        };
        let writer = inner.handle.as_ref().expect("running").thread().clone();
        let (prod, cons) = ringlog::ring::with_capacity(inner.capacity);
        let shared = Arc::new(worker::WorkerShared {
            index: index as u32,
            lost: AtomicU64::new(0),
            elided: AtomicU64::new(0),
            local: AtomicU64::new(0),
            adapter_ticks: AtomicU64::new(0),
            adapter: AtomicBool::new(false),
            engine_events: AtomicU64::new(0),
            engine_log_ns: AtomicU64::new(0),
            engine_flushes: AtomicU64::new(0),
            engine_flush_ns: AtomicU64::new(0),
            adapter_idle_ticks: AtomicU64::new(0),
            engine_idle_flushes: AtomicU64::new(0),
            engine_idle_flush_ns: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            meta: Mutex::new(Vec::new()),
            writer_alive: inner.alive.clone(),
            writer,
            ticks_per_sec: inner.shared.ticks_per_sec.clone(),
        });
        inner.used.fetch_add(1, Ordering::Relaxed);
        inner.shared.new_streams.lock().unwrap_or_else(|p| p.into_inner()).push((shared.clone(), cons));
        WorkerProbe::new(prod, inner.clock, inner.on_full, inner.keep_local, inner.elide_below, shared)
    }

    /// A snapshot of the accounting so far (updated by the writer each pass).
    pub fn stats(&self) -> Stats {
        match &self.inner {
            Some(i) => i.shared.stats.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            None => Stats { io_backend: "none", sink: "off".into(), ..Stats::default() },
        }
    }

    /// Flushes everything workers published and stops the writer. Workers
    /// should be dropped first; one still alive keeps recording into a ring
    /// nobody drains (losing, counted, under `OnFull::Drop`).
    pub fn shutdown(mut self) -> Result<Stats, Error> {
        self.stop()
    }

    fn stop(&mut self) -> Result<Stats, Error> {
        let Some(mut inner) = self.inner.take() else {
            return Ok(self.stats());
        };
        inner.shared.stop.store(true, Ordering::Release);
        let h = inner.handle.take().expect("running");
        h.thread().unpark();
        h.join().map_err(|_| Error::WriterPanicked)
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The host id frames carry: `PROBE_HOST_ID` if set (`0x…` hex, 16 hex
/// digits, or decimal), else `ringlog::host_id` (FNV-1a of /etc/machine-id,
/// or of the host name where there is none; the sidecar computes the same).
/// The override lets one machine play several hosts (clock-sync tests).
fn host_id(host_name: &str) -> Result<u64, Error> {
    match std::env::var("PROBE_HOST_ID") {
        Ok(v) => ringlog::parse_host_id(&v).map_err(|e| Error::Config(format!("PROBE_HOST_ID: {e}"))),
        Err(_) => Ok(ringlog::host_id(host_name)),
    }
}

fn program_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".into())
}

/// Records per worker ring: the builder's, else `PROBE_RING_CAPACITY`'s
/// (`env`), else 65536; refused outside 2..=2^28, naming the variable when
/// it came from there.
fn ring_capacity(explicit: Option<usize>, env: Option<&str>) -> Result<usize, Error> {
    let (n, from) = match (explicit, env) {
        (Some(n), _) => (n, ""),
        (None, None) => (DEFAULT_RING_CAPACITY, ""),
        (None, Some(v)) => (
            v.trim().parse().map_err(|_| {
                Error::Config(format!("PROBE_RING_CAPACITY: {v:?} is not a number of records (e.g. 65536)"))
            })?,
            "PROBE_RING_CAPACITY: ",
        ),
    };
    if !(2..=1 << 28).contains(&n) {
        return Err(Error::Config(format!("{from}ring capacity {n} is not in 2..=2^28")));
    }
    Ok(n)
}

const DEFAULT_RING_CAPACITY: usize = 1 << 16;

/// The elision threshold in ns: the builder's, else `PROBE_ELIDE_BELOW_NS`'s
/// (`env`), else [`DEFAULT_ELIDE_BELOW_NS`]; refused above 1 s, naming the
/// variable when it came from there.
fn elide_below_ns(explicit: Option<Duration>, env: Option<&str>) -> Result<u64, Error> {
    let (ns, from) = match (explicit, env) {
        (Some(d), _) => (u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), ""),
        (None, None) => (DEFAULT_ELIDE_BELOW_NS, ""),
        (None, Some(v)) => (
            v.trim().parse().map_err(|_| {
                Error::Config(format!("PROBE_ELIDE_BELOW_NS: {v:?} is not a number of nanoseconds (e.g. 20000)"))
            })?,
            "PROBE_ELIDE_BELOW_NS: ",
        ),
    };
    if ns > MAX_ELIDE_BELOW_NS {
        return Err(Error::Config(format!("{from}elision threshold {ns} ns is above 1 s")));
    }
    Ok(ns)
}

/// The default elision threshold (see [`Builder::elide_below`]).
const DEFAULT_ELIDE_BELOW_NS: u64 = 20_000;
const MAX_ELIDE_BELOW_NS: u64 = 1_000_000_000;

/// Whether to write worker-local message halves, from `PROBE_LOCAL_MESSAGES`
/// (`keep` or `elide`; unset: elide).
fn keep_local_from(v: Option<&str>) -> Result<bool, Error> {
    match v {
        Some("keep") => Ok(true),
        Some("elide") | None => Ok(false),
        Some(v) => Err(Error::Config(format!("PROBE_LOCAL_MESSAGES: {v:?} is neither `keep` nor `elide`"))),
    }
}

/// The writer's I/O: `io` as the program set it, or write(2) when
/// `PROBE_IO` (`v`) says `syscall`; `io_uring` (or unset) leaves it.
fn io_backend_from(io: IoBackend, v: Option<&str>) -> Result<IoBackend, Error> {
    match v {
        None | Some("io_uring") => Ok(io),
        Some("syscall") => Ok(IoBackend::Syscall),
        Some(v) => Err(Error::Config(format!("PROBE_IO: {v:?} is neither `io_uring` nor `syscall`"))),
    }
}

/// Whether to send Stats frames, from `PROBE_STATS` (`on` or `off`;
/// unset: on).
fn stats_frames_from(v: Option<&str>) -> Result<bool, Error> {
    match v {
        Some("on") | None => Ok(true),
        Some("off") => Ok(false),
        Some(v) => Err(Error::Config(format!("PROBE_STATS: {v:?} is neither `on` nor `off`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_backend_setting() {
        assert_eq!(io_backend_from(IoBackend::Auto, None).unwrap(), IoBackend::Auto);
        assert_eq!(io_backend_from(IoBackend::Auto, Some("io_uring")).unwrap(), IoBackend::Auto);
        assert_eq!(io_backend_from(IoBackend::Syscall, Some("io_uring")).unwrap(), IoBackend::Syscall);
        assert_eq!(io_backend_from(IoBackend::Auto, Some("syscall")).unwrap(), IoBackend::Syscall);
        let e = io_backend_from(IoBackend::Auto, Some("uring")).unwrap_err().to_string();
        assert!(e.contains("PROBE_IO: \"uring\" is neither `io_uring` nor `syscall`"), "{e}");
    }

    #[test]
    fn stats_frames_setting() {
        assert!(stats_frames_from(None).unwrap());
        assert!(stats_frames_from(Some("on")).unwrap());
        assert!(!stats_frames_from(Some("off")).unwrap());
        let e = stats_frames_from(Some("0")).unwrap_err().to_string();
        assert!(e.contains("PROBE_STATS") && e.contains("\"0\""), "{e}");
    }

    #[test]
    fn local_messages_setting() {
        assert!(!keep_local_from(None).unwrap());
        assert!(!keep_local_from(Some("elide")).unwrap());
        assert!(keep_local_from(Some("keep")).unwrap());
        let e = keep_local_from(Some("Keep")).unwrap_err().to_string();
        assert!(e.contains("PROBE_LOCAL_MESSAGES") && e.contains("\"Keep\""), "{e}");
    }

    #[test]
    fn ring_capacity_setting() {
        assert_eq!(ring_capacity(None, None).unwrap(), 1 << 16);
        assert_eq!(ring_capacity(None, Some("4096")).unwrap(), 4096);
        assert_eq!(ring_capacity(None, Some(" 1024 ")).unwrap(), 1024);
        // The builder's call wins over the environment.
        assert_eq!(ring_capacity(Some(64), Some("4096")).unwrap(), 64);
        assert_eq!(ring_capacity(Some(64), Some("4k")).unwrap(), 64);
        let e = ring_capacity(None, Some("4k")).unwrap_err().to_string();
        assert!(e.contains("PROBE_RING_CAPACITY") && e.contains("\"4k\""), "{e}");
        let e = ring_capacity(None, Some("0")).unwrap_err().to_string();
        assert!(e.contains("PROBE_RING_CAPACITY: ring capacity 0 is not in 2..=2^28"), "{e}");
        let e = ring_capacity(Some(1 << 29), None).unwrap_err().to_string();
        assert!(e.contains("ring capacity 536870912 is not in") && !e.contains("PROBE_RING_CAPACITY"), "{e}");
    }

    #[test]
    fn elide_below_setting() {
        assert_eq!(elide_below_ns(None, None).unwrap(), DEFAULT_ELIDE_BELOW_NS);
        assert_eq!(elide_below_ns(None, Some("5000")).unwrap(), 5000);
        assert_eq!(elide_below_ns(None, Some(" 0 ")).unwrap(), 0);
        assert_eq!(elide_below_ns(None, Some("1000000000")).unwrap(), 1_000_000_000);
        // The builder's call wins over the environment.
        assert_eq!(elide_below_ns(Some(Duration::from_micros(7)), Some("5000")).unwrap(), 7000);
        assert_eq!(elide_below_ns(Some(Duration::ZERO), Some("20us")).unwrap(), 0);
        for bad in ["20us", "-1", "1e4", ""] {
            let e = elide_below_ns(None, Some(bad)).unwrap_err().to_string();
            assert!(e.contains("PROBE_ELIDE_BELOW_NS") && e.contains(&format!("{bad:?}")), "{e}");
        }
        let e = elide_below_ns(None, Some("1000000001")).unwrap_err().to_string();
        assert!(e.contains("PROBE_ELIDE_BELOW_NS: elision threshold 1000000001 ns is above 1 s"), "{e}");
        let e = elide_below_ns(Some(Duration::MAX), None).unwrap_err().to_string();
        assert!(e.contains("is above 1 s") && !e.contains("PROBE_ELIDE_BELOW_NS"), "{e}");
    }

    #[test]
    fn ring_capacity_out_of_range_is_refused() {
        let e = Probe::builder().sink(Sink::file("/nonexistent/x")).ring_capacity(1).start().err().expect("refused");
        assert!(e.to_string().contains("ring capacity 1"), "{e}");
    }
}
