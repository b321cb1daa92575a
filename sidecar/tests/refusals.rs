//! Nonsense is refused, naming what was wrong, and nothing silently
//! "succeeds": a speedup of what the files do not name, empty files, a
//! missing input (and what was and was not written), flags out of bounds,
//! and one form for errors (`sidecar: error: ...`).

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-refusals-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sidecar(args: &[&str], files: &[&Path]) -> Output {
    Command::new(BIN).args(args).args(files).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Two workers: w0 runs operator 1 and sends to w1, which reads it in
/// operator 2.
fn two_workers(dir: &Path) -> PathBuf {
    let f = dir.join("two.rlog");
    let w0 = vec![(0, start(1)), (90, send(5, 1, 0)), (100, stop(1)), (105, step())];
    let w1 = vec![(0, start(2)), (10, stop(2)), (200, start(2)), (201, recv(5, 0, 0)), (300, stop(2))];
    std::fs::write(&f, encode(&[w0, w1])).unwrap();
    f
}

#[test]
fn a_speedup_of_an_unknown_operator_or_worker_is_refused_listing_the_known_ones() {
    let dir = scratch("speedup");
    let f = two_workers(&dir);
    let names = {
        let mut n = sidecar::io::Named::default();
        sidecar::io::names_in_stream(std::io::Cursor::new(std::fs::read(&f).unwrap()), &mut n);
        n
    };
    assert_eq!(names.workers.len(), 2, "{names:?}");
    let o = sidecar(&["whatif", "--speedup", "Nope=2"], &[&f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "no table: {}", String::from_utf8_lossy(&o.stdout));
    let e = stderr(&o);
    assert!(e.starts_with("sidecar: error: --speedup Nope=2: no operator or span named `Nope`"), "{e}");
    for known in &names.operators {
        assert!(e.contains(known.as_str()), "{known} listed: {e}");
    }
    let o = sidecar(&["whatif", "--speedup", "w9:1=2"], &[&f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no worker w9 in the files (workers: w0, w1)"), "{}", stderr(&o));
    // What the files name is accepted, by id as by name.
    let o = sidecar(&["whatif", "--speedup", "w1:1=2"], &[&f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_empty_file_is_refused_by_every_command_that_reads_files() {
    let dir = scratch("empty");
    let f = dir.join("empty.rlog");
    std::fs::write(&f, b"").unwrap();
    let out = dir.join("out.pftrace");
    let cases: [&[&str]; 4] =
        [&["analyze"], &["dump"], &["export", "--perfetto", out.to_str().unwrap()], &["whatif", "--speedup", "A=2"]];
    for args in cases {
        let o = sidecar(args, &[&f]);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("sidecar: error: ") && e.contains("the file is empty"), "{args:?}: {e}");
        assert!(!e.contains("0 records"), "{args:?}: {e}");
    }
    assert!(!out.exists(), "no trace is written from an empty file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_input_says_what_was_not_written() {
    let dir = scratch("missing");
    let gone = dir.join("missing.rlog");
    let out = dir.join("out.pftrace");
    let o = sidecar(&["export", "--perfetto", out.to_str().unwrap()], &[&gone]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("missing.rlog: cannot open") && e.contains("nothing written"), "{e}");
    assert!(!e.contains("Perfetto trace written to"), "{e}");
    assert!(!out.exists());
    let o = sidecar(&["whatif", "--speedup", "A=2"], &[&gone]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "no table of zeros: {}", String::from_utf8_lossy(&o.stdout));
    assert!(stderr(&o).contains("no prediction made"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn workers_and_windows_out_of_bounds_are_refused_with_the_limits() {
    let dir = scratch("bounds");
    let f = two_workers(&dir);
    for (args, says) in [
        (&["analyze", "-w", "0"][..], "1 to 128"),
        (&["analyze", "-w", "100000"][..], "1 to 128"),
        (&["export", "--perfetto", "x.pftrace", "-w", "1000"][..], "1 to 128"),
        (&["whatif", "--speedup", "1=2", "-w", "0"][..], "1 to 128"),
        (&["analyze", "--window", "1"][..], "a unit is needed"),
        (&["analyze", "--window", "10ns"][..], "1us to 7 days"),
        (&["analyze", "--window", "30d"][..], "unknown unit"),
        // (Not "at least 1ns", which 1ns would not meet either.)
        (&["analyze", "--window", "0s"][..], "a window is 1us to 7 days long"),
        (&["analyze", "--window", "0"][..], "e.g. 1s or 500ms"),
        (&["whatif", "--speedup", "1=2", "--window", "1"][..], "a unit is needed"),
    ] {
        let o = sidecar(args, &[&f]);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    // The live commands, refused before they listen or start anything.
    let sock = format!("unix:{}", dir.join("never.sock").display());
    let marker = dir.join("started");
    let started = format!("touch {}", marker.display());
    for (args, says) in [
        (&["run", "--listen", sock.as_str(), "-w", "1000"][..], "1 to 128"),
        (&["run", "--listen", sock.as_str(), "--window", "10ns"][..], "1us to 7 days"),
        (&["watch", "-w", "0", "--", "sh", "-c", started.as_str()][..], "1 to 128"),
        (&["watch", "--window", "1", "--", "sh", "-c", started.as_str()][..], "a unit is needed"),
        (&["run", "--listen", sock.as_str(), "--revise-within", "100000000"][..], "0 to 1024 windows"),
        (&["watch", "--revise-within", "2000", "--", "sh", "-c", started.as_str()][..], "0 to 1024"),
    ] {
        let o = sidecar(args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    assert!(!marker.exists(), "watch started its command");
    assert!(!dir.join("never.sock").exists(), "run listened");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dump_says_its_errors_as_every_other_command_does() {
    let dir = scratch("dump");
    let f = two_workers(&dir);
    let mut bytes = std::fs::read(&f).unwrap();
    bytes.truncate(bytes.len() - 3);
    std::fs::write(&f, &bytes).unwrap();
    let o = sidecar(&["dump"], &[&f]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("ERROR"), "{text}");
    let e = stderr(&o);
    assert!(e.starts_with("sidecar: error: ") && e.contains("two.rlog"), "{e}");
    let o = sidecar(&["dump"], &[&dir.join("nothing.rlog")]);
    assert!(stderr(&o).starts_with("sidecar: error: "), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
