//! Reading a byte stream's frames ahead of its [`Reader`](super::Reader) on
//! a helper thread: unpacked (checks, decompression) and decoded into
//! batches that the reader only ingests.

use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ringlog::FrameBuffer;

/// What an unpacking thread is handed: the byte stream, and the counter of
/// bytes read that a progress bar shows.
type UnpackInput = (Box<dyn Read + Send>, Option<Arc<AtomicU64>>);

/// A helper thread that reads a byte stream, unpacks its frames (header
/// and payload checks, decompression) and decodes their records into
/// batches for a [`Reader`](super::Reader), which ingests them: together a third of the
/// analysis's instructions on a compressed file, moved off the analysis
/// worker. Faults come in the batches, in order and at the offsets
/// [`FrameBuffer`] and the payload decoder report them, so the reader
/// handles them as its own. Batches go back to the helper to be refilled,
/// and at most [`Unpacker::QUEUE`] wait, so a few MB are in flight.
pub(super) struct Unpacker {
    pub(super) rx: std::sync::mpsc::Receiver<Batch>,
    pub(super) back: std::sync::mpsc::Sender<Batch>,
}

#[derive(Default)]
pub(super) struct Batch {
    /// The records of the batch's Records frames, one after another.
    pub(super) records: Vec<ringlog::Record>,
    pub(super) frames: Vec<Unpacked>,
    /// The byte stream ended after these frames.
    pub(super) end: Option<End>,
}

pub(super) enum Unpacked {
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

pub(super) struct End {
    pub(super) read_error: Option<std::io::Error>,
    /// A partial frame left over (truncation), or a fault that ended the
    /// framing (reported already among the frames).
    pub(super) framing: Result<(), ringlog::StreamError>,
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
    pub(super) fn spawn() -> Option<impl FnOnce(UnpackInput) -> Unpacker> {
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
