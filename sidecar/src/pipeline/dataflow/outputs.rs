//! The outputs: report lines written in window order by worker 0 (the
//! Print operator), what a failed write does ([`Outputs`]), and the close
//! of a run ([`Closing`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use timely::dataflow::channels::pact::ParallelizationContract;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::StreamVec;
use timely::progress::frontier::MutableAntichain;

use super::{RunStats, Shared};
use crate::analysis::report::WindowReport;
use crate::output::http::{Feed, WindowTraffic, WindowUpdate};
use crate::output::sink::{SharedPerfetto, Sink};

/// A window's report as Print writes it (exchanged to worker 0; made by
/// `report::Reporter`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct ReportLine {
    /// The window's timely time and its host.
    pub(super) time: u64,
    /// The timely time it goes out at, Print's order: the window's, or, for
    /// a revision, when the late records came.
    pub(super) at: u64,
    pub(super) host: u64,
    /// The window's number on its host's clock (its JSON's `window`).
    pub(super) window: u64,
    /// The JSON object (`--json`).
    pub(super) json: String,
    /// The terminal line.
    pub(super) line: String,
    /// `--http`: the window's lanes for the dashboard (JSON).
    pub(super) lanes: Option<String>,
    pub(super) complete: bool,
    /// 0: the window's first report; else its revision's number
    /// (`revise`), and whether the report it replaces was complete.
    pub(super) revision: u32,
    pub(super) was_complete: bool,
    /// A revision: the JSON of the report it replaces (the run's totals
    /// take that one out and this one in).
    pub(super) replaces: Option<String>,
    /// What the window's owner received for it (for `/metrics`).
    pub(super) traffic: WindowTraffic,
}

/// The first failed write to an output (JSON lines, the terminal lines when
/// they are the only output, the Perfetto trace) stops the run: the sources
/// stop reading, windows still in flight are dropped unanalyzed, and `run`
/// returns the error. A closed pipe (its reader went away, as with `| head`)
/// stops it the same way but is no error. Within this process only: with
/// `--processes N` the other processes go on to the end of their inputs, and
/// a process other than 0 still analyzes the windows it owns for process
/// 0's reports, which then mark the streams it no longer reads as missing.
#[derive(Default)]
pub(super) struct Outputs {
    stopped: AtomicBool,
    /// The first write error that is not a closed pipe.
    error: Mutex<Option<String>>,
}

impl Outputs {
    pub(super) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// `what` failed with `e` (whose message names the file: `NamedOutput`).
    pub(super) fn fail(&self, what: &str, e: &std::io::Error) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            if let Ok(mut first) = self.error.lock() {
                first.get_or_insert_with(|| format!("cannot write {what}: {e}"));
            }
        }
        self.stopped.store(true, Ordering::SeqCst);
    }

    fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }
}

/// The Print operator: the report lines of every window, gathered on one
/// worker (`pact`), written in window order once the frontier has passed
/// them.
pub(super) fn print<P>(reports: StreamVec<'_, u64, ReportLine>, pact: P, shared: &Shared)
where
    P: ParallelizationContract<u64, Vec<ReportLine>>,
{
    let mut printer = Printer {
        pending: BTreeMap::new(),
        sink: shared.sink.clone(),
        stats: shared.stats.clone(),
        outputs: shared.outputs.clone(),
        perfetto_on: shared.perfetto.is_some(),
        feed: shared.feed.clone(),
        live: match &*shared.inputs {
            super::Inputs::Live { queues, .. } => Some(queues.clone()),
            super::Inputs::Files(_) => None,
        },
        first: None,
    };
    reports.sink(pact, "Print", move |(input, frontier)| {
        input.for_each(|_cap, data| {
            for r in data.drain(..) {
                printer.pending.insert((r.at, r.host, r.revision, r.time), r);
            }
        });
        printer.print_ready(frontier);
    });
}

/// The Print operator's state.
struct Printer {
    /// Report lines by (timely time out, host, revision, window's timely
    /// time), until the frontier passes them.
    pending: BTreeMap<(u64, u64, u32, u64), ReportLine>,
    sink: Arc<Mutex<Sink>>,
    stats: Arc<Mutex<RunStats>>,
    outputs: Arc<Outputs>,
    perfetto_on: bool,
    feed: Option<Feed>,
    /// Live: the I/O thread's connection counts (refusals by the limits).
    live: Option<crate::io::Queues>,
    /// The timely time of the first window printed: the terminal lines
    /// number windows from the run's start (the JSON keeps the window's
    /// number on its host's clock, and its absolute times).
    first: Option<u64>,
}

impl Printer {
    /// Writes the lines of the windows the frontier has passed, and counts
    /// them.
    fn print_ready(&mut self, frontier: &MutableAntichain<u64>) {
        let ready: Vec<(u64, u64, u32, u64)> =
            self.pending.keys().take_while(|(w, ..)| !frontier.less_equal(w)).copied().collect();
        if ready.is_empty() {
            return;
        }
        let mut sink = self.sink.lock().unwrap();
        let sink = &mut *sink;
        // The terminal lines are the run's output only without JSON or a
        // trace; else (or on standard error) a failed write just ends them.
        let terminal_only = sink.json.is_none() && !self.perfetto_on;
        let mut st = self.stats.lock().unwrap();
        for k in ready {
            let mut report = self.pending.remove(&k).unwrap();
            if self.outputs.stopped() {
                continue;
            }
            let first = *self.first.get_or_insert(k.3);
            let number = k.3.saturating_sub(first);
            report.line = numbered_from_start(&report.line, report.window, number);
            count_in_totals(&mut st, &mut report);
            if write_lines(sink, &self.outputs, &report, terminal_only) {
                if report.revision == 0 {
                    st.windows += 1;
                    st.incomplete += (!report.complete) as u64;
                } else {
                    // (The revised report replaces the first.)
                    st.incomplete =
                        (st.incomplete + (!report.complete) as u64).saturating_sub(!report.was_complete as u64);
                }
                if let Some(feed) = &self.feed {
                    feed.window(WindowUpdate {
                        json: report.json,
                        number,
                        lanes: report.lanes,
                        totals: st.totals.clone(),
                        errors: st.errors.len() as u64,
                        connections: st.connections,
                        refused: self.live.as_ref().map_or([0; 5], |q| {
                            let c = &q.counts;
                            [&c.refused, &c.no_hello, &c.buffer_full, &c.total_full, &c.backlog_cut]
                                .map(|a| a.load(Ordering::Relaxed))
                        }),
                        traffic: report.traffic,
                    });
                }
            }
        }
        flush(sink, &self.outputs, terminal_only);
    }
}

/// Adds a printed window to the run's totals (a revision: in place of the
/// report it replaces), and the probes' figures that came with it. The
/// totals are summed here, where every window's line arrives, not by the
/// windows' owners: in a cluster those are in other processes too.
fn count_in_totals(st: &mut RunStats, line: &mut ReportLine) {
    let parse = |json: &str| serde_json::from_str::<WindowReport>(json);
    match parse(&line.json) {
        Ok(report) => {
            if let Some(old) = line.replaces.as_deref().and_then(|o| parse(o).ok()) {
                st.totals.remove(&old);
            }
            st.totals.add(&report);
        }
        // (Its own JSON: a failure is a bug, said rather than hidden.)
        Err(e) => st.error(format!("window {}: its report could not be read back for the totals: {e}", line.window)),
    }
}

/// A terminal line (`window 3291 (250 ms) ...`) with the window numbered
/// from the run's start (`window 4 (250 ms) ...`): the monotonic clock
/// divided by the window length means nothing to a reader. (A compact
/// line, for scripts, keeps its number.)
fn numbered_from_start(line: &str, window: u64, from_start: u64) -> String {
    match line.strip_prefix(&format!("window {window} ")) {
        Some(rest) => format!("window {from_start} {rest}"),
        None => line.to_string(),
    }
}

/// Writes a window's JSON and terminal lines; false when an output of the
/// run failed.
fn write_lines(sink: &mut Sink, outputs: &Outputs, report: &ReportLine, terminal_only: bool) -> bool {
    if let Some(j) = sink.json.as_mut() {
        if let Err(e) = writeln!(j, "{}", report.json) {
            outputs.fail("the JSON output", &e);
            return false;
        }
    }
    if let Some(t) = sink.terminal.as_mut() {
        if let Err(e) = writeln!(t, "{}", report.line) {
            if terminal_only {
                outputs.fail("the window summaries", &e);
                return false;
            }
            sink.terminal = None;
        }
    }
    true
}

fn flush(sink: &mut Sink, outputs: &Outputs, terminal_only: bool) {
    if let Some(j) = sink.json.as_mut() {
        if let Err(e) = j.flush() {
            outputs.fail("the JSON output", &e);
        }
    }
    if let Some(t) = sink.terminal.as_mut() {
        if let Err(e) = t.flush() {
            if terminal_only {
                outputs.fail("the window summaries", &e);
            }
            sink.terminal = None;
        }
    }
}

/// What the run keeps to close its outputs once the workers are done.
pub(super) struct Closing {
    stats: Arc<Mutex<RunStats>>,
    outputs: Arc<Outputs>,
    perfetto: Option<SharedPerfetto>,
}

impl Closing {
    pub(super) fn of(shared: &Shared) -> Closing {
        Closing { stats: shared.stats.clone(), outputs: shared.outputs.clone(), perfetto: shared.perfetto.clone() }
    }

    /// Flushes the Perfetto trace, then returns the first output's error or
    /// the run's figures.
    pub(super) fn close(self) -> Result<RunStats, String> {
        // Also after a stop: the trace then holds the windows written so far.
        if let Some(p) = self.perfetto {
            if let Err(e) = p.lock().unwrap().flush() {
                self.outputs.fail("the Perfetto trace", &e);
            }
        }
        if let Some(e) = self.outputs.error() {
            return Err(e);
        }
        let mut st = self.stats.lock().unwrap().clone();
        st.output_closed = self.outputs.stopped();
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::numbered_from_start;

    #[test]
    fn terminal_lines_number_windows_from_the_run_start() {
        let line = "window 3291 (250 ms)  complete  critical path 250 ms";
        assert_eq!(numbered_from_start(line, 3291, 0), "window 0 (250 ms)  complete  critical path 250 ms");
        assert_eq!(numbered_from_start(line, 3291, 7), "window 7 (250 ms)  complete  critical path 250 ms");
        // A compact line (`[3291  47296] ok ...`) is left as it is.
        assert_eq!(numbered_from_start("[3291  47296] ok", 3291, 0), "[3291  47296] ok");
    }
}
