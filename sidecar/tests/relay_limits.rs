//! `sidecar relay` holds what `sidecar run` holds, at most: connections
//! past `--max-connections` are refused, connections without a Hello are
//! closed at `--hello-timeout`, a frame that grows past `--max-buffered`
//! closes its connection, each named on standard error and counted in the
//! closing line; and soaked in short probe runs, its threads and RSS stay
//! bounded by the connections open, not by those served.
//!
//! `RELAY_SOAK_SECS` (default 3) sets how long the soak part runs;
//! `.ci/run` runs it for a minute.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-relay-limits-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An upstream that takes every connection and reads it to its end.
fn upstream() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let mut buf = vec![0u8; 1 << 16];
                while s.read(&mut buf).is_ok_and(|n| n > 0) {}
            });
        }
    });
    addr
}

/// Whether the relay closed `c` within `within`: a read sees its end, or
/// a reset (Linux reports a peer that closed with bytes of ours unread as
/// ECONNRESET once, then as the end; either is a close).
fn closed(c: &mut UnixStream, within: Duration) -> bool {
    c.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 16];
    loop {
        match c.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

/// A field of /proc/PID/status (`VmRSS`, `Threads`), as its number.
fn status(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Stops the relay if the test ends early, so that it does not outlive it
/// holding the test's standard output open.
struct StopOnDrop(u32);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new("kill").arg(self.0.to_string()).status();
        }
    }
}

#[test]
fn the_relay_refuses_past_its_limits_and_stays_bounded_when_soaked() {
    let d = dir();
    let sock = d.join("relay.sock");
    let log = d.join("relay.stderr");
    let child = Command::new(BIN)
        .args(["relay", "--listen", &format!("unix:{}", sock.display()), "--to", &format!("tcp:{}", upstream())])
        .args(["--max-connections", "4", "--hello-timeout", "1s", "--max-buffered", "64KB"])
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let pid = child.id();
    let _stop = StopOnDrop(pid);
    wait_for(&sock);

    // Four idle connections are held; two more are refused at once.
    let mut idle: Vec<UnixStream> = (0..4).map(|_| UnixStream::connect(&sock).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut extra: Vec<UnixStream> = (0..2).map(|_| UnixStream::connect(&sock).unwrap()).collect();
    for c in &mut extra {
        assert!(closed(c, Duration::from_secs(5)), "a connection past --max-connections is closed");
    }
    // The idle ones, without a Hello, are closed at the timeout.
    for c in &mut idle {
        assert!(closed(c, Duration::from_secs(5)), "a connection without a Hello is closed");
    }
    // A frame header announcing more than --max-buffered: the connection
    // is closed once it holds more than that.
    let bytes = synth_bytes(200, 1);
    let mut big = UnixStream::connect(&sock).unwrap();
    let first = frames(&bytes)[1].0; // past the Hello
    big.write_all(&bytes[..first]).unwrap();
    let long_frame = {
        let mut enc = ringlog::Encoder::new();
        enc.set_compression(ringlog::Compression::None);
        let recs: Vec<ringlog::Record> = (0..40_000u64)
            .map(|i| ringlog::Record::from_event(i * 1000, ringlog::Event::ScheduleStart { op: i as u32 }))
            .collect();
        let mut out = Vec::new();
        let s = ringlog::StreamId { host: 1, process: 1, worker: 0 };
        enc.records(s, 1, 0, ringlog::ClockDomain::MonotonicNs, &[&recs], &mut out);
        out
    };
    assert!(long_frame.len() > 64 << 10, "a frame longer than --max-buffered: {}", long_frame.len());
    // (All but its last byte: the frame is never whole.)
    let _ = big.write_all(&long_frame[..long_frame.len() - 1]);
    assert!(closed(&mut big, Duration::from_secs(5)), "a frame past --max-buffered closes its connection");

    // The soak: short probe runs, four at a time, for a while.
    let secs: u64 = std::env::var("RELAY_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let t0 = Instant::now();
    let (mut rounds, mut rss_first) = (0u64, 0u64);
    let mut threads_max = 0;
    while t0.elapsed() < Duration::from_secs(secs) || rounds < 2 {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let (sock, bytes) = (sock.clone(), bytes.clone());
                std::thread::spawn(move || {
                    if let Ok(mut c) = UnixStream::connect(&sock) {
                        let _ = c.write_all(&bytes);
                    }
                })
            })
            .collect();
        for r in runs {
            r.join().unwrap();
        }
        rounds += 1;
        std::thread::sleep(Duration::from_millis(20));
        threads_max = threads_max.max(status(pid, "Threads"));
        if rounds == 1 {
            std::thread::sleep(Duration::from_millis(200));
            rss_first = status(pid, "VmRSS");
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let (rss_end, threads_end) = (status(pid, "VmRSS"), status(pid, "Threads"));
    eprintln!(
        "relay soak: {rounds} rounds of 4 runs; RSS {rss_first} kB → {rss_end} kB; threads at most {threads_max}"
    );
    assert!(threads_end <= 8, "connection threads are let go when their connection ends: {threads_end}");
    assert!(rss_end < rss_first + 30_000, "RSS grew from {rss_first} kB to {rss_end} kB");

    let _ = Command::new("kill").args(["-INT", &pid.to_string()]).status();
    assert!(wait_exit(child, "the relay").code().is_some());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("refused: 4 connections open already (--max-connections)"), "{text}");
    assert!(text.contains("no Hello frame within 1 s (--hello-timeout)"), "{text}");
    assert!(text.contains("(--max-buffered)"), "{text}");
    assert!(
        text.contains(
            "2 refused over --max-connections, 4 closed without a Hello by --hello-timeout, 1 closed over \
             --max-buffered"
        ),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
