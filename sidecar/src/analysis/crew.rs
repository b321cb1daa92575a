//! Parts of one window's analysis run beside it, on threads that have
//! nothing else to do: fork and join over a shared list of tasks.
//!
//! A window is analyzed by one thread. Some of its stages do not need each
//! other's results (the what-if's placement of the window's messages needs
//! only the graph and the messages; the critical path's summary,
//! participation and the trace checks need only the graph), so [`join`]
//! offers one of two such parts to the [`Crew`] and runs the other itself.
//! A thread of the crew that is free takes the offered part; if none has
//! when the caller is done with its own, the caller takes it back and runs
//! it, so a window is never slower than alone by more than the offer (two
//! locks). While it waits for a part taken elsewhere, the caller helps with
//! any other part offered meanwhile (the taker may itself offer half of its
//! part): every part taken is running, and parts do not wait on anything
//! but parts offered after them, so the waits end.
//!
//! This is the fork-join of work stealing (Blumofe and Leiserson's
//! scheduler, as Rayon's `join` does it), over the threads a caller
//! already has rather than a pool of its own: in the sidecar, the timely
//! workers of one process whose sources have nothing to read. Nothing here
//! changes a result: each part is the same function of the same inputs,
//! wherever it runs.
//!
//! The parts offered are `'static`: what they share with the caller is
//! behind an `Arc` (the window graph once built), so that no unsafe
//! lifetime extension is needed.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Windows of fewer records are analyzed whole by the thread that has
/// them: handing a window, or a part of one, to another thread (a wake-up
/// and a wait on each side) cost about 0.3 ms of wall time a window on
/// these 2-core machines, more than a thread's analysis of 16 k records
/// (about 0.8 ms) gains by it. On 1 M records cut into windows of 100 µs
/// (310 records each), handed over they took 3.2 s at `-w 1` (an analysis
/// thread) and 1.1 s at `-w 2`, kept whole 0.85 s and 0.9 s
/// (docs/performance.md, "Small windows").
pub const SHARE_MIN_RECORDS: u64 = 16_384;

/// Whether a window of `frags` is large enough to share
/// ([`SHARE_MIN_RECORDS`]).
pub fn worth_sharing(frags: &[crate::analysis::model::Fragment]) -> bool {
    frags.iter().map(|f| f.counters.records).sum::<u64>() >= SHARE_MIN_RECORDS
}

/// A part of a window's analysis offered to the crew.
type Task = Box<dyn FnOnce() + Send>;

/// The threads that may take parts of a window's analysis, and the parts
/// offered to them.
#[derive(Default)]
pub struct Crew {
    offered: Mutex<VecDeque<(u64, Task)>>,
    /// Signalled when a part is offered or one taken elsewhere ends.
    changed: Condvar,
    /// Each thread's wake-up, called when a part is offered.
    wake: Mutex<Vec<Box<dyn Fn() + Send>>>,
    next_id: AtomicU64,
    /// Parts offered, and of them those run by a thread other than the
    /// one that offered them.
    offers: AtomicU64,
    taken: AtomicU64,
    /// How many times a wait for an offer was cut short ([`Crew::interrupt`]).
    interrupts: AtomicU64,
    /// Other work the crew's threads have waiting (whole windows posted on
    /// the sidecar's job board): while there is some, a part that costs
    /// more split than whole is not split ([`Crew::has_other_work`]).
    other_work: AtomicU64,
}

impl Crew {
    /// A thread that takes parts ([`Crew::take`]) when it is free, woken by
    /// `wake` when one is offered.
    pub fn register(&self, wake: impl Fn() + Send + 'static) {
        self.wake.lock().unwrap().push(Box::new(wake));
    }

    /// Wakes every registered thread.
    pub fn wake_all(&self) {
        for w in self.wake.lock().unwrap().iter() {
            w();
        }
    }

    /// The oldest part offered, run here; whether there was one.
    pub fn take(&self) -> bool {
        let t = self.offered.lock().unwrap().pop_front();
        match t {
            Some((_, task)) => {
                self.taken.fetch_add(1, Ordering::Relaxed);
                task();
                true
            }
            None => false,
        }
    }

    /// Waits until a part is offered (and not yet taken), at most
    /// `timeout`, or until an [`Crew::interrupt`] made since
    /// [`Crew::interrupts`] said `seen`: a thread waiting for an offer or
    /// something else (its analysis thread's result) reads `seen`, looks
    /// for the other thing, and waits; an interrupt made after it read
    /// `seen` is not lost.
    pub fn wait_for_offer_since(&self, seen: u64, timeout: std::time::Duration) {
        let offered = self.offered.lock().unwrap();
        if offered.is_empty() && self.interrupts() == seen {
            let _ = self.changed.wait_timeout(offered, timeout).unwrap();
        }
    }

    /// How many interrupts were made so far ([`Crew::wait_for_offer_since`]).
    pub fn interrupts(&self) -> u64 {
        // (Acquire: what was done before an interrupt is seen with it.)
        self.interrupts.load(Ordering::Acquire)
    }

    /// Wakes the threads waiting for an offer: what else they wait for is
    /// ready. (Counted under the offers' lock, which a waiter holds from
    /// its check to its wait.)
    pub fn interrupt(&self) {
        let _offered = self.offered.lock().unwrap();
        self.interrupts.fetch_add(1, Ordering::Release);
        self.changed.notify_all();
    }

    /// Whether a part is offered and not yet taken.
    pub fn has_offers(&self) -> bool {
        !self.offered.lock().unwrap().is_empty()
    }

    /// Counts other work coming for the crew's threads (`+1`) or taken
    /// (`-1`).
    pub fn other_work(&self, delta: i64) {
        if delta >= 0 {
            self.other_work.fetch_add(delta as u64, Ordering::Relaxed);
        } else {
            self.other_work.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// Whether the crew's threads have other work waiting: a part that costs
    /// more instructions split than whole is better left whole then.
    pub fn has_other_work(&self) -> bool {
        self.other_work.load(Ordering::Relaxed) > 0
    }

    /// (parts offered, parts run by another thread than the one offering).
    pub fn counts(&self) -> (u64, u64) {
        (self.offers.load(Ordering::Relaxed), self.taken.load(Ordering::Relaxed))
    }

    fn offer(&self, task: Task) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.offers.fetch_add(1, Ordering::Relaxed);
        self.offered.lock().unwrap().push_back((id, task));
        self.changed.notify_all();
        self.wake_all();
        id
    }

    fn take_back(&self, id: u64) -> Option<Task> {
        let mut offered = self.offered.lock().unwrap();
        let i = offered.iter().position(|(x, _)| *x == id)?;
        offered.remove(i).map(|(_, t)| t)
    }
}

/// Where to cut `n` pieces of work, weighing `weight(k)` each, in two with
/// about half the weight each side (at least one piece each side; `n >= 2`).
pub fn half_by_weight(n: usize, weight: impl Fn(usize) -> usize) -> usize {
    let total: usize = (0..n).map(&weight).sum();
    let mut sum = 0;
    for k in 0..n {
        sum += weight(k);
        if 2 * sum >= total {
            return (k + 1).clamp(1, n - 1);
        }
    }
    n / 2
}

/// The result of a part, or the panic it ended in.
type Outcome<B> = Arc<Mutex<Option<std::thread::Result<B>>>>;

/// `here()` and `there()`, `there` offered to `crew` (run here too when no
/// crew is given or no thread took it): both results, and whether `there`
/// ran on another thread. A panic in either comes out of `join`, after
/// both have ended.
pub fn join<A, B: Send + 'static>(
    crew: Option<&Arc<Crew>>,
    here: impl FnOnce() -> A,
    there: impl FnOnce() -> B + Send + 'static,
) -> (A, B, bool) {
    let Some(crew) = crew else {
        let a = here();
        return (a, there(), false);
    };
    let outcome: Outcome<B> = Arc::new(Mutex::new(None));
    let id = {
        let (outcome, crew2) = (outcome.clone(), crew.clone());
        crew.offer(Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(there));
            *outcome.lock().unwrap() = Some(r);
            // (Under the lock the waiter checks `outcome` with: no lost
            // wake-up.)
            let _g = crew2.offered.lock().unwrap();
            crew2.changed.notify_all();
        }))
    };
    // (`there` may borrow nothing of ours, but its result must be waited
    // for whatever happens here.)
    let a = std::panic::catch_unwind(std::panic::AssertUnwindSafe(here));
    let elsewhere = match crew.take_back(id) {
        Some(task) => {
            task();
            false
        }
        None => {
            wait_helping(crew, &outcome);
            true
        }
    };
    let b = outcome.lock().unwrap().take().expect("a part taken ends with its outcome");
    match (a, b) {
        (Ok(a), Ok(b)) => (a, b, elsewhere),
        (Err(p), _) | (_, Err(p)) => std::panic::resume_unwind(p),
    }
}

/// Waits until `outcome` is in, running parts offered meanwhile.
fn wait_helping<B>(crew: &Crew, outcome: &Outcome<B>) {
    let mut offered = crew.offered.lock().unwrap();
    loop {
        if outcome.lock().unwrap().is_some() {
            return;
        }
        if let Some((_, task)) = offered.pop_front() {
            drop(offered);
            crew.taken.fetch_add(1, Ordering::Relaxed);
            task();
            offered = crew.offered.lock().unwrap();
            continue;
        }
        offered = crew.changed.wait(offered).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    /// An interrupt ends a wait for an offer at once, and one made after
    /// the waiter read the count (before it waits) is not lost: it does not
    /// wait at all.
    #[test]
    fn an_interrupt_ends_a_wait_for_an_offer() {
        let crew = Arc::new(Crew::default());
        let seen = crew.interrupts();
        crew.interrupt();
        let t = std::time::Instant::now();
        crew.wait_for_offer_since(seen, Duration::from_secs(10));
        assert!(t.elapsed() < Duration::from_secs(5), "an interrupt before the wait was lost");
        let c = crew.clone();
        let waiter = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            c.wait_for_offer_since(c.interrupts(), Duration::from_secs(10));
            t.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        crew.interrupt();
        // (Woken by this interrupt, or never asleep if it came first.)
        assert!(waiter.join().unwrap() < Duration::from_secs(5));
    }

    /// A window is shared from [`SHARE_MIN_RECORDS`] records on.
    #[test]
    fn only_windows_of_many_records_are_shared() {
        let frag = |records| {
            let mut f = crate::analysis::model::Fragment::default();
            f.counters.records = records;
            f
        };
        assert!(!worth_sharing(&[]));
        assert!(!worth_sharing(&[frag(SHARE_MIN_RECORDS / 2), frag(SHARE_MIN_RECORDS / 2 - 1)]));
        assert!(worth_sharing(&[frag(SHARE_MIN_RECORDS / 2), frag(SHARE_MIN_RECORDS / 2)]));
    }

    /// Without a crew, or with one nobody takes from, both parts run here,
    /// in order.
    #[test]
    fn untaken_parts_run_on_the_caller() {
        let crew = Arc::new(Crew::default());
        for c in [None, Some(&crew)] {
            let me = std::thread::current().id();
            let (a, (b, there_id), elsewhere) = join(c, || 1, move || (2, std::thread::current().id()));
            assert_eq!((a, b, elsewhere), (1, 2, false));
            assert_eq!(there_id, me);
        }
        assert_eq!(crew.counts(), (1, 0));
        assert!(!crew.has_offers());
    }

    /// A part taken by another thread comes back to its caller; every offer
    /// wakes the registered threads.
    #[test]
    fn a_part_taken_elsewhere_comes_back() {
        let crew = Arc::new(Crew::default());
        let woken = Arc::new(AtomicU64::new(0));
        let w = woken.clone();
        crew.register(move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        let stop = Arc::new(AtomicBool::new(false));
        let taker = {
            let (crew, stop) = (crew.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    if crew.take() {
                        n += 1;
                    } else {
                        std::thread::yield_now();
                    }
                }
                n
            })
        };
        let mut elsewhere_seen = 0;
        for i in 0..200u64 {
            let (a, b, elsewhere) = join(
                Some(&crew),
                || {
                    // (Long enough for the taker to see the offer.)
                    std::thread::sleep(Duration::from_micros(200));
                    i * 2
                },
                move || i * 3,
            );
            assert_eq!((a, b), (i * 2, i * 3));
            elsewhere_seen += usize::from(elsewhere);
        }
        stop.store(true, Ordering::SeqCst);
        let taken_there = taker.join().unwrap();
        assert_eq!(elsewhere_seen, taken_there, "a part is run once, where `join` says");
        assert!(elsewhere_seen > 0, "a free thread takes offered parts");
        assert_eq!(woken.load(Ordering::SeqCst), 200);
        assert_eq!(crew.counts(), (200, taken_there as u64));
    }

    /// A caller waiting for a part taken elsewhere runs the parts that part
    /// offers in turn: nested joins end even with one other thread.
    #[test]
    fn a_waiting_caller_helps_with_nested_parts() {
        let crew = Arc::new(Crew::default());
        let stop = Arc::new(AtomicBool::new(false));
        let taker = {
            let (crew, stop) = (crew.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    if !crew.take() {
                        std::thread::yield_now();
                    }
                }
            })
        };
        for i in 0..50u64 {
            let c2 = crew.clone();
            let (a, (b, c, _), _) =
                join(Some(&crew), || i, move || join(Some(&c2), || (0..1000u64).sum::<u64>() + i, move || i + 1));
            assert_eq!((a, b, c), (i, 499_500 + i, i + 1));
        }
        stop.store(true, Ordering::SeqCst);
        taker.join().unwrap();
    }

    /// A panic in the offered part comes out of `join` on the caller, with
    /// its message, wherever the part ran.
    #[test]
    fn a_panic_in_either_part_reaches_the_caller() {
        let crew = Arc::new(Crew::default());
        let r = std::panic::catch_unwind(|| join(Some(&crew), || 1, || -> u32 { panic!("there failed") }));
        let p = r.expect_err("the panic comes out");
        assert_eq!(p.downcast_ref::<&str>(), Some(&"there failed"));
        let r = std::panic::catch_unwind(|| join(Some(&crew), || -> u32 { panic!("here failed") }, || 2));
        assert!(r.is_err());
        assert!(!crew.has_offers(), "the part is run (and ended) before the panic goes on");
    }

    /// The cut falls where the weight before it first reaches half, and
    /// leaves a piece on each side whatever the weights.
    #[test]
    fn work_is_cut_where_half_its_weight_is() {
        // 10 + 10 = 20 of 40 reached after the second piece.
        assert_eq!(half_by_weight(4, |k| [10, 10, 10, 10][k]), 2);
        // One piece is all of it: still one piece on each side.
        assert_eq!(half_by_weight(3, |k| [100, 0, 0][k]), 1);
        assert_eq!(half_by_weight(3, |k| [0, 0, 100][k]), 2);
        // 1 + 1 + 1 = 3 of 6 is half.
        assert_eq!(half_by_weight(4, |k| [1, 1, 1, 3][k]), 3);
        assert_eq!(half_by_weight(2, |_| 0), 1);
    }
}
