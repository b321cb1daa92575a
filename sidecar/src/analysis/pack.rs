//! A fragment's bulk packed for a worker of another process: its items,
//! its reads and its message halves as varints of differences, not as the
//! fixed-width fields timely's serializer writes.
//!
//! A fragment crossing to another process was serialized field by field, 8
//! bytes a time: 23.5 bytes a record on `t1`, about 7× the probes' own
//! zstd-compressed frames (docs/performance.md, "What crosses"). The times
//! in a fragment are sorted or nearly (a stream's items tile its timeline;
//! its reads and each group's sends are in the stream's order) and its
//! sequence numbers go up by one, so each is written as the difference
//! from the one before, zigzagged (any order still round-trips) and as a
//! LEB128 varint (ringlog's, as the probes' frames). Within a process a
//! fragment is moved, never serialized: it is packed only where it leaves
//! for another process, and unpacked where it arrives.
//!
//! Denys et al. send graph elements rather than raw events between the
//! nodes of a distributed critical-path analysis for the same reason
//! (`../shared/papers/notes/denys-notes.md`): what crosses the network
//! should be no larger than what it stands for.

use ringlog::varint::{put_u64, unzigzag, zigzag, ReadError, Reader};

use super::model::{
    give_entries, give_items, give_reads, take_entries, take_reads, Busy, Fragment, GapEnd, Half, Item, Messages,
    MsgEntry, MsgGroup, MsgKind, Ns,
};

/// Item tags.
const OPERATOR: u8 = 0;
const SPAN: u8 = 1;
const GAP: u8 = 2;
/// A gap's end, after [`GAP`].
const READ_DATA: u8 = 0;
const READ_PROGRESS: u8 = 1;
const NO_CAUSE: u8 = 2;
const OPEN: u8 = 3;

/// `x` after `base`, zigzagged: small when they are close, in either order.
#[inline]
fn put_delta(out: &mut Vec<u8>, base: u64, x: u64) {
    put_u64(out, zigzag(x.wrapping_sub(base) as i64));
}

#[inline]
fn delta(r: &mut Reader<'_>, base: u64, what: &'static str) -> Result<u64, ReadError> {
    Ok(base.wrapping_add(unzigzag(r.u64(what)?) as u64))
}

/// A count of elements of at least one byte each: no more than the bytes
/// left (so that a damaged count cannot ask for an absurd allocation).
fn count(r: &mut Reader<'_>, what: &'static str) -> Result<usize, ReadError> {
    let n = r.u64(what)?;
    if n > r.remaining() as u64 {
        return Err(ReadError::Bad { what, why: "more elements than bytes left" });
    }
    Ok(n as usize)
}

fn half_code(h: Half) -> u8 {
    match h {
        Half::Send => 0,
        Half::Recv => 1,
        Half::PSend => 2,
        Half::PRecv => 3,
    }
}

fn half_of(b: u8) -> Result<Half, ReadError> {
    Ok(match b {
        0 => Half::Send,
        1 => Half::Recv,
        2 => Half::PSend,
        3 => Half::PRecv,
        _ => return Err(ReadError::Bad { what: "message group", why: "unknown half" }),
    })
}

/// `items`, `reads` and `groups` packed into one byte string.
fn pack(items: &[Item], msgs: &Messages) -> Vec<u8> {
    let halves: usize = msgs.groups.iter().map(|g| g.entries.len()).sum();
    // (About 5 bytes an item, 2-3 a read or half: one allocation.)
    let mut out = Vec::with_capacity(8 * items.len() + 3 * msgs.reads.len() + 4 * halves + 16);
    put_u64(&mut out, items.len() as u64);
    let mut last = 0;
    for it in items {
        match *it {
            Item::Busy { start, end, what } => {
                let (tag, id) = match what {
                    Busy::Operator(op) => (OPERATOR, u64::from(op)),
                    Busy::Span(s) => (SPAN, s),
                };
                out.push(tag);
                put_delta(&mut out, last, start);
                put_delta(&mut out, start, end);
                put_u64(&mut out, id);
                last = end;
            }
            Item::Gap { start, end, cause_until, next } => {
                out.push(GAP);
                put_delta(&mut out, last, start);
                put_delta(&mut out, start, end);
                put_delta(&mut out, start, cause_until);
                match next {
                    GapEnd::Read { from, channel, kind } => {
                        out.push(if kind == MsgKind::Data { READ_DATA } else { READ_PROGRESS });
                        put_u64(&mut out, u64::from(from));
                        put_u64(&mut out, u64::from(channel));
                    }
                    GapEnd::NoCause => out.push(NO_CAUSE),
                    GapEnd::Open => out.push(OPEN),
                }
                last = end;
            }
        }
    }
    put_u64(&mut out, msgs.reads.len() as u64);
    let mut last = 0;
    for &t in &msgs.reads {
        put_delta(&mut out, last, t);
        last = t;
    }
    put_u64(&mut out, msgs.groups.len() as u64);
    for g in &msgs.groups {
        out.push(half_code(g.half));
        put_u64(&mut out, u64::from(g.channel));
        put_u64(&mut out, u64::from(g.other));
        put_u64(&mut out, g.entries.len() as u64);
        // (A send's `at` is its time, a read's its index in `reads`: both
        // go up along the group.)
        let (mut seq, mut at) = (0, 0);
        for e in &g.entries {
            put_delta(&mut out, seq, e.seq);
            put_delta(&mut out, at, e.at);
            (seq, at) = (e.seq, e.at);
        }
    }
    out
}

/// The items and message tables of [`pack`]'s bytes; an error names what
/// could not be read.
fn unpack(bytes: &[u8]) -> Result<(Vec<Item>, Messages), String> {
    let mut r = Reader::new(bytes);
    let mut reads = take_reads();
    let mut groups: Vec<MsgGroup> = Vec::new();
    let got = read_all(&mut r, &mut reads, &mut groups);
    let fail = |e: ReadError, reads: Vec<Ns>, groups: Vec<MsgGroup>| {
        give_reads(reads);
        groups.into_iter().for_each(|g| give_entries(g.entries));
        match e {
            ReadError::Truncated { what } => format!("a packed fragment ends inside its {what}"),
            ReadError::Bad { what, why } => format!("a packed fragment's {what}: {why}"),
        }
    };
    match got {
        Ok(items) if r.is_empty() => Ok((items, Messages { reads, groups, moved: false })),
        Ok(_) => Err(fail(ReadError::Bad { what: "end", why: "bytes after the message groups" }, reads, groups)),
        Err(e) => Err(fail(e, reads, groups)),
    }
}

fn read_all(r: &mut Reader<'_>, reads: &mut Vec<Ns>, groups: &mut Vec<MsgGroup>) -> Result<Vec<Item>, ReadError> {
    let n = count(r, "item count")?;
    let mut items = Vec::with_capacity(n);
    let mut last = 0;
    for _ in 0..n {
        let tag = r.u8("item")?;
        let start = delta(r, last, "item start")?;
        let end = delta(r, start, "item end")?;
        items.push(match tag {
            OPERATOR | SPAN => {
                let id = r.u64("busy piece")?;
                let what = if tag == SPAN {
                    Busy::Span(id)
                } else {
                    let op = u32::try_from(id).map_err(|_| ReadError::Bad { what: "operator", why: "past 32 bits" })?;
                    Busy::Operator(op)
                };
                Item::Busy { start, end, what }
            }
            GAP => {
                let cause_until = delta(r, start, "gap's cause")?;
                let next = match r.u8("gap's end")? {
                    k @ (READ_DATA | READ_PROGRESS) => {
                        let from = u32_of(r, "gap's reader")?;
                        let channel = u32_of(r, "gap's channel")?;
                        let kind = if k == READ_DATA { MsgKind::Data } else { MsgKind::Progress };
                        GapEnd::Read { from, channel, kind }
                    }
                    NO_CAUSE => GapEnd::NoCause,
                    OPEN => GapEnd::Open,
                    _ => return Err(ReadError::Bad { what: "gap's end", why: "unknown kind" }),
                };
                Item::Gap { start, end, cause_until, next }
            }
            _ => return Err(ReadError::Bad { what: "item", why: "unknown kind" }),
        });
        last = end;
    }
    let n = count(r, "read count")?;
    reads.reserve(n);
    let mut last = 0;
    for _ in 0..n {
        last = delta(r, last, "read")?;
        reads.push(last);
    }
    let n = count(r, "group count")?;
    for _ in 0..n {
        let half = half_of(r.u8("message group")?)?;
        let channel = u32_of(r, "group's channel")?;
        let other = u32_of(r, "group's worker")?;
        let m = count(r, "group's length")?;
        let mut entries: Vec<MsgEntry> = take_entries();
        entries.reserve(m);
        groups.push(MsgGroup { half, channel, other, entries });
        let entries = &mut groups.last_mut().expect("pushed").entries;
        let (mut seq, mut at) = (0, 0);
        for _ in 0..m {
            seq = delta(r, seq, "sequence number")?;
            at = delta(r, at, "message half")?;
            if half.is_read() && at >= reads.len() as u64 {
                return Err(ReadError::Bad { what: "message half", why: "a read past the stream's reads" });
            }
            entries.push(MsgEntry { seq, at });
        }
    }
    Ok(items)
}

fn u32_of(r: &mut Reader<'_>, what: &'static str) -> Result<u32, ReadError> {
    u32::try_from(r.u64(what)?).map_err(|_| ReadError::Bad { what, why: "past 32 bits" })
}

impl Fragment {
    /// Packs the fragment's items and message tables into
    /// [`Fragment::packed`] (their vectors given back to their pools): for
    /// a worker of another process.
    pub fn pack(&mut self) {
        if !self.packed.is_empty()
            || (self.items.is_empty() && self.msgs.reads.is_empty() && self.msgs.groups.is_empty())
        {
            return;
        }
        self.packed = pack(&self.items, &self.msgs);
        give_items(std::mem::take(&mut self.items));
        give_reads(std::mem::take(&mut self.msgs.reads));
        for g in std::mem::take(&mut self.msgs.groups) {
            give_entries(g.entries);
        }
    }

    /// Unpacks what [`Fragment::pack`] packed (nothing if nothing was). A
    /// fragment whose bytes cannot be read keeps no items nor messages and
    /// says why among its faults: its window is reported incomplete, as
    /// for a stream whose data was lost.
    pub fn unpack(&mut self) {
        if self.packed.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.packed);
        match unpack(&bytes) {
            Ok((items, msgs)) => {
                self.items = items;
                let moved = self.msgs.moved;
                self.msgs = Messages { moved, ..msgs };
            }
            Err(why) => self.faults.push(format!("fragment from another process unreadable: {why}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item() -> impl Strategy<Value = Item> {
        let end = prop_oneof![
            (any::<u32>(), any::<u32>(), 0u32..3).prop_map(|(from, channel, k)| match k {
                0 => GapEnd::Read { from, channel, kind: MsgKind::Data },
                1 => GapEnd::Read { from, channel, kind: MsgKind::Progress },
                _ => GapEnd::NoCause,
            }),
            Just(GapEnd::Open),
        ];
        let t = prop_oneof![0u64..10_000, any::<u64>()];
        prop_oneof![
            (t.clone(), t.clone(), any::<u32>()).prop_map(|(start, end, op)| Item::Busy {
                start,
                end,
                what: Busy::Operator(op)
            }),
            (t.clone(), t.clone(), any::<u64>()).prop_map(|(start, end, s)| Item::Busy {
                start,
                end,
                what: Busy::Span(s)
            }),
            (t.clone(), t.clone(), t, end).prop_map(|(start, end, cause_until, next)| Item::Gap {
                start,
                end,
                cause_until,
                next
            }),
        ]
    }

    fn messages() -> impl Strategy<Value = Messages> {
        let t = prop_oneof![0u64..10_000, any::<u64>()];
        (
            proptest::collection::vec(t.clone(), 0..20),
            proptest::collection::vec(
                (0u8..4, any::<u32>(), any::<u32>(), proptest::collection::vec((any::<u64>(), t), 0..10)),
                0..5,
            ),
        )
            .prop_map(|(reads, groups)| {
                let n = reads.len() as u64;
                let groups = groups
                    .into_iter()
                    .filter_map(|(h, channel, other, es)| {
                        let half = half_of(h).unwrap();
                        // (A read's `at` names one of the stream's reads.)
                        if half.is_read() && n == 0 && !es.is_empty() {
                            return None;
                        }
                        let entries = es
                            .into_iter()
                            .map(|(seq, at)| MsgEntry { seq, at: if half.is_read() { at % n.max(1) } else { at } })
                            .collect();
                        Some(MsgGroup { half, channel, other, entries })
                    })
                    .collect();
                Messages { reads, groups, moved: false }
            })
    }

    proptest! {
        /// Whatever the values (in order or not, near or far apart), what
        /// is packed unpacks the same.
        #[test]
        fn a_packed_fragment_unpacks_to_what_was_packed(
            items in proptest::collection::vec(item(), 0..30),
            msgs in messages(),
        ) {
            let bytes = pack(&items, &msgs);
            let (got_items, got_msgs) = unpack(&bytes).unwrap();
            prop_assert_eq!(got_items, items);
            prop_assert_eq!(got_msgs, msgs);
        }

        /// Bytes of any kind unpack or name what was wrong: no panic, no
        /// allocation larger than the bytes allow.
        #[test]
        fn damaged_bytes_are_refused_by_name(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Err(why) = unpack(&bytes) {
                prop_assert!(why.starts_with("a packed fragment"), "{}", why);
            }
        }

        /// Cut anywhere, a packed fragment is refused.
        #[test]
        fn a_cut_packed_fragment_is_refused(items in proptest::collection::vec(item(), 1..10), cut in any::<prop::sample::Index>()) {
            let bytes = pack(&items, &Messages::default());
            let at = cut.index(bytes.len());
            prop_assert!(unpack(&bytes[..at]).is_err());
        }
    }

    /// A stream's fragment as the ingest makes it: items tiling its
    /// timeline, reads in order, sequence numbers one apart.
    fn ordinary() -> Fragment {
        let mut items = Vec::new();
        let mut t = 1_000_000_000_000u64;
        for k in 0..1000u64 {
            items.push(Item::Busy { start: t, end: t + 900 + k % 50, what: Busy::Operator((k % 7) as u32) });
            t += 900 + k % 50;
            items.push(Item::Gap { start: t, end: t + 300, cause_until: t, next: GapEnd::NoCause });
            t += 300;
        }
        let mut msgs = Messages::default();
        let (send, read) = (msgs.new_group(Half::Send, 3, 1), msgs.new_group(Half::Recv, 3, 1));
        for k in 0..1000u64 {
            msgs.push(send, k, 1_000_000_000_000 + 1200 * k);
            msgs.push(read, k, 1_000_000_000_500 + 1200 * k);
        }
        msgs.moved = true;
        Fragment { items, msgs, window: 7, ..Default::default() }
    }

    /// Serialized as timely sends a fragment to another process (bincode),
    /// the ordinary fragment packed takes under a fifth of the bytes (under
    /// 5 bytes an item or message half, against 32 and 16 in memory), and
    /// arrives as it left.
    #[test]
    fn a_packed_fragment_crosses_in_a_fifth_of_the_bytes() {
        let f = ordinary();
        let plain = bincode::serialize(&f).unwrap();
        let mut p = f.clone();
        p.pack();
        assert!(p.items.is_empty() && p.msgs.groups.is_empty() && p.msgs.reads.is_empty());
        let wire = bincode::serialize(&p).unwrap();
        let parts = (f.items.len() + f.msgs.len()) as f64;
        assert!(wire.len() * 5 < plain.len(), "{} bytes packed, {} not", wire.len(), plain.len());
        assert!((wire.len() as f64) < 5.0 * parts, "{} bytes for {parts} parts", wire.len());
        let mut back: Fragment = bincode::deserialize(&wire).unwrap();
        back.unpack();
        assert!(back.packed.is_empty() && back.faults.is_empty());
        assert_eq!((back.items, back.msgs, back.window), (f.items, f.msgs, f.window));
    }

    /// A fragment whose packed bytes are damaged arrives with no items nor
    /// messages and a fault that says so (its window is then incomplete).
    #[test]
    fn a_damaged_packed_fragment_arrives_as_a_fault() {
        let mut p = ordinary();
        p.pack();
        p.packed.truncate(p.packed.len() / 2);
        p.unpack();
        assert!(p.items.is_empty() && p.msgs.is_empty());
        assert!(
            p.faults.len() == 1
                && p.faults[0].starts_with("fragment from another process unreadable: a packed fragment ends inside"),
            "{:?}",
            p.faults
        );
    }
}
