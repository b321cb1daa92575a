//! A failed worker ends the run on every worker. Timely has no such
//! notion: a worker whose peer panicked waits forever for its progress (the
//! sources keep polling: a hung process burning CPU), and a worker whose
//! connection to another process broke panics inside the unwinding of its
//! own dataflow (an abort). Here a panic is recorded ([`Failure`], by a
//! process-wide hook and by [`Armed`]), the workers step with a timeout
//! ([`step_to_end`]) to see it and stop, and [`join_workers`] returns it as
//! the run's error.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use timely::worker::Worker;

/// How timely's network threads' panics begin (a connection to another
/// process broke).
const NETWORK_PANIC: &str = "timely communication error";

/// Set when a worker thread panics. Its peers would otherwise wait forever
/// for its progress (the sources keep polling: a hung process burning CPU);
/// they see this, stop, and the run returns the panic as its error.
#[derive(Default)]
pub(super) struct Failure {
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
    /// Workers whose part of the run returned or unwound ([`Armed`]), and
    /// the wake of [`join_workers`] when one does.
    ended: Mutex<usize>,
    ended_wake: Condvar,
}

/// Runs whose `Failure` takes the next panic's message.
static ACTIVE: Mutex<Vec<Arc<Failure>>> = Mutex::new(Vec::new());

impl Failure {
    /// Whether all `local` workers' parts have ended ([`Armed`]), waiting
    /// up to `timeout` for it.
    fn wait_all_ended(&self, local: usize, timeout: Duration) -> bool {
        let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        let (ended, _) =
            self.ended_wake.wait_timeout_while(ended, timeout, |n| *n < local).unwrap_or_else(|e| e.into_inner());
        *ended >= local
    }

    /// A new run's failure record, registered to take the panics of its
    /// threads (the hook is installed on the first call).
    pub(super) fn register() -> Arc<Failure> {
        let failure = Arc::new(Failure::default());
        record_panics();
        ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).push(failure.clone());
        failure
    }

    /// The run is over. After a broken connection the run's threads are
    /// left behind (parked workers, network threads that fail one by one as
    /// the other processes go): the run stays registered, so their panics
    /// count as follow-ons.
    pub(super) fn unregister(self: &Arc<Self>) {
        if !self.network() {
            ACTIVE.lock().unwrap_or_else(|e| e.into_inner()).retain(|f| !Arc::ptr_eq(f, self));
        }
    }

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

    /// Stops the run with `error`, as a panic would but without one (the
    /// calling worker returns; the others see it at their next step).
    pub(super) fn stop_with(&self, error: String) {
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(error);
        }
        self.failed.store(true, Ordering::SeqCst);
    }

    /// Whether the first panic was timely's network thread's.
    fn network(&self) -> bool {
        self.first_panic.lock().is_ok_and(|p| p.as_deref().is_some_and(|p| p.contains(NETWORK_PANIC)))
    }

    /// Parks the calling worker for good after a broken connection (see
    /// [`step_to_end`]).
    fn park_for_good(&self) -> ! {
        self.failed.store(true, Ordering::SeqCst);
        self.parked.fetch_add(1, Ordering::SeqCst);
        loop {
            std::thread::park();
        }
    }
}

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
            let known = record_first_panic(&format!("thread '{thread}': {msg}"));
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

/// Gives `what` (and the calling thread) to every active run that has no
/// first panic yet; whether one already had.
fn record_first_panic(what: &str) -> bool {
    let mut known = false;
    let active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    for f in active.iter() {
        if let Ok(mut first) = f.first_panic.lock() {
            known |= first.is_some();
            if first.is_none() {
                *first = Some(what.to_string());
                if let Ok(mut t) = f.first_thread.lock() {
                    *t = Some(std::thread::current().id());
                }
            }
        }
    }
    known
}

/// Records in `Failure` a panic of the worker thread holding it (when the
/// panic unwinds through the worker closure: building or running the
/// dataflow).
pub(super) struct Armed<'a>(pub(super) &'a Failure, pub(super) usize);

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
        let mut ended = self.0.ended.lock().unwrap_or_else(|e| e.into_inner());
        *ended += 1;
        self.0.ended_wake.notify_all();
    }
}

/// Steps the worker's dataflow to its end. Stepped here rather than by
/// `timely::execute`, which parks without a limit: wake now and then to see
/// whether a peer failed.
pub(super) fn step_to_end(worker: &mut Worker, failure: &Failure) {
    step_while(worker, failure, || true)
}

/// Steps the worker's dataflows while `more` says so (and they have work),
/// as [`step_to_end`] does.
pub(super) fn step_while(worker: &mut Worker, failure: &Failure, mut more: impl FnMut() -> bool) {
    while more() {
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
            Err(_) if failure.network() => failure.park_for_good(),
            Err(p) => std::panic::resume_unwind(p),
        }
        if failure.failed.load(Ordering::SeqCst) {
            if failure.network() {
                failure.park_for_good();
            }
            // This dataflow can never complete: unwind to drop it
            // (quietly: resume_unwind runs no panic hook).
            std::panic::resume_unwind(Box::new("stopped: another worker panicked"));
        }
    }
}

/// Waits for the workers and returns the run's failure, if any. After a
/// broken connection to another process they park (see [`step_to_end`])
/// and are left behind, never joined.
pub(super) fn join_workers(guards: timely::communication::WorkerGuards<()>, failure: &Failure) -> Result<(), String> {
    let local = guards.guards().len();
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
        // Woken when a worker's part ends (each one's [`Armed`]); once all
        // have, joining waits only for timely to drop their dataflows. (A
        // worker parked for good never ends: the failure is seen here
        // within the timeout.) Polling with a sleep instead kept every run
        // 25 ms longer on average.
        if failure.wait_all_ended(local, Duration::from_millis(50)) {
            break;
        }
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
    Ok(())
}
