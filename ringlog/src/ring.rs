//! The single-producer single-consumer ring a worker writes its records
//! into and the writer thread drains.
//!
//! Built for the probe's hot path: the producer's fast path is a compare
//! against a cached read index, one 32-byte store into a power-of-two slot
//! array, and a release store of the write index. No read-modify-write
//! atomics, no allocation, no locks.
//!
//! ```
//! let (mut p, mut c) = ringlog::ring::with_capacity(4);
//! assert!(p.push(ringlog::Record::default()));
//! let (a, b) = c.readable();
//! assert_eq!(a.len() + b.len(), 1);
//! c.release(1);
//! ```

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::Record;

/// Keeps the two indices on separate cache lines so the producer's stores
/// and the consumer's stores do not contend.
#[repr(align(128))]
struct Padded(AtomicUsize);

struct Shared {
    slots: Box<[UnsafeCell<Record>]>,
    /// Next slot the consumer reads (written by the consumer only).
    head: Padded,
    /// Next slot the producer writes (written by the producer only).
    tail: Padded,
}

// SAFETY: slots are only ever accessed under the ring protocol: the
// producer writes slots in [tail, head + capacity) and the consumer reads
// slots in [head, tail); the release/acquire pairs on `tail` and `head`
// order those accesses, so no slot is accessed by both threads at once.
unsafe impl Sync for Shared {}
unsafe impl Send for Shared {}

/// A ring of at least `capacity` records (rounded up to a power of two).
pub fn with_capacity(capacity: usize) -> (Producer, Consumer) {
    let cap = capacity.max(2).next_power_of_two();
    let slots: Box<[UnsafeCell<Record>]> = (0..cap).map(|_| UnsafeCell::new(Record::default())).collect();
    let shared = Arc::new(Shared { slots, head: Padded(AtomicUsize::new(0)), tail: Padded(AtomicUsize::new(0)) });
    let base = shared.slots.as_ptr() as *mut Record;
    (
        Producer { base, mask: cap - 1, cap, tail: 0, cached_head: 0, shared: shared.clone() },
        Consumer { base, mask: cap - 1, head: 0, shared },
    )
}

/// Slots ahead of the write index whose cache line the producer asks for
/// in advance: the writer thread last read those lines on another core, so
/// taking them back costs a coherence round trip that a prefetch hides.
const PREFETCH_AHEAD: usize = 16;

#[inline(always)]
fn prefetch_for_write(p: *const Record) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint with no architectural effect; it never
    // faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_ET0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The writing end. Owned by one thread at a time.
pub struct Producer {
    base: *mut Record,
    mask: usize,
    cap: usize,
    tail: usize,
    cached_head: usize,
    shared: Arc<Shared>,
}

// SAFETY: the producer's pointer targets the shared slot array, which
// `shared` keeps alive; moving the producer to another thread moves the
// only writer with it.
unsafe impl Send for Producer {}

impl Producer {
    /// Appends a record; `false` if the ring is full (nothing written).
    #[inline(always)]
    pub fn push(&mut self, rec: Record) -> bool {
        if self.tail.wrapping_sub(self.cached_head) == self.cap && !self.refresh() {
            return false;
        }
        // SAFETY: `tail - head < cap`, so slot `tail & mask` lies outside
        // [head, tail), the range the consumer may read; it is in bounds
        // because `mask = cap - 1` and the array has `cap` slots.
        unsafe { self.base.add(self.tail & self.mask).write(rec) };
        prefetch_for_write(self.base.wrapping_add((self.tail + PREFETCH_AHEAD) & self.mask));
        self.tail = self.tail.wrapping_add(1);
        self.shared.tail.0.store(self.tail, Ordering::Release);
        true
    }

    #[cold]
    fn refresh(&mut self) -> bool {
        self.cached_head = self.shared.head.0.load(Ordering::Acquire);
        self.tail.wrapping_sub(self.cached_head) < self.cap
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }
}

/// The reading end. Owned by one thread at a time.
pub struct Consumer {
    base: *const Record,
    mask: usize,
    head: usize,
    shared: Arc<Shared>,
}

// SAFETY: as for `Producer`: the slot array lives as long as `shared`, and
// there is one consumer.
unsafe impl Send for Consumer {}

impl Consumer {
    /// Records ready to read, oldest first, as two slices (the second is
    /// non-empty when the range wraps). They stay valid until `release`.
    pub fn readable(&self) -> (&[Record], &[Record]) {
        let tail = self.shared.tail.0.load(Ordering::Acquire);
        let n = tail.wrapping_sub(self.head);
        let start = self.head & self.mask;
        let first = n.min(self.mask + 1 - start);
        // SAFETY: slots [head, tail) were published by the producer's
        // release store of `tail` (acquired above) and the producer does not
        // touch them until `release` moves `head` past them. `&self` borrows
        // keep `release` (which takes `&mut self`) from running while the
        // slices live. Both ranges lie within the `cap`-slot array.
        unsafe {
            (std::slice::from_raw_parts(self.base.add(start), first), std::slice::from_raw_parts(self.base, n - first))
        }
    }

    /// Hands `n` read records' slots back to the producer.
    pub fn release(&mut self, n: usize) {
        let avail = self.shared.tail.0.load(Ordering::Acquire).wrapping_sub(self.head);
        assert!(n <= avail, "released {n} records but only {avail} were readable");
        self.head = self.head.wrapping_add(n);
        self.shared.head.0.store(self.head, Ordering::Release);
    }

    pub fn is_empty(&self) -> bool {
        self.shared.tail.0.load(Ordering::Acquire) == self.head
    }

    /// Records ready to read now.
    pub fn len(&self) -> usize {
        self.shared.tail.0.load(Ordering::Acquire).wrapping_sub(self.head)
    }

    /// Slots in the ring (a power of two).
    pub fn capacity(&self) -> usize {
        self.mask + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u64) -> Record {
        Record::new(crate::Kind::Mark, i, i, 0, 0, 0)
    }

    #[test]
    fn fills_wraps_and_reports_full() {
        let (mut p, mut c) = with_capacity(3);
        assert_eq!(p.capacity(), 4);
        assert_eq!(c.capacity(), 4);
        for round in 0..5u64 {
            for i in 0..4 {
                assert!(p.push(rec(round * 10 + i)));
            }
            assert!(!p.push(rec(99)));
            let (a, b) = c.readable();
            let got: Vec<u64> = a.iter().chain(b).map(|r| r.a).collect();
            assert_eq!(got, (0..4).map(|i| round * 10 + i).collect::<Vec<_>>());
            c.release(3);
            assert!(p.push(rec(round * 10 + 4)));
            c.release(1);
            let (a, b) = c.readable();
            assert_eq!(a.len() + b.len(), 1);
            c.release(1);
            assert!(c.is_empty());
        }
    }

    #[test]
    fn two_threads_keep_order_and_lose_nothing() {
        let (mut p, mut c) = with_capacity(16);
        let n = 2_000_000u64;
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < n {
                if p.push(rec(i)) {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut next = 0;
        while next < n {
            let (a, b) = c.readable();
            let k = a.len() + b.len();
            for r in a.iter().chain(b) {
                assert_eq!(r.a, next);
                assert_eq!(r.ts, next);
                next += 1;
            }
            c.release(k);
        }
        t.join().unwrap();
        assert!(c.is_empty());
    }
}
