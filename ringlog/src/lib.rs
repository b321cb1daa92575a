//! The probe's wire: what a worker writes into its ring ([`Record`]), how
//! records travel to a reader ([frames](frame)), and the decoder that reads
//! them back.
//!
//! ```
//! use ringlog::{ClockDomain, Decoder, Encoder, Event, Record, StreamId, Body};
//!
//! let stream = StreamId { host: 1, process: 2, worker: 0 };
//! let recs = [
//!     Record::from_event(100, Event::ScheduleStart { op: 3 }),
//!     Record::from_event(140, Event::MessageSend { channel: 1, to: 1, seq: 0, records: 10 }),
//!     Record::from_event(150, Event::ScheduleStop { op: 3 }),
//! ];
//! let mut bytes = Vec::new();
//! Encoder::new().records(stream, 0, 0, ClockDomain::Tsc, &[&recs], &mut bytes);
//! let frame = Decoder::new(&bytes[..]).next().unwrap().unwrap();
//! assert_eq!(frame.body, Body::Records(recs.to_vec()));
//! ```
//!
//! The byte layout is documented in `FORMAT.md` next to this crate's
//! `Cargo.toml`. [`frame::VERSION`] is bumped on a change that readers of
//! the current version would misread; new frame kinds (ClockSync, Stats) left it
//! at 1, since older readers stop at them with a named error (FORMAT.md,
//! *Version*).

pub mod decode;
pub mod frame;
pub mod host;
pub mod record;
pub mod ring;
pub mod varint;

pub use decode::{Decoder, FrameBuffer, StreamError};
pub use frame::{
    decode_frame, decode_frame_with, parse_header, unpack_frame, visit_unpacked, Body, ClockDomain, ClockExchange,
    ClockSample, ClockSync, Compression, Encoder, EndStats, Frame, FrameHeader, FrameKind, Hello, Meta, Payload,
    ProbeStats, RecordDecoder, StatFigure, StreamId, HEADER_LEN, MAX_PAYLOAD, MAX_RAW, MAX_STAT_FIGURES, PROCESS_WIDE,
    VERSION,
};
pub use host::{host_id, host_id_of, host_name, parse_host_id};
pub use record::{
    Event, Figure, Kind, Mark, Record, MARK_DETACHED, MARK_PUSH_PROGRESS, MARK_SHUTDOWN, MARK_TAG,
    MARK_UNTRACED_PROGRESS,
};

/// Why bytes could not be read as frames. Every variant names the fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    BadMagic {
        found: [u8; 4],
    },
    UnsupportedVersion {
        found: u16,
        supported: u16,
    },
    HeaderChecksum,
    UnknownFrameKind(u8),
    UnknownFlags(u8),
    UnknownClockDomain(u8),
    BadHeader {
        why: &'static str,
    },
    FrameTooLarge {
        len: u64,
        max: u64,
    },
    PayloadChecksum {
        kind: FrameKind,
        seq: u64,
    },
    Decompress(String),
    UnknownRecordKind(u8),
    PayloadTruncated {
        what: &'static str,
    },
    BadPayload {
        what: &'static str,
        why: &'static str,
    },
    InFrame {
        kind: FrameKind,
        seq: u64,
        inner: Box<DecodeError>,
    },
    /// The input ended inside a frame.
    Truncated {
        have: u64,
    },
    Io(String),
    /// A stream that failed once is not read further.
    AfterError,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use DecodeError::*;
        match self {
            BadMagic { found } => write!(f, "not a ringlog frame: magic {found:02x?}, expected \"RLOG\""),
            UnsupportedVersion { found, supported } => {
                write!(f, "unsupported ringlog format version {found} (this reader understands {supported})")
            }
            HeaderChecksum => write!(f, "frame header checksum mismatch (corrupt header)"),
            UnknownFrameKind(k) => write!(f, "unknown frame kind {k}"),
            UnknownFlags(x) => write!(f, "unknown frame flags {x:#04x}"),
            UnknownClockDomain(d) => write!(f, "unknown clock domain {d}"),
            BadHeader { why } => write!(f, "bad frame header: {why}"),
            FrameTooLarge { len, max } => write!(f, "frame of {len} bytes exceeds the maximum of {max}"),
            PayloadChecksum { kind, seq } => write!(f, "payload checksum mismatch in {kind:?} frame #{seq}"),
            Decompress(e) => write!(f, "payload does not decompress: {e}"),
            UnknownRecordKind(k) => write!(f, "unknown record kind {k}"),
            PayloadTruncated { what } => write!(f, "payload ends while reading {what}"),
            BadPayload { what, why } => write!(f, "bad {what}: {why}"),
            InFrame { kind, seq, inner } => write!(f, "in {kind:?} frame #{seq}: {inner}"),
            Truncated { have } => write!(f, "input ends inside a frame ({have} bytes of it present)"),
            Io(e) => write!(f, "read error: {e}"),
            AfterError => write!(f, "stream already failed"),
        }
    }
}

impl std::error::Error for DecodeError {}
