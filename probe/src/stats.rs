//! What the probe reports about itself.

/// Per-worker accounting. `produced == written + lost_ring + lost_sink` once
/// the stream has been drained (at shutdown), and `elided` counts the
/// schedule pairs that were never written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    pub index: u32,
    /// Records the worker made (pushed into its ring or lost to a full one).
    pub produced: u64,
    /// Records that reached the sink.
    pub written: u64,
    /// Records lost to a full ring (`OnFull::Drop`).
    pub lost_ring: u64,
    /// Records lost because the sink was gone or failing.
    pub lost_sink: u64,
    /// Inactive schedule pairs elided at the source.
    pub elided: u64,
    /// Worker-local message halves counted but not written
    /// ([`crate::Builder::keep_local_messages`]).
    pub local_messages: u64,
}

impl WorkerStats {
    pub fn lost(&self) -> u64 {
        self.lost_ring + self.lost_sink
    }
}

/// A snapshot of the whole probe.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub workers: Vec<WorkerStats>,
    /// Bytes of frames that reached the sink.
    pub bytes: u64,
    /// Successful connections (or file opens) to the sink.
    pub connects: u64,
    /// Failed opens and writes.
    pub sink_errors: u64,
    pub last_error: Option<String>,
    /// `io_uring` or `write(2)`.
    pub io_backend: &'static str,
    /// How Records frames are compressed: `zstd` or `none`.
    pub compression: &'static str,
    pub sink: String,
    /// CPU time the writer thread used.
    pub writer_cpu_ns: u64,
    /// Ticks per second of the stream clock (the writer's calibration).
    pub ticks_per_sec: u64,
    /// Whether pinning the writer to the requested core succeeded.
    pub pinned: bool,
    pub(crate) ended: Vec<WorkerStats>,
}

impl Stats {
    pub fn produced(&self) -> u64 {
        self.workers.iter().map(|w| w.produced).sum()
    }
    pub fn written(&self) -> u64 {
        self.workers.iter().map(|w| w.written).sum()
    }
    pub fn lost(&self) -> u64 {
        self.workers.iter().map(|w| w.lost()).sum()
    }
    pub fn elided(&self) -> u64 {
        self.workers.iter().map(|w| w.elided).sum()
    }
    pub fn local_messages(&self) -> u64 {
        self.workers.iter().map(|w| w.local_messages).sum()
    }
}
