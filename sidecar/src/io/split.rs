//! One file read once by the timely workers of this process that share it:
//! whichever worker runs out of frames reads the next slice, cuts it into
//! frames by their headers and queues each frame for the worker that owns
//! its stream ([`Share::owns`]); process-wide frames (hello, clock samples,
//! end), which every stream of the process needs, go to every worker. Each
//! worker then checks, decompresses and decodes only the frames queued for
//! it: every byte is read and header-parsed once and every payload unpacked
//! once (bar the small process-wide ones), so CPU per record stays flat as
//! workers are added (Denys et al.: the trace is processed where it is
//! read, once).
//!
//! Frames are not copied: a slice is one shared buffer and a queued frame
//! is its range in it (a frame cut by the slice's end moves to the next).
//! Queues are bounded: a worker whose queue is empty reads for the others
//! only while every queue holds less than [`Splitter::QUEUE_BYTES`]; a worker
//! that owns no open stream of the file stands where the others do
//! ([`Splitter::frontier_of_others`]) instead of holding the windows back.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ringlog::{frame::parse_header, DecodeError, StreamError, HEADER_LEN};

/// Per file, each stream's frame bytes (the first pass over the files,
/// [`crate::io::first_pass_of`]).
pub type StreamBytes = Vec<Vec<(ringlog::StreamId, u64)>>;

/// Per process (host, pid), the span of global worker indices of its
/// streams in the files' first pass: what each fragment says its process
/// runs, whichever worker reads the stream ([`Ingest::know_workers`]).
///
/// [`Ingest::know_workers`]: crate::ingest::stream::Ingest::know_workers
pub fn known_workers(bytes: &StreamBytes) -> crate::ingest::stream::KnownWorkers {
    use crate::ingest::stream::{know_span, KnownWorkers};
    let mut known = KnownWorkers::default();
    for s in bytes.iter().flatten().map(|(s, _)| s).filter(|s| !s.is_process_wide()) {
        know_span(&mut known, (s.host, s.process), (s.worker, s.worker.saturating_add(1)));
    }
    known
}

/// Which worker decodes each stream of the files, dealt out by their bytes:
/// the largest first, each to the worker with the fewest bytes so far (the
/// lowest of those tied), over all the files. Graham's rule for scheduling
/// jobs of known lengths on identical machines ("longest processing time
/// first", within 4/3 of the best). Dealt by the streams' ids alone, a
/// skewed trace kept one worker decoding while the other waited: a single
/// window of 8 streams whose halves held 57 % and 43 % of the records
/// (docs/performance.md). A stream the plan does not know (a file's pass
/// stopped at a damaged frame) is dealt by its id.
#[derive(Debug, Default)]
pub struct StreamPlan {
    owner: HashMap<(usize, ringlog::StreamId), usize>,
}

impl StreamPlan {
    /// The plan of `bytes` for `peers` workers.
    pub fn balanced(bytes: &StreamBytes, peers: usize) -> StreamPlan {
        let mut all: Vec<(u64, usize, ringlog::StreamId)> =
            bytes.iter().enumerate().flat_map(|(f, s)| s.iter().map(move |&(sid, b)| (b, f, sid))).collect();
        all.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let mut load = vec![0u64; peers.max(1)];
        let mut owner = HashMap::with_capacity(all.len());
        for (b, f, sid) in all {
            let w = (0..load.len()).min_by_key(|&w| load[w]).unwrap_or(0);
            load[w] += b;
            owner.insert((f, sid), w);
        }
        StreamPlan { owner }
    }

    fn owner(&self, file: usize, s: ringlog::StreamId) -> Option<usize> {
        self.owner.get(&(file, s)).copied()
    }
}

/// Sharing one file among timely workers: the file is read once, its
/// frames cut by their headers and handed to the worker that owns their
/// stream ([`Splitter`]); each worker decodes (decompresses) only those, plus
/// the process-wide ones (hello, clock). Decoding then runs in parallel even
/// for a single file.
#[derive(Clone, Debug)]
pub struct Share {
    pub peers: usize,
    pub index: usize,
    /// The file's position in the list (spreads streams of many files).
    pub file: usize,
    /// Which worker decodes which stream (`None`: by the streams' ids).
    pub plan: Option<Arc<StreamPlan>>,
}

impl Share {
    pub fn owns(&self, s: ringlog::StreamId) -> bool {
        s.worker == ringlog::PROCESS_WIDE || self.owner(s) == self.index
    }

    /// The worker that decodes stream `s` (not a process-wide one): as the
    /// plan deals it, else by its id.
    pub fn owner(&self, s: ringlog::StreamId) -> usize {
        if let Some(w) = self.plan.as_deref().and_then(|p| p.owner(self.file, s)) {
            return w;
        }
        let h = (s.host as usize).wrapping_add(s.process as usize * 31).wrapping_add(s.worker as usize);
        (h.wrapping_add(self.file)) % self.peers
    }
    /// The worker that reports the file's faults (once, not once per worker).
    pub fn primary(&self) -> bool {
        self.file % self.peers == self.index
    }
}

/// A frame or an event of the file, queued for one worker.
pub enum Item {
    /// The frame at `range` of `slice`, found at byte `offset` of the file.
    /// `counted`: this worker books its bytes (a process-wide frame goes to
    /// every worker and is counted by one, so the bytes read do not depend
    /// on the number of workers).
    Frame { slice: Arc<Vec<u8>>, range: Range<usize>, offset: u64, counted: bool },
    /// The framing is lost (a bad header, truncation): the file ends here
    /// for every worker.
    Fatal(StreamError),
    /// A read error (the file then ends), said by one worker.
    ReadError(String),
    /// The file's end, after its last whole frame.
    End,
}

/// A file shared by this process's workers (see the module's doc).
pub struct Splitter {
    state: Mutex<State>,
}

struct State {
    file: Box<dyn Read + Send>,
    /// Bytes read and not yet cut into frames: a partial frame.
    carry: Vec<u8>,
    /// The file offset of `carry`'s first byte.
    offset: u64,
    /// The queue of each worker of this process (by global index − first).
    queues: Vec<Queue>,
    /// The global index of this process's first worker.
    first: usize,
    /// Which worker owns which stream, and which one counts the
    /// process-wide frames (the file's primary, if it is in this process).
    share: Share,
    progress: Option<Arc<AtomicU64>>,
    ended: bool,
}

#[derive(Default)]
struct Queue {
    items: VecDeque<Item>,
    /// Bytes of the frames in `items`.
    bytes: usize,
    /// How far its worker's streams of this file are ([`Splitter::set_frontier`]).
    frontier: Option<u64>,
}

impl Splitter {
    /// Bytes read at a time.
    const SLICE: usize = 1 << 20;
    /// A queue this full stops the others from reading for it (its worker
    /// is behind: they wait for it).
    pub const QUEUE_BYTES: usize = 32 << 20;

    /// A splitter of `file` for the workers `local` (global indices) of a
    /// run with `share.peers` workers; `share.index` is ignored.
    pub fn new(
        file: Box<dyn Read + Send>,
        share: Share,
        local: Range<usize>,
        progress: Option<Arc<AtomicU64>>,
    ) -> Splitter {
        let queues = local.clone().map(|_| Queue::default()).collect();
        Splitter {
            state: Mutex::new(State {
                file,
                carry: Vec::new(),
                offset: 0,
                queues,
                first: local.start,
                share,
                progress,
                ended: false,
            }),
        }
    }

    /// Takes the items queued for worker `index` into `out`; if there are
    /// none, reads the next slice first, unless another worker's queue is
    /// full (it is behind: this one waits for it). Returns whether `out`
    /// got any.
    pub fn take(&self, index: usize, out: &mut VecDeque<Item>) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let me = index - s.first;
        while s.queues[me].items.is_empty() && !s.ended && s.queues.iter().all(|q| q.bytes < Self::QUEUE_BYTES) {
            s.read_slice();
        }
        let q = &mut s.queues[me];
        q.bytes = 0;
        out.append(&mut q.items);
        !out.is_empty()
    }

    /// Notes how far worker `index`'s streams of this file are (the
    /// earliest timely time they may still send to; None: no stream open).
    pub fn set_frontier(&self, index: usize, frontier: Option<u64>) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let me = index - s.first;
        s.queues[me].frontier = frontier;
    }

    /// Where a worker that holds no open stream of this file stands: where
    /// the others' are (a stream that shows itself later in the file is at
    /// least as late as theirs, the file being in time order). A worker
    /// without a stream of its own must not hold the windows back until it
    /// has read the whole file for the others (nor read it all into their
    /// queues).
    pub fn frontier_of_others(&self) -> Option<u64> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.ended {
            return None;
        }
        s.queues.iter().filter_map(|q| q.frontier).min()
    }
}

impl State {
    /// Reads the next slice (at least the rest of a frame cut by the last
    /// one) and queues its whole frames; at the end of the file, the end (or
    /// truncation) for every worker.
    fn read_slice(&mut self) {
        let want = self.pending_frame_len().saturating_sub(self.carry.len()).max(Splitter::SLICE);
        let mut buf = Vec::with_capacity(self.carry.len() + want);
        buf.append(&mut self.carry);
        let have = buf.len();
        buf.resize(have + want, 0);
        let mut got = 0;
        let mut read_error = None;
        while got < want {
            match self.file.read(&mut buf[have + got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    read_error = Some(e);
                    break;
                }
            }
        }
        buf.truncate(have + got);
        if let Some(p) = &self.progress {
            p.fetch_add(got as u64, Ordering::Relaxed);
        }
        let (buf, used) = self.cut(buf);
        if self.ended {
            return;
        }
        let failed = read_error.is_some();
        if let Some(e) = read_error {
            let primary = self.share.file % self.share.peers;
            if let Some(q) = primary.checked_sub(self.first).and_then(|i| self.queues.get_mut(i)) {
                q.items.push_back(Item::ReadError(e.to_string()));
            }
        }
        if got == 0 || failed {
            let left = buf.len() - used;
            self.end(if left > 0 {
                let error = DecodeError::Truncated { have: left as u64 };
                Some(StreamError::fatal(self.offset, error))
            } else {
                None
            });
            return;
        }
        self.carry = buf[used..].to_vec();
    }

    /// The length of the frame `carry` starts (0: its header is not whole
    /// yet, or unreadable).
    fn pending_frame_len(&self) -> usize {
        if self.carry.len() < HEADER_LEN {
            return 0;
        }
        parse_header(&self.carry[..HEADER_LEN]).map_or(0, |(h, _)| HEADER_LEN + h.payload_len as usize)
    }

    /// Queues the whole frames at the start of `buf` (a bad header ends the
    /// file); returns the bytes they take, and `buf` shared.
    fn cut(&mut self, buf: Vec<u8>) -> (Arc<Vec<u8>>, usize) {
        let slice = Arc::new(buf);
        let mut at = 0;
        loop {
            let rest = &slice[at..];
            if rest.len() < HEADER_LEN {
                break;
            }
            let h = match parse_header(&rest[..HEADER_LEN]) {
                Ok((h, _)) => h,
                Err(error) => {
                    self.end(Some(StreamError::fatal(self.offset, error)));
                    break;
                }
            };
            let total = HEADER_LEN + h.payload_len as usize;
            if rest.len() < total {
                break;
            }
            self.queue(&slice, at..at + total, h.stream);
            at += total;
            self.offset += total as u64;
        }
        (slice, at)
    }

    /// Queues a frame for the worker that owns its stream (none here: a
    /// worker of another process owns it), or, process-wide, for all.
    fn queue(&mut self, slice: &Arc<Vec<u8>>, range: Range<usize>, stream: ringlog::StreamId) {
        let (peers, file, offset) = (self.share.peers, self.share.file, self.offset);
        let len = range.len();
        let frame = |counted| Item::Frame { slice: slice.clone(), range: range.clone(), offset, counted };
        if stream.is_process_wide() {
            for (i, q) in self.queues.iter_mut().enumerate() {
                let counted = (self.first + i) == file % peers;
                q.items.push_back(frame(counted));
                q.bytes += len;
            }
            return;
        }
        let owner = self.share.owner(stream).checked_sub(self.first);
        if let Some(q) = owner.and_then(|i| self.queues.get_mut(i)) {
            q.items.push_back(frame(true));
            q.bytes += len;
        }
    }

    /// The file is over for every worker: `fault`, or its clean end.
    fn end(&mut self, fault: Option<StreamError>) {
        self.ended = true;
        for q in self.queues.iter_mut() {
            q.items.push_back(match &fault {
                Some(e) => Item::Fatal(StreamError { offset: e.offset, error: e.error.clone(), stream: e.stream }),
                None => Item::End,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog::{ClockDomain, Encoder, EndStats, Event, Record, StreamId, PROCESS_WIDE};

    /// A file of 5 worker streams of one process, 100 uncompressed Records
    /// frames each, between the process's hello and end frames: a few
    /// slices, so that frames are cut by a slice's end.
    fn file() -> Vec<u8> {
        let (mut e, mut out) = (Encoder::new(), Vec::new());
        e.set_compression(ringlog::Compression::None);
        let sid = |worker| StreamId { host: 7, process: 1, worker };
        let dom = ClockDomain::Tsc;
        let hello = ringlog::Hello {
            host_name: "h".into(),
            program: "p".into(),
            pid: 1,
            workers: 5,
            invariant_tsc: true,
            ticks_per_sec: 1_000_000_000,
        };
        e.hello(sid(PROCESS_WIDE), 0, dom, &hello, &mut out);
        for seq in 0..100u64 {
            for w in 0..5 {
                let recs: Vec<Record> =
                    (0..1000).map(|i| Record::from_event(seq * 1000 + i, Event::Mark { id: i })).collect();
                e.records(sid(w), seq, 0, dom, &[&recs], &mut out);
            }
        }
        e.end(sid(PROCESS_WIDE), 1, 0, dom, &EndStats::default(), &mut out);
        assert!(out.len() > Splitter::SLICE, "{} bytes", out.len());
        out
    }

    /// Takes everything for workers `local` in turn, as their readers would.
    fn drain(s: &Splitter, local: Range<usize>) -> Vec<Vec<Item>> {
        let mut got: Vec<Vec<Item>> = local.clone().map(|_| Vec::new()).collect();
        let mut open: Vec<bool> = local.clone().map(|_| true).collect();
        while open.iter().any(|&o| o) {
            for (i, w) in local.clone().enumerate() {
                let mut q = VecDeque::new();
                s.take(w, &mut q);
                for item in q {
                    open[i] &= !matches!(item, Item::End | Item::Fatal(_));
                    got[i].push(item);
                }
            }
        }
        got
    }

    fn stream_of(item: &Item) -> Option<ringlog::StreamId> {
        match item {
            Item::Frame { slice, range, .. } => Some(parse_header(&slice[range.clone()]).unwrap().0.stream),
            _ => None,
        }
    }

    /// Three workers share the file: each worker frame reaches exactly its
    /// owner, each process-wide frame every worker, and the bytes counted
    /// add up to the file's length: each byte read and counted once.
    #[test]
    fn a_shared_file_is_read_once_and_each_frame_goes_to_its_owner() {
        let bytes = file();
        let share = Share { peers: 3, index: 0, file: 1, plan: None };
        let s = Splitter::new(Box::new(std::io::Cursor::new(bytes.clone())), share.clone(), 0..3, None);
        let got = drain(&s, 0..3);
        let mut counted = 0;
        let mut frames = 0;
        for (w, items) in got.iter().enumerate() {
            assert!(matches!(items.last(), Some(Item::End)), "worker {w} ends with the file");
            for item in items {
                if let Item::Frame { range, counted: c, .. } = item {
                    let sid = stream_of(item).unwrap();
                    assert!(
                        sid.is_process_wide() || Share { index: w, ..share.clone() }.owns(sid),
                        "{sid} at worker {w}"
                    );
                    counted += if *c { range.len() } else { 0 };
                    frames += usize::from(!sid.is_process_wide());
                }
            }
        }
        assert_eq!(counted, bytes.len());
        let whole = ringlog::Decoder::new(&bytes[..]).filter(|f| !f.as_ref().unwrap().header.stream.is_process_wide());
        assert_eq!(frames, whole.count());
    }

    /// A file cut inside a frame: every worker gets the truncation, after
    /// the whole frames before it.
    #[test]
    fn a_truncated_shared_file_ends_with_the_fault_for_every_worker() {
        let bytes = file();
        let cut = bytes[..bytes.len() - 10].to_vec();
        let s = Splitter::new(
            Box::new(std::io::Cursor::new(cut)),
            Share { peers: 2, index: 0, file: 0, plan: None },
            0..2,
            None,
        );
        for items in drain(&s, 0..2) {
            match items.last() {
                Some(Item::Fatal(e)) => assert!(matches!(e.error, DecodeError::Truncated { .. }), "{e:?}"),
                _ => panic!("no truncation"),
            }
        }
    }

    /// In a cluster, the frames of workers of the other process are
    /// skipped, and the process-wide ones are counted by the file's primary
    /// worker only if it is here (worker 1 of 2, process 0 holding worker 0).
    #[test]
    fn frames_of_another_process_are_skipped() {
        let bytes = file();
        let share = Share { peers: 2, index: 1, file: 0, plan: None };
        let s = Splitter::new(Box::new(std::io::Cursor::new(bytes)), share.clone(), 1..2, None);
        let got = drain(&s, 1..2);
        for item in &got[0] {
            if let (Some(sid), Item::Frame { counted, .. }) = (stream_of(item), item) {
                assert!(sid.is_process_wide() || share.owns(sid));
                assert_eq!(*counted, !sid.is_process_wide());
            }
        }
    }

    /// The streams dealt out by their bytes, the largest first, each to the
    /// worker with the fewest so far: eight streams of 204, 194, 183, 68,
    /// 148, 129, 110 and 96 bytes on two workers go 204 → w0, 194 → w1, 183
    /// → w1 (194 < 204), 148 → w0 (204 < 377), 129 → w0 (352 < 377), 110 →
    /// w1 (377 < 481), 96 → w0 (481 < 487), 68 → w1 (487 < 577): 577 and
    /// 555 bytes, where dealing by the ids (even and odd workers) gave 645
    /// and 487. A stream of another file, or one the pass did not see, is
    /// dealt by its id.
    #[test]
    fn streams_are_dealt_out_by_their_bytes_largest_first() {
        let sid = |w: u32| StreamId { host: 0, process: 0, worker: w };
        let sizes = [204, 194, 183, 68, 148, 129, 110, 96];
        let bytes: StreamBytes = vec![sizes.iter().enumerate().map(|(w, &b)| (sid(w as u32), b)).collect()];
        let plan = Arc::new(StreamPlan::balanced(&bytes, 2));
        let share = Share { peers: 2, index: 0, file: 0, plan: Some(plan.clone()) };
        let owners: Vec<usize> = (0..8).map(|w| share.owner(sid(w))).collect();
        assert_eq!(owners, vec![0, 1, 1, 1, 0, 0, 1, 0]);
        let load = |i| (0..8).filter(|&w| owners[w] == i).map(|w| sizes[w]).sum::<u64>();
        assert_eq!((load(0), load(1)), (577, 555));
        let by_id = Share { plan: None, ..share.clone() };
        assert_eq!(by_id.owner(sid(9)), share.owner(sid(9)));
        let other_file = Share { file: 1, ..share.clone() };
        assert_eq!(other_file.owner(sid(0)), Share { plan: None, ..other_file.clone() }.owner(sid(0)));
        assert!(Share { index: 1, ..share.clone() }.owns(sid(1)) && !share.owns(sid(1)));
    }

    /// With a plan, the splitter hands each frame to the worker the plan
    /// names: the file's streams dealt out by the bytes the first pass
    /// counted.
    #[test]
    fn a_split_file_follows_the_plan() {
        let bytes = file();
        let path = std::env::temp_dir().join(format!("split-plan-{}.rlog", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let first = crate::io::first_pass_of(std::slice::from_ref(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(!first.stream_bytes[0].is_empty());
        let plan = Arc::new(StreamPlan::balanced(&first.stream_bytes, 3));
        let share = Share { peers: 3, index: 0, file: 0, plan: Some(plan) };
        let s = Splitter::new(Box::new(std::io::Cursor::new(bytes.clone())), share.clone(), 0..3, None);
        let mut per_worker = [0u64; 3];
        for (w, items) in drain(&s, 0..3).iter().enumerate() {
            for item in items {
                if let (Some(sid), Item::Frame { range, .. }) = (stream_of(item), item) {
                    if !sid.is_process_wide() {
                        assert_eq!(share.owner(sid), w, "{sid}");
                        per_worker[w] += range.len() as u64;
                    }
                }
            }
        }
        let total: u64 = first.stream_bytes[0].iter().map(|x| x.1).sum();
        assert_eq!(per_worker.iter().sum::<u64>(), total);
    }

    /// Each process's workers from the first pass, over every file: worker
    /// 0 in one file and worker 3 in another are one process's 0–3; the
    /// process-wide stream and other processes' streams are not its.
    #[test]
    fn the_first_pass_says_each_process_s_workers() {
        let id = |process, worker| ringlog::StreamId { host: 7, process, worker };
        let bytes: StreamBytes =
            vec![vec![(id(1, 0), 10), (id(1, ringlog::PROCESS_WIDE), 5)], vec![(id(1, 3), 10), (id(2, 9), 10)]];
        let known = known_workers(&bytes);
        assert_eq!(known.len(), 2);
        assert_eq!(known[&(7, 1)], (0, 4));
        assert_eq!(known[&(7, 2)], (9, 10));
    }
}
