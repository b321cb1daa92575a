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

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::Capability;
use timely::dataflow::operators::Probe;

use crate::analysis::model::{Fragment, Ns};
use crate::io::{Polled, Queues, Reader};
use crate::output::sink::Sink;

pub enum Inputs {
    Files(Vec<PathBuf>),
    Live { queues: Queues, stop: Arc<AtomicBool>, grace: Ns },
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
    /// and decoded on a helper thread per file ([`Reader::unpacked_ahead`]), not on the
    /// analysis worker: for a spare core. Only where a file is not shared
    /// among workers.
    pub unpack_thread: bool,
    /// Each worker's windows are analyzed on a thread of its own
    /// ([`crate::pipeline::analyst::Analyst`]) while the worker ingests the next: for
    /// a spare core.
    pub analysis_thread: bool,
}

/// What a run did, for the closing line and benchmarks.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    pub records: u64,
    pub bytes: u64,
    pub windows: u64,
    pub incomplete: u64,
    pub errors: Vec<String>,
    /// Sums over the windows analyzed (for a closing summary).
    pub totals: crate::analysis::report::RunTotals,
    /// The reader of an output closed it (`--json - | head`): the run
    /// stopped there, quietly (not an error).
    pub output_closed: bool,
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
struct Outputs {
    stopped: AtomicBool,
    /// The first write error that is not a closed pipe.
    error: Mutex<Option<String>>,
}

impl Outputs {
    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// `what` failed with `e` (whose message names the file: `NamedOutput`).
    fn fail(&self, what: &str, e: &std::io::Error) {
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

/// The worker that owns a window: consecutive windows of one host go to
/// consecutive workers (round robin), hosts start at different workers.
fn owner(host: u64, window: u64) -> u64 {
    window.wrapping_add(host.wrapping_mul(0xff51_afd7_ed55_8ccd) >> 40)
}

/// How timely's network threads' panics begin (a connection to another
/// process broke).
const NETWORK_PANIC: &str = "timely communication error";

/// Set when a worker thread panics. Its peers would otherwise wait forever
/// for its progress (the sources keep polling: a hung process burning CPU);
/// they see this, stop, and the run returns the panic as its error.
#[derive(Default)]
struct Failure {
    failed: AtomicBool,
    first: Mutex<Option<String>>,
    /// The first panic of any thread while the run was on (recorded by the
    /// hook of `record_panics`): the worker's own message, or that of
    /// timely's network thread when a connection to another process broke.
    first_panic: Mutex<Option<String>>,
    /// The thread of `first_panic`: only that worker is named as the one
    /// that panicked (a peer can panic *because* of it, on a lock it
    /// poisoned, and unwind first).
    first_thread: Mutex<Option<std::thread::ThreadId>>,
    /// Workers parked after a broken connection (never joined).
    parked: AtomicUsize,
}

impl Failure {
    /// The run's error, naming the first panic: a broken connection to
    /// another process of a cluster (timely's network threads panic with
    /// "timely communication error", the workers then with "MergeQueue
    /// poisoned"), or the worker's own.
    /// `threads_failed`: a thread of the run ended in a panic (without it a
    /// recorded panic is not this run's: it was caught elsewhere).
    fn error(&self, threads_failed: bool) -> Option<String> {
        let first = self.first.lock().ok().and_then(|f| f.clone());
        let panic = self.first_panic.lock().ok().and_then(|p| p.clone());
        let panic = panic.filter(|_| threads_failed || first.is_some() || self.failed.load(Ordering::SeqCst));
        match (first, panic) {
            (_, Some(p)) if p.contains(NETWORK_PANIC) => {
                Some(format!("lost the connection to another process of the cluster ({p}); this process stopped"))
            }
            (Some(f), Some(p)) => Some(format!("{f}: {p}")),
            (Some(f), None) => Some(f),
            (None, Some(p)) => Some(format!("a thread of the analysis panicked: {p}")),
            (None, None) => None,
        }
    }

    /// Whether the first panic was timely's network thread's.
    fn network(&self) -> bool {
        self.first_panic.lock().is_ok_and(|p| p.as_deref().is_some_and(|p| p.contains(NETWORK_PANIC)))
    }

    /// Parks the calling worker for good after a broken connection (see
    /// the worker loop in `run_with`).
    fn park_for_good(&self) -> ! {
        self.failed.store(true, Ordering::SeqCst);
        self.parked.fetch_add(1, Ordering::SeqCst);
        loop {
            std::thread::park();
        }
    }
}

/// Runs whose `Failure` takes the next panic's message.
static ACTIVE: Mutex<Vec<Arc<Failure>>> = Mutex::new(Vec::new());

/// Installs (once per process) a panic hook that gives the panic's thread
/// and message to every active run that has none yet, then calls the hook
/// that was there before (which prints it as usual).
fn record_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = crate::panic_message(info.payload());
            let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
            // Only timely's threads (workers "timely:work-N", network
            // "timely:send-N" / "timely:recv-N") are a run's.
            if !thread.starts_with("timely:") {
                previous(info);
                return;
            }
            let what = format!("thread '{thread}': {msg}");
            let mut known = false;
            {
                let active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
                for f in active.iter() {
                    if let Ok(mut first) = f.first_panic.lock() {
                        known |= first.is_some();
                        if first.is_none() {
                            *first = Some(what.clone());
                            if let Ok(mut t) = f.first_thread.lock() {
                                *t = Some(std::thread::current().id());
                            }
                        }
                    }
                }
            }
            // Timely's threads that fail *because* another did (a poisoned
            // queue, a joined thread that panicked) add nothing to the
            // first message: not printed again.
            let echo = ["MergeQueue poisoned", "Send thread panic", "Recv thread panic", NETWORK_PANIC];
            if !(known && echo.iter().any(|e| msg.starts_with(e))) {
                previous(info);
            }
        }));
    });
}

/// Records in `Failure` a panic of the worker thread holding it (when the
/// panic unwinds through the worker closure: building or running the
/// dataflow).
struct Armed<'a>(&'a Failure, usize);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let first_thread = self.0.first_thread.lock().ok().and_then(|t| *t);
            if first_thread.is_none_or(|t| t == std::thread::current().id()) {
                if let Ok(mut first) = self.0.first.lock() {
                    first.get_or_insert_with(|| format!("analysis worker {} panicked", self.1));
                }
            }
            self.0.failed.store(true, Ordering::SeqCst);
        }
    }
}

use crate::io::now_unix_ns;

/// How long a connection that has shown no stream yet holds the windows
/// back (a probe sends its first frames tens of ms after connecting; a
/// connection that sends none for this long is not waited for).
const JOIN_HOLD_NS: i128 = 2_000_000_000;
/// How far before its accept a new connection's first records may lie: the
/// probe stamps records from its start and connects as it starts (before
/// its 20 ms calibration); the margin covers a slow thread start or accept.
const JOIN_MARGIN_NS: i128 = 100_000_000;

/// How far behind the wall clock windows close when no stream is open: a
/// little more than the grace, so that a stream connecting now is not late.
fn idle_lag(grace: Ns) -> Ns {
    grace + grace / 2
}

/// The window (in timely time, read off the wall clock) that connections
/// accepted at `joined` (Unix ns) and not yet showing a stream hold back:
/// their first records may fall in it. `None` when none is recent.
fn join_hold(joined: impl Iterator<Item = i128>, now: i128, grace: i128, width: u64) -> Option<u64> {
    joined.filter(|&j| now - j < JOIN_HOLD_NS).map(|j| ((j - JOIN_MARGIN_NS - grace).max(0) as u64) / width).min()
}

/// Runs the analysis to its end (files) or until `stop` (live). A panic in a
/// worker, or a broken connection to another process of a cluster, ends the
/// run on every worker with an error naming the first panic. For that the
/// first call installs a process-wide panic hook that records panics while a
/// run is on and then calls the hook it replaced (it only leaves out timely's
/// follow-on panics of a failure already recorded).
pub fn run(settings: Settings, inputs: Inputs, sink: Sink) -> Result<RunStats, String> {
    let failure = Arc::new(Failure::default());
    record_panics();
    ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).push(failure.clone());
    let result = run_with(settings, inputs, sink, &failure);
    // After a broken connection the run's threads are left behind (parked
    // workers, network threads that fail one by one as the other processes
    // go): the run stays registered, so their panics count as follow-ons.
    if !failure.network() {
        ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).retain(|f| !Arc::ptr_eq(f, &failure));
    }
    result
}

fn run_with(settings: Settings, inputs: Inputs, sink: Sink, failure: &Arc<Failure>) -> Result<RunStats, String> {
    let config = timely::Config::from_args(settings.timely_args.clone().into_iter())?;
    let mut sink = sink;
    let perfetto = sink.perfetto.take();
    let perfetto_end = perfetto.clone();
    let perfetto_on = perfetto.is_some();
    let sink = Arc::new(Mutex::new(sink));
    let stats = Arc::new(Mutex::new(RunStats::default()));
    let outputs = Arc::new(Outputs::default());
    let outputs_end = outputs.clone();
    let total_bytes: u64 = match &inputs {
        Inputs::Files(f) => f.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum(),
        _ => 0,
    };
    let read_bytes = Arc::new(AtomicU64::new(0));
    // Host → (realtime − monotonic offset, shift). Timely time is the
    // window index plus the host's shift (its offset in whole windows, fixed
    // when the host is first seen and shared by this process's workers): the
    // hosts' windows then progress together by wall clock, while each window
    // stays on one host's own timeline (hosts are never mixed).
    let offsets: Arc<Mutex<BTreeMap<u64, (i128, u64)>>> = Arc::new(Mutex::new(BTreeMap::new()));
    let inputs = Arc::new(inputs);
    let width = settings.width;
    let progress_bar = settings.progress_bar;
    let sync = settings.sync.clone();
    let unpack_thread = settings.unpack_thread;
    let analysis_thread = settings.analysis_thread;
    let stats2 = stats.clone();
    let failure2 = failure.clone();
    let started = Instant::now();
    // The reports are printed by worker 0, in process 0. Another process of
    // a cluster whose own output (its Perfetto trace) failed must go on
    // analyzing the windows it owns for process 0's reports (dropping them
    // would leave gaps there that nothing marks); it only stops reading and
    // writing.
    let prints_reports =
        !matches!(config.communication, timely::CommunicationConfig::Cluster { process, .. } if process != 0);
    let guards = timely::execute(config, move |worker| {
        let index = worker.index();
        let _armed = Armed(&failure2, index);
        let peers = worker.peers();
        let sink = sink.clone();
        let stats = stats2.clone();
        let inputs = inputs.clone();
        let read_bytes = read_bytes.clone();
        let offsets = offsets.clone();
        let sync = sync.clone();
        let stats_print = stats.clone();
        let stats_analyze = stats.clone();
        let perfetto = perfetto.clone();
        let inputs2 = inputs.clone();
        let outputs = outputs.clone();
        let (outputs_analyze, outputs_print) = (outputs.clone(), outputs.clone());
        // How far the analysis got: the source stops reading while it is more
        // than a few windows ahead, so memory stays bounded by the windows in
        // flight however long the run (live: a wider margin for bursts).
        let analyzed: timely::dataflow::ProbeHandle<u64> = timely::dataflow::ProbeHandle::new();
        let analyzed2 = analyzed.clone();
        worker.dataflow::<u64, _, _>(move |scope| {
            let analyzed = analyzed2;
            let analyzed_out = analyzed.clone();
            let analysis_worker = scope.worker().clone();
            // Whether this worker's analysis thread started (set when the
            // Analyze operator is built, before anything runs).
            let analysis_thread_on = std::rc::Rc::new(std::cell::Cell::new(false));
            let analysis_thread_started = analysis_thread_on.clone();
            let fragments = source(scope, "Ingest", move |cap: Capability<u64>, info| {
                let activator = scope.activator_for(info.address.clone());
                let mut cap = Some(cap);
                let mut readers: Vec<Reader> = Vec::new();
                let live = matches!(*inputs, Inputs::Live { .. });
                if let Inputs::Files(files) = &*inputs {
                    // Every worker reads every file and decodes the streams
                    // it owns (see `io::Share`): decoding is parallel even for
                    // one file.
                    for (i, p) in files.iter().enumerate() {
                        let share = crate::io::Share { peers, index, file: i };
                        let name = p.display().to_string();
                        let progress = if share.primary() { Some(read_bytes.clone()) } else { None };
                        match std::fs::File::open(p) {
                            Ok(f) => {
                                let r = Reader::new(name, Box::new(f), width, progress)
                                    .shared(share)
                                    .with_sync(sync.clone());
                                readers.push(if unpack_thread { r.unpacked_ahead() } else { r });
                            }
                            Err(e) if !share.primary() => {
                                let _ = e;
                            }
                            Err(e) => {
                                let msg = format!("{name}: cannot open: {e}");
                                let _ = writeln!(std::io::stderr(), "sidecar: error: {msg}");
                                stats.lock().unwrap().errors.push(msg);
                            }
                        }
                    }
                }
                if let Inputs::Live { queues, .. } = &*inputs {
                    // The I/O thread wakes this operator when a connection
                    // of this worker has data; nothing polls.
                    let a = scope.worker().sync_activator_for(info.address.to_vec());
                    queues.workers[index % queues.workers.len()].set_waker(Box::new(move || {
                        let _ = a.activate();
                    }));
                }
                let mut buf: Vec<Fragment> = Vec::new();
                let mut last_bar = Instant::now();
                let mut late: u64 = 0;
                let mut first_late = String::new();
                move |output| {
                    let Some(c) = cap.as_mut() else { return };
                    if outputs.stopped() {
                        // An output failed or was closed: read no more.
                        let mut st = stats.lock().unwrap();
                        for r in &readers {
                            st.records += r.ingest.records;
                            st.bytes += r.ingest.bytes;
                        }
                        if progress_bar && index == 0 {
                            let _ = write!(std::io::stderr(), "\r{:60}\r", "");
                        }
                        readers.clear();
                        cap = None;
                        return;
                    }
                    let mut stopping = false;
                    if let Inputs::Live { queues, stop, .. } = &*inputs {
                        let q = &queues.workers[index % queues.workers.len()];
                        stopping = stop.load(Ordering::Relaxed);
                        if stopping {
                            // The I/O thread makes a last pass over the
                            // sockets after the stop: wait for it (briefly).
                            let t = Instant::now();
                            while !queues.io_done.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(1) {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                        readers.append(&mut q.readers.lock().unwrap());
                    }
                    let mut any_data = false;
                    // (A window on the analysis thread is one more in
                    // flight: the source reads one window less ahead. On
                    // `t50`: peak RSS 548–565 MB, against 570–628 reading
                    // two ahead and 444–458 without the thread; no slower.)
                    let ahead = if live {
                        16
                    } else if analysis_thread_on.get() {
                        1
                    } else {
                        2
                    };
                    let throttled = !stopping && analyzed.less_than(&c.time().saturating_sub(ahead));
                    for r in readers.iter_mut() {
                        if stopping {
                            // What has arrived is analyzed: read to the end
                            // of what is there (a closed connection to its
                            // end), briefly, then stop.
                            let t = Instant::now();
                            while matches!(r.poll(4 << 20), Polled::Data) && t.elapsed() < Duration::from_millis(500) {}
                            r.stop();
                        } else if throttled {
                            // the analysis is behind: let it catch up
                        } else if matches!(r.poll(4 << 20), Polled::Data) {
                            any_data = true;
                        }
                    }
                    // Hosts seen: fix their offset and shift once.
                    let mut new_host = false;
                    let hosts: Vec<(u64, (i128, u64))> = {
                        let mut offs = offsets.lock().unwrap();
                        for r in readers.iter() {
                            for h in r.ingest.hosts() {
                                offs.entry(h).or_insert_with(|| {
                                    new_host = true;
                                    let o = r.ingest.realtime_offset(h).unwrap_or(0);
                                    // ceil: a window's timely time is never
                                    // below the wall-clock index of its start
                                    (o, (o.max(0) as u64).div_ceil(width))
                                });
                            }
                        }
                        offs.iter().map(|(h, o)| (*h, *o)).collect()
                    };
                    let shift = |h: u64| hosts.iter().find(|x| x.0 == h).map_or(0, |x| x.1 .1);
                    if let (true, Inputs::Live { queues, .. }) = (new_host, &*inputs) {
                        // The other workers follow a host's clock once they
                        // see it: wake them now rather than at their next
                        // timeout (up to 100 ms; the first window with `-w 2`
                        // was emitted 99.9 ms late).
                        for q in &queues.workers {
                            q.wake();
                        }
                    }
                    // Live deadline: streams silent since before now − grace
                    // close their windows up to then (their gap is "open").
                    if let Inputs::Live { grace, .. } = &*inputs {
                        let now = now_unix_ns();
                        for (h, (o, _)) in &hosts {
                            let t = now - o - *grace as i128;
                            if t > 0 && *o != 0 {
                                for r in readers.iter_mut() {
                                    r.ingest.force(*h, t as Ns);
                                }
                            }
                        }
                        if readers.iter().all(|r| r.done) {
                            // No stream here: follow the wall clock of the
                            // hosts seen (in their timely time), a little more
                            // than the grace behind so that a stream
                            // connecting now is not late.
                            let back = idle_lag(*grace) as i128;
                            let k = hosts
                                .iter()
                                .map(|(_, (o, sh))| (((now - o - back).max(0) as u64) / width) + sh)
                                .min()
                                .unwrap_or_else(|| (((now - back).max(0) as u64) / width).saturating_sub(1));
                            if k > *c.time() {
                                c.downgrade(&k);
                            }
                        }
                    }
                    for r in readers.iter_mut() {
                        // Ended streams: a note to every owner (see
                        // `Fragment::marker`), at the first window without it.
                        for (sid, k, marks) in r.ingest.ended.drain(..) {
                            // On the timeline its windows were on (clock sync).
                            let tl = Some(r.ingest.sync.timeline(sid.host, sid.process)).filter(|&h| h != sid.host);
                            for p in 0..peers {
                                buf.push(Fragment {
                                    stream: Some(sid),
                                    window: k,
                                    timeline: tl,
                                    marker: true,
                                    route: p as u64,
                                    seq_before: marks.clone(),
                                    ..Default::default()
                                });
                            }
                        }
                        r.take_fragments(&mut buf);
                        for e in r.ingest.errors.drain(..) {
                            let _ = writeln!(std::io::stderr(), "sidecar: error: {e}");
                            stats.lock().unwrap().errors.push(e);
                        }
                    }
                    {
                        let mut session = output.session(&*c);
                        let t0 = *c.time();
                        for mut f in buf.drain(..) {
                            let host = crate::analysis::causality::window_host(&f);
                            let t = f.window + shift(host);
                            if t < t0 {
                                if late == 0 {
                                    first_late = format!(
                                        "{} window {} of host {host:016x}{}",
                                        f.stream.map_or("a stream".to_string(), |s| s.to_string()),
                                        f.window,
                                        if f.marker { " (end marker)" } else { "" }
                                    );
                                }
                                late += 1;
                                continue;
                            }
                            f.other_hosts = hosts.iter().map(|x| x.0).filter(|&h| h != host).collect();
                            session.give((host, t, f));
                        }
                    }
                    // Fragments are given at the capability's time; their
                    // timely time travels in the data, and the owner holds a
                    // capability for it.
                    if progress_bar && index == 0 && last_bar.elapsed() > Duration::from_millis(200) {
                        last_bar = Instant::now();
                        let r = read_bytes.load(Ordering::Relaxed);
                        let pct = if total_bytes > 0 { 100.0 * r as f64 / total_bytes as f64 } else { 0.0 };
                        let _ = write!(
                            std::io::stderr(),
                            "\r  reading {:>5.1}%  {} / {} MB ",
                            pct,
                            r >> 20,
                            total_bytes >> 20
                        );
                    }
                    let done = readers.iter().all(|r| r.done) && (!live || stopping);
                    if done {
                        let mut st = stats.lock().unwrap();
                        for r in &readers {
                            st.records += r.ingest.records;
                            st.bytes += r.ingest.bytes;
                        }
                        if late > 0 {
                            let e = format!(
                                "{late} fragments arrived after their window was analyzed (the first: {first_late})"
                            );
                            let _ = writeln!(std::io::stderr(), "sidecar: error: {e}");
                            st.errors.push(e);
                        }
                        if progress_bar && index == 0 {
                            let _ = write!(std::io::stderr(), "\r{:60}\r", "");
                        }
                        cap = None;
                        return;
                    }
                    // (On the wall clock a window's timely time is never
                    // later than on its host's timeline: the hold errs early.)
                    let joining = match &*inputs {
                        Inputs::Live { grace, .. } => join_hold(
                            readers
                                .iter()
                                .filter(|r| !r.done && !r.ingest.has_streams())
                                .filter_map(|r| r.joined_unix_ns),
                            now_unix_ns(),
                            *grace as i128,
                            width,
                        ),
                        _ => None,
                    };
                    let min = readers.iter().filter_map(|r| r.ingest.frontier(shift)).chain(joining).min();
                    if let Some(m) = min {
                        if m > *c.time() {
                            c.downgrade(&m);
                        }
                    }
                    if throttled {
                        activator.activate_after(Duration::from_millis(1));
                    } else if any_data {
                        activator.activate();
                    } else if let Inputs::Live { grace, .. } = &*inputs {
                        // Data wakes this operator (the I/O thread); without
                        // data it must still run when a window's deadline
                        // passes, and now and then to see a stop. (With no
                        // stream left the deadline is the idle lag's: waking
                        // at the grace's found the window not yet due, and
                        // the next wake came up to 100 ms later.)
                        let now = now_unix_ns();
                        let lag = if readers.iter().all(|r| r.done) { idle_lag(*grace) } else { *grace };
                        let next = hosts
                            .iter()
                            .map(|(_, (o, _))| {
                                let t = (now - o - lag as i128).max(0) as u64;
                                (t / width + 1) * width - t
                            })
                            .min()
                            .unwrap_or(u64::MAX);
                        let ns = next.clamp(1_000_000, 100_000_000);
                        activator.activate_after(Duration::from_nanos(ns));
                    } else {
                        activator.activate();
                    }
                }
            });
            // The owner of each window gathers its fragments.
            let live = matches!(*inputs2, Inputs::Live { .. });
            let stop_flag = match &*inputs2 {
                Inputs::Live { stop, .. } => Some(stop.clone()),
                _ => None,
            };
            let reports = fragments.unary_frontier(
                Exchange::new(|(h, _, f): &(u64, u64, Fragment)| if f.marker { f.route } else { owner(*h, f.window) }),
                "Analyze",
                move |_cap, info| {
                    // Results wake this operator: it holds their windows'
                    // capabilities until they are out.
                    let mut analyst = analysis_thread
                        .then(|| {
                            let a = analysis_worker.sync_activator_for(info.address.to_vec());
                            crate::pipeline::analyst::Analyst::start(width, move || {
                                let _ = a.activate();
                            })
                        })
                        .and_then(|r| {
                            r.map_err(|e| crate::say!("sidecar: no analysis thread ({e}): analyzing on the worker"))
                                .ok()
                        });
                    analysis_thread_started.set(analyst.is_some());
                    // (timely time, host) → fragments of that window
                    let mut stash: BTreeMap<(u64, u64), Vec<Fragment>> = BTreeMap::new();
                    let mut ended = crate::analysis::model::EndedStreams::default();
                    let mut caps: BTreeMap<u64, Capability<u64>> = BTreeMap::new();
                    move |(input, frontier), output| {
                        input.for_each_stamp(|cap, data| {
                            for v in data {
                                for (h, w, f) in v.drain(..) {
                                    if f.marker {
                                        if let Some(sid) = f.stream {
                                            ended.note(sid, f.window, f.seq_before);
                                        }
                                        continue;
                                    }
                                    if let std::collections::btree_map::Entry::Vacant(e) = caps.entry(w) {
                                        if let Some(c) = cap.retain_least(0) {
                                            e.insert(c.delayed(&w.max(*c.time())));
                                        }
                                    }
                                    stash.entry((w, h)).or_default().push(f);
                                }
                            }
                        });
                        // Windows the frontier has passed are whole. (Times
                        // are totally ordered: those are the first keys.
                        // Scanning on past them made an activation cost all
                        // the windows in flight, quadratic when a stream's
                        // fragments span very many.)
                        let ready: Vec<(u64, u64)> =
                            stash.keys().take_while(|(w, _)| !frontier.less_equal(w)).copied().collect();
                        // A window analyzed: its Perfetto part written, its
                        // report counted and sent on at its capability.
                        let emit = |d: crate::pipeline::analyst::Done| {
                            let (key, rep) = (d.key, d.report);
                            if let (Some(p), Some(detail)) = (&perfetto, &d.detail) {
                                if !outputs_analyze.stopped() {
                                    if let Err(e) = p.lock().unwrap().window(detail) {
                                        outputs_analyze.fail("the Perfetto trace", &e);
                                    }
                                }
                            }
                            drop(d.detail);
                            stats_analyze.lock().unwrap().totals.add(&rep);
                            // Live: how late the window's line is. A window cut
                            // short (Ctrl-C) is analyzed before its end: not
                            // late, 0 (its negative distance to the end would
                            // read as a latency and measures nothing). Before
                            // a stop, a negative value is kept: a window
                            // analyzed before its end would be a clock fault.
                            let stopping = stop_flag.as_ref().is_some_and(|f| f.load(Ordering::Relaxed));
                            let delay_ms = rep.start_unix_ns.filter(|_| live).map(|s| {
                                let d = now_unix_ns() - (s as i128 + width as i128);
                                (if stopping { d.max(0) } else { d }) as f64 / 1e6
                            });
                            let mut json = serde_json::to_value(&rep).unwrap_or_default();
                            if let (Some(d), Some(o)) = (delay_ms, json.as_object_mut()) {
                                o.insert("emitted_after_end_ms".into(), serde_json::json!((d * 10.0).round() / 10.0));
                            }
                            let line = rep.line();
                            caps.get(&key.0).cloned().map(|c| (c, (key.0, key.1, json.to_string(), line, rep.complete)))
                        };
                        let mut out = Vec::new();
                        // Windows the analysis thread finished since the
                        // last activation (in window order, before any
                        // analyzed below).
                        if let Some(a) = analyst.as_mut() {
                            while let Some(d) = a.try_take() {
                                out.extend(emit(d));
                            }
                        }
                        for key in ready {
                            let mut frags = stash.remove(&key).unwrap();
                            if outputs_analyze.stopped() && prints_reports {
                                // nowhere to write it
                                continue;
                            }
                            let window = frags[0].window;
                            ended.apply(window, width, &mut frags);
                            let job = crate::pipeline::analyst::Job { key, window, frags, detail: perfetto.is_some() };
                            match analyst.as_mut() {
                                Some(a) => {
                                    while !a.has_room() {
                                        out.extend(a.wait().and_then(&emit));
                                    }
                                    a.submit(job);
                                }
                                None => out.extend(emit(job.analyze(width))),
                            }
                        }
                        // (Reports are small: a window's detail is gone once
                        // written.)
                        for (c, x) in out.drain(..) {
                            output.session(&c).give(x);
                        }
                        caps.retain(|&w, _| {
                            stash.range((w, 0)..=(w, u64::MAX)).next().is_some()
                                || analyst.as_ref().is_some_and(|a| a.holds(w))
                        });
                    }
                },
            );
            let sink = sink.clone();
            let stats = stats_print;
            let outputs = outputs_print;
            let perfetto_out = perfetto_on;
            let mut pending: BTreeMap<(u64, u64), (String, String, bool)> = BTreeMap::new();
            reports.probe_with(&analyzed_out).sink(Exchange::new(|_| 0), "Print", move |(input, frontier)| {
                let p = &mut pending;
                input.for_each(|_cap, data| {
                    for (w, h, json, line, complete) in data.drain(..) {
                        p.insert((w, h), (json, line, complete));
                    }
                });
                let ready: Vec<(u64, u64)> = p.keys().take_while(|(w, _)| !frontier.less_equal(w)).copied().collect();
                if ready.is_empty() {
                    return;
                }
                let mut s = sink.lock().unwrap();
                let s = &mut *s;
                // The terminal lines are the run's output only without JSON
                // or a trace; else (or on standard error) a failed write
                // just ends them.
                let terminal_only = s.json.is_none() && !perfetto_out;
                let mut st = stats.lock().unwrap();
                for k in ready {
                    let (json, line, complete) = p.remove(&k).unwrap();
                    if outputs.stopped() {
                        continue;
                    }
                    if let Some(j) = s.json.as_mut() {
                        if let Err(e) = writeln!(j, "{json}") {
                            outputs.fail("the JSON output", &e);
                            continue;
                        }
                    }
                    if let Some(t) = s.terminal.as_mut() {
                        if let Err(e) = writeln!(t, "{line}") {
                            if terminal_only {
                                outputs.fail("the window summaries", &e);
                                continue;
                            }
                            s.terminal = None;
                        }
                    }
                    st.windows += 1;
                    st.incomplete += (!complete) as u64;
                }
                if let Some(j) = s.json.as_mut() {
                    if let Err(e) = j.flush() {
                        outputs.fail("the JSON output", &e);
                    }
                }
                if let Some(t) = s.terminal.as_mut() {
                    if let Err(e) = t.flush() {
                        if terminal_only {
                            outputs.fail("the window summaries", &e);
                        }
                        s.terminal = None;
                    }
                }
            });
        });
        // Stepped here rather than by `timely::execute`, which parks without
        // a limit: wake now and then to see whether a peer failed.
        loop {
            let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                worker.step_or_park(Some(Duration::from_millis(100)))
            }));
            match step {
                Ok(true) => {}
                Ok(false) => break,
                // A connection to another process broke (its network thread
                // panicked, and this worker on the queue it poisoned).
                // Unwinding would drop the dataflow, whose channel ends flush
                // into the poisoned queues and panic again inside the unwind:
                // an abort. This worker stays parked instead; `run` returns
                // without joining it.
                Err(_) if failure2.network() => failure2.park_for_good(),
                Err(p) => std::panic::resume_unwind(p),
            }
            if failure2.failed.load(Ordering::SeqCst) {
                if failure2.network() {
                    failure2.park_for_good();
                }
                // This dataflow can never complete: unwind to drop it
                // (quietly: resume_unwind runs no panic hook).
                std::panic::resume_unwind(Box::new("stopped: another worker panicked"));
            }
        }
    })?;
    // Wait for the workers; after a broken connection to another process
    // they park (see above) and are left behind, never joined.
    while !guards.guards().iter().all(|h| h.is_finished()) {
        if failure.failed.load(Ordering::SeqCst) && failure.network() {
            let local = guards.guards().len();
            let t = Instant::now();
            while failure.parked.load(Ordering::SeqCst) + guards.guards().iter().filter(|h| h.is_finished()).count()
                < local
                && t.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::mem::forget(guards);
            return Err(failure.error(true).unwrap_or_else(|| "lost a connection to another process".into()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // Joining also joins timely's network threads, and panics if one of
    // them did: that is the run's error, not a reason to unwind out of it.
    let results = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guards.join()));
    let joined_ok = results.as_ref().is_ok_and(|r| r.iter().all(|r| r.is_ok()));
    if let Some(e) = failure.error(!joined_ok) {
        return Err(e);
    }
    for r in results.map_err(|_| "the analysis threads failed".to_string())? {
        r?;
    }
    let _ = started;
    // Also after a stop: the trace then holds the windows written so far.
    if let Some(p) = perfetto_end {
        if let Err(e) = p.lock().unwrap().flush() {
            outputs_end.fail("the Perfetto trace", &e);
        }
    }
    if let Some(e) = outputs_end.error() {
        return Err(e);
    }
    let mut st = stats.lock().unwrap().clone();
    st.output_closed = outputs_end.stopped();
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_connection_holds_the_windows_its_first_records_may_fall_in() {
        let s = 1_000_000_000i128;
        let (grace, width) = (30_000_000, 100_000_000);
        // Accepted at 10 s: its first records may lie up to 100 ms (plus the
        // grace) before, so window 98 (9.8 s to 9.9 s) is held.
        assert_eq!(join_hold([10 * s].into_iter(), 10 * s + s / 2, grace, width), Some(98));
        // The earliest of several; one accepted too long ago is not waited for.
        assert_eq!(join_hold([10 * s, 11 * s, 7 * s].into_iter(), 11 * s + s / 2, grace, width), Some(98));
        assert_eq!(join_hold([10 * s].into_iter(), 12 * s, grace, width), None);
        assert_eq!(join_hold(std::iter::empty(), 12 * s, grace, width), None);
    }
}
