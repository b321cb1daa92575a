//! A panic in one analysis worker ends the run with an error; the other
//! workers used to wait forever for its progress (a hung process burning
//! CPU). And a closed or full standard error does not make a worker panic.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use sidecar::output::sink::Sink;
use sidecar::pipeline::dataflow::{self, Inputs, Settings};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-panic-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn trace(name: &str) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, common::synth_bytes(200_000, 2)).unwrap();
    p
}

/// A report sink that panics, as any bug in a worker would.
struct Panics;

impl std::io::Write for Panics {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        panic!("the report sink failed");
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_panicking_worker_ends_the_run_with_an_error() {
    // With the windows analyzed on the workers, and on analysis threads
    // (whose windows in flight must not keep the run alive either).
    for analysis_thread in [false, true] {
        panicking_worker_ends_the_run(analysis_thread);
    }
}

fn panicking_worker_ends_the_run(analysis_thread: bool) {
    let file = trace(&format!("panic_{analysis_thread}.rlog"));
    let settings = Settings {
        width: 20_000_000,
        timely_args: vec!["-w".into(), "2".into()],
        progress_bar: false,
        sync: Default::default(),
        unpack_thread: false,
        analysis_thread,
        shared_analysis: true,
        what_if: None,
        stream_bytes: Default::default(),
        timelines: None,
    };
    // Reports are printed by worker 0: it panics, worker 1 must not wait.
    let sink = Sink { json: Some(Box::new(Panics)), terminal: None, perfetto: None, ..Default::default() };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(dataflow::run(settings, Inputs::Files(vec![file]), sink).map(|st| st.windows));
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(Err(e)) => {
            assert!(e.contains("analysis worker 0 panicked"), "{e}");
            assert!(e.contains("the report sink failed"), "the error names the panic: {e}");
        }
        Ok(Ok(windows)) => panic!("the run succeeded ({windows} windows) though a worker panicked"),
        Err(_) => panic!("the run did not end within 60 s after a worker panicked"),
    }
}

#[test]
fn a_full_stderr_does_not_stop_the_analysis() {
    if !std::path::Path::new("/dev/full").exists() {
        return;
    }
    let good = trace("good.rlog");
    // A file that is not a trace: its error line must be written while the
    // good file is still analyzed (a missing file is refused before any
    // analysis starts, so it would not exercise the analysis).
    let missing = tmp("garbage.rlog");
    std::fs::write(&missing, b"not a ringlog trace, only words").unwrap();
    let json = tmp("full.jsonl");
    let _ = std::fs::remove_file(&json);
    // The error line for the garbage file cannot be written (ENOSPC).
    let child = Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .args(["analyze", missing.to_str().unwrap(), good.to_str().unwrap(), "--window", "20ms", "-q", "-w", "2"])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
        .spawn()
        .unwrap();
    let status = common::wait_exit(child, "the sidecar with standard error full");
    // A bad input is an error: status 1, as with a working stderr (the
    // closing line to stderr fails, and must not turn it into a panic's 101).
    assert_eq!(status.code(), Some(1), "{status}");
    let reps = std::fs::read_to_string(&json).unwrap_or_default();
    assert!(reps.lines().count() > 0, "no windows analyzed");
}
