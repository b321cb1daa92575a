//! `sidecar run` holds at most `--max-buffered-total` bytes read off all its
//! connections together and not yet analyzed: past it, no connection is
//! read until the analysis takes some (the probes' sockets fill, as for one
//! connection at `--max-buffered`), said on standard error naming the flag
//! and counted in the closing line, and nothing is lost; a connection that
//! stays under the total is served without it.

mod common;
use common::*;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-buffered-total-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A synthetic probe process `pid` of two workers, `records` records
/// starting now on this host's clock, uncompressed as a probe writes into
/// a socket.
fn process(pid: u32, records: u64) -> Vec<u8> {
    synth_bytes_of(&sidecar::synth::SynthConfig {
        records,
        workers: 2,
        pid,
        t0_ns: sidecar::io::os_clock::monotonic_ns(),
        compression: ringlog::Compression::None,
        ..Default::default()
    })
}

/// The records in `bytes` (the counts of its Records frames).
fn records_in(bytes: &[u8]) -> u64 {
    frames(bytes).iter().filter(|(_, h)| h.kind == ringlog::FrameKind::Records).map(|(_, h)| h.count as u64).sum()
}

/// Runs `sidecar run --max-buffered 8MB --max-buffered-total 1MB` on one
/// analysis worker, sends each of `processes` on a connection of its own,
/// all at once, stops it once all is sent and returns its standard error
/// and exit status.
///
/// The status is 0 or 1: a synthetic process sent in one burst, far faster
/// than its records' clock, has its fragments counted late by the live
/// pipeline whether or not the total held it back (the same with one
/// connection of 20 k records and any `--grace`), which ends the run with
/// status 1. What is checked here is the total: every record read and
/// decoded (the closing line's count), the pause named and counted.
fn run_with_total(d: &Path, processes: &[Vec<u8>]) -> (String, Option<i32>) {
    let sock = d.join("sidecar.sock");
    let log = d.join("sidecar.stderr");
    // (Standard error into a file: its lines are read at the end. A grace
    // of a minute: no window closes without data that is only held back.)
    let child = Command::new(BIN)
        .args(["run", "--listen", &format!("unix:{}", sock.display()), "-w", "1", "-q"])
        .args(["--max-buffered", "8MB", "--max-buffered-total", "1MB", "--grace", "60s"])
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    wait_for(&sock);
    let senders: Vec<_> = processes
        .iter()
        .cloned()
        .map(|bytes| {
            let sock = sock.clone();
            std::thread::spawn(move || UnixStream::connect(&sock).unwrap().write_all(&bytes).unwrap())
        })
        .collect();
    for s in senders {
        s.join().expect("every connection is read to its end");
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid, not yet waited for (so not
    // reused).
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_exit(child, "sidecar run");
    (std::fs::read_to_string(&log).unwrap(), status.code())
}

/// `sidecar: analyzed N records ...` of the closing line, as N.
fn analyzed(stderr: &str) -> u64 {
    let line = stderr.lines().find(|l| l.starts_with("sidecar: analyzed ")).unwrap_or_else(|| panic!("{stderr}"));
    line["sidecar: analyzed ".len()..].split_whitespace().next().unwrap().parse().unwrap()
}

/// `K times all reached --max-buffered-total` of the closing line, as K.
fn times_at_total(stderr: &str) -> u64 {
    let at = stderr.find(" times all reached --max-buffered-total").unwrap_or_else(|| panic!("{stderr}"));
    stderr[..at].rsplit([' ', '(']).next().unwrap().parse().unwrap()
}

#[test]
fn connections_together_past_the_total_are_held_back_named_and_all_analyzed() {
    let d = dir("past");
    // Four processes of ~3.4 MB each (500 k records, uncompressed), sent
    // at once: together 13 MB, far past the 1 MB total, and each under its
    // own 8 MB; one analysis worker cannot keep up with four writers.
    let procs: Vec<Vec<u8>> = (0..4).map(|i| process(100 + i, 500_000)).collect();
    assert!(procs.iter().all(|p| p.len() > 1 << 20 && p.len() < 8 << 20), "each past the total, under its own limit");
    let sent: u64 = procs.iter().map(|p| records_in(p)).sum();
    let (err, code) = run_with_total(&d, &procs);
    assert!(err.contains("bytes buffered over") && err.contains("(--max-buffered-total)"), "the pause is named: {err}");
    assert!(times_at_total(&err) >= 1, "and counted: {err}");
    // (Under the total no single buffer can reach its own 8 MB.)
    assert!(err.contains("0 times a buffer reached --max-buffered,"), "{err}");
    assert_eq!(analyzed(&err), sent, "held back, never dropped: {err}");
    assert!(matches!(code, Some(0 | 1)), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_connection_under_the_total_is_served_without_reaching_it() {
    let d = dir("under");
    // One process of ~140 KB (20 k records): under the 1 MB total whatever
    // the analysis does.
    let procs = vec![process(100, 20_000)];
    assert!(procs[0].len() < 1 << 20);
    let sent = records_in(&procs[0]);
    let (err, code) = run_with_total(&d, &procs);
    assert_eq!(times_at_total(&err), 0, "{err}");
    assert!(!err.contains("(--max-buffered-total): none read"), "{err}");
    assert_eq!(analyzed(&err), sent, "{err}");
    assert!(matches!(code, Some(0 | 1)), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}
