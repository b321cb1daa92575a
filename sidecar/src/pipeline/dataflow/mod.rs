//! The pipeline on timely dataflow (DESIGN "Sidecar on timely").
//!
//! ```text
//!  Ingest (per worker: its byte streams) ──fragments, time = window──▶
//!     exchange by (host, window) ──▶ Analyze (the window's owner: waits,
//!     graph, critical path, participation, properties) ──reports──▶
//!     exchange to worker 0 ──▶ Print (in window order)
//! ```
//!
//! Byte streams are assigned to workers (file i → worker i mod peers; live
//! connections round robin). Everything a window needs travels to its owner
//! as that window's fragments; a window is analyzed once the frontier has
//! passed it, i.e. every stream has settled past its end. Workers in other
//! processes are reached the same way: timely's cluster configuration
//! changes only where the exchanges go, not the operators.
//!
//! One file per step: `handshake` (before the dataflow, a cluster's
//! processes check that they are of one build), `ingest_op` (byte streams → fragments at their
//! window's timely time), `analyze_op` (a window's owner gathers and
//! analyzes it), `report` (an analyzed window → its report line),
//! `outputs` (the lines written in window order; a failed write stops the
//! run), `failure` (a panicking worker or a lost process ends the run on
//! every worker). This file holds the run's public face and the wiring.

mod analyze_op;
mod failure;
mod handshake;
mod ingest_op;
mod meta_kept;
mod outputs;
mod report;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::Probe;
use timely::dataflow::{ProbeHandle, Scope};
use timely::worker::Worker;

use crate::analysis::model::Ns;
use crate::io::{Queues, Share, Splitter};
use crate::output::sink::{SharedPerfetto, Sink};

use failure::{Armed, Failure};
use ingest_op::{HostClocks, TimedFragment};
use outputs::Outputs;

pub enum Inputs {
    Files(Vec<PathBuf>),
    /// Live: the grace as the command line set it (see [`Grace`]).
    Live {
        queues: Queues,
        stop: Arc<AtomicBool>,
        grace: crate::pipeline::grace::Grace,
        /// The last windows that late records still revise
        /// (`--revise-within`; 0: none, see [`crate::pipeline::revise`]).
        revise_within: u64,
        /// How long a connection's unread backlog holds its streams'
        /// windows back past the grace, at most (`--max-backlog`, see
        /// [`crate::pipeline::grace::deadline`]).
        max_backlog: Ns,
    },
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub width: Ns,
    /// timely configuration: `-w N` threads, or a cluster (`-n`, `-p`, `-h`).
    pub timely_args: Vec<String>,
    pub progress_bar: bool,
    /// Clock models shared by every byte stream (clock sync, `sync`).
    pub sync: crate::ingest::sync::SharedSync,
    /// Files are read and their frames unpacked (checksums, decompression)
    /// and decoded on a helper thread per file
    /// ([`crate::io::Reader::unpacked_ahead`]), not on the analysis worker:
    /// for a spare core. Only where a file is not shared among workers.
    pub unpack_thread: bool,
    /// Each worker's windows are analyzed on a thread of its own
    /// ([`crate::pipeline::analyst::Analyst`]) while the worker ingests the next: for
    /// a spare core.
    pub analysis_thread: bool,
    /// With several workers in the process, or analysis threads: a
    /// window's analysis offers parts of itself to the workers that have
    /// nothing to read ([`crate::analysis::crew::Crew`]; with analysis
    /// threads, a worker waiting for its thread's analysis, or whose source
    /// is throttled until it ends). Without analysis threads, offline, a
    /// whole window is analyzed by whichever worker has nothing to read
    /// ([`crate::pipeline::analyst::JobBoard`]), not always by its owner.
    /// (Whole windows stay with their owners live, where a late record
    /// revises its window there, and with a timeline export or the
    /// dashboard, whose details are written in the order the analyses end.)
    pub shared_analysis: bool,
    /// The speedup every window predicts (`sidecar whatif`); an empty one:
    /// no what-if at all (`--what-if off`); None: each window ranks its own
    /// top operators.
    pub what_if: Option<Arc<[crate::analysis::whatif::Speedup]>>,
    /// Offline: each file's streams' bytes (the first pass over the files),
    /// by which the workers sharing a file deal its streams out
    /// ([`crate::io::StreamPlan`]); empty: by the streams' ids.
    pub stream_bytes: Arc<crate::io::StreamBytes>,
    /// Offline, when the first pass read every file whole: the hosts whose
    /// timelines the run's windows are on ([`crate::io::FirstPass::timelines`]).
    /// A window names the others as unsynchronized whatever the workers
    /// have read so far; None (live, or a pipe): the hosts seen so far.
    pub timelines: Option<Arc<std::collections::BTreeSet<u64>>>,
}

/// What a run did, for the closing line and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    pub records: u64,
    pub bytes: u64,
    pub windows: u64,
    pub incomplete: u64,
    /// The run's errors, the first [`RunStats::KEPT_ERRORS`] of them
    /// (`error_count` counts them all: a sidecar up for months must not
    /// keep a line per faulty connection).
    pub errors: Vec<String>,
    pub error_count: u64,
    /// Sums over the windows analyzed (for a closing summary).
    pub totals: crate::analysis::report::RunTotals,
    /// The reader of an output closed it (`--json - | head`): the run
    /// stopped there, quietly (not an error).
    pub output_closed: bool,
    /// Live: probe connections the analysis workers took.
    pub connections: u64,
    /// Bytes of the fragments this process's workers sent to another
    /// worker's windows, and of those to another process's (an estimate of
    /// their size on the wire; what crosses is fragments, never records).
    pub crossing_workers: u64,
    pub crossing_processes: u64,
    /// Another process of a cluster prints the reports: `windows` counts
    /// none, `analyzed_here` the windows this process analyzed for it.
    pub reports_elsewhere: bool,
    pub analyzed_here: u64,
}

impl RunStats {
    pub const KEPT_ERRORS: usize = 1000;

    /// Counts an error, and keeps it if it is among the first.
    pub fn error(&mut self, e: String) {
        self.error_count += 1;
        if self.errors.len() < Self::KEPT_ERRORS {
            self.errors.push(e);
        }
    }
}

/// Runs the analysis to its end (files) or until `stop` (live). A panic in a
/// worker, or a broken connection to another process of a cluster, ends the
/// run on every worker with an error naming the first panic. For that the
/// first call installs a process-wide panic hook that records panics while a
/// run is on and then calls the hook it replaced (it only leaves out timely's
/// follow-on panics of a failure already recorded).
pub fn run(settings: Settings, inputs: Inputs, sink: Sink) -> Result<RunStats, String> {
    let failure = Failure::register();
    let result = run_with(settings, inputs, sink, &failure);
    failure.unregister();
    result
}

/// The run: every worker builds the dataflow and steps it to its end; then
/// the outputs are closed and the run's figures returned.
fn run_with(settings: Settings, inputs: Inputs, sink: Sink, failure: &Arc<Failure>) -> Result<RunStats, String> {
    let config = timely::Config::from_args(settings.timely_args.clone().into_iter())?;
    let shared = Shared::new(settings, inputs, sink, prints_reports(&config), local_workers(&config));
    let closing = outputs::Closing::of(&shared);
    let guards = {
        let failure = failure.clone();
        execute(config, move |worker| run_worker(worker, &shared, &failure))?
    };
    failure::join_workers(guards, failure)?;
    closing.close()
}

/// `timely::execute`, but a cluster's connections are made by
/// [`crate::io::cluster`] (timely's own setup waits a second at a time for
/// the other processes) and handed to timely's allocators as its own setup
/// would.
fn execute<F>(config: timely::Config, work: F) -> Result<timely::communication::WorkerGuards<()>, String>
where
    F: Fn(&mut Worker) + Send + Sync + 'static,
{
    use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
    use timely::communication::allocator::{AllocatorBuilder, ProcessBuilder};
    match config.communication {
        timely::CommunicationConfig::Cluster { threads, process, ref addresses, zerocopy: false, .. } => {
            let sockets = crate::io::cluster::connect(addresses, process)
                .map_err(|e| format!("connecting the cluster's processes: {e}"))?;
            let hooks = timely::communication::Hooks::default();
            let local = ProcessBuilder::new_typed_vector(threads, hooks.refill.clone(), hooks.spill.clone());
            let (builders, guard) = initialize_networking_from_sockets(local, sockets, process, threads, hooks)
                .map_err(|e| format!("connecting the cluster's processes: {e}"))?;
            let builders = builders.into_iter().map(AllocatorBuilder::Tcp).collect();
            timely::execute::execute_from(builders, Box::new(guard), config.worker, work)
        }
        _ => timely::execute(config, work),
    }
}

/// What the workers of this process share during a run (each operator
/// takes the parts it needs).
#[derive(Clone)]
struct Shared {
    settings: Arc<Settings>,
    inputs: Arc<Inputs>,
    /// Where the report lines go (JSON, terminal); the Perfetto trace is
    /// apart, written by each window's owner.
    sink: Arc<Mutex<Sink>>,
    perfetto: Option<SharedPerfetto>,
    /// The dataflow graph (`export --dot`), folded by each window's owner.
    graph: Option<crate::output::sink::SharedGraph>,
    /// `--http`'s feed.
    feed: Option<crate::output::http::Feed>,
    /// The terminal lines' form (`--compact-lines`).
    compact_lines: bool,
    stats: Arc<Mutex<RunStats>>,
    outputs: Arc<Outputs>,
    /// Bytes of the files read so far, of `total_bytes` (the progress bar).
    read_bytes: Arc<AtomicU64>,
    total_bytes: u64,
    host_clocks: HostClocks,
    /// Whether this process prints the reports (see [`prints_reports`]).
    prints_reports: bool,
    /// This process's workers (global indices).
    local_workers: std::ops::Range<usize>,
    /// Each file shared by several workers, read once for all of them
    /// (by the file's position; the error if it could not be opened).
    splitters: Arc<Mutex<std::collections::BTreeMap<usize, Result<Arc<Splitter>, String>>>>,
    /// Which worker decodes each stream of the files (`None`: by the
    /// streams' ids), made once by the first worker to ask.
    stream_plan: Arc<std::sync::OnceLock<Option<Arc<crate::io::StreamPlan>>>>,
    /// The windows posted for analysis by any worker of the process, and
    /// the parts of windows offered ([`Settings::shared_analysis`]).
    job_board: Option<Arc<crate::pipeline::analyst::JobBoard>>,
    /// Whether whole windows are posted to `job_board` (else only their
    /// parts are offered).
    posts_windows: bool,
}

/// How a process's workers share the analysis ([`Settings::shared_analysis`]):
/// whether they take parts of each other's windows (a job board), and
/// whether whole windows are posted to it too (offline, with no output
/// whose details must come in window order).
fn analysis_sharing(settings: &Settings, offline: bool, local_workers: usize, details: bool) -> (bool, bool) {
    let board = settings.shared_analysis && (settings.analysis_thread || local_workers > 1);
    (board, board && !settings.analysis_thread && offline && !details)
}

impl Shared {
    fn new(
        settings: Settings,
        inputs: Inputs,
        mut sink: Sink,
        prints_reports: bool,
        local_workers: std::ops::Range<usize>,
    ) -> Shared {
        let perfetto = sink.perfetto.take();
        let graph = sink.graph.take();
        let feed = sink.http.take();
        let compact_lines = sink.compact_lines;
        let details = perfetto.is_some() || graph.is_some() || feed.is_some();
        let (board, posts_windows) =
            analysis_sharing(&settings, matches!(inputs, Inputs::Files(_)), local_workers.len(), details);
        let job_board = board.then(Default::default);
        let total_bytes: u64 = match &inputs {
            Inputs::Files(f) => f.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum(),
            _ => 0,
        };
        Shared {
            settings: Arc::new(settings),
            inputs: Arc::new(inputs),
            sink: Arc::new(Mutex::new(sink)),
            perfetto,
            graph,
            feed,
            compact_lines,
            stats: Arc::new(Mutex::new(RunStats { reports_elsewhere: !prints_reports, ..Default::default() })),
            outputs: Arc::new(Outputs::default()),
            read_bytes: Arc::new(AtomicU64::new(0)),
            total_bytes,
            host_clocks: HostClocks::default(),
            prints_reports,
            local_workers,
            splitters: Default::default(),
            stream_plan: Default::default(),
            job_board,
            posts_windows,
        }
    }

    /// The splitter of file `i` at `path` for this process's workers, made
    /// (the file opened) by the first worker to ask.
    fn splitter(&self, i: usize, path: &std::path::Path, share: Share) -> Result<Arc<Splitter>, String> {
        let mut all = self.splitters.lock().unwrap();
        let made = all.entry(i).or_insert_with(|| {
            let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
            let progress = Some(self.read_bytes.clone());
            Ok(Arc::new(Splitter::new(Box::new(f), share, self.local_workers.clone(), progress)))
        });
        made.clone()
    }

    /// The files' streams dealt out to `peers` workers by their bytes
    /// ([`crate::io::StreamPlan`]; `None` with one worker or no first pass):
    /// the same for every worker, made by the first to ask.
    fn stream_plan(&self, peers: usize) -> Option<Arc<crate::io::StreamPlan>> {
        let bytes = &self.settings.stream_bytes;
        let plan = self.stream_plan.get_or_init(|| {
            (peers > 1 && !bytes.is_empty()).then(|| Arc::new(crate::io::StreamPlan::balanced(bytes, peers)))
        });
        plan.clone()
    }

    fn live(&self) -> bool {
        matches!(*self.inputs, Inputs::Live { .. })
    }
}

/// What a worker's Ingest and Analyze operators tell each other.
///
/// The Analyze operator says whether its analysis thread started (set when
/// it is built, before anything runs): the source then reads one window
/// less ahead. The Ingest operator says whether its source read nothing in
/// its last activation (throttled, waiting, or done): the Analyze operator
/// may then analyze a window a peer posted, or a part of one
/// ([`crate::pipeline::analyst::JobBoard`]).
#[derive(Default)]
pub(super) struct OperatorLink {
    analysis_thread_on: std::cell::Cell<bool>,
    idle: std::cell::Cell<bool>,
    /// This worker's Analyze operator, woken when the source turns idle
    /// with windows posted.
    analyze: std::cell::RefCell<Option<timely::scheduling::Activator>>,
}

impl OperatorLink {
    /// Whether this worker's analysis thread started.
    fn analysis_thread_on(&self) -> bool {
        self.analysis_thread_on.get()
    }

    fn set_analysis_thread(&self, on: bool) {
        self.analysis_thread_on.set(on);
    }

    /// The Analyze operator to wake.
    fn wake_with(&self, analyze: timely::scheduling::Activator) {
        *self.analyze.borrow_mut() = Some(analyze);
    }

    /// Whether the source read nothing in its last activation.
    fn idle(&self) -> bool {
        self.idle.get()
    }

    /// The source's state after an activation.
    pub(super) fn set(&self, idle: bool, board: Option<&crate::pipeline::analyst::JobBoard>) {
        self.idle.set(idle);
        if idle && board.is_some_and(|b| !b.is_empty()) {
            if let Some(a) = self.analyze.borrow().as_ref() {
                a.activate();
            }
        }
    }
}

/// The global indices of this process's workers.
fn local_workers(config: &timely::Config) -> std::ops::Range<usize> {
    match config.communication {
        timely::CommunicationConfig::Thread => 0..1,
        timely::CommunicationConfig::Process(n) | timely::CommunicationConfig::ProcessBinary(n) => 0..n,
        timely::CommunicationConfig::Cluster { threads, process, .. } => process * threads..(process + 1) * threads,
    }
}

/// The reports are printed by worker 0, in process 0. Another process of a
/// cluster whose own output (its Perfetto trace) failed must go on analyzing
/// the windows it owns for process 0's reports (dropping them would leave
/// gaps there that nothing marks); it only stops reading and writing.
fn prints_reports(config: &timely::Config) -> bool {
    !matches!(config.communication, timely::CommunicationConfig::Cluster { process, .. } if process != 0)
}

/// One worker's part of the run: its dataflow, stepped to the end.
fn run_worker(worker: &mut Worker, shared: &Shared, failure: &Failure) {
    let _armed = Armed(failure, worker.index());
    // How far the analysis got: the source stops reading while it is more
    // than a few windows ahead, so memory stays bounded by the windows in
    // flight however long the run (live: a wider margin for bursts).
    let analyzed: ProbeHandle<u64> = ProbeHandle::new();
    // (A cluster's processes first check that they are of one build.)
    if let Err(e) = handshake::check_builds(worker, shared.local_workers.len(), failure) {
        return failure.stop_with(e);
    }
    worker.dataflow::<u64, _, _>(|scope| build_dataflow(scope, shared, analyzed));
    failure::step_to_end(worker, failure);
}

/// The dataflow: ingest → exchange to each window's owner → analyze (and
/// report) → exchange to worker 0 → print.
fn build_dataflow(scope: Scope<'_, u64>, shared: &Shared, analyzed: ProbeHandle<u64>) {
    let link = std::rc::Rc::new(OperatorLink::default());
    let fragments = ingest_op::ingest(scope, shared, analyzed.clone(), link.clone());
    let reports = analyze_op::analyze(fragments, Exchange::new(to_window_owner), shared, link);
    outputs::print(reports.probe_with(&analyzed), Exchange::new(|_| 0), shared);
}

/// Where a fragment goes: an end marker to the worker it is addressed to
/// (one per worker, see `Fragment::marker`), any other to its window's
/// owner.
fn to_window_owner(x: &TimedFragment) -> u64 {
    if x.fragment.marker {
        x.fragment.route
    } else {
        owner(x.host, x.fragment.window)
    }
}

/// The worker that owns a window: consecutive windows of one host go to
/// consecutive workers (round robin), hosts start at different workers.
fn owner(host: u64, window: u64) -> u64 {
    window.wrapping_add(host.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 40)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(shared_analysis: bool, analysis_thread: bool) -> Settings {
        Settings {
            width: 1_000_000,
            timely_args: Vec::new(),
            progress_bar: false,
            sync: crate::ingest::sync::SharedSync::default(),
            unpack_thread: false,
            analysis_thread,
            shared_analysis,
            what_if: None,
            stream_bytes: Default::default(),
            timelines: None,
        }
    }

    /// Live, and offline with the dashboard or a timeline export, windows
    /// stay with their owners but still offer their parts; so do windows
    /// analyzed on analysis threads (to their workers, even one); one
    /// worker without them, or sharing turned off, share nothing.
    #[test]
    fn windows_are_posted_offline_and_their_parts_offered_wherever_workers_are_several() {
        let on = settings(true, false);
        assert_eq!(analysis_sharing(&on, true, 2, false), (true, true));
        assert_eq!(analysis_sharing(&on, false, 2, false), (true, false));
        assert_eq!(analysis_sharing(&on, true, 2, true), (true, false));
        assert_eq!(analysis_sharing(&on, true, 1, false), (false, false));
        assert_eq!(analysis_sharing(&on, false, 1, false), (false, false));
        let threads = settings(true, true);
        assert_eq!(analysis_sharing(&threads, true, 2, false), (true, false));
        assert_eq!(analysis_sharing(&threads, true, 1, false), (true, false));
        assert_eq!(analysis_sharing(&threads, false, 1, false), (true, false));
        assert_eq!(analysis_sharing(&settings(false, false), false, 4, false), (false, false));
        assert_eq!(analysis_sharing(&settings(false, true), true, 1, false), (false, false));
    }
}
