//! `heap::Prefault` faults the heap's new pages in on its own thread: pages
//! of a fresh allocation cost the thread that touches them no page faults,
//! where the same touch of never-touched pages costs one fault per page.
//! (No test harness: `main` runs on the main thread, whose allocations come
//! from the heap the prefaulter watches.)

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn main() {
    use std::time::{Duration, Instant};

    // cargo-nextest lists a binary's tests before running them.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            println!("pages_a_prefaulter_populated_cost_no_faults: test");
        }
        return;
    }

    use sidecar::heap::{tune_allocator, Prefault, PREFAULT_PAD};

    const PAGE: usize = 4096;
    const LEN: usize = 16 << 20;

    /// Minor page faults of this thread so far.
    fn faults() -> i64 {
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage writes one rusage into the struct it is given.
        assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
        u.ru_minflt
    }

    /// Writes one byte per page of `p[..len]`; the faults this took.
    fn touch(p: *mut u8, len: usize) -> i64 {
        let f0 = faults();
        for i in (0..len).step_by(PAGE) {
            // SAFETY: `p` is valid for `len` bytes (the callers' allocations).
            unsafe { p.add(i).write_volatile(1) };
        }
        faults() - f0
    }

    tune_allocator();

    // Control: never-touched anonymous pages fault once each when touched.
    // SAFETY: a fresh private anonymous mapping, unmapped below.
    let m = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(m, libc::MAP_FAILED);
    let control = touch(m.cast(), LEN);
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(m, LEN) };
    assert!(control >= (LEN / PAGE) as i64 * 9 / 10, "control: {control} faults for {} pages", LEN / PAGE);

    let pf = Prefault::start(PREFAULT_PAD).expect("a prefaulter on Linux/glibc");
    // Below the mmap threshold that tune_allocator sets: from the heap,
    // which grows by LEN + PREFAULT_PAD, less what was free at its top.
    let mut v: Vec<u8> = Vec::with_capacity(LEN);
    let t = Instant::now();
    while pf.populated() < (LEN + PREFAULT_PAD / 2) as u64 {
        assert!(t.elapsed() < Duration::from_secs(20), "populated only {} bytes", pf.populated());
        std::thread::sleep(Duration::from_millis(1));
    }
    let with = touch(v.as_mut_ptr(), LEN);
    assert!(with < control / 20, "{with} faults on prefaulted pages (control: {control})");
    let populated = pf.populated();
    assert!(pf.finish().is_none(), "the prefaulter stopped on an error");
    drop(v);
    println!("heap_prefault: ok ({control} faults on fresh pages, {with} on {populated} prefaulted bytes)");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn main() {}
