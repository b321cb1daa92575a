//! Acceptance on the real timely workloads of the `examples` crate (issue
//! "Acceptance"): `skew` with 4 workers names worker 0's `Consume` as the
//! critical path and workers 1–3 as waiting on worker 0; `bfs` and
//! `pagerank` pass the trace-property checks in every window; `sidecar
//! watch` runs a workload live, reports what tracing cost and exits with
//! its status; the Perfetto trace decodes with Perfetto's own generated
//! bindings (`perfetto_protos`) and holds what the issue asks for.
//!
//! The example binaries are built once per test run (`cargo build -p
//! examples --bins`, same profile and target directory as this test).

mod common;
use common::example;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use protobuf::Message as _;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

/// Held by the tests that judge which worker of a traced program is hot:
/// two such programs at once on two cores (the test threads) share the
/// cores unevenly, and a worker starved by the other program's threads
/// shows as hot or waited on (a differential run failed that way, 1 in
/// about 15 runs of the whole suite). The others still run beside them.
fn judged_alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn show(o: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Runs an example into a probe file, then `sidecar analyze` on it.
fn traced(name: &str, args: &[&str], window: &str) -> Vec<Value> {
    let trace = tmp(&format!("{name}.rlog"));
    let json = tmp(&format!("{name}.jsonl"));
    let _ = std::fs::remove_file(&trace);
    let _ = std::fs::remove_file(&json);
    let o =
        Command::new(example(name)).args(args).env("PROBE_SINK", format!("file:{}", trace.display())).output().unwrap();
    assert!(o.status.success(), "{name} failed: {}", show(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("lost=0 "), "{name} lost records: {stderr}");
    let o = Command::new(BIN)
        .args(["analyze", trace.to_str().unwrap(), "--window", window, "-q", "--json", json.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "sidecar analyze failed: {}", show(&o));
    lines(&json)
}

fn lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Sized so that worker 0's Consume dominates the windows in either
/// profile (about a second).
const SKEW: &[&str] = if cfg!(debug_assertions) {
    &["-w", "4", "--epochs", "4", "--records", "10000", "--work", "256"]
} else {
    &["-w", "4", "--epochs", "4", "--records", "10000", "--work", "1024"]
};

#[test]
fn skew_names_worker_0_and_everyone_waits_on_it() {
    let _alone = judged_alone();
    let ws = traced("skew", SKEW, "25ms");
    // The windows where all four workers run, minus the first and last
    // (start-up, shutdown).
    let full: Vec<&Value> = ws.iter().filter(|w| w["streams"].as_array().unwrap().len() == 4).collect();
    assert!(full.len() >= 3, "too few windows: {}", ws.len());
    let inner = &full[1..full.len() - 1];
    // Per window: epoch boundaries (a progress round in which the idle
    // workers also wait on each other, and worker 0's `Dataflow` scope runs
    // the hand-over) can tip a window; the rest name worker 0's Consume.
    let mut named = 0;
    let mut total: BTreeMap<u64, BTreeMap<Option<u64>, u64>> = BTreeMap::new();
    for w in inner {
        assert_eq!(w["complete"], true, "{w}");
        let top = &w["critical_path"]["top_operators"][0];
        named += (top["worker"] == 0 && top["name"] == "Consume") as usize;
        for x in w["waiting"].as_array().unwrap() {
            for o in x["on"].as_array().unwrap() {
                *total.entry(x["worker"].as_u64().unwrap()).or_default().entry(o["worker"].as_u64()).or_default() +=
                    o["ns"].as_u64().unwrap() + o["carried_ns"].as_u64().unwrap_or(0);
            }
        }
    }
    let n = inner.len();
    assert!(named * 10 >= n * 8, "w0 Consume tops the critical path in {named} of {n} windows");
    // Per window, most waits of workers 1-3 are open (they outlive the
    // 25 ms windows) and are counted where they end, carried. Where a
    // worker's wait outlived a whole window, its largest cause is worker 0.
    // The last message read after such a wait is often a peer's progress
    // echo (the peer was itself waiting on worker 0), so this holds only
    // because a wait on a waiting peer is charged to the peer's own cause;
    // "two thirds": a chain is followed inside one window, and the
    // peer's wait may have ended in the window before.
    let (mut on_w0, mut reported) = (0, 0);
    for w in inner {
        for x in w["waiting"].as_array().unwrap().iter().filter(|x| x["worker"] != 0) {
            let on = x["on"].as_array().unwrap();
            let ns = |o: &Value| o["ns"].as_u64().unwrap() + o["carried_ns"].as_u64().unwrap_or(0);
            if x.get("carried").is_some_and(|c| c["ns"].as_u64().unwrap() >= 25_000_000) {
                reported += 1;
                on_w0 += (on.iter().max_by_key(|o| ns(o)).unwrap()["worker"] == 0) as usize;
            }
        }
    }
    assert!(reported >= 3 && on_w0 * 3 >= reported * 2, "w0 is the largest cause in {on_w0} of {reported}");
    // Over the run, worker 0 is every other worker's largest cause and holds
    // most of its waiting (~95 % on a quiet machine; 71 % was seen beside
    // four compilers, where more long waits end just after a window's
    // start and their peer's wait ended in the window before; the rest: the
    // peers' own progress work before they sent, and epoch boundaries).
    for k in 1..4u64 {
        let all: u64 = total[&k].values().sum();
        let w0 = total[&k].get(&Some(0)).copied().unwrap_or(0);
        let most = total[&k].iter().max_by_key(|(_, ns)| **ns).map(|(on, _)| *on);
        assert!(most == Some(Some(0)) && w0 * 10 >= all * 6, "worker {k} waited on: {:?}", total[&k]);
    }
    // Over the run: Consume on worker 0 is nearly all of the critical path.
    let (mut consume, mut len) = (0u64, 0u64);
    for w in &full {
        len += w["critical_path"]["length_ns"].as_u64().unwrap();
        for o in w["critical_path"]["top_operators"].as_array().unwrap() {
            if o["worker"] == 0 && o["name"] == "Consume" {
                consume += o["ns"].as_u64().unwrap();
            }
        }
    }
    assert!(consume as f64 > 0.8 * len as f64, "Consume {consume} of {len} ns");
}

/// Every window passes Sager's three property checks (stream starts are
/// reported apart, see `Properties::stream_starts`).
fn assert_properties(name: &str, ws: &[Value]) {
    assert!(ws.len() >= 3, "{name}: too few windows ({})", ws.len());
    // Windows before the last worker's stream began (a thread starting after
    // them) lack that worker: incomplete for that reason only.
    let all = ws.iter().map(|w| w["streams"].as_array().unwrap().len()).max().unwrap();
    let all_started = ws.iter().position(|w| w["streams"].as_array().unwrap().len() == all).unwrap();
    for (i, w) in ws.iter().enumerate() {
        if i < all_started && w["complete"] == false {
            let why = w["incomplete_reasons"].as_array().unwrap();
            assert!(why.iter().all(|x| x.as_str().unwrap().contains("no stream in this window")), "{name}: {w}");
        } else {
            assert_eq!(w["complete"], true, "{name}: {w}");
        }
        let p = &w["properties"];
        for k in ["min_in_degree", "communication_existence", "wait_termination"] {
            assert_eq!(p[k]["ok"], true, "{name} window {}: {k}: {}", w["window"], p[k]);
        }
        assert_eq!(w["critical_path"]["stuck"], Value::Null, "{name}: {w}");
    }
}

#[test]
fn bfs_passes_the_property_checks() {
    let ws = traced("bfs", &["-w", "2", "--nodes", "200000", "--edges", "1000000"], "20ms");
    assert_properties("bfs", &ws);
}

#[test]
fn pagerank_passes_the_property_checks() {
    let ws = traced("pagerank", &["-w", "2", "--nodes", "20000", "--edges", "200000", "--iters", "30"], "10ms");
    assert_properties("pagerank", &ws);
}

#[test]
fn watch_runs_a_workload_live_and_reports_its_cost() {
    let summary = tmp("watch-summary.json");
    let pf = tmp("watch.pftrace");
    let json = tmp("watch.jsonl");
    let _ = std::fs::remove_file(&json);
    let skew = example("skew");
    let mut args = vec!["watch", "--window", "20ms", "--grace", "2s", "--summary-json", summary.to_str().unwrap()];
    args.extend(["--perfetto", pf.to_str().unwrap(), "--json", json.to_str().unwrap(), "--", skew.to_str().unwrap()]);
    args.extend(SKEW);
    let o = Command::new(BIN).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    // the workload's own result line passes through, the windows and the summary follow
    assert!(out.contains("skew: epochs=4"), "{out}");
    assert!(out.contains("sidecar watch: `"), "{out}");
    assert!(out.contains("tracing cost:") && out.contains("writer thread CPU"), "{out}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["exit_status"], 0);
    assert_eq!(s["workers"], 4);
    assert_eq!(s["top_operators"][0][0], 0, "{s}");
    assert_eq!(s["top_operators"][0][1], "Consume", "{s}");
    let c = &s["cost"];
    assert!(c["records"].as_u64().unwrap() > 100, "{s}");
    assert_eq!(c["records_lost"], 0);
    assert!(c["bytes"].as_u64().unwrap() > 0);
    assert!(c["est_probe_ms"].as_f64().unwrap() > 0.0);
    let share = c["est_probe_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 0.05, "{s}");
    assert!(c["writer_cpu_ms"].as_f64().is_some(), "the probe line was read: {s}");
    // The timely adapter's cost: every event timely logged for it, its own
    // time, and timely's; the worker threads' share holds them all.
    assert!(c["engine_events"].as_u64().unwrap() > c["records"].as_u64().unwrap(), "{s}");
    let (adapter, engine) = (c["adapter_ms"].as_f64().unwrap(), c["engine_log_ms"].as_f64().unwrap());
    assert!(adapter > 0.0 && engine > 0.0, "{s}");
    // Workers 1–3 have nothing to do and poll: the flushes of their idle
    // steps are reported apart from the steps that did work.
    let idle = c["idle_steps_ms"].as_f64().unwrap();
    assert!(c["idle_flushes"].as_u64().unwrap() > 0 && idle > 0.0, "{s}");
    assert!(out.contains("flush calls of steps that did nothing"), "{out}");
    let in_workers = c["worker_threads_ms"].as_f64().unwrap();
    assert!(in_workers > 0.0 && (in_workers + idle - adapter - engine).abs() < 1e-6, "{s}");
    let wshare = c["worker_threads_share"].as_f64().unwrap();
    assert!(wshare > 0.0 && wshare < 0.5, "{s}");
    // The probe's own count and what the sidecar read agree.
    let read: u64 = lines(&json).iter().map(|w| w["instrumentation"]["records"].as_u64().unwrap()).sum();
    assert_eq!(Some(read), s["probe_line"]["written"].as_u64(), "{s}");
    // Workers 1–3 waited on worker 0 most.
    let mut on0: BTreeSet<u64> = BTreeSet::new();
    let mut best: HashMap<u64, (f64, Option<u64>)> = HashMap::new();
    for w in s["waits"].as_array().unwrap() {
        let (k, on, ms) = (w[0].as_u64().unwrap(), w[1].as_u64(), w[2].as_f64().unwrap());
        let e = best.entry(k).or_insert((0.0, None));
        if ms > e.0 {
            *e = (ms, on);
        }
    }
    for (k, (_, on)) in best {
        if on == Some(0) {
            on0.insert(k);
        }
    }
    assert_eq!(on0, BTreeSet::from([1, 2, 3]), "{s}");
    check_perfetto(&pf);
}

#[test]
fn watch_exits_with_the_commands_status() {
    let o = Command::new(BIN).args(["watch", "-q", "--", "sh", "-c", "echo hi; exit 3"]).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("hi"));
    let o = Command::new(BIN).args(["watch", "-q", "--", "/nonexistent/program"]).output().unwrap();
    assert_eq!(o.status.code(), Some(127), "{}", show(&o));
}

#[test]
fn export_writes_the_same_trace_from_a_file() {
    let trace = tmp("skew-export.rlog");
    let _ = std::fs::remove_file(&trace);
    let o = Command::new(example("skew"))
        .args(SKEW)
        .env("PROBE_SINK", format!("file:{}", trace.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let pf = tmp("export.pftrace");
    let o = Command::new(BIN)
        .args(["export", "--window", "20ms", "--perfetto", pf.to_str().unwrap(), trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    check_perfetto(&pf);
    // Protobuf keeps it small: well under 100 bytes per probe record.
    let records: u64 = {
        let s = String::from_utf8_lossy(&o.stderr);
        s.split_whitespace().nth(1).and_then(|x| x.parse().ok()).unwrap_or(1)
    };
    let size = std::fs::metadata(&pf).unwrap().len();
    assert!(size < 200 * records.max(1), "{size} bytes for {records} records");
}

/// Decodes a skew trace (4 workers) with Perfetto's generated bindings and
/// checks: a process group with one thread track per worker, operator
/// slices named after the operators, waits naming the worker waited on,
/// flows between workers, the critical path, and the two counters.
fn check_perfetto(path: &Path) {
    use perfetto_protos::trace::Trace;
    use perfetto_protos::track_event::track_event::Type;
    let bytes = std::fs::read(path).unwrap();
    let trace = Trace::parse_from_bytes(&bytes).expect("a valid Perfetto protobuf trace");
    assert!(!trace.packet.is_empty());
    // Tracks.
    let mut threads: HashMap<u64, String> = HashMap::new(); // uuid → name
    let mut processes: HashMap<u64, String> = HashMap::new();
    let mut named: HashMap<u64, String> = HashMap::new();
    let mut counters: HashMap<u64, String> = HashMap::new();
    let mut parent: HashMap<u64, u64> = HashMap::new();
    for p in &trace.packet {
        if p.has_track_descriptor() {
            let d = p.track_descriptor();
            parent.insert(d.uuid(), d.parent_uuid());
            if d.thread.is_some() {
                threads.insert(d.uuid(), d.thread.thread_name().to_string());
            } else if d.process.is_some() {
                processes.insert(d.uuid(), d.process.process_name().to_string());
            } else if d.counter.is_some() {
                counters.insert(d.uuid(), d.name().to_string());
            } else {
                named.insert(d.uuid(), d.name().to_string());
            }
        }
    }
    let workers: BTreeSet<&str> = threads.values().map(|s| s.as_str()).collect();
    assert_eq!(workers, BTreeSet::from(["worker 0", "worker 1", "worker 2", "worker 3"]), "one track per worker");
    assert_eq!(processes.len(), 1, "{processes:?}");
    assert!(processes.values().next().unwrap().contains("skew"));
    for t in threads.keys() {
        assert!(processes.contains_key(&parent[t]), "worker tracks are grouped under their process");
    }
    let worker_of: HashMap<u64, u32> =
        threads.iter().map(|(u, n)| (*u, n.trim_start_matches("worker ").parse().unwrap())).collect();
    let cp_track =
        named.iter().find(|(_, n)| n.as_str() == "critical path").map(|(u, _)| *u).expect("a critical path track");
    let counter_names: BTreeSet<&str> = counters.values().map(|s| s.as_str()).collect();
    for w in 0..4 {
        assert!(counter_names.contains(format!("w{w} records lost").as_str()), "{counter_names:?}");
        assert!(counter_names.contains(format!("w{w} schedules elided").as_str()), "{counter_names:?}");
    }
    // Interned strings (one sequence): event names, categories, arg names.
    let (mut names, mut cats, mut args): (HashMap<u64, String>, HashMap<u64, String>, HashMap<u64, String>) =
        Default::default();
    for p in &trace.packet {
        if let Some(d) = p.interned_data.as_ref() {
            names.extend(d.event_names.iter().map(|n| (n.iid(), n.name().to_string())));
            cats.extend(d.event_categories.iter().map(|n| (n.iid(), n.name().to_string())));
            args.extend(d.debug_annotation_names.iter().map(|n| (n.iid(), n.name().to_string())));
        }
    }
    let name_of = |e: &perfetto_protos::track_event::TrackEvent| -> String {
        if e.has_name_iid() {
            names[&e.name_iid()].clone()
        } else {
            e.name().to_string()
        }
    };
    // Events.
    let mut op_slices: HashMap<u32, BTreeSet<String>> = HashMap::new();
    let mut waits_on: HashMap<u32, BTreeSet<u64>> = HashMap::new();
    let mut flow_src: HashMap<u64, u32> = HashMap::new();
    let mut flow_dst: HashMap<u64, u32> = HashMap::new();
    let (mut cp_slices, mut cp_consume, mut cp_on_workers, mut counter_events) = (0, 0, 0, 0);
    for p in &trace.packet {
        if !p.has_track_event() {
            continue;
        }
        let e = p.track_event();
        let track = e.track_uuid();
        for f in &e.flow_ids {
            flow_src.insert(*f, worker_of.get(&track).copied().unwrap_or(u32::MAX));
        }
        for f in &e.terminating_flow_ids {
            flow_dst.insert(*f, worker_of.get(&track).copied().unwrap_or(u32::MAX));
        }
        match e.type_() {
            Type::TYPE_COUNTER => {
                assert!(counters.contains_key(&track));
                counter_events += 1;
            }
            Type::TYPE_SLICE_BEGIN => {
                let cat =
                    e.category_iids.first().map(|c| cats[c].as_str()).or(e.categories.first().map(|s| s.as_str()));
                let cat = cat.unwrap_or("");
                let name = name_of(e);
                if track == cp_track {
                    cp_slices += 1;
                    if name == "w0: Consume" {
                        cp_consume += p.timestamp();
                    }
                    continue;
                }
                let w = *worker_of.get(&track).expect("slices are on worker tracks");
                match cat {
                    "operator" => {
                        op_slices.entry(w).or_default().insert(name);
                    }
                    "wait" if name.starts_with("wait on w") => {
                        let on = e
                            .debug_annotations
                            .iter()
                            .find(|a| a.has_name_iid() && args[&a.name_iid()] == "waited_on_worker")
                            .map(|a| a.uint_value())
                            .expect("a wait names the worker waited on");
                        assert_eq!(name, format!("wait on w{on}"));
                        waits_on.entry(w).or_default().insert(on);
                    }
                    "critical_path" => cp_on_workers += 1,
                    _ => {}
                }
            }
            _ => {}
        }
    }
    assert!(op_slices[&0].contains("Consume"), "{op_slices:?}");
    // A wait slice names the message that ended it: after a long wait on
    // worker 0 that is often a peer's progress echo (the summary above,
    // which follows such a peer to its cause, carries "everyone waits on
    // w0"); so here, some waits of workers 1–3 end on worker 0's messages.
    assert!((1..4).any(|w| waits_on.get(&w).is_some_and(|s| s.contains(&0))), "waits on w0: {waits_on:?}");
    let between = flow_src.iter().filter(|(f, s)| flow_dst.get(f).is_some_and(|d| d != *s && **s != u32::MAX)).count();
    assert!(between > 0, "messages are flows between worker tracks");
    assert!(flow_src.keys().all(|f| flow_dst.contains_key(f)), "every flow ends");
    assert!(cp_slices > 0 && cp_consume > 0, "the critical path names w0's Consume");
    assert!(cp_on_workers > 0, "the critical path is marked on the worker tracks");
    assert!(counter_events >= 8, "counters every window");
}

/// The skewed run with long executions, live, at the default flags (1 s
/// windows, the default grace): `skew` on 2 workers, every record on
/// worker 0, whose `Consume` runs for a few hundred ms to seconds per epoch (the
/// machine's load decides) while
/// worker 1 waits for its progress. Worker 1's waits outlive their windows
/// (the live deadline hands them over open): they are carried to worker 0
/// where they end, so the top operator is worker 0's `Consume`, at least
/// 95 % of worker 1's waiting is on worker 0 and next to nothing on `?`.
/// (The same case on the differential example:
/// `the_differential_example_under_skew_names_the_hot_arrangement`.)
#[test]
fn a_skewed_run_with_long_executions_charges_the_waits_to_the_hot_worker() {
    let _alone = judged_alone();
    let summary = tmp("long-summary.json");
    let skew = example("skew");
    let work = if cfg!(debug_assertions) { "64" } else { "1024" };
    let mut args = vec!["watch", "-q", "--summary-json", summary.to_str().unwrap(), "--", skew.to_str().unwrap()];
    args.extend(["-w", "2", "--epochs", "3", "--records", "400000", "--work", work]);
    let o = Command::new(BIN).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(
        (s["top_operators"][0][0].as_u64(), s["top_operators"][0][1].as_str()),
        (Some(0), Some("Consume")),
        "{s}"
    );
    let (on0, all, unknown) = worker_1_waits(&s);
    assert!(all > 0.0 && on0 >= 0.95 * all, "w1 waited {all} ms, {on0} ms on w0: {s}");
    assert!(unknown <= 0.05 * all, "w1 waited {unknown} ms on `?`: {s}");
}

/// The differential example (`reach`: a BFS whose join, reduce and
/// arrangements run inside `iterate`) under its default skew, 2 workers,
/// `watch` at its defaults: 90 % of the edges have a source among the hot
/// nodes, which all live on worker 0, so worker 0's `ArrangeByKey` (the
/// edges arranged by source, merging big batches in long executions)
/// holds the most records, that `ArrangeByKey` is one of the two operators
/// holding most of the critical path and holds more of it than worker 1's
/// (the same operator on the cold worker), worker 1 waits on worker 0
/// (at least 95 % of its waiting), and no wait that a message explains is
/// left on `?`.
///
/// Not judged: which worker's operators hold more of the path in all.
/// The reduce's input is keyed by destination, so both workers' `Reduce`
/// do about as much work, and on a busy machine a preempted execution is
/// stretched by the time its thread waited for a core: worker 1's
/// `Reduce` then holds its stretched share. Measured (2 workers, 400,000
/// edges): worker 0's operators held 58-83 % of the path against 8-30 %
/// on a quiet machine (6 runs), 30-62 % against 10-29 % beside 1-3 CPU
/// hogs (21 runs), and once 40 % against 54 % (worker 1's `Reduce` 44 %)
/// on a loaded 2-core CI machine. Worker 0's `ArrangeByKey` was first or
/// second in all of them.
#[test]
fn the_differential_example_under_skew_names_the_hot_arrangement() {
    let _alone = judged_alone();
    let summary = tmp("reach-summary.json");
    let reach = example("reach");
    let mut args = vec!["watch", "-q", "--summary-json", summary.to_str().unwrap(), "--", reach.to_str().unwrap()];
    args.extend(["-w", "2"]);
    if cfg!(debug_assertions) {
        args.extend(["--nodes", "5000", "--edges", "20000", "--batch", "500"]);
    } else {
        // (Twice the default edges: at the default's ~250 ms run worker 1's
        // Reduce of the last rounds took 26-51 % of the path in 3 of 12
        // runs, more than worker 0's operators together in 2; at 400,000
        // edges, 6 of 6 runs had worker 0 at 52-90 % against 3-34 %.)
        args.extend(["--edges", "400000"]);
    }
    let o = Command::new(BIN).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    // Worker 0's ArrangeByKey is one of the two largest shares of the path,
    // and holds more of it than worker 1's ArrangeByKey (the cold one).
    let top = s["top_operators"].as_array().unwrap();
    assert!(top.iter().take(2).any(|o| o[0] == 0 && o[1] == "ArrangeByKey"), "{s}");
    let share = |w: u64, name: &str| {
        top.iter().filter(|o| o[0] == w && o[1] == name).map(|o| o[2].as_f64().unwrap()).sum::<f64>()
    };
    assert!(share(0, "ArrangeByKey") > 2.0 * share(1, "ArrangeByKey"), "{s}");
    // The largest arrangement is worker 0's ArrangeByKey, by far.
    let arr = s["arrangements"].as_array().unwrap();
    let held = |w: u64, name: &str| {
        arr.iter().filter(|a| a[0] == w && a[1] == name).map(|a| a[3].as_u64().unwrap()).max().unwrap_or(0)
    };
    assert!(held(0, "ArrangeByKey") > 4 * held(1, "ArrangeByKey"), "{s}");
    // Worker 1's waiting: on worker 0, never on `?`.
    let (on0, all, unknown) = worker_1_waits(&s);
    assert!(all > 0.0 && on0 >= 0.95 * all, "w1 waited {all} ms, {on0} ms on w0: {s}");
    // (A wait the end of the stream cut is `?` with nothing to explain it.)
    assert!(unknown <= 0.01 * all, "w1 waited {unknown} ms on `?`: {s}");
    assert_eq!(s["incomplete_windows"], 0, "{s}");
}

/// The differential example under a short grace (50 ms, 250 ms windows):
/// worker 0's long ArrangeByKey and Join executions publish their records
/// when their step ends, after the windows they span went out. Those
/// windows are revised with them, not left INCOMPLETE (`late data`): each
/// revision follows a report of its window, and the run's critical path
/// (`--summary-json`) is the sum over each window's last report, counting
/// a revised window once. (Here: 16 revisions of 23 windows; none at the
/// default grace on a quiet machine.)
#[test]
fn the_differential_examples_late_windows_are_revised_not_incomplete() {
    let _alone = judged_alone();
    let (json, summary) = (tmp("reach-late.jsonl"), tmp("reach-late-summary.json"));
    let reach = example("reach");
    let mut args = vec!["watch", "-q", "--window", "250ms", "--grace", "50ms"];
    args.extend(["--json", json.to_str().unwrap(), "--summary-json", summary.to_str().unwrap(), "--"]);
    args.extend([reach.to_str().unwrap(), "-w", "2"]);
    if cfg!(debug_assertions) {
        args.extend(["--nodes", "5000", "--edges", "20000", "--batch", "500"]);
    } else {
        args.extend(["--nodes", "200000", "--edges", "1000000", "--batch", "50000"]);
    }
    let o = Command::new(BIN).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let reports: Vec<Value> =
        std::fs::read_to_string(&json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut last: BTreeMap<u64, &Value> = BTreeMap::new();
    for r in &reports {
        let (w, rev) = (r["window"].as_u64().unwrap(), r["revision"].as_u64().unwrap_or(0));
        match last.get(&w) {
            Some(prev) => assert!(rev > prev["revision"].as_u64().unwrap_or(0), "window {w} revised out of order"),
            None => assert_eq!(rev, 0, "window {w}: a revision before its first report"),
        }
        last.insert(w, r);
    }
    let revised = reports.iter().filter(|r| r["revision"].as_u64().is_some()).count();
    eprintln!("{} windows, {revised} revisions", last.len());
    for r in last.values() {
        assert!(!r["incomplete_reasons"].to_string().contains("late data"), "{r}");
    }
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["incomplete_windows"], 0, "{s}");
    assert_eq!(s["windows"].as_u64(), Some(last.len() as u64), "{s}");
    let cp_ms: f64 = last.values().map(|r| r["critical_path"]["length_ns"].as_f64().unwrap() / 1e6).sum();
    let said = s["critical_path_ms"].as_f64().unwrap();
    assert!((cp_ms - said).abs() < 0.01, "summary {said} ms, the windows' last reports {cp_ms} ms");
}

/// Worker 1's waiting in a `--summary-json`, ms: on worker 0, in all, and on
/// `?` (nothing visible ended it).
fn worker_1_waits(s: &Value) -> (f64, f64, f64) {
    let (mut on0, mut all, mut unknown) = (0.0, 0.0, 0.0);
    for w in s["waits"].as_array().unwrap().iter().filter(|w| w[0] == 1) {
        let ms = w[2].as_f64().unwrap();
        all += ms;
        on0 += if w[1] == 0 { ms } else { 0.0 };
        unknown += if w[1].is_null() { ms } else { 0.0 };
    }
    (on0, all, unknown)
}
