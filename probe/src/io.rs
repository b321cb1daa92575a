//! The writer's way to the kernel: io_uring, or plain write(2)/send(2) where
//! io_uring cannot be set up or cannot write (old kernels, seccomp filters
//! in containers).

use std::io;

use io_uring::{opcode, squeue, types, IoUring};

use crate::sink::{Conn, WRITE_TIMEOUT};

/// Which I/O path the writer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoBackend {
    /// io_uring if it can be set up, else write(2).
    Auto,
    /// Plain write(2)/send(2) even where io_uring works.
    Syscall,
}

pub(crate) enum Io {
    Uring { ring: Box<IoUring>, calls: u64 },
    Syscall,
}

const WRITE: u64 = 0;
const TIMEOUT: u64 = 1;

/// How a single io_uring write ended.
enum UringError {
    /// Both completions are in: nothing in the kernel refers to the buffer.
    Io(io::Error),
    /// The ring refuses the operation itself (unsupported, forbidden): use
    /// write(2) instead. Both completions are in.
    Unusable(io::Error),
    /// The ring failed while an operation may still be in flight: neither
    /// the ring nor the buffer may be touched or freed again.
    Broken(io::Error),
}

impl Io {
    pub fn new(want: IoBackend) -> Io {
        // (`PROBE_IO` is read, and checked, at `Builder::start`.)
        if want == IoBackend::Syscall {
            return Io::Syscall;
        }
        let Ok(ring) = IoUring::new(8) else {
            return Io::Syscall;
        };
        // Kernels before 5.6 have io_uring without send/write-at-offset or
        // linked timeouts: ask rather than fail on the first write.
        let mut probe = io_uring::Probe::new();
        if ring.submitter().register_probe(&mut probe).is_err()
            || ![opcode::Write::CODE, opcode::Send::CODE, opcode::LinkTimeout::CODE]
                .iter()
                .all(|&c| probe.is_supported(c))
        {
            return Io::Syscall;
        }
        Io::Uring { ring: Box::new(ring), calls: 0 }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Io::Uring { .. } => "io_uring",
            Io::Syscall => "write(2)",
        }
    }

    /// Writes all of `buf` (one batch of whole frames) and hands the buffer
    /// back. On failure also says how many bytes reached the sink, so the
    /// caller can account frame by frame and cut a file back to a frame
    /// boundary.
    ///
    /// The buffer is taken by value because, if io_uring fails while a
    /// write may still be in flight, the kernel may go on reading it: it is
    /// then leaked together with the ring (and an empty one returned), and
    /// the writer goes on with write(2).
    pub fn write_all(&mut self, conn: &mut Conn, buf: Vec<u8>) -> (Vec<u8>, Result<(), (usize, io::Error)>) {
        let mut done = 0;
        while done < buf.len() {
            let rest = &buf[done..];
            let n = match self {
                Io::Uring { ring, calls } => {
                    *calls += 1;
                    match uring_write(ring, conn, rest, *calls << 1) {
                        Ok(n) => Ok(n),
                        Err(UringError::Io(e)) => Err(e),
                        Err(UringError::Unusable(e)) => {
                            let _ = e;
                            *self = Io::Syscall;
                            continue;
                        }
                        Err(UringError::Broken(e)) => {
                            let Io::Uring { ring, .. } = std::mem::replace(self, Io::Syscall) else { unreachable!() };
                            std::mem::forget(ring);
                            std::mem::forget(buf);
                            return (Vec::new(), Err((done, e)));
                        }
                    }
                }
                Io::Syscall => syscall_write(conn, rest),
            };
            match n {
                Ok(0) => return (buf, Err((done, io::Error::new(io::ErrorKind::WriteZero, "sink accepted no bytes")))),
                Ok(n) => {
                    done += n;
                    conn.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return (buf, Err((done, e))),
            }
        }
        (buf, Ok(()))
    }
}

/// One write (and its linked timeout) through the ring. Returns only once
/// both completions are in, unless the ring itself fails (`Broken`).
fn uring_write(ring: &mut IoUring, conn: &Conn, buf: &[u8], tag: u64) -> Result<usize, UringError> {
    let fd = types::Fd(conn.fd());
    let len = buf.len().min(u32::MAX as usize) as u32;
    let op = if conn.is_file {
        opcode::Write::new(fd, buf.as_ptr(), len).offset(conn.pos).build()
    } else {
        opcode::Send::new(fd, buf.as_ptr(), len).flags(libc::MSG_NOSIGNAL).build()
    };
    // A linked timeout bounds how long a stalled peer can hold the writer
    // (the socket's SO_SNDTIMEO does not apply to io_uring's async path).
    let ts = types::Timespec::new().sec(WRITE_TIMEOUT.as_secs());
    let timeout = opcode::LinkTimeout::new(&ts).build().user_data(tag | TIMEOUT);
    let op = op.flags(squeue::Flags::IO_LINK).user_data(tag | WRITE);
    {
        let mut sq = ring.submission();
        if sq.capacity() - sq.len() < 2 {
            return Err(UringError::Io(io::Error::other("io_uring submission queue full")));
        }
        // SAFETY: the entries point at `buf` and `ts`, which outlive the
        // operations: this function does not return before both
        // completions are in, except as `Broken`, in which case the caller
        // leaks the buffer and the ring so that neither is freed or reused.
        unsafe {
            sq.push(&op).expect("room checked above");
            sq.push(&timeout).expect("room checked above");
        }
    }
    let mut result = None;
    let mut seen = 0;
    let mut failures = 0;
    while seen < 2 {
        match ring.submit_and_wait(2 - seen) {
            Ok(_) => {}
            // A signal interrupted the wait: the operations go on; wait again.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                failures += 1;
                if failures > 3 {
                    return Err(UringError::Broken(e));
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
        }
        for cqe in ring.completion() {
            // Completions of earlier calls cannot be here (every call waits
            // for both of its own), but a tag check costs nothing.
            if cqe.user_data() & !1 != tag {
                continue;
            }
            seen += 1;
            if cqe.user_data() & 1 == WRITE {
                result = Some(cqe.result());
            }
        }
    }
    match result {
        Some(r) if r >= 0 => Ok(r as usize),
        Some(r) if -r == libc::ECANCELED => {
            Err(UringError::Io(io::Error::new(io::ErrorKind::TimedOut, "write timed out")))
        }
        Some(r) if [libc::EINVAL, libc::EOPNOTSUPP, libc::EPERM, libc::ENOSYS].contains(&-r) => {
            Err(UringError::Unusable(io::Error::from_raw_os_error(-r)))
        }
        Some(r) => Err(UringError::Io(io::Error::from_raw_os_error(-r))),
        None => Err(UringError::Io(io::Error::other("io_uring lost a completion"))),
    }
}

fn syscall_write(conn: &Conn, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a valid readable slice for its length and `fd` an
    // open descriptor owned by `conn`.
    let n = unsafe {
        if conn.is_file {
            libc::pwrite(conn.fd(), buf.as_ptr().cast(), buf.len(), conn.pos as libc::off_t)
        } else {
            libc::send(conn.fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL)
        }
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "write timed out"));
        }
        Err(e)
    } else {
        Ok(n as usize)
    }
}
