//! The matching's per-receiver phases: data groups merged, progress reads
//! matched, progress broadcast, and each receiver's inbox and arrivals put
//! in time order. Every write they make is to one receiver's inbox,
//! arrivals or busy stretches, but for the counts, the links and the
//! strangers, which are gathered per part and joined in the order the
//! phases would have made them. So the receivers can be split in two
//! [`Receivers`] run side by side (one offered to the window's crew) and
//! joined after, with the same result as one run over them all.

use std::sync::Arc;

use super::super::detail::{Message, WindowDetail};
use super::super::streams::{Strangers, Streams};
use super::super::tables::{sorted_by_seq, DataGroup, DenseIds, GroupIndex, ProgressReads, ProgressSends};
use super::Matched;
use crate::analysis::model::{give_entries, Item, MsgEntry, MsgKind, Ns};
use crate::analysis::report::MessageCounts;
use crate::analysis::waits::{Arrival, ArrivalRuns, Inbox};
use crate::analysis::whatif::Link;

/// What every receiver's phases read: the window's streams and the tables
/// grouped by the serial part of the matching.
pub(super) struct Shared {
    pub streams: Arc<Streams>,
    /// Progress sends: (channel, sender local) → (sender local, sends),
    /// as the streams brought them.
    pub pg_ix: GroupIndex,
    pub pg: Vec<ProgressSends>,
    /// Per progress send group: whether its sequence numbers increase
    /// strictly; its sends in sequence order where they were not
    /// (`None`: `pg`'s are); its channel's dense index.
    pub pg_strict: Vec<bool>,
    pub pg_sorted: Vec<Option<Vec<MsgEntry>>>,
    pub pg_channel: Vec<u32>,
    /// Per progress send group, its sends as they arrive at each other
    /// worker of its process (within a process, as they are sent): one
    /// list, shared by those workers' arrivals.
    pub pg_arrivals: Vec<Arc<[Arrival]>>,
    /// Progress reads: (channel, sender, reader local) → group, and per
    /// group its highest sequence number read.
    pub pr_ix: GroupIndex,
    pub pr_max: Vec<u64>,
}

impl Shared {
    /// The tables' entries given back for reuse.
    pub fn give_back(self) {
        for (.., sends) in self.pg {
            give_entries(sends);
        }
        for sends in self.pg_sorted.into_iter().flatten() {
            give_entries(sends);
        }
    }
}

/// The receivers `first..first + inbox.len()` of the window, with the
/// groups they read.
pub(super) struct Receivers {
    first: usize,
    inbox: Vec<Inbox>,
    arrivals: Vec<ArrivalRuns>,
    stretches: Stretches,
    /// Data groups in key order: (ordinal, receiver, group); a group with
    /// no receiver here (another host) goes with the first receiver.
    data: Vec<(u32, usize, DataGroup)>,
    /// Progress read groups in the order they were made: (ordinal, group).
    pr: Vec<(u32, ProgressReads)>,
}

/// What a [`Receivers`] made: its receivers' inboxes, arrivals and
/// intervals, and its part of the window's links, strangers and counts.
pub(super) struct Part {
    pub inbox: Vec<Inbox>,
    pub arrivals: Vec<ArrivalRuns>,
    pub intervals: Vec<(Vec<Item>, bool)>,
    pub links: Links,
    /// (group ordinal, process, worker) of each message half whose other
    /// worker is not on this timeline, in the order met.
    strangers: Vec<(u32, u32, u32)>,
    counts: MessageCounts,
}

impl Receivers {
    /// All the window's receivers: their inboxes and arrivals (the reads
    /// slotted, nothing matched yet), their intervals, the data groups
    /// with each one's receiver, and the progress read groups.
    pub fn all(
        inbox: Vec<Inbox>,
        arrivals: Vec<ArrivalRuns>,
        intervals: Vec<(Vec<Item>, bool)>,
        data: Vec<(u32, usize, DataGroup)>,
        pr: Vec<(u32, ProgressReads)>,
        window: (Ns, Ns),
    ) -> Receivers {
        let n = intervals.len();
        let stretches = Stretches { intervals, gap_ends: vec![None; n], start: window.0 };
        Receivers { first: 0, inbox, arrivals, stretches, data, pr }
    }

    pub fn len(&self) -> usize {
        self.inbox.len()
    }

    /// Where to cut these receivers in two with about half the reads each
    /// (at least one receiver each side).
    pub fn half_of_the_reads(&self) -> usize {
        self.first + crate::analysis::crew::half_by_weight(self.len(), |k| self.inbox[k].reads.len() + 1)
    }

    /// The receivers from `at` on, and their groups, taken out.
    pub fn split_off(&mut self, at: usize) -> Receivers {
        let k = at - self.first;
        let (data, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.data).into_iter().partition(|g| g.1 >= at);
        self.data = keep;
        let (pr, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pr).into_iter().partition(|g| g.1.j >= at);
        self.pr = keep;
        let stretches = Stretches {
            intervals: self.stretches.intervals.split_off(k),
            gap_ends: self.stretches.gap_ends.split_off(k),
            start: self.stretches.start,
        };
        Receivers {
            first: at,
            inbox: self.inbox.split_off(k),
            arrivals: self.arrivals.split_off(k),
            stretches,
            data,
            pr,
        }
    }

    /// The per-receiver phases, in the order the matching makes them (the
    /// order each receiver's arrivals come in).
    pub fn run(mut self, shared: &Shared, mut detail: Option<&mut WindowDetail>) -> Part {
        let mut out = Part {
            inbox: Vec::new(),
            arrivals: Vec::new(),
            intervals: Vec::new(),
            links: Links(vec![LinkPart::default()]),
            strangers: Vec::new(),
            counts: MessageCounts::default(),
        };
        self.match_data(shared, &mut out, detail.as_deref_mut());
        self.match_progress_reads(shared, &mut out);
        self.broadcast_progress(shared);
        for a in self.arrivals.iter_mut() {
            a.prepare();
        }
        for b in self.inbox.iter_mut() {
            b.prepare();
        }
        out.inbox = self.inbox;
        out.arrivals = self.arrivals;
        out.intervals = self.stretches.intervals;
        out
    }

    /// Data groups, each a merge of its sends and reads by sequence number:
    /// matched pairs give their read its arrival (and the reader an
    /// arrival), sends not read here are in flight (arrived, unread), reads
    /// not sent here came from before the window (or another timeline).
    fn match_data(&mut self, shared: &Shared, out: &mut Part, mut detail: Option<&mut WindowDetail>) {
        for (ordinal, _, mut group) in std::mem::take(&mut self.data) {
            if !sorted_by_seq(&group.sends, |s| s.seq) {
                group.sends.sort();
            }
            // (By seq, then slot: the stream's order, in which read times
            // never decrease.)
            if !sorted_by_seq(&group.reads, |r| r.seq) {
                group.reads.sort();
            }
            let part = &mut out.links.0[0];
            let links = part.links.len();
            self.merge_data_group(shared, ordinal, &group, out, detail.as_deref_mut());
            let part = &mut out.links.0[0];
            if part.links.len() > links {
                part.runs.push((ordinal, part.links.len()));
            }
            give_entries(group.sends);
            give_entries(group.reads);
        }
    }

    fn merge_data_group(
        &mut self,
        shared: &Shared,
        ordinal: u32,
        group: &DataGroup,
        out: &mut Part,
        mut detail: Option<&mut WindowDetail>,
    ) {
        let DataGroup { key: (channel, from, to), si, ref sends, ri, ref reads } = *group;
        let streams = &*shared.streams;
        let f = self.first;
        let mc = &mut out.counts;
        // The worker each side is on (the reader may be absent: another host).
        let src = si.or_else(|| ri.and_then(|j| streams.resolve(streams.pk[j], from)));
        let dst = ri.or_else(|| si.and_then(|i| streams.resolve(streams.pk[i], to)));
        if let Some(j) = dst {
            self.arrivals[j - f].start_run();
        }
        let crosses = |i: usize, j: usize| streams.pk[i] != streams.pk[j];
        let (mut a, mut b) = (0, 0);
        while a < sends.len() || b < reads.len() {
            let s = sends.get(a).copied();
            let r = reads.get(b).copied();
            match (s, r) {
                (Some(s), Some(r)) if s.seq == r.seq => {
                    let (i, j) = (si.unwrap(), ri.unwrap());
                    mc.data_matched += 1;
                    let (sent, slot) = (s.at, r.at as usize);
                    let read = self.inbox[j - f].reads[slot];
                    if sent > read {
                        mc.read_before_send += 1;
                    }
                    // read before sent (clock trouble): the edge is clamped to the read
                    let sent = sent.min(read);
                    let at = if crosses(i, j) { self.stretches.arrival(j - f, sent, read) } else { sent };
                    self.inbox[j - f].arrived[slot] = at;
                    if i == j {
                        mc.data_worker_local += 1;
                    } else {
                        if let Some(d) = detail.as_deref_mut() {
                            let (src, dst) = (i as u32, j as u32);
                            d.messages.push(Message { src, dst, sent, read, channel, kind: MsgKind::Data });
                        }
                        self.arrivals[j - f].push(Arrival { at, src: i as u32, channel, kind: MsgKind::Data, sent });
                        out.links.0[0].links.push(Link { src: i as u32, sent, dst: j as u32, read });
                    }
                    a += 1;
                    b += 1;
                }
                (Some(s), r) if r.is_none_or(|r| s.seq < r.seq) => {
                    // sent here, not read in this window
                    let i = si.unwrap();
                    match dst {
                        // Between processes, still in flight: no arrival known.
                        Some(j) if crosses(i, j) => mc.data_in_flight += 1,
                        Some(j) => {
                            mc.data_in_flight += 1;
                            self.inbox[j - f].push(s.at, Ns::MAX);
                            if i == j {
                                mc.data_worker_local += 1;
                            } else {
                                let arrival = Arrival::local(s.at, i as u32, channel, MsgKind::Data);
                                self.arrivals[j - f].push(arrival);
                            }
                        }
                        None if streams.own_worker(i, to) => mc.data_in_flight += 1,
                        None => {
                            mc.data_unmatched += 1;
                            out.strangers.push((ordinal, streams.pk[i], to));
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
                        out.strangers.push((ordinal, streams.pk[j], from));
                    }
                    let crossed = src.filter(|&i| crosses(i, j));
                    let msg = (r.at as usize, channel, MsgKind::Data);
                    self.arrived_from_before(j, crossed, msg);
                    b += 1;
                }
                _ => break,
            }
        }
    }

    /// A message read by receiver `j` (its read's `slot`, its channel and
    /// kind) and sent before the window. Within one process it arrived by
    /// the window's start. From another process (`crossed`: the sender's
    /// stream) it was in flight at the window's start and arrived when `j`
    /// could read it ([`Stretches::arrival`]): an arrival from that sender,
    /// the part of its transit inside the window on the path.
    fn arrived_from_before(&mut self, j: usize, crossed: Option<usize>, (slot, channel, kind): (usize, u32, MsgKind)) {
        let (ws, k) = (self.stretches.start, j - self.first);
        let (inbox, arrivals) = (&mut self.inbox[k], &mut self.arrivals[k]);
        match crossed {
            Some(i) => {
                let at = self.stretches.arrival(k, ws, inbox.reads[slot]);
                inbox.arrived[slot] = at;
                arrivals.push(Arrival { at, src: i as u32, channel, kind, sent: ws });
            }
            None => inbox.arrived[slot] = ws,
        }
    }

    /// Progress reads matched to their sends (one send, N receives: Sager
    /// §4.2.2). A read of another process's progress is an arrival from it.
    fn match_progress_reads(&mut self, shared: &Shared, out: &mut Part) {
        let streams = &*shared.streams;
        let f = self.first;
        let mc = &mut out.counts;
        for (ordinal, g) in std::mem::take(&mut self.pr) {
            let ProgressReads { channel, from, j, key: (cd, fd), mut reads, .. } = g;
            if !sorted_by_seq(&reads, |r| r.seq) {
                reads.sort();
            }
            let gi = shared.pg_ix.find([cd, fd, 0]);
            let group = gi.map(|g| &shared.pg[g]);
            // Sends in strictly increasing sequence (as sent, the usual
            // case): the reads, sorted, find theirs by walking forward.
            let strict = gi.is_some_and(|g| shared.pg_strict[g]);
            let mut k = 0;
            self.arrivals[j - f].start_run();
            for &MsgEntry { seq: q, at: slot } in reads.iter() {
                let r = self.inbox[j - f].reads[slot as usize];
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
                            let at = self.stretches.arrival(j - f, sent, r);
                            self.inbox[j - f].arrived[slot as usize] = at;
                            self.arrivals[j - f].push(Arrival {
                                at,
                                src: i as u32,
                                channel,
                                kind: MsgKind::Progress,
                                sent,
                            });
                        } else {
                            self.inbox[j - f].arrived[slot as usize] = sent;
                        }
                    }
                    _ => {
                        let i = group.map(|g| g.2).or_else(|| streams.resolve(streams.pk[j], from));
                        if i.is_some() || streams.own_worker(j, from) {
                            mc.progress_from_before += 1;
                        } else {
                            mc.progress_unmatched += 1;
                            out.strangers.push((ordinal, streams.pk[j], from));
                        }
                        let crossed = i.filter(|&i| streams.pk[i] != streams.pk[j]);
                        self.arrived_from_before(j, crossed, (slot as usize, channel, MsgKind::Progress));
                    }
                }
            }
            give_entries(reads);
        }
    }

    /// Every progress send reaches every other worker of its process: an
    /// arrival at send time (shared memory), unread past what the reader
    /// read. It also reaches the workers of the cluster's other processes;
    /// those arrivals are the reads matched in
    /// [`Self::match_progress_reads`] (between processes the arrival is
    /// not the send: [`Stretches::arrival`]).
    fn broadcast_progress(&mut self, shared: &Shared) {
        let streams = &*shared.streams;
        let mine = self.first..self.first + self.len();
        for (gi, (_, _, i, sends)) in shared.pg.iter().enumerate() {
            let sends = shared.pg_sorted[gi].as_deref().unwrap_or(sends);
            let cd = shared.pg_channel[gi];
            for &j in &streams.procs[streams.pk[*i] as usize] {
                if j == *i || !mine.contains(&j) {
                    continue;
                }
                let read_upto = shared.pr_ix.find([cd, *i as u32, j as u32]).map(|g| shared.pr_max[g]);
                let (inbox, arrivals) = (&mut self.inbox[j - self.first], &mut self.arrivals[j - self.first]);
                arrivals.share(&shared.pg_arrivals[gi]);
                for &MsgEntry { seq: q, at: s } in sends.iter() {
                    if read_upto.is_none_or(|m| q > m) {
                        inbox.push(s, Ns::MAX);
                    }
                }
            }
            // The cluster's other processes matched the reads they made
            // above; what they did not read is in flight between processes,
            // with no arrival known (`waits`: transit between processes).
        }
    }
}

impl Part {
    /// `next`'s receivers (those after these) joined to these: the
    /// strangers in the order of their groups, as one run over all the
    /// receivers would have met them; the links kept in parts
    /// ([`Links::in_order`] orders them).
    pub fn append(&mut self, next: Part) {
        self.inbox.extend(next.inbox);
        self.arrivals.extend(next.arrivals);
        self.intervals.extend(next.intervals);
        self.counts.add(&next.counts);
        self.links.0.extend(next.links.0);
        // (A group is in one part only, and each part met its groups in
        // order: a stable sort by group restores the order of one run.)
        self.strangers.extend(next.strangers);
        self.strangers.sort_by_key(|s| s.0);
    }

    /// What the matching leaves (its counts added to `mc`), once every
    /// receiver's part is appended.
    pub fn into_matched(self, mc: &mut MessageCounts) -> Matched {
        mc.add(&self.counts);
        let mut strangers = Strangers::default();
        for &(_, process, worker) in &self.strangers {
            strangers.add(process, worker);
        }
        Matched { inbox: self.inbox, arrivals: self.arrivals, intervals: self.intervals, links: self.links, strangers }
    }
}

/// The data messages matched between two of the window's workers, in the
/// parts that matched them.
#[derive(Default)]
pub(crate) struct Links(Vec<LinkPart>);

/// One part's links, and per data group that made some (its ordinal, the
/// end of its links).
#[derive(Default)]
struct LinkPart {
    links: Vec<Link>,
    runs: Vec<(u32, usize)>,
}

impl Links {
    /// The links in the order of their groups (as one run over all the
    /// receivers makes them: the order the what-if's replay takes points
    /// of one time in). One part's are that already; two are merged, on
    /// whichever thread needs them.
    pub fn in_order(mut self) -> Vec<Link> {
        if self.0.len() == 1 {
            return std::mem::take(&mut self.0[0].links);
        }
        let total = self.0.iter().map(|p| p.links.len()).sum();
        let mut out = Vec::with_capacity(total);
        // (Each part's runs, by ordinal; the next run is the least head.)
        let mut at: Vec<(usize, usize)> = vec![(0, 0); self.0.len()];
        loop {
            let next = (0..self.0.len())
                .filter(|&p| at[p].0 < self.0[p].runs.len())
                .min_by_key(|&p| self.0[p].runs[at[p].0].0);
            let Some(p) = next else { break };
            let (run, start) = at[p];
            let end = self.0[p].runs[run].1;
            out.extend_from_slice(&self.0[p].links[start..end]);
            at[p] = (run + 1, end);
        }
        out
    }
}

/// Each receiver's intervals in the window (from a [`Receivers`]' first
/// on), and (when first asked) where its busy stretches begin: when its
/// messages from other processes arrived.
struct Stretches {
    intervals: Vec<(Vec<Item>, bool)>,
    /// Per receiver: the ends of its gaps, in order.
    gap_ends: Vec<Option<Vec<Ns>>>,
    /// The window's start.
    start: Ns,
}

impl Stretches {
    /// When receiver `k` (counted from the part's first) could first read a message that crossed processes,
    /// sent at `sent` and read at `read` (see [`crate::analysis::waits`]):
    /// the start of its busy stretch holding the read (the end of the
    /// last gap before it; the window's start if none), never before the
    /// send nor after the read. A receiver polls while it has nothing to
    /// do, so a message there during a gap is read by the work that ends
    /// it.
    fn arrival(&mut self, k: usize, sent: Ns, read: Ns) -> Ns {
        let intervals = &self.intervals[k].0;
        let ends = self.gap_ends[k].get_or_insert_with(|| {
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

/// The dense index of each progress send group's channel.
pub(super) fn channels_of(pg: &[ProgressSends], chan_ids: &DenseIds) -> Vec<u32> {
    pg.iter().map(|g| chan_ids.find(g.0).expect("a progress send's channel was numbered when grouped")).collect()
}
