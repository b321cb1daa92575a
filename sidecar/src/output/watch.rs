//! `sidecar watch -- COMMAND`: the closing summary, and what tracing cost.
//!
//! The cost figures come from the streams: the windows (records, elided
//! schedules, bytes and traced worker time, summed over them), and the
//! probe's own figures, which it sends in its stream (Stats frames: what
//! it produced, wrote and lost, the writer thread's CPU time, what the
//! engine adapter and the engine's logging cost; running totals, the last
//! of each process taken and summed over the processes). A stream without
//! them (an older probe) falls back on the workload's `probe:` line on its
//! standard error, and the account says which it used ([`Cost::source`]).
//! Tracing's cost in the worker threads, in the steps that did work, has
//! three parts, each a share of the traced worker time:
//!
//! - the engine's own logging (timely reading its clock for each log event
//!   and buffering it, and flushing every registered log at every step):
//!   events × a per-event cost + flush calls × a per-flush cost, both
//!   measured by the adapter at attach; an estimate and a floor;
//! - the adapter turning those events into probe calls: measured (clock
//!   reads around its work; one in 64 of its empty flush calls sampled);
//! - the probe's pushes: records × the per-record cost plus elided pairs ×
//!   the per-pair cost, an estimate from the hot-path benchmark.
//!
//! The flush calls of steps that did nothing (an idle worker polling,
//! which spends that time instead of spinning) are left out of that share
//! and reported on a line of their own: the engine's and the adapter's
//! parts, as the adapter booked them.
//!
//! The writer thread's CPU comes on top, on whichever core it runs.

use serde::Serialize;

use crate::analysis::report::{ProbeFigures, RunTotals, WhatIf};

/// Measured on the development machine (2 cores, invariant TSC): about
/// 12 ns per published record and 10 ns per elided schedule pair
/// (`cargo bench -p benches --bench hot_path`). Override with
/// `--ns-per-record` / `--ns-per-elided` for another machine.
pub const NS_PER_RECORD: f64 = 12.0;
pub const NS_PER_ELIDED: f64 = 10.0;

/// The figures of a workload's `probe: ...` stderr line (see
/// `examples::stats_line`), or the sum of several (a command that runs
/// more than one traced program, each printing its own).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProbeLine {
    /// How many `probe:` lines were summed.
    pub lines: u64,
    pub workers: Option<u64>,
    pub produced: Option<u64>,
    pub written: Option<u64>,
    pub lost: Option<u64>,
    pub elided: Option<u64>,
    /// Worker-local message halves the probe counted but did not write.
    pub local: Option<u64>,
    pub bytes: Option<u64>,
    pub writer_cpu_ms: Option<f64>,
    /// Time in the engine adapter's own code (measured).
    pub adapter_ms: Option<f64>,
    /// Events the engine logged for the adapter.
    pub engine_events: Option<u64>,
    /// The engine's own cost of logging them (estimated), flushes included.
    pub engine_log_ms: Option<f64>,
    /// Flush calls of the adapter's logs, and their part of engine_log_ms.
    pub engine_flushes: Option<u64>,
    pub engine_flush_ms: Option<f64>,
    /// Of engine_flushes, engine_flush_ms and adapter_ms: the parts spent
    /// in worker steps that did nothing (an idle worker polling).
    pub idle_flushes: Option<u64>,
    pub idle_engine_ms: Option<f64>,
    pub idle_adapter_ms: Option<f64>,
    /// Records and elided pairs of the lines without an adapter figure
    /// (programs that call the probe directly): their time in the worker
    /// threads is the pushes' estimate, where the adapter's holds theirs.
    pub unadapted_written: u64,
    pub unadapted_elided: u64,
}

impl ProbeLine {
    /// Parses a `probe: key=value ...` line; None for other lines.
    pub fn parse(line: &str) -> Option<ProbeLine> {
        let rest = line.trim().strip_prefix("probe: ")?;
        let mut p = ProbeLine::default();
        let mut any = false;
        for kv in rest.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else { continue };
            let u = || v.parse::<u64>().ok();
            let ms = || v.strip_suffix("ms").and_then(|x| x.parse::<f64>().ok()).filter(|x| x.is_finite() && *x >= 0.0);
            match k {
                "workers" => p.workers = u(),
                "produced" => p.produced = u(),
                "written" => p.written = u(),
                "lost" => p.lost = u(),
                "elided" => p.elided = u(),
                "local" => p.local = u(),
                "bytes" => p.bytes = u(),
                "writer_cpu" => p.writer_cpu_ms = ms(),
                "adapter" => p.adapter_ms = ms(),
                "engine_events" => p.engine_events = u(),
                "engine_log" => p.engine_log_ms = ms(),
                "engine_flushes" => p.engine_flushes = u(),
                "engine_flush" => p.engine_flush_ms = ms(),
                "idle_flushes" => p.idle_flushes = u(),
                "idle_engine" => p.idle_engine_ms = ms(),
                "idle_adapter" => p.idle_adapter_ms = ms(),
                _ => continue,
            }
            any = true;
        }
        p.normalize();
        p.lines = 1;
        any.then_some(p)
    }

    /// What one program's figures mean together: events are figures only
    /// with their price; a part is no larger than its whole (the figures
    /// come from outside: the command's output, or its stream); without an
    /// adapter, the records' pushes are estimated.
    fn normalize(&mut self) {
        let p = self;
        if p.engine_log_ms.is_none() {
            (p.engine_events, p.engine_flushes, p.engine_flush_ms) = (None, None, None);
            (p.idle_flushes, p.idle_engine_ms) = (None, None);
        }
        p.idle_engine_ms = p.idle_engine_ms.map(|x| x.min(p.engine_flush_ms.unwrap_or(0.0)));
        p.idle_flushes = p.idle_flushes.map(|x| x.min(p.engine_flushes.unwrap_or(0)));
        p.idle_adapter_ms = p.idle_adapter_ms.map(|x| x.min(p.adapter_ms.unwrap_or(0.0)));
        if p.adapter_ms.is_none() {
            (p.unadapted_written, p.unadapted_elided) = (p.written.unwrap_or(0), p.elided.unwrap_or(0));
        }
    }

    /// The probes' figures from their streams (the last Stats frame of
    /// each process), summed over the processes as their `probe:` lines
    /// would be (`lines`: the processes); None when no stream carried any.
    pub fn from_streams(t: &RunTotals) -> Option<ProbeLine> {
        let mut sum: Option<ProbeLine> = None;
        for p in t.probes.values() {
            let one = ProbeLine::of_figures(&p.figures);
            sum.get_or_insert_with(Default::default).add(&one);
        }
        for (folded, figures) in t.probes_folded.iter().filter(|f| f.0 > 0) {
            // (Summed when they were folded: read whole, counted as the
            // processes they were.)
            let mut f = ProbeLine::of_figures(figures);
            f.lines = *folded;
            sum.get_or_insert_with(Default::default).add(&f);
        }
        sum
    }

    /// One probe's figures, read as its `probe:` line is ([`ProbeLine::parse`]).
    fn of_figures(f: &ProbeFigures) -> ProbeLine {
        let ms = |ns: Option<u64>| ns.map(|n| n as f64 / 1e6);
        let mut p = ProbeLine {
            lines: 1,
            workers: f.workers,
            produced: f.produced,
            written: f.written,
            lost: f.lost,
            elided: f.elided,
            local: f.local_messages,
            bytes: f.bytes,
            writer_cpu_ms: ms(f.writer_cpu_ns),
            adapter_ms: ms(f.adapter_ns),
            engine_events: f.engine_events,
            engine_log_ms: ms(f.engine_log_ns),
            engine_flushes: f.engine_flushes,
            engine_flush_ms: ms(f.engine_flush_ns),
            idle_flushes: f.idle_flushes,
            idle_engine_ms: ms(f.idle_engine_ns),
            idle_adapter_ms: ms(f.idle_adapter_ns),
            ..Default::default()
        };
        p.normalize();
        p
    }

    /// Adds another program's figures: a figure is known if any line gave
    /// it.
    pub fn add(&mut self, o: &ProbeLine) {
        fn sum<T: Copy>(a: Option<T>, b: Option<T>, add: fn(T, T) -> T) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(add(x, y)),
                (x, y) => x.or(y),
            }
        }
        // (The figures are parsed from the command's output: saturating,
        // so that absurd ones cannot overflow.)
        let add = u64::saturating_add;
        self.lines = self.lines.saturating_add(o.lines);
        self.workers = sum(self.workers, o.workers, add);
        self.produced = sum(self.produced, o.produced, add);
        self.written = sum(self.written, o.written, add);
        self.lost = sum(self.lost, o.lost, add);
        self.elided = sum(self.elided, o.elided, add);
        self.local = sum(self.local, o.local, add);
        self.bytes = sum(self.bytes, o.bytes, add);
        self.writer_cpu_ms = sum(self.writer_cpu_ms, o.writer_cpu_ms, |x, y| x + y);
        self.adapter_ms = sum(self.adapter_ms, o.adapter_ms, |x, y| x + y);
        self.engine_events = sum(self.engine_events, o.engine_events, add);
        self.engine_log_ms = sum(self.engine_log_ms, o.engine_log_ms, |x, y| x + y);
        self.engine_flushes = sum(self.engine_flushes, o.engine_flushes, add);
        self.engine_flush_ms = sum(self.engine_flush_ms, o.engine_flush_ms, |x, y| x + y);
        self.idle_flushes = sum(self.idle_flushes, o.idle_flushes, add);
        self.idle_engine_ms = sum(self.idle_engine_ms, o.idle_engine_ms, |x, y| x + y);
        self.idle_adapter_ms = sum(self.idle_adapter_ms, o.idle_adapter_ms, |x, y| x + y);
        self.unadapted_written = self.unadapted_written.saturating_add(o.unadapted_written);
        self.unadapted_elided = self.unadapted_elided.saturating_add(o.unadapted_elided);
    }
}

/// What tracing cost, as printed and as `--summary-json`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Cost {
    /// Records published (the probe's `written`, else the records read).
    pub records: u64,
    pub records_lost: u64,
    pub elided_schedules: u64,
    /// Worker-local message halves counted, not written (only the probe's
    /// line knows them).
    pub local_messages: Option<u64>,
    pub bytes: u64,
    pub bytes_per_record: f64,
    pub ns_per_record: f64,
    pub ns_per_elided: f64,
    /// records × ns_per_record + elided × ns_per_elided.
    pub est_probe_ms: f64,
    /// Traced worker time: Σ over workers of the time their streams cover.
    pub worker_ms: f64,
    /// est_probe_ms / worker_ms.
    pub est_probe_share: f64,
    /// The engine adapter's own code, measured (from the `probe:` line).
    pub adapter_ms: Option<f64>,
    /// Events the engine logged for the adapter.
    pub engine_events: Option<u64>,
    /// The engine's own logging of them, estimated (a floor), flushes
    /// included.
    pub engine_log_ms: Option<f64>,
    /// The engine's flush calls of the adapter's logs, and their part of
    /// engine_log_ms.
    pub engine_flushes: Option<u64>,
    pub engine_flush_ms: Option<f64>,
    /// engine_log_ms + adapter_ms (which holds the probe's pushes), or
    /// est_probe_ms without an adapter, less idle_steps_ms: tracing's cost
    /// inside the worker threads, in the steps that did work.
    pub worker_threads_ms: f64,
    /// worker_threads_ms / worker_ms.
    pub worker_threads_share: f64,
    /// Flush calls in worker steps that did nothing, and what they cost
    /// (the engine's and the adapter's): an idle worker polling spends it
    /// instead of spinning.
    pub idle_flushes: Option<u64>,
    pub idle_steps_ms: f64,
    /// The engine's and the adapter's parts of idle_steps_ms.
    pub idle_engine_ms: f64,
    pub idle_adapter_ms: f64,
    /// The probe's writer thread (from the workload's `probe:` line).
    pub writer_cpu_ms: Option<f64>,
    /// writer CPU over the traced wall time (worker time / workers).
    pub writer_cpu_share: Option<f64>,
    /// Where the probe's figures came from: `stream` (the probes' Stats
    /// frames), `stderr` (the command's `probe:` line, for probes that
    /// send none) or `none` (records and bytes as the windows read them,
    /// the pushes estimated, the writer's CPU unknown).
    pub source: &'static str,
    /// The same in words, with how many processes' figures and whether
    /// they are final.
    pub source_words: String,
    /// The probe's figures the account used (summed over the processes).
    #[serde(skip)]
    pub probe: Option<ProbeLine>,
    /// The account in one short line, the same in the terminal, the JSON,
    /// `/metrics` and the dashboard ([`Cost::account`]).
    pub account: String,
    /// Apart: what idle polling cost (None: nothing to speak of).
    pub idle_account: Option<String>,
}

impl Cost {
    /// The account of a run: the probes' figures from their streams, or
    /// where no stream carried any, `stderr` (the command's `probe:`
    /// lines, summed; `watch` reads them).
    pub fn new(t: &RunTotals, stderr: Option<&ProbeLine>, ns_per_record: f64, ns_per_elided: f64) -> Cost {
        let (probe, source) = match ProbeLine::from_streams(t) {
            Some(p) => (Some(p), "stream"),
            None => (stderr.cloned(), if stderr.is_some() { "stderr" } else { "none" }),
        };
        let source_words = source_words(t, source, probe.as_ref());
        let i = &t.instrumentation;
        let p = probe.clone().unwrap_or_default();
        let records = p.written.unwrap_or(i.records);
        let elided = p.elided.unwrap_or(i.elided_schedules);
        let bytes = p.bytes.unwrap_or(i.bytes);
        let est = records as f64 * ns_per_record + elided as f64 * ns_per_elided;
        let workers = t.streams.len().max(1) as f64;
        let wall_ns = t.worker_ns as f64 / workers;
        // An adapter's measured time holds the probe calls it makes (the
        // pushes): the estimate stands in for them only without one (a
        // program without an adapter, among the lines summed).
        let pushes_ms = match p.adapter_ms {
            Some(ms) => {
                ms + (p.unadapted_written as f64 * ns_per_record + p.unadapted_elided as f64 * ns_per_elided) / 1e6
            }
            None => est / 1e6,
        };
        let (idle_engine_ms, idle_adapter_ms) = (p.idle_engine_ms.unwrap_or(0.0), p.idle_adapter_ms.unwrap_or(0.0));
        let idle_ms = idle_engine_ms + idle_adapter_ms;
        let in_workers = (pushes_ms + p.engine_log_ms.unwrap_or(0.0) - idle_ms).max(0.0);
        let share = |ms: f64| if t.worker_ns > 0 { ms * 1e6 / t.worker_ns as f64 } else { 0.0 };
        Cost {
            records,
            records_lost: p.lost.unwrap_or(i.records_lost),
            elided_schedules: elided,
            local_messages: p.local,
            bytes,
            bytes_per_record: bytes as f64 / records.max(1) as f64,
            ns_per_record,
            ns_per_elided,
            est_probe_ms: est / 1e6,
            worker_ms: t.worker_ns as f64 / 1e6,
            est_probe_share: share(est / 1e6),
            adapter_ms: p.adapter_ms,
            engine_events: p.engine_events,
            engine_log_ms: p.engine_log_ms,
            engine_flushes: p.engine_flushes,
            engine_flush_ms: p.engine_flush_ms,
            worker_threads_ms: in_workers,
            worker_threads_share: share(in_workers),
            idle_flushes: p.idle_flushes,
            idle_steps_ms: idle_ms,
            idle_engine_ms,
            idle_adapter_ms,
            writer_cpu_ms: p.writer_cpu_ms,
            writer_cpu_share: p.writer_cpu_ms.filter(|_| wall_ns > 0.0).map(|ms| ms * 1e6 / wall_ns),
            source,
            source_words,
            probe,
            account: String::new(),
            idle_account: None,
        }
        .with_account()
    }

    /// What tracing cost, in one account: what it cost the job's worker
    /// threads while they worked (`worker_threads_ms`: the engine's logging,
    /// the adapter and the probe's pushes, or the pushes' estimate without
    /// an adapter), and apart, what idle polling cost (`idle_steps_ms`).
    /// Every face (the terminal, `--summary-json`, `/metrics`, the page)
    /// shows these two lines; the details behind them follow.
    pub fn account(&self) -> (String, Option<String>) {
        let ms = |x: f64| if x >= 1000.0 { format!("{:.2} s", x / 1e3) } else { format!("{x:.2} ms") };
        let how = if self.adapter_ms.is_some() { "measured, with the engine's logging" } else { "estimated" };
        let line = format!(
            "tracing cost the worker threads ~{} = {:.2}% of their time while they worked ({how})",
            ms(self.worker_threads_ms),
            self.worker_threads_share * 100.0
        );
        let idle = (self.idle_steps_ms >= 0.005).then(|| {
            format!("apart: ~{} in idle polling (flush calls of steps that did nothing)", ms(self.idle_steps_ms))
        });
        (line, idle)
    }

    fn with_account(mut self) -> Cost {
        (self.account, self.idle_account) = self.account();
        self
    }

    /// The summary's lines about what tracing cost: the account (what it
    /// cost the worker threads while they worked, and apart, idle
    /// polling), where the figures came from, and the details behind them.
    fn text(&self) -> String {
        let c = self;
        let mut s = String::new();
        s += &format!("  {}\n", c.account);
        if let Some(idle) = &c.idle_account {
            s += &format!("  {idle}\n");
        }
        s += &format!("  figures: {}\n", c.source_words);
        s += &format!(
            "  tracing cost: {} records ({} lost), {} schedules elided{}, {} bytes ({:.1} B/record)\n",
            c.records,
            c.records_lost,
            c.elided_schedules,
            c.local_messages.map(|n| format!(", {n} worker-local message halves not written")).unwrap_or_default(),
            c.bytes,
            c.bytes_per_record,
        );
        let mut parts = Vec::new();
        if let (Some(ms), Some(n)) = (c.engine_log_ms, c.engine_events) {
            // In the steps that did work (the idle steps' part is below).
            let ms = (ms - c.idle_engine_ms).max(0.0);
            let flushes = c.engine_flushes.unwrap_or(0).saturating_sub(c.idle_flushes.unwrap_or(0));
            let flush_ms = (c.engine_flush_ms.unwrap_or(0.0) - c.idle_engine_ms).clamp(0.0, ms);
            let events_ms = ms - flush_ms;
            let mut s = format!(
                "the engine's own logging ~{ms:.2} ms (a floor, priced at attach: {n} events ~{events_ms:.2} ms, ~{:.0} ns each",
                events_ms * 1e6 / n.max(1) as f64
            );
            if flushes > 0 {
                s += &format!(
                    "; {flushes} flushes of its logs ~{flush_ms:.2} ms, ~{:.0} ns each: every log at every step",
                    flush_ms * 1e6 / flushes as f64
                );
            }
            parts.push(s + ")");
        }
        let pushes = format!(
            "the probe's pushes, ~{:.2} ms at {} ns/record and {} ns/elided pair",
            c.est_probe_ms, c.ns_per_record, c.ns_per_elided
        );
        match c.adapter_ms {
            Some(ms) => {
                let ms = (ms - c.idle_adapter_ms).max(0.0);
                parts.push(format!("the adapter {ms:.2} ms (measured, including {pushes})"))
            }
            None => parts.push(pushes),
        }
        s += &format!(
            "  in the worker threads ~{:.2} ms = {:.2}% of worker time, in the steps that did work: {}\n",
            c.worker_threads_ms,
            c.worker_threads_share * 100.0,
            parts.join(", ")
        );
        if c.idle_steps_ms >= 0.005 {
            // (The count is known only with the engine's price.)
            let calls = c.idle_flushes.map(|n| format!("{n} ")).unwrap_or_default();
            s += &format!(
                "  and ~{:.2} ms in {calls}flush calls of steps that did nothing (the engine's ~{:.2} ms, the \
                 adapter's ~{:.2} ms): timely flushes every registered log at every step, and a worker \
                 that polls for work spends this instead of spinning\n",
                c.idle_steps_ms, c.idle_engine_ms, c.idle_adapter_ms
            );
        }
        s += &format!(
            "  writer thread CPU {}\n",
            match (c.writer_cpu_ms, c.writer_cpu_share) {
                (Some(ms), Some(sh)) => format!("{ms:.1} ms ({:.2}% of one core over the traced time)", sh * 100.0),
                (Some(ms), None) => format!("{ms:.1} ms"),
                _ => "unknown (no probe figures)".into(),
            }
        );
        s
    }
}

/// Where the figures came from, in words (see [`Cost::source`]).
fn source_words(t: &RunTotals, source: &str, p: Option<&ProbeLine>) -> String {
    match source {
        "stream" => {
            let n = t.probes.len() + t.probes_folded.iter().map(|f| f.0 as usize).sum::<usize>();
            let running = t.probes.values().filter(|p| !p.figures.last).count();
            let of = if n == 1 { "1 process".to_string() } else { format!("{n} processes") };
            let when = match running {
                0 => "final".to_string(),
                r if r == n => "so far".to_string(),
                r => format!("{r} still running: so far"),
            };
            format!("the probe's figures from its stream ({of}, {when})")
        }
        "stderr" => format!(
            "the probe's figures from the command's `probe:` line{} on stderr (its stream carries none: an older probe)",
            if p.is_some_and(|p| p.lines > 1) { "s" } else { "" }
        ),
        _ => "no probe figures (neither in the stream nor on stderr): records and bytes as read, the pushes \
              estimated"
            .to_string(),
    }
}

/// A run-level what-if in words: `w0 Consume 2× faster: job −27 %`.
pub fn job_words(w: &WhatIf, job: f64) -> String {
    format!("{}: job −{:.0} %", w.what(), job * 100.0)
}

/// The closing summary as JSON (`--summary-json`).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub command: Vec<String>,
    pub exit_status: i32,
    pub wall_ms: f64,
    pub windows: u64,
    pub incomplete_windows: u64,
    /// Of the incomplete windows, those before every process of the job
    /// had started: kept out of the figures below.
    #[serde(skip_serializing_if = "is_zero")]
    pub starting_windows: u64,
    pub property_violation_windows: u64,
    pub workers: usize,
    pub critical_path_ms: f64,
    /// Share of the critical path that is messages in transit between
    /// processes.
    pub transit_share: f64,
    /// Shares of the critical path waiting for input, and outside operators
    /// (a worker neither in an operator nor waiting: docs/analysis.md).
    pub input_share: f64,
    pub outside_share: f64,
    /// (worker, operator, share of the critical path), largest first.
    pub top_operators: Vec<(u32, String, f64)>,
    /// (worker, waited on, ms), largest first.
    pub waits: Vec<(u32, Option<u32>, f64)>,
    /// The best what-if predictions over the run (the windows' savings
    /// summed): (speedup, in words, share of the job's windows' time).
    pub what_if: Vec<(String, String, f64)>,
    /// Windows whose top operator tied across workers: (the tie in words,
    /// windows), the most frequent first (at most 3).
    pub ties: Vec<(String, u64)>,
    /// Scopes whose progress the streams did not carry, by name (at most
    /// 5): the what-if keeps the waits their progress ended.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub untraced_progress: Vec<String>,
    pub cost: Cost,
    pub probe_line: Option<ProbeLine>,
    /// The largest differential arrangements: (worker, operator's name,
    /// records at the last level held, peak, operator's id), the largest
    /// peak first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arrangements: Vec<(u32, String, u64, u64, u32)>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A count in words a person reads at a glance: `5.4 M`, `12.0 k`, `731`.
pub fn count_words(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1} k", n as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} M", n as f64 / 1e6),
        _ => format!("{:.1} G", n as f64 / 1e9),
    }
}

/// The summary's arrangements line (empty without arrangements).
fn arrangements_line(a: &[(u32, String, u64, u64, u32)]) -> String {
    if a.is_empty() {
        return String::new();
    }
    // (Two of one name on one worker, as differential names every
    // `arrange` "Arrange", told apart by their operators.)
    let alike = |w: u32, name: &str| a.iter().filter(|x| (x.0, x.1.as_str()) == (w, name)).count() > 1;
    let parts: Vec<String> = a
        .iter()
        .map(|(w, name, records, peak, op)| {
            let op = if alike(*w, name) { format!(" (op {op})") } else { String::new() };
            format!("w{w} {name}{op} {} records (peak {})", count_words(*records), count_words(*peak))
        })
        .collect();
    format!("  arrangements: {}\n", parts.join(", "))
}

impl Summary {
    /// The summary of a run; its `probe_line` is the probe's figures the
    /// cost account used (from the streams, or the command's stderr).
    pub fn new(command: &[String], exit_status: i32, wall_ms: f64, t: &RunTotals, cost: Cost) -> Summary {
        let cp = t.critical_path_ns.max(1) as f64;
        let mut ops: Vec<(u32, String, f64)> =
            t.operators.iter().map(|((w, n), ns)| (*w, n.clone(), *ns as f64 / cp)).collect();
        ops.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        ops.truncate(5);
        let mut waits: Vec<(u32, Option<u32>, f64)> =
            t.waits.iter().map(|((w, on), ns)| (*w, *on, *ns as f64 / 1e6)).collect();
        waits.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        waits.truncate(8);
        // The best 2× speedup (what a real fix might give) and the bound
        // (the best of taking no time).
        let ranking: Vec<_> = t.what_if_ranking().into_iter().filter(|(_, saved, _)| *saved > 0).collect();
        let what_if = ["2", "inf"]
            .iter()
            .filter_map(|f| ranking.iter().find(|(w, ..)| w.factor == *f))
            // In the job's words, as the terminal says it (the last
            // window's `words()` said `window −50 %` where the job saves
            // 27 %).
            .map(|(w, _, job)| (w.speedup.clone(), job_words(w, *job), *job))
            .collect();
        let mut ties: Vec<(String, u64)> = t.ties.iter().map(|(k, n)| (k.clone(), *n)).collect();
        ties.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ties.truncate(3);
        Summary {
            ties,
            untraced_progress: t.untraced_progress.keys().take(5).cloned().collect(),
            command: command.to_vec(),
            exit_status,
            wall_ms,
            windows: t.windows,
            incomplete_windows: t.incomplete,
            starting_windows: t.starting,
            property_violation_windows: t.property_violations,
            workers: t.streams.len(),
            critical_path_ms: t.critical_path_ns as f64 / 1e6,
            transit_share: t.transit_ns as f64 / t.critical_path_ns.max(1) as f64,
            input_share: t.input_ns as f64 / t.critical_path_ns.max(1) as f64,
            outside_share: t.outside_ns as f64 / t.critical_path_ns.max(1) as f64,
            top_operators: ops,
            waits,
            what_if,
            probe_line: cost.probe.clone(),
            cost,
            arrangements: t.largest_arrangements(4),
        }
    }

    /// The terminal form.
    /// The summary's first line: the command and how it ended.
    pub fn headline(&self) -> String {
        format!(
            "sidecar watch: `{}` exited with status {} after {:.2} s\n",
            self.command.join(" "),
            self.exit_status,
            self.wall_ms / 1e3
        )
    }

    pub fn text(&self) -> String {
        let c = &self.cost;
        let mut s = self.headline();
        let starting = match self.starting_windows {
            0 => String::new(),
            n => format!(", {n} of them before every process had started, kept out of the figures below"),
        };
        s += &format!(
            "  windows: {} ({} incomplete{starting}, {} with property violations); {} workers traced, {:.1} ms of worker time\n",
            self.windows, self.incomplete_windows, self.property_violation_windows, self.workers, c.worker_ms
        );
        let ops: Vec<String> =
            // (An entry that rounds to 0.0 % says nothing.)
            self.top_operators
                .iter()
                .filter(|(_, _, sh)| sh * 1000.0 >= 0.5)
                .map(|(w, n, sh)| format!("w{w} {n} {:.1}%", sh * 100.0))
                .collect();
        let mut shares = if self.transit_share >= 0.005 {
            format!("; transit between processes {:.1}%", self.transit_share * 100.0)
        } else {
            String::new()
        };
        // (From a tenth on, as the window line says them.)
        if self.input_share >= 0.1 {
            shares += &format!("; waiting for input {:.1}%", self.input_share * 100.0);
        }
        if self.outside_share >= 0.1 {
            shares += &format!("; outside operators {:.1}%", self.outside_share * 100.0);
        }
        s += &format!(
            "  critical path: {:.1} ms; top: {}{shares}\n",
            self.critical_path_ms,
            if ops.is_empty() { "-".into() } else { ops.join(", ") }
        );
        for (tie, n) in &self.ties {
            s += &format!("  top operator tied: {tie} in {n} of {} windows\n", self.windows);
        }
        let waits: Vec<String> = self
            .waits
            .iter()
            .map(|(w, on, ms)| match on {
                Some(o) => format!("w{w} on w{o} {ms:.1} ms"),
                None => format!("w{w} on ? {ms:.1} ms"),
            })
            .collect();
        s += &format!("  waiting: {}\n", if waits.is_empty() { "-".into() } else { waits.join(", ") });
        s += &arrangements_line(&self.arrangements);
        // (Not one that saves under the line's 1 %: "job −0 %" is no lead.
        // The JSON keeps it.)
        for (_, words, _) in self.what_if.iter().filter(|(_, _, job)| *job >= WhatIf::SAID_FROM) {
            s += &format!("  what-if: {words}\n");
        }
        if !self.untraced_progress.is_empty() {
            s += &format!(
                "  progress not traced in {}: the waits it ended read as waiting for input, and the what-if keeps \
                 them (register the scope's timestamp type with the probe: docs/timely.md)\n",
                crate::analysis::report::quoted_names(&self.untraced_progress)
            );
        }
        s += &c.text();
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_probe_line() {
        let l = "probe: sink=unix:/tmp/x io=io_uring workers=2 produced=100 written=98 lost=2 elided=7 local=40 bytes=1234 bytes/record=12.59 writer_cpu=3.5ms adapter=1.25ms engine_events=500 engine_log=0.02ms engine_flushes=30 engine_flush=0.01ms ticks/s=1000";
        let p = ProbeLine::parse(l).unwrap();
        assert_eq!(p.workers, Some(2));
        assert_eq!(p.produced, Some(100));
        assert_eq!(p.written, Some(98));
        assert_eq!(p.lost, Some(2));
        assert_eq!(p.elided, Some(7));
        assert_eq!(p.local, Some(40));
        assert_eq!(p.bytes, Some(1234));
        assert_eq!(p.writer_cpu_ms, Some(3.5));
        assert_eq!(p.adapter_ms, Some(1.25));
        assert_eq!(p.engine_events, Some(500));
        assert_eq!(p.engine_log_ms, Some(0.02));
        assert_eq!((p.engine_flushes, p.engine_flush_ms), (Some(30), Some(0.01)));
        assert_eq!(p.lines, 1);
        // A probe without an adapter (or an older line) has none of them.
        let q = ProbeLine::parse("probe: written=3 writer_cpu=1.0ms").unwrap();
        assert_eq!((q.adapter_ms, q.engine_events, q.engine_log_ms), (None, None, None));
        // Nonsense times are not figures.
        let q = ProbeLine::parse("probe: adapter=-1ms engine_log=NaNms written=1").unwrap();
        assert_eq!((q.adapter_ms, q.engine_log_ms), (None, None));
        assert!(ProbeLine::parse("probe: off (PROBE_SINK unset or off)").is_none());
        assert!(ProbeLine::parse("Compiling x").is_none());
    }

    #[test]
    fn probe_lines_of_several_programs_add_up() {
        let mut p = ProbeLine::parse(
            "probe: workers=2 written=98 lost=2 bytes=1000 writer_cpu=3.5ms adapter=2.0ms engine_events=7",
        )
        .unwrap();
        p.add(&ProbeLine::parse("probe: workers=1 written=10 elided=4 local=6 bytes=200 writer_cpu=0.5ms adapter=0.5ms engine_events=3 engine_log=0.25ms engine_flushes=9 engine_flush=0.125ms").unwrap());
        // (The first line's engine_events had no price: not a figure.)
        let want = ProbeLine {
            lines: 2,
            workers: Some(3),
            produced: None,
            written: Some(108),
            lost: Some(2),
            elided: Some(4),
            local: Some(6),
            bytes: Some(1200),
            writer_cpu_ms: Some(4.0),
            adapter_ms: Some(2.5),
            engine_events: Some(3),
            engine_log_ms: Some(0.25),
            engine_flushes: Some(9),
            engine_flush_ms: Some(0.125),
            idle_flushes: None,
            idle_engine_ms: None,
            idle_adapter_ms: None,
            unadapted_written: 0,
            unadapted_elided: 0,
        };
        assert_eq!(p, want);
        // A program without an adapter: its pushes are estimated, the
        // others' are in their adapter's time.
        p.add(&ProbeLine::parse("probe: written=1000 elided=10").unwrap());
        assert_eq!((p.unadapted_written, p.unadapted_elided), (1000, 10));
        let mut t = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        let c = Cost::new(&t, Some(&p), 12.0, 10.0);
        assert!((c.worker_threads_ms - (2.5 + 0.25 + 0.0121)).abs() < 1e-9, "{c:?}");
        // Absurd figures saturate instead of overflowing the sum.
        p.add(&ProbeLine::parse(&format!("probe: lost={}", u64::MAX)).unwrap());
        assert_eq!(p.lost, Some(u64::MAX));
    }

    #[test]
    fn cost_is_records_times_constants_over_worker_time() {
        let mut t = RunTotals { worker_ns: 2_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        t.streams.insert(("h".into(), 0, 1));
        let p = ProbeLine {
            written: Some(1_000_000),
            elided: Some(1_000_000),
            writer_cpu_ms: Some(10.0),
            ..Default::default()
        };
        let c = Cost::new(&t, Some(&p), 12.0, 10.0);
        assert!((c.est_probe_ms - 22.0).abs() < 1e-9);
        assert!((c.est_probe_share - 0.011).abs() < 1e-9);
        assert!((c.writer_cpu_share.unwrap() - 0.01).abs() < 1e-9);
        // No adapter: the worker threads' share is the pushes' estimate.
        assert!((c.worker_threads_ms - 22.0).abs() < 1e-9);
        assert!((c.worker_threads_share - 0.011).abs() < 1e-9);
    }

    #[test]
    fn with_an_adapter_its_measured_time_replaces_the_push_estimate() {
        let mut t = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        let p = ProbeLine {
            written: Some(1_000_000),
            adapter_ms: Some(30.0),
            engine_events: Some(3_000_000),
            engine_log_ms: Some(90.0),
            engine_flushes: Some(1_000_000),
            engine_flush_ms: Some(30.0),
            ..Default::default()
        };
        let c = Cost::new(&t, Some(&p), 12.0, 10.0);
        // The adapter's 30 ms hold the 12 ms of pushes: not added twice.
        assert!((c.est_probe_ms - 12.0).abs() < 1e-9);
        assert!((c.worker_threads_ms - 120.0).abs() < 1e-9, "{c:?}");
        assert!((c.worker_threads_share - 0.12).abs() < 1e-9, "{c:?}");
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, c).text();
        assert!(text.contains("in the worker threads ~120.00 ms = 12.00% of worker time"), "{text}");
        assert!(text.contains("3000000 events ~60.00 ms, ~20 ns each"), "{text}");
        assert!(text.contains("1000000 flushes of its logs ~30.00 ms, ~30 ns each"), "{text}");
        assert!(text.contains("the adapter 30.00 ms (measured, including the probe's pushes, ~12.00 ms"), "{text}");
    }

    /// One account, first in the terminal and in the JSON (which the page
    /// and `/metrics` read): the worker threads' cost while they worked,
    /// and apart, idle polling. (The figures of the test below: 40.03 ms of
    /// 1 s, 760 ms idle.)
    #[test]
    fn the_cost_account_is_one_line_and_idle_polling_apart() {
        let l = "probe: workers=1 written=100 elided=0 adapter=200.0ms engine_events=1000 engine_log=600.03ms \
                 engine_flushes=20000000 engine_flush=600.0ms idle_flushes=19000000 idle_engine=570.0ms idle_adapter=190.0ms";
        let p = ProbeLine::parse(l).unwrap();
        let mut t = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        let c = Cost::new(&t, Some(&p), 12.0, 10.0);
        assert_eq!(c.account, "tracing cost the worker threads ~40.03 ms = 4.00% of their time while they worked (measured, with the engine's logging)");
        assert_eq!(
            c.idle_account.as_deref(),
            Some("apart: ~760.00 ms in idle polling (flush calls of steps that did nothing)")
        );
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["account"], c.account.as_str());
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, c.clone()).text();
        let first_cost_line = text.lines().find(|l| l.contains("tracing cost")).unwrap();
        assert_eq!(first_cost_line.trim(), c.account, "{text}");
    }

    /// Windows before every process of a cluster had started are said
    /// apart, in the text and the JSON (and only when there are some).
    #[test]
    fn the_summary_says_how_many_windows_came_before_every_process_started() {
        let t = RunTotals { windows: 10, incomplete: 3, starting: 2, ..Default::default() };
        let s = Summary::new(&["x".into()], 0, 1000.0, &t, Cost::new(&t, None, 12.0, 10.0));
        let text = s.text();
        assert!(
            text.contains(
                "windows: 10 (3 incomplete, 2 of them before every process had started, kept out of the figures below"
            ),
            "{text}"
        );
        assert_eq!(serde_json::to_value(&s).unwrap()["starting_windows"], 2);
        let t = RunTotals { windows: 10, ..Default::default() };
        let s = Summary::new(&["x".into()], 0, 1000.0, &t, Cost::new(&t, None, 12.0, 10.0));
        assert!(!s.text().contains("before every process"));
        assert!(serde_json::to_value(&s).unwrap().get("starting_windows").is_none());
    }

    /// Operators whose share rounds to 0.0 % say nothing: left out.
    #[test]
    fn the_summary_leaves_out_operators_that_round_to_nothing() {
        let mut t = RunTotals { critical_path_ns: 1_000_000_000, ..Default::default() };
        t.operators.insert((0, "Count".into()), 990_000_000);
        t.operators.insert((0, "Probe".into()), 10_000);
        let c = Cost::new(&t, None, 12.0, 10.0);
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, c).text();
        assert!(text.contains("w0 Count 99.0%"), "{text}");
        assert!(!text.contains("Probe"), "{text}");
    }

    #[test]
    fn the_summary_names_the_largest_arrangements_with_their_last_level_and_peak() {
        use crate::analysis::report::{ArrangementReport, WindowReport};
        let a = |worker, operator, name: &str, records, peak_records| ArrangementReport {
            worker,
            operator,
            name: name.into(),
            records,
            peak_records,
            ..Default::default()
        };
        let mut t = RunTotals::default();
        // w0's arrangement peaks at 6.1 M inside a window, holds 5.4 M, and
        // is dropped (0) when the program ends; w1's stays at 12,000.
        for arr in [
            vec![a(0, 4, "ArrangeByKey", 5_000_000, 6_100_000), a(1, 4, "ArrangeByKey", 12_000, 12_000)],
            vec![a(0, 4, "ArrangeByKey", 5_400_000, 5_400_000), a(1, 4, "ArrangeByKey", 12_000, 12_000)],
            vec![a(0, 4, "ArrangeByKey", 0, 5_400_000)],
        ] {
            t.add(&WindowReport { arrangements: arr, ..Default::default() });
        }
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, Cost::new(&t, None, 12.0, 10.0)).text();
        assert!(
            text.contains("  arrangements: w0 ArrangeByKey 5.4 M records (peak 6.1 M), w1 ArrangeByKey 12.0 k records (peak 12.0 k)\n"),
            "{text}"
        );
        assert!(!Summary::new(&[], 0, 1.0, &RunTotals::default(), Cost::default()).text().contains("arrangements"));
        // Two traces named alike on one worker (differential names every
        // `arrange` "Arrange") are told apart by their operators; w1's one
        // of that name is not.
        t.add(&WindowReport {
            arrangements: vec![a(0, 9, "Arrange", 100, 100), a(0, 11, "Arrange", 0, 90), a(1, 9, "Arrange", 80, 80)],
            ..Default::default()
        });
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, Cost::new(&t, None, 12.0, 10.0)).text();
        assert!(
            text.contains(", w0 Arrange (op 9) 100 records (peak 100), w0 Arrange (op 11) 0 records (peak 90)\n"),
            "{text}"
        );
    }

    /// The run's path shares waiting for input and outside operators are
    /// the windows' summed over their summed lengths: (0 + 30) of
    /// (100 + 100) ms is 15 % waiting for input; (50 + 0) of 200 ms is
    /// 25 % outside operators; one of 5 of 200 ms (2.5 %) is not said.
    #[test]
    fn the_runs_path_says_its_shares_waiting_for_input_and_outside_operators() {
        use crate::analysis::report::{ByKind, CpSummary, WindowReport};
        let window = |operator, waiting_for_input, unknown| WindowReport {
            critical_path: CpSummary {
                length_ns: 100_000_000,
                by_kind: ByKind { operator, waiting_for_input, unknown, ..Default::default() },
                ..Default::default()
            },
            ..Default::default()
        };
        let mut t = RunTotals::default();
        t.add(&window(50_000_000, 0, 50_000_000));
        t.add(&window(70_000_000, 30_000_000, 0));
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, Cost::new(&t, None, 12.0, 10.0)).text();
        assert!(text.contains("; waiting for input 15.0%; outside operators 25.0%\n"), "{text}");
        let mut t = RunTotals::default();
        t.add(&window(95_000_000, 0, 5_000_000));
        t.add(&window(100_000_000, 0, 0));
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, Cost::new(&t, None, 12.0, 10.0)).text();
        assert!(!text.contains("outside operators") && !text.contains("waiting for input"), "{text}");
    }

    #[test]
    fn a_scope_whose_progress_was_not_traced_is_named_with_what_it_means() {
        use crate::analysis::report::{UntracedScope, WindowReport};
        let mut t = RunTotals::default();
        let u = UntracedScope { worker: 1, operator: 2, name: "Propagate".into() };
        t.add(&WindowReport { untraced_progress: vec![u], ..Default::default() });
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, Cost::new(&t, None, 12.0, 10.0)).text();
        assert!(
            text.contains("  progress not traced in `Propagate`: the waits it ended read as waiting for input, and the what-if keeps them"),
            "{text}"
        );
        assert!(!Summary::new(&[], 0, 1.0, &RunTotals::default(), Cost::default()).text().contains("not traced"));
    }

    #[test]
    fn idle_steps_are_reported_apart_from_the_steps_that_did_work() {
        let l = "probe: workers=2 written=100 elided=0 adapter=200.0ms engine_events=1000 engine_log=600.03ms \
                 engine_flushes=20000000 engine_flush=600.0ms idle_flushes=19000000 idle_engine=570.0ms idle_adapter=190.0ms";
        let p = ProbeLine::parse(l).unwrap();
        assert_eq!((p.idle_flushes, p.idle_engine_ms, p.idle_adapter_ms), (Some(19_000_000), Some(570.0), Some(190.0)));
        let mut t = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        let c = Cost::new(&t, Some(&p), 12.0, 10.0);
        // 600.03 + 200 in all, of which 570 + 190 in idle steps.
        assert!((c.worker_threads_ms - 40.03).abs() < 1e-9, "{c:?}");
        assert!((c.idle_steps_ms - 760.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.idle_flushes, Some(19_000_000));
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, c).text();
        assert!(text.contains("~40.03 ms = 4.00% of worker time, in the steps that did work"), "{text}");
        assert!(text.contains("1000000 flushes of its logs ~30.00 ms"), "{text}");
        assert!(text.contains("the adapter 10.00 ms (measured"), "{text}");
        assert!(text.contains("~760.00 ms in 19000000 flush calls of steps that did nothing (the engine's ~570.00 ms, the adapter's ~190.00 ms)"), "{text}");

        // Summed over two programs; a part larger than its whole (a garbled
        // line) is cut to the whole.
        let mut q = p.clone();
        q.add(&ProbeLine::parse("probe: adapter=1.0ms engine_events=1 engine_log=2.0ms engine_flushes=5 engine_flush=1.0ms idle_flushes=9 idle_engine=7.0ms idle_adapter=3.0ms").unwrap());
        assert_eq!(q.idle_flushes, Some(19_000_005));
        assert_eq!(q.idle_engine_ms, Some(571.0));
        assert_eq!(q.idle_adapter_ms, Some(191.0));

        // Without idle steps the line is left out.
        let r = ProbeLine::parse("probe: adapter=1.0ms engine_events=1 engine_log=2.0ms engine_flushes=5 engine_flush=1.0ms idle_flushes=0 idle_engine=0.000ms idle_adapter=0.000ms").unwrap();
        let c = Cost::new(&t, Some(&r), 12.0, 10.0);
        assert!((c.worker_threads_ms - 3.0).abs() < 1e-9, "{c:?}");
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, c).text();
        assert!(!text.contains("steps that did nothing"), "{text}");

        // The adapter's idle part without the engine's figures is still
        // shown, since it is left out of the share.
        let a = ProbeLine::parse("probe: adapter=5.0ms idle_flushes=10 idle_engine=1.0ms idle_adapter=4.0ms").unwrap();
        assert_eq!((a.idle_flushes, a.idle_engine_ms, a.idle_adapter_ms), (None, None, Some(4.0)));
        let c = Cost::new(&t, Some(&a), 12.0, 10.0);
        assert!((c.worker_threads_ms - 1.0).abs() < 1e-9, "{c:?}");
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, c).text();
        assert!(text.contains("and ~4.00 ms in flush calls of steps that did nothing"), "{text}");
    }

    /// The summary's what-if text (the JSON's and `/api/summary`'s, both
    /// from `Summary::new`) says the job's figure, as its number and the
    /// terminal do: it said the last window's `window −50 %` where the job
    /// saved 25 %.
    #[test]
    fn the_summary_what_if_says_the_jobs_figure() {
        use crate::analysis::report::WindowReport;
        let mut t = RunTotals::default();
        let w = |saved_ns| WhatIf {
            speedup: "w0:Consume=2".into(),
            worker: Some(0),
            operator: "Consume".into(),
            factor: "2".into(),
            measured_ns: 100,
            saved_ns,
            saved_share: saved_ns as f64 / 100.0,
            ..Default::default()
        };
        // Two windows of 100 ns: one saves 0, the last 50: the job 25 %.
        for saved in [0, 50] {
            let mut r = WindowReport { what_if: vec![w(saved)], ..Default::default() };
            r.critical_path.span_ns = 100;
            t.add(&r);
        }
        let c = Cost::new(&t, None, 0.0, 0.0);
        let s = Summary::new(&["x".into()], 0, 1000.0, &t, c);
        assert_eq!(s.what_if, vec![("w0:Consume=2".into(), "w0 Consume 2× faster: job −25 %".into(), 0.25)]);
        assert!(s.text().contains("  what-if: w0 Consume 2× faster: job −25 %\n"), "{}", s.text());
        // A job saving of 0.4 % (2 ns of 500) is in the JSON, not said.
        let mut small = RunTotals::default();
        for saved in [0, 2] {
            let mut r = WindowReport { what_if: vec![w(saved)], ..Default::default() };
            r.critical_path.span_ns = 250;
            small.add(&r);
        }
        let s = Summary::new(&["x".into()], 0, 1000.0, &small, Cost::new(&small, None, 0.0, 0.0));
        assert_eq!(s.what_if.len(), 1, "{:?}", s.what_if);
        assert!(!s.text().contains("what-if"), "{}", s.text());
    }

    fn figures(written: u64, writer_cpu_ms: u64, last: bool) -> crate::analysis::report::ProbeFigures {
        crate::analysis::report::ProbeFigures {
            workers: Some(2),
            written: Some(written),
            lost: Some(1),
            elided: Some(10),
            bytes: Some(written * 10),
            writer_cpu_ns: Some(writer_cpu_ms * 1_000_000),
            last,
            ..Default::default()
        }
    }

    /// The probes' figures come from their streams: the last Stats frame of
    /// each process (running totals), summed over the processes, ahead of a
    /// `probe:` line on stderr, and the account says so.
    #[test]
    fn the_cost_takes_the_last_figures_of_each_process_from_the_streams() {
        use crate::analysis::report::ProcessFigures;
        let mut t = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        let f = |seq, figures| ProcessFigures { program: "p".into(), seq, figures };
        // Process 7: frames #5, #9 (the last, at shutdown) and a late #6
        // (read after #9, e.g. from another reader): #9 holds.
        t.probe_figures(1, 7, f(5, figures(100, 1, false)));
        t.probe_figures(1, 7, f(9, figures(1000, 4, true)));
        t.probe_figures(1, 7, f(6, figures(300, 2, false)));
        // Process 8: still running, its figures so far.
        t.probe_figures(1, 8, f(3, figures(50, 1, false)));
        let stderr = ProbeLine::parse("probe: written=99999 writer_cpu=999.0ms").unwrap();
        let c = Cost::new(&t, Some(&stderr), 12.0, 10.0);
        assert_eq!(c.source, "stream");
        assert_eq!((c.records, c.records_lost, c.elided_schedules, c.bytes), (1050, 2, 20, 10_500));
        assert_eq!(c.writer_cpu_ms, Some(5.0));
        assert_eq!(c.probe.as_ref().map(|p| (p.lines, p.workers)), Some((2, Some(4))));
        // Without an adapter: the pushes' estimate, 1050 × 12 + 20 × 10 ns.
        assert!((c.worker_threads_ms - 0.0128).abs() < 1e-9, "{c:?}");
        assert_eq!(c.source_words, "the probe's figures from its stream (2 processes, 1 still running: so far)");
        let text = Summary::new(&["x".into()], 0, 1000.0, &t, c).text();
        assert!(text.contains("  figures: the probe's figures from its stream (2 processes"), "{text}");
        assert!(text.contains("writer thread CPU 5.0 ms"), "{text}");
        // Without figures in the streams, the stderr line; without either,
        // the records as read.
        let none = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        let c = Cost::new(&none, Some(&stderr), 12.0, 10.0);
        assert_eq!((c.source, c.records, c.writer_cpu_ms), ("stderr", 99999, Some(999.0)));
        assert!(c.source_words.contains("`probe:` line on stderr"), "{}", c.source_words);
        let c = Cost::new(&none, None, 12.0, 10.0);
        assert_eq!((c.source, c.writer_cpu_ms), ("none", None));
        let text = Summary::new(&["x".into()], 0, 1000.0, &none, c).text();
        assert!(text.contains("writer thread CPU unknown (no probe figures)"), "{text}");
    }

    /// The adapter's figures from a stream are read as the `probe:` line's:
    /// a part no larger than its whole, events only with their price.
    #[test]
    fn stream_figures_are_read_as_the_probe_line_is() {
        use crate::analysis::report::{ProbeFigures, ProcessFigures};
        let mut t = RunTotals { worker_ns: 1_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        let figures = ProbeFigures {
            written: Some(100),
            adapter_ns: Some(200_000_000),
            engine_events: Some(1000),
            engine_log_ns: Some(600_030_000),
            engine_flushes: Some(20_000_000),
            engine_flush_ns: Some(600_000_000),
            idle_flushes: Some(19_000_000),
            idle_engine_ns: Some(570_000_000),
            // More than its whole: cut to it.
            idle_adapter_ns: Some(900_000_000),
            last: true,
            ..Default::default()
        };
        t.probe_figures(1, 7, ProcessFigures { program: "p".into(), seq: 1, figures });
        let c = Cost::new(&t, None, 12.0, 10.0);
        // 600.03 + 200 in all, of which 570 + 200 (cut) in idle steps.
        assert!((c.worker_threads_ms - 30.03).abs() < 1e-9, "{c:?}");
        assert!((c.idle_steps_ms - 770.0).abs() < 1e-9, "{c:?}");
        assert_eq!(c.account, "tracing cost the worker threads ~30.03 ms = 3.00% of their time while they worked (measured, with the engine's logging)");
        assert_eq!(c.source_words, "the probe's figures from its stream (1 process, final)");
    }

    /// A live sidecar serving process after process keeps at most
    /// `STREAMS_KEPT` of them; past that, ended processes' final figures are
    /// folded into a sum, and the account stays whole.
    #[test]
    fn figures_of_ended_processes_past_the_bound_are_folded_not_lost() {
        use crate::analysis::report::ProcessFigures;
        let mut t = RunTotals::default();
        let n = RunTotals::STREAMS_KEPT as u32 + 10;
        for pid in 0..n {
            // Every process but the last wrote 10 records; the last, 1000,
            // and is still running.
            let last = pid + 1 < n;
            t.probe_figures(
                1,
                pid,
                ProcessFigures {
                    seq: 1,
                    figures: figures(if last { 10 } else { 1000 }, 1, last),
                    ..Default::default()
                },
            );
        }
        assert_eq!(t.probes.len(), RunTotals::STREAMS_KEPT);
        assert_eq!((t.probes_folded[0].0, t.probes_folded[1].0), (10, 0));
        let c = Cost::new(&t, None, 12.0, 10.0);
        // 4,105 processes of 10 records and one of 1,000.
        assert_eq!(c.records, (n as u64 - 1) * 10 + 1000);
        assert_eq!(c.writer_cpu_ms, Some(n as f64));
        assert_eq!(c.probe.as_ref().unwrap().lines, n as u64);
        assert!(c.source_words.contains(&format!("({n} processes, 1 still running: so far)")), "{}", c.source_words);
    }
}
