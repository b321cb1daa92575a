//! `sidecar watch` at its edges: outputs that fail, commands that leave
//! children behind, a second Ctrl-C.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-watch-edges-{}", std::process::id())).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn kill(pid: i32, sig: i32) {
    // SAFETY: kill(2) with a pid this test started.
    unsafe { libc::kill(pid, sig) };
}

/// A command that never connects a probe ran untraced: watch says so,
/// naming it, and prints no summary of zeros; the status is the command's.
#[test]
fn an_untraced_command_is_named_without_a_summary_of_zeros() {
    let o = Command::new(BIN).args(["watch", "-q", "--", "sh", "-c", "exit 3"]).output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("sidecar: no probe connected: `sh -c exit 3` ran untraced"), "{err}");
    assert!(out.starts_with("sidecar watch: `sh -c exit 3` exited with status 3"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
}

/// of its outputs failed"; `--summary-json` is one of its outputs.
#[test]
fn a_summary_json_that_cannot_be_written_is_status_2() {
    let o = Command::new(BIN).args(["watch", "-q", "--summary-json", "/dev/full", "--", "true"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/dev/full"), "{err}");
    assert_eq!(o.status.code(), Some(2), "{err}");
}

/// error: watch ends with the command, not with the child.
#[test]
fn ends_with_the_command_not_with_a_child_holding_its_stderr() {
    let t0 = Instant::now();
    let o = Command::new(BIN)
        .args(["watch", "-q", "--", "sh", "-c", "sleep 20 >/dev/null & echo $!; exit 4"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let took = t0.elapsed();
    let out = String::from_utf8_lossy(&o.stdout);
    if let Some(pid) = out.lines().next().and_then(|l| l.trim().parse::<i32>().ok()) {
        kill(pid, libc::SIGKILL);
    }
    assert_eq!(o.status.code(), Some(4), "{out}");
    assert!(took < Duration::from_secs(10), "watch took {took:?} for a command that exited at once");
}

/// its private directory.
#[test]
fn a_second_ctrl_c_removes_the_socket_directory() {
    // (a short TMPDIR: the socket's path must fit in sun_path)
    let dir = PathBuf::from(format!("/tmp/swe{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("child.pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut c = Command::new(BIN)
        .args(["watch", "-q", "--", "sh", "-c", &script])
        .env("TMPDIR", &dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !pidfile.exists() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let child: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    kill(c.id() as i32, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(200));
    kill(c.id() as i32, libc::SIGINT);
    let st = c.wait().unwrap();
    kill(child, libc::SIGKILL);
    assert_eq!(st.code(), Some(130));
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("sidecar-watch-"))
        .collect();
    assert!(left.is_empty(), "left behind in {}: {left:?}", dir.display());
    let _ = std::fs::remove_dir_all(&dir);
}

/// exits 2 without running the command (which would run untraced).
#[test]
fn an_output_that_cannot_be_created_does_not_run_the_command() {
    let dir = tmp("setup");
    let marker = dir.join("ran");
    let o = Command::new(BIN)
        .args(["watch", "-q", "--perfetto", "/nonexistent/dir/t.pftrace", "--", "touch", marker.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!marker.exists(), "the command ran although the analysis could not be set up");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The socket's path is TMPDIR/sidecar-watch-PID-NANOS/probe.sock (91
/// bytes here, sun_path holds 107). `io::bind_unix` used to bind it first at
/// TMPDIR/sidecar-watch-PID-NANOS/.sidecar-PID-NANOS/s, about 27 bytes
/// longer, so watch failed ("path must be shorter than SUN_LEN", status 2)
/// with any TMPDIR longer than about 45 bytes.
#[test]
fn a_longer_tmpdir_still_fits_the_socket() {
    let dir = PathBuf::from(format!("/tmp/sidecar-watch-edges-long-tmpdir-{:08}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let o = Command::new(BIN).args(["watch", "-q", "--", "true"]).env("TMPDIR", &dir).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}
