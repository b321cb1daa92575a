//! Windows → a Perfetto trace (`--perfetto FILE`; open it in
//! ui.perfetto.dev). Layout:
//!
//! * one process group per (host, process) of the probe, named
//!   `host HHHH pid P program`; one thread track per engine worker (`worker N`);
//! * operator executions as slices named after the operator (category
//!   `operator`), spans likewise (`span`); waits as slices named
//!   `wait on wN` (category `wait`, args: worker, channel, kind) and
//!   `waiting for input`;
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
use crate::model::{MsgKind, Sid};
use crate::perfetto::{Arg, Writer};

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
    next_flow: u64,
    pub windows: u64,
}

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
            next_flow: 1,
            windows: 0,
        }
    }

    fn process(&mut self, s: Sid, program: &str) -> io::Result<(u64, u64, u32)> {
        if let Some(p) = self.procs.get(&(s.host, s.process)) {
            return Ok(*p);
        }
        let pid = self.next_pid;
        self.next_pid += 1;
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
        let track = self.w.thread(p, pid, pid * 1000 + s.worker + 1, &format!("worker {}", s.worker))?;
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
                ActivityKind::Operator(op) => self.w.slice(
                    tracks[i],
                    a.start,
                    a.end,
                    &name,
                    "operator",
                    &[],
                    &[],
                    &[("operator", Arg::U(op as u64))],
                )?,
                ActivityKind::Span(id) => {
                    self.w.slice(tracks[i], a.start, a.end, &name, "span", &[], &[], &[("span", Arg::U(id))])?
                }
                ActivityKind::Waiting { on, channel, kind } => {
                    let mut args = vec![("kind", Arg::S(kind.into()))];
                    if let Some(w) = on {
                        args.push(("waited_on_worker", Arg::U(w as u64)));
                    }
                    if let Some(c) = channel {
                        args.push(("channel", Arg::U(c as u64)));
                    }
                    self.w.slice(tracks[i], a.start, a.end, &name, "wait", &[], &[], &args)?
                }
                ActivityKind::WaitingForInput => {
                    self.w.slice(tracks[i], a.start, a.end, &name, "wait", &[], &[], &[])?
                }
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
                    self.w.slice(
                        cp_track,
                        p.start,
                        p.end,
                        &format!("w{w}: {label}"),
                        "critical_path",
                        &[],
                        &[],
                        &[("worker", Arg::U(w as u64))],
                    )?;
                    self.w.slice(
                        tracks[i],
                        p.start,
                        p.end,
                        "critical path",
                        "critical_path",
                        &[],
                        &flows_in,
                        &[("activity", Arg::S(label))],
                    )?;
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
