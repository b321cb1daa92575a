//! The timely adapter on a real 3-worker computation: what timely logged
//! (counted by a second consumer of the same log) against what the trace
//! says, and the trace's timestamps against clock reads taken inside an
//! operator.
#![cfg(feature = "timely")]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{read_trace, tmp_path};
use probe::timely::{Adapter, AdapterStats, TimelyMark};
use probe::{OnFull, Probe, Sink};
use ringlog::{Body, ClockDomain, Decoder, Event, Meta, Record};
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Exchange, Inspect, Probe as _};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::logging::{StartStop, TimelyEvent, TimelyEventBuilder};

const WORKERS: usize = 3;
const ROUNDS: u64 = 6;
const PER_ROUND: u64 = 2_000;
/// How long the clocked operator spins in each execution that has input.
const BUSY: Duration = Duration::from_micros(500);

/// What the second consumer of the `"timely"` log counted, per worker.
#[derive(Default, Debug)]
struct Logged {
    starts: u64,
    stops: u64,
    operators: Vec<(usize, String)>,
    channels: usize,
    /// Data message halves between two workers.
    sends: u64,
    recvs: u64,
    /// Worker-local data message halves (the probe counts, not writes, them).
    local: u64,
}

/// One execution of the clocked operator: the probe clock (TSC) and
/// CLOCK_MONOTONIC read at its beginning and end.
#[derive(Clone, Copy, Debug)]
struct Reads {
    tsc: (u64, u64),
    mono: (u64, u64),
}

struct Run {
    trace: common::Trace,
    domain: ClockDomain,
    logged: BTreeMap<usize, Logged>,
    reads: BTreeMap<usize, Vec<Reads>>,
    adapters: BTreeMap<usize, AdapterStats>,
    /// The probe's worker-local message halves, per worker.
    local: Vec<u64>,
    stats: probe::Stats,
    /// Wall time of `timely::execute`, all workers' closures.
    wall: Duration,
    sum: u64,
}

fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The tests of this file run one at a time: one of them sets PROBE_CLOCK.
static SERIAL: Mutex<()> = Mutex::new(());

fn run(name: &str, monotonic: bool, keep_local: bool) -> Run {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let path = tmp_path(name);
    if monotonic {
        std::env::set_var("PROBE_CLOCK", "monotonic");
    }
    let started = Probe::builder()
        .sink(Sink::file(&path))
        .on_full(OnFull::Block)
        .workers(WORKERS)
        .ring_capacity(1 << 12)
        .keep_local_messages(keep_local)
        .start();
    if monotonic {
        std::env::remove_var("PROBE_CLOCK");
    }
    let probe = Arc::new(started.unwrap());
    let logged: Arc<Mutex<BTreeMap<usize, Logged>>> = Arc::default();
    let reads: Arc<Mutex<BTreeMap<usize, Vec<Reads>>>> = Arc::default();
    let adapters: Arc<Mutex<BTreeMap<usize, AdapterStats>>> = Arc::default();
    let total: Arc<Mutex<u64>> = Arc::default();
    let (p, l, r, a, t) = (probe.clone(), logged.clone(), reads.clone(), adapters.clone(), total.clone());
    let started = Instant::now();
    timely::execute(timely::Config::process(WORKERS), move |worker| {
        let index = worker.index();
        // What `attach` does, with the "timely" log shared with a counter
        // that sees timely's events before the adapter does.
        let adapter = Adapter::new(worker, &p).expect("enabled probe");
        let l2 = l.clone();
        adapter.register_with(worker, move |_, data: &mut Option<Vec<(Duration, TimelyEvent)>>| {
            if let Some(batch) = data {
                let mut l = l2.lock().unwrap();
                let me = l.entry(index).or_default();
                for (_, ev) in batch.iter() {
                    match ev {
                        TimelyEvent::Schedule(s) if s.start_stop == StartStop::Start => me.starts += 1,
                        TimelyEvent::Schedule(_) => me.stops += 1,
                        TimelyEvent::Operates(o) => me.operators.push((o.id, o.name.clone())),
                        TimelyEvent::Channels(_) => me.channels += 1,
                        TimelyEvent::Messages(m) if m.source == m.target => me.local += 1,
                        TimelyEvent::Messages(m) if m.is_send => me.sends += 1,
                        TimelyEvent::Messages(_) => me.recvs += 1,
                        _ => {}
                    }
                }
            }
        });

        let mut input = InputHandle::new();
        let probe_handle = ProbeHandle::new();
        let r2 = r.clone();
        let t2 = t.clone();
        worker.dataflow_named::<u64, _, _>("probe-test", |scope| {
            input
                .to_stream(scope)
                .exchange(|x: &u64| *x)
                .unary(Pipeline, "Clocked", move |_cap, _info| {
                    move |input, output| {
                        let mut any = false;
                        input.for_each(|cap, data| {
                            if !any {
                                any = true;
                            }
                            output.session(&cap).give_container(data);
                        });
                        if any {
                            let (tsc0, mono0) = (probe::rdtsc(), monotonic_ns());
                            let start = Instant::now();
                            while start.elapsed() < BUSY {
                                std::hint::spin_loop();
                            }
                            let (tsc1, mono1) = (probe::rdtsc(), monotonic_ns());
                            r2.lock()
                                .unwrap()
                                .entry(index)
                                .or_default()
                                .push(Reads { tsc: (tsc0, tsc1), mono: (mono0, mono1) });
                        }
                    }
                })
                .container::<Vec<u64>>()
                .exchange(|x: &u64| x / 7)
                .inspect(move |x| *t2.lock().unwrap() += *x)
                .probe_with(&probe_handle);
        });
        for round in 0..ROUNDS {
            for i in 0..PER_ROUND {
                let x = round * PER_ROUND + i;
                if x as usize % WORKERS == index {
                    input.send(x);
                }
            }
            input.advance_to(round + 1);
            while probe_handle.less_than(input.time()) {
                worker.step();
            }
        }
        a.lock().unwrap().insert(index, adapter.stats());
    })
    .unwrap()
    .join()
    .into_iter()
    .for_each(|r| r.unwrap());
    let wall = started.elapsed();
    let stats = Arc::try_unwrap(probe).ok().expect("workers are gone").shutdown().unwrap();
    assert_eq!(stats.lost(), 0, "{stats:?}");

    let bytes = std::fs::read(&path).unwrap();
    let domain = Decoder::new(&bytes[..])
        .find_map(|f| match f.unwrap() {
            f if matches!(f.body, Body::Records(_)) => Some(f.header.domain),
            _ => None,
        })
        .expect("records");
    let trace = read_trace(&bytes);
    assert!(trace.error.is_none(), "{:?}", trace.error);
    let _ = std::fs::remove_file(&path);
    let sum = *total.lock().unwrap();
    let out = Run {
        trace,
        domain,
        logged: std::mem::take(&mut logged.lock().unwrap()),
        reads: std::mem::take(&mut reads.lock().unwrap()),
        adapters: std::mem::take(&mut adapters.lock().unwrap()),
        local: stats.workers.iter().map(|w| w.local_messages).collect(),
        stats,
        wall,
        sum,
    };
    out
}

fn events(rs: &[Record]) -> impl Iterator<Item = (u64, Event)> + '_ {
    rs.iter().map(|r| (r.ts, r.event().expect("known kind")))
}

fn op_ids(meta: &[Meta]) -> HashMap<u32, (String, Vec<u32>)> {
    meta.iter()
        .filter_map(|m| match m {
            Meta::Operator { id, name, addr } => Some((*id, (name.clone(), addr.clone()))),
            _ => None,
        })
        .collect()
}

#[test]
fn trace_matches_what_timely_logged() {
    check_trace(false);
}

/// The same with worker-local message halves written.
#[test]
fn trace_with_worker_local_messages_matches_what_timely_logged() {
    check_trace(true);
}

fn check_trace(keep_local: bool) {
    let run = run("timely-attach.ringlog", false, keep_local);
    let n = ROUNDS * PER_ROUND;
    assert_eq!(run.sum, n * (n - 1) / 2, "the computation itself");
    assert_eq!(run.trace.workers.len(), WORKERS);
    // The adapter's measured time lies within the workers' run time.
    let adapter = Duration::from_nanos(run.stats.adapter_ns());
    assert!(adapter > Duration::ZERO && adapter < run.wall * WORKERS as u32, "{adapter:?} of {:?}", run.wall);

    // Data messages, matched across workers on (channel, from, to, seq).
    let mut sends: BTreeMap<(u32, u32, u32, u64), u32> = BTreeMap::new();
    let mut recvs: BTreeMap<(u32, u32, u32, u64), u32> = BTreeMap::new();
    let mut psends = Vec::new();
    let mut precvs: HashMap<(u32, u32, u64), usize> = HashMap::new();

    for (&w, s) in &run.trace.workers {
        let logged = &run.logged[&(w as usize)];
        let ad = &run.adapters[&(w as usize)];
        assert_eq!(ad.unresolved_channels, 0, "worker {w}: {ad:?}");

        // What the adapter cost, as the probe reports it: every event timely
        // handed over (the snapshot `ad` was taken before the worker's last
        // flushes), its own time measured, timely's estimated per event.
        let ws = run.stats.workers.iter().find(|x| x.index == w).expect("worker stats");
        let seen = logged.starts + logged.stops + logged.sends + logged.recvs + logged.local;
        assert!(ws.engine_events >= ad.events && ws.engine_events > seen, "worker {w}: {ws:?} {ad:?} {seen}");
        assert!(ws.adapter_ticks > 0, "worker {w}: {ws:?}");
        assert!(ws.engine_log_ns >= ws.engine_events, "timely's logging costs at least 1 ns an event: {ws:?}");
        // (It also holds the flushes of every registered log at every step,
        // most of them in this test's spinning `step()` loop: not bounded
        // per event, but by the run.)
        // (A calibration slowed on a loaded machine raises the price: the
        // bound leaves room for that.)
        assert!(Duration::from_nanos(ws.engine_log_ns) < run.wall * 2, "worker {w}: {ws:?} in {:?}", run.wall);
        // Every step flushes each registered log once. After the first
        // dataflow is built the adapter keeps KEPT of them: the "timely" log,
        // the `u64` this test's scopes use and the 3 `Product<u64, _>` one
        // nesting level deeper; before, the first step flushes all of them
        // (the "timely" log, each progress log of the common list and its
        // summary log: `first`). The test's loop steps more often than it
        // logs.
        const KEPT: u64 = 5;
        let first = 1 + 2 * probe::timely::common_progress_names().count() as u64;
        assert!(
            ws.engine_flushes >= KEPT * ad.steps.saturating_sub(1) && ws.engine_flush_ns <= ws.engine_log_ns,
            "worker {w}: {ws:?}"
        );
        // The flushes of steps that did nothing are reported apart: the
        // rest are KEPT per step that did work, i.e. per Step record in the
        // stream (the probe may add one at the end; timely steps on after
        // the loop, so this counts the stream's Steps, not `ad`'s), and a
        // few more where timely flushes the "timely" log alone (after
        // building a dataflow, before parking: one each, at drop); the
        // first step after a dataflow is built, and a final Step the probe
        // adds, have fewer.
        let trace_steps = events(&s.records).filter(|(_, e)| matches!(e, Event::Step { .. })).count() as u64;
        let parks = events(&s.records).filter(|(_, e)| matches!(e, Event::Park { .. })).count() as u64;
        assert!(
            ws.engine_idle_flushes <= ws.engine_flushes
                && ws.engine_idle_flush_ns <= ws.engine_flush_ns
                && ws.adapter_idle_ticks <= ws.adapter_ticks,
            "worker {w}: {ws:?}"
        );
        let working = ws.engine_flushes - ws.engine_idle_flushes;
        assert!(
            working >= KEPT * trace_steps.saturating_sub(2) && working <= KEPT * trace_steps + parks + first,
            "worker {w}: {working} flushes in {trace_steps} steps that did work: {ws:?}"
        );

        // Metadata: every operator timely announced, with its name; every
        // channel, with both ends resolved to announced operators.
        let ops = op_ids(&s.meta);
        assert_eq!(ops.len(), logged.operators.len(), "worker {w}");
        for (id, name) in &logged.operators {
            assert_eq!(&ops[&(*id as u32)].0, name, "worker {w} operator {id}");
        }
        let names: Vec<&str> = ops.values().map(|(n, _)| n.as_str()).collect();
        for want in ["probe-test", "Clocked", "Exchange", "Inspect", "Probe"] {
            assert!(names.iter().any(|n| n.contains(want)), "worker {w}: no {want} in {names:?}");
        }
        let channels: Vec<_> = s
            .meta
            .iter()
            .filter_map(|m| match m {
                Meta::Channel { id, src, dst } => Some((*id, *src, *dst)),
                _ => None,
            })
            .collect();
        assert_eq!(channels.len(), logged.channels, "worker {w}");
        let clocked = ops.iter().find(|(_, (n, _))| n == "Clocked").map(|(id, _)| *id).unwrap();
        let into_clocked = channels.iter().filter(|c| c.2 == (clocked, 0)).count();
        let out_of_clocked = channels.iter().filter(|c| c.1 == (clocked, 0)).count();
        assert_eq!((into_clocked, out_of_clocked), (1, 1), "worker {w}: {channels:?}");
        for (id, src, dst) in &channels {
            assert!(ops.contains_key(&src.0) && ops.contains_key(&dst.0), "channel {id}");
            // Both ends live in the same scope (or one end is the scope).
            let (sa, da) = (&ops[&src.0].1, &ops[&dst.0].1);
            assert!(sa.len() == da.len() || sa.len() + 1 == da.len() || da.len() + 1 == sa.len());
        }

        // Timestamps never go back.
        assert!(s.records.windows(2).all(|p| p[0].ts <= p[1].ts), "worker {w}: timestamps decrease");

        // Schedules: published pairs + elided pairs = the pairs timely made.
        let mut starts = 0u64;
        let mut stops = 0u64;
        let mut elided = 0u64;
        let mut steps = 0u64;
        let mut depth = 0i64;
        let mut prev: Option<Event> = None;
        for (_, e) in events(&s.records) {
            match e {
                Event::ScheduleStart { .. } => {
                    starts += 1;
                    depth += 1;
                }
                Event::ScheduleStop { .. } => {
                    stops += 1;
                    depth -= 1;
                    assert!(depth >= 0, "worker {w}: stop without start");
                }
                Event::Step { elided: n, .. } => {
                    elided += n;
                    steps += 1;
                    assert_eq!(depth, 0, "worker {w}: a step inside a schedule");
                }
                Event::MessageSend { channel, to, seq, records } => {
                    assert!(sends.insert((channel, w, to, seq), records).is_none(), "duplicate send");
                }
                Event::MessageRecv { channel, from, seq, records } => {
                    assert!(recvs.insert((channel, from, w, seq), records).is_none(), "duplicate recv");
                }
                Event::ProgressSend { channel, seq } => psends.push((channel, w, seq)),
                Event::ProgressRecv { channel, from, seq } => *precvs.entry((channel, from, seq)).or_default() += 1,
                Event::Mark { id } => match TimelyMark::decode(id) {
                    // Progress pushed to an operator: written just inside its schedule.
                    Some(TimelyMark::PushProgress(op)) => {
                        assert_eq!(prev, Some(Event::ScheduleStart { op }), "worker {w}: push-progress mark")
                    }
                    Some(TimelyMark::Shutdown(op)) => assert!(ops.contains_key(&op)),
                    // (Every scope here is of a type the adapter knows.)
                    Some(TimelyMark::UntracedProgress(op)) => panic!("worker {w}: scope {op} said untraced"),
                    Some(other) => panic!("worker {w}: unexpected mark {other:?}"),
                    None => panic!("worker {w}: unknown mark {id:#x}"),
                },
                _ => {}
            }
            prev = Some(e);
        }
        assert_eq!(starts, stops, "worker {w}");
        assert!(logged.starts > 0 && logged.starts == logged.stops, "worker {w}: {logged:?}");
        assert_eq!(starts + elided, logged.starts, "worker {w}: published {starts} + elided {elided}");
        assert!(elided > 0, "worker {w}: nothing elided in a polling engine?");
        assert_eq!(s.end.expect("end frame").elided, elided, "worker {w}");
        assert!(steps >= ROUNDS, "worker {w}: {steps} steps");
        // The adapter's count was read when the worker closure returned;
        // timely steps on until its dataflows complete.
        assert!(steps >= ad.steps, "worker {w}: {steps} steps, adapter wrote {} by then", ad.steps);
        let (ws, wr) =
            (sends.keys().filter(|k| k.1 == w).count() as u64, recvs.keys().filter(|k| k.2 == w).count() as u64);
        assert!(logged.local > 0, "worker {w}: no worker-local message in an exchange");
        if keep_local {
            assert_eq!(ws + wr, logged.sends + logged.recvs + logged.local, "worker {w}");
            assert_eq!(run.local[w as usize], 0, "worker {w}");
        } else {
            assert_eq!((ws, wr), (logged.sends, logged.recvs), "worker {w}");
            assert_eq!(run.local[w as usize], logged.local, "worker {w}: worker-local halves counted");
        }
    }

    assert!(!sends.is_empty());
    // Unless kept, only messages between workers are written: the
    // worker-local ones are counted above.
    let local_written = sends.keys().chain(recvs.keys()).filter(|k| k.1 == k.2).count();
    assert_eq!(local_written > 0, keep_local, "worker-local halves written: {local_written}");
    assert_eq!(sends, recvs, "every message sent is received, with its record count");
    // Progress: a broadcast, received by every worker (itself included).
    assert!(!psends.is_empty(), "no progress messages");
    for p in &psends {
        assert_eq!(precvs.get(p), Some(&WORKERS), "progress message {p:?}");
    }
    assert_eq!(precvs.values().sum::<usize>(), psends.len() * WORKERS);
}

/// Timely's stamps, mapped onto the probe's clock, bracket clock reads taken
/// inside the operator's execution, within the documented error.
#[test]
fn mapped_times_bracket_independent_clock_reads() {
    check_clock(run("timely-clock.ringlog", false, false), None);
}

/// The same on the CLOCK_MONOTONIC fallback.
#[test]
fn mapped_times_bracket_independent_clock_reads_monotonic() {
    check_clock(run("timely-clock-mono.ringlog", true, false), Some(ClockDomain::MonotonicNs));
}

fn check_clock(run: Run, domain: Option<ClockDomain>) {
    if let Some(d) = domain {
        assert_eq!(run.domain, d);
    }
    let tps = run.trace.hello.as_ref().unwrap().ticks_per_sec.max(1);
    let mut worst_start = i64::MIN;
    let mut worst_stop = i64::MIN;
    let mut closest = i64::MAX;
    let mut checked = 0;
    for (&w, s) in &run.trace.workers {
        let ops = op_ids(&s.meta);
        let clocked = ops.iter().find(|(_, (n, _))| n == "Clocked").map(|(id, _)| *id).unwrap();
        let mut pairs = Vec::new();
        let mut open = None;
        for (ts, e) in events(&s.records) {
            match e {
                Event::ScheduleStart { op } if op == clocked => open = Some(ts),
                Event::ScheduleStop { op } if op == clocked => pairs.push((open.take().unwrap(), ts)),
                _ => {}
            }
        }
        let ad = run.adapters[&(w as usize)];
        // The documented bound: the larger pair error, plus slope
        // nonlinearity (≤ 500 ppm of the event's age, under a step here).
        // Allow 5 µs on top (rounding, and the clamp's worst case).
        let slack = (ad.max_pair_error_ticks + 5_000 * tps / 1_000_000_000) as i64;
        for r in &run.reads[&(w as usize)] {
            let (r0, r1) = match run.domain {
                ClockDomain::Tsc => r.tsc,
                ClockDomain::MonotonicNs => r.mono,
            };
            // The execution that contains the reads.
            let &(start, stop) = pairs
                .iter()
                .find(|&&(a, b)| a as i64 <= r0 as i64 + slack && b as i64 >= r1 as i64 - slack)
                .unwrap_or_else(|| {
                    panic!("worker {w}: no published schedule of Clocked brackets {r:?} (slack {slack})")
                });
            // Nor may it start or stop much before / after the reads: the
            // operator does nothing but the spin, so timely's stamps are
            // within a few µs of the reads. Generous: 10 ms, because on a
            // loaded 2-core host the worker can be descheduled between its
            // read and timely's stamp (2.5 ms seen with a build running);
            // a mapping error (slope, offset) would be far larger.
            let margin = (10_000_000 * tps / 1_000_000_000) as i64;
            assert!((r0 as i64 - start as i64) < margin, "worker {w}: start {start} long before read {r0}");
            assert!((stop as i64 - r1 as i64) < margin, "worker {w}: stop {stop} long after read {r1}");
            worst_start = worst_start.max(start as i64 - r0 as i64);
            worst_stop = worst_stop.max(r1 as i64 - stop as i64);
            closest = closest.min((r0 as i64 - start as i64).min(stop as i64 - r1 as i64));
            checked += 1;
        }
        eprintln!("worker {w}: {ad:?}");
    }
    assert!(checked >= ROUNDS as usize, "only {checked} executions checked");
    let ns = |t: i64| t as f64 * 1e9 / tps as f64;
    eprintln!(
        "{checked} executions; worst start after read {:.0} ns, worst stop before read {:.0} ns, \
         closest schedule stamp to a read {:.0} ns ({:?} domain)",
        ns(worst_start),
        ns(worst_stop),
        ns(closest),
        run.domain
    );
}

/// With the probe off, `attach` registers nothing: timely builds no log events.
#[test]
fn disabled_probe_registers_nothing() {
    let probe = Arc::new(Probe::disabled());
    timely::execute(timely::Config::process(2), move |worker| {
        probe::timely::attach(worker, &probe);
        let reg = worker.log_register().unwrap();
        assert!(reg.get::<TimelyEventBuilder>("timely").is_none());
        assert_eq!(reg.names().count(), 0);
    })
    .unwrap();
}

/// A worker that parks (`step_or_park` with nothing to do) has its records
/// up to the park, the Park itself included, in the ring while it sleeps: a
/// live reader must not wait for the worker to wake up to see them (a
/// parked stream's earlier records would reach a live sidecar after it has
/// closed their windows).
#[test]
fn records_before_a_park_are_published_while_parked() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let path = tmp_path("timely-park.ringlog");
    let probe = Arc::new(
        Probe::builder()
            .sink(Sink::file(&path))
            .on_full(OnFull::Block)
            .workers(1)
            .idle_interval(Duration::from_millis(5))
            .start()
            .unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let tx = Mutex::new(tx);
    let p = probe.clone();
    let guards = timely::execute(timely::Config::process(1), move |worker| {
        probe::timely::attach(worker, &p);
        let mut input = InputHandle::new();
        let ph = ProbeHandle::new();
        worker.dataflow::<u64, _, _>(|scope| {
            input.to_stream(scope).container::<Vec<u64>>().inspect(|_| {}).probe_with(&ph);
        });
        for r in 0..3u64 {
            input.send(r);
            input.advance_to(r + 1);
            while ph.less_than(input.time()) {
                worker.step();
            }
        }
        tx.lock().unwrap().send(()).unwrap();
        // Nothing left to do: the worker parks (after a few steps that
        // finish up) until 800 ms have passed.
        let t0 = Instant::now();
        while let Some(left) = Duration::from_millis(800).checked_sub(t0.elapsed()) {
            worker.step_or_park(Some(left));
        }
    })
    .unwrap();
    rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let during = probe.stats().workers[0].written;
    guards.join().into_iter().for_each(|r| r.unwrap());
    Arc::try_unwrap(probe).ok().expect("workers are gone").shutdown().unwrap();
    let trace = read_trace(&std::fs::read(&path).unwrap());
    let _ = std::fs::remove_file(&path);
    let recs = &trace.workers[&0].records;
    let park = recs.iter().position(|r| matches!(r.event(), Some(Event::Park { .. }))).expect("the worker parked");
    assert!(
        during > park as u64,
        "while parked only {during} records were written; the Park is record {park} of {}",
        recs.len()
    );
}
