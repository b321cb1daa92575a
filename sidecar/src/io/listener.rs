//! Where live probes connect: the `unix:`/`tcp:` address ([`Listen`]), the
//! owner-only Unix socket ([`bind_unix`]), the non-blocking [`Listener`] and
//! the connections it accepts ([`Socket`]).

use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

    /// A pending connection, if any, with a name for messages; an error
    /// other than none pending (out of file descriptors, say).
    pub fn accept(&mut self) -> std::io::Result<Option<(Socket, String)>> {
        let n = self.accepted;
        let got = match &self.inner {
            ListenerKind::U(l) => l.accept().map(|(s, _)| (Socket::U(s), format!("unix connection #{n}"))),
            ListenerKind::T(l) => l.accept().map(|(s, a)| {
                let _ = s.set_nodelay(true);
                (Socket::T(s), format!("tcp connection #{n} from {a}"))
            }),
        };
        match got {
            Ok(c) => {
                self.accepted += 1;
                Ok(Some(c))
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(None),
            // (A connection reset before it was accepted: the next one.)
            Err(e) if e.kind() == ErrorKind::ConnectionAborted => Ok(None),
            Err(e) => Err(e),
        }
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
