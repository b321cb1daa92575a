//! The I/O thread of `sidecar run` and `watch`: accepts probe connections,
//! reads their sockets into pipes, and wakes the analysis worker a
//! connection belongs to when its bytes are news.

use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::limits::{ConnCounts, Limits, RateLimited};
use super::os_clock::{monotonic_ns, now_unix_ns};
use super::pipe::Pipe;
use super::{Listen, Listener, Queues, Reader, Socket};
use crate::analysis::model::Ns;

/// Bytes a live connection's reader takes per read, at most: about a probe
/// frame (its frame buffer grows to hold a larger one), not a file's 1 MB
/// slice, so that a thousand connections hold little.
const LIVE_READ_SLICE: usize = 64 << 10;

/// How long accepting pauses after it failed.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

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
    /// For messages: "tcp connection #3 from 127.0.0.1:40000".
    name: String,
    accepted_at: Instant,
    /// Set by its reader once a Hello frame was read.
    hello_seen: Arc<AtomicBool>,
    /// Its pipe is at `--max-buffered` (counted once per time it gets there).
    full: bool,
}

impl Conn {
    /// Reads what the socket has (up to a bound per pass, and up to `max`
    /// bytes in the pipe) into the pipe.
    fn read_available(&mut self, buf: &mut [u8], max: usize) -> bool {
        let mut any = false;
        let mut budget: usize = 8 << 20;
        while budget > 0 {
            let room = max.saturating_sub(self.pipe.buffered()).min(buf.len());
            if room == 0 {
                break;
            }
            match self.sock.read(&mut buf[..room]) {
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

    /// Whether it has had `timeout` to send a Hello, has not, and nothing it
    /// sent waits to be read (a worker behind with its reading does not
    /// make a probe late).
    fn missed_hello(&self, timeout: Duration) -> bool {
        !self.hello_seen.load(Ordering::Relaxed) && self.accepted_at.elapsed() >= timeout && self.pipe.buffered() == 0
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
    limits: Limits,
    queues: Queues,
    stop: Arc<AtomicBool>,
    sync: crate::ingest::sync::SharedSync,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let listener = Listener::bind(&listen, "sidecar")?;
    let mut io = IoThread {
        listener,
        conns: Vec::new(),
        buf: vec![0u8; 1 << 20],
        fds: Vec::new(),
        queues,
        sync,
        width,
        grace,
        limits,
        refusals: RateLimited::new("connections refused"),
        silent: RateLimited::new("connections closed without a Hello"),
        paused: RateLimited::new("connections paused at --max-buffered"),
        accept_paused_until: None,
        total_full: false,
    };
    Ok(std::thread::spawn(move || {
        loop {
            let stopping = stop.load(Ordering::Relaxed);
            io.wait_for_news(stopping);
            let mut woken = vec![false; io.queues.workers.len()];
            let accepted = io.accept_pending(&mut woken);
            io.read_ready(stopping, &mut woken);
            io.close_silent(&mut woken);
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
    limits: Limits,
    /// Lines about connections refused, closed without a Hello, and
    /// paused (buffer full).
    refusals: RateLimited,
    silent: RateLimited,
    paused: RateLimited,
    /// Accepting failed (out of file descriptors): not again before then.
    accept_paused_until: Option<Instant>,
    /// All buffers together are at `--max-buffered-total` (counted once
    /// per time they get there).
    total_full: bool,
}

impl IoThread {
    /// Sleeps in poll(2) until a connection is pending or a socket has
    /// data (not at all when `stopping`).
    fn wait_for_news(&mut self, stopping: bool) {
        use std::os::fd::AsRawFd;
        self.fds.clear();
        let accepting = self.accept_paused_until.is_none_or(|t| Instant::now() >= t);
        let events = if accepting { libc::POLLIN } else { 0 };
        self.fds.push(libc::pollfd { fd: self.listener.as_raw_fd(), events, revents: 0 });
        let total = self.buffered_total();
        for c in &self.conns {
            // A full pipe is not read: the probe's socket fills up, and
            // the probe counts what it cannot send. (All of them, at the
            // total.)
            let room = self.limits.room_for(c.pipe.buffered(), total);
            let events = if c.pipe.buffered() < room { libc::POLLIN } else { 0 };
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
    /// queue, its first bytes read; their workers marked in `woken`. Past
    /// `--max-connections` open, a connection is closed at once. Returns
    /// how many were accepted.
    fn accept_pending(&mut self, woken: &mut [bool]) -> usize {
        let workers = self.queues.workers.len();
        let mut accepted = 0;
        while let Some((sock, name)) = self.next_pending() {
            ConnCounts::add(&self.queues.counts.accepted);
            accepted += 1;
            if self.conns.len() >= self.limits.max_connections {
                self.refuse(sock, &name);
                continue;
            }
            let _ = sock.set_nonblocking(true);
            let w = (self.listener.accepted() - 1) as usize % workers;
            let (pipe, hello_seen) = (Pipe::default(), Arc::new(AtomicBool::new(false)));
            let mut reader = Reader::new(name.clone(), Box::new(pipe.clone()), self.width, None)
                .with_sync(self.sync.clone())
                .reading_pipe(pipe.clone(), LIVE_READ_SLICE)
                .on_hello(hello_seen.clone());
            reader.joined_unix_ns = Some(now_unix_ns());
            self.queues.workers[w].readers.lock().unwrap().push(reader);
            let mut c = Conn {
                sock,
                pipe,
                worker: w,
                open: true,
                announced: false,
                name,
                accepted_at: Instant::now(),
                hello_seen,
                full: false,
            };
            let room = self.limits.room_for(0, self.buffered_total());
            c.announced = c.read_available(&mut self.buf, room);
            self.conns.push(c);
            woken[w] = true;
        }
        accepted
    }

    /// Bytes buffered over all connections.
    fn buffered_total(&self) -> usize {
        self.conns.iter().map(|c| c.pipe.buffered()).sum()
    }

    /// The next pending connection. An error other than none pending
    /// (EMFILE: out of file descriptors) is said at a bounded rate and
    /// pauses accepting for a moment: the listener stays readable, and
    /// poll(2) would otherwise wake at once, again and again.
    fn next_pending(&mut self) -> Option<(Socket, String)> {
        if self.accept_paused_until.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        match self.listener.accept() {
            Ok(c) => c,
            Err(e) => {
                self.accept_paused_until = Some(Instant::now() + ACCEPT_PAUSE);
                let open = self.conns.len();
                self.refusals.say(|| {
                    format!("sidecar: error: cannot accept a connection ({open} open): {e}; raise the open files limit (ulimit -n) or lower --max-connections")
                });
                None
            }
        }
    }

    /// Closes a connection past `--max-connections` (dropping the socket
    /// closes it): counted, and said at a bounded rate.
    fn refuse(&mut self, sock: Socket, name: &str) {
        drop(sock);
        ConnCounts::add(&self.queues.counts.refused);
        let max = self.limits.max_connections;
        self.refusals
            .say(|| format!("sidecar: error: {name} refused: {max} connections open already (--max-connections)"));
    }

    /// Data: every socket poll found readable (or, when `stopping`, every
    /// socket: one last pass); the workers it is news for marked in
    /// `woken`. Closed connections, and those whose reader is done (a
    /// decode error ended it), are dropped.
    fn read_ready(&mut self, stopping: bool, woken: &mut [bool]) {
        // (Windows are cut on the hosts' CLOCK_MONOTONIC, this host's for
        // its own probes and for relayed hosts synced to it.)
        let closing = monotonic_ns() % self.width.max(1) <= self.grace;
        let max = self.limits.max_buffered;
        let mut total = self.buffered_total();
        for (i, c) in self.conns.iter_mut().enumerate() {
            let ready = self.fds.get(i + 1).is_some_and(|f| f.revents != 0);
            let own = c.pipe.buffered();
            let room = self.limits.room_for(own, total);
            let read = (ready || stopping) && c.open && c.read_available(&mut self.buf, room);
            total = (total + c.pipe.buffered()).saturating_sub(own);
            if read {
                // (A closed connection's end is news: its windows may
                // close now.)
                if !c.announced || !c.open || stopping || closing || c.pipe.buffered() >= WAKE_BYTES {
                    woken[c.worker] = true;
                    c.announced = true;
                }
            }
            let full = c.pipe.buffered() >= max;
            if full && !c.full {
                ConnCounts::add(&self.queues.counts.buffer_full);
                let name = &c.name;
                self.paused.say(|| {
                    format!("sidecar: {name}: {max} bytes buffered (--max-buffered): not read until its analysis takes some")
                });
                // (Its worker must take them.)
                woken[c.worker] = true;
            }
            c.full = full;
            if c.pipe.reader_gone() {
                c.open = false;
            }
        }
        let total_full = total >= self.limits.max_buffered_total;
        if total_full && !self.total_full {
            ConnCounts::add(&self.queues.counts.total_full);
            let (n, all) = (self.conns.len(), self.limits.max_buffered_total);
            self.paused.say(|| {
                format!(
                    "sidecar: {all} bytes buffered over {n} connections (--max-buffered-total): none read until the \
                     analysis takes some"
                )
            });
            // (Every worker must take some.)
            woken.iter_mut().for_each(|w| *w = true);
        }
        self.total_full = total_full;
        self.conns.retain(|c| c.open);
    }

    /// Closes the connections that sent no Hello within `--hello-timeout`:
    /// said here (at a bounded rate) and counted; their readers see their
    /// end (their workers are woken for it).
    fn close_silent(&mut self, woken: &mut [bool]) {
        let timeout = self.limits.hello_timeout;
        for c in self.conns.iter_mut().filter(|c| c.open && c.missed_hello(timeout)) {
            c.pipe.close(None);
            c.open = false;
            woken[c.worker] = true;
            ConnCounts::add(&self.queues.counts.no_hello);
            let (name, secs) = (&c.name, timeout.as_secs_f64());
            self.silent
                .say(|| format!("sidecar: error: {name} closed: no Hello frame within {secs} s (--hello-timeout)"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn conn(sock: UnixStream, accepted_at: Instant) -> Conn {
        sock.set_nonblocking(true).unwrap();
        Conn {
            sock: Socket::U(sock),
            pipe: Pipe::default(),
            worker: 0,
            open: true,
            announced: false,
            name: "test connection".into(),
            accepted_at,
            hello_seen: Arc::new(AtomicBool::new(false)),
            full: false,
        }
    }

    /// A connection that sends more than `--max-buffered` gets that much
    /// read into its pipe, the rest left in its socket, and more read once
    /// the pipe is drained.
    #[test]
    fn a_connection_buffers_up_to_its_limit() {
        let (mut probe, ours) = UnixStream::pair().unwrap();
        let mut c = conn(ours, Instant::now());
        probe.set_nonblocking(true).unwrap();
        let sent = probe.write(&[7u8; 100_000]).unwrap();
        assert!(sent > 20_000, "the socket took {sent} bytes");
        let mut buf = vec![0u8; 1 << 20];
        assert!(c.read_available(&mut buf, 10_000));
        assert_eq!(c.pipe.buffered(), 10_000);
        assert!(!c.read_available(&mut buf, 10_000), "nothing more at the limit");
        let mut out = vec![0u8; 4_000];
        assert_eq!(c.pipe.read(&mut out).unwrap(), 4_000);
        assert!(c.read_available(&mut buf, 10_000));
        assert_eq!(c.pipe.buffered(), 10_000);
        assert!(c.open);
    }

    /// The Hello deadline: a connection is late once the timeout has passed
    /// without a Hello and what it sent has been read; a Hello, or bytes
    /// still waiting for its worker, spare it.
    #[test]
    fn a_connection_without_a_hello_is_late_once_its_bytes_are_read() {
        let timeout = Duration::from_millis(50);
        let (_probe, ours) = UnixStream::pair().unwrap();
        let old = Instant::now() - Duration::from_secs(1);
        let c = conn(ours, old);
        assert!(c.missed_hello(timeout));
        assert!(!c.missed_hello(Duration::from_secs(5)), "not yet");
        c.pipe.push(b"half a frame");
        assert!(!c.missed_hello(timeout), "its bytes are not read yet");
        let (_probe2, ours2) = UnixStream::pair().unwrap();
        let greeted = conn(ours2, old);
        greeted.hello_seen.store(true, Ordering::Relaxed);
        assert!(!greeted.missed_hello(timeout));
    }

    /// The I/O thread lets go of a connection once its reader is dropped.
    #[test]
    fn a_pipe_knows_when_its_reader_is_gone() {
        let (_probe, ours) = UnixStream::pair().unwrap();
        let c = conn(ours, Instant::now());
        let reader = Reader::new("r".into(), Box::new(c.pipe.clone()), 1_000_000, None);
        assert!(!c.pipe.reader_gone());
        drop(reader);
        assert!(c.pipe.reader_gone());
    }
}
