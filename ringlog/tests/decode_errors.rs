//! Bad input gets an error that names what is wrong, never a panic.

use proptest::prelude::*;
use ringlog::*;

fn sample_stream() -> Vec<u8> {
    let stream = StreamId { host: 7, process: 42, worker: 1 };
    let mut enc = Encoder::new();
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

proptest! {
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
