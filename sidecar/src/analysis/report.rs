//! The per-window JSON object (schema documented in the README) and its
//! one-line terminal form. Plain data; assembly is in `analyze`.

use serde::{Deserialize, Serialize};

use crate::analysis::model::{Counters, Ns};
use crate::analysis::properties::Properties;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
    /// Workers of the job (global indices, the first 16) whose process had
    /// not started yet in this window: a cluster's processes start up to a
    /// second apart. The window is incomplete, not faulty; its figures are
    /// kept out of the run's totals, and no wait is on these workers
    /// (waiting for them to start is counted under `not_started`). Absent
    /// when every process is there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers_not_started: Vec<u32>,
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
    /// What speeding up the critical path's top operators would save
    /// (`crate::analysis::whatif`), the largest saving first; with
    /// `sidecar whatif`, the speedup asked for.
    pub what_if: Vec<WhatIf>,
    /// Differential arrangements as the window leaves them, by worker and
    /// operator, the most records first (absent when no stream reports
    /// any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arrangements: Vec<ArrangementReport>,
    /// Live: the how-manieth report of this window (absent: the first). A
    /// window whose late records arrived after its report is analyzed again
    /// with them and reported again with the next number; a consumer keeps
    /// the report with the highest number (it replaces the earlier ones).
    #[serde(default, skip_serializing_if = "is_first")]
    pub revision: u32,
    /// Live: workers whose records stopped while their process's writer
    /// went on sending frames, and since when (ns, this host's clock):
    /// inside one step, most often one long execution, whose records come
    /// when it ends (then the window is revised). Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inside_execution: Vec<InsideExecution>,
    /// Scopes whose progress messages the streams do not carry (the probe
    /// could not record them: timely logs them under the scope's timestamp
    /// type, and the adapter did not know it), by worker: the waits they
    /// ended read as waiting for input, and the what-if keeps those waits.
    /// Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untraced_progress: Vec<UntracedScope>,
}

/// A scope whose progress is not traced (see
/// `WindowReport::untraced_progress`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct UntracedScope {
    pub worker: u32,
    pub operator: u32,
    pub name: String,
}

/// A worker silent inside one step (see `WindowReport::inside_execution`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct InsideExecution {
    pub worker: u32,
    pub since_ns: Ns,
}

/// Names in backquotes, comma-separated, as the lines name scopes and
/// operators: `` `Iterative`, `Odd` ``.
pub fn quoted_names(names: &[impl AsRef<str>]) -> String {
    names.iter().map(|n| format!("`{}`", n.as_ref())).collect::<Vec<_>>().join(", ")
}

fn is_first(n: &u32) -> bool {
    *n == 0
}

/// One arrangement (a differential trace and its batcher) of one worker at
/// the end of a window: the levels the probe's Arrangement records set.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ArrangementReport {
    pub worker: u32,
    /// The operator that holds the trace (its id and name).
    pub operator: u32,
    pub name: String,
    /// Updates held in the trace's batches at the window's end, and the
    /// most it held during the window.
    pub records: u64,
    pub peak_records: u64,
    /// Batches the trace holds; merges started and not completed.
    pub batches: u64,
    pub merges: u64,
    /// The batcher (updates received, not yet sealed into a batch): its
    /// updates, the bytes its buffers use and have allocated, its
    /// allocations.
    pub batcher_records: u64,
    pub batcher_bytes: u64,
    pub batcher_capacity_bytes: u64,
    pub batcher_allocations: u64,
    /// Handles sharing the trace.
    pub shares: u64,
    /// Merge work the trace fell short of, summed since it started.
    pub merge_shortfall: u64,
}

/// One what-if prediction for the window (DProf §5.2: the window replayed
/// with the operator faster).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WhatIf {
    /// The speedup as a spec: `w0:Consume=2`, `Consume=inf`.
    pub speedup: String,
    /// The one worker it is on (None: every worker).
    pub worker: Option<u32>,
    pub operator: String,
    /// How many times faster (`inf`: no time at all).
    pub factor: String,
    /// The window's measured span and the replay's, ns.
    pub measured_ns: Ns,
    pub predicted_ns: Ns,
    pub saved_ns: Ns,
    /// `saved_ns` over `measured_ns`.
    pub saved_share: f64,
    /// What reading the critical path's shares would say: the operator's
    /// time on the path times `1 − 1/factor`. (Wrong where another path
    /// takes over.)
    pub naive_saved_ns: Ns,
}

impl WhatIf {
    /// The least share of its time a prediction saves for a line to say
    /// it: what reads as 1 % (less would read "−0 %", no lead). The JSON
    /// keeps every prediction.
    pub const SAID_FROM: f64 = 0.005;

    /// In words: `w0 Consume 2× faster: window −48 %`.
    pub fn words(&self) -> String {
        format!("{}: window −{:.0} %", self.what(), self.saved_share * 100.0)
    }

    /// The speedup in words: `w0 Consume 2× faster`.
    pub fn what(&self) -> String {
        let who = self.worker.map(|w| format!("w{w} ")).unwrap_or_else(|| "all workers' ".into());
        let how = if self.factor == "inf" { "taking no time".to_string() } else { format!("{}× faster", self.factor) };
        format!("{who}{} {how}", self.operator)
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StreamInfo {
    /// The stream's host (hex): process ids are per host.
    pub host: String,
    pub process: u32,
    pub worker: u32,
    /// The host's name, in a window with streams of more than one host
    /// (absent otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_name: String,
    pub program: String,
    /// Part of the window the stream covers, ns.
    pub covered_ns: [Ns; 2],
    pub records: u64,
    pub faults: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ByKind {
    pub operator: Ns,
    pub data_message: Ns,
    pub progress_message: Ns,
    pub waiting_for_input: Ns,
    pub span: Ns,
    pub unknown: Ns,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
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
    /// The workers the top operator ties on (its critical participation
    /// within 10 % of each other's on each): the path went through one of
    /// them, the others were as critical. Empty (absent) when no tie.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tie: Vec<u32>,
}

impl CpSummary {
    /// The top operator in words when it ties: `ArrangeByKey on w0, w1
    /// (tie)`.
    pub fn tie_words(&self) -> Option<String> {
        let top = self.top_operators.first().filter(|_| !self.tie.is_empty())?;
        let on: Vec<String> = self.tie.iter().map(|w| format!("w{w}")).collect();
        Some(format!("{} on {} (tie)", top.name, on.join(", ")))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OpShare {
    pub worker: u32,
    pub operator: u32,
    pub name: String,
    pub ns: Ns,
    pub share: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SpanShare {
    pub worker: u32,
    pub span: u64,
    pub name: String,
    pub ns: Ns,
    pub share: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
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

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkerWaiting {
    pub worker: u32,
    pub waiting_ns: Ns,
    pub waiting_for_input_ns: Ns,
    pub waits: u64,
    pub on: Vec<WaitedOn>,
    /// The wait still open at the window's end (its gap goes on past it):
    /// typed by what ends it, in a later window, which carries this part
    /// (`carried`); not counted in the figures above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenWait>,
    /// The part of a wait that earlier windows reported open and that ended
    /// (or was typed) in this one: counted here against what ended it, in
    /// `on[].carried_ns` for a wait on a message. Not in the figures above,
    /// which are this window's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<CarriedWait>,
}

/// A wait open at a window's end.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct OpenWait {
    /// When the wait began (maybe in an earlier window), ns.
    pub since_ns: Ns,
    /// Its time in this window, ns.
    pub ns: Ns,
}

/// Earlier windows' open part of a wait, typed where it ended.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CarriedWait {
    /// When the wait began (the `since_ns` its open windows said), ns.
    pub since_ns: Ns,
    /// Its time before this window (the sum of those windows' `open.ns`).
    pub ns: Ns,
    /// `waiting` (then `worker`, `channel` and `message` name what ended
    /// it; `worker` null: nothing visible) or `waiting_for_input`.
    pub kind: &'static str,
    pub worker: Option<u32>,
    pub channel: Option<u32>,
    pub message: Option<&'static str>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WaitedOn {
    /// The worker whose message ended the wait (None: nothing visible).
    pub worker: Option<u32>,
    pub channel: Option<u32>,
    pub kind: &'static str,
    pub ns: Ns,
    pub count: u64,
    /// Time of a wait on it that earlier windows reported open, ended in
    /// this window (`WorkerWaiting::carried`); not in `ns`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub carried_ns: Ns,
}

fn is_zero(x: &Ns) -> bool {
    *x == 0
}

impl WaitedOn {
    /// All the time of waits on it this window counts: its own and the
    /// earlier windows' carried here.
    pub fn total_ns(&self) -> Ns {
        self.ns + self.carried_ns
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
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

impl MessageCounts {
    /// Adds `o`'s counts.
    pub fn add(&mut self, o: &MessageCounts) {
        self.data_matched += o.data_matched;
        self.data_in_flight += o.data_in_flight;
        self.data_from_before += o.data_from_before;
        self.data_unmatched += o.data_unmatched;
        self.data_worker_local += o.data_worker_local;
        self.progress_sent += o.progress_sent;
        self.progress_received += o.progress_received;
        self.progress_from_before += o.progress_from_before;
        self.progress_unmatched += o.progress_unmatched;
        self.read_before_send += o.read_before_send;
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
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
    /// [`Instrumentation::add`] undone.
    pub fn remove(&mut self, o: &Instrumentation) {
        self.records = self.records.saturating_sub(o.records);
        self.elided_schedules = self.elided_schedules.saturating_sub(o.elided_schedules);
        self.spin_ns = self.spin_ns.saturating_sub(o.spin_ns);
        self.bytes = self.bytes.saturating_sub(o.bytes);
        self.records_lost = self.records_lost.saturating_sub(o.records_lost);
        self.steps = self.steps.saturating_sub(o.steps);
        self.unpaired = self.unpaired.saturating_sub(o.unpaired);
    }

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

/// A duration for people: `2.5 ms`, `249 ms`, `12.3 s`.
pub fn human_ns(ns: Ns) -> String {
    let ms = ns as f64 / 1e6;
    if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1e3)
    } else if ms >= 10.0 {
        format!("{ms:.0} ms")
    } else if ns >= 1_000_000 || ns == 0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.0} µs", ns as f64 / 1e3)
    }
}

impl WindowReport {
    /// The terminal line of a revised report (`revision` > 0), against the
    /// report it replaces: `window 12 (250 ms) revised (late records of
    /// w0): INCOMPLETE → complete; critical path 120 ms → 250 ms: w0
    /// ArrangeByKey 100% (was w1 Feedback 40%); waits: w1→w0 240 ms (was
    /// w0 waiting since 1.2 s (open))`. Only what changed is named.
    pub fn revision_line(&self, old: &WindowReport, late_from: &[u32]) -> String {
        let mut s = format!("window {} ({}) revised", self.window, human_ns(self.end_ns.saturating_sub(self.start_ns)));
        if !late_from.is_empty() {
            let who: Vec<String> = late_from.iter().map(|&w| self.who(w)).collect();
            s += &format!(" (late records of {})", who.join(", "));
        }
        let mut changes = Vec::new();
        let state = |r: &WindowReport| if r.complete { "complete".to_string() } else { "INCOMPLETE".to_string() };
        if old.complete != self.complete || old.incomplete_reasons != self.incomplete_reasons {
            let now = if self.complete {
                state(self)
            } else {
                format!("INCOMPLETE ({})", self.incomplete_reasons.join("; "))
            };
            changes.push(format!("{} → {now}", state(old)));
        }
        let top = |r: &WindowReport| {
            let t = r.critical_path.top_operators.first();
            r.critical_path
                .tie_words()
                .or_else(|| t.map(|o| format!("{} {} {:.0}%", r.who(o.worker), o.name, o.share * 100.0)))
        };
        let (cp, ocp) = (self.critical_path.length_ns, old.critical_path.length_ns);
        let (t, ot) = (top(self), top(old));
        if cp != ocp || t != ot {
            let mut c = if cp != ocp {
                format!("critical path {} → {}", human_ns(ocp), human_ns(cp))
            } else {
                "critical path".to_string()
            };
            if t != ot {
                c += &format!(": {} (was {})", t.as_deref().unwrap_or("none"), ot.as_deref().unwrap_or("none"));
            }
            changes.push(c);
        }
        let (w, ow) = (self.top_waits(2), old.top_waits(2));
        if w != ow {
            changes.push(format!("waits: {w} (was {ow})"));
        }
        if self.events != old.events {
            changes.push(format!("{} events (was {})", self.events, old.events));
        }
        if changes.is_empty() {
            changes.push("its figures are unchanged".into());
        }
        s + ": " + &changes.join("; ")
    }

    /// One terminal line that explains itself: `window 12 (250 ms)
    /// complete  critical path 250 ms: w0 Consume 99%  waits: w1→w0 249 ms
    /// what-if: w0 Consume 2× faster: window −48 %  2 streams, 524 events`
    /// (the compact form of earlier versions is [`WindowReport::line`]).
    pub fn readable_line(&self) -> String {
        let cp = &self.critical_path;
        let mut s = format!("window {} ({})", self.window, human_ns(self.end_ns.saturating_sub(self.start_ns)));
        if !self.synchronized_hosts.is_empty() || !self.unsynchronized_hosts.is_empty() {
            s += &format!(" host {}", &self.host[self.host.len().saturating_sub(4)..]);
        }
        if self.complete {
            s += "  complete";
        } else {
            s += &format!("  INCOMPLETE ({})", self.incomplete_reasons.join("; "));
        }
        s += &format!("  critical path {}", human_ns(cp.length_ns));
        let shown: Vec<&OpShare> = cp.top_operators.iter().take(2).filter(|o| o.share >= 0.05).collect();
        // (Two of one name on one worker, as differential names every
        // `arrange` "Arrange", told apart by their operators.)
        let alike = shown.len() == 2 && (shown[0].worker, &shown[0].name) == (shown[1].worker, &shown[1].name);
        let mut tops: Vec<String> = shown
            .iter()
            .map(|o| {
                let op = if alike { format!(" (op {})", o.operator) } else { String::new() };
                format!("{} {}{op} {:.0}%", self.who(o.worker), o.name, o.share * 100.0)
            })
            .collect();
        if let (Some(t), Some(first)) = (cp.tie_words(), tops.first_mut()) {
            *first = t;
        }
        if !tops.is_empty() {
            s += &format!(": {}", tops.join(", "));
        }
        // Messages on the path take time only between processes.
        let transit = cp.by_kind.data_message + cp.by_kind.progress_message;
        let tr = if cp.length_ns == 0 { 0.0 } else { transit as f64 / cp.length_ns as f64 };
        if tr >= 0.05 {
            s += &format!(" (transit between processes {:.0}%)", tr * 100.0);
        }
        let share = |ns: Ns| if cp.length_ns == 0 { 0.0 } else { ns as f64 / cp.length_ns as f64 };
        let wfi = share(cp.by_kind.waiting_for_input);
        if wfi >= 0.1 {
            s += &format!(" (waiting for input {:.0}%)", wfi * 100.0);
        }
        // The path's `unknown` time: a worker neither in an operator nor
        // waiting (timely's own work between operators, the program's code
        // between steps; docs/analysis.md).
        let outside = share(cp.by_kind.unknown);
        if outside >= 0.1 {
            s += &format!(" (outside operators {:.0}%)", outside * 100.0);
        }
        s += &format!("  waits: {}", self.top_waits(2));
        if let Some(w) = self.best_what_if() {
            let words = w.words();
            // (In a multi-host window, the worker with its host's name.)
            let words = match w.worker.map(|k| (format!("w{k} "), self.who(k))) {
                Some((plain, named)) if words.starts_with(&plain) => format!("{named} {}", &words[plain.len()..]),
                _ => words,
            };
            s += &format!("  what-if: {words}");
        }
        if !self.untraced_progress.is_empty() {
            s += &format!("  (progress not traced in {})", self.untraced_scope_names());
        }
        s += &format!("  {} streams, {} events", self.streams.len(), self.events);
        if self.lost_records > 0 {
            s += &format!(", {} records lost", self.lost_records);
        }
        let p = &self.properties;
        let failed: Vec<&str> = [
            ("min in-degree", p.min_in_degree.ok),
            ("communication existence", p.communication_existence.ok),
            ("wait termination", p.wait_termination.ok),
        ]
        .into_iter()
        .filter(|(_, ok)| !ok)
        .map(|(n, _)| n)
        .collect();
        if !failed.is_empty() {
            s += &format!("  property violations: {}", failed.join(", "));
        }
        s
    }

    /// The names of the scopes of `untraced_progress`, each once, sorted.
    pub fn untraced_scopes(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.untraced_progress.iter().map(|u| u.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// [`WindowReport::untraced_scopes`] in backquotes, for a line.
    pub fn untraced_scope_names(&self) -> String {
        quoted_names(&self.untraced_scopes())
    }

    /// Worker `w` as the line names it: `w0`, or in a window with streams
    /// of more than one host, with its host's name (`hostB/w0`).
    fn who(&self, w: u32) -> String {
        match self.streams.iter().find(|s| s.worker == w && !s.host_name.is_empty()) {
            Some(s) => format!("{}/w{w}", s.host_name),
            None => format!("w{w}"),
        }
    }

    /// The prediction the window line says: the largest saving of a 2×
    /// speedup (what a real fix might give; taking no time is the bound),
    /// else the largest; none that saves less than the line's 1 % (a path
    /// nearly all outside operators or waiting for input, whose top
    /// operator is a sliver of it: "−0 %" is no lead).
    pub fn best_what_if(&self) -> Option<&WhatIf> {
        let first = self.what_if.iter().find(|w| w.factor == "2").or(self.what_if.first());
        first.filter(|w| w.saved_ns > 0 && w.saved_share >= WhatIf::SAID_FROM)
    }

    /// The `n` largest waits by (worker, worker waited on): `w1→w0 249 ms,
    /// w2→? 3.0 ms` (`?`: no visible cause; `w1→not started`: waiting for
    /// a worker that was not running yet), or `none`.
    fn top_waits(&self, n: usize) -> String {
        const NOT_STARTED: Option<u32> = Some(u32::MAX);
        let mut by: std::collections::BTreeMap<(u32, Option<u32>), Ns> = Default::default();
        for w in &self.waiting {
            for on in &w.on {
                let key = if on.kind == "not_started" { NOT_STARTED } else { on.worker };
                *by.entry((w.worker, key)).or_default() += on.total_ns();
            }
        }
        let mut v: Vec<((u32, Option<u32>), Ns)> = by.into_iter().filter(|(_, ns)| *ns > 0).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        // A worker silent inside one step is not waiting: it says so.
        let inside = |w: u32| self.inside_execution.iter().find(|i| i.worker == w);
        let mut open: Vec<String> = self
            .inside_execution
            .iter()
            .map(|i| {
                format!(
                    "{} inside one execution since {}",
                    self.who(i.worker),
                    human_ns(self.end_ns.saturating_sub(i.since_ns))
                )
            })
            .collect();
        open.extend(
            self.waiting
                .iter()
                .filter(|w| inside(w.worker).is_none())
                .filter_map(|w| w.open.as_ref().map(|o| (w.worker, o)))
                .map(|(w, o)| {
                    format!("{} waiting since {} (open)", self.who(w), human_ns(self.end_ns.saturating_sub(o.since_ns)))
                }),
        );
        if v.is_empty() && open.is_empty() {
            return "none".into();
        }
        let more = v.len().saturating_sub(n);
        let mut parts: Vec<String> = v
            .iter()
            .take(n)
            .map(|((w, on), ns)| {
                let on = match *on {
                    NOT_STARTED => "not started".to_string(),
                    None => "?".to_string(),
                    Some(o) => self.who(o),
                };
                format!("{}→{on} {}", self.who(*w), human_ns(*ns))
            })
            .collect();
        if more > 0 {
            parts.push(format!("+{more} more"));
        }
        parts.extend(open);
        parts.join(", ")
    }

    /// One compact terminal line (`--compact-lines`): `[3409  47296] ok
    /// streams 2 events 524 cp 250.0ms (op 99% wfi 0% unk 1%) top
    /// w0:2(Consume) 99% waiting 249.0ms`.
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

/// Offline, with every window at hand: moves each wait carried into a
/// window back into the earlier windows of its host that reported it open
/// (the same worker, the same `since_ns`, window after window), counting
/// their open part in their figures as the wait's type says; the later
/// window then carries nothing (the time is counted once). The `open`
/// marks stay: they say what was known when the window was reported.
/// Reports in window order. (Live, a window goes out before its open waits
/// end: the later report carries them, and the run's totals count them
/// there.)
pub fn fold_carried(reps: &mut [WindowReport]) {
    for k in 1..reps.len() {
        let (before, rest) = reps.split_at_mut(k);
        let r = &mut rest[0];
        for w in r.waiting.iter_mut() {
            let Some(c) = w.carried.take() else { continue };
            let mut next_window = r.window;
            for e in before.iter_mut().rev().filter(|e| e.host == r.host) {
                if e.window + 1 != next_window {
                    break;
                }
                next_window = e.window;
                let Some(ew) = e.waiting.iter_mut().find(|x| x.worker == w.worker) else { break };
                let Some(ns) = ew.open.as_ref().filter(|o| o.since_ns == c.since_ns).map(|o| o.ns) else { break };
                fold_one(ew, &c, ns);
            }
            w.on.iter_mut().for_each(|o| o.carried_ns = 0);
        }
    }
}

/// Counts `ns` of the carried wait `c` in a window that had it open.
fn fold_one(ew: &mut WorkerWaiting, c: &CarriedWait, ns: Ns) {
    if c.kind == "waiting_for_input" {
        ew.waiting_for_input_ns += ns;
        return;
    }
    ew.waiting_ns += ns;
    ew.waits += 1;
    let kind = c.message.unwrap_or("unknown");
    match ew.on.iter_mut().find(|o| (o.worker, o.channel, o.kind) == (c.worker, c.channel, kind)) {
        Some(o) => {
            o.ns += ns;
            o.count += 1;
        }
        None => ew.on.push(WaitedOn { worker: c.worker, channel: c.channel, kind, ns, count: 1, carried_ns: 0 }),
    }
    ew.on.sort_by(|a, b| b.total_ns().cmp(&a.total_ns()).then(a.worker.cmp(&b.worker)).then(a.channel.cmp(&b.channel)));
}

/// Sums over the windows of a run, for a closing summary (`sidecar watch`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunTotals {
    pub windows: u64,
    pub incomplete: u64,
    /// Windows in which a process of the job had not started yet
    /// (`WindowReport::workers_not_started`): counted in `windows`,
    /// `incomplete`, the streams and the tracing cost, kept out of the
    /// job's figures (critical path, waits, what-if: the job was not all
    /// there).
    pub starting: u64,
    /// Time workers spent waiting for a worker that had not started yet,
    /// in the windows counted (a cluster's last process starting), ns.
    pub not_started_ns: Ns,
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
    /// Of it, messages in transit between processes, ns.
    pub transit_ns: Ns,
    /// Of it, waiting for input, and time outside operators (`unknown`), ns.
    pub input_ns: Ns,
    pub outside_ns: Ns,
    /// Critical path time per (worker, operator name), ns.
    pub operators: std::collections::BTreeMap<(u32, String), Ns>,
    /// Waiting time per (worker, worker waited on; None: not visible), ns.
    pub waits: std::collections::BTreeMap<(u32, Option<u32>), Ns>,
    /// What-if per speedup, summed over the windows that predicted it:
    /// (saved ns, measured ns, the last window's entry, for its words).
    pub what_if: std::collections::BTreeMap<String, (Ns, Ns, WhatIf)>,
    /// The windows' measured spans summed, ns (the job's time, as the
    /// what-if predictions count it).
    pub span_ns: Ns,
    /// Windows whose top operator tied across workers, by the tie in words
    /// (`ArrangeByKey on w0, w1 (tie)`).
    pub ties: std::collections::BTreeMap<String, u64>,
    /// Windows whose streams did not carry a scope's progress, by the
    /// scope's name (`WindowReport::untraced_progress`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub untraced_progress: std::collections::BTreeMap<String, u64>,
    /// Differential arrangements by (worker, operator id): the last level
    /// of records they held (before a drop to nothing, which is the trace
    /// going away) and the most they ever held, the
    /// [`RunTotals::ARRANGEMENTS_KEPT`] that held the most (in the summary
    /// as [`RunTotals::largest_arrangements`]).
    #[serde(skip)]
    pub arrangements: std::collections::BTreeMap<(u32, u32), ArrangementTotal>,
    /// At most the least peak among `arrangements` once it is full (see
    /// [`RunTotals::add`]).
    #[serde(skip)]
    pub least_arrangement_kept: u64,
    /// The probes' figures about themselves, by (host, process): the last
    /// Stats frame each process sent (running totals), at most
    /// [`RunTotals::STREAMS_KEPT`] processes; past that, the final figures
    /// of ended processes are folded into [`RunTotals::probes_folded`].
    #[serde(skip)]
    pub probes: std::collections::BTreeMap<(u64, u32), ProcessFigures>,
    /// Processes folded out of `probes` (a live sidecar serving job after
    /// job), and their final figures summed: those without an engine
    /// adapter apart from those with one (their pushes are estimated, the
    /// others' are in the adapter's time).
    #[serde(skip)]
    pub probes_folded: [(u64, ProbeFigures); 2],
}

/// A probe's figures about itself, as its Stats frames carry them (running
/// totals since it started, summed over its workers; None: the probe did
/// not say, as one without an engine adapter says nothing of the
/// adapter's cost).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeFigures {
    pub workers: Option<u64>,
    pub produced: Option<u64>,
    pub written: Option<u64>,
    pub lost: Option<u64>,
    pub elided: Option<u64>,
    pub local_messages: Option<u64>,
    pub bytes: Option<u64>,
    pub writer_cpu_ns: Option<u64>,
    pub adapter_ns: Option<u64>,
    pub engine_events: Option<u64>,
    pub engine_log_ns: Option<u64>,
    pub engine_flushes: Option<u64>,
    pub engine_flush_ns: Option<u64>,
    pub idle_flushes: Option<u64>,
    pub idle_engine_ns: Option<u64>,
    pub idle_adapter_ns: Option<u64>,
    /// The probe sent them at its shutdown: final.
    pub last: bool,
}

impl ProbeFigures {
    /// Adds another process's figures (saturating: they come from outside);
    /// a figure is known if either knows it.
    pub fn add(&mut self, o: &ProbeFigures) {
        fn sum(a: &mut Option<u64>, b: Option<u64>) {
            *a = match (*a, b) {
                (Some(x), Some(y)) => Some(x.saturating_add(y)),
                (x, y) => x.or(y),
            };
        }
        sum(&mut self.workers, o.workers);
        sum(&mut self.produced, o.produced);
        sum(&mut self.written, o.written);
        sum(&mut self.lost, o.lost);
        sum(&mut self.elided, o.elided);
        sum(&mut self.local_messages, o.local_messages);
        sum(&mut self.bytes, o.bytes);
        sum(&mut self.writer_cpu_ns, o.writer_cpu_ns);
        sum(&mut self.adapter_ns, o.adapter_ns);
        sum(&mut self.engine_events, o.engine_events);
        sum(&mut self.engine_log_ns, o.engine_log_ns);
        sum(&mut self.engine_flushes, o.engine_flushes);
        sum(&mut self.engine_flush_ns, o.engine_flush_ns);
        sum(&mut self.idle_flushes, o.idle_flushes);
        sum(&mut self.idle_engine_ns, o.idle_engine_ns);
        sum(&mut self.idle_adapter_ns, o.idle_adapter_ns);
        self.last &= o.last;
    }
}

/// One process's latest figures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessFigures {
    pub program: String,
    /// The process-wide frame number of the Stats frame they came from.
    pub seq: u64,
    pub figures: ProbeFigures,
}

/// One arrangement over a run: what [`RunTotals`] keeps of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArrangementTotal {
    pub name: String,
    /// The last nonzero level of records held.
    pub records: u64,
    pub peak_records: u64,
}

impl RunTotals {
    pub const STREAMS_KEPT: usize = 4096;
    pub const ARRANGEMENTS_KEPT: usize = 4096;

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
        if !r.workers_not_started.is_empty() {
            self.starting += 1;
            return;
        }
        self.critical_path_ns += r.critical_path.length_ns;
        let k = &r.critical_path.by_kind;
        self.transit_ns += k.data_message + k.progress_message;
        self.input_ns += k.waiting_for_input;
        self.outside_ns += k.unknown;
        // Only the top operators travel in the report: the sums are of those.
        for o in &r.critical_path.top_operators {
            *self.operators.entry((o.worker, o.name.clone())).or_default() += o.ns;
        }
        // A wait open across windows counts where it ended, against its
        // cause (`carried_ns`).
        for w in &r.waiting {
            for on in &w.on {
                if on.kind == "not_started" {
                    self.not_started_ns += on.total_ns();
                    continue;
                }
                *self.waits.entry((w.worker, on.worker)).or_default() += on.total_ns();
            }
        }
        self.span_ns += r.critical_path.span_ns;
        if let Some(t) = r.critical_path.tie_words() {
            // (Bounded like the streams: one entry per operator and set
            // of workers.)
            if self.ties.len() < Self::STREAMS_KEPT || self.ties.contains_key(&t) {
                *self.ties.entry(t).or_default() += 1;
            }
        }
        for name in r.untraced_scopes() {
            // (Bounded like the ties.)
            if self.untraced_progress.len() < Self::STREAMS_KEPT || self.untraced_progress.contains_key(name) {
                *self.untraced_progress.entry(name.to_string()).or_default() += 1;
            }
        }
        for w in &r.what_if {
            let e = self.what_if.entry(w.speedup.clone()).or_insert_with(|| (0, 0, w.clone()));
            e.0 += w.saved_ns;
            e.1 += w.measured_ns;
        }
        for a in &r.arrangements {
            let key = (a.worker, a.operator);
            if !self.arrangements.contains_key(&key) && self.arrangements.len() >= Self::ARRANGEMENTS_KEPT {
                // Full: a new one takes the place of the one that held the
                // least, if it holds more (a program that builds and drops
                // queries has made thousands of traces by the time its
                // largest comes). `least_arrangement_kept` is at most the
                // least peak kept (peaks only grow; a scan sets it), so
                // equal newcomers cost no scan.
                let peak = a.peak_records.max(a.records);
                if peak <= self.least_arrangement_kept {
                    continue;
                }
                let least =
                    self.arrangements.iter().min_by_key(|(_, t)| t.peak_records).map(|(k, t)| (*k, t.peak_records));
                let Some((k, held)) = least else { continue };
                self.least_arrangement_kept = held;
                if held >= peak {
                    continue;
                }
                self.arrangements.remove(&k);
            }
            let t = self.arrangements.entry(key).or_default();
            if t.name.is_empty() {
                t.name.clone_from(&a.name);
            }
            if a.records > 0 {
                t.records = a.records;
            }
            t.peak_records = t.peak_records.max(a.peak_records).max(a.records);
        }
    }

    /// Takes a window's report back out ([`RunTotals::add`] undone), for a
    /// revised report to be added in its place: the sums are subtracted.
    /// The streams seen, the arrangements' levels and the what-if's last
    /// entry are left as they are (a set, a level and a peak cannot be
    /// taken back; the revised report, added next, sets them again).
    pub fn remove(&mut self, r: &WindowReport) {
        fn sub<K: Ord>(m: &mut std::collections::BTreeMap<K, Ns>, k: K, ns: Ns) {
            if let Some(v) = m.get_mut(&k) {
                *v = v.saturating_sub(ns);
                if *v == 0 {
                    m.remove(&k);
                }
            }
        }
        self.windows = self.windows.saturating_sub(1);
        self.incomplete = self.incomplete.saturating_sub((!r.complete) as u64);
        let p = &r.properties;
        self.property_violations = self
            .property_violations
            .saturating_sub(!(p.min_in_degree.ok && p.communication_existence.ok && p.wait_termination.ok) as u64);
        self.instrumentation.remove(&r.instrumentation);
        for s in &r.streams {
            self.worker_ns = self.worker_ns.saturating_sub(s.covered_ns[1].saturating_sub(s.covered_ns[0]));
        }
        if !r.workers_not_started.is_empty() {
            self.starting = self.starting.saturating_sub(1);
            return;
        }
        self.critical_path_ns = self.critical_path_ns.saturating_sub(r.critical_path.length_ns);
        let k = &r.critical_path.by_kind;
        self.transit_ns = self.transit_ns.saturating_sub(k.data_message + k.progress_message);
        self.input_ns = self.input_ns.saturating_sub(k.waiting_for_input);
        self.outside_ns = self.outside_ns.saturating_sub(k.unknown);
        for o in &r.critical_path.top_operators {
            sub(&mut self.operators, (o.worker, o.name.clone()), o.ns);
        }
        for w in &r.waiting {
            for on in &w.on {
                if on.kind == "not_started" {
                    self.not_started_ns = self.not_started_ns.saturating_sub(on.total_ns());
                    continue;
                }
                sub(&mut self.waits, (w.worker, on.worker), on.total_ns());
            }
        }
        self.span_ns = self.span_ns.saturating_sub(r.critical_path.span_ns);
        if let Some(t) = r.critical_path.tie_words() {
            if let Some(n) = self.ties.get_mut(&t) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.ties.remove(&t);
                }
            }
        }
        for name in r.untraced_scopes() {
            if let Some(n) = self.untraced_progress.get_mut(name) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.untraced_progress.remove(name);
                }
            }
        }
        for w in &r.what_if {
            if let Some(e) = self.what_if.get_mut(&w.speedup) {
                e.0 = e.0.saturating_sub(w.saved_ns);
                e.1 = e.1.saturating_sub(w.measured_ns);
            }
        }
    }

    /// A process's Stats frame (its frame number `seq`): kept if it is the
    /// process's latest (the figures are running totals: the last says
    /// all).
    pub fn probe_figures(&mut self, host: u64, process: u32, f: ProcessFigures) {
        let key = (host, process);
        if !self.probes.contains_key(&key) && self.probes.len() >= Self::STREAMS_KEPT {
            // Room is made by folding an ended process's final figures into
            // the sum (the account stays whole); with none ended, the new
            // process is left out.
            let Some(ended) = self.probes.iter().find(|(_, p)| p.figures.last).map(|(k, _)| *k) else { return };
            let old = self.probes.remove(&ended).expect("found above");
            let fold = &mut self.probes_folded[old.figures.adapter_ns.is_some() as usize];
            fold.0 += 1;
            if fold.0 == 1 {
                fold.1 = old.figures;
            } else {
                fold.1.add(&old.figures);
            }
        }
        match self.probes.get_mut(&key) {
            Some(old) if old.seq > f.seq => {}
            Some(old) => *old = f,
            None => {
                self.probes.insert(key, f);
            }
        }
    }

    /// The run's largest arrangements: (worker, name, last level held,
    /// peak, operator id), the largest peak first, at most `n`.
    pub fn largest_arrangements(&self, n: usize) -> Vec<(u32, String, u64, u64, u32)> {
        let mut v: Vec<(u32, String, u64, u64, u32)> =
            self.arrangements.iter().map(|((w, op), t)| (*w, t.name.clone(), t.records, t.peak_records, *op)).collect();
        v.sort_by(|a, b| b.3.cmp(&a.3).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
        v.truncate(n);
        v
    }

    /// The job-level what-if predictions, the largest saving first:
    /// (the last window's entry, saved ns summed, share of the job's
    /// windows' time). A speedup a window did not rank saves nothing there
    /// (it was not among that window's top operators).
    pub fn what_if_ranking(&self) -> Vec<(WhatIf, Ns, f64)> {
        let job = self.span_ns.max(1) as f64;
        let mut v: Vec<(WhatIf, Ns, f64)> =
            self.what_if.values().map(|(saved, _, w)| (w.clone(), *saved, *saved as f64 / job)).collect();
        v.sort_by(|a, b| {
            b.1.cmp(&a.1).then(b.0.worker.is_some().cmp(&a.0.worker.is_some())).then(a.0.speedup.cmp(&b.0.speedup))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program that builds and drops queries: 4,106 small traces, one a
    /// window, then a large one. The run's largest is the large one, though
    /// the first 4,096 filled the room; and of equal traces the first kept
    /// stay (no churn among equals).
    #[test]
    fn the_runs_largest_arrangements_are_kept_past_the_first_thousands() {
        let mut t = RunTotals::default();
        let trace = |op: u32, records: u64| ArrangementReport {
            worker: 0,
            operator: op,
            name: format!("q{op}"),
            records,
            peak_records: records,
            ..Default::default()
        };
        let kept = RunTotals::ARRANGEMENTS_KEPT as u32;
        for op in 0..kept + 10 {
            t.add(&WindowReport { arrangements: vec![trace(op, 100)], ..Default::default() });
        }
        assert!(t.arrangements.contains_key(&(0, 0)) && !t.arrangements.contains_key(&(0, kept)));
        t.add(&WindowReport { arrangements: vec![trace(kept + 10, 5_000)], ..Default::default() });
        assert_eq!(t.arrangements.len(), RunTotals::ARRANGEMENTS_KEPT);
        assert_eq!(t.largest_arrangements(1), vec![(0, format!("q{}", kept + 10), 5_000, 5_000, kept + 10)]);
    }

    fn skewed() -> WindowReport {
        let mut r = WindowReport { host: "e057f412542e3409".into(), window: 12, complete: true, ..Default::default() };
        (r.start_ns, r.end_ns, r.events) = (1_000_000_000, 1_250_000_000, 524);
        r.streams = vec![StreamInfo::default(), StreamInfo::default()];
        r.critical_path.length_ns = 250_000_000;
        let op = |name: &str, ns, share| OpShare { worker: 0, operator: 2, name: name.into(), ns, share };
        r.critical_path.top_operators = vec![op("Consume", 247_500_000, 0.99), op("Probe", 100_000, 0.0004)];
        let on = WaitedOn {
            worker: Some(0),
            channel: Some(6),
            kind: "data_message",
            ns: 249_000_000,
            count: 3,
            carried_ns: 0,
        };
        r.waiting = vec![WorkerWaiting { worker: 1, waiting_ns: 249_000_000, on: vec![on], ..Default::default() }];
        for c in [&mut r.properties.min_in_degree, &mut r.properties.communication_existence] {
            c.ok = true;
        }
        r.properties.wait_termination.ok = true;
        r
    }

    /// A revised window's line names the workers whose late records came
    /// and only what changed.
    #[test]
    fn a_revised_line_says_what_changed() {
        let new = skewed();
        let mut old = new.clone();
        old.complete = false;
        old.incomplete_reasons = vec!["late data".into()];
        old.critical_path.top_operators[0].name = "Probe".into();
        old.waiting.clear();
        assert_eq!(
            new.revision_line(&old, &[0]),
            "window 12 (250 ms) revised (late records of w0): INCOMPLETE → complete; \
             critical path: w0 Consume 99% (was w0 Probe 99%); waits: w1→w0 249 ms (was none)"
        );
        let mut longer = new.clone();
        longer.critical_path.length_ns = 300_000_000;
        longer.events = 600;
        assert_eq!(
            longer.revision_line(&new, &[]),
            "window 12 (250 ms) revised: critical path 250 ms → 300 ms; 600 events (was 524)"
        );
        assert_eq!(
            new.revision_line(&new, &[1]),
            "window 12 (250 ms) revised (late records of w1): its figures are unchanged"
        );
    }

    #[test]
    fn the_readable_line_names_the_window_its_path_and_its_waits_with_units() {
        let r = skewed();
        assert_eq!(
            r.readable_line(),
            "window 12 (250 ms)  complete  critical path 250 ms: w0 Consume 99%  waits: w1→w0 249 ms  2 streams, 524 events"
        );
        let mut bad = r.clone();
        bad.complete = false;
        bad.incomplete_reasons = vec!["worker 1: stream missing".into()];
        bad.properties.wait_termination.ok = false;
        bad.lost_records = 7;
        bad.waiting.clear();
        let line = bad.readable_line();
        assert!(line.contains("INCOMPLETE (worker 1: stream missing)"), "{line}");
        assert!(line.contains("waits: none"), "{line}");
        assert!(line.contains("7 records lost"), "{line}");
        assert!(line.ends_with("property violations: wait termination"), "{line}");
        // The compact form stays as it was.
        assert!(r.line().starts_with("[3409     12] ok  streams 2 events 524 cp 250.0ms"), "{}", r.line());
    }

    /// In a window with streams of two hosts, the line names each worker
    /// with its host's name: w0 runs on `hostA`, w1 on `hostB`.
    #[test]
    fn a_multi_host_line_names_workers_with_their_hosts() {
        let mut r = skewed();
        let s = |host: &str, name: &str, worker| StreamInfo {
            host: host.into(),
            host_name: name.into(),
            worker,
            ..Default::default()
        };
        r.streams = vec![s("e057f412542e3409", "hostA", 0), s("00000000000000bb", "hostB", 1)];
        r.synchronized_hosts = vec!["00000000000000bb".into()];
        let line = r.readable_line();
        assert!(line.contains("critical path 250 ms: hostA/w0 Consume 99%"), "{line}");
        assert!(line.contains("waits: hostB/w1→hostA/w0 249 ms"), "{line}");
        // One host: plain `w0` (no names are filled in then).
        assert!(skewed().readable_line().contains("waits: w1→w0 249 ms"));
    }

    /// The path's time outside operators is said from a tenth of it on,
    /// as waiting for input is: the skewed window's path is all
    /// operator (nothing said); with 60 of its 250 ms moved to `unknown`,
    /// 60 / 250 = 24 %; with 20 ms, 8 %: below the tenth.
    #[test]
    fn the_paths_time_outside_operators_is_said_from_a_tenth() {
        let line = skewed().readable_line();
        assert!(!line.contains("outside operators"), "{line}");
        let moved = |ns: Ns| {
            let mut r = skewed();
            assert_eq!(r.critical_path.length_ns, 250_000_000);
            r.critical_path.by_kind.operator -= ns;
            r.critical_path.by_kind.unknown += ns;
            r.readable_line()
        };
        assert!(moved(60_000_000).contains("(outside operators 24%)"), "{}", moved(60_000_000));
        assert!(!moved(20_000_000).contains("outside operators"), "{}", moved(20_000_000));
    }

    /// Two operators of one name on one worker at the top of the path
    /// are told apart by their ids; of different workers or names, not.
    #[test]
    fn two_top_operators_of_one_name_say_their_ids() {
        let mut r = skewed();
        let mut second = r.critical_path.top_operators[0].clone();
        second.operator += 5;
        second.share = 0.2;
        r.critical_path.top_operators.insert(1, second.clone());
        let line = r.readable_line();
        let (a, b) = (r.critical_path.top_operators[0].operator, second.operator);
        assert!(
            line.contains(&format!("w0 Consume (op {a}) ")) && line.contains(&format!("w0 Consume (op {b}) 20%")),
            "{line}"
        );
        r.critical_path.top_operators[1].worker = 1;
        assert!(!r.readable_line().contains("(op "), "{}", r.readable_line());
    }

    /// The line's what-if: the best 2× saving, said to the line's 1 %. Of
    /// a 250 ms window, 2 ms saved is 0.8 % (said, `−1 %`); 1 ms, 0.4 %
    /// (not said: it would read `−0 %`).
    #[test]
    fn a_what_if_that_saves_under_a_percent_is_not_said() {
        let saving = |saved_ns: Ns| {
            let mut r = skewed();
            let measured_ns = 250_000_000;
            r.what_if = vec![WhatIf {
                speedup: "w0:Dataflow=2".into(),
                worker: Some(0),
                operator: "Dataflow".into(),
                factor: "2".into(),
                measured_ns,
                predicted_ns: measured_ns - saved_ns,
                saved_ns,
                saved_share: saved_ns as f64 / measured_ns as f64,
                naive_saved_ns: 0,
            }];
            r.readable_line()
        };
        assert!(saving(2_000_000).contains("what-if: w0 Dataflow 2× faster: window −1 %"), "{}", saving(2_000_000));
        assert!(!saving(1_000_000).contains("what-if"), "{}", saving(1_000_000));
    }

    /// A wait for a worker that was not running yet reads as such, not as
    /// a wait on `?`.
    #[test]
    fn a_wait_for_a_process_to_start_reads_not_started() {
        let mut r = skewed();
        let start =
            WaitedOn { worker: None, channel: None, kind: "not_started", ns: 0, count: 0, carried_ns: 2_000_000 };
        r.waiting[0].on.push(start);
        let line = r.readable_line();
        assert!(line.contains("waits: w1→w0 249 ms, w1→not started 2.0 ms"), "{line}");
    }

    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(human_ns(0), "0.0 ms");
        assert_eq!(human_ns(25_000), "25 µs");
        assert_eq!(human_ns(2_500_000), "2.5 ms");
        assert_eq!(human_ns(249_000_000), "249 ms");
        assert_eq!(human_ns(12_300_000_000), "12.3 s");
    }

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

    /// The run counts each scope whose progress was untraced once per window
    /// whatever the workers that say so, and a revised window's old report
    /// taken out leaves no trace of it.
    #[test]
    fn run_totals_count_the_windows_of_an_untraced_scope() {
        let scope = |w: u32, name: &str| UntracedScope { worker: w, operator: 2, name: name.into() };
        let a = WindowReport {
            untraced_progress: vec![scope(0, "Iterative"), scope(1, "Iterative")],
            ..Default::default()
        };
        let b = WindowReport { untraced_progress: vec![scope(0, "Iterative"), scope(0, "Odd")], ..Default::default() };
        assert_eq!(b.untraced_scope_names(), "`Iterative`, `Odd`");
        let mut t = RunTotals::default();
        t.add(&a);
        t.add(&b);
        let counts: Vec<(&str, u64)> = t.untraced_progress.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        assert_eq!(counts, [("Iterative", 2), ("Odd", 1)]);
        t.remove(&b);
        let counts: Vec<(&str, u64)> = t.untraced_progress.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        assert_eq!(counts, [("Iterative", 1)]);
    }
}

/// The report's types that hold fixed words (`&'static str`) are read back
/// through their owned twins in [`static_str`].
macro_rules! read_through_owned {
    ($($t:ident),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                static_str::$t::deserialize(d).map(Into::into)
            }
        }
    )*};
}
read_through_owned!(ChannelShare, ParticipationEntry, CarriedWait, WaitedOn);

/// Reading back the report's names that are fixed words (`kind`,
/// `activity`, `message`: `data_message`, `waiting_for_input`, ...) as the
/// `&'static str` the analysis writes them with: each distinct word is
/// stored once for the process's life. They are a handful; past
/// [`static_str::KEPT`] distinct words (never, from the sidecar's own
/// reports), a word reads as `other`, so the store stays bounded.
mod static_str {
    use serde::Deserialize;
    use std::collections::HashSet;
    use std::sync::Mutex;

    pub const KEPT: usize = 256;

    static WORDS: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

    pub fn intern(w: &str) -> &'static str {
        let mut g = WORDS.lock().unwrap_or_else(|e| e.into_inner());
        let set = g.get_or_insert_with(HashSet::new);
        if let Some(s) = set.get(w) {
            return s;
        }
        if set.len() >= KEPT {
            return "other";
        }
        // (Leaked once per distinct word, at most KEPT of them: the
        // report's types hold `&'static str`.)
        let s: &'static str = Box::leak(w.to_string().into_boxed_str());
        set.insert(s);
        s
    }

    // The report's types with their words owned, read first and then
    // turned into the report's.

    #[derive(Deserialize)]
    pub struct ChannelShare {
        channel: u32,
        kind: String,
        src_worker: u32,
        dst_worker: u32,
        crossings: u64,
        ns: crate::analysis::model::Ns,
    }

    impl From<ChannelShare> for super::ChannelShare {
        fn from(c: ChannelShare) -> Self {
            super::ChannelShare {
                channel: c.channel,
                kind: intern(&c.kind),
                src_worker: c.src_worker,
                dst_worker: c.dst_worker,
                crossings: c.crossings,
                ns: c.ns,
            }
        }
    }

    #[derive(Deserialize)]
    pub struct ParticipationEntry {
        worker: u32,
        activity: String,
        id: Option<u64>,
        name: Option<String>,
        score: f64,
    }

    impl From<ParticipationEntry> for super::ParticipationEntry {
        fn from(p: ParticipationEntry) -> Self {
            super::ParticipationEntry {
                worker: p.worker,
                activity: intern(&p.activity),
                id: p.id,
                name: p.name,
                score: p.score,
            }
        }
    }

    #[derive(Deserialize)]
    pub struct CarriedWait {
        since_ns: crate::analysis::model::Ns,
        ns: crate::analysis::model::Ns,
        kind: String,
        worker: Option<u32>,
        channel: Option<u32>,
        message: Option<String>,
    }

    impl From<CarriedWait> for super::CarriedWait {
        fn from(c: CarriedWait) -> Self {
            super::CarriedWait {
                since_ns: c.since_ns,
                ns: c.ns,
                kind: intern(&c.kind),
                worker: c.worker,
                channel: c.channel,
                message: c.message.as_deref().map(intern),
            }
        }
    }

    #[derive(Deserialize)]
    pub struct WaitedOn {
        worker: Option<u32>,
        channel: Option<u32>,
        kind: String,
        ns: crate::analysis::model::Ns,
        count: u64,
        #[serde(default)]
        carried_ns: crate::analysis::model::Ns,
    }

    impl From<WaitedOn> for super::WaitedOn {
        fn from(w: WaitedOn) -> Self {
            super::WaitedOn {
                worker: w.worker,
                channel: w.channel,
                kind: intern(&w.kind),
                ns: w.ns,
                count: w.count,
                carried_ns: w.carried_ns,
            }
        }
    }
}
