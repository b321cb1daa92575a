//! A worker's window analyses on a thread of their own, for a spare core:
//! the worker ingests the next window while the last one is analyzed
//! ([`Analyst`]); or, without such threads, on whichever worker of the
//! process has nothing to read ([`JobBoard`]).
//!
//! The analysis of a window is a pure function of its fragments
//! ([`crate::analysis::causality::analyze_window`]), so moving it to another thread changes
//! no output, only when a report is ready. Jobs are analyzed in the order
//! they are submitted and their results come back in that order. At most
//! [`Analyst::MAX_IN_FLIGHT`] are in flight: a worker with more ready
//! windows waits for the oldest ([`Analyst::wait`]), so memory stays bounded
//! by the windows in flight, as without the thread.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::analysis::analyze::WindowDetail;
use crate::analysis::crew::Crew;
use crate::analysis::model::{Fragment, Ns};
use crate::analysis::report::WindowReport;

/// One window to analyze: its key (timely time, host), index and fragments.
pub struct Job {
    pub key: (u64, u64),
    pub window: u64,
    pub frags: Vec<Fragment>,
    /// Also build the window's detail (for a Perfetto trace).
    pub detail: bool,
    /// The speedup to predict (`sidecar whatif`); else the automatic ranking.
    pub what_if: Option<std::sync::Arc<[crate::analysis::whatif::Speedup]>>,
    /// The threads that may take parts of the analysis ([`JobBoard::crew`]).
    pub crew: Option<Arc<Crew>>,
}

impl Job {
    /// The analysis itself, on whichever thread calls it.
    pub fn analyze(self, width: Ns) -> Done {
        let mut detail = self.detail.then(WindowDetail::default);
        let report = crate::analysis::causality::analyze_window(
            self.key.1,
            self.window,
            width,
            self.frags,
            detail.as_mut(),
            self.what_if.as_deref(),
            self.crew.as_ref(),
        );
        Done { key: self.key, report, detail }
    }
}

/// A window analyzed.
pub struct Done {
    pub key: (u64, u64),
    pub report: WindowReport,
    pub detail: Option<WindowDetail>,
}

/// The analysis thread of one worker.
pub struct Analyst {
    jobs: Option<Sender<Job>>,
    /// Each job's result, or the message of the panic it ended in.
    done: Receiver<Result<Done, String>>,
    thread: Option<JoinHandle<()>>,
    /// Keys submitted and not yet returned, oldest first.
    in_flight: VecDeque<(u64, u64)>,
}

impl Analyst {
    /// Windows submitted and not yet returned, at most: one analyzed while
    /// the worker ingests the next.
    pub const MAX_IN_FLIGHT: usize = 1;

    /// Starts the thread; `wake` is called after each result, to schedule
    /// the operator that takes it ([`Analyst::try_take`]).
    pub fn start(width: Ns, wake: impl Fn() + Send + 'static) -> std::io::Result<Analyst> {
        Analyst::with(move |job: Job| job.analyze(width), wake)
    }

    /// The thread, running `analyze` on each job.
    fn with(
        analyze: impl Fn(Job) -> Done + Send + 'static,
        wake: impl Fn() + Send + 'static,
    ) -> std::io::Result<Analyst> {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (done_tx, done) = mpsc::channel::<Result<Done, String>>();
        let thread = std::thread::Builder::new().name("sidecar-analysis".into()).spawn(move || {
            for job in job_rx {
                // (A worker waiting for this result while it runs the job's
                // parts waits on the job's crew: `wait_helping`.)
                let crew = job.crew.clone();
                // A panic goes back as the job's result and wakes the
                // worker like any result: the window may be the worker's
                // last, with nothing else left to schedule the operator.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| analyze(job)));
                let failed = r.is_err();
                let sent = done_tx.send(r.map_err(|p| crate::panic_message(p.as_ref()).to_string()));
                wake();
                if let Some(c) = crew {
                    c.interrupt();
                }
                if sent.is_err() || failed {
                    return;
                }
            }
        })?;
        Ok(Analyst { jobs: Some(jobs), done, thread: Some(thread), in_flight: VecDeque::new() })
    }

    /// Whether another job may be submitted without waiting first.
    pub fn has_room(&self) -> bool {
        self.in_flight.len() < Self::MAX_IN_FLIGHT
    }

    /// Queues a window for analysis.
    pub fn submit(&mut self, job: Job) {
        self.in_flight.push_back(job.key);
        // (The thread ends only when `jobs` is dropped, or after a panic,
        // which the next `try_take` or `wait` passes on.)
        let _ = self.jobs.as_ref().expect("jobs open until drop").send(job);
    }

    /// Whether the window at timely time `time` is being analyzed.
    pub fn holds(&self, time: u64) -> bool {
        self.in_flight.iter().any(|k| k.0 == time)
    }

    /// The oldest result if it is ready.
    pub fn try_take(&mut self) -> Option<Done> {
        if self.in_flight.is_empty() {
            return None;
        }
        match self.done.try_recv() {
            Ok(r) => Some(self.returned(r)),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(self.returned(Err("its thread ended".into()))),
        }
    }

    /// The oldest result, waiting for it; `None` when nothing is in flight.
    pub fn wait(&mut self) -> Option<Done> {
        if self.in_flight.is_empty() {
            return None;
        }
        let r = self.done.recv().unwrap_or_else(|_| Err("its thread ended".into()));
        Some(self.returned(r))
    }

    /// [`Analyst::wait`], running meanwhile the parts of the analysis that
    /// the thread offers to `board`'s crew (it offers them to this worker,
    /// which has nothing else to do while it waits).
    ///
    /// A job's result interrupts the wait ([`Crew::interrupt`] on the job's
    /// crew, the board's, after the thread sends it). With a
    /// millisecond's timeout ending the wait instead, 32 k windows of 10 µs
    /// took 16.0 s, 12.5 s with the interrupt (and 5.4 s once windows that
    /// small stayed on the worker: [`crate::analysis::crew::SHARE_MIN_RECORDS`]).
    pub fn wait_helping(&mut self, board: Option<&JobBoard>) -> Option<Done> {
        let Some(board) = board else { return self.wait() };
        let crew = board.crew();
        loop {
            let seen = crew.interrupts();
            if let Some(d) = self.try_take() {
                return Some(d);
            }
            if self.in_flight.is_empty() {
                return None;
            }
            // (The timeout only in case a result came without its wake.)
            if !board.help() {
                crew.wait_for_offer_since(seen, std::time::Duration::from_millis(50));
            }
        }
    }

    /// A result taken. A failed analysis panics here, on the worker, with
    /// the analysis's message, as if it had run here: the run then ends as
    /// after any worker's panic, and names it.
    fn returned(&mut self, r: Result<Done, String>) -> Done {
        let k = self.in_flight.pop_front();
        match r {
            Ok(d) => {
                debug_assert_eq!(k, Some(d.key), "results come back in submission order");
                d
            }
            Err(msg) => {
                self.jobs = None;
                panic!("the analysis of a window failed on its thread: {msg}")
            }
        }
    }
}

impl Drop for Analyst {
    fn drop(&mut self) {
        // Closing the queue ends the thread after its current job.
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Offline, with several workers in a process and no analysis threads:
/// the windows ready for analysis, posted by their owners and taken by
/// whichever worker of the process has nothing to read at the moment (its
/// source is throttled or done), the owner included. Each window still has
/// one owner, which reports it; only where its analysis runs moves.
///
/// Without it a window is analyzed by its owner, in the owner's thread,
/// while that worker reads nothing: its streams' part of the next windows
/// waits, and the other workers, whose windows need those streams too, wait
/// with it (on `t50`, two workers kept the two cores 85 % busy). With it, a
/// worker that would wait analyzes the window its busy peer posted. The
/// analysis is a pure function of the window's fragments, so nothing in the
/// reports changes but when they are ready (and the owner's lines go out in
/// the order the analyses end, which the printer puts back in window order).
/// The posted windows are among the windows in flight that the sources'
/// throttle counts, so memory stays bounded as before.
///
/// The same workers also take parts of a window's analysis that its
/// analyzing thread offers (the [`Crew`]): a worker with nothing to read
/// runs one of those before a whole window, since a window being analyzed
/// waits for it. With analysis threads no window is posted, but their
/// parts are offered all the same, and a worker takes them while it waits
/// for its thread ([`Analyst::wait_helping`]) or its source is throttled
/// (offline `-w 1` on two cores: the worker's ingest is done before the
/// thread's analyses are, and would otherwise wait idle).
#[derive(Default)]
pub struct JobBoard {
    posted: Mutex<VecDeque<Posted>>,
    /// The workers of the process, each woken by a post or an offer.
    crew: Arc<Crew>,
}

/// A window posted for analysis, with where its result goes.
pub struct Posted {
    job: Job,
    reply: Sender<Done>,
    /// Schedules the owner's operator to take the result.
    wake: Box<dyn Fn() + Send>,
}

impl Posted {
    /// Analyzes the window on the calling thread and hands the result to
    /// its owner. (A panic here is this worker's, and ends the run as any
    /// worker's panic does.)
    pub fn run(self, width: Ns) {
        let done = self.job.analyze(width);
        // (The owner gone means the run is ending: nothing to hand over.)
        let _ = self.reply.send(done);
        (self.wake)();
    }
}

impl JobBoard {
    /// A worker that takes jobs, woken when one is posted (or a part of
    /// one offered).
    pub fn register(&self, wake: impl Fn() + Send + 'static) {
        self.crew.register(wake);
    }

    /// Posts `job`; its result goes to `reply`, then `wake` is called.
    pub fn post(&self, mut job: Job, reply: Sender<Done>, wake: impl Fn() + Send + 'static) {
        job.crew = Some(self.crew.clone());
        self.posted.lock().unwrap().push_back(Posted { job, reply, wake: Box::new(wake) });
        self.crew.other_work(1);
        self.crew.wake_all();
    }

    /// The oldest posted window, if any.
    pub fn take(&self) -> Option<Posted> {
        let p = self.posted.lock().unwrap().pop_front();
        if p.is_some() {
            self.crew.other_work(-1);
        }
        p
    }

    /// The process's workers, for a window analyzed where it is owned to
    /// offer its parts to.
    pub fn crew(&self) -> Arc<Crew> {
        self.crew.clone()
    }

    /// Runs a part of a window's analysis offered by the thread analyzing
    /// it, if one is; whether there was one.
    pub fn help(&self) -> bool {
        self.crew.take()
    }

    /// Whether neither a window nor a part of one waits.
    pub fn is_empty(&self) -> bool {
        self.posted.lock().unwrap().is_empty() && !self.crew.has_offers()
    }

    /// (parts of analyses offered, of them run by another worker).
    pub fn parts(&self) -> (u64, u64) {
        self.crew.counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A synthetic trace's fragments, per window.
    fn windows(width: Ns) -> Vec<(u64, Vec<Fragment>)> {
        windows_of(&crate::synth::SynthConfig { workers: 4, records: 100_000, ..Default::default() }, width)
    }

    /// The fragments of the synthetic trace `cfg`, per window.
    fn windows_of(cfg: &crate::synth::SynthConfig, width: Ns) -> Vec<(u64, Vec<Fragment>)> {
        let mut bytes = Vec::new();
        crate::synth::generate(cfg, &mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        let mut ing = crate::ingest::stream::Ingest::new("synth", width);
        for f in ringlog::Decoder::new(&bytes[..]) {
            let before = ing.out.len();
            ing.frame(f.unwrap(), 1);
            ing.finish_batch(before);
        }
        ing.eof();
        assert!(ing.errors.is_empty(), "{:?}", ing.errors);
        let mut by: std::collections::BTreeMap<u64, Vec<Fragment>> = Default::default();
        for f in ing.out.drain(..) {
            by.entry(f.window).or_default().push(f);
        }
        by.into_iter().collect()
    }

    /// A window's matching run in two halves of its receivers (as a crew
    /// runs it) makes what one run over them all makes: each receiver's
    /// inbox and arrivals, the links in the same order, the strangers and
    /// the counts. The trace: a cluster of 3 processes of 2 workers, each
    /// sending to its next 3 workers (messages within and between
    /// processes); each window also without worker 3's stream (its
    /// messages' other halves are strangers).
    #[test]
    fn a_windows_matching_in_two_halves_matches_as_one_run() {
        let width = 2_000_000;
        let cfg = crate::synth::SynthConfig {
            workers: 6,
            per_process: 2,
            records: 60_000,
            pattern: crate::synth::Pattern::Neighbours(3),
            ..Default::default()
        };
        let whole = windows_of(&cfg, width);
        let mut lacking = whole.clone();
        for (_, frags) in lacking.iter_mut() {
            frags.retain(|f| f.stream.is_none_or(|s| s.worker != 3));
        }
        let (mut seen, mut with_strangers, mut crossing) = (0, 0, 0);
        for (index, frags) in whole.into_iter().chain(lacking) {
            let Some((one, two, strangers, crossed)) = crate::analysis::analyze::whole_and_halved(index, width, frags)
            else {
                continue;
            };
            assert_eq!(one, two, "window {index}");
            seen += 1;
            with_strangers += usize::from(strangers);
            crossing += usize::from(crossed);
        }
        assert!(seen >= 4 && with_strangers >= 2 && crossing >= 2, "{seen} {with_strangers} {crossing}");
    }

    /// Results come back in order, each equal to the analysis on the
    /// caller's thread, and each wakes the caller.
    /// Windows posted by two owners and taken by two other threads come
    /// back each to its owner, equal to the analysis in place; every post
    /// wakes every taker, and every result its owner.
    #[test]
    fn posted_windows_come_back_to_their_owners_whoever_analyzes_them() {
        let width = 5_000_000;
        let windows = windows(width);
        let board = Arc::new(JobBoard::default());
        let woken_takers = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let w = woken_takers.clone();
            board.register(move || {
                w.fetch_add(1, Ordering::SeqCst);
            });
        }
        let owners: Vec<_> = (0..2).map(|_| (mpsc::channel::<Done>(), Arc::new(AtomicUsize::new(0)))).collect();
        for (i, (window, frags)) in windows.iter().enumerate() {
            let ((tx, _), woken) = &owners[i % 2];
            let woken = woken.clone();
            let job = Job {
                key: (i as u64, i as u64 % 2),
                window: *window,
                frags: frags.clone(),
                detail: false,
                what_if: None,
                crew: None,
            };
            board.post(job, tx.clone(), move || {
                woken.fetch_add(1, Ordering::SeqCst);
            });
        }
        assert_eq!(woken_takers.load(Ordering::SeqCst), 2 * windows.len(), "each post wakes both takers");
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let b = board.clone();
                std::thread::spawn(move || {
                    let mut n = 0;
                    while let Some(p) = b.take() {
                        p.run(width);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        let taken: usize = takers.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(taken, windows.len());
        assert!(board.is_empty());
        for (o, ((_, rx), woken)) in owners.iter().enumerate() {
            let got: Vec<Done> = rx.try_iter().collect();
            let mine: Vec<usize> = (0..windows.len()).filter(|i| i % 2 == o).collect();
            assert_eq!(got.len(), mine.len(), "owner {o} gets its windows back, no other");
            assert_eq!(woken.load(Ordering::SeqCst), mine.len(), "each result wakes its owner");
            for d in got {
                let i = d.key.0 as usize;
                assert_eq!(i % 2, o);
                let (window, frags) = windows[i].clone();
                let here = crate::analysis::causality::analyze_window(d.key.1, window, width, frags, None, None, None);
                assert_eq!(serde_json::to_string(&d.report).unwrap(), serde_json::to_string(&here).unwrap());
            }
        }
    }

    /// A window analyzed with parts of it run by another thread (the crew
    /// of the board) has the report it has analyzed alone.
    #[test]
    fn parts_run_by_another_worker_leave_the_report_as_it_is() {
        let width = 5_000_000;
        let windows = windows(width);
        let board = Arc::new(JobBoard::default());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let helper = {
            let (board, stop) = (board.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if !board.help() {
                        std::thread::yield_now();
                    }
                }
            })
        };
        // (Until the helper has taken some parts: it spins, the analyzing
        // thread works a while before it takes its offer back.)
        for _round in 0..20 {
            for (i, (window, frags)) in windows.iter().enumerate() {
                let (tx, rx) = mpsc::channel::<Done>();
                let job = Job {
                    key: (i as u64, 3),
                    window: *window,
                    frags: frags.clone(),
                    detail: false,
                    what_if: None,
                    crew: None,
                };
                board.post(job, tx, || {});
                board.take().expect("the window just posted").run(width);
                let d = rx.try_recv().expect("the result is back");
                let here =
                    crate::analysis::causality::analyze_window(3, *window, width, frags.clone(), None, None, None);
                assert_eq!(serde_json::to_string(&d.report).unwrap(), serde_json::to_string(&here).unwrap());
            }
            if board.parts().1 > 0 {
                break;
            }
        }
        stop.store(true, Ordering::SeqCst);
        helper.join().unwrap();
        let (offered, taken) = board.parts();
        assert!(offered >= windows.len() as u64, "each window offers its what-if layout: {offered}");
        assert!(taken > 0, "a free thread takes parts offered ({taken} of {offered})");
        assert!(board.is_empty());
    }

    #[test]
    fn analyses_on_the_thread_equal_those_in_place() {
        let width = 5_000_000;
        let windows = windows(width);
        assert!(windows.len() >= 3, "the test trace spans several windows: {}", windows.len());
        let woken = Arc::new(AtomicUsize::new(0));
        let w2 = woken.clone();
        let mut a = Analyst::start(width, move || {
            w2.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        let mut got = Vec::new();
        for (i, (window, frags)) in windows.iter().enumerate() {
            if !a.has_room() {
                got.push(a.wait().unwrap());
            }
            assert!(!a.holds(i as u64));
            a.submit(Job {
                key: (i as u64, 7),
                window: *window,
                frags: frags.clone(),
                detail: i == 1,
                what_if: None,
                crew: None,
            });
            assert!(a.holds(i as u64));
        }
        while let Some(d) = a.wait() {
            got.push(d);
        }
        assert!(a.try_take().is_none());
        drop(a); // (joins the thread: its last wake is done)
        assert_eq!(got.len(), windows.len());
        assert_eq!(woken.load(Ordering::SeqCst), windows.len());
        for (i, ((window, frags), d)) in windows.into_iter().zip(got).enumerate() {
            assert_eq!(d.key, (i as u64, 7));
            assert_eq!(d.detail.is_some(), i == 1);
            assert!(d.report.events > 0);
            let here = crate::analysis::causality::analyze_window(7, window, width, frags, None, None, None);
            assert_eq!(serde_json::to_string(&d.report).unwrap(), serde_json::to_string(&here).unwrap());
        }
    }

    /// A worker waiting for its analysis thread runs the parts of the
    /// window that the thread offers, and the reports are those analyzed
    /// alone.
    #[test]
    fn a_worker_waiting_for_its_analysis_thread_runs_the_parts_it_offers() {
        let width = 5_000_000;
        let windows = windows(width);
        let board = JobBoard::default();
        let mut a = Analyst::start(width, || {}).unwrap();
        // (Until the waiting thread has taken some parts: it is woken by
        // each offer, while the analysis thread works on its own half.)
        for round in 0..20 {
            for (i, (window, frags)) in windows.iter().enumerate() {
                let key = (round * 1000 + i as u64, 5);
                let crew = Some(board.crew());
                a.submit(Job { key, window: *window, frags: frags.clone(), detail: false, what_if: None, crew });
                let d = a.wait_helping(Some(&board)).expect("one job in flight");
                assert_eq!(d.key, key);
                let here =
                    crate::analysis::causality::analyze_window(5, *window, width, frags.clone(), None, None, None);
                assert_eq!(serde_json::to_string(&d.report).unwrap(), serde_json::to_string(&here).unwrap());
            }
            if board.parts().1 > 0 {
                break;
            }
        }
        assert!(a.wait_helping(Some(&board)).is_none(), "nothing in flight");
        let (offered, taken) = board.parts();
        assert!(offered >= windows.len() as u64, "each window offers its what-if layout: {offered}");
        assert!(taken > 0, "the waiting worker takes parts offered ({taken} of {offered})");
        assert!(board.is_empty());
    }

    /// A panic in an analysis wakes the caller, whose next look at the
    /// results panics with its message (waiting for them, or not).
    #[test]
    fn a_panic_in_the_analysis_wakes_the_worker_and_reaches_it() {
        for blocking in [false, true] {
            let woken = Arc::new(AtomicUsize::new(0));
            let w2 = woken.clone();
            let mut a = Analyst::with(
                |_job| panic!("analysis failed on purpose"),
                move || {
                    w2.fetch_add(1, Ordering::SeqCst);
                },
            )
            .unwrap();
            a.submit(Job { key: (0, 0), window: 0, frags: Vec::new(), detail: false, what_if: None, crew: None });
            if !blocking {
                let t = std::time::Instant::now();
                while woken.load(Ordering::SeqCst) == 0 {
                    assert!(t.elapsed() < std::time::Duration::from_secs(30), "a failed analysis must wake the worker");
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if blocking {
                    a.wait().map(|d| d.key)
                } else {
                    a.try_take().map(|d| d.key)
                }
            }));
            let payload = r.expect_err("the panic reaches the caller");
            assert_eq!(
                crate::panic_message(payload.as_ref()),
                "the analysis of a window failed on its thread: analysis failed on purpose"
            );
        }
    }
}
