//! Writing that never stalls the analysis: a writer whose bytes a thread of
//! its own writes, through a bounded queue. When the queue is full (nobody
//! reads the terminal or standard error, a pipe stopped), what does not fit
//! is dropped and counted, and the count is said at the end
//! ([`finish_stderr`]). Standard error (the `say!` lines, and the window
//! lines when the JSON goes to standard output) is one such writer.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Writes queued at most before more are dropped.
pub const QUEUED: usize = 4096;

/// What the writing thread and the writers share.
#[derive(Default)]
struct State {
    /// Writes queued and not yet written.
    pending: AtomicUsize,
    /// Writes dropped (the queue was full).
    dropped: AtomicU64,
    /// The first write error (a closed pipe stays `BrokenPipe`).
    error: Mutex<Option<std::io::Error>>,
}

/// A writer that queues its lines for a thread to write; never blocks.
/// (Writes are gathered into whole lines, so that what is dropped is a
/// line, never part of one.)
pub struct Detached {
    tx: SyncSender<Vec<u8>>,
    state: Arc<State>,
    /// Bytes written since the last newline.
    line: Vec<u8>,
}

impl Clone for Detached {
    fn clone(&self) -> Detached {
        Detached { tx: self.tx.clone(), state: self.state.clone(), line: Vec::new() }
    }
}

impl Detached {
    /// `out`, written on a thread named `name` through a queue of `queued`
    /// writes.
    pub fn new(name: &str, queued: usize, mut out: impl Write + Send + 'static) -> std::io::Result<Detached> {
        let (tx, rx) = sync_channel::<Vec<u8>>(queued);
        let state = Arc::new(State::default());
        let st = state.clone();
        std::thread::Builder::new().name(name.into()).spawn(move || {
            for b in rx {
                let r = out.write_all(&b).and_then(|_| out.flush());
                if let Err(e) = r {
                    st.error.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(e);
                }
                st.pending.fetch_sub(1, Ordering::SeqCst);
            }
        })?;
        Ok(Detached { tx, state, line: Vec::new() })
    }

    /// Queues `b` (dropped and counted if the queue is full); `Err`: the
    /// first error the thread met writing earlier bytes.
    pub fn send(&self, b: Vec<u8>) -> std::io::Result<()> {
        if let Some(e) = self.state.error.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(e);
        }
        self.state.pending.fetch_add(1, Ordering::SeqCst);
        match self.tx.try_send(b) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.state.pending.fetch_sub(1, Ordering::SeqCst);
                self.state.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Waits until every queued write is written, or `timeout`: whether
    /// all were.
    pub fn drain(&self, timeout: Duration) -> bool {
        let t0 = Instant::now();
        while self.state.pending.load(Ordering::SeqCst) > 0 {
            if t0.elapsed() >= timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    /// Writes dropped so far.
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
    }
}

impl Write for Detached {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(b);
        if let Some(end) = self.line.iter().rposition(|&c| c == b'\n') {
            let rest = self.line.split_off(end + 1);
            let lines = std::mem::replace(&mut self.line, rest);
            self.send(lines)?;
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if !self.line.is_empty() {
            let part = std::mem::take(&mut self.line);
            self.send(part)?;
        }
        Ok(())
    }
}

/// Standard error, detached (None: its thread could not start; then lines
/// are written directly).
fn stderr_writer() -> Option<&'static Detached> {
    static STDERR: OnceLock<Option<Detached>> = OnceLock::new();
    STDERR.get_or_init(|| Detached::new("sidecar-stderr", QUEUED, std::io::stderr()).ok()).as_ref()
}

/// A writer to standard error that never blocks (for the window lines when
/// they go there).
pub fn stderr() -> Box<dyn Write + Send> {
    match stderr_writer() {
        Some(d) => Box::new(d.clone()),
        None => Box::new(std::io::stderr()),
    }
}

/// One line to standard error (the `say!` macro's); never blocks, never
/// panics.
pub fn say_line(line: String) {
    let mut b = line.into_bytes();
    b.push(b'\n');
    match stderr_writer() {
        Some(d) => {
            let _ = d.send(b);
        }
        None => {
            let _ = std::io::stderr().write_all(&b);
        }
    }
}

/// At the end of a run: waits up to `timeout` for standard error's queued
/// lines to be written, and says how many were dropped (if any). The lines
/// dropped so far.
pub fn finish_stderr(timeout: Duration) -> u64 {
    let Some(d) = stderr_writer() else { return 0 };
    d.drain(timeout);
    let dropped = d.dropped();
    if dropped > 0 {
        say_line(format!(
            "sidecar: {dropped} writes to standard error were dropped (nobody read it fast enough; it never stalls the \
             analysis)"
        ));
        d.drain(timeout);
    }
    dropped
}

/// Ends the process with `code`, standard error's queued lines written
/// first (waited for up to `wait`).
pub fn exit(code: i32, wait: Duration) -> ! {
    finish_stderr(wait);
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::Receiver;

    /// A writer that blocks until told: a reader that does not read.
    struct Stuck(Receiver<()>, Arc<Mutex<Vec<u8>>>);
    impl Write for Stuck {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let _ = self.0.recv();
            self.1.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_output_drops_and_counts_instead_of_blocking() {
        let (go, wait) = sync_channel(0);
        let got = Arc::new(Mutex::new(Vec::new()));
        let mut d = Detached::new("test-detached", 4, Stuck(wait, got.clone())).unwrap();
        let t0 = Instant::now();
        for i in 0..100 {
            writeln!(d, "line {i}").unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "never blocks");
        // One taken by the thread (stuck in its write), 4 queued, 95 dropped.
        assert!(d.dropped() >= 95 && d.dropped() <= 96, "{}", d.dropped());
        drop(go);
        assert!(d.drain(Duration::from_secs(5)));
        let text = String::from_utf8(got.lock().unwrap().clone()).unwrap();
        assert!(text.starts_with("line 0\n"), "{text}");
    }

    #[test]
    fn a_write_error_is_returned_by_the_next_write() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut d = Detached::new("test-closed", 4, Closed).unwrap();
        d.write_all(b"a\n").unwrap();
        assert!(d.drain(Duration::from_secs(5)));
        assert_eq!(d.write_all(b"b\n").unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
    }
}
