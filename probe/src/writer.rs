//! The writer thread: drains every worker's ring in batches, encodes frames,
//! and writes them to the sink. It is the only place the probe does I/O.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringlog::{ClockSample, Encoder, EndStats, Hello, Meta, StreamId, PROCESS_WIDE};

use crate::clock::{self, Source};
use crate::io::{Io, IoBackend};
use crate::sink::{self, Conn, Sink};
use crate::stats::{Stats, WorkerStats};
use crate::worker::WorkerShared;

/// Records taken from one ring into one frame, at most.
const MAX_BATCH: usize = 1 << 14;
/// Bytes of frames gathered before a write is issued.
const FLUSH_BYTES: usize = 1 << 20;
const CLOCK_EVERY: Duration = Duration::from_secs(1);
/// How often the probe's figures go into the stream (a Stats frame of
/// about 150 bytes; one more at shutdown).
const STATS_EVERY: Duration = Duration::from_secs(1);
/// The start-up calibration's interval (see `Writer::calibrate`), and the
/// shorter one it ends at when the probe is stopped meanwhile.
const CALIBRATION: Duration = Duration::from_millis(20);
const CALIBRATION_STOPPED: Duration = Duration::from_millis(1);
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long a connection must have lived for a write through it to end the
/// backoff: a peer that accepts and hangs up at once lets the first writes
/// through into its socket buffer before its close is seen (sooner or later
/// depending on how fast the peer runs), which must not restart the backoff
/// at each connect.
const HEALTHY_AFTER: Duration = Duration::from_millis(50);
/// Metadata entries per frame, at most.
const META_CHUNK: usize = 4096;

pub(crate) struct Config {
    pub sink: Sink,
    pub io: IoBackend,
    pub idle: Duration,
    pub core: Option<usize>,
    pub clock: Source,
    pub host: u64,
    pub host_name: String,
    pub program: String,
    pub workers: u32,
    pub compression: ringlog::Compression,
    /// Send the probe's figures in the stream (Stats frames).
    pub stats_frames: bool,
}

/// What the probe hands the writer: new streams and the stop signal.
pub(crate) struct Shared {
    pub new_streams: Mutex<Vec<(Arc<WorkerShared>, ringlog::ring::Consumer)>>,
    pub stop: AtomicBool,
    pub stats: Mutex<Stats>,
    /// The calibration, for worker handles (0 until known).
    pub ticks_per_sec: Arc<std::sync::atomic::AtomicU64>,
}

struct Stream {
    shared: Arc<WorkerShared>,
    ring: ringlog::ring::Consumer,
    id: StreamId,
    seq: u64,
    /// Every metadata entry seen, resent on each new connection.
    meta_all: Vec<Meta>,
    ring_lost_reported: u64,
    /// Records taken from the ring.
    popped: u64,
    /// Lost records not yet reported in a frame header.
    lost_unreported: u64,
    stats: WorkerStats,
    /// Its End frame is in the batch (or, with no sink, nothing more will
    /// come): stop draining it.
    ended: bool,
    /// Its End frame reached the sink, or there was no sink to send it to
    /// at shutdown: the stream can be forgotten.
    end_confirmed: bool,
}

/// A frame in the current batch, for accounting if its write fails.
struct Pending {
    /// Offset of the frame's end in the batch.
    end: usize,
    /// The worker stream it belongs to (None: process-wide).
    stream: Option<usize>,
    /// Records it carries, and the loss count its header reports.
    records: u64,
    lost: u64,
    /// It is the stream's End frame.
    is_end: bool,
}

pub(crate) struct Writer {
    cfg: Config,
    shared: Arc<Shared>,
    io: Io,
    enc: Encoder,
    conn: Option<Conn>,
    streams: Vec<Stream>,
    batch: Vec<u8>,
    pending: Vec<Pending>,
    process_seq: u64,
    hello: Hello,
    last_clock: ClockSample,
    next_clock: Instant,
    /// Clock samples taken so far (sets the early, shorter intervals).
    clock_samples: u32,
    /// When the next Stats frame is due.
    next_stats: Instant,
    retry_at: Instant,
    backoff: Duration,
    /// When the current connection was opened.
    conn_since: Instant,
    opened_once: bool,
    failing: bool,
    /// A file sink left with a torn frame that could not be cut off.
    sink_disabled: bool,
    /// The sink opened (or not) before the calibration, for the first
    /// `ensure_conn` to take.
    early: Option<std::io::Result<Conn>>,
    stats: Stats,
    cpu_start: u64,
}

impl Writer {
    pub fn new(cfg: Config, shared: Arc<Shared>) -> Writer {
        let io = Io::new(cfg.io);
        let first = cfg.clock.sample();
        let hello = Hello {
            host_name: cfg.host_name.clone(),
            program: cfg.program.clone(),
            pid: std::process::id(),
            workers: cfg.workers,
            invariant_tsc: cfg.clock == Source::Tsc,
            ticks_per_sec: if cfg.clock == Source::Tsc { 0 } else { 1_000_000_000 },
        };
        let compression = cfg.compression.name();
        let mut stats = Stats { io_backend: io.name(), compression, sink: cfg.sink.to_string(), ..Stats::default() };
        stats.ticks_per_sec = hello.ticks_per_sec;
        let now = Instant::now();
        let mut enc = Encoder::new();
        enc.set_compression(cfg.compression);
        Writer {
            cfg,
            shared,
            io,
            enc,
            conn: None,
            streams: Vec::new(),
            batch: Vec::with_capacity(FLUSH_BYTES * 2),
            pending: Vec::new(),
            process_seq: 0,
            hello,
            last_clock: first,
            next_clock: now,
            clock_samples: 0,
            next_stats: now + STATS_EVERY,
            retry_at: now,
            backoff: BACKOFF_MIN,
            conn_since: now,
            opened_once: false,
            failing: false,
            sink_disabled: false,
            early: None,
            stats,
            cpu_start: clock::thread_cpu_ns(),
        }
    }

    pub fn run(mut self) -> Stats {
        if let Some(id) = self.cfg.core {
            self.stats.pinned = core_affinity::set_for_current(core_affinity::CoreId { id });
        }
        // A live sidecar holds its windows for a connection from its
        // accept on, not before: connecting only after the calibration left
        // this stream's first 20 ms of records in windows the sidecar may
        // already have analyzed. (Nothing is sent before the Hello, which
        // needs the calibration; the first pass takes the outcome, a
        // failure included, as if it had opened the sink itself.)
        if matches!(self.cfg.sink, Sink::Unix(_) | Sink::Tcp(_)) {
            self.early = Some(sink::open(&self.cfg.sink, false));
        }
        self.calibrate();
        loop {
            let stopping = self.shared.stop.load(Ordering::Acquire);
            let busy = self.round(stopping);
            self.publish_stats();
            if stopping {
                break;
            }
            // Go round again at once only while some ring is filling fast
            // (a quarter of it or more since the last pass); otherwise
            // sleep: a pass that finds a few records would ship them in a
            // frame of their own, and small frames cost more per record on
            // both ends (compression, a write, decoding in the sidecar).
            if !busy {
                std::thread::park_timeout(self.cfg.idle);
            }
        }
        self.finish();
        self.publish_stats();
        self.stats.clone()
    }

    /// Ticks per second from two samples 20 ms apart. It runs on the writer
    /// thread so that starting a probe never makes the engine wait; records
    /// taken meanwhile carry raw ticks, which readers convert with the clock
    /// samples anyway.
    ///
    /// A program that stops its probe sooner (a short run, a test) would
    /// wait out the rest of the 20 ms in `shutdown`: then the calibration
    /// ends at 1 ms, whose read error (tens of ns, see `Source::sample`)
    /// is still some 10^-5 of the interval, and readers refine the rate
    /// from the clock samples the stream carries.
    fn calibrate(&mut self) {
        if self.cfg.clock == Source::Tsc {
            let a = self.last_clock;
            let started = Instant::now();
            loop {
                let least = if self.shared.stop.load(Ordering::Acquire) { CALIBRATION_STOPPED } else { CALIBRATION };
                let Some(left) = least.checked_sub(started.elapsed()).filter(|d| !d.is_zero()) else { break };
                // (`shutdown` unparks; a spurious wake-up goes round again.)
                std::thread::park_timeout(left);
            }
            let b = self.cfg.clock.sample();
            self.hello.ticks_per_sec = clock::ticks_per_sec(&a, &b);
            self.stats.ticks_per_sec = self.hello.ticks_per_sec;
            self.shared.ticks_per_sec.store(self.hello.ticks_per_sec, Ordering::Relaxed);
            self.last_clock = b;
        }
    }

    /// One pass over all rings; true when some ring held a quarter of its
    /// capacity or more.
    fn round(&mut self, stopping: bool) -> bool {
        self.adopt_new_streams();
        self.ensure_conn(stopping);
        if Instant::now() >= self.next_clock {
            self.last_clock = self.cfg.clock.sample();
            // Samples come often at first (50, 100, 200, 400, 800 ms apart,
            // then every second): until a reader has two samples it
            // extrapolates with the start-up calibration, and CLOCK_MONOTONIC
            // (NTP-slewed) and the TSC can differ by hundreds of ppm; close
            // early samples keep that extrapolation short.
            self.clock_samples += 1;
            let early = Duration::from_millis(25 << self.clock_samples.min(6));
            self.next_clock = Instant::now() + early.min(CLOCK_EVERY);
            if self.conn.is_some() {
                let seq = self.next_process_seq();
                self.enc.clock(
                    self.process_stream(),
                    seq,
                    self.cfg.clock.domain(),
                    &[self.last_clock],
                    &mut self.batch,
                );
                self.framed(None, 0, 0, false);
            }
        }
        if self.conn.is_some() && Instant::now() >= self.next_stats {
            self.next_stats = Instant::now() + STATS_EVERY;
            self.stats_frame(false);
        }
        let mut busy = false;
        for i in 0..self.streams.len() {
            if self.streams[i].ended {
                continue;
            }
            // Read `closed` before draining: a worker sets it after its last
            // push, so a ring found empty after seeing it is empty for good.
            let closed = self.streams[i].shared.closed.load(Ordering::Acquire);
            // Records published before the metadata is taken are drained in
            // this pass, later ones in the next: metadata always precedes,
            // on the wire, the records written after it.
            let mut limit = self.streams[i].ring.len();
            busy |= limit > 0 && limit >= (self.streams[i].ring.capacity() / 4).max(1);
            self.take_meta(i);
            while limit > 0 {
                let n = self.drain(i, limit);
                limit -= n;
                if self.batch.len() >= FLUSH_BYTES {
                    self.flush();
                }
                if n == 0 {
                    break;
                }
            }
            if self.streams[i].ring.is_empty() {
                self.refresh_counts(i);
            }
            if closed && self.streams[i].ring.is_empty() {
                self.end_stream(i, stopping);
            }
        }
        self.flush();
        for s in self.streams.iter().filter(|s| s.end_confirmed) {
            self.stats.ended.push(s.stats.clone());
        }
        self.streams.retain(|s| !s.end_confirmed);
        busy
    }

    fn adopt_new_streams(&mut self) {
        let new: Vec<_> = std::mem::take(&mut *self.shared.new_streams.lock().unwrap_or_else(|p| p.into_inner()));
        for (shared, ring) in new {
            let id = StreamId { host: self.cfg.host, process: std::process::id(), worker: shared.index };
            let stats = WorkerStats { index: shared.index, ..WorkerStats::default() };
            self.streams.push(Stream {
                shared,
                ring,
                id,
                seq: 0,
                meta_all: Vec::new(),
                ring_lost_reported: 0,
                popped: 0,
                lost_unreported: 0,
                stats,
                ended: false,
                end_confirmed: false,
            });
            let i = self.streams.len() - 1;
            if self.conn.is_some() {
                self.stream_hello(i);
            }
        }
    }

    /// Notes that the frame just encoded ends the batch here, for the
    /// accounting `flush` does if the write fails.
    fn framed(&mut self, stream: Option<usize>, records: u64, lost: u64, is_end: bool) {
        self.pending.push(Pending { end: self.batch.len(), stream, records, lost, is_end });
    }

    /// A worker-specific Hello: the stream starts (on this connection).
    fn stream_hello(&mut self, i: usize) {
        let s = &mut self.streams[i];
        self.enc.hello(s.id, s.seq, self.cfg.clock.domain(), &self.hello, &mut self.batch);
        s.seq += 1;
        self.framed(Some(i), 0, 0, false);
    }

    fn process_stream(&self) -> StreamId {
        StreamId { host: self.cfg.host, process: std::process::id(), worker: PROCESS_WIDE }
    }

    fn next_process_seq(&mut self) -> u64 {
        self.process_seq += 1;
        self.process_seq - 1
    }

    /// Opens the sink when there is none and the backoff allows; a new
    /// connection first gets the context a reader needs: who writes, the
    /// clock, each stream's start and all metadata so far.
    fn ensure_conn(&mut self, stopping: bool) {
        if self.conn.is_some() || self.sink_disabled || matches!(self.cfg.sink, Sink::Off | Sink::Invalid(_)) {
            return;
        }
        if Instant::now() < self.retry_at && !stopping {
            return;
        }
        let opened = self.early.take().unwrap_or_else(|| sink::open(&self.cfg.sink, !self.opened_once));
        match opened {
            Ok(c) => {
                // The outage ends (and the backoff resets) at the first
                // write that gets through once the connection has lived
                // `HEALTHY_AFTER`, not here: a full disk or a peer that
                // accepts and hangs up opens fine every time.
                self.opened_once = true;
                self.stats.connects += 1;
                self.conn = Some(c);
                self.conn_since = Instant::now();
                self.batch.clear();
                self.pending.clear();
                let dom = self.cfg.clock.domain();
                let seq = self.next_process_seq();
                self.enc.hello(self.process_stream(), seq, dom, &self.hello, &mut self.batch);
                let seq = self.next_process_seq();
                self.enc.clock(self.process_stream(), seq, dom, &[self.last_clock], &mut self.batch);
                self.framed(None, 0, 0, false);
                for i in 0..self.streams.len() {
                    self.stream_hello(i);
                    if !self.streams[i].meta_all.is_empty() {
                        let meta = std::mem::take(&mut self.streams[i].meta_all);
                        self.metadata_frames(i, &meta);
                        self.streams[i].meta_all = meta;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::ResourceBusy => {
                // Another process writes the file: retrying would cut its
                // trace once it ends. This process runs untraced, its
                // records counted lost.
                self.sink_disabled = true;
                self.sink_failed_saying(e, "this process is not traced (its records are counted lost)");
            }
            Err(e) => self.sink_failed(e),
        }
    }

    fn sink_failed(&mut self, e: std::io::Error) {
        self.sink_failed_saying(e, "dropping records (counted) and retrying with backoff");
    }

    /// A failed sink: counted, said once per outage with `next` (what the
    /// writer does about it), and tried again after the backoff unless
    /// disabled.
    fn sink_failed_saying(&mut self, e: std::io::Error, next: &str) {
        self.stats.sink_errors += 1;
        let msg = format!("{}: {e}", self.cfg.sink);
        if !self.failing {
            // One line per outage, not per retry.
            log(format_args!("sink {msg}; {next}"));
        }
        self.stats.last_error = Some(msg);
        self.failing = true;
        self.conn = None;
        self.retry_at = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }

    fn take_meta(&mut self, i: usize) {
        let new: Vec<Meta> = {
            let mut m = self.streams[i].shared.meta.lock().unwrap_or_else(|p| p.into_inner());
            if m.is_empty() {
                return;
            }
            std::mem::take(&mut *m)
        };
        if self.conn.is_some() {
            self.metadata_frames(i, &new);
        }
        self.streams[i].meta_all.extend(new);
    }

    /// Metadata in frames of at most META_CHUNK entries, so that no frame
    /// comes near the reader's size limit however much an engine describes.
    fn metadata_frames(&mut self, i: usize, entries: &[Meta]) {
        for chunk in entries.chunks(META_CHUNK) {
            let s = &mut self.streams[i];
            self.enc.metadata(s.id, s.seq, self.cfg.clock.domain(), chunk, &mut self.batch);
            s.seq += 1;
            self.framed(Some(i), 0, 0, false);
        }
    }

    /// Brings the stream's loss and production counts up to date.
    fn refresh_counts(&mut self, i: usize) {
        let s = &mut self.streams[i];
        let ring_lost = s.shared.lost.load(Ordering::Relaxed);
        s.lost_unreported += ring_lost - s.ring_lost_reported;
        s.ring_lost_reported = ring_lost;
        s.stats.lost_ring = ring_lost;
        s.stats.produced = s.popped + ring_lost;
    }

    /// Moves up to `limit` (at most MAX_BATCH) records of stream `i` into
    /// one frame (or, with no sink, counts them lost). Returns the records
    /// moved.
    fn drain(&mut self, i: usize, limit: usize) -> usize {
        self.refresh_counts(i);
        let s = &mut self.streams[i];
        let (a, b) = s.ring.readable();
        let n = (a.len() + b.len()).min(MAX_BATCH).min(limit);
        if n == 0 {
            return 0;
        }
        let (a, b) = if a.len() >= n { (&a[..n], &b[..0]) } else { (a, &b[..n - a.len()]) };
        s.popped += n as u64;
        s.stats.produced = s.popped + s.ring_lost_reported;
        if self.conn.is_none() {
            s.ring.release(n);
            s.stats.lost_sink += n as u64;
            s.lost_unreported += n as u64;
            return n;
        }
        let lost = s.lost_unreported;
        self.enc.records(s.id, s.seq, lost, self.cfg.clock.domain(), &[a, b], &mut self.batch);
        s.ring.release(n);
        s.seq += 1;
        s.lost_unreported = 0;
        self.framed(Some(i), n as u64, lost, false);
        n
    }

    /// Ends a closed, drained stream with its End frame. With no sink the
    /// stream waits for one (its End is sent after the reconnect), except at
    /// shutdown, where it is forgotten.
    fn end_stream(&mut self, i: usize, stopping: bool) {
        self.refresh_counts(i);
        let s = &mut self.streams[i];
        s.stats.elided = s.shared.elided.load(Ordering::Relaxed);
        s.stats.local_messages = s.shared.local.load(Ordering::Relaxed);
        s.stats.copy_adapter_cost(&s.shared);
        if self.conn.is_none() {
            if stopping {
                s.ended = true;
                s.end_confirmed = true;
            }
            return;
        }
        s.ended = true;
        let end = EndStats { produced: s.stats.produced, lost: s.stats.lost(), elided: s.stats.elided };
        let lost = s.lost_unreported;
        self.enc.end(s.id, s.seq, lost, self.cfg.clock.domain(), &end, &mut self.batch);
        s.seq += 1;
        s.lost_unreported = 0;
        self.framed(Some(i), 0, lost, true);
    }

    /// Writes the gathered frames. On failure, frames that did not reach the
    /// sink have their records (and the losses their headers reported)
    /// counted lost again, to be reported in the stream's next frame
    /// header; an End frame that did not get through is sent again after
    /// the reconnect; a file is cut back to the last whole frame; and the
    /// connection is dropped to be reopened with backoff.
    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let Some(conn) = self.conn.as_mut() else {
            self.batch.clear();
            self.pending.clear();
            return;
        };
        let start = conn.pos;
        let batch = std::mem::take(&mut self.batch);
        let (batch, result) = self.io.write_all(conn, batch);
        self.batch = batch;
        let pending = std::mem::take(&mut self.pending);
        match result {
            Ok(()) => {
                if self.failing {
                    log(format_args!(
                        "sink {} is back; records lost meanwhile are counted in the stream",
                        self.cfg.sink
                    ));
                    self.failing = false;
                }
                if self.conn_since.elapsed() >= HEALTHY_AFTER {
                    self.backoff = BACKOFF_MIN;
                }
                self.stats.bytes += self.batch.len() as u64;
                for p in &pending {
                    if let Some(i) = p.stream {
                        let s = &mut self.streams[i];
                        s.stats.written += p.records;
                        s.end_confirmed |= p.is_end;
                    }
                }
            }
            Err((done, e)) => {
                let mut good = 0;
                for p in &pending {
                    let Some(i) = p.stream else {
                        if p.end <= done {
                            good = p.end;
                        }
                        continue;
                    };
                    let s = &mut self.streams[i];
                    if p.end <= done {
                        s.stats.written += p.records;
                        s.end_confirmed |= p.is_end;
                        good = p.end;
                    } else {
                        s.stats.lost_sink += p.records;
                        s.lost_unreported += p.records + p.lost;
                        if p.is_end {
                            s.ended = false;
                        }
                    }
                }
                self.stats.bytes += good as u64;
                let torn = done > good;
                let cut = self.conn.as_mut().map(|c| c.truncate(start + good as u64));
                if torn && cut == Some(false) {
                    // A torn frame that cannot be cut off would poison
                    // everything appended after it: stop writing this file.
                    self.sink_disabled = true;
                }
                self.sink_failed(e);
            }
        }
        self.batch.clear();
    }

    fn finish(&mut self) {
        // Workers still alive at shutdown: drain what they wrote; their
        // streams get no End frame (a reader sees them as cut off).
        self.round(true);
        if self.conn.is_some() {
            // The final figures, once every stream's last records and End
            // went out (their bytes and `written` counted).
            self.stats_frame(true);
            let seq = self.next_process_seq();
            let end = EndStats::default();
            self.enc.end(self.process_stream(), seq, 0, self.cfg.clock.domain(), &end, &mut self.batch);
            self.framed(None, 0, 0, false);
            self.flush();
        }
    }

    /// The probe's figures so far into the batch, as a process-wide Stats
    /// frame (`last`: at shutdown), unless they are turned off.
    fn stats_frame(&mut self, last: bool) {
        if !self.cfg.stats_frames {
            return;
        }
        self.snapshot();
        self.stats.stats_frames += 1;
        let figures = self.stats.frame_figures(last);
        let seq = self.next_process_seq();
        self.enc.stats(self.process_stream(), seq, self.cfg.clock.domain(), &figures, &mut self.batch);
        self.framed(None, 0, 0, false);
    }

    fn publish_stats(&mut self) {
        self.snapshot();
        *self.shared.stats.lock().unwrap_or_else(|p| p.into_inner()) = self.stats.clone();
    }

    /// Brings `self.stats` up to date: the writer's CPU, every stream's
    /// figures.
    fn snapshot(&mut self) {
        self.stats.writer_cpu_ns = clock::thread_cpu_ns() - self.cpu_start;
        // (io_uring may have given way to write(2) since the start.)
        self.stats.io_backend = self.io.name();
        let mut workers: Vec<WorkerStats> = self.stats.ended.clone();
        for s in &self.streams {
            let mut w = s.stats.clone();
            w.elided = s.shared.elided.load(Ordering::Relaxed);
            w.local_messages = s.shared.local.load(Ordering::Relaxed);
            w.copy_adapter_cost(&s.shared);
            workers.push(w);
        }
        workers.sort_by_key(|w| w.index);
        self.stats.workers = workers;
    }
}

/// One line on stderr. A closed or full stderr must not take the writer
/// down (a panic here would strand blocked workers), so errors are ignored.
fn log(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "probe: {args}");
}
