//! Stages 5 to 7: each worker's timeline (its operator executions, spans and
//! gaps) laid into the window graph, each gap typed as Waiting, Waiting for
//! Input or unknown time by the wait finder (Sager §5.1, sager-notes §2.4),
//! and a waiting worker's wait edge tied to the message that ended it: of
//! the messages the execution after the gap read, the one that arrived last
//! (see [`crate::analysis::waits`]).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::detail::{Activity, ActivityKind, WindowDetail};
use super::matching::Matched;
use super::root_causes::{root_causes, ChainedWait};
use super::streams::NotStarted;
use super::{kind_name, TOP};
use crate::analysis::crew::{self, Crew};
use crate::analysis::graph::build::LanePart;
use crate::analysis::graph::{EKind, Graph, GraphBuilder};
use crate::analysis::model::{give_items, Busy, Fragment, GapEnd, Item, Ns, Sid};
use crate::analysis::report::{CarriedWait, OpenWait, WaitedOn, WorkerWaiting};
use crate::analysis::waits::{ArrivalRuns, Inbox, Wait, WaitFinder, WaitKind, WaitOn};

/// (worker waited on, channel, message kind) of a worker's waits.
type OnKey = (Option<u32>, Option<u32>, &'static str);

/// What a wait on a worker that was not running yet is counted under: no
/// worker (it was not there to be waited on), kind `not_started`.
const NOT_STARTED: OnKey = (None, None, "not_started");

/// Per stream: where it began, if inside the window (its first record).
pub(super) fn stream_starts(frags: &[Fragment], (ws, we): (Ns, Ns)) -> Vec<Option<Ns>> {
    frags.iter().map(|f| (f.covered.0 > ws && f.covered.0 < we).then_some(f.covered.0)).collect()
}

/// Lays every worker's timeline into the window graph and builds it;
/// returns the graph, what each worker waited for, and what `beside`
/// returned. With a crew (and no detail to fill), the workers' lanes are
/// laid in two halves, one offered to it: each lane needs only its own
/// stream's intervals, reads and arrivals, and the halves join the graph in
/// worker order, as if laid in turn. The graph's build, which needs every
/// lane, is one thread's: `beside` (a task of the window's that needs none
/// of this) is offered to the crew meanwhile.
#[allow(clippy::too_many_arguments)]
pub(super) fn lay_out_timelines<B: Send + 'static>(
    sids: &[Sid],
    matched: Matched,
    window: (Ns, Ns),
    absent: &NotStarted,
    began: &[Option<Ns>],
    detail: Option<&mut WindowDetail>,
    crew: Option<&Arc<Crew>>,
    beside: impl FnOnce() -> B + Send + 'static,
) -> (Graph, Vec<WorkerWaiting>, B) {
    let Matched { inbox, arrivals, intervals, .. } = matched;
    let n = sids.len();
    let ctx = Arc::new(LaneContext {
        sids: sids.to_vec(),
        window,
        present: present_workers(sids),
        absent: absent.clone(),
        began: began.to_vec(),
    });
    let mut inputs: Vec<LaneInput> = intervals
        .into_iter()
        .zip(inbox)
        .zip(arrivals)
        .map(|(((items, sorted), inbox), arrivals)| LaneInput { items, sorted, inbox, arrivals })
        .collect();
    let laid = match crew.filter(|_| detail.is_none() && n >= 2) {
        None => lay_lanes(&ctx, 0, inputs, detail),
        Some(crew) => {
            let m = crew::half_by_weight(inputs.len(), |j| inputs[j].items.len());
            let second = inputs.split_off(m);
            let there = ctx.clone();
            let (mut first, second, _) =
                crew::join(Some(crew), || lay_lanes(&ctx, 0, inputs, None), move || lay_lanes(&there, m, second, None));
            first.extend(second);
            first
        }
    };
    let mut gb = GraphBuilder::new(window, n);
    let mut lanes: Vec<LaneWaits> = Vec::with_capacity(n);
    for (j, (part, waits)) in laid.into_iter().enumerate() {
        gb.append(j, part);
        lanes.push(waits);
    }
    charge_root_causes(&mut lanes, window.0);
    let waiting = lanes.into_iter().map(LaneWaits::finish).collect();
    let (g, b, _) = crew::join(crew, || gb.build(), beside);
    (g, waiting, b)
}

/// What every lane reads: the window's streams and workers.
struct LaneContext {
    sids: Vec<Sid>,
    window: (Ns, Ns),
    present: Vec<bool>,
    absent: NotStarted,
    began: Vec<Option<Ns>>,
}

/// One stream's part of the matching's results: its intervals (and whether
/// in order), its reads and what arrived to it.
struct LaneInput {
    items: Vec<Item>,
    sorted: bool,
    inbox: Inbox,
    arrivals: ArrivalRuns,
}

/// Lanes `first..` of the window laid out, each into a part of its own.
fn lay_lanes(
    ctx: &LaneContext,
    first: usize,
    inputs: Vec<LaneInput>,
    mut detail: Option<&mut WindowDetail>,
) -> Vec<(LanePart, LaneWaits)> {
    let mut out = Vec::with_capacity(inputs.len());
    for (k, LaneInput { mut items, sorted, inbox, arrivals }) in inputs.into_iter().enumerate() {
        let j = first + k;
        // The intervals nearly always come in order; sorted otherwise.
        if !sorted {
            items.sort_by_key(|i| (i.start(), i.end()));
        }
        let mut part = LanePart::with_capacity(ctx.window, items.len() + items.len() / 2);
        let mut lane = Lane {
            j,
            sids: &ctx.sids,
            window: ctx.window,
            present: &ctx.present,
            absent: &ctx.absent,
            began: &ctx.began,
            finder: WaitFinder::new(&arrivals, &inbox, ctx.window),
            waiting: WorkerWaiting { worker: ctx.sids[j].worker, ..Default::default() },
            on: FxHashMap::default(),
            chained: Vec::new(),
        };
        for (k, it) in items.iter().enumerate() {
            // The execution after a gap (its reads are what the gap awaited).
            let read_until = match items.get(k + 1) {
                Some(Item::Busy { end, .. }) => *end,
                _ => it.end(),
            };
            lane.item(*it, read_until, &mut part, detail.as_deref_mut());
        }
        out.push((part, LaneWaits { waiting: lane.waiting, on: lane.on, chained: lane.chained }));
        give_items(items);
        crate::analysis::model::give_reads(inbox.reads);
    }
    out
}

/// Which worker indices have a stream in the window.
fn present_workers(sids: &[Sid]) -> Vec<bool> {
    let max_w = sids.iter().map(|s| s.worker as usize + 1).max().unwrap_or(0).min(1 << 16);
    let mut present = vec![false; max_w];
    for s in sids {
        if let Some(p) = present.get_mut(s.worker as usize) {
            *p = true;
        }
    }
    present
}

/// One worker's timeline while it is laid into the graph.
struct Lane<'a> {
    j: usize,
    sids: &'a [Sid],
    window: (Ns, Ns),
    present: &'a [bool],
    /// The job's workers whose process has not started yet.
    absent: &'a NotStarted,
    /// Per stream: where it began, if inside the window.
    began: &'a [Option<Ns>],
    finder: WaitFinder<'a>,
    waiting: WorkerWaiting,
    /// Waits by what ended them: (ns, count, ns carried from earlier
    /// windows).
    on: FxHashMap<OnKey, (Ns, u64, Ns)>,
    /// The waits ended by a message from a worker in the window, for
    /// [`charge_root_causes`].
    chained: Vec<ChainedWait<OnKey>>,
}

impl Lane<'_> {
    /// The message read after a gap ended it only if it arrived in the gap.
    /// A sender on this timeline (or the worker itself) whose message arrived
    /// inside the gap is found by the wait finder from the arrivals; if it
    /// was not, the message came after the work that ended the gap had
    /// started (the read is later in the same busy period), so that work had
    /// no visible cause: Waiting-for-Input, not a wait without terminator. (A
    /// gap cut at the window's end keeps its later reader, unless that is
    /// the worker itself.) A message the worker sent itself cannot have
    /// ended its gap, cut at the window's end or not: a worker sends nothing
    /// while idle (a send outside an execution ends the gap), so its own
    /// message came after the work that ended the gap had begun.
    fn next_cause(&self, next: GapEnd, end: Ns) -> GapEnd {
        let me = self.sids[self.j].worker;
        match next {
            GapEnd::Read { from, .. }
                if from == me
                    || (end <= self.window.1 && self.present.get(from as usize).copied().unwrap_or(false)) =>
            {
                GapEnd::NoCause
            }
            n => n,
        }
    }

    #[inline]
    fn item(&mut self, it: Item, read_until: Ns, gb: &mut LanePart, detail: Option<&mut WindowDetail>) {
        match it {
            Item::Busy { start, end, what } => self.busy(start, end, what, gb, detail),
            Item::Gap { start, end, cause_until, next } => {
                let next = self.next_cause(next, end);
                match self.finder.gap(start, end, cause_until, next, read_until) {
                    None => gb.segment(start, end, EKind::Unknown),
                    Some(w) => {
                        gb.segment(start, w.start, EKind::Unknown);
                        // The wait began where its gap's local causes
                        // expired, maybe in an earlier window.
                        let since = cause_until.max(start).min(w.start);
                        // Open: cut at the window's end and a wait on a
                        // message (or on what the live deadline left open)
                        // by what the stream's builder saw next. (A cut
                        // gap whose next work read nothing is
                        // Waiting-for-Input at once: nothing later makes it
                        // a wait on a sender.)
                        if w.cut && matches!(w.kind, WaitKind::Waiting(_)) {
                            self.open(&w, since, gb, detail);
                        } else {
                            let began = if since < w.start && w.start == self.window.0 {
                                self.carry(&w, since);
                                since
                            } else {
                                w.start
                            };
                            self.wait(&w, began, gb, detail);
                        }
                        gb.segment(w.end, end, EKind::Unknown);
                    }
                }
            }
        }
    }

    /// An operator execution or a user span: a segment of work.
    fn busy(&mut self, start: Ns, end: Ns, what: Busy, gb: &mut LanePart, detail: Option<&mut WindowDetail>) {
        let k = match what {
            Busy::Operator(op) => EKind::Op(op),
            Busy::Span(id) => gb.span(id),
        };
        gb.segment(start, end, k);
        if let Some(d) = detail {
            let what = match what {
                Busy::Operator(op) => ActivityKind::Operator(op),
                Busy::Span(id) => ActivityKind::Span(id),
            };
            self.activity(d, start, end, what);
        }
    }

    /// The wait inside a gap (which began at `began`, before the window
    /// when earlier windows had it open): a Waiting-for-Input segment, or a
    /// Waiting one tied (when the finder named one) to the message that
    /// ended it.
    fn wait(&mut self, w: &Wait, began: Ns, gb: &mut LanePart, detail: Option<&mut WindowDetail>) {
        let d = w.end - w.start;
        match w.kind {
            WaitKind::WaitingForInput => {
                gb.segment(w.start, w.end, EKind::WaitingForInput);
                self.waiting.waiting_for_input_ns += d;
                if let Some(dt) = detail {
                    self.activity(dt, w.start, w.end, ActivityKind::WaitingForInput);
                }
            }
            WaitKind::Waiting(o) => {
                gb.segment(w.start, w.end, EKind::Wait);
                self.waiting.waiting_ns += d;
                self.waiting.waits += 1;
                let key = self.key(o);
                // The part before its sender began is a wait for the sender
                // to start, not on it.
                let from = self.sender_start(o).map_or(w.start, |s| s.clamp(w.start, w.end));
                if let Some(dt) = detail {
                    if from > w.start {
                        let what = ActivityKind::Waiting { on: None, channel: None, kind: NOT_STARTED.2 };
                        self.activity(dt, w.start, from, what);
                    }
                    let what = ActivityKind::Waiting { on: key.0, channel: key.1, kind: key.2 };
                    self.activity(dt, from, w.end, what);
                }
                if from > w.start {
                    self.on.entry(NOT_STARTED).or_default().0 += from - w.start;
                }
                let e = self.on.entry(key).or_default();
                e.0 += w.end - from;
                e.1 += 1;
                if let Some(a) = w.terminator {
                    gb.terminated_wait(self.j, w.end, a.src as usize, a.sent, a.channel, a.kind);
                    // (From where its sender began, if that was in the
                    // window; else with the earlier windows' open part.)
                    let start = if from > w.start { from } else { began };
                    let chained = ChainedWait { start, end: w.end, sent: a.sent, key, sender: a.src as usize };
                    self.chained.push(chained);
                }
            }
        }
    }

    /// A wait still open at the window's end: its type is decided where it
    /// ends (a later window carries this part there), so it is counted
    /// here only as open. It is a wait segment all the same: the critical
    /// path never runs through it (Sager §5.3; docs/analysis.md).
    fn open(&mut self, w: &Wait, since: Ns, gb: &mut LanePart, detail: Option<&mut WindowDetail>) {
        gb.segment(w.start, w.end, EKind::Wait);
        self.waiting.open = Some(OpenWait { since_ns: since, ns: w.end - w.start });
        if let Some(dt) = detail {
            self.activity(dt, w.start, w.end, ActivityKind::Waiting { on: None, channel: None, kind: "open" });
        }
    }

    /// The earlier windows' open part of the wait `w` (it began at `since`,
    /// before the window, and reached its start): typed as `w` is.
    fn carry(&mut self, w: &Wait, since: Ns) {
        let ns = self.window.0 - since;
        let mut c = CarriedWait { since_ns: since, ns, kind: "waiting", worker: None, channel: None, message: None };
        match w.kind {
            WaitKind::WaitingForInput => c.kind = "waiting_for_input",
            WaitKind::Waiting(o) => {
                // (A sender that began in this window was not running when
                // the carried part ran.)
                let key = if self.sender_start(o).is_some() { NOT_STARTED } else { self.key(o) };
                (c.worker, c.channel, c.message) = (key.0, key.1, Some(key.2));
                self.on.entry(key).or_default().2 += ns;
            }
        }
        self.waiting.carried = Some(c);
    }

    /// What a wait on `o` is counted under (a worker whose process has not
    /// started yet is not waited on: [`NOT_STARTED`]).
    fn key(&self, o: WaitOn) -> OnKey {
        match o {
            WaitOn::Message { src, src_known: false, .. } if self.absent.has(src) => NOT_STARTED,
            WaitOn::Message { src, src_known, channel, kind } => {
                let wk = if src_known { self.sids[src as usize].worker } else { src };
                (Some(wk), Some(channel), kind_name(kind))
            }
            WaitOn::Unknown => (None, None, "unknown"),
        }
    }

    /// Where the sender of a wait's message began, if inside the window.
    fn sender_start(&self, o: WaitOn) -> Option<Ns> {
        match o {
            WaitOn::Message { src, src_known: true, .. } => self.began.get(src as usize).copied().flatten(),
            _ => None,
        }
    }

    /// An activity for the timeline export, clipped to the window.
    fn activity(&self, d: &mut WindowDetail, start: Ns, end: Ns, what: ActivityKind) {
        let (start, end) = (start.max(self.window.0), end.min(self.window.1));
        d.activities.push(Activity { stream: self.j as u32, start, end, what });
    }
}

/// One worker's waits once its lane is laid, before they are reported.
struct LaneWaits {
    waiting: WorkerWaiting,
    on: FxHashMap<OnKey, (Ns, u64, Ns)>,
    chained: Vec<ChainedWait<OnKey>>,
}

impl LaneWaits {
    /// The worker's waits, the largest causes first.
    fn finish(self) -> WorkerWaiting {
        let mut on: Vec<WaitedOn> = self
            .on
            .into_iter()
            .map(|((worker, channel, kind), (ns, count, carried_ns))| WaitedOn {
                worker,
                channel,
                kind,
                ns,
                count,
                carried_ns,
            })
            .collect();
        on.sort_by(|a, b| {
            b.total_ns().cmp(&a.total_ns()).then(a.worker.cmp(&b.worker)).then(a.channel.cmp(&b.channel))
        });
        on.truncate(TOP);
        WorkerWaiting { on, ..self.waiting }
    }
}

/// Charges each wait's stretches during which its sender was itself
/// waiting to that wait's root cause ([`super::root_causes`]): the time
/// (split at the window's start `ws` into this window's and the carried
/// part) moves between the `on` entries; the wait's count goes with its
/// largest share, and a carried wait is named after the root of its
/// carried part.
fn charge_root_causes(lanes: &mut [LaneWaits], ws: Ns) {
    let chained: Vec<Vec<ChainedWait<OnKey>>> = lanes.iter_mut().map(|l| std::mem::take(&mut l.chained)).collect();
    let moved = root_causes(&chained);
    // Per wait: the time each root took from it (in this window, carried).
    let mut shares: FxHashMap<(usize, usize), Vec<(OnKey, Ns, Ns)>> = FxHashMap::default();
    for m in &moved {
        let carried = m.end.min(ws).saturating_sub(m.start);
        let inside = m.end - m.start - carried;
        let list = shares.entry((m.lane, m.wait)).or_default();
        match list.iter_mut().find(|s| s.0 == m.to) {
            Some(s) => (s.1, s.2) = (s.1 + inside, s.2 + carried),
            None => list.push((m.to, inside, carried)),
        }
    }
    for ((lane, i), list) in shares {
        let w = chained[lane][i];
        let l = &mut lanes[lane];
        for &(to, inside, carried) in &list {
            let e = l.on.entry(to).or_default();
            (e.0, e.2) = (e.0 + inside, e.2 + carried);
        }
        let (moved_in, moved_carried) = list.iter().fold((0, 0), |(a, b), s| (a + s.1, b + s.2));
        let (left_in, left_carried) = (w.end - w.start.max(ws) - moved_in, ws.saturating_sub(w.start) - moved_carried);
        let from = l.on.get_mut(&w.key).expect("a chained wait is counted under its key");
        (from.0, from.2) = (from.0 - moved_in, from.2 - moved_carried);
        // The count and a carried wait's name follow the largest share.
        let most = list.iter().max_by_key(|s| s.1 + s.2).expect("a moved wait has a share");
        if most.1 + most.2 > left_in + left_carried {
            from.1 -= 1;
            l.on.entry(most.0).or_default().1 += 1;
        }
        if w.start < ws {
            let most = list.iter().max_by_key(|s| s.2).expect("a moved wait has a share");
            if let Some(c) = l.waiting.carried.as_mut().filter(|_| most.2 > left_carried) {
                (c.worker, c.channel, c.message) = (most.0 .0, most.0 .1, Some(most.0 .2));
            }
        }
    }
    for l in lanes.iter_mut() {
        // Entries emptied by the moves are not reported.
        l.on.retain(|_, e| e.0 + e.2 > 0 || e.1 > 0);
    }
}
