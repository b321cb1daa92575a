//! Untrusted bytes through every decoder entry point: the frame parser, the
//! incremental buffer fed in uneven pieces, and the `Read` iterator. None
//! may panic, and whatever decodes must re-encode to an equal frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringlog::{Body, Compression, Decoder, Encoder, FrameBuffer};

fuzz_target!(|data: &[u8]| {
    let whole: Vec<_> = Decoder::new(data).collect();
    // Fed in pieces, the incremental decoder agrees with the reader.
    let mut fb = FrameBuffer::new();
    let mut pieces = Vec::new();
    let cut = data.first().map_or(1, |b| (*b as usize % 7) + 1);
    for chunk in data.chunks(cut) {
        fb.feed(chunk);
        loop {
            match fb.next_frame() {
                Ok(Some(f)) => pieces.push(Ok(f)),
                Ok(None) => break,
                Err(e) => {
                    pieces.push(Err(e));
                    break;
                }
            }
        }
        if pieces.last().is_some_and(|p| p.is_err()) {
            break;
        }
    }
    let ok_whole: Vec<_> = whole.iter().filter_map(|f| f.as_ref().ok()).collect();
    let ok_pieces: Vec<_> = pieces.iter().filter_map(|f| f.as_ref().ok()).collect();
    assert_eq!(ok_whole, ok_pieces);
    // Records that decode survive a re-encode unchanged.
    for f in &ok_whole {
        if let Body::Records(recs) = &f.body {
            let h = f.header;
            for c in [Compression::Zstd, Compression::None] {
                let mut out = Vec::new();
                let mut enc = Encoder::new();
                enc.set_compression(c);
                enc.records(h.stream, h.seq, h.lost, h.domain, &[recs], &mut out);
                let again = Decoder::new(&out[..]).next().unwrap().unwrap();
                assert_eq!(&again.body, &f.body);
            }
        }
        if let Body::ClockSync(cs) = &f.body {
            let mut out = Vec::new();
            Encoder::new().clock_sync(f.header.stream, f.header.seq, cs, &mut out);
            let again = Decoder::new(&out[..]).next().unwrap().unwrap();
            assert_eq!(&again.body, &f.body);
        }
    }
    // The raw path (the relay's) finds the same frame boundaries and
    // forwards exactly the bytes the frames came from.
    let mut fb = FrameBuffer::new();
    fb.feed(data);
    let mut raw = Vec::new();
    while let Ok(Some((_, bytes))) = fb.next_raw() {
        raw.extend_from_slice(bytes);
    }
    let again: Vec<_> = Decoder::new(&raw[..]).take(ok_whole.len()).map(|f| f.unwrap()).collect();
    assert_eq!(again.iter().collect::<Vec<_>>(), ok_whole);
});
