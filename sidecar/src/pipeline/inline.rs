//! The whole analysis in one thread, without timely: the stages the
//! [`super::dataflow`] runs, in order, for tests and tools.

use crate::analysis::model::{Fragment, Ns};
use crate::analysis::report::WindowReport;

/// The whole analysis without timely, in one thread: byte streams (name,
/// bytes) → reports in window order, plus the faults found. For tests and
/// tools; the binary runs the same stages on timely. With every window at
/// hand, the waits carried into a window are folded back into the windows
/// that reported them open ([`crate::analysis::report::fold_carried`]).
pub fn analyze_bytes(inputs: &[(&str, &[u8])], width: Ns) -> (Vec<WindowReport>, Vec<String>) {
    let (mut reps, errors) = analyze_bytes_as_reported(inputs, width);
    // Every window is at hand: the waits open across windows are typed in
    // the windows that reported them open too.
    crate::analysis::report::fold_carried(&mut reps);
    (reps, errors)
}

/// [`analyze_bytes`] as the live pipeline reports the windows: a wait open
/// at a window's end is only marked open there, and the window where it
/// ends carries it (`WorkerWaiting::carried`).
pub fn analyze_bytes_as_reported(inputs: &[(&str, &[u8])], width: Ns) -> (Vec<WindowReport>, Vec<String>) {
    use std::collections::BTreeMap;
    let mut by_window: BTreeMap<(u64, u64), Vec<Fragment>> = BTreeMap::new();
    let mut errors = Vec::new();
    let mut ended = crate::analysis::model::EndedStreams::default();
    // A recorded run: the exchanges first, as `sidecar analyze` reads them.
    let mut frames = Vec::new();
    for (_, bytes) in inputs {
        crate::io::first_pass_in(std::io::Cursor::new(bytes), &mut frames);
    }
    let registry = crate::ingest::sync::Registry::offline(frames.iter().map(|(host, cs)| (*host, cs)));
    let sync = crate::ingest::sync::SharedSync::new(registry);
    for (name, bytes) in inputs {
        let mut ing = crate::ingest::stream::Ingest::new(*name, width).with_sync(sync.clone());
        let mut fb = ringlog::FrameBuffer::new();
        fb.feed(bytes);
        if ingest_frames(&mut ing, &mut fb) {
            match fb.finish() {
                Ok(()) => ing.eof(),
                Err(e) => ing.decode_error(&e),
            }
        }
        errors.append(&mut ing.errors);
        for (sid, k, marks) in ing.ended.drain(..) {
            ended.note(sid, k, marks);
        }
        for f in ing.out.drain(..) {
            let host = crate::analysis::causality::window_host(&f);
            by_window.entry((f.window, host)).or_default().push(f);
        }
    }
    // As the timely pipeline does: the other timelines are named.
    let timelines: std::collections::BTreeSet<u64> = by_window.keys().map(|k| k.1).collect();
    let reps: Vec<WindowReport> = by_window
        .into_iter()
        .map(|((w, h), mut frags)| {
            ended.apply(w, width, &mut frags);
            for f in &mut frags {
                f.other_hosts = timelines.iter().copied().filter(|&o| o != h).collect();
            }
            crate::analysis::causality::analyze_window(h, w, width, frags, None, None, None)
        })
        .collect();
    (reps, errors)
}

/// The live pipeline's stages in one thread, for tests: one byte stream
/// fed in chunks, each followed, if it says so, by a live deadline at that
/// time (`--grace` passed: streams silent since before it are cut there,
/// `Ingest::force`); then the windows every stream has handed over are
/// analyzed, as their owner does when the frontier passes them. Late records
/// for the last `revise_within` windows revise them
/// ([`crate::pipeline::revise`]). Every report in the order it goes out (a
/// revision after the window it revises, with its `revision` number), and
/// the faults found.
pub fn analyze_bytes_live(
    chunks: &[(&[u8], Option<Ns>)],
    width: Ns,
    revise_within: u64,
) -> (Vec<WindowReport>, Vec<String>) {
    let mut live = Live {
        width,
        stash: Default::default(),
        ended: Default::default(),
        retained: crate::pipeline::revise::Retained::new(revise_within),
        reports: Vec::new(),
        errors: Vec::new(),
    };
    let mut ing = crate::ingest::stream::Ingest::new("live", width);
    ing.revise_within(revise_within);
    let mut fb = ringlog::FrameBuffer::new();
    for (bytes, deadline) in chunks {
        fb.feed(bytes);
        ingest_frames(&mut ing, &mut fb);
        if let Some(t) = deadline {
            for h in ing.hosts() {
                ing.force(h, *t);
            }
        }
        let frontier = ing.frontier(|_| 0);
        live.step(&mut ing, frontier);
    }
    match fb.finish() {
        Ok(()) => ing.eof(),
        Err(e) => ing.decode_error(&e),
    }
    live.step(&mut ing, None);
    (live.reports, live.errors)
}

/// [`analyze_bytes_live`]'s window owner.
struct Live {
    width: Ns,
    stash: std::collections::BTreeMap<(u64, u64), Vec<Fragment>>,
    ended: crate::analysis::model::EndedStreams,
    retained: crate::pipeline::revise::Retained,
    reports: Vec<WindowReport>,
    errors: Vec<String>,
}

impl Live {
    /// Takes what the stream handed over, analyzes the windows before
    /// `frontier` (None: all), then folds the late fragments in.
    fn step(&mut self, ing: &mut crate::ingest::stream::Ingest, frontier: Option<u64>) {
        use crate::pipeline::revise::Late;
        self.errors.append(&mut ing.errors);
        for (sid, k, marks) in ing.ended.drain(..) {
            self.ended.note(sid, k, marks);
        }
        let mut late = Vec::new();
        for f in ing.out.drain(..) {
            let host = crate::analysis::causality::window_host(&f);
            if f.late {
                late.push((host, f));
            } else {
                self.stash.entry((f.window, host)).or_default().push(f);
            }
        }
        let due: Vec<(u64, u64)> =
            self.stash.keys().take_while(|k| frontier.is_none_or(|fr| k.0 < fr)).copied().collect();
        for key in due {
            let mut frags = self.stash.remove(&key).unwrap();
            self.ended.apply(key.0, self.width, &mut frags);
            self.retained.analyzed(key, key.0, &frags);
            let r = crate::analysis::causality::analyze_window(key.1, key.0, self.width, frags, None, None, None);
            self.retained.reported(key, &r);
            self.reports.push(r);
        }
        for (host, f) in late {
            let key = (f.window, host);
            if let Some(frags) = self.stash.get_mut(&key) {
                Fragment::fold_late(frags, self.width, f);
                continue;
            }
            match self.retained.late(key, self.width, f) {
                Late::Revise(v) => {
                    let mut r = crate::analysis::causality::analyze_window(
                        host, v.window, self.width, v.frags, None, None, None,
                    );
                    r.revision = v.revision;
                    self.retained.reported(key, &r);
                    self.reports.push(r);
                }
                Late::Gone => self.errors.push(format!("late records for window {} no longer kept", key.0)),
            }
        }
    }
}

/// Ingests the whole frames `fb` holds: true when it has no more, false
/// when a fault ended the stream.
fn ingest_frames(ing: &mut crate::ingest::stream::Ingest, fb: &mut ringlog::FrameBuffer) -> bool {
    loop {
        let off = fb.offset();
        match fb.next_frame() {
            Ok(Some(f)) => {
                let before = ing.out.len();
                ing.frame(f, fb.offset() - off);
                ing.finish_batch(before);
            }
            Ok(None) => return true,
            Err(e) => {
                if !ing.stream_error(&e) {
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window's UNIX start from a corrupt clock sample (CLOCK_REALTIME far
    /// from CLOCK_MONOTONIC) that an i64 cannot hold is unknown: the sum
    /// overflowed (a panic where overflow is checked, a wrapped time
    /// elsewhere), and an offset past i64 was truncated.
    #[test]
    fn a_window_start_past_the_unix_range_is_unknown() {
        use ringlog::{ClockDomain, ClockSample, Encoder, EndStats, Event, Hello, Record, StreamId, PROCESS_WIDE};
        let pw = StreamId { host: 1, process: 2, worker: PROCESS_WIDE };
        let w0 = StreamId { host: 1, process: 2, worker: 0 };
        let hello = Hello {
            host_name: "h".into(),
            program: "p".into(),
            pid: 2,
            workers: 1,
            invariant_tsc: false,
            ticks_per_sec: 1_000_000_000,
        };
        // Window 0 starts at i64::MAX, window 1 past it; an offset of
        // 2⁶⁴−1 is past an i64 itself.
        let max = Some(i64::MAX);
        for (realtime_ns, want) in [(i64::MAX as u64, [(0, max), (1, None)]), (u64::MAX, [(0, None), (1, None)])] {
            let (mut e, mut out) = (Encoder::new(), Vec::new());
            let dom = ClockDomain::MonotonicNs;
            e.hello(pw, 0, dom, &hello, &mut out);
            e.clock(pw, 1, dom, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns }], &mut out);
            e.hello(w0, 0, dom, &hello, &mut out);
            let marks: Vec<Record> =
                (1..4).map(|i| Record::from_event(i * 500_000_000, Event::Mark { id: 1 })).collect();
            e.records(w0, 1, 0, dom, &[&marks], &mut out);
            e.end(w0, 2, 0, dom, &EndStats { produced: 3, lost: 0, elided: 0 }, &mut out);
            let (reps, errors) = analyze_bytes(&[("t", &out)], 1_000_000_000);
            assert!(errors.is_empty(), "{errors:?}");
            let starts: Vec<_> = reps.iter().map(|r| (r.window, r.start_unix_ns)).collect();
            assert_eq!(starts, want, "realtime {realtime_ns}");
        }
    }
}
