//! The per-record work of a Records frame: each record's time converted
//! and placed in its window, the window's counters kept, the event handed
//! to the stream's activity builder; then the frame's last window and
//! faults booked.

use std::borrow::Borrow;

use ringlog::{FrameHeader, Record};

use super::faults::Fault;
use super::{Proc, Stream};
use crate::analysis::model::{Counters, Half, Ns};
use crate::analysis::window::Windower;
use crate::ingest::clock::Clock;
use crate::ingest::sync::Converter;

/// `Record::event`, inlined into the per-record loop (the same mapping; the
/// kind values are the wire format's).
#[inline(always)]
pub(super) fn event_of(r: &ringlog::Record) -> Option<ringlog::Event> {
    use ringlog::{Event::*, Kind};
    const SS: u8 = Kind::ScheduleStart as u8;
    const SP: u8 = Kind::ScheduleStop as u8;
    const MS: u8 = Kind::MessageSend as u8;
    const MR: u8 = Kind::MessageRecv as u8;
    const PS: u8 = Kind::ProgressSend as u8;
    const PR: u8 = Kind::ProgressRecv as u8;
    const NS: u8 = Kind::SpanStart as u8;
    const NP: u8 = Kind::SpanStop as u8;
    const ST: u8 = Kind::Step as u8;
    const PK: u8 = Kind::Park as u8;
    const UP: u8 = Kind::Unpark as u8;
    const MK: u8 = Kind::Mark as u8;
    const AR: u8 = Kind::Arrangement as u8;
    Some(match r.kind {
        SS => ScheduleStart { op: r.b },
        SP => ScheduleStop { op: r.b },
        MS => MessageSend { channel: r.b, to: r.c, seq: r.a, records: r.d },
        MR => MessageRecv { channel: r.b, from: r.c, seq: r.a, records: r.d },
        PS => ProgressSend { channel: r.b, seq: r.a },
        PR => ProgressRecv { channel: r.b, from: r.c, seq: r.a },
        NS => SpanStart { id: r.a },
        NP => SpanStop { id: r.a },
        ST => Step { elided: r.a, spin_ticks: r.c as u64 | (r.d as u64) << 32 },
        PK => Park { hint: r.a },
        UP => Unpark,
        MK => Mark { id: r.a },
        AR => Arrangement { op: r.b, figure: r.c, value: r.a },
        _ => return None,
    })
}

impl Stream {
    /// After a Records frame's pass: its last window's counters (with the
    /// frame's lost records) and its faults, each on the window it
    /// concerns.
    pub(super) fn close_records_frame(
        &mut self,
        h: &FrameHeader,
        bytes: u64,
        mut pass: FramePass,
        mut faults: Vec<Fault>,
        stream_faults: [Option<String>; 2],
    ) {
        self.count_last_window(h, bytes, &mut pass, &mut faults);
        self.elided_seen = self.builder.elided;
        // Faults of the whole frame (clock sync, the clock gone back): from
        // its first record to its last.
        for why in stream_faults.into_iter().flatten() {
            let t = pass.first_ns.unwrap_or(self.last_ts.unwrap_or(0));
            faults.push((t, self.last_ts.unwrap_or(t), why));
        }
        for (a, b, why) in faults.drain(..) {
            self.windower.fault(a, b, &why);
        }
        if pass.unknown > 0 {
            let t = self.last_ts.unwrap_or(0);
            self.windower.fault(t, t, "records of unknown kind");
        }
        if pass.unplaced > 0 {
            let t = self.last_ts.unwrap_or(0);
            let why = format!(
                "{} records dropped: their time has no place on the timeline (clock conversion)",
                pass.unplaced
            );
            self.windower.fault(t, t, &why);
        }
    }

    /// Counts the frame's last window; the records the frame says were
    /// lost go there, with a fault from the stream's last record before the
    /// frame to its first. A frame that placed no record counts its lost
    /// records and bytes where the stream stands.
    pub(super) fn count_last_window(
        &mut self,
        h: &FrameHeader,
        bytes: u64,
        pass: &mut FramePass,
        faults: &mut Vec<Fault>,
    ) {
        if let Some(t) = pass.first_ns.filter(|_| h.lost > 0) {
            faults.push((pass.last_before.unwrap_or(t), t, format!("{} records lost", h.lost)));
        }
        let w = &mut pass.window;
        if w.index != u64::MAX {
            let c = &mut w.counters;
            c.bytes = w.bytes_left;
            c.records = w.records;
            if h.lost > 0 {
                c.lost = h.lost;
            }
            self.windower.count(w.first_t, c);
        } else if h.lost > 0 {
            let t = self.last_ts.unwrap_or(0);
            self.windower.count(t, &Counters { lost: h.lost, bytes, ..Default::default() });
            faults.push((t, t, format!("{} records lost", h.lost)));
        }
    }
}

/// What the pass over a Records frame's records leaves for its closing.
pub(super) struct FramePass {
    /// Records taken from the frame.
    pub(super) taken: u64,
    /// The stream's last record time before the frame.
    last_before: Option<Ns>,
    /// The time of the frame's first placed record.
    first_ns: Option<Ns>,
    /// Records of a kind this sidecar does not know.
    unknown: u64,
    /// Records whose time has no place on the timeline (the clock-sync
    /// model of their host broke in a way no exchange has shown yet).
    unplaced: u64,
    /// The window the last records went to.
    window: WindowCount,
}

/// The counters of the window a frame's records are going to; handed to
/// the windower when they move on to the next window.
pub(super) struct WindowCount {
    /// The window's index (`u64::MAX`: no record placed yet).
    index: u64,
    /// The time of its first record (tells the windower which window).
    first_t: Ns,
    /// Where it ends. Record times never decrease here, so the window
    /// changes only when one passes this (no division per record; 0 at
    /// first, so the first record comes here too).
    end: Ns,
    counters: Counters,
    /// Records in it so far.
    records: u64,
    /// The frame's bytes, booked to the first window counted.
    bytes_left: u64,
}

impl WindowCount {
    #[inline(always)]
    pub(super) fn new(bytes: u64) -> WindowCount {
        WindowCount {
            index: u64::MAX,
            first_t: 0,
            end: 0,
            counters: Counters::default(),
            records: 0,
            bytes_left: bytes,
        }
    }

    /// A record at `t`, at or past the current window's end: the window of
    /// `t` becomes the current one, the one before (if any) is counted.
    #[inline(always)]
    pub(super) fn enter(&mut self, t: Ns, width: Ns, windower: &mut Windower) {
        let k = t / width;
        self.end = (k + 1).saturating_mul(width);
        if k != self.index {
            if self.index != u64::MAX {
                self.counters.bytes = std::mem::take(&mut self.bytes_left);
                self.counters.records = std::mem::take(&mut self.records);
                windower.count(self.first_t, &self.counters);
                self.counters = Counters::default();
            }
            self.index = k;
            self.first_t = t;
        }
    }
}

/// The stream clock's segment of its last conversion ([`Clock::segment`]),
/// copied out so that converting a run of records stays in registers.
#[derive(Clone, Copy)]
pub(super) struct ClockSegment {
    lo: u64,
    hi: u64,
    base: f64,
    slope: f64,
}

impl ClockSegment {
    #[inline(always)]
    pub(super) fn of(clock: &Clock) -> ClockSegment {
        let (lo, hi, base, slope) = clock.segment();
        ClockSegment { lo, hi, base, slope }
    }

    /// Stream ticks on the host's monotonic timeline (None: no place on
    /// it); a conversion outside the segment moves to the clock's new one.
    #[inline(always)]
    pub(super) fn to_ns(&mut self, clock: &mut Clock, ticks: u64) -> Option<Ns> {
        if ticks >= self.lo && ticks < self.hi {
            return Some(Clock::map(self.base, ticks.wrapping_sub(self.lo), self.slope));
        }
        let t = clock.to_ns(ticks).ok()?;
        *self = ClockSegment::of(clock);
        Some(t)
    }
}

/// The per-record loop of a Records frame (issue stage 1, decode and
/// clock): each record's time put on its host's timeline (the stream
/// clock's model, [`crate::ingest::clock`]) and, for a synchronized host,
/// on the reference one ([`crate::ingest::sync`]), never before the
/// stream's last; counted in its window; its event handed on
/// ([`take_event`]). Gives `recs` back.
#[inline(always)]
pub(super) fn take_records<R: Borrow<Record>, I: Iterator<Item = R>>(
    mut recs: I,
    p: &mut Proc,
    st: &mut Stream,
    conv: &Option<Converter>,
    width: Ns,
    bytes: u64,
) -> (I, FramePass) {
    let mut pass = FramePass {
        taken: 0,
        last_before: st.last_ts,
        first_ns: None,
        unknown: 0,
        unplaced: 0,
        window: WindowCount::new(bytes),
    };
    let mut segment = ClockSegment::of(&p.clock);
    // (In a local while the loop runs: kept in a register.)
    let mut last_ts = st.last_ts;
    for r in recs.by_ref() {
        let r: &Record = r.borrow();
        pass.taken += 1;
        let Some(t) = segment.to_ns(&mut p.clock, r.ts) else {
            pass.unplaced += 1;
            continue;
        };
        // A synchronized host: onto the reference timeline (sync.rs).
        let (t, width_iv) = match conv {
            None => (t, 0),
            Some(cv) => {
                let Some(x) = cv.point(t) else {
                    pass.unplaced += 1;
                    continue;
                };
                x
            }
        };
        let t = last_ts.map_or(t, |l| t.max(l));
        last_ts = Some(t);
        if t >= pass.window.end {
            if pass.first_ns.is_none() {
                pass.first_ns = Some(t);
                // (Messages go to their window before the items that start
                // the stream are placed.)
                st.windower.start_at(t);
            }
            pass.window.enter(t, width, &mut st.windower);
        }
        pass.window.records += 1;
        let c = &mut pass.window.counters;
        c.clock_uncertainty_ns = c.clock_uncertainty_ns.max(width_iv);
        match event_of(r) {
            Some(ev) => take_event(st, c, &p.clock, t, ev),
            None => pass.unknown += 1,
        }
    }
    st.last_ts = last_ts;
    (recs, pass)
}

/// A record's event: a Step's counts into its window's counters, a message
/// half straight to its window's tables (the builder only sees how it
/// shapes the timeline), every event to the stream's activity builder.
#[inline(always)]
pub(super) fn take_event(st: &mut Stream, c: &mut Counters, clock: &Clock, t: Ns, ev: ringlog::Event) {
    use ringlog::Event::*;
    let w = &mut st.windower;
    match ev {
        Step { elided, spin_ticks } => {
            // (Both come from the stream's bytes: a corrupt count must not
            // overflow the sum.)
            c.elided = c.elided.saturating_add(elided);
            c.steps += 1;
            c.spin_ns = c.spin_ns.saturating_add(clock.span_ns(spin_ticks));
        }
        MessageSend { channel, to, seq, .. } => w.message(t, Half::Send, channel, to, seq),
        MessageRecv { channel, from, seq, .. } => w.message(t, Half::Recv, channel, from, seq),
        ProgressSend { channel, seq } => w.message(t, Half::PSend, channel, 0, seq),
        ProgressRecv { channel, from, seq } => w.message(t, Half::PRecv, channel, from, seq),
        Arrangement { op, figure, value } => {
            // (A level, not a point of the timeline: the builder need not see it.)
            w.arrangement(t, op, figure, value);
            return;
        }
        Mark { id } => match ringlog::Mark::decode(id) {
            Some(ringlog::Mark::Shutdown(op)) => st.note_shut_down(t, op),
            Some(ringlog::Mark::UntracedProgress(op)) => st.note_untraced(op),
            Some(ringlog::Mark::Detached) => st.detached_at = st.detached_at.or(Some(t)),
            _ => {}
        },
        _ => {}
    }
    st.builder.push_ordered(t, ev);
}
