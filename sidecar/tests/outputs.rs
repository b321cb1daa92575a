//! Outputs that fail or go away: a JSON or Perfetto file that cannot be
//! written ends the run with status 2 and one line naming the file and the
//! OS error; a closed pipe (`| head`) ends it quietly. Also `dump` into a
//! closed pipe, the live `emitted_after_end_ms` of a window cut by Ctrl-C,
//! and the `run` help text.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-outputs-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A recorded trace, written once per test run and shared by the tests:
/// with `--window 5ms` its JSON lines are ~900 KB, with `--window 1ms` its
/// terminal lines ~160 KB, both more than a pipe holds (64 KB), so a pipe
/// closed after the first line always fails a later write.
fn trace() -> PathBuf {
    static TRACE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    TRACE
        .get_or_init(|| {
            let p = tmp("trace.rlog");
            std::fs::write(&p, common::synth_bytes(1_000_000, 2)).unwrap();
            p
        })
        .clone()
}

fn full() -> Option<std::fs::File> {
    std::fs::OpenOptions::new().write(true).open("/dev/full").ok()
}

/// Reads the child's standard error on a thread (so that a child that does
/// not exit is caught by `wait_exit`'s timeout, not a blocked read).
fn stderr_of(child: &mut std::process::Child) -> std::thread::JoinHandle<String> {
    let mut e = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        let mut s = String::new();
        e.read_to_string(&mut s).unwrap();
        s
    })
}

/// Runs the sidecar with `args`, reads the first line of its standard
/// output and closes the pipe (`| head -1`); returns that line, its exit
/// status and its standard error.
fn first_line_then_close(args: &[&str], what: &str) -> (String, std::process::ExitStatus, String) {
    let mut child = Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let err = stderr_of(&mut child);
    let status = common::wait_exit(child, what);
    (first, status, err.join().unwrap())
}

fn assert_no_panic(err: &str) {
    assert!(!err.contains("panicked"), "a panic: {err}");
    assert!(!err.contains("RUST_BACKTRACE"), "a panic: {err}");
}

/// A run whose output was closed (`| head`): it stops quietly, status 0,
/// saying so once, without a panic or an EPIPE message.
fn assert_quiet_stop(status: std::process::ExitStatus, err: &str) {
    assert_eq!(status.code(), Some(0), "{err}");
    assert_no_panic(err);
    assert!(!err.contains("Broken pipe"), "{err}");
    assert!(err.contains("stopped there: the output was closed"), "{err}");
}

/// A run stopped by a failed write: status 2, no panic, and the error
/// `says` printed once (`ctx` names the case in failure messages).
fn assert_write_error(status: std::process::ExitStatus, err: &str, says: &str, ctx: &str) {
    assert_eq!(status.code(), Some(2), "{ctx}: {err}");
    assert_no_panic(err);
    assert!(err.contains(says), "{ctx}: {err}");
    assert_eq!(err.matches("No space left").count(), 1, "{ctx}: the error is printed once: {err}");
}

#[test]
fn a_json_file_that_cannot_be_written_is_an_error() {
    if full().is_none() {
        return;
    }
    let t = trace();
    let out = Command::new(BIN)
        .args(["analyze", t.to_str().unwrap(), "--window", "5ms", "-q", "--json", "/dev/full", "-w", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let says = "sidecar: error: cannot write the JSON output: /dev/full: No space left on device (os error 28)";
    assert_write_error(out.status, &err, says, "--json /dev/full");
}

#[test]
fn json_into_a_closed_pipe_ends_quietly() {
    let t = trace();
    // `| head -1`: one line read, then the pipe closed.
    let (first, status, err) = first_line_then_close(
        &["analyze", t.to_str().unwrap(), "--window", "5ms", "-q", "--json", "-"],
        "the sidecar writing into a closed pipe",
    );
    assert!(first.starts_with('{'), "{first}");
    assert_quiet_stop(status, &err);
}

#[test]
fn terminal_lines_into_a_closed_pipe_end_quietly() {
    let t = trace();
    let (_, status, err) = first_line_then_close(
        &["analyze", t.to_str().unwrap(), "--window", "1ms"],
        "the sidecar printing into a closed pipe",
    );
    assert_quiet_stop(status, &err);
}

#[test]
fn terminal_lines_as_the_only_output_on_a_full_disk_are_an_error() {
    let Some(f) = full() else { return };
    let t = trace();
    let out = Command::new(BIN)
        .args(["analyze", t.to_str().unwrap(), "--window", "5ms"])
        .stdout(f)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let says = "cannot write the window summaries: standard output: No space left on device";
    assert_write_error(out.status, &err, says, "stdout on /dev/full");
}

#[test]
fn a_perfetto_trace_that_cannot_be_written_is_named_and_not_claimed() {
    if full().is_none() {
        return;
    }
    let t = trace();
    for args in [
        vec!["export", "--window", "5ms", "--perfetto", "/dev/full", t.to_str().unwrap()],
        vec!["analyze", "--window", "5ms", "-q", "--perfetto", "/dev/full", t.to_str().unwrap()],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let says = "sidecar: error: cannot write the Perfetto trace: /dev/full: No space left on device (os error 28)";
        assert_write_error(out.status, &err, says, &format!("{args:?}"));
        assert!(!err.contains("written to"), "{args:?}: claims success: {err}");
    }
}

#[test]
fn dump_into_a_closed_pipe_ends_quietly() {
    let t = trace();
    let (first, status, err) = first_line_then_close(&["dump", t.to_str().unwrap()], "sidecar dump into a closed pipe");
    assert!(first.starts_with("Hello"), "{first}");
    assert_eq!(status.code(), Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[test]
fn dump_statuses() {
    // A file that cannot be opened is an input error (1), as for `analyze`.
    let missing = tmp("missing.rlog");
    let out = Command::new(BIN).args(["dump", missing.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("missing.rlog: cannot open"), "{err}");
    // A standard output that cannot be written: 2, named.
    if let Some(f) = full() {
        let t = trace();
        let out = Command::new(BIN).args(["dump", t.to_str().unwrap()]).stdout(f).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("cannot write to standard output: No space left on device"), "{err}");
    }
}

#[test]
fn help_texts() {
    let out = Command::new(BIN).args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    // The example is a line of its own, not run into the next sentence.
    assert!(
        help.lines()
            .any(|l| l.trim() == "Example: sidecar run --listen unix:/tmp/sidecar.sock --json out.jsonl --http 9090"),
        "{help}"
    );
    assert!(!help.contains("out.jsonl then"), "{help}");
    let out = Command::new(BIN).args(["dump", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let file = help.lines().find(|l| l.trim_start().starts_with("<FILE>")).unwrap_or_default();
    assert!(file.len() > "  <FILE>".len() + 10, "FILE has a help text: {help}");
}

/// One probe worker executing an operator every ~200 µs until `stop`, with
/// a message in each execution (an execution without events is elided: a
/// stream of those alone has no windows).
fn live_probe(sock: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let probe = probe::Probe::builder()
        .sink(probe::Sink::unix(sock))
        .workers(1)
        .program("outputs")
        .start()
        .expect("probe start");
    std::thread::spawn(move || {
        let mut w = probe.worker(0);
        w.operator(1, "Work", &[0, 1]);
        let mut seq = 0;
        while !stop.load(Ordering::Relaxed) {
            w.schedule_start(1);
            // (To itself: worker-local, counted by the probe, not written.)
            w.message_send(7, 0, seq, 1);
            w.message_recv(7, 0, seq, 1);
            seq += 1;
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(100) {}
            w.schedule_stop(1);
            w.step();
            std::thread::sleep(Duration::from_micros(100));
        }
        drop(w);
        let _ = probe.shutdown();
    })
}

#[test]
fn a_live_run_whose_json_cannot_be_written_stops_by_itself() {
    if full().is_none() {
        return;
    }
    let sock = tmp("full.sock");
    let _ = std::fs::remove_file(&sock);
    let child = common::live_sidecar(&sock, &["--window", "100ms", "--json", "/dev/full", "-q"]);
    let stop = Arc::new(AtomicBool::new(false));
    let p = live_probe(&sock, stop.clone());
    let mut child = child;
    let err = stderr_of(&mut child);
    // No Ctrl-C: the first failed write ends the run.
    let status = common::wait_exit(child, "a live sidecar whose JSON output failed");
    stop.store(true, Ordering::Relaxed);
    p.join().unwrap();
    let err = err.join().unwrap();
    let says = "cannot write the JSON output: /dev/full: No space left on device";
    assert_write_error(status, &err, says, "live run, --json /dev/full");
}

#[test]
fn a_window_cut_by_ctrl_c_is_not_reported_as_emitted_before_its_end() {
    let sock = tmp("cut.sock");
    let json = tmp("cut.jsonl");
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(&json);
    let width_ns: u64 = 10_000_000_000;
    let mut child = common::live_sidecar(&sock, &["--window", "10s", "--json", json.to_str().unwrap(), "-q"]);
    let stop = Arc::new(AtomicBool::new(false));
    let p = live_probe(&sock, stop.clone());
    std::thread::sleep(Duration::from_millis(700));
    // Ctrl-C while the probe still writes: its 10 s window is cut short.
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let err = stderr_of(&mut child);
    let status = common::wait_exit(child, "the sidecar after Ctrl-C");
    let err = err.join().unwrap();
    let exited = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    stop.store(true, Ordering::Relaxed);
    p.join().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    let reps: Vec<serde_json::Value> =
        std::fs::read_to_string(&json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!reps.is_empty(), "{err}");
    let mut cut = 0;
    for r in &reps {
        let d = r["emitted_after_end_ms"].as_f64().unwrap_or_else(|| panic!("live: a number: {r}"));
        assert!(d >= 0.0, "emitted_after_end_ms {d} < 0: {r}");
        // A window that ends after the sidecar exited was emitted before
        // its end: 0.
        if let Some(s) = r["start_unix_ns"].as_u64() {
            if s + width_ns > exited {
                assert_eq!(d, 0.0, "{r}");
                cut += 1;
            }
        }
    }
    eprintln!("{} windows, {cut} cut short by Ctrl-C", reps.len());
    assert!(cut <= 1, "{cut} windows cut");
}

/// The bytes the closing line says were read are the file's, whatever the
/// number of workers sharing it (each decodes the process-wide frames; one
/// counts them).
#[test]
fn the_bytes_read_do_not_depend_on_the_workers() {
    let p = tmp("bytes.rlog");
    let bytes = common::synth_bytes(20_000, 2);
    std::fs::write(&p, &bytes).unwrap();
    let said = |w: &str| {
        let out = Command::new(BIN).args(["analyze", "-q", "-w", w, p.to_str().unwrap()]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{err}");
        // "sidecar: 20000 records, 65.8 KB in 0.01 s (...)"
        let line = err.lines().find(|l| l.contains(" records, ")).unwrap_or_else(|| panic!("{err}")).to_string();
        line.split(" records, ").nth(1).unwrap().split(" in ").next().unwrap().to_string()
    };
    let one = said("1");
    assert_eq!(said("8"), one);
    assert_eq!(said("3"), one);
    let kb = bytes.len() as f64 / 1024.0;
    assert!(one == format!("{kb:.1} KB") || one == format!("{} B", bytes.len()), "{one} for {} bytes", bytes.len());
}

/// A standard error nobody reads never stalls the analysis: with the JSON
/// on standard output the window lines go to standard error (~160 KB here,
/// more than a pipe holds); they are dropped past a bound, counted, and the
/// run ends.
#[test]
fn a_standard_error_nobody_reads_does_not_stall_the_analysis() {
    let t = trace();
    let mut child = Command::new(BIN)
        .args(["analyze", "--window", "1ms", "--json", "-", t.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Standard output read; standard error kept open and never read.
    let _stderr = child.stderr.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reading = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    // (Killed after 60 s, failing the test, if it stalls.)
    let status = common::wait_exit(child, "sidecar analyze with a standard error nobody reads");
    let out = reading.join().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(out.lines().count() > 100, "every window's JSON: {} lines", out.lines().count());
}
