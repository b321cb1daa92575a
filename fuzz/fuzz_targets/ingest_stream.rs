//! Untrusted bytes as recorded probe streams, through what `sidecar analyze`
//! does with them, minus timely: the reader (framing, decode), the clock,
//! the ingest into per-window fragments, clock sync, and every window's
//! analysis with its Perfetto detail.
//!
//! Checked: nothing panics; a byte stream the decoder finds a fault in is
//! reported as an error; the same bytes read whole or in small pieces give
//! the same reports (a live socket hands them over in any pieces), and so
//! do frames unpacked on a helper thread; a file shared by several
//! workers (cut into frames by a splitter, each worker decoding its own
//! streams) neither panics nor hangs, and its faults are reported.
//! Unbounded time or memory on a small input shows as a libFuzzer timeout
//! or an out-of-memory.
//!
//! Every frame's checksums are made sound before most runs: a mutation
//! would otherwise stop at the checksum and never reach what is behind it.
//! The raw bytes are run as well, so the checksum faults stay covered.
#![no_main]

use std::collections::BTreeMap;
use std::io::Read;

use libfuzzer_sys::fuzz_target;
use ringlog::frame::MAGIC;
use ringlog::{Decoder, HEADER_LEN};
use sidecar::analysis::model::{EndedStreams, Fragment, Ns};
use sidecar::ingest::sync::SharedSync;
use sidecar::io::{first_pass_in, Polled, Reader, Share, Splitter, StreamPlan};

/// Window widths tried (picked by the input's length): a tiny trace then
/// spans one window or hundreds.
const WIDTHS: [Ns; 4] = [250_000, 1_000_000, 10_000_000, 1_000_000_000];
/// Piece sizes a reader gets its bytes in (also picked by the length).
const PIECES: [usize; 3] = [61, 1000, 1 << 20];
/// The windows analyzed at most per run, the first in order. A few records
/// with absurd clocks each carry a stream thousands of windows on (an item
/// over `MAX_SPAN` windows, a silence over `MAX_SKIP`): 24 records made
/// 110,000 windows, 4 minutes of analysis under the sanitizer. Their
/// fragments are all still made, and ingested ([`FirstWindows`]).
const MAX_WINDOWS: usize = 2_000;

fuzz_target!(|data: &[u8]| {
    let width = WIDTHS[data.len() % WIDTHS.len()];
    let piece = PIECES[data.len() % PIECES.len()];
    let sound = with_sound_checksums(data);

    let raw = analyze(&[data], width, piece, false, false);
    check_faults_reported(&[data], &raw);
    let whole = analyze(&[&sound], width, usize::MAX, true, false);
    check_faults_reported(&[&sound], &whole);
    if sound == data {
        assert_eq!(raw.reports, whole.reports, "reports depend on how the bytes were read");
        assert_eq!(raw.errors, whole.errors, "faults depend on how the bytes were read");
    }
    // Frames unpacked on a helper thread (`sidecar analyze` with a spare
    // core): the same reports and faults.
    let unpacked = analyze(&[&sound], width, piece, true, true);
    assert_eq!(unpacked.reports, whole.reports, "reports depend on the unpacking thread");
    assert_eq!(unpacked.errors, whole.errors, "faults depend on the unpacking thread");

    // Two byte streams analyzed together (two files, or a probe that
    // reconnected): messages and progress are matched across them.
    let (a, b) = split(&sound);
    let two = analyze(&[a, b], width, piece, true, false);
    check_faults_reported(&[a, b], &two);

    // One file shared by 2 or 3 workers (`sidecar analyze -w N`): cut
    // into frames by their headers and handed to the worker that owns each
    // stream. Its framing of untrusted bytes must not panic or hang, and
    // a fault is reported by some worker.
    let workers = 2 + data.len() % 2;
    let shared = analyze_shared(&sound, width, workers);
    check_faults_reported(&[&sound], &Outcome { reports: Vec::new(), errors: vec![shared.errors.concat()] });
});

struct Outcome {
    /// A digest of each window's JSON report and terminal line, in window
    /// order. (Digests, not the text: a few records with absurd clocks make
    /// 100,000 windows, and four runs' reports held whole passed 2 GB.)
    reports: Vec<u64>,
    /// Per byte stream, the faults it reported.
    errors: Vec<Vec<String>>,
}

/// `sidecar analyze` of `inputs` (one reader each, sharing the clock-sync
/// registry) with windows of `width` ns, each reader fed at most `piece`
/// bytes at a time; with `detail`, the windows also go to a Perfetto trace;
/// with `unpack`, each reader's frames are unpacked on a helper thread.
fn analyze(inputs: &[&[u8]], width: Ns, piece: usize, detail: bool, unpack: bool) -> Outcome {
    let sync = SharedSync::default();
    let readers: Vec<Reader> = inputs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let src = Pieces { data: b.to_vec(), at: 0, piece };
            let r = Reader::new(format!("input{i}"), Box::new(src), width, None).with_sync(sync.clone());
            if unpack {
                r.unpacked_ahead()
            } else {
                r
            }
        })
        .collect();
    analyze_readers(readers, width, piece, detail, false)
}

/// `sidecar analyze -w WORKERS` of one file: a splitter and one reader per
/// worker, each decoding the streams it owns.
fn analyze_shared(data: &[u8], width: Ns, workers: usize) -> Outcome {
    let sync = SharedSync::default();
    let file = Pieces { data: data.to_vec(), at: 0, piece: usize::MAX };
    // (The streams dealt out by their bytes, as `sidecar analyze` does from
    // its first pass over the files.)
    let bytes = first_pass_in(std::io::Cursor::new(data), &mut Vec::new());
    let plan = Some(std::sync::Arc::new(StreamPlan::balanced(&vec![bytes], workers)));
    let share = |index| Share { peers: workers, index, file: 0, plan: plan.clone() };
    let splitter = std::sync::Arc::new(Splitter::new(Box::new(file), share(0), 0..workers, None));
    let readers = (0..workers)
        .map(|index| {
            let share = share(index);
            Reader::split(format!("worker{index}"), splitter.clone(), share, width).with_sync(sync.clone())
        })
        .collect();
    analyze_readers(readers, width, 1 << 20, false, true)
}

/// The readers polled in turn to their ends, as the dataflow's sources do,
/// then each window analyzed as its owner does; `shared`: readers of one
/// file, which may find nothing for them while another worker reads.
fn analyze_readers(mut readers: Vec<Reader>, width: Ns, piece: usize, detail: bool, shared: bool) -> Outcome {
    let mut errors = vec![Vec::new(); readers.len()];
    let mut frags: Vec<Fragment> = Vec::new();
    let mut windows = FirstWindows::default();
    let mut ended = EndedStreams::default();
    // As the dataflow's source: every reader polled in turn until all are
    // done, fragments, ended streams and faults taken after each pass.
    while readers.iter().any(|r| !r.done) {
        for (r, errs) in readers.iter_mut().zip(&mut errors) {
            if !r.done {
                // Only the I/O of a file ends a poll early: never idle here
                // (a shared file's reader may wait for another worker).
                let polled = r.poll(piece.min(4 << 20));
                assert!(shared || !matches!(polled, Polled::Idle));
            }
            for (sid, k, marks) in r.ingest.ended.drain(..) {
                ended.note(sid, k, marks);
            }
            r.take_fragments(&mut frags);
            windows.keep(&mut frags);
            errs.append(&mut r.ingest.errors);
        }
    }
    // As the window owners do: a window is its fragments on one timeline.
    let FirstWindows { windows, timelines, .. } = windows;
    let mut trace = detail.then(|| sidecar::output::export::PerfettoExport::new(Vec::new()));
    let mut reports = Vec::new();
    for ((host, window), mut frags) in windows {
        ended.apply(window, width, &mut frags);
        for f in &mut frags {
            f.other_hosts = timelines.iter().copied().filter(|&h| h != host).collect();
        }
        let rep = match &mut trace {
            None => sidecar::analysis::causality::analyze_window(host, window, width, frags, None, None, None),
            Some(t) => {
                let mut d = sidecar::analysis::analyze::WindowDetail::default();
                let rep =
                    sidecar::analysis::causality::analyze_window(host, window, width, frags, Some(&mut d), None, None);
                t.window(&d).expect("writing into memory");
                rep
            }
        };
        reports.push(digest(&serde_json::to_string(&rep).expect("a report serializes"), &rep.line()));
    }
    if let Some(t) = trace {
        t.finish().expect("writing into memory");
    }
    Outcome { reports, errors }
}

/// A report's digest: equal reports have equal digests.
fn digest(json: &str, line: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (json, line).hash(&mut h);
    h.finish()
}

/// The fragments of the first [`MAX_WINDOWS`] windows (host, window) taken
/// so far, whole; the others are dropped as they come, so that a few
/// records far apart do not hold 100,000 windows' fragments.
#[derive(Default)]
struct FirstWindows {
    windows: BTreeMap<(u64, u64), Vec<Fragment>>,
    /// Windows from here on are not kept (one was dropped: a later
    /// fragment of it would make it partial).
    cut: Option<(u64, u64)>,
    /// Every timeline a fragment came from, kept or not.
    timelines: std::collections::BTreeSet<u64>,
}

impl FirstWindows {
    fn keep(&mut self, frags: &mut Vec<Fragment>) {
        for f in frags.drain(..) {
            let key = (sidecar::analysis::causality::window_host(&f), f.window);
            self.timelines.insert(key.0);
            if self.cut.is_some_and(|c| key >= c) {
                continue;
            }
            self.windows.entry(key).or_default().push(f);
            if self.windows.len() > MAX_WINDOWS {
                // (The last is the greatest, below any earlier cut.)
                self.cut = self.windows.pop_last().map(|(k, _)| k);
            }
        }
    }
}

/// A byte stream the decoder finds a fault in (a bad frame, one cut short)
/// must have been reported by its reader.
fn check_faults_reported(inputs: &[&[u8]], got: &Outcome) {
    for (bytes, errs) in inputs.iter().zip(&got.errors) {
        if let Some(Err(e)) = Decoder::new(*bytes).find(|f| f.is_err()) {
            assert!(!errs.is_empty(), "fault not reported: {e}");
        }
    }
}

/// A file read in pieces of at most `piece` bytes.
struct Pieces {
    data: Vec<u8>,
    at: usize,
    piece: usize,
}

impl Read for Pieces {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.data.len() - self.at).min(out.len()).min(self.piece);
        out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

// Header layout (ringlog/FORMAT.md): the payload length, the payload's
// checksum, and the checksum of the bytes before it.
const PAYLOAD_LEN_AT: usize = 56;
const PROCESS_AT: usize = 8; // host (8 bytes), then process (4)
const PAYLOAD_CRC_AT: usize = 64;
const HEADER_CRC_AT: usize = 68;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// The frames of `data` (start, end), up to the first bytes that are not a
/// whole frame behind a magic number.
fn frames(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while data.len() - at >= HEADER_LEN && data[at..at + 4] == MAGIC {
        let end = at + HEADER_LEN + u32_at(data, at + PAYLOAD_LEN_AT) as usize;
        if end > data.len() {
            break;
        }
        out.push((at, end));
        at = end;
    }
    out
}

/// `data` with each frame's checksums rewritten to match its bytes.
fn with_sound_checksums(data: &[u8]) -> Vec<u8> {
    let mut out = data.to_vec();
    for (at, end) in frames(data) {
        let payload = crc32fast::hash(&out[at + HEADER_LEN..end]);
        out[at + PAYLOAD_CRC_AT..at + PAYLOAD_CRC_AT + 4].copy_from_slice(&payload.to_le_bytes());
        let header = crc32fast::hash(&out[at..at + HEADER_CRC_AT]);
        out[at + HEADER_CRC_AT..at + HEADER_CRC_AT + 4].copy_from_slice(&header.to_le_bytes());
    }
    out
}

/// Two byte streams from one, cut at a frame boundary: before the first
/// frame of a second process (the files of two processes, one after the
/// other), else at the boundary nearest the middle (a probe that
/// reconnected).
fn split(data: &[u8]) -> (&[u8], &[u8]) {
    let fs = frames(data);
    let process = |&(at, _): &(usize, usize)| &data[at + PROCESS_AT..at + PROCESS_AT + 12];
    let Some(first) = fs.first().map(process) else { return (data, &[]) };
    let cut = match fs.iter().position(|f| process(f) != first) {
        Some(i) => fs[i].0,
        None => fs.iter().map(|f| f.0).min_by_key(|&at| at.abs_diff(data.len() / 2)).unwrap_or(0),
    };
    data.split_at(cut)
}
