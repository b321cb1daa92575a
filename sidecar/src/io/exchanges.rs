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
    /// Per file, each process with records there (host, pid), and whether
    /// the file held exchanges of its host before the process's first
    /// Records frame: what decides whether a byte stream converts the
    /// process to the reference host's timeline
    /// ([`crate::ingest::sync::StreamSync::frame`]).
    pub processes: Vec<(u64, u32, bool)>,
    /// Every file was a regular file read to its end with no damaged frame
    /// (one may end inside its last frame, as a file does whose writer
    /// stopped): the run's timelines are known before its records are read.
    pub whole: bool,
    /// The first worker stream two files both hold frames of with the same
    /// numbers: a file given twice, a copy of one, or the recordings of two
    /// runs whose processes had the same host and pid. A stream's frames
    /// are numbered from 0 without gaps by the one process that writes it,
    /// to one sink (FORMAT.md), so no two files can each be part of it.
    pub repeated: Option<RepeatedFrames>,
}

/// Frames of one stream numbered alike in two files ([`FirstPass::repeated`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepeatedFrames {
    pub stream: ringlog::StreamId,
    /// The two files, in the order given.
    pub files: (PathBuf, PathBuf),
    /// The frame numbers both hold frames in the range of (first, last).
    pub seq: (u64, u64),
}

impl std::fmt::Display for RepeatedFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (a, b) = &self.files;
        let (s, (first, last)) = (self.stream, self.seq);
        let frames = format!(
            "frames #{first}..#{last} of worker {}'s stream (host {:016x}, pid {})",
            s.worker, s.host, s.process
        );
        if a == b {
            write!(f, "{} is given twice: its {frames} would count twice; give each file once", a.display())
        } else {
            write!(
                f,
                "{} and {} both hold {frames}: a stream's frames are written once, by one process, so one file \
                 is a copy of the other, or they are two runs whose processes had the same pid; give each recording once",
                a.display(),
                b.display()
            )
        }
    }
}

impl FirstPass {
    /// The hosts whose timelines the run's windows are on, as the byte
    /// streams will decide them with `registry` (the run's offline clock
    /// models): a process is on the reference host's when its host has an
    /// offline model and its file carried that host's exchanges before its
    /// records; else on its own host's. None unless the pass was whole.
    pub fn timelines(&self, registry: &crate::ingest::sync::Registry) -> Option<std::collections::BTreeSet<u64>> {
        let converted = |host: u64| registry.reference.filter(|_| registry.converter(host).is_some());
        let timeline = |&(host, _, exchanged): &(u64, u32, bool)| exchanged.then(|| converted(host)).flatten();
        self.whole.then(|| self.processes.iter().map(|p| timeline(p).unwrap_or(p.0)).collect())
    }
}

/// The first pass over `files`. Only regular files are read: a pipe or a
/// FIFO (`<(cat trace)`, `/dev/stdin`) can be read once, by the analysis,
/// whose conversion is then the live one (and its streams are dealt out by
/// the usual rule).
pub fn first_pass_of(files: &[PathBuf]) -> FirstPass {
    let mut out = FirstPass { whole: true, ..Default::default() };
    let mut seqs: Vec<SeqRanges> = Vec::with_capacity(files.len());
    for path in files {
        // (Not even opened otherwise: a FIFO's open waits for its writer.)
        let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
        let file = regular.then(|| File::open(path).ok()).flatten();
        out.whole &= file.is_some();
        let (bytes, ranges) = file
            .map(|f| {
                let r = BufReader::with_capacity(1 << 16, f);
                let (bytes, ranges, whole) = first_pass_file(r, &mut out.clock_sync, &mut out.processes);
                out.whole &= whole;
                (bytes, ranges)
            })
            .unwrap_or_default();
        out.stream_bytes.push(bytes);
        seqs.push(ranges);
    }
    out.repeated = repeated_frames(files, &seqs);
    out
}

/// Per worker stream of one file: the first and last frame numbers in it.
type SeqRanges = std::collections::BTreeMap<ringlog::StreamId, (u64, u64)>;

/// The first stream (in the files' order) whose frame numbers in one file
/// overlap those in an earlier one.
fn repeated_frames(files: &[PathBuf], seqs: &[SeqRanges]) -> Option<RepeatedFrames> {
    let mut seen: std::collections::HashMap<ringlog::StreamId, Vec<(usize, (u64, u64))>> = Default::default();
    for (j, ranges) in seqs.iter().enumerate() {
        for (&stream, &(lo, hi)) in ranges {
            let earlier = seen.entry(stream).or_default();
            if let Some(&(i, (a, b))) = earlier.iter().find(|(_, (a, b))| lo <= *b && *a <= hi) {
                let files = (files[i].clone(), files[j].clone());
                return Some(RepeatedFrames { stream, files, seq: (lo.max(a), hi.min(b)) });
            }
            earlier.push((j, (lo, hi)));
        }
    }
    None
}

/// The first pass over one byte stream `r`: its ClockSync frames appended
/// to `clock_sync`, and each stream's frame bytes (in stream order), until
/// its end or its first damaged frame.
pub fn first_pass_in(r: impl Read + Seek, clock_sync: &mut Vec<(u64, ClockSync)>) -> Vec<(ringlog::StreamId, u64)> {
    first_pass_file(r, clock_sync, &mut Vec::new()).0
}

/// [`first_pass_in`], also noting each process with records in `r`
/// ([`FirstPass::processes`]); each worker stream's first and last frame
/// numbers; and whether `r` was read to its end.
fn first_pass_file(
    r: impl Read + Seek,
    clock_sync: &mut Vec<(u64, ClockSync)>,
    processes: &mut Vec<(u64, u32, bool)>,
) -> (Vec<(ringlog::StreamId, u64)>, SeqRanges, bool) {
    let mut bytes = std::collections::BTreeMap::new();
    let mut seqs = SeqRanges::new();
    let mut exchanged = std::collections::BTreeSet::new();
    let mut with_records = std::collections::BTreeSet::new();
    let whole = first_pass(
        r,
        |k| k == FrameKind::ClockSync,
        |h, body| {
            if let Some(Body::ClockSync(cs)) = body {
                if !cs.exchanges.is_empty() {
                    exchanged.insert(h.stream.host);
                }
                clock_sync.push((h.stream.host, cs));
            }
            if !h.stream.is_process_wide() {
                *bytes.entry(h.stream).or_insert(0u64) += (HEADER_LEN + h.payload_len as usize) as u64;
                let r = seqs.entry(h.stream).or_insert((h.seq, h.seq));
                *r = (r.0.min(h.seq), r.1.max(h.seq));
                let p = (h.stream.host, h.stream.process);
                if h.kind == FrameKind::Records && with_records.insert(p) {
                    processes.push((p.0, p.1, exchanged.contains(&p.0)));
                }
            }
        },
    );
    (bytes.into_iter().collect(), seqs, whole)
}

/// A first pass over one byte stream `r`: every frame's header goes to
/// `visit`, with its body decoded for the kinds `wanted` (the others'
/// payloads are skipped, not decompressed), until the end or the first
/// damaged frame. Whether no frame was damaged: the bytes ended, after a
/// whole frame or inside one (a file whose writer stopped mid-frame), and
/// nothing was left unread that the analysis might read past a fault.
pub(super) fn first_pass(
    mut r: impl Read + Seek,
    wanted: impl Fn(FrameKind) -> bool,
    mut visit: impl FnMut(FrameHeader, Option<Body>),
) -> bool {
    let mut frame = vec![0u8; HEADER_LEN];
    loop {
        frame.truncate(HEADER_LEN);
        match read_header(&mut r, &mut frame) {
            Some(true) => {}
            Some(false) => return true,
            None => return false,
        }
        let Ok((h, _)) = ringlog::parse_header(&frame) else { return false };
        if !wanted(h.kind) {
            // (A seek past the end succeeds; the next read finds the end. A
            // reader that cannot seek stops here, not whole.)
            if r.seek_relative(h.payload_len as i64).is_err() {
                return false;
            }
            visit(h, None);
            continue;
        }
        frame.resize(HEADER_LEN + h.payload_len as usize, 0);
        if let Err(e) = r.read_exact(&mut frame[HEADER_LEN..]) {
            return e.kind() == std::io::ErrorKind::UnexpectedEof;
        }
        match ringlog::decode_frame(&frame) {
            Ok(Some((f, _))) => visit(h, Some(f.body)),
            _ => return false,
        }
    }
}

/// Reads a frame header into `frame`: Some(true) when read, Some(false) at
/// the end of `r` (nothing left, or a header cut by it), None when reading
/// fails.
fn read_header(r: &mut impl Read, frame: &mut [u8]) -> Option<bool> {
    let mut got = 0;
    while got < frame.len() {
        match r.read(&mut frame[got..]) {
            Ok(0) => return Some(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    Some(true)
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

    /// Files holding the same frame numbers of one worker stream are named
    /// (a file given twice, a copy); a stream's frames split between files
    /// without overlap, the same numbers in another stream, and a process's
    /// own frames (numbered apart) are not.
    #[test]
    fn the_same_frames_of_a_stream_in_two_files_are_found() {
        let dir = std::env::temp_dir().join(format!("sidecar-repeated-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let w0 = StreamId { host: 3, process: 40, worker: 0 };
        let w1 = StreamId { host: 3, process: 40, worker: 1 };
        let process = StreamId { worker: PROCESS_WIDE, ..w0 };
        let file = |name: &str, frames: &[(StreamId, u64)]| {
            let mut enc = Encoder::new();
            let mut bytes = Vec::new();
            for &(s, seq) in frames {
                enc.metadata(s, seq, ringlog::ClockDomain::MonotonicNs, &[], &mut bytes);
            }
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let a = file("a", &[(process, 0), (w0, 0), (w0, 1), (w0, 2), (w1, 0)]);
        let rest = file("rest", &[(process, 0), (w0, 3), (w0, 4), (w1, 1)]);
        let other = file("other", &[(w1, 2), (w0, 5)]);
        assert_eq!(first_pass_of(&[a.clone(), rest.clone(), other.clone()]).repeated, None);
        let overlap = file("overlap", &[(w0, 4), (w1, 7), (w0, 6)]);
        let r = first_pass_of(&[a.clone(), rest.clone(), overlap.clone()]).repeated;
        assert_eq!(r, Some(RepeatedFrames { stream: w0, files: (rest.clone(), overlap.clone()), seq: (4, 4) }));
        let twice = first_pass_of(&[a.clone(), a.clone()]).repeated.unwrap();
        assert_eq!((twice.stream, twice.seq), (w0, (0, 2)));
        assert!(twice.to_string().contains("is given twice"), "{twice}");
        let named = first_pass_of(&[rest.clone(), overlap.clone()]).repeated.unwrap().to_string();
        assert!(
            named.contains("rest and ") && named.contains("overlap both hold frames #4..#4 of worker 0"),
            "{named}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
