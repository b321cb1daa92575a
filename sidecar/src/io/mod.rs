//! The I/O edge: byte streams (files, accepted connections) read in bounded
//! slices and fed to an [`Ingest`]; the listener for live probes.

pub mod relay;

use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringlog::FrameBuffer;

use crate::analysis::model::{Fragment, Ns};
use crate::ingest::stream::Ingest;

/// Sharing one file among timely workers: every worker reads the file,
/// parses every frame header, and decodes (decompresses) only the frames of
/// the worker streams it owns, plus the process-wide ones (hello, clock).
/// Decoding then runs in parallel even for a single file.
#[derive(Clone, Copy, Debug)]
pub struct Share {
    pub peers: usize,
    pub index: usize,
    /// The file's position in the list (spreads streams of many files).
    pub file: usize,
}

impl Share {
    pub fn owns(&self, s: ringlog::StreamId) -> bool {
        if s.worker == ringlog::PROCESS_WIDE {
            return true;
        }
        let h = (s.host as usize).wrapping_add(s.process as usize * 31).wrapping_add(s.worker as usize);
        (h.wrapping_add(self.file)) % self.peers == self.index
    }
    /// The worker that reports the file's faults (once, not once per worker).
    pub fn primary(&self) -> bool {
        self.file % self.peers == self.index
    }
}

/// One byte stream being read.
pub struct Reader {
    pub ingest: Ingest,
    inner: Box<dyn Read + Send>,
    frames: FrameBuffer,
    chunk: Vec<u8>,
    pub done: bool,
    /// Bytes read so far (shared progress counter).
    progress: Option<Arc<AtomicU64>>,
    share: Option<Share>,
    raw: Vec<u8>,
    raw_start: usize,
    raw_offset: u64,
    /// When a live connection was accepted (Unix ns).
    pub joined_unix_ns: Option<i128>,
    /// Frames read and unpacked on a helper thread ([`Reader::unpacked_ahead`]).
    unpacker: Option<Unpacker>,
}

/// The wall clock, in ns since the Unix epoch.
pub fn now_unix_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0)
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
            chunk: vec![0; 1 << 20],
            done: false,
            progress,
            share: None,
            raw: Vec::new(),
            raw_start: 0,
            raw_offset: 0,
            joined_unix_ns: None,
            unpacker: None,
        }
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

    /// Reads only the streams `share` assigns to this worker.
    pub fn shared(mut self, share: Share) -> Reader {
        if share.peers > 1 {
            self.share = Some(share);
        }
        self
    }

    /// `seen_by_all`: a fault every sharing worker sees (a bad header,
    /// truncation) is reported once, by the primary; a payload fault only
    /// the owning worker sees is reported by it.
    fn fail(&mut self, e: ringlog::StreamError, seen_by_all: bool) {
        self.ingest.decode_error(&e);
        if seen_by_all && self.share.is_some_and(|s| !s.primary()) {
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
                let got = ringlog::decode_frame_with(&have[..total], |hdr, payload| {
                    ingest.payload(hdr, payload, total as u64)
                });
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
        let mut read = 0;
        let before = self.ingest.out.len();
        let mut result = Polled::Data;
        while read < budget {
            // (Unshared streams read straight into the frame buffer.)
            let got = match self.share {
                Some(_) => self.inner.read(&mut self.chunk),
                None => self.frames.read_from(&mut self.inner, self.chunk.len()),
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
                // End of input: a partial frame left over is truncation.
                if let Some(sh) = self.share {
                    self.drain_shared(sh);
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
                    result = Polled::Done;
                    break;
                }
                self.drain();
                if !self.done {
                    if let Err(e) = self.frames.finish() {
                        self.ingest.decode_error(&e);
                    } else {
                        self.ingest.eof();
                    }
                    self.done = true;
                }
                result = Polled::Done;
                break;
            }
            read += n;
            if let Some(sh) = self.share {
                self.raw.extend_from_slice(&self.chunk[..n]);
                self.drain_shared(sh);
                if self.done {
                    result = Polled::Done;
                    break;
                }
                continue;
            }
            self.drain();
            if self.done {
                result = Polled::Done;
                break;
            }
        }
        self.ingest.finish_batch(before);
        result
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
                Ok(Some(())) => {}
                Ok(None) => return,
                Err(e) => {
                    if !self.ingest.stream_error(&e) {
                        self.done = true;
                        return;
                    }
                }
            }
        }
    }

    /// Stops reading (Ctrl-C): open streams end here, marked as such.
    pub fn stop(&mut self) {
        if !self.done && self.unpacker.is_some() {
            // What the helper has unpacked so far, then no more.
            self.poll_unpacked(usize::MAX, false);
            self.unpacker = None;
        }
        if !self.done {
            if let Some(sh) = self.share {
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
        let before = self.ingest.out.len();
        let mut taken = 0;
        while taken < budget && !self.done {
            let u = self.unpacker.as_mut().expect("called with an unpacker");
            let got = if wait { u.rx.recv().ok() } else { u.rx.try_recv().ok() };
            let Some(mut batch) = got else {
                if wait {
                    // (Only if the helper panicked.)
                    self.ingest.errors.push(format!("{}: the reading thread failed", self.ingest.name));
                    self.ingest.eof();
                    self.done = true;
                }
                break;
            };
            for f in batch.frames.drain(..) {
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
            }
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

/// What an unpacking thread is handed: the byte stream, and the counter of
/// bytes read that a progress bar shows.
type UnpackInput = (Box<dyn Read + Send>, Option<Arc<AtomicU64>>);

/// A helper thread that reads a byte stream, unpacks its frames (header
/// and payload checks, decompression) and decodes their records into
/// batches for a [`Reader`], which ingests them: together a third of the
/// analysis's instructions on a compressed file, moved off the analysis
/// worker. Faults come in the batches, in order and at the offsets
/// [`FrameBuffer`] and the payload decoder report them, so the reader
/// handles them as its own. Batches go back to the helper to be refilled,
/// and at most [`Unpacker::QUEUE`] wait, so a few MB are in flight.
struct Unpacker {
    rx: std::sync::mpsc::Receiver<Batch>,
    back: std::sync::mpsc::Sender<Batch>,
}

#[derive(Default)]
struct Batch {
    /// The records of the batch's Records frames, one after another.
    records: Vec<ringlog::Record>,
    frames: Vec<Unpacked>,
    /// The byte stream ended after these frames.
    end: Option<End>,
}

enum Unpacked {
    /// A Records frame, `len` bytes long in the stream, whose records are
    /// `records[start..end]`; `fault`: its payload stopped decoding after
    /// them (the stream is dropped).
    Records {
        header: ringlog::FrameHeader,
        start: usize,
        end: usize,
        len: u64,
        fault: Option<ringlog::StreamError>,
    },
    /// Any other frame, `len` bytes long in the stream.
    Other {
        frame: ringlog::Frame,
        len: u64,
    },
    Fault(ringlog::StreamError),
}

struct End {
    read_error: Option<std::io::Error>,
    /// A partial frame left over (truncation), or a fault that ended the
    /// framing (reported already among the frames).
    framing: Result<(), ringlog::StreamError>,
}

impl Unpacker {
    /// Batches waiting for the reader.
    const QUEUE: usize = 2;
    /// Records per batch (1 MB of them: the reader takes them while they
    /// are still in a cache).
    const BATCH: usize = 1 << 15;

    /// Starts the helper thread; what it returns hands it the byte stream
    /// (and the progress counter). `None` if no thread could be started:
    /// the stream then stays with its caller, nothing lost.
    fn spawn() -> Option<impl FnOnce(UnpackInput) -> Unpacker> {
        let (give, input) = std::sync::mpsc::sync_channel::<UnpackInput>(1);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(Self::QUEUE);
        let (back, recycled) = std::sync::mpsc::channel::<Batch>();
        std::thread::Builder::new()
            .name("unpack".into())
            .spawn(move || {
                let Ok((mut inner, progress)) = input.recv() else { return };
                let mut frames = FrameBuffer::new();
                let mut raw = Vec::new();
                loop {
                    let mut batch = recycled.try_recv().unwrap_or_default();
                    batch.records.clear();
                    batch.frames.clear();
                    Self::fill(&mut frames, &mut raw, &mut inner, &mut batch, progress.as_deref());
                    let last = batch.end.is_some();
                    // The reader is gone (done, or dropped): stop.
                    if tx.send(batch).is_err() || last {
                        return;
                    }
                }
            })
            .ok()?;
        Some(move |input| {
            // (The thread waits for exactly this.)
            let _ = give.send(input);
            Unpacker { rx, back }
        })
    }

    /// Unpacks and decodes frames into `batch` until it holds
    /// [`Self::BATCH`] records or the stream ends. (`raw`: room for one
    /// frame's unpacked payload.)
    fn fill(
        frames: &mut FrameBuffer,
        raw: &mut Vec<u8>,
        inner: &mut impl Read,
        batch: &mut Batch,
        progress: Option<&AtomicU64>,
    ) {
        loop {
            loop {
                let offset = frames.offset();
                raw.clear();
                match frames.next_unpacked(raw) {
                    Ok(Some((header, len))) => {
                        batch.frames.push(Self::decode(header, raw, offset, len, &mut batch.records));
                        if batch.records.len() >= Self::BATCH {
                            return;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        let fatal = e.stream.is_none();
                        batch.frames.push(Unpacked::Fault(e));
                        if fatal {
                            batch.end = Some(End { read_error: None, framing: Ok(()) });
                            return;
                        }
                    }
                }
            }
            let (read_error, n) = match frames.read_from(inner, 1 << 20) {
                Ok(n) => (None, n),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => (Some(e), 0),
            };
            if n == 0 {
                batch.end = Some(End { read_error, framing: frames.finish() });
                return;
            }
            if let Some(p) = progress {
                p.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }

    /// Decodes the unpacked payload `raw` of a frame found at `offset`,
    /// its records appended to `records`.
    fn decode(
        header: ringlog::FrameHeader,
        raw: &[u8],
        offset: u64,
        len: u64,
        records: &mut Vec<ringlog::Record>,
    ) -> Unpacked {
        let fault = |error| ringlog::StreamError { offset, error, stream: Some(header.stream) };
        let start = records.len();
        let got = ringlog::visit_unpacked(header, raw, |header, payload| match payload {
            ringlog::Payload::Records(mut recs) => {
                records.extend(&mut recs);
                Unpacked::Records { header, start, end: records.len(), len, fault: recs.finish().err().map(fault) }
            }
            ringlog::Payload::Other(body) => Unpacked::Other { frame: ringlog::Frame { header, body }, len },
        });
        got.unwrap_or_else(|error| Unpacked::Fault(fault(error)))
    }
}

/// Where `sidecar run` listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(String),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

impl std::str::FromStr for Listen {
    type Err = String;
    fn from_str(s: &str) -> Result<Listen, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err("unix: needs a path, e.g. unix:/tmp/sidecar.sock".into());
            }
            Ok(Listen::Unix(PathBuf::from(p)))
        } else if let Some(a) = s.strip_prefix("tcp:") {
            // A bare port listens on loopback only.
            if a.parse::<u16>().is_ok() {
                Ok(Listen::Tcp(format!("127.0.0.1:{a}")))
            } else if a.is_empty() {
                Err("tcp: needs a port or address, e.g. tcp:7070 or tcp:0.0.0.0:7070".into())
            } else {
                Ok(Listen::Tcp(a.to_string()))
            }
        } else {
            Err(format!("'{s}': expected unix:PATH or tcp:[ADDR:]PORT"))
        }
    }
}

/// Creates a Unix socket at `path` readable and writable by the owner only:
/// bound, made owner-only, and only then listening, so nobody can connect
/// while it has wider permissions (a connect before `listen` is refused).
/// (Binding in a private directory and moving the socket into place made
/// the bound path longer than `path`, failing paths near the 107-byte
/// limit of `sun_path`.)
pub fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_socket() {
            // A socket something still listens on belongs to a running
            // process (another sidecar): taking it over would silently cut
            // that one off from its probes. Only a stale one is replaced.
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    ErrorKind::AddrInUse,
                    "another process is listening on this socket (a sidecar still running?)",
                ));
            }
            std::fs::remove_file(path)?; // a stale socket from an earlier run
        } else {
            return Err(std::io::Error::new(
                ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
    }
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    s.bind(&socket2::SockAddr::unix(path)?)?;
    let listening = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).and_then(|()| s.listen(128));
    if let Err(e) = listening {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(UnixListener::from(std::os::fd::OwnedFd::from(s)))
}

/// A bound, non-blocking listener for probe connections (`run`, `watch`,
/// `relay`): unix sockets are created owner-only ([`bind_unix`]) and removed
/// when the listener is dropped.
pub struct Listener {
    inner: ListenerKind,
    path: Option<PathBuf>,
    accepted: u64,
}

enum ListenerKind {
    U(UnixListener),
    T(TcpListener),
}

/// An accepted connection.
pub enum Socket {
    U(std::os::unix::net::UnixStream),
    T(std::net::TcpStream),
}

impl Read for Socket {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Socket::U(s) => s.read(b),
            Socket::T(s) => s.read(b),
        }
    }
}

impl std::os::fd::AsRawFd for Socket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match self {
            Socket::U(s) => s.as_raw_fd(),
            Socket::T(s) => s.as_raw_fd(),
        }
    }
}

impl Socket {
    pub fn set_nonblocking(&self, on: bool) -> std::io::Result<()> {
        match self {
            Socket::U(s) => s.set_nonblocking(on),
            Socket::T(s) => s.set_nonblocking(on),
        }
    }

    pub fn set_read_timeout(&self, t: Option<Duration>) -> std::io::Result<()> {
        match self {
            Socket::U(s) => s.set_read_timeout(t),
            Socket::T(s) => s.set_read_timeout(t),
        }
    }
}

impl Listener {
    /// Binds `listen` and says where on standard error (`who`: "sidecar",
    /// "sidecar relay").
    pub fn bind(listen: &Listen, who: &str) -> std::io::Result<Listener> {
        let (inner, path) = match listen {
            Listen::Unix(p) => {
                let l = bind_unix(p)?;
                l.set_nonblocking(true)?;
                crate::say!("{who}: listening on unix:{}", p.display());
                (ListenerKind::U(l), Some(p.clone()))
            }
            Listen::Tcp(a) => {
                let l = TcpListener::bind(a)?;
                l.set_nonblocking(true)?;
                crate::say!("{who}: listening on tcp:{}", l.local_addr()?);
                (ListenerKind::T(l), None)
            }
        };
        Ok(Listener { inner, path, accepted: 0 })
    }

    /// A pending connection, if any, with a name for messages.
    pub fn accept(&mut self) -> Option<(Socket, String)> {
        let n = self.accepted;
        let got = match &self.inner {
            ListenerKind::U(l) => l.accept().ok().map(|(s, _)| (Socket::U(s), format!("unix connection #{n}"))),
            ListenerKind::T(l) => l.accept().ok().map(|(s, a)| {
                let _ = s.set_nodelay(true);
                (Socket::T(s), format!("tcp connection #{n} from {a}"))
            }),
        };
        self.accepted += got.is_some() as u64;
        got
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Sleeps until a connection is pending or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        let mut fds = [libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(self), events: libc::POLLIN, revents: 0 }];
        // SAFETY: `fds` is a valid array of one pollfd for the call.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout.as_millis().min(i32::MAX as u128) as i32) };
    }
}

impl std::os::fd::AsRawFd for Listener {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        match &self.inner {
            ListenerKind::U(l) => l.as_raw_fd(),
            ListenerKind::T(l) => l.as_raw_fd(),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// What the I/O thread hands one analysis worker: the connections accepted
/// for it, and how to wake it when one of them has data.
#[derive(Default)]
pub struct WorkerQueue {
    pub readers: Mutex<Vec<Reader>>,
    waker: Mutex<Option<Box<dyn Fn() + Send>>>,
}

impl WorkerQueue {
    /// Sets how to wake this worker (its input operator's activator).
    pub fn set_waker(&self, wake: Box<dyn Fn() + Send>) {
        *self.waker.lock().unwrap() = Some(wake);
    }

    pub fn wake(&self) {
        if let Some(w) = &*self.waker.lock().unwrap() {
            w();
        }
    }
}

/// Live input: one queue per analysis worker, and whether the I/O thread
/// has finished (after a stop it makes one last pass over the sockets).
#[derive(Default)]
pub struct Live {
    pub workers: Vec<WorkerQueue>,
    pub io_done: AtomicBool,
}

pub type Queues = Arc<Live>;

pub fn queues(workers: usize) -> Queues {
    Arc::new(Live {
        workers: (0..workers.max(1)).map(|_| WorkerQueue::default()).collect(),
        io_done: AtomicBool::new(false),
    })
}

/// Bytes the I/O thread read off one connection, waiting for its analysis
/// worker. Reading sockets on their own thread keeps the analysis asleep
/// until there is something to analyze (no polling: an idle sidecar costs
/// nothing), and drains the probe's socket promptly even while the analysis
/// is busy, up to `PIPE_MAX` bytes.
#[derive(Default)]
struct PipeState {
    data: Vec<u8>,
    start: usize,
    /// The connection ended: `Some(None)` at its end, `Some(Some(e))` on a
    /// read error (reported once, then the end).
    closed: Option<Option<std::io::Error>>,
}

const PIPE_MAX: usize = 64 << 20;

#[derive(Clone, Default)]
struct Pipe(Arc<Mutex<PipeState>>);

impl Pipe {
    fn buffered(&self) -> usize {
        let s = self.0.lock().unwrap();
        s.data.len() - s.start
    }

    /// Appends bytes from the socket. The part already read goes first once
    /// it is half the buffer: a reader that keeps up without ever emptying
    /// the pipe must not make it grow for ever.
    fn push(&self, bytes: &[u8]) {
        let mut s = self.0.lock().unwrap();
        if s.start > 0 && s.start * 2 >= s.data.len() {
            let read = s.start;
            s.data.drain(..read);
            s.start = 0;
        }
        s.data.extend_from_slice(bytes);
    }
}

impl Read for Pipe {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let mut s = self.0.lock().unwrap();
        let have = s.data.len() - s.start;
        if have == 0 {
            return match &mut s.closed {
                None => Err(ErrorKind::WouldBlock.into()),
                Some(e) => match e.take() {
                    Some(e) => Err(e),
                    None => Ok(0),
                },
            };
        }
        let n = have.min(out.len());
        out[..n].copy_from_slice(&s.data[s.start..s.start + n]);
        s.start += n;
        if s.start == s.data.len() {
            s.data.clear();
            s.start = 0;
        }
        Ok(n)
    }
}

/// Bytes a connection's pipe holds before its analysis worker is woken for
/// them in mid-window. Within the grace after a window's end (on this
/// host's CLOCK_MONOTONIC, the timeline windows are cut on) every read
/// wakes it (the bytes that carry its streams past the end let it close the
/// window at once); otherwise it reads them at its next wake-up (at the
/// latest its deadline, a window's end plus the grace). Waking it for every
/// frame the probe flushes (every 10 ms) cost the sidecar ~75 µs of CPU per
/// wake-up on this machine kind, on the cores the traced engine runs on.
const WAKE_BYTES: usize = 512 << 10;

/// One accepted connection, as the I/O thread holds it.
struct Conn {
    sock: Socket,
    pipe: Pipe,
    worker: usize,
    open: bool,
    /// Its worker was woken for its first bytes (the Hello: the worker
    /// learns the host, and with it its window deadlines).
    announced: bool,
}

impl Conn {
    /// Reads what the socket has (up to a bound per pass) into the pipe.
    fn read_available(&mut self, buf: &mut [u8]) -> bool {
        let mut any = false;
        let mut budget: usize = 8 << 20;
        while budget > 0 {
            match self.sock.read(buf) {
                Ok(0) => {
                    self.pipe.0.lock().unwrap().closed = Some(None);
                    self.open = false;
                    return true;
                }
                Ok(n) => {
                    self.pipe.push(&buf[..n]);
                    budget = budget.saturating_sub(n);
                    any = true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    self.pipe.0.lock().unwrap().closed = Some(Some(e));
                    self.open = false;
                    return true;
                }
            }
        }
        any
    }
}

/// Accepts connections until `stop` and reads them: each connection becomes
/// a Reader on the queue of worker `n % workers`, fed by this thread, which
/// sleeps in poll(2) until a socket has data, reads it, and wakes that
/// worker when it is news (see `WAKE_BYTES`).
/// After `stop`, connections already pending are still taken and what the
/// sockets hold is read one last time.
pub fn spawn_listener(
    listen: Listen,
    (width, grace): (Ns, Ns),
    queues: Queues,
    stop: Arc<AtomicBool>,
    sync: crate::ingest::sync::SharedSync,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let mut l = Listener::bind(&listen, "sidecar")?;
    use std::os::fd::AsRawFd;
    let lfd = l.as_raw_fd();
    Ok(std::thread::spawn(move || {
        let mut conns: Vec<Conn> = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let workers = queues.workers.len();
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            fds.clear();
            fds.push(libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 });
            for c in &conns {
                // A full pipe is not read: the probe's socket fills up, and
                // the probe counts what it cannot send.
                let events = if c.pipe.buffered() < PIPE_MAX { libc::POLLIN } else { 0 };
                fds.push(libc::pollfd { fd: c.sock.as_raw_fd(), events, revents: 0 });
            }
            // The timeout only bounds how late a stop is seen.
            let timeout = if stopping { 0 } else { 100 };
            // SAFETY: `fds` is a valid, initialized array of `fds.len()`
            // pollfd structs that lives across the call.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
            if r < 0 && std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut woken = vec![false; workers];
            // Connections: everything pending.
            let mut accepted = 0;
            loop {
                let Some((sock, name)) = l.accept() else { break };
                let _ = sock.set_nonblocking(true);
                let w = (l.accepted() - 1) as usize % workers;
                let pipe = Pipe::default();
                let mut reader = Reader::new(name, Box::new(pipe.clone()), width, None).with_sync(sync.clone());
                reader.joined_unix_ns = Some(now_unix_ns());
                queues.workers[w].readers.lock().unwrap().push(reader);
                let mut c = Conn { sock, pipe, worker: w, open: true, announced: false };
                c.announced = c.read_available(&mut buf);
                conns.push(c);
                woken[w] = true;
                accepted += 1;
            }
            // Data: every socket poll found readable (or, when stopping,
            // every socket: one last pass).
            // (Windows are cut on the hosts' CLOCK_MONOTONIC, this host's for
            // its own probes and for relayed hosts synced to it.)
            let closing = probe::monotonic_ns() % width.max(1) <= grace;
            for (i, c) in conns.iter_mut().enumerate() {
                let ready = fds.get(i + 1).is_some_and(|f| f.revents != 0);
                if (ready || stopping) && c.open && c.read_available(&mut buf) {
                    // (A closed connection's end is news: its windows may
                    // close now.)
                    if !c.announced || !c.open || stopping || closing || c.pipe.buffered() >= WAKE_BYTES {
                        woken[c.worker] = true;
                        c.announced = true;
                    }
                }
            }
            conns.retain(|c| c.open);
            for (w, q) in woken.iter().zip(&queues.workers) {
                if *w {
                    q.wake();
                }
            }
            if stopping && accepted == 0 {
                break;
            }
        }
        queues.io_done.store(true, Ordering::SeqCst);
        for q in &queues.workers {
            q.wake();
        }
        drop(l); // removes a unix socket
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that nearly keeps up but never empties the pipe: what it has
    /// read is dropped from the front, and every byte comes out once, in
    /// order.
    #[test]
    fn a_pipe_never_emptied_stays_bounded() {
        let mut p = Pipe::default();
        let (mut sent, mut got) = (Vec::new(), Vec::new());
        let mut out = [0u8; 1500];
        for i in 0..20_000u32 {
            let chunk: Vec<u8> = (0..1000u32).map(|j| (i * 7 + j) as u8).collect();
            p.push(&chunk);
            sent.extend_from_slice(&chunk);
            // A byte short each time: the pipe is never empty.
            let n = p.read(&mut out[..999]).unwrap();
            got.extend_from_slice(&out[..n]);
            let len = p.0.lock().unwrap().data.len();
            let unread = p.buffered();
            assert!(len <= 2 * unread + 2000, "{len} bytes held for {unread} unread");
        }
        while let Ok(n) = p.read(&mut out) {
            got.extend_from_slice(&out[..n]);
        }
        assert_eq!(got, sent);
    }

    #[test]
    fn listen_specs() {
        assert_eq!("tcp:7070".parse::<Listen>().unwrap(), Listen::Tcp("127.0.0.1:7070".into()));
        assert_eq!("tcp:0.0.0.0:1".parse::<Listen>().unwrap(), Listen::Tcp("0.0.0.0:1".into()));
        assert_eq!("unix:/x".parse::<Listen>().unwrap(), Listen::Unix("/x".into()));
        assert!("x".parse::<Listen>().is_err());
    }

    #[test]
    fn shared_files_give_each_stream_one_owner() {
        for peers in 1..5 {
            for w in 0..16u32 {
                let s = ringlog::StreamId { host: 7, process: 3, worker: w };
                let owners = (0..peers).filter(|&index| Share { peers, index, file: 2 }.owns(s)).count();
                assert_eq!(owners, 1);
            }
            let pw = ringlog::StreamId { host: 7, process: 3, worker: ringlog::PROCESS_WIDE };
            assert!((0..peers).all(|index| Share { peers, index, file: 0 }.owns(pw)));
            assert_eq!((0..peers).filter(|&index| Share { peers, index, file: 5 }.primary()).count(), 1);
        }
    }

    #[test]
    fn pipe_hands_over_bytes_then_the_end_or_the_error_once() {
        let mut p = Pipe::default();
        let mut out = [0u8; 4];
        assert_eq!(p.read(&mut out).unwrap_err().kind(), ErrorKind::WouldBlock);
        p.0.lock().unwrap().data.extend_from_slice(b"abcdef");
        assert_eq!(p.read(&mut out).unwrap(), 4);
        assert_eq!(&out, b"abcd");
        assert_eq!(p.buffered(), 2);
        p.0.lock().unwrap().closed = Some(Some(std::io::Error::other("reset")));
        assert_eq!(p.read(&mut out).unwrap(), 2, "buffered bytes come before the end");
        assert_eq!(p.read(&mut out).unwrap_err().to_string(), "reset");
        assert_eq!(p.read(&mut out).unwrap(), 0);
    }

    #[test]
    fn unix_socket_is_owner_only() {
        let p = std::env::temp_dir().join(format!("sc-test-{}.sock", std::process::id()));
        let _l = bind_unix(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_file(&p).unwrap();
    }

    /// `sun_path` holds 107 bytes and a NUL: a path of 107 bytes binds, one
    /// of 108 is refused with an error, and nothing is left behind.
    #[test]
    fn unix_socket_paths_up_to_the_limit() {
        let dir = std::env::temp_dir().join(format!("sc-test-long-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = |len: usize| {
            let base = dir.as_os_str().len() + 1;
            dir.join("s".repeat(len - base))
        };
        let p = at(107);
        assert_eq!(p.as_os_str().len(), 107);
        let l = bind_unix(&p).unwrap();
        assert!(std::os::unix::net::UnixStream::connect(&p).is_ok());
        drop(l);
        std::fs::remove_file(&p).unwrap();
        assert!(bind_unix(&at(108)).is_err());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }
}
