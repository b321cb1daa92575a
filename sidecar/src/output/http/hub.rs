//! The hub: takes the pipeline's updates off the feed, keeps the last
//! windows, the metrics and the summary, and hands each window to the
//! browsers' event streams (each a bounded queue: a full one drops the
//! update and counts it).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};

use super::metrics::Metrics;
use super::{lanes, Options, Update, WindowUpdate};
use crate::analysis::analyze::WindowDetail;
use crate::output::watch::{Cost, Summary, NS_PER_ELIDED, NS_PER_RECORD};

/// Events a browser's stream holds before it drops them.
pub const BROWSER_QUEUE: usize = 64;
/// Browsers' event streams at most (each has a thread).
pub const MAX_BROWSERS: usize = 16;
/// The windows' details kept for `/perfetto` hold at most this many bytes
/// (about: their activities, messages and critical path pieces), whatever
/// `keep_windows` says: memory stays bounded by the windows in flight plus
/// this.
pub const DETAIL_BYTES: usize = 64 << 20;

/// About how many bytes a window's detail holds.
fn detail_bytes(d: &WindowDetail) -> usize {
    use crate::analysis::analyze::{Activity, CriticalPiece, Message};
    d.activities.len() * std::mem::size_of::<Activity>()
        + d.messages.len() * std::mem::size_of::<Message>()
        + d.critical.len() * std::mem::size_of::<CriticalPiece>()
        + 1024 * d.streams.len()
}

/// A kept window: its `--json` object and the event the page gets.
pub struct Kept {
    pub window: u64,
    pub json: Arc<str>,
    pub event: Arc<str>,
}

/// What the hub keeps, read by the server's threads.
pub struct Inner {
    pub windows: VecDeque<Kept>,
    pub details: VecDeque<Arc<WindowDetail>>,
    /// Their bytes, about ([`detail_bytes`]).
    detail_bytes: usize,
    /// The `--summary-json` object so far (`exit_status` null while the
    /// run goes on), or the closing one.
    pub summary: Value,
    pub closed: bool,
    pub metrics: Metrics,
    browsers: Vec<SyncSender<Arc<str>>>,
    seen: u64,
    /// The last windows' real latencies, ms (window end → report): a
    /// window cut short at the end of a run says 0, which measures nothing.
    latencies: VecDeque<f64>,
}

/// Latencies kept for their distribution.
const LATENCIES: usize = 100;

/// What the health card says of latency: the last real figure, and the
/// median, 90th percentile and maximum of the last ones (null before any).
fn latency_health(kept: &VecDeque<f64>) -> Value {
    let mut v: Vec<f64> = kept.iter().copied().collect();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied();
    json!({
        "last_ms": kept.back(),
        "p50_ms": at(0.5),
        "p90_ms": at(0.9),
        "max_ms": v.last(),
        "of": v.len(),
    })
}

/// The hub's state, shared with the server.
pub struct Hub {
    pub opts: Options,
    pub inner: Mutex<Inner>,
    /// Updates the feed dropped (the hub was behind), and events browsers'
    /// queues dropped.
    pub feed_dropped: Arc<AtomicU64>,
    pub browser_dropped: AtomicU64,
    started: Instant,
}

pub type State = Arc<Hub>;

impl Hub {
    pub fn new(opts: Options, feed_dropped: Arc<AtomicU64>) -> State {
        let inner = Inner {
            windows: VecDeque::new(),
            details: VecDeque::new(),
            detail_bytes: 0,
            summary: Value::Null,
            closed: false,
            metrics: Metrics::new(),
            browsers: Vec::new(),
            seen: 0,
            latencies: VecDeque::new(),
        };
        Arc::new(Hub {
            opts,
            inner: Mutex::new(inner),
            feed_dropped,
            browser_dropped: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    /// A browser's event stream: the kept windows' events, then a queue
    /// of the next ones; None if there are too many browsers already.
    pub fn subscribe(&self) -> Option<(Vec<Arc<str>>, Receiver<Arc<str>>)> {
        let mut inner = self.inner.lock().unwrap();
        // (Browsers gone since the last window free their place.)
        let ping: Arc<str> = Arc::from(": ping\n\n");
        inner.browsers.retain(|b| !matches!(b.try_send(ping.clone()), Err(TrySendError::Disconnected(_))));
        if inner.browsers.len() >= MAX_BROWSERS {
            return None;
        }
        let (tx, rx) = sync_channel(BROWSER_QUEUE);
        let mut backlog: Vec<Arc<str>> = inner.windows.iter().map(|k| k.event.clone()).collect();
        if inner.closed {
            backlog.push(summary_event(&inner.summary));
        }
        inner.browsers.push(tx);
        Some((backlog, rx))
    }

    fn apply(&self, u: Update) {
        match u {
            Update::Window(w) => self.window(*w),
            Update::Detail(d) => {
                let mut inner = self.inner.lock().unwrap();
                inner.detail_bytes += detail_bytes(&d);
                inner.details.push_back(d);
                while inner.details.len() > self.opts.keep_windows
                    || (inner.detail_bytes > DETAIL_BYTES && inner.details.len() > 1)
                {
                    // (Freed here, on the hub's thread.)
                    let old = inner.details.pop_front().expect("not empty");
                    inner.detail_bytes -= detail_bytes(&old);
                }
            }
            Update::Summary(s) => {
                let mut inner = self.inner.lock().unwrap();
                inner.summary = serde_json::from_str(&s).unwrap_or(Value::Null);
                inner.closed = true;
                let cost = inner.summary["cost"].clone();
                inner.metrics.cost(&cost);
                let event = summary_event(&inner.summary);
                self.broadcast(&mut inner, event);
            }
        }
    }

    /// A window printed: parsed (off the analysis's threads), counted,
    /// kept, and sent to the browsers.
    fn window(&self, w: WindowUpdate) {
        let report: Value = serde_json::from_str(&w.json).unwrap_or(Value::Null);
        let lanes: Value = w.lanes.as_deref().and_then(|l| serde_json::from_str(l).ok()).unwrap_or(Value::Null);
        let summary = self.live_summary(&w);
        let mut inner = self.inner.lock().unwrap();
        // A revised report (`revision`) takes the place of the window's
        // earlier one, if still kept: in the metrics and the page's list.
        let revision = report["revision"].as_u64().unwrap_or(0);
        let same = |k: &Kept| {
            k.window == report["window"].as_u64().unwrap_or(0)
                && serde_json::from_str::<Value>(&k.json).is_ok_and(|o| o["host"] == report["host"])
        };
        let replaces = (revision > 0).then(|| inner.windows.iter().rposition(same)).flatten();
        match replaces {
            Some(i) => {
                let old: Value = serde_json::from_str(&inner.windows[i].json).unwrap_or(Value::Null);
                inner.metrics.revise(&old, &report);
            }
            // (A revision of a window no longer kept: its first report's
            // figures stay in the counters.)
            None if revision > 0 => {}
            None => {
                inner.seen += 1;
                inner.metrics.window(&report, &lanes::lost(&lanes));
                inner.metrics.crossing(&w.traffic);
            }
        }
        let (fd, bd) = (self.feed_dropped.load(Ordering::Relaxed), self.browser_dropped.load(Ordering::Relaxed));
        inner.metrics.run_figures(w.connections, w.errors, fd, bd);
        inner.metrics.refusals(w.refused);
        inner.metrics.traffic(&w.traffic);
        if !inner.closed {
            inner.metrics.cost(&summary["cost"]);
            inner.summary = summary;
        }
        if let Some(ms) = report["emitted_after_end_ms"].as_f64().filter(|&ms| ms > 0.0) {
            if inner.latencies.len() == LATENCIES {
                inner.latencies.pop_front();
            }
            inner.latencies.push_back(ms);
        }
        let health = json!({
            "windows_seen": inner.seen,
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "latency_ms": inner.latencies.back(),
            "latency": latency_health(&inner.latencies),
            "connections": w.connections,
            "connections_refused": w.refused[0],
            "closed_without_hello": w.refused[1],
            "decode_errors": w.errors,
            "dropped_updates": fd,
            "dropped_browser_events": bd,
        });
        let event =
            json!({"report": report, "number": w.number, "lanes": lanes, "health": health, "summary": inner.summary});
        let event: Arc<str> = Arc::from(format!("event: window\ndata: {event}\n\n"));
        let kept = Kept { window: report["window"].as_u64().unwrap_or(0), json: w.json.into(), event: event.clone() };
        match replaces {
            Some(i) => inner.windows[i] = kept,
            None if revision > 0 => {}
            None => inner.windows.push_back(kept),
        }
        while inner.windows.len() > self.opts.keep_windows {
            inner.windows.pop_front();
        }
        self.broadcast(&mut inner, event);
    }

    /// The `--summary-json` object of the run so far: what the closing
    /// summary would say now, with the probes' figures their streams have
    /// sent so far (a command's `probe:` line, for older probes, comes only
    /// at its exit) and a null exit status.
    fn live_summary(&self, w: &WindowUpdate) -> Value {
        let cost = Cost::new(&w.totals, None, NS_PER_RECORD, NS_PER_ELIDED);
        let wall_ms = self.started.elapsed().as_secs_f64() * 1e3;
        let s = Summary::new(&self.opts.command, 0, wall_ms, &w.totals, cost);
        let mut v = serde_json::to_value(&s).unwrap_or(Value::Null);
        v["exit_status"] = Value::Null;
        v
    }

    fn broadcast(&self, inner: &mut Inner, event: Arc<str>) {
        let dropped = &self.browser_dropped;
        inner.browsers.retain(|b| match b.try_send(event.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
    }
}

fn summary_event(summary: &Value) -> Arc<str> {
    Arc::from(format!("event: summary\ndata: {}\n\n", json!({ "summary": summary })))
}

/// The hub's thread: applies the updates until the feed closes.
pub fn spawn(rx: Receiver<Update>, state: State) {
    std::thread::Builder::new()
        .name("sidecar-http-hub".into())
        .spawn(move || {
            while let Ok(u) = rx.recv() {
                state.apply(u);
            }
        })
        .expect("spawning the HTTP hub thread");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(window: u64) -> Update {
        update_of(serde_json::json!({"window": window, "complete": true, "critical_path": {"length_ns": 5}}))
    }

    fn update_of(json: Value) -> Update {
        Update::Window(Box::new(WindowUpdate {
            number: json["window"].as_u64().unwrap_or(0),
            json: json.to_string(),
            lanes: None,
            totals: Default::default(),
            errors: 0,
            connections: 1,
            refused: [0; 5],
            traffic: Default::default(),
        }))
    }

    fn hub(keep: usize) -> State {
        Hub::new(Options { keep_windows: keep, command: vec![], width: 1 }, Arc::new(AtomicU64::new(0)))
    }

    /// The windows cut short at the end of a run say 0 ms: the health card
    /// keeps the last real figure and the distribution of the real ones.
    #[test]
    fn health_keeps_the_last_real_latency_after_the_run_ends() {
        let h = hub(500);
        let (_backlog, rx) = h.subscribe().unwrap();
        for (w, ms) in [(0, 390.0), (1, 410.0), (2, 380.0), (3, 0.0), (4, 0.0)] {
            h.apply(update_of(serde_json::json!({"window": w, "complete": true, "emitted_after_end_ms": ms})));
        }
        let last = rx.try_iter().last().unwrap();
        let data: Value = serde_json::from_str(last.trim_start_matches("event: window\ndata: ").trim()).unwrap();
        let health = &data["health"];
        assert_eq!(health["latency_ms"], 380.0, "{health}");
        // Three real figures: 380, 390, 410.
        let l = &health["latency"];
        assert_eq!((l["p50_ms"].as_f64(), l["max_ms"].as_f64(), l["of"].as_u64()), (Some(390.0), Some(410.0), Some(3)));
    }

    #[test]
    fn a_browser_that_does_not_read_loses_updates_counted_and_holds_nothing_up() {
        let h = hub(500);
        let (backlog, stuck) = h.subscribe().unwrap();
        assert!(backlog.is_empty());
        let t0 = Instant::now();
        for w in 0..200 {
            h.apply(update(w));
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(2));
        // Its queue took the first BROWSER_QUEUE; the rest were dropped.
        assert_eq!(h.browser_dropped.load(Ordering::Relaxed), 200 - BROWSER_QUEUE as u64);
        assert_eq!(stuck.try_iter().count(), BROWSER_QUEUE);
        // A browser arriving now gets the kept windows first.
        let (backlog, _) = h.subscribe().unwrap();
        assert_eq!(backlog.len(), 200);
        assert!(backlog[0].starts_with("event: window\ndata: {"));
    }

    #[test]
    fn the_hub_keeps_the_last_windows_and_serves_a_bounded_number_of_browsers() {
        let h = hub(3);
        for w in 0..10 {
            h.apply(update(w));
        }
        let kept: Vec<u64> = h.inner.lock().unwrap().windows.iter().map(|k| k.window).collect();
        assert_eq!(kept, vec![7, 8, 9]);
        let streams: Vec<_> = (0..MAX_BROWSERS).map(|_| h.subscribe().unwrap()).collect();
        assert!(h.subscribe().is_none(), "one browser too many");
        drop(streams);
        assert!(h.subscribe().is_some(), "browsers gone free their places");
    }

    #[test]
    fn the_details_kept_for_perfetto_stay_under_their_byte_bound() {
        use crate::analysis::analyze::{Activity, ActivityKind};
        let h = hub(60);
        let a = Activity { stream: 0, start: 0, end: 1, what: ActivityKind::WaitingForInput };
        // Each detail a third of the bound: at most three are kept.
        let n = DETAIL_BYTES / std::mem::size_of::<Activity>() / 3;
        for window in 0..10 {
            let d = WindowDetail { window, activities: vec![a; n], ..Default::default() };
            h.apply(Update::Detail(Arc::new(d)));
        }
        let inner = h.inner.lock().unwrap();
        let kept: Vec<u64> = inner.details.iter().map(|d| d.window).collect();
        assert_eq!(kept, vec![7, 8, 9]);
        assert!(inner.detail_bytes <= DETAIL_BYTES);
    }

    #[test]
    fn a_feed_whose_hub_is_behind_drops_and_counts_without_blocking() {
        let (tx, _rx) = sync_channel(2);
        let feed = super::super::Feed { tx, dropped: Arc::new(AtomicU64::new(0)) };
        for _ in 0..10 {
            feed.summary("{}".into());
        }
        assert_eq!(feed.dropped(), 8);
    }

    /// The page and `/metrics` get the cost from the probes' figures in
    /// their streams while the run goes on, as the terminal does at its end.
    #[test]
    fn the_live_cost_comes_from_the_probes_figures_in_the_streams() {
        use crate::analysis::report::{ProbeFigures, ProcessFigures, RunTotals};
        let h = hub(5);
        let mut totals = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        totals.streams.insert(("h".into(), 0, 0));
        let figures = ProbeFigures {
            written: Some(1_000_000),
            elided: Some(0),
            writer_cpu_ns: Some(25_000_000),
            adapter_ns: Some(40_000_000),
            ..Default::default()
        };
        totals.probe_figures(1, 7, ProcessFigures { program: "p".into(), seq: 3, figures });
        let u = WindowUpdate {
            number: 1,
            json: json!({"window": 1, "complete": true}).to_string(),
            lanes: None,
            totals,
            errors: 0,
            connections: 1,
            refused: [0; 5],
            traffic: Default::default(),
        };
        h.apply(Update::Window(Box::new(u)));
        let inner = h.inner.lock().unwrap();
        let cost = &inner.summary["cost"];
        assert_eq!(cost["source"], "stream", "{cost}");
        assert_eq!(cost["records"], 1_000_000);
        assert_eq!(inner.summary["probe_line"]["written"], 1_000_000);
        let text = inner.metrics.text();
        // The adapter's 40 ms, and apart the writer's 25 ms.
        assert!(text.contains("sidecar_tracing_cost_seconds{part=\"worker_threads\"} 0.04"), "{text}");
        assert!(text.contains("sidecar_tracing_cost_seconds{part=\"writer_thread\"} 0.025"), "{text}");
    }
}
