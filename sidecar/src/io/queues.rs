//! What the I/O thread hands the analysis workers: one [`WorkerQueue`] per
//! worker (its connections' readers and how to wake it), and whether the
//! I/O thread is done ([`Live`]).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use super::{ConnCounts, Reader};

/// What the I/O thread hands one analysis worker: the connections accepted
/// for it, and how to wake it when one of them has data.
#[derive(Default)]
pub struct WorkerQueue {
    pub readers: Mutex<Vec<Reader>>,
    waker: Mutex<Option<Box<dyn Fn() + Send>>>,
}

impl WorkerQueue {
    /// Sets how to wake this worker (its input operator's activator).
    pub fn set_waker(&self, wake: Box<dyn Fn() + Send>) {
        *self.waker.lock().unwrap() = Some(wake);
    }

    pub fn wake(&self) {
        if let Some(w) = &*self.waker.lock().unwrap() {
            w();
        }
    }
}

/// Live input: one queue per analysis worker, whether the I/O thread
/// has finished (after a stop it makes one last pass over the sockets), and
/// what it did with the connections.
#[derive(Default)]
pub struct Live {
    pub workers: Vec<WorkerQueue>,
    pub io_done: AtomicBool,
    pub counts: ConnCounts,
}

pub type Queues = Arc<Live>;

pub fn queues(workers: usize) -> Queues {
    Arc::new(Live {
        workers: (0..workers.max(1)).map(|_| WorkerQueue::default()).collect(),
        io_done: AtomicBool::new(false),
        counts: ConnCounts::default(),
    })
}
