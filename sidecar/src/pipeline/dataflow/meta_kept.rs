//! A stream's metadata crosses to a worker of another process once, not
//! with every fragment: the sending worker remembers what each worker of
//! another process already holds ([`MetaSent`]), the receiving worker keeps
//! it ([`MetaKept`]), and a fragment that carries none says so
//! ([`MetaOnWire::Kept`]).
//!
//! Within a process a fragment's metadata is shared, not copied (an `Arc`).
//! Across processes it is serialized: a dataflow of 2,000 operators on 64
//! workers in 1 ms windows sent 306 bytes of fragments per record, 19× the
//! fragments themselves, and each copy lived on at the owner until its
//! window was analyzed.
//!
//! The two sides stay mirrors of each other because timely delivers what
//! one worker sends another in the order it was sent (an exchange keeps the
//! order per pair of workers), and each side makes the same change at the
//! same message: a fragment marked `Keep` is kept, a stream's end marker
//! (or a `Forget` sent in its place when the marker came too late to send)
//! drops it. Both hold only the streams that have not ended: memory bounded
//! by the open streams and the workers, not by how many have come and gone.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::analysis::model::{Fragment, MetaOnWire, Sid, StreamMeta};

/// The sending worker's side: per (stream, worker of another process), the
/// metadata that worker holds.
#[derive(Default)]
pub(super) struct MetaSent {
    kept: FxHashMap<(Sid, usize), Arc<StreamMeta>>,
    /// What a fragment sent without its metadata carries instead.
    empty: Arc<StreamMeta>,
}

impl MetaSent {
    /// `f` is about to be sent to worker `to` of another process: its
    /// metadata left out if `to` holds it already, else marked to be kept;
    /// an end marker drops what `to` holds of its stream.
    pub(super) fn send(&mut self, f: &mut Fragment, to: usize) {
        let Some(sid) = f.stream else { return };
        if f.marker {
            self.kept.remove(&(sid, to));
            return;
        }
        match self.kept.get(&(sid, to)) {
            Some(m) if Arc::ptr_eq(m, &f.meta) => {
                f.meta = Arc::clone(&self.empty);
                f.meta_on_wire = MetaOnWire::Kept;
            }
            _ => {
                self.kept.insert((sid, to), Arc::clone(&f.meta));
                f.meta_on_wire = MetaOnWire::Keep;
            }
        }
    }

    /// An end marker of `sid` for worker `to` will not be sent (its window
    /// is past): whether `to` holds the stream's metadata, which it must
    /// then be told to drop ([`MetaOnWire::Forget`]). Forgotten here.
    pub(super) fn forget(&mut self, sid: Sid, to: usize) -> bool {
        self.kept.remove(&(sid, to)).is_some()
    }

    /// (Streams and workers) with metadata held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
    }
}

/// The receiving worker's side: per (sending worker, stream), the metadata
/// it sent to be kept.
#[derive(Default)]
pub(super) struct MetaKept {
    kept: FxHashMap<(u32, Sid), Arc<StreamMeta>>,
}

impl MetaKept {
    /// `f` came from worker `from`: its metadata kept or filled in, as the
    /// sender marked it; an end marker or a `Forget` (which is nothing
    /// more) drops its stream's.
    pub(super) fn receive(&mut self, from: u32, f: &mut Fragment) {
        let Some(sid) = f.stream else { return };
        let key = (from, sid);
        match std::mem::take(&mut f.meta_on_wire) {
            MetaOnWire::Forget => {
                self.kept.remove(&key);
            }
            _ if f.marker => {
                self.kept.remove(&key);
            }
            MetaOnWire::Whole => {}
            MetaOnWire::Keep => {
                self.kept.insert(key, Arc::clone(&f.meta));
            }
            MetaOnWire::Kept => match self.kept.get(&key) {
                Some(m) => f.meta = Arc::clone(m),
                // (The sender left it out only after this worker was sent
                // it, in order: not reached unless that order is broken.)
                None => debug_assert!(false, "{sid}: metadata left out that was never kept"),
            },
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(w: u32) -> Sid {
        Sid { host: 1, process: 0, worker: w }
    }

    fn frag(w: u32, meta: &Arc<StreamMeta>) -> Fragment {
        Fragment { stream: Some(sid(w)), meta: Arc::clone(meta), ..Default::default() }
    }

    fn named(n: u32) -> Arc<StreamMeta> {
        let mut m = StreamMeta::default();
        for id in 0..n {
            m.operator(id, format!("op {id}"), vec![0, id]);
        }
        Arc::new(m)
    }

    /// Sends `f` through both sides (as through a serializing channel: the
    /// receiver gets a copy of the metadata, not the sender's `Arc`).
    fn cross(s: &mut MetaSent, r: &mut MetaKept, mut f: Fragment, to: usize) -> Option<Fragment> {
        s.send(&mut f, to);
        let forget = f.meta_on_wire == MetaOnWire::Forget;
        let mut f = Fragment { meta: Arc::new((*f.meta).clone()), ..f };
        r.receive(0, &mut f);
        (!forget).then_some(f)
    }

    #[test]
    fn metadata_crosses_once_per_worker_and_again_when_it_changes() {
        let mut s = MetaSent::default();
        let m = named(100);
        let mut f = frag(0, &m);
        s.send(&mut f, 3);
        assert_eq!((f.meta_on_wire, f.meta.ops.len()), (MetaOnWire::Keep, 100));
        let mut again = frag(0, &m);
        s.send(&mut again, 3);
        assert_eq!((again.meta_on_wire, again.meta.ops.len()), (MetaOnWire::Kept, 0), "left out the second time");
        let mut other = frag(0, &m);
        s.send(&mut other, 4);
        assert_eq!(other.meta_on_wire, MetaOnWire::Keep, "another worker has not got it");
        let changed = named(101);
        let mut f = frag(0, &changed);
        s.send(&mut f, 3);
        assert_eq!((f.meta_on_wire, f.meta.ops.len()), (MetaOnWire::Keep, 101), "sent again once it changed");
    }

    #[test]
    fn the_receiver_fills_in_what_it_kept_and_both_sides_forget_at_the_end() {
        let (mut s, mut r) = (MetaSent::default(), MetaKept::default());
        let m = named(10);
        for _ in 0..3 {
            let f = cross(&mut s, &mut r, frag(0, &m), 3).unwrap();
            assert_eq!(f.meta.ops.len(), 10);
            assert_eq!(f.meta.ops[&7], "op 7");
            assert_eq!(f.meta_on_wire, MetaOnWire::Whole, "resolved for what comes after");
        }
        cross(&mut s, &mut r, frag(1, &named(2)), 3).unwrap();
        assert_eq!((s.len(), r.len()), (2, 2));
        let end = Fragment { stream: Some(sid(0)), marker: true, route: 3, ..Default::default() };
        assert!(cross(&mut s, &mut r, end, 3).is_some(), "an end marker goes on to be noted");
        assert_eq!((s.len(), r.len()), (1, 1), "stream 0 forgotten on both sides");
        // Its end marker too late to send: a Forget in its place.
        assert!(s.forget(sid(1), 3));
        assert!(!s.forget(sid(1), 3));
        let mut forget = Fragment { stream: Some(sid(1)), marker: true, route: 3, ..Default::default() };
        forget.meta_on_wire = MetaOnWire::Forget;
        r.receive(0, &mut forget);
        assert_eq!((s.len(), r.len()), (0, 0));
    }

    #[test]
    fn streams_that_come_and_go_leave_nothing_behind() {
        let (mut s, mut r) = (MetaSent::default(), MetaKept::default());
        for w in 0..1000 {
            let m = named(3);
            for to in [2, 3] {
                cross(&mut s, &mut r, frag(w, &m), to).unwrap();
                cross(&mut s, &mut r, frag(w, &m), to).unwrap();
                let end = Fragment { stream: Some(sid(w)), marker: true, route: to as u64, ..Default::default() };
                cross(&mut s, &mut r, end, to).unwrap();
            }
        }
        assert_eq!((s.len(), r.len()), (0, 0));
    }
}
