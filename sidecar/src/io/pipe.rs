//! A live connection's bytes between the I/O thread, which reads the socket,
//! and the analysis worker, whose [`Reader`](super::Reader) reads the pipe.

use std::io::{ErrorKind, Read};
use std::sync::{Arc, Mutex};

/// Bytes the I/O thread read off one connection, waiting for its analysis
/// worker. Reading sockets on their own thread keeps the analysis asleep
/// until there is something to analyze (no polling: an idle sidecar costs
/// nothing), and drains the probe's socket promptly even while the analysis
/// is busy, up to `--max-buffered` bytes ([`super::Limits`]).
#[derive(Default)]
struct PipeState {
    data: Vec<u8>,
    start: usize,
    /// The connection ended: `Some(None)` at its end, `Some(Some(e))` on a
    /// read error (reported once, then the end).
    closed: Option<Option<std::io::Error>>,
}

/// A pipe emptied while holding more room than this gives it back: a
/// burst must not pin its high-water mark for the rest of a long
/// connection.
const KEEP_ROOM: usize = 1 << 20;

#[derive(Clone, Default)]
pub(super) struct Pipe(Arc<Mutex<PipeState>>);

impl Pipe {
    pub(super) fn buffered(&self) -> usize {
        let s = self.0.lock().unwrap();
        s.data.len() - s.start
    }

    /// Appends bytes from the socket. The part already read goes first once
    /// it is half the buffer: a reader that keeps up without ever emptying
    /// the pipe must not make it grow for ever.
    pub(super) fn push(&self, bytes: &[u8]) {
        let mut s = self.0.lock().unwrap();
        if s.start > 0 && s.start * 2 >= s.data.len() {
            let read = s.start;
            s.data.drain(..read);
            s.start = 0;
        }
        s.data.extend_from_slice(bytes);
    }

    /// The connection ended: at its end (`None`), or on a read error.
    pub(super) fn close(&self, error: Option<std::io::Error>) {
        self.0.lock().unwrap().closed = Some(error);
    }

    /// Whether the other end (the connection's [`Reader`](super::Reader))
    /// has been dropped: it is done, nothing will read the pipe again.
    pub(super) fn reader_gone(&self) -> bool {
        Arc::strong_count(&self.0) == 1
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
            s.data.shrink_to(KEEP_ROOM);
            s.start = 0;
        }
        Ok(n)
    }
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
}
