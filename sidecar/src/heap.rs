//! Process-wide heap settings for the `sidecar` binary: glibc's allocator
//! tuned for per-window buffers, the heap's fresh pages faulted in on a
//! helper thread while the analysis runs, and (live) its free pages given
//! back now and then.
//!
//! Both are Linux/glibc only; elsewhere they do nothing.
//!
//! ```no_run
//! sidecar::heap::tune_allocator(); // first thing in main, before any thread
//! let prefault = sidecar::heap::Prefault::start(sidecar::heap::PREFAULT_PAD);
//! // ... the analysis ...
//! drop(prefault); // stops and joins the helper
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The analysis allocates and frees buffers of tens of MB per window (message
/// tables, graphs, participation counts). With glibc's defaults, each timely
/// worker thread gets its own arena of 64 MB heaps, allocations that do not
/// fit are mmap'd, and freed memory goes back to the kernel, so every
/// window faults its buffers in again (258 k page faults and 0.5 s of
/// system time on the 50 M-record benchmark trace). One arena, mmap only
/// past 32 MB (glibc's upper limit), and trimming only past 256 MB of free
/// heap halve the faults: 3-7 % less wall time with one analysis worker.
/// With several, [`arenas_for_workers`] gives each thread its arena again
/// (the one arena's lock cost them more than the faults saved). RSS stays
/// bounded by the windows in flight, as before.
///
/// With one arena, every thread's allocations below 32 MB come from the
/// main heap, the one [`Prefault`] watches (with one analysis worker: see
/// [`arenas_for_workers`]).
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt(3) only sets allocator parameters; it is called
    // first thing in main, before any thread exists, and the values are in
    // the documented ranges (a failed call leaves the default, harmless).
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

/// Lets the threads of a run with several analysis workers have an arena
/// each again (glibc's per-thread arenas, up to one per worker and two
/// more), after [`tune_allocator`]'s one: called before the workers start.
/// With one arena their allocations queue on its lock: on 5 M records of
/// 1,000 streams in 17 windows (thousands of small fragments a window),
/// `-w 2` took 1.51–1.61 s and 2.1–2.3 CPU s with one arena, 0.91–0.98 s
/// and 1.5–1.6 CPU s with an arena per thread (`-w 1`: the same either
/// way); on `t50` (`-w 2`, 3 alternated rounds) 3.81–4.13 s against
/// 3.88–4.76 s, RSS 5 % higher (docs/performance.md). One worker keeps
/// the one arena (its fewer page faults, above).
///
/// A thread's arena is a list of 64 MB heaps, and glibc unmaps a heap
/// whose memory is all free (whatever `M_TRIM_THRESHOLD` says) unless the
/// heap below it leaves less than `M_TOP_PAD` of room: windows that free
/// their buffers then fault them in afresh in the next. [`ARENA_PAD`]
/// keeps one heap's worth: on `t50` at `-w 2`, 307–483 k page faults
/// became 235 k (`-w 1`: 229 k), and CPU 7.95 → 7.39 s (5 alternated
/// rounds, docs/performance.md). It is bounded: at most one free heap kept
/// per arena, and the live trimmer ([`trim`]) still gives free pages back.
pub fn arenas_for_workers(workers: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if workers > 1 {
        // SAFETY: mallopt(3) only sets allocator parameters (under the
        // main arena's lock); threads already attached to an arena keep
        // it, new ones get their own up to the limit. A failed call leaves
        // the default, harmless.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, (workers + 2).min(i32::MAX as usize) as i32);
            libc::mallopt(libc::M_TOP_PAD, ARENA_PAD as i32);
        }
    }
}

/// The free room glibc keeps at the top of each arena with several workers
/// (its `M_TOP_PAD`): one of a thread arena's 64 MB heaps.
pub const ARENA_PAD: usize = 64 << 20;

/// Gives the heap's free pages back to the kernel (glibc's `malloc_trim`:
/// the free top and free pages inside it); whether any went.
///
/// [`tune_allocator`] keeps up to 256 MB of freed heap for the next
/// window's buffers, and freed memory inside the heap is not given back at
/// all: a live sidecar's RSS then stays at the highest its heap ever was,
/// and creeps up as the heap fragments (the 16-minute soak of issue 34:
/// 21 MB after 10 s, 28.7 MB after 950 s, with 4–8 MB in use throughout,
/// by massif). [`Trimmer`] trims it now and then.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim(3) takes the arena locks itself and only gives
    // back pages no allocation holds; callable from any thread.
    unsafe {
        libc::malloc_trim(0) == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// A thread that trims the heap ([`trim`]) every `period` until dropped:
/// for a live sidecar, whose heap otherwise keeps the high-water mark of
/// every burst it has seen. A trim of this heap takes well under a
/// millisecond; the pages it frees are faulted in again by the next
/// window that needs them.
pub struct Trimmer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Trimmer {
    pub fn every(period: Duration) -> Option<Trimmer> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("heap-trim".into())
            .spawn(move || {
                let tick = Duration::from_millis(100).min(period);
                let mut waited = Duration::ZERO;
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    waited += tick;
                    if waited >= period {
                        trim();
                        waited = Duration::ZERO;
                    }
                }
            })
            .ok()?;
        Some(Trimmer { stop, thread: Some(thread) })
    }
}

impl Drop for Trimmer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How far past each request the heap grows while a [`Prefault`] runs, so
/// that the helper has pages to fault in before the analysis reaches them.
/// 32 MB: on the 50 M-record benchmark trace the analysis worker took ~3 k
/// page faults of its ~99 k itself (16 MB: 5–7 k; 64 MB: ~2 k), for at most
/// 32 MB more resident memory.
pub const PREFAULT_PAD: usize = 32 << 20;

/// How often the helper looks for new heap.
const POLL: Duration = Duration::from_micros(500);

/// A helper thread that faults in the heap's new pages ahead of use.
///
/// On the virtual machines this project runs on, a first touch of an
/// anonymous page costs ~2.5–4 µs in the kernel: ~100 k of them, 0.25–0.5 s
/// of system time, were 10–15 % of an offline analysis of 50 M records with
/// one worker, all of it on the analysis worker's thread. The heap grows by
/// `pad` bytes more than each request (glibc's `M_TOP_PAD`), and the helper,
/// on another core, faults the new range in (`madvise(MADV_POPULATE_WRITE)`,
/// Linux ≥ 5.14) while the worker is still using the part before it. The
/// analysis does the same work; the kernel's part of it moves off its
/// thread. Worth it only when a core is otherwise idle (`sidecar analyze`
/// with fewer workers than cores); live runs share the cores with the
/// engine and do not use it.
pub struct Prefault {
    stop: Arc<AtomicBool>,
    populated: Arc<AtomicU64>,
    thread: Option<JoinHandle<Option<std::io::Error>>>,
}

impl Prefault {
    /// Starts the helper, with the heap growing `pad` bytes past each
    /// request from now on. `None` where there is no such heap (not
    /// Linux/glibc) or the thread could not be started.
    pub fn start(pad: usize) -> Option<Prefault> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let stop = Arc::new(AtomicBool::new(false));
            let populated = Arc::new(AtomicU64::new(0));
            let (s, p) = (stop.clone(), populated.clone());
            let mut done = program_break();
            let thread = std::thread::Builder::new()
                .name("heap-prefault".into())
                .spawn(move || {
                    while !s.load(Ordering::Relaxed) {
                        let brk = program_break();
                        // The heap shrank (trimmed): what regrows is new.
                        done = done.min(brk);
                        if let Some((start, len)) = new_range(done, brk, page_size()) {
                            match populate(start, len) {
                                Ok(()) => {
                                    p.fetch_add(len as u64, Ordering::Relaxed);
                                }
                                // Not supported here (kernel < 5.14): nothing
                                // to do, the worker faults its own pages.
                                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Some(e),
                                // Trimmed under us (ENOMEM) or interrupted:
                                // the next round sees the heap as it is.
                                Err(_) => {}
                            }
                            done = brk;
                        }
                        std::thread::sleep(POLL);
                    }
                    None
                })
                .ok()?;
            // SAFETY: mallopt(3) only sets an allocator parameter; glibc
            // reads it under the arena lock, so setting it while other
            // threads allocate is fine. Set after the helper started, so
            // there is no padded growth nobody faults in.
            unsafe {
                libc::mallopt(libc::M_TOP_PAD, pad.min(i32::MAX as usize) as i32);
            }
            Some(Prefault { stop, populated, thread: Some(thread) })
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            let _ = pad;
            None
        }
    }

    /// Bytes faulted in so far.
    pub fn populated(&self) -> u64 {
        self.populated.load(Ordering::Relaxed)
    }

    /// Stops the helper; the error that stopped it earlier, if one did
    /// (`EINVAL`: the kernel cannot populate ranges).
    pub fn finish(mut self) -> Option<std::io::Error> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Option<std::io::Error> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok().flatten())
    }
}

impl Drop for Prefault {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The page-aligned range from `done` (rounded down) to `brk`, if `brk` is
/// past `done`.
fn new_range(done: usize, brk: usize, page: usize) -> Option<(usize, usize)> {
    let start = done & !(page - 1);
    (brk > done).then(|| (start, brk - start))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn program_break() -> usize {
    // SAFETY: brk(2) with address 0 is below the heap's start, so the kernel
    // changes nothing and returns the current break. The raw system call,
    // not sbrk(0): that reads glibc's cached break, which the allocator
    // writes under its own lock on another thread.
    unsafe { libc::syscall(libc::SYS_brk, 0usize) as usize }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn populate(start: usize, len: usize) -> std::io::Result<()> {
    // SAFETY: MADV_POPULATE_WRITE faults pages in as a write would, without
    // writing: it changes no byte of memory, whoever owns the range (the
    // allocator's free top, or memory in use by another thread). A range
    // unmapped meanwhile (a trim) fails with ENOMEM and changes nothing.
    let r = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Freed memory inside the heap goes back to the kernel at a trim: 48
    /// MB of blocks freed below live ones (so not at the heap's top, which
    /// glibc trims by itself) leave the process's RSS only then.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_gives_freed_heap_back() {
        fn rss_kb() -> u64 {
            let s = std::fs::read_to_string("/proc/self/status").unwrap();
            let kb = s.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
            kb.split_whitespace().next().unwrap().parse().unwrap()
        }
        // Blocks under the mmap threshold (128 KB by default), touched.
        let mut blocks: Vec<Vec<u8>> = (0..1024).map(|i| vec![i as u8 | 1; 64 << 10]).collect();
        let keep = blocks.split_off(768);
        drop(blocks);
        let before = rss_kb();
        trim();
        let after = rss_kb();
        assert!(after + 32 * 1024 < before, "RSS {before} kB before the trim, {after} kB after");
        assert!(keep.iter().all(|b| b[0] != 0), "the live blocks are intact");
    }

    #[test]
    fn new_range_starts_at_the_page_of_what_was_done() {
        assert_eq!(new_range(0x1000, 0x1000, 0x1000), None);
        assert_eq!(new_range(0x2000, 0x1000, 0x1000), None);
        assert_eq!(new_range(0x1000, 0x3000, 0x1000), Some((0x1000, 0x2000)));
        assert_eq!(new_range(0x1234, 0x3000, 0x1000), Some((0x1000, 0x2000)));
        assert_eq!(new_range(0x1234, 0x1235, 0x1000), Some((0x1000, 0x235)));
    }
}
