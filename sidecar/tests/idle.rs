//! An idle live sidecar sleeps: its I/O thread waits in poll(2) and wakes
//! the analysis only for data or a window deadline. (It used to poll every
//! 2 ms, about 40 ms of CPU per second with nothing to do.)

use std::process::{Command, Stdio};
use std::time::Duration;

fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start after ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks * 1000.0 / hz
}

#[test]
fn idle_live_sidecar_uses_almost_no_cpu() {
    let dir = std::env::temp_dir().join(format!("sc-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .args(["run", "--window", "100ms", "--listen"])
        .arg(format!("unix:{}", sock.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..500 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sock.exists(), "the sidecar did not create its socket");
    let before = cpu_ms(child.id());
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_ms(child.id()) - before;
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_dir_all(&dir).ok();
    // Polling every 2 ms cost ~120 ms here; sleeping costs a few ms.
    assert!(used < 40.0, "idle sidecar used {used} ms of CPU in 3 s");
}
