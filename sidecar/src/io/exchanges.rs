//! The clock exchanges of recorded files, read before their records: a
//! first pass that reads every frame header and only the ClockSync frames'
//! payloads (skipping the rest), so that an offline analysis converts each
//! remote host's events with the exchanges on both sides of them
//! ([`crate::ingest::sync::Registry::offline`]). The same pass sums each
//! stream's bytes, by which the workers that share a file deal its streams
//! out ([`crate::io::split::StreamPlan`]).
//!
//! A file that cannot be opened, or a damaged frame, ends that file's pass
//! quietly: the analysis reads the file again and reports the fault, and
//! the exchanges it reads there still feed the live model, so nothing is
//! lost but the tighter offline conversion.

use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::PathBuf;

use ringlog::{Body, ClockSync, FrameHeader, FrameKind, HEADER_LEN};

use super::split::StreamBytes;

/// What the first pass over recorded files finds.
#[derive(Debug, Default)]
pub struct FirstPass {
    /// Every ClockSync frame, with the host that wrote it, in the order the
    /// files (in the order given) hold them.
    pub clock_sync: Vec<(u64, ClockSync)>,
    /// Per file, each stream's frame bytes (process-wide frames left out).
    pub stream_bytes: StreamBytes,
}

/// The first pass over `files`. Only regular files are read: a pipe or a
/// FIFO (`<(cat trace)`, `/dev/stdin`) can be read once, by the analysis,
/// whose conversion is then the live one (and its streams are dealt out by
/// the usual rule).
pub fn first_pass_of(files: &[PathBuf]) -> FirstPass {
    let mut out = FirstPass::default();
    for path in files {
        // (Not even opened otherwise: a FIFO's open waits for its writer.)
        let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
        let bytes = regular
            .then(|| File::open(path).ok())
            .flatten()
            .map(|f| first_pass_in(BufReader::with_capacity(1 << 16, f), &mut out.clock_sync))
            .unwrap_or_default();
        out.stream_bytes.push(bytes);
    }
    out
}

/// The first pass over one byte stream `r`: its ClockSync frames appended
/// to `clock_sync`, and each stream's frame bytes (in stream order), until
/// its end or its first damaged frame.
pub fn first_pass_in(r: impl Read + Seek, clock_sync: &mut Vec<(u64, ClockSync)>) -> Vec<(ringlog::StreamId, u64)> {
    let mut bytes = std::collections::BTreeMap::new();
    first_pass(
        r,
        |k| k == FrameKind::ClockSync,
        |h, body| {
            if let Some(Body::ClockSync(cs)) = body {
                clock_sync.push((h.stream.host, cs));
            }
            if !h.stream.is_process_wide() {
                *bytes.entry(h.stream).or_insert(0u64) += (HEADER_LEN + h.payload_len as usize) as u64;
            }
        },
    );
    bytes.into_iter().collect()
}

/// A first pass over one byte stream `r`: every frame's header goes to
/// `visit`, with its body decoded for the kinds `wanted` (the others'
/// payloads are skipped, not decompressed), until the end or the first
/// damaged frame.
pub(super) fn first_pass(
    mut r: impl Read + Seek,
    wanted: impl Fn(FrameKind) -> bool,
    mut visit: impl FnMut(FrameHeader, Option<Body>),
) {
    let mut frame = vec![0u8; HEADER_LEN];
    loop {
        frame.truncate(HEADER_LEN);
        if r.read_exact(&mut frame).is_err() {
            return;
        }
        let Ok((h, _)) = ringlog::parse_header(&frame) else { return };
        if !wanted(h.kind) {
            if r.seek_relative(h.payload_len as i64).is_err() {
                return;
            }
            visit(h, None);
            continue;
        }
        frame.resize(HEADER_LEN + h.payload_len as usize, 0);
        if r.read_exact(&mut frame[HEADER_LEN..]).is_err() {
            return;
        }
        match ringlog::decode_frame(&frame) {
            Ok(Some((f, _))) => visit(h, Some(f.body)),
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog::{ClockExchange, Encoder, StreamId, PROCESS_WIDE};
    use std::io::Cursor;

    fn cs(t: u64) -> ClockSync {
        ClockSync { reference_host: 1, exchanges: vec![ClockExchange { t1: t, t2: t, t3: t, t4: t + 1 }] }
    }

    /// ClockSync frames between other frames are found, in order, with
    /// their host; a damaged frame ends the pass (the frames before it are
    /// kept).
    #[test]
    fn finds_the_clock_sync_frames_among_others() {
        let mut enc = Encoder::new();
        let relay = StreamId { host: 7, process: 9, worker: PROCESS_WIDE };
        let mut bytes = Vec::new();
        enc.clock_sync(relay, 0, &cs(10), &mut bytes);
        enc.metadata(relay, 1, ringlog::ClockDomain::MonotonicNs, &[], &mut bytes);
        enc.clock_sync(relay, 2, &cs(20), &mut bytes);
        let good = bytes.len();
        enc.clock_sync(relay, 3, &cs(30), &mut bytes);
        let mut out = Vec::new();
        first_pass_in(Cursor::new(&bytes), &mut out);
        let got: Vec<(u64, u64)> = out.iter().map(|(h, c)| (*h, c.exchanges[0].t1)).collect();
        assert_eq!(got, vec![(7, 10), (7, 20), (7, 30)]);
        bytes[good + HEADER_LEN] ^= 0xff; // the last frame's payload
        let mut out = Vec::new();
        first_pass_in(Cursor::new(&bytes), &mut out);
        assert_eq!(out.len(), 2);
    }
}
