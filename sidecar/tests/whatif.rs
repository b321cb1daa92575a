//! What-if (issue 32) through the whole analysis: a known-answer gather
//! with two stragglers, predicted by the window's automatic ranking and by
//! `sidecar whatif` on a recorded file.

mod common;
use common::*;

use serde_json::Value;
use sidecar::pipeline::analyze_bytes;

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

/// w0 computes (op 1, "A") [0, 1000) and sends to w3 at 990; w1 [0, 800),
/// sends at 790; w2 [0, 300), sends at 290. w3 runs op 1 [0, 100), then
/// waits for all three and reads them in op 2 ("B") [1000, 1200), at 1001,
/// 1002, 1003. The wait is on w0 (the last sender): from the step at 110 to
/// w0's send at 990 (880 ns), then 10 ns of unknown time before op 2.
///
/// w0's op 1 2× faster: w0 sends at 495, w3's wait ends there, op 2 starts
/// at 505, reads w0's message at 506 and w1's at 507, before w1 sends
/// (790): it stalls there, and the rest of op 2 (1200 − 1002 = 198) ends at
/// 988. The window: 1200 → 988, saving 212 (17.7 %), where the share of
/// w0's op 1 on the path (990 × ½ = 495) would say 41 %. w0's op 1 taking
/// no time saves the same: w1 holds w3 back either way.
fn gather() -> Vec<Vec<(u64, ringlog::Event)>> {
    let straggler = |end: u64| vec![(0, start(1)), (end - 10, send(5, 3, 0)), (end, stop(1)), (end + 5, step())];
    vec![
        straggler(1000),
        straggler(800),
        straggler(300),
        vec![
            (0, start(1)),
            (100, stop(1)),
            (110, step()),
            (1000, start(2)),
            (1001, recv(5, 0, 0)),
            (1002, recv(5, 1, 0)),
            (1003, recv(5, 2, 0)),
            (1200, stop(2)),
        ],
    ]
}

#[test]
fn a_gather_with_two_stragglers_is_predicted_from_the_trace() {
    let bytes = encode(&gather());
    let (reps, errs) = analyze_bytes(&[("gather", &bytes)], 10_000);
    assert!(errs.is_empty(), "{errs:?}");
    let r = reps.iter().find(|r| r.window == 0).unwrap();
    assert!(r.complete, "{:?}", r.incomplete_reasons);
    assert_eq!(r.critical_path.top_operators[0].worker, 0);
    let find = |s: &str| r.what_if.iter().find(|w| w.speedup == s).unwrap_or_else(|| panic!("{s}: {:?}", r.what_if));
    let two = find("w0:A=2");
    assert_eq!((two.measured_ns, two.predicted_ns, two.saved_ns), (1200, 988, 212), "{two:?}");
    assert_eq!(two.naive_saved_ns, 495);
    assert_eq!(find("w0:A=inf").predicted_ns, 988);
    // Every worker's op 1 2× faster: w0 sends at 495 and w1 at 395, so op 2
    // runs unstalled from 505 to 705.
    assert_eq!(find("A=2").predicted_ns, 705);
    // The ranking: the largest saving first.
    assert!(r.what_if.windows(2).all(|p| p[0].saved_ns >= p[1].saved_ns), "{:?}", r.what_if);
    // Every worker's A taking no time: w3's op 1 is gone too; 10 ns of
    // unknown time, the wait ends at once (w0 sent at 0), 10 more, op 2
    // runs 200: 220 of 1200, −82 %: the bound. The window line says the
    // best 2× speedup: every worker's A, 1200 → 705, −41 %.
    assert_eq!(find("A=inf").predicted_ns, 220);
    assert!(r.readable_line().contains("what-if: all workers' A 2× faster: window −41 %"), "{}", r.readable_line());
}

#[test]
fn sidecar_whatif_predicts_a_recorded_run() {
    let dir = std::env::temp_dir().join(format!("sidecar-whatif-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("gather.rlog");
    std::fs::write(&f, encode(&gather())).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["whatif", "--json", "--speedup", "w0:A=2,w1:A=2"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // w0 and w1 2× faster: w1 sends at 395 < 505, op 2 unstalled: 705.
    assert_eq!((v["measured_ns"].as_u64(), v["predicted_ns"].as_u64()), (Some(1200), Some(705)), "{v}");
    assert_eq!(v["speedup"], "w0:A=2,w1:A=2");
    // By id as by name (operator 1 is A); a later item overrides an
    // earlier one: every worker's A 2×, but w1's, w2's and w3's as they
    // were, is w0's alone (1200 → 988).
    for spec in ["w0:1=2", "A=2,w1:A=1,w2:A=1,w3:A=1"] {
        let out =
            std::process::Command::new(BIN).args(["whatif", "--json", "--speedup", spec]).arg(&f).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["predicted_ns"].as_u64(), Some(988), "{spec}: {v}");
    }
    // The text form names the total; a bad spec is refused, naming it.
    let text = std::process::Command::new(BIN).args(["whatif", "--speedup", "A=2"]).arg(&f).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("what if A=2") && text.contains("total: measured 0.0 ms"), "{text}");
    let bad = std::process::Command::new(BIN).args(["whatif", "--speedup", "A=fast"]).arg(&f).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a number of times faster"));
    let _ = std::fs::remove_dir_all(&dir);
}

const MS: u64 = 1_000_000;

/// A closed-loop driver, three rounds, in ms from the round's start R
/// (R = 0, 7.2, 14.4): w0's driver pushes the round's input at R
/// (`closed`: a send outside any execution, as `input.send` after
/// `step_while` is) and w0 runs A (op 1) [R+0.01, R+4], reading it, and
/// sends its result to w1 at R+3.99; w1 reads it in B (op 2) [R+4.1, R+5]
/// and sends an ack at R+4.99; w0 waits for it and reads it in C (op 3)
/// [R+5.1, R+5.2], and steps at R+5.21. Then w0's driver makes the next
/// round's input (nothing recorded: it is outside timely's step) until
/// R+7.2. (w1 starts at 0 with D, op 4, [0, 0.005].) With `!closed`
/// nothing is pushed: A starts on input nothing in
/// the trace sent (as a source operator finds it), after waiting for it.
fn rounds(closed: bool) -> Vec<Vec<(u64, ringlog::Event)>> {
    let at = |r: u64, us: u64| r * 7_200_000 + us * 1_000;
    let (mut w0, mut w1) = (Vec::new(), Vec::new());
    for r in 0..3 {
        if closed {
            w0.extend([(at(r, 0), send(7, 0, r)), (at(r, 10), start(1)), (at(r, 20), recv(7, 0, r))]);
        } else {
            w0.push((at(r, 10), start(1)));
        }
        w0.extend([(at(r, 3990), send(5, 1, r)), (at(r, 4000), stop(1)), (at(r, 4010), step())]);
        w0.extend([(at(r, 5100), start(3)), (at(r, 5101), recv(6, 1, r)), (at(r, 5200), stop(3))]);
        w0.push((at(r, 5210), step()));
        w1.extend([(at(r, 4100), start(2)), (at(r, 4101), recv(5, 0, r)), (at(r, 4990), send(6, 0, r))]);
        w1.extend([(at(r, 5000), stop(2)), (at(r, 5010), step())]);
    }
    // (w1 is there from the start: D, op 4, [0, 0.005].)
    w1.splice(0..0, [(0, start(4)), (5_000, stop(4)), (10_000, step())]);
    vec![w0, w1]
}

/// `sidecar whatif --json` on `bytes` with `--window window`: (measured,
/// predicted) ns.
fn whatif_file(bytes: &[u8], spec: &str, window: &str, name: &str) -> (u64, u64) {
    let dir = std::env::temp_dir().join(format!("sidecar-whatif-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("t.rlog");
    std::fs::write(&f, bytes).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["whatif", "--json", "--speedup", spec, "--window", window])
        .arg(&f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    if std::env::var_os("KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    (v["measured_ns"].as_u64().unwrap(), v["predicted_ns"].as_u64().unwrap())
}

/// The closed loop: w0's A 2× faster. A [R+0.01, R+4] is split at its
/// send (it ended w1's wait): 3.98 ms before it take 1.99, so the send
/// comes at R+2.0; w1's wait ends there, B and the ack follow 1.99 ms
/// earlier, w0's wait on the ack ends 1.99 ms earlier, C and the step too,
/// and the driver's 1.99 ms of making the next input (a gap its own push
/// ends) keeps its length: the next round starts 1.99 ms earlier. Measured:
/// from 0 to the last step after C, 14.4 + 5.21 = 19.61 ms; predicted
/// 19.61 − 3 × 1.99 = 13.64 ms. Per window (2, 4 and 10 ms windows,
/// replayed one by one from their measured start) the sum agrees within 5
/// points. (It does not for windows far shorter than a round, 1 ms: 36.8 %
/// against 30.4 %, each window's piece of A shrinking alone; nor for 7.2 ms
/// windows, each ending at the driver's push, whose gap then falls outside
/// every window's span: 38.2 %.)
#[test]
fn a_closed_loop_driver_moves_with_the_speedup() {
    let bytes = encode(&rounds(true));
    let (measured, predicted) = whatif_file(&bytes, "w0:A=2", "100000s", "closed");
    assert_eq!((measured, predicted), (19_610 * MS / 1000, 13_640 * MS / 1000));
    let whole = 1.0 - predicted as f64 / measured as f64;
    for window in ["2ms", "4ms", "10ms"] {
        let (m, p) = whatif_file(&bytes, "w0:A=2", window, &format!("closed-{window}"));
        let sum = 1.0 - p as f64 / m as f64;
        assert!((sum - whole).abs() <= 0.05, "{window}: windows say {sum:.3}, the whole run {whole:.3}");
    }
}

/// Input from outside keeps its time: the same rounds, but each round's A
/// starts on input nothing in the trace sent, after waiting for it. Rounds
/// 1 and 2 gain nothing (their inputs arrive at 7.21 and 14.41 as they
/// did); the last round ends 1.99 ms earlier: 19.61 → 17.62 ms.
#[test]
fn input_from_outside_keeps_its_time_in_the_replay() {
    let bytes = encode(&rounds(false));
    assert_eq!(whatif_file(&bytes, "w0:A=2", "100000s", "open"), (19_610 * MS / 1000, 17_620 * MS / 1000));
}
