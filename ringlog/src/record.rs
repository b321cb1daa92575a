//! The fixed-size record every worker writes into its ring, and its typed view.

/// What a record says happened. The discriminants are part of the wire format.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    ScheduleStart = 1,
    ScheduleStop = 2,
    MessageSend = 3,
    MessageRecv = 4,
    ProgressSend = 5,
    ProgressRecv = 6,
    SpanStart = 7,
    SpanStop = 8,
    Step = 9,
    Park = 10,
    Unpark = 11,
    Mark = 12,
    Arrangement = 13,
}

impl Kind {
    pub const ALL: [Kind; 13] = [
        Kind::ScheduleStart,
        Kind::ScheduleStop,
        Kind::MessageSend,
        Kind::MessageRecv,
        Kind::ProgressSend,
        Kind::ProgressRecv,
        Kind::SpanStart,
        Kind::SpanStop,
        Kind::Step,
        Kind::Park,
        Kind::Unpark,
        Kind::Mark,
        Kind::Arrangement,
    ];

    pub fn from_u8(v: u8) -> Option<Kind> {
        if (1..=13).contains(&v) {
            Some(Kind::ALL[v as usize - 1])
        } else {
            None
        }
    }

    /// Which of the generic fields (`a`, `b`, `c`, `d`) this kind uses; the
    /// others are always zero, on the wire and in decoded records.
    pub(crate) const fn fields(self) -> Fields {
        use Kind::*;
        match self {
            ScheduleStart | ScheduleStop => Fields { a: false, b: true, c: false, d: false },
            MessageSend | MessageRecv => Fields { a: true, b: true, c: true, d: true },
            ProgressSend => Fields { a: true, b: true, c: false, d: false },
            ProgressRecv => Fields { a: true, b: true, c: true, d: false },
            SpanStart | SpanStop | Mark => Fields { a: true, b: false, c: false, d: false },
            Step => Fields { a: true, b: false, c: true, d: true },
            Park | Unpark => Fields { a: true, b: false, c: false, d: false },
            Arrangement => Fields { a: true, b: true, c: true, d: false },
        }
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Fields {
    pub a: bool,
    pub b: bool,
    pub c: bool,
    pub d: bool,
}

/// One event as it sits in a worker's ring: 32 bytes, written with plain
/// stores on the engine's thread. The meaning of `a`..`d` depends on `kind`;
/// [`Record::event`] gives the typed view.
///
/// | kind | a | b | c | d |
/// |---|---|---|---|---|
/// | ScheduleStart/Stop | | operator | | |
/// | MessageSend | seq no | channel | to worker | records |
/// | MessageRecv | seq no | channel | from worker | records |
/// | ProgressSend | seq no | channel | | |
/// | ProgressRecv | seq no | channel | from worker | |
/// | SpanStart/Stop, Mark | id | | | |
/// | Step | elided pairs | | spin ticks (low 32) | spin ticks (high 32) |
/// | Park | park duration hint ticks (0 = unknown) | | | |
/// | Unpark | 0 | | | |
/// | Arrangement | value | operator | [`Figure`] | |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Record {
    /// Timestamp in the stream's clock domain (TSC ticks or nanoseconds).
    pub ts: u64,
    pub a: u64,
    pub b: u32,
    pub c: u32,
    pub d: u32,
    pub kind: u8,
    pub _pad: [u8; 3],
}

const _: () = assert!(std::mem::size_of::<Record>() == 32);

/// The typed view of a [`Record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    ScheduleStart {
        op: u32,
    },
    ScheduleStop {
        op: u32,
    },
    MessageSend {
        channel: u32,
        to: u32,
        seq: u64,
        records: u32,
    },
    MessageRecv {
        channel: u32,
        from: u32,
        seq: u64,
        records: u32,
    },
    ProgressSend {
        channel: u32,
        seq: u64,
    },
    ProgressRecv {
        channel: u32,
        from: u32,
        seq: u64,
    },
    SpanStart {
        id: u64,
    },
    SpanStop {
        id: u64,
    },
    /// End of an engine step: how many schedule pairs were elided since the
    /// previous step, and the ticks spent in them (see the probe's docs).
    Step {
        elided: u64,
        spin_ticks: u64,
    },
    Park {
        hint: u64,
    },
    Unpark,
    /// A point the engine marks: `id`'s top byte is a tag ([`MARK_TAG`]);
    /// [`MARK_SHUTDOWN`] and [`MARK_PUSH_PROGRESS`] say what an engine
    /// adapter means by it, any other tag is the engine's own.
    Mark {
        id: u64,
    },
    /// One figure of an arrangement (a differential trace and its batcher)
    /// as it stands from now on: `figure` is a [`Figure`] value (a reader
    /// skips values it does not know), `value` the figure's new level.
    Arrangement {
        op: u32,
        figure: u32,
        value: u64,
    },
}

/// What an [`Event::Arrangement`] record measures (its `c` field). Each is
/// a level, not a change: the record says what the figure is from its time
/// on, so a reader needs no earlier record to read one.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Figure {
    /// Updates held in the trace's batches.
    Records = 1,
    /// Batches the trace holds.
    Batches = 2,
    /// Merges started and not completed.
    Merges = 3,
    /// Updates in the batcher (received, not yet sealed into a batch).
    BatcherRecords = 4,
    /// Bytes the batcher's buffers use.
    BatcherBytes = 5,
    /// Bytes the batcher's buffers have allocated (capacity).
    BatcherCapacity = 6,
    /// Allocations the batcher holds.
    BatcherAllocations = 7,
    /// Handles sharing the trace.
    Shares = 8,
    /// Merge work the trace fell short of, summed since it started.
    Shortfall = 9,
}

impl Figure {
    pub const ALL: [Figure; 9] = [
        Figure::Records,
        Figure::Batches,
        Figure::Merges,
        Figure::BatcherRecords,
        Figure::BatcherBytes,
        Figure::BatcherCapacity,
        Figure::BatcherAllocations,
        Figure::Shares,
        Figure::Shortfall,
    ];

    pub fn from_u32(v: u32) -> Option<Figure> {
        Figure::ALL.get((v as usize).wrapping_sub(1)).copied()
    }
}

impl Record {
    #[inline(always)]
    pub const fn new(kind: Kind, ts: u64, a: u64, b: u32, c: u32, d: u32) -> Record {
        Record { ts, a, b, c, d, kind: kind as u8, _pad: [0; 3] }
    }

    #[inline]
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_u8(self.kind)
    }

    /// Builds the record for an event at time `ts`.
    pub fn from_event(ts: u64, ev: Event) -> Record {
        use Event::*;
        match ev {
            ScheduleStart { op } => Record::new(Kind::ScheduleStart, ts, 0, op, 0, 0),
            ScheduleStop { op } => Record::new(Kind::ScheduleStop, ts, 0, op, 0, 0),
            MessageSend { channel, to, seq, records } => Record::new(Kind::MessageSend, ts, seq, channel, to, records),
            MessageRecv { channel, from, seq, records } => {
                Record::new(Kind::MessageRecv, ts, seq, channel, from, records)
            }
            ProgressSend { channel, seq } => Record::new(Kind::ProgressSend, ts, seq, channel, 0, 0),
            ProgressRecv { channel, from, seq } => Record::new(Kind::ProgressRecv, ts, seq, channel, from, 0),
            SpanStart { id } => Record::new(Kind::SpanStart, ts, id, 0, 0, 0),
            SpanStop { id } => Record::new(Kind::SpanStop, ts, id, 0, 0, 0),
            Step { elided, spin_ticks } => {
                Record::new(Kind::Step, ts, elided, 0, spin_ticks as u32, (spin_ticks >> 32) as u32)
            }
            Park { hint } => Record::new(Kind::Park, ts, hint, 0, 0, 0),
            Unpark => Record::new(Kind::Unpark, ts, 0, 0, 0, 0),
            Mark { id } => Record::new(Kind::Mark, ts, id, 0, 0, 0),
            Arrangement { op, figure, value } => Record::new(Kind::Arrangement, ts, value, op, figure, 0),
        }
    }

    /// The typed view; `None` for an unknown kind byte.
    pub fn event(&self) -> Option<Event> {
        use Event::*;
        Some(match self.kind()? {
            Kind::ScheduleStart => ScheduleStart { op: self.b },
            Kind::ScheduleStop => ScheduleStop { op: self.b },
            Kind::MessageSend => MessageSend { channel: self.b, to: self.c, seq: self.a, records: self.d },
            Kind::MessageRecv => MessageRecv { channel: self.b, from: self.c, seq: self.a, records: self.d },
            Kind::ProgressSend => ProgressSend { channel: self.b, seq: self.a },
            Kind::ProgressRecv => ProgressRecv { channel: self.b, from: self.c, seq: self.a },
            Kind::SpanStart => SpanStart { id: self.a },
            Kind::SpanStop => SpanStop { id: self.a },
            Kind::Step => Step { elided: self.a, spin_ticks: self.c as u64 | (self.d as u64) << 32 },
            Kind::Park => Park { hint: self.a },
            Kind::Unpark => Unpark,
            Kind::Mark => Mark { id: self.a },
            Kind::Arrangement => Arrangement { op: self.b, figure: self.c, value: self.a },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_round_trips_through_record() {
        let evs = [
            Event::ScheduleStart { op: 7 },
            Event::MessageSend { channel: 1, to: 2, seq: u64::MAX, records: 9 },
            Event::ProgressRecv { channel: 3, from: 4, seq: 5 },
            Event::Step { elided: 10, spin_ticks: 0x1234_5678_9abc },
            Event::Unpark,
            Event::Arrangement { op: 3, figure: Figure::Records as u32, value: 5_400_000 },
        ];
        for ev in evs {
            assert_eq!(Record::from_event(42, ev).event(), Some(ev));
        }
        assert_eq!(Record { kind: 0, ..Default::default() }.event(), None);
        assert_eq!(Record { kind: 14, ..Default::default() }.event(), None);
    }

    #[test]
    fn figures_read_back_and_unknown_ones_are_none() {
        for f in Figure::ALL {
            assert_eq!(Figure::from_u32(f as u32), Some(f));
        }
        assert_eq!(Figure::from_u32(0), None);
        assert_eq!(Figure::from_u32(10), None);
    }
}

/// The tag of a Mark's id: its top byte ([`Event::Mark`]).
pub const MARK_TAG: u64 = 0xff << 56;
/// A Mark whose id is `MARK_PUSH_PROGRESS | op`: progress (frontier
/// changes) was pushed to operator `op`.
pub const MARK_PUSH_PROGRESS: u64 = 1 << 56;
/// A Mark whose id is `MARK_SHUTDOWN | op`: operator `op` shut down (it runs
/// no more), or, if `op` is a dataflow, the dataflow and every operator in
/// it (by address: FORMAT.md).
pub const MARK_SHUTDOWN: u64 = 2 << 56;
/// A Mark whose id is `MARK_UNTRACED_PROGRESS | op`: the scope that is
/// operator `op` exchanges progress messages this stream does not carry
/// (the engine could not record them: timely logs them under the scope's
/// timestamp type, which the adapter did not know), so the waits they end
/// cannot be told from waiting for input.
pub const MARK_UNTRACED_PROGRESS: u64 = 3 << 56;
/// A Mark whose id is `MARK_DETACHED` (no operator): from this mark on the
/// probe receives none of this worker's engine events (the program bound
/// another consumer to the engine's log the probe read), so the stream
/// carries nothing more of what the worker does; a reader treats the
/// worker as ended there.
pub const MARK_DETACHED: u64 = 4 << 56;

/// What a Mark's id means, for the tags this format defines
/// ([`MARK_PUSH_PROGRESS`], [`MARK_SHUTDOWN`], [`MARK_UNTRACED_PROGRESS`],
/// [`MARK_DETACHED`]); the one reading of them that writers and readers
/// share. (More may come: match with a wildcard arm.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mark {
    /// Progress (frontier changes) was pushed to this operator.
    PushProgress(u32),
    /// This operator (or dataflow) shut down.
    Shutdown(u32),
    /// This scope's progress messages are not in the stream.
    UntracedProgress(u32),
    /// Nothing more of this worker's engine events follows.
    Detached,
}

impl Mark {
    /// Reads a Mark's id; `None` for a tag of the engine's own, or an id
    /// with bits set between its tag and its operator (or, for
    /// [`Mark::Detached`], with an operator).
    pub fn decode(id: u64) -> Option<Mark> {
        let op = (id & 0xffff_ffff) as u32;
        if id & !MARK_TAG & !0xffff_ffff != 0 {
            return None;
        }
        match id & MARK_TAG {
            MARK_PUSH_PROGRESS => Some(Mark::PushProgress(op)),
            MARK_SHUTDOWN => Some(Mark::Shutdown(op)),
            MARK_UNTRACED_PROGRESS => Some(Mark::UntracedProgress(op)),
            MARK_DETACHED if op == 0 => Some(Mark::Detached),
            _ => None,
        }
    }

    /// The Mark's id, as [`Mark::decode`] reads it.
    pub fn id(self) -> u64 {
        match self {
            Mark::PushProgress(op) => MARK_PUSH_PROGRESS | u64::from(op),
            Mark::Shutdown(op) => MARK_SHUTDOWN | u64::from(op),
            Mark::UntracedProgress(op) => MARK_UNTRACED_PROGRESS | u64::from(op),
            Mark::Detached => MARK_DETACHED,
        }
    }
}

#[cfg(test)]
mod mark_tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn marks_read_by_their_tags() {
        assert_eq!(Mark::decode(MARK_PUSH_PROGRESS | 7), Some(Mark::PushProgress(7)));
        assert_eq!(Mark::decode(MARK_SHUTDOWN | 0xffff_ffff), Some(Mark::Shutdown(u32::MAX)));
        assert_eq!(Mark::decode(MARK_SHUTDOWN | 1 << 40), None);
        assert_eq!(Mark::decode(MARK_UNTRACED_PROGRESS | 2), Some(Mark::UntracedProgress(2)));
        assert_eq!(Mark::decode(MARK_DETACHED), Some(Mark::Detached));
        assert_eq!(Mark::decode(MARK_DETACHED | 3), None);
        assert_eq!(Mark::decode(5 << 56), None);
        assert_eq!(Mark::decode(42), None);
    }

    proptest! {
        /// Whatever a Mark's id, decoding it and writing it back gives it
        /// again, or it was not one of this format's marks.
        #[test]
        fn a_decoded_mark_writes_back_its_id(id: u64) {
            if let Some(m) = Mark::decode(id) {
                prop_assert_eq!(m.id(), id);
            }
        }

        #[test]
        fn a_marks_id_decodes_to_it(op: u32, tag in 0u8..4) {
            let m = [Mark::PushProgress(op), Mark::Shutdown(op), Mark::UntracedProgress(op), Mark::Detached][tag as usize];
            prop_assert_eq!(Mark::decode(m.id()), Some(m));
        }
    }
}
