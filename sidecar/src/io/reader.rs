//! One byte stream (a file, or a live connection's pipe) read in bounded
//! slices and fed to an [`Ingest`]: framing, sharing a file's streams among
//! timely workers ([`Share`], the file read once by a [`Splitter`]), and
//! unpacking ahead on a helper thread ([`Unpacker`]).

use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use ringlog::FrameBuffer;

use super::pipe::Pipe;
use super::split::{Item, Share, Splitter};
use super::unpack::{Unpacked, Unpacker};
use crate::analysis::model::{Fragment, Ns};
use crate::ingest::stream::Ingest;

/// Bytes a read takes at most, by default: files read in slices of 1 MB.
const READ_SLICE: usize = 1 << 20;

/// Fragments one poll makes at most, give or take a frame's: a poll stops
/// between frames past it, and the next goes on from there before it reads
/// more. A slice of a file may hold thousands of frames, and each may carry
/// its stream [`FRAME_WINDOWS`](crate::analysis::window::FRAME_WINDOWS)
/// windows on; memory is bounded by the fragments a poll makes, not by the
/// bytes it reads. (Ordinary reads stay far below: 64 windows of a few
/// streams.)
const FRAGMENTS_PER_POLL: usize = 4096;

/// One byte stream being read.
pub struct Reader {
    pub ingest: Ingest,
    inner: Box<dyn Read + Send>,
    frames: FrameBuffer,
    /// What a shared file's reads land in before their frames are picked
    /// (empty otherwise: unshared streams read straight into `frames`).
    chunk: Vec<u8>,
    /// Bytes a read takes at most ([`Reader::reading_pipe`]).
    slice: usize,
    /// A live connection's pipe (also `inner`): reads take what it holds.
    pipe: Option<Pipe>,
    /// Set once a Hello frame has been read ([`Reader::on_hello`]).
    hello_seen: Option<Arc<AtomicBool>>,
    pub done: bool,
    /// Bytes read so far (shared progress counter).
    progress: Option<Arc<AtomicU64>>,
    share: Option<Share>,
    raw: Vec<u8>,
    raw_start: usize,
    raw_offset: u64,
    /// When a live connection was accepted (Unix ns).
    pub joined_unix_ns: Option<i128>,
    /// Live: the last bounded read stopped at its budget with bytes of the
    /// connection left unread (set by whoever bounds the read): what is
    /// left is data the sidecar has, whose windows wait for it.
    pub backlog: bool,
    /// Frames read and unpacked on a helper thread ([`Reader::unpacked_ahead`]).
    unpacker: Option<Unpacker>,
    /// A file shared with other workers of this process: its splitter and
    /// this worker's global index ([`Reader::split`]).
    split: Option<(Arc<Splitter>, usize)>,
    /// The frames and events the splitter handed this worker, to ingest.
    queued: std::collections::VecDeque<Item>,
    /// The last poll stopped between frames, its fragments past
    /// [`FRAGMENTS_PER_POLL`]: the frames it left are ingested before
    /// anything more is read.
    paused: bool,
    /// The length of `ingest.out` at which this poll stops between frames.
    out_cap: usize,
    /// The unpacking thread's batch whose frames a poll stopped among.
    held: Option<super::unpack::Batch>,
}

pub enum Polled {
    /// Read something; call again.
    Data,
    /// Nothing available right now (live socket).
    Idle,
    /// The stream is over.
    Done,
}

impl Reader {
    pub fn new(name: String, inner: Box<dyn Read + Send>, width: Ns, progress: Option<Arc<AtomicU64>>) -> Reader {
        Reader {
            ingest: Ingest::new(name, width),
            inner,
            frames: FrameBuffer::new(),
            chunk: Vec::new(),
            slice: READ_SLICE,
            pipe: None,
            hello_seen: None,
            done: false,
            progress,
            share: None,
            raw: Vec::new(),
            raw_start: 0,
            raw_offset: 0,
            joined_unix_ns: None,
            backlog: false,
            unpacker: None,
            split: None,
            queued: Default::default(),
            paused: false,
            out_cap: usize::MAX,
            held: None,
        }
    }

    /// A reader of worker `index`'s frames of a file that `splitter` reads
    /// for the workers of this process sharing it (`share`: which streams
    /// are this worker's, which worker reports the file's faults).
    pub fn split(name: String, splitter: Arc<Splitter>, share: Share, width: Ns) -> Reader {
        let mut r = Reader::new(name, Box::new(std::io::empty()), width, None);
        r.split = Some((splitter, share.index));
        r.share = Some(share);
        r
    }

    /// The earliest timely time this reader may still send a fragment to
    /// (`shift`: a host's window index to timely time; None: nothing
    /// open). A worker sharing a file publishes its own to the splitter;
    /// one without an open stream of it stands where the others are.
    pub fn frontier(&self, shift: impl Fn(u64) -> u64) -> Option<u64> {
        let own = self.ingest.frontier(shift);
        let Some((splitter, index)) = self.split.as_ref().filter(|_| !self.done) else { return own };
        splitter.set_frontier(*index, own);
        if self.ingest.all_done() {
            return splitter.frontier_of_others();
        }
        own
    }

    /// Reads, unpacks (checksums, decompression) and decodes the frames on
    /// a helper thread, a few MB ahead, and only ingests their records on
    /// the caller's: for files, when a core is spare. Not for a shared file
    /// (each sharing worker unpacks only its own streams' frames).
    pub fn unpacked_ahead(mut self) -> Reader {
        if self.share.is_none() && self.unpacker.is_none() {
            // (If the thread cannot be started, this reader reads as before.)
            if let Some(start) = Unpacker::spawn() {
                let inner = std::mem::replace(&mut self.inner, Box::new(std::io::empty()));
                self.unpacker = Some(start((inner, self.progress.take())));
            }
        }
        self
    }

    /// Shares the sidecar's clock models (clock sync) with this stream.
    pub fn with_sync(mut self, sync: crate::ingest::sync::SharedSync) -> Reader {
        self.ingest.sync = crate::ingest::sync::StreamSync::new(sync);
        self
    }

    /// The streams of every process in the files ([`Ingest::know_workers`]).
    pub fn with_known_workers(mut self, known: &crate::ingest::stream::KnownWorkers) -> Reader {
        self.ingest.know_workers(known);
        self
    }

    /// Reads only the streams `share` assigns to this worker.
    pub fn shared(mut self, share: Share) -> Reader {
        if share.peers > 1 {
            self.share = Some(share);
            self.chunk = vec![0; self.slice];
        }
        self
    }

    /// Notes that `inner` is a live connection's `pipe`: each read takes
    /// what it holds, at most `slice` bytes. The frame buffer then holds
    /// about one frame, and an idle connection nothing, not a file's 1 MB
    /// slice each, however many connections are open.
    pub(super) fn reading_pipe(mut self, pipe: Pipe, slice: usize) -> Reader {
        self.pipe = Some(pipe);
        self.slice = slice.max(1);
        self
    }

    /// Whether bytes wait to be read: what a live connection's pipe holds;
    /// for any other byte stream, unknown, so yes (a read that stopped at
    /// its budget may have left some).
    pub fn has_unread(&self) -> bool {
        self.paused || self.pipe.as_ref().is_none_or(|p| p.buffered() > 0)
    }

    /// Whether this poll has made its fragments ([`FRAGMENTS_PER_POLL`]):
    /// then it stops before the next frame.
    fn full(&mut self) -> bool {
        self.paused = self.ingest.out.len() >= self.out_cap;
        self.paused
    }

    /// A poll begins: it may make [`FRAGMENTS_PER_POLL`] fragments.
    fn begin_poll(&mut self) -> usize {
        let before = self.ingest.out.len();
        self.out_cap = before.saturating_add(FRAGMENTS_PER_POLL);
        self.paused = false;
        before
    }

    /// Sets `flag` once a Hello frame has been read (the I/O thread closes
    /// a connection that sends none in time).
    pub fn on_hello(mut self, flag: Arc<AtomicBool>) -> Reader {
        self.hello_seen = Some(flag);
        self
    }

    /// `seen_by_all`: a fault every sharing worker sees (a bad header,
    /// truncation) is reported once, by the primary; a payload fault only
    /// the owning worker sees is reported by it.
    fn fail(&mut self, e: ringlog::StreamError, seen_by_all: bool) {
        self.ingest.decode_error(&e);
        if seen_by_all && self.share.as_ref().is_some_and(|s| !s.primary()) {
            self.ingest.errors.clear();
        }
        self.done = true;
    }

    /// Framing for a shared file: header first, payload only if owned.
    fn drain_shared(&mut self, share: Share) {
        use ringlog::{frame::parse_header, HEADER_LEN};
        loop {
            let have = &self.raw[self.raw_start..];
            if have.len() < HEADER_LEN {
                break;
            }
            let (h, _) = match parse_header(&have[..HEADER_LEN]) {
                Ok(x) => x,
                Err(error) => return self.fail(ringlog::StreamError::fatal(self.raw_offset, error), true),
            };
            let total = HEADER_LEN + h.payload_len as usize;
            if have.len() < total {
                break;
            }
            if share.owns(h.stream) {
                let ingest = &mut self.ingest;
                // (A process-wide frame is decoded by every sharing worker:
                // its bytes are counted by one, so that the bytes read do
                // not grow with `-w`.)
                let counted = if h.stream.is_process_wide() && !share.primary() { 0 } else { total as u64 };
                let got =
                    ringlog::decode_frame_with(&have[..total], |hdr, payload| ingest.payload(hdr, payload, counted));
                match got {
                    Ok(Some((Ok(()), _))) => {}
                    // A fault in the records: as below.
                    Ok(Some((Err(error), _))) => {
                        let e = ringlog::StreamError { offset: self.raw_offset, error, stream: Some(h.stream) };
                        self.ingest.stream_error(&e);
                    }
                    Ok(None) => break,
                    Err(error) => {
                        // The header is sound (parsed above): only this
                        // frame's stream is lost; this worker's others go
                        // on. A process-wide frame is decoded by every
                        // sharing worker, and its loss ends the file for all
                        // of them: reported once, by the primary.
                        let e = ringlog::StreamError { offset: self.raw_offset, error, stream: Some(h.stream) };
                        if h.stream.is_process_wide() {
                            return self.fail(e, true);
                        }
                        self.ingest.stream_error(&e);
                    }
                }
            }
            self.raw_start += total;
            self.raw_offset += total as u64;
            if self.full() {
                break;
            }
        }
        if self.raw_start > (1 << 20) && self.raw_start * 2 >= self.raw.len() {
            self.raw.drain(..self.raw_start);
            self.raw_start = 0;
        }
    }

    /// Reads at most about `budget` bytes and ingests the frames in them.
    pub fn poll(&mut self, budget: usize) -> Polled {
        if self.done {
            return Polled::Done;
        }
        if self.unpacker.is_some() {
            return self.poll_unpacked(budget, true);
        }
        if self.split.is_some() {
            return self.poll_split(budget);
        }
        let mut read = 0;
        let was_paused = self.paused;
        let before = self.begin_poll();
        let mut result = Polled::Data;
        if was_paused {
            // The frames the last poll left, before any more are read.
            match self.share.clone() {
                Some(sh) => self.drain_shared(sh),
                None => self.drain(),
            }
            if self.done {
                result = Polled::Done;
            }
            // (Full again: read nothing this time.)
            if self.paused || self.done {
                read = budget;
            }
        }
        while read < budget {
            // (Unshared streams read straight into the frame buffer.)
            let got = match self.share {
                Some(_) => self.inner.read(&mut self.chunk),
                None => {
                    // (At least a byte: a read into no room would say the end.)
                    let max = self.pipe.as_ref().map_or(self.slice, |p| p.buffered().clamp(1, self.slice));
                    self.frames.read_from(&mut self.inner, max)
                }
            };
            let n = match got {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    result = Polled::Idle;
                    break;
                }
                Err(e) => {
                    self.ingest.errors.push(format!("{}: read error: {e}", self.ingest.name));
                    0
                }
            };
            if let Some(p) = &self.progress {
                p.fetch_add(n as u64, Ordering::Relaxed);
            }
            if n == 0 {
                self.end_of_input();
                if self.done {
                    result = Polled::Done;
                }
                break;
            }
            read += n;
            if let Some(sh) = self.share.clone() {
                self.raw.extend_from_slice(&self.chunk[..n]);
                self.drain_shared(sh);
            } else {
                self.drain();
            }
            if self.done {
                result = Polled::Done;
                break;
            }
            if self.paused {
                break;
            }
        }
        self.ingest.finish_batch(before);
        if let Some(flag) = self.hello_seen.as_ref().filter(|_| self.ingest.greeted()) {
            flag.store(true, Ordering::Relaxed);
        }
        result
    }

    /// The byte stream ended: the frames it completed are ingested, and a
    /// partial frame left over is truncation.
    fn end_of_input(&mut self) {
        if let Some(sh) = self.share.clone() {
            self.drain_shared(sh);
            // (Stopped between frames: the next poll goes on, and finds the
            // end again.)
            if self.paused {
                return;
            }
            if !self.done {
                let left = self.raw.len() - self.raw_start;
                if left > 0 {
                    let error = ringlog::DecodeError::Truncated { have: left as u64 };
                    self.fail(ringlog::StreamError::fatal(self.raw_offset, error), true);
                } else {
                    self.ingest.eof();
                    self.done = true;
                }
            }
            return;
        }
        self.drain();
        if self.paused {
            return;
        }
        if !self.done {
            if let Err(e) = self.frames.finish() {
                self.ingest.decode_error(&e);
            } else {
                self.ingest.eof();
            }
            self.done = true;
        }
    }

    fn drain(&mut self) {
        loop {
            let off = self.frames.offset();
            let ingest = &mut self.ingest;
            let got = self.frames.next_frame_with(|h, payload, used| {
                ingest.payload(h, payload, used).map_err(|error| ringlog::StreamError {
                    offset: off,
                    error,
                    stream: Some(h.stream),
                })
            });
            match got.and_then(|r| r.transpose()) {
                Ok(Some(())) => {
                    if self.full() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    if !self.ingest.stream_error(&e) {
                        self.done = true;
                        return;
                    }
                    if self.full() {
                        return;
                    }
                }
            }
        }
    }

    /// [`Reader::poll`] of a shared file: ingests the frames the splitter
    /// handed this worker, about `budget` bytes of them. `Idle`: none yet
    /// (another worker's queue is full: it is behind).
    fn poll_split(&mut self, budget: usize) -> Polled {
        let before = self.begin_poll();
        let mut taken = 0;
        while taken < budget && !self.done && !self.paused {
            if self.queued.is_empty() {
                let (splitter, index) = self.split.as_ref().expect("a split reader");
                if !splitter.take(*index, &mut self.queued) {
                    break;
                }
            }
            while let Some(item) = self.queued.pop_front() {
                taken += self.ingest_item(item);
                if self.done || taken >= budget || self.full() {
                    break;
                }
            }
        }
        self.ingest.finish_batch(before);
        match () {
            _ if self.done => {
                self.split = None;
                self.queued.clear();
                Polled::Done
            }
            _ if taken == 0 && !self.paused => Polled::Idle,
            _ => Polled::Data,
        }
    }

    /// One of the splitter's items, as [`Reader::drain_shared`] did for a
    /// frame it read itself: the bytes taken.
    fn ingest_item(&mut self, item: Item) -> usize {
        match item {
            Item::Frame { slice, range, offset, counted } => {
                let len = range.len();
                let booked = if counted { len as u64 } else { 0 };
                let stream = ringlog::frame::parse_header(&slice[range.start..range.start + ringlog::HEADER_LEN])
                    .map(|(h, _)| h.stream)
                    .expect("checked by the splitter");
                let ingest = &mut self.ingest;
                let got =
                    ringlog::decode_frame_with(&slice[range], |hdr, payload| ingest.payload(hdr, payload, booked));
                let fault = match got {
                    Ok(Some((Ok(()), _))) => None,
                    Ok(Some((Err(error), _))) => Some((error, false)),
                    // (The splitter handed a whole frame.)
                    Ok(None) => Some((ringlog::DecodeError::Truncated { have: len as u64 }, true)),
                    Err(error) => Some((error, true)),
                };
                if let Some((error, whole_frame)) = fault {
                    let e = ringlog::StreamError { offset, error, stream: Some(stream) };
                    // A process-wide frame is decoded by every sharing
                    // worker and every stream of the process depends on it:
                    // the file ends for all, reported once, by the primary.
                    if whole_frame && stream.is_process_wide() {
                        self.fail(e, true);
                    } else {
                        self.ingest.stream_error(&e);
                    }
                }
                len
            }
            Item::Fatal(e) => {
                self.fail(e, true);
                0
            }
            Item::ReadError(e) => {
                self.ingest.errors.push(format!("{}: read error: {e}", self.ingest.name));
                0
            }
            Item::End => {
                self.ingest.eof();
                self.done = true;
                0
            }
        }
    }

    /// Stops reading (Ctrl-C): open streams end here, marked as such.
    pub fn stop(&mut self) {
        // (Everything left is ingested now, however many fragments.)
        self.out_cap = usize::MAX;
        if !self.done && self.unpacker.is_some() {
            // What the helper has unpacked so far, then no more.
            self.poll_unpacked(usize::MAX, false);
            self.unpacker = None;
        }
        if !self.done {
            if let Some(sh) = self.share.clone() {
                self.drain_shared(sh);
            } else {
                self.drain();
            }
            if !self.done {
                self.ingest.stop();
                self.done = true;
            }
        }
    }

    /// [`Reader::poll`] with an [`Unpacker`]: takes its batches until about
    /// `budget` bytes of frames were taken, waiting for them if `wait`.
    fn poll_unpacked(&mut self, budget: usize, wait: bool) -> Polled {
        let before = self.begin_poll();
        if !wait {
            // (`stop`: what is unpacked, all of it.)
            self.out_cap = usize::MAX;
        }
        let mut taken = 0;
        while taken < budget && !self.done && !self.paused {
            let u = self.unpacker.as_mut().expect("called with an unpacker");
            let got = match self.held.take() {
                // (The batch the last poll stopped in.)
                Some(batch) => Some(batch),
                None if wait => u.rx.recv().ok(),
                None => u.rx.try_recv().ok(),
            };
            let Some(mut batch) = got else {
                if wait {
                    // (Only if the helper panicked.)
                    self.ingest.errors.push(format!("{}: the reading thread failed", self.ingest.name));
                    self.ingest.eof();
                    self.done = true;
                }
                break;
            };
            let mut frames = std::mem::take(&mut batch.frames);
            let mut left = None;
            let mut each = frames.drain(..);
            while let Some(f) = each.next() {
                let (len, fault) = match f {
                    Unpacked::Records { header, start, end, len, fault } => {
                        self.ingest.records(header, &batch.records[start..end], len);
                        (len, fault)
                    }
                    Unpacked::Other { frame, len } => {
                        self.ingest.frame(frame, len);
                        (len, None)
                    }
                    Unpacked::Fault(e) => (0, Some(e)),
                };
                taken += len as usize;
                if let Some(e) = fault {
                    if !self.ingest.stream_error(&e) {
                        self.done = true;
                        break;
                    }
                }
                if self.full() {
                    // (The frames left, kept for the next poll.)
                    left = Some(each.by_ref().collect::<Vec<_>>()).filter(|l| !l.is_empty());
                    break;
                }
            }
            drop(each);
            if let Some(left) = left.filter(|_| !self.done) {
                batch.frames = left;
                self.held = Some(batch);
                break;
            }
            // (The vector, empty, goes back with the batch for reuse.)
            batch.frames = frames;
            if let Some(end) = batch.end.take() {
                if !self.done {
                    if let Some(e) = end.read_error {
                        self.ingest.errors.push(format!("{}: read error: {e}", self.ingest.name));
                    }
                    match end.framing {
                        Ok(()) => self.ingest.eof(),
                        Err(e) => self.ingest.decode_error(&e),
                    }
                    self.done = true;
                }
            } else if let Some(u) = &self.unpacker {
                let _ = u.back.send(batch);
            }
        }
        self.ingest.finish_batch(before);
        if self.done {
            self.unpacker = None;
            Polled::Done
        } else {
            Polled::Data
        }
    }

    pub fn take_fragments(&mut self, out: &mut Vec<Fragment>) {
        out.append(&mut self.ingest.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_files_give_each_stream_one_owner() {
        for peers in 1..5 {
            for w in 0..16u32 {
                let s = ringlog::StreamId { host: 7, process: 3, worker: w };
                let owners = (0..peers).filter(|&index| Share { peers, index, file: 2, plan: None }.owns(s)).count();
                assert_eq!(owners, 1);
            }
            let pw = ringlog::StreamId { host: 7, process: 3, worker: ringlog::PROCESS_WIDE };
            assert!((0..peers).all(|index| Share { peers, index, file: 0, plan: None }.owns(pw)));
            assert_eq!((0..peers).filter(|&index| Share { peers, index, file: 5, plan: None }.primary()).count(), 1);
        }
    }
}
