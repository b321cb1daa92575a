//! A cluster's start: the processes of a timely cluster start up to a second
//! apart, and until the last one is there the windows say which workers are
//! not running yet, are incomplete without a fault, stay out of the run's
//! figures, and name no wait on a worker that was not running.

mod common;
use common::*;
use sidecar::analysis::report::{RunTotals, WaitedOn, WindowReport};
use sidecar::pipeline::{analyze_bytes, analyze_bytes_as_reported};

/// Two processes of one cluster on one host, one worker each, 1000 ns
/// windows. Process 2 (worker 1) starts at 0; process 1 (worker 0) only at
/// 2500, in window 2.
///
/// - w1 runs op A [0, 100], sends to w0 at 90 (channel 5, seq 0), steps at
///   110 and idles until its op B reads w0's reply at 2710.
/// - w0 runs op A [2500, 2600]: reads w1's message at 2550, replies at
///   2590; then op C [2600, 2990]. w1's op B runs [2700, 2800], op C
///   [2800, 2990].
fn late_process() -> (Vec<u8>, Vec<u8>) {
    let w1 = vec![
        (0, start(1)),
        (90, send(5, 0, 0)),
        (100, stop(1)),
        (110, step()),
        (2700, start(2)),
        (2710, recv(5, 0, 0)),
        (2800, stop(2)),
        (2800, start(3)),
        (2990, stop(3)),
    ];
    let w0 = vec![
        (2500, start(1)),
        (2550, recv(5, 1, 0)),
        (2590, send(5, 1, 0)),
        (2600, stop(1)),
        (2600, start(3)),
        (2990, stop(3)),
    ];
    (encode_host(HOST, 1, 0, &[w0], true, &[]), encode_host(HOST, 2, 1, &[w1], true, &[]))
}

/// The windows with the waits carried into a window folded back into the
/// windows that had them open (offline), or as reported live (`folded`
/// false: the window where a wait ends carries the earlier part).
fn windows_of(folded: bool) -> Vec<WindowReport> {
    let (a, b) = late_process();
    let inputs = [("a", &a[..]), ("b", &b[..])];
    let (reps, errs) = if folded { analyze_bytes(&inputs, 1000) } else { analyze_bytes_as_reported(&inputs, 1000) };
    assert!(errs.is_empty(), "{errs:?}");
    reps
}

fn windows() -> Vec<WindowReport> {
    windows_of(true)
}

/// Windows 0 and 1 have only w1's stream; w1's block of worker indices
/// starts at 1 (its Hello says one worker per process), so worker 0 exists
/// and is not running: the windows say so, in the reasons and in
/// `workers_not_started`, and blame no missing stream. Window 0's one
/// unmatched half (w1's send to w0) is w0's, not "a missing stream?".
#[test]
fn windows_before_the_last_process_starts_say_which_workers_are_not_running_yet() {
    let reps = windows();
    assert_eq!(reps.iter().map(|r| r.window).collect::<Vec<_>>(), vec![0, 1, 2]);
    for r in &reps[..2] {
        assert!(!r.complete, "window {}", r.window);
        assert_eq!(r.workers_not_started, vec![0], "window {}", r.window);
        assert!(r.incomplete_reasons.iter().any(|x| x.starts_with("w0: process not started yet")), "{r:?}");
        assert!(!r.incomplete_reasons.iter().any(|x| x.contains("missing stream")), "{:?}", r.incomplete_reasons);
        assert!(r.readable_line().contains("INCOMPLETE (w0: process not started yet"), "{}", r.readable_line());
    }
    assert_eq!(reps[0].incomplete_reasons, vec!["w0: process not started yet (1 message halves with them)"]);
    assert_eq!(reps[1].incomplete_reasons, vec!["w0: process not started yet"]);
    let json = serde_json::to_value(&reps[0]).unwrap();
    assert_eq!(json["workers_not_started"], serde_json::json!([0]));
    // Once every process is there, the field is absent.
    assert!(serde_json::to_value(&reps[2]).unwrap().get("workers_not_started").is_none());
}

/// w1 waits from its step at 110 until w0's reply, sent at 2590, arrives
/// — but w0 only began at 2500. The reply crosses processes, so it arrives
/// when the execution that reads it begins, 2700 (its transit, [2590,
/// 2700), is part of the wait: docs/analysis.md). Windows 0 and 1 report
/// the wait open. As reported live, window 2 carries its part before the
/// window, [110, 2000) = 1890 ns, and counts [2000, 2500) = 500 ns as a
/// wait for w0 to start (`not_started`, no worker); only [2500, 2700) = 200
/// ns is a wait on w0's message. Folded back offline, windows 0 and 1 count
/// their open parts, [110, 1000) = 890 and 1000 ns, as `not_started`. No
/// wait anywhere names w0 before it ran.
#[test]
fn a_wait_on_a_worker_that_was_not_running_is_a_wait_for_it_to_start() {
    let folded = windows_of(true);
    for (r, ns) in folded[..2].iter().zip([890, 1000]) {
        let w = r.waiting.iter().find(|w| w.worker == 1).unwrap();
        assert!(w.open.is_some(), "window {}: {w:?}", r.window);
        let start = WaitedOn { worker: None, channel: None, kind: "not_started", ns, count: 1, carried_ns: 0 };
        assert_eq!(w.on, vec![start], "window {}", r.window);
    }
    let reps = windows_of(false);
    for r in &reps[..2] {
        let w = r.waiting.iter().find(|w| w.worker == 1).unwrap();
        assert!(w.open.is_some() && w.on.is_empty(), "window {}: {w:?}", r.window);
    }
    let w = reps[2].waiting.iter().find(|w| w.worker == 1).unwrap();
    let start = WaitedOn { worker: None, channel: None, kind: "not_started", ns: 500, count: 0, carried_ns: 1890 };
    let on_w0 = WaitedOn { worker: Some(0), channel: Some(5), kind: "data_message", ns: 200, count: 1, carried_ns: 0 };
    assert_eq!(w.on, vec![start, on_w0], "{w:?}");
    let c = w.carried.as_ref().unwrap();
    assert_eq!((c.since_ns, c.ns, c.worker, c.message), (110, 1890, None, Some("not_started")));
}

/// The run's totals (as live reports feed them) count the two windows
/// before w0's process started apart (`starting`) and keep them out of the
/// job's figures: the critical path summed is window 2's alone, and w1's
/// waits on w0 are the 200 ns it waited while w0 ran (and its reply was in
/// flight); the 1890 + 500 ns it
/// waited for w0 to start (carried into window 2, and window 2's own) are
/// counted as such.
#[test]
fn the_runs_totals_keep_the_windows_before_every_process_started_apart() {
    let reps = windows_of(false);
    let mut t = RunTotals::default();
    for r in &reps {
        t.add(r);
    }
    assert_eq!((t.windows, t.starting), (3, 2));
    assert_eq!(t.critical_path_ns, reps[2].critical_path.length_ns);
    assert_eq!(t.waits.get(&(1, Some(0))), Some(&200));
    assert_eq!(t.waits.get(&(1, None)), None);
    assert_eq!(t.not_started_ns, 500 + 1890);
    // The streams and the tracing cost count every window.
    assert_eq!(t.streams.len(), 2);
}

/// A real timely cluster: the `bfs` example as two processes of one worker
/// each on loopback, process 1 started 1.5 s before process 0 (timely's
/// connection loop retries once a second), each tracing into its own file,
/// analyzed together. Whatever the start order turns out to be under load:
/// a window with one process's stream names the other's worker as not
/// started (never "a missing stream?"), is not complete, and no wait in
/// any window is on a worker that has no stream there.
#[test]
fn a_real_cluster_whose_processes_start_apart_names_the_late_one() {
    use std::process::{Command, Stdio};
    let bfs = example("bfs");
    let dir = std::env::temp_dir().join(format!("cluster-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports: Vec<u16> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    let hosts = dir.join("hosts");
    std::fs::write(&hosts, ports.iter().map(|p| format!("127.0.0.1:{p}\n")).collect::<String>()).unwrap();
    let run = |p: usize| {
        Command::new(&bfs)
            .args(["-n", "2", "-p", &p.to_string(), "-h"])
            .arg(&hosts)
            .args(["--nodes", "200000", "--edges", "1000000"])
            .env("PROBE_SINK", format!("file:{}", dir.join(format!("p{p}.rlog")).display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let p1 = run(1);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let p0 = run(0);
    assert!(wait_exit(p0, "bfs -p 0").success());
    assert!(wait_exit(p1, "bfs -p 1").success());
    let json = dir.join("windows.jsonl");
    let st = Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .args(["analyze", "--window", "250ms", "-q", "--json"])
        .arg(&json)
        .arg(dir.join("p0.rlog"))
        .arg(dir.join("p1.rlog"))
        .status()
        .unwrap();
    assert!(st.success());
    let text = std::fs::read_to_string(&json).unwrap();
    let reps: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(reps.len() >= 2, "{text}");
    let workers = |r: &serde_json::Value| -> Vec<u64> {
        let mut v: Vec<u64> = r["streams"].as_array().unwrap().iter().map(|s| s["worker"].as_u64().unwrap()).collect();
        v.sort_unstable();
        v
    };
    for r in &reps {
        let here = workers(r);
        let reasons = r["incomplete_reasons"].to_string();
        assert!(!reasons.contains("missing stream"), "window {}: {reasons}", r["window"]);
        if here.len() == 1 {
            let other = 1 - here[0];
            assert_eq!(r["workers_not_started"], serde_json::json!([other]), "window {}", r["window"]);
            assert_eq!(r["complete"], false);
            assert!(reasons.contains(&format!("w{other}: process not started yet")), "{reasons}");
        }
        for w in r["waiting"].as_array().unwrap() {
            for on in w["on"].as_array().unwrap() {
                if let Some(on) = on["worker"].as_u64() {
                    assert!(here.contains(&on), "window {}: a wait on w{on}, which has no stream: {w}", r["window"]);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
