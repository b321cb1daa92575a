//! The stream ingest on encoded byte streams: windows, loss, clock faults,
//! sequence numbers, corruption.

use ringlog::{
    ClockDomain, ClockSample, Decoder, Encoder, EndStats, Event, Hello, Meta, Record, StreamId, PROCESS_WIDE,
};

use super::records::event_of;
use super::Ingest;
use crate::analysis::model::Ns;

/// A one-worker process's Hello (TSC at 1 GHz).
fn hello() -> Hello {
    Hello {
        host_name: "h".into(),
        program: "p".into(),
        pid: 1,
        workers: 1,
        invariant_tsc: true,
        ticks_per_sec: 1_000_000_000,
    }
}

fn bytes(with_end: bool) -> Vec<u8> {
    let mut e = Encoder::new();
    let mut out = Vec::new();
    let pw = StreamId { host: 7, process: 1, worker: PROCESS_WIDE };
    let w0 = StreamId { host: 7, process: 1, worker: 0 };
    let hello = hello();
    e.hello(pw, 0, ClockDomain::Tsc, &hello, &mut out);
    e.clock(pw, 1, ClockDomain::Tsc, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 5 }], &mut out);
    e.hello(w0, 0, ClockDomain::Tsc, &hello, &mut out);
    e.metadata(w0, 1, ClockDomain::Tsc, &[Meta::Operator { id: 3, name: "Map".into(), addr: vec![0, 3] }], &mut out);
    let recs: Vec<Record> = (0..10)
        .flat_map(|i| {
            [
                Record::from_event(i * 100, Event::ScheduleStart { op: 3 }),
                Record::from_event(i * 100 + 50, Event::Mark { id: 1 }),
                Record::from_event(i * 100 + 60, Event::ScheduleStop { op: 3 }),
            ]
        })
        .collect();
    e.records(w0, 2, 0, ClockDomain::Tsc, &[&recs[..15]], &mut out);
    e.records(w0, 3, 4, ClockDomain::Tsc, &[&recs[15..]], &mut out);
    if with_end {
        e.end(w0, 4, 0, ClockDomain::Tsc, &EndStats { produced: 34, lost: 4, elided: 0 }, &mut out);
    }
    out
}

fn run(b: &[u8]) -> Ingest {
    run_width(b, 250)
}

/// Ingests `b` whole into windows of `width` ns (a decode error ends it).
fn run_width(b: &[u8], width: Ns) -> Ingest {
    run_limited(b, width, super::MAX_METADATA)
}

/// [`run_width`], each stream allowed `max_metadata` operators, channels
/// and spans.
fn run_limited(b: &[u8], width: Ns, max_metadata: usize) -> Ingest {
    let mut ing = Ingest::new("test", width);
    ing.max_metadata = max_metadata;
    run_into(ing, b)
}

/// Ingests `b` whole into `ing`.
fn run_into(mut ing: Ingest, b: &[u8]) -> Ingest {
    for f in Decoder::new(b) {
        match f {
            Ok(f) => {
                let before = ing.out.len();
                ing.frame(f, 1);
                ing.finish_batch(before);
            }
            Err(e) => {
                ing.decode_error(&e);
                return ing;
            }
        }
    }
    ing.eof();
    ing
}

#[test]
fn inlined_event_mapping_is_records() {
    for kind in 0..=255u8 {
        let r = Record { ts: 1, a: 0x1234_5678_9abc, b: 7, c: 0xdead_beef, d: 0x0bad_f00d, kind, _pad: [0; 3] };
        assert_eq!(event_of(&r), r.event(), "kind {kind}");
    }
}

#[test]
fn fragments_per_window_with_loss_marked() {
    let ing = run(&bytes(true));
    let ws: Vec<u64> = ing.out.iter().map(|f| f.window).collect();
    assert_eq!(ws, vec![0, 1, 2, 3]);
    assert_eq!(ing.out.iter().map(|f| f.counters.records).sum::<u64>(), 30);
    assert_eq!(ing.out[0].meta.ops.iter().collect::<Vec<_>>(), vec![(&3, &"Map".to_string())]);
    // the loss sits between record 15 (t=460) and record 16 (t=500)
    assert!(ing.out[1].faults.iter().any(|f| f.contains("4 records lost")));
    assert!(ing.out[0].faults.is_empty());
    assert!(ing.out[3].ended);
    assert!(ing.errors.is_empty());
}

const PW: StreamId = StreamId { host: 7, process: 1, worker: PROCESS_WIDE };
const W0: StreamId = StreamId { host: 7, process: 1, worker: 0 };

/// A clock sample with CLOCK_REALTIME = CLOCK_MONOTONIC.
fn cs(ticks: u64, ns: u64) -> ClockSample {
    ClockSample { ticks, monotonic_ns: ns, realtime_ns: ns }
}

/// Process `PW` and its worker `W0` started, with clock samples at 1 s
/// and 2 s where the TSC reads CLOCK_MONOTONIC (process frames #0-#2,
/// the worker's Hello #0).
fn tsc_stream_at_2s() -> (Encoder, Vec<u8>) {
    let (mut e, mut out) = (Encoder::new(), Vec::new());
    let hello = hello();
    e.hello(PW, 0, ClockDomain::Tsc, &hello, &mut out);
    e.clock(PW, 1, ClockDomain::Tsc, &[cs(1_000_000_000, 1_000_000_000)], &mut out);
    e.clock(PW, 2, ClockDomain::Tsc, &[cs(2_000_000_000, 2_000_000_000)], &mut out);
    e.hello(W0, 0, ClockDomain::Tsc, &hello, &mut out);
    (e, out)
}

/// A stream clock that goes back (a TSC reset or write: a sample whose
/// ticks are lower than the last one's while CLOCK_MONOTONIC went on)
/// cannot be mapped any more: the samples after it are ignored, and the
/// records after it land at the stream's last time (here all 40, 400 ms
/// of work, in window 23 instead of 25-28). That must not be silent: the
/// windows from there on carry a fault.
#[test]
fn a_stream_clock_that_goes_back_is_a_fault() {
    let (mut e, mut out) = tsc_stream_at_2s();
    let (pw, w0) = (PW, W0);
    let marks = |from: u64| -> Vec<Record> {
        (0..40).map(|i| Record::from_event(from + i * 10_000_000, Event::Mark { id: 1 })).collect()
    };
    e.records(w0, 1, 0, ClockDomain::Tsc, &[&marks(2_000_000_000)], &mut out);
    // At 2.5 s the TSC restarts from 1000.
    e.clock(pw, 3, ClockDomain::Tsc, &[cs(1_000, 2_500_000_000)], &mut out);
    e.records(w0, 2, 0, ClockDomain::Tsc, &[&marks(1_000)], &mut out);
    e.end(w0, 3, 0, ClockDomain::Tsc, &EndStats { produced: 80, lost: 0, elided: 0 }, &mut out);
    let ing = run_width(&out, 100_000_000);
    let at: Vec<(u64, u64, bool)> = ing
        .out
        .iter()
        .map(|f| (f.window, f.counters.records, f.faults.iter().any(|x| x.contains("stream clock went back"))))
        .collect();
    assert!(at.iter().any(|&(w, n, fault)| w >= 23 && n > 0 && fault), "{at:?}");
}

/// The TSC goes back by 1.5 s at 2.5 s (a reset or write) and the probe
/// goes on with a sample a second and a Records frame every 100 ms. Once
/// the TSC passes the last accepted sample's ticks again (after 1.5 s)
/// its samples are accepted, yet the mapping across the reset is wrong:
/// every window from the reset on carries the fault (only those of the
/// frames right after a rejected sample did).
#[test]
fn a_stream_clock_that_went_back_faults_every_later_window() {
    let (mut e, mut out) = tsc_stream_at_2s();
    let (pw, w0) = (PW, W0);
    const BACK: u64 = 1_500_000_000;
    let (mut pseq, mut wseq) = (3, 1);
    // True time t (ns) from 2.0 s to 6.0 s, a frame of 10 marks each 100 ms.
    let mut t = 2_000_000_000u64;
    while t < 6_000_000_000 {
        if t.is_multiple_of(1_000_000_000) && t > 2_000_000_000 {
            let ticks = if t >= 2_500_000_000 { t - BACK } else { t };
            e.clock(pw, pseq, ClockDomain::Tsc, &[cs(ticks, t)], &mut out);
            pseq += 1;
        }
        let recs: Vec<Record> = (0..10)
            .map(|i| {
                let tt = t + i * 10_000_000;
                let ticks = if tt >= 2_500_000_000 { tt - BACK } else { tt };
                Record::from_event(ticks, Event::Mark { id: 1 })
            })
            .collect();
        e.records(w0, wseq, 0, ClockDomain::Tsc, &[&recs], &mut out);
        wseq += 1;
        t += 100_000_000;
    }
    e.end(w0, wseq, 0, ClockDomain::Tsc, &EndStats { produced: 400, lost: 0, elided: 0 }, &mut out);
    let ing = run_width(&out, 100_000_000);
    let at: Vec<(u64, u64, bool)> = ing
        .out
        .iter()
        .filter(|f| f.counters.records > 0)
        .map(|f| (f.window, f.counters.records, f.faults.iter().any(|x| x.contains("stream clock went back"))))
        .collect();
    // Every window with records from the reset on carries the fault.
    let first = at.iter().position(|x| x.2).expect("a fault");
    assert!(at[first..].iter().all(|x| x.2), "{at:?}");
}

/// A clock sample that puts the TSC's rate far off is ignored and named;
/// the records go on being converted with the samples around it.
#[test]
fn an_implausible_clock_sample_is_named_and_ignored() {
    let (mut e, mut out) = tsc_stream_at_2s();
    e.clock(PW, 3, ClockDomain::Tsc, &[cs(2_100_000_000, 900_000_000_000_000)], &mut out);
    let mark = [Record::from_event(2_500_000_000, Event::Mark { id: 1 })];
    e.records(W0, 1, 0, ClockDomain::Tsc, &[&mark], &mut out);
    e.end(W0, 2, 0, ClockDomain::Tsc, &EndStats { produced: 1, lost: 0, elided: 0 }, &mut out);
    let ing = run_width(&out, 1_000_000_000);
    assert!(ing.errors.iter().any(|x| x.contains("clock #3: a clock sample implausible")), "{:?}", ing.errors);
    // (1 ns per tick from the samples at 1 s and 2 s: window 2.)
    assert!(ing.out.iter().any(|f| f.window == 2 && f.counters.records == 1), "{:?}", ing.out);
    assert!(ing.out.iter().all(|f| f.window < 3), "{:?}", ing.out);
}

/// Frame numbers at the end of their range (a corrupt header behind
/// sound checksums): the frame after #2⁶⁴−1 is out of sequence, in a
/// worker stream and a process alike. Computing the next one overflowed
/// (a panic where overflow is checked; elsewhere it wrapped to #0 and a
/// following #0 passed as in sequence).
/// Counts a stream states (elided schedules, their spin time, lost
/// records) near 2⁶⁴, from a corrupt header or record behind sound
/// checksums: their sums in a window saturate. Found by the
/// `ingest_stream` fuzz target, where the sum of two Steps' spin time
/// panicked ('attempt to add with overflow'); release builds wrapped.
#[test]
fn stated_counts_near_the_limit_saturate_in_their_window() {
    let (mut e, mut out) = tsc_stream_at_2s();
    let step = |t| Record::from_event(t, Event::Step { elided: u64::MAX - 1, spin_ticks: u64::MAX });
    let recs = [step(2_000_000_000), step(2_000_000_100)];
    e.records(W0, 1, u64::MAX, ClockDomain::Tsc, &[&recs], &mut out);
    e.records(W0, 2, u64::MAX, ClockDomain::Tsc, &[&[step(2_000_000_200)]], &mut out);
    e.end(W0, 3, 0, ClockDomain::Tsc, &EndStats { produced: 3, lost: 0, elided: 0 }, &mut out);
    let ing = run_width(&out, 1_000_000_000);
    let w = ing.out.iter().find(|f| f.counters.steps == 3).expect("one window holds the three steps");
    let c = &w.counters;
    assert_eq!((c.elided, c.spin_ns, c.lost), (u64::MAX, u64::MAX, u64::MAX), "{c:?}");
}

#[test]
fn the_frame_after_the_last_frame_number_is_out_of_sequence() {
    let (mut e, mut out) = tsc_stream_at_2s();
    let mark = [Record::from_event(2_000_000_000, Event::Mark { id: 1 })];
    e.records(W0, u64::MAX, 0, ClockDomain::Tsc, &[&mark], &mut out);
    e.end(W0, 0, 0, ClockDomain::Tsc, &EndStats { produced: 1, lost: 0, elided: 0 }, &mut out);
    e.clock(PW, u64::MAX, ClockDomain::Tsc, &[cs(3_000_000_000, 3_000_000_000)], &mut out);
    e.end(PW, 0, 0, ClockDomain::Tsc, &EndStats::default(), &mut out);
    let ing = run(&out);
    let after_last = "#0 expected #18446744073709551616";
    assert!(ing.out.iter().any(|f| f.faults.iter().any(|x| x.contains(after_last))), "{:?}", ing.out);
    assert!(ing.errors.iter().any(|x| x.contains("frame #0 after #18446744073709551616")), "{:?}", ing.errors);
}

#[test]
fn disconnect_and_corruption_are_named() {
    let ing = run(&bytes(false));
    assert!(ing.out.last().unwrap().faults.iter().any(|f| f.contains("without End")));
    assert!(ing.errors[0].contains("without an End frame"));
    let mut b = bytes(true);
    let n = b.len();
    b[n - 30] ^= 0xff; // corrupt the last frame
    let ing = run(&b);
    assert!(ing.errors[0].starts_with("test: decode error at byte"), "{:?}", ing.errors);
    assert!(ing.out.last().unwrap().faults.iter().any(|f| f.contains("decode error")));
    // truncated input
    let ing = run(&bytes(true)[..n - 10]);
    assert!(ing.errors[0].contains("input ends inside a frame"), "{:?}", ing.errors);
}

/// A process's Stats frames give its latest figures, waiting to be taken:
/// one entry per process however many frames came, a newer frame number
/// winning, figures this reader does not know skipped; the windows do not
/// change.
#[test]
fn stats_frames_leave_the_latest_figures_of_each_process() {
    use ringlog::{ProbeStats, StatFigure as F};
    let mut b = bytes(true);
    let mut e = Encoder::new();
    let stats = |written, last| {
        let mut s = ProbeStats { last, figures: vec![(1000, 9)] };
        s.set(F::Written, written);
        s.set(F::WriterCpuNs, 7);
        s
    };
    for (seq, written, last) in [(2, 10, false), (4, 30, true), (3, 20, false)] {
        let pw = StreamId { host: 7, process: 1, worker: PROCESS_WIDE };
        e.stats(pw, seq, ClockDomain::Tsc, &stats(written, last), &mut b);
    }
    let ing = run(&b);
    assert_eq!(ing.probe_figures.len(), 1, "{:?}", ing.probe_figures);
    let (host, pid, f) = &ing.probe_figures[0];
    assert_eq!((*host, *pid, f.seq, f.program.as_str()), (7, 1, 4, "p"));
    assert_eq!(
        (f.figures.written, f.figures.writer_cpu_ns, f.figures.adapter_ns, f.figures.last),
        (Some(30), Some(7), None, true)
    );
    let plain = run(&bytes(true));
    assert_eq!(format!("{:?}", ing.out), format!("{:?}", plain.out));
}

/// The start of a one-worker process's byte stream (its Hello, a clock
/// sample, the worker's Hello), and the worker's stream id and clock domain.
fn one_worker() -> (Encoder, Vec<u8>, StreamId, ClockDomain) {
    let (mut e, mut out) = (Encoder::new(), Vec::new());
    let pw = StreamId { host: 7, process: 1, worker: PROCESS_WIDE };
    let w0 = StreamId { host: 7, process: 1, worker: 0 };
    let d = ClockDomain::Tsc;
    e.hello(pw, 0, d, &hello(), &mut out);
    e.clock(pw, 1, d, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 5 }], &mut out);
    e.hello(w0, 0, d, &hello(), &mut out);
    (e, out, w0, d)
}

/// Ten executions of operator 3, one each 100 ns from `from` × 100 ns.
fn executions(from: u64) -> Vec<Record> {
    (from..from + 10)
        .flat_map(|i| {
            [
                Record::from_event(i * 100, Event::ScheduleStart { op: 3 }),
                Record::from_event(i * 100 + 60, Event::ScheduleStop { op: 3 }),
            ]
        })
        .collect()
}

/// A stream's fragments share its metadata rather than each copying it; a
/// Metadata frame after some windows changes the fragments made after it
/// only, and a name given again replaces the earlier one.
#[test]
fn fragments_share_their_streams_metadata_until_it_changes() {
    let (mut e, mut out, w0, d) = one_worker();
    let many: Vec<Meta> =
        (0..1000).map(|id| Meta::Operator { id, name: format!("idle {id}"), addr: vec![0, id] }).collect();
    e.metadata(w0, 1, d, &many, &mut out);
    e.records(w0, 2, 0, d, &[&executions(0)], &mut out);
    let renamed =
        [Meta::Operator { id: 3, name: "Map".into(), addr: vec![0, 3] }, Meta::Span { id: 9, name: "s".into() }];
    e.metadata(w0, 3, d, &renamed, &mut out);
    e.records(w0, 4, 0, d, &[&executions(10)], &mut out);
    e.end(w0, 5, 0, d, &EndStats { produced: 40, lost: 0, elided: 0 }, &mut out);
    let ing = run(&out);
    let at = |ix: u64| ing.out.iter().find(|f| f.window == ix).expect("window");
    // Windows of 250 ns: 0–3 from the first frame of records, 4–7 from the
    // second (times 1,000–1,960).
    assert!(std::sync::Arc::ptr_eq(&at(0).meta, &at(2).meta), "one copy for the windows before the change");
    assert!(std::sync::Arc::ptr_eq(&at(4).meta, &at(7).meta), "and one after it");
    assert_eq!(at(0).meta.ops.len(), 1000);
    assert_eq!(at(0).meta.ops[&3], "idle 3");
    assert!(at(0).meta.spans.is_empty());
    assert_eq!(at(7).meta.ops.len(), 1000);
    assert_eq!(at(7).meta.ops[&3], "Map");
    assert_eq!(at(7).meta.spans[&9], "s");
}

/// A stream declares at most `max_metadata` operators, channels and spans:
/// past it new ones are ignored and said once (an operator already named
/// may be named again), and its records go on as before.
#[test]
fn metadata_past_the_limit_is_refused_and_said_once() {
    let (mut e, mut out, w0, d) = one_worker();
    let ops = |ids: std::ops::Range<u32>, name: &str| -> Vec<Meta> {
        ids.map(|id| Meta::Operator { id, name: format!("{name} {id}"), addr: vec![0, id] }).collect()
    };
    e.metadata(w0, 1, d, &ops(0..8, "a"), &mut out);
    e.metadata(w0, 2, d, &[ops(0..1, "renamed"), ops(8..20, "b")].concat(), &mut out);
    e.metadata(w0, 3, d, &ops(20..30, "c"), &mut out);
    e.records(w0, 4, 0, d, &[&executions(0)], &mut out);
    e.end(w0, 5, 0, d, &EndStats { produced: 20, lost: 0, elided: 0 }, &mut out);
    let ing = run_limited(&out, 250, 10);
    let meta = &ing.out[0].meta;
    assert_eq!(meta.ops.len(), 10);
    assert_eq!(meta.ops[&0], "renamed 0");
    assert_eq!(meta.ops[&9], "b 9");
    assert!(!meta.ops.contains_key(&10) && !meta.ops.contains_key(&20));
    assert_eq!(ing.errors.len(), 1, "{:?}", ing.errors);
    assert!(ing.errors[0].contains("metadata past 10 operators, channels and spans"), "{:?}", ing.errors);
    assert_eq!(ing.out.iter().map(|f| f.counters.records).sum::<u64>(), 20);
}

/// A dataflow of operators 11–13 (root 10, address `[1]`) beside operator 3
/// of dataflow 0; at time 1,020 the program drops dataflow 1 (its Mark
/// `MARK_SHUTDOWN | 10`), and operator 3 alone shuts down at 1,520. Windows
/// of 250 ns, about four a frame: the windows handed over with the
/// shutdowns' (4–6, at the end of the frame that has them) keep the names;
/// the windows after (7–11) have neither the dataflow's operators, nested
/// scope too, nor its channel, nor operator 3.
#[test]
fn operators_that_shut_down_are_forgotten_after_their_window() {
    let (mut e, mut out, w0, d) = one_worker();
    let op = |id: u32, name: &str, addr: Vec<u32>| Meta::Operator { id, name: name.into(), addr };
    let meta = [
        op(0, "Dataflow", vec![0]),
        op(3, "Map", vec![0, 3]),
        op(10, "Dataflow", vec![1]),
        op(11, "Input", vec![1, 1]),
        op(12, "Iterate", vec![1, 2]),
        op(13, "Join", vec![1, 2, 1]),
        Meta::Channel { id: 5, src: (11, 0), dst: (13, 0) },
        Meta::Channel { id: 6, src: (3, 0), dst: (0, 0) },
    ];
    e.metadata(w0, 1, d, &meta, &mut out);
    let mark = |t: u64, id: u64| Record::from_event(t, Event::Mark { id });
    let mut first = executions(0);
    // (Marks that name no operator the stream declared, or that are not
    // shutdowns, change nothing.)
    first.insert(3, mark(120, ringlog::MARK_SHUTDOWN | 77));
    first.insert(5, mark(220, ringlog::MARK_PUSH_PROGRESS | 10));
    first.insert(7, mark(320, ringlog::MARK_SHUTDOWN | 1 << 40 | 10));
    e.records(w0, 2, 0, d, &[&first], &mut out);
    let mut second = executions(10);
    second.insert(1, mark(1_020, ringlog::MARK_SHUTDOWN | 10));
    second.insert(10, mark(1_520, ringlog::MARK_SHUTDOWN | 3));
    e.records(w0, 3, 0, d, &[&second], &mut out);
    e.records(w0, 4, 0, d, &[&executions(20)], &mut out);
    e.end(w0, 5, 0, d, &EndStats { produced: 65, lost: 0, elided: 0 }, &mut out);
    let ing = run(&out);
    let at = |ix: u64| ing.out.iter().find(|f| f.window == ix && !f.marker).expect("window");
    let ops = |ix: u64| {
        let mut ops: Vec<u32> = at(ix).meta.ops.keys().copied().collect();
        ops.sort_unstable();
        ops
    };
    let channels = |ix: u64| at(ix).meta.channels.iter().map(|c| c.0).collect::<Vec<_>>();
    for ix in 0..7 {
        assert_eq!(ops(ix), [0, 3, 10, 11, 12, 13], "window {ix}");
        assert_eq!(channels(ix), [5, 6], "window {ix}");
    }
    for ix in 7..12 {
        assert_eq!(ops(ix), [0], "window {ix}");
        assert_eq!(at(ix).meta.op_addrs.len(), 1);
        assert_eq!(channels(ix), [6], "a channel one of whose ends is still known stays");
    }
}

/// A program that builds and drops a dataflow of 3 operators 30 times
/// declares 120 operators, but holds 4 at most: a stream allowed 10 names
/// is never refused one, and every window names the operators it ran.
#[test]
fn dataflows_built_and_dropped_keep_the_metadata_bounded() {
    let (mut e, mut out, w0, d) = one_worker();
    let mut seq = 1;
    for i in 0..30u32 {
        let root = 100 + 4 * i;
        let ops: Vec<Meta> = (0..4)
            .map(|k| Meta::Operator {
                id: root + k,
                name: format!("df{i} op{k}"),
                addr: if k == 0 { vec![i] } else { vec![i, k] },
            })
            .collect();
        e.metadata(w0, seq, d, &ops, &mut out);
        // (Each dataflow runs in its own window of 1,000 ns: four windows
        // of 250, and is dropped at the end of its first.)
        let t0 = u64::from(i) * 1_000;
        let recs = [
            Record::from_event(t0 + 10, Event::ScheduleStart { op: root + 1 }),
            Record::from_event(t0 + 60, Event::ScheduleStop { op: root + 1 }),
            Record::from_event(t0 + 200, Event::Mark { id: ringlog::MARK_SHUTDOWN | u64::from(root) }),
        ];
        e.records(w0, seq + 1, 0, d, &[&recs], &mut out);
        seq += 2;
    }
    e.end(w0, seq, 0, d, &EndStats { produced: 90, lost: 0, elided: 0 }, &mut out);
    let ing = run_limited(&out, 250, 10);
    assert!(ing.errors.is_empty(), "{:?}", ing.errors);
    for i in 0..30u64 {
        let f = ing.out.iter().find(|f| f.window == 4 * i && !f.marker).expect("window");
        let op = 100 + 4 * i as u32 + 1;
        assert_eq!(f.meta.op_name(op), Some(format!("df{i} op1").as_str()), "window {}", f.window);
        assert!(f.meta.ops.len() <= 8, "window {}: {} operators", f.window, f.meta.ops.len());
    }
}

/// A Mark `MARK_UNTRACED_PROGRESS | scope` (the probe could not record that
/// scope's progress) is kept in the stream's metadata, once, for a scope the
/// stream declared, from the windows of the frame that has it on (the
/// scope's progress was never traced: the probe writes the mark once it
/// knows); a mark naming no declared operator changes nothing; a scope that
/// shuts down is forgotten with its name. The window's report lists it, and
/// its line says so.
#[test]
fn a_scope_whose_progress_is_not_traced_is_said_from_its_mark_on() {
    let (mut e, mut out, w0, d) = one_worker();
    let op = |id: u32, name: &str, addr: Vec<u32>| Meta::Operator { id, name: name.into(), addr };
    let meta = [op(0, "Dataflow", vec![0]), op(2, "Iterative", vec![0, 2]), op(3, "Work", vec![0, 2, 1])];
    e.metadata(w0, 1, d, &meta, &mut out);
    let mark = |t: u64, id: u64| Record::from_event(t, Event::Mark { id });
    let mut first = executions(0);
    first.insert(3, mark(120, ringlog::MARK_UNTRACED_PROGRESS | 77));
    first.insert(5, mark(320, ringlog::MARK_UNTRACED_PROGRESS | 2));
    first.insert(7, mark(330, ringlog::MARK_UNTRACED_PROGRESS | 2));
    e.records(w0, 2, 0, d, &[&first], &mut out);
    let mut second = executions(10);
    second.insert(10, mark(1_520, ringlog::MARK_SHUTDOWN | 2));
    e.records(w0, 3, 0, d, &[&second], &mut out);
    e.records(w0, 4, 0, d, &[&executions(20)], &mut out);
    e.end(w0, 5, 0, d, &EndStats { produced: 65, lost: 0, elided: 0 }, &mut out);
    let ing = run(&out);
    let at = |ix: u64| ing.out.iter().find(|f| f.window == ix && !f.marker).expect("window");
    for ix in 0..7 {
        assert_eq!(at(ix).meta.untraced, [2], "window {ix}");
    }
    for ix in 7..12 {
        assert!(at(ix).meta.untraced.is_empty(), "window {ix}: the scope shut down");
    }
    let rep = crate::analysis::analyze::analyze(7, 3, 250, vec![at(3).clone()]);
    let want = crate::analysis::report::UntracedScope { worker: 0, operator: 2, name: "Iterative".into() };
    assert_eq!(rep.untraced_progress, [want]);
    assert!(rep.readable_line().contains("(progress not traced in `Iterative`)"), "{}", rep.readable_line());
    let rep = crate::analysis::analyze::analyze(7, 8, 250, vec![at(8).clone()]);
    assert!(rep.untraced_progress.is_empty() && !rep.readable_line().contains("not traced"));
}

/// A Mark `MARK_DETACHED` (the program bound its own logger to the engine's
/// log in the probe's place) ends the worker's stream at its frame: its
/// window carries the fault, the input's errors name the stream, nothing
/// after it is taken (the next frame's executions are ignored, the End
/// frame too), and the stream is not reported as cut off at the end of
/// input.
#[test]
fn a_stream_whose_engine_log_the_program_took_ends_at_its_mark() {
    let (mut e, mut out, w0, d) = one_worker();
    e.metadata(w0, 1, d, &[Meta::Operator { id: 3, name: "Map".into(), addr: vec![0, 3] }], &mut out);
    let mut first = executions(0);
    first.push(Record::from_event(1_020, Event::Mark { id: ringlog::MARK_DETACHED }));
    e.records(w0, 2, 0, d, &[&first], &mut out);
    e.records(w0, 3, 0, d, &[&executions(20)], &mut out);
    e.end(w0, 4, 0, d, &EndStats { produced: 41, lost: 0, elided: 0 }, &mut out);
    let ing = run(&out);
    assert_eq!(ing.errors.len(), 1, "{:?}", ing.errors);
    assert!(ing.errors[0].contains("worker 0: the program bound its own logger"), "{:?}", ing.errors);
    let windows: Vec<u64> = ing.out.iter().filter(|f| !f.marker).map(|f| f.window).collect();
    assert_eq!(windows.iter().max(), Some(&4), "nothing after the mark's window: {windows:?}");
    let last = ing.out.iter().find(|f| f.window == 4 && !f.marker).expect("the mark's window");
    assert!(
        last.faults.iter().any(|x| x.contains("nothing of this worker is traced from here on")),
        "{:?}",
        last.faults
    );
    let rep = crate::analysis::analyze::analyze(7, 4, 250, vec![last.clone()]);
    assert!(!rep.complete && rep.readable_line().contains("in the probe's place"), "{}", rep.readable_line());
}

/// Each fragment says which workers its process runs, from the streams
/// known so far: a worker's Hello is enough (worker 2 says hello before
/// worker 0's records and records nothing itself), and, offline, the files'
/// first pass adds streams this ingest does not read (worker 3, read by
/// another sidecar worker). What a window's owner holds a process without
/// a worker count against (`analyze::streams`).
#[test]
fn fragments_say_the_workers_their_process_runs() {
    let (mut e, mut out, w0, d) = one_worker();
    let w2 = StreamId { worker: 2, ..w0 };
    e.hello(w2, 0, d, &hello(), &mut out);
    e.records(w0, 1, 0, d, &[&executions(0)], &mut out);
    let ing = run_into(Ingest::new("t", 250), &out);
    assert!(!ing.out.is_empty());
    assert!(ing.out.iter().all(|f| f.process_workers == (0, 3)), "{:?}", ing.out.iter().map(|f| f.process_workers));
    let mut seeded = Ingest::new("t", 250);
    let known: super::KnownWorkers = [((7, 1), (3, 4)), ((7, 2), (9, 10))].into_iter().collect();
    seeded.know_workers(&known);
    let seeded = run_into(seeded, &out);
    assert!(seeded.out.iter().all(|f| f.process_workers == (0, 4)));
}
