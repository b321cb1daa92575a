//! Activities per worker (issue stage 2): one worker's records, in time
//! order, become a timeline of busy pieces and gaps. (The messages
//! themselves go to their window's tables, `window::Windower::message`;
//! here they only end gaps and note what ended them.)
//!
//! * Operator executions are start/stop pairs (Sager Table 4.1). The probe
//!   elides pairs with nothing inside, so every published pair is *active*;
//!   the time of elided pairs is simply part of a gap (sager-notes §2.5,
//!   DESIGN "Inactive schedule elision"). Nested starts (a subgraph around its
//!   children, a user span inside an operator) split the outer piece: the
//!   innermost activity owns the time (sager-notes §2.2 item 8).
//! * A gap is time between useful work. For each gap the builder records
//!   until when a *local* direct cause of future work was pending — Sager
//!   §5.1.2 PC4 (an active operator's progress sends, until the end of the
//!   step) and OC2/PC2–3 (progress read: its effect may show a full step
//!   later, the delayed push of §4.1.2). The per-step marker stands in for
//!   the one-step look-ahead window (sager-notes §2.4, §8.4.2). Whether the
//!   gap becomes a wait also depends on messages from other workers, which
//!   only the window's owner sees (module `waits`).
//! * A message or progress record outside any execution (the root scope's
//!   progress exchange, input pushed by the main program) is zero-length
//!   useful work: it ends the gap before it and starts a new one.

use crate::analysis::model::{Busy, GapEnd, Item, MsgKind, Ns};
use ringlog::Event;

#[derive(Clone, Copy, Debug)]
struct OpenGap {
    start: Ns,
    cause_until: Option<Ns>,
    /// The live deadline handed the gap's windows over up to here, open
    /// (`force`): the gap keeps its start, so the window where it ends
    /// sees the whole of it (and carries its earlier part to its cause).
    forced_to: Ns,
}

#[derive(Debug, Default)]
pub struct Builder {
    /// Open operators/spans; `.1` is the start of the top's current piece.
    stack: Vec<(Busy, Ns)>,
    gap: Option<OpenGap>,
    /// Steps still to pass before the local causes expire.
    pending_steps: u32,
    /// A gap that just ended, held until the execution after it shows
    /// whether it read a message (its visible cause), with what came since.
    held: Option<Item>,
    held_items: Vec<Item>,
    /// Items ready, in time order.
    pub out: Vec<Item>,
    last_ts: Option<Ns>,
    pub unpaired: u64,
    pub steps: u64,
    pub elided: u64,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Time before which every item has been emitted into `out`.
    pub fn settled(&self) -> Option<Ns> {
        if let Some(h) = &self.held {
            return Some(h.start());
        }
        if let Some(&(_, s)) = self.stack.last() {
            return Some(s);
        }
        self.gap.map(|g| g.start.max(g.forced_to)).or(self.last_ts)
    }

    pub fn last_ts(&self) -> Option<Ns> {
        self.last_ts
    }

    #[inline]
    fn emit(&mut self, it: Item) {
        if self.held.is_some() {
            self.held_items.push(it);
        } else {
            self.out.push(it);
        }
    }

    #[inline]
    fn release(&mut self) {
        if let Some(g) = self.held.take() {
            self.out.push(g);
            self.out.append(&mut self.held_items);
        }
    }

    #[inline]
    fn open_gap(&mut self, t: Ns) {
        let cause_until = if self.pending_steps == 0 { Some(t) } else { None };
        self.gap = Some(OpenGap { start: t, cause_until, forced_to: t });
    }

    /// Closes the open gap at `t` into a held gap (zero-length gaps vanish).
    #[inline]
    fn close_gap(&mut self, t: Ns) {
        if let Some(g) = self.gap.take() {
            if t > g.start {
                self.release();
                let cu = g.cause_until.unwrap_or(t).min(t);
                self.held = Some(Item::Gap { start: g.start, end: t, cause_until: cu, next: GapEnd::NoCause });
            }
        }
    }

    #[inline]
    fn note_read(&mut self, from: u32, channel: u32, kind: MsgKind) {
        if let Some(Item::Gap { next, .. }) = &mut self.held {
            if *next == GapEnd::NoCause {
                *next = GapEnd::Read { from, channel, kind };
                // Only the first read counts: the gap is final now, and
                // what follows need not be held (copied) behind it.
                self.release();
            }
        }
    }

    #[inline]
    fn begin(&mut self, t: Ns, what: Busy) {
        if let Some(top) = self.stack.last().copied() {
            if t > top.1 {
                self.emit(Item::Busy { start: top.1, end: t, what: top.0 });
            }
        } else {
            self.close_gap(t);
        }
        self.stack.push((what, t));
    }

    #[inline]
    fn end(&mut self, t: Ns, what: Busy) {
        let Some(pos) = self.stack.iter().rposition(|(w, _)| *w == what) else {
            self.unpaired += 1;
            return;
        };
        // Anything opened inside and not closed is cut here (counted).
        self.unpaired += (self.stack.len() - 1 - pos) as u64;
        let (top, s) = *self.stack.last().unwrap();
        if t > s {
            self.emit(Item::Busy { start: s, end: t, what: top });
        }
        self.stack.truncate(pos);
        if let Some(top) = self.stack.last_mut() {
            top.1 = t;
        } else {
            if matches!(what, Busy::Operator(_)) {
                // PC4: an active operator causes the worker's progress sends
                // until the end of the step.
                self.pending_steps = self.pending_steps.max(1);
            }
            self.release();
            self.open_gap(t);
        }
    }

    /// A message sent or read at `t` (`read`: from whom, on which channel;
    /// `progress`: a progress message). The message itself goes to the
    /// window's tables (`window::Windower::message`); here it only shapes
    /// the timeline.
    #[inline(always)]
    fn point(&mut self, t: Ns, read: Option<(u32, u32)>, progress: bool) {
        let kind = if progress { MsgKind::Progress } else { MsgKind::Data };
        if self.stack.is_empty() {
            // Zero-length useful work in a gap.
            self.close_gap(t);
            if let Some((f, c)) = read {
                self.note_read(f, c, kind);
            }
            self.release();
            if read.is_some() {
                self.pending_steps = self.pending_steps.max(if progress { 2 } else { 1 });
            }
            self.open_gap(t);
        } else {
            if let Some((f, c)) = read {
                self.note_read(f, c, kind);
                if progress {
                    // OC2 / PC2–3: progress read may cause work up to a full
                    // step later (delayed push, Sager §4.1.2).
                    self.pending_steps = self.pending_steps.max(2);
                }
            }
        }
    }

    #[inline]
    fn step(&mut self, t: Ns) {
        self.steps += 1;
        self.pending_steps = self.pending_steps.saturating_sub(1);
        if self.pending_steps == 0 {
            if let Some(g) = &mut self.gap {
                if g.cause_until.is_none() {
                    g.cause_until = Some(t);
                }
            }
        }
    }

    /// Feeds one record (time already in ns). Timestamps going backwards
    /// are clamped to the last one (the probe promises non-decreasing).
    #[inline(always)]
    pub fn push(&mut self, ts: Ns, ev: Event) {
        let t = match self.last_ts {
            Some(l) if ts < l => l,
            _ => ts,
        };
        self.push_ordered(t, ev);
    }

    /// [`Builder::push`] for a caller that has already clamped `t` to be
    /// no earlier than every time it fed before (ingest does, for its own
    /// bookkeeping), so the clamp is not paid twice per record.
    #[inline(always)]
    pub fn push_ordered(&mut self, t: Ns, ev: Event) {
        debug_assert!(self.last_ts.is_none_or(|l| t >= l), "push_ordered: time went backwards");
        if self.last_ts.is_none() {
            self.open_gap(t);
        }
        self.last_ts = Some(t);
        match ev {
            Event::ScheduleStart { op } => self.begin(t, Busy::Operator(op)),
            Event::ScheduleStop { op } => self.end(t, Busy::Operator(op)),
            Event::SpanStart { id } => self.begin(t, Busy::Span(id)),
            Event::SpanStop { id } => self.end(t, Busy::Span(id)),
            Event::MessageSend { .. } => self.point(t, None, false),
            Event::MessageRecv { channel, from, .. } => self.point(t, Some((from, channel)), false),
            Event::ProgressSend { .. } => self.point(t, None, true),
            Event::ProgressRecv { channel, from, .. } => self.point(t, Some((from, channel)), true),
            Event::Step { elided, .. } => {
                self.elided = self.elided.saturating_add(elided);
                self.step(t)
            }
            Event::Park { .. } | Event::Unpark | Event::Mark { .. } | Event::Arrangement { .. } => {}
        }
    }

    /// Live deadline: emits what is open up to `t` (a gap as `Open`, a long
    /// execution's piece) so windows before `t` can close; what is open
    /// continues from `t`. An open gap keeps its start: each piece handed
    /// over and the gap itself when it ends reach back to it (the windows
    /// already handed over are skipped, `Windower::place`), so the window
    /// where it ends types the whole of it and carries the earlier windows'
    /// open part to what ended it.
    pub fn force(&mut self, t: Ns) {
        if !self.force_execution(t) {
            return;
        }
        if self.stack.is_empty() {
            if let Some(g) = &mut self.gap {
                if t > g.start.max(g.forced_to) {
                    let cu = g.cause_until.unwrap_or(t).min(t);
                    let it = Item::Gap { start: g.start, end: t, cause_until: cu, next: GapEnd::Open };
                    g.forced_to = t;
                    self.out.push(it);
                }
            }
        }
    }

    /// Live deadline for a stream still recording past `t`: what holds its
    /// windows back is an execution, not silence. A gap held for the
    /// execution after it to show a read goes as it is (that execution, a
    /// long one that only sends, say, read nothing by `t`: no visible
    /// cause), and the running execution's piece is cut at `t`. An open gap
    /// is left alone (its end is near: the stream is recording). False if
    /// the held gap ends after `t` (nothing can go).
    pub fn force_execution(&mut self, t: Ns) -> bool {
        match &self.held {
            Some(h) if h.end() <= t => self.release(),
            Some(_) => return false,
            None => {}
        }
        if let Some(top) = self.stack.last_mut() {
            if t > top.1 {
                let (w, s) = *top;
                top.1 = t;
                self.out.push(Item::Busy { start: s, end: t, what: w });
            }
        }
        true
    }

    /// The stream ended (cleanly or not): closes what is open at the last
    /// timestamp. Open executions are counted as unpaired.
    pub fn finish(&mut self) {
        let Some(t) = self.last_ts else { return };
        if !self.stack.is_empty() {
            self.unpaired += self.stack.len() as u64;
            let (w, s) = *self.stack.last().unwrap();
            if t > s {
                self.emit(Item::Busy { start: s, end: t, what: w });
            }
            self.stack.clear();
        }
        if let Some(g) = self.gap.take() {
            self.release();
            if t > g.start {
                let cu = g.cause_until.unwrap_or(t).min(t);
                self.out.push(Item::Gap { start: g.start, end: t, cause_until: cu, next: GapEnd::Open });
            }
        }
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Event::*;

    fn run(evs: &[(Ns, Event)]) -> Builder {
        let mut b = Builder::new();
        for &(t, e) in evs {
            b.push(t, e);
        }
        b.finish();
        b
    }

    #[test]
    fn executions_gaps_and_causes() {
        let b = run(&[
            (0, ScheduleStart { op: 1 }),
            (5, MessageSend { channel: 2, to: 1, seq: 0, records: 3 }),
            (10, ScheduleStop { op: 1 }),
            (12, Step { elided: 4, spin_ticks: 0 }),
            (30, ScheduleStart { op: 2 }),
            (31, MessageRecv { channel: 2, from: 1, seq: 0, records: 3 }),
            (40, ScheduleStop { op: 2 }),
        ]);
        assert_eq!(
            b.out,
            vec![
                // (the messages go to the window's tables, not the timeline)
                Item::Busy { start: 0, end: 10, what: Busy::Operator(1) },
                // PC4: cause pending until the step marker at 12
                Item::Gap {
                    start: 10,
                    end: 30,
                    cause_until: 12,
                    next: GapEnd::Read { from: 1, channel: 2, kind: MsgKind::Data }
                },
                Item::Busy { start: 30, end: 40, what: Busy::Operator(2) },
            ]
        );
        assert_eq!((b.elided, b.steps, b.unpaired), (4, 1, 0));
    }

    #[test]
    fn nesting_innermost_wins_and_unpaired_counted() {
        let b = run(&[
            (0, ScheduleStart { op: 1 }),
            (2, SpanStart { id: 9 }),
            (6, SpanStop { id: 9 }),
            (8, ScheduleStop { op: 1 }),
            (9, ScheduleStop { op: 5 }),   // no start
            (10, ScheduleStart { op: 3 }), // never stopped
        ]);
        let busy: Vec<_> = b.out.iter().filter(|i| matches!(i, Item::Busy { .. })).copied().collect();
        assert_eq!(
            busy,
            vec![
                Item::Busy { start: 0, end: 2, what: Busy::Operator(1) },
                Item::Busy { start: 2, end: 6, what: Busy::Span(9) },
                Item::Busy { start: 6, end: 8, what: Busy::Operator(1) },
            ]
        );
        assert_eq!(b.unpaired, 2);
    }

    #[test]
    fn progress_outside_executions_splits_gaps_and_extends_cause() {
        let b = run(&[
            (0, ScheduleStart { op: 1 }),
            (1, ScheduleStop { op: 1 }),
            (2, Step { elided: 0, spin_ticks: 0 }),
            (20, ProgressRecv { channel: 0, from: 1, seq: 0 }),
            (21, Step { elided: 0, spin_ticks: 0 }),
            (25, Step { elided: 0, spin_ticks: 0 }),
            (50, ScheduleStart { op: 1 }),
            (51, ScheduleStop { op: 1 }),
        ]);
        let gaps: Vec<_> = b.out.iter().filter(|i| matches!(i, Item::Gap { .. })).copied().collect();
        assert_eq!(
            gaps,
            vec![
                Item::Gap {
                    start: 1,
                    end: 20,
                    cause_until: 2,
                    next: GapEnd::Read { from: 1, channel: 0, kind: MsgKind::Progress }
                },
                // progress read: cause pending for two steps
                Item::Gap { start: 20, end: 50, cause_until: 25, next: GapEnd::NoCause },
            ]
        );
    }

    #[test]
    fn settled_and_force() {
        let mut b = Builder::new();
        b.push(0, ScheduleStart { op: 1 });
        b.push(5, ScheduleStop { op: 1 });
        b.push(6, Step { elided: 0, spin_ticks: 0 });
        assert_eq!(b.settled(), Some(5));
        b.force(100);
        assert_eq!(b.settled(), Some(100));
        assert_eq!(b.out.last(), Some(&Item::Gap { start: 5, end: 100, cause_until: 6, next: GapEnd::Open }));
        // The gap keeps its start: a later deadline hands it over again from
        // 5 (the windows handed over already skip it), and when it ends it
        // comes whole, so the window where it ends sees when it began.
        b.force(200);
        assert_eq!(b.out.last(), Some(&Item::Gap { start: 5, end: 200, cause_until: 6, next: GapEnd::Open }));
        b.force(150);
        assert_eq!(b.settled(), Some(200), "an earlier deadline changes nothing");
        b.push(250, ScheduleStart { op: 2 });
        b.push(260, ScheduleStop { op: 2 });
        b.finish();
        assert!(
            b.out.contains(&Item::Gap { start: 5, end: 250, cause_until: 6, next: GapEnd::NoCause }),
            "{:?}",
            b.out
        );
    }

    /// A long execution that only sends keeps the gap before it waiting for
    /// a read; the live deadline lets that gap go (no visible cause) and
    /// cuts the execution at the deadline, so later windows can close.
    #[test]
    fn force_lets_a_held_gap_go_when_the_execution_after_it_only_sends() {
        let mut b = Builder::new();
        b.push(0, ScheduleStart { op: 1 });
        b.push(10, ScheduleStop { op: 1 });
        b.push(50, ScheduleStart { op: 2 });
        b.push(60, MessageSend { channel: 1, to: 1, seq: 0, records: 1 });
        b.push(70, MessageSend { channel: 1, to: 1, seq: 1, records: 1 });
        assert_eq!(b.settled(), Some(10), "the gap waits for a read");
        b.force(100);
        assert_eq!(b.settled(), Some(100));
        // (No Step came after op 1: its PC4 cause lasts the whole gap.)
        let g = Item::Gap { start: 10, end: 50, cause_until: 50, next: GapEnd::NoCause };
        let tail = Item::Busy { start: 50, end: 100, what: Busy::Operator(2) };
        assert_eq!(b.out[1..], [g, tail]);
        // A deadline before the gap's end leaves it held.
        let mut b = Builder::new();
        b.push(0, ScheduleStart { op: 1 });
        b.push(10, ScheduleStop { op: 1 });
        b.push(50, ScheduleStart { op: 2 });
        b.force(40);
        assert_eq!(b.settled(), Some(10));
        // The stream still records past the deadline (sends at 60 and 70,
        // deadline 65): the held gap goes and the execution is cut at 65;
        // the rest of it follows as its own piece.
        b.push(60, MessageSend { channel: 1, to: 1, seq: 0, records: 1 });
        b.push(70, MessageSend { channel: 1, to: 1, seq: 1, records: 1 });
        assert!(b.force_execution(65));
        assert_eq!(b.settled(), Some(65));
        b.push(120, ScheduleStop { op: 2 });
        b.finish();
        let op2: Vec<(Ns, Ns)> = b
            .out
            .iter()
            .filter(|i| matches!(i, Item::Busy { what: Busy::Operator(2), .. }))
            .map(|i| (i.start(), i.end()))
            .collect();
        assert_eq!(op2, vec![(50, 65), (65, 120)]);
    }
}
