//! Records and metadata written through the probe come back from the
//! decoder exactly, with elision applied as the reference model says.

mod common;

use common::{read_trace, tmp_path};
use probe::{Compression, OnFull, Probe, Sink, WorkerProbe};
use proptest::prelude::*;
use ringlog::{Event, Meta};

#[derive(Clone, Debug)]
enum Call {
    Start(usize),
    Stop(usize),
    Send(usize, usize, u64, usize),
    Recv(usize, usize, u64, usize),
    PSend(usize, u64),
    PRecv(usize, usize, u64),
    SpanStart(u64),
    SpanStop(u64),
    Mark(u64),
    Step,
    Operator(usize, String),
    Channel(usize, usize, usize),
}

fn call() -> impl Strategy<Value = Call> {
    // Schedules dominate, as in a real engine, so that elision is exercised.
    prop_oneof![
        8 => (0..4usize).prop_map(Call::Start),
        8 => (0..4usize).prop_map(Call::Stop),
        2 => (0..3usize, 0..4usize, any::<u64>(), 0..100_000usize).prop_map(|(a, b, c, d)| Call::Send(a, b, c, d)),
        2 => (0..3usize, 0..4usize, any::<u64>(), 0..100_000usize).prop_map(|(a, b, c, d)| Call::Recv(a, b, c, d)),
        1 => (0..3usize, any::<u64>()).prop_map(|(a, b)| Call::PSend(a, b)),
        1 => (0..3usize, 0..4usize, any::<u64>()).prop_map(|(a, b, c)| Call::PRecv(a, b, c)),
        1 => any::<u64>().prop_map(Call::SpanStart),
        1 => any::<u64>().prop_map(Call::SpanStop),
        1 => any::<u64>().prop_map(Call::Mark),
        2 => Just(Call::Step),
        1 => (0..4usize, "[a-zA-Z]{0,12}").prop_map(|(a, b)| Call::Operator(a, b)),
        1 => (0..3usize, 0..4usize, 0..4usize).prop_map(|(a, b, c)| Call::Channel(a, b, c)),
    ]
}

/// The reference model of elision: a start is published only if an event
/// comes before its matching stop. A worker-local message half (to or from
/// the worker itself) is such an event, but is only counted, not written,
/// unless the probe keeps them.
#[derive(Default)]
struct Model {
    index: u32,
    keep_local: bool,
    local: u64,
    pending: Option<u32>,
    elided: u64,
    elided_total: u64,
    pairs: u64,
    published_pairs: u64,
    events: Vec<Event>,
    meta: Vec<Meta>,
}

impl Model {
    fn flush_pending(&mut self) {
        if let Some(op) = self.pending.take() {
            self.events.push(Event::ScheduleStart { op });
        }
    }
    fn event(&mut self, e: Event) {
        self.flush_pending();
        self.events.push(e);
    }
    fn message(&mut self, other: usize, e: Event) {
        if other as u32 == self.index && !self.keep_local {
            self.flush_pending();
            self.local += 1;
        } else {
            self.event(e);
        }
    }
    fn apply(&mut self, c: &Call) {
        match *c {
            Call::Start(op) => {
                self.flush_pending();
                self.pending = Some(op as u32);
            }
            Call::Stop(op) => {
                if self.pending == Some(op as u32) {
                    self.pending = None;
                    self.elided += 1;
                    self.pairs += 1;
                } else {
                    if self.pending.is_some() {
                        // The held start was closed by a stop of another
                        // operator: both are published as they came.
                    } else if matches!(self.events.last(), Some(Event::ScheduleStart { op: o }) if *o == op as u32) {
                        self.published_pairs += 1;
                    }
                    self.event(Event::ScheduleStop { op: op as u32 });
                }
            }
            Call::Send(ch, to, seq, n) => {
                self.message(to, Event::MessageSend { channel: ch as u32, to: to as u32, seq, records: n as u32 })
            }
            Call::Recv(ch, from, seq, n) => {
                self.message(from, Event::MessageRecv { channel: ch as u32, from: from as u32, seq, records: n as u32 })
            }
            Call::PSend(ch, seq) => self.event(Event::ProgressSend { channel: ch as u32, seq }),
            Call::PRecv(ch, from, seq) => {
                self.event(Event::ProgressRecv { channel: ch as u32, from: from as u32, seq })
            }
            Call::SpanStart(id) => self.event(Event::SpanStart { id }),
            Call::SpanStop(id) => self.event(Event::SpanStop { id }),
            Call::Mark(id) => self.event(Event::Mark { id }),
            Call::Step => self.step(),
            Call::Operator(id, ref name) => {
                self.meta.push(Meta::Operator { id: id as u32, name: name.clone(), addr: vec![0, id as u32] })
            }
            Call::Channel(id, a, b) => {
                self.meta.push(Meta::Channel { id: id as u32, src: (a as u32, 0), dst: (b as u32, 1) })
            }
        }
    }
    fn step(&mut self) {
        let elided = self.elided;
        self.event(Event::Step { elided, spin_ticks: 0 });
        self.elided_total += elided;
        self.elided = 0;
    }
    fn drop_worker(&mut self) {
        if self.pending.is_some() || self.elided > 0 {
            self.step();
        }
    }
}

fn drive(w: &mut WorkerProbe, c: &Call) {
    match *c {
        Call::Start(op) => w.schedule_start(op),
        Call::Stop(op) => w.schedule_stop(op),
        Call::Send(ch, to, seq, n) => w.message_send(ch, to, seq, n),
        Call::Recv(ch, from, seq, n) => w.message_recv(ch, from, seq, n),
        Call::PSend(ch, seq) => w.progress_send(ch, seq),
        Call::PRecv(ch, from, seq) => w.progress_recv(ch, from, seq),
        Call::SpanStart(id) => w.span_start(id),
        Call::SpanStop(id) => w.span_stop(id),
        Call::Mark(id) => w.mark(id),
        Call::Step => w.step(),
        Call::Operator(id, ref name) => w.operator(id, name, &[0, id]),
        Call::Channel(id, a, b) => w.channel(id, (a, 0), (b, 1)),
    }
}

/// Spin time is a measurement, not something the model can predict.
fn without_spin(e: Event) -> Event {
    match e {
        Event::Step { elided, .. } => Event::Step { elided, spin_ticks: 0 },
        e => e,
    }
}

fn check(
    sink: Sink,
    path_to_read: Option<std::path::PathBuf>,
    compression: Option<Compression>,
    keep_local: bool,
    workers: &[Vec<Call>],
) -> Result<(), TestCaseError> {
    // Default: uncompressed into a Unix socket (a local sidecar), zstd into
    // files and TCP.
    let expect_zstd = compression.map_or(!matches!(sink, Sink::Unix(_)), |c| c == Compression::Zstd);
    let listener = match &sink {
        Sink::Unix(p) => Some(std::os::unix::net::UnixListener::bind(p).unwrap()),
        _ => None,
    };
    let reader = listener.map(|l| {
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut s, &mut buf).unwrap();
            buf
        })
    });
    // The model leaves durations out: every pair here counts as short (a
    // worker thread preempted between a start and its stop, or blocked on a
    // full ring, would otherwise make one long). `tests/elision.rs` covers
    // the threshold.
    let mut builder = Probe::builder()
        .sink(sink)
        .on_full(OnFull::Block)
        .ring_capacity(64)
        .keep_local_messages(keep_local)
        .elide_below(std::time::Duration::from_secs(1));
    if let Some(c) = compression {
        builder = builder.compression(c);
    }
    let probe = builder.start().unwrap();
    let mut models = Vec::new();
    std::thread::scope(|sc| {
        let mut hs = Vec::new();
        for (i, calls) in workers.iter().enumerate() {
            let mut w = probe.worker(i);
            hs.push(sc.spawn(move || {
                let mut m = Model { index: i as u32, keep_local, ..Model::default() };
                for c in calls {
                    drive(&mut w, c);
                    m.apply(c);
                }
                m.drop_worker();
                m
            }));
        }
        for h in hs {
            models.push(h.join().unwrap());
        }
    });
    let stats = probe.shutdown().unwrap();
    let bytes = match (reader, path_to_read) {
        (Some(r), _) => r.join().unwrap(),
        (None, Some(p)) => std::fs::read(p).unwrap(),
        _ => unreachable!(),
    };
    prop_assert_eq!(stats.compression, if expect_zstd { "zstd" } else { "none" });
    for f in ringlog::Decoder::new(&bytes[..]) {
        let f = f.unwrap();
        if f.header.kind == ringlog::FrameKind::Records {
            prop_assert_eq!(f.header.compressed, expect_zstd, "Records frame #{} compression flag", f.header.seq);
        }
    }
    let trace = read_trace(&bytes);
    prop_assert!(trace.error.is_none(), "decode error {:?}", trace.error);
    prop_assert!(trace.process_end);
    prop_assert!(trace.hello.is_some());
    prop_assert!(trace.clock_samples >= 1);
    for (i, m) in models.iter().enumerate() {
        let s = &trace.workers[&(i as u32)];
        let got: Vec<Event> = s.records.iter().map(|r| without_spin(r.event().unwrap())).collect();
        prop_assert_eq!(&got, &m.events, "worker {} events", i);
        prop_assert_eq!(&s.meta, &m.meta);
        prop_assert!(s.records.windows(2).all(|w| w[0].ts <= w[1].ts), "timestamps go backwards");
        prop_assert_eq!(s.seq_gaps, 0);
        prop_assert_eq!(s.lost_in_headers, 0);
        let end = s.end.expect("stream ended cleanly");
        prop_assert_eq!(end.elided, m.elided_total);
        prop_assert_eq!(end.produced, m.events.len() as u64);
        prop_assert_eq!(end.lost, 0);
        let ws = &stats.workers[i];
        prop_assert_eq!(ws.elided, m.elided_total);
        prop_assert_eq!(ws.produced, m.events.len() as u64);
        prop_assert_eq!(ws.written, m.events.len() as u64);
        prop_assert_eq!(ws.local_messages, m.local);
        // Exact elision: every schedule call the engine made is either
        // published or half of an elided pair.
        let count = |f: &dyn Fn(&Event) -> bool| got.iter().filter(|e| f(e)).count() as u64;
        let starts = count(&|e| matches!(e, Event::ScheduleStart { .. }));
        let stops = count(&|e| matches!(e, Event::ScheduleStop { .. }));
        let calls_start = workers[i].iter().filter(|c| matches!(c, Call::Start(_))).count() as u64;
        let calls_stop = workers[i].iter().filter(|c| matches!(c, Call::Stop(_))).count() as u64;
        prop_assert_eq!(starts + m.elided_total, calls_start);
        prop_assert_eq!(stops + m.elided_total, calls_stop);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn file_round_trip(workers in prop::collection::vec(prop::collection::vec(call(), 0..400), 1..4)) {
        let p = tmp_path(&format!("rt-{}.ringlog", rand_id()));
        check(Sink::file(&p), Some(p.clone()), None, false, &workers)?;
        std::fs::remove_file(p).ok();
    }

    #[test]
    fn unix_socket_round_trip(workers in prop::collection::vec(prop::collection::vec(call(), 0..400), 1..4)) {
        let p = tmp_path(&format!("rt-{}.sock", rand_id()));
        check(Sink::unix(&p), None, None, false, &workers)?;
        std::fs::remove_file(p).ok();
    }

    #[test]
    fn compression_chosen_explicitly(
        workers in prop::collection::vec(prop::collection::vec(call(), 0..200), 1..3),
        zstd in any::<bool>(),
        keep_local in any::<bool>(),
    ) {
        // The other way round from each sink's default.
        let (file_c, unix_c) = if zstd { (Compression::Zstd, Compression::Zstd) } else { (Compression::None, Compression::None) };
        let p = tmp_path(&format!("rt-{}.ringlog", rand_id()));
        check(Sink::file(&p), Some(p.clone()), Some(file_c), keep_local, &workers)?;
        std::fs::remove_file(p).ok();
        let p = tmp_path(&format!("rt-{}.sock", rand_id()));
        check(Sink::unix(&p), None, Some(unix_c), keep_local, &workers)?;
        std::fs::remove_file(p).ok();
    }
}

fn rand_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn large_run_through_the_io_uring_and_syscall_paths() {
    for backend in [probe::IoBackend::Auto, probe::IoBackend::Syscall] {
        let p = tmp_path(&format!("big-{backend:?}.ringlog"));
        // Every (3) pair counts as short, so the record count is exact: a
        // thread preempted between a start and its stop would otherwise
        // publish that pair.
        let probe = Probe::builder()
            .sink(Sink::file(&p))
            .io_backend(backend)
            .on_full(OnFull::Block)
            .elide_below(std::time::Duration::from_secs(1))
            .start()
            .unwrap();
        let mut w = probe.worker(0);
        let n = 300_000u64;
        for i in 0..n {
            w.schedule_start(1);
            w.message_send(2, 1, i, 10);
            w.schedule_stop(1);
            w.schedule_start(3);
            w.schedule_stop(3);
        }
        drop(w);
        let stats = probe.shutdown().unwrap();
        if backend == probe::IoBackend::Syscall {
            assert_eq!(stats.io_backend, "write(2)");
        } else {
            eprintln!("auto backend chose {}", stats.io_backend);
        }
        let t = read_trace(&std::fs::read(&p).unwrap());
        assert!(t.error.is_none(), "{:?}", t.error);
        let s = &t.workers[&0];
        assert_eq!(s.records.len() as u64, 3 * n + 1);
        let seqs: Vec<u64> = s
            .records
            .iter()
            .filter_map(|r| match r.event() {
                Some(Event::MessageSend { seq, .. }) => Some(seq),
                _ => None,
            })
            .collect();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>());
        assert_eq!(stats.workers[0].elided, n);
        assert_eq!(stats.bytes, std::fs::metadata(&p).unwrap().len());
        std::fs::remove_file(p).ok();
    }
}

#[test]
fn explicit_timestamps_are_kept_and_elided_alike() {
    let p = tmp_path("at.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).start().unwrap();
    let mut w = probe.worker(0);
    let t0 = w.clock_now();
    assert!(t0 > 0);
    w.schedule_start_at(t0 + 10, 1);
    w.schedule_stop_at(t0 + 20, 1); // elided
    w.event_at(t0 + 30, Event::ScheduleStart { op: 2 });
    w.event_at(t0 + 40, Event::MessageSend { channel: 5, to: 1, seq: 9, records: 3 });
    w.event_at(t0 + 50, Event::ScheduleStop { op: 2 });
    w.event_at(t0 + 60, Event::Step { elided: 999, spin_ticks: 999 });
    drop(w);
    probe.shutdown().unwrap();
    let t = read_trace(&std::fs::read(&p).unwrap());
    let got: Vec<(u64, Event)> = t.workers[&0].records.iter().map(|r| (r.ts - t0, r.event().unwrap())).collect();
    assert_eq!(
        got,
        vec![
            (30, Event::ScheduleStart { op: 2 }),
            (40, Event::MessageSend { channel: 5, to: 1, seq: 9, records: 3 }),
            (50, Event::ScheduleStop { op: 2 }),
            // The probe's own count: one pair elided, its spin time running
            // from its start (10) to the next timestamp (30).
            (60, Event::Step { elided: 1, spin_ticks: 20 }),
        ]
    );
}

#[test]
fn writer_can_be_pinned_and_sleeps_when_idle() {
    let p = tmp_path("pinned.ringlog");
    let probe = Probe::builder().sink(Sink::file(&p)).writer_core(0).start().unwrap();
    let w = probe.worker(0);
    // Idle: the writer parks between passes instead of spinning.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let idle = probe.stats();
    drop(w);
    let stats = probe.shutdown().unwrap();
    assert!(stats.pinned, "pinning to core 0 failed");
    // A spinning writer would burn ~300 ms of CPU here; a parked one
    // (2 ms naps, 20 ms calibration sleep) uses a few.
    assert!(idle.writer_cpu_ns < 60_000_000, "writer used {} ns of CPU while idle", idle.writer_cpu_ns);
}

#[test]
fn metadata_precedes_the_records_written_after_it() {
    let p = tmp_path("meta-order.ringlog");
    let probe =
        Probe::builder().sink(Sink::file(&p)).idle_interval(std::time::Duration::from_micros(50)).start().unwrap();
    let mut w = probe.worker(0);
    for op in 0..20_000usize {
        w.operator(op, "Op", &[0, op]);
        w.schedule_start(op);
        w.mark(op as u64);
        w.schedule_stop(op);
    }
    drop(w);
    probe.shutdown().unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let mut known = std::collections::HashSet::new();
    let mut checked = 0;
    for f in ringlog::Decoder::new(&bytes[..]) {
        match f.unwrap().body {
            ringlog::Body::Metadata(m) => {
                for e in m {
                    if let Meta::Operator { id, .. } = e {
                        known.insert(id);
                    }
                }
            }
            ringlog::Body::Records(rs) => {
                for r in rs {
                    if let Some(Event::ScheduleStart { op }) = r.event() {
                        assert!(known.contains(&op), "operator {op} used before it was described");
                        checked += 1;
                    }
                }
            }
            _ => {}
        }
    }
    assert_eq!(checked, 20_000);
}
