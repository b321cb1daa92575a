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
//!
//! The tables are grouped here, one stream after another; the phases after
//! that work per receiver ([`receivers`]) and, with a crew, run in two
//! halves of the receivers side by side.

mod receivers;

use std::sync::Arc;

use super::detail::WindowDetail;
use super::streams::{Strangers, Streams};
use super::tables::{join, sorted_by_seq, DataGroup, DenseIds, GroupIndex, ProgressReads, ProgressSends};
use crate::analysis::crew::{self, Crew};
use crate::analysis::model::{
    give_items, take_items, Fragment, Half, Item, Messages, MsgEntry, MsgGroup, MsgKind, Ns, SeqMark, Sid,
};
use crate::analysis::report::MessageCounts;
use crate::analysis::waits::{shared_run, Arrival, ArrivalRuns, Inbox};
pub(super) use receivers::Links;
use receivers::{Receivers, Shared};

/// What matching leaves for the wait finder, per stream.
pub(super) struct Matched {
    pub inbox: Vec<Inbox>,
    pub arrivals: Vec<ArrivalRuns>,
    /// The stream's intervals in the window (its fragment's items), and
    /// whether they are in order.
    pub intervals: Vec<(Vec<Item>, bool)>,
    /// Every data message matched between two of the window's workers (for
    /// the what-if replay).
    pub links: Links,
    /// The message halves whose other worker is not on this timeline, by
    /// (the process of the stream that has the half, the worker it names).
    pub strangers: Strangers,
}

/// The window's message tables while they are grouped.
struct Matching<'a> {
    streams: &'a Streams,
    window: (Ns, Ns),
    /// Per stream: its intervals in the window.
    intervals: Vec<(Vec<Item>, bool)>,
    inbox: Vec<Inbox>,
    arrivals: Vec<ArrivalRuns>,
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

/// Matches the window's messages: the streams' tables grouped, the
/// messages buffered all through the window put in their readers' inboxes,
/// data matched send to read, progress matched and broadcast (the last
/// three per receiver: in two halves when a `crew` is given and no
/// `detail` asked for, one offered to the crew).
pub(super) fn match_messages(
    streams: &Arc<Streams>,
    frags: &mut [Fragment],
    mut ended_marks: Vec<(Sid, Vec<SeqMark>)>,
    window: (Ns, Ns),
    mc: &mut MessageCounts,
    detail: Option<&mut WindowDetail>,
    crew: Option<&Arc<Crew>>,
) -> Matched {
    let mut m = Matching::new(streams, window, frags.len());
    m.group_tables(frags, mc, crew);
    m.reserve_arrivals();
    // Every sender's marks: each stream's here, then those of the streams
    // that ended before the window and have none here (their end markers').
    ended_marks.retain(|(s, _)| !streams.sids.contains(s));
    let senders: Vec<SenderMarks> = (0..frags.len())
        .map(|i| (Some(i), streams.sids[i], &frags[i].seq_before[..]))
        .chain(ended_marks.iter().map(|(s, m)| (None, *s, &m[..])))
        .collect();
    m.buffered_data(frags, &senders);
    let pr_max = m.progress_read_max();
    m.buffered_progress(frags, &senders, &pr_max);
    let (shared, receivers) = m.into_receivers(streams.clone(), pr_max);
    let shared = Arc::new(shared);
    let part = run_receivers(&shared, receivers, detail, crew);
    if let Ok(shared) = Arc::try_unwrap(shared) {
        shared.give_back();
    }
    part.into_matched(mc)
}

/// The per-receiver phases over all the receivers: in two halves when a
/// `crew` is given and no `detail` asked for (the detail's messages are in
/// one run's order), the second offered to the crew.
fn run_receivers(
    shared: &Arc<Shared>,
    mut receivers: Receivers,
    detail: Option<&mut WindowDetail>,
    crew: Option<&Arc<Crew>>,
) -> receivers::Part {
    match crew.filter(|_| detail.is_none() && receivers.len() >= 2) {
        None => receivers.run(shared, detail),
        Some(crew) => {
            let second = receivers.split_off(receivers.half_of_the_reads());
            let there = shared.clone();
            let (mut first, second, _) =
                crew::join(Some(crew), || receivers.run(shared, None), move || second.run(&there, None));
            first.append(second);
            first
        }
    }
}

/// A fragment's items as the window's intervals (the items overlapping it:
/// all of them, but for a defensive check), and whether they are in order.
fn window_intervals(items: Vec<Item>, ws: Ns, we: Ns) -> (Vec<Item>, bool) {
    let inside = |it: &Item| it.end() > ws && it.start() < we;
    let in_order = |items: &[Item]| items.windows(2).all(|p| (p[0].start(), p[0].end()) <= (p[1].start(), p[1].end()));
    // (Both checked in one pass over the items, the usual case: a window's
    // items are tens of MB, and this runs at the window's owner before its
    // matching can start; two passes took 9.6 ms on 4 M records.)
    let (mut all_inside, mut sorted, mut last) = (true, true, (0, 0));
    for it in &items {
        let key = (it.start(), it.end());
        all_inside &= key.1 > ws && key.0 < we;
        sorted &= last <= key;
        last = key;
    }
    if all_inside {
        return (items, sorted);
    }
    let mut v = take_items();
    v.extend(items.iter().filter(|it| inside(it)));
    give_items(items);
    let sorted = in_order(&v);
    (v, sorted)
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

impl<'a> Matching<'a> {
    fn new(streams: &'a Streams, window: (Ns, Ns), n: usize) -> Self {
        Matching {
            streams,
            window,
            intervals: Vec::with_capacity(n),
            inbox: (0..n).map(|_| Inbox::default()).collect(),
            arrivals: vec![ArrivalRuns::default(); n],
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
    /// receiver), every read gets its slot in the reader's inbox. With a
    /// `crew`, the items of the streams' second half are checked there
    /// meanwhile (each stream's alone: a pass over tens of MB a window, 7
    /// ms of a 4 M-record window's serial start).
    fn group_tables(&mut self, frags: &mut [Fragment], mc: &mut MessageCounts, crew: Option<&Arc<Crew>>) {
        let (ws, we) = self.window;
        let mut items: Vec<Vec<Item>> = frags.iter_mut().map(|f| std::mem::take(&mut f.items)).collect();
        let cut = match crew {
            Some(_) if items.len() >= 2 => crew::half_by_weight(items.len(), |j| items[j].len()),
            _ => items.len(),
        };
        let second = items.split_off(cut);
        let intervals = move |items: Vec<Vec<Item>>| -> Vec<(Vec<Item>, bool)> {
            items.into_iter().map(|it| window_intervals(it, ws, we)).collect()
        };
        let (first, second, _) = crew::join(
            crew.filter(|_| !second.is_empty()),
            || {
                let first = intervals(items);
                self.take_messages(frags, mc);
                first
            },
            move || intervals(second),
        );
        self.intervals.extend(first.into_iter().chain(second));
    }

    /// Each stream's message tables into the window's groups and inboxes.
    fn take_messages(&mut self, frags: &mut [Fragment], mc: &mut MessageCounts) {
        let (ws, we) = self.window;
        for (i, f) in frags.iter_mut().enumerate() {
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
                    self.pr.push(ProgressReads { channel, from: other, j: i, key, reads: Vec::new() });
                }
                join(&mut self.pr[g].reads, entries);
            }
        }
    }

    /// Room in each receiver's arrivals for its reads. (The progress its
    /// process's other workers sent reaches it too, but as runs shared with
    /// every worker they reach: [`Shared::pg_arrivals`].)
    fn reserve_arrivals(&mut self) {
        for (a, b) in self.arrivals.iter_mut().zip(&self.inbox) {
            a.list.reserve(b.reads.len());
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

    /// Each progress read group's highest sequence number read (what the
    /// messages buffered through the window and the broadcast compare
    /// with).
    fn progress_read_max(&self) -> Vec<u64> {
        self.pr.iter().map(|g| g.reads.iter().map(|r| r.seq).max().unwrap_or(0)).collect()
    }

    /// Progress buffered all through the window (as data in
    /// [`Self::buffered_data`]): every other worker of the sender's process
    /// gets each progress message. (The cluster's other processes get it
    /// too, but a message between processes unread here has no known
    /// arrival: [`Stretches::arrival`].)
    fn buffered_progress(&mut self, frags: &[Fragment], senders: &[SenderMarks], pr_max: &[u64]) {
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
                        .map(|g| pr_max[g]);
                    if read_before.max(read_here).is_none_or(|r| m.seq > r) {
                        self.inbox[j].push(ws, Ns::MAX);
                    }
                }
            }
        }
    }

    /// The tables every receiver reads, and all the receivers with the
    /// groups each one reads: the data groups in key order (then by
    /// stream, for processes that share worker indices: the order of
    /// `detail.messages`), each with its receiver (the sender's stream
    /// where the reader is not here).
    fn into_receivers(self, streams: Arc<Streams>, pr_max: Vec<u64>) -> (Shared, Receivers) {
        let mut data = self.data;
        data.sort_unstable_by_key(|g| (g.key, g.si, g.ri));
        let receiver = |g: &DataGroup| {
            let (_, _, to) = g.key;
            g.ri.or_else(|| g.si.and_then(|i| streams.resolve(streams.pk[i], to))).unwrap_or(0)
        };
        let data: Vec<(u32, usize, DataGroup)> =
            data.into_iter().enumerate().map(|(k, g)| (k as u32, receiver(&g), g)).collect();
        let data_groups = data.len() as u32;
        let pr: Vec<(u32, ProgressReads)> =
            self.pr.into_iter().enumerate().map(|(k, g)| (data_groups + k as u32, g)).collect();
        // (Read groups find their sends as sent, in the order the streams
        // brought them; the broadcast walks them in sequence order.)
        let pg_strict = self.pg.iter().map(|g| g.3.windows(2).all(|p| p[0].seq < p[1].seq)).collect();
        let pg_sorted = self
            .pg
            .iter()
            .map(|g| {
                (!sorted_by_seq(&g.3, |s| s.seq)).then(|| {
                    let mut v = g.3.clone();
                    v.sort();
                    v
                })
            })
            .collect();
        let pg_channel = receivers::channels_of(&self.pg, &self.chan_ids);
        // (Each group's arrivals once, for every worker it reaches.)
        let pg_arrivals = (self.pg.iter())
            .map(|&(channel, _, i, ref sends)| {
                let arrival = |e: &MsgEntry| Arrival::local(e.at, i as u32, channel, MsgKind::Progress);
                shared_run(sends.iter().map(arrival).collect())
            })
            .collect();
        let shared = Shared {
            streams,
            pg_ix: self.pg_ix,
            pg: self.pg,
            pg_strict,
            pg_sorted,
            pg_channel,
            pg_arrivals,
            pr_ix: self.pr_ix,
            pr_max,
        };
        let all = Receivers::all(self.inbox, self.arrivals, self.intervals, data, pr, self.window);
        (shared, all)
    }
}

/// For a test elsewhere (the analysis may not build traces itself): the
/// matching of window `index`'s fragments run whole and in two halves of
/// its receivers (the second offered to a crew no other thread serves, so
/// taken back and run here too), each as text: inboxes, arrivals, links
/// in order, strangers, counts; and whether the window had strangers and
/// arrivals between processes. `None` for a window of one stream.
#[cfg(test)]
pub(crate) fn whole_and_halved(index: u64, width: Ns, frags: Vec<Fragment>) -> Option<(String, String, bool, bool)> {
    let merged = super::fragments::merge_fragments(index, width, frags);
    let streams = Arc::new(Streams::new(1, &merged.frags));
    if streams.len() < 2 {
        return None;
    }
    let window = (index * width, (index + 1) * width);
    let run = |crew: Option<&Arc<Crew>>| {
        let mut frags = merged.frags.clone();
        let mut mc = MessageCounts::default();
        let mut m = match_messages(&streams, &mut frags, merged.ended_marks.clone(), window, &mut mc, None, crew);
        let crossed = (m.arrivals.iter().enumerate())
            .any(|(j, a)| a.list.iter().any(|x| streams.pk[x.src as usize] != streams.pk[j]));
        let strangers = !m.strangers.by_worker.is_empty();
        let inbox: Vec<_> = m.inbox.iter().map(|b| (&b.reads, &b.arrived, b.unread)).collect();
        let arrivals: Vec<_> = m.arrivals.iter().map(|a| (&a.list, &a.shared, a.runs())).collect();
        let intervals: Vec<_> = m.intervals.iter().map(|(v, s)| (v.len(), *s)).collect();
        let mut by_worker: Vec<_> = m.strangers.by_worker.iter().collect();
        by_worker.sort();
        let links = std::mem::take(&mut m.links).in_order();
        let text =
            format!("{inbox:?}\n{arrivals:?}\n{intervals:?}\n{links:?}\n{by_worker:?} {}\n{mc:?}", m.strangers.others);
        (text, strangers, crossed)
    };
    let (whole, strangers, crossed) = run(None);
    let crew = Arc::new(Crew::default());
    let (halved, ..) = run(Some(&crew));
    assert!(crew.counts().0 > 0, "the second half was offered");
    Some((whole, halved, strangers, crossed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::model::{Busy, GapEnd, MsgEntry};

    /// A progress update's arrivals at the other workers of its process
    /// are one list that they share, and other processes' progress is in
    /// none of them: a copy per receiver made a process of P workers cost
    /// P² arrivals, and a reservation counting every process's progress at
    /// every receiver took 450 MB for 200 k records of a thousand streams
    /// in 125 processes.
    #[test]
    fn progress_arrivals_are_shared_within_a_process_and_kept_to_it() {
        // `processes` processes of three workers each (numbered across the
        // cluster), every worker sending 100 progress updates.
        let arrivals = |processes: u32| {
            let mut frags: Vec<Fragment> = (0..3 * processes)
                .map(|w| {
                    let stream = Some(Sid { host: 1, process: w / 3, worker: w });
                    let mut f = Fragment { stream, covered: (0, 1_000), ..Default::default() };
                    let g = f.msgs.group(Half::PSend, 0, 0);
                    for k in 0..100 {
                        f.msgs.push(g, k, 10 + k);
                    }
                    f
                })
                .collect();
            let streams = Arc::new(Streams::new(1, &frags));
            let mut mc = MessageCounts::default();
            match_messages(&streams, &mut frags, Vec::new(), (0, 1_000), &mut mc, None, None).arrivals
        };
        for processes in [1, 40] {
            let all = arrivals(processes);
            for (j, a) in all.iter().enumerate() {
                // Its two peers' updates, nothing copied into its own list.
                assert_eq!((a.len(), a.shared.len(), a.list.capacity()), (200, 2, 0), "receiver {j}");
                assert!(a.shared.iter().flat_map(|r| r.iter()).all(|x| x.src as usize / 3 == j / 3));
            }
            // Worker 0's updates: one list for workers 1 and 2.
            let of_0 = |j: usize| all[j].shared.iter().find(|r| r[0].src == 0).expect("worker 0's run").clone();
            assert!(Arc::ptr_eq(&of_0(1), &of_0(2)));
        }
    }

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

    /// The one-pass check of a stream's items against the window [100,
    /// 200): kept whole when all overlap it, in order or not; filtered when
    /// some do not, and the order judged on what is kept.
    #[test]
    fn items_are_kept_whole_or_filtered_and_their_order_judged() {
        let busy = |start, end| Item::Busy { start, end, what: Busy::Operator(1) };
        let gap = |start, end| Item::Gap { start, end, cause_until: start, next: GapEnd::NoCause };
        let keys = |v: &[Item]| v.iter().map(|i| (i.start(), i.end())).collect::<Vec<_>>();
        // In order, all inside (one starts before the window and ends in it).
        let (v, sorted) = window_intervals(vec![busy(90, 110), gap(110, 150), busy(150, 199)], 100, 200);
        assert_eq!((keys(&v), sorted), (vec![(90, 110), (110, 150), (150, 199)], true));
        // The same start, ends out of order: not sorted.
        let (v, sorted) = window_intervals(vec![busy(120, 150), gap(120, 130)], 100, 200);
        assert_eq!((keys(&v), sorted), (vec![(120, 150), (120, 130)], false));
        // Out of order only through an item outside the window: filtered,
        // then in order.
        let (v, sorted) = window_intervals(vec![busy(120, 130), busy(300, 310), gap(140, 150)], 100, 200);
        assert_eq!((keys(&v), sorted), (vec![(120, 130), (140, 150)], true));
        // Filtered and still out of order.
        let (v, sorted) = window_intervals(vec![busy(150, 160), busy(10, 20), gap(120, 130)], 100, 200);
        assert_eq!((keys(&v), sorted), (vec![(150, 160), (120, 130)], false));
        // An item ending at the window's start does not overlap it.
        let (v, sorted) = window_intervals(vec![busy(90, 100), busy(100, 110)], 100, 200);
        assert_eq!((keys(&v), sorted), (vec![(100, 110)], true));
    }
}
