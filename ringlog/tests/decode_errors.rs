//! Bad input gets an error that names what is wrong, never a panic.

use proptest::prelude::*;
use ringlog::*;

fn sample_stream() -> Vec<u8> {
    sample_stream_with(Compression::default())
}

fn sample_stream_with(compression: Compression) -> Vec<u8> {
    let stream = StreamId { host: 7, process: 42, worker: 1 };
    let mut enc = Encoder::new();
    enc.set_compression(compression);
    let mut out = Vec::new();
    let hello = Hello {
        host_name: "h".into(),
        program: "p".into(),
        pid: 42,
        workers: 2,
        invariant_tsc: true,
        ticks_per_sec: 2_000_000_000,
    };
    let pw = StreamId { worker: PROCESS_WIDE, ..stream };
    enc.hello(pw, 0, ClockDomain::Tsc, &hello, &mut out);
    enc.clock(pw, 1, ClockDomain::Tsc, &[ClockSample { ticks: 1, monotonic_ns: 2, realtime_ns: 3 }], &mut out);
    enc.metadata(
        stream,
        0,
        ClockDomain::Tsc,
        &[
            Meta::Operator { id: 3, name: "Map".into(), addr: vec![0, 3] },
            Meta::Channel { id: 1, src: (3, 0), dst: (4, 0) },
            Meta::Span { id: 9, name: "load".into() },
        ],
        &mut out,
    );
    let recs: Vec<Record> = (0..100u64)
        .map(|i| Record::from_event(1000 + i * 37, Event::MessageSend { channel: 1, to: 0, seq: i, records: 5 }))
        .collect();
    enc.records(stream, 1, 3, ClockDomain::Tsc, &[&recs[..60], &recs[60..]], &mut out);
    enc.end(stream, 2, 0, ClockDomain::Tsc, &EndStats { produced: 103, lost: 3, elided: 9 }, &mut out);
    out
}

fn first_error(bytes: &[u8]) -> Option<StreamError> {
    Decoder::new(bytes).find_map(|f| f.err())
}

/// The byte offsets of the frames of `bytes`.
fn frame_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut at = 0;
    let mut v = Vec::new();
    while at < bytes.len() {
        v.push(at);
        let (h, _) = frame::parse_header(&bytes[at..at + HEADER_LEN]).unwrap();
        at += HEADER_LEN + h.payload_len as usize;
    }
    v
}

#[test]
fn a_bad_payload_behind_a_sound_header_names_its_stream_and_reading_goes_on() {
    let mut bytes = sample_stream();
    let offs = frame_offsets(&bytes);
    bytes[offs[3] + HEADER_LEN + 5] ^= 0x40; // the Records frame's payload
    let mut fb = FrameBuffer::new();
    fb.feed(&bytes);
    let mut got = Vec::new();
    loop {
        match fb.next_frame() {
            Ok(Some(f)) => got.push(Ok(f.header.kind)),
            Ok(None) => break,
            Err(e) => got.push(Err(e)),
        }
    }
    assert_eq!(got.len(), 5, "{got:?}");
    match &got[3] {
        Err(e) => {
            assert_eq!(e.offset, offs[3] as u64);
            assert_eq!(e.stream, Some(StreamId { host: 7, process: 42, worker: 1 }));
            assert!(matches!(e.error, DecodeError::PayloadChecksum { kind: FrameKind::Records, seq: 1 }), "{e}");
            assert!(e.to_string().contains("host 0000000000000007 pid 42 worker 1"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(got[4], Ok(FrameKind::End)), "the frame after it still decodes");
    assert!(fb.finish().is_ok());
    // The `Read` iterator still stops at the first error.
    assert_eq!(Decoder::new(&bytes[..]).count(), 4);
}

#[test]
fn a_bad_header_loses_the_framing() {
    let mut bytes = sample_stream();
    let offs = frame_offsets(&bytes);
    bytes[offs[3] + 20] ^= 0x01; // the worker field: the header checksum fails
    let mut fb = FrameBuffer::new();
    fb.feed(&bytes);
    for _ in 0..3 {
        assert!(fb.next_frame().unwrap().is_some());
    }
    let e = fb.next_frame().unwrap_err();
    assert_eq!((e.offset, e.stream), (offs[3] as u64, None));
    assert!(matches!(fb.next_frame().unwrap_err().error, DecodeError::AfterError));
}

#[test]
fn a_good_stream_decodes_whole() {
    let bytes = sample_stream();
    let frames: Vec<Frame> = Decoder::new(&bytes[..]).map(|f| f.unwrap()).collect();
    assert_eq!(frames.len(), 5);
    assert!(matches!(&frames[2].body, Body::Metadata(m) if m.len() == 3));
    match &frames[3].body {
        Body::Records(r) => {
            assert_eq!(r.len(), 100);
            assert_eq!(r[99].event(), Some(Event::MessageSend { channel: 1, to: 0, seq: 99, records: 5 }));
        }
        b => panic!("{b:?}"),
    }
    assert_eq!(frames[3].header.lost, 3);
    assert_eq!(frames[4].body, Body::End(EndStats { produced: 103, lost: 3, elided: 9 }));
}

#[test]
fn named_errors() {
    let good = sample_stream();
    let err = |bytes: &[u8]| first_error(bytes).expect("an error").to_string();

    let mut b = good.clone();
    b[0] = b'X';
    assert!(err(&b).contains("magic"), "{}", err(&b));

    let mut b = good.clone();
    b[4] = 9;
    assert!(err(&b).contains("unsupported ringlog format version 9"), "{}", err(&b));

    let mut b = good.clone();
    b[30] ^= 1;
    assert!(err(&b).contains("header checksum"), "{}", err(&b));

    let mut b = good.clone();
    let last = b.len() - 1;
    b[last] ^= 0x55;
    assert!(err(&b).contains("payload checksum"), "{}", err(&b));

    let b = &good[..good.len() - 3];
    let e = first_error(b).unwrap();
    assert!(e.to_string().contains("input ends inside a frame"), "{e}");
    // All frames before the cut still decode.
    assert_eq!(Decoder::new(b).filter(|f| f.is_ok()).count(), 4);
}

#[test]
fn oversized_frames_are_refused_before_allocating() {
    let mut b = sample_stream();
    // Claim a 1 GiB payload and fix up the header checksum.
    b[56..60].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let crc = crc(&b[..68]);
    b[68..72].copy_from_slice(&crc.to_le_bytes());
    let e = first_error(&b).unwrap();
    assert!(e.to_string().contains("exceeds the maximum"), "{e}");
}

fn crc(b: &[u8]) -> u32 {
    // CRC-32 (IEEE), as the format uses; written out here so the test does
    // not share code with the implementation.
    let mut c = !0u32;
    for &x in b {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
        }
    }
    !c
}

/// `sample_stream` with its Records frame uncompressed.
fn sample_stream_plain() -> Vec<u8> {
    let stream = StreamId { host: 7, process: 42, worker: 1 };
    let recs: Vec<Record> = (0..100u64)
        .map(|i| Record::from_event(1000 + i * 37, Event::MessageSend { channel: 1, to: 0, seq: i, records: 5 }))
        .collect();
    let mut enc = Encoder::new();
    enc.set_compression(Compression::None);
    let mut out = Vec::new();
    enc.records(stream, 1, 0, ClockDomain::Tsc, &[&recs], &mut out);
    enc.end(stream, 2, 0, ClockDomain::Tsc, &EndStats { produced: 100, lost: 0, elided: 0 }, &mut out);
    out
}

/// Records taken from one frame, and what `finish` said.
type FrameVisit = (usize, Result<(), String>);

/// Takes every frame of `bytes` through `next_frame_with`, the records one
/// at a time: (records taken per frame, what `finish` said), and the errors
/// found before the records.
fn visit_all(bytes: &[u8]) -> (Vec<FrameVisit>, Vec<String>) {
    let mut fb = FrameBuffer::new();
    fb.feed(bytes);
    let (mut seen, mut errors) = (Vec::new(), Vec::new());
    loop {
        match fb.next_frame_with(|_, payload, _| match payload {
            Payload::Records(mut recs) => {
                let n = recs.by_ref().count();
                (n, recs.finish().map_err(|e| e.to_string()))
            }
            Payload::Other(_) => (0, Ok(())),
        }) {
            Ok(Some(x)) => seen.push(x),
            Ok(None) => break,
            Err(e) => {
                errors.push(e.to_string());
                if e.stream.is_none() {
                    break;
                }
            }
        }
    }
    (seen, errors)
}

#[test]
fn records_taken_one_at_a_time_are_the_frames_records_and_a_fault_among_them_is_named() {
    let good = sample_stream_plain();
    // Sound: all 100 records, then the End frame.
    assert_eq!(visit_all(&good), (vec![(100, Ok(())), (0, Ok(()))], vec![]));
    let Body::Records(eager) = Decoder::new(&good[..]).next().unwrap().unwrap().body else { panic!() };
    let mut fb = FrameBuffer::new();
    fb.feed(&good);
    let lazy = fb.next_frame_with(|_, p, _| match p {
        Payload::Records(recs) => recs.collect::<Vec<_>>(),
        Payload::Other(_) => vec![],
    });
    assert_eq!(lazy.unwrap().unwrap(), eager);
    // The last record runs past the payload (checksums fixed up): the 99
    // before it are taken, `finish` names the fault and its frame, and the
    // End frame after it still reads.
    let mut bad = good.clone();
    let (h, _) = frame::parse_header(&bad[..HEADER_LEN]).unwrap();
    let end = HEADER_LEN + h.payload_len as usize;
    bad[end - 1] |= 0x80;
    let c = crc(&bad[HEADER_LEN..end]);
    bad[64..68].copy_from_slice(&c.to_le_bytes());
    let c = crc(&bad[..68]);
    bad[68..72].copy_from_slice(&c.to_le_bytes());
    let (seen, errors) = visit_all(&bad);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].0, 99);
    let e = seen[0].1.as_ref().unwrap_err();
    assert!(e.contains("in Records frame #1: payload ends while reading"), "{e}");
    assert_eq!(seen[1], (0, Ok(())));
    // The eager reader reports the same fault, naming the stream.
    let mut fb = FrameBuffer::new();
    fb.feed(&bad);
    let e = fb.next_frame().unwrap_err();
    assert_eq!(e.stream.map(|s| s.worker), Some(1));
    assert!(e.to_string().contains(seen[0].1.as_ref().unwrap_err()), "{e}");
    // Records left untaken are not passed as sound.
    let mut fb = FrameBuffer::new();
    fb.feed(&good);
    let r = fb.next_frame_with(|_, p, _| match p {
        Payload::Records(mut recs) => {
            recs.next();
            recs.finish().map_err(|e| e.to_string())
        }
        Payload::Other(_) => Ok(()),
    });
    assert!(r.unwrap().unwrap().unwrap_err().contains("not all taken"));
}

/// A reader that hands out at most the next of `sizes` bytes per call (a
/// socket delivering whatever has arrived).
struct Trickle<'a> {
    bytes: &'a [u8],
    sizes: std::iter::Cycle<std::vec::IntoIter<usize>>,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.sizes.next().unwrap().min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// Everything a FrameBuffer hands out, until it wants more bytes; false
/// once the framing is lost (nothing more can be read).
fn take_all(fb: &mut FrameBuffer, out: &mut Vec<Result<Frame, String>>) -> bool {
    loop {
        match fb.next_frame() {
            Ok(Some(f)) => out.push(Ok(f)),
            Ok(None) => return true,
            Err(e) => {
                out.push(Err(e.to_string()));
                if e.stream.is_none() {
                    return false;
                }
            }
        }
    }
}

/// What a reader makes of one frame: its header, length, and records (and
/// whether they were sound) or body.
fn describe(h: FrameHeader, p: Payload<'_>, len: u64) -> Result<String, String> {
    match p {
        Payload::Records(mut recs) => {
            let got: Vec<Record> = recs.by_ref().collect();
            let sound = recs.finish().map_err(|e| e.to_string());
            Ok(format!("{h:?} {len} {got:?} {sound:?}"))
        }
        Payload::Other(body) => Ok(format!("{h:?} {len} {body:?}")),
    }
}

/// What `next` makes of each frame of `bytes` in turn (faults as their
/// messages), up to a lost framing; and whether the bytes ended cleanly.
fn read_all(
    bytes: &[u8],
    mut next: impl FnMut(&mut FrameBuffer) -> Result<Option<Result<String, String>>, StreamError>,
) -> (Vec<Result<String, String>>, bool) {
    let mut fb = FrameBuffer::new();
    fb.feed(bytes);
    let mut out = Vec::new();
    loop {
        match next(&mut fb) {
            Ok(Some(d)) => out.push(d),
            Ok(None) => break,
            Err(e) => {
                out.push(Err(e.to_string()));
                if e.stream.is_none() {
                    break;
                }
            }
        }
    }
    (out, fb.finish().is_ok())
}

proptest! {
    /// Frames unpacked (checked, decompressed) by one reader and decoded
    /// later from the unpacked bytes give what decoding them in place gives:
    /// the same records, bodies and faults, at the same offsets, with a
    /// corrupt byte anywhere, compressed or not.
    #[test]
    fn unpacked_frames_decode_as_frames_decoded_in_place(
        copies in 1usize..4,
        zstd in any::<bool>(),
        flip in prop::option::of((0usize..4000, 1u8..=255)),
    ) {
        let c = if zstd { Compression::Zstd } else { Compression::None };
        let mut bytes: Vec<u8> = (0..copies).flat_map(|_| sample_stream_with(c)).collect();
        if let Some((at, x)) = flip {
            let at = at % bytes.len();
            bytes[at] ^= x;
        }
        let in_place = read_all(&bytes, |fb| {
            let offset = fb.offset();
            Ok(fb.next_frame_with(describe)?.map(|d| d.map_err(|e| format!("at {offset}: {e}"))))
        });
        let mut raw = Vec::new();
        let unpacked = read_all(&bytes, |fb| {
            let offset = fb.offset();
            raw.truncate(raw.len() / 2); // (payloads are taken from the end)
            let Some((h, len)) = fb.next_unpacked(&mut raw)? else { return Ok(None) };
            let payload = &raw[raw.len() - h.raw_len as usize..];
            Ok(Some(match visit_unpacked(h, payload, |h, p| describe(h, p, len)) {
                Ok(d) => d.map_err(|e| format!("at {offset}: {e}")),
                Err(error) => Err(StreamError { offset, error, stream: Some(h.stream) }.to_string()),
            }))
        });
        prop_assert_eq!(unpacked, in_place);
    }

    /// Bytes read straight into the buffer in pieces of any size give the
    /// frames (and the faults, at the same offsets) that feeding it all at
    /// once gives: the held bytes survive the buffer's compaction.
    #[test]
    fn frames_read_in_pieces_are_the_frames_fed_at_once(
        copies in 1usize..4,
        sizes in prop::collection::vec(1usize..700, 1..8),
        max in 1usize..3000,
        flip in prop::option::of(0usize..4000),
    ) {
        let mut bytes: Vec<u8> = (0..copies).flat_map(|_| sample_stream()).collect();
        if let Some(at) = flip {
            let at = at % bytes.len();
            bytes[at] ^= 0x10;
        }
        let mut whole = FrameBuffer::new();
        whole.feed(&bytes);
        let mut expected = Vec::new();
        let framed = take_all(&mut whole, &mut expected);
        let mut fb = FrameBuffer::new();
        let mut r = Trickle { bytes: &bytes, sizes: sizes.into_iter().cycle() };
        let mut got = Vec::new();
        while fb.read_from(&mut r, max).unwrap() > 0 && take_all(&mut fb, &mut got) {}
        prop_assert_eq!(got, expected);
        if framed {
            // (After a lost framing the reader stops reading.)
            prop_assert_eq!(fb.pending(), whole.pending());
            prop_assert_eq!(fb.unparsed(), whole.unparsed());
            prop_assert!(fb.finish().is_ok() == whole.finish().is_ok());
        }
    }

    #[test]
    fn any_corruption_is_an_error_or_a_valid_frame(pos in 0usize..4000, x in 1u8..=255) {
        let mut b = sample_stream();
        let pos = pos % b.len();
        b[pos] ^= x;
        // Either an error somewhere, or (vanishingly rare) frames that
        // decode: never a panic.
        for f in Decoder::new(&b[..]) {
            let _ = f;
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let mut fb = FrameBuffer::new();
        fb.feed(&bytes);
        let _ = fb.next_frame();
        for f in Decoder::new(&bytes[..]) {
            let _ = f;
        }
    }

    #[test]
    fn records_round_trip(recs in prop::collection::vec((1u8..=12, any::<u64>(), any::<u64>(), any::<u32>(), any::<u32>(), any::<u32>()), 0..300)) {
        let recs: Vec<Record> = recs.into_iter().map(|(k, ts, a, b, c, d)| {
            let kind = Kind::from_u8(k).unwrap();
            // Fields a kind does not use are zero in the wire's model.
            let r = Record::new(kind, ts, a, b, c, d);
            Record::from_event(r.ts, r.event().unwrap())
        }).collect();
        let mut out = Vec::new();
        Encoder::new().records(StreamId { host: 1, process: 2, worker: 3 }, 5, 6, ClockDomain::MonotonicNs, &[&recs], &mut out);
        let f = Decoder::new(&out[..]).next().unwrap().unwrap();
        prop_assert_eq!(f.header.seq, 5);
        prop_assert_eq!(f.header.lost, 6);
        prop_assert_eq!(f.header.domain, ClockDomain::MonotonicNs);
        prop_assert_eq!(f.body, Body::Records(recs));
    }
}

fn sync_frame(exchanges: &[ClockExchange]) -> Vec<u8> {
    let pw = StreamId { host: 0xb, process: 9, worker: PROCESS_WIDE };
    let mut out = Vec::new();
    let cs = ClockSync { reference_host: 0xa, exchanges: exchanges.to_vec() };
    Encoder::new().clock_sync(pw, 3, &cs, &mut out);
    out
}

/// Rewrites a frame's payload (and its length, count and checksums) as a
/// writer that does not follow the format would.
fn with_payload(frame: &[u8], payload: &[u8], count: u32, worker: u32) -> Vec<u8> {
    let mut b = frame[..72].to_vec();
    b[20..24].copy_from_slice(&worker.to_le_bytes());
    b[48..52].copy_from_slice(&count.to_le_bytes());
    b[52..56].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    b[56..60].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    b[64..68].copy_from_slice(&crc(payload).to_le_bytes());
    let c = crc(&b[..68]);
    b[68..72].copy_from_slice(&c.to_le_bytes());
    b.extend_from_slice(payload);
    b
}

#[test]
fn clock_sync_frames_round_trip_and_forward_raw() {
    let xs = [ClockExchange { t1: 10, t2: 5_000_000_020, t3: 5_000_000_021, t4: 40 }];
    let b = sync_frame(&xs);
    assert_eq!(b.len(), 72 + 8 + 32);
    let f = Decoder::new(&b[..]).next().unwrap().unwrap();
    assert_eq!(f.header.kind, FrameKind::ClockSync);
    assert_eq!(f.header.count, 1);
    assert!(f.header.stream.is_process_wide());
    assert_eq!(f.body, Body::ClockSync(ClockSync { reference_host: 0xa, exchanges: xs.to_vec() }));
    // The raw path hands out exactly the frame's bytes, in pieces too.
    let mut two = sample_stream();
    two.extend_from_slice(&b);
    let mut fb = FrameBuffer::new();
    let mut got = Vec::new();
    for chunk in two.chunks(7) {
        fb.feed(chunk);
        while let Some((_, bytes)) = fb.next_raw().unwrap() {
            got.extend_from_slice(bytes);
        }
    }
    assert_eq!(got, two);
    assert!(fb.unparsed().is_empty());
}

#[test]
fn clock_sync_errors_are_named() {
    let good = sync_frame(&[ClockExchange { t1: 1, t2: 2, t3: 3, t4: 4 }]);
    let err = |bytes: &[u8]| first_error(bytes).expect("an error").to_string();
    let payload = &good[72..];
    // count larger than the payload: refused before reading exchanges
    let b = with_payload(&good, payload, 1000, PROCESS_WIDE);
    assert!(err(&b).contains("clock exchange count does not match"), "{}", err(&b));
    // a payload that is not 8 + 32k bytes
    let b = with_payload(&good, &payload[..30], 0, PROCESS_WIDE);
    assert!(err(&b).contains("8 + 32 bytes per exchange"), "{}", err(&b));
    // worker-specific
    let b = with_payload(&good, payload, 1, 0);
    assert!(err(&b).contains("not process-wide"), "{}", err(&b));
    // t4 < t1, t3 < t2
    let b = sync_frame(&[ClockExchange { t1: 5, t2: 2, t3: 3, t4: 4 }]);
    assert!(err(&b).contains("t4 < t1"), "{}", err(&b));
    let b = sync_frame(&[ClockExchange { t1: 1, t2: 3, t3: 2, t4: 4 }]);
    assert!(err(&b).contains("t3 < t2"), "{}", err(&b));
    // a corrupt payload is caught by the raw path too
    let mut b = good.clone();
    let n = b.len();
    b[n - 1] ^= 1;
    let mut fb = FrameBuffer::new();
    fb.feed(&b);
    assert!(fb.next_raw().unwrap_err().to_string().contains("payload checksum"));
}

proptest! {
    #[test]
    fn clock_sync_round_trip(reference in any::<u64>(), xs in prop::collection::vec((any::<u64>(), any::<u64>(), 0u64..1 << 40, 0u64..1 << 40), 0..200)) {
        let xs: Vec<ClockExchange> = xs.into_iter().map(|(a, b, rtt, hold)| ClockExchange {
            t1: a / 2, t2: b / 2, t3: b / 2 + hold, t4: a / 2 + rtt,
        }).collect();
        let cs = ClockSync { reference_host: reference, exchanges: xs };
        let pw = StreamId { host: 1, process: 2, worker: PROCESS_WIDE };
        let mut out = Vec::new();
        Encoder::new().clock_sync(pw, 7, &cs, &mut out);
        let f = Decoder::new(&out[..]).next().unwrap().unwrap();
        prop_assert_eq!(f.header.seq, 7);
        prop_assert_eq!(f.header.domain, ClockDomain::MonotonicNs);
        prop_assert_eq!(f.body, Body::ClockSync(cs));
    }
}

fn stats_frame(s: &ProbeStats) -> Vec<u8> {
    let pw = StreamId { host: 0xb, process: 9, worker: PROCESS_WIDE };
    let mut out = Vec::new();
    Encoder::new().stats(pw, 4, ClockDomain::Tsc, s, &mut out);
    out
}

fn some_stats() -> ProbeStats {
    let mut s = ProbeStats { last: true, figures: Vec::new() };
    // Set out of order: `set` keeps the numbers increasing.
    s.set(StatFigure::WriterCpuNs, 17_700_000);
    s.set(StatFigure::Written, 2394);
    s.set(StatFigure::Produced, 2394);
    s.set(StatFigure::Bytes, 26_500);
    s.set(StatFigure::Elided, 35);
    s
}

#[test]
fn stats_frames_round_trip_beside_the_other_kinds() {
    let s = some_stats();
    assert_eq!(s.figures.iter().map(|f| f.0).collect::<Vec<_>>(), vec![2, 3, 5, 7, 8]);
    let b = stats_frame(&s);
    // A flag byte, then five numbers of one byte and values of 2, 2, 1, 3, 4 bytes.
    assert_eq!(b.len(), 72 + 1 + 5 + (2 + 2 + 1 + 3 + 4));
    let mut two = sample_stream();
    two.extend_from_slice(&b);
    let frames: Vec<Frame> = Decoder::new(&two[..]).map(|f| f.unwrap()).collect();
    let f = frames.last().unwrap();
    assert_eq!((f.header.kind, f.header.count, f.header.seq), (FrameKind::Stats, 5, 4));
    assert!(f.header.stream.is_process_wide() && !f.header.compressed);
    assert_eq!(f.body, Body::Stats(s.clone()));
    let Body::Stats(got) = &f.body else { unreachable!() };
    assert_eq!(got.get(StatFigure::Written), Some(2394));
    assert_eq!(got.get(StatFigure::WriterCpuNs), Some(17_700_000));
    assert_eq!(got.get(StatFigure::AdapterNs), None, "absent: the probe had no adapter");
    // The frames before it read as they did (a stream without Stats frames,
    // as older probes write, is the same bytes as before).
    let before: Vec<Frame> = Decoder::new(&sample_stream()[..]).map(|f| f.unwrap()).collect();
    assert_eq!(&frames[..frames.len() - 1], &before[..]);
    // A figure a newer probe adds (number 40) is carried, for readers that
    // know it to read and the others to skip.
    let mut newer = s.clone();
    newer.figures.push((40, 7));
    let f = Decoder::new(&stats_frame(&newer)[..]).next().unwrap().unwrap();
    assert_eq!(f.body, Body::Stats(newer));
}

#[test]
fn stats_errors_are_named() {
    let good = stats_frame(&some_stats());
    let payload = good[72..].to_vec();
    let err = |bytes: &[u8]| first_error(bytes).expect("an error").to_string();
    // truncated: the payload ends inside the last figure
    let b = with_payload(&good, &payload[..payload.len() - 2], 5, PROCESS_WIDE);
    assert!(err(&b).contains("payload ends while reading stats figure"), "{}", err(&b));
    // and the input ends inside the frame
    assert!(err(&good[..good.len() - 3]).contains("input ends inside a frame"), "{}", err(&good[..good.len() - 3]));
    // an empty payload: not even the flag
    let b = with_payload(&good, &[], 0, PROCESS_WIDE);
    assert!(err(&b).contains("stats flag"), "{}", err(&b));
    // bytes left over
    let mut long = payload.clone();
    long.push(0);
    let b = with_payload(&good, &long, 5, PROCESS_WIDE);
    assert!(err(&b).contains("bytes left over"), "{}", err(&b));
    // nonsense: a flag that is not 0 or 1
    let mut p = payload.clone();
    p[0] = 2;
    let b = with_payload(&good, &p, 5, PROCESS_WIDE);
    assert!(err(&b).contains("stats flag: not 0 or 1"), "{}", err(&b));
    // a count the payload cannot hold: refused before anything is read
    let b = with_payload(&good, &payload, 200, PROCESS_WIDE);
    assert!(err(&b).contains("stats figure count larger than the payload"), "{}", err(&b));
    let b = with_payload(&good, &payload, 100_000, PROCESS_WIDE);
    assert!(err(&b).contains("more figures than a stats frame holds"), "{}", err(&b));
    // figure numbers repeated, out of order, or 0
    for figures in [vec![(3, 1), (3, 2)], vec![(5, 1), (2, 2)], vec![(0, 1)]] {
        let mut p = vec![0u8];
        for (id, v) in &figures {
            p.extend([*id as u8, *v as u8]);
        }
        let b = with_payload(&good, &p, figures.len() as u32, PROCESS_WIDE);
        assert!(err(&b).contains("not in strictly increasing order from 1"), "{figures:?}: {}", err(&b));
    }
    // a number over 32 bits
    let p = [0u8, 0x80, 0x80, 0x80, 0x80, 0x10, 1];
    let b = with_payload(&good, &p, 1, PROCESS_WIDE);
    assert!(err(&b).contains("exceeds 32 bits"), "{}", err(&b));
    // worker-specific
    let b = with_payload(&good, &payload, 5, 0);
    assert!(err(&b).contains("stats frame is not process-wide"), "{}", err(&b));
    // A fault behind a sound header concerns its frame only: the buffer
    // names the stream and reads on.
    let mut two = with_payload(&good, &payload, 200, PROCESS_WIDE);
    two.extend_from_slice(&good);
    let mut fb = FrameBuffer::new();
    fb.feed(&two);
    assert!(fb.next_frame().unwrap_err().stream.is_some());
    assert!(matches!(fb.next_frame().unwrap().unwrap().body, Body::Stats(_)));
}

proptest! {
    #[test]
    fn stats_round_trip(last in any::<bool>(), ids in prop::collection::btree_set(1u32..1 << 20, 0..MAX_STAT_FIGURES), v in any::<u64>()) {
        let figures: Vec<(u32, u64)> = ids.into_iter().map(|i| (i, v >> (i % 64))).collect();
        let s = ProbeStats { last, figures };
        let f = Decoder::new(&stats_frame(&s)[..]).next().unwrap().unwrap();
        prop_assert_eq!(f.body, Body::Stats(s));
    }
}
