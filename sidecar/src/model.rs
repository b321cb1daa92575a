//! The types every stage shares: worker timelines as items, and the per-window
//! fragment a stream hands to the window's owner. No I/O, no timely.

use serde::{Deserialize, Serialize};

/// Nanoseconds on one host's timeline (its CLOCK_MONOTONIC).
pub type Ns = u64;

/// One stream: one worker of one process on one host (ringlog's `StreamId`,
/// with serde so it can cross timely workers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Sid {
    pub host: u64,
    pub process: u32,
    pub worker: u32,
}

impl From<ringlog::StreamId> for Sid {
    fn from(s: ringlog::StreamId) -> Sid {
        Sid { host: s.host, process: s.process, worker: s.worker }
    }
}

impl std::fmt::Display for Sid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "host {:016x} pid {} worker {}", self.host, self.process, self.worker)
    }
}

/// What a worker was busy with (innermost wins, sager-notes §2.2 item 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Busy {
    Operator(u32),
    Span(u64),
}

/// Data or progress message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MsgKind {
    Data,
    Progress,
}

/// What ended a gap in a worker's activity: the first message read by the
/// execution that followed it (the gap's visible cause), if any. Used for
/// gaps that cross a window's end, whose terminating arrival lies in a later
/// window (sager-notes §3.4: a wait is only classified once its terminator is
/// seen, Property 3.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GapEnd {
    /// The next useful work read a message from `from` on `channel`.
    Read { from: u32, channel: u32, kind: MsgKind },
    /// The next useful work had no visible cause (Waiting-for-Input).
    NoCause,
    /// The stream ended (or the live deadline passed) inside the gap.
    Open,
}

/// One entry of a worker's timeline, as the activity builder emits it.
/// Busy pieces and gaps tile the timeline; points sit on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Item {
    /// A piece of useful work, `[start, end]`.
    Busy {
        start: Ns,
        end: Ns,
        what: Busy,
    },
    /// Time between useful work. `cause_until`: until when a local cause of
    /// future work (active operator's pending progress, progress read) was
    /// pending (Sager §5.1.2 PC4/OC2); a wait can only start after it.
    Gap {
        start: Ns,
        end: Ns,
        cause_until: Ns,
        next: GapEnd,
    },
    Send {
        ts: Ns,
        to: u32,
        channel: u32,
        seq: u64,
        records: u32,
    },
    Recv {
        ts: Ns,
        from: u32,
        channel: u32,
        seq: u64,
        records: u32,
    },
    PSend {
        ts: Ns,
        channel: u32,
        seq: u64,
    },
    PRecv {
        ts: Ns,
        from: u32,
        channel: u32,
        seq: u64,
    },
}

impl Item {
    pub fn start(&self) -> Ns {
        match *self {
            Item::Busy { start, .. } | Item::Gap { start, .. } => start,
            Item::Send { ts, .. } | Item::Recv { ts, .. } | Item::PSend { ts, .. } | Item::PRecv { ts, .. } => ts,
        }
    }
    pub fn end(&self) -> Ns {
        match *self {
            Item::Busy { end, .. } | Item::Gap { end, .. } => end,
            _ => self.start(),
        }
    }
    pub fn is_interval(&self) -> bool {
        matches!(self, Item::Busy { .. } | Item::Gap { .. })
    }
}

/// Instrumentation figures of one stream over one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Records decoded (published by the probe).
    pub records: u64,
    /// Schedule pairs the probe elided (from Step records).
    pub elided: u64,
    /// Time spent in elided schedules, ns.
    pub spin_ns: u64,
    /// Records the probe lost (frame headers).
    pub lost: u64,
    /// Frame bytes read (header + payload).
    pub bytes: u64,
    /// Engine steps (Step records).
    pub steps: u64,
    /// Schedule/span starts or stops without their other half.
    pub unpaired: u64,
    /// Widest interval of a timestamp converted from another host's clock
    /// (clock sync), ns; 0 when nothing was converted. Merged by max.
    pub clock_uncertainty_ns: u64,
}

impl Counters {
    pub fn add(&mut self, o: &Counters) {
        self.records += o.records;
        self.elided += o.elided;
        self.spin_ns += o.spin_ns;
        self.lost += o.lost;
        self.bytes += o.bytes;
        self.steps += o.steps;
        self.unpaired += o.unpaired;
        self.clock_uncertainty_ns = self.clock_uncertainty_ns.max(o.clock_uncertainty_ns);
    }
}

/// A channel's metadata: id, (source operator, port), (target operator, port).
pub type ChannelMeta = (u32, (u32, u32), (u32, u32));

/// Everything one stream contributes to one window; exchanged to the
/// window's owner.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Fragment {
    pub stream: Option<Sid>,
    /// Window index (start = index × window length, on the host timeline).
    pub window: u64,
    /// Items overlapping the window, original (unclipped) times.
    pub items: Vec<Item>,
    pub counters: Counters,
    /// Part of the stream's timeline covered in this window.
    pub covered: (Ns, Ns),
    /// Why this stream's data for the window cannot be trusted whole
    /// (loss, missing frames, disconnect, decode error, late data).
    pub faults: Vec<String>,
    /// Workers the process said it runs (0 = unknown).
    pub workers_expected: u32,
    /// The stream ended cleanly inside this window.
    pub ended: bool,
    /// The program name from the process's Hello.
    pub program: String,
    /// Metadata of the stream so far: operator names, channels, span names.
    pub ops: Vec<(u32, String)>,
    pub channels: Vec<ChannelMeta>,
    pub spans: Vec<(u64, String)>,
    /// realtime − monotonic ns of the host (first clock sample), to report
    /// windows as UNIX times.
    pub realtime_offset: Option<i64>,
    /// Streams of the same process known to have ended before this window
    /// (set by the window's owner): not "missing" from it.
    pub peers_ended: u32,
    /// Other hosts whose streams this sidecar analyzes (on their own
    /// timelines: not synchronized with this one).
    pub other_hosts: Vec<u64>,
    /// The host whose timeline the times are on, when not the stream's own:
    /// a synchronized host's streams are converted to the reference host's
    /// timeline and windowed with it (see `sync`).
    pub timeline: Option<u64>,
    /// Not a stream's data: a note, sent to every window owner, that this
    /// stream ended and is absent from `window` on.
    pub marker: bool,
    /// For markers: the worker index it is sent to.
    pub route: u64,
}

/// Empty vectors kept for reuse, the roomiest handed out first; bounded by
/// the entries they can hold in all. A vector allocated anew for every
/// window has its pages faulted in again and regrows by doubling; a kept
/// one does neither.
pub struct Pool<T> {
    kept: Vec<Vec<T>>,
    /// Smaller vectors are not worth keeping.
    min_capacity: usize,
    max_entries: usize,
}

impl<T> Pool<T> {
    pub const fn new(min_capacity: usize, max_entries: usize) -> Pool<T> {
        Pool { kept: Vec::new(), min_capacity, max_entries }
    }

    /// The roomiest kept vector, or a new one.
    pub fn take(&mut self) -> Vec<T> {
        let best = self.kept.iter().enumerate().max_by_key(|(_, v)| v.capacity()).map(|(i, _)| i);
        best.map(|i| self.kept.swap_remove(i)).unwrap_or_default()
    }

    /// Keeps `v` (emptied) if it is worth it and there is room.
    pub fn give(&mut self, mut v: Vec<T>) {
        let held: usize = self.kept.iter().map(|x| x.capacity()).sum();
        if v.capacity() >= self.min_capacity && held + v.capacity() <= self.max_entries {
            v.clear();
            self.kept.push(v);
        }
    }
}

/// Item vectors, shared by every thread: a window's fragments hold millions
/// of items and move between workers; they come back here when their window
/// is analyzed. At most 16 M items (640 MB).
static ITEM_POOL: std::sync::Mutex<Pool<Item>> = std::sync::Mutex::new(Pool::new(1024, 16 << 20));

/// An empty item vector, recycled if one is available.
pub fn take_items() -> Vec<Item> {
    ITEM_POOL.lock().map(|mut p| p.take()).unwrap_or_default()
}

/// Returns an item vector for reuse.
pub fn give_items(v: Vec<Item>) {
    if let Ok(mut p) = ITEM_POOL.lock() {
        p.give(v);
    }
}

/// Ended streams as window owners track them: (host, process) → the first
/// window each ended stream is absent from.
#[derive(Default, Debug)]
pub struct EndedStreams(std::collections::BTreeMap<(u64, u32), Vec<u64>>);

impl EndedStreams {
    pub fn note(&mut self, s: Sid, absent_from: u64) {
        self.0.entry((s.host, s.process)).or_default().push(absent_from);
    }
    /// Sets `peers_ended` on the window's fragments.
    pub fn apply(&self, window: u64, frags: &mut [Fragment]) {
        for f in frags {
            if let Some(s) = f.stream {
                let n = self.0.get(&(s.host, s.process)).map_or(0, |v| v.iter().filter(|&&a| a <= window).count());
                f.peers_ended = f.peers_ended.max(n as u32);
            }
        }
    }
}
