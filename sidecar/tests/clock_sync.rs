//! Clock sync end to end (issue 4 stage 1): a hand-built two-host trace
//! through the analysis (known answer), and a live run of real probes
//! through `sidecar relay` into `sidecar run --clock-listen` on loopback.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ringlog::{ClockExchange, ClockSync, Encoder, StreamId, PROCESS_WIDE};
use serde_json::Value;
use sidecar::analysis::report::WaitedOn;
use sidecar::pipeline::analyze_bytes;

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");
const A: u64 = 0xa; // the reference host
const B: u64 = 0xb; // the remote host

/// Host B's CLOCK_MONOTONIC at reference time `t` ns: 5 s ahead and 100 ppm
/// fast.
fn b_clock(t: i64) -> u64 {
    (5_000_000_000 + t + t.div_euclid(10_000)) as u64
}

/// Exchanges a relay on B would have made: every 200 µs of reference time,
/// 1 µs each way (t2 = t3: the responder stamps once).
fn exchanges() -> Vec<u8> {
    let xs: Vec<ClockExchange> = (0..12i64)
        .map(|k| {
            let t = k * 200_000;
            ClockExchange { t1: b_clock(t - 1_000), t2: t as u64, t3: t as u64, t4: b_clock(t + 1_000) }
        })
        .collect();
    let mut out = Vec::new();
    let relay = StreamId { host: B, process: 999, worker: PROCESS_WIDE };
    Encoder::new().clock_sync(relay, 0, &ClockSync { reference_host: A, exchanges: xs }, &mut out);
    out
}

/// Two hosts' byte streams (reference times, B's on its own clock).
fn two_hosts(with_exchanges: bool) -> (Vec<u8>, Vec<u8>) {
    // The straggler scenario of known_answer.rs, µs instead of ns, across
    // hosts: A's worker 0 computes [0, 500] and sends to B's worker 1 at 490,
    // then waits for B's reply (next window). B is idle from 110 until the
    // message (sent 490, in flight between hosts until B could read it:
    // B's execution that reads it starts at 600), reads it at 601, works
    // to the window's end.
    let a = encode_host(
        A,
        10,
        0,
        &[vec![
            (0, start(1)),
            (490_000, send(5, 1, 0)),
            (500_000, stop(1)),
            (505_000, step()),
            (1_100_000, start(2)),
            (1_101_000, recv(6, 1, 0)),
            (1_150_000, stop(2)),
        ]],
        true,
        &[],
    );
    let bt = |t: i64| b_clock(t);
    let b_events = vec![
        (bt(0), start(1)),
        (bt(100_000), stop(1)),
        (bt(110_000), step()),
        (bt(600_000), start(2)),
        (bt(601_000), recv(5, 0, 0)),
        (bt(900_000), stop(2)),
        (bt(900_000), start(3)),
        (bt(1_050_000), send(6, 0, 0)),
        (bt(1_060_000), stop(3)),
    ];
    let b = encode_host(B, 20, 1, &[b_events], true, &[]);
    let b = if with_exchanges { [exchanges(), b].concat() } else { b };
    (a, b)
}

#[test]
fn two_hosts_known_answer_synchronized() {
    let (a, b) = two_hosts(true);
    let (reps, errs) = analyze_bytes(&[("host a", &a), ("host b via relay", &b)], 1_000_000);
    assert!(errs.is_empty(), "{errs:?}");
    // One timeline: every window is A's, with B's stream in it.
    assert!(
        reps.iter().all(|r| r.host == format!("{A:016x}")),
        "{:?}",
        reps.iter().map(|r| &r.host).collect::<Vec<_>>()
    );
    let r = reps.iter().find(|r| r.window == 0).expect("window 0");
    assert!(r.complete, "{:?}", r.incomplete_reasons);
    assert_eq!(r.synchronized_hosts, vec![format!("{B:016x}")]);
    assert!(r.unsynchronized_hosts.is_empty());
    assert_eq!(r.streams.len(), 2);
    let hosts: Vec<&str> = r.streams.iter().map(|s| s.host.as_str()).collect();
    assert_eq!(hosts, [format!("{A:016x}"), format!("{B:016x}")], "each stream names its own host");
    // Converted times are known to within a few round trips (2 µs each).
    let u = r.clock_uncertainty_ns.expect("converted streams");
    assert!(u > 0 && u < 10_000, "uncertainty {u} ns");
    // The message is matched across hosts ...
    assert_eq!(r.messages.data_matched, 1);
    assert_eq!(r.messages.data_unmatched, 0);
    assert_eq!(r.causality_clamps, 0);
    // ... and ends B's wait, which is attributed to A's worker 0.
    let w1 = r.waiting.iter().find(|w| w.worker == 1).unwrap();
    assert_eq!(w1.on.len(), 1);
    let WaitedOn { worker, channel, kind, count, ns, .. } = w1.on[0].clone();
    assert_eq!((worker, channel, kind, count), (Some(0), Some(5), "data_message", 1));
    // [110 µs, 600 µs] on the reference timeline, to within the
    // uncertainty: between hosts the message arrives when B could first
    // read it, the start of the execution that reads it (docs/analysis.md,
    // "Transit between processes"; arrival = send would say 380 µs).
    assert!(ns.abs_diff(490_000) <= u, "waited {ns} ns");
    // The critical path crosses hosts: A's operator 1 up to the send, the
    // message's transit [490, 600], then B's work after it to the window's
    // end.
    let cp = &r.critical_path;
    assert!(cp.by_kind.data_message.abs_diff(110_000) <= u, "{cp:?}");
    assert!(cp.top_channels.iter().any(|c| (c.channel, c.src_worker, c.dst_worker) == (5, 0, 1)), "{cp:?}");
    let workers: Vec<u32> = cp.by_worker.iter().map(|w| w.worker).collect();
    assert!(workers.contains(&0) && workers.contains(&1), "{workers:?}");
    assert!(cp.equals_span, "{cp:?}");
    let op = |w: u32, o: u32| cp.top_operators.iter().find(|x| (x.worker, x.operator) == (w, o)).map(|x| x.ns);
    assert!(op(0, 1).is_some_and(|ns| ns.abs_diff(490_000) <= u), "{cp:?}");
    assert!(op(1, 2).is_some_and(|ns| ns.abs_diff(300_000) <= u), "{cp:?}");
    assert!(op(1, 3).is_some_and(|ns| ns.abs_diff(100_000) <= u), "{cp:?}");
}

/// The same two hosts recorded to files and analyzed by `sidecar analyze`:
/// the exchanges are read first (issue 31.3: B's events converted with the
/// exchanges on both sides), so the binary's reports carry the same
/// timeline, matching and clock uncertainty as the inline analysis.
#[test]
fn recorded_files_are_converted_with_all_their_exchanges() {
    let (a, b) = two_hosts(true);
    let (inline, _) = analyze_bytes(&[("host a", &a), ("host b via relay", &b)], 1_000_000);
    let (fa, fb, json) = (tmp("rec-a.rlog"), tmp("rec-b.rlog"), tmp("rec.jsonl"));
    std::fs::write(&fa, &a).unwrap();
    std::fs::write(&fb, &b).unwrap();
    let out = Command::new(BIN)
        .args(["analyze", "--window", "1ms", "-q", "--json", json.to_str().unwrap()])
        .args([&fa, &fb])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let reps: Vec<Value> =
        std::fs::read_to_string(&json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let w0 = reps.iter().find(|r| r["window"] == 0).expect("window 0");
    let r = inline.iter().find(|r| r.window == 0).unwrap();
    assert_eq!(w0["synchronized_hosts"][0], format!("{B:016x}"));
    assert_eq!(w0["clock_uncertainty_ns"].as_u64(), r.clock_uncertainty_ns);
    assert_eq!(w0["messages"]["data_matched"], 1);
    assert_eq!(w0["causality_clamps"], 0);
    // A pipe is read once, by the analysis (the exchanges' first pass
    // skips what is not a regular file).
    let mut child = Command::new(BIN)
        .args(["analyze", "--window", "1ms", "-q", "--json", "-", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &a));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().any(|l| l.contains("\"window\":0")), "host a's windows from a pipe: {text}");
}

/// Process ids are per host: the two hosts' processes are two processes of
/// the cluster when their ids are equal too (as in containers, where the
/// engine is often process 1 on every host). A runs workers 0 and 1, B 2
/// and 3; A's worker 0 sends to B's worker 2, and B's worker 3 starts in
/// window 1, so window 0 lacks it. With equal ids the two processes were
/// one: four streams for its two announced workers, window 0 complete.
#[test]
fn processes_of_two_hosts_with_the_same_id_are_not_merged() {
    let run = |pid_b| {
        let a0 = vec![(0, start(1)), (490_000, send(5, 2, 0)), (500_000, stop(1)), (505_000, step())];
        let a1 = vec![(0, start(1)), (100_000, stop(1)), (110_000, step())];
        let a = encode_host(A, 10, 0, &[a0, a1], true, &[]);
        let b2 = vec![
            (b_clock(0), start(1)),
            (b_clock(100_000), stop(1)),
            (b_clock(110_000), step()),
            (b_clock(600_000), start(2)),
            (b_clock(601_000), recv(5, 0, 0)),
            (b_clock(900_000), stop(2)),
        ];
        let b3 = vec![(b_clock(1_500_000), start(1)), (b_clock(1_600_000), stop(1))];
        let b = [exchanges(), encode_host(B, pid_b, 2, &[b2, b3], true, &[])].concat();
        let (reps, errs) = analyze_bytes(&[("host a", &a), ("host b via relay", &b)], 1_000_000);
        assert!(errs.is_empty(), "{errs:?}");
        reps.iter()
            .map(|r| {
                let waits: Vec<_> = r.waiting.iter().map(|w| (w.worker, w.waiting_ns / 1000, w.on.len())).collect();
                (r.window, r.complete, r.messages.data_matched, waits)
            })
            .collect::<Vec<_>>()
    };
    let distinct = run(20);
    assert_eq!((distinct[0].1, distinct[0].2), (false, 1), "window 0 lacks worker 3; the message matched");
    assert_eq!(run(10), distinct);
}

/// The first pass over recorded files knows the timelines the windows
/// will be on before any record is read: B's file carries its exchanges
/// before its records, so B is on A's timeline; without exchanges each
/// host is on its own.
#[test]
fn the_first_pass_knows_the_runs_timelines() {
    for (with_exchanges, want) in [(true, vec![A]), (false, vec![A, B])] {
        let (a, b) = two_hosts(with_exchanges);
        let (fa, fb) = (tmp(&format!("tl-a-{with_exchanges}.rlog")), tmp(&format!("tl-b-{with_exchanges}.rlog")));
        std::fs::write(&fa, &a).unwrap();
        std::fs::write(&fb, &b).unwrap();
        let first = sidecar::io::first_pass_of(&[fa.clone(), fb.clone()]);
        let registry = sidecar::ingest::sync::Registry::offline(first.clock_sync.iter().map(|(h, cs)| (*h, cs)));
        let timelines = first.timelines(&registry).expect("whole files");
        assert_eq!(timelines.into_iter().collect::<Vec<_>>(), want, "exchanges: {with_exchanges}");
        // (The inline analysis puts its windows on the same timelines.)
        let (reps, _) = analyze_bytes(&[("host a", &a), ("host b", &b)], 1_000_000);
        let hosts: std::collections::BTreeSet<String> = reps.iter().map(|r| r.host.clone()).collect();
        assert_eq!(hosts, want.iter().map(|h| format!("{h:016x}")).collect());
        // A file cut inside its last frame (its writer stopped) is read
        // to its end all the same; a damaged frame with more after it is
        // not: the hosts seen so far are used instead.
        std::fs::write(&fb, &b[..b.len() - 3]).unwrap();
        assert!(sidecar::io::first_pass_of(&[fa.clone(), fb.clone()]).timelines(&registry).is_some());
        let mut damaged = b.clone();
        damaged[3] ^= 0xff; // the first frame's header
        std::fs::write(&fb, &damaged).unwrap();
        assert!(sidecar::io::first_pass_of(&[fa, fb]).timelines(&registry).is_none());
    }
}

/// Hosts analyzed apart from recorded files: every window names the other
/// hosts as unsynchronized, all of them, however many workers read the
/// files (each worker reads its own streams, and had named only the hosts
/// the process had read by then).
#[test]
fn unsynchronized_hosts_do_not_depend_on_the_workers() {
    let files: Vec<PathBuf> = (0..6u64)
        .map(|k| {
            let cfg =
                sidecar::synth::SynthConfig { records: 40_000, workers: 4, host: 0x100 + k, ..Default::default() };
            let f = tmp(&format!("hosts-{k}.rlog"));
            std::fs::write(&f, synth_bytes_of(&cfg)).unwrap();
            f
        })
        .collect();
    let run = |w: &str| {
        let json = tmp(&format!("hosts-w{w}.jsonl"));
        let out = Command::new(BIN)
            .args(["analyze", "--window", "10ms", "-q", "-w", w, "--json", json.to_str().unwrap()])
            .args(&files)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(&json).unwrap()
    };
    let one = run("1");
    let reps: Vec<Value> = one.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(reps.len() >= 6);
    for r in &reps {
        assert_eq!(r["unsynchronized_hosts"].as_array().unwrap().len(), 5, "{r}");
    }
    assert_eq!(run("2"), one);
    assert_eq!(run("3"), one);
}

#[test]
fn two_hosts_without_exchanges_stay_unsynchronized() {
    let (a, b) = two_hosts(false);
    let (reps, errs) = analyze_bytes(&[("host a", &a), ("host b", &b)], 1_000_000);
    assert!(errs.is_empty(), "{errs:?}");
    let hosts: std::collections::BTreeSet<&str> = reps.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(hosts.len(), 2, "one timeline per host");
    for r in &reps {
        assert_eq!(r.streams.len(), 1, "never mixed");
        assert!(r.synchronized_hosts.is_empty() && r.clock_uncertainty_ns.is_none());
        assert_eq!(r.unsynchronized_hosts.len(), 1);
    }
    let r = reps.iter().find(|r| r.window == 0 && r.host == format!("{A:016x}")).unwrap();
    assert_eq!(r.messages.data_matched, 0);
    assert!(!r.complete);
    assert!(r.incomplete_reasons.iter().any(|x| x.contains("other hosts")), "{:?}", r.incomplete_reasons);
}

#[test]
fn a_receive_converted_before_its_send_is_clamped() {
    // A tight message: the read on B is at the same reference time as the
    // send, closer than the conversion's uncertainty, so the converted
    // point may fall before the send.
    let a = encode_host(
        A,
        10,
        0,
        &[vec![(0, start(1)), (500_000, send(5, 1, 0)), (900_000, stop(1)), (900_000, start(2)), (1_300_000, stop(2))]],
        true,
        &[],
    );
    let b_events = vec![
        (b_clock(0), start(1)),
        (b_clock(100_000), stop(1)),
        (b_clock(110_000), step()),
        (b_clock(499_000), start(2)),
        (b_clock(500_000), recv(5, 0, 0)),
        (b_clock(950_000), stop(2)),
        (b_clock(950_000), start(3)),
        (b_clock(1_300_000), stop(3)),
    ];
    let b = [exchanges(), encode_host(B, 20, 1, &[b_events], true, &[])].concat();
    let (reps, errs) = analyze_bytes(&[("a", &a), ("b", &b)], 1_000_000);
    assert!(errs.is_empty(), "{errs:?}");
    let r = reps.iter().find(|r| r.window == 0).unwrap();
    assert_eq!(r.messages.data_matched, 1);
    // Never inverted: either the point already followed the send, or the
    // receive was clamped to it; the analysis saw no read before its send.
    assert_eq!(r.messages.read_before_send, 0);
    assert!(r.causality_clamps <= 1);
    assert!(r.complete, "{:?}", r.incomplete_reasons);
}

// ---- live: real probes, a relay, a reference sidecar on loopback ----

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-sync-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn interrupt(child: &mut Child) -> String {
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(30), "no exit after Ctrl-C");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    use std::io::Read;
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    if !child.try_wait().unwrap().unwrap().success() {
        // The one failure this test tolerates: the live start-up race
        // (README "Several hosts"): a relayed stream whose first data
        // reaches the sidecar after the analysis closed that window. Seen
        // twice in ~60 runs on a loaded 2-core machine; the windows are
        // still checked below. Any other error fails.
        let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("sidecar: error:")).collect();
        assert!(
            !errors.is_empty() && errors.iter().all(|l| l.contains("arrived after their window was analyzed")),
            "{err}"
        );
        eprintln!("tolerated start-up race: {}", errors.join("; "));
    }
    err
}

fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Worker 0 traced by `pa`, worker 1 by `pb` (another host id): each step
/// worker 0 works, then sends to worker 1, which waits for it.
fn cross_host_run(pa: &probe::Probe, pb: &probe::Probe, steps: u64) {
    let (tx, rx) = mpsc::channel::<u64>();
    let mut w0 = pa.worker(0);
    let mut w1 = pb.worker(1);
    let h0 = std::thread::spawn(move || {
        w0.operator(1, "Produce", &[0, 1]);
        w0.channel(7, (1, 0), (2, 0));
        for s in 0..steps {
            w0.schedule_start(1);
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(400) {}
            w0.message_send(7, 1, s, 10);
            let _ = tx.send(s);
            w0.schedule_stop(1);
            w0.step();
        }
    });
    let h1 = std::thread::spawn(move || {
        w1.operator(2, "Consume", &[0, 2]);
        w1.channel(7, (1, 0), (2, 0));
        while let Ok(s) = rx.recv() {
            w1.schedule_start(2);
            w1.message_recv(7, 0, s, 10);
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(100) {}
            w1.schedule_stop(2);
            w1.step();
        }
    });
    h0.join().unwrap();
    h1.join().unwrap();
}

#[test]
fn live_probes_through_a_relay_are_synchronized() {
    let (sock, relay_sock, json) = (tmp("ref.sock"), tmp("relay.sock"), tmp("sync.jsonl"));
    for p in [&sock, &relay_sock, &json] {
        let _ = std::fs::remove_file(p);
    }
    let port = free_udp_port();
    let clock = format!("udp:127.0.0.1:{port}");
    let mut sidecar = common::live_sidecar(
        &sock,
        &["--clock-listen", &clock, "--window", "100ms", "--grace", "300ms", "-q", "--json", json.to_str().unwrap()],
    );
    let mut relay = Command::new(BIN)
        .args(["relay", "--listen", &format!("unix:{}", relay_sock.display())])
        .args(["--to", &format!("unix:{}", sock.display()), "--clock", &format!("udp:127.0.0.1:{port}")])
        .args(["--host-id", "0xb0b", "--clock-period", "100ms"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for(&relay_sock);
    // Probes stamp CLOCK_MONOTONIC here: with the TSC, each probe process
    // maps ticks to ns from its own start-up calibration (sidecar clock.rs),
    // and two processes then disagree by up to ~100 µs in their first
    // second, an error outside what clock sync bounds (it would show as
    // clamps beyond the bound). This test is about the sync path.
    std::env::set_var("PROBE_CLOCK", "monotonic");
    // B (through the relay, the longer way) connects first: a stream that
    // connects after the analysis has moved past its first window would
    // find that window closed (a live-mode start-up race, not sync's).
    let pb = probe::Probe::builder()
        .sink(probe::Sink::unix(&relay_sock))
        .workers(1)
        .program("host-b")
        .host_id(0xb0b)
        .start()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let pa = probe::Probe::builder().sink(probe::Sink::unix(&sock)).workers(1).program("host-a").start().unwrap();
    cross_host_run(&pa, &pb, 2_000);
    pa.shutdown().unwrap();
    pb.shutdown().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let relay_err = interrupt(&mut relay);
    let side_err = interrupt(&mut sidecar);
    eprintln!("{relay_err}{side_err}");
    let reps: Vec<Value> =
        std::fs::read_to_string(&json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(!reps.is_empty(), "{side_err}");
    assert!(reps.iter().all(|r| r["host"] != "0000000000000b0b"), "host b must be on the reference timeline");
    let synced: Vec<&Value> =
        reps.iter().filter(|r| r["synchronized_hosts"].to_string().contains("0000000000000b0b")).collect();
    assert!(synced.len() >= 5, "{} synchronized windows of {}", synced.len(), reps.len());
    let mut us: Vec<u64> = synced.iter().map(|r| r["clock_uncertainty_ns"].as_u64().unwrap()).collect();
    us.sort_unstable();
    eprintln!(
        "loopback clock uncertainty per window (ns): min {} median {} max {}",
        us[0],
        us[us.len() / 2],
        us[us.len() - 1]
    );
    assert!(us[us.len() - 1] < 1_000_000, "uncertainty {us:?}");
    // Both hosts' streams in one window, and messages matched across them.
    let both = synced.iter().filter(|r| r["streams"].as_array().unwrap().len() == 2).count();
    assert!(both >= 5, "{both}");
    let matched: u64 = synced.iter().map(|r| r["messages"]["data_matched"].as_u64().unwrap()).sum();
    assert!(matched >= 1000, "matched {matched} of 2000 cross-host messages");
    let waits_on_0 = synced
        .iter()
        .filter(|r| {
            r["waiting"]
                .as_array()
                .unwrap()
                .iter()
                .any(|w| w["worker"] == 1 && w["on"].to_string().contains("\"worker\":0"))
        })
        .count();
    assert!(waits_on_0 >= 1, "worker 1 (host b) should wait on worker 0 (host a)");
    assert!(relay_err.contains("exchanges"), "{relay_err}");
}
