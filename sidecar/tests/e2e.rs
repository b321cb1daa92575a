//! End to end: traces written by the real probe (several worker threads),
//! into a file and over a Unix socket, analyzed by the `sidecar` binary;
//! corrupt input and disconnects through the binary (issue "Tests").

#![allow(clippy::needless_range_loop)]
mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p).unwrap_or_default().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A small exchange computation on `n` threads, traced by the real probe:
/// every step, operator 1 sends one message to every other worker and
/// operator 2 reads what arrived; progress is broadcast after operator 1.
/// Returns the probe's records produced.
fn traced_run(sink: probe::Sink, n: usize, steps: u64) -> u64 {
    let probe = probe::Probe::builder().sink(sink).workers(n).program("e2e").start().expect("probe start");
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    for _ in 0..n {
        let (tx, rx) = mpsc::channel::<(bool, usize, u64)>();
        txs.push(tx);
        rxs.push(Some(rx));
    }
    let mut handles = Vec::new();
    for i in 0..n {
        let mut w = probe.worker(i);
        let txs = txs.clone();
        let rx = rxs[i].take().unwrap();
        handles.push(std::thread::spawn(move || {
            w.operator(1, "Exchange", &[0, 1]);
            w.operator(2, "Count", &[0, 2]);
            w.channel(7, (1, 0), (2, 0));
            let mut seq = vec![0u64; n];
            for s in 0..steps {
                w.schedule_start(1);
                for (to, tx) in txs.iter().enumerate() {
                    if to != i {
                        w.message_send(7, to, seq[to], 10);
                        let _ = tx.send((false, i, seq[to]));
                        seq[to] += 1;
                    }
                }
                // some work
                let t = Instant::now();
                while t.elapsed() < Duration::from_micros(if i == 1 { 300 } else { 100 }) {}
                w.schedule_stop(1);
                w.progress_send(0, s);
                for (to, tx) in txs.iter().enumerate() {
                    if to != i {
                        let _ = tx.send((true, i, s));
                    }
                }
                w.schedule_start(2);
                while let Ok((progress, from, q)) = rx.try_recv() {
                    if progress {
                        w.progress_recv(0, from, q);
                    } else {
                        w.message_recv(7, from, q, 10);
                    }
                }
                w.schedule_stop(2);
                // idle polling: elided by the probe
                for _ in 0..20 {
                    w.schedule_start(2);
                    w.schedule_stop(2);
                }
                w.step();
            }
            // read what is left
            std::thread::sleep(Duration::from_millis(20));
            w.schedule_start(2);
            while let Ok((progress, from, q)) = rx.try_recv() {
                if progress {
                    w.progress_recv(0, from, q);
                } else {
                    w.message_recv(7, from, q, 10);
                }
            }
            w.schedule_stop(2);
            w.step();
        }));
    }
    drop(txs);
    for h in handles {
        h.join().unwrap();
    }
    let stats = probe.shutdown().expect("probe shutdown");
    stats.workers.iter().map(|w| w.written).sum()
}

fn check_reports(reps: &[Value], records: u64, n: usize) {
    assert!(!reps.is_empty());
    let events: u64 = reps.iter().map(|r| r["events"].as_u64().unwrap()).sum();
    assert_eq!(events, records, "every record lands in exactly one window");
    let mut recvs = 0;
    let mut matched = 0;
    // The window from which every worker's stream has begun (the threads
    // start milliseconds apart on a loaded machine).
    let all_started = (0..n as u64)
        .map(|k| reps.iter().find(|r| r["streams"].as_array().unwrap().iter().any(|s| s["worker"] == k)))
        .map(|r| r.expect("every worker's stream appears")["window"].as_u64().unwrap())
        .max()
        .unwrap();
    for r in reps {
        // Under load the probe may drop records (its ring's policy): such
        // windows are rightly incomplete; so is a window before a thread's
        // stream began, which lacks that worker; nothing else may make them so.
        if !r["complete"].as_bool().unwrap() {
            let why = r["incomplete_reasons"].as_array().unwrap();
            let early = r["window"].as_u64().unwrap() < all_started;
            assert!(
                why.iter().all(|w| {
                    let w = w.as_str().unwrap();
                    w.contains("records lost") || (early && w.contains("no stream in this window"))
                }),
                "{}",
                r["incomplete_reasons"]
            );
        }
        assert!(r["streams"].as_array().unwrap().len() <= n);
        let cp = &r["critical_path"];
        assert!(cp["length_ns"].as_u64().unwrap() <= cp["span_ns"].as_u64().unwrap());
        assert!(cp["stuck"].is_null(), "{}", cp["stuck"]);
        let m = &r["messages"];
        matched += m["data_matched"].as_u64().unwrap();
        recvs += m["data_matched"].as_u64().unwrap() + m["data_from_before"].as_u64().unwrap();
        assert_eq!(m["data_unmatched"].as_u64().unwrap(), 0);
        assert_eq!(m["progress_unmatched"].as_u64().unwrap(), 0);
    }
    assert!(matched > 0);
    assert!(reps.iter().any(|r| r["complete"].as_bool().unwrap()));
    assert!(reps.iter().any(|r| r["streams"].as_array().unwrap().len() == n));
    assert!(recvs > 0);
}

#[test]
fn probe_file_analyzed_by_the_binary() {
    let trace = tmp("probe.rlog");
    let _ = std::fs::remove_file(&trace);
    let records = traced_run(probe::Sink::file(&trace), 3, 300);
    let json = tmp("file.jsonl");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(BIN)
        .args(["analyze", trace.to_str().unwrap(), "--window", "50ms", "--json", json.to_str().unwrap(), "-w", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reps = lines(&json);
    check_reports(&reps, records, 3);
    // dump reads it too
    let d = Command::new(BIN).args(["dump", trace.to_str().unwrap(), "--max-records", "3"]).output().unwrap();
    assert!(d.status.success());
    let text = String::from_utf8_lossy(&d.stdout);
    assert!(text.contains("operator 1 \"Exchange\""), "{}", &text[..text.len().min(2000)]);
}

fn interrupt(child: &mut std::process::Child) -> std::process::Output {
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "sidecar did not exit after Ctrl-C");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    std::process::Output { status: child.try_wait().unwrap().unwrap(), stdout: vec![], stderr: err.into_bytes() }
}

#[test]
fn probe_over_unix_socket_live() {
    let sock = tmp("live.sock");
    let json = tmp("live.jsonl");
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&sock);
    // A stale socket (its listener gone, as after a crash) is replaced.
    // (Mode 0644, so that its replacement, always 0600, is told apart.)
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--listen",
            &format!("unix:{}", sock.display()),
            "--window",
            "100ms",
            "--json",
            json.to_str().unwrap(),
            "-q",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    // The socket it makes is owner-only.
    while std::fs::metadata(&sock).map_or(true, |m| m.permissions().mode() & 0o777 != 0o600) {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "sidecar did not replace the stale {} with an owner-only socket",
            sock.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A second sidecar on the same path refuses instead of taking the live
    // socket over (the first would lose its probes without a word).
    let mut second = Command::new(BIN)
        .args(["run", "--listen", &format!("unix:{}", sock.display()), "-q"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = second.stderr.take().unwrap();
    // (Read after the exit, which wait_exit bounds: a second sidecar that
    // did listen would hold its stderr open.)
    let status = common::wait_exit(second, "a second sidecar on a live socket");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("another process is listening on this socket"), "{err}");
    let records = traced_run(probe::Sink::unix(&sock), 3, 500);
    std::thread::sleep(Duration::from_millis(500));
    let out = interrupt(&mut child);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reps = lines(&json);
    check_reports(&reps, records, 3);
    for r in &reps {
        assert!(r["emitted_after_end_ms"].as_f64().is_some());
    }
    let mut d: Vec<f64> = reps.iter().map(|r| r["emitted_after_end_ms"].as_f64().unwrap()).collect();
    d.sort_by(|a, b| a.total_cmp(b));
    eprintln!("live latency past window end (ms): median {:.1} max {:.1}", d[d.len() / 2], d[d.len() - 1]);
}

/// A live window closes when its streams' data passes its end, not when the
/// grace runs out: the sidecar wakes its analysis for what arrives just
/// after a window's end (on CLOCK_MONOTONIC, the timeline windows are cut
/// on) even though it leaves mid-window frames to its next wake-up. Without
/// that wake-up, windows close at the analysis's next timed wake-up (at most
/// 100 ms apart) or at the deadline (the 300 ms grace here): ~100 ms past
/// their end, against ~10 ms with it.
#[test]
fn live_windows_close_when_the_data_passes_their_end() {
    let sock = tmp("prompt.sock");
    let json = tmp("prompt.jsonl");
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&sock);
    let mut child =
        common::live_sidecar(&sock, &["--window", "500ms", "--grace", "300ms", "--json", json.to_str().unwrap(), "-q"]);
    // ~2 s of two traced workers (worker 1 spins 300 µs a step).
    traced_run(probe::Sink::unix(&sock), 2, 5500);
    std::thread::sleep(Duration::from_millis(800));
    let out = interrupt(&mut child);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reps = lines(&json);
    // The windows the streams ran through (not their last, closed by the
    // streams' end).
    let mut d: Vec<f64> = reps[..reps.len().saturating_sub(1)]
        .iter()
        .filter(|r| r["complete"].as_bool() == Some(true))
        .map(|r| r["emitted_after_end_ms"].as_f64().unwrap())
        .collect();
    assert!(d.len() >= 3, "too few complete windows to judge: {reps:?}");
    d.sort_by(|a, b| a.total_cmp(b));
    let median = d[d.len() / 2];
    eprintln!("complete windows, ms past their end: {d:?}");
    assert!(median < 60.0, "windows waited for a timed wake-up (median {median} ms past their end): {d:?}");
}

/// Bytes of a live stream (MonotonicNs clock, now-based) for `ms` ms.
fn live_bytes_now(w: &mut dyn Write, ms: u64, end: bool) {
    use ringlog::*;
    let base = 1_000_000_000_000u64;
    let t0 = Instant::now();
    let unix0 = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let now = || base + t0.elapsed().as_nanos() as u64;
    let dom = ClockDomain::MonotonicNs;
    let mut e = Encoder::new();
    let mut out = Vec::new();
    let pw = StreamId { host: 9, process: 9, worker: PROCESS_WIDE };
    let hello = Hello {
        host_name: "t".into(),
        program: "t".into(),
        pid: 9,
        workers: 2,
        invariant_tsc: false,
        ticks_per_sec: 0,
    };
    e.hello(pw, 0, dom, &hello, &mut out);
    e.clock(pw, 1, dom, &[ClockSample { ticks: base, monotonic_ns: base, realtime_ns: unix0 }], &mut out);
    let sid = |w| StreamId { host: 9, process: 9, worker: w };
    let mut seq = [0u64; 2];
    for wk in 0..2 {
        e.hello(sid(wk), 0, dom, &hello, &mut out);
        seq[wk as usize] = 1;
    }
    w.write_all(&out).unwrap();
    while t0.elapsed() < Duration::from_millis(ms) {
        out.clear();
        for wk in 0..2u32 {
            let t = now();
            let recs = [
                Record::from_event(t, Event::ScheduleStart { op: 1 }),
                Record::from_event(t + 1000, Event::Mark { id: 1 }),
                Record::from_event(t + 2000, Event::ScheduleStop { op: 1 }),
            ];
            e.records(sid(wk), seq[wk as usize], 0, dom, &[&recs], &mut out);
            seq[wk as usize] += 1;
        }
        w.write_all(&out).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    if end {
        out.clear();
        for wk in 0..2u32 {
            e.end(sid(wk), seq[wk as usize], 0, dom, &EndStats::default(), &mut out);
        }
        w.write_all(&out).unwrap();
    }
}

#[test]
fn live_tcp_disconnect_marks_windows_incomplete() {
    let json = tmp("tcp.jsonl");
    let _ = std::fs::remove_file(&json);
    let mut child = Command::new(BIN)
        .args(["run", "--listen", "tcp:0", "--window", "100ms", "--json", json.to_str().unwrap(), "-q", "-w", "2"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // read the port from stderr's first line
    let mut stderr = child.stderr.take().unwrap();
    let mut line = Vec::new();
    use std::io::Read;
    let mut b = [0u8; 1];
    while stderr.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let line = String::from_utf8(line).unwrap();
    let addr = line.rsplit("tcp:").next().unwrap().trim().to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{line}");
    {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        live_bytes_now(&mut s, 400, false); // no End: a disconnect
    }
    std::thread::sleep(Duration::from_millis(400));
    child.stderr = Some(stderr);
    let out = interrupt(&mut child);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ended without an End frame"), "{err}");
    let reps = lines(&json);
    assert!(reps.len() >= 3, "{}", reps.len());
    let last = reps.last().unwrap();
    assert!(!last["complete"].as_bool().unwrap());
    assert!(last["incomplete_reasons"].to_string().contains("disconnect"));
    // earlier windows were whole
    assert!(reps[1]["complete"].as_bool().unwrap(), "{}", reps[1]);
}

#[test]
fn corrupt_and_truncated_files_are_named_and_others_go_on() {
    let good = tmp("good.rlog");
    let bad = tmp("bad.rlog");
    let cut = tmp("cut.rlog");
    // Three recordings of the same program, as three processes of one host
    // (the same recording twice would be refused: its frames would count
    // twice).
    let recording = |pid| {
        let cfg = sidecar::synth::SynthConfig { records: 200_000, workers: 2, pid, ..Default::default() };
        common::synth_bytes_of(&cfg)
    };
    std::fs::write(&good, recording(4242)).unwrap();
    let bytes = recording(4243);
    let mut b2 = bytes.clone();
    let mid = b2.len() / 2;
    for x in &mut b2[mid..mid + 64] {
        *x ^= 0x5a;
    }
    std::fs::write(&bad, &b2).unwrap();
    let bytes = recording(4244);
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let json = tmp("corrupt.jsonl");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(BIN)
        .args([
            "analyze",
            good.to_str().unwrap(),
            bad.to_str().unwrap(),
            cut.to_str().unwrap(),
            "--window",
            "20ms",
            "--json",
            json.to_str().unwrap(),
            "-q",
            "-w",
            "3",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The flipped bytes fall in a payload: that frame's stream is dropped,
    // the file's other stream goes on.
    assert!(err.contains(&format!("{}: stream host", bad.display())), "{err}");
    assert!(err.contains("worker 1 dropped: decode error at byte"), "{err}");
    assert!(err.contains(&format!("{}: decode error at byte", cut.display())), "{err}");
    assert!(err.contains("input ends inside a frame"), "{err}");
    let reps = lines(&json);
    assert!(!reps.is_empty());
    // The three processes of one host land on the same timeline: the
    // windows with the corrupt recording are marked, the analysis completed.
    assert!(reps.iter().any(|r| r["incomplete_reasons"].to_string().contains("decode error")));
}

/// Flips a byte in the payload of worker `worker`'s Records frame `seq`
/// (its header, with its own checksum, stays sound); returns the frame's
/// byte offset.
fn corrupt_payload(bytes: &mut [u8], worker: u32, seq: u64) -> usize {
    let (at, h) = common::frames(bytes)
        .into_iter()
        .find(|(_, h)| h.kind == ringlog::FrameKind::Records && h.stream.worker == worker && h.seq == seq)
        .unwrap_or_else(|| panic!("no Records frame #{seq} of worker {worker}"));
    bytes[at + ringlog::HEADER_LEN + h.payload_len as usize / 2] ^= 0x55;
    at
}

/// `analyze FILE --window 50ms -q -w WORKERS --json …` with
/// `SIDECAR_UNPACK=UNPACK` and `SIDECAR_ANALYSIS=UNPACK` (frames unpacked,
/// and windows analyzed, on helper threads, or both on the analysis worker;
/// the unpacking with one worker per file only): its output and reports.
fn analyze_50ms(file: &Path, workers: &str, unpack: &str) -> (std::process::Output, Vec<Value>) {
    let json = tmp(&format!("onebad_{}_{workers}_{unpack}.jsonl", file.file_stem().unwrap().to_string_lossy()));
    let _ = std::fs::remove_file(&json);
    let out = Command::new(BIN)
        .args(["analyze", file.to_str().unwrap(), "--window", "50ms", "-q", "-w", workers])
        .arg("--json")
        .arg(&json)
        .env("SIDECAR_UNPACK", unpack)
        .env("SIDECAR_ANALYSIS", unpack)
        .output()
        .unwrap();
    (out, lines(&json))
}

/// The ways one file is read: one worker with its helper threads (unpacking,
/// analysis) or without, two workers sharing it with analysis threads or
/// without.
const READS: [(&str, &str); 4] = [("1", "off"), ("1", "on"), ("2", "off"), ("2", "on")];

/// `bad` is `clean` with a fault in worker 2's stream: read in each of the
/// [`READS`] ways alike, worker 2's stream is dropped, named once with
/// `msg`, and the other streams go on to the end, record for record as in
/// `clean`. Returns the clean reports.
fn assert_only_worker_2_is_dropped(name: &str, clean: &[u8], bad: &[u8], msg: &str) -> Vec<Value> {
    let (fg, fb) = (tmp(&format!("{name}_good.rlog")), tmp(&format!("{name}_bad.rlog")));
    std::fs::write(&fg, clean).unwrap();
    std::fs::write(&fb, bad).unwrap();
    let (ok, clean) = analyze_50ms(&fg, "1", "off");
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    let records = |r: &Value, w: u64| -> Option<u64> {
        r["streams"].as_array().unwrap().iter().find(|s| s["worker"] == w).map(|s| s["records"].as_u64().unwrap())
    };
    let mut outputs = Vec::new();
    for (workers, unpack) in READS {
        let (out, reps) = analyze_50ms(&fb, workers, unpack);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(msg), "-w {workers}, unpack {unpack}: {err}");
        assert_eq!(err.matches("dropped").count(), 1, "{err}");
        // The other three streams go on to the end, record for record as
        // in the clean trace.
        assert_eq!(reps.len(), clean.len());
        for (r, c) in reps.iter().zip(&clean) {
            for w in [0, 1, 3] {
                assert_eq!(records(r, w), records(c, w), "worker {w} in {r}");
            }
        }
        // From the window the fault is in, every window is incomplete: the
        // first names the fault, the later ones lack worker 2.
        let first = reps.iter().position(|r| r["incomplete_reasons"].to_string().contains("dropped")).unwrap();
        assert!(first > 0 && first + 2 < reps.len(), "{first} of {}", reps.len());
        assert!(reps[..first].iter().all(|r| r["complete"] == true));
        for r in &reps[first..] {
            assert_eq!(r["complete"], false, "{r}");
        }
        assert!(reps[first + 1..].iter().all(|r| records(r, 2).is_none()));
        outputs.push(reps);
    }
    assert_eq!(outputs[0], outputs[1], "-w 1 with and without the helper threads agree");
    assert_eq!(outputs[0], outputs[2], "-w 1 and -w 2 agree");
    assert_eq!(outputs[2], outputs[3], "-w 2 with and without the analysis threads agree");
    clean
}

#[test]
fn a_corrupt_frame_drops_only_its_stream() {
    let bytes = common::synth_bytes(400_000, 4);
    let mut bad = bytes.clone();
    let at = corrupt_payload(&mut bad, 2, 12);
    corrupt_payload(&mut bad, 2, 14); // reported with the first: once
    let msg = format!("worker 2 dropped: decode error at byte {at}: payload checksum mismatch in Records frame #12");
    let clean = assert_only_worker_2_is_dropped("onebad", &bytes, &bad, &msg);
    let run = analyze_50ms;
    // A process-wide frame (its clock samples) that does not decode ends
    // the file for every stream of it; with -w 2 both analysis workers
    // decode it, one reports it.
    let mut pw = bytes.clone();
    let (cat, ch) = common::frames(&pw)
        .into_iter()
        .find(|(_, h)| h.stream.is_process_wide() && h.kind == ringlog::FrameKind::Clock)
        .unwrap();
    pw[cat + ringlog::HEADER_LEN + ch.payload_len as usize / 2] ^= 0x55;
    let fp = tmp("onebad_process.rlog");
    std::fs::write(&fp, &pw).unwrap();
    for (workers, unpack) in READS {
        let (out, _) = run(&fp, workers, unpack);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.matches(&format!("decode error at byte {cat}")).count(), 1, "-w {workers}: {err}");
        assert!(!err.contains("dropped"), "{err}");
    }
    // A frame header that fails its checksum loses the framing: the whole
    // file ends there, named, without a stream to blame.
    let mut lost = bytes.clone();
    lost[at + 30] ^= 0x55;
    let fl = tmp("onebad_header.rlog");
    std::fs::write(&fl, &lost).unwrap();
    let mut outputs = Vec::new();
    for unpack in ["off", "on"] {
        let (out, reps) = run(&fl, "1", unpack);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("{}: decode error at byte {at}: ", fl.display())), "{err}");
        assert!(!err.contains("dropped"), "{err}");
        assert!(reps.len() < clean.len());
        outputs.push(reps);
    }
    assert_eq!(outputs[0], outputs[1], "with and without the helper threads");
    // A file cut inside its last frame: everything before the cut is
    // analyzed, the truncation is named.
    let fc = tmp("onebad_cut.rlog");
    std::fs::write(&fc, &bytes[..bytes.len() - 100]).unwrap();
    let mut outputs = Vec::new();
    for unpack in ["off", "on"] {
        let (out, reps) = run(&fc, "1", unpack);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("{}: decode error at byte", fc.display())), "{err}");
        assert!(err.contains("input ends inside a frame"), "{err}");
        assert!(!reps.is_empty() && reps.len() <= clean.len());
        outputs.push(reps);
    }
    assert_eq!(outputs[0], outputs[1], "with and without the helper threads");
}

/// CRC-32 (IEEE), as the format uses; written out so the test does not
/// share code with the implementation.
fn crc32(b: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
        }
    }
    !c
}

#[test]
fn a_record_that_does_not_decode_drops_only_its_stream() {
    // Checksums sound, the records not: the last record of worker 2's frame
    // #12 runs past the payload's end. The records are decoded as they are
    // ingested, so this fault is found only after the ones before it were
    // taken; the stream is dropped all the same, and nothing else is.
    let bytes = common::synth_bytes_of(&sidecar::synth::SynthConfig {
        records: 400_000,
        workers: 4,
        compression: ringlog::Compression::None,
        ..Default::default()
    });
    let mut bad = bytes.clone();
    let (at, h) = common::frames(&bad)
        .into_iter()
        .find(|(_, h)| h.kind == ringlog::FrameKind::Records && h.stream.worker == 2 && h.seq == 12)
        .unwrap();
    assert!(!h.compressed);
    let payload = at + ringlog::HEADER_LEN..at + ringlog::HEADER_LEN + h.payload_len as usize;
    bad[payload.end - 1] |= 0x80;
    let crc = crc32(&bad[payload]);
    bad[at + 64..at + 68].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32(&bad[at..at + 68]);
    bad[at + 68..at + 72].copy_from_slice(&crc.to_le_bytes());
    let msg = format!("worker 2 dropped: decode error at byte {at}: in Records frame #12: payload ends while reading");
    assert_only_worker_2_is_dropped("badrecord", &bytes, &bad, &msg);
}

#[test]
fn two_hosts_are_reported_unsynchronized_never_mixed() {
    use common::*;
    // host 1 runs worker 0, host 2 worker 1; worker 0 sends to worker 1.
    let a = encode_host(1, 10, 0, &[vec![(0, start(1)), (500, send(5, 1, 0)), (900, stop(1))]], true, &[]);
    let b = encode_host(2, 20, 1, &[vec![(100, start(1)), (600, recv(5, 0, 0)), (950, stop(1))]], true, &[]);
    let (fa, fb, json) = (tmp("host1.rlog"), tmp("host2.rlog"), tmp("hosts.jsonl"));
    std::fs::write(&fa, a).unwrap();
    std::fs::write(&fb, b).unwrap();
    let _ = std::fs::remove_file(&json);
    let out = Command::new(BIN)
        .args([
            "analyze",
            fa.to_str().unwrap(),
            fb.to_str().unwrap(),
            "--window",
            "1us",
            "--json",
            json.to_str().unwrap(),
            "-q",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reps = lines(&json);
    let hosts: std::collections::BTreeSet<String> =
        reps.iter().map(|r| r["host"].as_str().unwrap().to_string()).collect();
    assert_eq!(hosts.len(), 2, "one timeline per host");
    for r in &reps {
        assert_eq!(r["streams"].as_array().unwrap().len(), 1, "never mixed");
        assert_eq!(r["unsynchronized_hosts"].as_array().unwrap().len(), 1);
        assert!(!r["complete"].as_bool().unwrap());
        assert!(r["incomplete_reasons"].to_string().contains("other hosts"), "{}", r["incomplete_reasons"]);
    }
}
