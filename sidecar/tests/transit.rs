//! Transit between processes: a message that crosses processes is in
//! flight between its send and the moment its receiver could first read it,
//! and a receiver polling meanwhile waits on it (docs/analysis.md, "Transit
//! between processes"). Known-answer traces of two processes exchanging a
//! message per round, one direction slow, each receiver polling for the
//! other's message; the truth comes from the schedule the test builds.

mod common;
use common::*;
use sidecar::analysis::report::{RunTotals, WindowReport};
use sidecar::output::watch::{Cost, Summary};
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

/// The truth in `[0, W)`: each worker's waiting (ns; a wait still open at
/// the window's end is typed where it ends, and offline its part in the
/// window is counted there: docs/analysis.md), and the critical path's
/// transit and length, walked back
/// as Sager's Algorithm 1 does: from a worker busy at the window's end (the
/// lower first), or, when both are waiting there, from the latest end of
/// any work (`started_before_end`, docs/analysis.md); along its work; at a
/// read that ended a wait, over the message to its send.
fn truth(s: &[Vec<Round>; 2]) -> ([u64; 2], u64, u64) {
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
    let last_end =
        |w: usize| s[w].iter().flat_map(|rd| [rd.t + A_NS, rd.r + B_NS]).filter(|&e| e <= W).max().unwrap_or(0);
    let (mut w, mut t) = match (busy_at(0, W), busy_at(1, W)) {
        (true, _) => (0, W),
        (false, true) => (1, W),
        _ if last_end(0) >= last_end(1) => (0, last_end(0)),
        _ => (1, last_end(1)),
    };
    let length = t;
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
                transit += rd.r - sent;
                (w, t) = (other, sent);
            } else {
                t = rd.t + A_NS;
            }
        } else {
            t = rd.t; // in A (B of the round before ends where A starts)
        }
    }
    (waiting, transit, length)
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
    // w1 → w0 readable 2 µs after its send, w0 → w1 after 50 ns. The
    // schedule settles into pairs of rounds (4,070 ns): both start a round
    // together; w1 reads w0's message 50 ns after its A (B at +1,050) while
    // w0 waits 2,000 for w1's (B at +3,000); w1, now 1,950 ns ahead, sends
    // early and waits 2,000 for w0's next message (sent at w0's +1,000,
    // read 50 later), while w0 waits 50 for w1's: both meet again. The
    // path alternates A (1,000), transit 2,000 or 50, B (10): about half of
    // it transit.
    let s = schedule([50, 2_000], 60);
    let r = window0(&trace(&s));
    let ([w0_waits, w1_waits], transit, length) = truth(&s);
    // Every 4,070 ns (two rounds) each worker waits 2,000 on the other's
    // slow round and 50 on its fast one: about half of each worker's time.
    assert!(w0_waits > 40_000 && w1_waits > 40_000, "both wait about equally: {w0_waits} {w1_waits}");
    assert!(transit > 45_000, "transit {transit} of {W}");
    let cp = &r.critical_path;
    // At the window's end both workers are waiting (w0 since 98,680 on
    // w1's message in flight until 100,680; w1 since 99,740 on w0's): the
    // path starts at w1's A ending at 99,740.
    assert_eq!((cp.length_ns, cp.equals_span), (length, length == W), "{cp:?}");
    assert_eq!(cp.by_kind.data_message, transit, "{:?}", cp.by_kind);
    assert_eq!(cp.by_kind.unknown, 0, "{:?}", cp.by_kind);
    assert_eq!(cp.by_kind.operator + cp.by_kind.data_message, length);
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
    // The window line says it, and so does the run's summary (`sidecar
    // watch`, `--summary-json`'s `transit_share`): the path's transit over
    // its length.
    let line = r.readable_line();
    let pct = |x: f64| format!("{:.0}%", 100.0 * x);
    let share = transit as f64 / length as f64;
    assert!(line.contains(&format!("(transit between processes {})", pct(share))), "{line}");
    let mut t = RunTotals::default();
    t.add(&r);
    let cost = Cost::new(&t, None, 12.0, 10.0);
    let summary = Summary::new(&["x".into()], 0, 1.0, &t, cost);
    assert!((summary.transit_share - share).abs() < 1e-9, "{}", summary.transit_share);
    let text = summary.text();
    assert!(text.contains(&format!("; transit between processes {:.1}%", 100.0 * share)), "{text}");
}

/// Within one process a message arrives as it is sent: each worker's
/// waiting in the window (as in [`truth`]), from the schedule. A
/// gap is a wait on the other's message only if it was sent inside the gap
/// (a message sent before, or as, the gap began was buffered: not waiting,
/// Sager §5.1), and the wait ends at that send.
fn truth_one_process(s: &[Vec<Round>; 2]) -> [u64; 2] {
    let mut waiting = [0u64; 2];
    for w in 0..2 {
        for (k, rd) in s[w].iter().enumerate() {
            let (gap, sent) = (rd.t + A_NS, s[1 - w][k].t + A_NS);
            if sent > gap && sent <= rd.r {
                waiting[w] += sent.min(W).saturating_sub(gap.min(W));
            }
        }
    }
    waiting
}

#[test]
fn within_one_process_a_message_arrives_as_it_is_sent() {
    // The same schedule, both workers in one process: arrival = send, so no
    // transit is on the path, and a gap is a wait only until the other's
    // send. w0's gaps all begin at or after w1's send (w1 is the one ahead):
    // never waiting. w1's gaps of its early rounds (2,000 long) end, as
    // waits, at w0's send 1,950 ns in; those of its late rounds begin as w0
    // sends: not waiting.
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
    let [w0_waits, w1_waits] = truth_one_process(&s);
    assert_eq!(w0_waits, 0);
    assert!(w1_waits > 40_000, "{w1_waits}");
    assert_eq!(waited(&r, 0, 1), w0_waits, "{:?}", r.waiting);
    assert_eq!(waited(&r, 1, 0), w1_waits, "{:?}", r.waiting);
    // And across processes the same schedule has w0 waiting on w1's
    // messages in flight: the transit rule alone makes the difference.
    let cross = window0(&trace(&s));
    assert!(waited(&cross, 0, 1) > 40_000, "{:?}", cross.waiting);
}
