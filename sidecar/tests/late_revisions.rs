//! Live: a worker inside one long execution publishes its records only when
//! the execution's step ends (timely's logger delivers a step's events
//! then; the probe keeps the schedule start pending until its stop), after
//! the windows it spans were reported on time. Those windows are analyzed
//! again with the late records and reported again (`revision`), and the
//! revised report is what the whole input, analyzed at once, says of them.

mod common;
use common::*;
use ringlog::{ClockDomain, ClockSample, Encoder, EndStats, Event, Hello, Meta, Record, StreamId, PROCESS_WIDE};
use sidecar::analysis::report::{RunTotals, WindowReport};
use sidecar::pipeline::{analyze_bytes_as_reported, analyze_bytes_live};

const W: u64 = 1000;

/// One process of two workers, its frames written in the order a test
/// feeds them.
struct Process {
    e: Encoder,
    seq: [u64; 2],
}

impl Process {
    fn sid(w: u32) -> StreamId {
        StreamId { host: HOST, process: PID, worker: w }
    }

    /// Hello, clock and metadata of the process and its two workers.
    fn start() -> (Process, Vec<u8>) {
        let (mut e, mut out) = (Encoder::new(), Vec::new());
        let dom = ClockDomain::MonotonicNs;
        let pw = StreamId { host: HOST, process: PID, worker: PROCESS_WIDE };
        let hello = Hello {
            host_name: "test".into(),
            program: "late".into(),
            pid: PID,
            workers: 2,
            invariant_tsc: false,
            ticks_per_sec: 1_000_000_000,
        };
        e.hello(pw, 0, dom, &hello, &mut out);
        e.clock(pw, 1, dom, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 1_000_000 }], &mut out);
        for w in 0..2 {
            e.hello(Self::sid(w), 0, dom, &hello, &mut out);
            let meta: Vec<Meta> = (1..=3)
                .map(|i| Meta::Operator {
                    id: i,
                    name: ["Poll", "ArrangeByKey", "Gather"][i as usize - 1].into(),
                    addr: vec![0, i],
                })
                .collect();
            e.metadata(Self::sid(w), 1, dom, &meta, &mut out);
        }
        (Process { e, seq: [2, 2] }, out)
    }

    /// A Records frame of worker `w`.
    fn records(&mut self, w: u32, evs: &[(u64, Event)]) -> Vec<u8> {
        let mut out = Vec::new();
        let recs: Vec<Record> = evs.iter().map(|&(t, ev)| Record::from_event(t, ev)).collect();
        let s = &mut self.seq[w as usize];
        self.e.records(Self::sid(w), *s, 0, ClockDomain::MonotonicNs, &[&recs], &mut out);
        *s += 1;
        out
    }

    /// Both workers' End frames.
    fn end(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for w in 0..2 {
            let s = self.seq[w as usize];
            self.e.end(Self::sid(w), s, 0, ClockDomain::MonotonicNs, &EndStats::default(), &mut out);
        }
        out
    }
}

/// The run, as its frames reach the sidecar (windows of 1000 ns):
///
/// * w0 polls (0–100), then runs one ArrangeByKey execution from 1200 to
///   3600 that sends w1 a message at 3500; its records reach the sidecar
///   only at the end (the frame `late`), after a live deadline at 3000
///   closed windows 0, 1 and 2 with w0 silent since 100 (an open gap).
/// * w1 polls (0–100), then spins (a step at 2900) until w0's message: it
///   reads it in Gather at 3650.
///
/// Returns (the chunks with the deadline after the first, every byte in
/// the same order).
fn run() -> (Vec<(Vec<u8>, Option<u64>)>, Vec<u8>) {
    let (mut p, prelude) = Process::start();
    let w0_early = p.records(0, &[(0, start(1)), (100, stop(1)), (150, step())]);
    let w1_early = p.records(1, &[(0, start(1)), (100, stop(1)), (110, step()), (2900, step())]);
    let late = p.records(0, &[(1200, start(2)), (3500, send(5, 1, 0)), (3600, stop(2)), (3610, step())]);
    let w1_after = p.records(1, &[(3650, start(3)), (3660, recv(5, 0, 0)), (3700, stop(3)), (3710, step())]);
    let w0_after = p.records(0, &[(3700, start(1)), (3800, stop(1)), (3810, step())]);
    let end = p.end();
    let first = [prelude, w0_early, w1_early].concat();
    let chunks = vec![(first, Some(3000)), (late, None), ([w1_after, w0_after].concat(), None), (end, None)];
    let all = chunks.iter().flat_map(|c| c.0.clone()).collect();
    (chunks, all)
}

fn live(chunks: &[(Vec<u8>, Option<u64>)], revise_within: u64) -> (Vec<WindowReport>, Vec<String>) {
    let chunks: Vec<(&[u8], Option<u64>)> = chunks.iter().map(|(b, d)| (b.as_slice(), *d)).collect();
    analyze_bytes_live(&chunks, W, revise_within)
}

fn json(r: &WindowReport) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap();
    v.as_object_mut().unwrap().remove("revision");
    v
}

/// The latest report of each window, in window order.
fn latest(reps: &[WindowReport]) -> Vec<&WindowReport> {
    let mut by: std::collections::BTreeMap<u64, &WindowReport> = Default::default();
    for r in reps {
        let e = by.entry(r.window).or_insert(r);
        if r.revision >= e.revision {
            *e = r;
        }
    }
    by.into_values().collect()
}

/// Windows 0, 1 and 2 went out at the deadline with w0 silent (its gap
/// open since 100). Its late frame revises each of them once: window 0
/// gains w0's gap up to 1200, windows 1 and 2 its ArrangeByKey execution
/// (1200–3600), so that each revised report equals, field for field, what
/// the whole input analyzed at once reports of that window (as the live
/// pipeline reports windows: w1's wait open through them, carried by
/// window 3 to w0). Window 3 was never late: reported once.
#[test]
fn late_records_revise_their_windows_to_what_the_whole_input_says() {
    let (chunks, all) = run();
    let (reps, errors) = live(&chunks, 16);
    assert!(errors.is_empty(), "{errors:?}");
    let order: Vec<(u64, u32)> = reps.iter().map(|r| (r.window, r.revision)).collect();
    assert_eq!(order, vec![(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (3, 0)]);
    let (offline, errors) = analyze_bytes_as_reported(&[("all", &all)], W);
    assert!(errors.is_empty(), "{errors:?}");
    let got = latest(&reps);
    assert_eq!(got.len(), offline.len());
    for (g, o) in got.iter().zip(&offline) {
        assert_eq!(json(g), json(o), "window {}", o.window);
    }
    // Before the revision, window 2 had no critical-path operator on w0
    // (it was silent); revised, the path is w0's ArrangeByKey, all 1000 ns.
    let first2 = reps.iter().find(|r| r.window == 2 && r.revision == 0).unwrap();
    assert!(first2.critical_path.top_operators.iter().all(|o| o.name != "ArrangeByKey"), "{first2:?}");
    let top = &got[2].critical_path.top_operators[0];
    assert_eq!((top.worker, top.name.as_str(), top.ns), (0, "ArrangeByKey", 1000));
    assert!(got[2].complete && !got[2].incomplete_reasons.iter().any(|r| r.contains("late data")));
}

/// While w0 is silent and w1 records on (to 2900, past the middle of w0's
/// silence since 150), the windows the deadline closes say w0 is inside
/// one execution since 150, not waiting; the revision, with its records,
/// no longer does.
#[test]
fn a_silent_worker_whose_process_records_on_is_inside_one_execution() {
    let (chunks, _) = run();
    let (reps, _) = live(&chunks, 16);
    for r in reps.iter().filter(|r| r.window <= 2) {
        let inside: Vec<(u32, u64)> = r.inside_execution.iter().map(|i| (i.worker, i.since_ns)).collect();
        if r.revision == 0 {
            assert_eq!(inside, vec![(0, 150)], "window {}", r.window);
            let line = r.readable_line();
            let since =
                format!("w0 inside one execution since {}", sidecar::analysis::report::human_ns(r.end_ns - 150));
            assert!(line.contains(&since) && !line.contains("w0 waiting"), "{line}");
        } else {
            assert!(inside.is_empty(), "window {} revised: {inside:?}", r.window);
        }
    }
}

/// The run's totals count a revised window once: the first report's sums
/// taken out, the revision's added, they equal the totals of the whole
/// input's reports.
#[test]
fn the_totals_count_a_revised_window_once() {
    let (chunks, all) = run();
    let (reps, _) = live(&chunks, 16);
    let mut totals = RunTotals::default();
    let mut last: std::collections::BTreeMap<u64, WindowReport> = Default::default();
    for r in &reps {
        if let Some(old) = last.insert(r.window, r.clone()) {
            totals.remove(&old);
        }
        totals.add(r);
    }
    let (offline, _) = analyze_bytes_as_reported(&[("all", &all)], W);
    let mut want = RunTotals::default();
    offline.iter().for_each(|r| want.add(r));
    assert_eq!(totals.windows, 4);
    assert_eq!(format!("{totals:?}"), format!("{want:?}"));
}

/// With revisions off (`--revise-within 0`), or for a window older than
/// the ones kept, late records are not folded in: the windows keep their
/// first report and the stream's next window says INCOMPLETE (`late data`,
/// with its advice).
#[test]
fn late_records_beyond_the_windows_kept_mark_the_next_window_incomplete() {
    let (chunks, _) = run();
    // Window 2 is the last handed over at the deadline (next: 3); keeping
    // one window revises window 2 only, windows 0 and 1 are too old.
    for (keep, revised) in [(0, vec![]), (1, vec![2])] {
        let (reps, _) = live(&chunks, keep);
        let rev: Vec<u64> = reps.iter().filter(|r| r.revision > 0).map(|r| r.window).collect();
        assert_eq!(rev, revised, "--revise-within {keep}");
        if keep == 0 {
            // (What the revision corrects: window 2 without w0's execution.)
            let (offline, _) = analyze_bytes_as_reported(&[("all", &run().1)], W);
            assert_ne!(json(&reps[2]), json(&offline[2]));
            assert_ne!(reps[2].critical_path.top_operators, offline[2].critical_path.top_operators);
        }
        let w3 = reps.iter().find(|r| r.window == 3).unwrap();
        assert!(!w3.complete, "{:?}", w3.incomplete_reasons);
        let reason = w3.incomplete_reasons.join("; ");
        assert!(reason.contains("late data") && reason.contains("raise --grace"), "{reason}");
    }
}
