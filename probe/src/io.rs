//! The writer's way to the kernel: io_uring, or plain write(2)/send(2) where
//! io_uring cannot be set up (old kernels, seccomp filters in containers).

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
    Uring(Box<IoUring>),
    Syscall,
}

const WRITE: u64 = 1;
const TIMEOUT: u64 = 2;

impl Io {
    pub fn new(want: IoBackend) -> Io {
        if want == IoBackend::Syscall || std::env::var_os("PROBE_IO").is_some_and(|v| v == "syscall") {
            return Io::Syscall;
        }
        match IoUring::new(8) {
            Ok(r) => Io::Uring(Box::new(r)),
            Err(_) => Io::Syscall,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Io::Uring(_) => "io_uring",
            Io::Syscall => "write(2)",
        }
    }

    /// Writes all of `buf` (one batch of whole frames). On failure returns
    /// how many bytes did reach the sink, so the caller can account frame by
    /// frame and cut a file back to a frame boundary.
    pub fn write_all(&mut self, conn: &mut Conn, buf: &[u8]) -> Result<(), (usize, io::Error)> {
        let mut done = 0;
        while done < buf.len() {
            let rest = &buf[done..];
            let n = match self {
                Io::Uring(ring) => uring_write(ring, conn, rest),
                Io::Syscall => syscall_write(conn, rest),
            };
            match n {
                Ok(0) => return Err((done, io::Error::new(io::ErrorKind::WriteZero, "sink accepted no bytes"))),
                Ok(n) => {
                    done += n;
                    conn.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err((done, e)),
            }
        }
        Ok(())
    }
}

fn uring_write(ring: &mut IoUring, conn: &Conn, buf: &[u8]) -> io::Result<usize> {
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
    let timeout = opcode::LinkTimeout::new(&ts).build().user_data(TIMEOUT);
    let op = op.flags(squeue::Flags::IO_LINK).user_data(WRITE);
    // SAFETY: the entries point at `buf` and `ts`, which outlive the
    // operations: we wait below for both completions before returning, and
    // the queue is empty on entry (every call drains what it submitted).
    unsafe {
        let mut sq = ring.submission();
        sq.push(&op).map_err(|_| io::Error::other("io_uring submission queue full"))?;
        sq.push(&timeout).map_err(|_| io::Error::other("io_uring submission queue full"))?;
    }
    let mut result = None;
    let mut seen = 0;
    while seen < 2 {
        ring.submit_and_wait(2 - seen)?;
        for cqe in ring.completion() {
            seen += 1;
            if cqe.user_data() == WRITE {
                result = Some(cqe.result());
            }
        }
    }
    match result {
        Some(r) if r >= 0 => Ok(r as usize),
        Some(r) if -r == libc::ECANCELED => Err(io::Error::new(io::ErrorKind::TimedOut, "write timed out")),
        Some(r) => Err(io::Error::from_raw_os_error(-r)),
        None => Err(io::Error::other("io_uring lost a completion")),
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
