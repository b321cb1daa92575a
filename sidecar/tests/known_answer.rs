//! Known-answer traces built by hand: the exact critical path, waits and
//! shares are asserted (issue "Tests"). Window width 1000 ns; the traces run
//! a little past the first window, which is the one checked.

mod common;
use common::*;
use sidecar::analysis::report::{ByKind, OpShare, WaitedOn, WindowReport};
use sidecar::pipeline::analyze_bytes;

fn window0(workers: &[Vec<(u64, ringlog::Event)>]) -> WindowReport {
    let bytes = encode(workers);
    keep_for_golden(&bytes);
    let (reps, errs) = analyze_bytes(&[("test", &bytes)], 1000);
    assert!(errs.is_empty(), "{errs:?}");
    let r = reps.into_iter().find(|r| r.window == 0).unwrap();
    assert!(r.complete, "{:?}", r.incomplete_reasons);
    r
}

/// With `SIDECAR_GOLDEN_DIR` set, the trace is also written there, named
/// after the test, so the golden comparison (`sidecar/tests/golden/`) can
/// analyze it with the binary.
fn keep_for_golden(bytes: &[u8]) {
    if let Some(dir) = std::env::var_os("SIDECAR_GOLDEN_DIR") {
        let name = std::thread::current().name().unwrap_or("unnamed").replace("::", "-");
        std::fs::write(std::path::Path::new(&dir).join(format!("ka-{name}.rlog")), bytes).unwrap();
    }
}

fn op(worker: u32, operator: u32, ns: u64) -> OpShare {
    OpShare {
        worker,
        operator,
        name: ["A", "B", "C", "D"][operator as usize - 1].into(),
        ns,
        share: ns as f64 / 1000.0,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn straggler_two_workers() {
    // w0 (the straggler) computes [0,800], sending to w1 at 790; then waits
    // for w1's reply, which comes in the next window.
    let w0 = vec![
        (0, start(1)),
        (790, send(5, 1, 0)),
        (800, stop(1)),
        (805, step()),
        (1100, start(2)),
        (1101, recv(6, 1, 0)),
        (1150, stop(2)),
    ];
    // w1 is done at 100, waits for w0's message (arrives 790), reads it.
    let w1 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (795, start(2)),
        (796, recv(5, 0, 0)),
        (900, stop(2)),
        (900, start(3)),
        (1050, send(6, 0, 0)),
        (1060, stop(3)),
    ];
    let r = window0(&[w0, w1]);
    let cp = &r.critical_path;
    assert_eq!((cp.length_ns, cp.span_ns, cp.equals_span), (1000, 1000, true));
    assert_eq!(cp.by_kind, ByKind { operator: 995, unknown: 5, ..Default::default() });
    assert_eq!(cp.top_operators, vec![op(0, 1, 790), op(1, 2, 105), op(1, 3, 100)]);
    let bw: Vec<(u32, u64)> = cp.by_worker.iter().map(|w| (w.worker, w.ns)).collect();
    assert_eq!(bw, vec![(0, 790), (1, 210)]);
    assert_eq!(cp.top_channels.len(), 1);
    assert_eq!((cp.top_channels[0].channel, cp.top_channels[0].src_worker, cp.top_channels[0].dst_worker), (5, 0, 1));
    // waits: w1 on w0 over channel 5 for [110, 790]; w0 cut at the end.
    assert_eq!(r.waiting[1].waiting_ns, 680);
    assert_eq!(
        r.waiting[1].on,
        vec![WaitedOn { worker: Some(0), channel: Some(5), kind: "data_message", ns: 680, count: 1, carried_ns: 0 }]
    );
    assert_eq!(r.waiting[0].waiting_ns, 195);
    assert_eq!(
        r.waiting[0].on,
        vec![WaitedOn { worker: Some(1), channel: Some(6), kind: "data_message", ns: 195, count: 1, carried_ns: 0 }]
    );
    // participation: 3 paths; w0's A is on two of them.
    let p0 = r.participation.iter().find(|p| p.worker == 0 && p.id == Some(1)).unwrap();
    assert!(close(p0.score, 1590.0 / 3000.0), "{}", p0.score);
    assert_eq!(r.participation[0].worker, 0);
    let p = |w: u32, id: Option<u64>, act: &str| {
        r.participation.iter().find(|p| p.worker == w && p.id == id && p.activity == act).map(|p| p.score).unwrap()
    };
    assert!(close(p(1, Some(2), "operator"), 105.0 / 3000.0));
    assert!(close(p(1, Some(1), "operator"), 100.0 / 3000.0));
    assert!(close(p(1, None, "unknown"), 15.0 / 3000.0));
    let pr = &r.properties;
    assert!(pr.min_in_degree.ok && pr.communication_existence.ok && pr.wait_termination.ok);
}

#[test]
fn skewed_exchange_all_wait_on_one() {
    // w2 holds the skewed key: everyone waits for its messages.
    let mut ws = Vec::new();
    for w in 0..4u32 {
        if w == 2 {
            ws.push(vec![
                (0, start(1)),
                (590, send(5, 0, 0)),
                (595, send(5, 1, 0)),
                (598, send(5, 3, 0)),
                (600, stop(1)),
                (600, start(2)),
                (1100, stop(2)),
            ]);
        } else {
            let arrive = [590, 595, 0, 598][w as usize];
            ws.push(vec![
                (0, start(1)),
                (100, stop(1)),
                (110, step()),
                (600, start(2)),
                (601 + w as u64, recv(5, 2, 0)),
                (700, stop(2)),
                (700, start(3)),
                (1100, stop(3)),
            ]);
            let _ = arrive;
        }
    }
    let r = window0(&ws);
    let cp = &r.critical_path;
    assert_eq!((cp.length_ns, cp.equals_span), (1000, true));
    assert_eq!(cp.by_kind, ByKind { operator: 990, unknown: 10, ..Default::default() });
    assert_eq!(cp.top_operators, vec![op(2, 1, 590), op(0, 3, 300), op(0, 2, 100)]);
    for (w, ns) in [(0usize, 480u64), (1, 485), (3, 488)] {
        assert_eq!(r.waiting[w].waiting_ns, ns, "worker {w}");
        assert_eq!(
            r.waiting[w].on,
            vec![WaitedOn { worker: Some(2), channel: Some(5), kind: "data_message", ns, count: 1, carried_ns: 0 }]
        );
    }
    assert_eq!(r.waiting[2].waiting_ns, 0);
    assert_eq!(r.messages.data_matched, 3);
}

#[test]
fn input_bound_waiting_for_input() {
    let w0 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (500, start(1)),
        (600, stop(1)),
        (610, step()),
        (900, start(1)),
        (1100, stop(1)),
    ];
    let w1 = vec![
        (0, start(1)),
        (50, stop(1)),
        (60, step()),
        (400, start(1)),
        (450, stop(1)),
        (460, step()),
        (1200, start(1)),
        (1210, stop(1)),
    ];
    let r = window0(&[w0, w1]);
    let cp = &r.critical_path;
    assert_eq!((cp.length_ns, cp.equals_span), (1000, true));
    assert_eq!(cp.by_kind, ByKind { operator: 300, waiting_for_input: 680, unknown: 20, ..Default::default() });
    assert_eq!(r.waiting[0].waiting_for_input_ns, 680);
    assert_eq!(r.waiting[1].waiting_for_input_ns, 340 + 540);
    assert_eq!(r.waiting[0].waiting_ns + r.waiting[1].waiting_ns, 0);
    assert!(r.properties.communication_existence.ok);
}

#[test]
fn pipeline_four_workers() {
    // w0 → w1 → w2 → w3, each stage hands over and then waits for feedback
    // from w3 (in the next window).
    let w0 = vec![
        (0, start(1)),
        (190, send(5, 1, 0)),
        (200, stop(1)),
        (210, step()),
        (1100, start(1)),
        (1101, recv(9, 3, 0)),
        (1110, stop(1)),
    ];
    let w1 = vec![
        (0, start(1)),
        (10, stop(1)),
        (20, step()),
        (195, start(2)),
        (196, recv(5, 0, 0)),
        (390, send(6, 2, 0)),
        (400, stop(2)),
        (410, step()),
        (1100, start(2)),
        (1102, recv(9, 3, 1)),
        (1110, stop(2)),
    ];
    let w2 = vec![
        (0, start(1)),
        (10, stop(1)),
        (20, step()),
        (395, start(3)),
        (396, recv(6, 1, 0)),
        (590, send(7, 3, 0)),
        (600, stop(3)),
        (610, step()),
        (1100, start(3)),
        (1103, recv(9, 3, 2)),
        (1110, stop(3)),
    ];
    let w3 = vec![
        (0, start(1)),
        (10, stop(1)),
        (20, step()),
        (595, start(4)),
        (596, recv(7, 2, 0)),
        (1050, send(9, 0, 0)),
        (1051, send(9, 1, 1)),
        (1052, send(9, 2, 2)),
        (1060, stop(4)),
    ];
    let r = window0(&[w0, w1, w2, w3]);
    let cp = &r.critical_path;
    assert_eq!((cp.length_ns, cp.equals_span), (1000, true));
    assert_eq!(cp.by_kind, ByKind { operator: 985, unknown: 15, ..Default::default() });
    let bw: Vec<(u32, u64)> = cp.by_worker.iter().map(|w| (w.worker, w.ns)).collect();
    assert_eq!(bw, vec![(3, 410), (1, 200), (2, 200), (0, 190)]);
    assert_eq!(cp.top_operators, vec![op(3, 4, 405), op(1, 2, 195), op(2, 3, 195), op(0, 1, 190)]);
    let chans: Vec<(u32, u32, u32)> = cp.top_channels.iter().map(|c| (c.channel, c.src_worker, c.dst_worker)).collect();
    assert_eq!(chans, vec![(5, 0, 1), (6, 1, 2), (7, 2, 3)]);
    // the handover waits, and the feedback waits cut at the window's end
    assert_eq!(
        r.waiting[1].on,
        vec![
            WaitedOn { worker: Some(3), channel: Some(9), kind: "data_message", ns: 590, count: 1, carried_ns: 0 },
            WaitedOn { worker: Some(0), channel: Some(5), kind: "data_message", ns: 170, count: 1, carried_ns: 0 },
        ]
    );
    assert_eq!(
        r.waiting[0].on,
        vec![WaitedOn { worker: Some(3), channel: Some(9), kind: "data_message", ns: 790, count: 1, carried_ns: 0 }]
    );
    assert_eq!(r.waiting[3].waiting_ns, 570);
    // Root causes: w2 waited 20..390 for w1's send, but w1 was itself
    // waiting on w0 until 190, so 20..190 (170) is charged to w0 and only
    // 190..390 (200, w1's own stage) to w1; the wait's count stays with
    // its largest share (and 610..1000, cut, on w3's feedback: 390). w3 waited 20..590 for w2: 20..190 on w0 (through
    // w2 and w1), 190..390 on w1 (through w2), 390..590 on w2.
    let on = |k: usize| -> Vec<(Option<u32>, Option<u32>, u64, u64)> {
        r.waiting[k].on.iter().map(|o| (o.worker, o.channel, o.ns, o.count)).collect()
    };
    assert_eq!(on(2), vec![(Some(3), Some(9), 390, 1), (Some(1), Some(6), 200, 1), (Some(0), Some(5), 170, 0)]);
    assert_eq!(on(3), vec![(Some(1), Some(6), 200, 0), (Some(2), Some(7), 200, 1), (Some(0), Some(5), 170, 0)]);
    let pr = &r.properties;
    assert!(pr.min_in_degree.ok && pr.communication_existence.ok && pr.wait_termination.ok);
}

#[test]
fn loss_disconnect_and_missing_streams_mark_windows_incomplete() {
    let w0 = vec![(0, start(1)), (100, stop(1)), (150, start(1)), (250, stop(1)), (1500, start(1)), (1600, stop(1))];
    let w1 = vec![(0, start(1)), (300, stop(1)), (400, start(1)), (500, stop(1))];
    // records lost before w0's second frame (which starts at 150)
    let bytes = encode_opts(&[w0.clone(), w1.clone()], true, &[(0, 1, 3)]);
    let (reps, _) = analyze_bytes(&[("lossy", &bytes)], 1000);
    assert!(!reps[0].complete);
    assert_eq!(reps.iter().map(|r| r.lost_records).sum::<u64>(), 3);
    assert!(
        reps[0].incomplete_reasons.iter().any(|r| r.contains("3 records lost")),
        "{:?}",
        reps[0].incomplete_reasons
    );
    // disconnect: no End frames; the last windows are incomplete, named.
    let bytes = encode_opts(&[w0, w1], false, &[]);
    let (reps, errs) = analyze_bytes(&[("cut", &bytes)], 1000);
    assert!(errs.iter().any(|e| e.contains("cut: 2 stream(s) ended without an End frame")), "{errs:?}");
    let last = reps.last().unwrap();
    assert!(!last.complete);
    assert!(last.incomplete_reasons.iter().any(|r| r.contains("disconnect")));
    // w1's stream ended in window 0 without End: window 0 incomplete too
    assert!(!reps[0].complete);
}

/// Two independent programs traced into one sidecar on one host (two
/// probes, README "run"): each numbers its workers from 0, so both have a
/// worker 0 sending on channel 5 to itself and to its worker 1. Messages are
/// matched within each program, and each worker 1 waits on its own
/// program's worker 0. (The window's message groups were keyed by worker
/// index alone: the two programs' tables joined, a read's slot indexed the
/// other program's reads — index out of bounds, the analysis panicked.)
#[test]
fn programs_sharing_worker_indices_on_one_host_are_matched_apart() {
    let tail = [(1100, start(1)), (1110, stop(1))];
    let a0 = [
        (0, start(1)),
        (10, send(5, 0, 0)),
        (20, send(5, 0, 1)),
        (500, send(5, 1, 0)),
        (510, stop(1)),
        (520, start(2)),
        (530, recv(5, 0, 0)),
        (540, recv(5, 0, 1)),
        (550, stop(2)),
    ];
    let a1 = [(0, start(1)), (100, stop(1)), (110, step()), (600, start(2)), (610, recv(5, 0, 0)), (700, stop(2))];
    let b0 = [
        (0, start(1)),
        (10, send(5, 0, 0)),
        (300, send(5, 1, 0)),
        (310, stop(1)),
        (320, start(2)),
        (330, recv(5, 0, 0)),
        (340, stop(2)),
    ];
    let b1 = [(0, start(1)), (100, stop(1)), (110, step()), (400, start(2)), (410, recv(5, 0, 0)), (500, stop(2))];
    let w = |v: &[(u64, ringlog::Event)]| v.iter().chain(&tail).copied().collect::<Vec<_>>();
    let a = encode_host(HOST, 1, 0, &[w(&a0), w(&a1)], true, &[]);
    let b = encode_host(HOST, 2, 0, &[w(&b0), w(&b1)], true, &[]);
    let (reps, errs) = analyze_bytes(&[("a", &a), ("b", &b)], 1000);
    assert!(errs.is_empty(), "{errs:?}");
    let r = reps.iter().find(|r| r.window == 0).unwrap();
    assert!(r.complete, "{:?}", r.incomplete_reasons);
    let m = &r.messages;
    assert_eq!((m.data_matched, m.data_worker_local, m.data_in_flight, m.data_from_before), (5, 3, 0, 0));
    let streams: Vec<(u32, u32)> = r.streams.iter().map(|s| (s.process, s.worker)).collect();
    assert_eq!(streams, vec![(1, 0), (1, 1), (2, 0), (2, 1)]);
    // A's worker 1 waits [110, 500], B's [110, 300], each on its worker 0.
    let on =
        |ns| vec![WaitedOn { worker: Some(0), channel: Some(5), kind: "data_message", ns, count: 1, carried_ns: 0 }];
    assert_eq!((r.waiting[1].waiting_ns, &r.waiting[1].on), (390, &on(390)));
    assert_eq!((r.waiting[3].waiting_ns, &r.waiting[3].on), (190, &on(190)));
    assert!(r.properties.wait_termination.ok, "{:?}", r.properties.wait_termination);
}

/// A timely cluster of two processes on one host (process 1 runs worker 0,
/// process 2 worker 1): worker 0 broadcasts progress at 900; worker 1, idle
/// from 110, starts the execution that reads it at 1500. Between processes
/// a message is in flight from its send until its reader could read it;
/// worker 1 polls while idle, so it arrived at 1500, the end of the gap
/// (docs/analysis.md, "Transit between processes"): worker 1 waits [110,
/// 1500] on worker 0's progress, and the transit [900, 1500] is on the
/// critical path. In 1000 ns windows: window 0 holds 890 ns of the wait
/// (open at its end, typed where it ends and, offline, counted back there)
/// and window 1 the other 500, with the transit's part in it, [1000, 1500],
/// on its path. In one 2000 ns window: 1390 ns of waiting and 600 of
/// transit. (Before the transit rule the message arrived at its send: 790
/// ns of waiting, no transit.)
#[test]
fn progress_between_processes_of_a_cluster_arrives_when_its_reader_could_read_it() {
    let w0 = vec![
        (0, start(1)),
        (850, stop(1)),
        (900, ProgressSend { channel: 0, seq: 0 }),
        (1700, start(1)),
        (1800, stop(1)),
    ];
    let w1 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (1500, start(2)),
        (1510, ProgressRecv { channel: 0, from: 0, seq: 0 }),
        (1600, stop(2)),
        (1800, start(1)),
        (1810, stop(1)),
    ];
    let a = encode_host(HOST, 1, 0, &[w0], true, &[]);
    let b = encode_host(HOST, 2, 1, &[w1], true, &[]);
    let on = |ns| {
        vec![WaitedOn { worker: Some(0), channel: Some(0), kind: "progress_message", ns, count: 1, carried_ns: 0 }]
    };
    // (window width, window, w1's waiting in it, transit on its path)
    for (width, k, waited, transit) in [(1000, 0, 890, 0), (1000, 1, 500, 500), (2000, 0, 1390, 600)] {
        let (reps, errs) = analyze_bytes(&[("a", &a), ("b", &b)], width);
        assert!(errs.is_empty(), "{errs:?}");
        let r = reps.iter().find(|r| r.window == k).unwrap();
        assert!(r.complete, "{:?}", r.incomplete_reasons);
        assert_eq!((r.waiting[1].waiting_ns, &r.waiting[1].on), (waited, &on(waited)), "{width} ns windows, {k}");
        let cp = &r.critical_path;
        assert!(cp.equals_span && cp.stuck.is_none(), "{cp:?}");
        assert_eq!(cp.by_kind.progress_message, transit, "{width} ns windows, {k}: {cp:?}");
    }
}

/// A gather over four workers: each runs op 1, sends one message on channel
/// 5 to every peer, and then runs the gather (op 2), which reads all three
/// peers' messages once the last is there. Worker 3 is the straggler: its op
/// 1 runs [0, 800] and its sends go out at 790, 792, 794 (to w0, w1, w2).
/// The fast workers run op 1 over [0, 100] and send at 90..=96; each then
/// idles from its step at 110 until its gather starts at 805 + w, reading
/// its peers in `order`. Op 3 fills each lane to past the window's end.
fn gather(order: impl Fn(u32) -> Vec<u32>) -> Vec<Vec<(u64, ringlog::Event)>> {
    (0..4u32)
        .map(|w| {
            let peers: Vec<u32> = (0..4).filter(|&p| p != w).collect();
            let mut lane = vec![(0, start(1))];
            if w == 3 {
                lane.extend(peers.iter().enumerate().map(|(k, &p)| (790 + 2 * k as u64, send(5, p, 0))));
                lane.extend([(800, stop(1)), (800, start(2))]);
                lane.extend(order(w).iter().enumerate().map(|(k, &p)| (801 + k as u64, recv(5, p, 0))));
            } else {
                lane.extend(peers.iter().enumerate().map(|(k, &p)| (90 + 3 * k as u64, send(5, p, 0))));
                lane.extend([(100, stop(1)), (110, step()), (805 + w as u64, start(2))]);
                lane.extend(order(w).iter().enumerate().map(|(k, &p)| (810 + k as u64, recv(5, p, 0))));
            }
            lane.extend([(900, stop(2)), (900, start(3)), (1100, stop(3))]);
            lane
        })
        .collect()
}

/// What a gather with straggler w3 must give: every fast worker waits on w3
/// from its step (110) until w3's message to it arrives (790 + 2w: the
/// last of the three it reads; the others arrived at 90..=96, buffered but
/// read by the same execution, so they do not end the wait), and the
/// critical path runs through w3's op 1. Backward from the window's end
/// (1000): w0's op 3 [900, 1000] (100), op 2 [805, 900] (95), unknown
/// [790, 805] (15: the spin between arrival and read), the message from w3
/// sent at 790 (0 ns), then w3's op 1 [0, 790] (790) = 1000.
fn assert_gather_waits_on_the_straggler(r: &WindowReport) {
    for w in 0..3usize {
        let ns = 790 + 2 * w as u64 - 110;
        assert_eq!(r.waiting[w].waiting_ns, ns, "worker {w}");
        assert_eq!(
            r.waiting[w].on,
            vec![WaitedOn { worker: Some(3), channel: Some(5), kind: "data_message", ns, count: 1, carried_ns: 0 }],
            "worker {w}"
        );
    }
    assert_eq!(r.waiting[3].waiting_ns, 0);
    let cp = &r.critical_path;
    assert_eq!((cp.length_ns, cp.equals_span), (1000, true));
    assert_eq!(cp.top_operators[0], op(3, 1, 790));
    assert_eq!(cp.by_kind, ByKind { operator: 985, unknown: 15, ..Default::default() });
}

#[test]
fn a_gather_waits_on_its_last_sender_for_the_whole_gap() {
    // Peers read in ascending order: the straggler's message read last.
    let r = window0(&gather(|w| (0..4).filter(|&p| p != w).collect()));
    assert_gather_waits_on_the_straggler(&r);
}

/// The critical path of the gather crosses one data message (w3's to w0,
/// sent at 790, read by w0's gather): the window's top channels count that
/// data channel, once, from w3 to w0, with the 0 ns the message took on
/// one host. The progress channels cross nothing (no wait ended on them).
#[test]
fn a_data_message_on_the_critical_path_is_counted_in_the_top_channels() {
    let r = window0(&gather(|w| (0..4).filter(|&p| p != w).collect()));
    let c = &r.critical_path.top_channels;
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        (c[0].channel, c[0].kind, c[0].src_worker, c[0].dst_worker, c[0].crossings),
        (5, "data_message", 3, 0, 1)
    );
}

#[test]
fn a_gather_is_attributed_by_arrival_not_by_read_order() {
    // The straggler's message read first, the early ones after it.
    let r = window0(&gather(|w| {
        let mut o: Vec<u32> = (0..4).filter(|&p| p != w).collect();
        o.sort_by_key(|&p| p != 3);
        o
    }));
    assert_gather_waits_on_the_straggler(&r);
}

#[test]
fn a_buffered_message_left_unread_while_other_operators_run_is_not_a_wait() {
    // Timely's case (Sager §5.1 condition 2): w1's message to w0 arrives at
    // 150, during w0's gap [110, 400]; the execution ending the gap (op 3,
    // [400, 500]) reads nothing, and op 2 reads the message only at 600.
    // From 150 on w0 holds a buffered message it chose not to read, so it
    // was not blocked: the wait is [110, 150] on w1 (Sager's rule as
    // written: the first arrival ends it), the rest of the gap unknown.
    let w0 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (400, start(3)),
        (500, stop(3)),
        (600, start(2)),
        (601, recv(5, 1, 0)),
        (700, stop(2)),
        (700, start(3)),
        (1100, stop(3)),
    ];
    let w1 = vec![(0, start(1)), (150, send(5, 0, 0)), (160, stop(1)), (160, start(4)), (1100, stop(4))];
    let r = window0(&[w0, w1]);
    assert_eq!(r.waiting[0].waiting_ns, 40);
    assert_eq!(
        r.waiting[0].on,
        vec![WaitedOn { worker: Some(1), channel: Some(5), kind: "data_message", ns: 40, count: 1, carried_ns: 0 }]
    );
    // And a message that was there before the gap and is read by the
    // execution ending it leaves no wait at all: w0 had what it needed.
    let w0 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (400, start(2)),
        (401, recv(5, 1, 0)),
        (500, stop(2)),
        (500, start(3)),
        (1100, stop(3)),
    ];
    let w1 = vec![(0, start(1)), (50, send(5, 0, 0)), (60, stop(1)), (60, start(4)), (1100, stop(4))];
    let r = window0(&[w0, w1]);
    assert_eq!((r.waiting[0].waiting_ns, r.waiting[0].waits), (0, 0));
}

/// A wait that spans three windows (1000 ns each): w1 is done at 100 (its
/// local causes expire at the step at 110) and waits for w0's message,
/// sent at 2590 at the end of a long execution (w0 busy 0..2600).
///
/// As the live pipeline reports them: window 0 has the wait open since 110
/// (890 ns in it), window 1 open since 110 (1000 ns, the whole window),
/// neither counts it as waiting nor on anyone (it once said `w1→?` or
/// guessed); window 2 has the wait on w0 over channel 5 from its start to
/// the arrival at 2590 (590 ns) and carries the 890 + 1000 = 1890 ns of
/// the earlier windows to w0. The run's totals count all 2480 ns on w0.
/// With every window at hand (`analyze_bytes`) the carried time is moved
/// back into the windows that had it open: 890, 1000 and 590 ns on w0.
#[test]
fn a_wait_spanning_three_windows_is_carried_to_its_sender() {
    use sidecar::analysis::report::RunTotals;
    let w0 = vec![(0, start(1)), (2590, send(5, 1, 0)), (2600, stop(1)), (2605, step())];
    let w1 =
        vec![(0, start(1)), (100, stop(1)), (110, step()), (2595, start(2)), (2596, recv(5, 0, 0)), (2700, stop(2))];
    let bytes = encode(&[w0, w1]);
    let (reps, errs) = sidecar::pipeline::analyze_bytes_as_reported(&[("t", &bytes)], 1000);
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(reps.iter().map(|r| r.window).collect::<Vec<_>>(), vec![0, 1, 2]);
    let w1s: Vec<&sidecar::analysis::report::WorkerWaiting> = reps.iter().map(|r| &r.waiting[1]).collect();
    for (k, open_ns) in [(0, 890), (1, 1000)] {
        let w = w1s[k];
        assert_eq!((w.waiting_ns, w.waiting_for_input_ns, w.on.len()), (0, 0, 0), "window {k}: {w:?}");
        assert_eq!(w.open.as_ref().map(|o| (o.since_ns, o.ns)), Some((110, open_ns)), "window {k}");
        assert!(reps[k].readable_line().contains("w1 waiting since"), "{}", reps[k].readable_line());
        assert!(reps[k].readable_line().contains("(open)"), "{}", reps[k].readable_line());
    }
    let last = w1s[2];
    assert_eq!((last.waiting_ns, last.open.clone()), (590, None));
    assert_eq!(
        last.on,
        vec![WaitedOn { worker: Some(0), channel: Some(5), kind: "data_message", ns: 590, count: 1, carried_ns: 1890 }]
    );
    let c = last.carried.clone().unwrap();
    assert_eq!(
        (c.since_ns, c.ns, c.kind, c.worker, c.channel, c.message),
        (110, 1890, "waiting", Some(0), Some(5), Some("data_message"))
    );
    assert!(reps[2].readable_line().contains("waits: w1→w0 2 µs"), "{}", reps[2].readable_line());
    let mut t = RunTotals::default();
    reps.iter().for_each(|r| t.add(r));
    assert_eq!(t.waits.get(&(1, Some(0))), Some(&2480));
    assert_eq!(t.waits.get(&(1, None)), None, "nothing on `?`");

    // Folded: each window counts its own part, on w0; the marks stay.
    let (folded, _) = analyze_bytes(&[("t", &bytes)], 1000);
    let got: Vec<(u64, Option<u32>, u64, bool)> = folded
        .iter()
        .map(|r| {
            let w = &r.waiting[1];
            (
                w.waiting_ns,
                w.on.first().and_then(|o| o.worker),
                w.on.iter().map(|o| o.carried_ns).sum(),
                w.open.is_some(),
            )
        })
        .collect();
    assert_eq!(got, vec![(890, Some(0), 0, true), (1000, Some(0), 0, true), (590, Some(0), 0, false)]);
    let mut t = RunTotals::default();
    folded.iter().for_each(|r| t.add(r));
    assert_eq!(t.waits.get(&(1, Some(0))), Some(&2480), "counted once");
}

/// Both workers run A all through window 0 (w0 0..1100, w1 0..1050): the
/// path walks w0's (the lowest worker among equals), 1000 ns, yet w1's A
/// is as critical (each worker's timeline is one source-to-sink path of
/// the same weight: equal participation). The window says it is a tie.
/// When w1 runs A for 500 ns and B for the rest, its A weighs half of
/// w0's: no tie.
#[test]
fn a_top_operator_loaded_alike_on_two_workers_is_a_tie() {
    use sidecar::analysis::report::RunTotals;
    let w0 = vec![(0, start(1)), (1100, stop(1))];
    let w1 = vec![(0, start(1)), (1050, stop(1))];
    let r = window0(&[w0.clone(), w1]);
    assert_eq!(r.critical_path.top_operators, vec![op(0, 1, 1000)]);
    assert_eq!(r.critical_path.tie, vec![0, 1]);
    let line = r.readable_line();
    assert!(line.contains("critical path 1 µs: A on w0, w1 (tie)"), "{line}");
    let mut t = RunTotals::default();
    t.add(&r);
    assert_eq!(t.ties.get("A on w0, w1 (tie)"), Some(&1));

    let w1 = vec![(0, start(1)), (500, stop(1)), (500, start(2)), (1050, stop(2))];
    let r = window0(&[w0, w1]);
    assert_eq!(r.critical_path.tie, Vec::<u32>::new());
    assert!(r.readable_line().contains(": w0 A 100%"), "{}", r.readable_line());
}
