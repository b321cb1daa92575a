//! Stage 1: the window's fragments as one fragment per stream, and what the
//! end markers of streams that ended before the window say.

use rustc_hash::FxHashMap;

use crate::analysis::model::{Fragment, Ns, SeqMark, Sid};

/// A window's fragments, merged, with what the streams that ended said.
pub(super) struct MergedFragments {
    /// One per stream, in stream order; markers dropped (they carry no data).
    pub frags: Vec<Fragment>,
    /// Per process (host, pid): the worker indices of its streams known to
    /// have ended before this window (a marker names its own stream), sorted.
    pub ended_of: FxHashMap<(u64, u32), Vec<u32>>,
    /// The last sequence numbers of senders that ended before this window
    /// (their markers carry them): their messages may lie unread in a
    /// reader's buffer all through it (see `Fragment::seq_before`).
    pub ended_marks: Vec<(Sid, Vec<SeqMark>)>,
}

/// Merges window `index`'s fragments (width `width` ns): the ended streams
/// and their last sequence numbers first, then one fragment per stream
/// (duplicates merged defensively).
pub(super) fn merge_fragments(index: u64, width: Ns, mut frags: Vec<Fragment>) -> MergedFragments {
    let ended_of = ended_streams(index, &frags);
    let ended_marks = ended_senders_marks(index, width, &mut frags);
    frags.retain(|f| !f.marker);
    frags.sort_by_key(|f| f.stream);
    let mut merged: Vec<Fragment> = Vec::with_capacity(frags.len());
    for f in frags {
        match merged.last_mut() {
            Some(m) if m.stream == f.stream => {
                m.items.extend(f.items);
                m.msgs.append(f.msgs);
                m.counters.add(&f.counters);
                m.faults.extend(f.faults);
                m.covered = (m.covered.0.min(f.covered.0), m.covered.1.max(f.covered.1));
                m.ended |= f.ended;
                if m.arrangements.is_empty() {
                    m.arrangements = f.arrangements;
                }
            }
            _ => merged.push(f),
        }
    }
    MergedFragments { frags: merged, ended_of, ended_marks }
}

/// Streams known to have ended before window `index`, per process: the
/// peers a fragment names and the streams whose end markers are here.
fn ended_streams(index: u64, frags: &[Fragment]) -> FxHashMap<(u64, u32), Vec<u32>> {
    let mut ended_of: FxHashMap<(u64, u32), Vec<u32>> = FxHashMap::default();
    for f in frags {
        if let Some(s) = f.stream {
            let e = ended_of.entry((s.host, s.process)).or_default();
            e.extend_from_slice(&f.peers_ended);
            if f.marker && f.window <= index {
                e.push(s.worker);
            }
        }
    }
    for e in ended_of.values_mut() {
        e.sort_unstable();
        e.dedup();
    }
    ended_of
}

/// The end markers' last sequence numbers still within reach of the window
/// (`mark_horizon`), one list per ended stream.
fn ended_senders_marks(index: u64, width: Ns, frags: &mut [Fragment]) -> Vec<(Sid, Vec<SeqMark>)> {
    let horizon = crate::analysis::model::mark_horizon(index, width);
    let mut ended_marks: Vec<(Sid, Vec<SeqMark>)> = Vec::new();
    for f in frags.iter_mut().filter(|f| f.marker && f.window <= index) {
        if let Some(s) = f.stream {
            let mut marks = std::mem::take(&mut f.seq_before);
            marks.retain(|m| m.at >= horizon);
            if !marks.is_empty() && !ended_marks.iter().any(|(e, _)| *e == s) {
                ended_marks.push((s, marks));
            }
        }
    }
    ended_marks
}
