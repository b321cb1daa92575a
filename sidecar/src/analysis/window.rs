//! Cutting one stream's timeline into fixed windows (Sager §3.1 edge
//! projection; issue stage 4). Items are assigned to every window they
//! overlap, with their original times: the owner projects them (clips to
//! `[start, end]`), so a wait cut at a window's end continues in the next.
//! Message halves go straight into their window's tables, grouped by
//! (half, channel, other worker) as the owner matches them. A window is
//! handed over once the stream's builder has settled past its end; memory
//! is bounded by the windows in flight.

use std::collections::VecDeque;

use crate::analysis::model::{
    mark_horizon, ArrangementLevel, Counters, Fragment, Half, Item, Messages, MsgGroup, Ns, SeqMark, Sid, FIGURES,
};

/// The groups of the window messages last went to, by (half, channel, other
/// worker): direct-mapped, a miss asks the fragment. Most messages of a
/// stream go to a few groups.
#[derive(Debug)]
struct GroupCache {
    /// (channel << 32 | other, half + 1 (0: empty), group); a quarter of
    /// the slots per half, so that a stream's sends and reads of one
    /// exchange never evict one another.
    slots: [(u64, u32, u32); 256],
    /// Every group of the tables, for misses (a stream may exchange with
    /// more (channel, worker) pairs than the slots hold).
    index: rustc_hash::FxHashMap<(u64, u32), u32>,
}

impl GroupCache {
    fn new() -> Self {
        GroupCache { slots: [(0, 0, 0); 256], index: Default::default() }
    }

    fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| s.1 = 0);
        self.index.clear();
    }

    #[inline(always)]
    fn get(&mut self, half: Half, channel: u32, other: u32, m: &mut Messages) -> usize {
        let key = (channel as u64) << 32 | other as u64;
        let h = half as u32 + 1;
        let i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize & 0xfc | half as usize;
        let e = &mut self.slots[i];
        if e.1 == h && e.0 == key {
            return e.2 as usize;
        }
        let g = *self.index.entry((key, h)).or_insert_with(|| m.new_group(half, channel, other) as u32);
        *e = (key, h, g);
        g as usize
    }
}

/// How far past the first open window a stream's data may fall (windows)
/// before it is taken for a corrupt clock (and counted late).
const MAX_AHEAD: usize = 10_000_000;

#[derive(Debug)]
pub struct Windower {
    pub width: Ns,
    stream: Sid,
    /// Open windows `next ..`, by offset from `next`.
    /// (Boxed: a slot far ahead, after a long silence or a bogus timestamp,
    /// costs a pointer per window in between, not a fragment.)
    open: VecDeque<Option<Box<Fragment>>>,
    /// Windows below this index were handed over.
    next: u64,
    started: bool,
    /// The window whose items the caller's vector holds (its first `.1`
    /// items; the fragment's own vector is empty meanwhile): the activity
    /// builder then appends straight to the window's items, and a batch that
    /// stays inside that window needs no copy.
    lent: Option<(u64, usize)>,
    pub workers_expected: u32,
    /// [`Fragment::process_workers`].
    pub process_workers: (u32, u32),
    pub program: String,
    /// The host's name (its Hello).
    pub host_name: String,
    /// The messages of the window they last went to (index, start, end),
    /// so far, with the first and last time: moved into its fragment when
    /// the stream moves on or the window is handed over.
    msgs: Messages,
    msgs_at: Option<(u64, Ns, Ns)>,
    msgs_span: (Ns, Ns),
    msg_groups: GroupCache,
    /// Messages for windows already handed over (reported by `add`).
    late_msgs: u64,
    /// Faults and counters that came before the stream's first record (a
    /// stream joined mid-way, records lost before any arrived): they go to
    /// its first window, not to a window at the epoch.
    pending_faults: Vec<String>,
    pending_counters: Counters,
    /// The last window an item placed only in its first windows (it spans
    /// more than `MAX_SPAN`) reaches: the windows after those it was placed
    /// in are its silence, already spelled out for `MAX_SPAN` windows, so
    /// `take_below` skips them rather than hand them over empty.
    silent_to: Option<u64>,
    /// The last sequence number (and its time) of each message group in the
    /// windows handed over, the last `MARK_AGE` windows only: the list each
    /// fragment gets (`Fragment::seq_before`), sorted by group, and kept so:
    /// a window's groups are merged in (sorting it anew each window took a
    /// quarter of the instructions on a trace of 500 channels, where each
    /// stream has tens of thousands of groups; docs/performance.md).
    seq_marks: Vec<SeqMark>,
    /// See `Fragment::clean_since`.
    clean_since: Ns,
    /// The stream's arrangements as the last window handed over left them
    /// (by operator), at most `MAX_ARRANGEMENTS`.
    arrangements: Vec<ArrangementLevel>,
    /// Arrangement records of operators past `MAX_ARRANGEMENTS` (ignored).
    pub arrangements_refused: u64,
    /// The last traces forgotten (their last handle dropped), at most
    /// `RETIRED_KEPT`: differential logs the drop of a trace's batches just
    /// after its last handle's, and those records, a window later, must not
    /// bring it back.
    retired: VecDeque<u32>,
    /// Live: how many of the last windows handed over may still be revised
    /// ([`Windower::revise_within`]; 0: none, late data is counted).
    revise: u64,
    /// Late data for those windows, by window: handed over as late
    /// fragments ([`Fragment::late`]) once the stream has settled past them.
    patches: std::collections::BTreeMap<u64, Fragment>,
    /// The last sequence numbers the late fragments handed over so far
    /// raised (while more are pending).
    late_marks: Vec<SeqMark>,
    /// Windows the current frame may still fill beyond its records' own
    /// ([`FRAME_WINDOWS`]; reset by [`Windower::new_frame`]).
    fill_left: u64,
}

/// Arrangements a stream may report at most (a program has a few per
/// worker; a corrupt stream could name millions of operators). Records of
/// further operators are counted and ignored.
pub const MAX_ARRANGEMENTS: usize = 4096;

/// Traces forgotten that a stream remembers, the latest (see
/// `Windower::retired`).
const RETIRED_KEPT: usize = 64;

/// Windows an item is placed in at most (a corrupt clock can make one span
/// absurdly many); the rest of a longer one is silence, skipped.
const MAX_SPAN: u64 = 10_000;

/// Windows one frame of a stream may fill at most beyond those its records
/// start in: the windows its items reach past their first, and the empty
/// windows of its silences spelled out. Each record with an absurd clock
/// carries its stream up to `MAX_SPAN` + `MAX_SKIP` windows on (20,000),
/// about 2 KB a window in flight, and a frame holds thousands of records:
/// without a bound, a few kilobytes of such a file took gigabytes. Past it,
/// as past `MAX_SPAN`, the rest is silence, skipped, and a fault says so. A
/// real frame fills as many windows as the time its records cover (the
/// probe's writer sends a frame every 10 ms or so): 100,000 windows is 100
/// ms of one worker's records at the narrowest windows (1 µs), 100 s at 1
/// ms.
pub const FRAME_WINDOWS: u64 = 100_000;

impl Windower {
    pub fn new(stream: Sid, width: Ns) -> Windower {
        Windower {
            width: width.max(1),
            stream,
            open: VecDeque::new(),
            next: 0,
            started: false,
            lent: None,
            workers_expected: 0,
            process_workers: (0, 0),
            program: String::new(),
            host_name: String::new(),
            msgs: Messages::default(),
            msgs_at: None,
            msgs_span: (0, 0),
            msg_groups: GroupCache::new(),
            late_msgs: 0,
            pending_faults: Vec::new(),
            pending_counters: Counters::default(),
            silent_to: None,
            seq_marks: Vec::new(),
            clean_since: 0,
            arrangements: Vec::new(),
            arrangements_refused: 0,
            retired: VecDeque::new(),
            revise: 0,
            patches: Default::default(),
            late_marks: Vec::new(),
            fill_left: FRAME_WINDOWS,
        }
    }

    /// A new frame of the stream's records begins: it may fill
    /// [`FRAME_WINDOWS`] windows.
    pub fn new_frame(&mut self) {
        self.fill_left = FRAME_WINDOWS;
    }

    /// Live: late data for the last `windows` windows handed over goes to
    /// them as late fragments (their reports are revised) instead of being
    /// counted late. Its memory is bounded by that data.
    pub fn revise_within(&mut self, windows: u64) {
        self.revise = windows;
    }

    /// The late fragment of window `k`, if `k` was handed over among the
    /// last [`Windower::revise_within`] windows.
    #[cold]
    fn patch(&mut self, k: u64) -> Option<&mut Fragment> {
        if !self.started || k >= self.next || k.saturating_add(self.revise) < self.next {
            return None;
        }
        let f = self.fragment(k);
        Some(self.patches.entry(k).or_insert_with(|| Fragment { late: true, covered: (Ns::MAX, 0), ..f }))
    }

    /// A message half for a window handed over: to its late fragment
    /// (false: too old, counted late).
    #[cold]
    fn late_message(&mut self, t: Ns, half: Half, channel: u32, other: u32, seq: u64) -> bool {
        let k = self.index(t);
        let Some(p) = self.patch(k) else { return false };
        let g = p.msgs.group(half, channel, other);
        p.msgs.push(g, seq, t);
        true
    }

    /// Hands over the late fragments of the windows before `upto` (the
    /// stream has settled past them). Their messages are the stream's
    /// latest (it was silent since), so each raises its group's last
    /// sequence number: the windows handed over from now on carry them, and
    /// each later late fragment carries the raises of those before it
    /// (`seq_before`: raised into its window's, `Fragment::fold_late`), as
    /// if they had come in time.
    fn take_patches(&mut self, upto: u64, out: &mut Vec<Fragment>) {
        while let Some(e) = self.patches.first_entry() {
            if *e.key() >= upto {
                break;
            }
            let mut p = e.remove();
            p.seq_before = self.late_marks.clone();
            let mut lasts = last_marks(&p.msgs);
            for &m in &lasts {
                SeqMark::raise(&mut self.late_marks, m);
            }
            set_marks(&mut self.seq_marks, &mut lasts, |old, new| old.seq <= new.seq);
            out.push(p);
        }
        if self.patches.is_empty() {
            self.late_marks.clear();
        }
    }

    /// A message half at `t` (not before the stream's earlier records):
    /// into the tables of its window.
    #[inline(always)]
    pub fn message(&mut self, t: Ns, half: Half, channel: u32, other: u32, seq: u64) {
        match self.msgs_at {
            Some((_, lo, hi)) if t >= lo && t < hi => {}
            _ => {
                if !self.messages_at(t) {
                    if !self.late_message(t, half, channel, other, seq) {
                        self.late_msgs += 1;
                        self.clean_since = self.clean_since.max(t);
                    }
                    return;
                }
            }
        }
        let g = self.msg_groups.get(half, channel, other, &mut self.msgs);
        self.msgs.push(g, seq, t);
        self.msgs_span.1 = t;
    }

    /// The stream's first record is at `t`: its first window.
    pub fn start_at(&mut self, t: Ns) {
        if !self.started {
            self.clean_since = self.clean_since.max(t);
            self.begin(self.index(t));
        }
    }

    /// The stream's first window is `k`: what came before it goes there.
    fn begin(&mut self, k: u64) {
        self.started = true;
        self.next = k;
        let (faults, c) = (std::mem::take(&mut self.pending_faults), std::mem::take(&mut self.pending_counters));
        if faults.is_empty() && c == Counters::default() {
            return;
        }
        if let Some(f) = self.frag(k) {
            f.counters.add(&c);
            f.faults.extend(faults);
        }
    }

    /// Faults that never found a window: the stream ended before its first
    /// record (the caller reports them another way).
    pub fn unplaced_faults(&mut self) -> Vec<String> {
        std::mem::take(&mut self.pending_faults)
    }

    /// Messages now go to the window of `t` (false: it was handed over).
    #[cold]
    fn messages_at(&mut self, t: Ns) -> bool {
        self.stash_messages();
        self.start_at(t);
        let k = self.index(t);
        let (Some(_), Some((lo, hi))) = (self.slot(k), self.bounds(k)) else { return false };
        self.msgs_at = Some((k, lo, hi));
        self.msgs.reads = crate::analysis::model::take_reads();
        self.msgs_span = (t, t);
        self.msg_groups.clear();
        true
    }

    /// Moves the messages gathered into their window's fragment.
    fn stash_messages(&mut self) {
        let Some((k, ..)) = self.msgs_at.take() else { return };
        let m = std::mem::take(&mut self.msgs);
        let (lo, hi) = self.msgs_span;
        match self.frag(k) {
            Some(f) => {
                if f.msgs.groups.is_empty() && f.msgs.reads.is_empty() {
                    f.msgs = m;
                } else {
                    f.msgs.append(m);
                }
                f.covered.0 = f.covered.0.min(lo);
                f.covered.1 = f.covered.1.max(hi);
            }
            None => {
                self.late_msgs += m.len() as u64;
                m.recycle();
            }
        }
    }

    pub fn index(&self, t: Ns) -> u64 {
        t / self.width
    }

    fn frag(&mut self, k: u64) -> Option<&mut Fragment> {
        self.slot(k).and_then(|off| self.open[off].as_deref_mut())
    }

    /// The offset in `open` of window `k`'s fragment, made if new.
    #[inline]
    fn slot(&mut self, k: u64) -> Option<usize> {
        if k < self.next {
            return None; // already handed over: late data
        }
        let off = (k - self.next) as usize;
        if off > MAX_AHEAD {
            return None; // absurd jump (corrupt clock): do not allocate for it
        }
        if let Some(Some(_)) = self.open.get(off) {
            return Some(off);
        }
        while self.open.len() <= off {
            self.open.push_back(None);
        }
        let f = Fragment { covered: (Ns::MAX, 0), items: crate::analysis::model::take_items(), ..self.fragment(k) };
        self.open[off] = Some(Box::new(f));
        Some(off)
    }

    /// A fragment of this stream for window `k`, holding nothing yet.
    fn fragment(&self, k: u64) -> Fragment {
        Fragment {
            stream: Some(self.stream),
            window: k,
            workers_expected: self.workers_expected,
            process_workers: self.process_workers,
            program: self.program.clone(),
            host_name: self.host_name.clone(),
            ..Default::default()
        }
    }

    /// Bounds of window `k`, if representable.
    fn bounds(&self, k: u64) -> Option<(Ns, Ns)> {
        let w = self.width;
        Some((k.checked_mul(w)?, k.checked_add(1)?.checked_mul(w)?))
    }

    /// Whether every item lies inside window `k` (start in it, end by its
    /// end), with the least start and greatest end.
    fn inside(&self, k: u64, items: &[Item]) -> Option<(Ns, Ns)> {
        let (lo, hi) = self.bounds(k)?;
        let (mut s_min, mut e_max, mut inside) = (Ns::MAX, 0, true);
        for it in items {
            let (s, e) = (it.start(), it.end());
            inside &= s >= lo && s < hi && e <= hi;
            s_min = s_min.min(s);
            e_max = e_max.max(e);
        }
        inside.then_some((s_min, e_max))
    }

    fn open_frag(&mut self, k: u64) -> &mut Fragment {
        self.open[(k - self.next) as usize].as_mut().expect("lent window is open")
    }

    /// Adds the items of `items` (in any order) not added before; returns
    /// how many fell into windows that were already handed over (late;
    /// counted by the caller as a fault; messages found late since the last
    /// call included). Afterwards `items` may hold the
    /// items of the window the last one fell in: give the same vector to
    /// every call, and to `take_ready` and `finish`.
    pub fn add(&mut self, items: &mut Vec<Item>) -> u64 {
        let late = std::mem::take(&mut self.late_msgs);
        self.add_items(items) + late
    }

    fn add_items(&mut self, items: &mut Vec<Item>) -> u64 {
        let mut spare = Vec::new();
        if let Some((k, len)) = self.lent.take() {
            if let Some((s_min, e_max)) = self.inside(k, &items[len..]) {
                let n = items.len();
                let f = self.open_frag(k);
                f.covered.0 = f.covered.0.min(s_min);
                f.covered.1 = f.covered.1.max(e_max);
                self.lent = Some((k, n));
                return 0;
            }
            // Window `k` gets its items back; the new ones are placed (in a
            // vector from the pool, which the pool gets back: a fresh one
            // from `split_off` for every switch would grow the pool with the
            // length of the run; the smallest that fits, so the roomy ones
            // stay for whole windows).
            let mut new = crate::analysis::model::take_items_for(items.len() - len);
            new.extend(items.drain(len..));
            std::mem::swap(items, &mut self.open_frag(k).items);
            std::mem::swap(items, &mut new);
            spare = new;
        }
        let (late, last) = self.place(items);
        if spare.capacity() > items.capacity() {
            std::mem::swap(items, &mut spare);
        }
        crate::analysis::model::give_items(spare);
        if let Some(k) = last {
            std::mem::swap(items, &mut self.open_frag(k).items);
            self.lent = Some((k, items.len()));
        }
        late
    }

    /// Gives the lent window its items back (`items` as given to `add`).
    fn reclaim(&mut self, items: &mut Vec<Item>) {
        if self.lent.is_some_and(|(_, len)| items.len() > len) {
            self.add_items(items);
        }
        if let Some((k, _)) = self.lent.take() {
            std::mem::swap(items, &mut self.open_frag(k).items);
        }
    }

    /// Places every item of `items` (leaving it empty); returns the late
    /// count and the open window the last item went to.
    fn place(&mut self, items: &mut Vec<Item>) -> (u64, Option<u64>) {
        let mut late = 0;
        let w = self.width;
        // Usually a whole batch falls inside one window: moved in one piece
        // (the per-item path below would put each in that window, in order).
        if let Some(first) = items.first() {
            let k = self.index(first.start());
            if let Some((s_min, e_max)) = self.inside(k, items) {
                if !self.started {
                    self.begin(k);
                }
                if let Some(f) = self.frag(k) {
                    if f.items.is_empty() {
                        std::mem::swap(&mut f.items, items);
                    } else {
                        f.items.append(items);
                    }
                    f.covered.0 = f.covered.0.min(s_min);
                    f.covered.1 = f.covered.1.max(e_max);
                    return (0, Some(k));
                }
            }
        }
        // The window the last item landed in, while it stays open: (offset
        // in `open`, start, end). Items come nearly in time order, so most
        // fall inside it and skip the index divisions and the lookup.
        // (`next` and the offsets of open windows do not move during `add`.)
        let mut cur: Option<(usize, Ns, Ns)> = None;
        let mut last = None;
        for it in items.drain(..) {
            let (s, e) = (it.start(), it.end());
            if let Some((off, lo, hi)) = cur {
                if s >= lo && s < hi && e <= hi {
                    if let Some(Some(f)) = self.open.get_mut(off) {
                        f.items.push(it);
                        f.covered.0 = f.covered.0.min(s);
                        f.covered.1 = f.covered.1.max(e);
                        last = Some(self.next + off as u64);
                        continue;
                    }
                }
            }
            if !self.started {
                self.begin(self.index(s));
            }
            let k1 = self.index(s);
            let k2 = if e > s { self.index(e - 1) } else { k1 };
            // A corrupt clock can make one item span absurdly many windows
            // (and a frame many such items: `FRAME_WINDOWS`).
            let reach = MAX_SPAN.min(self.fill_left);
            if k2 > k1.saturating_add(reach) {
                self.silent_to = self.silent_to.max(Some(k2));
                if reach < MAX_SPAN {
                    self.frame_full(k1);
                }
            }
            let k2 = k2.min(k1.saturating_add(reach));
            self.fill_left -= k2 - k1;
            // A gap the live deadline handed over open (`Builder::force`)
            // comes again, whole, when it ends: its windows handed over
            // already had their part (open), the others get it now.
            let k1 = if matches!(it, Item::Gap { .. }) && k2 >= self.next { k1.max(self.next) } else { k1 };
            cur = None;
            for k in k1..=k2 {
                match self.frag(k) {
                    Some(f) => {
                        f.items.push(it);
                        last = Some(k);
                        let (ws, we) = (k.saturating_mul(w), k.saturating_add(1).saturating_mul(w));
                        f.covered.0 = f.covered.0.min(s.max(ws));
                        f.covered.1 = f.covered.1.max(e.min(we));
                        if k == k2 {
                            if let (Some(lo), Some(hi)) =
                                (k.checked_mul(w), k.checked_add(1).and_then(|k| k.checked_mul(w)))
                            {
                                cur = Some(((k - self.next) as usize, lo, hi));
                            }
                        }
                    }
                    None => match self.patch(k) {
                        // (Late, for a window that may still be revised.)
                        Some(p) => p.items.push(it),
                        None => late += 1,
                    },
                }
            }
        }
        (late, last)
    }

    /// Adds counters to the window holding time `t` (before the stream's
    /// first record: to its first window).
    pub fn count(&mut self, t: Ns, c: &Counters) {
        if !self.started {
            self.pending_counters.add(c);
            return;
        }
        if let Some(p) = self.patch(self.index(t)) {
            p.counters.add(c);
            return;
        }
        let k = self.index(t).max(self.next);
        if let Some(f) = self.frag(k) {
            f.counters.add(c);
        }
    }

    /// An arrangement record at `t`: `figure` (ringlog's `Figure` value) of
    /// operator `op`'s arrangement is `value` from now on. Unknown figures
    /// are skipped (a newer probe's).
    pub fn arrangement(&mut self, t: Ns, op: u32, figure: u32, value: u64) {
        let Some(i) = (figure as usize).checked_sub(1).filter(|&i| i < FIGURES) else { return };
        let known = self.arrangements.binary_search_by_key(&op, |a| a.op).is_ok();
        let k = self.index(t).max(self.next);
        let started = self.started;
        let frag = if started { self.slot(k) } else { None };
        let refused = &mut self.arrangements_refused;
        let list = match frag.and_then(|off| self.open[off].as_deref_mut()) {
            Some(f) => &mut f.arrangements,
            // (Before the stream's first window, or a window past reach:
            // the level the next window starts from.)
            None => &mut self.arrangements,
        };
        let at = match list.binary_search_by_key(&op, |a| a.op) {
            Ok(at) => at,
            Err(_) if !known && list.len() >= MAX_ARRANGEMENTS => {
                *refused += 1;
                return;
            }
            Err(at) => {
                list.insert(at, ArrangementLevel { op, ..Default::default() });
                at
            }
        };
        let a = &mut list[at];
        a.set |= 1 << i;
        a.values[i] = value;
        if i == 0 {
            a.peak_records = a.peak_records.max(value);
        }
    }

    /// Window `f` is handed over: its arrangements become whole (the
    /// levels before it, updated with what it set) and the levels the next
    /// window starts from.
    fn settle_arrangements(&mut self, f: &mut Fragment) {
        // (The index of `Figure::Shares`, and its bit in `set`.)
        const SHARES_AT: usize = ringlog::Figure::Shares as usize - 1;
        const SHARES: u16 = 1 << SHARES_AT;
        let mut dropped: Vec<u32> = Vec::new();
        // Each level enters the window at what the last window left.
        for l in &mut self.arrangements {
            l.peak_records = l.values[0];
            l.set = 0;
        }
        for a in std::mem::take(&mut f.arrangements) {
            let at = match self.arrangements.binary_search_by_key(&a.op, |x| x.op) {
                Ok(at) => at,
                // (What a forgotten trace's drop logs after its last
                // handle's: it does not come back.)
                Err(_) if self.retired.contains(&a.op) => continue,
                Err(at) if self.arrangements.len() < MAX_ARRANGEMENTS => {
                    self.arrangements.insert(at, ArrangementLevel { op: a.op, ..Default::default() });
                    at
                }
                Err(_) => {
                    self.arrangements_refused += 1;
                    continue;
                }
            };
            let l = &mut self.arrangements[at];
            for i in 0..FIGURES {
                if a.set & 1 << i != 0 {
                    l.values[i] = a.values[i];
                }
            }
            l.peak_records = l.peak_records.max(a.peak_records).max(l.values[0]);
            if a.set & SHARES != 0 && a.values[SHARES_AT] == 0 {
                dropped.push(a.op);
            }
        }
        f.arrangements.clone_from(&self.arrangements);
        if !dropped.is_empty() {
            // A trace whose last handle was dropped in this window is
            // reported in it, at its last levels, and not after: a program
            // that arranges and drops as it goes (a query built and retired)
            // keeps only its live traces here, below `MAX_ARRANGEMENTS`.
            self.arrangements.retain(|l| !dropped.contains(&l.op));
            for op in dropped {
                if self.retired.len() == RETIRED_KEPT {
                    self.retired.pop_front();
                }
                self.retired.push_back(op);
            }
        }
    }

    /// The frame has filled its [`FRAME_WINDOWS`] windows at window `k`
    /// (its first window past them is silence): said in window `k`.
    #[cold]
    fn frame_full(&mut self, k: u64) {
        let why = format!(
            "one frame's records reach more than {FRAME_WINDOWS} windows past their own (a clock jumping about?): \
             the windows past them are not reported"
        );
        if let Some(f) = self.frag(k) {
            if !f.faults.contains(&why) {
                f.faults.push(why);
            }
        }
    }

    /// Marks the windows overlapping `[from, to]` with a fault (before the
    /// stream's first record: its first window).
    pub fn fault(&mut self, from: Ns, to: Ns, why: &str) {
        self.clean_since = self.clean_since.max(to);
        if !self.started {
            if !self.pending_faults.iter().any(|x| x == why) {
                self.pending_faults.push(why.to_string());
            }
            return;
        }
        let k1 = self.index(from).max(self.next);
        let k2 = self.index(to).max(k1);
        // As for an item (see `place`): a fault over more than `MAX_SPAN`
        // windows (the records lost before a bogus timestamp far ahead)
        // marks the windows spelled out; the rest is silence, skipped, not
        // a fragment each.
        if k2 > k1.saturating_add(MAX_SPAN) {
            self.silent_to = self.silent_to.max(Some(k2));
        }
        for k in k1..=k2.min(k1.saturating_add(MAX_SPAN)) {
            if let Some(f) = self.frag(k) {
                if !f.faults.iter().any(|x| x == why) {
                    f.faults.push(why.to_string());
                }
            }
        }
    }

    /// Hands over every window that ends at or before `settled` (`items`:
    /// the vector given to `add`).
    pub fn take_ready(&mut self, settled: Ns, items: &mut Vec<Item>, out: &mut Vec<Fragment>) {
        let upto = settled / self.width; // windows < upto end <= settled
        self.take_patches(upto, out);
        if self.lent.is_some_and(|(k, _)| k < upto) {
            self.reclaim(items);
        }
        self.take_below(upto, out);
    }

    fn take_below(&mut self, upto: u64, out: &mut Vec<Fragment>) {
        if !self.started || upto <= self.next {
            return;
        }
        if self.msgs_at.is_some_and(|(k, ..)| k < upto) {
            self.stash_messages();
        }
        assert!(self.lent.is_none_or(|(k, _)| k >= upto), "lent window handed over");
        // Every window between handed-over ones exists (items tile the
        // timeline); empty ones get an empty fragment so the owner knows the
        // stream was present. A run of more than MAX_SKIP empty windows (a
        // stream silent for hours, or a bogus timestamp) is not spelled out
        // window by window: the rest of the run is skipped, and said so.
        // Windows with data are never skipped.
        const MAX_SKIP: u64 = 10_000;
        let w = self.width;
        let mut k = self.next;
        let mut empty_run = 0;
        while k < upto {
            if let Some(mut f) = self.open.pop_front().flatten() {
                if f.covered.0 > f.covered.1 {
                    f.covered = (k.saturating_mul(w), k.saturating_mul(w));
                }
                self.age_seqs(k);
                f.seq_before = self.seq_marks.clone();
                f.clean_since = self.clean_since;
                self.note_seqs(&f.msgs);
                self.settle_arrangements(&mut f);
                out.push(*f);
                empty_run = 0;
                k += 1;
            } else if empty_run < MAX_SKIP && self.fill_left > 0 && self.silent_to.is_none_or(|s| k > s) {
                self.fill_left -= 1;
                self.age_seqs(k);
                let mut f = Fragment {
                    covered: (k.saturating_mul(w), k.saturating_add(1).saturating_mul(w)),
                    seq_before: self.seq_marks.clone(),
                    clean_since: self.clean_since,
                    ..self.fragment(k)
                };
                self.settle_arrangements(&mut f);
                out.push(f);
                empty_run += 1;
                k += 1;
            } else {
                // Up to the next window with data (`open` now starts at
                // window k + 1), or to `upto`.
                let data = self.open.iter().position(Option::is_some);
                let to = data.map_or(upto, |i| k + 1 + i as u64).min(upto);
                self.open.drain(..((to - k - 1) as usize).min(self.open.len()));
                match out.last_mut() {
                    Some(f) if f.stream == Some(self.stream) && f.window + 1 == k => {
                        f.faults.push(format!("stream silent for {} more windows; they are not reported", to - k))
                    }
                    _ => {}
                }
                empty_run = 0;
                k = to;
            }
        }
        self.next = upto;
    }

    /// Notes the last sequence numbers of a window handed over, for the
    /// windows after it.
    fn note_seqs(&mut self, m: &Messages) {
        // (A group's sequence numbers rise in the stream's order: the
        // window's last is the group's.)
        set_marks(&mut self.seq_marks, &mut last_marks(m), |_, _| true);
    }

    /// Drops the groups quiet for `MARK_AGE` windows before window `k`.
    fn age_seqs(&mut self, k: u64) {
        let horizon = mark_horizon(k, self.width);
        self.seq_marks.retain(|m| m.at >= horizon);
    }

    /// The stream is over: hands over everything, marking the last window
    /// `ended` (clean end) or with `fault` (disconnect, decode error).
    pub fn finish(&mut self, clean: bool, fault: Option<&str>, items: &mut Vec<Item>, out: &mut Vec<Fragment>) {
        self.reclaim(items);
        self.stash_messages();
        self.take_patches(u64::MAX, out);
        let last = self.open.iter().rposition(|f| f.is_some()).map(|i| self.next + i as u64);
        if let Some(last) = last {
            if let Some(Some(f)) = self.open.get_mut((last - self.next) as usize) {
                f.ended = clean;
                if let Some(why) = fault {
                    f.faults.push(why.to_string());
                }
            }
            self.take_below(last + 1, out);
        }
    }

    /// The last sequence numbers of the windows handed over (see
    /// `Fragment::seq_before`): after `finish`, what the stream's end marker
    /// carries to the windows after it.
    pub fn last_marks(&self) -> Vec<SeqMark> {
        self.seq_marks.clone()
    }

    /// Index of the first window not handed over yet.
    pub fn next_window(&self) -> u64 {
        self.next
    }

    /// The windows below this one are handed over for good: none can be
    /// revised any more ([`Windower::revise_within`]).
    pub fn final_below(&self) -> u64 {
        self.next.saturating_sub(self.revise)
    }

    pub fn started(&self) -> bool {
        self.started
    }
}

/// Each of `m`'s groups' last sequence number, and when it was sent or
/// read.
fn last_marks(m: &Messages) -> Vec<SeqMark> {
    let last = |g: &MsgGroup| {
        let e = g.entries.last()?;
        Some(SeqMark { half: g.half, channel: g.channel, other: g.other, seq: e.seq, at: m.time(g.half, e) })
    };
    m.groups.iter().filter_map(last).collect()
}

/// Sets each of `updates`' groups in `marks` (sorted by group, each group
/// once): added where absent, else put in place of the mark there when
/// `replace(old, new)`; updates of one group each in turn. One pass over
/// both, O(marks + updates): not a sort of all of them.
fn set_marks(marks: &mut Vec<SeqMark>, updates: &mut [SeqMark], replace: impl Fn(&SeqMark, &SeqMark) -> bool) {
    if updates.is_empty() {
        return;
    }
    let key = |m: &SeqMark| (m.half, m.channel, m.other);
    // (Stable: updates of one group keep their order.)
    updates.sort_by_key(key);
    let old = std::mem::take(marks);
    let mut out = Vec::with_capacity(old.len() + updates.len());
    let mut i = 0;
    for &u in updates.iter() {
        while i < old.len() && key(&old[i]) < key(&u) {
            out.push(old[i]);
            i += 1;
        }
        match out.last_mut() {
            Some(last) if key(last) == key(&u) => {
                if replace(last, &u) {
                    *last = u;
                }
            }
            _ if i < old.len() && key(&old[i]) == key(&u) => {
                out.push(if replace(&old[i], &u) { u } else { old[i] });
                i += 1;
            }
            _ => out.push(u),
        }
    }
    out.extend_from_slice(&old[i..]);
    *marks = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::model::{Busy, GapEnd};

    #[test]
    fn items_split_across_windows_and_handed_over_in_order() {
        let sid = Sid { host: 1, process: 1, worker: 0 };
        let mut w = Windower::new(sid, 100);
        let mut items = vec![
            Item::Busy { start: 10, end: 250, what: Busy::Operator(1) },
            Item::Gap { start: 250, end: 300, cause_until: 250, next: GapEnd::NoCause },
        ];
        w.start_at(10);
        w.message(200, Half::PSend, 0, 0, 0);
        assert_eq!(w.add(&mut items), 0);
        w.count(150, &Counters { records: 3, ..Default::default() });
        let mut out = vec![];
        w.take_ready(199, &mut items, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].covered, (10, 100));
        w.take_ready(300, &mut items, &mut out);
        assert_eq!(out.iter().map(|f| f.window).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(out[1].counters.records, 3);
        // busy tail and gap; the gap ends exactly at 300: not in window 3
        assert_eq!(out[2].items.len(), 2);
        assert_eq!(out[2].msgs.iter().collect::<Vec<_>>(), vec![(Half::PSend, 0, 0, 0, 200)]);
        // A message for a window handed over is late.
        w.message(50, Half::Recv, 0, 0, 0);
        assert_eq!(w.add(&mut items), 1);
        w.finish(true, None, &mut items, &mut out);
        assert_eq!(out.len(), 3);
    }

    fn busy(start: Ns, end: Ns) -> Item {
        Item::Busy { start, end, what: Busy::Operator(1) }
    }

    /// A stream of 10 ns windows whose first item lies in window 0; the
    /// builder's vector, as `add` leaves it.
    fn started_at_0() -> (Windower, Vec<Item>) {
        let mut w = Windower::new(Sid { host: 1, process: 1, worker: 0 }, 10);
        let mut items = vec![busy(0, 5)];
        w.add(&mut items);
        (w, items)
    }

    #[test]
    fn a_jump_far_ahead_skips_windows_but_keeps_the_ones_after_it() {
        let (mut w, mut items) = started_at_0();
        // 20,000 windows later (more than the 10,000 spelled out): the
        // builder's vector now holds that window's items (lent).
        items.push(busy(200_000, 200_005));
        w.add(&mut items);
        w.message(200_003, Half::Send, 1, 1, 0);
        let mut out = vec![];
        w.take_ready(200_000, &mut items, &mut out);
        // Window 0, then 10,000 empty ones; the rest of the silence is not
        // reported, and the last one handed over says so.
        assert_eq!(out.len(), 10_001);
        assert_eq!(out.last().unwrap().window, 10_000);
        assert!(out.last().unwrap().faults.iter().any(|f| f.contains("silent for 9999 more windows")));
        // The window at 200,000 is still open and gets more items.
        items.push(busy(200_005, 200_008));
        assert_eq!(w.add(&mut items), 0);
        w.finish(true, None, &mut items, &mut out);
        let last = out.last().unwrap();
        assert_eq!((last.window, last.items.len(), last.msgs.len()), (20_000, 2, 1));
    }

    /// Windows with data after a long silence are handed over whole, even
    /// when they settle together with the silence (the skip stops at them).
    #[test]
    fn windows_with_data_after_a_long_silence_are_never_skipped() {
        let (mut w, mut items) = started_at_0();
        // Windows of data 20,000 and 40,000 windows on, with silence
        // around them, all settled at once.
        items.extend([busy(200_000, 200_005), busy(200_005, 200_015), busy(400_000, 400_004)]);
        assert_eq!(w.add(&mut items), 0);
        let mut out = vec![];
        w.take_ready(400_010, &mut items, &mut out);
        let with_items: Vec<(u64, usize)> =
            out.iter().filter(|f| !f.items.is_empty()).map(|f| (f.window, f.items.len())).collect();
        assert_eq!(with_items, vec![(0, 1), (20_000, 2), (20_001, 1), (40_000, 1)]);
        let notes = out.iter().filter(|f| f.faults.iter().any(|x| x.contains("not reported"))).count();
        assert_eq!(notes, 2, "one note per silence cut short");
        assert!(out.windows(2).all(|p| p[0].window < p[1].window));
        assert_eq!(w.next_window(), 40_001);
    }

    /// A fault over a long silence (records lost before a bogus timestamp
    /// far ahead) marks the windows spelled out and no more: it marked a
    /// window each up to 100,000 (a 2 KB file took a gigabyte and minutes).
    #[test]
    fn a_fault_over_a_long_silence_marks_only_the_windows_spelled_out() {
        let (mut w, mut items) = started_at_0();
        // 9 records lost between window 0 and the next record, 5 M windows on.
        w.fault(5, 50_000_000, "9 records lost");
        items.push(busy(50_000_000, 50_000_005));
        w.add(&mut items);
        let mut out = vec![];
        w.finish(true, None, &mut items, &mut out);
        let windows: Vec<u64> = out.iter().map(|f| f.window).collect();
        assert_eq!(windows.len() as u64, MAX_SPAN + 2, "{:?}", &windows[windows.len().saturating_sub(3)..]);
        assert_eq!(windows.last(), Some(&5_000_000));
        let silence = &out[MAX_SPAN as usize];
        assert!(silence.faults.iter().any(|x| x == "9 records lost"), "{:?}", silence.faults);
        assert!(silence.faults.iter().any(|x| x.contains("not reported")), "{:?}", silence.faults);
    }

    /// Arrangements by window (10 ns): operator 5's trace has 2 handles
    /// from window 0, its last dropped in window 2 (Shares set to 0, with
    /// its records); operator 6's stays. Window 2 reports 5 at its last
    /// levels, windows 3 and 4 report 6 alone (the records of 5's batches
    /// dropped, in window 3, do not bring it back); a program that arranges and
    /// drops more traces over its life than `MAX_ARRANGEMENTS` never has
    /// one refused.
    #[test]
    fn a_trace_whose_last_handle_is_dropped_is_reported_then_forgotten() {
        use ringlog::Figure::{Records, Shares};
        let (mut w, mut items) = started_at_0();
        w.arrangement(1, 5, Records as u32, 40);
        w.arrangement(1, 5, Shares as u32, 2);
        w.arrangement(2, 6, Shares as u32, 1);
        w.arrangement(21, 5, Records as u32, 3);
        w.arrangement(22, 5, Shares as u32, 0);
        // (Its batches' drop, logged after its last handle's, in window 3.)
        w.arrangement(31, 5, Records as u32, 0);
        items.push(busy(5, 45));
        w.add(&mut items);
        let mut out = vec![];
        w.finish(true, None, &mut items, &mut out);
        let ops = |k: usize| out[k].arrangements.iter().map(|a| a.op).collect::<Vec<_>>();
        assert_eq!((ops(0), ops(1), ops(2), ops(3), ops(4)), (vec![5, 6], vec![5, 6], vec![5, 6], vec![6], vec![6]));
        let last = &out[2].arrangements[0];
        assert_eq!((last.values[Shares as usize - 1], last.peak_records), (0, 40));

        let (mut w, mut items) = started_at_0();
        let traces = MAX_ARRANGEMENTS as u64 + 100;
        for op in 1..=traces {
            items.push(busy(op * 10, op * 10 + 9));
            w.add(&mut items);
            w.arrangement(op * 10 + 1, op as u32, Shares as u32, 1);
            w.arrangement(op * 10 + 2, op as u32, Records as u32, 7);
            w.arrangement(op * 10 + 5, op as u32, Shares as u32, 0);
        }
        let mut out = vec![];
        w.finish(true, None, &mut items, &mut out);
        assert_eq!(w.arrangements_refused, 0);
        assert!(out[1..].iter().all(|f| f.arrangements.len() == 1), "each window its one trace");
    }

    /// A bogus timestamp far ahead costs a pointer per window in between,
    /// not a fragment (10 M windows: 80 MB, not gigabytes).
    #[test]
    fn a_far_slot_costs_a_pointer_per_window() {
        assert_eq!(std::mem::size_of::<Option<Box<Fragment>>>(), 8);
    }

    /// A gap the live deadline handed over open comes again, whole, when
    /// it ends: the windows handed over already are skipped, not counted
    /// late; the open ones get it with its first start. A busy piece in a
    /// window handed over is late as ever.
    #[test]
    fn a_gap_handed_over_open_comes_again_whole_into_the_open_windows() {
        let (mut w, mut items) = started_at_0();
        items.push(Item::Gap { start: 5, end: 20, cause_until: 5, next: GapEnd::Open });
        assert_eq!(w.add(&mut items), 0);
        let mut out = vec![];
        w.take_ready(20, &mut items, &mut out);
        assert_eq!(out.iter().map(|f| f.window).collect::<Vec<_>>(), vec![0, 1]);
        items.push(Item::Gap { start: 5, end: 35, cause_until: 5, next: GapEnd::NoCause });
        items.push(busy(35, 40));
        assert_eq!(w.add(&mut items), 0, "not late");
        items.push(busy(15, 16));
        assert_eq!(w.add(&mut items), 1, "late");
        out.clear();
        w.finish(true, None, &mut items, &mut out);
        let gaps: Vec<(u64, Vec<(Ns, Ns)>)> = out
            .iter()
            .map(|f| {
                (
                    f.window,
                    f.items.iter().filter(|i| matches!(i, Item::Gap { .. })).map(|i| (i.start(), i.end())).collect(),
                )
            })
            .collect();
        assert_eq!(gaps, vec![(2, vec![(5, 35)]), (3, vec![(5, 35)])]);
    }

    #[test]
    fn messages_before_the_first_items_go_to_their_windows() {
        let sid = Sid { host: 1, process: 1, worker: 0 };
        let mut w = Windower::new(sid, 100);
        // The stream starts at 50; its first messages come (in windows 1
        // and 2) before any of its items is placed.
        w.start_at(50);
        w.message(120, Half::Send, 3, 1, 0);
        w.message(130, Half::Recv, 3, 1, 0);
        w.message(250, Half::Send, 3, 1, 1);
        let mut items = vec![Item::Busy { start: 50, end: 260, what: Busy::Operator(1) }];
        assert_eq!(w.add(&mut items), 0);
        let mut out = vec![];
        w.finish(true, None, &mut items, &mut out);
        assert_eq!(out.iter().map(|f| f.window).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(out[0].msgs.is_empty());
        let halves = |f: &Fragment| f.msgs.iter().collect::<Vec<_>>();
        assert_eq!(halves(&out[1]), vec![(Half::Send, 3, 1, 0, 120), (Half::Recv, 3, 1, 0, 130)]);
        assert_eq!(out[1].msgs.reads, vec![130]);
        assert_eq!(halves(&out[2]), vec![(Half::Send, 3, 1, 1, 250)]);
        assert_eq!(out[2].covered, (200, 260));
    }

    proptest::proptest! {
        /// `set_marks` gives what a map of the groups gives, updated one
        /// mark after another: each group once, sorted, the rule applied
        /// between a group's marks in the order they came.
        #[test]
        fn set_marks_is_a_map_updated_in_order(
            before in proptest::collection::vec((0u32..3, 0u32..4, 0u64..50), 0..40),
            updates in proptest::collection::vec((0u32..3, 0u32..4, 0u64..50), 0..40),
            raise_only in proptest::bool::ANY,
        ) {
            let mark = |(c, o, seq): (u32, u32, u64)| SeqMark {
                half: if c % 2 == 0 { Half::Send } else { Half::Recv }, channel: c, other: o, seq, at: seq * 10 + 1,
            };
            let replace = |old: &SeqMark, new: &SeqMark| !raise_only || old.seq <= new.seq;
            let mut model: std::collections::BTreeMap<(Half, u32, u32), SeqMark> = Default::default();
            for m in before.iter().copied().map(mark) {
                model.insert((m.half, m.channel, m.other), m);
            }
            let mut marks: Vec<SeqMark> = model.values().copied().collect();
            let mut ups: Vec<SeqMark> = updates.iter().copied().map(mark).collect();
            for u in &ups {
                let e = model.entry((u.half, u.channel, u.other)).or_insert(*u);
                if replace(e, u) {
                    *e = *u;
                }
            }
            set_marks(&mut marks, &mut ups, replace);
            proptest::prop_assert_eq!(marks, model.values().copied().collect::<Vec<_>>());
        }
    }
}
