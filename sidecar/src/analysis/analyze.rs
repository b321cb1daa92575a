//! One window, start to finish, on the worker that owns it: the fragments of
//! every stream of one host → matched messages → waits → window graph →
//! critical path, participation, properties → the report. No I/O.

use rustc_hash::FxHashMap;

/// Dense indices (0, 1, 2, … in order of first sight) of ids that are
/// usually small integers (channels, worker indices): a direct table for
/// small ids, a hash map beyond.
#[derive(Default)]
struct DenseIds {
    small: Vec<u32>,
    big: FxHashMap<u32, u32>,
    n: u32,
}

impl DenseIds {
    const SMALL: u32 = 1 << 12;

    #[inline]
    fn id(&mut self, v: u32) -> u32 {
        if v < Self::SMALL {
            if let Some(&d) = self.small.get(v as usize) {
                if d != u32::MAX {
                    return d;
                }
            } else {
                self.small.resize(v as usize + 1, u32::MAX);
            }
            self.small[v as usize] = self.n;
        } else {
            if let Some(&d) = self.big.get(&v) {
                return d;
            }
            self.big.insert(v, self.n);
        }
        self.n += 1;
        self.n - 1
    }

    /// The dense index of `v`, if it has one.
    fn find(&self, v: u32) -> Option<u32> {
        let d = if v < Self::SMALL { self.small.get(v as usize).copied() } else { self.big.get(&v).copied() };
        d.filter(|&d| d != u32::MAX)
    }
}

/// Group numbers by a key of three dense indices: a flat table while the
/// key space is small (workers² × channels usually is), a hash map beyond.
#[derive(Default)]
struct GroupIndex {
    dims: [u32; 3],
    table: Vec<u32>,
    keys: Vec<[u32; 3]>,
    map: Option<FxHashMap<[u32; 3], u32>>,
}

impl GroupIndex {
    const MAX_TABLE: usize = 1 << 22;

    #[inline]
    fn slot(&self, k: [u32; 3]) -> Option<usize> {
        let d = self.dims;
        (k[0] < d[0] && k[1] < d[1] && k[2] < d[2])
            .then(|| (k[0] as usize * d[1] as usize + k[1] as usize) * d[2] as usize + k[2] as usize)
    }

    /// The group of `k`; a new one is numbered `next` (the caller's count).
    #[inline(always)]
    fn get(&mut self, k: [u32; 3], next: usize) -> usize {
        if self.map.is_none() {
            if let Some(s) = self.slot(k) {
                let g = self.table[s];
                if g != u32::MAX {
                    return g as usize;
                }
            }
        }
        self.get_new(k, next)
    }

    #[inline(never)]
    fn get_new(&mut self, k: [u32; 3], next: usize) -> usize {
        if let Some(m) = &mut self.map {
            return *m.entry(k).or_insert(next as u32) as usize;
        }
        let s = match self.slot(k) {
            Some(s) => s,
            None => {
                self.grow(k);
                if let Some(m) = &mut self.map {
                    return *m.entry(k).or_insert(next as u32) as usize;
                }
                self.slot(k).unwrap()
            }
        };
        let g = self.table[s];
        if g != u32::MAX {
            return g as usize;
        }
        self.table[s] = next as u32;
        self.keys.push(k);
        next
    }

    fn find(&self, k: [u32; 3]) -> Option<usize> {
        match &self.map {
            Some(m) => m.get(&k).map(|&g| g as usize),
            None => self.slot(k).map(|s| self.table[s]).filter(|&g| g != u32::MAX).map(|g| g as usize),
        }
    }

    #[cold]
    fn grow(&mut self, k: [u32; 3]) {
        let mut d = self.dims;
        for (x, &v) in d.iter_mut().zip(&k) {
            while *x <= v && *x < u32::MAX {
                *x = x.saturating_mul(2).max(4);
            }
        }
        let size = d.iter().map(|&x| x as usize).product::<usize>();
        if size > Self::MAX_TABLE {
            let m = self.keys.iter().map(|&k| (k, self.find(k).unwrap() as u32)).collect();
            self.map = Some(m);
            return;
        }
        let old: Vec<([u32; 3], u32)> = self.keys.iter().map(|&k| (k, self.find(k).unwrap() as u32)).collect();
        self.dims = d;
        self.table.clear();
        self.table.resize(size, u32::MAX);
        for (k, g) in old {
            let s = self.slot(k).unwrap();
            self.table[s] = g;
        }
    }
}

/// (worker, activity category, id) of a participation sum.
type AggKey = (u32, u8, Option<u64>);

/// Participation sums in order of first appearance. Operators with small
/// ids, Waiting-for-Input and Unknown of a worker have a direct slot; the
/// rest go through a map.
struct PartSums {
    sums: Vec<(AggKey, f64)>,
    direct: Vec<u32>,
    index: FxHashMap<AggKey, u32>,
}

impl PartSums {
    const OPS: u64 = 1024;
    const PER_WORKER: usize = Self::OPS as usize + 4;

    fn new(workers: usize) -> Self {
        let size = if workers <= 256 { workers * Self::PER_WORKER } else { 0 };
        PartSums { sums: Vec::new(), direct: vec![u32::MAX; size], index: FxHashMap::default() }
    }

    #[inline(always)]
    fn add(&mut self, key: AggKey, sc: f64) {
        let slot = match key {
            (w, 0, Some(op)) if op < Self::OPS => Some(w as usize * Self::PER_WORKER + op as usize),
            (w, c @ (2 | 3), None) => Some(w as usize * Self::PER_WORKER + Self::OPS as usize + c as usize),
            _ => None,
        }
        .filter(|&s| s < self.direct.len());
        let i = match slot {
            Some(s) => {
                if self.direct[s] == u32::MAX {
                    self.direct[s] = self.sums.len() as u32;
                    self.sums.push((key, 0.0));
                }
                self.direct[s] as usize
            }
            None => {
                let n = self.sums.len() as u32;
                let i = *self.index.entry(key).or_insert(n) as usize;
                if i == self.sums.len() {
                    self.sums.push((key, 0.0));
                }
                i
            }
        };
        self.sums[i].1 += sc;
    }
}

/// Whether a table sorted by (sequence number, ...) already is: sequence
/// numbers nearly always increase strictly, which decides it; otherwise the
/// whole entries are compared.
fn sorted_by_seq<T: Ord>(v: &[T], seq: impl Fn(&T) -> u64) -> bool {
    v.windows(2).all(|p| seq(&p[0]) < seq(&p[1])) || v.is_sorted()
}

struct DataGroup {
    key: (u32, u32, u32),
    si: Option<usize>,
    /// (seq, sent)
    sends: Vec<MsgEntry>,
    ri: Option<usize>,
    /// (seq, slot in the reader's inbox, which holds the read time)
    reads: Vec<MsgEntry>,
}

impl DataGroup {
    fn new(key: (u32, u32, u32)) -> Self {
        DataGroup { key, si: None, sends: Vec::new(), ri: None, reads: Vec::new() }
    }
}

/// Progress sent on a channel by a worker: (channel, from worker, sender
/// local, (seq, sent)).
type ProgressSends = (u32, u32, usize, Vec<MsgEntry>);

/// Adds a stream's table to a window group's (nearly always the only one:
/// taken over whole).
fn join(to: &mut Vec<MsgEntry>, from: Vec<MsgEntry>) {
    if to.is_empty() {
        *to = from;
    } else {
        to.extend_from_slice(&from);
        give_entries(from);
    }
}

/// A fragment's items as the window's intervals (the items overlapping it:
/// all of them, but for a defensive check), and whether they are in order.
fn window_intervals(items: Vec<Item>, ws: Ns, we: Ns) -> (Vec<Item>, bool) {
    let inside = |it: &Item| it.end() > ws && it.start() < we;
    let items = if items.iter().all(inside) {
        items
    } else {
        let mut v = take_items();
        v.extend(items.iter().filter(|it| inside(it)));
        give_items(items);
        v
    };
    let sorted = items.windows(2).all(|p| (p[0].start(), p[0].end()) <= (p[1].start(), p[1].end()));
    (items, sorted)
}

/// Drops the message halves outside the window (times moved by clock
/// sync's causality clamps), renumbering the reads' slots.
fn in_window(m: &mut Messages, ws: Ns, we: Ns) {
    let inside = |t: Ns| t >= ws && t < we;
    let mut slot = vec![u32::MAX; m.reads.len()];
    let mut kept = 0;
    for (k, &t) in m.reads.iter().enumerate() {
        if inside(t) {
            slot[k] = kept;
            kept += 1;
        }
    }
    for g in &mut m.groups {
        if g.half.is_read() {
            g.entries.retain(|e| slot[e.at as usize] != u32::MAX);
            g.entries.iter_mut().for_each(|e| e.at = slot[e.at as usize] as u64);
        } else {
            g.entries.retain(|e| inside(e.at));
        }
    }
    m.reads.retain(|&t| inside(t));
    m.moved = false;
}

struct ProgressReads {
    channel: u32,
    from: u32,
    j: usize,
    key: (u32, u32),
    reads: Vec<MsgEntry>,
    max_seq: u64,
}

use crate::analysis::graph::{self, EKind, GraphBuilder, PathEdge};
use crate::analysis::model::{
    give_entries, give_items, take_items, Busy, Counters, Fragment, GapEnd, Half, Item, Messages, MsgEntry, MsgGroup,
    MsgKind, Ns, SeqMark, Sid,
};
use crate::analysis::properties;
use crate::analysis::report::*;
use crate::analysis::waits::{Arrival, ArrivalRuns, Inbox, WaitFinder, WaitKind, WaitOn};

const TOP: usize = 10;

fn kind_name(k: MsgKind) -> &'static str {
    match k {
        MsgKind::Data => "data_message",
        MsgKind::Progress => "progress_message",
    }
}

/// What a timeline export (Perfetto) needs of one window, beyond the report:
/// every worker's activities and waits, the messages between workers, and
/// the critical path piece by piece. Built only when asked for
/// ([`analyze_detail`]); the default path does not pay for it.
#[derive(Clone, Debug, Default)]
pub struct WindowDetail {
    pub host: u64,
    pub window: u64,
    /// Window bounds, ns.
    pub span: (Ns, Ns),
    /// The window's streams; `stream` fields below index this.
    pub streams: Vec<Sid>,
    pub programs: Vec<String>,
    /// Per stream: operator names and span names known so far.
    pub op_names: Vec<FxHashMap<u32, String>>,
    pub span_names: Vec<FxHashMap<u64, String>>,
    /// Per stream: its instrumentation counters in this window.
    pub counters: Vec<crate::analysis::model::Counters>,
    /// Operator executions, spans, waits (clipped to the window).
    pub activities: Vec<Activity>,
    /// Data messages matched between two workers of the window, and the
    /// progress messages that ended a wait.
    pub messages: Vec<Message>,
    /// The critical path, from the window's end backwards.
    pub critical: Vec<CriticalPiece>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivityKind {
    Operator(u32),
    Span(u64),
    /// Waiting, ended by a message from `on` (a global worker index; None:
    /// nothing visible) on `channel`.
    Waiting {
        on: Option<u32>,
        channel: Option<u32>,
        kind: &'static str,
    },
    WaitingForInput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activity {
    pub stream: u32,
    pub start: Ns,
    pub end: Ns,
    pub what: ActivityKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    pub sent: Ns,
    pub read: Ns,
    pub channel: u32,
    pub kind: MsgKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CriticalKind {
    Operator(u32),
    Span(u64),
    WaitingForInput,
    Unknown,
    /// A message that ended a wait: from stream `from` (at `start`) to this
    /// piece's stream (at `end`).
    Message {
        from: u32,
        channel: u32,
        kind: MsgKind,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CriticalPiece {
    pub stream: u32,
    pub start: Ns,
    pub end: Ns,
    pub what: CriticalKind,
}

/// Analyzes window `index` (of width `width` ns) of host `host` from the
/// fragments its streams sent.
pub fn analyze(host: u64, index: u64, width: Ns, frags: Vec<Fragment>) -> WindowReport {
    analyze_detail(host, index, width, frags, None)
}

/// [`analyze`], also filling `detail` (for timeline exports) when given.
pub fn analyze_detail(
    host: u64,
    index: u64,
    width: Ns,
    mut frags: Vec<Fragment>,
    mut detail: Option<&mut WindowDetail>,
) -> WindowReport {
    let (ws, we) = (index.saturating_mul(width), index.saturating_add(1).saturating_mul(width));
    let mut rep =
        WindowReport { host: format!("{host:016x}"), window: index, start_ns: ws, end_ns: we, ..Default::default() };
    // Streams known to have ended before this window, per process: their
    // worker indices (a marker names its own stream), sorted. Then the
    // markers are dropped: they carry no data.
    let mut ended_of: FxHashMap<(u64, u32), Vec<u32>> = FxHashMap::default();
    for f in &frags {
        if let Some(s) = f.stream {
            let e = ended_of.entry((s.host, s.process)).or_default();
            e.extend_from_slice(&f.peers_ended);
            if f.marker && f.window <= index {
                e.push(s.worker);
            }
        }
    }
    for e in ended_of.values_mut() {
        e.sort_unstable();
        e.dedup();
    }
    // The last sequence numbers of senders that ended before this window
    // (their markers carry them): their messages may lie unread in a
    // reader's buffer all through it (see `Fragment::seq_before`).
    let horizon = crate::analysis::model::mark_horizon(index, width);
    let mut ended_marks: Vec<(Sid, Vec<SeqMark>)> = Vec::new();
    for f in frags.iter_mut().filter(|f| f.marker && f.window <= index) {
        if let Some(s) = f.stream {
            let mut marks = std::mem::take(&mut f.seq_before);
            marks.retain(|m| m.at >= horizon);
            if !marks.is_empty() && !ended_marks.iter().any(|(e, _)| *e == s) {
                ended_marks.push((s, marks));
            }
        }
    }
    frags.retain(|f| !f.marker);
    // One fragment per stream (merge duplicates defensively).
    frags.sort_by_key(|f| f.stream);
    let mut merged: Vec<Fragment> = Vec::with_capacity(frags.len());
    for f in frags {
        match merged.last_mut() {
            Some(m) if m.stream == f.stream => {
                m.items.extend(f.items);
                m.msgs.append(f.msgs);
                m.counters.add(&f.counters);
                m.faults.extend(f.faults);
                m.covered = (m.covered.0.min(f.covered.0), m.covered.1.max(f.covered.1));
                m.ended |= f.ended;
            }
            _ => merged.push(f),
        }
    }
    let mut frags = merged;
    let n = frags.len();
    let sids: Vec<Sid> = frags.iter().map(|f| f.stream.unwrap_or(Sid { host, process: 0, worker: 0 })).collect();
    // (A corrupt clock sample can put it past what an i64 holds: unknown.)
    rep.start_unix_ns =
        frags.iter().find_map(|f| f.realtime_offset).and_then(|o| i64::try_from(ws as i128 + o as i128).ok());
    if let Some(d) = detail.as_deref_mut() {
        *d = WindowDetail { host, window: index, span: (ws, we), streams: sids.clone(), ..Default::default() };
        for f in &frags {
            d.programs.push(f.program.clone());
            d.op_names.push(f.ops.iter().cloned().collect());
            d.span_names.push(f.spans.iter().cloned().collect());
            d.counters.push(f.counters);
        }
    }

    // Process ids are per host (every host of a containerized cluster may
    // run its engine as process 1): the window's processes are keyed by
    // (host, id), `pk` per stream, `proc_keys` naming them. Streams are
    // found by (process key, worker), by worker and by process (`resolve`).
    let mut proc_keys: Vec<(u64, u32)> = sids.iter().map(|s| (s.host, s.process)).collect();
    proc_keys.sort_unstable();
    proc_keys.dedup();
    let key_of = |s: Sid| proc_keys.binary_search(&(s.host, s.process)).map_or(u32::MAX, |k| k as u32);
    let pk: Vec<u32> = sids.iter().map(|&s| key_of(s)).collect();
    let mut by_pw: FxHashMap<(u32, u32), usize> = FxHashMap::default();
    let mut by_w: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    let mut procs: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    for (i, s) in sids.iter().enumerate() {
        by_pw.insert((pk[i], s.worker), i);
        by_w.entry(s.worker).or_default().push(i);
        procs.entry(pk[i]).or_default().push(i);
    }

    // ---- completeness and instrumentation ----
    let mut reasons: Vec<String> = Vec::new();
    let mut sum = Counters::default();
    for (i, f) in frags.iter().enumerate() {
        let c = &f.counters;
        sum.add(c);
        for why in &f.faults {
            reasons.push(format!("worker {}: {}", sids[i].worker, why));
        }
        if c.lost > 0 && !f.faults.iter().any(|x| x.contains("lost")) {
            reasons.push(format!("worker {}: {} records lost", sids[i].worker, c.lost));
        }
        rep.streams.push(StreamInfo {
            host: format!("{:016x}", sids[i].host),
            process: sids[i].process,
            worker: sids[i].worker,
            program: f.program.clone(),
            covered_ns: [f.covered.0, f.covered.1],
            records: c.records,
            faults: f.faults.clone(),
        });
    }
    rep.events = sum.records;
    rep.lost_records = sum.lost;
    rep.instrumentation = Instrumentation::from(&sum);
    // Streams the process said it runs (workers=N in its Hello) that are
    // not present in this window. A stream is present in a window when it
    // sent a fragment for it: from its first record to its End the stream's
    // windower hands over one for every window its timeline overlaps (an
    // idle stretch included), so a stream that starts later than the others
    // inside the window, or ends before the window's end, is present in it.
    // Absent with good reason only: the stream ended (End frame, or cut off,
    // which faults its own last window) before this window. Any other
    // absence makes the window incomplete, naming the workers: a stream
    // that never appeared (in every window of the process), one whose data
    // did not arrive in time (live), and one whose first record is in
    // a later window (a thread starting after the window: while the window
    // is analyzed that cannot be told from a missing stream, and the window
    // lacks that worker either way). Timely numbers workers globally, each
    // process a contiguous block of its worker count: the block's base is
    // found from the lowest worker present.
    let mut expected_of: FxHashMap<u32, u32> = FxHashMap::default();
    let mut base_of: FxHashMap<u32, u32> = FxHashMap::default();
    let mut missing_of: FxHashMap<u32, usize> = FxHashMap::default();
    // (In (host, id) order: the reasons' order does not depend on a map's.)
    for (p, members) in (0..proc_keys.len() as u32).map(|p| (p, &procs[&p])) {
        let expected = members.iter().map(|&i| frags[i].workers_expected).max().unwrap_or(0);
        expected_of.insert(p, expected);
        let e = expected.max(1);
        let lo = members.iter().map(|&i| sids[i].worker).min().unwrap_or(0);
        let base = lo / e * e;
        base_of.insert(p, base);
        if expected == 0 {
            continue; // no Hello seen: nothing to hold the streams against
        }
        let mut here: Vec<u32> = members.iter().map(|&i| sids[i].worker).collect();
        here.sort_unstable();
        here.dedup();
        let ended = ended_of.get(&proc_keys[p as usize]).map_or(&[][..], |v| v.as_slice());
        let gone = ended.iter().filter(|w| here.binary_search(w).is_err()).count();
        let alive = (expected as usize).saturating_sub(gone);
        let missing = alive.saturating_sub(here.len());
        missing_of.insert(p, missing);
        if missing > 0 {
            // The absent workers of the process's block, the first few by
            // name: the block's size comes from the Hello, and a bogus one
            // (billions of workers) must not be spelled out every window.
            const NAMED: usize = 16;
            let hi = base.saturating_add(expected);
            let absent_of = |w: &u32| here.binary_search(w).is_err() && ended.binary_search(w).is_err();
            let absent: Vec<String> = (base..hi).filter(absent_of).take(NAMED).map(|w| w.to_string()).collect();
            let in_block = |w: &&u32| (base..hi).contains(*w);
            let accounted = here.iter().filter(in_block).count()
                + ended.iter().filter(in_block).filter(|w| here.binary_search(w).is_err()).count();
            let more = ((hi - base) as usize).saturating_sub(accounted).saturating_sub(absent.len());
            let who = match (absent.len(), more) {
                (0, _) => String::new(),
                (1, 0) => format!("worker {}: ", absent[0]),
                (_, 0) => format!("workers {}: ", absent.join(", ")),
                _ => format!("workers {} and {more} more: ", absent.join(", ")),
            };
            let (host_p, pid) = proc_keys[p as usize];
            let on =
                if proc_keys.iter().any(|k| k.0 != host_p) { format!(" on host {host_p:016x}") } else { String::new() };
            reasons.push(format!(
                "process {pid}{on}: {} of {alive} worker streams present ({who}no stream in this window: missing, or not started yet)",
                here.len()
            ));
        }
    }
    // Processes in order (the keys of `procs`), and whether two are
    // processes of one timely cluster: each announced its worker count
    // (Hello) and their blocks of global worker indices do not overlap.
    let peer_procs = 0..proc_keys.len() as u32;
    // (None for a process without a stream here: its block is unknown.)
    let block = |p: u32| {
        let e = *expected_of.get(&p)?;
        (e > 0).then(|| (base_of[&p], base_of[&p].saturating_add(e)))
    };
    let peers =
        |p: u32, q: u32| p != q && matches!((block(p), block(q)), (Some(a), Some(b)) if a.1 <= b.0 || b.1 <= a.0);
    // Worker index → local index, from `process`: its own stream, else the
    // stream of a cluster peer's worker (timely worker indices are global
    // across a cluster's processes). Not another program's: independent
    // programs on one host number their workers alike.
    let resolve = |process: u32, worker: u32| {
        by_pw
            .get(&(process, worker))
            .copied()
            .or_else(|| by_w.get(&worker)?.iter().copied().find(|&i| peers(process, pk[i])))
    };
    // A worker of this process without a stream here: its messages are not
    // "another timeline" (counted in flight or from before, in a window
    // marked incomplete above unless its stream ended).
    let own_worker = |i: usize, w: u32| {
        let p = pk[i];
        let (e, b) = (expected_of[&p], base_of[&p]);
        e > 0 && w >= b && w < b.saturating_add(e)
    };

    // ---- messages ----
    // Matching by grouping: within one (channel, sender, receiver) the
    // sequence numbers are sent and read in order, so each group is a merge
    // of two sorted lists. Each stream brings its tables already grouped
    // (built at ingest); they join the window's groups through dense indices
    // of the channels and workers seen, and every read has a slot in its
    // receiver's inbox, in the receiver's timeline order, that the matching
    // fills with its arrival.
    let mut inbox: Vec<Inbox> = (0..n).map(|_| Inbox::default()).collect();
    let mut arrivals: Vec<ArrivalRuns> = vec![ArrivalRuns::default(); n];
    let mc = &mut rep.messages;
    let mut chan_ids = DenseIds::default();
    let mut worker_ids = DenseIds::default();
    // A message's other end, as a group key names it: the stream that
    // worker index resolves to from `process` (its local index), else (no
    // stream here) past the streams, by worker index. Keys name streams,
    // not worker indices: processes on one host may share worker indices
    // (independent programs, each with its worker 0), and a group must hold
    // the halves of one sending and one reading stream, whose tables'
    // slots it indexes.
    let side = |ids: &mut DenseIds, process: u32, worker: u32| -> u32 {
        resolve(process, worker).map_or_else(|| n as u32 + ids.id(worker), |i| i as u32)
    };
    // data: (channel, sender, receiver)
    let mut data_ix = GroupIndex::default();
    let mut data: Vec<DataGroup> = Vec::new();
    // progress sends: (channel, sender local) → (sender local, sends)
    let mut pg_ix = GroupIndex::default();
    let mut pg: Vec<ProgressSends> = Vec::new();
    // progress reads: (channel, sender, reader local) → reads
    let mut pr_ix = GroupIndex::default();
    let mut pr: Vec<ProgressReads> = Vec::new();
    // Per stream: its intervals in the window (the fragment's items), and
    // whether they are in order.
    let mut intervals_of: Vec<(Vec<Item>, bool)> = Vec::with_capacity(n);
    for (i, f) in frags.iter_mut().enumerate() {
        intervals_of.push(window_intervals(std::mem::take(&mut f.items), ws, we));
        let me = sids[i].worker;
        let proc_i = pk[i];
        // The stream's message tables, grouped at ingest: each joins the
        // window's group of its (channel, sender, receiver).
        let mut m = std::mem::take(&mut f.msgs);
        if m.moved {
            in_window(&mut m, ws, we);
        }
        let ib = &mut inbox[i];
        ib.reads = m.reads;
        ib.arrived.resize(ib.reads.len(), ws);
        for MsgGroup { half, channel, other, entries } in m.groups {
            match half {
                Half::Send | Half::Recv => {
                    let (from, to) = if half == Half::Send { (me, other) } else { (other, me) };
                    let key = if half == Half::Send {
                        [chan_ids.id(channel), i as u32, side(&mut worker_ids, proc_i, to)]
                    } else {
                        [chan_ids.id(channel), side(&mut worker_ids, proc_i, from), i as u32]
                    };
                    let g = data_ix.get(key, data.len());
                    if g == data.len() {
                        data.push(DataGroup::new((channel, from, to)));
                    }
                    let d = &mut data[g];
                    if half == Half::Send {
                        d.si = Some(i);
                        join(&mut d.sends, entries);
                    } else {
                        d.ri = Some(i);
                        join(&mut d.reads, entries);
                    }
                }
                Half::PSend => {
                    mc.progress_sent += entries.len() as u64;
                    let g = pg_ix.get([chan_ids.id(channel), i as u32, 0], pg.len());
                    if g == pg.len() {
                        pg.push((channel, me, i, Vec::new()));
                    }
                    join(&mut pg[g].3, entries);
                }
                Half::PRecv => {
                    mc.progress_received += entries.len() as u64;
                    let (cd, fd) = (chan_ids.id(channel), side(&mut worker_ids, proc_i, other));
                    let g = pr_ix.get([cd, fd, i as u32], pr.len());
                    if g == pr.len() {
                        pr.push(ProgressReads {
                            channel,
                            from: other,
                            j: i,
                            key: (cd, fd),
                            reads: Vec::new(),
                            max_seq: 0,
                        });
                    }
                    join(&mut pr[g].reads, entries);
                }
            }
        }
    }
    let psends: usize = pg.iter().map(|g| g.3.len()).sum();
    for (a, b) in arrivals.iter_mut().zip(&inbox) {
        a.list.reserve(b.reads.len() + psends);
    }
    // Messages buffered all through the window: sent before it and not
    // read by its end, so neither half is here, yet the reader was not
    // waiting (Sager §5.1 condition 2; Def. 3.5 projects such an edge onto
    // the whole window). Seen from the last sequence numbers before the
    // window (`Fragment::seq_before`): the sender's past everything the
    // reader read by the window's end (a group's sequence numbers are sent
    // and read in order: its last read is its highest). Only where the
    // reader's record is whole since the send (`Fragment::clean_since`): a
    // read lost, late, or made before its stream began would otherwise
    // leave it "buffered" window after window.
    let seq_before = |j: usize, half: Half, channel: u32, other: u32| {
        let marks = &frags[j].seq_before;
        marks.binary_search_by_key(&(half, channel, other), |m| (m.half, m.channel, m.other)).ok().map(|k| marks[k].seq)
    };
    // Every sender's marks: each stream's here, then those of the streams
    // that ended before the window and have none here (their end markers'),
    // with the sender's side in the readers' group keys (as `side` gave it;
    // None: the reader read nothing of it here).
    ended_marks.retain(|(s, _)| !sids.contains(s));
    let senders: Vec<(Option<usize>, Sid, &[SeqMark])> = (0..n)
        .map(|i| (Some(i), sids[i], &frags[i].seq_before[..]))
        .chain(ended_marks.iter().map(|(s, m)| (None, *s, &m[..])))
        .collect();
    let sender_side = |i: Option<usize>, reader: usize, worker: u32| match i {
        Some(i) => Some(i as u32),
        None => resolve(pk[reader], worker).map(|x| x as u32).or_else(|| worker_ids.find(worker).map(|d| n as u32 + d)),
    };
    for &(i, sender, marks) in &senders {
        for m in marks.iter().filter(|m| m.half == Half::Send) {
            let Some(j) = resolve(key_of(sender), m.other) else { continue };
            if m.at < frags[j].clean_since {
                continue;
            }
            let read_before = seq_before(j, Half::Recv, m.channel, sender.worker);
            let read_here = chan_ids
                .find(m.channel)
                .zip(sender_side(i, j, sender.worker))
                .and_then(|(c, s)| data_ix.find([c, s, j as u32]))
                .and_then(|g| data[g].reads.last().map(|r| r.seq));
            if read_before.max(read_here).is_none_or(|r| m.seq > r) {
                inbox[j].push(ws, Ns::MAX);
            }
        }
    }
    // Group order decides only the order of `detail.messages`: by key
    // (then by stream, for processes that share worker indices).
    data.sort_unstable_by_key(|g| (g.key, g.si, g.ri));
    for DataGroup { key: (channel, from, to), si, mut sends, ri, mut reads } in data {
        if !sorted_by_seq(&sends, |s| s.seq) {
            sends.sort();
        }
        // (By seq, then slot: the stream's order, in which read times never
        // decrease.)
        if !sorted_by_seq(&reads, |r| r.seq) {
            reads.sort();
        }
        // The worker each side is on (the reader may be absent: another host).
        let src = si.or_else(|| ri.and_then(|j| resolve(pk[j], from)));
        let dst = ri.or_else(|| si.and_then(|i| resolve(pk[i], to)));
        if let Some(j) = dst {
            arrivals[j].start_run();
        }
        let (mut a, mut b) = (0, 0);
        while a < sends.len() || b < reads.len() {
            let s = sends.get(a).copied();
            let r = reads.get(b).copied();
            match (s, r) {
                (Some(s), Some(r)) if s.seq == r.seq => {
                    let (i, j) = (si.unwrap(), ri.unwrap());
                    mc.data_matched += 1;
                    let (sent, slot) = (s.at, r.at as usize);
                    let read = inbox[j].reads[slot];
                    if sent > read {
                        mc.read_before_send += 1;
                    }
                    inbox[j].arrived[slot] = sent.min(read);
                    if i == j {
                        mc.data_worker_local += 1;
                    } else {
                        if let Some(d) = detail.as_deref_mut() {
                            let (src, dst, sent) = (i as u32, j as u32, sent.min(read));
                            d.messages.push(Message { src, dst, sent, read, channel, kind: MsgKind::Data });
                        }
                        // read before sent (clock trouble): the edge is clamped to the read
                        arrivals[j].push(Arrival { at: sent.min(read), src: i as u32, channel, kind: MsgKind::Data });
                    }
                    a += 1;
                    b += 1;
                }
                (Some(s), r) if r.is_none_or(|r| s.seq < r.seq) => {
                    // sent here, not read in this window
                    let i = si.unwrap();
                    match dst {
                        Some(j) => {
                            mc.data_in_flight += 1;
                            inbox[j].push(s.at, Ns::MAX);
                            if i == j {
                                mc.data_worker_local += 1;
                            } else {
                                arrivals[j].push(Arrival { at: s.at, src: i as u32, channel, kind: MsgKind::Data });
                            }
                        }
                        None if own_worker(i, to) => mc.data_in_flight += 1,
                        None => mc.data_unmatched += 1,
                    }
                    a += 1;
                }
                (_, Some(r)) => {
                    // read here, sent before the window (or not on this timeline)
                    let j = ri.unwrap();
                    if src.is_some() || own_worker(j, from) {
                        mc.data_from_before += 1;
                    } else {
                        mc.data_unmatched += 1;
                    }
                    inbox[j].arrived[r.at as usize] = ws;
                    b += 1;
                }
                _ => break,
            }
        }
        give_entries(sends);
        give_entries(reads);
    }
    // Progress: one send, N receives (Sager §4.2.2). Every worker of the
    // sender's process gets it; workers of other processes when they read it.
    let pg_strict: Vec<bool> = pg.iter().map(|g| g.3.windows(2).all(|p| p[0].seq < p[1].seq)).collect();
    for g in pr.iter_mut() {
        let ProgressReads { channel, from, j, key: (cd, fd), ref mut reads, ref mut max_seq } = *g;
        if !sorted_by_seq(reads, |r| r.seq) {
            reads.sort();
        }
        *max_seq = reads.last().map_or(0, |r| r.seq);
        let gi = pg_ix.find([cd, fd, 0]);
        let group = gi.map(|g| &pg[g]);
        // Sends in strictly increasing sequence (as sent, the usual case):
        // the reads, sorted, find theirs by walking forward.
        let strict = gi.is_some_and(|g| pg_strict[g]);
        let mut k = 0;
        arrivals[j].start_run();
        for &MsgEntry { seq: q, at: slot } in reads.iter() {
            let r = inbox[j].reads[slot as usize];
            // (As before the sends are searched in the order they were sent.)
            let sent = match group {
                Some(g) if strict => {
                    let sends = &g.3;
                    while k < sends.len() && sends[k].seq < q {
                        k += 1;
                    }
                    sends.get(k).filter(|x| x.seq == q).map(|x| x.at)
                }
                _ => group.and_then(|g| g.3.binary_search_by_key(&q, |x| x.seq).ok().map(|k| g.3[k].at)),
            };
            match (sent, group) {
                (Some(s), Some(&(_, _, i, _))) => {
                    if s > r {
                        mc.read_before_send += 1;
                    }
                    inbox[j].arrived[slot as usize] = s.min(r);
                    if pk[i] != pk[j] {
                        arrivals[j].push(Arrival { at: s.min(r), src: i as u32, channel, kind: MsgKind::Progress });
                    }
                }
                _ => {
                    if resolve(pk[j], from).is_some() || own_worker(j, from) {
                        mc.progress_from_before += 1;
                    } else {
                        mc.progress_unmatched += 1;
                    }
                    inbox[j].arrived[slot as usize] = ws;
                }
            }
        }
    }
    // Progress buffered all through the window (as data above): every
    // worker of the sender's process, and of the cluster's other processes
    // on its host, gets each progress message. (A sender that ended, of a
    // process with no stream left here, has no known worker block: its
    // progress reaches its own process only.)
    for &(i, sender, marks) in &senders {
        for m in marks.iter().filter(|m| m.half == Half::PSend) {
            let p = key_of(sender);
            let cluster = peer_procs.clone().filter(|&q| peers(p, q)).flat_map(|q| procs[&q].iter());
            let own = procs.get(&p).map_or(&[][..], |v| &v[..]);
            let receivers = own.iter().chain(cluster).copied().filter(|&j| Some(j) != i && sids[j].host == sender.host);
            for j in receivers.filter(|&j| m.at >= frags[j].clean_since) {
                let read_before = seq_before(j, Half::PRecv, m.channel, sender.worker);
                let read_here = chan_ids
                    .find(m.channel)
                    .zip(sender_side(i, j, sender.worker))
                    .and_then(|(c, s)| pr_ix.find([c, s, j as u32]))
                    .map(|g| pr[g].max_seq);
                if read_before.max(read_here).is_none_or(|r| m.seq > r) {
                    inbox[j].push(ws, Ns::MAX);
                }
            }
        }
    }
    for (channel, _, i, sends) in pg.iter_mut() {
        if !sorted_by_seq(sends, |s| s.seq) {
            sends.sort();
        }
        let cd = chan_ids.id(*channel);
        for &j in &procs[&pk[*i]] {
            if j == *i {
                continue;
            }
            let read_upto = pr_ix.find([cd, *i as u32, j as u32]).map(|g| pr[g].max_seq);
            arrivals[j].start_run();
            for &MsgEntry { seq: q, at: s } in sends.iter() {
                arrivals[j].push(Arrival { at: s, src: *i as u32, channel: *channel, kind: MsgKind::Progress });
                if read_upto.is_none_or(|m| q > m) {
                    inbox[j].push(s, Ns::MAX);
                }
            }
        }
        // The workers of the other processes of a timely cluster on this
        // host get it too (arrival = send time on one host, as for data
        // messages in flight): those a read matched above have their
        // arrival; the rest arrived unread. A cluster's processes run
        // disjoint blocks of global worker indices (independent programs
        // each number theirs from 0, and do not exchange progress).
        for q in peer_procs.clone() {
            if !peers(pk[*i], q) {
                continue;
            }
            for &j in &procs[&q] {
                if sids[j].host != sids[*i].host {
                    continue;
                }
                let read_upto = pr_ix.find([cd, *i as u32, j as u32]).map(|g| pr[g].max_seq);
                arrivals[j].start_run();
                for &MsgEntry { at: s, .. } in sends.iter().filter(|e| read_upto.is_none_or(|m| e.seq > m)) {
                    arrivals[j].push(Arrival { at: s, src: *i as u32, channel: *channel, kind: MsgKind::Progress });
                    inbox[j].push(s, Ns::MAX);
                }
            }
        }
    }
    for a in arrivals.iter_mut() {
        a.prepare();
    }
    for b in inbox.iter_mut() {
        b.prepare();
    }

    // ---- timelines, waits, graph ----
    let mut gb = GraphBuilder::new((ws, we), n);
    let mut waiting: Vec<WorkerWaiting> = Vec::with_capacity(n);
    // The message read after a gap ended it only if it arrived in the gap.
    // A sender on this timeline (or the worker itself) whose message arrived
    // inside the gap is found by the wait finder from the arrivals; if it was
    // not, the message came after the work that ended the gap had started
    // (the read is later in the same busy period), so that work had no
    // visible cause: Waiting-for-Input, not a wait without terminator.
    // (A gap cut at the window's end keeps its later reader, unless that is
    // the worker itself.)
    let max_w = sids.iter().map(|s| s.worker as usize + 1).max().unwrap_or(0).min(1 << 16);
    let mut present = vec![false; max_w];
    for s in &sids {
        if let Some(p) = present.get_mut(s.worker as usize) {
            *p = true;
        }
    }
    // A message the worker sent itself cannot have ended its gap, cut at
    // the window's end or not: a worker sends nothing while idle (a send
    // outside an execution ends the gap), so its own message came after the
    // work that ended the gap had begun.
    let next_cause = |next: GapEnd, end: Ns, me: u32| match next {
        GapEnd::Read { from, .. }
            if from == me || (end <= we && present.get(from as usize).copied().unwrap_or(false)) =>
        {
            GapEnd::NoCause
        }
        n => n,
    };
    for j in 0..n {
        // The intervals nearly always come in order; sorted otherwise.
        let (iv, sorted) = &mut intervals_of[j];
        if !*sorted {
            iv.sort_by_key(|i| (i.start(), i.end()));
        }
        gb.reserve(j, iv.len() + iv.len() / 2);
        let mut finder = WaitFinder::new(&arrivals[j], &inbox[j], (ws, we));
        let mut ww = WorkerWaiting { worker: sids[j].worker, ..Default::default() };
        type OnKey = (Option<u32>, Option<u32>, &'static str);
        let mut on: FxHashMap<OnKey, (Ns, u64)> = FxHashMap::default();
        for it in iv.iter() {
            match *it {
                Item::Busy { start, end, what } => {
                    let k = match what {
                        Busy::Operator(op) => EKind::Op(op),
                        Busy::Span(id) => gb.span(id),
                    };
                    gb.segment(j, start, end, k);
                    if let Some(d) = detail.as_deref_mut() {
                        let what = match what {
                            Busy::Operator(op) => ActivityKind::Operator(op),
                            Busy::Span(id) => ActivityKind::Span(id),
                        };
                        let (start, end) = (start.max(ws), end.min(we));
                        d.activities.push(Activity { stream: j as u32, start, end, what });
                    }
                }
                Item::Gap { start, end, cause_until, next } => {
                    match finder.gap(start, end, cause_until, next_cause(next, end, sids[j].worker)) {
                        None => gb.segment(j, start, end, EKind::Unknown),
                        Some(w) => {
                            gb.segment(j, start, w.start, EKind::Unknown);
                            let d = w.end - w.start;
                            match w.kind {
                                WaitKind::WaitingForInput => {
                                    gb.segment(j, w.start, w.end, EKind::WaitingForInput);
                                    ww.waiting_for_input_ns += d;
                                    if let Some(dt) = detail.as_deref_mut() {
                                        let (start, end) = (w.start.max(ws), w.end.min(we));
                                        dt.activities.push(Activity {
                                            stream: j as u32,
                                            start,
                                            end,
                                            what: ActivityKind::WaitingForInput,
                                        });
                                    }
                                }
                                WaitKind::Waiting(o) => {
                                    gb.segment(j, w.start, w.end, EKind::Wait);
                                    ww.waiting_ns += d;
                                    ww.waits += 1;
                                    let key = match o {
                                        WaitOn::Message { src, src_known, channel, kind } => {
                                            let wk = if src_known { sids[src as usize].worker } else { src };
                                            (Some(wk), Some(channel), kind_name(kind))
                                        }
                                        WaitOn::Unknown => (None, None, "unknown"),
                                    };
                                    if let Some(dt) = detail.as_deref_mut() {
                                        let (start, end) = (w.start.max(ws), w.end.min(we));
                                        let what = ActivityKind::Waiting { on: key.0, channel: key.1, kind: key.2 };
                                        dt.activities.push(Activity { stream: j as u32, start, end, what });
                                    }
                                    let e = on.entry(key).or_default();
                                    e.0 += d;
                                    e.1 += 1;
                                    if let Some(a) = w.terminator {
                                        gb.terminated_wait(j, w.end, a.src as usize, a.at, a.channel, a.kind);
                                    }
                                }
                            }
                            gb.segment(j, w.end, end, EKind::Unknown);
                        }
                    }
                }
            }
        }
        let mut on: Vec<WaitedOn> = on
            .into_iter()
            .map(|((worker, channel, kind), (ns, count))| WaitedOn { worker, channel, kind, ns, count })
            .collect();
        on.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.worker.cmp(&b.worker)).then(a.channel.cmp(&b.channel)));
        on.truncate(TOP);
        ww.on = on;
        waiting.push(ww);
    }
    // The message tables are done with: freed before the graph is laid out
    // (a window's peak memory, and pages the graph can reuse).
    for (.., sends) in pg {
        give_entries(sends);
    }
    for g in pr {
        give_entries(g.reads);
    }
    for (iv, _) in intervals_of {
        give_items(iv);
    }
    for b in inbox {
        crate::analysis::model::give_reads(b.reads);
    }
    drop(arrivals);
    let g = gb.build();
    rep.waiting = waiting;

    // ---- critical path ----
    let names: Vec<FxHashMap<u32, &str>> =
        frags.iter().map(|f| f.ops.iter().map(|(id, n)| (*id, n.as_str())).collect()).collect();
    let span_names: Vec<FxHashMap<u64, &str>> =
        frags.iter().map(|f| f.spans.iter().map(|(id, n)| (*id, n.as_str())).collect()).collect();
    let cp = graph::critical_path(&g);
    // The span the path must equal (Sager Algorithm 1 and Theorem 3.13: the
    // latest vertex time of the window graph minus the earliest): the part
    // of the window the streams' timelines cover, from the earliest to the
    // latest time on any of them. The whole window where every stream runs
    // through it; less in a window where the streams start or end (the
    // first and last), where a path from the latest activity back to the
    // earliest start is as long as that, not the window. (The path's own
    // length telescopes to where it began minus where it stopped, so the
    // check fails exactly when the walk could not start at the latest time,
    // stopped at a wait without terminator, or ended at a timeline that
    // begins later than the earliest.)
    let covered_span = g
        .chains
        .iter()
        .filter(|&&(a, b)| b > a)
        .map(|&(a, b)| (g.t[a as usize], g.t[b as usize - 1]))
        .reduce(|x, y| (x.0.min(y.0), x.1.max(y.1)))
        .map_or(0, |(lo, hi)| hi - lo);
    let mut s = CpSummary { length_ns: cp.length, span_ns: covered_span, edges: cp.edges.len(), ..Default::default() };
    s.equals_span = cp.length == covered_span;
    s.started_before_end = cp.started_early;
    s.stuck = cp
        .stuck
        .map(|(v, why)| format!("worker {} at {} ns: {}", sids[g.w[v as usize] as usize].worker, g.t[v as usize], why));
    let mut ops: FxHashMap<(usize, u32), Ns> = FxHashMap::default();
    let mut spans: FxHashMap<(usize, u64), Ns> = FxHashMap::default();
    let mut workers: FxHashMap<usize, Ns> = FxHashMap::default();
    let mut chans: FxHashMap<(u32, MsgKind, usize, usize), (u64, Ns)> = FxHashMap::default();
    for e in &cp.edges {
        match *e {
            PathEdge::Worker(v) => {
                let v = v as usize;
                let (w, d) = (g.w[v] as usize, g.weight(v));
                *workers.entry(w).or_default() += d;
                match g.kind[v] {
                    EKind::Op(op) => {
                        s.by_kind.operator += d;
                        *ops.entry((w, op)).or_default() += d;
                    }
                    EKind::Span(ix) => {
                        let id = g.span_id(ix);
                        s.by_kind.span += d;
                        *spans.entry((w, id)).or_default() += d;
                    }
                    EKind::WaitingForInput => s.by_kind.waiting_for_input += d,
                    _ => s.by_kind.unknown += d,
                }
            }
            PathEdge::Comm(c) => {
                let c = &g.comms[c as usize];
                let d = g.t[c.dst as usize].saturating_sub(g.t[c.src as usize]);
                match c.kind {
                    MsgKind::Data => s.by_kind.data_message += d,
                    MsgKind::Progress => s.by_kind.progress_message += d,
                }
                let e = chans
                    .entry((c.channel, c.kind, g.w[c.src as usize] as usize, g.w[c.dst as usize] as usize))
                    .or_default();
                e.0 += 1;
                e.1 += d;
            }
        }
    }
    let len = cp.length.max(1) as f64;
    let mut top_ops: Vec<OpShare> = ops
        .into_iter()
        .map(|((w, op), ns)| OpShare {
            worker: sids[w].worker,
            operator: op,
            name: names[w].get(&op).unwrap_or(&"").to_string(),
            ns,
            share: ns as f64 / len,
        })
        .collect();
    top_ops.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.worker.cmp(&b.worker)).then(a.operator.cmp(&b.operator)));
    top_ops.truncate(TOP);
    s.top_operators = top_ops;
    let mut top_spans: Vec<SpanShare> = spans
        .into_iter()
        .map(|((w, id), ns)| SpanShare {
            worker: sids[w].worker,
            span: id,
            name: span_names[w].get(&id).unwrap_or(&"").to_string(),
            ns,
            share: ns as f64 / len,
        })
        .collect();
    top_spans.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.worker.cmp(&b.worker)));
    top_spans.truncate(TOP);
    s.top_spans = top_spans;
    let mut by_worker: Vec<WorkerShare> =
        workers.into_iter().map(|(w, ns)| WorkerShare { worker: sids[w].worker, ns, share: ns as f64 / len }).collect();
    by_worker.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.worker.cmp(&b.worker)));
    s.by_worker = by_worker;
    let mut top_ch: Vec<ChannelShare> = chans
        .into_iter()
        .map(|((channel, k, a, b), (crossings, ns))| ChannelShare {
            channel,
            kind: kind_name(k),
            src_worker: sids[a].worker,
            dst_worker: sids[b].worker,
            crossings,
            ns,
        })
        .collect();
    top_ch.sort_by(|a, b| {
        b.crossings
            .cmp(&a.crossings)
            .then(b.ns.cmp(&a.ns))
            .then(a.channel.cmp(&b.channel))
            .then(a.src_worker.cmp(&b.src_worker))
    });
    top_ch.truncate(TOP);
    s.top_channels = top_ch;
    rep.critical_path = s;
    if let Some(d) = detail {
        for c in &g.comms {
            if c.kind == MsgKind::Progress {
                let (src, dst) = (g.w[c.src as usize], g.w[c.dst as usize]);
                let (sent, read) = (g.t[c.src as usize], g.t[c.dst as usize]);
                d.messages.push(Message { src, dst, sent, read, channel: c.channel, kind: c.kind });
            }
        }
        for e in &cp.edges {
            d.critical.push(match *e {
                PathEdge::Worker(v) => {
                    let v = v as usize;
                    let what = match g.kind[v] {
                        EKind::Op(op) => CriticalKind::Operator(op),
                        EKind::Span(ix) => CriticalKind::Span(g.span_id(ix)),
                        EKind::WaitingForInput => CriticalKind::WaitingForInput,
                        _ => CriticalKind::Unknown,
                    };
                    CriticalPiece { stream: g.w[v], start: g.t[v] - g.weight(v), end: g.t[v], what }
                }
                PathEdge::Comm(c) => {
                    let c = &g.comms[c as usize];
                    let (src, dst) = (c.src as usize, c.dst as usize);
                    let what = CriticalKind::Message { from: g.w[src], channel: c.channel, kind: c.kind };
                    CriticalPiece { stream: g.w[dst], start: g.t[src].min(g.t[dst]), end: g.t[dst], what }
                }
            });
        }
    }

    // ---- participation ----
    // Summed per (worker, activity) over integer keys first (hashing the
    // names per vertex cost more than the path counting), in vertex order as
    // the scores come, then moved to the named map in order of first
    // appearance.
    const NAMES: [&str; 6] = ["operator", "span", "waiting_for_input", "unknown", "data_message", "progress_message"];
    let mut sums = PartSums::new(g.chains.len());
    let p = graph::participation_with(&g, |v, sc| {
        if sc <= 0.0 {
            return;
        }
        let w = g.w[v];
        match g.kind[v] {
            EKind::Op(op) => sums.add((w, 0, Some(op as u64)), sc),
            EKind::Span(ix) => sums.add((w, 1, Some(g.span_id(ix))), sc),
            EKind::WaitingForInput => sums.add((w, 2, None), sc),
            _ => sums.add((w, 3, None), sc),
        }
    });
    for (i, c) in g.comms.iter().enumerate() {
        if p.comm[i] > 0.0 {
            let cat = match c.kind {
                MsgKind::Data => 4,
                MsgKind::Progress => 5,
            };
            sums.add((g.w[c.dst as usize], cat, Some(c.channel as u64)), p.comm[i]);
        }
    }
    let sums = sums.sums;
    let mut agg: FxHashMap<(usize, &'static str, Option<u64>), f64> = FxHashMap::default();
    for ((w, cat, id), sum) in sums {
        agg.insert((w as usize, NAMES[cat as usize], id), sum);
    }
    let mut part: Vec<ParticipationEntry> = agg
        .into_iter()
        .map(|((w, activity, id), score)| ParticipationEntry {
            worker: sids[w].worker,
            activity,
            id,
            name: match (activity, id) {
                ("operator", Some(op)) => names[w].get(&(op as u32)).map(|s| s.to_string()),
                ("span", Some(id)) => span_names[w].get(&id).map(|s| s.to_string()),
                _ => None,
            },
            score,
        })
        .collect();
    part.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.worker.cmp(&b.worker)).then(a.id.cmp(&b.id)));
    part.truncate(TOP);
    rep.participation = part;

    // ---- properties ----
    let mut props = properties::check(&g);
    // Streams that begin inside the window (see `Properties::stream_starts`).
    let began: Vec<Option<Ns>> =
        frags.iter().map(|f| (f.covered.0 > ws && f.covered.0 < we).then_some(f.covered.0)).collect();
    // A worker of a process that has not started yet (fewer streams here
    // than the process runs, none of the absent ones ended): the workers
    // present may wait on it with nothing in flight.
    let not_started = procs
        .iter()
        .any(|(p, members)| missing_of.get(p).is_some_and(|&m| m > 0) && members.iter().all(|&i| !frags[i].ended));
    let last_start = if not_started { Some(we) } else { began.iter().flatten().max().copied() };
    if let Some(last_start) = last_start {
        let tmin = g.t.iter().copied().min().unwrap_or(ws);
        for (w, &(a, b)) in g.chains.iter().enumerate() {
            if b > a && g.t[a as usize] > tmin && began[w].is_some_and(|s| g.t[a as usize] >= s) {
                let m = &mut props.min_in_degree;
                m.violations -= 1;
                m.at.retain(|v| !(v.worker == Some(w as u32) && v.at_ns == g.t[a as usize]));
                props.stream_starts.min_in_degree += 1;
            }
        }
        let c = &mut props.communication_existence;
        let before = c.at.len();
        c.at.retain(|v| v.until_ns.is_none_or(|u| u > last_start));
        let gone = (before - c.at.len()) as u64;
        c.violations -= gone;
        props.stream_starts.communication_existence += gone;
        props.min_in_degree.ok = props.min_in_degree.violations == 0;
        props.communication_existence.ok = props.communication_existence.violations == 0;
    }
    for v in props
        .min_in_degree
        .at
        .iter_mut()
        .chain(props.wait_termination.at.iter_mut())
        .chain(props.communication_existence.at.iter_mut())
    {
        if let Some(w) = v.worker {
            v.worker = Some(sids[w as usize].worker);
        }
    }
    rep.properties = props;

    // Messages whose other half is not on this timeline: the other worker
    // is on another host (unsynchronized, analyzed in its own windows) or
    // its stream is missing.
    let mut others: Vec<u64> = frags.iter().flat_map(|f| f.other_hosts.iter().copied()).collect();
    others.sort_unstable();
    others.dedup();
    rep.unsynchronized_hosts = others.iter().map(|h| format!("{h:016x}")).collect();
    let unmatched = rep.messages.data_unmatched + rep.messages.progress_unmatched;
    if unmatched > 0 {
        reasons.push(if others.is_empty() {
            format!("{unmatched} message halves with a worker not on this timeline (a missing stream?)")
        } else {
            format!(
                "{unmatched} message halves with workers on other hosts ({}): unsynchronized, not mixed",
                rep.unsynchronized_hosts.join(", ")
            )
        });
    }
    for f in frags {
        crate::analysis::model::give_items(f.items);
    }
    reasons.sort();
    reasons.dedup();
    rep.complete = reasons.is_empty() && n > 0;
    if n == 0 {
        reasons.push("no streams".into());
    }
    rep.incomplete_reasons = reasons;
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_moved_out_of_the_window_are_dropped_and_reads_renumbered() {
        let mut m = Messages::default();
        let (r, s) = (m.group(Half::Recv, 1, 0), m.group(Half::Send, 1, 0));
        // Reads at 95 (moved before the window [100, 200)), 120, 150; a send
        // at 210 (moved past its end) and one at 130.
        for (g, seq, t) in [(r, 0, 95), (s, 0, 130), (r, 1, 120), (s, 1, 210), (r, 2, 150)] {
            m.push(g, seq, t);
        }
        m.moved = true;
        in_window(&mut m, 100, 200);
        assert_eq!(m.reads, vec![120, 150]);
        let e = |seq, at| MsgEntry { seq, at };
        // Reads name their new slots; sends keep their times.
        assert_eq!(m.groups[r].entries, vec![e(1, 0), e(2, 1)]);
        assert_eq!(m.groups[s].entries, vec![e(0, 130)]);
        let times: Vec<_> = m.iter().map(|(_, _, _, seq, t)| (seq, t)).collect();
        assert_eq!(times, vec![(1, 120), (2, 150), (0, 130)]);
        assert!(!m.moved);
    }
}
