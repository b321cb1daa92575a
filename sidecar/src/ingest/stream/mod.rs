//! Decode and clock (issue stage 1): the frames of one byte stream (a file,
//! or one probe connection) → per-worker activities → per-window fragments.
//! No I/O: the caller feeds frames and end-of-input; faults are reported
//! with the stream and byte offset they concern, and never stop the other
//! streams.
//!
//! Three parts: `frames` (what each frame kind does to the process and
//! worker streams, sequence numbers), `records` (the per-record loop of a
//! Records frame: clock conversion, window counters, events to the
//! activity builder), `faults` (decode errors, dropped streams, the end of
//! input: faults placed on the windows they concern). This file holds the
//! state they share and what the pipeline asks of a byte stream.

mod faults;
mod frames;
mod records;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use ringlog::ClockDomain;
use rustc_hash::FxHashMap;

use crate::analysis::activity::Builder;
use crate::analysis::model::{Fragment, Ns, SeqMark, Sid, StreamMeta};
use crate::analysis::window::Windower;
use crate::ingest::clock::Clock;

/// A realtime − monotonic offset as fragments carry it; one an i64 cannot
/// hold (a corrupt clock sample) is unknown rather than truncated.
fn offset_i64(o: i128) -> Option<i64> {
    i64::try_from(o).ok()
}

struct Proc {
    clock: Clock,
    program: String,
    /// The host's name (Hello).
    host_name: String,
    workers: u32,
    /// The frame number expected next (None: no frame seen yet). Wider
    /// than a frame number: the one after #2⁶⁴−1 (a corrupt header) is not
    /// #0.
    next_seq: Option<u128>,
    ended: bool,
    /// Stats frames read (the writer's periodic figures): a stream that has
    /// sent no records since fewer of them is silent while its writer lives.
    stats_frames: u64,
}

/// Operators, channels and spans a stream may declare; past it their
/// entries are ignored, and said once. 200,000 operators on each of 8
/// workers (40 MB of metadata) are analyzed in 1.6 s
/// (docs/performance.md, "Large dataflows"). A program that builds and
/// drops dataflow after dataflow holds only its live ones' entries
/// ([`Stream::forget_shut_down`]); one that never drops any declares
/// without end.
pub const MAX_METADATA: usize = 1 << 20;

struct Stream {
    builder: Builder,
    windower: Windower,
    /// The frame number expected next (None: no frame seen yet; wider
    /// than a frame number, as in `Proc`).
    next_seq: Option<u128>,
    /// Its metadata so far, shared with the fragments made since it last
    /// changed (a Metadata frame copies it once if they still hold it).
    meta: Arc<StreamMeta>,
    /// Metadata entries past [`MAX_METADATA`], ignored.
    metadata_refused: u64,
    /// Operators that shut down (a Mark `MARK_SHUTDOWN | op`), and when:
    /// forgotten from the metadata once their window is done
    /// ([`Stream::forget_shut_down`]).
    shut_down: Vec<(Ns, u32)>,
    /// Last record time (ns): where lost records would have been.
    last_ts: Option<Ns>,
    /// When the probe said it receives nothing more of this worker (a Mark
    /// `MARK_DETACHED`): the stream is ended there, after its frame.
    detached_at: Option<Ns>,
    done: bool,
    elided_seen: u64,
    /// Its process's `stats_frames` at its last Records frame.
    stats_seen: u64,
}

impl Stream {
    /// Operator `op` shut down at `t` (its Mark): noted, if the stream
    /// named it, to be forgotten once its window is done.
    #[cold]
    fn note_shut_down(&mut self, t: Ns, op: u32) {
        if self.meta.ops.contains_key(&op) && self.shut_down.last() != Some(&(t, op)) {
            self.shut_down.push((t, op));
        }
    }

    /// Scope `op`'s progress messages are not in the stream: the stream's
    /// metadata says so from now on. (Checked before the metadata is made
    /// a new version: a mark said again, or of no operator the stream
    /// declared, changes nothing.)
    fn note_untraced(&mut self, op: u32) {
        if self.meta.ops.contains_key(&op) && !self.meta.untraced.contains(&op) {
            Arc::make_mut(&mut self.meta).untraced_scope(op);
        }
    }

    /// Forgets the operators that shut down in windows handed over for
    /// good (none can still be revised): their names, addresses, and the
    /// channels between operators no longer known. A program that builds and
    /// drops dataflow after dataflow for as long as it runs then keeps the
    /// metadata of the dataflows it has, not of every one it had (and stays
    /// below [`MAX_METADATA`]). The windows handed over keep the version
    /// they were given.
    fn forget_shut_down(&mut self) {
        let (w, done) = (&self.windower, self.windower.final_below());
        let (now, later): (Vec<_>, Vec<_>) = self.shut_down.iter().partition(|&&(t, _)| w.index(t) < done);
        if now.is_empty() {
            return;
        }
        self.shut_down = later;
        Arc::make_mut(&mut self.meta).forget(now.into_iter().map(|(_, op)| op));
    }
}

/// One byte stream's ingest state.
pub struct Ingest {
    pub name: String,
    width: Ns,
    /// [`MAX_METADATA`] (smaller in tests).
    max_metadata: usize,
    procs: FxHashMap<(u64, u32), Proc>,
    streams: BTreeMap<Sid, Stream>,
    /// Per process (host, pid): the span of global worker indices of its
    /// streams known, from their frames here and from the files' first
    /// pass ([`Ingest::know_workers`]) ([`Fragment::process_workers`]).
    known_workers: KnownWorkers,
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
    /// The probes' figures about themselves (Stats frames) read since the
    /// caller last took them: (host, process, figures).
    pub probe_figures: Vec<(u64, u32, crate::analysis::report::ProcessFigures)>,
    /// Live: late data for the last this many windows handed over revises
    /// them ([`Windower::revise_within`]).
    revise: u64,
}

/// Per process (host, pid), the span of global worker indices of its
/// streams known: lowest, highest + 1 ([`Fragment::process_workers`]).
pub type KnownWorkers = FxHashMap<(u64, u32), (u32, u32)>;

/// Widens process `key`'s span in `known` to take in `span`; the span now.
pub fn know_span(known: &mut KnownWorkers, key: (u64, u32), (lo, hi): (u32, u32)) -> (u32, u32) {
    let e = known.entry(key).or_insert((lo, hi));
    *e = (e.0.min(lo), e.1.max(hi));
    *e
}

impl Ingest {
    pub fn new(name: impl Into<String>, width: Ns) -> Ingest {
        Ingest {
            name: name.into(),
            width,
            max_metadata: MAX_METADATA,
            procs: FxHashMap::default(),
            streams: BTreeMap::new(),
            known_workers: FxHashMap::default(),
            out: Vec::new(),
            errors: Vec::new(),
            records: 0,
            bytes: 0,
            failed: false,
            greeted: false,
            ended: Vec::new(),
            sync: Default::default(),
            probe_figures: Vec::new(),
            revise: 0,
        }
    }

    /// Live: late data for the last `windows` windows a stream handed over
    /// goes to them as late fragments ([`Fragment::late`]), to be revised,
    /// instead of faulting the stream's next window (`--revise-within`).
    pub fn revise_within(&mut self, windows: u64) {
        self.revise = windows;
        for st in self.streams.values_mut() {
            st.windower.revise_within(windows);
        }
    }

    /// Shares the clock models of the sidecar process (see `sync`).
    pub fn with_sync(mut self, shared: crate::ingest::sync::SharedSync) -> Ingest {
        self.sync = crate::ingest::sync::StreamSync::new(shared);
        self
    }

    /// Offline: the streams of every process in the files (the first pass
    /// over them, `io::known_workers`), so that each fragment says what its
    /// process runs even where this worker reads only some of its streams,
    /// or before a stream's first frame.
    pub fn know_workers(&mut self, known: &KnownWorkers) {
        for (&key, &span) in known {
            know_span(&mut self.known_workers, key, span);
        }
    }

    /// Notes stream `sid` among its process's workers; the span so far.
    fn know_worker(&mut self, sid: Sid) -> (u32, u32) {
        know_span(&mut self.known_workers, (sid.host, sid.process), (sid.worker, sid.worker.saturating_add(1)))
    }

    fn proc(&mut self, host: u64, pid: u32, domain: ClockDomain) -> &mut Proc {
        self.procs.entry((host, pid)).or_insert_with(|| Proc {
            clock: Clock::new(domain, 0),
            program: String::new(),
            host_name: String::new(),
            workers: 0,
            next_seq: None,
            ended: false,
            stats_frames: 0,
        })
    }

    fn stream(&mut self, sid: Sid) -> &mut Stream {
        let (width, revise) = (self.width, self.revise);
        self.streams.entry(sid).or_insert_with(|| Stream {
            builder: Builder::new(),
            windower: {
                let mut w = Windower::new(sid, width);
                w.revise_within(revise);
                w
            },
            next_seq: None,
            meta: Arc::default(),
            metadata_refused: 0,
            shut_down: Vec::new(),
            last_ts: None,
            detached_at: None,
            done: false,
            elided_seen: 0,
            stats_seen: 0,
        })
    }

    fn flush(st: &mut Stream, out: &mut Vec<Fragment>, all: bool) {
        // (Each flush places one frame's records: it may fill
        // `FRAME_WINDOWS` windows.)
        st.windower.new_frame();
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
                f.meta = Arc::clone(&st.meta);
            }
        }
        if !st.shut_down.is_empty() {
            st.forget_shut_down();
        }
    }

    fn attach_meta(&mut self, before: usize) {
        for f in &mut self.out[before..] {
            if let Some(st) = f.stream.and_then(|s| self.streams.get(&s)) {
                if f.meta.ops.is_empty() {
                    f.meta = Arc::clone(&st.meta);
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

    /// Live deadline: every open stream of `host` emits what it has up to
    /// `t` so that windows ending by `t` can close (what follows continues).
    pub fn force(&mut self, host: u64, t: Ns) {
        // Cut only at a window boundary: an open gap then ends exactly at its
        // window's end (a wait cut there, Sager §3.1 projection) instead of a
        // wait ending mid-window without a terminator.
        let t = t / self.width * self.width;
        let before = self.out.len();
        let heard = self.heard();
        for (sid, st) in self.streams.iter_mut() {
            if st.done || self.sync.timeline(sid.host, sid.process) != host {
                continue;
            }
            let from = self.out.len();
            match st.last_ts {
                Some(l) if l < t => {
                    st.builder.force(t);
                    // Silent while its writer lives: inside one step.
                    let stats = self.procs.get(&(sid.host, sid.process)).map_or(0, |p| p.stats_frames);
                    // (Another worker recording well into its silence,
                    // past its middle, says so too.)
                    let mid = l + (t - l) / 2;
                    let others = heard
                        .iter()
                        .any(|&(h, p, w, ts)| (h, p) == (sid.host, sid.process) && w != sid.worker && ts > mid);
                    if stats > st.stats_seen || others {
                        Self::flush(st, &mut self.out, false);
                        for f in &mut self.out[from..] {
                            f.silent_since = Some(l);
                        }
                        continue;
                    }
                }
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

    /// Each open stream's last record time: (host, process, worker, ns).
    fn heard(&self) -> Vec<(u64, u32, u32, Ns)> {
        self.streams.iter().filter_map(|(s, st)| Some((s.host, s.process, s.worker, st.last_ts?))).collect()
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

    /// The earliest window an open stream on timeline `host` may still
    /// send to (on that timeline), if any: what a live deadline moves.
    pub fn open_window(&self, host: u64) -> Option<u64> {
        self.streams
            .iter()
            .filter(|(k, s)| !s.done && self.sync.timeline(k.host, k.process) == host)
            .map(|(_, s)| s.windower.next_window())
            .min()
    }

    /// The furthest window any stream of this byte stream has reached (on
    /// its own host's timeline), if any: how far ahead what was read goes.
    pub fn reach(&self) -> Option<u64> {
        self.streams.values().map(|s| s.windower.next_window()).max()
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
