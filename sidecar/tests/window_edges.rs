//! The windows where streams start and end (a process's first and last), and
//! streams that are missing from them: every stream the process announced
//! must be present in a window unless it ended before it, and the critical
//! path is checked against the part of the window the streams cover.

mod common;
use common::*;
use ringlog::Event;
use sidecar::analysis::report::{ByKind, WindowReport};
use sidecar::pipeline::analyze_bytes;

/// A synthetic trace of `workers` streams starting at 1.05 s, so that its
/// first and last windows (100 ms) are covered only in part.
fn synth_unaligned(records: u64, workers: u32) -> Vec<u8> {
    common::synth_bytes_at(records, workers, 1_050_000_000)
}

fn analyze(bytes: &[u8], width: u64) -> Vec<WindowReport> {
    let (reps, errs) = analyze_bytes(&[("trace", bytes)], width);
    assert!(errs.is_empty(), "{errs:?}");
    assert!(!reps.is_empty());
    reps
}

/// From the earliest to the latest time the window's streams cover.
fn covered(r: &WindowReport) -> u64 {
    let lo = r.streams.iter().map(|s| s.covered_ns[0]).min().unwrap();
    let hi = r.streams.iter().map(|s| s.covered_ns[1]).max().unwrap();
    hi - lo
}

#[test]
fn a_complete_trace_is_complete_and_spanned_in_its_first_and_last_windows() {
    let reps = analyze(&synth_unaligned(300_000, 4), 100_000_000);
    assert!(reps.len() >= 3, "{}", reps.len());
    let (first, last) = (&reps[0], reps.last().unwrap());
    // The trace starts half way into its first window and ends inside its last.
    assert_eq!(first.streams.iter().map(|s| s.covered_ns[0]).min(), Some(1_050_000_000));
    assert!(last.streams.iter().all(|s| s.covered_ns[1] < last.end_ns));
    for r in &reps {
        assert!(r.complete, "window {}: {:?}", r.window, r.incomplete_reasons);
        assert_eq!(r.streams.len(), 4);
        let cp = &r.critical_path;
        assert_eq!(cp.span_ns, covered(r), "window {}", r.window);
        assert_eq!((cp.length_ns, cp.equals_span), (cp.span_ns, true), "window {}: {cp:?}", r.window);
    }
    assert_eq!(first.critical_path.span_ns, 50_000_000);
    assert!(last.critical_path.span_ns < 100_000_000);
    // The windows in between are spanned whole.
    for r in &reps[1..reps.len() - 1] {
        assert_eq!(r.critical_path.span_ns, 100_000_000);
    }
}

#[test]
fn a_stream_that_never_appears_makes_every_window_incomplete() {
    let bytes = without_worker(&synth_unaligned(300_000, 4), 1);
    let reps = analyze(&bytes, 100_000_000);
    assert!(reps.len() >= 3, "{}", reps.len());
    for r in &reps {
        assert_eq!(r.streams.iter().map(|s| s.worker).collect::<Vec<_>>(), vec![0, 2, 3]);
        assert!(!r.complete, "window {} says complete", r.window);
        assert!(
            r.incomplete_reasons.iter().any(|x| x.contains("3 of 4 worker streams present") && x.contains("worker 1:")),
            "window {}: {:?}",
            r.window,
            r.incomplete_reasons
        );
        // The halves sent to worker 1 are counted in flight (its process
        // runs it): only in a window that says it lacks worker 1.
        assert_eq!(r.messages.data_unmatched, 0);
    }
    assert!(reps[0].messages.data_in_flight > 0 && reps.last().unwrap().messages.data_in_flight > 0);
}

/// Two workers, window 1000 ns: w1 starts later than w0 in window 0 and ends
/// earlier in window 1; w1 waits in window 0 for w0's message.
fn staggered() -> Vec<Vec<(u64, ringlog::Event)>> {
    let w0 = vec![
        (100, start(1)),
        (590, send(5, 1, 0)),
        (600, stop(1)),
        (600, start(2)),
        (1500, stop(2)),
        (1500, start(3)),
        (1700, stop(3)),
    ];
    let w1 =
        vec![(150, start(1)), (200, stop(1)), (210, step()), (600, start(2)), (601, recv(5, 0, 0)), (1650, stop(2))];
    vec![w0, w1]
}

#[test]
fn streams_that_start_late_or_end_early_in_a_window_are_present_in_it() {
    let reps = analyze(&encode(&staggered()), 1000);
    assert_eq!(reps.len(), 2);
    for r in &reps {
        assert!(r.complete, "window {}: {:?}", r.window, r.incomplete_reasons);
    }
    // Window 0 is covered from w0's start at 100 to its end: the path from
    // the end back over w0's operators to 100 is 900 ns long. w1's wait for
    // w0's message [210, 590] is off the path.
    let cp = &reps[0].critical_path;
    assert_eq!((cp.length_ns, cp.span_ns, cp.equals_span, cp.started_before_end), (900, 900, true, false));
    assert_eq!(cp.by_kind, ByKind { operator: 900, ..Default::default() });
    assert_eq!(reps[0].waiting[1].waiting_ns, 380);
    // Window 1 is covered until w0's end at 1700 (w1 ended at 1650): the
    // path starts there, before the window's end, and spans what is covered.
    let cp = &reps[1].critical_path;
    assert_eq!((cp.length_ns, cp.span_ns, cp.equals_span, cp.started_before_end), (700, 700, true, true));
    let bw: Vec<(u32, u64)> = cp.by_worker.iter().map(|w| (w.worker, w.ns)).collect();
    assert_eq!(bw, vec![(0, 700)]);
}

#[test]
fn a_missing_stream_is_named_in_the_first_and_last_windows() {
    // Three workers announced; worker 2's stream never arrives.
    let mut ws = staggered();
    ws.push(vec![(120, start(1)), (1600, stop(1))]);
    let bytes = without_worker(&encode(&ws), 2);
    let reps = analyze(&bytes, 1000);
    assert_eq!(reps.len(), 2);
    for r in &reps {
        assert!(!r.complete);
        assert_eq!(
            r.incomplete_reasons,
            vec!["process 77: 2 of 3 worker streams present (worker 2: no stream in this window: missing, or not started yet)"]
        );
    }
}

#[test]
fn a_stream_that_ended_is_not_missing_and_one_not_started_yet_is() {
    // w1 ends (End frame) in window 0, w0 runs on into window 1; w2 starts
    // only in window 1.
    let w0 = vec![(0, start(1)), (1500, stop(1))];
    let w1 = vec![(0, start(1)), (400, stop(1))];
    let w2 = vec![(1200, start(1)), (1400, stop(1))];
    let reps = analyze(&encode(&[w0, w1, w2]), 1000);
    assert_eq!(reps.len(), 2);
    // Window 0 lacks w2: it cannot be told from a missing stream when the
    // window is analyzed, and the window has no data of it either way.
    assert!(!reps[0].complete);
    assert_eq!(
        reps[0].incomplete_reasons,
        vec!["process 77: 2 of 3 worker streams present (worker 2: no stream in this window: missing, or not started yet)"]
    );
    // Window 1: w1 ended before it; w0 and w2 are present.
    assert!(reps[1].complete, "{:?}", reps[1].incomplete_reasons);
    assert_eq!(reps[1].streams.iter().map(|s| s.worker).collect::<Vec<_>>(), vec![0, 2]);
}

/// A probe that reconnects to a restarted sidecar resends its context with
/// its frame numbers going on (the process's Hello as #8, a stream's first
/// frame as #5). Not a gap: the stream was joined mid-way, so its first
/// window is incomplete (it lacks what went to the old sidecar), and no
/// window before it exists (nothing at the epoch), while the rest are
/// complete and every record is there.
#[test]
fn a_stream_joined_mid_way_starts_at_its_first_record_with_that_window_marked() {
    use ringlog::{ClockDomain, ClockSample, Encoder, EndStats, Hello, Record, StreamId, PROCESS_WIDE};
    let dom = ClockDomain::MonotonicNs;
    let pw = StreamId { host: HOST, process: PID, worker: PROCESS_WIDE };
    let hello = Hello {
        host_name: "test".into(),
        program: "rejoined".into(),
        pid: PID,
        workers: 1,
        invariant_tsc: false,
        ticks_per_sec: 1_000_000_000,
    };
    let (mut e, mut out) = (Encoder::new(), Vec::new());
    e.hello(pw, 8, dom, &hello, &mut out);
    e.clock(pw, 9, dom, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 1 }], &mut out);
    let sid = StreamId { host: HOST, process: PID, worker: 0 };
    e.hello(sid, 5, dom, &hello, &mut out);
    // 2.55 s to 2.85 s: windows 25 (joined mid-way) to 28 of 100 ms.
    let evs: Vec<(u64, ringlog::Event)> = (0..300u64)
        .flat_map(|i| {
            let t = 2_550_000_000 + i * 1_000_000;
            [(t, start(1)), (t + 500_000, stop(1))]
        })
        .collect();
    let recs: Vec<Record> = evs.iter().map(|&(t, ev)| Record::from_event(t, ev)).collect();
    let mut seq = 6;
    for chunk in recs.chunks(50) {
        e.records(sid, seq, 0, dom, &[chunk], &mut out);
        seq += 1;
    }
    e.end(sid, seq, 0, dom, &EndStats { produced: 600, lost: 0, elided: 0 }, &mut out);
    e.end(pw, 10, 0, dom, &EndStats::default(), &mut out);

    let (reps, errs) = analyze_bytes(&[("rejoined", &out[..])], 100_000_000);
    assert!(errs.is_empty(), "joining mid-way is not a fault of the input: {errs:?}");
    let windows: Vec<u64> = reps.iter().map(|r| r.window).collect();
    assert_eq!(windows, vec![25, 26, 27, 28]);
    let first = &reps[0];
    assert!(!first.complete);
    assert!(
        first.incomplete_reasons.iter().any(|r| r.contains("joined the stream mid-way (first frame #5)")),
        "{:?}",
        first.incomplete_reasons
    );
    assert!(
        reps[1..].iter().all(|r| r.complete),
        "{:?}",
        reps.iter().map(|r| &r.incomplete_reasons).collect::<Vec<_>>()
    );
    assert_eq!(reps.iter().map(|r| r.instrumentation.records).sum::<u64>(), 600);
}

/// A Hello that claims a bogus worker count (a corrupt or hostile probe:
/// 50 M workers, one stream): every window is incomplete for the missing
/// streams, and names the first few of them, not all 50 M. (Each window's
/// reason spelled out every absent worker: 489 MB per window, 30 s for
/// three windows.)
#[test]
fn a_bogus_worker_count_is_not_spelled_out_worker_by_worker() {
    use ringlog::{ClockDomain, ClockSample, Encoder, EndStats, Hello, Record, StreamId, PROCESS_WIDE};
    let dom = ClockDomain::MonotonicNs;
    let (mut e, mut out) = (Encoder::new(), Vec::new());
    let pw = StreamId { host: HOST, process: PID, worker: PROCESS_WIDE };
    let hello = Hello {
        host_name: "test".into(),
        program: "bogus".into(),
        pid: PID,
        workers: 50_000_000,
        invariant_tsc: false,
        ticks_per_sec: 1_000_000_000,
    };
    e.hello(pw, 0, dom, &hello, &mut out);
    e.clock(pw, 1, dom, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 1_000_000 }], &mut out);
    let sid = StreamId { host: HOST, process: PID, worker: 0 };
    e.hello(sid, 0, dom, &hello, &mut out);
    let evs = [(0, start(1)), (100, stop(1)), (2500, start(1)), (2600, stop(1))];
    let recs: Vec<Record> = evs.iter().map(|&(t, ev)| Record::from_event(t, ev)).collect();
    e.records(sid, 1, 0, dom, &[&recs], &mut out);
    e.end(sid, 2, 0, dom, &EndStats::default(), &mut out);
    e.end(pw, 2, 0, dom, &EndStats::default(), &mut out);
    let t = std::time::Instant::now();
    let reps = analyze(&out, 1000);
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(reps.len(), 3);
    for r in &reps {
        assert!(!r.complete);
        let names: String = (1..=16).map(|w| w.to_string()).collect::<Vec<_>>().join(", ");
        let want = format!(
            "process {PID}: 1 of 50000000 worker streams present (workers {names} and 49999983 more: no stream in this window: missing, or not started yet)"
        );
        assert_eq!(r.incomplete_reasons, vec![want]);
    }
}

/// A gap that crosses a window's end, ended by an execution that reads a
/// message the worker sent itself inside that execution (a subgraph whose
/// child sends to this worker and a later child reads it, as bfs does): the
/// gap had no visible cause, Waiting-for-Input in both windows it touches,
/// whatever the window width. (Window 0 called it a wait on the worker
/// itself, 890 ns, so the one worker's path could not start at the window
/// end: 110 ns of a 1000 ns span, `started_before_end`.)
#[test]
fn a_cut_gap_before_a_worker_local_read_is_waiting_for_input() {
    let w0 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (1500, start(4)),
        (1510, start(2)),
        (1520, send(5, 0, 0)),
        (1530, stop(2)),
        (1530, start(3)),
        (1540, recv(5, 0, 0)),
        (1550, stop(3)),
        (1560, stop(4)),
        (2500, start(1)),
        (2600, stop(1)),
    ];
    let bytes = encode(&[w0]);
    let reps = analyze(&bytes, 1000);
    let wfi: Vec<(u64, u64, u64)> =
        reps.iter().map(|r| (r.waiting[0].waiting_ns, r.waiting[0].waiting_for_input_ns, r.waiting[0].waits)).collect();
    assert_eq!(wfi, vec![(0, 890, 0), (0, 500, 0), (0, 0, 0)]);
    let cp = &reps[0].critical_path;
    assert_eq!((cp.length_ns, cp.span_ns, cp.started_before_end), (1000, 1000, false));
    assert_eq!(cp.by_kind, ByKind { operator: 100, waiting_for_input: 890, unknown: 10, ..Default::default() });
    // One window over all of it: the same 1390 ns of Waiting-for-Input.
    let one = analyze(&bytes, 3000);
    assert_eq!((one[0].waiting[0].waiting_ns, one[0].waiting[0].waiting_for_input_ns), (0, 1390));
}

/// A message sent two or more windows before it is read sits in the
/// reader's buffer through the windows in between, so the reader is not
/// waiting there (Sager §5.1 condition 2). Here w0 sends at 1500 (window 1)
/// and w1, idle from 110, reads it at 3210 (window 3): window 2 reports w1
/// waiting 1000 ns on w0. Neither half of the message is in window 2's
/// fragments, so its owner cannot see the buffered message.
#[test]
fn a_message_buffered_through_a_whole_window_is_no_wait_there() {
    let w0 = vec![(0, start(1)), (100, stop(1)), (1400, start(1)), (1500, send(5, 1, 0)), (3500, stop(1))];
    let w1 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (3200, start(2)),
        (3210, recv(5, 0, 0)),
        (3300, stop(2)),
        (3500, start(1)),
        (3510, stop(1)),
    ];
    let reps = analyze(&encode(&[w0, w1]), 1000);
    let waits: Vec<u64> = reps.iter().map(|r| r.waiting[1].waiting_ns).collect();
    // window 0: [110, 1000] cut; window 1: [1000, 1500] until the arrival;
    // window 2: buffered all along; window 3: buffered until the read.
    assert_eq!(waits, vec![890, 500, 0, 0]);
}

/// Both workers idle through a window, each with the other's progress
/// message in its buffer, sent windows before and read windows after (as
/// when the OS deschedules both threads of a loaded host): neither is
/// waiting there, the critical path spans the window (unknown work), and
/// Property 3.10 holds (the messages are in flight across the window). With
/// only the window's own halves, w1 was waiting 1000 ns here; in the bfs
/// acceptance test under load both workers were, the path was empty and
/// 3.10 failed.
#[test]
fn progress_buffered_through_a_window_on_both_workers() {
    let psend = |channel, seq| Event::ProgressSend { channel, seq };
    let precv = |channel, from, seq| Event::ProgressRecv { channel, from, seq };
    let w0 = vec![
        (0, start(1)),
        (100, stop(1)),
        (1400, start(1)),
        (1500, psend(9, 0)),
        (1600, stop(1)),
        (3500, start(2)),
        (3505, precv(9, 1, 0)),
        (3600, stop(2)),
    ];
    let w1 = vec![
        (0, start(1)),
        (90, psend(9, 0)),
        (100, stop(1)),
        (110, step()),
        (3200, start(2)),
        (3210, precv(9, 0, 0)),
        (3300, stop(2)),
        (3600, step()),
    ];
    let reps = analyze(&encode(&[w0, w1]), 1000);
    let w2 = &reps[2];
    assert_eq!((w2.start_ns, w2.waiting[0].waiting_ns, w2.waiting[1].waiting_ns), (2000, 0, 0));
    assert_eq!(w2.critical_path.length_ns, 1000);
    assert!(w2.critical_path.equals_span);
    assert!(w2.properties.communication_existence.ok, "{:?}", w2.properties);
}

/// A gap that crosses a window's end, whose next execution reads a message
/// from another worker sent after that execution began: by the README's
/// rule the gap had no visible cause (Waiting-for-Input), and so it is in
/// both windows. The window it is cut in cannot see that (the send is in
/// the later window): it reports the wait open (from 110, 890 ns), the
/// later window types it and carries the 890 ns, and with every window at
/// hand the open part is folded back into the first (it once called it a
/// wait on the sender there). A 2000 ns window gives 1390 ns of
/// Waiting-for-Input.
#[test]
fn a_cut_gap_is_typed_alike_in_both_windows() {
    let w0 = vec![(0, start(1)), (100, stop(1)), (1400, start(1)), (1550, send(5, 1, 0)), (1700, stop(1))];
    let w1 =
        vec![(0, start(1)), (100, stop(1)), (110, step()), (1500, start(2)), (1560, recv(5, 0, 0)), (1600, stop(2))];
    let (w0c, w1c) = (w0.clone(), w1.clone());
    let reps = analyze(&encode(&[w0, w1]), 1000);
    let got: Vec<(u64, u64)> =
        reps.iter().map(|r| (r.waiting[1].waiting_ns, r.waiting[1].waiting_for_input_ns)).collect();
    assert_eq!(got, vec![(0, 890), (0, 500)]);
    let open = reps[0].waiting[1].open.clone().map(|o| (o.since_ns, o.ns));
    assert_eq!(open, Some((110, 890)), "the first window says the wait was open at its end");
    // As the live pipeline reports them: the later window carries it.
    let (live, _) = sidecar::pipeline::analyze_bytes_as_reported(&[("t", &encode(&[w0c, w1c]))], 1000);
    assert_eq!(live[0].waiting[1].waiting_for_input_ns, 0, "open, not typed");
    let carried = live[1].waiting[1].carried.clone().map(|c| (c.since_ns, c.ns, c.kind));
    assert_eq!(carried, Some((110, 890, "waiting_for_input")));
}

/// A gap longer than 10,000 windows (100 ns windows, idle 1.5 ms: a worker
/// idle 1.5 s under 100 us windows) is spelled out for 10,000 windows, then
/// skipped as silence (README "Robustness"), the last window reported
/// saying so. (The windows after the first 10,000 were handed over empty:
/// another 4,998 windows with the stream present but no timeline in them,
/// no wait and a critical path of 0 ns, where the ones before showed the
/// gap: Waiting-for-Input and a 100 ns path.)
#[test]
fn a_gap_longer_than_ten_thousand_windows_is_skipped_after_them() {
    let w0 = vec![(0, start(1)), (100, stop(1)), (110, step()), (1_500_000, start(1)), (1_500_100, stop(1))];
    let reps = analyze(&encode(&[w0]), 100);
    let inside: Vec<&WindowReport> = reps.iter().filter(|r| r.window >= 2 && r.window < 15_000).collect();
    assert_eq!((inside.len(), inside.last().unwrap().window), (10_000, 10_001));
    for r in &inside {
        let shown = (r.waiting[0].waiting_for_input_ns, r.critical_path.length_ns);
        assert_eq!(shown, (100, 100), "window {}", r.window);
    }
    let note = "stream silent for 4998 more windows; they are not reported";
    assert_eq!(inside.last().unwrap().streams[0].faults, vec![note.to_string()]);
    assert!(reps.iter().any(|r| r.window == 15_000), "the window with data after the gap");
}

// The marks of `Fragment::seq_before` count only where the reader's
// record is whole (a review found these).

fn w1_waits(reps: &[WindowReport]) -> Vec<(u64, bool, u64)> {
    reps.iter().map(|r| (r.window, r.complete, r.waiting.iter().find(|w| w.worker == 1).unwrap().waiting_ns)).collect()
}

/// One lost record (w1's read of w0's seq 0, in window 0) must not make the
/// later windows, in which w1 reads nothing on that channel, treat w1 as
/// having a message buffered all through them (its waits vanished, in
/// windows marked complete): they show w1 waiting 1000 ns on w0 as without
/// the loss.
#[test]
fn a_lost_read_does_not_make_later_windows_buffered() {
    let w0 = vec![
        (0, start(1)),
        (100, send(5, 1, 0)),
        (200, stop(1)),
        (210, step()),
        (3400, start(1)),
        (3500, send(5, 1, 1)),
        (3600, stop(1)),
        (3610, step()),
    ];
    let w1_full = vec![
        (0, start(2)),
        (100, stop(2)),
        (120, start(3)),
        (200, stop(3)),
        // frame 1
        (300, start(4)),
        (350, recv(5, 0, 0)),
        (400, stop(4)),
        (405, start(1)),
        // frame 2
        (408, stop(1)),
        (410, step()),
        (3700, start(2)),
        (3710, recv(5, 0, 1)),
        // frame 3
        (3800, stop(2)),
        (3810, step()),
    ];
    // The same, w1's read at 350 lost (frame 1 says 1 record lost).
    let w1_lost = vec![
        (0, start(2)),
        (100, stop(2)),
        (120, start(3)),
        (200, stop(3)),
        // frame 1 (1 lost)
        (300, start(4)),
        (400, stop(4)),
        (405, start(1)),
        (408, stop(1)),
        // frame 2
        (410, step()),
        (3700, start(2)),
        (3710, recv(5, 0, 1)),
        (3800, stop(2)),
        // frame 3
        (3810, step()),
    ];
    let full = analyze(&encode(&[w0.clone(), w1_full]), 1000);
    let lost = analyze(&encode_opts(&[w0, w1_lost], true, &[(1, 1, 1)]), 1000);
    eprintln!("full: {:?}", w1_waits(&full));
    eprintln!("lost: {:?}", w1_waits(&lost));
    for r in &lost {
        eprintln!("lost window {}: {:?}", r.window, r.incomplete_reasons);
    }
    // Window 0 is incomplete (the loss); windows 1 and 2 are complete and
    // must not depend on a record lost in window 0.
    assert!(!lost[0].complete);
    assert!(lost[1].complete && lost[2].complete);
    assert_eq!(w1_waits(&full)[1..], w1_waits(&lost)[1..]);
}

/// w0 sends at 400 and its stream ends at 500; w1, idle from 110, reads the
/// message at 3210. Windows 1 and 2: the message is in w1's buffer all
/// through them, as when w0 goes on idling. w0 has no fragment there (its
/// stream ended): its end marker carries its last sequence numbers (w1 was
/// reported waiting on w0).
#[test]
fn a_message_from_a_sender_that_ended_is_buffered_through_later_windows() {
    let w0_end = vec![(0, start(1)), (400, send(5, 1, 0)), (500, stop(1))];
    let w0_on =
        vec![(0, start(1)), (400, send(5, 1, 0)), (500, stop(1)), (510, step()), (3500, start(1)), (3510, stop(1))];
    let w1 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (3200, start(2)),
        (3210, recv(5, 0, 0)),
        (3300, stop(2)),
        (3500, start(1)),
        (3510, stop(1)),
    ];
    let ended_bytes = encode(&[w0_end, w1.clone()]);
    let ended = analyze(&ended_bytes, 1000);
    let on = analyze(&encode(&[w0_on, w1]), 1000);
    // The binary's timely pipeline sends the end marker to every window
    // owner: the same with one analysis worker and with two.
    let file = std::env::temp_dir().join(format!("sidecar-ended-sender-{}.rlog", std::process::id()));
    std::fs::write(&file, &ended_bytes).unwrap();
    for workers in ["1", "2"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sidecar"))
            .args(["analyze", "--window", "1000ns", "-q", "--json", "-", "-w", workers])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut got: Vec<(u64, bool, u64)> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let w1 = v["waiting"].as_array().unwrap().iter().find(|w| w["worker"] == 1).unwrap();
                (v["window"].as_u64().unwrap(), v["complete"].as_bool().unwrap(), w1["waiting_ns"].as_u64().unwrap())
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, w1_waits(&on), "-w {workers}");
    }
    std::fs::remove_file(&file).unwrap();
    eprintln!("w0 ended: {:?}", w1_waits(&ended));
    eprintln!("w0 on:    {:?}", w1_waits(&on));
    for r in &ended {
        eprintln!(
            "ended window {}: {:?} {:?}",
            r.window,
            r.incomplete_reasons,
            r.waiting.iter().find(|w| w.worker == 1).unwrap().on
        );
    }
    assert_eq!(w1_waits(&ended), w1_waits(&on));
}

/// The same with progress: w0 broadcasts at 400 and its stream ends at
/// 500; w1 reads it at 3210. Windows 1 and 2 see it in w1's buffer as when
/// w0 goes on.
#[test]
fn progress_from_a_sender_that_ended_is_buffered_through_later_windows() {
    let psend = |channel, seq| Event::ProgressSend { channel, seq };
    let precv = |channel, from, seq| Event::ProgressRecv { channel, from, seq };
    let w0_end = vec![(0, start(1)), (400, psend(9, 0)), (500, stop(1))];
    let w0_on =
        vec![(0, start(1)), (400, psend(9, 0)), (500, stop(1)), (510, step()), (3500, start(1)), (3510, stop(1))];
    let w1 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (3200, start(2)),
        (3210, precv(9, 0, 0)),
        (3300, stop(2)),
        (3500, start(1)),
        (3510, stop(1)),
    ];
    let ended = analyze(&encode(&[w0_end, w1.clone()]), 1000);
    let on = analyze(&encode(&[w0_on, w1]), 1000);
    assert_eq!(w1_waits(&ended), w1_waits(&on));
    assert_eq!(w1_waits(&ended)[1..3], [(1, true, 0), (2, true, 0)]);
}

/// A timely cluster on one host (process 1 runs worker 0, process 2 worker
/// 1). Process 2's probe reached the sidecar late (it started before the
/// sidecar and retried; a reconnect is the same): its stream begins at 2000,
/// after it had read w0's messages 0 and 1 (those records were dropped and
/// counted by the probe). From then on w0's marks say seq 1 was sent, w1's
/// say nothing was read; window 3 (complete) must still show w1 waiting
/// 1000 ns on w0, as it does when its earlier reads are seen (it showed no
/// wait, "buffered" all through).
#[test]
fn a_reader_that_joined_late_is_not_buffered_by_messages_it_read_before() {
    let w0 = vec![
        (0, start(1)),
        (100, send(5, 1, 0)),
        (200, send(5, 1, 1)),
        (300, stop(1)),
        (310, step()),
        (4400, start(1)),
        (4500, send(5, 1, 2)),
        (4600, stop(1)),
        (4610, step()),
    ];
    let w1_late = vec![
        (2000, start(1)),
        (2100, stop(1)),
        (2110, step()),
        (4510, start(2)),
        (4520, recv(5, 0, 2)),
        (4600, stop(2)),
        (4610, step()),
    ];
    let mut w1_all = vec![(0, start(2)), (150, recv(5, 0, 0)), (250, recv(5, 0, 1)), (300, stop(2))];
    w1_all.extend(w1_late.iter().copied());
    let a = encode_host(HOST, 1, 0, &[w0], true, &[]);
    let late = encode_host(HOST, 2, 1, &[w1_late], true, &[(0, 0, 4)]);
    let all = encode_host(HOST, 2, 1, &[w1_all], true, &[]);
    let run = |b: &[u8]| {
        let (reps, errs) = analyze_bytes(&[("a", &a), ("b", b)], 1000);
        assert!(errs.is_empty(), "{errs:?}");
        reps
    };
    let (late, all) = (run(&late), run(&all));
    let w3 = |reps: &[WindowReport]| {
        let r = reps.iter().find(|r| r.window == 3).unwrap();
        (r.complete, r.waiting.iter().find(|w| w.worker == 1).unwrap().waiting_ns)
    };
    eprintln!("late: {:?}  all: {:?}", w3(&late), w3(&all));
    assert_eq!(w3(&late), w3(&all));
}

/// A message never read (in flight when its dataflow was dropped) marks its
/// reader buffered for `MARK_AGE` (16) windows after it was sent, not for
/// the rest of the run: w0 sends on channel 5 at 100 and w1 never reads it;
/// w1, idle from 110, reads w0's message on channel 6 (sent at 25,500) at
/// 25,600. Windows 1-16: buffered, no wait; windows 17-24: waiting on w0.
#[test]
fn a_message_never_read_stops_counting_after_sixteen_windows() {
    let w0 = vec![
        (0, start(1)),
        (100, send(5, 1, 0)),
        (200, stop(1)),
        (25_400, start(1)),
        (25_500, send(6, 1, 0)),
        (25_700, stop(1)),
    ];
    let w1 = vec![
        (0, start(1)),
        (100, stop(1)),
        (110, step()),
        (25_590, start(2)),
        (25_600, recv(6, 0, 0)),
        (25_650, stop(2)),
        (25_700, step()),
    ];
    let reps = analyze(&encode(&[w0, w1]), 1000);
    let waits: Vec<u64> = reps.iter().map(|r| r.waiting[1].waiting_ns).collect();
    assert!(waits[1..=16].iter().all(|&w| w == 0), "{waits:?}");
    assert!(waits[17..=24].iter().all(|&w| w == 1000), "{waits:?}");
}

/// Two independent programs on one host, each with workers 0 and 1
/// (process A = 1, B = 2). A's worker 1 has ended; A's worker 0 then sends
/// to its worker 1 (in flight). B's worker 1 waits in window 1 for B's
/// worker 0 (sent at 1550). A's message is not B's: B's waits are the
/// same with and without A (a worker index names a stream of another
/// process only in a cluster, whose processes' worker blocks are disjoint).
#[test]
fn a_message_to_an_absent_worker_is_not_another_programs() {
    let a = encode_host(
        HOST,
        1,
        0,
        &[
            vec![
                (0, start(1)),
                (100, stop(1)),
                (110, step()),
                (1000, start(1)),
                (1050, send(5, 1, 0)),
                (1100, stop(1)),
            ],
            vec![(0, start(1)), (100, stop(1))],
        ],
        true,
        &[],
    );
    let b = encode_host(
        HOST,
        2,
        0,
        &[
            vec![
                (0, start(1)),
                (100, stop(1)),
                (110, step()),
                (1500, start(1)),
                (1550, send(5, 1, 0)),
                (1600, stop(1)),
            ],
            vec![
                (0, start(1)),
                (100, stop(1)),
                (110, step()),
                (1650, start(2)),
                (1700, recv(5, 0, 0)),
                (1750, stop(2)),
            ],
        ],
        true,
        &[],
    );
    let b1 = |inputs: &[(&str, &[u8])]| {
        let (reps, errs) = analyze_bytes(inputs, 1000);
        assert!(errs.is_empty(), "{errs:?}");
        let r = reps.iter().find(|r| r.window == 1).unwrap();
        let w = r.waiting.iter().find(|w| w.worker == 1 && r.streams.iter().any(|s| s.process == 2)).unwrap();
        eprintln!("{:?}", r.waiting);
        (w.waiting_ns, w.waiting_for_input_ns)
    };
    assert_eq!(b1(&[("a", &a), ("b", &b)]), b1(&[("b", &b)]));
}
