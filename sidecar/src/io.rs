//! The I/O edge: byte streams (files, accepted connections) read in bounded
//! slices and fed to an [`Ingest`]; the listener for live probes.

use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringlog::FrameBuffer;

use crate::ingest::Ingest;
use crate::model::{Fragment, Ns};

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
        }
    }

    /// Shares the sidecar's clock models (clock sync) with this stream.
    pub fn with_sync(mut self, sync: crate::sync::SharedSync) -> Reader {
        self.ingest.sync = crate::sync::StreamSync::new(sync);
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
                Err(error) => return self.fail(ringlog::StreamError { offset: self.raw_offset, error }, true),
            };
            let total = HEADER_LEN + h.payload_len as usize;
            if have.len() < total {
                break;
            }
            if share.owns(h.stream) {
                match ringlog::decode_frame(&have[..total]) {
                    Ok(Some((f, used))) => self.ingest.frame(f, used as u64),
                    Ok(None) => break,
                    Err(error) => return self.fail(ringlog::StreamError { offset: self.raw_offset, error }, false),
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
        let mut read = 0;
        let before = self.ingest.out.len();
        let mut result = Polled::Data;
        while read < budget {
            let n = match self.inner.read(&mut self.chunk) {
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
                            self.fail(ringlog::StreamError { offset: self.raw_offset, error }, true);
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
            self.frames.feed(&self.chunk[..n]);
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
            match self.frames.next_frame() {
                Ok(Some(f)) => {
                    let used = self.frames.offset() - off;
                    self.ingest.frame(f, used);
                }
                Ok(None) => return,
                Err(e) => {
                    self.ingest.decode_error(&e);
                    self.done = true;
                    return;
                }
            }
        }
    }

    /// Stops reading (Ctrl-C): open streams end here, marked as such.
    pub fn stop(&mut self) {
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

    pub fn take_fragments(&mut self, out: &mut Vec<Fragment>) {
        out.append(&mut self.ingest.out);
    }
}

/// Where `sidecar run` listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(String),
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
/// bound inside a fresh private directory, then moved into place, so it is
/// never reachable with wider permissions.
pub fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_socket() {
            std::fs::remove_file(path)?; // a stale socket from an earlier run
        } else {
            return Err(std::io::Error::new(
                ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
    }
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".sidecar-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&tmp)?;
    let inner = tmp.join("s");
    let res = (|| {
        let l = UnixListener::bind(&inner)?;
        std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o600))?;
        std::fs::rename(&inner, path)?;
        Ok(l)
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    res
}

/// Connections accepted, queued per analysis worker (round robin).
pub type Queues = Arc<Vec<Mutex<Vec<Reader>>>>;

/// Accepts connections until `stop`; each becomes a non-blocking Reader on
/// the queue of worker `n % workers`.
pub fn spawn_listener(
    listen: Listen,
    width: Ns,
    queues: Queues,
    stop: Arc<AtomicBool>,
    sync: crate::sync::SharedSync,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    enum L {
        U(UnixListener),
        T(TcpListener),
    }
    let l = match &listen {
        Listen::Unix(p) => {
            let l = bind_unix(p)?;
            l.set_nonblocking(true)?;
            L::U(l)
        }
        Listen::Tcp(a) => {
            let l = TcpListener::bind(a)?;
            l.set_nonblocking(true)?;
            eprintln!("sidecar: listening on tcp:{}", l.local_addr()?);
            L::T(l)
        }
    };
    if let Listen::Unix(p) = &listen {
        eprintln!("sidecar: listening on unix:{}", p.display());
    }
    Ok(std::thread::spawn(move || {
        let mut n = 0usize;
        loop {
            // Once stopped, connections already pending are still taken.
            let stopping = stop.load(Ordering::Relaxed);
            let got: Option<(Box<dyn Read + Send>, String)> = match &l {
                L::U(l) => match l.accept() {
                    Ok((s, _)) => {
                        let _ = s.set_nonblocking(true);
                        Some((Box::new(s), format!("unix connection #{n}")))
                    }
                    Err(_) => None,
                },
                L::T(l) => match l.accept() {
                    Ok((s, a)) => {
                        let _ = s.set_nonblocking(true);
                        let _ = s.set_nodelay(true);
                        Some((Box::new(s), format!("tcp connection #{n} from {a}")))
                    }
                    Err(_) => None,
                },
            };
            match got {
                Some((r, name)) => {
                    let w = n % queues.len();
                    queues[w].lock().unwrap().push(Reader::new(name, r, width, None).with_sync(sync.clone()));
                    n += 1;
                }
                None if stopping => break,
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        if let Listen::Unix(p) = &listen {
            let _ = std::fs::remove_file(p);
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn unix_socket_is_owner_only() {
        let p = std::env::temp_dir().join(format!("sc-test-{}.sock", std::process::id()));
        let _l = bind_unix(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::remove_file(&p).unwrap();
    }
}
