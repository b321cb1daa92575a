//! An analyzed window → its report line (JSON and terminal), on the
//! window's owner: the window's part of the Perfetto trace is written there
//! too, so its detail never travels.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::outputs::{Outputs, ReportLine};
use super::{Inputs, RunStats, Shared};
use crate::analysis::model::Ns;
use crate::analysis::report::WindowReport;
use crate::io::now_unix_ns;
use crate::output::http::Feed;
use crate::output::sink::{SharedGraph, SharedPerfetto};
use crate::pipeline::analyst::Done;

/// Turns a worker's analyzed windows into report lines.
pub(super) struct Reporter {
    width: Ns,
    /// Live input's stop flag (`None`: files).
    stop: Option<Arc<AtomicBool>>,
    perfetto: Option<SharedPerfetto>,
    graph: Option<SharedGraph>,
    feed: Option<Feed>,
    compact_lines: bool,
    stats: Arc<Mutex<RunStats>>,
    outputs: Arc<Outputs>,
}

impl Reporter {
    pub(super) fn new(shared: &Shared) -> Reporter {
        Reporter {
            width: shared.settings.width,
            stop: match &*shared.inputs {
                Inputs::Live { stop, .. } => Some(stop.clone()),
                _ => None,
            },
            perfetto: shared.perfetto.clone(),
            graph: shared.graph.clone(),
            feed: shared.feed.clone(),
            compact_lines: shared.compact_lines,
            stats: shared.stats.clone(),
            outputs: shared.outputs.clone(),
        }
    }

    /// Whether windows need their detail (for the Perfetto trace, the
    /// dataflow graph, or the dashboard's lanes, graph and Perfetto
    /// download).
    pub(super) fn wants_detail(&self) -> bool {
        self.perfetto.is_some() || self.graph.is_some() || self.feed.is_some()
    }

    /// A window analyzed: its Perfetto part written, its report added to
    /// the run's totals and made into its lines.
    pub(super) fn report(&self, done: Done) -> ReportLine {
        let Done { key: (time, host), report, detail } = done;
        if let (Some(p), Some(detail)) = (&self.perfetto, &detail) {
            if !self.outputs.stopped() {
                if let Err(e) = p.lock().unwrap().window(detail) {
                    self.outputs.fail("the Perfetto trace", &e);
                }
            }
        }
        if let (Some(g), Some(detail)) = (&self.graph, &detail) {
            g.lock().unwrap().add(detail);
        }
        // The dashboard's lanes travel with the line; the detail itself
        // goes to the feed (for its Perfetto download).
        let lanes = match (&self.feed, detail) {
            (Some(feed), Some(detail)) => {
                let lanes = crate::output::http::lanes::lanes(&detail).to_string();
                feed.detail(detail);
                Some(lanes)
            }
            _ => None,
        };
        self.stats.lock().unwrap().totals.add(&report);
        let delay_ms = self.emitted_after_end_ms(&report);
        let mut json = serde_json::to_value(&report).unwrap_or_default();
        if let (Some(d), Some(o)) = (delay_ms, json.as_object_mut()) {
            o.insert("emitted_after_end_ms".into(), serde_json::json!((d * 10.0).round() / 10.0));
        }
        let line = if self.compact_lines { report.line() } else { report.readable_line() };
        ReportLine { time, host, window: report.window, json: json.to_string(), line, lanes, complete: report.complete }
    }

    /// Live: how late the window's line is. A window cut short (Ctrl-C) is
    /// analyzed before its end: not late, 0 (its negative distance to the
    /// end would read as a latency and measures nothing). Before a stop, a
    /// negative value is kept: a window analyzed before its end would be a
    /// clock fault.
    fn emitted_after_end_ms(&self, report: &WindowReport) -> Option<f64> {
        let stopping = self.stop.as_ref().is_some_and(|f| f.load(Ordering::Relaxed));
        report.start_unix_ns.filter(|_| self.stop.is_some()).map(|s| {
            let d = now_unix_ns() - (s as i128 + self.width as i128);
            (if stopping { d.max(0) } else { d }) as f64 / 1e6
        })
    }
}
