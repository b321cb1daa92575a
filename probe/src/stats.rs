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
    /// Inactive schedule pairs elided at the source (those shorter than
    /// [`crate::Builder::elide_below`]).
    pub elided: u64,
    /// Worker-local message halves counted but not written
    /// ([`crate::Builder::keep_local_messages`]).
    pub local_messages: u64,
    /// Time the engine adapter spent in its own code on this worker, in
    /// probe clock ticks ([`crate::WorkerProbe::add_adapter_cost`]; 0
    /// without an adapter).
    pub adapter_ticks: u64,
    /// Whether an engine adapter reported this worker's cost (its figures
    /// are known, zero or not).
    pub adapter: bool,
    /// Events the engine logged for the adapter.
    pub engine_events: u64,
    /// The engine's own cost of logging them, estimated, in ns (flushes
    /// included).
    pub engine_log_ns: u64,
    /// Flush calls of the adapter's logs, and their part of `engine_log_ns`.
    pub engine_flushes: u64,
    pub engine_flush_ns: u64,
    /// The parts of `adapter_ticks`, `engine_flushes` and `engine_flush_ns`
    /// spent in worker steps that did nothing (an idle worker polling,
    /// which spends this time instead of spinning).
    pub adapter_idle_ticks: u64,
    pub engine_idle_flushes: u64,
    pub engine_idle_flush_ns: u64,
}

impl WorkerStats {
    pub(crate) fn copy_adapter_cost(&mut self, s: &crate::worker::WorkerShared) {
        use std::sync::atomic::Ordering::Relaxed;
        self.adapter_ticks = s.adapter_ticks.load(Relaxed);
        self.adapter = s.adapter.load(Relaxed);
        self.engine_events = s.engine_events.load(Relaxed);
        self.engine_log_ns = s.engine_log_ns.load(Relaxed);
        self.engine_flushes = s.engine_flushes.load(Relaxed);
        self.engine_flush_ns = s.engine_flush_ns.load(Relaxed);
        // A part is stored after its whole, but a snapshot taken between
        // the two stores (or seeing them out of order) must not show a
        // part larger than its whole.
        self.adapter_idle_ticks = s.adapter_idle_ticks.load(Relaxed).min(self.adapter_ticks);
        self.engine_idle_flushes = s.engine_idle_flushes.load(Relaxed).min(self.engine_flushes);
        self.engine_idle_flush_ns = s.engine_idle_flush_ns.load(Relaxed).min(self.engine_flush_ns);
    }
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
    /// Stats frames written (these figures, sent in the stream about once
    /// a second and at shutdown; see [`crate::Builder::stats_frames`]).
    pub stats_frames: u64,
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
    /// Time in the engine adapter's own code, all workers, in ns (0 before
    /// the clock is calibrated).
    pub fn adapter_ns(&self) -> u64 {
        self.ticks_to_ns(self.total(|w| w.adapter_ticks))
    }
    /// The part of [`Stats::adapter_ns`] spent in worker steps that did
    /// nothing.
    pub fn adapter_idle_ns(&self) -> u64 {
        self.ticks_to_ns(self.total(|w| w.adapter_idle_ticks))
    }
    /// A figure summed over the workers (saturating: the adapter's figures
    /// are running totals).
    fn total(&self, f: fn(&WorkerStats) -> u64) -> u64 {
        self.workers.iter().map(f).fold(0, u64::saturating_add)
    }
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        match self.ticks_per_sec {
            0 => 0,
            tps => (ticks as u128 * 1_000_000_000 / tps as u128).min(u64::MAX as u128) as u64,
        }
    }
    pub fn engine_events(&self) -> u64 {
        self.total(|w| w.engine_events)
    }
    pub fn engine_log_ns(&self) -> u64 {
        self.total(|w| w.engine_log_ns)
    }
    pub fn engine_flushes(&self) -> u64 {
        self.total(|w| w.engine_flushes)
    }
    pub fn engine_flush_ns(&self) -> u64 {
        self.total(|w| w.engine_flush_ns)
    }
    /// Flush calls in worker steps that did nothing, and their part of
    /// [`Stats::engine_flush_ns`].
    pub fn engine_idle_flushes(&self) -> u64 {
        self.total(|w| w.engine_idle_flushes)
    }
    pub fn engine_idle_flush_ns(&self) -> u64 {
        self.total(|w| w.engine_idle_flush_ns)
    }

    /// Whether an engine adapter reported on any worker.
    pub fn has_adapter(&self) -> bool {
        self.workers.iter().any(|w| w.adapter)
    }

    /// These figures as a Stats frame carries them (`last`: at shutdown):
    /// the readers' account of what tracing cost, without the program
    /// printing anything. The adapter's and the engine's figures only if an
    /// adapter reported.
    pub fn frame_figures(&self, last: bool) -> ringlog::ProbeStats {
        use ringlog::StatFigure as F;
        let mut s = ringlog::ProbeStats { last, figures: Vec::with_capacity(F::ALL.len()) };
        let always = [
            (F::Workers, self.workers.len() as u64),
            (F::Produced, self.produced()),
            (F::Written, self.written()),
            (F::Lost, self.lost()),
            (F::Elided, self.elided()),
            (F::LocalMessages, self.local_messages()),
            (F::Bytes, self.bytes),
            (F::WriterCpuNs, self.writer_cpu_ns),
        ];
        for (f, v) in always {
            s.set(f, v);
        }
        if self.has_adapter() {
            let adapter = [
                (F::AdapterNs, self.adapter_ns()),
                (F::EngineEvents, self.engine_events()),
                (F::EngineLogNs, self.engine_log_ns()),
                (F::EngineFlushes, self.engine_flushes()),
                (F::EngineFlushNs, self.engine_flush_ns()),
                (F::IdleFlushes, self.engine_idle_flushes()),
                (F::IdleEngineNs, self.engine_idle_flush_ns()),
                (F::IdleAdapterNs, self.adapter_idle_ns()),
            ];
            for (f, v) in adapter {
                s.set(f, v);
            }
        }
        s
    }
}
