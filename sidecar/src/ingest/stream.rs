//! Decode and clock (issue stage 1): the frames of one byte stream (a file,
//! or one probe connection) → per-worker activities → per-window fragments.
//! No I/O: the caller feeds frames and end-of-input; faults are reported
//! with the stream and byte offset they concern, and never stop the other
//! streams.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use ringlog::{Body, ClockDomain, DecodeError, Frame, FrameHeader, Meta, Payload, Record, StreamError, PROCESS_WIDE};
use rustc_hash::FxHashMap;

use crate::analysis::activity::Builder;
use crate::analysis::model::{Counters, Fragment, Half, Ns, SeqMark, Sid};
use crate::analysis::window::Windower;
use crate::ingest::clock::Clock;
use crate::ingest::sync::Converter;

/// `Record::event`, inlined into the per-record loop (the same mapping; the
/// kind values are the wire format's).
#[inline(always)]
fn event_of(r: &ringlog::Record) -> Option<ringlog::Event> {
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
        _ => return None,
    })
}

/// A realtime − monotonic offset as fragments carry it; one an i64 cannot
/// hold (a corrupt clock sample) is unknown rather than truncated.
fn offset_i64(o: i128) -> Option<i64> {
    i64::try_from(o).ok()
}

struct Proc {
    clock: Clock,
    program: String,
    workers: u32,
    /// The frame number expected next (None: no frame seen yet). Wider
    /// than a frame number: the one after #2⁶⁴−1 (a corrupt header) is not
    /// #0.
    next_seq: Option<u128>,
    ended: bool,
}

struct Stream {
    builder: Builder,
    windower: Windower,
    /// The frame number expected next (None: no frame seen yet; wider
    /// than a frame number, as in `Proc`).
    next_seq: Option<u128>,
    ops: Vec<(u32, String)>,
    /// Operators' addresses (their scopes), as `ops`.
    op_addrs: Vec<(u32, Vec<u32>)>,
    channels: Vec<crate::analysis::model::ChannelMeta>,
    spans: Vec<(u64, String)>,
    /// Last record time (ns): where lost records would have been.
    last_ts: Option<Ns>,
    done: bool,
    elided_seen: u64,
}

impl Stream {
    /// Ends the stream before its End frame (input over, a stop, a fault):
    /// its open windows go to `out` marked incomplete with `why`. (Late
    /// items are not counted: no fragment follows to carry the fault.)
    /// Returns the faults that found no window (the stream had no records).
    fn cut(&mut self, why: Option<&str>, out: &mut Vec<Fragment>) -> Vec<String> {
        self.done = true;
        self.builder.finish();
        self.windower.add(&mut self.builder.out);
        self.windower.finish(false, why, &mut self.builder.out, out);
        self.windower.unplaced_faults()
    }

    /// After a Records frame's pass: its last window's counters (with the
    /// frame's lost records) and its faults, each on the window it
    /// concerns.
    fn close_records_frame(
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
    fn count_last_window(&mut self, h: &FrameHeader, bytes: u64, pass: &mut FramePass, faults: &mut Vec<Fault>) {
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

/// A fault to place on the windows it concerns: (from, to, what).
type Fault = (Ns, Ns, String);

/// What the pass over a Records frame's records leaves for its closing.
struct FramePass {
    /// Records taken from the frame.
    taken: u64,
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
struct WindowCount {
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
    fn new(bytes: u64) -> WindowCount {
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
    fn enter(&mut self, t: Ns, width: Ns, windower: &mut Windower) {
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
struct ClockSegment {
    lo: u64,
    hi: u64,
    base: f64,
    slope: f64,
}

impl ClockSegment {
    #[inline(always)]
    fn of(clock: &Clock) -> ClockSegment {
        let (lo, hi, base, slope) = clock.segment();
        ClockSegment { lo, hi, base, slope }
    }

    /// Stream ticks on the host's monotonic timeline (None: no place on
    /// it); a conversion outside the segment moves to the clock's new one.
    #[inline(always)]
    fn to_ns(&mut self, clock: &mut Clock, ticks: u64) -> Option<Ns> {
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
fn take_records<R: Borrow<Record>, I: Iterator<Item = R>>(
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
fn take_event(st: &mut Stream, c: &mut Counters, clock: &Clock, t: Ns, ev: ringlog::Event) {
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
        _ => {}
    }
    st.builder.push_ordered(t, ev);
}

/// One byte stream's ingest state.
pub struct Ingest {
    pub name: String,
    width: Ns,
    procs: FxHashMap<(u64, u32), Proc>,
    streams: BTreeMap<Sid, Stream>,
    /// Fragments ready for their window's owner.
    pub out: Vec<Fragment>,
    /// Faults found (already attached to the windows they concern).
    pub errors: Vec<String>,
    pub records: u64,
    pub bytes: u64,
    failed: bool,
    /// A Hello frame was read (the byte stream is a probe's).
    greeted: bool,
    /// Streams that ended, with the first window they are absent from and
    /// their last sequence numbers; the caller hands these to every window
    /// owner.
    pub ended: Vec<(Sid, u64, Vec<SeqMark>)>,
    /// Clock sync: which processes are converted to the reference timeline.
    pub sync: crate::ingest::sync::StreamSync,
}

impl Ingest {
    pub fn new(name: impl Into<String>, width: Ns) -> Ingest {
        Ingest {
            name: name.into(),
            width,
            procs: FxHashMap::default(),
            streams: BTreeMap::new(),
            out: Vec::new(),
            errors: Vec::new(),
            records: 0,
            bytes: 0,
            failed: false,
            greeted: false,
            ended: Vec::new(),
            sync: Default::default(),
        }
    }

    /// Shares the clock models of the sidecar process (see `sync`).
    pub fn with_sync(mut self, shared: crate::ingest::sync::SharedSync) -> Ingest {
        self.sync = crate::ingest::sync::StreamSync::new(shared);
        self
    }

    fn proc(&mut self, host: u64, pid: u32, domain: ClockDomain) -> &mut Proc {
        self.procs.entry((host, pid)).or_insert_with(|| Proc {
            clock: Clock::new(domain, 0),
            program: String::new(),
            workers: 0,
            next_seq: None,
            ended: false,
        })
    }

    fn stream(&mut self, sid: Sid) -> &mut Stream {
        let width = self.width;
        self.streams.entry(sid).or_insert_with(|| Stream {
            builder: Builder::new(),
            windower: Windower::new(sid, width),
            next_seq: None,
            ops: Vec::new(),
            op_addrs: Vec::new(),
            channels: Vec::new(),
            spans: Vec::new(),
            last_ts: None,
            done: false,
            elided_seen: 0,
        })
    }

    fn fault(&mut self, what: String) {
        self.errors.push(format!("{}: {}", self.name, what));
    }

    /// Faults of a stream that ended before its first record: no window
    /// holds them, so they are errors of the input.
    fn report_unplaced(&mut self, sid: Sid, faults: Vec<String>) {
        for why in faults {
            self.fault(format!("stream {sid}: {why} (no record of it arrived)"));
        }
    }

    /// Handles one decoded frame of `bytes` bytes.
    pub fn frame(&mut self, f: Frame, bytes: u64) {
        match f.body {
            Body::Records(recs) => {
                self.records_frame(f.header, recs.into_iter(), bytes);
            }
            body => self.other_frame(f.header, body, bytes),
        }
    }

    /// Handles one frame from [`ringlog::decode_frame_with`] (a Records
    /// frame's records decoded as they are ingested). A fault in its
    /// records is returned, for the caller to drop the stream
    /// ([`Ingest::stream_error`]); the records before it have been taken.
    pub fn payload(&mut self, h: FrameHeader, payload: Payload<'_>, bytes: u64) -> Result<(), DecodeError> {
        match payload {
            Payload::Records(recs) => {
                let mut recs = self.records_frame(h, recs, bytes);
                // (What a dropped frame did not take is checked all the same.)
                recs.by_ref().for_each(drop);
                recs.finish()
            }
            Payload::Other(body) => {
                self.other_frame(h, body, bytes);
                Ok(())
            }
        }
    }

    /// Handles a Records frame whose records were decoded elsewhere (on a
    /// reading thread, see `io::Unpacker`): the same as [`Ingest::payload`]
    /// with a payload that decodes to `recs`.
    pub fn records(&mut self, h: FrameHeader, recs: &[Record], bytes: u64) {
        // (Decoded already: what a dropped frame did not take needs no
        // check.)
        let _ = self.records_frame(h, recs.iter(), bytes);
    }

    /// A process-wide frame (hello, clock samples, end).
    fn process_frame(&mut self, h: &FrameHeader, body: Option<Body>) {
        let sid = Sid::from(h.stream);
        let p = self.proc(sid.host, sid.process, h.domain);
        // (A first frame numbered past 0 is a process joined mid-way: a
        // probe that reconnected to a restarted sidecar. Its worker streams
        // say what that means for their windows.)
        let expected = p.next_seq.unwrap_or(h.seq as u128);
        let gap = h.seq as u128 != expected;
        p.next_seq = Some(h.seq as u128 + 1);
        match body {
            Some(Body::Hello(hello)) => {
                p.program = hello.program.clone();
                p.workers = hello.workers;
                p.clock.set_ticks_per_sec(hello.ticks_per_sec);
            }
            Some(Body::Clock(samples)) => {
                let bad: Vec<_> = samples.into_iter().filter_map(|s| p.clock.add(s).err()).collect();
                for why in bad {
                    self.fault(format!("{}: clock #{}: {why}", h.stream, h.seq));
                }
            }
            Some(Body::End(_)) => p.ended = true,
            _ => {}
        }
        if gap {
            self.fault(format!("{}: process frames missing (frame #{} after #{})", h.stream, h.seq, expected));
        }
    }

    /// The bookkeeping of every worker frame: its stream (made if new),
    /// and the faults its sequence number shows. `None`: the stream is
    /// done, the frame is ignored.
    fn worker_frame(&mut self, h: &FrameHeader) -> Option<Vec<Fault>> {
        let sid = Sid::from(h.stream);
        let (program, workers) = {
            let p = self.proc(sid.host, sid.process, h.domain);
            (p.program.clone(), p.workers)
        };
        let st = self.stream(sid);
        st.windower.workers_expected = workers;
        st.windower.program = program;
        if st.done {
            return None;
        }
        let mut faults: Vec<Fault> = Vec::new();
        match st.next_seq {
            // Joined mid-way (a probe reconnected to a restarted sidecar,
            // or a file missing its start): the stream's first window lacks
            // what came before. (The windower puts a fault that comes
            // before any record in the stream's first window.)
            None if h.seq > 0 => faults.push((
                0,
                0,
                format!("joined the stream mid-way (first frame #{}): earlier frames not seen", h.seq),
            )),
            Some(n) if h.seq as u128 != n => {
                let from = st.last_ts.unwrap_or(0);
                faults.push((from, from, format!("frames missing (got #{} expected #{n})", h.seq)));
            }
            _ => {}
        }
        st.next_seq = Some(h.seq as u128 + 1);
        Some(faults)
    }

    /// A Records frame, its records taken from `recs` as they are ingested;
    /// gives `recs` back (owned by the pass over them, so its loop keeps the
    /// decoder's state in registers). The frame's bookkeeping, the pass
    /// ([`take_records`]), then its last window and faults booked
    /// ([`Stream::close_records_frame`]).
    fn records_frame<R: Borrow<Record>, I: Iterator<Item = R>>(&mut self, h: FrameHeader, recs: I, bytes: u64) -> I {
        if self.failed {
            return recs;
        }
        self.bytes += bytes;
        if h.stream.worker == PROCESS_WIDE {
            self.process_frame(&h, None);
            return recs;
        }
        let Some(faults) = self.worker_frame(&h) else { return recs };
        let sid = Sid::from(h.stream);
        let (conv, sync_fault) = self.sync.frame(sid.host, sid.process);
        let Some(p) = self.procs.get_mut(&(sid.host, sid.process)) else { return recs };
        if !p.clock.has_sample() {
            self.records_before_clock(&h, sid);
            return recs;
        }
        let st = self.streams.get_mut(&sid).unwrap();
        // A stream clock that went back: every frame from then on is
        // faulted (once the TSC passes its old value, samples are accepted
        // again, but the segment across the reset maps wrongly).
        let clock_fault = (p.clock.went_back() > 0).then(|| {
            "the stream clock went back (a TSC reset or write): its times from here on are not on the host's \
             timeline"
                .to_string()
        });
        let (recs, pass) = take_records(recs, p, st, &conv, self.width, bytes);
        self.records += pass.taken;
        st.close_records_frame(&h, bytes, pass, faults, [sync_fault, clock_fault]);
        Self::flush(st, &mut self.out, false);
        recs
    }

    /// A Records frame of a process with no clock sample yet: its records
    /// cannot be placed, and are dropped.
    fn records_before_clock(&mut self, h: &FrameHeader, sid: Sid) {
        let n = h.count;
        self.fault(format!("{}: {} records before any clock sample, dropped", h.stream, n));
        let st = self.streams.get_mut(&sid).unwrap();
        let t = st.last_ts.unwrap_or(0);
        st.windower.fault(t, t, "records before any clock sample");
    }

    /// Any frame but Records.
    fn other_frame(&mut self, h: FrameHeader, body: Body, bytes: u64) {
        if self.failed {
            return;
        }
        self.bytes += bytes;
        self.greeted |= matches!(body, Body::Hello(_));
        let sid = Sid::from(h.stream);
        if let Body::ClockSync(cs) = &body {
            // A relay's frames, with a process id of their own (FORMAT.md).
            self.sync.clock_sync(sid.host, cs);
            return;
        }
        if h.stream.worker == PROCESS_WIDE {
            return self.process_frame(&h, Some(body));
        }
        // Per-worker frame.
        let Some(mut faults) = self.worker_frame(&h) else { return };
        let st = self.streams.get_mut(&sid).expect("made by worker_frame");
        match body {
            // (The decoder refuses worker-specific ClockSync frames; Records
            // go to `records_frame`.)
            Body::Hello(_) | Body::ClockSync(_) | Body::Records(_) => {}
            Body::Metadata(m) => {
                for e in m {
                    match e {
                        Meta::Operator { id, name, addr } => {
                            st.ops.retain(|(i, _)| *i != id);
                            st.ops.push((id, name));
                            st.op_addrs.retain(|(i, _)| *i != id);
                            st.op_addrs.push((id, addr));
                        }
                        Meta::Channel { id, src, dst } => st.channels.push((id, src, dst)),
                        Meta::Span { id, name } => {
                            st.spans.retain(|(i, _)| *i != id);
                            st.spans.push((id, name));
                        }
                    }
                }
            }
            Body::Clock(_) => {}
            Body::End(_) => {
                if h.lost > 0 {
                    let t = st.last_ts.unwrap_or(0);
                    st.windower.count(t, &Counters { lost: h.lost, ..Default::default() });
                    st.windower.fault(t, t, &format!("{} records lost", h.lost));
                }
                st.builder.finish();
                st.done = true;
                for (a, b, why) in faults.drain(..) {
                    st.windower.fault(a, b, &why);
                }
                let before = self.out.len();
                Self::flush(st, &mut self.out, true);
                st.windower.finish(true, None, &mut st.builder.out, &mut self.out);
                let unplaced = st.windower.unplaced_faults();
                self.report_unplaced(sid, unplaced);
                self.mark_ended(sid);
                self.finish_batch(before);
                return;
            }
        }
        let st = self.streams.get_mut(&sid).unwrap();
        for (a, b, why) in faults.drain(..) {
            st.windower.fault(a, b, &why);
        }
    }

    fn flush(st: &mut Stream, out: &mut Vec<Fragment>, all: bool) {
        let late = st.windower.add(&mut st.builder.out);
        if late > 0 {
            let t = st.last_ts.unwrap_or(0);
            st.windower.fault(t, t, "late data for a window already analyzed");
        }
        if let Some(s) = st.builder.settled() {
            let before = out.len();
            if all {
                // handled by windower.finish
            } else {
                st.windower.take_ready(s, &mut st.builder.out, out);
            }
            for f in &mut out[before..] {
                f.ops = st.ops.clone();
                f.op_addrs = st.op_addrs.clone();
                f.channels = st.channels.clone();
                f.spans = st.spans.clone();
            }
        }
    }

    fn attach_meta(&mut self, before: usize) {
        for f in &mut self.out[before..] {
            if let Some(st) = f.stream.and_then(|s| self.streams.get(&s)) {
                if f.ops.is_empty() {
                    f.ops = st.ops.clone();
                    f.op_addrs = st.op_addrs.clone();
                    f.channels = st.channels.clone();
                    f.spans = st.spans.clone();
                }
            }
        }
    }

    fn realtime_offsets(&mut self, before: usize) {
        for f in &mut self.out[before..] {
            if let Some(s) = f.stream {
                f.realtime_offset =
                    self.procs.get(&(s.host, s.process)).and_then(|p| p.clock.realtime_offset()).and_then(offset_i64);
            }
        }
    }

    /// Call after every batch of frames: attaches metadata and offsets.
    pub fn finish_batch(&mut self, before: usize) {
        self.attach_meta(before);
        self.realtime_offsets(before);
        self.timelines(before);
    }

    /// Fragments of converted processes go to the reference host's windows,
    /// with its realtime offset.
    fn timelines(&mut self, before: usize) {
        for f in &mut self.out[before..] {
            if let Some(s) = f.stream.filter(|s| self.sync.converted(s.host, s.process)) {
                f.timeline = Some(self.sync.timeline(s.host, s.process));
                f.realtime_offset = self.sync.shared.lock().reference_realtime_offset.and_then(offset_i64);
            }
        }
    }

    /// The byte stream failed to decode: that is final for it. Every stream
    /// of it ends with the fault named.
    pub fn decode_error(&mut self, e: &StreamError) {
        let what = format!("decode error at byte {}: {}", e.offset, e.error);
        self.fault(what.clone());
        self.end_all(Some(&what));
        self.failed = true;
    }

    /// A decode error: if it concerns one worker stream's frame only (its
    /// header sound, see [`StreamError::stream`]), that stream is dropped —
    /// its open windows end incomplete with the fault, and its later frames
    /// are ignored — and true is returned: the byte stream's other streams
    /// go on. Otherwise (the framing is lost, or a process-wide frame that
    /// every stream of the process depends on) everything ends as with
    /// [`Ingest::decode_error`], and false is returned.
    ///
    /// A dropped stream is not ended: the windows after it lack that worker
    /// and are reported incomplete rather than analyzed as if it had
    /// finished.
    pub fn stream_error(&mut self, e: &StreamError) -> bool {
        let Some(id) = e.stream.filter(|s| !s.is_process_wide()) else {
            self.decode_error(e);
            return false;
        };
        let what = format!("stream {id} dropped: decode error at byte {}: {}", e.offset, e.error);
        self.stream(Sid::from(id));
        let st = self.streams.get_mut(&Sid::from(id)).expect("just made");
        if st.done {
            // Dropped (or ended) before: reported then. A probe that keeps
            // sending corrupt frames must not flood the errors.
            return true;
        }
        let before = self.out.len();
        let unplaced = st.cut(Some(&what), &mut self.out);
        self.fault(what);
        self.report_unplaced(Sid::from(id), unplaced);
        self.finish_batch(before);
        true
    }

    /// End of input (file end, connection closed). Streams without their
    /// End frame were cut off: their last windows are incomplete.
    pub fn eof(&mut self) {
        let cut: Vec<Sid> = self.streams.iter().filter(|(_, s)| !s.done).map(|(k, _)| *k).collect();
        if !cut.is_empty() {
            self.fault(format!(
                "{} stream(s) ended without an End frame (disconnect or truncation): {}",
                cut.len(),
                cut.iter().map(|s| s.worker.to_string()).collect::<Vec<_>>().join(",")
            ));
        }
        self.end_all(Some("stream cut off without End (disconnect)"));
    }

    /// The sidecar is stopping (Ctrl-C): open streams end here; their last
    /// windows are marked as cut by the stop, not by the probe.
    pub fn stop(&mut self) {
        self.end_all(Some("analysis stopped (Ctrl-C) before the stream ended"));
    }

    fn end_all(&mut self, why: Option<&str>) {
        let before = self.out.len();
        let mut ended = Vec::new();
        for (sid, st) in self.streams.iter_mut() {
            if st.done {
                continue;
            }
            let unplaced = st.cut(why, &mut self.out);
            ended.push((*sid, unplaced));
        }
        for (sid, unplaced) in ended {
            self.report_unplaced(sid, unplaced);
            self.mark_ended(sid);
        }
        self.finish_batch(before);
    }

    /// A stream ended: note the first window it is absent from, so that the
    /// owners of later windows do not count it as missing.
    fn mark_ended(&mut self, sid: Sid) {
        if let Some(st) = self.streams.get(&sid) {
            self.ended.push((sid, st.windower.next_window(), st.windower.last_marks()));
        }
    }

    /// Live deadline: every open stream of `host` emits what it has up to
    /// `t` so that windows ending by `t` can close (what follows continues).
    pub fn force(&mut self, host: u64, t: Ns) {
        // Cut only at a window boundary: an open gap then ends exactly at its
        // window's end (a wait cut there, Sager §3.1 projection) instead of a
        // wait ending mid-window without a terminator.
        let t = t / self.width * self.width;
        let before = self.out.len();
        for (sid, st) in self.streams.iter_mut() {
            if st.done || self.sync.timeline(sid.host, sid.process) != host {
                continue;
            }
            match st.last_ts {
                Some(l) if l < t => st.builder.force(t),
                // (Recording past `t`, yet an execution holds it back.)
                Some(_) if st.builder.settled().is_some_and(|s| s < t) => {
                    st.builder.force_execution(t);
                }
                _ => continue,
            }
            Self::flush(st, &mut self.out, false);
        }
        self.finish_batch(before);
    }

    /// Lowest window index this byte stream may still send a fragment for
    /// (None: nothing open).
    /// `shift(host)` maps a host's window index to timely time.
    pub fn frontier(&self, shift: impl Fn(u64) -> u64) -> Option<u64> {
        self.streams
            .iter()
            .filter(|(_, s)| !s.done)
            .map(|(k, s)| s.windower.next_window() + shift(self.sync.timeline(k.host, k.process)))
            .min()
    }

    /// Whether any stream has shown itself (a frame of a worker).
    pub fn has_streams(&self) -> bool {
        !self.streams.is_empty()
    }

    /// The timelines (hosts) this byte stream's windows are on.
    pub fn hosts(&self) -> Vec<u64> {
        let mut h: Vec<u64> = self.streams.keys().map(|s| self.sync.timeline(s.host, s.process)).collect();
        h.sort_unstable();
        h.dedup();
        h
    }

    /// Whether a Hello frame has been read: what a probe sends first on
    /// every connection (a relay forwards it).
    pub fn greeted(&self) -> bool {
        self.greeted
    }

    pub fn all_done(&self) -> bool {
        self.streams.values().all(|s| s.done)
    }

    pub fn realtime_offset(&self, host: u64) -> Option<i128> {
        self.procs.iter().find(|(k, _)| k.0 == host).and_then(|(_, p)| p.clock.realtime_offset()).or_else(|| {
            let reg = self.sync.shared.lock();
            reg.reference.filter(|&r| r == host).and(reg.reference_realtime_offset)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog::{ClockSample, Decoder, Encoder, EndStats, Event, Hello, Record, StreamId};

    /// A one-worker process's Hello (TSC at 1 GHz).
    fn hello() -> Hello {
        Hello {
            host_name: "h".into(),
            program: "p".into(),
            pid: 1,
            workers: 1,
            invariant_tsc: true,
            ticks_per_sec: 1_000_000_000,
        }
    }

    fn bytes(with_end: bool) -> Vec<u8> {
        let mut e = Encoder::new();
        let mut out = Vec::new();
        let pw = StreamId { host: 7, process: 1, worker: PROCESS_WIDE };
        let w0 = StreamId { host: 7, process: 1, worker: 0 };
        let hello = hello();
        e.hello(pw, 0, ClockDomain::Tsc, &hello, &mut out);
        e.clock(pw, 1, ClockDomain::Tsc, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 5 }], &mut out);
        e.hello(w0, 0, ClockDomain::Tsc, &hello, &mut out);
        e.metadata(
            w0,
            1,
            ClockDomain::Tsc,
            &[Meta::Operator { id: 3, name: "Map".into(), addr: vec![0, 3] }],
            &mut out,
        );
        let recs: Vec<Record> = (0..10)
            .flat_map(|i| {
                [
                    Record::from_event(i * 100, Event::ScheduleStart { op: 3 }),
                    Record::from_event(i * 100 + 50, Event::Mark { id: 1 }),
                    Record::from_event(i * 100 + 60, Event::ScheduleStop { op: 3 }),
                ]
            })
            .collect();
        e.records(w0, 2, 0, ClockDomain::Tsc, &[&recs[..15]], &mut out);
        e.records(w0, 3, 4, ClockDomain::Tsc, &[&recs[15..]], &mut out);
        if with_end {
            e.end(w0, 4, 0, ClockDomain::Tsc, &EndStats { produced: 34, lost: 4, elided: 0 }, &mut out);
        }
        out
    }

    fn run(b: &[u8]) -> Ingest {
        run_width(b, 250)
    }

    /// Ingests `b` whole into windows of `width` ns (a decode error ends it).
    fn run_width(b: &[u8], width: Ns) -> Ingest {
        let mut ing = Ingest::new("test", width);
        for f in Decoder::new(b) {
            match f {
                Ok(f) => {
                    let before = ing.out.len();
                    ing.frame(f, 1);
                    ing.finish_batch(before);
                }
                Err(e) => {
                    ing.decode_error(&e);
                    return ing;
                }
            }
        }
        ing.eof();
        ing
    }

    #[test]
    fn inlined_event_mapping_is_records() {
        for kind in 0..=255u8 {
            let r = Record { ts: 1, a: 0x1234_5678_9abc, b: 7, c: 0xdead_beef, d: 0x0bad_f00d, kind, _pad: [0; 3] };
            assert_eq!(event_of(&r), r.event(), "kind {kind}");
        }
    }

    #[test]
    fn fragments_per_window_with_loss_marked() {
        let ing = run(&bytes(true));
        let ws: Vec<u64> = ing.out.iter().map(|f| f.window).collect();
        assert_eq!(ws, vec![0, 1, 2, 3]);
        assert_eq!(ing.out.iter().map(|f| f.counters.records).sum::<u64>(), 30);
        assert_eq!(ing.out[0].ops, vec![(3, "Map".to_string())]);
        // the loss sits between record 15 (t=460) and record 16 (t=500)
        assert!(ing.out[1].faults.iter().any(|f| f.contains("4 records lost")));
        assert!(ing.out[0].faults.is_empty());
        assert!(ing.out[3].ended);
        assert!(ing.errors.is_empty());
    }

    const PW: StreamId = StreamId { host: 7, process: 1, worker: PROCESS_WIDE };
    const W0: StreamId = StreamId { host: 7, process: 1, worker: 0 };

    /// A clock sample with CLOCK_REALTIME = CLOCK_MONOTONIC.
    fn cs(ticks: u64, ns: u64) -> ClockSample {
        ClockSample { ticks, monotonic_ns: ns, realtime_ns: ns }
    }

    /// Process `PW` and its worker `W0` started, with clock samples at 1 s
    /// and 2 s where the TSC reads CLOCK_MONOTONIC (process frames #0-#2,
    /// the worker's Hello #0).
    fn tsc_stream_at_2s() -> (Encoder, Vec<u8>) {
        let (mut e, mut out) = (Encoder::new(), Vec::new());
        let hello = hello();
        e.hello(PW, 0, ClockDomain::Tsc, &hello, &mut out);
        e.clock(PW, 1, ClockDomain::Tsc, &[cs(1_000_000_000, 1_000_000_000)], &mut out);
        e.clock(PW, 2, ClockDomain::Tsc, &[cs(2_000_000_000, 2_000_000_000)], &mut out);
        e.hello(W0, 0, ClockDomain::Tsc, &hello, &mut out);
        (e, out)
    }

    /// A stream clock that goes back (a TSC reset or write: a sample whose
    /// ticks are lower than the last one's while CLOCK_MONOTONIC went on)
    /// cannot be mapped any more: the samples after it are ignored, and the
    /// records after it land at the stream's last time (here all 40, 400 ms
    /// of work, in window 23 instead of 25-28). That must not be silent: the
    /// windows from there on carry a fault.
    #[test]
    fn a_stream_clock_that_goes_back_is_a_fault() {
        let (mut e, mut out) = tsc_stream_at_2s();
        let (pw, w0) = (PW, W0);
        let marks = |from: u64| -> Vec<Record> {
            (0..40).map(|i| Record::from_event(from + i * 10_000_000, Event::Mark { id: 1 })).collect()
        };
        e.records(w0, 1, 0, ClockDomain::Tsc, &[&marks(2_000_000_000)], &mut out);
        // At 2.5 s the TSC restarts from 1000.
        e.clock(pw, 3, ClockDomain::Tsc, &[cs(1_000, 2_500_000_000)], &mut out);
        e.records(w0, 2, 0, ClockDomain::Tsc, &[&marks(1_000)], &mut out);
        e.end(w0, 3, 0, ClockDomain::Tsc, &EndStats { produced: 80, lost: 0, elided: 0 }, &mut out);
        let ing = run_width(&out, 100_000_000);
        let at: Vec<(u64, u64, bool)> = ing
            .out
            .iter()
            .map(|f| (f.window, f.counters.records, f.faults.iter().any(|x| x.contains("stream clock went back"))))
            .collect();
        assert!(at.iter().any(|&(w, n, fault)| w >= 23 && n > 0 && fault), "{at:?}");
    }

    /// The TSC goes back by 1.5 s at 2.5 s (a reset or write) and the probe
    /// goes on with a sample a second and a Records frame every 100 ms. Once
    /// the TSC passes the last accepted sample's ticks again (after 1.5 s)
    /// its samples are accepted, yet the mapping across the reset is wrong:
    /// every window from the reset on carries the fault (only those of the
    /// frames right after a rejected sample did).
    #[test]
    fn a_stream_clock_that_went_back_faults_every_later_window() {
        let (mut e, mut out) = tsc_stream_at_2s();
        let (pw, w0) = (PW, W0);
        const BACK: u64 = 1_500_000_000;
        let (mut pseq, mut wseq) = (3, 1);
        // True time t (ns) from 2.0 s to 6.0 s, a frame of 10 marks each 100 ms.
        let mut t = 2_000_000_000u64;
        while t < 6_000_000_000 {
            if t.is_multiple_of(1_000_000_000) && t > 2_000_000_000 {
                let ticks = if t >= 2_500_000_000 { t - BACK } else { t };
                e.clock(pw, pseq, ClockDomain::Tsc, &[cs(ticks, t)], &mut out);
                pseq += 1;
            }
            let recs: Vec<Record> = (0..10)
                .map(|i| {
                    let tt = t + i * 10_000_000;
                    let ticks = if tt >= 2_500_000_000 { tt - BACK } else { tt };
                    Record::from_event(ticks, Event::Mark { id: 1 })
                })
                .collect();
            e.records(w0, wseq, 0, ClockDomain::Tsc, &[&recs], &mut out);
            wseq += 1;
            t += 100_000_000;
        }
        e.end(w0, wseq, 0, ClockDomain::Tsc, &EndStats { produced: 400, lost: 0, elided: 0 }, &mut out);
        let ing = run_width(&out, 100_000_000);
        let at: Vec<(u64, u64, bool)> = ing
            .out
            .iter()
            .filter(|f| f.counters.records > 0)
            .map(|f| (f.window, f.counters.records, f.faults.iter().any(|x| x.contains("stream clock went back"))))
            .collect();
        // Every window with records from the reset on carries the fault.
        let first = at.iter().position(|x| x.2).expect("a fault");
        assert!(at[first..].iter().all(|x| x.2), "{at:?}");
    }

    /// A clock sample that puts the TSC's rate far off is ignored and named;
    /// the records go on being converted with the samples around it.
    #[test]
    fn an_implausible_clock_sample_is_named_and_ignored() {
        let (mut e, mut out) = tsc_stream_at_2s();
        e.clock(PW, 3, ClockDomain::Tsc, &[cs(2_100_000_000, 900_000_000_000_000)], &mut out);
        let mark = [Record::from_event(2_500_000_000, Event::Mark { id: 1 })];
        e.records(W0, 1, 0, ClockDomain::Tsc, &[&mark], &mut out);
        e.end(W0, 2, 0, ClockDomain::Tsc, &EndStats { produced: 1, lost: 0, elided: 0 }, &mut out);
        let ing = run_width(&out, 1_000_000_000);
        assert!(ing.errors.iter().any(|x| x.contains("clock #3: a clock sample implausible")), "{:?}", ing.errors);
        // (1 ns per tick from the samples at 1 s and 2 s: window 2.)
        assert!(ing.out.iter().any(|f| f.window == 2 && f.counters.records == 1), "{:?}", ing.out);
        assert!(ing.out.iter().all(|f| f.window < 3), "{:?}", ing.out);
    }

    /// Frame numbers at the end of their range (a corrupt header behind
    /// sound checksums): the frame after #2⁶⁴−1 is out of sequence, in a
    /// worker stream and a process alike. Computing the next one overflowed
    /// (a panic where overflow is checked; elsewhere it wrapped to #0 and a
    /// following #0 passed as in sequence).
    /// Counts a stream states (elided schedules, their spin time, lost
    /// records) near 2⁶⁴, from a corrupt header or record behind sound
    /// checksums: their sums in a window saturate. Found by the
    /// `ingest_stream` fuzz target, where the sum of two Steps' spin time
    /// panicked ('attempt to add with overflow'); release builds wrapped.
    #[test]
    fn stated_counts_near_the_limit_saturate_in_their_window() {
        let (mut e, mut out) = tsc_stream_at_2s();
        let step = |t| Record::from_event(t, Event::Step { elided: u64::MAX - 1, spin_ticks: u64::MAX });
        let recs = [step(2_000_000_000), step(2_000_000_100)];
        e.records(W0, 1, u64::MAX, ClockDomain::Tsc, &[&recs], &mut out);
        e.records(W0, 2, u64::MAX, ClockDomain::Tsc, &[&[step(2_000_000_200)]], &mut out);
        e.end(W0, 3, 0, ClockDomain::Tsc, &EndStats { produced: 3, lost: 0, elided: 0 }, &mut out);
        let ing = run_width(&out, 1_000_000_000);
        let w = ing.out.iter().find(|f| f.counters.steps == 3).expect("one window holds the three steps");
        let c = &w.counters;
        assert_eq!((c.elided, c.spin_ns, c.lost), (u64::MAX, u64::MAX, u64::MAX), "{c:?}");
    }

    #[test]
    fn the_frame_after_the_last_frame_number_is_out_of_sequence() {
        let (mut e, mut out) = tsc_stream_at_2s();
        let mark = [Record::from_event(2_000_000_000, Event::Mark { id: 1 })];
        e.records(W0, u64::MAX, 0, ClockDomain::Tsc, &[&mark], &mut out);
        e.end(W0, 0, 0, ClockDomain::Tsc, &EndStats { produced: 1, lost: 0, elided: 0 }, &mut out);
        e.clock(PW, u64::MAX, ClockDomain::Tsc, &[cs(3_000_000_000, 3_000_000_000)], &mut out);
        e.end(PW, 0, 0, ClockDomain::Tsc, &EndStats::default(), &mut out);
        let ing = run(&out);
        let after_last = "#0 expected #18446744073709551616";
        assert!(ing.out.iter().any(|f| f.faults.iter().any(|x| x.contains(after_last))), "{:?}", ing.out);
        assert!(ing.errors.iter().any(|x| x.contains("frame #0 after #18446744073709551616")), "{:?}", ing.errors);
    }

    #[test]
    fn disconnect_and_corruption_are_named() {
        let ing = run(&bytes(false));
        assert!(ing.out.last().unwrap().faults.iter().any(|f| f.contains("without End")));
        assert!(ing.errors[0].contains("without an End frame"));
        let mut b = bytes(true);
        let n = b.len();
        b[n - 30] ^= 0xff; // corrupt the last frame
        let ing = run(&b);
        assert!(ing.errors[0].starts_with("test: decode error at byte"), "{:?}", ing.errors);
        assert!(ing.out.last().unwrap().faults.iter().any(|f| f.contains("decode error")));
        // truncated input
        let ing = run(&bytes(true)[..n - 10]);
        assert!(ing.errors[0].contains("input ends inside a frame"), "{:?}", ing.errors);
    }
}
