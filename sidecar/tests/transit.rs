//! Transit between processes: a message that crosses processes is in
//! flight between its send and the moment its receiver could first read it,
//! and a receiver polling meanwhile waits on it (docs/analysis.md, "Transit
//! between processes"). Known-answer traces of two processes exchanging a
//! message per round, one direction slow, each receiver polling for the
//! other's message; the truth comes from the schedule the test builds.

mod common;
use common::*;
use sidecar::analysis::report::WindowReport;
use sidecar::pipeline::analyze_bytes;

/// Window width (ns) and the schedule's figures: operator A computes for
/// `A_NS`, sends its message and stops; the worker then polls until the
/// other's message can be read, and operator B reads it (`B_NS`).
const W: u64 = 100_000;
const A_NS: u64 = 1_000;
const B_NS: u64 = 10;
/// Channel of each direction: w0 → w1 on 5, w1 → w0 on 6.
const CH: [u32; 2] = [5, 6];

/// One worker's round: A over `[t, t + A_NS]` (its send at the end), a gap
/// while it polls, B reading the other's message over `[r, r + B_NS]`.
#[derive(Clone, Copy, Debug)]
struct Round {
    t: u64,
    r: u64,
}

/// Runs the two workers for `rounds` rounds, the message from worker `w`
/// readable `transit[w]` after its send; returns each worker's rounds.
fn schedule(transit: [u64; 2], rounds: usize) -> [Vec<Round>; 2] {
    let mut out: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    let mut t = [0u64; 2];
    for _ in 0..rounds {
        let sent = [t[0] + A_NS, t[1] + A_NS];
        for w in 0..2 {
            let other = 1 - w;
            // B runs once A is done and the other's message is readable.
            let r = (t[w] + A_NS).max(sent[other] + transit[other]);
            out[w].push(Round { t: t[w], r });
        }
        for (w, rounds) in out.iter().enumerate() {
            t[w] = rounds.last().unwrap().r + B_NS;
        }
    }
    out
}

/// The trace of `schedule`: worker 0 in process 1, worker 1 in process 2,
/// both on one host (a cluster of two processes of one worker each).
fn trace(s: &[Vec<Round>; 2]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for w in 0..2usize {
        let other = 1 - w as u32;
        let mut ev = Vec::new();
        for (k, rd) in s[w].iter().enumerate() {
            let seq = k as u64;
            ev.extend([(rd.t, start(1)), (rd.t + A_NS, send(CH[w], other, seq)), (rd.t + A_NS, stop(1))]);
            ev.push((rd.t + A_NS, step()));
            ev.extend([(rd.r, start(2)), (rd.r + 5, recv(CH[other as usize], other, seq)), (rd.r + B_NS, stop(2))]);
        }
        bytes.extend(encode_host(HOST, 1 + w as u32, w as u32, &[ev], true, &[]));
    }
    bytes
}

/// The truth in `[0, W)`: each worker's waiting (ns), and the critical path's
/// transit, walked back from the window's end as Sager's Algorithm 1 does
/// (a worker busy at the end, the lower first; along its work; at a read
/// that ended a wait, over the message to its send).
fn truth(s: &[Vec<Round>; 2]) -> ([u64; 2], u64) {
    let clip = |a: u64, b: u64| b.min(W).saturating_sub(a.min(W));
    let mut waiting = [0u64; 2];
    for w in 0..2 {
        for rd in &s[w] {
            waiting[w] += clip(rd.t + A_NS, rd.r);
        }
    }
    // Where a worker is at time t: in round k's A, its gap, or its B.
    let busy_at =
        |w: usize, t: u64| s[w].iter().any(|rd| (rd.t < t && t <= rd.t + A_NS) || (rd.r < t && t <= rd.r + B_NS));
    let (mut w, mut t) = (if busy_at(0, W) { 0 } else { 1 }, W);
    let mut transit = 0;
    while t > 0 {
        let rd = s[w].iter().rev().find(|rd| rd.t < t).copied().unwrap();
        if t > rd.r {
            // In B: back to its start; a wait before it ended at the read's
            // message: over it to the other's send.
            if rd.r > rd.t + A_NS {
                let other = 1 - w;
                let k = s[w].iter().position(|x| x.t == rd.t).unwrap();
                let sent = s[other][k].t + A_NS;
                transit += rd.r.min(W) - sent;
                (w, t) = (other, sent);
            } else {
                t = rd.t + A_NS;
            }
        } else {
            t = rd.t; // in A (B of the round before ends where A starts)
        }
    }
    (waiting, transit)
}

fn window0(bytes: &[u8]) -> WindowReport {
    let (reps, errs) = analyze_bytes(&[("transit", bytes)], W);
    assert!(errs.is_empty(), "{errs:?}");
    let r = reps.into_iter().find(|r| r.window == 0).unwrap();
    assert!(r.complete, "{:?}", r.incomplete_reasons);
    r
}

fn waited(r: &WindowReport, w: u32, on: u32) -> u64 {
    r.waiting.iter().filter(|x| x.worker == w).flat_map(|x| &x.on).filter(|o| o.worker == Some(on)).map(|o| o.ns).sum()
}

#[test]
fn a_slow_link_between_processes_is_transit_on_the_path_and_waits_on_both_sides() {
    // w1 → w0 readable 2 µs after its send, w0 → w1 after 50 ns. In the
    // steady state (`schedule`) each round takes 2,035 ns: w0 computes 1,000
    // and waits 1,025 for w1's message; w1, 975 ns ahead, computes 1,000 and
    // waits 1,025 for w0's. The path alternates A (1,000), transit 2,000 or
    // 50, B (10): about half of it transit.
    let s = schedule([50, 2_000], 60);
    let r = window0(&trace(&s));
    let ((w0_waits, w1_waits), transit) = {
        let (w, t) = truth(&s);
        ((w[0], w[1]), t)
    };
    assert!(w0_waits > 40_000 && w1_waits > 40_000, "both wait about equally: {w0_waits} {w1_waits}");
    assert!(transit > 45_000, "transit {transit} of {W}");
    let cp = &r.critical_path;
    assert_eq!((cp.length_ns, cp.equals_span), (W, true), "{cp:?}");
    assert_eq!(cp.by_kind.data_message, transit, "{:?}", cp.by_kind);
    assert_eq!(cp.by_kind.unknown, 0, "{:?}", cp.by_kind);
    assert_eq!(cp.by_kind.operator + cp.by_kind.data_message, W);
    // Every wait is on the other worker, on its message.
    assert_eq!(waited(&r, 0, 1), w0_waits, "{:?}", r.waiting);
    assert_eq!(waited(&r, 1, 0), w1_waits, "{:?}", r.waiting);
    for (w, on) in [(0u32, 1u32), (1, 0)] {
        let ww = r.waiting.iter().find(|x| x.worker == w).unwrap();
        assert_eq!(ww.waiting_for_input_ns, 0, "{ww:?}");
        assert!(ww
            .on
            .iter()
            .all(|o| o.worker == Some(on) && o.kind == "data_message" && o.channel == Some(CH[on as usize])));
    }
    // The window line says it.
    let line = r.readable_line();
    assert!(line.contains("transit"), "{line}");
}

#[test]
fn within_one_process_a_message_arrives_as_it_is_sent() {
    // The same schedule, both workers in one process: arrival = send, so a
    // worker whose message was sent before its poll began was not waiting
    // on it (the read just came later), and no transit is on the path.
    let s = schedule([50, 2_000], 60);
    let mut ev: Vec<Vec<(u64, ringlog::Event)>> = vec![Vec::new(), Vec::new()];
    for w in 0..2usize {
        let other = 1 - w as u32;
        for (k, rd) in s[w].iter().enumerate() {
            let seq = k as u64;
            ev[w].extend([(rd.t, start(1)), (rd.t + A_NS, send(CH[w], other, seq)), (rd.t + A_NS, stop(1))]);
            ev[w].push((rd.t + A_NS, step()));
            ev[w].extend([(rd.r, start(2)), (rd.r + 5, recv(CH[other as usize], other, seq)), (rd.r + B_NS, stop(2))]);
        }
    }
    let r = window0(&encode(&ev));
    assert_eq!(r.critical_path.by_kind.data_message, 0, "{:?}", r.critical_path.by_kind);
    // w0's message reaches w1 (sent at 1,000 into w0's round) before w1's
    // poll begins (w1 is 975 ns ahead, its A ends 25 ns after w0's send):
    // buffered, no wait of w1's is on w0.
    assert_eq!(waited(&r, 1, 0), 0, "{:?}", r.waiting);
}
