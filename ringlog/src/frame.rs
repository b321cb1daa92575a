//! Frames: the unit written to a sink and read back. See `FORMAT.md`.

#[cfg(test)]
use crate::record::Event;
use crate::record::{Kind, Record};
use crate::varint::{self, Reader};
use crate::DecodeError;

pub const MAGIC: [u8; 4] = *b"RLOG";
/// The format version this crate writes and the only one it reads.
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 72;
/// Largest payload (as stored) a reader accepts: bounds every allocation.
pub const MAX_PAYLOAD: usize = 16 << 20;
/// Largest decompressed payload a reader accepts.
pub const MAX_RAW: usize = 64 << 20;
/// Entries reserved up front when decoding a frame, at most: a header's
/// count is not trusted with more before the entries actually decode.
const PREALLOC: usize = 1 << 16;
/// `worker` value for frames that concern the whole process.
pub const PROCESS_WIDE: u32 = u32::MAX;
const FLAG_ZSTD: u8 = 1;
const MAX_NAME: usize = 4096;
const MAX_ADDR: usize = 256;

#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// Process-wide (worker = PROCESS_WIDE): who is writing. Worker-specific:
    /// the stream starts.
    Hello = 1,
    Metadata = 2,
    Clock = 3,
    Records = 4,
    /// The stream (or, process-wide, the process) ended cleanly.
    End = 5,
    /// Process-wide: clock exchanges between this host and a reference host
    /// (written by a relay, not by the probe; see `ClockSync`).
    ClockSync = 6,
    /// Process-wide: the probe's figures about itself, running totals
    /// (see [`ProbeStats`]).
    Stats = 7,
}

impl FrameKind {
    fn from_u8(v: u8) -> Option<FrameKind> {
        Some(match v {
            1 => FrameKind::Hello,
            2 => FrameKind::Metadata,
            3 => FrameKind::Clock,
            4 => FrameKind::Records,
            5 => FrameKind::End,
            6 => FrameKind::ClockSync,
            7 => FrameKind::Stats,
            _ => return None,
        })
    }
}

/// The clock a stream's timestamps are read from.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClockDomain {
    /// Raw time-stamp counter ticks of the host (invariant TSC).
    Tsc = 0,
    /// CLOCK_MONOTONIC nanoseconds of the host.
    MonotonicNs = 1,
}

/// Identifies one stream: one worker of one process on one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId {
    pub host: u64,
    pub process: u32,
    pub worker: u32,
}

impl StreamId {
    pub fn is_process_wide(&self) -> bool {
        self.worker == PROCESS_WIDE
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_process_wide() {
            write!(f, "host {:016x} pid {}", self.host, self.process)
        } else {
            write!(f, "host {:016x} pid {} worker {}", self.host, self.process, self.worker)
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: FrameKind,
    pub compressed: bool,
    pub stream: StreamId,
    /// Sequence number of this frame in its stream, from 0, no gaps.
    pub seq: u64,
    /// Timestamp of the first record (Records frames); 0 otherwise.
    pub first_ts: u64,
    /// Records of this stream lost since the previous frame (full ring or a
    /// failed sink).
    pub lost: u64,
    /// Records (Records frames) or entries (Metadata, Clock).
    pub count: u32,
    pub raw_len: u32,
    pub payload_len: u32,
    pub domain: ClockDomain,
}

/// Who is writing: sent process-wide at the start of every connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub host_name: String,
    pub program: String,
    pub pid: u32,
    /// Workers the engine said it runs (0 = not said).
    pub workers: u32,
    /// Whether the host's TSC is invariant (the domain is then `Tsc`).
    pub invariant_tsc: bool,
    /// The probe's start-up estimate of ticks per second.
    pub ticks_per_sec: u64,
}

/// The clocks of one host read together, as close in time as possible.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSample {
    /// The stream clock (TSC ticks, or CLOCK_MONOTONIC ns where no TSC).
    pub ticks: u64,
    pub monotonic_ns: u64,
    pub realtime_ns: u64,
}

/// One ping-pong between this host (the frame's `host`) and a reference
/// host, all four stamps on the hosts' CLOCK_MONOTONIC in ns. In real time
/// `t1 ≤ t2 ≤ t3 ≤ t4` (causality: the request is received after it is sent,
/// the reply after the request), which is all a reader may assume: nothing
/// about the delays (FreeZer, DESIGN "Clocks").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockExchange {
    /// This host: request sent.
    pub t1: u64,
    /// Reference host: request received.
    pub t2: u64,
    /// Reference host: reply sent.
    pub t3: u64,
    /// This host: reply received.
    pub t4: u64,
}

/// Clock exchanges of this host against `reference_host`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockSync {
    /// Host id of the host that answered (the reference timeline).
    pub reference_host: u64,
    /// Exchanges in the order they were made.
    pub exchanges: Vec<ClockExchange>,
}

/// Bytes of one exchange in a ClockSync payload (four u64).
pub const CLOCK_EXCHANGE_LEN: usize = 32;

/// Slow-path descriptions of what record ids mean.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meta {
    Operator { id: u32, name: String, addr: Vec<u32> },
    Channel { id: u32, src: (u32, u32), dst: (u32, u32) },
    Span { id: u64, name: String },
}

/// Final accounting of a stream, carried by its End frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndStats {
    /// Records the worker produced (published + lost).
    pub produced: u64,
    pub lost: u64,
    /// Schedule pairs elided.
    pub elided: u64,
}

/// One of a probe's figures about itself, as a Stats frame numbers it
/// (FORMAT.md, *Stats*). Every figure is a running total since the probe
/// started, summed over its workers.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatFigure {
    /// Worker streams the probe has had.
    Workers = 1,
    /// Records the workers made (written + lost).
    Produced = 2,
    /// Records that reached the sink.
    Written = 3,
    /// Records lost (a full ring, or a sink that failed).
    Lost = 4,
    /// Inactive schedule pairs elided at the source.
    Elided = 5,
    /// Worker-local message halves counted, not written.
    LocalMessages = 6,
    /// Bytes of frames that reached the sink (before this frame).
    Bytes = 7,
    /// CPU time of the probe's writer thread, ns.
    WriterCpuNs = 8,
    /// Time in the engine adapter's own code, ns (measured); absent
    /// without an adapter.
    AdapterNs = 9,
    /// Events the engine logged for the adapter.
    EngineEvents = 10,
    /// The engine's own cost of logging them, flushes included, ns (an
    /// estimate, a floor).
    EngineLogNs = 11,
    /// Flush calls of the adapter's logs, and their part of EngineLogNs.
    EngineFlushes = 12,
    EngineFlushNs = 13,
    /// The parts of EngineFlushes, EngineFlushNs and AdapterNs spent in
    /// worker steps that did nothing (an idle worker polling).
    IdleFlushes = 14,
    IdleEngineNs = 15,
    IdleAdapterNs = 16,
}

impl StatFigure {
    pub const ALL: [StatFigure; 16] = [
        StatFigure::Workers,
        StatFigure::Produced,
        StatFigure::Written,
        StatFigure::Lost,
        StatFigure::Elided,
        StatFigure::LocalMessages,
        StatFigure::Bytes,
        StatFigure::WriterCpuNs,
        StatFigure::AdapterNs,
        StatFigure::EngineEvents,
        StatFigure::EngineLogNs,
        StatFigure::EngineFlushes,
        StatFigure::EngineFlushNs,
        StatFigure::IdleFlushes,
        StatFigure::IdleEngineNs,
        StatFigure::IdleAdapterNs,
    ];
}

/// Figures in one Stats frame, at most: bounds what a reader holds for one.
pub const MAX_STAT_FIGURES: usize = 256;

/// A probe's figures about itself (a Stats frame): what it produced, wrote,
/// lost and elided, the bytes it wrote, its writer thread's CPU, and what
/// the engine adapter and the engine's own logging cost, as running totals
/// since the probe started. The probe sends one about once a second and a
/// last one at shutdown, so a reader learns what tracing cost without the
/// traced program printing anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeStats {
    /// Sent at shutdown: the figures are final.
    pub last: bool,
    /// (figure number, value), numbers strictly increasing from 1. A figure
    /// the probe does not know (no adapter: no adapter figures) is absent;
    /// a reader skips numbers it does not know (a newer probe's figures).
    pub figures: Vec<(u32, u64)>,
}

impl ProbeStats {
    /// The value of `f`, if the probe sent it.
    pub fn get(&self, f: StatFigure) -> Option<u64> {
        let id = f as u32;
        self.figures.binary_search_by_key(&id, |&(i, _)| i).ok().map(|at| self.figures[at].1)
    }

    /// Sets `f` to `value`, keeping the numbers in order.
    pub fn set(&mut self, f: StatFigure, value: u64) {
        let id = f as u32;
        match self.figures.binary_search_by_key(&id, |&(i, _)| i) {
            Ok(at) => self.figures[at].1 = value,
            Err(at) => self.figures.insert(at, (id, value)),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Hello(Hello),
    Metadata(Vec<Meta>),
    Clock(Vec<ClockSample>),
    Records(Vec<Record>),
    End(EndStats),
    ClockSync(ClockSync),
    Stats(ProbeStats),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub header: FrameHeader,
    pub body: Body,
}

/// Writes frames into a byte buffer. Holds a zstd context so that encoding
/// many frames does not allocate one per frame.
pub struct Encoder {
    zstd: zstd::bulk::Compressor<'static>,
    raw: Vec<u8>,
    /// Records are encoded here first (see [`Encoder::records`]).
    scratch: Vec<u8>,
    packed: Vec<u8>,
    compress_records: bool,
}

/// Whether Records frames are compressed (the frame header's flag says
/// which, so readers need no setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Compression {
    /// zstd at [`ZSTD_LEVEL`]: about 2.5 bytes per record. For files and
    /// networks, where bytes cost.
    #[default]
    Zstd,
    /// Varints only: about 6.6 bytes per record, at 2.6× less writer CPU
    /// per record (`writer_throughput`), and the reader skips
    /// decompression. For a sidecar on the same machine, where the bytes
    /// only cross memory and the CPU is the engine's.
    None,
}

impl Compression {
    /// The name `PROBE_COMPRESS` and the probe's stats use.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Zstd => "zstd",
            Compression::None => "none",
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Compression, String> {
        [Compression::Zstd, Compression::None]
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown compression {s:?}: expected zstd or none"))
    }
}

/// The zstd level frames are compressed at. A negative ("fast") level:
/// measured with `writer_throughput`, level -3 costs the writer 0.62× the
/// CPU per record of level 1 (49 vs 31 M records per writer-CPU second) for
/// 2.3 instead of 1.5 bytes per record (0.76 per engine event), and
/// decompresses faster in the sidecar; the probe's cost on the engine's
/// machine matters more than a byte per record on the wire.
pub const ZSTD_LEVEL: i32 = -3;

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    pub fn new() -> Self {
        let zstd = zstd::bulk::Compressor::new(ZSTD_LEVEL).expect("zstd context");
        Encoder {
            zstd,
            raw: Vec::with_capacity(1 << 16),
            scratch: Vec::new(),
            packed: Vec::with_capacity(1 << 16),
            compress_records: true,
        }
    }

    /// Sets how Records frames are compressed (default zstd).
    pub fn set_compression(&mut self, c: Compression) {
        self.compress_records = c == Compression::Zstd;
    }

    /// Appends a Records frame holding `parts` (in order) to `out`; returns
    /// the number of records written. At most `u32::MAX` records and
    /// `MAX_RAW` encoded bytes go into one frame: callers split larger runs
    /// (the probe's writer drains in bounded batches).
    pub fn records(
        &mut self,
        stream: StreamId,
        seq: u64,
        lost: u64,
        domain: ClockDomain,
        parts: &[&[Record]],
        out: &mut Vec<u8>,
    ) -> usize {
        let first_ts = parts.iter().find_map(|p| p.first()).map_or(0, |r| r.ts);
        let mut prev = first_ts;
        let n: usize = parts.iter().map(|p| p.len()).sum();
        // Encoded by index into a scratch buffer with room for the longest
        // encodings of a chunk of records (no capacity check per byte; zeroed
        // once, 144 KiB), each chunk copied out at once.
        const CHUNK: usize = 4096;
        if self.scratch.len() < CHUNK * MAX_RECORD_BYTES {
            self.scratch.resize(CHUNK * MAX_RECORD_BYTES, 0);
        }
        self.raw.clear();
        let mut at = 0;
        let mut in_chunk = 0;
        for r in parts.iter().flat_map(|p| p.iter()) {
            encode_record(&mut self.scratch, &mut at, r, prev);
            prev = r.ts;
            in_chunk += 1;
            if in_chunk == CHUNK {
                self.raw.extend_from_slice(&self.scratch[..at]);
                (at, in_chunk) = (0, 0);
            }
        }
        self.raw.extend_from_slice(&self.scratch[..at]);
        let header = FrameHeader {
            kind: FrameKind::Records,
            compressed: true,
            stream,
            seq,
            first_ts,
            lost,
            count: n as u32,
            raw_len: 0,
            payload_len: 0,
            domain,
        };
        self.finish(header, self.compress_records, out);
        n
    }

    pub fn hello(&mut self, stream: StreamId, seq: u64, domain: ClockDomain, h: &Hello, out: &mut Vec<u8>) {
        self.raw.clear();
        // Cut as metadata names are: a reader refuses longer ones, and with
        // them the whole stream.
        varint::put_bytes(&mut self.raw, truncate_utf8(&h.host_name, MAX_NAME).as_bytes());
        varint::put_bytes(&mut self.raw, truncate_utf8(&h.program, MAX_NAME).as_bytes());
        varint::put_u64(&mut self.raw, h.pid as u64);
        varint::put_u64(&mut self.raw, h.workers as u64);
        self.raw.push(h.invariant_tsc as u8);
        varint::put_u64(&mut self.raw, h.ticks_per_sec);
        self.finish(plain_header(FrameKind::Hello, stream, seq, 0, 0, domain), false, out);
    }

    pub fn metadata(&mut self, stream: StreamId, seq: u64, domain: ClockDomain, entries: &[Meta], out: &mut Vec<u8>) {
        self.raw.clear();
        for m in entries {
            match m {
                Meta::Operator { id, name, addr } => {
                    self.raw.push(1);
                    varint::put_u64(&mut self.raw, *id as u64);
                    varint::put_bytes(&mut self.raw, truncate_utf8(name, MAX_NAME).as_bytes());
                    let addr = &addr[..addr.len().min(MAX_ADDR)];
                    varint::put_u64(&mut self.raw, addr.len() as u64);
                    for a in addr {
                        varint::put_u64(&mut self.raw, *a as u64);
                    }
                }
                Meta::Channel { id, src, dst } => {
                    self.raw.push(2);
                    for v in [*id, src.0, src.1, dst.0, dst.1] {
                        varint::put_u64(&mut self.raw, v as u64);
                    }
                }
                Meta::Span { id, name } => {
                    self.raw.push(3);
                    varint::put_u64(&mut self.raw, *id);
                    varint::put_bytes(&mut self.raw, truncate_utf8(name, MAX_NAME).as_bytes());
                }
            }
        }
        let h = plain_header(FrameKind::Metadata, stream, seq, entries.len() as u32, 0, domain);
        self.finish(h, true, out);
    }

    pub fn clock(
        &mut self,
        stream: StreamId,
        seq: u64,
        domain: ClockDomain,
        samples: &[ClockSample],
        out: &mut Vec<u8>,
    ) {
        self.raw.clear();
        for s in samples {
            for v in [s.ticks, s.monotonic_ns, s.realtime_ns] {
                self.raw.extend_from_slice(&v.to_le_bytes());
            }
        }
        let h = plain_header(FrameKind::Clock, stream, seq, samples.len() as u32, 0, domain);
        self.finish(h, false, out);
    }

    pub fn end(&mut self, stream: StreamId, seq: u64, lost: u64, domain: ClockDomain, s: &EndStats, out: &mut Vec<u8>) {
        self.raw.clear();
        for v in [s.produced, s.lost, s.elided] {
            varint::put_u64(&mut self.raw, v);
        }
        self.finish(plain_header(FrameKind::End, stream, seq, 0, lost, domain), false, out);
    }

    /// A process-wide ClockSync frame (uncompressed: 8 + 32 bytes per
    /// exchange). At most `u32::MAX` exchanges and `MAX_PAYLOAD` bytes:
    /// callers send a few at a time.
    pub fn clock_sync(&mut self, stream: StreamId, seq: u64, cs: &ClockSync, out: &mut Vec<u8>) {
        self.raw.clear();
        self.raw.extend_from_slice(&cs.reference_host.to_le_bytes());
        for x in &cs.exchanges {
            for v in [x.t1, x.t2, x.t3, x.t4] {
                self.raw.extend_from_slice(&v.to_le_bytes());
            }
        }
        let h = plain_header(FrameKind::ClockSync, stream, seq, cs.exchanges.len() as u32, 0, ClockDomain::MonotonicNs);
        self.finish(h, false, out);
    }

    /// A process-wide Stats frame (uncompressed: a flag byte and two
    /// varints per figure). The figures must be in increasing order of
    /// their numbers, at most [`MAX_STAT_FIGURES`] (a reader refuses
    /// anything else).
    pub fn stats(&mut self, stream: StreamId, seq: u64, domain: ClockDomain, s: &ProbeStats, out: &mut Vec<u8>) {
        debug_assert!(s.figures.windows(2).all(|w| w[0].0 < w[1].0) && s.figures.len() <= MAX_STAT_FIGURES);
        self.raw.clear();
        self.raw.push(s.last as u8);
        for &(id, v) in &s.figures {
            varint::put_u64(&mut self.raw, id as u64);
            varint::put_u64(&mut self.raw, v);
        }
        let h = plain_header(FrameKind::Stats, stream, seq, s.figures.len() as u32, 0, domain);
        self.finish(h, false, out);
    }

    fn finish(&mut self, mut h: FrameHeader, compress: bool, out: &mut Vec<u8>) {
        let payload: &[u8] = if compress && !self.raw.is_empty() {
            self.packed.clear();
            let bound = zstd::zstd_safe::compress_bound(self.raw.len());
            self.packed.reserve(bound);
            match self.zstd.compress_to_buffer(&self.raw, &mut self.packed) {
                Ok(_) => {
                    h.compressed = true;
                    &self.packed
                }
                Err(_) => {
                    h.compressed = false;
                    &self.raw
                }
            }
        } else {
            h.compressed = false;
            &self.raw
        };
        h.raw_len = self.raw.len() as u32;
        h.payload_len = payload.len() as u32;
        write_header(&h, payload, out);
        out.extend_from_slice(payload);
    }
}

fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn plain_header(
    kind: FrameKind,
    stream: StreamId,
    seq: u64,
    count: u32,
    lost: u64,
    domain: ClockDomain,
) -> FrameHeader {
    FrameHeader { kind, compressed: false, stream, seq, first_ts: 0, lost, count, raw_len: 0, payload_len: 0, domain }
}

/// The longest encoding of a record: kind byte, time delta and `a` (ten
/// bytes each as varints), `b`, `c`, `d` (five each).
const MAX_RECORD_BYTES: usize = 1 + 10 + 10 + 3 * 5;

/// Writes `r` at `buf[*at..]` (at least [`MAX_RECORD_BYTES`] long there).
#[inline]
fn encode_record(buf: &mut [u8], at: &mut usize, r: &Record, prev_ts: u64) {
    buf[*at] = r.kind;
    *at += 1;
    varint::put_u64_at(buf, at, varint::zigzag(r.ts.wrapping_sub(prev_ts) as i64));
    // The probe only writes known kinds; an unknown one is kept whole so
    // nothing is silently changed (and the reader rejects it by name).
    let m = match FIELD_MASK[r.kind as usize] {
        NO_KIND => 0xf,
        m => m,
    };
    if m & 1 != 0 {
        varint::put_u64_at(buf, at, r.a);
    }
    if m & 2 != 0 {
        varint::put_u64_at(buf, at, r.b as u64);
    }
    if m & 4 != 0 {
        varint::put_u64_at(buf, at, r.c as u64);
    }
    if m & 8 != 0 {
        varint::put_u64_at(buf, at, r.d as u64);
    }
}

fn write_header(h: &FrameHeader, payload: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.push(h.kind as u8);
    out.push(if h.compressed { FLAG_ZSTD } else { 0 });
    out.extend_from_slice(&h.stream.host.to_le_bytes());
    out.extend_from_slice(&h.stream.process.to_le_bytes());
    out.extend_from_slice(&h.stream.worker.to_le_bytes());
    out.extend_from_slice(&h.seq.to_le_bytes());
    out.extend_from_slice(&h.first_ts.to_le_bytes());
    out.extend_from_slice(&h.lost.to_le_bytes());
    out.extend_from_slice(&h.count.to_le_bytes());
    out.extend_from_slice(&h.raw_len.to_le_bytes());
    out.extend_from_slice(&h.payload_len.to_le_bytes());
    out.push(h.domain as u8);
    out.extend_from_slice(&[0, 0, 0]);
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len() - start, HEADER_LEN);
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Parses and checks a frame header from the first `HEADER_LEN` bytes of `b`.
pub fn parse_header(b: &[u8]) -> Result<(FrameHeader, u32), DecodeError> {
    debug_assert!(b.len() >= HEADER_LEN);
    if b[0..4] != MAGIC {
        return Err(DecodeError::BadMagic { found: b[0..4].try_into().unwrap() });
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion { found: version, supported: VERSION });
    }
    let crc = le_u32(b, 68);
    if crc32fast::hash(&b[..68]) != crc {
        return Err(DecodeError::HeaderChecksum);
    }
    let kind = FrameKind::from_u8(b[6]).ok_or(DecodeError::UnknownFrameKind(b[6]))?;
    if b[7] & !FLAG_ZSTD != 0 {
        return Err(DecodeError::UnknownFlags(b[7]));
    }
    let domain = match b[60] {
        0 => ClockDomain::Tsc,
        1 => ClockDomain::MonotonicNs,
        d => return Err(DecodeError::UnknownClockDomain(d)),
    };
    if b[61..64] != [0, 0, 0] {
        return Err(DecodeError::BadHeader { why: "reserved bytes are not zero" });
    }
    let h = FrameHeader {
        kind,
        compressed: b[7] & FLAG_ZSTD != 0,
        stream: StreamId { host: le_u64(b, 8), process: le_u32(b, 16), worker: le_u32(b, 20) },
        seq: le_u64(b, 24),
        first_ts: le_u64(b, 32),
        lost: le_u64(b, 40),
        count: le_u32(b, 48),
        raw_len: le_u32(b, 52),
        payload_len: le_u32(b, 56),
        domain,
    };
    if h.payload_len as usize > MAX_PAYLOAD {
        return Err(DecodeError::FrameTooLarge { len: h.payload_len as u64, max: MAX_PAYLOAD as u64 });
    }
    if h.raw_len as usize > MAX_RAW {
        return Err(DecodeError::FrameTooLarge { len: h.raw_len as u64, max: MAX_RAW as u64 });
    }
    if !h.compressed && h.raw_len != h.payload_len {
        return Err(DecodeError::BadHeader { why: "uncompressed frame with raw length != payload length" });
    }
    Ok((h, le_u32(b, 64)))
}

/// Tries to decode one frame from the start of `buf`. `Ok(None)` means more
/// bytes are needed; `Ok(Some((frame, used)))` consumed `used` bytes.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Frame, usize)>, DecodeError> {
    let got = decode_frame_with(buf, |header, payload| payload.into_body().map(|body| Frame { header, body }))?;
    got.map(|(frame, used)| frame.map(|f| (f, used))).transpose()
}

/// A frame's payload as [`decode_frame_with`] hands it over: a Records
/// frame's records still to be decoded, any other frame's body decoded.
pub enum Payload<'a> {
    Records(RecordDecoder<'a>),
    Other(Body),
}

impl Payload<'_> {
    /// The whole body, the records (if these are records) all decoded.
    pub fn into_body(self) -> Result<Body, DecodeError> {
        match self {
            Payload::Records(mut recs) => {
                // The count is checked against the payload length, not yet
                // against what decodes: start small, grow with real records.
                let mut out = Vec::with_capacity(recs.left.min(PREALLOC as u32) as usize);
                out.extend(&mut recs);
                recs.finish()?;
                Ok(Body::Records(out))
            }
            Payload::Other(body) => Ok(body),
        }
    }
}

/// [`decode_frame`] for a reader that consumes a Records frame's records at
/// once: `visit` gets the header and the payload, the records decoded as it
/// takes them (no vector of records in between). Everything up to the
/// records (header, checksum, decompression, the record count against the
/// payload) is checked before `visit` runs; faults in the records
/// themselves are `visit`'s to collect, from [`RecordDecoder::finish`].
/// `visit` must not decode frames itself (the decompression buffer is
/// lent to it). `Ok(None)`: more bytes are needed; `Ok(Some((r, used)))`
/// consumed `used` bytes.
pub fn decode_frame_with<R>(
    buf: &[u8],
    visit: impl FnOnce(FrameHeader, Payload<'_>) -> R,
) -> Result<Option<(R, usize)>, DecodeError> {
    let Some((header, payload, total)) = checked_frame(buf)? else { return Ok(None) };
    if header.compressed {
        // One output buffer per thread, reused frame after frame.
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        return SCRATCH.with(|cell| {
            let mut buf = cell.borrow_mut();
            let want = header.raw_len as usize;
            if buf.len() < want {
                buf.resize(want, 0);
            }
            decompress(&header, payload, &mut buf[..want])?;
            let res = visit_payload(header, &buf[..want], visit).map(|r| Some((r, total)));
            if buf.len() > (8 << 20) {
                *buf = Vec::new(); // do not hold a rare huge frame's buffer
            }
            res
        });
    }
    visit_payload(header, payload, visit).map(|r| Some((r, total)))
}

/// The frame at the start of `buf`, checked as [`decode_frame_with`] checks
/// it (header, payload checksum, decompression), with its payload appended
/// to `out`, decompressed: for a reader that unpacks frames on one thread
/// and decodes their records on another ([`visit_unpacked`]). `Ok(None)`:
/// more bytes are needed; `Ok(Some((header, used)))`: the payload is the
/// last `header.raw_len` bytes of `out`, and the frame took `used` bytes of
/// `buf`. On an error `out` is as it was.
pub fn unpack_frame(buf: &[u8], out: &mut Vec<u8>) -> Result<Option<(FrameHeader, usize)>, DecodeError> {
    let Some((header, payload, total)) = checked_frame(buf)? else { return Ok(None) };
    if header.compressed {
        let at = out.len();
        out.resize(at + header.raw_len as usize, 0);
        if let Err(e) = decompress(&header, payload, &mut out[at..]) {
            out.truncate(at);
            return Err(e);
        }
    } else {
        out.extend_from_slice(payload);
    }
    Ok(Some((header, total)))
}

/// Decodes a payload that [`unpack_frame`] unpacked, as [`decode_frame_with`]
/// would have (the same checks, the same `visit`).
pub fn visit_unpacked<R>(
    header: FrameHeader,
    raw: &[u8],
    visit: impl FnOnce(FrameHeader, Payload<'_>) -> R,
) -> Result<R, DecodeError> {
    visit_payload(header, raw, visit)
}

/// A frame with a sound header and payload checksum: its header, its (maybe
/// compressed) payload and its length in bytes.
type Checked<'a> = (FrameHeader, &'a [u8], usize);

/// The frame at the start of `buf`, if whole, checked.
fn checked_frame(buf: &[u8]) -> Result<Option<Checked<'_>>, DecodeError> {
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let (header, payload_crc) = parse_header(&buf[..HEADER_LEN])?;
    let total = HEADER_LEN + header.payload_len as usize;
    if buf.len() < total {
        return Ok(None);
    }
    let payload = &buf[HEADER_LEN..total];
    if crc32fast::hash(payload) != payload_crc {
        return Err(DecodeError::PayloadChecksum { kind: header.kind, seq: header.seq });
    }
    Ok(Some((header, payload, total)))
}

/// Decompresses `payload` into `out`, which must come out exactly full
/// (`out` is `header.raw_len` bytes long).
fn decompress(header: &FrameHeader, payload: &[u8], out: &mut [u8]) -> Result<(), DecodeError> {
    // One decompression context per thread, reused frame after frame (a
    // fresh context per frame cost more than the decompression).
    thread_local! {
        static CONTEXT: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut guard = cell.borrow_mut();
        if guard.is_none() {
            *guard = Some(zstd::bulk::Decompressor::new().map_err(|e| DecodeError::Decompress(e.to_string()))?);
        }
        let d = guard.as_mut().expect("made above");
        let n = d.decompress_to_buffer(payload, out).map_err(|e| DecodeError::Decompress(e.to_string()))?;
        if n != header.raw_len as usize {
            return Err(DecodeError::BadHeader { why: "decompressed length differs from the header" });
        }
        Ok(())
    })
}

fn visit_payload<R>(
    header: FrameHeader,
    raw: &[u8],
    visit: impl FnOnce(FrameHeader, Payload<'_>) -> R,
) -> Result<R, DecodeError> {
    let payload = if header.kind == FrameKind::Records {
        Payload::Records(RecordDecoder::new(&header, raw)?)
    } else {
        Payload::Other(decode_body(&header, raw).map_err(|e| in_frame(&header, e))?)
    };
    Ok(visit(header, payload))
}

/// A payload fault, with the frame it is in.
fn in_frame(header: &FrameHeader, e: DecodeError) -> DecodeError {
    match e {
        DecodeError::PayloadTruncated { .. } | DecodeError::BadPayload { .. } => {
            DecodeError::InFrame { kind: header.kind, seq: header.seq, inner: Box::new(e) }
        }
        e => e,
    }
}

/// The records of a Records frame's payload, decoded as they are taken.
/// Yields the records in order and stops at the first fault;
/// [`RecordDecoder::finish`] then says whether the payload was sound:
/// exactly the header's count of records and nothing after them.
pub struct RecordDecoder<'a> {
    r: Reader<'a>,
    left: u32,
    prev: u64,
    kind: FrameKind,
    seq: u64,
    error: Option<DecodeError>,
}

impl<'a> RecordDecoder<'a> {
    fn new(h: &FrameHeader, raw: &'a [u8]) -> Result<RecordDecoder<'a>, DecodeError> {
        // Every record takes at least three bytes: kind, time delta, and one
        // field (every kind has at least one). This bounds `count`.
        if h.count as usize > raw.len() / 3 {
            return Err(DecodeError::BadHeader { why: "record count larger than the payload can hold" });
        }
        let mut d = RecordDecoder {
            r: Reader::new(raw),
            left: h.count,
            prev: h.first_ts,
            kind: h.kind,
            seq: h.seq,
            error: None,
        };
        // The first record is stamped with the header's time (a zero delta):
        // checked here, so the per-record path does not ask.
        if h.count > 0 {
            if let Ok(first) = record_checked(&mut d.r.clone(), h.first_ts) {
                if first.ts != h.first_ts {
                    d.fail(DecodeError::BadPayload { what: "first record", why: "timestamp differs from the header" });
                }
            }
        }
        Ok(d)
    }

    #[cold]
    fn fail(&mut self, e: DecodeError) {
        self.left = 0;
        self.error = Some(e);
    }

    /// Whether the payload was sound; call once the records are taken.
    /// Records not taken are not checked: an error says so.
    pub fn finish(self) -> Result<(), DecodeError> {
        let e = match self.error {
            Some(e) => e,
            None if self.left > 0 => DecodeError::BadPayload { what: "records", why: "not all taken before finish" },
            None if !self.r.is_empty() => {
                DecodeError::BadPayload { what: "payload", why: "bytes left over after the last entry" }
            }
            None => return Ok(()),
        };
        Err(DecodeError::InFrame { kind: self.kind, seq: self.seq, inner: Box::new(e) })
    }
}

impl Iterator for RecordDecoder<'_> {
    type Item = Record;

    #[inline(always)]
    fn next(&mut self) -> Option<Record> {
        if self.left == 0 {
            return None;
        }
        let at = self.r.pos();
        let rec = match record_fast(&mut self.r, self.prev) {
            Some(rec) => rec,
            // The last few records of a payload (fewer than FAST_WINDOW
            // bytes left) and anything unusual.
            None => {
                self.r.set_pos(at);
                match record_checked(&mut self.r, self.prev) {
                    Ok(rec) => rec,
                    Err(e) => {
                        self.fail(e);
                        return None;
                    }
                }
            }
        };
        self.left -= 1;
        self.prev = rec.ts;
        Some(rec)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// Fields used per record kind byte (bit 0: a, 1: b, 2: c, 3: d); `NO_KIND`
/// for bytes that are not a kind. Built from `Kind::fields` at compile time.
const NO_KIND: u8 = 0xff;
const FIELD_MASK: [u8; 256] = {
    let mut t = [NO_KIND; 256];
    let mut i = 0;
    while i < Kind::ALL.len() {
        let k = Kind::ALL[i];
        let f = k.fields();
        t[k as usize] = f.a as u8 | (f.b as u8) << 1 | (f.c as u8) << 2 | (f.d as u8) << 3;
        i += 1;
    }
    t
};

/// Bytes the fast path parses a record from: a kind byte and five varints
/// of at most 8 bytes fit in 41; every field is read as an 8-byte word, so
/// the last one may start at 33 and end at 41.
const FAST_WINDOW: usize = 48;

/// One record on the fast path: known kind, every varint at most 8 bytes,
/// values in range, [`FAST_WINDOW`] bytes readable. Parsed from one
/// fixed-size window, so no field needs a bounds check of its own (each
/// offset is at most 33 by construction, and clamped so the compiler sees
/// it). `None` on anything else; the caller takes the checked path, which
/// names the fault.
#[inline(always)]
fn record_fast(r: &mut Reader, prev: u64) -> Option<Record> {
    let w: &[u8; FAST_WINDOW] = r.window()?;
    let kind = w[0];
    let m = FIELD_MASK[kind as usize];
    if m == NO_KIND {
        return None;
    }
    let mut at = 1usize;
    let field = |at: &mut usize| -> Option<u64> {
        let (v, n) = varint::short_at(w, (*at).min(FAST_WINDOW - 8))?;
        *at += n;
        Some(v)
    };
    let ts = prev.wrapping_add(varint::unzigzag(field(&mut at)?) as u64);
    let a = if m & 1 != 0 { field(&mut at)? } else { 0 };
    let b = if m & 2 != 0 { u32::try_from(field(&mut at)?).ok()? } else { 0 };
    let c = if m & 4 != 0 { u32::try_from(field(&mut at)?).ok()? } else { 0 };
    let d = if m & 8 != 0 { u32::try_from(field(&mut at)?).ok()? } else { 0 };
    r.skip(at);
    Some(Record { ts, a, b, c, d, kind, _pad: [0; 3] })
}

/// One record on the checked path (the reference decoding).
#[inline(never)]
fn record_checked(r: &mut Reader, prev: u64) -> Result<Record, DecodeError> {
    let kind_byte = r.u8("record kind")?;
    let kind = Kind::from_u8(kind_byte).ok_or(DecodeError::UnknownRecordKind(kind_byte))?;
    let ts = prev.wrapping_add(varint::unzigzag(r.u64("timestamp delta")?) as u64);
    let f = kind.fields();
    let a = if f.a { r.u64("field a")? } else { 0 };
    let b = if f.b { r.u32("field b")? } else { 0 };
    let c = if f.c { r.u32("field c")? } else { 0 };
    let d = if f.d { r.u32("field d")? } else { 0 };
    Ok(Record::new(kind, ts, a, b, c, d))
}

fn decode_body(h: &FrameHeader, raw: &[u8]) -> Result<Body, DecodeError> {
    let mut r = Reader::new(raw);
    let body = match h.kind {
        // (Readers go through `decode_frame_with`, which hands the records
        // over still to be decoded.)
        FrameKind::Records => return Payload::Records(RecordDecoder::new(h, raw)?).into_body(),
        FrameKind::Hello => Body::Hello(Hello {
            host_name: r.string(MAX_NAME, "host name")?,
            program: r.string(MAX_NAME, "program")?,
            pid: r.u32("pid")?,
            workers: r.u32("workers")?,
            invariant_tsc: match r.u8("invariant tsc")? {
                0 => false,
                1 => true,
                _ => return Err(DecodeError::BadPayload { what: "invariant tsc", why: "not 0 or 1" }),
            },
            ticks_per_sec: r.u64("ticks per second")?,
        }),
        FrameKind::Metadata => {
            // Every entry takes at least three bytes (tag, id, a length).
            if h.count as usize > raw.len() / 3 {
                return Err(DecodeError::BadHeader { why: "metadata count larger than the payload can hold" });
            }
            let mut out = Vec::with_capacity((h.count as usize).min(PREALLOC));
            for _ in 0..h.count {
                out.push(match r.u8("metadata tag")? {
                    1 => {
                        let id = r.u32("operator id")?;
                        let name = r.string(MAX_NAME, "operator name")?;
                        let n = r.u64("operator address length")?;
                        if n > MAX_ADDR as u64 {
                            return Err(DecodeError::BadPayload { what: "operator address", why: "longer than 256" });
                        }
                        let mut addr = Vec::with_capacity(n as usize);
                        for _ in 0..n {
                            addr.push(r.u32("operator address")?);
                        }
                        Meta::Operator { id, name, addr }
                    }
                    2 => Meta::Channel {
                        id: r.u32("channel id")?,
                        src: (r.u32("channel source")?, r.u32("channel source port")?),
                        dst: (r.u32("channel target")?, r.u32("channel target port")?),
                    },
                    3 => Meta::Span { id: r.u64("span id")?, name: r.string(MAX_NAME, "span name")? },
                    _ => return Err(DecodeError::BadPayload { what: "metadata tag", why: "unknown tag" }),
                });
            }
            Body::Metadata(out)
        }
        FrameKind::Clock => {
            if h.count as usize * 24 != raw.len() {
                return Err(DecodeError::BadHeader { why: "clock sample count does not match the payload" });
            }
            let mut out = Vec::with_capacity(h.count as usize);
            for _ in 0..h.count {
                out.push(ClockSample {
                    ticks: r.fixed_u64("clock ticks")?,
                    monotonic_ns: r.fixed_u64("monotonic ns")?,
                    realtime_ns: r.fixed_u64("realtime ns")?,
                });
            }
            Body::Clock(out)
        }
        FrameKind::End => {
            Body::End(EndStats { produced: r.u64("produced")?, lost: r.u64("lost")?, elided: r.u64("elided")? })
        }
        FrameKind::ClockSync => {
            // Checked before anything is allocated: the payload is exactly the
            // reference host and `count` fixed-size exchanges.
            if raw.len() < 8 || !(raw.len() - 8).is_multiple_of(CLOCK_EXCHANGE_LEN) {
                return Err(DecodeError::BadHeader { why: "clock sync payload is not 8 + 32 bytes per exchange" });
            }
            if h.count as usize != (raw.len() - 8) / CLOCK_EXCHANGE_LEN {
                return Err(DecodeError::BadHeader { why: "clock exchange count does not match the payload" });
            }
            if h.stream.worker != PROCESS_WIDE {
                return Err(DecodeError::BadHeader { why: "clock sync frame is not process-wide" });
            }
            if h.domain != ClockDomain::MonotonicNs {
                return Err(DecodeError::BadHeader { why: "clock sync frame not in the CLOCK_MONOTONIC domain" });
            }
            let reference_host = r.fixed_u64("reference host")?;
            let mut exchanges = Vec::with_capacity(h.count as usize);
            for _ in 0..h.count {
                let x = ClockExchange {
                    t1: r.fixed_u64("exchange t1")?,
                    t2: r.fixed_u64("exchange t2")?,
                    t3: r.fixed_u64("exchange t3")?,
                    t4: r.fixed_u64("exchange t4")?,
                };
                // Each host's clock is monotonic: anything else is corrupt.
                if x.t4 < x.t1 {
                    return Err(DecodeError::BadPayload {
                        what: "clock exchange",
                        why: "reply received before sent (t4 < t1)",
                    });
                }
                if x.t3 < x.t2 {
                    return Err(DecodeError::BadPayload {
                        what: "clock exchange",
                        why: "reply sent before request received (t3 < t2)",
                    });
                }
                exchanges.push(x);
            }
            Body::ClockSync(ClockSync { reference_host, exchanges })
        }
        FrameKind::Stats => Body::Stats(decode_stats(h, &mut r)?),
    };
    if !r.is_empty() {
        return Err(DecodeError::BadPayload { what: "payload", why: "bytes left over after the last entry" });
    }
    Ok(body)
}

/// A Stats frame's payload: process-wide, at most [`MAX_STAT_FIGURES`]
/// figures (checked against the payload before anything is allocated),
/// numbered in strictly increasing order from 1.
fn decode_stats(h: &FrameHeader, r: &mut Reader) -> Result<ProbeStats, DecodeError> {
    if h.stream.worker != PROCESS_WIDE {
        return Err(DecodeError::BadHeader { why: "stats frame is not process-wide" });
    }
    if h.count as usize > MAX_STAT_FIGURES {
        return Err(DecodeError::BadHeader { why: "more figures than a stats frame holds (256)" });
    }
    let last = match r.u8("stats flag")? {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::BadPayload { what: "stats flag", why: "not 0 or 1" }),
    };
    // Every figure takes at least two bytes (its number, its value).
    if h.count as usize > r.remaining() / 2 {
        return Err(DecodeError::BadHeader { why: "stats figure count larger than the payload can hold" });
    }
    let mut figures = Vec::with_capacity(h.count as usize);
    let mut prev = 0u32;
    for _ in 0..h.count {
        let id = r.u32("stats figure number")?;
        if id <= prev {
            return Err(DecodeError::BadPayload {
                what: "stats figure number",
                why: "not in strictly increasing order from 1",
            });
        }
        prev = id;
        figures.push((id, r.u64("stats figure value")?));
    }
    Ok(ProbeStats { last, figures })
}

#[cfg(test)]
mod fast_path_tests {
    use super::*;

    #[test]
    fn field_mask_mirrors_kind_fields() {
        for v in 0..=255u8 {
            match Kind::from_u8(v) {
                Some(k) => {
                    let f = k.fields();
                    let m = f.a as u8 | (f.b as u8) << 1 | (f.c as u8) << 2 | (f.d as u8) << 3;
                    assert_eq!(FIELD_MASK[v as usize], m, "kind {v}");
                }
                None => assert_eq!(FIELD_MASK[v as usize], NO_KIND),
            }
        }
    }

    #[test]
    fn fast_and_checked_paths_agree_on_long_and_odd_values() {
        // (also covered for random values by `records_of_any_field_lengths_round_trip`)
        let recs = vec![
            Record::from_event(
                u64::MAX - 5,
                Event::MessageSend { channel: u32::MAX, to: 1 << 28, seq: u64::MAX, records: 0 },
            ),
            Record::from_event(3, Event::Step { elided: 1 << 56, spin_ticks: u64::MAX }),
            Record::from_event(1 << 40, Event::ProgressRecv { channel: 0, from: 127, seq: 128 }),
            Record::from_event(1 << 40, Event::Unpark),
            Record::from_event(7, Event::SpanStart { id: (1 << 49) - 1 }),
        ];
        let mut bytes = Vec::new();
        let s = StreamId { host: 1, process: 2, worker: 3 };
        Encoder::new().records(s, 0, 0, ClockDomain::Tsc, &[&recs], &mut bytes);
        let (f, _) = decode_frame(&bytes).unwrap().unwrap();
        assert_eq!(f.body, Body::Records(recs));
    }

    #[test]
    fn frames_longer_than_one_encoding_chunk_round_trip() {
        // 10,000 records: two full 4,096-record chunks and a partial one,
        // long values at the chunk borders; then the encoder reused for a
        // short frame.
        let recs: Vec<Record> = (0..10_000u64)
            .map(|i| {
                let big = i % 4096 >= 4094 || i % 4096 == 0;
                let seq = if big { u64::MAX - i } else { i };
                Record::from_event(i * 1000, Event::MessageSend { channel: 3, to: (i % 7) as u32, seq, records: 9 })
            })
            .collect();
        let s = StreamId { host: 1, process: 2, worker: 3 };
        let mut enc = Encoder::new();
        for (i, part) in [&recs[..], &recs[..3]].into_iter().enumerate() {
            let mut bytes = Vec::new();
            assert_eq!(enc.records(s, i as u64, 0, ClockDomain::Tsc, &[part], &mut bytes), part.len());
            let (f, used) = decode_frame(&bytes).unwrap().unwrap();
            assert_eq!(used, bytes.len());
            assert_eq!(f.body, Body::Records(part.to_vec()));
        }
    }

    proptest::proptest! {
        /// Records whose fields take every varint length, in frames long
        /// enough for the fast path and ending in its tail: decoding gives
        /// back exactly what was encoded.
        #[test]
        fn records_of_any_field_lengths_round_trip(
            raw in proptest::collection::vec(
                (0u8..13, proptest::prelude::any::<[u64; 5]>(), proptest::prelude::any::<[u8; 5]>()),
                1..200,
            )
        ) {
            let mut ts = 0u64;
            let recs: Vec<Record> = raw
                .iter()
                .map(|&(k, v, sh)| {
                    let f = |i: usize| v[i] >> (sh[i] % 64);
                    ts = ts.wrapping_add(f(0) >> 8);
                    let (a, b, c, d) = (f(1), f(2) as u32, f(3) as u32, f(4) as u32);
                    let e = match k {
                        0 => Event::ScheduleStart { op: b },
                        1 => Event::ScheduleStop { op: b },
                        2 => Event::MessageSend { channel: b, to: c, seq: a, records: d },
                        3 => Event::MessageRecv { channel: b, from: c, seq: a, records: d },
                        4 => Event::ProgressSend { channel: b, seq: a },
                        5 => Event::ProgressRecv { channel: b, from: c, seq: a },
                        6 => Event::SpanStart { id: a },
                        7 => Event::SpanStop { id: a },
                        8 => Event::Step { elided: a, spin_ticks: (c as u64) << 32 | d as u64 },
                        9 => Event::Park { hint: a },
                        10 => Event::Unpark,
                        11 => Event::Mark { id: a },
                        _ => Event::Arrangement { op: b, figure: c, value: a },
                    };
                    Record::from_event(ts, e)
                })
                .collect();
            let mut bytes = Vec::new();
            let s = StreamId { host: 1, process: 2, worker: 3 };
            let mut enc = Encoder::new();
            enc.set_compression(Compression::None);
            enc.records(s, 0, 0, ClockDomain::Tsc, &[&recs], &mut bytes);
            let (f, _) = decode_frame(&bytes).unwrap().unwrap();
            proptest::prop_assert_eq!(f.body, Body::Records(recs));
        }
    }
}

#[cfg(test)]
mod name_limit_tests {
    use super::*;

    /// A program or host name over the readers' limit is cut (on a char
    /// boundary), as metadata names are; written whole, it made the whole
    /// stream unreadable ("bad program: length over its limit").
    #[test]
    fn hello_names_over_the_limit_are_cut_to_it() {
        let h = Hello {
            host_name: "é".repeat(3000),
            program: "x".repeat(5000),
            pid: 7,
            workers: 2,
            invariant_tsc: true,
            ticks_per_sec: 1_000_000_000,
        };
        let mut bytes = Vec::new();
        let s = StreamId { host: 1, process: 7, worker: PROCESS_WIDE };
        Encoder::new().hello(s, 0, ClockDomain::Tsc, &h, &mut bytes);
        let (f, _) = decode_frame(&bytes).unwrap().unwrap();
        let Body::Hello(got) = f.body else { panic!("{:?}", f.body) };
        assert_eq!(got.program, "x".repeat(MAX_NAME));
        assert_eq!(got.host_name, "é".repeat(MAX_NAME / 2));
        assert_eq!((got.pid, got.workers, got.ticks_per_sec), (7, 2, 1_000_000_000));
    }
}
