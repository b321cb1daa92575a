//! A sink that is missing, dies or fails never blocks the engine under
//! `OnFull::Drop`, and the probe says what happened.

mod common;

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use common::{read_trace, tmp_path};
use probe::{OnFull, Probe, Sink, Stats, WorkerProbe};

/// Drives `w` for about `dur`, returning the slowest 1000-call batch.
fn drive(w: &mut WorkerProbe, dur: Duration, seq: &mut u64) -> Duration {
    let end = Instant::now() + dur;
    let mut worst = Duration::ZERO;
    while Instant::now() < end {
        let t = Instant::now();
        for _ in 0..250 {
            w.schedule_start(1);
            w.message_send(2, 0, *seq, 1);
            w.schedule_stop(1);
            w.step();
            *seq += 1;
        }
        worst = worst.max(t.elapsed());
    }
    worst
}

/// A worker blocked on a failing sink would stall for the write timeout
/// (2 s) or a backoff (up to 1 s); preemption on a busy 2-core machine
/// stays below this (200 ms was once exceeded, at 220 ms, on a slow day).
const NOT_BLOCKED: Duration = Duration::from_millis(500);

fn check_accounting(stats: &Stats) {
    for w in &stats.workers {
        assert_eq!(w.produced, w.written + w.lost(), "{w:?}");
    }
}

/// Drives one worker into `sink` for `dur` and shuts the probe down: the
/// engine was never held, shutdown returned within 10 s, and the counts add
/// up. The stats, for the test's own checks.
fn run_into(sink: Sink, dur: Duration) -> Stats {
    let probe = Probe::builder().sink(sink).on_full(OnFull::Drop).start().unwrap();
    let mut w = probe.worker(0);
    let mut seq = 0;
    let worst = drive(&mut w, dur, &mut seq);
    drop(w);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(probe.shutdown());
    });
    let stats = rx.recv_timeout(Duration::from_secs(10)).expect("shutdown still held after 10 s").unwrap();
    assert!(worst < NOT_BLOCKED, "a batch of calls took {worst:?}");
    check_accounting(&stats);
    stats
}

#[test]
fn no_listener_at_start() {
    let p = tmp_path("nobody-listens.sock");
    let stats = run_into(Sink::unix(&p), Duration::from_millis(300));
    assert!(stats.sink_errors > 0);
    assert_eq!(stats.connects, 0);
    assert_eq!(stats.written(), 0);
    assert_eq!(stats.produced(), stats.lost());
    let err = stats.last_error.unwrap();
    assert!(err.contains("nobody-listens.sock"), "{err}");
}

#[test]
fn listener_killed_mid_run_then_back() {
    let p = tmp_path("killed.sock");
    let l = UnixListener::bind(&p).unwrap();
    let first = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        // Read a little, then hang up on the probe.
        let mut buf = vec![0; 1 << 16];
        let _ = std::io::Read::read(&mut s, &mut buf);
        drop(s);
    });
    let probe = Probe::builder().sink(Sink::unix(&p)).on_full(OnFull::Drop).start().unwrap();
    let mut w = probe.worker(0);
    let mut seq = 0;
    let mut worst = drive(&mut w, Duration::from_millis(300), &mut seq);
    first.join().unwrap();
    std::fs::remove_file(&p).unwrap();
    worst = worst.max(drive(&mut w, Duration::from_millis(300), &mut seq));
    let gone = probe.stats();
    assert!(gone.sink_errors > 0, "the probe noticed: {gone:?}");
    // The sidecar comes back; the writer reconnects within its backoff.
    let l = UnixListener::bind(&p).unwrap();
    let second = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut buf).unwrap();
        buf
    });
    worst = worst.max(drive(&mut w, Duration::from_millis(1500), &mut seq));
    drop(w);
    let stats = probe.shutdown().unwrap();
    assert!(worst < NOT_BLOCKED, "a batch of calls took {worst:?}");
    check_accounting(&stats);
    assert_eq!(stats.connects, 2, "{stats:?}");
    assert!(stats.workers[0].lost_sink > 0);
    let t = read_trace(&second.join().unwrap());
    assert!(t.error.is_none(), "{:?}", t.error);
    // The new connection starts with the context a reader needs.
    assert!(t.hello.is_some() && t.clock_samples > 0 && t.process_end);
    let s = &t.workers[&0];
    assert!(!s.records.is_empty());
    // What went missing is announced to the second reader.
    assert!(s.lost_in_headers > 0);
    assert_eq!(s.end.unwrap().lost, stats.workers[0].lost());
}

#[test]
fn full_disk() {
    let stats = run_into(Sink::file("/dev/full"), Duration::from_millis(600));
    assert_eq!(stats.written(), 0);
    assert!(stats.lost() > 0);
    let err = stats.last_error.unwrap();
    assert!(err.contains("No space left"), "{err}");
    // The file opens every time; only the writes fail. The backoff must
    // still grow (10, 20, 40, ... ms: about 7 tries in 600 ms, one more at
    // shutdown), not restart at every open (60 tries).
    assert!(stats.sink_errors <= 12, "{} failed writes in 600 ms: no backoff", stats.sink_errors);
}

/// A peer that accepts and hangs up at once: every connect succeeds and
/// every write fails, which is one outage with a growing backoff.
#[test]
fn a_peer_that_hangs_up_at_once_gets_the_backoff() {
    let p = tmp_path("hangs-up.sock");
    let l = UnixListener::bind(&p).unwrap();
    std::thread::spawn(move || {
        for c in l.incoming() {
            drop(c);
        }
    });
    let stats = run_into(Sink::unix(&p), Duration::from_millis(600));
    assert!(stats.connects >= 2, "{stats:?}");
    assert!(stats.connects <= 12, "{} connects in 600 ms: the backoff restarted at each one", stats.connects);
}

/// A sidecar that stopped accepting: its accept queue fills and a plain
/// connect(2) would wait for ever, holding the writer, its rings and
/// `shutdown`. The connect is bounded by the write timeout (2 s).
#[test]
fn a_listener_that_never_accepts_does_not_hold_shutdown() {
    let p = tmp_path("never-accepts.sock");
    let l = UnixListener::bind(&p).unwrap();
    // A backlog of 0 with one connection pending: the queue is full.
    // SAFETY: listen(2) on the listener's own open descriptor.
    assert_eq!(unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&l), 0) }, 0);
    let _queued = std::os::unix::net::UnixStream::connect(&p).unwrap();
    // (One bounded connect may be under way and shutdown tries once more:
    // well within `run_into`'s 10 s.)
    let stats = run_into(Sink::unix(&p), Duration::from_millis(300));
    assert_eq!(stats.written(), 0);
    assert!(stats.sink_errors > 0);
    drop(l);
}

#[test]
fn read_only_location() {
    let stats = run_into(Sink::file("/proc/probe-cannot-write-here"), Duration::from_millis(200));
    assert_eq!(stats.connects, 0);
    assert!(stats.last_error.unwrap().contains("/proc/probe-cannot-write-here"));
}

#[test]
fn tcp_sink_without_listener_and_with_one() {
    // Nobody on this port: connection refused, counted, never blocking.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let probe = Probe::builder().sink(Sink::tcp(format!("127.0.0.1:{port}"))).start().unwrap();
    let mut w = probe.worker(0);
    let mut seq = 0;
    assert!(drive(&mut w, Duration::from_millis(100), &mut seq) < NOT_BLOCKED);
    drop(w);
    let stats = probe.shutdown().unwrap();
    assert!(stats.sink_errors > 0 && stats.written() == 0);
    check_accounting(&stats);

    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut buf).unwrap();
        buf
    });
    let probe = Probe::builder().sink(Sink::tcp(addr.to_string())).on_full(OnFull::Block).start().unwrap();
    let mut w = probe.worker(3);
    for s in 0..10_000 {
        w.message_recv(1, 2, s, 5);
    }
    drop(w);
    let stats = probe.shutdown().unwrap();
    let t = read_trace(&reader.join().unwrap());
    assert!(t.error.is_none());
    assert_eq!(t.workers[&3].records.len(), 10_000);
    assert_eq!(stats.written(), 10_000);
}

#[test]
fn invalid_sink_is_a_clear_error() {
    let err = Probe::builder().sink(Sink::parse("udp:1.2.3.4")).start().err().unwrap();
    assert!(err.to_string().contains("udp:1.2.3.4"), "{err}");
    let p = Probe::builder().sink(Sink::Off).start().unwrap();
    assert!(!p.is_enabled() && !p.worker(0).is_enabled());
}

/// One file given to two processes' probes (one PROBE_SINK for every
/// process of a job): the second finds the first's lock, says so and runs
/// untraced, its records counted lost, and never retries (a retry once the
/// first ended would truncate its trace); the first's trace is whole.
#[test]
fn a_file_another_probe_is_writing_is_left_to_it() {
    let p = tmp_path("shared.rlog");
    let _ = std::fs::remove_file(&p);
    let first = Probe::builder().sink(Sink::file(&p)).on_full(OnFull::Drop).start().unwrap();
    let mut w = first.worker(0);
    let mut seq = 0;
    drive(&mut w, Duration::from_millis(100), &mut seq);
    let second = run_into(Sink::file(&p), Duration::from_millis(1500));
    assert_eq!((second.connects, second.sink_errors, second.written()), (0, 1, 0), "{second:?}");
    assert_eq!(second.produced(), second.lost());
    let err = second.last_error.unwrap();
    assert!(err.contains("shared.rlog") && err.contains("another process's probe is writing this file"), "{err}");
    drive(&mut w, Duration::from_millis(100), &mut seq);
    drop(w);
    let stats = first.shutdown().unwrap();
    assert_eq!((stats.connects, stats.sink_errors), (1, 0), "{stats:?}");
    let t = read_trace(&std::fs::read(&p).unwrap());
    assert_eq!(t.error, None);
    assert!(t.process_end && t.hello.is_some());
    let w0 = &t.workers[&0];
    assert_eq!(w0.seq_gaps, 0);
    assert_eq!(w0.records.len() as u64, stats.written(), "every record the first probe wrote is in the file");
    // Once the first is done, the file is free: a new probe truncates it
    // and writes its own trace.
    let third = run_into(Sink::file(&p), Duration::from_millis(50));
    assert_eq!((third.connects, third.sink_errors), (1, 0), "{third:?}");
    let t = read_trace(&std::fs::read(&p).unwrap());
    assert_eq!(t.workers[&0].records.len() as u64, third.written());
}
