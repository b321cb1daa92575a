//! Stage 4: messages matched across the window's workers, and when each
//! read's message arrived.
//!
//! Matching by grouping: within one (channel, sender, receiver) the sequence
//! numbers are sent and read in order, so each group is a merge of two
//! sorted lists. Each stream brings its tables already grouped (built at
//! ingest); they join the window's groups through dense indices of the
//! channels and workers seen, and every read has a slot in its receiver's
//! inbox, in the receiver's timeline order, that the matching fills with its
//! arrival. Data messages are point to point; progress is one send, N
//! receives (Sager §4.2.2). What comes out per worker is its [`Inbox`] (what
//! it read, and when each arrived) and its [`ArrivalRuns`] (every message
//! that reached it, read or not): the wait finder's inputs (Sager §5.1).

use super::detail::{Message, WindowDetail};
use super::streams::{Strangers, Streams};
use super::tables::{join, sorted_by_seq, DataGroup, DenseIds, GroupIndex, ProgressReads, ProgressSends};
use crate::analysis::model::{
    give_entries, give_items, take_items, Fragment, Half, Item, Messages, MsgEntry, MsgGroup, MsgKind, Ns, SeqMark, Sid,
};
use crate::analysis::report::MessageCounts;
use crate::analysis::waits::{Arrival, ArrivalRuns, Inbox};
use crate::analysis::whatif::Link;

/// What matching leaves for the wait finder, per stream.
pub(super) struct Matched {
    pub inbox: Vec<Inbox>,
    pub arrivals: Vec<ArrivalRuns>,
    /// The stream's intervals in the window (its fragment's items), and
    /// whether they are in order.
    pub intervals: Vec<(Vec<Item>, bool)>,
    /// Every data message matched between two of the window's workers (for
    /// the what-if replay).
    pub links: Vec<Link>,
    /// The message halves whose other worker is not on this timeline, by
    /// (the process of the stream that has the half, the worker it names).
    pub strangers: Strangers,
}

/// The window's message tables while they are matched.
struct Matching<'a> {
    streams: &'a Streams,
    window: (Ns, Ns),
    /// Per stream: its intervals in the window, and when its messages from
    /// other processes arrived.
    stretches: Stretches,
    inbox: Vec<Inbox>,
    arrivals: Vec<ArrivalRuns>,
    links: Vec<Link>,
    strangers: Strangers,
    chan_ids: DenseIds,
    worker_ids: DenseIds,
    /// Data: (channel, sender, receiver) → group.
    data_ix: GroupIndex,
    data: Vec<DataGroup>,
    /// Progress sends: (channel, sender local) → (sender local, sends).
    pg_ix: GroupIndex,
    pg: Vec<ProgressSends>,
    /// Progress reads: (channel, sender, reader local) → reads.
    pr_ix: GroupIndex,
    pr: Vec<ProgressReads>,
}

/// A sender's last sequence numbers before the window: (its local index, if
/// it has a stream here; its id; its marks).
type SenderMarks<'f> = (Option<usize>, Sid, &'f [SeqMark]);

/// Matches the window's messages: the streams' tables grouped, data matched
/// send to read, progress matched and broadcast, and the messages buffered
/// all through the window put in their readers' inboxes.
pub(super) fn match_messages(
    streams: &Streams,
    frags: &mut [Fragment],
    mut ended_marks: Vec<(Sid, Vec<SeqMark>)>,
    window: (Ns, Ns),
    mc: &mut MessageCounts,
    mut detail: Option<&mut WindowDetail>,
) -> Matched {
    let mut m = Matching::new(streams, window, frags.len());
    m.group_tables(frags, mc);
    m.reserve_arrivals();
    // Every sender's marks: each stream's here, then those of the streams
    // that ended before the window and have none here (their end markers').
    ended_marks.retain(|(s, _)| !streams.sids.contains(s));
    let senders: Vec<SenderMarks> = (0..frags.len())
        .map(|i| (Some(i), streams.sids[i], &frags[i].seq_before[..]))
        .chain(ended_marks.iter().map(|(s, m)| (None, *s, &m[..])))
        .collect();
    m.buffered_data(frags, &senders);
    m.match_data(mc, detail.as_deref_mut());
    m.match_progress_reads(mc);
    m.buffered_progress(frags, &senders);
    m.broadcast_progress();
    m.finish()
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

/// The last sequence number stream `j` had read of (`half`, `channel`,
/// `other`) before the window.
fn seq_before(frags: &[Fragment], j: usize, half: Half, channel: u32, other: u32) -> Option<u64> {
    let marks = &frags[j].seq_before;
    marks.binary_search_by_key(&(half, channel, other), |m| (m.half, m.channel, m.other)).ok().map(|k| marks[k].seq)
}

/// A message read by stream `j` (its read's `slot`, its channel and kind)
/// and sent before the window. Within one process it arrived by the
/// window's start. From another process (`crossed`: the sender's stream)
/// it was in flight at the window's start and arrived when `j` could read
/// it ([`Stretches::arrival`]): an arrival from that sender, the part of
/// its transit inside the window on the path.
fn arrived_from_before(
    stretches: &mut Stretches,
    j: usize,
    crossed: Option<usize>,
    inbox: &mut Inbox,
    arrivals: &mut ArrivalRuns,
    (slot, channel, kind): (usize, u32, MsgKind),
) {
    let ws = stretches.start;
    match crossed {
        Some(i) => {
            let at = stretches.arrival(j, ws, inbox.reads[slot]);
            inbox.arrived[slot] = at;
            arrivals.push(Arrival { at, src: i as u32, channel, kind, sent: ws });
        }
        None => inbox.arrived[slot] = ws,
    }
}

/// Each stream's intervals in the window, and (when first asked) where its
/// busy stretches begin: when its messages from other processes arrived.
struct Stretches {
    intervals: Vec<(Vec<Item>, bool)>,
    /// Per stream: the ends of its gaps, in order.
    gap_ends: Vec<Option<Vec<Ns>>>,
    /// The window's start.
    start: Ns,
}

impl Stretches {
    /// When receiver `j` could first read a message that crossed processes,
    /// sent at `sent` and read at `read` (see [`crate::analysis::waits`]):
    /// the start of `j`'s busy stretch holding the read (the end of the
    /// last gap before it; the window's start if none), never before the
    /// send nor after the read. A receiver polls while it has nothing to
    /// do, so a message there during a gap is read by the work that ends
    /// it.
    fn arrival(&mut self, j: usize, sent: Ns, read: Ns) -> Ns {
        let intervals = &self.intervals[j].0;
        let ends = self.gap_ends[j].get_or_insert_with(|| {
            let mut e: Vec<Ns> =
                intervals.iter().filter_map(|it| matches!(it, Item::Gap { .. }).then(|| it.end())).collect();
            if !e.is_sorted() {
                e.sort_unstable();
            }
            e
        });
        let k = ends.partition_point(|&e| e <= read);
        let stretch = if k == 0 { self.start } else { ends[k - 1] };
        stretch.max(sent).min(read)
    }
}

impl<'a> Matching<'a> {
    fn new(streams: &'a Streams, window: (Ns, Ns), n: usize) -> Self {
        Matching {
            streams,
            window,
            stretches: Stretches { intervals: Vec::with_capacity(n), gap_ends: vec![None; n], start: window.0 },
            inbox: (0..n).map(|_| Inbox::default()).collect(),
            arrivals: vec![ArrivalRuns::default(); n],
            links: Vec::new(),
            strangers: Strangers::default(),
            chan_ids: DenseIds::default(),
            worker_ids: DenseIds::default(),
            data_ix: GroupIndex::default(),
            data: Vec::new(),
            pg_ix: GroupIndex::default(),
            pg: Vec::new(),
            pr_ix: GroupIndex::default(),
            pr: Vec::new(),
        }
    }

    /// A message's other end, as a group key names it: the stream that
    /// worker index resolves to from `process` (its local index), else (no
    /// stream here) past the streams, by worker index. Keys name streams,
    /// not worker indices: processes on one host may share worker indices
    /// (independent programs, each with its worker 0), and a group must hold
    /// the halves of one sending and one reading stream, whose tables' slots
    /// it indexes.
    #[inline]
    fn side(&mut self, process: u32, worker: u32) -> u32 {
        let n = self.streams.len() as u32;
        self.streams.resolve(process, worker).map_or_else(|| n + self.worker_ids.id(worker), |i| i as u32)
    }

    /// The sender's side in a reader's group keys (as [`Self::side`] gave
    /// it; None: the reader read nothing of it here).
    fn sender_side(&self, i: Option<usize>, reader: usize, worker: u32) -> Option<u32> {
        let n = self.streams.len() as u32;
        match i {
            Some(i) => Some(i as u32),
            None => self
                .streams
                .resolve(self.streams.pk[reader], worker)
                .map(|x| x as u32)
                .or_else(|| self.worker_ids.find(worker).map(|d| n + d)),
        }
    }

    /// Takes each stream's items (as window intervals) and message tables;
    /// every table joins the window's group of its (channel, sender,
    /// receiver), every read gets its slot in the reader's inbox.
    fn group_tables(&mut self, frags: &mut [Fragment], mc: &mut MessageCounts) {
        let (ws, we) = self.window;
        for (i, f) in frags.iter_mut().enumerate() {
            self.stretches.intervals.push(window_intervals(std::mem::take(&mut f.items), ws, we));
            let mut m = std::mem::take(&mut f.msgs);
            if m.moved {
                in_window(&mut m, ws, we);
            }
            let ib = &mut self.inbox[i];
            ib.reads = m.reads;
            ib.arrived.resize(ib.reads.len(), ws);
            for group in m.groups {
                self.join_group(i, group, mc);
            }
        }
    }

    /// Whether a message from stream `i` to stream `j` crosses processes
    /// (or hosts): its transit is not shared memory.
    #[inline]
    fn crosses(&self, i: usize, j: usize) -> bool {
        self.streams.pk[i] != self.streams.pk[j]
    }

    /// One table of stream `i` into the window's group of its key.
    #[inline]
    fn join_group(&mut self, i: usize, MsgGroup { half, channel, other, entries }: MsgGroup, mc: &mut MessageCounts) {
        let me = self.streams.sids[i].worker;
        let proc_i = self.streams.pk[i];
        match half {
            Half::Send | Half::Recv => {
                let (from, to) = if half == Half::Send { (me, other) } else { (other, me) };
                let key = if half == Half::Send {
                    [self.chan_ids.id(channel), i as u32, self.side(proc_i, to)]
                } else {
                    [self.chan_ids.id(channel), self.side(proc_i, from), i as u32]
                };
                let g = self.data_ix.get(key, self.data.len());
                if g == self.data.len() {
                    self.data.push(DataGroup::new((channel, from, to)));
                }
                let d = &mut self.data[g];
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
                let g = self.pg_ix.get([self.chan_ids.id(channel), i as u32, 0], self.pg.len());
                if g == self.pg.len() {
                    self.pg.push((channel, me, i, Vec::new()));
                }
                join(&mut self.pg[g].3, entries);
            }
            Half::PRecv => {
                mc.progress_received += entries.len() as u64;
                let (cd, fd) = (self.chan_ids.id(channel), self.side(proc_i, other));
                let g = self.pr_ix.get([cd, fd, i as u32], self.pr.len());
                if g == self.pr.len() {
                    let key = (cd, fd);
                    self.pr.push(ProgressReads { channel, from: other, j: i, key, reads: Vec::new(), max_seq: 0 });
                }
                join(&mut self.pr[g].reads, entries);
            }
        }
    }

    fn reserve_arrivals(&mut self) {
        let psends: usize = self.pg.iter().map(|g| g.3.len()).sum();
        for (a, b) in self.arrivals.iter_mut().zip(&self.inbox) {
            a.list.reserve(b.reads.len() + psends);
        }
    }

    /// Data messages buffered all through the window: sent before it and not
    /// read by its end, so neither half is here, yet the reader was not
    /// waiting (Sager §5.1 condition 2; Def. 3.5 projects such an edge onto
    /// the whole window). Seen from the last sequence numbers before the
    /// window (`Fragment::seq_before`): the sender's past everything the
    /// reader read by the window's end (a group's sequence numbers are sent
    /// and read in order: its last read is its highest). Only where the
    /// reader's record is whole since the send (`Fragment::clean_since`): a
    /// read lost, late, or made before its stream began would otherwise
    /// leave it "buffered" window after window.
    fn buffered_data(&mut self, frags: &[Fragment], senders: &[SenderMarks]) {
        let ws = self.window.0;
        for &(i, sender, marks) in senders {
            for m in marks.iter().filter(|m| m.half == Half::Send) {
                let Some(j) = self.streams.resolve(self.streams.key_of(sender), m.other) else { continue };
                // Between processes a message unread here has no known
                // arrival: not buffered ([`Stretches::arrival`]).
                if m.at < frags[j].clean_since || self.streams.pk[j] != self.streams.key_of(sender) {
                    continue;
                }
                let read_before = seq_before(frags, j, Half::Recv, m.channel, sender.worker);
                let read_here = self
                    .chan_ids
                    .find(m.channel)
                    .zip(self.sender_side(i, j, sender.worker))
                    .and_then(|(c, s)| self.data_ix.find([c, s, j as u32]))
                    .and_then(|g| self.data[g].reads.last().map(|r| r.seq));
                if read_before.max(read_here).is_none_or(|r| m.seq > r) {
                    self.inbox[j].push(ws, Ns::MAX);
                }
            }
        }
    }

    /// Data groups, each a merge of its sends and reads by sequence number:
    /// matched pairs give their read its arrival (and the reader an
    /// arrival), sends not read here are in flight (arrived, unread), reads
    /// not sent here came from before the window (or another timeline).
    fn match_data(&mut self, mc: &mut MessageCounts, mut detail: Option<&mut WindowDetail>) {
        // Group order decides only the order of `detail.messages`: by key
        // (then by stream, for processes that share worker indices).
        let mut data = std::mem::take(&mut self.data);
        data.sort_unstable_by_key(|g| (g.key, g.si, g.ri));
        for mut group in data {
            if !sorted_by_seq(&group.sends, |s| s.seq) {
                group.sends.sort();
            }
            // (By seq, then slot: the stream's order, in which read times
            // never decrease.)
            if !sorted_by_seq(&group.reads, |r| r.seq) {
                group.reads.sort();
            }
            self.merge_data_group(&group, mc, detail.as_deref_mut());
            give_entries(group.sends);
            give_entries(group.reads);
        }
    }

    fn merge_data_group(&mut self, group: &DataGroup, mc: &mut MessageCounts, mut detail: Option<&mut WindowDetail>) {
        let DataGroup { key: (channel, from, to), si, ref sends, ri, ref reads } = *group;
        let streams = self.streams;
        // The worker each side is on (the reader may be absent: another host).
        let src = si.or_else(|| ri.and_then(|j| streams.resolve(streams.pk[j], from)));
        let dst = ri.or_else(|| si.and_then(|i| streams.resolve(streams.pk[i], to)));
        if let Some(j) = dst {
            self.arrivals[j].start_run();
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
                    let read = self.inbox[j].reads[slot];
                    if sent > read {
                        mc.read_before_send += 1;
                    }
                    // read before sent (clock trouble): the edge is clamped to the read
                    let sent = sent.min(read);
                    let at = if self.crosses(i, j) { self.stretches.arrival(j, sent, read) } else { sent };
                    self.inbox[j].arrived[slot] = at;
                    if i == j {
                        mc.data_worker_local += 1;
                    } else {
                        if let Some(d) = detail.as_deref_mut() {
                            let (src, dst) = (i as u32, j as u32);
                            d.messages.push(Message { src, dst, sent, read, channel, kind: MsgKind::Data });
                        }
                        self.arrivals[j].push(Arrival { at, src: i as u32, channel, kind: MsgKind::Data, sent });
                        self.links.push(Link { src: i as u32, sent, dst: j as u32, read });
                    }
                    a += 1;
                    b += 1;
                }
                (Some(s), r) if r.is_none_or(|r| s.seq < r.seq) => {
                    // sent here, not read in this window
                    let i = si.unwrap();
                    match dst {
                        // Between processes, still in flight: no arrival known.
                        Some(j) if self.crosses(i, j) => mc.data_in_flight += 1,
                        Some(j) => {
                            mc.data_in_flight += 1;
                            self.inbox[j].push(s.at, Ns::MAX);
                            if i == j {
                                mc.data_worker_local += 1;
                            } else {
                                let arrival = Arrival::local(s.at, i as u32, channel, MsgKind::Data);
                                self.arrivals[j].push(arrival);
                            }
                        }
                        None if streams.own_worker(i, to) => mc.data_in_flight += 1,
                        None => {
                            mc.data_unmatched += 1;
                            self.strangers.add(streams.pk[i], to);
                        }
                    }
                    a += 1;
                }
                (_, Some(r)) => {
                    // read here, sent before the window (or not on this timeline)
                    let j = ri.unwrap();
                    if src.is_some() || streams.own_worker(j, from) {
                        mc.data_from_before += 1;
                    } else {
                        mc.data_unmatched += 1;
                        self.strangers.add(streams.pk[j], from);
                    }
                    let crossed = src.filter(|&i| self.crosses(i, j));
                    let (inbox, arrivals) = (&mut self.inbox[j], &mut self.arrivals[j]);
                    let msg = (r.at as usize, channel, MsgKind::Data);
                    arrived_from_before(&mut self.stretches, j, crossed, inbox, arrivals, msg);
                    b += 1;
                }
                _ => break,
            }
        }
    }

    /// Progress reads matched to their sends (one send, N receives: Sager
    /// §4.2.2). A read of another process's progress is an arrival from it.
    fn match_progress_reads(&mut self, mc: &mut MessageCounts) {
        let streams = self.streams;
        let pg_strict: Vec<bool> = self.pg.iter().map(|g| g.3.windows(2).all(|p| p[0].seq < p[1].seq)).collect();
        for g in self.pr.iter_mut() {
            let ProgressReads { channel, from, j, key: (cd, fd), ref mut reads, ref mut max_seq } = *g;
            if !sorted_by_seq(reads, |r| r.seq) {
                reads.sort();
            }
            *max_seq = reads.last().map_or(0, |r| r.seq);
            let gi = self.pg_ix.find([cd, fd, 0]);
            let group = gi.map(|g| &self.pg[g]);
            // Sends in strictly increasing sequence (as sent, the usual
            // case): the reads, sorted, find theirs by walking forward.
            let strict = gi.is_some_and(|g| pg_strict[g]);
            let mut k = 0;
            self.arrivals[j].start_run();
            for &MsgEntry { seq: q, at: slot } in reads.iter() {
                let r = self.inbox[j].reads[slot as usize];
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
                        let sent = s.min(r);
                        if streams.pk[i] != streams.pk[j] {
                            let at = self.stretches.arrival(j, sent, r);
                            self.inbox[j].arrived[slot as usize] = at;
                            self.arrivals[j].push(Arrival {
                                at,
                                src: i as u32,
                                channel,
                                kind: MsgKind::Progress,
                                sent,
                            });
                        } else {
                            self.inbox[j].arrived[slot as usize] = sent;
                        }
                    }
                    _ => {
                        let i = group.map(|g| g.2).or_else(|| streams.resolve(streams.pk[j], from));
                        if i.is_some() || streams.own_worker(j, from) {
                            mc.progress_from_before += 1;
                        } else {
                            mc.progress_unmatched += 1;
                            self.strangers.add(streams.pk[j], from);
                        }
                        let crossed = i.filter(|&i| streams.pk[i] != streams.pk[j]);
                        let (inbox, arrivals) = (&mut self.inbox[j], &mut self.arrivals[j]);
                        let msg = (slot as usize, channel, MsgKind::Progress);
                        arrived_from_before(&mut self.stretches, j, crossed, inbox, arrivals, msg);
                    }
                }
            }
        }
    }

    /// Progress buffered all through the window (as data in
    /// [`Self::buffered_data`]): every other worker of the sender's process
    /// gets each progress message. (The cluster's other processes get it
    /// too, but a message between processes unread here has no known
    /// arrival: [`Stretches::arrival`].)
    fn buffered_progress(&mut self, frags: &[Fragment], senders: &[SenderMarks]) {
        let streams = self.streams;
        let ws = self.window.0;
        for &(i, sender, marks) in senders {
            for m in marks.iter().filter(|m| m.half == Half::PSend) {
                let p = streams.key_of(sender);
                let own = streams.procs.get(p as usize).map_or(&[][..], |v| &v[..]);
                let receivers = own.iter().copied().filter(|&j| Some(j) != i);
                for j in receivers.filter(|&j| m.at >= frags[j].clean_since) {
                    let read_before = seq_before(frags, j, Half::PRecv, m.channel, sender.worker);
                    let read_here = self
                        .chan_ids
                        .find(m.channel)
                        .zip(self.sender_side(i, j, sender.worker))
                        .and_then(|(c, s)| self.pr_ix.find([c, s, j as u32]))
                        .map(|g| self.pr[g].max_seq);
                    if read_before.max(read_here).is_none_or(|r| m.seq > r) {
                        self.inbox[j].push(ws, Ns::MAX);
                    }
                }
            }
        }
    }

    /// Every progress send reaches every other worker of its process: an
    /// arrival at send time (shared memory), unread past what the reader
    /// read. It also reaches the workers of the cluster's other processes;
    /// those arrivals are the reads matched in
    /// [`Self::match_progress_reads`] (between processes the arrival is
    /// not the send: [`Stretches::arrival`]).
    fn broadcast_progress(&mut self) {
        let streams = self.streams;
        let mut pg = std::mem::take(&mut self.pg);
        for (channel, _, i, sends) in pg.iter_mut() {
            if !sorted_by_seq(sends, |s| s.seq) {
                sends.sort();
            }
            let cd = self.chan_ids.id(*channel);
            for &j in &streams.procs[streams.pk[*i] as usize] {
                if j == *i {
                    continue;
                }
                let read_upto = self.pr_ix.find([cd, *i as u32, j as u32]).map(|g| self.pr[g].max_seq);
                self.arrivals[j].start_run();
                for &MsgEntry { seq: q, at: s } in sends.iter() {
                    let arrival = Arrival::local(s, *i as u32, *channel, MsgKind::Progress);
                    self.arrivals[j].push(arrival);
                    if read_upto.is_none_or(|m| q > m) {
                        self.inbox[j].push(s, Ns::MAX);
                    }
                }
            }
            // The cluster's other processes matched the reads they made
            // above; what they did not read is in flight between processes,
            // with no arrival known (`waits`: transit between processes).
        }
        self.pg = pg;
    }

    /// Arrivals and inboxes in time order; the message tables are done with
    /// and freed before the graph is laid out (a window's peak memory, and
    /// pages the graph can reuse).
    fn finish(mut self) -> Matched {
        for a in self.arrivals.iter_mut() {
            a.prepare();
        }
        for b in self.inbox.iter_mut() {
            b.prepare();
        }
        for (.., sends) in self.pg {
            give_entries(sends);
        }
        for g in self.pr {
            give_entries(g.reads);
        }
        Matched {
            inbox: self.inbox,
            arrivals: self.arrivals,
            intervals: self.stretches.intervals,
            links: self.links,
            strangers: self.strangers,
        }
    }
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
