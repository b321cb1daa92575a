//! `GET /metrics`: the run in Prometheus terms, with the Prometheus
//! project's client library (`prometheus-client`, OpenMetrics text).
//!
//! Names and units follow the Prometheus conventions (base units, seconds;
//! counters end in `_total`, which the library adds):
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `sidecar_critical_path_seconds_total` | counter | `worker`, `operator` |
//! | `sidecar_critical_path_length_seconds_total` | counter | |
//! | `sidecar_wait_seconds_total` | counter | `worker`, `waited_on`, `kind` |
//! | `sidecar_windows_total` | counter | `completeness` (`complete`, `incomplete`, `starting`: incomplete because a process of the job had not started yet; its critical path and waits are not counted) |
//! | `sidecar_records_total` | counter | `stream` (`host/process/worker`) |
//! | `sidecar_lost_records_total` | counter | `stream` |
//! | `sidecar_analysis_latency_seconds` | histogram | |
//! | `sidecar_connections_total` | counter | |
//! | `sidecar_decode_errors_total` | counter | |
//! | `sidecar_dropped_updates_total` | counter | `consumer` (`hub`, `browser`) |
//! | `sidecar_tracing_cost_seconds` | gauge | `part` (`worker_threads`: what tracing cost the job's worker threads while they worked; `idle_polling`: apart, flush calls of idle steps; `writer_thread`: the probe's writer thread's CPU, once the probes' figures say it), as the summary's cost account, from the probes' figures in their streams |
//! | `sidecar_connection_refusals_total` | counter | `limit` (`max_connections`, `hello_timeout`, `max_buffered`, `max_buffered_total`: each a time a limit of `sidecar run` acted) |
//! | `sidecar_arrangement_records` | gauge | `worker`, `operator`, `id` (differential: updates the trace holds, at the latest window's end) |
//! | `sidecar_arrangement_batches` | gauge | the same |
//! | `sidecar_arrangement_merges` | gauge | the same (merges in flight) |
//! | `sidecar_arrangement_batcher_records` | gauge | the same |
//! | `sidecar_arrangement_batcher_bytes` | gauge | the same |
//! | `sidecar_arrangement_batcher_allocations` | gauge | the same |
//!
//! Label cardinality is bounded: per window, only its top
//! [`TOP_OPERATORS`] critical-path operators keep their names, the rest of
//! its path is booked as `operator="other"`; and over the whole run at most
//! [`MAX_SERIES`] (worker, operator) pairs, waits triples and streams get a
//! series of their own, later ones going to `other` too. The arrangement
//! gauges follow each window's [`TOP_ARRANGEMENTS`] largest arrangements,
//! at most [`MAX_SERIES`] (worker, operator) pairs at once; a level cannot
//! be summed into `other`, so the rest get no series. A trace dropped (no
//! handle, no updates, no batches) loses its series and frees its room.

use std::collections::HashSet;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use serde_json::Value;

/// Operators of a window that keep their name (the rest: `other`).
pub const TOP_OPERATORS: usize = 5;
/// Arrangements of a window whose levels the gauges show (the largest).
pub const TOP_ARRANGEMENTS: usize = 10;
/// Series per labelled family, at most (the rest: `other`).
pub const MAX_SERIES: usize = 64;

type Labels = Vec<(&'static str, String)>;
type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;
type FloatGauge = prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>;

/// The run's metrics, updated from each window's `--json` object.
pub struct Metrics {
    registry: Registry,
    critical_path: Family<Labels, FloatCounter>,
    critical_path_length: FloatCounter,
    waits: Family<Labels, FloatCounter>,
    windows: Family<Labels, Counter>,
    records: Family<Labels, Counter>,
    lost: Family<Labels, Counter>,
    latency: Histogram,
    connections: Counter,
    errors: Counter,
    dropped: Family<Labels, Counter>,
    refusals: Family<Labels, Counter>,
    tracing_cost: Family<Labels, FloatGauge>,
    window_input_bytes: Counter,
    fragment_bytes: Family<Labels, Counter>,
    /// Per window: bytes of fragments from other processes per byte of
    /// the window's input.
    crossing_ratio: Histogram,
    /// The arrangement gauges, by the report field each shows.
    arrangements: Vec<(&'static str, Family<Labels, Gauge>)>,
    /// Label sets given a series so far, per family (0: operators, 1:
    /// waits, 2: streams, 3: arrangements).
    admitted: [HashSet<Labels>; 4],
}

/// The arrangement gauges: (metric name, report field, help).
const ARRANGEMENT_GAUGES: [(&str, &str, &str); 6] = [
    ("arrangement_records", "records", "Updates a differential arrangement holds, by worker and operator"),
    ("arrangement_batches", "batches", "Batches a differential arrangement holds"),
    ("arrangement_merges", "merges", "Merges in flight in a differential arrangement"),
    ("arrangement_batcher_records", "batcher_records", "Updates in an arrangement's batcher, not yet in a batch"),
    ("arrangement_batcher_bytes", "batcher_bytes", "Bytes an arrangement's batcher uses"),
    ("arrangement_batcher_allocations", "batcher_allocations", "Allocations an arrangement's batcher holds"),
];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::with_prefix("sidecar"),
            critical_path: Family::default(),
            critical_path_length: FloatCounter::default(),
            waits: Family::default(),
            windows: Family::default(),
            records: Family::default(),
            lost: Family::default(),
            // 1 ms to ~65 s.
            latency: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            connections: Counter::default(),
            errors: Counter::default(),
            dropped: Family::default(),
            refusals: Family::default(),
            tracing_cost: Family::default(),
            window_input_bytes: Counter::default(),
            fragment_bytes: Family::default(),
            // 1/64 to 64 bytes crossing per byte of input.
            crossing_ratio: Histogram::new(exponential_buckets(1.0 / 64.0, 2.0, 13)),
            arrangements: ARRANGEMENT_GAUGES.iter().map(|(_, field, _)| (*field, Family::default())).collect(),
            admitted: Default::default(),
        };
        let r = &mut m.registry;
        let s = Unit::Seconds;
        r.register_with_unit(
            "critical_path",
            "Critical path time by worker and operator",
            s.clone(),
            m.critical_path.clone(),
        );
        r.register_with_unit(
            "critical_path_length",
            "Critical path length summed over windows",
            s.clone(),
            m.critical_path_length.clone(),
        );
        r.register_with_unit(
            "wait",
            "Waiting time by worker, the worker waited on (none: not visible) and the kind of message that ended it",
            s.clone(),
            m.waits.clone(),
        );
        r.register("windows", "Windows analyzed, by completeness", m.windows.clone());
        r.register("records", "Probe records in analyzed windows, by stream", m.records.clone());
        r.register("lost_records", "Records the probe lost, by stream", m.lost.clone());
        r.register_with_unit("analysis_latency", "From a window's end to its report (live runs)", s, m.latency.clone());
        r.register_with_unit(
            "tracing_cost",
            "What tracing cost the job's worker threads while they worked, and apart, idle polling and the probe's writer thread",
            Unit::Seconds,
            m.tracing_cost.clone(),
        );
        r.register_with_unit(
            "window_input",
            "The probes' frames the analyzed windows' records came in",
            Unit::Bytes,
            m.window_input_bytes.clone(),
        );
        r.register_with_unit(
            "fragment",
            "Fragments received by the windows' owners from other workers (their estimated size on the wire), by \
             where they came from: this_process (another worker of the owner's process), other_processes",
            Unit::Bytes,
            m.fragment_bytes.clone(),
        );
        r.register(
            "window_crossing_ratio",
            "Per window, bytes of fragments from other processes per byte of the window's input",
            m.crossing_ratio.clone(),
        );
        r.register("connections", "Probe connections accepted", m.connections.clone());
        r.register("decode_errors", "Streams that failed to decode", m.errors.clone());
        r.register("dropped_updates", "Dashboard updates dropped: the hub or a browser was behind", m.dropped.clone());
        r.register(
            "connection_refusals",
            "Times a connection limit acted: refused over --max-connections, closed without a Hello by --hello-timeout, \
             a buffer at --max-buffered, all buffers at --max-buffered-total, a window closed over a backlog unread \
             past --max-backlog",
            m.refusals.clone(),
        );
        for ((name, _, help), (_, family)) in ARRANGEMENT_GAUGES.iter().zip(&m.arrangements) {
            r.register(*name, *help, family.clone());
        }
        m
    }

    /// The cost account of the summary so far (its `cost` object): the
    /// same figures the terminal and the page say. The writer thread's CPU
    /// has a series once it is known (the probes' figures carry it).
    pub fn cost(&mut self, cost: &Value) {
        for (part, field) in [("worker_threads", "worker_threads_ms"), ("idle_polling", "idle_steps_ms")] {
            let ms = cost[field].as_f64().unwrap_or(0.0);
            self.tracing_cost.get_or_create(&vec![("part", part.to_string())]).set(ms / 1e3);
        }
        if let Some(ms) = cost["writer_cpu_ms"].as_f64() {
            self.tracing_cost.get_or_create(&vec![("part", "writer_thread".to_string())]).set(ms / 1e3);
        }
    }

    /// The OpenMetrics text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = encode(&mut s, &self.registry);
        s
    }

    /// `labels` if its family (0: operators, 1: waits, 2: streams) has
    /// room or already has it; else the same with `other` in `field`.
    fn admit(&mut self, family: usize, mut labels: Labels, field: usize) -> Labels {
        let set = &mut self.admitted[family];
        if set.contains(&labels) || set.len() < MAX_SERIES {
            set.insert(labels.clone());
            return labels;
        }
        labels[field].1 = "other".into();
        labels
    }

    /// Adds a window (its `--json` object) and the stream's lost records
    /// from its lanes (`lost`: (stream label, records lost)).
    pub fn window(&mut self, w: &Value, lost: &[(String, u64)]) {
        let complete = w["complete"].as_bool().unwrap_or(false);
        // A window before every process of the job started is kept out of
        // the job's figures, as the run's totals keep it.
        let starting = w["workers_not_started"].as_array().is_some_and(|a| !a.is_empty());
        let c = if complete {
            "complete"
        } else if starting {
            "starting"
        } else {
            "incomplete"
        };
        self.windows.get_or_create(&vec![("completeness", c.to_string())]).inc();
        if !starting {
            self.critical_path(&w["critical_path"]);
            self.waits(w);
        }
        for s in w["streams"].as_array().into_iter().flatten() {
            let stream = stream_label(&s["host"], &s["process"], &s["worker"]);
            let labels = self.admit(2, vec![("stream", stream)], 0);
            self.records.get_or_create(&labels).inc_by(s["records"].as_u64().unwrap_or(0));
        }
        for (stream, n) in lost {
            let labels = self.admit(2, vec![("stream", stream.clone())], 0);
            self.lost.get_or_create(&labels).inc_by(*n);
        }
        if let Some(ms) = w["emitted_after_end_ms"].as_f64() {
            self.latency.observe(ms.max(0.0) / 1e3);
        }
        self.arrangements(w);
    }

    /// The window's largest arrangements' levels (the report lists them
    /// largest first).
    fn arrangements(&mut self, w: &Value) {
        for a in w["arrangements"].as_array().into_iter().flatten().take(TOP_ARRANGEMENTS) {
            let labels = vec![
                ("worker", a["worker"].as_u64().unwrap_or(0).to_string()),
                ("operator", a["name"].as_str().unwrap_or("?").to_string()),
                ("id", a["operator"].as_u64().unwrap_or(0).to_string()),
            ];
            let set = &mut self.admitted[3];
            let level = |field: &str| a[field].as_u64().unwrap_or(0);
            if level("shares") == 0 && level("records") == 0 && level("batches") == 0 {
                // A trace with no handle and nothing in it (dropped, as a
                // retired query's is) has no series: a program that builds
                // and drops them as it goes keeps room for its live ones.
                if set.remove(&labels) {
                    for (_, family) in &self.arrangements {
                        family.remove(&labels);
                    }
                }
                continue;
            }
            if !set.contains(&labels) && set.len() >= MAX_SERIES {
                continue;
            }
            set.insert(labels.clone());
            for (field, family) in &self.arrangements {
                let v = a[*field].as_u64().unwrap_or(0).min(i64::MAX as u64) as i64;
                family.get_or_create(&labels).set(v);
            }
        }
    }

    fn critical_path(&mut self, cp: &Value) {
        self.critical_path_length.inc_by(cp["length_ns"].as_u64().unwrap_or(0) as f64 / 1e9);
        for (labels, s) in self.critical_path_parts(cp) {
            self.critical_path.get_or_create(&labels).inc_by(s);
        }
    }

    /// The window's critical path by (worker, operator) series, seconds.
    fn critical_path_parts(&mut self, cp: &Value) -> Vec<(Labels, f64)> {
        let length = cp["length_ns"].as_u64().unwrap_or(0);
        let mut parts = Vec::new();
        let mut named = 0u64;
        let mut other: std::collections::BTreeMap<String, u64> = Default::default();
        for (i, o) in cp["top_operators"].as_array().into_iter().flatten().enumerate() {
            let ns = o["ns"].as_u64().unwrap_or(0);
            let worker = o["worker"].as_u64().unwrap_or(0).to_string();
            named += ns;
            if i >= TOP_OPERATORS {
                *other.entry(worker).or_default() += ns;
                continue;
            }
            let name = o["name"].as_str().unwrap_or("?").to_string();
            let labels = self.admit(0, vec![("worker", worker), ("operator", name)], 1);
            parts.push((labels, ns as f64 / 1e9));
        }
        // The rest of the path (operators past the top, waits for input,
        // messages, unknown): `other`, on no worker in particular.
        *other.entry("all".into()).or_default() += length.saturating_sub(named);
        for (worker, ns) in other {
            if ns > 0 {
                let labels = vec![("worker", worker), ("operator", "other".to_string())];
                parts.push((labels, ns as f64 / 1e9));
            }
        }
        parts
    }

    fn waits(&mut self, w: &Value) {
        for (labels, s) in self.wait_parts(w) {
            self.waits.get_or_create(&labels).inc_by(s);
        }
    }

    /// The window's waits by (worker, waited on, kind) series, seconds.
    fn wait_parts(&mut self, w: &Value) -> Vec<(Labels, f64)> {
        let mut parts = Vec::new();
        for ww in w["waiting"].as_array().into_iter().flatten() {
            let worker = ww["worker"].as_u64().unwrap_or(0).to_string();
            for on in ww["on"].as_array().into_iter().flatten() {
                let waited_on = on["worker"].as_u64().map_or("none".to_string(), |x| x.to_string());
                let kind = on["kind"].as_str().unwrap_or("unknown").to_string();
                let labels = vec![("worker", worker.clone()), ("waited_on", waited_on), ("kind", kind)];
                let labels = self.admit(1, labels, 1);
                // (A wait open across windows counts where it ended: its
                // earlier windows' part is `carried_ns`.)
                let ns = on["ns"].as_u64().unwrap_or(0) + on["carried_ns"].as_u64().unwrap_or(0);
                parts.push((labels, ns as f64 / 1e9));
            }
        }
        parts
    }

    /// A window's revised report (`revision`) in place of `old`, the one it
    /// replaces: each counter of its path, waits and records rises by what
    /// the revision adds to its series.
    /// A counter never falls (Prometheus counters only rise; a fall reads
    /// as a restart): where a revision lowers a series, it keeps the first
    /// report's figure. (The run's summary, `/api/summary`, is exact.)
    pub fn revise(&mut self, old: &Value, new: &Value) {
        // (`sidecar_windows_total` counts each window once, under its first
        // report's completeness: a counter cannot move it.)
        let job = |w: &Value| !w["workers_not_started"].as_array().is_some_and(|a| !a.is_empty());
        let (cp0, cp1) = (&old["critical_path"], &new["critical_path"]);
        if job(new) {
            let l0 = if job(old) { cp0["length_ns"].as_u64().unwrap_or(0) } else { 0 };
            let l1 = cp1["length_ns"].as_u64().unwrap_or(0);
            self.critical_path_length.inc_by(l1.saturating_sub(l0) as f64 / 1e9);
            let before = if job(old) { self.critical_path_parts(cp0) } else { Vec::new() };
            for (labels, s) in rises(before, self.critical_path_parts(cp1)) {
                self.critical_path.get_or_create(&labels).inc_by(s);
            }
            let before = if job(old) { self.wait_parts(old) } else { Vec::new() };
            for (labels, s) in rises(before, self.wait_parts(new)) {
                self.waits.get_or_create(&labels).inc_by(s);
            }
        }
        let records = |w: &Value| -> Vec<(Labels, f64)> {
            let streams = w["streams"].as_array().into_iter().flatten();
            streams
                .map(|s| {
                    let label = stream_label(&s["host"], &s["process"], &s["worker"]);
                    (vec![("stream", label)], s["records"].as_u64().unwrap_or(0) as f64)
                })
                .collect()
        };
        for (labels, n) in rises(records(old), records(new)) {
            let labels = self.admit(2, labels, 0);
            self.records.get_or_create(&labels).inc_by(n as u64);
        }
        self.arrangements(new);
    }

    /// The run's figures: connections accepted and decode errors so far,
    /// and updates dropped so far (by the hub's feed, by browsers).
    pub fn run_figures(&mut self, connections: u64, errors: u64, dropped_hub: u64, dropped_browser: u64) {
        raise(&self.connections, connections);
        raise(&self.errors, errors);
        raise(&self.dropped.get_or_create(&vec![("consumer", "hub".into())]), dropped_hub);
        raise(&self.dropped.get_or_create(&vec![("consumer", "browser".into())]), dropped_browser);
    }
}

impl Metrics {
    /// What a window's owner received for it (a revision: what its late
    /// records added, not observed again in the per-window histogram).
    pub fn traffic(&mut self, t: &crate::output::http::WindowTraffic) {
        self.window_input_bytes.inc_by(t.input_bytes);
        for (from, n) in [("this_process", t.from_this_process), ("other_processes", t.from_other_processes)] {
            self.fragment_bytes.get_or_create(&vec![("from", from.to_string())]).inc_by(n);
        }
    }

    /// A window's bytes from other processes against its input, once per
    /// window.
    pub fn crossing(&mut self, t: &crate::output::http::WindowTraffic) {
        if t.input_bytes > 0 {
            self.crossing_ratio.observe(t.from_other_processes as f64 / t.input_bytes as f64);
        }
    }

    /// The connection limits' counts so far (`WindowUpdate::refused`).
    pub fn refusals(&mut self, [over, no_hello, full, total, backlog]: [u64; 5]) {
        let limits = [
            ("max_connections", over),
            ("hello_timeout", no_hello),
            ("max_buffered", full),
            ("max_buffered_total", total),
            ("max_backlog", backlog),
        ];
        for (limit, n) in limits {
            raise(&self.refusals.get_or_create(&vec![("limit", limit.into())]), n);
        }
    }
}

/// What each series of `after` has more than in `before` (series summed by
/// labels first), where it has more.
fn rises(before: Vec<(Labels, f64)>, after: Vec<(Labels, f64)>) -> Vec<(Labels, f64)> {
    let mut by: std::collections::BTreeMap<Labels, f64> = Default::default();
    for (l, v) in before {
        *by.entry(l).or_default() -= v;
    }
    for (l, v) in after {
        *by.entry(l).or_default() += v;
    }
    by.into_iter().filter(|(_, d)| *d > 0.0).collect()
}

/// Brings a counter up to `total` (the figure is a running total kept
/// elsewhere).
fn raise(c: &Counter, total: u64) {
    let now = c.get();
    if total > now {
        c.inc_by(total - now);
    }
}

/// `host/process/worker`, the host as its last four hex digits (as the
/// terminal lines show it).
pub fn stream_label(host: &Value, process: &Value, worker: &Value) -> String {
    let h = host.as_str().unwrap_or("?");
    format!("{}/{}/{}", &h[h.len().saturating_sub(4)..], process.as_u64().unwrap_or(0), worker.as_u64().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(ops: &[(u32, &str, u64)], length: u64) -> Value {
        let top: Vec<Value> = ops
            .iter()
            .map(|(w, n, ns)| serde_json::json!({"worker": w, "operator": 1, "name": n, "ns": ns, "share": 0.0}))
            .collect();
        serde_json::json!({
            "complete": true,
            "critical_path": {"length_ns": length, "top_operators": top},
            "waiting": [{"worker": 1, "on": [{"worker": 0, "channel": 3, "kind": "data", "ns": 2_000_000_000u64, "count": 1}]}],
            "streams": [{"host": "00000000deadbeef", "process": 7, "worker": 1, "records": 42}],
            "emitted_after_end_ms": 12.5,
        })
    }

    /// A window before every process started is counted as `starting`,
    /// its path and waits left out of the job's counters; its records count.
    #[test]
    fn a_window_before_every_process_started_is_kept_out_of_the_jobs_figures() {
        let mut m = Metrics::new();
        let mut w = window(&[(0, "Consume", 3_000_000_000)], 4_000_000_000);
        w["complete"] = false.into();
        w["workers_not_started"] = serde_json::json!([0]);
        m.window(&w, &[]);
        let t = m.text();
        assert!(t.contains("sidecar_windows_total{completeness=\"starting\"} 1"), "{t}");
        assert!(!t.contains("Consume") && !t.contains("waited_on"), "{t}");
        assert!(t.contains("sidecar_records_total{stream=\"beef/7/1\"} 42"), "{t}");
    }

    /// A revision adds to each series what it has more than the report it
    /// replaces: the counters then read as if only the revision had come
    /// (where it adds), the window counted once.
    #[test]
    fn a_revision_adds_only_what_it_changes() {
        let mut m = Metrics::new();
        let first = window(&[(1, "Probe", 1_000_000_000)], 2_000_000_000);
        m.window(&first, &[]);
        let mut revised = window(&[(0, "ArrangeByKey", 3_000_000_000)], 4_000_000_000);
        revised["revision"] = 1.into();
        m.revise(&first, &revised);
        let t = m.text();
        assert!(t.contains("sidecar_critical_path_seconds_total{worker=\"0\",operator=\"ArrangeByKey\"} 3.0"), "{t}");
        assert!(t.contains("sidecar_critical_path_length_seconds_total 4.0"), "{t}");
        assert!(t.contains("sidecar_critical_path_seconds_total{worker=\"all\",operator=\"other\"} 1.0"), "{t}");
        // The same waits and records: not counted again.
        assert!(t.contains("sidecar_wait_seconds_total{worker=\"1\",waited_on=\"0\",kind=\"data\"} 2.0"), "{t}");
        assert!(t.contains("sidecar_records_total{stream=\"beef/7/1\"} 42"), "{t}");
        assert!(t.contains("sidecar_windows_total{completeness=\"complete\"} 1"), "{t}");
        // (A series the revision lowers keeps its figure: w1's Probe.)
        assert!(t.contains("sidecar_critical_path_seconds_total{worker=\"1\",operator=\"Probe\"} 1.0"), "{t}");
    }

    #[test]
    fn a_window_becomes_counters_in_seconds_with_the_rest_of_the_path_as_other() {
        let mut m = Metrics::new();
        m.window(&window(&[(0, "Consume", 3_000_000_000)], 4_000_000_000), &[("beef/7/1".into(), 5)]);
        let t = m.text();
        assert!(t.contains("sidecar_critical_path_seconds_total{worker=\"0\",operator=\"Consume\"} 3.0"), "{t}");
        assert!(t.contains("sidecar_critical_path_seconds_total{worker=\"all\",operator=\"other\"} 1.0"), "{t}");
        assert!(t.contains("sidecar_wait_seconds_total{worker=\"1\",waited_on=\"0\",kind=\"data\"} 2.0"), "{t}");
        assert!(t.contains("sidecar_records_total{stream=\"beef/7/1\"} 42"), "{t}");
        assert!(t.contains("sidecar_lost_records_total{stream=\"beef/7/1\"} 5"), "{t}");
        assert!(t.contains("sidecar_windows_total{completeness=\"complete\"} 1"), "{t}");
        assert!(t.contains("sidecar_analysis_latency_seconds_count 1"), "{t}");
    }

    /// The connection limits' running totals become one counter per limit
    /// (issue 34), raised to each new total, never lowered.
    #[test]
    fn connection_refusals_are_counted_by_limit() {
        let mut m = Metrics::new();
        m.refusals([3, 1, 0, 0, 0]);
        m.refusals([52, 40, 2, 5, 7]);
        m.refusals([50, 40, 2, 5, 6]);
        let t = m.text();
        assert!(t.contains("sidecar_connection_refusals_total{limit=\"max_connections\"} 52"), "{t}");
        assert!(t.contains("sidecar_connection_refusals_total{limit=\"hello_timeout\"} 40"), "{t}");
        assert!(t.contains("sidecar_connection_refusals_total{limit=\"max_buffered\"} 2"), "{t}");
        assert!(t.contains("sidecar_connection_refusals_total{limit=\"max_buffered_total\"} 5"), "{t}");
        assert!(t.contains("sidecar_connection_refusals_total{limit=\"max_backlog\"} 7"), "{t}");
    }

    /// Two windows: one whose owner got 3,000 B of fragments from another
    /// process for 1,000 B of input (ratio 3, in the bucket up to 4), one
    /// analyzed where its streams were read (ratio 0, the first bucket).
    /// The counters sum both.
    #[test]
    fn what_crossed_to_a_windows_owner_is_counted_against_its_input() {
        use crate::output::http::WindowTraffic;
        let mut m = Metrics::new();
        let far = WindowTraffic { input_bytes: 1000, from_this_process: 200, from_other_processes: 3000 };
        let near = WindowTraffic { input_bytes: 500, from_this_process: 100, from_other_processes: 0 };
        for t in [far, near] {
            m.traffic(&t);
            m.crossing(&t);
        }
        let t = m.text();
        assert!(t.contains("sidecar_window_input_bytes_total 1500"), "{t}");
        assert!(t.contains("sidecar_fragment_bytes_total{from=\"this_process\"} 300"), "{t}");
        assert!(t.contains("sidecar_fragment_bytes_total{from=\"other_processes\"} 3000"), "{t}");
        assert!(t.contains("sidecar_window_crossing_ratio_count 2"), "{t}");
        assert!(t.contains("sidecar_window_crossing_ratio_bucket{le=\"0.015625\"} 1"), "{t}");
        assert!(t.contains("sidecar_window_crossing_ratio_bucket{le=\"2.0\"} 1"), "{t}");
        assert!(t.contains("sidecar_window_crossing_ratio_bucket{le=\"4.0\"} 2"), "{t}");
    }

    #[test]
    fn a_windows_arrangements_become_gauges_that_follow_the_latest_window() {
        let mut m = Metrics::new();
        let w = |records: u64| {
            serde_json::json!({"arrangements": [
                {"worker": 0, "operator": 7, "name": "ArrangeByKey", "records": records, "batches": 3,
                 "merges": 1, "batcher_records": 10, "batcher_bytes": 640, "batcher_allocations": 2},
            ]})
        };
        m.window(&w(6_100_000), &[]);
        m.window(&w(5_400_000), &[]);
        let t = m.text();
        let l = "{worker=\"0\",operator=\"ArrangeByKey\",id=\"7\"}";
        assert!(t.contains(&format!("sidecar_arrangement_records{l} 5400000")), "{t}");
        assert!(t.contains(&format!("sidecar_arrangement_batches{l} 3")), "{t}");
        assert!(t.contains(&format!("sidecar_arrangement_merges{l} 1")), "{t}");
        assert!(t.contains(&format!("sidecar_arrangement_batcher_bytes{l} 640")), "{t}");
        assert!(t.contains(&format!("sidecar_arrangement_batcher_allocations{l} 2")), "{t}");
    }

    /// Traces of queries built and dropped one after another, more than
    /// `MAX_SERIES` of them: each dropped one (no handle, nothing in it)
    /// loses its series, so the live ones always have room.
    #[test]
    fn a_dropped_trace_loses_its_series_and_frees_its_room() {
        let mut m = Metrics::new();
        let trace = |op: usize, shares: u64, records: u64| {
            serde_json::json!({"worker": 0, "operator": op, "name": "ArrangeByKey", "records": records,
                               "batches": u64::from(records > 0), "shares": shares})
        };
        for op in 0..MAX_SERIES + 10 {
            m.window(&serde_json::json!({"arrangements": [trace(op, 1, 100)]}), &[]);
            m.window(&serde_json::json!({"arrangements": [trace(op, 0, 0)]}), &[]);
        }
        let live = MAX_SERIES + 10;
        m.window(&serde_json::json!({"arrangements": [trace(live, 2, 7)]}), &[]);
        let t = m.text();
        assert!(
            t.contains(&format!(
                "sidecar_arrangement_records{{worker=\"0\",operator=\"ArrangeByKey\",id=\"{live}\"}} 7"
            )),
            "{t}"
        );
        assert_eq!(t.matches("sidecar_arrangement_records{").count(), 1, "{t}");
    }

    #[test]
    fn operators_past_the_top_and_past_the_series_cap_are_booked_as_other() {
        let mut m = Metrics::new();
        // Seven operators in one window: the last two go to other.
        let ops: Vec<(u32, String, u64)> = (0..7).map(|i| (0, format!("op{i}"), 1_000_000_000)).collect();
        let ops: Vec<(u32, &str, u64)> = ops.iter().map(|(w, n, ns)| (*w, n.as_str(), *ns)).collect();
        m.window(&window(&ops, 7_000_000_000), &[]);
        let t = m.text();
        assert!(t.contains("operator=\"op4\""), "{t}");
        assert!(!t.contains("operator=\"op5\""), "{t}");
        assert!(t.contains("sidecar_critical_path_seconds_total{worker=\"0\",operator=\"other\"} 2.0"), "{t}");
        // Many windows with new names: at most MAX_SERIES named series.
        for i in 0..200 {
            let name = format!("fresh{i}");
            m.window(&window(&[(1, name.as_str(), 1_000_000_000)], 1_000_000_000), &[]);
        }
        let named = m.text().lines().filter(|l| l.starts_with("sidecar_critical_path_seconds_total{")).count();
        assert!(named <= MAX_SERIES + 3, "{named} series");
    }
}
