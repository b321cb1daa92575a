//! The per-window JSON object (schema documented in the README) and its
//! one-line terminal form. Plain data; assembly is in `analyze`.

use serde::Serialize;

use crate::analysis::model::{Counters, Ns};
use crate::analysis::properties::Properties;

#[derive(Clone, Debug, Default, Serialize)]
pub struct WindowReport {
    /// Host whose timeline this window is on (hex id).
    pub host: String,
    pub window: u64,
    /// Window bounds on the host's CLOCK_MONOTONIC, ns.
    pub start_ns: Ns,
    pub end_ns: Ns,
    /// The same as UNIX time (from the host's clock samples), if known.
    pub start_unix_ns: Option<i64>,
    pub complete: bool,
    pub incomplete_reasons: Vec<String>,
    /// Other hosts analyzed alongside, on their own timelines (hex ids).
    pub unsynchronized_hosts: Vec<String>,
    /// Other hosts whose streams are in this window, converted to this
    /// host's timeline by clock sync (hex ids).
    pub synchronized_hosts: Vec<String>,
    /// Widest interval of a converted timestamp in the window, ns (every
    /// converted time is known to within it); null when nothing converted.
    pub clock_uncertainty_ns: Option<u64>,
    /// Cross-host message receives that converted times placed before their
    /// send, moved to the send.
    pub causality_clamps: u64,
    pub streams: Vec<StreamInfo>,
    pub events: u64,
    pub lost_records: u64,
    pub critical_path: CpSummary,
    pub participation: Vec<ParticipationEntry>,
    pub waiting: Vec<WorkerWaiting>,
    pub messages: MessageCounts,
    pub properties: Properties,
    pub instrumentation: Instrumentation,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct StreamInfo {
    /// The stream's host (hex): process ids are per host.
    pub host: String,
    pub process: u32,
    pub worker: u32,
    pub program: String,
    /// Part of the window the stream covers, ns.
    pub covered_ns: [Ns; 2],
    pub records: u64,
    pub faults: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ByKind {
    pub operator: Ns,
    pub data_message: Ns,
    pub progress_message: Ns,
    pub waiting_for_input: Ns,
    pub span: Ns,
    pub unknown: Ns,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CpSummary {
    pub length_ns: Ns,
    /// The part of the window the streams' timelines cover, from the
    /// earliest to the latest time on any of them (the window's length
    /// unless streams start or end inside it): what the path must span.
    pub span_ns: Ns,
    /// length == span (Theorem 3.13 holds for this window).
    pub equals_span: bool,
    /// Where the walk stopped early, if it did.
    pub stuck: Option<String>,
    pub started_before_end: bool,
    pub edges: usize,
    pub by_kind: ByKind,
    pub top_operators: Vec<OpShare>,
    pub by_worker: Vec<WorkerShare>,
    pub top_channels: Vec<ChannelShare>,
    pub top_spans: Vec<SpanShare>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct OpShare {
    pub worker: u32,
    pub operator: u32,
    pub name: String,
    pub ns: Ns,
    pub share: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SpanShare {
    pub worker: u32,
    pub span: u64,
    pub name: String,
    pub ns: Ns,
    pub share: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WorkerShare {
    pub worker: u32,
    pub ns: Ns,
    pub share: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ChannelShare {
    pub channel: u32,
    pub kind: &'static str,
    pub src_worker: u32,
    pub dst_worker: u32,
    /// Times the path crossed it (a wait it ended).
    pub crossings: u64,
    pub ns: Ns,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ParticipationEntry {
    pub worker: u32,
    /// operator | span | waiting_for_input | unknown | data_message | progress_message
    pub activity: &'static str,
    /// Operator id, span id, or channel (messages); absent otherwise.
    pub id: Option<u64>,
    pub name: Option<String>,
    pub score: f64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct WorkerWaiting {
    pub worker: u32,
    pub waiting_ns: Ns,
    pub waiting_for_input_ns: Ns,
    pub waits: u64,
    pub on: Vec<WaitedOn>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WaitedOn {
    /// The worker whose message ended the wait (None: nothing visible).
    pub worker: Option<u32>,
    pub channel: Option<u32>,
    pub kind: &'static str,
    pub ns: Ns,
    pub count: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct MessageCounts {
    /// Data messages with both halves in the window.
    pub data_matched: u64,
    /// Sent in the window, not read in it (in flight at its end).
    pub data_in_flight: u64,
    /// Read in the window, sent before it.
    pub data_from_before: u64,
    /// Halves whose other worker is not on this timeline (another host,
    /// or a stream that is missing).
    pub data_unmatched: u64,
    pub data_worker_local: u64,
    pub progress_sent: u64,
    pub progress_received: u64,
    pub progress_from_before: u64,
    pub progress_unmatched: u64,
    /// Read before it was sent (clock trouble).
    pub read_before_send: u64,
}

#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Instrumentation {
    pub records: u64,
    pub elided_schedules: u64,
    pub spin_ns: u64,
    pub bytes: u64,
    pub records_lost: u64,
    pub steps: u64,
    pub unpaired: u64,
}

impl Instrumentation {
    /// Adds another window's figures (as `Counters::add`: the counts a
    /// stream states saturate).
    pub fn add(&mut self, o: &Instrumentation) {
        self.records += o.records;
        self.elided_schedules = self.elided_schedules.saturating_add(o.elided_schedules);
        self.spin_ns = self.spin_ns.saturating_add(o.spin_ns);
        self.bytes += o.bytes;
        self.records_lost = self.records_lost.saturating_add(o.records_lost);
        self.steps += o.steps;
        self.unpaired += o.unpaired;
    }
}

impl From<&Counters> for Instrumentation {
    fn from(c: &Counters) -> Self {
        Instrumentation {
            records: c.records,
            elided_schedules: c.elided,
            spin_ns: c.spin_ns,
            bytes: c.bytes,
            records_lost: c.lost,
            steps: c.steps,
            unpaired: c.unpaired,
        }
    }
}

impl WindowReport {
    /// One compact terminal line.
    pub fn line(&self) -> String {
        let cp = &self.critical_path;
        let pct = |x: Ns| if cp.length_ns == 0 { 0.0 } else { 100.0 * x as f64 / cp.length_ns as f64 };
        let top = cp
            .top_operators
            .first()
            .map(|o| format!(" top w{}:{}({}) {:.0}%", o.worker, o.operator, o.name, o.share * 100.0))
            .unwrap_or_default();
        let waits: Ns = self.waiting.iter().map(|w| w.waiting_ns).sum();
        format!(
            "[{} {:>6}] {}{} streams {} events {} cp {:.1}ms (op {:.0}% wfi {:.0}% unk {:.0}%){} waiting {:.1}ms{}",
            &self.host[self.host.len().saturating_sub(4)..],
            self.window,
            if self.complete { "ok " } else { "INCOMPLETE " },
            if self.complete { String::new() } else { format!("({}) ", self.incomplete_reasons.join("; ")) },
            self.streams.len(),
            self.events,
            cp.length_ns as f64 / 1e6,
            pct(cp.by_kind.operator),
            pct(cp.by_kind.waiting_for_input),
            pct(cp.by_kind.unknown),
            top,
            waits as f64 / 1e6,
            if self.properties.min_in_degree.ok
                && self.properties.communication_existence.ok
                && self.properties.wait_termination.ok
            {
                ""
            } else {
                " [property violations]"
            }
        )
    }
}

/// Sums over the windows of a run, for a closing summary (`sidecar watch`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunTotals {
    pub windows: u64,
    pub incomplete: u64,
    /// Windows where a trace property check failed.
    pub property_violations: u64,
    pub instrumentation: Instrumentation,
    /// Worker streams seen: (host, process, worker), the first
    /// [`RunTotals::STREAMS_KEPT`] of them (a live sidecar serving job after
    /// job for months must not keep one per job).
    pub streams: std::collections::BTreeSet<(String, u32, u32)>,
    /// Traced worker time: the sum over windows and streams of the time
    /// each stream covered, ns.
    pub worker_ns: Ns,
    /// Critical path length summed over windows, ns.
    pub critical_path_ns: Ns,
    /// Critical path time per (worker, operator name), ns.
    pub operators: std::collections::BTreeMap<(u32, String), Ns>,
    /// Waiting time per (worker, worker waited on; None: not visible), ns.
    pub waits: std::collections::BTreeMap<(u32, Option<u32>), Ns>,
}

impl RunTotals {
    pub const STREAMS_KEPT: usize = 4096;

    pub fn add(&mut self, r: &WindowReport) {
        self.windows += 1;
        self.incomplete += (!r.complete) as u64;
        let p = &r.properties;
        self.property_violations +=
            !(p.min_in_degree.ok && p.communication_existence.ok && p.wait_termination.ok) as u64;
        self.instrumentation.add(&r.instrumentation);
        for s in &r.streams {
            if self.streams.len() < Self::STREAMS_KEPT {
                self.streams.insert((s.host.clone(), s.process, s.worker));
            }
            self.worker_ns += s.covered_ns[1].saturating_sub(s.covered_ns[0]);
        }
        self.critical_path_ns += r.critical_path.length_ns;
        // Only the top operators travel in the report: the sums are of those.
        for o in &r.critical_path.top_operators {
            *self.operators.entry((o.worker, o.name.clone())).or_default() += o.ns;
        }
        for w in &r.waiting {
            for on in &w.on {
                *self.waits.entry((w.worker, on.worker)).or_default() += on.ns;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's totals keep the streams they name up to a bound, and go on
    /// summing the time of every stream past it.
    #[test]
    fn run_totals_keep_a_bounded_set_of_streams() {
        let mut t = RunTotals::default();
        let jobs = RunTotals::STREAMS_KEPT as u32 + 500;
        for pid in 0..jobs {
            let s = StreamInfo { host: "h".into(), process: pid, covered_ns: [0, 10], ..Default::default() };
            t.add(&WindowReport { streams: vec![s], ..Default::default() });
        }
        assert_eq!(t.streams.len(), RunTotals::STREAMS_KEPT);
        assert_eq!((t.windows, t.worker_ns), (jobs as u64, 10 * jobs as u64));
    }
}
