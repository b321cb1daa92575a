//! A read is bounded by the fragments it makes, not only by its bytes: a
//! poll stops between frames once it has made its share, and the next goes
//! on from there; nothing is lost or made twice, whichever way the frames
//! are read.

mod common;

use common::{start, stop};
use sidecar::io::{Polled, Reader};

const MS: u64 = 1_000_000;
/// 10 ms windows.
const WIDTH: u64 = 10 * MS;

/// One worker whose `frames` frames each hold a schedule of 30 s and then
/// 30 s of silence: each frame carries the stream 6,000 windows of 10 ms
/// on (3,000 of its schedule, 3,000 of silence spelled out).
fn far_apart_frames(frames: u64) -> Vec<u8> {
    let s = 1_000 * MS;
    let events: Vec<_> = (0..frames).flat_map(|i| [(i * 60 * s, start(1)), (i * 60 * s + 30 * s, stop(1))]).collect();
    common::encode_in_frames(common::HOST, common::PID, 0, &[events], true, &[], 2)
}

/// Every poll of a reader of `bytes` to its end: the fragments each made,
/// as (window, items, faults).
fn polls(bytes: &[u8], unpacked: bool) -> Vec<Vec<(u64, usize, usize)>> {
    let r = Reader::new("test".into(), Box::new(std::io::Cursor::new(bytes.to_vec())), WIDTH, None);
    let mut r = if unpacked { r.unpacked_ahead() } else { r };
    let mut out = Vec::new();
    loop {
        let polled = r.poll(usize::MAX);
        let mut frags = Vec::new();
        r.take_fragments(&mut frags);
        assert!(r.ingest.errors.is_empty(), "{:?}", r.ingest.errors);
        out.push(frags.iter().filter(|f| !f.marker).map(|f| (f.window, f.items.len(), f.faults.len())).collect());
        match polled {
            Polled::Done => return out,
            Polled::Data => {}
            Polled::Idle => panic!("a file is never idle"),
        }
    }
}

/// 40 frames (4 KB), 240,000 windows in one read of the whole file: each poll
/// makes at most its 4,096 fragments and one frame's more (6,001), and the
/// polls together make every window once, in order, as the reader that
/// unpacks on a helper thread does, and say no fault.
#[test]
fn a_poll_stops_between_frames_once_it_has_made_its_fragments() {
    let bytes = far_apart_frames(40);
    assert!(bytes.len() < 8192, "{} bytes", bytes.len());
    for unpacked in [false, true] {
        let polls = polls(&bytes, unpacked);
        let most = polls.iter().map(Vec::len).max().unwrap();
        assert!(most <= 4096 + 6001, "a poll made {most} fragments (unpacked: {unpacked})");
        assert!(polls.len() >= 40, "{} polls", polls.len());
        let all: Vec<_> = polls.concat();
        let windows: Vec<u64> = all.iter().map(|f| f.0).collect();
        assert_eq!(windows, (0..windows.len() as u64).collect::<Vec<_>>(), "each window once, in order");
        // (39 schedules and their silences, then the last schedule: 3,000
        // windows, and the window its end falls on.)
        assert_eq!(windows.len(), 39 * 6_000 + 3_001);
        // Each schedule's windows hold it, and each silence's its gap (but
        // for one window at an edge).
        let empty = all.iter().filter(|f| f.1 == 0).count();
        assert!(empty <= 1, "{empty} windows without an item");
        assert!(all.iter().all(|f| f.2 == 0), "no window has a fault");
        if unpacked {
            assert_eq!(all, polls_plain(&bytes), "the helper thread's reads make the same fragments");
        }
    }
}

fn polls_plain(bytes: &[u8]) -> Vec<(u64, usize, usize)> {
    polls(bytes, false).concat()
}
