//! Reading frames back from bytes: from any `Read` (files, sockets), or fed
//! incrementally (live connections).

use std::io::Read;

use crate::frame::{
    decode_frame_with, parse_header, unpack_frame, Frame, FrameHeader, Payload, StreamId, HEADER_LEN, MAX_PAYLOAD,
};
use crate::DecodeError;

/// A decode error with the byte offset of the frame it concerns.
#[derive(Debug)]
pub struct StreamError {
    pub offset: u64,
    pub error: DecodeError,
    /// The stream whose frame it was, when the fault lies in a payload
    /// behind a sound header (checked by its own checksum): the frame's
    /// extent is known, so a [`FrameBuffer`] has moved past it and the
    /// byte stream's other streams can go on. `None`: the framing itself
    /// is lost (bad header, truncation) and nothing after it can be read.
    pub stream: Option<StreamId>,
}

impl StreamError {
    /// An error after which the byte stream cannot be read further.
    pub fn fatal(offset: u64, error: DecodeError) -> StreamError {
        StreamError { offset, error, stream: None }
    }
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.stream {
            Some(s) => write!(f, "at byte {} ({}): {}", self.offset, s, self.error),
            None => write!(f, "at byte {}: {}", self.offset, self.error),
        }
    }
}

impl std::error::Error for StreamError {}

/// Accumulates bytes from a live connection and hands out whole frames.
///
/// Fed one chunk at a time with `next_frame` called until it returns
/// `Ok(None)`, its buffer never holds more than one frame's worth of
/// unparsed bytes plus one chunk, since every frame's length is checked
/// against `MAX_PAYLOAD` before waiting for the rest.
#[derive(Default)]
pub struct FrameBuffer {
    /// `buf[start..end]` is held; `buf` past `end` is room already
    /// initialized, so reads can go straight into it.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    offset: u64,
    failed: bool,
}

impl FrameBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes. Ignored once the stream has failed. The caller is
    /// expected to take frames (`next_frame`) between feeds: the buffer
    /// holds what it is fed until a whole frame can be taken.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.failed {
            return;
        }
        self.room(bytes.len()).copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Reads once from `r`, at most `max` bytes, straight into the buffer
    /// ([`FrameBuffer::feed`] without the copy through a caller's chunk);
    /// the bytes read (0: end of input). Once the stream has failed the
    /// bytes are read and dropped, as `feed` drops them.
    pub fn read_from(&mut self, r: &mut impl Read, max: usize) -> std::io::Result<usize> {
        let n = r.read(self.room(max))?;
        if !self.failed {
            self.end += n;
        }
        Ok(n)
    }

    /// `n` bytes of room after what is held: the held bytes move to the
    /// front once the taken ones are half the buffer.
    fn room(&mut self, n: usize) -> &mut [u8] {
        if self.start > 0 && self.start * 2 >= self.end {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() < self.end + n {
            self.buf.resize(self.end + n, 0);
        }
        &mut self.buf[self.end..self.end + n]
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed.
    ///
    /// A frame whose header is sound but whose payload is not (checksum,
    /// decompression, records) is an error naming its stream
    /// ([`StreamError::stream`]); the buffer moves past that frame and the
    /// next call goes on with the next one (the caller decides whether the
    /// rest of that stream is still worth anything). After any other error
    /// the buffer stays failed: the framing cannot be trusted further.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, StreamError> {
        let offset = self.offset;
        let got = self.next_frame_with(|header, payload, _| {
            payload.into_body().map(|body| Frame { header, body }).map_err(|error| StreamError {
                offset,
                error,
                stream: Some(header.stream),
            })
        })?;
        // (After a fault in the records the frame has been passed over: the
        // next call reads on.)
        got.transpose()
    }

    /// [`FrameBuffer::next_frame`] for a reader that consumes a Records
    /// frame's records at once, through [`decode_frame_with`]: `visit` gets
    /// the header, the payload and the frame's length in bytes. Faults
    /// found before `visit` runs are handled as in `next_frame`; a fault in
    /// the records is `visit`'s to collect ([`RecordDecoder::finish`]),
    /// and the buffer has moved past the frame either way.
    ///
    /// [`RecordDecoder::finish`]: crate::RecordDecoder::finish
    pub fn next_frame_with<R>(
        &mut self,
        visit: impl FnOnce(FrameHeader, Payload<'_>, u64) -> R,
    ) -> Result<Option<R>, StreamError> {
        if self.failed {
            return Err(StreamError::fatal(self.offset, DecodeError::AfterError));
        }
        let have = &self.buf[self.start..self.end];
        let got = decode_frame_with(have, |header, payload| {
            visit(header, payload, HEADER_LEN as u64 + header.payload_len as u64)
        });
        self.took(got)
    }

    /// [`FrameBuffer::next_frame_with`] for a reader that decodes the
    /// records on another thread: the next whole frame's header and length
    /// in bytes, its payload appended to `out` decompressed (see
    /// [`unpack_frame`]; decode it with [`visit_unpacked`]). Faults are
    /// handled as in `next_frame`.
    ///
    /// [`visit_unpacked`]: crate::visit_unpacked
    pub fn next_unpacked(&mut self, out: &mut Vec<u8>) -> Result<Option<(FrameHeader, u64)>, StreamError> {
        if self.failed {
            return Err(StreamError::fatal(self.offset, DecodeError::AfterError));
        }
        let got =
            unpack_frame(&self.buf[self.start..self.end], out).map(|f| f.map(|(h, used)| ((h, used as u64), used)));
        self.took(got)
    }

    /// Moves past what a decode of the held bytes took. A payload fault
    /// behind a sound header (the decoders check the header first, and the
    /// payload only once all of it is here) skips the frame and names its
    /// stream; any other fault fails the buffer.
    fn took<R>(&mut self, got: Result<Option<(R, usize)>, DecodeError>) -> Result<Option<R>, StreamError> {
        let offset = self.offset;
        match got {
            Ok(Some((r, used))) => {
                self.start += used;
                self.offset += used as u64;
                Ok(Some(r))
            }
            Ok(None) => Ok(None),
            Err(error) => {
                let have = &self.buf[self.start..self.end];
                let sound = have.get(..HEADER_LEN).and_then(|b| parse_header(b).ok()).map(|(h, _)| h);
                match sound {
                    Some(h) if have.len() >= HEADER_LEN + h.payload_len as usize => {
                        let total = HEADER_LEN + h.payload_len as usize;
                        self.start += total;
                        self.offset += total as u64;
                        Err(StreamError { offset, error, stream: Some(h.stream) })
                    }
                    _ => {
                        self.failed = true;
                        Err(StreamError::fatal(offset, error))
                    }
                }
            }
        }
    }

    /// The next whole frame as its bytes, header checked and payload
    /// checksum verified but not decompressed or decoded: for forwarding a
    /// stream frame by frame without re-encoding it (the relay). `Ok(None)`
    /// when more bytes are needed. Unlike [`FrameBuffer::next_frame`], every
    /// error here fails the buffer, a payload checksum mismatch too: a
    /// forwarder has no stream to drop, only the connection.
    pub fn next_raw(&mut self) -> Result<Option<(FrameHeader, &[u8])>, StreamError> {
        if self.failed {
            return Err(StreamError::fatal(self.offset, DecodeError::AfterError));
        }
        let have = &self.buf[self.start..self.end];
        if have.len() < HEADER_LEN {
            return Ok(None);
        }
        let checked = parse_header(&have[..HEADER_LEN]).and_then(|(h, crc)| {
            let total = HEADER_LEN + h.payload_len as usize;
            if have.len() < total {
                return Ok(None);
            }
            if crc32fast::hash(&have[HEADER_LEN..total]) != crc {
                return Err(DecodeError::PayloadChecksum { kind: h.kind, seq: h.seq });
            }
            Ok(Some((h, total)))
        });
        match checked {
            Ok(Some((h, total))) => {
                let at = self.start;
                self.start += total;
                self.offset += total as u64;
                Ok(Some((h, &self.buf[at..at + total])))
            }
            Ok(None) => Ok(None),
            Err(error) => {
                self.failed = true;
                Err(StreamError::fatal(self.offset, error))
            }
        }
    }

    /// The bytes held that were not taken as frames (after an error: the
    /// rest of the stream as received so far).
    pub fn unparsed(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Bytes held that do not form a whole frame yet.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Byte offset of the next frame from the start of the stream.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Call at end of input: an incomplete frame left over is an error.
    pub fn finish(&self) -> Result<(), StreamError> {
        if self.pending() == 0 || self.failed {
            Ok(())
        } else {
            Err(StreamError::fatal(self.offset, DecodeError::Truncated { have: self.pending() as u64 }))
        }
    }
}

/// Iterates over the frames of a byte stream (a file, a socket). Stops after
/// the first error, which it yields.
pub struct Decoder<R> {
    inner: R,
    frames: FrameBuffer,
    done: bool,
}

/// Bytes a [`Decoder`] reads at a time.
const READ_CHUNK: usize = 1 << 16;

impl<R: Read> Decoder<R> {
    pub fn new(inner: R) -> Self {
        Decoder { inner, frames: FrameBuffer::new(), done: false }
    }

    fn next_inner(&mut self) -> Option<Result<Frame, StreamError>> {
        loop {
            match self.frames.next_frame() {
                Ok(Some(f)) => return Some(Ok(f)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            // Never buffer more than a frame can be long: a reader that keeps
            // sending without a complete frame is cut off by decode_frame's
            // size checks once the header is in.
            debug_assert!(self.frames.pending() <= HEADER_LEN + MAX_PAYLOAD);
            let n = loop {
                match self.frames.read_from(&mut self.inner, READ_CHUNK) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let offset = self.frames.offset();
                        return Some(Err(StreamError::fatal(offset, DecodeError::Io(e.to_string()))));
                    }
                }
            };
            if n == 0 {
                return match self.frames.finish() {
                    Ok(()) => None,
                    Err(e) => Some(Err(e)),
                };
            }
        }
    }
}

impl<R: Read> Iterator for Decoder<R> {
    type Item = Result<Frame, StreamError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.next_inner();
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}
