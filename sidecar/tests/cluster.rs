//! More processes (timely's cluster configuration, `--processes N --process
//! I --hostfile H`): the same analysis as one process, and a failure in one
//! process ends the run in all of them instead of leaving the others
//! waiting for its progress.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A hostfile for `n` processes on loopback, on ports free a moment ago.
fn hostfile(name: &str, n: usize) -> PathBuf {
    let ports: Vec<u16> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    let p = tmp(name);
    std::fs::write(&p, ports.iter().map(|p| format!("127.0.0.1:{p}\n")).collect::<String>()).unwrap();
    p
}

fn wait(mut child: Child, what: &str) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > Duration::from_secs(60) {
            child.kill().ok();
            child.wait().ok();
            panic!("{what} did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn analyze(file: &Path, json: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .arg("analyze")
        .arg(file)
        .args(["--window", "20ms", "-q", "--json"])
        .arg(json)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Reports, with the run's own figures (wall time, host-side rates) that
/// differ between any two runs taken out.
fn reports(p: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[test]
fn two_processes_report_what_one_process_does() {
    let file = tmp("four.rlog");
    std::fs::write(&file, common::synth_bytes(300_000, 4)).unwrap();
    let one = tmp("one.jsonl");
    let s = wait(analyze(&file, &one, &["-w", "2"]), "the single process");
    assert!(s.success(), "{s}");

    let hosts = hostfile("hosts.txt", 2);
    let h = hosts.to_str().unwrap();
    let (j0, j1) = (tmp("p0.jsonl"), tmp("p1.jsonl"));
    let p1 = analyze(&file, &j1, &["-w", "1", "--processes", "2", "--process", "1", "--hostfile", h]);
    let p0 = analyze(&file, &j0, &["-w", "1", "--processes", "2", "--process", "0", "--hostfile", h]);
    let (s0, s1) = (wait(p0, "process 0"), wait(p1, "process 1"));
    assert!(s0.success() && s1.success(), "{s0} {s1}");

    // Worker 0 (in process 0) prints every window, in order; process 1
    // analyzes its share of them and prints none.
    let single = reports(&one);
    assert!(single.len() >= 5, "{} windows", single.len());
    assert_eq!(reports(&j0), single);
    assert!(reports(&j1).is_empty());
}

#[test]
fn a_process_that_dies_ends_the_others_with_an_error() {
    let file = tmp("long.rlog");
    std::fs::write(&file, common::synth_bytes(3_000_000, 4)).unwrap();
    let hosts = hostfile("crash-hosts.txt", 2);
    let h = hosts.to_str().unwrap();
    let (j0, j1) = (tmp("c0.jsonl"), tmp("c1.jsonl"));
    let err1 = tmp("c1.err");
    let p1 = Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .arg("analyze")
        .arg(&file)
        .args(["--window", "5ms", "-q", "--json"])
        .arg(&j1)
        .args(["-w", "1", "--processes", "2", "--process", "1", "--hostfile", h])
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err1).unwrap())
        .spawn()
        .unwrap();
    let mut p0 = analyze(&file, &j0, &["-w", "1", "--processes", "2", "--process", "0", "--hostfile", h]);
    // Killed (as by the OOM killer or a lost machine) once the cluster is
    // analyzing: its first report is out.
    let t = Instant::now();
    while std::fs::read_to_string(&j0).unwrap_or_default().lines().count() == 0 {
        assert!(p0.try_wait().unwrap().is_none(), "process 0 ended before its first report");
        assert!(t.elapsed() < Duration::from_secs(60), "no report from process 0 within 60 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    p0.kill().unwrap();
    p0.wait().unwrap();
    let s1 = wait(p1, "process 1 after process 0 was killed");
    let err = std::fs::read_to_string(&err1).unwrap();
    assert_eq!(s1.code(), Some(2), "{s1}; stderr:\n{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("sidecar: lost the connection to another process of the cluster"), "{err}");
    // The broken connection's panic is printed, not the ones that follow from it.
    assert!(err.contains("timely communication error"), "{err}");
    assert!(!err.contains("MergeQueue poisoned") && !err.contains("Send thread panic"), "{err}");
}
