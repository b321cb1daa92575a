//! Where frames go: a Unix stream socket, a TCP connection, or a file.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

/// A destination for the probe's frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    /// A Unix stream socket a sidecar listens on.
    Unix(PathBuf),
    /// A TCP address (`host:port`) a sidecar listens on.
    Tcp(String),
    /// A file, created or truncated at start.
    File(PathBuf),
    /// No tracing: every probe call is one predictable branch.
    Off,
    /// A `PROBE_SINK` value that could not be read; `start()` reports it.
    Invalid(String),
}

impl Sink {
    pub fn unix(path: impl Into<PathBuf>) -> Sink {
        Sink::Unix(path.into())
    }
    pub fn tcp(addr: impl Into<String>) -> Sink {
        Sink::Tcp(addr.into())
    }
    pub fn file(path: impl Into<PathBuf>) -> Sink {
        Sink::File(path.into())
    }

    /// Reads `PROBE_SINK` (`unix:PATH`, `tcp:HOST:PORT`, `file:PATH`, `off`);
    /// `default` when it is unset or empty.
    pub fn from_env_or(default: Sink) -> Sink {
        match std::env::var("PROBE_SINK") {
            Ok(v) if !v.trim().is_empty() => Sink::parse(v.trim()),
            _ => default,
        }
    }

    /// Parses the `PROBE_SINK` syntax. An unreadable value becomes
    /// `Sink::Invalid`, so the error surfaces at `start()`.
    pub fn parse(s: &str) -> Sink {
        if s == "off" {
            return Sink::Off;
        }
        match s.split_once(':') {
            Some(("unix", p)) if !p.is_empty() => Sink::unix(p),
            Some(("file", p)) if !p.is_empty() => Sink::file(p),
            Some(("tcp", a)) if a.contains(':') => Sink::tcp(a),
            _ => Sink::Invalid(s.to_string()),
        }
    }
}

impl fmt::Display for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sink::Unix(p) => write!(f, "unix:{}", p.display()),
            Sink::Tcp(a) => write!(f, "tcp:{a}"),
            Sink::File(p) => write!(f, "file:{}", p.display()),
            Sink::Off => write!(f, "off"),
            Sink::Invalid(s) => write!(f, "invalid({s})"),
        }
    }
}

/// An open destination: the descriptor and how to write to it.
pub(crate) struct Conn {
    fd: OwnedFd,
    /// Files take positioned writes (and are cut back after a failed write);
    /// sockets take `send` with MSG_NOSIGNAL so a gone peer is an error,
    /// never a SIGPIPE.
    pub is_file: bool,
    /// For files: the offset the next frame goes to.
    pub pos: u64,
}

impl Conn {
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Cuts a file back to `len` bytes, so that a frame whose write failed
    /// half way does not leave a torn frame in the trace. False if the file
    /// could not be cut (sockets: nothing to do, true).
    pub fn truncate(&mut self, len: u64) -> bool {
        if !self.is_file {
            return true;
        }
        self.pos = len;
        // SAFETY: `fd` is an open descriptor we own.
        unsafe { libc::ftruncate(self.fd(), len as libc::off_t) == 0 }
    }
}

/// How long one write may take before the sink counts as failing.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) fn open(sink: &Sink, fresh_file: bool) -> io::Result<Conn> {
    match sink {
        Sink::Unix(p) => {
            // The send timeout is set before connecting: Linux bounds a
            // connect to a listener whose accept queue is full by it, where
            // std's connect would wait for a sidecar that never accepts (and
            // `shutdown` with it).
            let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
            s.set_write_timeout(Some(WRITE_TIMEOUT))?;
            s.connect(&socket2::SockAddr::unix(p)?)?;
            Ok(Conn { fd: s.into(), is_file: false, pos: 0 })
        }
        Sink::Tcp(a) => {
            let mut last = io::Error::new(io::ErrorKind::InvalidInput, format!("{a}: no address"));
            for addr in std::net::ToSocketAddrs::to_socket_addrs(a.as_str())? {
                match std::net::TcpStream::connect_timeout(&addr, WRITE_TIMEOUT) {
                    Ok(s) => {
                        s.set_nodelay(true)?;
                        s.set_write_timeout(Some(WRITE_TIMEOUT))?;
                        return Ok(Conn { fd: s.into(), is_file: false, pos: 0 });
                    }
                    Err(e) => last = e,
                }
            }
            Err(last)
        }
        Sink::File(p) => {
            // A regular file is locked before it is cut: one another
            // process's probe is writing (one PROBE_SINK given to every
            // process of a job) is left as it is, not truncated and
            // interleaved with this one. (A device or a FIFO is neither
            // locked nor cut.)
            let f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(p)?;
            let meta = f.metadata()?;
            let cut = meta.is_file() && fresh_file;
            if meta.is_file() {
                lock_exclusively(&f)?;
                if cut {
                    f.set_len(0)?;
                }
            }
            let pos = if cut { 0 } else { meta.len() };
            Ok(Conn { fd: f.into(), is_file: true, pos })
        }
        Sink::Off | Sink::Invalid(_) => Err(io::Error::new(io::ErrorKind::InvalidInput, "no sink")),
    }
}

/// Takes the advisory lock of `f`'s file for this open file, without
/// waiting: held until it is closed. A lock another open file holds is
/// [`io::ErrorKind::ResourceBusy`], naming why.
fn lock_exclusively(f: &std::fs::File) -> io::Result<()> {
    // SAFETY: flock(2) on a descriptor `f` owns and keeps open for the call.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            "another process's probe is writing this file (each process needs a file of its own)",
        ));
    }
    Err(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_env_syntax() {
        assert_eq!(Sink::parse("off"), Sink::Off);
        assert_eq!(Sink::parse("unix:/tmp/s"), Sink::unix("/tmp/s"));
        assert_eq!(Sink::parse("file:t.ringlog"), Sink::file("t.ringlog"));
        assert_eq!(Sink::parse("tcp:127.0.0.1:9"), Sink::tcp("127.0.0.1:9"));
        assert!(matches!(Sink::parse("tcp:nohostport"), Sink::Invalid(_)));
        assert!(matches!(Sink::parse("udp:x"), Sink::Invalid(_)));
        assert!(matches!(Sink::parse("file:"), Sink::Invalid(_)));
    }
}
