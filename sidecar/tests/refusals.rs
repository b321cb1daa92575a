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
fn the_same_recording_given_twice_is_refused_by_every_command_that_analyzes() {
    let dir = scratch("twice");
    let f = two_workers(&dir);
    let copy = dir.join("copy.rlog");
    std::fs::copy(&f, &copy).unwrap();
    let out = dir.join("out.pftrace");
    let json = dir.join("out.jsonl");
    let cases: [(&[&str], &str); 3] = [
        (&["analyze", "--json", json.to_str().unwrap()], "nothing analyzed"),
        (&["export", "--perfetto", out.to_str().unwrap()], "nothing written"),
        (&["whatif", "--speedup", "w1:2=2"], "no prediction made"),
    ];
    for (args, said) in cases {
        let o = sidecar(args, &[&f, &f]);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.starts_with("sidecar: error: ") && e.contains("two.rlog is given twice"), "{args:?}: {e}");
        assert!(e.contains(said) && !e.contains("records,"), "{args:?}: {e}");
        assert!(o.stdout.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&o.stdout));
        let o = sidecar(args, &[&f, &copy]);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains("two.rlog and ") && e.contains("copy.rlog both hold frames #0..#"), "{args:?}: {e}");
    }
    assert!(!out.exists(), "no trace is written");
    assert_eq!(std::fs::read(&json).unwrap_or_default(), b"", "no report is written");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cluster the flags cannot make is refused before anything is read,
/// written or listened on: no processes, a process index past them, a
/// hostfile that is missing, short, or has a line that is no address (which
/// left the other processes waiting for that one forever).
#[test]
fn cluster_flags_that_cannot_make_a_cluster_are_refused_naming_what() {
    let dir = scratch("cluster");
    let f = two_workers(&dir);
    let hosts = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let two = hosts("two.txt", "127.0.0.1:1\n127.0.0.1:2\n");
    let one = hosts("one.txt", "127.0.0.1:1\n");
    let bad = hosts("bad.txt", "127.0.0.1:1\nnode 7\n");
    let gone = dir.join("gone.txt").display().to_string();
    let json = dir.join("out.jsonl");
    let sock = format!("unix:{}", dir.join("never.sock").display());
    for (cluster, says) in [
        (["0", "0", two.as_str()], "--processes 0: a cluster has 1 or more processes".to_string()),
        (["2", "2", two.as_str()], "--process 2: the processes of --processes 2 are numbered 0 to 1".into()),
        (["2", "0", one.as_str()], format!("--hostfile {one}: 1 line, but --processes 2 needs one address")),
        (["2", "1", bad.as_str()], format!("--hostfile {bad} line 2: `node 7` is not an address HOST:PORT")),
        (["2", "0", gone.as_str()], format!("--hostfile {gone}: cannot read it")),
    ] {
        let flags = ["--processes", cluster[0], "--process", cluster[1], "--hostfile", cluster[2]];
        let analyze = [&["analyze", "--json", json.to_str().unwrap()][..], &flags[..]].concat();
        let run = [&["run", "--listen", sock.as_str()][..], &flags[..]].concat();
        for (args, files) in [(analyze, vec![f.as_path()]), (run, vec![])] {
            let o = sidecar(&args, &files);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
            assert!(stderr(&o).starts_with(&format!("sidecar: error: {says}")), "{args:?}: {}", stderr(&o));
        }
    }
    assert!(!json.exists(), "no output opened");
    assert!(!dir.join("never.sock").exists(), "run listened");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An output that is an input file would destroy the recording (a
/// Perfetto trace truncates it, JSON lines append to it), and two outputs
/// naming one file would interleave: both are refused before anything is
/// opened, and the recording is left as it was. Devices may be named twice.
#[test]
fn an_output_that_is_an_input_or_another_output_is_refused_and_nothing_is_lost() {
    let dir = scratch("clobber");
    let f = two_workers(&dir);
    let before = std::fs::read(&f).unwrap();
    let input = f.to_str().unwrap();
    let link = dir.join("link.rlog");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    let out = dir.join("out.x");
    let out_s = out.to_str().unwrap();
    // The same output by another spelling of its path.
    let again = format!("{}/./out.x", dir.display());
    let sock = format!("unix:{}", dir.join("never.sock").display());
    for (args, says) in [
        (vec!["analyze", "--perfetto", input], format!("--perfetto {input} is the input file {input}")),
        (vec!["analyze", "--json", link.to_str().unwrap()], "is the input file".into()),
        (vec!["export", "--perfetto", out_s, "--dot", input], format!("--dot {input} is the input file")),
        (vec!["analyze", "--json", out_s, "--perfetto", &again], format!("--json and --perfetto both name {out_s}")),
        (vec!["export", "--perfetto", out_s, "--dot", out_s], "--perfetto and --dot both name".into()),
        (vec!["run", "--listen", &sock, "--json", out_s, "--perfetto", out_s], "both name".into()),
    ] {
        let files: Vec<&Path> = if args[0] == "run" { vec![] } else { vec![f.as_path()] };
        let o = sidecar(&args, &files);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.starts_with("sidecar: error: --") && e.contains(&says), "{args:?}: {e}");
        assert_eq!(std::fs::read(&f).unwrap(), before, "{args:?}: the recording changed");
        assert!(!out.exists(), "{args:?}: an output was opened");
    }
    assert!(!dir.join("never.sock").exists(), "run listened");
    // Standard output and a device are not files of their own.
    let o = sidecar(&["analyze", "-q", "--json", "/dev/null", "--perfetto", "/dev/null"], &[&f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
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
        (&["run", "--listen", sock.as_str(), "--max-buffered", "1"][..], "'1': a buffer limit is at least 64KB"),
        (&["run", "--listen", sock.as_str(), "--max-buffered-total", "4KB"][..], "at least 64KB"),
        (
            &["relay", "--listen", sock.as_str(), "--to", "tcp:127.0.0.1:9", "--max-buffered", "100"][..],
            "at least 64KB",
        ),
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
