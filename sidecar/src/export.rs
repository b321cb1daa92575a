//! Windows → a Perfetto trace (`--perfetto FILE`; open it in
//! ui.perfetto.dev). Layout:
//!
//! * one process group per (host, process) of the probe, named
//!   `host HHHH pid P program`; one thread track per engine worker (`worker N`);
//! * operator executions as slices named after the operator (category
//!   `operator`), spans likewise (`span`); waits as slices named
//!   `wait on wN` (category `wait`, args: worker, channel, kind),
//!   `wait (cause not visible)` and `waiting for input`;
//! * messages between workers as flows (send → read; data messages matched
//!   in the window and the progress messages that ended a wait);
//! * the critical path twice: a `critical path` track per process with one
//!   slice per piece (`wN: Operator`), and a nested `critical path` slice on
//!   the worker track under the activity it covers (category
//!   `critical_path`), with flows along the messages it jumps over;
//! * counters per worker: `wN records lost` and `wN schedules elided`, one
//!   value per window.
//!
//! Times are the host's CLOCK_MONOTONIC in ns, as in the JSON.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::analyze::{ActivityKind, CriticalKind, WindowDetail};
use crate::model::{MsgKind, Ns, Sid};
use crate::perfetto::{Arg, Writer};

/// A slice of a window, written once the window's slices are all known.
struct Slice {
    track: u64,
    start: u64,
    end: u64,
    name: String,
    category: &'static str,
    flows_in: Vec<u64>,
    args: Vec<(&'static str, Arg)>,
}

struct Worker {
    track: u64,
    lost: u64,
    elided: u64,
}

/// Writes windows' details as they come (any order).
pub struct PerfettoExport<W: Write> {
    w: Writer<W>,
    procs: HashMap<(u64, u32), (u64, u64, u32)>, // → (process uuid, critical path track, pid)
    workers: HashMap<Sid, Worker>,
    next_pid: u32,
    next_spare_tid: u32,
    next_flow: u64,
    pub windows: u64,
}

/// Thread ids from here up go to workers whose readable tid (pid·1000 +
/// worker + 1, for a worker below 999 in one of the first 999,999
/// processes) would collide with another's or overflow.
const SPARE_TIDS: u32 = 1_000_000_000;

impl PerfettoExport<Box<dyn Write + Send>> {
    /// A trace written to a new file at `path` (its write errors name it).
    pub fn create(path: &std::path::Path) -> io::Result<Self> {
        let f = std::fs::File::create(path)?;
        let out = io::BufWriter::with_capacity(1 << 20, f);
        Ok(PerfettoExport::new(Box::new(crate::dataflow::NamedOutput::new(path.display().to_string(), out))))
    }
}

impl<W: Write> PerfettoExport<W> {
    pub fn new(out: W) -> Self {
        PerfettoExport {
            w: Writer::new(out),
            procs: HashMap::new(),
            workers: HashMap::new(),
            next_pid: 1,
            next_spare_tid: SPARE_TIDS,
            next_flow: 1,
            windows: 0,
        }
    }

    fn process(&mut self, s: Sid, program: &str) -> io::Result<(u64, u64, u32)> {
        if let Some(p) = self.procs.get(&(s.host, s.process)) {
            return Ok(*p);
        }
        let pid = self.next_pid;
        self.next_pid = self.next_pid.wrapping_add(1).max(1);
        let name = format!("host {:04x} pid {} {}", s.host & 0xffff, s.process, program);
        let uuid = self.w.process(pid, name.trim_end())?;
        let cp = self.w.track(uuid, "critical path")?;
        self.procs.insert((s.host, s.process), (uuid, cp, pid));
        Ok((uuid, cp, pid))
    }

    fn worker(&mut self, s: Sid, program: &str) -> io::Result<u64> {
        if let Some(w) = self.workers.get(&s) {
            return Ok(w.track);
        }
        let (p, _, pid) = self.process(s, program)?;
        // (The worker index comes from the stream: any u32.)
        let tid = if s.worker < 999 && pid < 1_000_000 {
            pid * 1000 + s.worker + 1
        } else {
            let t = self.next_spare_tid;
            // (Perfetto's tids are i32: stay below 2³¹.)
            self.next_spare_tid = if t < i32::MAX as u32 { t + 1 } else { SPARE_TIDS };
            t
        };
        let track = self.w.thread(p, pid, tid, &format!("worker {}", s.worker))?;
        let lost = self.w.counter_track(p, &format!("w{} records lost", s.worker))?;
        let elided = self.w.counter_track(p, &format!("w{} schedules elided", s.worker))?;
        self.workers.insert(s, Worker { track, lost, elided });
        Ok(track)
    }

    fn flow(&mut self) -> u64 {
        self.next_flow += 1;
        self.next_flow
    }

    /// Adds one window.
    pub fn window(&mut self, d: &WindowDetail) -> io::Result<()> {
        let mut slices = Vec::new();
        self.window_into(d, &mut slices)?;
        self.write_slices(slices, d.span.0)
    }

    /// Writes a window's slices track by track in nesting order. A reader
    /// orders events by time (ties: as written) and an end closes the
    /// innermost open slice, so back-to-back slices (one ending where the
    /// next begins) and the `critical path` slices nested in them cannot be
    /// written one whole slice after another: at the shared instant the
    /// ends must come first, innermost first, then the beginnings,
    /// outermost first. Sorting by (start, end descending, order given)
    /// and closing what ended before each beginning does that.
    ///
    /// Across windows the order cannot be kept: with `-w N` windows come as
    /// their owners finish them, and a later window's slice beginning at
    /// its start, written first, would be closed by the earlier window's
    /// end at that instant (a slice cut at the boundary, or two activities
    /// back to back across it). So a slice beginning at its window's start
    /// (`ws`) begins 1 ns after it, after every end at that instant
    /// whatever the order of the windows.
    fn write_slices(&mut self, mut slices: Vec<Slice>, ws: Ns) -> io::Result<()> {
        for s in &mut slices {
            if s.start == ws {
                s.start = ws + 1;
                s.end = s.end.max(s.start);
            }
        }
        slices.sort_by(|a, b| a.track.cmp(&b.track).then(a.start.cmp(&b.start)).then(b.end.cmp(&a.end)));
        let mut open: Vec<(u64, u64)> = Vec::new(); // (track, end)
        for s in slices {
            while let Some(&(t, e)) = open.last() {
                if t == s.track && e > s.start {
                    break;
                }
                open.pop();
                self.w.end(t, e)?;
            }
            let args: Vec<(&str, Arg)> = s.args.iter().map(|(k, v)| (*k, v.clone())).collect();
            self.w.begin(s.track, s.start, &s.name, s.category, &[], &s.flows_in, &args)?;
            open.push((s.track, s.end.max(s.start)));
        }
        while let Some((t, e)) = open.pop() {
            self.w.end(t, e)?;
        }
        Ok(())
    }

    fn window_into(&mut self, d: &WindowDetail, out: &mut Vec<Slice>) -> io::Result<()> {
        self.windows += 1;
        let n = d.streams.len();
        let mut tracks = Vec::with_capacity(n);
        for i in 0..n {
            tracks.push(self.worker(d.streams[i], &d.programs[i])?);
        }
        let name_of = |i: usize, k: ActivityKind| -> String {
            match k {
                ActivityKind::Operator(op) => {
                    d.op_names[i].get(&op).cloned().unwrap_or_else(|| format!("operator {op}"))
                }
                ActivityKind::Span(id) => d.span_names[i].get(&id).cloned().unwrap_or_else(|| format!("span {id}")),
                ActivityKind::Waiting { on: Some(w), .. } => format!("wait on w{w}"),
                ActivityKind::Waiting { on: None, .. } => "wait (cause not visible)".into(),
                ActivityKind::WaitingForInput => "waiting for input".into(),
            }
        };
        // Counters, at the window's start.
        for i in 0..n {
            let wk = &self.workers[&d.streams[i]];
            let (lt, et) = (wk.lost, wk.elided);
            self.w.counter(lt, d.span.0, d.counters[i].lost as i64)?;
            self.w.counter(et, d.span.0, d.counters[i].elided as i64)?;
        }
        for a in &d.activities {
            let i = a.stream as usize;
            let name = name_of(i, a.what);
            match a.what {
                ActivityKind::Operator(op) => out.push(Slice {
                    track: tracks[i],
                    start: a.start,
                    end: a.end,
                    name,
                    category: "operator",
                    flows_in: vec![],
                    args: vec![("operator", Arg::U(op as u64))],
                }),
                ActivityKind::Span(id) => out.push(Slice {
                    track: tracks[i],
                    start: a.start,
                    end: a.end,
                    name,
                    category: "span",
                    flows_in: vec![],
                    args: vec![("span", Arg::U(id))],
                }),
                ActivityKind::Waiting { on, channel, kind } => {
                    let mut args = vec![("kind", Arg::S(kind.into()))];
                    if let Some(w) = on {
                        args.push(("waited_on_worker", Arg::U(w as u64)));
                    }
                    if let Some(c) = channel {
                        args.push(("channel", Arg::U(c as u64)));
                    }
                    out.push(Slice {
                        track: tracks[i],
                        start: a.start,
                        end: a.end,
                        name,
                        category: "wait",
                        flows_in: vec![],
                        args,
                    })
                }
                ActivityKind::WaitingForInput => out.push(Slice {
                    track: tracks[i],
                    start: a.start,
                    end: a.end,
                    name,
                    category: "wait",
                    flows_in: vec![],
                    args: vec![],
                }),
            }
        }
        for m in &d.messages {
            let id = self.flow();
            let kind = match m.kind {
                MsgKind::Data => "data",
                MsgKind::Progress => "progress",
            };
            let (src, dst) = (m.src as usize, m.dst as usize);
            let out = format!("send {kind} ch{} to w{}", m.channel, d.streams[dst].worker);
            let inn = format!("recv {kind} ch{} from w{}", m.channel, d.streams[src].worker);
            self.w.instant(tracks[src], m.sent, &out, "message", &[id], &[])?;
            self.w.instant(tracks[dst], m.read, &inn, "message", &[], &[id])?;
        }
        // The critical path, oldest piece first; a flow along each message
        // it jumps over.
        let cp_track = self.procs[&(d.streams.first().map_or((d.host, 0), |s| (s.host, s.process)))].1;
        let mut pending_flow: Option<u64> = None;
        for p in d.critical.iter().rev() {
            let i = p.stream as usize;
            let w = d.streams[i].worker;
            match p.what {
                CriticalKind::Message { from, channel, kind } => {
                    let id = self.flow();
                    let k = if kind == MsgKind::Data { "data" } else { "progress" };
                    let fw = d.streams[from as usize].worker;
                    let name = format!("critical {k} message ch{channel} w{fw} → w{w}");
                    self.w.instant(tracks[from as usize], p.start, &name, "critical_path", &[id], &[])?;
                    pending_flow = Some(id);
                }
                what => {
                    let label = match what {
                        CriticalKind::Operator(op) => name_of(i, ActivityKind::Operator(op)),
                        CriticalKind::Span(id) => name_of(i, ActivityKind::Span(id)),
                        CriticalKind::WaitingForInput => "waiting for input".into(),
                        _ => "unknown".into(),
                    };
                    let flows_in: Vec<u64> = pending_flow.take().into_iter().collect();
                    out.push(Slice {
                        track: cp_track,
                        start: p.start,
                        end: p.end,
                        name: format!("w{w}: {label}"),
                        category: "critical_path",
                        flows_in: vec![],
                        args: vec![("worker", Arg::U(w as u64))],
                    });
                    out.push(Slice {
                        track: tracks[i],
                        start: p.start,
                        end: p.end,
                        name: "critical path".into(),
                        category: "critical_path",
                        flows_in,
                        args: vec![("activity", Arg::S(label))],
                    });
                }
            }
        }
        Ok(())
    }

    pub fn packets(&self) -> u64 {
        self.w.packets()
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    pub fn finish(self) -> io::Result<W> {
        self.w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{Activity, CriticalPiece};
    use crate::perfetto::proto::TracePacket;

    #[derive(Clone, PartialEq, prost::Message)]
    struct Trace {
        #[prost(message, repeated, tag = "1")]
        packet: Vec<TracePacket>,
    }

    /// The slices trace_processor builds from `bytes`: track events sorted
    /// by timestamp, ties in packet order (its sorter orders by
    /// `(ts, allocation order)`); a SLICE_END closes the innermost slice
    /// open on its track. (track, name, start, end, depth).
    fn slices(bytes: &[u8]) -> Vec<(u64, String, u64, u64, usize)> {
        use prost::Message as _;
        let t = Trace::decode(bytes).unwrap();
        let mut names: HashMap<u64, String> = HashMap::new();
        let mut evs = Vec::new();
        for (i, p) in t.packet.iter().enumerate() {
            if let Some(d) = &p.interned_data {
                names.extend(d.event_names.iter().map(|n| (n.iid.unwrap(), n.name.clone().unwrap())));
            }
            if let Some(e) = &p.track_event {
                evs.push((p.timestamp.unwrap(), i, e.clone()));
            }
        }
        evs.sort_by_key(|e| (e.0, e.1));
        let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
        let mut out = Vec::new();
        for (ts, _, e) in evs {
            let track = e.track_uuid.unwrap();
            match e.r#type {
                Some(1) => open.entry(track).or_default().push((names[&e.name_iid.unwrap()].clone(), ts)),
                Some(2) => {
                    let st = open.get_mut(&track).unwrap();
                    let (name, start) = st.pop().expect("an end without an open slice");
                    out.push((track, name, start, ts, st.len()));
                }
                _ => {}
            }
        }
        assert!(open.values().all(|s| s.is_empty()), "slices left open: {open:?}");
        out.sort_by_key(|s| (s.0, s.2, s.4));
        out
    }

    /// Two operators back to back on one worker, both on the critical path:
    /// each operator slice keeps its own extent at depth 0, with its
    /// `critical path` slice nested inside it.
    #[test]
    fn back_to_back_slices_nest_as_written() {
        let sid = Sid { host: 1, process: 7, worker: 0 };
        let mut ops = rustc_hash::FxHashMap::default();
        ops.insert(1u32, "A".to_string());
        ops.insert(2u32, "B".to_string());
        let d = WindowDetail {
            host: 1,
            window: 0,
            span: (0, 100),
            streams: vec![sid],
            programs: vec!["p".into()],
            op_names: vec![ops],
            span_names: vec![Default::default()],
            counters: vec![Default::default()],
            activities: vec![
                Activity { stream: 0, start: 0, end: 10, what: ActivityKind::Operator(1) },
                Activity { stream: 0, start: 10, end: 20, what: ActivityKind::Operator(2) },
            ],
            messages: vec![],
            // From the window's end backwards.
            critical: vec![
                CriticalPiece { stream: 0, start: 10, end: 20, what: CriticalKind::Operator(2) },
                CriticalPiece { stream: 0, start: 0, end: 10, what: CriticalKind::Operator(1) },
            ],
        };
        let mut x = PerfettoExport::new(Vec::new());
        x.window(&d).unwrap();
        let got = worker_slices(&x.finish().unwrap());
        // (A begins at the window's start: 1 ns later, see `write_slices`.)
        let want = vec![
            ("A".to_string(), 1, 10, 0),
            ("critical path".to_string(), 1, 10, 1),
            ("B".to_string(), 10, 20, 0),
            ("critical path".to_string(), 10, 20, 1),
        ];
        assert_eq!(got, want);
    }

    /// An operator cut at a window boundary (the first window's piece ends
    /// at 100 where the second's begins), both pieces on the critical path,
    /// with the windows written in either order (with `-w N` they come as
    /// their owners finish them): each piece keeps its own extent, its
    /// `critical path` slice nested in it.
    #[test]
    fn a_slice_cut_at_a_window_boundary_nests_whichever_window_comes_first() {
        let sid = Sid { host: 1, process: 7, worker: 0 };
        let mut ops = rustc_hash::FxHashMap::default();
        ops.insert(1u32, "A".to_string());
        let window = |k: u64, start: u64, end: u64| WindowDetail {
            host: 1,
            window: k,
            span: (k * 100, k * 100 + 100),
            streams: vec![sid],
            programs: vec!["p".into()],
            op_names: vec![ops.clone()],
            span_names: vec![Default::default()],
            counters: vec![Default::default()],
            activities: vec![Activity { stream: 0, start, end, what: ActivityKind::Operator(1) }],
            messages: vec![],
            critical: vec![CriticalPiece { stream: 0, start, end, what: CriticalKind::Operator(1) }],
        };
        for first_window_first in [true, false] {
            let (w0, w1) = (window(0, 50, 100), window(1, 100, 150));
            let mut x = PerfettoExport::new(Vec::new());
            if first_window_first {
                x.window(&w0).unwrap();
                x.window(&w1).unwrap();
            } else {
                x.window(&w1).unwrap();
                x.window(&w0).unwrap();
            }
            let got = worker_slices(&x.finish().unwrap());
            // (A piece beginning at its window's start is written 1 ns later:
            // see `write_slices`.)
            let want = vec![
                ("A".to_string(), 50, 100, 0),
                ("critical path".to_string(), 50, 100, 1),
                ("A".to_string(), 101, 150, 0),
                ("critical path".to_string(), 101, 150, 1),
            ];
            assert_eq!(got, want, "first window written first: {first_window_first}");
        }
    }

    /// Worker thread ids are unique and in i32's range whatever the worker
    /// indices: the readable pid·1000 + worker + 1 for low indices, spare
    /// ones above for the rest. An index near 2³² overflowed the tid (a
    /// panic found by the `ingest_stream` fuzz target); 999 and up
    /// collided with the next process's workers.
    #[test]
    fn worker_thread_ids_are_unique_for_any_worker_index() {
        use prost::Message as _;
        let sids = [(7, 0), (7, 998), (7, 999), (7, 1000), (7, u32::MAX - 1), (8, 0), (8, 1)];
        let mut x = PerfettoExport::new(Vec::new());
        for (process, worker) in sids {
            x.worker(Sid { host: 1, process, worker }, "p").unwrap();
        }
        let t = Trace::decode(&x.finish().unwrap()[..]).unwrap();
        let tids: Vec<i32> =
            t.packet.iter().filter_map(|p| p.track_descriptor.as_ref()?.thread.as_ref()?.tid).collect();
        assert_eq!(&tids[..2], &[1001, 1999]);
        assert_eq!(&tids[5..], &[2001, 2002]);
        let mut seen = tids.clone();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), sids.len(), "{tids:?}");
        assert!(tids.iter().all(|&t| t > 0), "{tids:?}");
    }

    /// The slices of the (only) worker track: (name, start, end, depth).
    fn worker_slices(bytes: &[u8]) -> Vec<(String, u64, u64, usize)> {
        let track = x_track(bytes);
        slices(bytes).into_iter().filter(|s| s.0 == track).map(|s| (s.1, s.2, s.3, s.4)).collect()
    }

    /// The uuid of the (only) thread track.
    fn x_track(bytes: &[u8]) -> u64 {
        use prost::Message as _;
        let t = Trace::decode(bytes).unwrap();
        t.packet.iter().find_map(|p| p.track_descriptor.as_ref().filter(|d| d.thread.is_some())?.uuid).unwrap()
    }
}
