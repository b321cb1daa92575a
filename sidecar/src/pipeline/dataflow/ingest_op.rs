//! The Ingest operator: a worker's byte streams (its share of the files, or
//! the live connections the I/O thread hands it) → fragments, each at its
//! window's timely time.
//!
//! It holds the dataflow's frontier back where windows may still get
//! fragments: while a stream is open, and, live, while a new connection may
//! send records for a window or a silent stream's deadline has not passed.
//! Like ST2's replay operator (§3.3.2) it yields after each slice it reads
//! and bounds the windows in flight: it stops reading while the analysis is
//! a few windows behind, so memory stays bounded however long the run.

use std::collections::BTreeMap;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::generic::operator::source;
use timely::dataflow::operators::generic::OutputBuilderSession;
use timely::dataflow::operators::Capability;
use timely::dataflow::{ProbeHandle, Scope, StreamVec};
use timely::scheduling::Activator;

use super::meta_kept::MetaSent;
use super::{Inputs, OperatorLink, RunStats, Shared};
use crate::analysis::analyze::LATE_DATA;
use crate::analysis::model::{Fragment, MetaOnWire, Ns};
use crate::analysis::report::ProcessFigures;
use crate::io::{now_unix_ns, Polled, RateLimited, Reader, Share};
use crate::pipeline::grace::{deadline, Grace};

/// A fragment on its way to its window's owner: the host whose timeline
/// the window is on, and the window's timely time (the fragment travels at
/// the source's capability; its owner holds one for `time`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct TimedFragment {
    pub(super) host: u64,
    pub(super) time: u64,
    /// The worker that ingested the stream (global index): the owner
    /// books what crossed to it from other workers and processes.
    pub(super) from: u32,
    pub(super) fragment: Fragment,
    /// The probes' latest figures about themselves (their Stats frames),
    /// those that changed since this worker last sent: in a carrier of
    /// their own (a marker of no stream, [`TimedFragment::carrier`]) to
    /// worker 0, whose process prints them and keeps each process's latest.
    /// (Not with the windows' fragments or reports: a probe's last figures
    /// come after its last window, whose fragments may be gone already.)
    pub(super) figures: Vec<(u64, u32, ProcessFigures)>,
}

impl TimedFragment {
    /// A carrier of the probes' `figures` alone, at timely time `time`, to
    /// worker 0.
    fn carrier(time: u64, from: u32, figures: Vec<(u64, u32, ProcessFigures)>) -> TimedFragment {
        let fragment = Fragment { marker: true, route: 0, ..Default::default() };
        TimedFragment { host: 0, time, from, fragment, figures }
    }

    /// Whether this carries the probes' figures alone.
    pub(super) fn is_carrier(&self) -> bool {
        self.fragment.marker && self.fragment.stream.is_none()
    }
}

/// Where a host's windows are in timely time, fixed when the host is first
/// seen and shared by this process's workers.
#[derive(Clone, Copy)]
struct HostClock {
    /// realtime − monotonic ns of the host (0: unknown).
    realtime_offset: i128,
    /// Added to the host's window index: its realtime offset in whole
    /// windows.
    shift: u64,
}

/// The hosts seen by this process's workers. Timely time is the window
/// index plus the host's shift: the hosts' windows then progress together
/// by wall clock, while each window stays on one host's own timeline
/// (hosts are never mixed).
#[derive(Clone, Default)]
pub(super) struct HostClocks(Arc<Mutex<BTreeMap<u64, HostClock>>>);

/// The hosts seen so far, as one activation uses them.
struct Hosts(Vec<(u64, HostClock)>);

impl Hosts {
    fn shift(&self, host: u64) -> u64 {
        self.0.iter().find(|x| x.0 == host).map_or(0, |x| x.1.shift)
    }
}

/// How long a connection that has shown no stream yet holds the windows
/// back (a probe sends its first frames tens of ms after connecting; a
/// connection that sends none for this long is not waited for).
const JOIN_HOLD_NS: i128 = 2_000_000_000;
/// How far before its accept a new connection's first records may lie: the
/// probe stamps records from its start and connects as it starts (before
/// its 20 ms calibration); the margin covers a slow thread start or accept.
const JOIN_MARGIN_NS: i128 = 100_000_000;

/// How far behind the wall clock windows close when no stream is open: a
/// little more than the grace, so that a stream connecting now is not late.
fn idle_lag(grace: Ns) -> Ns {
    grace + grace / 2
}

/// The window (in timely time, read off the wall clock) that connections
/// accepted at `joined` (Unix ns) and not yet showing a stream hold back:
/// their first records may fall in it. `None` when none is recent.
fn join_hold(joined: impl Iterator<Item = i128>, now: i128, grace: i128, width: u64) -> Option<u64> {
    joined.filter(|&j| now - j < JOIN_HOLD_NS).map(|j| ((j - JOIN_MARGIN_NS - grace).max(0) as u64) / width).min()
}

type Output<'a> = OutputBuilderSession<'a, u64, CapacityContainerBuilder<Vec<TimedFragment>>>;

/// The Ingest operator of this worker. `analyzed` is how far the analysis
/// got; `link` says whether this worker analyzes on a thread of its own
/// (known once the Analyze operator is built), and takes whether the source
/// is idle.
pub(super) fn ingest<'s>(
    scope: Scope<'s, u64>,
    shared: &Shared,
    analyzed: ProbeHandle<u64>,
    link: Rc<OperatorLink>,
) -> StreamVec<'s, u64, TimedFragment> {
    source(scope, "Ingest", move |cap: Capability<u64>, info| {
        let activator = scope.activator_for(info.address.clone());
        let (index, peers) = (scope.index(), scope.peers());
        let readers = open_files(shared, index, peers);
        if let Inputs::Live { queues, .. } = &*shared.inputs {
            // The I/O thread wakes this operator when a connection of this
            // worker has data; nothing polls.
            let a = scope.worker().sync_activator_for(info.address.to_vec());
            queues.workers[index % queues.workers.len()].set_waker(Box::new(move || {
                let _ = a.activate();
            }));
        }
        let mut ingest = Ingest {
            cap: Some(cap),
            streams: Streams {
                readers,
                activator,
                shared: shared.clone(),
                index,
                peers,
                analyzed,
                link,
                fragments: Vec::new(),
                figures: Vec::new(),
                last_bar: Instant::now(),
                late: 0,
                first_late: String::new(),
                grace: match &*shared.inputs {
                    Inputs::Live { grace, .. } => *grace,
                    Inputs::Files(_) => Grace::fixed(0),
                },
                max_backlog: match &*shared.inputs {
                    Inputs::Live { max_backlog, .. } => *max_backlog,
                    Inputs::Files(_) => 0,
                },
                error_lines: RateLimited::new("errors"),
                backlog_lines: RateLimited::new("backlog cuts"),
                crossing: (0, 0),
                meta_sent: MetaSent::default(),
            },
        };
        move |output: &mut Output<'_>| ingest.activate(output)
    })
}

/// This worker's readers of the files. With several workers, each file is
/// read once for this process's workers ([`Splitter`](crate::io::Splitter), made by the first
/// of them to get here) and each worker decodes the streams it owns (see
/// `io::Share`), so decoding is parallel even for one file.
fn open_files(shared: &Shared, index: usize, peers: usize) -> Vec<Reader> {
    let mut readers = Vec::new();
    let Inputs::Files(files) = &*shared.inputs else { return readers };
    let settings = &shared.settings;
    let plan = shared.stream_plan(peers);
    let known = crate::io::known_workers(&settings.stream_bytes);
    for (i, p) in files.iter().enumerate() {
        let share = Share { peers, index, file: i, plan: plan.clone() };
        let name = p.display().to_string();
        let opened = if peers > 1 {
            shared.splitter(i, p, share.clone()).map(|s| Reader::split(name.clone(), s, share.clone(), settings.width))
        } else {
            std::fs::File::open(p).map_err(|e| e.to_string()).map(|f| {
                let r = Reader::new(name.clone(), Box::new(f), settings.width, Some(shared.read_bytes.clone()));
                if settings.unpack_thread {
                    r.unpacked_ahead()
                } else {
                    r
                }
            })
        };
        match opened {
            Ok(r) => readers.push(r.with_sync(settings.sync.clone()).with_known_workers(&known)),
            // (The file's primary reader reports it.)
            Err(_) if !share.primary() => {}
            Err(e) => {
                let msg = format!("{name}: cannot open: {e}");
                crate::say!("sidecar: error: {msg}");
                shared.stats.lock().unwrap().error(msg);
            }
        }
    }
    readers
}

/// The Ingest operator's state: its capability, and its streams.
struct Ingest {
    /// Held until the worker's streams have all ended (or an output
    /// failed): the time of the earliest window they may still send to.
    cap: Option<Capability<u64>>,
    streams: Streams,
}

/// One worker's byte streams and what reading them needs.
struct Streams {
    readers: Vec<Reader>,
    activator: Activator,
    shared: Shared,
    index: usize,
    peers: usize,
    analyzed: ProbeHandle<u64>,
    /// To and from the Analyze operator: its analysis thread, whether the
    /// last activation read nothing.
    link: Rc<OperatorLink>,
    /// The fragments of one activation, to send.
    fragments: Vec<Fragment>,
    /// The probes' figures read since they were last sent, by process
    /// (host, process), the latest of each (`TimedFragment::figures`).
    figures: Vec<(u64, u32, ProcessFigures)>,
    /// When the progress bar was last drawn.
    last_bar: Instant,
    /// Fragments that came after their window was analyzed, and the first.
    late: u64,
    first_late: String,
    /// Live: the grace now (it follows late data: [`Grace`]).
    grace: Grace,
    /// Live: how long a connection's unread backlog holds its windows back
    /// past the grace, at most (`--max-backlog`).
    max_backlog: Ns,
    /// The input errors said (a faulty client may open connection after
    /// connection).
    error_lines: RateLimited,
    /// The lines saying windows closed over a backlog (`--max-backlog`).
    backlog_lines: RateLimited,
    /// Bytes of the fragments sent to another worker, and of those to a
    /// worker of another process ([`wire_bytes`]).
    crossing: (u64, u64),
    /// The streams' metadata each worker of another process holds.
    meta_sent: MetaSent,
}

impl Ingest {
    /// One activation: read, send what was read at its windows' times,
    /// move the frontier, and say when to come back.
    fn activate(&mut self, output: &mut Output<'_>) {
        let Some(cap) = self.cap.as_mut() else { return };
        let s = &mut self.streams;
        if s.shared.outputs.stopped() {
            // An output failed or was closed: read no more.
            s.stop_reading();
            self.cap = None;
            return;
        }
        let stopping = s.take_new_connections();
        let throttled = !stopping && s.analysis_is_behind(cap);
        let any_data = s.read(stopping, throttled);
        let hosts = s.hosts_seen();
        if s.shared.live() {
            s.close_due_windows(&hosts, s.grace.now, !throttled);
        }
        s.collect_fragments();
        s.send(output, cap, &hosts);
        s.retire_done_readers();
        s.draw_progress_bar();
        if s.readers.iter().all(|r| r.done) && (!s.shared.live() || stopping) {
            s.finish();
            s.link.set(true, s.shared.job_board.as_deref());
            self.cap = None;
            return;
        }
        s.link.set(throttled || !any_data, s.shared.job_board.as_deref());
        s.advance(cap, &hosts);
        s.schedule_next(throttled, any_data, &hosts);
    }
}

impl Streams {
    /// Live: takes the connections the I/O thread accepted for this worker;
    /// whether the run is stopping (then after the I/O thread's last pass
    /// over the sockets, waited for briefly).
    fn take_new_connections(&mut self) -> bool {
        let Inputs::Live { queues, stop, revise_within, .. } = &*self.shared.inputs else { return false };
        let q = &queues.workers[self.index % queues.workers.len()];
        let stopping = stop.load(Ordering::Relaxed);
        if stopping {
            let t = Instant::now();
            while !queues.io_done.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let mut taken = q.readers.lock().unwrap();
        if !taken.is_empty() {
            // (Only then: the run's figures are locked while lines print.)
            self.shared.stats.lock().unwrap().connections += taken.len() as u64;
        }
        for r in taken.iter_mut() {
            r.ingest.revise_within(*revise_within);
        }
        self.readers.append(&mut taken);
        stopping
    }

    /// Whether the analysis is more than a few windows behind the source
    /// ([`offline_windows_ahead`]; live, 16 for bursts).
    fn analysis_is_behind(&self, cap: &Capability<u64>) -> bool {
        let ahead =
            if self.shared.live() { 16 } else { offline_windows_ahead(self.peers, self.link.analysis_thread_on()) };
        self.analyzed.less_than(&cap.time().saturating_sub(ahead))
    }

    /// Reads a slice of each stream (none while throttled); whether any had
    /// data. When stopping, what has arrived is analyzed: each stream is
    /// read to the end of what is there (a closed connection to its end),
    /// briefly, then stopped.
    fn read(&mut self, stopping: bool, throttled: bool) -> bool {
        let mut any_data = false;
        for r in self.readers.iter_mut() {
            if stopping {
                let t = Instant::now();
                while matches!(r.poll(4 << 20), Polled::Data) && t.elapsed() < Duration::from_millis(500) {}
                r.stop();
            } else if throttled {
                // the analysis is behind: let it catch up
            } else if poll_windows(r) {
                any_data = true;
            }
        }
        any_data
    }

    /// The hosts seen so far; a host new to this process gets its clock
    /// (once, for every worker).
    fn hosts_seen(&mut self) -> Hosts {
        let width = self.shared.settings.width;
        let mut new_host = false;
        let hosts = {
            let mut clocks = self.shared.host_clocks.0.lock().unwrap();
            for r in self.readers.iter() {
                for h in r.ingest.hosts() {
                    clocks.entry(h).or_insert_with(|| {
                        new_host = true;
                        let o = r.ingest.realtime_offset(h).unwrap_or(0);
                        // ceil: a window's timely time is never below the
                        // wall-clock index of its start
                        HostClock { realtime_offset: o, shift: (o.max(0) as u64).div_ceil(width) }
                    });
                }
            }
            Hosts(clocks.iter().map(|(h, c)| (*h, *c)).collect())
        };
        if let (true, Inputs::Live { queues, .. }) = (new_host, &*self.shared.inputs) {
            // The other workers follow a host's clock once they see it: wake
            // them now rather than at their next timeout (up to 100 ms; the
            // first window with `-w 2` was emitted 99.9 ms late).
            for q in &queues.workers {
                q.wake();
            }
        }
        hosts
    }

    /// Live deadline: streams silent since before now − grace close their
    /// windows up to then (their gap is "open"), if they were `read` in
    /// this activation: a stream not read while the analysis is behind may
    /// have its data waiting in its connection's buffer, and forcing it
    /// would make that data late (the soak test saw it: idle connections
    /// holding the windows back 2 s made the source 16 windows ahead at
    /// 100 ms windows). For the same reason a connection whose read
    /// stopped at its budget with bytes left (a backlog: the worker was
    /// busy, its data waited) closes its windows only `--max-backlog`
    /// earlier ([`deadline`]): they wait for what it has not read yet, and
    /// past that limit close without it, counted (`ConnCounts::backlog_cut`).
    fn close_due_windows(&mut self, hosts: &Hosts, grace: Ns, read: bool) {
        let now = now_unix_ns();
        let mut cut = 0;
        for (h, c) in hosts.0.iter().filter(|_| read) {
            if c.realtime_offset == 0 {
                continue;
            }
            for r in self.readers.iter_mut() {
                let t = deadline(now - c.realtime_offset, grace, r.backlog, self.max_backlog);
                if t <= 0 {
                    continue;
                }
                let before = r.backlog.then(|| r.ingest.open_window(*h)).flatten();
                r.ingest.force(*h, t as Ns);
                if let (Some(b), Some(a)) = (before, r.ingest.open_window(*h)) {
                    cut += a.saturating_sub(b);
                }
            }
        }
        if cut > 0 {
            if let Inputs::Live { queues, .. } = &*self.shared.inputs {
                queues.counts.backlog_cut.fetch_add(cut, Ordering::Relaxed);
            }
            let limit = self.max_backlog as f64 / 1e9;
            self.backlog_lines.say(|| {
                format!(
                    "sidecar: a connection's unread backlog is more than {limit} s old: {cut} windows closed without it (--max-backlog); its records for them come late"
                )
            });
        }
    }

    /// Takes each stream's fragments, end markers and faults.
    fn collect_fragments(&mut self) {
        for r in self.readers.iter_mut() {
            let before = self.fragments.len();
            r.take_fragments(&mut self.fragments);
            // Ended streams: a note to every owner (see `Fragment::marker`),
            // at the first window without it; after the streams' last
            // fragments, so that an owner of another process can drop their
            // metadata there (`meta_kept`).
            for (sid, k, marks) in r.ingest.ended.drain(..) {
                // On the timeline its windows were on (clock sync).
                let tl = Some(r.ingest.sync.timeline(sid.host, sid.process)).filter(|&h| h != sid.host);
                for p in 0..self.peers {
                    self.fragments.push(Fragment {
                        stream: Some(sid),
                        window: k,
                        timeline: tl,
                        marker: true,
                        route: p as u64,
                        seq_before: marks.clone(),
                        ..Default::default()
                    });
                }
            }
            // (Late fragments too: their windows are revised, and a longer grace
            // makes the next first reports whole.)
            let late =
                self.fragments[before..].iter().any(|f| f.late || f.faults.iter().any(|x| x.starts_with(LATE_DATA)));
            if late && self.grace.late() {
                self.error_lines
                    .say(|| format!("sidecar: late data: the grace is now {} ms", self.grace.now / 1_000_000));
            }
            for e in r.ingest.errors.drain(..) {
                self.error_lines.say(|| format!("sidecar: error: {e}"));
                self.shared.stats.lock().unwrap().error(e);
            }
            if !r.ingest.probe_figures.is_empty() {
                // This process's totals take them at once (nothing lost
                // here); where another process prints, a carrier takes the
                // latest of each to it (`send`).
                let mut st = self.shared.stats.lock().unwrap();
                for (host, process, f) in &r.ingest.probe_figures {
                    st.totals.probe_figures(*host, *process, f.clone());
                }
            }
            if self.shared.prints_reports {
                r.ingest.probe_figures.clear();
            }
            for (host, process, f) in r.ingest.probe_figures.drain(..) {
                match self.figures.iter_mut().find(|x| (x.0, x.1) == (host, process)) {
                    Some(x) if x.2.seq > f.seq => {}
                    Some(x) => x.2 = f,
                    None => self.figures.push((host, process, f)),
                }
            }
        }
    }

    /// Sends the fragments at the capability's time, each addressed to its
    /// window's timely time; one for a window already analyzed is counted
    /// as late instead.
    fn send(&mut self, output: &mut Output<'_>, cap: &Capability<u64>, hosts: &Hosts) {
        let mut session = output.session(cap);
        let t0 = *cap.time();
        // (Taken out while fragments are counted, then put back for its room.)
        let mut fragments = std::mem::take(&mut self.fragments);
        for mut f in fragments.drain(..) {
            let host = crate::analysis::causality::window_host(&f);
            let t = f.window + hosts.shift(host);
            // (A late fragment goes now, to revise its window: `revise`.)
            if t < t0 && !f.late {
                if let Some(forget) = self.forget_meta(t0, &f) {
                    session.give(forget);
                }
                if self.late == 0 {
                    self.first_late = format!(
                        "{} window {} of host {host:016x}{}",
                        f.stream.map_or("a stream".to_string(), |s| s.to_string()),
                        f.window,
                        if f.marker { " (end marker)" } else { "" }
                    );
                }
                self.late += 1;
                self.grace.late();
                continue;
            }
            f.other_hosts = match &self.shared.settings.timelines {
                Some(run) => run.iter().copied().filter(|&h| h != host).collect(),
                None => hosts.0.iter().map(|x| x.0).filter(|&h| h != host).collect(),
            };
            let mut tf = TimedFragment { host, time: t, from: self.index as u32, fragment: f, figures: Vec::new() };
            self.cross(&mut tf);
            session.give(tf);
        }
        self.fragments = fragments;
        if !self.figures.is_empty() {
            session.give(TimedFragment::carrier(t0, self.index as u32, std::mem::take(&mut self.figures)));
        }
    }

    /// A fragment leaving for another process goes packed
    /// (`analysis::pack`) and without the metadata its owner holds already
    /// (`meta_kept`). Counts a fragment that leaves this worker (its
    /// window's owner is another), and this process, by its approximate
    /// size on the wire.
    fn cross(&mut self, tf: &mut TimedFragment) {
        let to = (super::to_window_owner(tf) % self.peers as u64) as usize;
        if to != self.index {
            let other_process = !self.shared.local_workers.contains(&to);
            if other_process {
                self.meta_sent.send(&mut tf.fragment, to);
                tf.fragment.pack();
            }
            let n = wire_bytes(&tf.fragment, other_process);
            self.crossing.0 += n;
            if other_process {
                self.crossing.1 += n;
            }
        }
    }

    /// End marker `f` is too late to send: if its route, a worker of
    /// another process, holds its stream's metadata, it is told to drop it
    /// now.
    fn forget_meta(&mut self, t0: u64, f: &Fragment) -> Option<TimedFragment> {
        let (sid, to) = (f.stream.filter(|_| f.marker)?, f.route as usize);
        if self.shared.local_workers.contains(&to) || !self.meta_sent.forget(sid, to) {
            return None;
        }
        let forget = Fragment {
            stream: f.stream,
            marker: true,
            route: f.route,
            meta_on_wire: MetaOnWire::Forget,
            ..Default::default()
        };
        Some(TimedFragment { host: 0, time: t0, from: self.index as u32, fragment: forget, figures: Vec::new() })
    }

    /// Drops the readers that are done, their fragments, end markers and
    /// errors taken: what they read is counted, and nothing else of them is
    /// kept (a live sidecar serves connection after connection; their
    /// buffers go back to the allocator for the next ones).
    fn retire_done_readers(&mut self) {
        if self.readers.iter().any(|r| r.done) {
            let mut st = self.shared.stats.lock().unwrap();
            count_read(&mut st, self.readers.iter().filter(|r| r.done));
            self.readers.retain(|r| !r.done);
        }
    }

    fn draw_progress_bar(&mut self) {
        if self.shared.settings.progress_bar && self.index == 0 && self.last_bar.elapsed() > Duration::from_millis(200)
        {
            self.last_bar = Instant::now();
            let total = self.shared.total_bytes;
            let r = self.shared.read_bytes.load(Ordering::Relaxed);
            let pct = if total > 0 { 100.0 * r as f64 / total as f64 } else { 0.0 };
            let _ = write!(std::io::stderr(), "\r  reading {:>5.1}%  {} / {} MB ", pct, r >> 20, total >> 20);
        }
    }

    fn clear_progress_bar(&self) {
        if self.shared.settings.progress_bar && self.index == 0 {
            let _ = write!(std::io::stderr(), "\r{:60}\r", "");
        }
    }

    /// An output failed or was closed: counts what was read, and drops the
    /// streams.
    fn stop_reading(&mut self) {
        let mut st = self.shared.stats.lock().unwrap();
        count_read(&mut st, &self.readers);
        st.crossing_workers += self.crossing.0;
        st.crossing_processes += self.crossing.1;
        if let Some(g) = self.grace.tell() {
            crate::say!("sidecar: {g}");
        }
        self.clear_progress_bar();
        self.readers.clear();
    }

    /// Every stream has ended: counts what was read, and the late
    /// fragments as an error.
    fn finish(&mut self) {
        let mut st = self.shared.stats.lock().unwrap();
        count_read(&mut st, &self.readers);
        st.crossing_workers += self.crossing.0;
        st.crossing_processes += self.crossing.1;
        if let Some(g) = self.grace.tell() {
            crate::say!("sidecar: {g}");
        }
        if self.late > 0 {
            let e = format!(
                "{} fragments arrived after their window was analyzed (the first: {})",
                self.late, self.first_late
            );
            crate::say!("sidecar: error: {e}");
            st.error(e);
        }
        self.clear_progress_bar();
    }

    /// Moves the capability to the earliest window a stream may still send
    /// to. Live, a new connection that has shown no stream yet holds back
    /// the windows its first records may fall in (on the wall clock a
    /// window's timely time is never later than on its host's timeline: the
    /// hold errs early). With no stream here, the windows follow the wall
    /// clock of the hosts seen (in their timely time), a little more than
    /// the grace behind so that a stream connecting now is not late. (Only
    /// here, once this activation's fragments are sent: a connection that
    /// ended behind the wall clock sent its last fragments and its end
    /// markers at their windows first, instead of finding them closed.)
    fn advance(&self, cap: &mut Capability<u64>, hosts: &Hosts) {
        let width = self.shared.settings.width;
        let live = self.shared.live();
        let joining = match live {
            true => join_hold(
                self.readers.iter().filter(|r| !r.done && !r.ingest.has_streams()).filter_map(|r| r.joined_unix_ns),
                now_unix_ns(),
                self.grace.now as i128,
                width,
            ),
            false => None,
        };
        let idle = (live && self.readers.iter().all(|r| r.done)).then(|| self.wall_clock_window(hosts));
        let min = self.readers.iter().filter_map(|r| r.frontier(|h| hosts.shift(h))).chain(joining).chain(idle).min();
        if let Some(m) = min {
            if m > *cap.time() {
                cap.downgrade(&m);
            }
        }
    }

    /// Live, with no stream open here: the window (timely time) the wall
    /// clock of the hosts seen has reached, [`idle_lag`] behind.
    fn wall_clock_window(&self, hosts: &Hosts) -> u64 {
        let width = self.shared.settings.width;
        let now = now_unix_ns();
        let back = idle_lag(self.grace.now) as i128;
        hosts
            .0
            .iter()
            .map(|(_, c)| (((now - c.realtime_offset - back).max(0) as u64) / width) + c.shift)
            .min()
            .unwrap_or_else(|| (((now - back).max(0) as u64) / width).saturating_sub(1))
    }

    /// When to run again: soon while throttled, at once after data, else
    /// (live) when data wakes it or the next window's deadline passes.
    fn schedule_next(&self, throttled: bool, any_data: bool, hosts: &Hosts) {
        if throttled {
            self.activator.activate_after(Duration::from_millis(1));
        } else if any_data {
            self.activator.activate();
        } else if self.shared.live() {
            self.activator.activate_after(Duration::from_nanos(self.next_deadline(self.grace.now, hosts)));
        } else {
            // A file shared with a worker that is behind (its queue of
            // frames full, `io::Splitter`): come back when it has caught up.
            self.activator.activate_after(Duration::from_micros(200));
        }
    }

    /// Live, without data: ns until a window's deadline passes, to run then
    /// (and now and then to see a stop). With no stream left the deadline is
    /// the idle lag's: waking at the grace's found the window not yet due,
    /// and the next wake came up to 100 ms later.
    fn next_deadline(&self, grace: Ns, hosts: &Hosts) -> u64 {
        let width = self.shared.settings.width;
        let now = now_unix_ns();
        let lag = if self.readers.iter().all(|r| r.done) { idle_lag(grace) } else { grace };
        let next = hosts
            .0
            .iter()
            .map(|(_, c)| {
                let t = (now - c.realtime_offset - lag as i128).max(0) as u64;
                (t / width + 1) * width - t
            })
            .min()
            .unwrap_or(u64::MAX);
        next.clamp(1_000_000, 100_000_000)
    }
}

/// How many windows the source reads ahead of the analysis offline: two
/// for one worker (one with its analysis thread: the window on that thread
/// is one more in flight; on `t50`, peak RSS 548–565 MB against 570–628
/// reading two ahead and 444–458 without the thread, no slower), and one
/// more per further worker, so that each has a window to analyze while the
/// others do (windows go to their owners round robin). Memory is then
/// bounded by `peers + 1` windows' fragments (docs/performance.md).
fn offline_windows_ahead(peers: usize, analysis_thread: bool) -> u64 {
    let base = if analysis_thread { 1 } else { 2 };
    base + peers.saturating_sub(1) as u64
}

/// A fragment's size as it would cross to another process: its records'
/// parts (items, reads, message halves, marks) at their size in memory, or
/// packed (to another process: `analysis::pack`), its strings, the
/// stream's metadata when it goes to another process (none where the owner
/// kept it: `meta_kept`; within a process it is shared, not sent), and the
/// fixed part. An estimate (timely serializes it with its own encoding),
/// cheap enough to count every fragment that leaves its worker.
pub(super) fn wire_bytes(f: &Fragment, other_process: bool) -> u64 {
    use std::mem::size_of_val;
    let groups: usize = f.msgs.groups.iter().map(|g| 16 + size_of_val(&g.entries[..])).sum();
    let n = std::mem::size_of::<Fragment>()
        + size_of_val(&f.items[..])
        + size_of_val(&f.msgs.reads[..])
        + groups
        + size_of_val(&f.seq_before[..])
        + f.faults.iter().map(String::len).sum::<usize>()
        + f.program.len()
        + f.packed.len()
        + size_of_val(&f.other_hosts[..]);
    n as u64 + if other_process { f.meta.wire_bytes() } else { 0 }
}

/// The windows one read may carry a stream ahead (see [`poll_windows`]).
const WINDOWS_PER_READ: u64 = 64;

/// Reads up to 4 MB of `r`, in 64 KB slices, stopping once what was read
/// reaches [`WINDOWS_PER_READ`] windows past where the read began: the
/// windows in flight are bounded in windows, not only in bytes. (4 MB at
/// once is 66,000 windows of 30 µs: every one's fragments and report were
/// held at once, 1.3 GB for a 6 MB trace.) Whether it read any data; sets
/// `r.backlog` when it stopped at either bound with bytes left to read.
fn poll_windows(r: &mut Reader) -> bool {
    const SLICE: usize = 64 << 10;
    let mut start = r.ingest.reach();
    let mut any = false;
    let mut drained = false;
    for _ in 0..(4 << 20) / SLICE {
        if !matches!(r.poll(SLICE), Polled::Data) {
            drained = true;
            break;
        }
        any = true;
        let now = r.ingest.reach();
        match (start, now) {
            (Some(a), Some(b)) if b >= a.saturating_add(WINDOWS_PER_READ) => break,
            (None, _) => start = now,
            _ => {}
        }
    }
    r.backlog = !drained && !r.done && r.has_unread();
    any
}

/// Adds the records and bytes the readers read to the run's figures.
fn count_read<'a>(st: &mut RunStats, readers: impl IntoIterator<Item = &'a Reader>) {
    for r in readers {
        st.records += r.ingest.records;
        st.bytes += r.ingest.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One worker reads two windows ahead (one with its analysis thread);
    /// each further worker gets one more, so that with `w` workers `w`
    /// windows can be analyzed at once.
    #[test]
    fn offline_windows_in_flight_grow_with_the_workers() {
        assert_eq!(offline_windows_ahead(1, false), 2);
        assert_eq!(offline_windows_ahead(1, true), 1);
        assert_eq!(offline_windows_ahead(2, false), 3);
        assert_eq!(offline_windows_ahead(16, true), 16);
    }

    #[test]
    fn a_new_connection_holds_the_windows_its_first_records_may_fall_in() {
        let s = 1_000_000_000i128;
        let (grace, width) = (30_000_000, 100_000_000);
        // Accepted at 10 s: its first records may lie up to 100 ms (plus the
        // grace) before, so window 98 (9.8 s to 9.9 s) is held.
        assert_eq!(join_hold([10 * s].into_iter(), 10 * s + s / 2, grace, width), Some(98));
        // The earliest of several; one accepted too long ago is not waited for.
        assert_eq!(join_hold([10 * s, 11 * s, 7 * s].into_iter(), 11 * s + s / 2, grace, width), Some(98));
        assert_eq!(join_hold([10 * s].into_iter(), 12 * s, grace, width), None);
        assert_eq!(join_hold(std::iter::empty(), 12 * s, grace, width), None);
    }
}
