//! Stages 2 and 3: who is in the window (streams, processes, the blocks of
//! worker indices a timely cluster's processes run) and whether the window
//! is complete (every stream a process announced present, nothing lost).

use rustc_hash::FxHashMap;

use crate::analysis::model::{Counters, Fragment, Sid};
use crate::analysis::report::{Instrumentation, StreamInfo, WindowReport};

/// The window's streams and processes, and how a worker index that a
/// message names resolves to a stream.
///
/// Process ids are per host (every host of a containerized cluster may run
/// its engine as process 1): the window's processes are keyed by (host, id),
/// numbered densely (`proc_keys` names them, `pk` gives each stream's).
pub(super) struct Streams {
    /// Per stream (local index): its id.
    pub sids: Vec<Sid>,
    /// The processes, sorted: (host, pid).
    pub proc_keys: Vec<(u64, u32)>,
    /// Per stream: its process (index into `proc_keys`).
    pub pk: Vec<u32>,
    /// Per process: its streams.
    pub procs: Vec<Vec<usize>>,
    /// Per process: the workers it announced (Hello; 0: none seen) and the
    /// base of its block of global worker indices.
    pub blocks: Vec<(u32, u32)>,
    /// Per process: the global worker indices its streams here span
    /// (lowest, highest + 1), and its program (the same number for the same
    /// name): what tells a cluster's processes apart when they announced no
    /// worker count (a probe built without `workers(n)`, as timely programs
    /// build it).
    spans: Vec<(u32, u32, u32)>,
    /// Per process: the span of global worker indices of its streams known
    /// to the sidecar, here or not ([`Fragment::process_workers`]; None:
    /// not said).
    known: Vec<Option<(u32, u32)>>,
    by_pw: FxHashMap<(u32, u32), usize>,
    by_w: FxHashMap<u32, Vec<usize>>,
}

impl Streams {
    /// The streams of `frags` (one per stream, merged), on host `host`.
    pub fn new(host: u64, frags: &[Fragment]) -> Streams {
        let sids: Vec<Sid> = frags.iter().map(|f| f.stream.unwrap_or(Sid { host, process: 0, worker: 0 })).collect();
        let mut proc_keys: Vec<(u64, u32)> = sids.iter().map(|s| (s.host, s.process)).collect();
        proc_keys.sort_unstable();
        proc_keys.dedup();
        let key_of = |s: Sid| proc_keys.binary_search(&(s.host, s.process)).map_or(u32::MAX, |k| k as u32);
        let pk: Vec<u32> = sids.iter().map(|&s| key_of(s)).collect();
        let mut by_pw: FxHashMap<(u32, u32), usize> = FxHashMap::default();
        let mut by_w: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
        let mut procs: Vec<Vec<usize>> = vec![Vec::new(); proc_keys.len()];
        for (i, s) in sids.iter().enumerate() {
            by_pw.insert((pk[i], s.worker), i);
            by_w.entry(s.worker).or_default().push(i);
            procs[pk[i] as usize].push(i);
        }
        // Timely numbers workers globally, each process a contiguous block
        // of its worker count: the block's base is found from the lowest
        // worker present.
        let blocks = procs
            .iter()
            .map(|members| {
                let expected = members.iter().map(|&i| frags[i].workers_expected).max().unwrap_or(0);
                let e = expected.max(1);
                let lo = members.iter().map(|&i| sids[i].worker).min().unwrap_or(0);
                (expected, lo / e * e)
            })
            .collect();
        let known: Vec<Option<(u32, u32)>> = procs
            .iter()
            .map(|members| {
                let said = members.iter().map(|&i| frags[i].process_workers).filter(|(lo, hi)| lo < hi);
                said.reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
            })
            .collect();
        let mut programs: Vec<&str> = Vec::new();
        let spans = procs
            .iter()
            .zip(&known)
            .map(|(members, known)| {
                let (mut lo, mut hi) = known.unwrap_or((u32::MAX, 0));
                for &i in members {
                    lo = lo.min(sids[i].worker);
                    hi = hi.max(sids[i].worker.saturating_add(1));
                }
                let lo = lo.min(hi);
                let name = members.first().map_or("", |&i| frags[i].program.as_str());
                let program = programs.iter().position(|p| *p == name).unwrap_or_else(|| {
                    programs.push(name);
                    programs.len() - 1
                });
                (lo, hi, program as u32)
            })
            .collect();
        Streams { sids, proc_keys, pk, procs, blocks, spans, known, by_pw, by_w }
    }

    pub fn len(&self) -> usize {
        self.sids.len()
    }

    /// The process of a stream id (u32::MAX: none here).
    #[inline]
    pub fn key_of(&self, s: Sid) -> u32 {
        self.proc_keys.binary_search(&(s.host, s.process)).map_or(u32::MAX, |k| k as u32)
    }

    /// The processes, in (host, pid) order.
    pub fn processes(&self) -> std::ops::Range<u32> {
        0..self.proc_keys.len() as u32
    }

    /// Process `p`'s block of global worker indices (None: no Hello seen).
    pub fn block(&self, p: u32) -> Option<(u32, u32)> {
        let (e, base) = *self.blocks.get(p as usize)?;
        (e > 0).then(|| (base, base.saturating_add(e)))
    }

    /// Whether `p` and `q` are processes of one timely cluster: their
    /// blocks of global worker indices do not overlap. A process that
    /// announced its worker count (Hello) has its block; one that did not,
    /// the span of its streams here, and is a peer only of a process of the
    /// same program (independent programs number their workers from 0
    /// alike, so their spans overlap anyway; a cluster's processes are one
    /// program).
    #[inline]
    pub fn peers(&self, p: u32, q: u32) -> bool {
        if p == q {
            return false;
        }
        let (a, b) = (self.block(p), self.block(q));
        let program = |k: u32| self.spans.get(k as usize).map(|s| s.2);
        let same_program = || program(p).is_some() && program(p) == program(q);
        if (a.is_none() || b.is_none()) && !same_program() {
            return false;
        }
        match (self.cluster_block(p), self.cluster_block(q)) {
            (Some(a), Some(b)) => a.1 <= b.0 || b.1 <= a.0,
            _ => false,
        }
    }

    /// Process `p`'s block of global worker indices: announced, or else the
    /// span of its streams here (see [`Streams::peers`]).
    pub fn cluster_block(&self, p: u32) -> Option<(u32, u32)> {
        self.block(p).or_else(|| {
            let (lo, hi, _) = self.spans.get(p as usize)?;
            (lo < hi).then_some((*lo, *hi))
        })
    }

    /// Worker index → local index, from `process`: its own stream, else the
    /// stream of a cluster peer's worker (timely worker indices are global
    /// across a cluster's processes). Not another program's: independent
    /// programs on one host number their workers alike.
    #[inline]
    pub fn resolve(&self, process: u32, worker: u32) -> Option<usize> {
        self.by_pw
            .get(&(process, worker))
            .copied()
            .or_else(|| self.by_w.get(&worker)?.iter().copied().find(|&i| self.peers(process, self.pk[i])))
    }

    /// Whether worker `w` belongs to stream `i`'s process although it has no
    /// stream here: its messages are not "another timeline" (counted in
    /// flight or from before, in a window marked incomplete unless its
    /// stream ended).
    #[inline]
    pub fn own_worker(&self, i: usize, w: u32) -> bool {
        let p = self.pk[i] as usize;
        let (e, b) = self.blocks[p];
        (e > 0 && w >= b && w < b.saturating_add(e)) || self.known[p].is_some_and(|(lo, hi)| (lo..hi).contains(&w))
    }

    /// Process `p`'s workers: its announced block, else the span of its
    /// streams known to the sidecar (None: neither).
    fn workers_of(&self, p: u32) -> Option<(u32, u32)> {
        self.block(p).or(self.known[p as usize])
    }
}

/// Fills the report's streams and instrumentation, and returns the reasons
/// the window is incomplete so far plus, per process, how many of its
/// announced streams are missing.
pub(super) fn check_completeness(
    streams: &Streams,
    frags: &[Fragment],
    ended_of: &FxHashMap<(u64, u32), Vec<u32>>,
    rep: &mut WindowReport,
) -> (Vec<String>, Vec<usize>) {
    let mut reasons = stream_reports(streams, frags, rep);
    let missing = streams
        .processes()
        .map(|p| {
            let ended = ended_of.get(&streams.proc_keys[p as usize]).map_or(&[][..], |v| v.as_slice());
            missing_streams(streams, p, ended, &mut reasons)
        })
        .collect();
    (reasons, missing)
}

/// How a stream's fault for data that came after its window was analyzed
/// begins (live only; the window is incomplete, the stream is sound).
pub const LATE_DATA: &str = "late data";

/// Each stream's line in the report, the window's instrumentation summed,
/// and the faults and losses the streams reported.
fn stream_reports(streams: &Streams, frags: &[Fragment], rep: &mut WindowReport) -> Vec<String> {
    let sids = &streams.sids;
    let mut reasons: Vec<String> = Vec::new();
    let mut sum = Counters::default();
    let hosts_named = sids.iter().any(|s| s.host != sids[0].host);
    for (i, f) in frags.iter().enumerate() {
        let c = &f.counters;
        sum.add(c);
        for why in &f.faults {
            // (Live: the data came after its window was analyzed; what to do.)
            let advice = if why.starts_with(LATE_DATA) { ": raise --grace" } else { "" };
            reasons.push(format!("worker {}: {why}{advice}", sids[i].worker));
        }
        if c.lost > 0 && !f.faults.iter().any(|x| x.contains("lost")) {
            reasons.push(format!("worker {}: {} records lost", sids[i].worker, c.lost));
        }
        rep.streams.push(StreamInfo {
            host: format!("{:016x}", sids[i].host),
            process: sids[i].process,
            worker: sids[i].worker,
            host_name: if hosts_named { f.host_name.clone() } else { String::new() },
            program: f.program.clone(),
            covered_ns: [f.covered.0, f.covered.1],
            records: c.records,
            faults: f.faults.clone(),
        });
    }
    rep.events = sum.records;
    rep.lost_records = sum.lost;
    rep.instrumentation = Instrumentation::from(&sum);
    reasons
}

/// Streams process `p` runs (workers=N in its Hello; else the streams of
/// the process the sidecar knows of: [`Fragment::process_workers`]) that
/// are not present in this window, with a reason naming them.
///
/// A stream is present in a window when it sent a fragment for it: from its
/// first record to its End the stream's windower hands over one for every
/// window its timeline overlaps (an idle stretch included), so a stream that
/// starts later than the others inside the window, or ends before the
/// window's end, is present in it. Absent with good reason only: the stream
/// ended (End frame, or cut off, which faults its own last window) before
/// this window. Any other absence makes the window incomplete, naming the
/// workers: a stream that never appeared (in every window of the process),
/// one whose data did not arrive in time (live), and one whose first record
/// is in a later window (a thread starting after the window: while the
/// window is analyzed that cannot be told from a missing stream, and the
/// window lacks that worker either way).
fn missing_streams(streams: &Streams, p: u32, ended: &[u32], reasons: &mut Vec<String>) -> usize {
    // (Neither a worker count nor the streams known: nothing to hold the
    // streams here against.)
    let Some((base, hi)) = streams.workers_of(p) else { return 0 };
    let expected = hi - base;
    let mut here: Vec<u32> = streams.procs[p as usize].iter().map(|&i| streams.sids[i].worker).collect();
    here.sort_unstable();
    here.dedup();
    let gone = ended.iter().filter(|w| here.binary_search(w).is_err()).count();
    let alive = (expected as usize).saturating_sub(gone);
    let missing = alive.saturating_sub(here.len());
    if missing == 0 {
        return 0;
    }
    // The absent workers of the process's block, the first few by name: the
    // block's size comes from the Hello, and a bogus one (billions of
    // workers) must not be spelled out every window.
    const NAMED: usize = 16;
    let absent_of = |w: &u32| here.binary_search(w).is_err() && ended.binary_search(w).is_err();
    let absent: Vec<String> = (base..hi).filter(absent_of).take(NAMED).map(|w| w.to_string()).collect();
    let in_block = |w: &&u32| (base..hi).contains(*w);
    let accounted = here.iter().filter(in_block).count()
        + ended.iter().filter(in_block).filter(|w| here.binary_search(w).is_err()).count();
    let more = ((hi - base) as usize).saturating_sub(accounted).saturating_sub(absent.len());
    let who = match (absent.len(), more) {
        (0, _) => String::new(),
        (1, 0) => format!("worker {}: ", absent[0]),
        (_, 0) => format!("workers {}: ", absent.join(", ")),
        _ => format!("workers {} and {more} more: ", absent.join(", ")),
    };
    let (host_p, pid) = streams.proc_keys[p as usize];
    let on =
        if streams.proc_keys.iter().any(|k| k.0 != host_p) { format!(" on host {host_p:016x}") } else { String::new() };
    reasons.push(format!(
        "process {pid}{on}: {} of {alive} worker streams present ({who}no stream in this window: missing, or not started yet)",
        here.len()
    ));
    missing
}

/// Unmatched message halves by (process, worker named), for telling a
/// cluster's process that has not started yet from a missing stream; at
/// most [`Strangers::KEPT`] pairs (a corrupt stream naming billions of
/// workers must not grow it), the rest counted apart.
#[derive(Default)]
pub(super) struct Strangers {
    pub by_worker: rustc_hash::FxHashMap<(u32, u32), u64>,
    pub others: u64,
}

impl Strangers {
    const KEPT: usize = 256;

    pub fn add(&mut self, process: u32, worker: u32) {
        let full = self.by_worker.len() >= Self::KEPT;
        match self.by_worker.get_mut(&(process, worker)) {
            Some(n) => *n += 1,
            None if full => self.others += 1,
            None => {
                self.by_worker.insert((process, worker), 1);
            }
        }
    }
}

/// The workers of the job that no process here runs yet: a timely
/// cluster's processes start up to a second apart (timely's connection loop
/// retries once a second), and until every process is there the windows of
/// the ones that are lack the others' workers. That is not a fault, and the
/// window is not complete either.
///
/// Timely numbers a cluster's workers globally, each process a block of its
/// worker count from 0: a process whose block starts at `base` > 0 says
/// that workers `0..base` exist, and a message half naming a worker outside
/// every block here says that worker exists. Such a worker, not in the
/// block of any process present and not among the streams known to have
/// ended, is not running yet (or its process never connects: its windows
/// say so all along). Not when other hosts are analyzed on timelines of
/// their own (unsynchronized): the worker may be running there.
#[derive(Clone)]
pub(super) struct NotStarted {
    /// The first [`NotStarted::NAMED`] of them, ascending.
    pub workers: Vec<u32>,
    /// How many more.
    pub more: u64,
    /// The unmatched message halves that name one of them.
    pub halves: u64,
}

impl NotStarted {
    const NAMED: usize = 16;

    /// The window's reason, naming the workers (`w0: process not started
    /// yet`), or None.
    pub fn reason(&self) -> Option<String> {
        let first = self.workers.first()?;
        let names: Vec<String> = self.workers.iter().map(|w| format!("w{w}")).collect();
        let who = match (names.len(), self.more) {
            (1, 0) => format!("w{first}: process not started yet"),
            (_, 0) => format!("{}: processes not started yet", names.join(", ")),
            _ => format!("{} and {} more: processes not started yet", names.join(", "), self.more),
        };
        Some(match self.halves {
            0 => who,
            n => format!("{who} ({n} message halves with them)"),
        })
    }

    /// Whether worker `w` is one of them (the first named only).
    pub fn has(&self, w: u32) -> bool {
        self.workers.binary_search(&w).is_ok()
    }
}

/// The job's workers not running yet in this window (see [`NotStarted`]).
pub(super) fn not_started(
    streams: &Streams,
    ended_of: &FxHashMap<(u64, u32), Vec<u32>>,
    strangers: &Strangers,
    other_timelines: bool,
) -> NotStarted {
    if other_timelines {
        return NotStarted { workers: Vec::new(), more: 0, halves: 0 };
    }
    // Where the job's workers are known to be: below a process's block,
    // and where its streams' messages go.
    let mut wanted: Vec<(u32, u32)> = Vec::new();
    let mut running: Vec<(u32, u32)> = Vec::new();
    for p in streams.processes() {
        if let Some((base, hi)) = streams.cluster_block(p) {
            wanted.push((0, base));
            running.push((base, hi));
        }
    }
    for &(p, w) in strangers.by_worker.keys() {
        if streams.cluster_block(p).is_some() {
            wanted.push((w, w.saturating_add(1)));
        }
    }
    let mut ended: Vec<u32> = ended_of.values().flatten().copied().collect();
    ended.sort_unstable();
    ended.dedup();
    let absent = subtract(merge(wanted), &merge(running));
    let mut out = NotStarted { workers: Vec::new(), more: 0, halves: 0 };
    for &(lo, hi) in &absent {
        let gone = ended.iter().filter(|w| (lo..hi).contains(*w)).count() as u64;
        let mut named = (lo..hi).filter(|w| ended.binary_search(w).is_err());
        while out.workers.len() < NotStarted::NAMED {
            let Some(w) = named.next() else { break };
            out.workers.push(w);
        }
        let taken = out.workers.iter().filter(|w| (lo..hi).contains(*w)).count() as u64;
        out.more += (hi - lo) as u64 - gone - taken;
    }
    let absent_has = |w: u32| {
        let k = absent.partition_point(|r| r.1 <= w);
        absent.get(k).is_some_and(|r| r.0 <= w) && ended.binary_search(&w).is_err()
    };
    out.halves = strangers.by_worker.iter().filter(|((_, w), _)| absent_has(*w)).map(|(_, n)| n).sum();
    out
}

/// Half-open ranges sorted and merged (empty ones dropped).
fn merge(mut v: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    v.retain(|r| r.0 < r.1);
    v.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(l) if r.0 <= l.1 => l.1 = l.1.max(r.1),
            _ => out.push(r),
        }
    }
    out
}

/// `a` minus `b`, both sorted and merged.
fn subtract(a: Vec<(u32, u32)>, b: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for (mut lo, hi) in a {
        for &(blo, bhi) in b {
            if bhi <= lo || blo >= hi {
                continue;
            }
            if blo > lo {
                out.push((lo, blo));
            }
            lo = lo.max(bhi);
        }
        if lo < hi {
            out.push((lo, hi));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `program`'s process `process`, worker `worker`, which
    /// announced `expected` workers (0: none).
    fn stream(process: u32, worker: u32, program: &str, expected: u32) -> Fragment {
        let stream = Some(Sid { host: 1, process, worker });
        Fragment { stream, program: program.into(), workers_expected: expected, ..Default::default() }
    }

    /// A timely cluster's processes that announced no worker count (a
    /// probe built without `workers(n)`) are still peers: their streams'
    /// spans of global worker indices, 0–1 and 2–3, do not overlap, and
    /// they are one program. So worker 0, named by process 1's streams,
    /// resolves to process 0's stream (before, no process had a block and
    /// every message between them was "not on this timeline").
    #[test]
    fn a_clusters_processes_without_a_worker_count_are_peers_by_their_streams() {
        let frags: Vec<Fragment> = [(10, 0), (10, 1), (11, 2), (11, 3)].map(|(p, w)| stream(p, w, "job", 0)).into();
        let s = Streams::new(1, &frags);
        let (p0, p1) = (s.key_of(frags[0].stream.unwrap()), s.key_of(frags[2].stream.unwrap()));
        assert_eq!((s.block(p0), s.cluster_block(p0), s.cluster_block(p1)), (None, Some((0, 2)), Some((2, 4))));
        assert!(s.peers(p0, p1) && s.peers(p1, p0) && !s.peers(p0, p0));
        assert_eq!(s.resolve(p1, 0), Some(0));
        assert_eq!(s.resolve(p0, 3), Some(3));
        assert_eq!(s.resolve(p0, 7), None);
        // (Announced blocks still decide when there are: process 11 says
        // 4 workers, so its block is 0–3, which overlaps process 10's.)
        let mut announced = frags.clone();
        announced[2].workers_expected = 4;
        announced[3].workers_expected = 4;
        let s = Streams::new(1, &announced);
        assert_eq!(s.cluster_block(p1), Some((0, 4)));
        assert!(!s.peers(p0, p1));
    }

    /// Two programs, or two runs of one program, are not peers: another
    /// program's workers 2–3 are not this one's; two runs number their
    /// workers from 0 alike, so their spans overlap.
    #[test]
    fn independent_programs_are_not_peers_by_their_streams() {
        let other: Vec<Fragment> =
            [(10, 0, "a"), (10, 1, "a"), (11, 2, "b"), (11, 3, "b")].map(|(p, w, prog)| stream(p, w, prog, 0)).into();
        let s = Streams::new(1, &other);
        assert!(!s.peers(0, 1));
        assert_eq!(s.resolve(1, 0), None);
        let twice: Vec<Fragment> = [(10, 0), (10, 1), (11, 0), (11, 1)].map(|(p, w)| stream(p, w, "a", 0)).into();
        let s = Streams::new(1, &twice);
        assert!(!s.peers(0, 1));
        assert_eq!(s.resolve(0, 1), Some(1));
        assert_eq!(s.resolve(1, 0), Some(2));
    }

    /// One process of four workers, announced by none (the one-line
    /// attach), whose workers 1–3 have not recorded yet in this window
    /// (they were in the program's own code before their first step): only
    /// worker 0's fragment is here, and it says the process runs workers
    /// 0–3. They are the process's own workers, not another process "not
    /// started yet" (before, the process's block was worker 0's alone, and
    /// its messages to them made the window say so), and the window names
    /// them as a process with an announced count would.
    #[test]
    fn a_process_without_a_worker_count_runs_the_workers_of_its_known_streams() {
        let mut alone = stream(10, 0, "job", 0);
        alone.process_workers = (0, 4);
        let frags = vec![alone];
        let s = Streams::new(1, &frags);
        assert_eq!(s.cluster_block(0), Some((0, 4)));
        assert!(s.own_worker(0, 3) && !s.own_worker(0, 4));
        let mut strangers = Strangers::default();
        strangers.add(0, 2);
        let nobody = not_started(&s, &FxHashMap::default(), &strangers, false);
        assert!(nobody.workers.is_empty() && nobody.more == 0, "{:?}", nobody.workers);
        let mut reasons = Vec::new();
        assert_eq!(missing_streams(&s, 0, &[], &mut reasons), 3);
        assert_eq!(
            reasons,
            ["process 10: 1 of 4 worker streams present (workers 1, 2, 3: no stream in this window: missing, or not started yet)"]
        );
        // (A stream of them that ended is not missing.)
        let mut reasons = Vec::new();
        assert_eq!(missing_streams(&s, 0, &[1], &mut reasons), 2);
        // Without what its streams are, a process holds nothing against
        // the window: worker 0 alone, nothing missing.
        let s = Streams::new(1, &[stream(10, 0, "job", 0)]);
        assert_eq!(missing_streams(&s, 0, &[], &mut Vec::new()), 0);
        assert!(!s.own_worker(0, 1));
    }
}
