//! The types every stage shares: worker timelines as items, and the per-window
//! fragment a stream hands to the window's owner. No I/O, no timely.

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;
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

/// One entry of a worker's timeline, as the activity builder emits it:
/// busy pieces and gaps tile the timeline. (The messages a worker sent and
/// read go to its window's [`Messages`] tables instead.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Item {
    /// A piece of useful work, `[start, end]`.
    Busy { start: Ns, end: Ns, what: Busy },
    /// Time between useful work. `cause_until`: until when a local cause of
    /// future work (active operator's pending progress, progress read) was
    /// pending (Sager §5.1.2 PC4/OC2); a wait can only start after it.
    Gap { start: Ns, end: Ns, cause_until: Ns, next: GapEnd },
}

/// Which half of which kind of message a table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Half {
    /// A data message sent (to `other`).
    Send,
    /// A data message read (from `other`).
    Recv,
    /// A progress message sent (to every worker; `other` is 0).
    PSend,
    /// A progress message read (from `other`).
    PRecv,
}

impl Half {
    pub fn is_read(self) -> bool {
        matches!(self, Half::Recv | Half::PRecv)
    }
}

/// A message half. A read's time is kept once, in [`Messages::reads`] (the
/// wait finder needs the reads in stream order): its entry names its index
/// there, so an entry takes 16 bytes, not 24, in the largest tables a window
/// holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MsgEntry {
    pub seq: u64,
    /// A send's time; a read's index in [`Messages::reads`].
    pub at: u64,
}

/// One stream's message halves of one kind, on one channel, with one other
/// worker, in the order the stream recorded them: what the window's owner
/// matches against the other side's table (sequence numbers are sent and
/// read in order within a group).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgGroup {
    pub half: Half,
    pub channel: u32,
    pub other: u32,
    pub entries: Vec<MsgEntry>,
}

/// The messages one stream sent and read in one window, grouped as they are
/// matched. Built while the stream is ingested, so the owner of the window
/// finds every group ready instead of sorting a timeline's items into them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Messages {
    /// When each message (data or progress) was read, in the stream's order.
    pub reads: Vec<Ns>,
    pub groups: Vec<MsgGroup>,
    /// Some time was moved after ingest (clock sync's causality clamps), so
    /// it may lie outside the window now.
    pub moved: bool,
}

impl Messages {
    /// The group of `(half, channel, other)`, made if new.
    pub fn group(&mut self, half: Half, channel: u32, other: u32) -> usize {
        match self.groups.iter().position(|g| g.half == half && g.channel == channel && g.other == other) {
            Some(g) => g,
            None => self.new_group(half, channel, other),
        }
    }

    /// A new group (the caller knows there is none of that key yet).
    pub fn new_group(&mut self, half: Half, channel: u32, other: u32) -> usize {
        self.groups.push(MsgGroup { half, channel, other, entries: take_entries() });
        self.groups.len() - 1
    }

    /// Adds a message half to group `g` (from [`Messages::group`]).
    #[inline(always)]
    pub fn push(&mut self, g: usize, seq: u64, t: Ns) {
        let grp = &mut self.groups[g];
        let at = if grp.half.is_read() {
            self.reads.push(t);
            self.reads.len() as u64 - 1
        } else {
            t
        };
        grp.entries.push(MsgEntry { seq, at });
    }

    /// The time of entry `e` of a group of half `half`.
    #[inline(always)]
    pub fn time(&self, half: Half, e: &MsgEntry) -> Ns {
        if half.is_read() {
            self.reads[e.at as usize]
        } else {
            e.at
        }
    }

    /// Every message half: (half, channel, other, seq, time).
    pub fn iter(&self) -> impl Iterator<Item = (Half, u32, u32, u64, Ns)> + '_ {
        self.groups
            .iter()
            .flat_map(move |g| g.entries.iter().map(move |e| (g.half, g.channel, g.other, e.seq, self.time(g.half, e))))
    }

    pub fn len(&self) -> usize {
        self.groups.iter().map(|g| g.entries.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.iter().all(|g| g.entries.is_empty())
    }

    /// Appends `o` (the same stream's, from a duplicate fragment).
    pub fn append(&mut self, mut o: Messages) {
        let base = self.reads.len() as u64;
        self.reads.append(&mut o.reads);
        give_reads(o.reads);
        for mut g in o.groups {
            if g.half.is_read() {
                g.entries.iter_mut().for_each(|e| e.at += base);
            }
            self.groups.push(g);
        }
        self.moved |= o.moved;
    }

    /// Returns the tables' vectors to the pools.
    pub fn recycle(self) {
        give_reads(self.reads);
        for g in self.groups {
            give_entries(g.entries);
        }
    }
}

impl Item {
    pub fn start(&self) -> Ns {
        match *self {
            Item::Busy { start, .. } | Item::Gap { start, .. } => start,
        }
    }
    pub fn end(&self) -> Ns {
        match *self {
            Item::Busy { end, .. } | Item::Gap { end, .. } => end,
        }
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
        // Elided schedules, their time and lost records are counts a
        // stream states, not things we counted: a corrupt one near 2⁶⁴
        // saturates rather than overflowing the sum.
        self.elided = self.elided.saturating_add(o.elided);
        self.spin_ns = self.spin_ns.saturating_add(o.spin_ns);
        self.lost = self.lost.saturating_add(o.lost);
        self.bytes += o.bytes;
        self.steps += o.steps;
        self.unpaired += o.unpaired;
        self.clock_uncertainty_ns = self.clock_uncertainty_ns.max(o.clock_uncertainty_ns);
    }
}

/// The last sequence number of a stream's message group before a window,
/// and when that message was sent or read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqMark {
    pub half: Half,
    pub channel: u32,
    pub other: u32,
    pub seq: u64,
    pub at: Ns,
}

/// Figures an arrangement record can carry (ringlog's `Figure` values
/// 1..=FIGURES).
pub const FIGURES: usize = 9;

/// One arrangement of a stream (a differential trace and its batcher, by
/// operator) as a window leaves it: the levels its Arrangement records set
/// (each figure the last value set at or before the window's end), and the
/// most records it held during the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArrangementLevel {
    pub op: u32,
    /// Figures set inside the window (bit `i`: figure `i + 1`), until the
    /// window is handed over (then the levels are whole and this is 0).
    pub set: u16,
    /// By figure (ringlog's `Figure` value − 1).
    pub values: [u64; FIGURES],
    pub peak_records: u64,
}

/// A channel's metadata: id, (source operator, port), (target operator, port).
pub type ChannelMeta = (u32, (u32, u32), (u32, u32));

/// How a fragment's metadata crosses between processes (the pipeline's
/// concern: a fragment is `Whole` everywhere else).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetaOnWire {
    /// Carried, not kept.
    #[default]
    Whole,
    /// Carried; the receiving worker keeps it for the stream's later
    /// fragments from the same worker.
    Keep,
    /// Left out: the receiving worker kept it.
    Kept,
    /// Not a fragment: the receiving worker drops what it kept of the
    /// stream (its end marker came too late to send).
    Forget,
}

/// What a stream's Metadata frames have said so far: its operators' names
/// and addresses, its channels, its spans' names. A later definition of an
/// id replaces the earlier one.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StreamMeta {
    pub ops: FxHashMap<u32, String>,
    /// Operators' addresses: the scope path timely gives each (empty when
    /// the probe did not say).
    pub op_addrs: FxHashMap<u32, Vec<u32>>,
    pub channels: Vec<ChannelMeta>,
    pub spans: FxHashMap<u64, String>,
    /// The scopes (by operator) whose progress messages the stream does not
    /// carry (a Mark `MARK_UNTRACED_PROGRESS`: the engine could not record
    /// them), in the order said: the waits they end look like waiting for
    /// input.
    #[serde(default)]
    pub untraced: Vec<u32>,
    /// `ops` by name, made the first time a window asks (`sidecar whatif`
    /// and the ranking name operators): once per version of the metadata,
    /// not once per window and speedup.
    #[serde(skip)]
    ops_by_name: OnceLock<FxHashMap<String, Vec<u32>>>,
    /// Its size as it crosses to another process, made once per version
    /// ([`StreamMeta::wire_bytes`]).
    #[serde(skip)]
    wire_bytes: OnceLock<u64>,
}

impl StreamMeta {
    /// (For tests: metadata as these tables.)
    #[cfg(test)]
    pub(crate) fn new(
        ops: FxHashMap<u32, String>,
        op_addrs: FxHashMap<u32, Vec<u32>>,
        channels: Vec<ChannelMeta>,
        spans: FxHashMap<u64, String>,
    ) -> Self {
        StreamMeta { ops, op_addrs, channels, spans, ..Default::default() }
    }

    /// Operator `op`'s name, if declared.
    pub fn op_name(&self, op: u32) -> Option<&str> {
        self.ops.get(&op).map(String::as_str)
    }

    /// Span `id`'s name, if declared.
    pub fn span_name(&self, id: u64) -> Option<&str> {
        self.spans.get(&id).map(String::as_str)
    }

    /// Operators, channels and spans declared.
    pub fn entries(&self) -> usize {
        self.ops.len() + self.channels.len() + self.spans.len()
    }

    /// Whether `e` would add an entry (rather than name again an operator
    /// or span it has).
    pub fn adds(&self, e: &ringlog::Meta) -> bool {
        match e {
            ringlog::Meta::Operator { id, .. } => !self.ops.contains_key(id),
            ringlog::Meta::Span { id, .. } => !self.spans.contains_key(id),
            ringlog::Meta::Channel { .. } => true,
        }
    }

    /// Operator `id` is called `name` and sits at `addr`.
    pub fn operator(&mut self, id: u32, name: String, addr: Vec<u32>) {
        self.ops.insert(id, name);
        self.op_addrs.insert(id, addr);
        self.changed();
    }

    /// Scope `op`'s progress is not in the stream (an operator it declared:
    /// what it holds stays bounded by its operators).
    pub fn untraced_scope(&mut self, op: u32) {
        if self.ops.contains_key(&op) && !self.untraced.contains(&op) {
            self.untraced.push(op);
            self.changed();
        }
    }

    /// A new version: what was made of the old one is made again.
    fn changed(&mut self) {
        self.ops_by_name = OnceLock::new();
        self.wire_bytes = OnceLock::new();
    }

    /// Its approximate size on the wire: ids, names, addresses, channels.
    /// (Counted for every fragment that leaves its worker: once per
    /// version, not once per window.)
    pub fn wire_bytes(&self) -> u64 {
        *self.wire_bytes.get_or_init(|| {
            let ops: usize = self.ops.values().map(|n| 4 + n.len()).sum();
            let addrs: usize = self.op_addrs.values().map(|a| 4 + std::mem::size_of_val(&a[..])).sum();
            let spans: usize = self.spans.values().map(|n| 8 + n.len()).sum();
            let untraced = std::mem::size_of_val(&self.untraced[..]);
            (ops + addrs + spans + untraced + std::mem::size_of_val(&self.channels[..])) as u64
        })
    }

    /// The operators called `name`, in id order.
    pub fn ops_named(&self, name: &str) -> &[u32] {
        let index = self.ops_by_name.get_or_init(|| {
            let mut by_name: FxHashMap<String, Vec<u32>> = FxHashMap::default();
            for (&id, n) in &self.ops {
                by_name.entry(n.clone()).or_default().push(id);
            }
            by_name.values_mut().for_each(|ids| ids.sort_unstable());
            by_name
        });
        index.get(name).map_or(&[], Vec::as_slice)
    }

    pub fn span(&mut self, id: u64, name: String) {
        self.spans.insert(id, name);
        self.changed();
    }

    pub fn channel(&mut self, c: ChannelMeta) {
        self.channels.push(c);
        self.changed();
    }

    /// Forgets operators that shut down: each, and for a dataflow (its
    /// root: an address of one number) every operator in it (timely logs
    /// the dataflow's shutdown alone when a program drops it); and the
    /// channels between operators of which neither is known any more. One
    /// pass over the operators for all the dataflows.
    pub fn forget(&mut self, shut_down: impl IntoIterator<Item = u32>) {
        let mut gone: rustc_hash::FxHashSet<u32> = Default::default();
        let mut dataflows: rustc_hash::FxHashSet<u32> = Default::default();
        for op in shut_down {
            match self.op_addrs.get(&op).map(Vec::as_slice) {
                Some(&[d]) => {
                    dataflows.insert(d);
                }
                _ => {
                    gone.insert(op);
                }
            }
        }
        if !dataflows.is_empty() {
            let inside = |a: &[u32]| a.first().is_some_and(|d| dataflows.contains(d));
            gone.extend(self.op_addrs.iter().filter(|(_, a)| inside(a)).map(|(&id, _)| id));
        }
        if gone.is_empty() {
            return;
        }
        for op in &gone {
            self.ops.remove(op);
            self.op_addrs.remove(op);
        }
        self.untraced.retain(|op| !gone.contains(op));
        let ops = &self.ops;
        self.channels.retain(|&(_, (src, _), (dst, _))| {
            !(gone.contains(&src) || gone.contains(&dst)) || ops.contains_key(&src) || ops.contains_key(&dst)
        });
        self.changed();
    }
}

/// Everything one stream contributes to one window; exchanged to the
/// window's owner.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Fragment {
    pub stream: Option<Sid>,
    /// Window index (start = index × window length, on the host timeline).
    pub window: u64,
    /// Busy pieces and gaps overlapping the window, original (unclipped)
    /// times.
    pub items: Vec<Item>,
    /// Messages sent and read inside the window (clock sync's clamps may
    /// move some out: `Messages::moved`).
    pub msgs: Messages,
    /// The last sequence number of each of the stream's message groups
    /// (half, channel, other worker) in the windows before this one: a
    /// message sent before the window and not read by its end lies in its
    /// reader's buffer all through it, though neither half is in the
    /// window (Sager §5.1 condition 2; Def. 3.5 projects its edge onto the
    /// whole window).
    pub seq_before: Vec<SeqMark>,
    /// From when the stream's record of its message halves is whole: its
    /// first record, or its latest fault (records lost, frames missing,
    /// late data). A mark older than this is not compared with its reads.
    pub clean_since: Ns,
    pub counters: Counters,
    /// Part of the stream's timeline covered in this window.
    pub covered: (Ns, Ns),
    /// Why this stream's data for the window cannot be trusted whole
    /// (loss, missing frames, disconnect, decode error, late data).
    pub faults: Vec<String>,
    /// Workers the process said it runs (0 = unknown).
    pub workers_expected: u32,
    /// The global worker indices of the streams of this stream's process
    /// that the sidecar knows of (their Hello seen; offline, every stream
    /// of the process in the files), lowest and highest + 1; (0, 0): none
    /// known. What a process that announced no worker count runs.
    pub process_workers: (u32, u32),
    /// The stream ended cleanly inside this window.
    pub ended: bool,
    /// The program name from the process's Hello.
    pub program: String,
    /// The host's name from the process's Hello.
    pub host_name: String,
    /// The stream's metadata so far, shared by its fragments: a window's
    /// fragment does not copy it (a dataflow of thousands of operators
    /// would otherwise copy their names into every fragment of every
    /// window).
    pub meta: Arc<StreamMeta>,
    /// How `meta` crosses to a worker of another process: whole, or left
    /// out because that worker kept it from an earlier fragment.
    pub meta_on_wire: MetaOnWire,
    /// The stream's arrangements (differential), by operator: every one it
    /// has reported so far, as the window leaves them.
    pub arrangements: Vec<ArrangementLevel>,
    /// realtime − monotonic ns of the host (first clock sample), to report
    /// windows as UNIX times.
    pub realtime_offset: Option<i64>,
    /// Worker indices of the streams of the same process known to have
    /// ended before this window (set by the window's owner): not "missing"
    /// from it.
    pub peers_ended: Vec<u32>,
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
    /// Late records of this stream for a window already handed over (live:
    /// the deadline closed it first), within the windows kept for revision:
    /// folded into the window's fragments by [`Fragment::fold_late`], and
    /// the window is reported again.
    pub late: bool,
    /// Live: the stream's records stopped at this time while its process's
    /// writer went on sending frames (its other workers' records, its
    /// periodic Stats frames): the worker is inside one step, whose events
    /// timely delivers when it ends (most often one long execution). Set on
    /// the windows the live deadline hands over in that silence.
    pub silent_since: Option<Ns>,
    /// Its items and message tables packed (`analysis::pack`) while it
    /// crosses to a worker of another process; empty otherwise.
    #[serde(with = "serde_bytes", default)]
    pub packed: Vec<u8>,
}

impl SeqMark {
    /// Raises `m`'s group in `marks` (sorted by group) to `m` if it is
    /// later, or adds it.
    pub fn raise(marks: &mut Vec<SeqMark>, m: SeqMark) {
        match marks.binary_search_by_key(&(m.half, m.channel, m.other), |x| (x.half, x.channel, x.other)) {
            Ok(i) if marks[i].seq < m.seq => marks[i] = m,
            Ok(_) => {}
            Err(i) => marks.insert(i, m),
        }
    }
}

impl Fragment {
    /// Folds `patch`, late records of one stream for this window
    /// ([`Fragment::late`]), into the window's fragments `frags`, so that
    /// they hold what they would have held had the records come in time.
    /// The stream's fragment had its timeline up to the last record before
    /// the silence, then the gap the live deadline handed over open
    /// (`Builder::force`); the late items start at that gap's start: the
    /// open gap goes, they come in its place. What the stream covered is
    /// recomputed from its items and messages (the open gap reached the
    /// window's end). Returns false if `patch` is not a late fragment.
    pub fn fold_late(frags: &mut Vec<Fragment>, width: Ns, mut patch: Fragment) -> bool {
        if !patch.late {
            return false;
        }
        patch.late = false;
        let Some(f) = frags.iter_mut().find(|f| !f.marker && f.stream == patch.stream) else {
            frags.push(patch);
            return true;
        };
        let from = patch.items.iter().map(Item::start).min().unwrap_or(Ns::MAX);
        f.items.retain(|it| !matches!(*it, Item::Gap { next: GapEnd::Open, end, .. } if end > from));
        f.items.append(&mut patch.items);
        f.msgs.append(std::mem::take(&mut patch.msgs));
        f.counters.add(&patch.counters);
        for why in patch.faults {
            if !f.faults.contains(&why) {
                f.faults.push(why);
            }
        }
        f.ended |= patch.ended;
        // The stream's sequence numbers before the window, raised by the
        // late records of the windows before it (`Windower::take_patches`).
        for m in patch.seq_before {
            SeqMark::raise(&mut f.seq_before, m);
        }
        // (Its records came: it was not silent after all.)
        f.silent_since = None;
        if patch.meta.ops.len() >= f.meta.ops.len() {
            f.meta = patch.meta;
        }
        f.covered = covered(f, width);
        true
    }
}

/// The part of window `f.window` its stream's items and messages cover
/// (as the windower computes it: items clipped to the window, message
/// times); an empty one is the window's start.
fn covered(f: &Fragment, width: Ns) -> (Ns, Ns) {
    let (ws, we) = (f.window.saturating_mul(width), f.window.saturating_add(1).saturating_mul(width));
    let (mut lo, mut hi) = (Ns::MAX, 0);
    for it in &f.items {
        lo = lo.min(it.start().max(ws));
        hi = hi.max(it.end().min(we));
    }
    for (.., t) in f.msgs.iter() {
        lo = lo.min(t);
        hi = hi.max(t);
    }
    if lo > hi {
        (ws, ws)
    } else {
        (lo, hi)
    }
}

/// Empty vectors kept for reuse, the roomiest handed out first; bounded by
/// the entries they can hold in all and by their number (past it a smaller
/// one makes way). A vector allocated anew for every window has its pages
/// faulted in again and regrows by doubling; a kept one does neither.
///
/// Kept by capacity in an ordered map, with their total held apart, so that
/// each call costs a lookup, not a scan of the kept vectors: a window of a
/// thousand streams gives back thousands of message tables, and the scans
/// took 6.5 % of the instructions of a 1,000-stream trace
/// (docs/performance.md, instructions per record against the streams).
pub struct Pool<T> {
    /// By (capacity, arrival): the arrival keeps equal capacities apart.
    kept: std::collections::BTreeMap<(usize, u64), Vec<T>>,
    arrivals: u64,
    /// The capacities of the kept vectors, summed.
    held: usize,
    /// Smaller vectors are not worth keeping.
    min_capacity: usize,
    max_entries: usize,
}

impl<T> Pool<T> {
    pub const fn new(min_capacity: usize, max_entries: usize) -> Pool<T> {
        Pool { kept: std::collections::BTreeMap::new(), arrivals: 0, held: 0, min_capacity, max_entries }
    }

    /// The roomiest kept vector, or a new one.
    pub fn take(&mut self) -> Vec<T> {
        self.kept.pop_last().map(|(_, v)| self.handed_out(v)).unwrap_or_default()
    }

    /// The smallest kept vector that holds `n`, or a new one of that size:
    /// for a short-lived few, so that the roomy vectors stay for the
    /// windows that need them.
    pub fn take_fit(&mut self, n: usize) -> Vec<T> {
        let key = self.kept.range((n, 0)..).next().map(|(k, _)| *k);
        match key.and_then(|k| self.kept.remove(&k)) {
            Some(v) => self.handed_out(v),
            None => Vec::with_capacity(n),
        }
    }

    fn handed_out(&mut self, v: Vec<T>) -> Vec<T> {
        self.held -= v.capacity();
        v
    }

    /// Keeps `v` (emptied) if it is worth it and there is room.
    pub fn give(&mut self, mut v: Vec<T>) {
        if v.capacity() < self.min_capacity {
            return;
        }
        if self.kept.len() >= POOL_MAX_KEPT {
            match self.kept.first_entry() {
                Some(smallest) if smallest.key().0 < v.capacity() => {
                    self.held -= smallest.remove().capacity();
                }
                _ => return,
            }
        }
        if self.held + v.capacity() <= self.max_entries {
            v.clear();
            self.held += v.capacity();
            self.arrivals += 1;
            self.kept.insert((v.capacity(), self.arrivals), v);
        }
    }
}

/// Vectors a pool keeps at most: the tables of the windows in flight (a few
/// windows × streams × message groups) fit; scanning them stays cheap.
const POOL_MAX_KEPT: usize = 1024;

/// Item vectors, shared by every thread: a window's fragments hold millions
/// of items and move between workers; they come back here when their window
/// is analyzed. At most 16 M items (640 MB).
static ITEM_POOL: std::sync::Mutex<Pool<Item>> = std::sync::Mutex::new(Pool::new(1024, 16 << 20));

/// Item vectors the pool holds now (for tests of the recycling).
pub fn kept_item_vectors() -> usize {
    ITEM_POOL.lock().map_or(0, |p| p.kept.len())
}

fn take_from<T>(pool: &std::sync::Mutex<Pool<T>>) -> Vec<T> {
    pool.lock().map(|mut p| p.take()).unwrap_or_default()
}

fn give_to<T>(pool: &std::sync::Mutex<Pool<T>>, v: Vec<T>) {
    if let Ok(mut p) = pool.lock() {
        p.give(v);
    }
}

/// An empty item vector, recycled if one is available.
pub fn take_items() -> Vec<Item> {
    take_from(&ITEM_POOL)
}

/// An item vector that holds `n`, the smallest recycled one that does.
pub fn take_items_for(n: usize) -> Vec<Item> {
    ITEM_POOL.lock().map_or_else(|_| Vec::with_capacity(n), |mut p| p.take_fit(n))
}

/// Returns an item vector for reuse.
pub fn give_items(v: Vec<Item>) {
    give_to(&ITEM_POOL, v)
}

/// Message tables, shared like the item vectors: at most 16 M entries
/// (256 MB) and 16 M read times (128 MB).
static ENTRY_POOL: std::sync::Mutex<Pool<MsgEntry>> = std::sync::Mutex::new(Pool::new(64, 16 << 20));
static READ_POOL: std::sync::Mutex<Pool<Ns>> = std::sync::Mutex::new(Pool::new(64, 16 << 20));

pub fn take_entries() -> Vec<MsgEntry> {
    take_from(&ENTRY_POOL)
}

pub fn give_entries(v: Vec<MsgEntry>) {
    give_to(&ENTRY_POOL, v)
}

pub fn take_reads() -> Vec<Ns> {
    take_from(&READ_POOL)
}

pub fn give_reads(v: Vec<Ns>) {
    give_to(&READ_POOL, v)
}

/// Ended streams as window owners track them: (host, process) → the
/// process's ended streams, and when a fragment of it last came.
#[derive(Default, Debug)]
pub struct EndedStreams(std::collections::BTreeMap<(u64, u32), EndedProcess>);

/// The ended streams of one process, as a window owner knows them.
#[derive(Default, Debug)]
pub struct EndedProcess {
    streams: Vec<EndedStream>,
    /// The timeline (host) its windows are on, and the latest of them a
    /// fragment of it came for.
    seen: (u64, u64),
}

/// (The first window it is absent from, its worker index, its last
/// sequence numbers.)
type EndedStream = (u64, u32, Vec<SeqMark>);

/// Windows (of its timeline) after which a process none of whose fragments
/// came is forgotten (`EndedStreams::prune`). A process with a stream still
/// open is seen in every window (a silent stream's windows are spelled out,
/// empty, up to 10,000 of them, see `Windower`), so only a process that is
/// gone (or whose open streams have been silent that long) goes; the marks
/// of its ended streams are older than `MARK_AGE` windows by then, of use
/// to no window.
pub const ENDED_PROCESS_AGE: u64 = 100;

impl EndedStreams {
    pub fn note(&mut self, s: Sid, absent_from: u64, marks: Vec<SeqMark>) {
        let v = &mut self.0.entry((s.host, s.process)).or_default().streams;
        // (One marker per route: a stream may be noted more than once.)
        if !v.iter().any(|&(a, w, _)| (a, w) == (absent_from, s.worker)) {
            v.push((absent_from, s.worker, marks));
        }
    }

    /// A fragment of `s`'s process came for `window` of `timeline` (the
    /// host whose windows its process's are on: its own, or the clock
    /// reference's).
    pub fn seen(&mut self, s: Sid, timeline: u64, window: u64) {
        if let Some(p) = self.0.get_mut(&(s.host, s.process)) {
            p.seen = if p.seen.0 == timeline { (timeline, p.seen.1.max(window)) } else { (timeline, window) };
        }
    }

    /// Forgets the processes of `timeline` not seen for
    /// [`ENDED_PROCESS_AGE`] of its windows before `window`: a sidecar that
    /// saw thousands of short jobs keeps nothing of them. (Per timeline:
    /// hosts' window indices are not comparable.)
    pub fn prune(&mut self, timeline: u64, window: u64) {
        self.0.retain(|_, p| p.seen.0 != timeline || p.seen.1.saturating_add(ENDED_PROCESS_AGE) >= window);
    }

    /// Processes with ended streams known.
    pub fn processes(&self) -> usize {
        self.0.len()
    }

    /// Sets `peers_ended` on the window's fragments (sorted, each worker
    /// once), and adds an end marker for each stream that ended before the
    /// window with messages sent in its last `MARK_AGE` windows (of
    /// `width`) on a host of the window: the marks of a sender with no
    /// fragment here (`Fragment::seq_before`). Marks too old for the window
    /// are dropped: an owner takes a host's windows in order, and memory
    /// stays bounded however many streams come and go.
    pub fn apply(&mut self, window: u64, width: Ns, frags: &mut Vec<Fragment>) {
        let mut hosts: Vec<u64> = frags.iter().filter(|f| !f.marker).filter_map(|f| f.stream.map(|s| s.host)).collect();
        hosts.sort_unstable();
        hosts.dedup();
        for f in frags.iter_mut() {
            if let Some(s) = f.stream {
                if let Some(v) = self.0.get(&(s.host, s.process)).map(|p| &p.streams) {
                    f.peers_ended.extend(v.iter().filter(|&&(a, ..)| a <= window).map(|&(_, w, _)| w));
                    f.peers_ended.sort_unstable();
                    f.peers_ended.dedup();
                }
            }
        }
        let horizon = mark_horizon(window, width);
        for (&(host, process), p) in self.0.iter_mut() {
            if hosts.binary_search(&host).is_err() {
                continue;
            }
            for (a, worker, marks) in p.streams.iter_mut().filter(|(a, ..)| *a <= window) {
                marks.retain(|m| m.at >= horizon);
                if marks.is_empty() {
                    *marks = Vec::new();
                    continue;
                }
                frags.push(Fragment {
                    stream: Some(Sid { host, process, worker: *worker }),
                    window: *a,
                    marker: true,
                    seq_before: marks.clone(),
                    ..Default::default()
                });
            }
        }
    }
}

/// Windows a group's last message counts in `Fragment::seq_before`: a
/// message left unread longer (in flight when its dataflow was dropped)
/// must not mark its reader buffered for the rest of the run; older groups
/// are dropped.
pub const MARK_AGE: u64 = 16;

/// The time before which marks are too old for window `k` (see `MARK_AGE`).
pub fn mark_horizon(k: u64, width: Ns) -> Ns {
    k.saturating_sub(MARK_AGE).saturating_mul(width)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is made of a stream's metadata once per version (its index by
    /// name, its size on the wire) is made again when a Metadata entry
    /// changes it, in place or in a copy of a shared version.
    #[test]
    fn a_new_version_of_the_metadata_is_indexed_and_sized_again() {
        let mut m = StreamMeta::default();
        m.operator(1, "Map".into(), vec![0, 1]);
        m.operator(2, "Map".into(), vec![0, 2]);
        assert_eq!(m.ops_named("Map"), &[1, 2]);
        let size = m.wire_bytes();
        assert_eq!(size, (4 + 3 + 4 + 8) * 2);
        let shared = Arc::new(m);
        let mut next = Arc::clone(&shared);
        let copy = Arc::make_mut(&mut next);
        copy.operator(2, "Reduce".into(), vec![0, 2]);
        copy.span(9, "s".into());
        assert_eq!(next.ops_named("Map"), &[1]);
        assert_eq!(next.ops_named("Reduce"), &[2]);
        assert_eq!(next.wire_bytes(), size + 3 + 8 + 1);
        next = Arc::new((*next).clone());
        Arc::make_mut(&mut next).channel((5, (1, 0), (2, 0)));
        assert_eq!(next.wire_bytes(), size + 3 + 8 + 1 + std::mem::size_of::<ChannelMeta>() as u64);
        assert_eq!((shared.ops_named("Map"), shared.wire_bytes()), (&[1, 2][..], size), "the old version as it was");
    }

    #[test]
    fn ended_streams_are_named_per_process_from_their_first_absent_window() {
        let sid = |process, worker| Sid { host: 1, process, worker };
        let mut e = EndedStreams::default();
        e.note(sid(7, 2), 3, vec![]);
        e.note(sid(7, 0), 5, vec![]);
        e.note(sid(7, 2), 3, vec![]); // noted twice (a marker per route): one stream
        e.note(sid(8, 1), 1, vec![]);
        let frag = |s| Fragment { stream: Some(s), ..Default::default() };
        let mut frags = vec![frag(sid(7, 1)), frag(sid(8, 0))];
        e.apply(2, 10, &mut frags);
        assert_eq!((frags[0].peers_ended.clone(), frags[1].peers_ended.clone()), (vec![], vec![1]));
        e.apply(5, 10, &mut frags);
        assert_eq!(frags[0].peers_ended, vec![0, 2]);
        assert_eq!(frags.len(), 2, "no marks: no marker");
    }

    /// A process whose streams all ended is forgotten once nothing of it
    /// came for `ENDED_PROCESS_AGE` windows; one still sending fragments is
    /// kept.
    #[test]
    fn ended_processes_are_forgotten_once_gone_for_long() {
        assert!(ENDED_PROCESS_AGE > MARK_AGE, "marks are of no use by then");
        let sid = |host, process, worker| Sid { host, process, worker };
        let mark = SeqMark { half: Half::Send, channel: 5, other: 1, seq: 4, at: 250 };
        let mut e = EndedStreams::default();
        e.note(sid(1, 10, 0), 3, vec![mark]);
        e.seen(sid(1, 10, 0), 1, 3);
        e.note(sid(1, 11, 0), 3, vec![]);
        e.seen(sid(1, 11, 1), 1, 3);
        // Process 11 has a stream still open: its fragments keep coming.
        e.seen(sid(1, 11, 1), 1, 90);
        e.seen(sid(1, 12, 0), 1, 90); // (no stream of it ended: nothing kept)
                                      // Host 2's windows are numbered on its own clock.
        e.note(sid(2, 10, 0), 7, vec![]);
        e.seen(sid(2, 10, 0), 2, 7);
        e.prune(1, 3 + ENDED_PROCESS_AGE);
        assert_eq!(e.processes(), 3, "not yet");
        e.prune(1, 4 + ENDED_PROCESS_AGE);
        assert_eq!(e.0.keys().copied().collect::<Vec<_>>(), vec![(1, 11), (2, 10)], "process 10 of host 1 forgotten");
        e.prune(1, 91 + ENDED_PROCESS_AGE);
        assert_eq!(e.0.keys().copied().collect::<Vec<_>>(), vec![(2, 10)], "host 1's windows do not age host 2's");
        e.prune(2, 8 + ENDED_PROCESS_AGE);
        assert_eq!(e.processes(), 0);
    }

    #[test]
    fn an_ended_stream_brings_its_recent_marks_to_windows_of_its_host() {
        let sid = |host, worker| Sid { host, process: 7, worker };
        let mark = |seq, at| SeqMark { half: Half::Send, channel: 5, other: 1, seq, at };
        let mut e = EndedStreams::default();
        e.note(sid(1, 0), 3, vec![mark(4, 250), mark(9, 290)]);
        e.note(sid(1, 0), 3, vec![mark(4, 250), mark(9, 290)]);
        let frag = |s| Fragment { stream: Some(s), ..Default::default() };
        let markers = |e: &mut EndedStreams, window, host| {
            let mut frags = vec![frag(sid(host, 1))];
            e.apply(window, 10, &mut frags);
            frags.into_iter().filter(|f| f.marker).map(|f| (f.window, f.seq_before)).collect::<Vec<_>>()
        };
        assert_eq!(markers(&mut e, 2, 1), vec![], "before it ended: its own fragments carry them");
        assert_eq!(markers(&mut e, 3, 1), vec![(3, vec![mark(4, 250), mark(9, 290)])], "once");
        assert_eq!(markers(&mut e, 50, 2), vec![], "another host's window");
        assert_eq!(markers(&mut e, 41, 1), vec![(3, vec![mark(4, 250), mark(9, 290)])], "not pruned by host 2");
        assert_eq!(markers(&mut e, 42, 1), vec![(3, vec![mark(9, 290)])], "window 26 starts at 260");
        assert_eq!(markers(&mut e, 45, 1), vec![(3, vec![mark(9, 290)])]);
        assert_eq!(markers(&mut e, 46, 1), vec![], "all older than MARK_AGE windows");
        assert!(e.0.values().flat_map(|p| &p.streams).all(|(.., m)| m.capacity() == 0), "and dropped");
    }

    #[test]
    fn a_pool_keeps_its_roomiest_vectors_up_to_its_count() {
        let mut p: Pool<u8> = Pool::new(4, usize::MAX);
        p.give(Vec::with_capacity(3)); // too small to keep
        assert!(p.kept.is_empty());
        for cap in 4..4 + POOL_MAX_KEPT + 100 {
            p.give(Vec::with_capacity(cap));
        }
        assert_eq!(p.kept.len(), POOL_MAX_KEPT);
        let least = p.kept.values().map(|v| v.capacity()).min().unwrap();
        assert_eq!(p.held, p.kept.values().map(|v| v.capacity()).sum::<usize>(), "the total follows");
        assert!(least >= 104, "the smallest made way: {least}");
        assert!(p.take().capacity() >= 4 + POOL_MAX_KEPT + 99, "the roomiest is handed out first");
        let fit = p.take_fit(500);
        assert_eq!(fit.capacity(), 500, "the smallest that holds 500");
        assert!(p.take_fit(1 << 20).capacity() >= 1 << 20, "none holds it: a new one");
        assert_eq!(p.held, p.kept.values().map(|v| v.capacity()).sum::<usize>(), "and after taking");
    }

    #[test]
    fn a_pool_keeps_no_more_than_its_entries_and_equal_capacities_apart() {
        let mut p: Pool<u8> = Pool::new(4, 100);
        for _ in 0..3 {
            p.give(Vec::with_capacity(30));
        }
        assert_eq!(p.kept.len(), 3, "three of the same capacity, all kept");
        p.give(Vec::with_capacity(30));
        assert_eq!((p.kept.len(), p.held), (3, 90), "a fourth would pass 100 entries");
        let v = p.take_fit(10);
        assert_eq!((v.capacity(), p.held), (30, 60));
        p.give(v);
        assert_eq!(p.held, 90, "given back");
    }

    #[test]
    fn appended_tables_keep_their_reads_slots() {
        let (mut a, mut b) = (Messages::default(), Messages::default());
        let g = a.group(Half::PRecv, 0, 3);
        a.push(g, 7, 10);
        let g = b.group(Half::Recv, 2, 1);
        b.push(g, 0, 20);
        let g = b.group(Half::Send, 2, 1);
        b.push(g, 5, 25);
        let g = b.group(Half::PRecv, 0, 3);
        b.push(g, 8, 30);
        a.append(b);
        assert_eq!(a.reads, vec![10, 20, 30], "only reads keep a time in `reads`");
        // Every read's slot names its own time; a send keeps its own.
        let times: Vec<(u64, Ns)> = a.iter().map(|(_, _, _, seq, t)| (seq, t)).collect();
        assert_eq!(times, vec![(7, 10), (0, 20), (5, 25), (8, 30)]);
        assert_eq!(a.len(), 4);
        assert_eq!(a.groups.len(), 4, "a group seen in both stays two tables (joined by the analysis)");
    }
}
