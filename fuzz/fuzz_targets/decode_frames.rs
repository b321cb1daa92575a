//! Untrusted bytes through every decoder entry point: the frame parser, the
//! incremental buffer fed in uneven pieces, and the `Read` iterator. None
//! may panic, and whatever decodes must re-encode to an equal frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ringlog::{visit_unpacked, Body, Compression, Decoder, Encoder, Frame, FrameBuffer, Payload, StreamError};

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
    // The visiting path (the sidecar's), records taken one at a time, reads
    // the same frames up to the first fault; a decoder left with records
    // untaken never passes as sound.
    let mut fb = FrameBuffer::new();
    fb.feed(data);
    let mut visited = Vec::new();
    let partial = data.get(1).is_some_and(|b| b & 1 == 1);
    loop {
        let got = fb.next_frame_with(|header, payload, _| match payload {
            Payload::Records(mut recs) => {
                let left = recs.size_hint().1.unwrap_or(0);
                if partial && left > 1 {
                    let took = recs.next().is_some();
                    assert!(!(took && recs.finish().is_ok()), "records left untaken passed as sound");
                    return None;
                }
                let mut out = Vec::new();
                for r in recs.by_ref() {
                    out.push(r);
                }
                recs.finish().ok().map(|()| Frame { header, body: Body::Records(out) })
            }
            Payload::Other(body) => Some(Frame { header, body }),
        });
        match got {
            Ok(Some(Some(f))) => visited.push(f),
            Ok(Some(None)) if partial => continue,
            _ => break,
        }
    }
    if !partial {
        assert_eq!(visited.iter().collect::<Vec<_>>(), ok_whole);
    }
    // Unpacked first (checks, decompression) and decoded later from the
    // unpacked bytes, as the sidecar's unpacking thread and worker do: the
    // same frames and faults, at the same offsets, as decoding in place.
    let in_place = read_all(data, |fb| fb.next_frame().map(|f| f.map(Ok)));
    let mut raw = Vec::new();
    let unpacked = read_all(data, |fb| {
        if raw.len() > 1 << 20 {
            raw.clear();
        }
        let offset = fb.offset();
        Ok(fb.next_unpacked(&mut raw)?.map(|(header, _)| {
            let payload = &raw[raw.len() - header.raw_len as usize..];
            visit_unpacked(header, payload, |header, p| p.into_body().map(|body| Frame { header, body }))
                .and_then(|f| f)
                .map_err(|error| StreamError { offset, error, stream: Some(header.stream) }.to_string())
        }))
    });
    assert_eq!(unpacked, in_place);
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
        if let Body::Stats(s) = &f.body {
            let mut out = Vec::new();
            Encoder::new().stats(f.header.stream, f.header.seq, f.header.domain, s, &mut out);
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

/// Every frame `next` reads from `data` (a fault in its place, as text),
/// until the end or the first fault that loses the framing.
fn read_all(
    data: &[u8],
    mut next: impl FnMut(&mut FrameBuffer) -> Result<Option<Result<Frame, String>>, StreamError>,
) -> Vec<Result<Frame, String>> {
    let mut fb = FrameBuffer::new();
    fb.feed(data);
    let mut out = Vec::new();
    loop {
        match next(&mut fb) {
            Ok(Some(f)) => out.push(f),
            Ok(None) => break,
            Err(e) => {
                let fatal = e.stream.is_none();
                out.push(Err(e.to_string()));
                if fatal {
                    break;
                }
            }
        }
    }
    out
}
