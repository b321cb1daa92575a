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
use crate::output::http::{Feed, WindowTraffic};
use crate::output::sink::{SharedGraph, SharedPerfetto};
use crate::pipeline::analyst::Done;
use crate::pipeline::revise::{Retained, Revision};

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
    pub(super) fn report(&self, done: Done, traffic: WindowTraffic) -> ReportLine {
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
        self.stats.lock().unwrap().analyzed_here += 1;
        let delay_ms = self.emitted_after_end_ms(&report);
        let mut json = serde_json::to_value(&report).unwrap_or_default();
        if let (Some(d), Some(o)) = (delay_ms, json.as_object_mut()) {
            o.insert("emitted_after_end_ms".into(), serde_json::json!((d * 10.0).round() / 10.0));
        }
        let line = if self.compact_lines { report.line() } else { report.readable_line() };
        ReportLine {
            time,
            at: time,
            host,
            window: report.window,
            json: json.to_string(),
            line,
            lanes,
            complete: report.complete,
            revision: 0,
            was_complete: report.complete,
            replaces: None,
            traffic,
        }
    }

    /// A window analyzed again with its late records (`revise`): the
    /// revised report replaces the one it revises in the run's totals (that
    /// one's sums taken out, these added: the totals cover windows long
    /// gone from the ones kept, so they cannot be summed again from
    /// those), and its line says what changed. It goes out at timely time
    /// `at`. (No detail: the Perfetto trace keeps the first report's.)
    /// `traffic`: what the late fragments carried.
    pub(super) fn revise(
        &self,
        done: Done,
        v: &Revision,
        retained: &mut Retained,
        at: u64,
        traffic: WindowTraffic,
    ) -> ReportLine {
        let Done { key: (time, host), mut report, .. } = done;
        report.revision = v.revision;
        let old = retained.reported((time, host), &report);
        let line = match (&old, self.compact_lines) {
            (_, true) => format!("{} (revision {})", report.line(), v.revision),
            (Some(o), false) => report.revision_line(o, &v.late_from),
            (None, false) => report.readable_line(),
        };
        ReportLine {
            time,
            at,
            host,
            window: report.window,
            json: serde_json::to_value(&report).unwrap_or_default().to_string(),
            line,
            lanes: None,
            complete: report.complete,
            revision: v.revision,
            was_complete: old.as_ref().map_or(report.complete, |o| o.complete),
            replaces: old.map(|o| serde_json::to_value(&o).unwrap_or_default().to_string()),
            traffic,
        }
    }

    /// Late records for a window no longer kept for revision (the windower
    /// revises a few windows less than are kept, so this is rare): counted
    /// as an error of the run.
    pub(super) fn too_late(&self, stream: Option<crate::analysis::model::Sid>, time: u64) {
        let who = stream.map_or("a stream".to_string(), |s| s.to_string());
        let e = format!("late records of {who} for a window no longer kept for revision (timely time {time})");
        crate::say!("sidecar: error: {e}");
        self.stats.lock().unwrap().error(e);
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
