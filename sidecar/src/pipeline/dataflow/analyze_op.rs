//! The Analyze operator: each window's owner gathers the window's fragments
//! from every stream and analyzes the window once the frontier has passed
//! it (every stream has settled past its end), on the worker, on its
//! analysis thread ([`Analyst`]), or on whichever worker of the process has
//! nothing to read ([`JobBoard`]). The window analysis itself is
//! [`crate::analysis`]'s; this decides when a window is whole and holds a
//! capability for it until its report is out.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use timely::dataflow::channels::pact::ParallelizationContract;
use timely::dataflow::operators::generic::Operator;
use timely::dataflow::operators::{Capability, InputCapability};
use timely::dataflow::StreamVec;
use timely::progress::frontier::MutableAntichain;
use timely::scheduling::SyncActivator;

use super::ingest_op::{wire_bytes, TimedFragment};
use super::meta_kept::MetaKept;
use super::outputs::Outputs;
use super::outputs::ReportLine;
use super::report::Reporter;
use super::{OperatorLink, Shared};
use crate::analysis::model::{EndedStreams, Fragment, MetaOnWire, Ns};
use crate::analysis::report::ProcessFigures;
use crate::output::http::WindowTraffic;
use crate::pipeline::analyst::{Analyst, Done, Job, JobBoard};
use crate::pipeline::revise::{Late, Retained};

/// The Analyze operator: `fragments` exchanged to their windows' owners
/// (`pact`) → the windows' report lines, each at its window's time.
/// `link` is told whether this worker's analysis thread started, and says
/// when this worker's source has nothing to read.
pub(super) fn analyze<'s, P>(
    fragments: StreamVec<'s, u64, TimedFragment>,
    pact: P,
    shared: &Shared,
    link: Rc<OperatorLink>,
) -> StreamVec<'s, u64, ReportLine>
where
    P: ParallelizationContract<u64, Vec<TimedFragment>>,
{
    let scope = fragments.scope();
    fragments.unary_frontier(pact, "Analyze", move |_cap, info| {
        // Results wake this operator: it holds their windows' capabilities
        // until they are out.
        let analyst = shared
            .settings
            .analysis_thread
            .then(|| {
                let a = scope.worker().sync_activator_for(info.address.to_vec());
                Analyst::start(shared.settings.width, move || {
                    let _ = a.activate();
                })
            })
            .and_then(|r| {
                r.map_err(|e| crate::say!("sidecar: no analysis thread ({e}): analyzing on the worker")).ok()
            });
        link.set_analysis_thread(analyst.is_some());
        let board = shared.job_board.clone();
        let shared_jobs = board.map(|board| {
            let wake = scope.worker().sync_activator_for(info.address.to_vec());
            let taker = wake.clone();
            board.register(move || {
                let _ = taker.activate();
            });
            link.wake_with(scope.activator_for(info.address.clone()));
            let (reply, replies) = std::sync::mpsc::channel();
            SharedJobs {
                board,
                posts: shared.posts_windows,
                reply,
                replies,
                wake,
                posted: Vec::new(),
                link: link.clone(),
            }
        });
        let again = scope.activator_for(info.address.clone());
        let mut owner = WindowOwner::new(shared, analyst, shared_jobs, scope.index(), again);
        let mut out = Vec::new();
        move |(input, frontier), output| {
            input.for_each_stamp(|cap, data| {
                for batch in data {
                    owner.gather(&cap, batch);
                }
            });
            owner.analyze_ready(frontier, &mut out);
            owner.take_posted(&mut out);
            // (Reports are small: a window's detail is gone once written.
            // Each goes in a container of its own size: `give` would make
            // room for a batch at every window's time, 8 KB a report.)
            for (c, x) in out.drain(..) {
                output.session(&c).give_container(&mut vec![x]);
            }
            owner.release_capabilities();
        }
    })
}

/// One worker's windows, from their first fragment to their report.
struct WindowOwner {
    /// (timely time, host) → the fragments of that window so far.
    stash: BTreeMap<(u64, u64), Vec<Fragment>>,
    /// (timely time, host) → what the window's fragments carried and where
    /// they came from, until its report goes out.
    traffic: BTreeMap<(u64, u64), WindowTraffic>,
    /// This process's workers (global indices).
    local_workers: std::ops::Range<usize>,
    /// This worker's index.
    index: usize,
    /// Streams that ended, for the windows after their end.
    ended: EndedStreams,
    /// A capability for each window (by timely time) gathered or in
    /// analysis: its report goes out at it.
    caps: BTreeMap<u64, Capability<u64>>,
    analyst: Option<Analyst>,
    /// Windows analyzed wherever a worker is free ([`JobBoard`]).
    shared_jobs: Option<SharedJobs>,
    reporter: Reporter,
    outputs: Arc<Outputs>,
    prints_reports: bool,
    /// The run's figures (this process prints the reports: the probes'
    /// figures go straight into its totals).
    stats: Arc<std::sync::Mutex<super::RunStats>>,
    width: Ns,
    what_if: Option<Arc<[crate::analysis::whatif::Speedup]>>,
    /// Live: the last windows reported, kept for late records to revise.
    retained: Retained,
    /// Late fragments (`Fragment::late`) to fold in, each with the
    /// capability its window's revised report goes out at.
    late: Vec<(Capability<u64>, u64, u64, Fragment)>,
    /// The streams' metadata workers of other processes sent to be kept.
    meta_kept: MetaKept,
    /// Schedules this operator again when it left ready windows for later
    /// ([`MAX_WINDOWS_PER_ACTIVATION`]).
    again: timely::scheduling::Activator,
}

/// The windows one activation analyzes at most; the rest wait for the next,
/// right after the reports went on. Reading stops a few windows ahead of the
/// analysis, but one record can carry a stream thousands of windows on (an
/// operator running for minutes, or a corrupt clock: `Windower`'s
/// `MAX_SPAN`, `MAX_SKIP`): analyzed in one go, all their reports were held
/// at once (1.5 GB for a 2 KB file of 24 records making 110,000 windows).
/// (64 made that file 30 % slower: every activation updates the progress
/// of all the windows' capabilities. 512 reports are about 1.5 MB.)
const MAX_WINDOWS_PER_ACTIVATION: usize = 512;

impl WindowOwner {
    fn new(
        shared: &Shared,
        analyst: Option<Analyst>,
        shared_jobs: Option<SharedJobs>,
        index: usize,
        again: timely::scheduling::Activator,
    ) -> WindowOwner {
        WindowOwner {
            stash: BTreeMap::new(),
            traffic: BTreeMap::new(),
            local_workers: shared.local_workers.clone(),
            index,
            ended: EndedStreams::default(),
            caps: BTreeMap::new(),
            analyst,
            shared_jobs,
            reporter: Reporter::new(shared),
            outputs: shared.outputs.clone(),
            prints_reports: shared.prints_reports,
            stats: shared.stats.clone(),
            width: shared.settings.width,
            what_if: shared.settings.what_if.clone(),
            retained: Retained::new(match &*shared.inputs {
                super::Inputs::Live { revise_within, .. } => *revise_within,
                super::Inputs::Files(_) => 0,
            }),
            late: Vec::new(),
            meta_kept: MetaKept::default(),
            again,
        }
    }

    /// Takes arriving fragments: an end marker is noted, any other is
    /// stashed with its window, which gets a capability at its timely time.
    fn gather(&mut self, cap: &InputCapability<u64>, batch: &mut Vec<TimedFragment>) {
        for tf in batch.drain(..) {
            if tf.is_carrier() {
                self.take_figures(tf.figures);
                continue;
            }
            let TimedFragment { host, time, from, fragment: mut f, .. } = tf;
            if f.meta_on_wire == MetaOnWire::Forget {
                self.meta_kept.receive(from, &mut f);
                continue;
            }
            self.book_traffic((time, host), from, &f);
            self.meta_kept.receive(from, &mut f);
            f.unpack();
            if let Some(sid) = f.stream {
                if f.marker {
                    self.ended.note(sid, f.window, f.seq_before);
                    self.ended.seen(sid, host, f.window);
                    continue;
                }
                self.ended.seen(sid, host, f.window);
            }
            if f.marker {
                continue;
            }
            if f.late {
                // (Its window's time is past: its revised report goes out
                // at the time it came at.)
                if let Some(c) = cap.retain_least(0) {
                    self.late.push((c, host, time, f));
                }
                continue;
            }
            if let Entry::Vacant(e) = self.caps.entry(time) {
                if let Some(c) = cap.retain_least(0) {
                    e.insert(c.delayed(&time.max(*c.time())));
                }
            }
            // (Room for one to start with: a window of one stream, a long
            // silence spelled out, would hold room for four.)
            self.stash.entry((time, host)).or_insert_with(|| Vec::with_capacity(1)).push(f);
        }
    }

    /// The probes' figures that came in a carrier: into the run's totals
    /// (carriers go to worker 0, in the process that prints them), which
    /// keep each process's latest by sequence number.
    fn take_figures(&mut self, figures: Vec<(u64, u32, ProcessFigures)>) {
        if figures.is_empty() {
            return;
        }
        let mut st = self.stats.lock().unwrap();
        for (host, process, f) in figures {
            st.totals.probe_figures(host, process, f);
        }
    }

    /// Books a fragment of window `key` that came from worker `from`: its
    /// stream's bytes on the wire, and its own size if it crossed from
    /// another worker (of this process or another).
    fn book_traffic(&mut self, key: (u64, u64), from: u32, f: &Fragment) {
        let t = self.traffic.entry(key).or_default();
        t.input_bytes += f.counters.bytes;
        let from = from as usize;
        if from != self.index {
            if self.local_workers.contains(&from) {
                t.from_this_process += wire_bytes(f, false);
            } else {
                t.from_other_processes += wire_bytes(f, true);
            }
        }
    }

    /// Analyzes the windows the frontier has passed (they are whole), in
    /// order, at most [`MAX_WINDOWS_PER_ACTIVATION`] of them, and puts their
    /// report lines in `out` with their capabilities.
    fn analyze_ready(&mut self, frontier: &MutableAntichain<u64>, out: &mut Vec<(Capability<u64>, ReportLine)>) {
        // (Times are totally ordered: the windows passed are the first
        // keys. Scanning on past them made an activation cost all the
        // windows in flight, quadratic when a stream's fragments span very
        // many.)
        let mut ready: Vec<(u64, u64)> = self
            .stash
            .keys()
            .take_while(|(w, _)| !frontier.less_equal(w))
            .take(MAX_WINDOWS_PER_ACTIVATION + 1)
            .copied()
            .collect();
        if ready.len() > MAX_WINDOWS_PER_ACTIVATION {
            ready.pop();
            self.again.activate();
        }
        self.take_results(out);
        // Windows the analysis thread finished since the last activation
        // (in window order, before any analyzed below).
        if let Some(a) = self.analyst.as_mut() {
            while let Some(d) = a.try_take() {
                out.extend(report(&self.reporter, &self.caps, &mut self.retained, &mut self.traffic, d));
            }
        }
        for key in ready {
            let mut frags = self.stash.remove(&key).unwrap();
            if self.outputs.stopped() && self.prints_reports {
                // nowhere to write it
                self.traffic.remove(&key);
                continue;
            }
            let window = frags[0].window;
            // (What is known of processes long gone goes: see
            // `EndedStreams::prune`.)
            self.ended.prune(key.1, window);
            self.ended.apply(window, self.width, &mut frags);
            self.retained.analyzed(key, window, &frags);
            // (A small window stays whole on this thread: handing it or its
            // parts over would cost more than it saves.)
            let large = crate::analysis::crew::worth_sharing(&frags);
            let job = Job {
                key,
                window,
                frags,
                detail: self.reporter.wants_detail(),
                what_if: self.what_if.clone(),
                // Analyzed here, its parts go to whichever worker has
                // nothing to read.
                crew: self.shared_jobs.as_ref().filter(|_| large).map(|sj| sj.board.crew()),
            };
            if let Some(sj) = self.shared_jobs.as_mut().filter(|sj| sj.posts && large) {
                sj.posted.push(key);
                let wake = sj.wake.clone();
                sj.board.post(job, sj.reply.clone(), move || {
                    let _ = wake.activate();
                });
                continue;
            }
            let board = self.shared_jobs.as_ref().map(|sj| &*sj.board);
            if let Some(a) = self.analyst.as_mut() {
                if large {
                    while !a.has_room() {
                        out.extend(a.wait_helping(board).and_then(|d| {
                            report(&self.reporter, &self.caps, &mut self.retained, &mut self.traffic, d)
                        }));
                    }
                    a.submit(job);
                    continue;
                }
                // (A small one here, after the thread's windows, whose
                // reports go out first.)
                while let Some(d) = a.wait_helping(board) {
                    out.extend(report(&self.reporter, &self.caps, &mut self.retained, &mut self.traffic, d));
                }
            }
            let done = job.analyze(self.width);
            out.extend(report(&self.reporter, &self.caps, &mut self.retained, &mut self.traffic, done));
        }
        self.revise(out);
    }

    /// Folds the late fragments in: into their window if it is still
    /// gathering, else into the window kept for revision, analyzed again
    /// and reported again (on the worker: revisions are few). A window no
    /// longer kept cannot be revised: its late records are counted.
    fn revise(&mut self, out: &mut Vec<(Capability<u64>, ReportLine)>) {
        for (c, host, time, f) in std::mem::take(&mut self.late) {
            let key = (time, host);
            if let Some(frags) = self.stash.get_mut(&key) {
                Fragment::fold_late(frags, self.width, f);
                continue;
            }
            // The first report must be out (and counted) before the
            // revision replaces it.
            if let Some(a) = self.analyst.as_mut().filter(|_| self.retained.awaits_report(key)) {
                let board = self.shared_jobs.as_ref().map(|sj| &*sj.board);
                while a.holds(time) {
                    out.extend(
                        a.wait_helping(board)
                            .and_then(|d| report(&self.reporter, &self.caps, &mut self.retained, &mut self.traffic, d)),
                    );
                }
            }
            let stream = f.stream;
            match self.retained.late(key, self.width, f) {
                Late::Revise(mut v) => {
                    let job = Job {
                        key,
                        window: v.window,
                        frags: std::mem::take(&mut v.frags),
                        detail: false,
                        what_if: self.what_if.clone(),
                        crew: None,
                    };
                    let done = job.analyze(self.width);
                    let traffic = self.traffic.remove(&key).unwrap_or_default();
                    let line = self.reporter.revise(done, &v, &mut self.retained, *c.time(), traffic);
                    out.push((c, line));
                }
                Late::Gone => {
                    self.traffic.remove(&key);
                    self.reporter.too_late(stream, time)
                }
            }
        }
    }

    /// Drops the capabilities of windows neither gathering nor in analysis.
    fn release_capabilities(&mut self) {
        let (stash, analyst, shared_jobs) = (&self.stash, &self.analyst, &self.shared_jobs);
        // (Windows leave the stash in order, by `analyze_ready`: every one
        // past the first still there is still there. Only those up to it
        // are looked at: checking them all, at every activation, cost all
        // the windows in flight each time.)
        let upto = stash.keys().next().map_or(u64::MAX, |k| k.0);
        let done: Vec<u64> = self
            .caps
            .range(..=upto)
            .map(|(&w, _)| w)
            .filter(|&w| {
                stash.range((w, 0)..=(w, u64::MAX)).next().is_none()
                    && !analyst.as_ref().is_some_and(|a| a.holds(w))
                    && !shared_jobs.as_ref().is_some_and(|sj| sj.posted.iter().any(|k| k.0 == w))
            })
            .collect();
        for w in done {
            self.caps.remove(&w);
        }
    }

    /// The windows this worker posted that a worker (maybe this one) has
    /// analyzed since: reported.
    fn take_results(&mut self, out: &mut Vec<(Capability<u64>, ReportLine)>) {
        let Some(sj) = self.shared_jobs.as_mut() else { return };
        while let Ok(d) = sj.replies.try_recv() {
            sj.posted.retain(|k| *k != d.key);
            out.extend(report(&self.reporter, &self.caps, &mut self.retained, &mut self.traffic, d));
        }
    }

    /// While this worker's source has nothing to read, analyzes one window
    /// posted by any worker of the process (its own included), and comes
    /// back for the next: one a step, so that the source is asked in
    /// between whether it has something to read again.
    fn take_posted(&mut self, out: &mut Vec<(Capability<u64>, ReportLine)>) {
        let Some(sj) = self.shared_jobs.as_ref() else { return };
        if !sj.link.idle() {
            return;
        }
        // (A part of a window in analysis first: that window waits for it.)
        let ran = sj.board.help() || sj.board.take().map(|p| p.run(self.width)).is_some();
        if ran {
            if !sj.board.is_empty() {
                let _ = sj.wake.activate();
            }
            self.take_results(out);
        }
    }
}

/// A window's report line, with the capability it goes out at.
/// A worker's side of the process's [`JobBoard`].
struct SharedJobs {
    board: Arc<JobBoard>,
    /// Whether whole windows are posted ([`Shared::posts_windows`]); else
    /// they are analyzed here (or on this worker's analysis thread),
    /// offering their parts.
    posts: bool,
    /// Where the analyses of this worker's windows come back.
    reply: std::sync::mpsc::Sender<Done>,
    replies: std::sync::mpsc::Receiver<Done>,
    /// Wakes this worker's operator: from another worker's thread (a
    /// result is back), or from its own (more windows are posted).
    wake: SyncActivator,
    /// Keys of the windows posted and not yet back.
    posted: Vec<(u64, u64)>,
    /// Whether this worker's source is idle.
    link: Rc<OperatorLink>,
}

fn report(
    reporter: &Reporter,
    caps: &BTreeMap<u64, Capability<u64>>,
    retained: &mut Retained,
    traffic: &mut BTreeMap<(u64, u64), WindowTraffic>,
    done: Done,
) -> Option<(Capability<u64>, ReportLine)> {
    if retained.on() {
        retained.reported(done.key, &done.report);
    }
    let t = traffic.remove(&done.key).unwrap_or_default();
    let line = reporter.report(done, t);
    caps.get(&line.time).cloned().map(|c| (c, line))
}
