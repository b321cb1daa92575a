//! Live: a worker that was busy reads its connection's backlog in bounded
//! reads (4 MB an activation). What it has not read yet is data the
//! sidecar has, not late data: the windows wait for it (up to
//! `--max-backlog`), and a stream that ends while the sidecar is behind
//! sends its last fragments and end markers to windows still open.
//!
//! The dataflow runs in this process on one worker, fed by a connection
//! stand-in (`Feed`): a paced synthetic stream stamped with this host's
//! clocks as it is made (as a probe's), which the worker's reads take from
//! a buffer (as from the I/O thread's pipe). A read that sleeps is the
//! worker busy elsewhere (analyzing a window) while the stream goes on.

use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use ringlog::{ClockDomain, ClockSample, Compression, Encoder, EndStats, Event, Hello, Meta, Record, StreamId};
use serde_json::Value;
use sidecar::io::os_clock::{monotonic_ns, realtime_ns};
use sidecar::io::{queues, Reader};
use sidecar::output::sink::Sink;
use sidecar::pipeline::dataflow::{self, Inputs, RunStats, Settings};
use sidecar::pipeline::grace::{Grace, DEFAULT_MAX_BACKLOG_NS};

const MS: u64 = 1_000_000;
/// What one bounded read of a live connection takes at most
/// (`ingest_op::poll_windows`).
const READ_BUDGET: usize = 4 << 20;

/// The connection's bytes: what the "probe" wrote, how far the worker read.
#[derive(Default)]
struct Wire {
    data: Vec<u8>,
    read: usize,
    closed: bool,
    /// Bytes made and the time the stream has run, for a reader slower
    /// than the stream ([`Feed::slowdown`]).
    made_ns: u64,
    /// Unread bytes when the stall ended, and at the stream's end.
    backlog_after_stall: usize,
    unread_at_end: usize,
}

#[derive(Clone, Default)]
struct Shared(Arc<(Mutex<Wire>, Condvar)>);

/// The worker's side of the connection.
struct Feed {
    wire: Shared,
    /// At this time the next read sleeps this long (the worker busy).
    stall: Option<(Instant, Duration)>,
    /// Each read sleeps so that the worker reads the stream this many times
    /// slower than it is made (it never catches up).
    slowdown: Option<f64>,
}

impl Read for Feed {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if let Some((at, d)) = self.stall.filter(|s| Instant::now() >= s.0) {
            std::thread::sleep(d.saturating_sub(at.elapsed()));
            self.stall = None;
            let mut w = self.wire.0 .0.lock().unwrap();
            w.backlog_after_stall = w.data.len() - w.read;
        }
        let mut w = self.wire.0 .0.lock().unwrap();
        let n = (w.data.len() - w.read).min(out.len()).min(64 << 10);
        if n == 0 {
            return if w.closed { Ok(0) } else { Err(ErrorKind::WouldBlock.into()) };
        }
        out[..n].copy_from_slice(&w.data[w.read..w.read + n]);
        w.read += n;
        let made_per_ns = w.data.len() as f64 / w.made_ns.max(1) as f64;
        drop(w);
        self.wire.0 .1.notify_all();
        if let Some(k) = self.slowdown {
            std::thread::sleep(Duration::from_nanos((k * n as f64 / made_per_ns) as u64));
        }
        Ok(n)
    }
}

/// One process of two workers, made at `rate` records/s for `seconds`:
/// each round, worker w runs operator 1 (a message to the other worker)
/// and operator 2 (reads the other's), then a step. Stamped with this
/// host's monotonic clock as it goes; End frames at the end. Returns the
/// records written.
fn make_stream(wire: Shared, rate: f64, seconds: f64) -> u64 {
    let host = 0x5eed;
    let pid = 4242;
    let dom = ClockDomain::MonotonicNs;
    let mut e = Encoder::new();
    e.set_compression(Compression::None);
    let pw = StreamId { host, process: pid, worker: ringlog::PROCESS_WIDE };
    let sid = |w: u32| StreamId { host, process: pid, worker: w };
    let hello = Hello {
        host_name: "test".into(),
        program: "backlog".into(),
        pid,
        workers: 2,
        invariant_tsc: false,
        ticks_per_sec: 1_000_000_000,
    };
    let mut out = Vec::new();
    e.hello(pw, 0, dom, &hello, &mut out);
    let m = monotonic_ns();
    e.clock(pw, 1, dom, &[ClockSample { ticks: m, monotonic_ns: m, realtime_ns: realtime_ns() }], &mut out);
    let meta = [
        Meta::Operator { id: 1, name: "Exchange".into(), addr: vec![0, 1] },
        Meta::Operator { id: 2, name: "Count".into(), addr: vec![0, 2] },
        Meta::Channel { id: 7, src: (1, 0), dst: (2, 0) },
    ];
    for w in 0..2u32 {
        e.hello(sid(w), 0, dom, &hello, &mut out);
        e.metadata(sid(w), 1, dom, &meta, &mut out);
    }
    let (mut seq, mut msg) = ([2u64; 2], 0u64);
    let (start, t0) = (Instant::now(), monotonic_ns());
    let (mut rounds, mut last, mut written) = (0u64, t0, 0u64);
    // 7 records per worker and round.
    let per_sec = rate / 14.0;
    loop {
        let done = start.elapsed().as_secs_f64() >= seconds;
        let due = (per_sec * start.elapsed().as_secs_f64().min(seconds)) as u64;
        let now = monotonic_ns();
        if due > rounds {
            let n = due - rounds;
            let stretch = ((now - last) / n).max(1);
            let mut recs: [Vec<Record>; 2] = Default::default();
            for k in 0..n {
                let at = |slot: u64| last + k * stretch + stretch * slot / 7;
                for w in 0..2u32 {
                    let other = 1 - w;
                    let evs = [
                        Event::ScheduleStart { op: 1 },
                        Event::MessageSend { channel: 7, to: other, seq: msg, records: 1 },
                        Event::ScheduleStop { op: 1 },
                        Event::ScheduleStart { op: 2 },
                        Event::MessageRecv { channel: 7, from: other, seq: msg, records: 1 },
                        Event::ScheduleStop { op: 2 },
                        Event::Step { elided: 0, spin_ticks: 0 },
                    ];
                    recs[w as usize]
                        .extend(evs.iter().enumerate().map(|(i, &ev)| Record::from_event(at(i as u64), ev)));
                }
                msg += 1;
            }
            for w in 0..2usize {
                e.records(sid(w as u32), seq[w], 0, dom, &[&recs[w]], &mut out);
                seq[w] += 1;
                written += recs[w].len() as u64;
            }
            rounds = due;
            last = now;
        }
        if done {
            for w in 0..2u32 {
                let st = EndStats { produced: written / 2, lost: 0, elided: 0 };
                e.end(sid(w), seq[w as usize], 0, dom, &st, &mut out);
            }
            e.end(pw, 2, 0, dom, &EndStats::default(), &mut out);
        }
        {
            let mut w = wire.0 .0.lock().unwrap();
            w.data.extend_from_slice(&out);
            w.made_ns = monotonic_ns() - t0;
            if done {
                w.closed = true;
                w.unread_at_end = w.data.len() - w.read;
            }
        }
        out.clear();
        if done {
            return written;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The JSON lines a run writes, in memory.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a run gave: its figures, its reports (all, and those out when the
/// stream ended, on this host's monotonic clock), the windows closed over
/// a backlog, the records written, and the connection's counts.
struct Outcome {
    stats: RunStats,
    reports: Vec<Value>,
    reports_at_end: Vec<Value>,
    stream_end_ns: u64,
    backlog_cut: u64,
    written: u64,
    backlog_after_stall: usize,
    unread_at_end: usize,
}

/// A live run of one worker (windows of `width`, a fixed `grace`) over a
/// stream made at `rate` records/s for `seconds` through `feed`; stopped
/// once the stream has been read to its end (or, if not `read_all`, as
/// soon as it ends, as Ctrl-C: what is left is read for 500 ms).
fn live_run(width: u64, grace: u64, max_backlog: u64, rate: f64, seconds: f64, feed: Feed, read_all: bool) -> Outcome {
    let wire = feed.wire.clone();
    let q = queues(1);
    q.workers[0].readers.lock().unwrap().push(Reader::new("test connection".into(), Box::new(feed), width, None));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let inputs = Inputs::Live {
        queues: q.clone(),
        stop: stop.clone(),
        grace: Grace::fixed(grace),
        revise_within: 16,
        max_backlog,
    };
    let settings = Settings {
        width,
        timely_args: vec!["-w".into(), "1".into()],
        progress_bar: false,
        sync: Default::default(),
        unpack_thread: false,
        analysis_thread: false,
        shared_analysis: false,
        what_if: Some(Arc::from(Vec::new())),
        stream_bytes: Default::default(),
        timelines: None,
    };
    let lines = Lines::default();
    let sink = Sink { json: Some(Box::new(lines.clone())), ..Default::default() };
    let run = std::thread::spawn(move || dataflow::run(settings, inputs, sink));
    let written = make_stream(wire.clone(), rate, seconds);
    let stream_end_ns = monotonic_ns();
    let parse = |b: &[u8]| -> Vec<Value> {
        String::from_utf8_lossy(b).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let reports_at_end = parse(&lines.0.lock().unwrap());
    // Until the worker has read it all (or 30 s), then the windows after it.
    if read_all {
        let (m, cv) = &*wire.0;
        let t = Instant::now();
        let mut w = m.lock().unwrap();
        while w.read < w.data.len() && t.elapsed() < Duration::from_secs(30) {
            w = cv.wait_timeout(w, Duration::from_millis(50)).unwrap().0;
        }
    }
    std::thread::sleep(Duration::from_millis(3 * grace / MS + 200));
    q.io_done.store(true, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let stats = run.join().expect("the run panicked").expect("the run failed");
    let reports = parse(&lines.0.lock().unwrap());
    let w = wire.0 .0.lock().unwrap();
    Outcome {
        stats,
        reports,
        reports_at_end,
        stream_end_ns,
        backlog_cut: q.counts.backlog_cut.load(Ordering::Relaxed),
        written,
        backlog_after_stall: w.backlog_after_stall,
        unread_at_end: w.unread_at_end,
    }
}

fn revised(o: &Outcome) -> Vec<i64> {
    o.reports
        .iter()
        .filter(|r| r["revision"].as_u64().unwrap_or(0) > 0)
        .map(|r| r["window"].as_i64().unwrap())
        .collect()
}

fn late_data(o: &Outcome) -> Vec<i64> {
    o.reports
        .iter()
        .filter(|r| {
            r["incomplete_reasons"].as_array().is_some_and(|x| x.iter().any(|s| s.to_string().contains("late data")))
        })
        .map(|r| r["window"].as_i64().unwrap())
        .collect()
}

/// The worker busy for 1.5 s while the stream goes on at 1.5 M records/s:
/// its backlog is then several read budgets. Read budget by budget, none of
/// it is late: no window revised, none incomplete for late data, no error,
/// every record analyzed, each window reported once, and nothing cut.
#[test]
fn a_backlog_larger_than_a_read_is_not_late_data() {
    let wire = Shared::default();
    let feed = Feed {
        wire,
        stall: Some((Instant::now() + Duration::from_millis(800), Duration::from_millis(1500))),
        slowdown: None,
    };
    let o = live_run(100 * MS, 100 * MS, DEFAULT_MAX_BACKLOG_NS, 1_500_000.0, 3.0, feed, true);
    eprintln!(
        "backlog after the stall {} bytes; {} windows; errors {:?}",
        o.backlog_after_stall,
        o.reports.len(),
        o.stats.errors
    );
    assert!(o.backlog_after_stall > 2 * READ_BUDGET, "the stall left only {} bytes unread", o.backlog_after_stall);
    assert_eq!(revised(&o), Vec::<i64>::new(), "windows revised");
    assert_eq!(late_data(&o), Vec::<i64>::new(), "windows incomplete for late data");
    assert_eq!(o.stats.error_count, 0, "{:?}", o.stats.errors);
    assert_eq!(o.stats.records, o.written);
    assert_eq!(o.backlog_cut, 0);
    let mut windows: Vec<i64> = o.reports.iter().map(|r| r["window"].as_i64().unwrap()).collect();
    let n = windows.len();
    windows.dedup();
    assert_eq!(windows.len(), n, "a window reported twice");
    assert!(n >= 25, "{n} windows for 3 s of 100 ms windows");
}

/// The worker busy for 2 s from 0.5 s into a stream that ends at 1 s: it
/// reads the stream's last records and its End frames 1 s after their
/// windows' ends, with no other stream left. Those fragments and end
/// markers go to their windows, still open: no error, every record
/// analyzed, no window incomplete for late data.
#[test]
fn a_stream_that_ends_while_the_sidecar_is_behind_sends_its_end_markers_in_time() {
    let wire = Shared::default();
    let feed = Feed {
        wire,
        stall: Some((Instant::now() + Duration::from_millis(500), Duration::from_secs(2))),
        slowdown: None,
    };
    let o = live_run(100 * MS, 50 * MS, DEFAULT_MAX_BACKLOG_NS, 200_000.0, 1.0, feed, true);
    eprintln!("backlog after the stall {} bytes; {} windows", o.backlog_after_stall, o.reports.len());
    assert!(o.backlog_after_stall > 0);
    assert_eq!(o.stats.error_count, 0, "{:?}", o.stats.errors);
    assert_eq!(o.stats.records, o.written);
    assert_eq!(late_data(&o), Vec::<i64>::new(), "windows incomplete for late data");
    assert!(o.reports.len() >= 9, "{} windows for 1 s of 100 ms windows", o.reports.len());
}

/// A worker that reads the stream three times slower than it is made
/// (2 M records/s for 8 s) never catches up: without a limit, when the
/// stream ends, the windows reported reach only where it has read, about a
/// third of the way (more than 5 s behind; 6.6 s measured with a limit of
/// 60 s). With `--max-backlog 200ms` (and a 50 ms grace) each read closes
/// the windows to 250 ms behind the wall clock, so when the stream ends the
/// newest window out ended less than 4 s before (1.8–1.9 s measured: a read
/// is 4 MB, a third of a second of the stream, a second of the wall clock
/// here, plus the revisions). The windows closed without the backlog are
/// counted, and the backlog's records for them come late (windows
/// revised, or incomplete for late data).
#[test]
fn a_stream_that_never_catches_up_has_its_windows_closed_under_the_limit() {
    let wire = Shared::default();
    let feed = Feed { wire, stall: None, slowdown: Some(3.0) };
    let width = 100 * MS;
    let o = live_run(width, 50 * MS, 200 * MS, 2_000_000.0, 8.0, feed, false);
    let newest = o.reports_at_end.iter().map(|r| r["window"].as_u64().unwrap()).max().unwrap_or(0);
    let behind_ms = (o.stream_end_ns as f64 - ((newest + 1) * width) as f64) / 1e6;
    eprintln!(
        "unread at the end {} bytes; {} windows, {} out at the end, the newest ending {behind_ms:.0} ms before; {} cut",
        o.unread_at_end,
        o.reports.len(),
        o.reports_at_end.len(),
        o.backlog_cut
    );
    assert!(o.unread_at_end > 8 << 20, "the reader caught up ({} bytes unread at the end)", o.unread_at_end);
    assert!(behind_ms < 4000.0, "when the stream ended the newest window reported had ended {behind_ms:.0} ms before");
    assert!(o.backlog_cut > 0, "no window closed over the backlog");
    assert!(!revised(&o).is_empty() || !late_data(&o).is_empty(), "the cut backlog's records did not come late");
}
