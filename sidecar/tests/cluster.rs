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

/// The JSON lines of a report file.
fn reports(p: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// A 4-stream trace (`{tag}.rlog`), the reports of one process with two
/// workers on it (`one-{tag}.jsonl`), and a hostfile for two processes.
fn trace_and_reference(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let file = tmp(&format!("{tag}.rlog"));
    std::fs::write(&file, common::synth_bytes(300_000, 4)).unwrap();
    let one = tmp(&format!("one-{tag}.jsonl"));
    let s = common::wait_exit(analyze(&file, &one, &["-w", "2"]), "the single process");
    assert!(s.success(), "{s}");
    (file, one, hostfile(&format!("hosts-{tag}.txt"), 2))
}

#[test]
fn two_processes_report_what_one_process_does() {
    let (file, one, hosts) = trace_and_reference("four");
    let h = hosts.to_str().unwrap();
    let (j0, j1) = (tmp("p0.jsonl"), tmp("p1.jsonl"));
    let p1 = analyze(&file, &j1, &["-w", "1", "--processes", "2", "--process", "1", "--hostfile", h]);
    let p0 = analyze(&file, &j0, &["-w", "1", "--processes", "2", "--process", "0", "--hostfile", h]);
    let (s0, s1) = (common::wait_exit(p0, "process 0"), common::wait_exit(p1, "process 1"));
    assert!(s0.success() && s1.success(), "{s0} {s1}");

    // Worker 0 (in process 0) prints every window, in order; process 1
    // analyzes its share of them and prints none.
    let single = reports(&one);
    assert!(single.len() >= 5, "{} windows", single.len());
    assert_eq!(reports(&j0), single);
    assert!(reports(&j1).is_empty());
    for p in [&file, &one, &j0, &j1, &hosts] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn a_process_whose_output_fails_leaves_no_silent_gap_in_the_reports() {
    if std::fs::OpenOptions::new().write(true).open("/dev/full").is_err() {
        return;
    }
    let (file, one, hosts) = trace_and_reference("four-full");
    let h = hosts.to_str().unwrap();
    let (j0, j1) = (tmp("p0-full.jsonl"), tmp("p1-full.jsonl"));
    // Process 1 cannot write its Perfetto trace: it stops reading its share
    // and exits 2, but still analyzes the windows it owns for process 0.
    let p1 = analyze(
        &file,
        &j1,
        &["-w", "1", "--processes", "2", "--process", "1", "--hostfile", h, "--perfetto", "/dev/full"],
    );
    let p0 = analyze(&file, &j0, &["-w", "1", "--processes", "2", "--process", "0", "--hostfile", h]);
    let (s0, s1) = (common::wait_exit(p0, "process 0"), common::wait_exit(p1, "process 1"));
    assert_eq!(s1.code(), Some(2), "{s1}");
    assert_ne!(s0.code(), Some(2), "{s0}");
    let (single, got) = (reports(&one), reports(&j0));
    assert_eq!(got.len(), single.len(), "every window is reported");
    // A window is either what one process reports, or marked incomplete:
    // never complete with streams left out.
    for (g, s) in got.iter().zip(&single) {
        assert!(g == s || g["complete"] == false, "{g}");
    }
    for p in [&file, &one, &j0, &j1, &hosts] {
        let _ = std::fs::remove_file(p);
    }
}

/// Children killed when the test ends, whichever way.
struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            c.kill().ok();
            c.wait().ok();
        }
    }
}

/// Established TCP connections on loopback with `port` at either end
/// (/proc/net/tcp: local and remote address columns, state 01).
fn established(port: u16) -> usize {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let hex = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[3] == "01" && (f[1].ends_with(&hex) || f[2].ends_with(&hex))
        })
        .count()
}

#[test]
fn a_process_that_dies_ends_the_others_with_an_error() {
    // Three live processes (`run` never ends on its own), connected in a
    // cluster; process 0 is killed, as by the OOM killer or a lost machine.
    let n = 3;
    let hosts = hostfile("crash-hosts.txt", n);
    let ports: Vec<u16> = std::fs::read_to_string(&hosts)
        .unwrap()
        .lines()
        .map(|l| l.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    let errs: Vec<PathBuf> = (0..n).map(|i| tmp(&format!("crash{i}.err"))).collect();
    let mut kids = Kill(Vec::new());
    for i in (0..n).rev() {
        let sock = tmp(&format!("crash{i}.sock"));
        let _ = std::fs::remove_file(&sock);
        let child = Command::new(env!("CARGO_BIN_EXE_sidecar"))
            .arg("run")
            .arg(format!("--listen=unix:{}", sock.display()))
            .args(["--window", "100ms", "-w", "1", "--processes", &n.to_string(), "--process", &i.to_string()])
            .arg("--hostfile")
            .arg(&hosts)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&errs[i]).unwrap())
            .spawn()
            .unwrap();
        kids.0.push(child);
    }
    kids.0.reverse();
    // Every pair connected: process i accepts from each j > i on its port.
    let t = Instant::now();
    while (0..n).map(|i| established(ports[i])).sum::<usize>() < n * (n - 1) {
        for (i, k) in kids.0.iter_mut().enumerate() {
            if let Some(s) = k.try_wait().unwrap() {
                panic!(
                    "process {i} ended ({s}) before the cluster connected: {}",
                    std::fs::read_to_string(&errs[i]).unwrap()
                );
            }
        }
        assert!(t.elapsed() < Duration::from_secs(60), "the cluster did not connect within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    kids.0[0].kill().unwrap();
    kids.0[0].wait().unwrap();
    for (i, (kid, err_path)) in kids.0.iter_mut().zip(&errs).enumerate().skip(1) {
        let t = Instant::now();
        let status = loop {
            if let Some(s) = kid.try_wait().unwrap() {
                break s;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "process {i} still runs 60 s after process 0 was killed");
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = std::fs::read_to_string(err_path).unwrap();
        // Not 101 (a panic out of the run) nor 134 (a panic inside an unwind).
        assert_eq!(status.code(), Some(2), "process {i}: {status}; stderr:\n{err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("sidecar: error: lost the connection to another process of the cluster"), "{err}");
        // The broken connection's panic is printed, not those it causes.
        assert_eq!(err.matches("timely communication error").count(), 2, "the panic and the error line: {err}");
        assert!(!err.contains("MergeQueue poisoned") && !err.contains("Send thread panic"), "{err}");
    }
}
