//! The I/O thread of `sidecar run` and `watch`: accepts probe connections,
//! reads their sockets into pipes, and wakes the analysis worker a
//! connection belongs to when its bytes are news.

use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::os_clock::{monotonic_ns, now_unix_ns};
use super::pipe::{Pipe, PIPE_MAX};
use super::{Listen, Listener, Queues, Reader, Socket};
use crate::analysis::model::Ns;

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
                    self.pipe.close(None);
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
                    self.pipe.close(Some(e));
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
    let listener = Listener::bind(&listen, "sidecar")?;
    let mut io =
        IoThread { listener, conns: Vec::new(), buf: vec![0u8; 1 << 20], fds: Vec::new(), queues, sync, width, grace };
    Ok(std::thread::spawn(move || {
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            io.wait_for_news(stopping);
            let mut woken = vec![false; io.queues.workers.len()];
            let accepted = io.accept_pending(&mut woken);
            io.read_ready(stopping, &mut woken);
            io.wake(&woken);
            if stopping && accepted == 0 {
                break;
            }
        }
        io.finish();
    }))
}

/// What the I/O thread holds between its passes.
struct IoThread {
    // (First: dropped first, removing a unix socket before the
    // connections close.)
    listener: Listener,
    conns: Vec<Conn>,
    /// What a socket read lands in before its pipe.
    buf: Vec<u8>,
    /// The listener's and then each connection's (as `conns` was when the
    /// pass began), for poll(2).
    fds: Vec<libc::pollfd>,
    queues: Queues,
    sync: crate::ingest::sync::SharedSync,
    width: Ns,
    grace: Ns,
}

impl IoThread {
    /// Sleeps in poll(2) until a connection is pending or a socket has
    /// data (not at all when `stopping`).
    fn wait_for_news(&mut self, stopping: bool) {
        use std::os::fd::AsRawFd;
        self.fds.clear();
        self.fds.push(libc::pollfd { fd: self.listener.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        for c in &self.conns {
            // A full pipe is not read: the probe's socket fills up, and
            // the probe counts what it cannot send.
            let events = if c.pipe.buffered() < PIPE_MAX { libc::POLLIN } else { 0 };
            self.fds.push(libc::pollfd { fd: c.sock.as_raw_fd(), events, revents: 0 });
        }
        // The timeout only bounds how late a stop is seen.
        let timeout = if stopping { 0 } else { 100 };
        // SAFETY: `fds` is a valid, initialized array of `fds.len()`
        // pollfd structs that lives across the call.
        let r = unsafe { libc::poll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, timeout) };
        if r < 0 && std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Connections: everything pending, each a Reader on its worker's
    /// queue, its first bytes read; their workers marked in `woken`.
    /// Returns how many were accepted.
    fn accept_pending(&mut self, woken: &mut [bool]) -> usize {
        let workers = self.queues.workers.len();
        let mut accepted = 0;
        while let Some((sock, name)) = self.listener.accept() {
            let _ = sock.set_nonblocking(true);
            let w = (self.listener.accepted() - 1) as usize % workers;
            let pipe = Pipe::default();
            let mut reader = Reader::new(name, Box::new(pipe.clone()), self.width, None).with_sync(self.sync.clone());
            reader.joined_unix_ns = Some(now_unix_ns());
            self.queues.workers[w].readers.lock().unwrap().push(reader);
            let mut c = Conn { sock, pipe, worker: w, open: true, announced: false };
            c.announced = c.read_available(&mut self.buf);
            self.conns.push(c);
            woken[w] = true;
            accepted += 1;
        }
        accepted
    }

    /// Data: every socket poll found readable (or, when `stopping`, every
    /// socket: one last pass); the workers it is news for marked in
    /// `woken`. Closed connections are dropped.
    fn read_ready(&mut self, stopping: bool, woken: &mut [bool]) {
        // (Windows are cut on the hosts' CLOCK_MONOTONIC, this host's for
        // its own probes and for relayed hosts synced to it.)
        let closing = monotonic_ns() % self.width.max(1) <= self.grace;
        for (i, c) in self.conns.iter_mut().enumerate() {
            let ready = self.fds.get(i + 1).is_some_and(|f| f.revents != 0);
            if (ready || stopping) && c.open && c.read_available(&mut self.buf) {
                // (A closed connection's end is news: its windows may
                // close now.)
                if !c.announced || !c.open || stopping || closing || c.pipe.buffered() >= WAKE_BYTES {
                    woken[c.worker] = true;
                    c.announced = true;
                }
            }
        }
        self.conns.retain(|c| c.open);
    }

    fn wake(&self, woken: &[bool]) {
        for (w, q) in woken.iter().zip(&self.queues.workers) {
            if *w {
                q.wake();
            }
        }
    }

    /// Tells the workers the live input is over, and removes a unix socket.
    fn finish(self) {
        self.queues.io_done.store(true, Ordering::SeqCst);
        for q in &self.queues.workers {
            q.wake();
        }
    }
}
