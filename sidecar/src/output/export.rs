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

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{self, Write};

use rustc_hash::FxHashMap;

use crate::analysis::analyze::{ActivityKind, CriticalKind, WindowDetail};
use crate::analysis::model::{MsgKind, Ns, Sid};
use crate::output::perfetto::{Arg, Writer};

/// A slice of a window, written once the window's slices are all known.
/// Its name borrows the window's operator and span names where it can, and
/// its arguments lie in the window's shared list (`args`): a window has a
/// slice per activity, so an allocation or two per slice was much of the
/// export's cost.
struct Slice<'a> {
    track: u64,
    start: u64,
    end: u64,
    name: Name<'a>,
    category: &'static str,
    flow_in: Option<u64>,
    args: std::ops::Range<u32>,
}

/// A slice's name, interned when the slice is written (so names get their
/// iids in the order the slices are written).
enum Name<'a> {
    Text(Cow<'a, str>),
    /// `wait on wN`.
    WaitOn(u32),
    /// `wN: label`, a piece of the critical path.
    Critical(u32, Cow<'a, str>),
}

/// A window's slices and their arguments.
#[derive(Default)]
struct Slices<'a> {
    slices: Vec<Slice<'a>>,
    args: Vec<(&'static str, Arg<'a>)>,
}

impl<'a> Slices<'a> {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        track: u64,
        start: u64,
        end: u64,
        name: Name<'a>,
        category: &'static str,
        flow_in: Option<u64>,
        args: impl IntoIterator<Item = (&'static str, Arg<'a>)>,
    ) {
        // (u32 halves a slice's argument range; a window with 2^32 arguments
        // would need hundreds of GB, but say so rather than wrap.)
        let index = |n: usize| u32::try_from(n).expect("fewer than 2^32 slice arguments in one window");
        let first = index(self.args.len());
        self.args.extend(args);
        let args = first..index(self.args.len());
        self.slices.push(Slice { track, start, end, name, category, flow_in, args });
    }
}

/// Event names made from a message's kind, channel and peer worker, or from
/// a critical path piece's worker and label: interned once each, so that a
/// window's thousands of messages do not each format their names again.
#[derive(Default)]
struct NameCache {
    /// (data?, channel, peer worker, sent?) → iid.
    messages: FxHashMap<(bool, u32, u32, bool), u64>,
    /// (data?, channel, from, to) → iid.
    critical_messages: FxHashMap<(bool, u32, u32, u32), u64>,
    /// waited-on worker → iid of `wait on wN`.
    wait_on: FxHashMap<u32, u64>,
    /// worker → label → iid of `wN: label`.
    critical: FxHashMap<u32, FxHashMap<String, u64>>,
}

fn kind_name(data: bool) -> &'static str {
    if data {
        "data"
    } else {
        "progress"
    }
}

impl NameCache {
    fn message<W: Write>(&mut self, w: &mut Writer<W>, data: bool, channel: u32, peer: u32, sent: bool) -> u64 {
        *self.messages.entry((data, channel, peer, sent)).or_insert_with(|| {
            let kind = kind_name(data);
            if sent {
                w.name_iid(&format!("send {kind} ch{channel} to w{peer}"))
            } else {
                w.name_iid(&format!("recv {kind} ch{channel} from w{peer}"))
            }
        })
    }

    fn critical_message<W: Write>(&mut self, w: &mut Writer<W>, data: bool, channel: u32, from: u32, to: u32) -> u64 {
        *self
            .critical_messages
            .entry((data, channel, from, to))
            .or_insert_with(|| w.name_iid(&format!("critical {} message ch{channel} w{from} → w{to}", kind_name(data))))
    }

    fn slice<W: Write>(&mut self, w: &mut Writer<W>, name: &Name<'_>) -> u64 {
        match name {
            Name::Text(s) => w.name_iid(s),
            Name::WaitOn(on) => *self.wait_on.entry(*on).or_insert_with(|| w.name_iid(&format!("wait on w{on}"))),
            Name::Critical(worker, label) => {
                let labels = self.critical.entry(*worker).or_default();
                if let Some(&iid) = labels.get(label.as_ref()) {
                    return iid;
                }
                let iid = w.name_iid(&format!("w{worker}: {label}"));
                labels.insert(label.to_string(), iid);
                iid
            }
        }
    }
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
    names: NameCache,
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
        Ok(PerfettoExport::new(Box::new(crate::output::named::NamedOutput::new(path.display().to_string(), out))))
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
            names: NameCache::default(),
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
        let mut slices = Slices::default();
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
    fn write_slices(&mut self, mut slices: Slices<'_>, ws: Ns) -> io::Result<()> {
        for s in &mut slices.slices {
            if s.start == ws {
                s.start = ws + 1;
                s.end = s.end.max(s.start);
            }
        }
        // (Sorting small keys, the index last for the order given, moves
        // less than sorting the slices themselves.)
        let mut order: Vec<(u64, u64, std::cmp::Reverse<u64>, u32)> = slices
            .slices
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let i = u32::try_from(i).expect("fewer than 2^32 slices in one window");
                (s.track, s.start, std::cmp::Reverse(s.end), i)
            })
            .collect();
        order.sort_unstable();
        let mut open: Vec<(u64, u64)> = Vec::new(); // (track, end)
        for (.., i) in order {
            let s = &slices.slices[i as usize];
            while let Some(&(t, e)) = open.last() {
                if t == s.track && e > s.start {
                    break;
                }
                open.pop();
                self.w.end(t, e)?;
            }
            let args = &slices.args[s.args.start as usize..s.args.end as usize];
            let flows_in = s.flow_in.as_slice();
            let name = self.names.slice(&mut self.w, &s.name);
            self.w.begin_named(s.track, s.start, name, s.category, &[], flows_in, args)?;
            open.push((s.track, s.end.max(s.start)));
        }
        while let Some((t, e)) = open.pop() {
            self.w.end(t, e)?;
        }
        Ok(())
    }

    fn window_into<'a>(&mut self, d: &'a WindowDetail, out: &mut Slices<'a>) -> io::Result<()> {
        self.windows += 1;
        let n = d.streams.len();
        let mut tracks = Vec::with_capacity(n);
        for i in 0..n {
            tracks.push(self.worker(d.streams[i], &d.programs[i])?);
        }
        let op_name = |i: usize, op: u32| -> Cow<'a, str> {
            d.op_name(i, op).map_or_else(|| format!("operator {op}").into(), Cow::Borrowed)
        };
        let span_name = |i: usize, id: u64| -> Cow<'a, str> {
            d.span_name(i, id).map_or_else(|| format!("span {id}").into(), Cow::Borrowed)
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
            let track = tracks[i];
            let (start, end) = (a.start, a.end);
            match a.what {
                ActivityKind::Operator(op) => {
                    let name = Name::Text(op_name(i, op));
                    out.push(track, start, end, name, "operator", None, [("operator", Arg::U(op as u64))])
                }
                ActivityKind::Span(id) => {
                    out.push(track, start, end, Name::Text(span_name(i, id)), "span", None, [("span", Arg::U(id))])
                }
                ActivityKind::Waiting { on, channel, kind } => {
                    let name = match on {
                        Some(w) => Name::WaitOn(w),
                        None if kind == "open" => Name::Text("wait (open at the window's end)".into()),
                        None => Name::Text("wait (cause not visible)".into()),
                    };
                    let args = [
                        Some(("kind", Arg::S(kind.into()))),
                        on.map(|w| ("waited_on_worker", Arg::U(w as u64))),
                        channel.map(|c| ("channel", Arg::U(c as u64))),
                    ];
                    out.push(track, start, end, name, "wait", None, args.into_iter().flatten())
                }
                ActivityKind::WaitingForInput => {
                    out.push(track, start, end, Name::Text("waiting for input".into()), "wait", None, [])
                }
            }
        }
        for m in &d.messages {
            let id = self.flow();
            let data = m.kind == MsgKind::Data;
            let (src, dst) = (m.src as usize, m.dst as usize);
            let (to, from) = (d.streams[dst].worker, d.streams[src].worker);
            let sent = self.names.message(&mut self.w, data, m.channel, to, true);
            self.w.instant_named(tracks[src], m.sent, sent, "message", &[id], &[])?;
            let read = self.names.message(&mut self.w, data, m.channel, from, false);
            self.w.instant_named(tracks[dst], m.read, read, "message", &[], &[id])?;
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
                    let fw = d.streams[from as usize].worker;
                    let name = self.names.critical_message(&mut self.w, kind == MsgKind::Data, channel, fw, w);
                    self.w.instant_named(tracks[from as usize], p.start, name, "critical_path", &[id], &[])?;
                    pending_flow = Some(id);
                    // Between processes the message's transit is on the path.
                    if p.end > p.start {
                        let label = format!("transit ch{channel} from w{fw}");
                        let args = [("worker", Arg::U(w as u64)), ("from_worker", Arg::U(fw as u64))];
                        out.push(
                            cp_track,
                            p.start,
                            p.end,
                            Name::Critical(w, label.into()),
                            "critical_path",
                            None,
                            args,
                        );
                    }
                }
                what => {
                    let label = match what {
                        CriticalKind::Operator(op) => op_name(i, op),
                        CriticalKind::Span(id) => span_name(i, id),
                        CriticalKind::WaitingForInput => "waiting for input".into(),
                        _ => "unknown".into(),
                    };
                    let (start, end) = (p.start, p.end);
                    let name = Name::Critical(w, label.clone());
                    out.push(cp_track, start, end, name, "critical_path", None, [("worker", Arg::U(w as u64))]);
                    let name = Name::Text("critical path".into());
                    let flow = pending_flow.take();
                    out.push(tracks[i], start, end, name, "critical_path", flow, [("activity", Arg::S(label))]);
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
    use crate::analysis::analyze::{Activity, CriticalPiece};
    use crate::analysis::model::StreamMeta;

    /// A stream's metadata naming `ops` only.
    fn named(ops: &FxHashMap<u32, String>) -> std::sync::Arc<StreamMeta> {
        std::sync::Arc::new(StreamMeta::new(ops.clone(), Default::default(), Vec::new(), Default::default()))
    }
    use crate::output::perfetto::proto::TracePacket;

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
            metas: vec![named(&ops)],
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
            metas: vec![named(&ops)],
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

    /// A critical path that crosses processes: worker 1 (process 8) runs A
    /// over [0, 20] and sends at 20; its message is in flight until 60,
    /// where worker 0 (process 7) runs B to 70. The critical-path track
    /// holds A, the transit [20, 60] named after its channel and sender,
    /// and B; a message within one process (start = end) has no transit
    /// slice.
    #[test]
    fn a_message_in_flight_between_processes_is_a_transit_slice_on_the_critical_path() {
        let (s0, s1) = (Sid { host: 1, process: 7, worker: 0 }, Sid { host: 1, process: 8, worker: 1 });
        let mut ops = rustc_hash::FxHashMap::default();
        ops.insert(1u32, "A".to_string());
        ops.insert(2u32, "B".to_string());
        let message = |start| CriticalPiece {
            stream: 0,
            start,
            end: 60,
            what: CriticalKind::Message { from: 1, channel: 5, kind: MsgKind::Data },
        };
        for (sent, transit) in [(20, true), (60, false)] {
            let d = WindowDetail {
                host: 1,
                window: 0,
                span: (0, 100),
                streams: vec![s0, s1],
                programs: vec!["p".into(), "p".into()],
                metas: vec![named(&ops), named(&ops)],
                counters: vec![Default::default(), Default::default()],
                activities: vec![
                    Activity { stream: 1, start: 0, end: sent, what: ActivityKind::Operator(1) },
                    Activity { stream: 0, start: 60, end: 70, what: ActivityKind::Operator(2) },
                ],
                messages: vec![],
                critical: vec![
                    CriticalPiece { stream: 0, start: 60, end: 70, what: CriticalKind::Operator(2) },
                    message(sent),
                    CriticalPiece { stream: 1, start: 0, end: sent, what: CriticalKind::Operator(1) },
                ],
            };
            let mut x = PerfettoExport::new(Vec::new());
            x.window(&d).unwrap();
            let cp = x.procs[&(1, 7)].1;
            let got: Vec<(String, u64, u64)> =
                slices(&x.finish().unwrap()).into_iter().filter(|s| s.0 == cp).map(|s| (s.1, s.2, s.3)).collect();
            let mut want = vec![("w1: A".to_string(), 1, sent)];
            if transit {
                want.push(("w0: transit ch5 from w1".to_string(), 20, 60));
            }
            want.push(("w0: B".to_string(), 60, 70));
            assert_eq!(got, want, "sent at {sent}");
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
