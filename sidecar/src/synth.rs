//! A synthetic timely-like trace, written with `ringlog::Encoder`: for
//! benchmarks, long runs and end-to-end tests. Each worker runs rounds: an
//! exchange operator (op 1) sends one message to every worker, then (op 2)
//! reads the messages of the round once all have arrived — so a slow worker
//! (the straggler) makes the others wait — then sends progress; progress from
//! others is read at the start of a later round.
#![allow(clippy::needless_range_loop)]

use ringlog::{ClockDomain, ClockSample, Encoder, EndStats, Event, Hello, Meta, Record, StreamId, PROCESS_WIDE};

pub struct SynthConfig {
    pub workers: u32,
    /// Stop after about this many records.
    pub records: u64,
    /// This worker's operator 1 takes `slow` times longer (None: no straggler).
    pub straggler: Option<u32>,
    pub slow: u64,
    /// Records per frame.
    pub batch: usize,
    pub host: u64,
    pub pid: u32,
    /// Start of the trace on the host's CLOCK_MONOTONIC, ns.
    pub t0_ns: u64,
    /// How Records frames are compressed: zstd as the probe writes files,
    /// or none as it writes into a Unix socket (what a live sidecar reads).
    pub compression: ringlog::Compression,
    /// Whom each worker sends its messages and progress to.
    pub pattern: Pattern,
    /// Workers per process (0: all in one): a timely cluster's processes
    /// on one host, numbered from `pid`, each with its process-wide stream;
    /// workers are numbered across the cluster, as timely numbers them.
    pub per_process: u32,
    /// Operators each worker declares (with a channel each) that never
    /// run: a large dataflow most of whose operators are idle in a window.
    pub idle_operators: u32,
    /// Channels the exchange's messages are spread over (a message's
    /// channel is its sequence number modulo this; 0 or 1: one channel).
    pub channels: u32,
}

/// The message pattern of a synthetic trace: whom each worker's operator 1
/// sends a message to each round, and whom its progress goes to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pattern {
    /// Every worker to every worker (timely's exchange and progress
    /// broadcast): p² messages a round.
    #[default]
    AllToAll,
    /// Each worker to itself and its next `k` workers (modulo the count):
    /// a trace of many streams whose rounds stay small.
    Neighbours(u32),
}

impl Pattern {
    /// The workers `w` sends to, of `p`.
    pub fn targets(self, w: u32, p: u32) -> Vec<u32> {
        match self {
            Pattern::AllToAll => (0..p).collect(),
            Pattern::Neighbours(k) => {
                let mut t: Vec<u32> = (0..=k.min(p - 1)).map(|i| (w + i) % p).collect();
                t.sort_unstable();
                t
            }
        }
    }
}

impl std::str::FromStr for Pattern {
    type Err = String;
    /// `all` or `neighbours:K`.
    fn from_str(s: &str) -> Result<Pattern, String> {
        match s.split_once(':') {
            None if s == "all" => Ok(Pattern::AllToAll),
            Some(("neighbours", k)) => k.parse().map(Pattern::Neighbours).map_err(|e| format!("neighbours:K: {e}")),
            _ => Err(format!("unknown message pattern {s:?} (all, or neighbours:K)")),
        }
    }
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            workers: 8,
            records: 1_000_000,
            straggler: Some(3),
            slow: 3,
            batch: 4096,
            host: 0x5eed,
            pid: 4242,
            t0_ns: 1_000_000_000,
            compression: ringlog::Compression::Zstd,
            pattern: Pattern::AllToAll,
            per_process: 0,
            idle_operators: 0,
            channels: 1,
        }
    }
}

/// Tiny deterministic generator (xorshift), for synthetic traces and the
/// tests' noise.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
    /// `n` bytes of noise.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

const TICKS_PER_NS: u64 = 3; // a 3 GHz TSC

/// Writes the trace through `write` in chunks; returns records written.
pub fn generate(cfg: &SynthConfig, write: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> std::io::Result<u64> {
    let mut s = Synth::new(cfg);
    s.headers();
    write(&s.out)?;
    s.out.clear();
    while s.total < cfg.records {
        let had: Vec<usize> = s.bufs.iter().map(|b| b.len()).collect();
        let sends = s.exchange_round();
        s.count_round(&sends);
        s.flush_round(&had);
        s.clock_sample_if_due();
        if s.out.len() > (1 << 20) {
            write(&s.out)?;
            s.out.clear();
        }
    }
    s.finish();
    write(&s.out)?;
    Ok(s.total)
}

/// A message of the exchange round: (from, to, seq, sent at ns).
type Message = (u32, u32, u64, u64);

/// The generator's state between the steps of [`generate`].
struct Synth<'a> {
    cfg: &'a SynthConfig,
    /// Workers.
    p: u32,
    enc: Encoder,
    /// Encoded frames not yet written.
    out: Vec<u8>,
    /// Workers per process (all of them when the config says 0).
    per_process: u32,
    /// Per process: its process-wide stream and that stream's next frame
    /// number.
    pw: Vec<StreamId>,
    pw_seq: Vec<u64>,
    /// Per worker: its next frame number, its records not yet framed, its clock (ns).
    seqs: Vec<u64>,
    bufs: Vec<Vec<Record>>,
    now: Vec<u64>,
    /// Progress pending per destination: (send ns, from, seq).
    prog: Vec<Vec<(u64, u32, u64)>>,
    /// Per worker, its next progress sequence number; per (from, to), the next message's.
    pseq: Vec<u64>,
    msg_seq: Vec<u64>,
    rng: Rng,
    /// Records generated so far.
    total: u64,
    /// When the next clock sample is due (ns).
    next_clock: u64,
}

const DOMAIN: ClockDomain = ClockDomain::Tsc;

/// Ids of the exchange's channels past the first (`SynthConfig::channels`).
const EXTRA_CHANNELS: u32 = 1_000;
/// Ids of the idle operators and their channels (`SynthConfig::idle_operators`).
const IDLE_OPERATORS: u32 = 1_000_000;

/// A record at `ns` of the host's clock.
fn rec(ns: u64, ev: Event) -> Record {
    Record::from_event(ns * TICKS_PER_NS, ev)
}

/// The clock sample taken at `ns`.
fn sample(ns: u64) -> ClockSample {
    ClockSample { ticks: ns * TICKS_PER_NS, monotonic_ns: ns, realtime_ns: ns + 1_700_000_000_000_000_000 }
}

impl<'a> Synth<'a> {
    fn new(cfg: &'a SynthConfig) -> Synth<'a> {
        let p = cfg.workers.max(1);
        let mut enc = Encoder::new();
        enc.set_compression(cfg.compression);
        let per_process = if cfg.per_process == 0 { p } else { cfg.per_process.min(p) };
        let procs = p.div_ceil(per_process);
        let n = p as usize;
        Synth {
            cfg,
            p,
            enc,
            out: Vec::with_capacity(1 << 20),
            per_process,
            pw: (0..procs).map(|k| StreamId { host: cfg.host, process: cfg.pid + k, worker: PROCESS_WIDE }).collect(),
            pw_seq: vec![0; procs as usize],
            seqs: vec![0; n],
            bufs: vec![Vec::with_capacity(cfg.batch); n],
            now: vec![cfg.t0_ns; n],
            prog: vec![Vec::new(); n],
            pseq: vec![0; n],
            msg_seq: vec![0; n * n],
            rng: Rng(0x9e3779b97f4a7c15),
            total: 0,
            next_clock: cfg.t0_ns + 1_000_000_000,
        }
    }

    /// The channel of the exchange's message `seq` (of its sender and
    /// receiver): channel 7, or one of `channels` in turn.
    fn channel(&self, seq: u64) -> u32 {
        match seq % self.cfg.channels.max(1) as u64 {
            0 => 7,
            k => EXTRA_CHANNELS + k as u32,
        }
    }

    fn sid(&self, w: u32) -> StreamId {
        StreamId { host: self.cfg.host, process: self.cfg.pid + w / self.per_process, worker: w }
    }

    /// The Hello of process `k` (its pid, its workers).
    fn hello(&self, k: u32) -> Hello {
        Hello {
            host_name: "synth".into(),
            program: "synth".into(),
            pid: self.cfg.pid + k,
            workers: self.per_process.min(self.p - k * self.per_process),
            invariant_tsc: true,
            ticks_per_sec: 1_000_000_000 * TICKS_PER_NS,
        }
    }

    /// A process-wide frame of every process: a clock sample at `ns`.
    fn clock_samples(&mut self, ns: u64) {
        for k in 0..self.pw.len() {
            self.enc.clock(self.pw[k], self.pw_seq[k], DOMAIN, &[sample(ns)], &mut self.out);
            self.pw_seq[k] += 1;
        }
    }

    /// Each process's Hello and first clock sample, each worker's Hello and
    /// metadata (two operators and the channel between them).
    fn headers(&mut self) {
        for k in 0..self.pw.len() {
            let hello = self.hello(k as u32);
            self.enc.hello(self.pw[k], self.pw_seq[k], DOMAIN, &hello, &mut self.out);
            self.pw_seq[k] += 1;
        }
        self.clock_samples(self.cfg.t0_ns);
        for w in 0..self.p {
            let hello = self.hello(w / self.per_process);
            self.enc.hello(self.sid(w), 0, DOMAIN, &hello, &mut self.out);
            let mut meta = vec![
                Meta::Operator { id: 1, name: "Exchange".into(), addr: vec![0, 1] },
                Meta::Operator { id: 2, name: "Count".into(), addr: vec![0, 2] },
                Meta::Channel { id: 7, src: (1, 0), dst: (2, 0) },
            ];
            for k in 1..self.cfg.channels.max(1) {
                meta.push(Meta::Channel { id: EXTRA_CHANNELS + k, src: (1, 0), dst: (2, 0) });
            }
            for i in 0..self.cfg.idle_operators {
                let id = IDLE_OPERATORS + i;
                meta.push(Meta::Operator { id, name: format!("Arrange: idle {i}"), addr: vec![0, 3, i] });
                meta.push(Meta::Channel { id, src: (id, 0), dst: (id + 1, 0) });
            }
            self.enc.metadata(self.sid(w), 1, DOMAIN, &meta, &mut self.out);
            self.seqs[w as usize] = 2;
        }
    }

    /// Phase A of a round: each worker runs op 1, which sends one message to
    /// every worker (the straggler's execution `slow` times longer), then
    /// broadcasts progress (Sager PC4). Returns the messages sent.
    fn exchange_round(&mut self) -> Vec<Message> {
        let p = self.p;
        let mut sends = Vec::new();
        for w in 0..p as usize {
            let mut t = self.now[w];
            self.bufs[w].push(rec(t, Event::ScheduleStart { op: 1 }));
            let mut dur = self.rng.range(20_000, 40_000);
            if self.cfg.straggler == Some(w as u32) {
                dur *= self.cfg.slow.max(1);
            }
            let targets = self.cfg.pattern.targets(w as u32, p);
            for &to in &targets {
                t += dur / (targets.len() as u64 + 1);
                let k = (w as u32 * p + to) as usize;
                let q = self.msg_seq[k];
                self.msg_seq[k] += 1;
                let channel = self.channel(q);
                self.bufs[w].push(rec(t, Event::MessageSend { channel, to, seq: q, records: 100 }));
                sends.push((w as u32, to, q, t));
            }
            t += dur / (targets.len() as u64 + 1);
            self.bufs[w].push(rec(t, Event::ScheduleStop { op: 1 }));
            t += 100;
            let q = self.pseq[w];
            self.pseq[w] += 1;
            self.bufs[w].push(rec(t, Event::ProgressSend { channel: 0, seq: q }));
            for &d in &targets {
                if d as usize != w {
                    self.prog[d as usize].push((t, w as u32, q));
                }
            }
            self.now[w] = t;
        }
        sends
    }

    /// Phase B of a round: on each worker, op 2 reads the messages that have
    /// arrived; if the last one (the straggler's) is late, the worker steps
    /// idly until it arrives and reads it in a second execution: a wait on
    /// the sender.
    fn count_round(&mut self, sends: &[Message]) {
        for w in 0..self.p as usize {
            let mut mine: Vec<(u64, u32, u64)> =
                sends.iter().filter(|s| s.1 as usize == w).map(|&(from, _, q, at)| (at, from, q)).collect();
            mine.sort_unstable();
            let mut t = self.now[w] + 100;
            let mut i = 0;
            while i < mine.len() {
                if mine[i].0 > t {
                    // nothing to read: spin until it arrives
                    let idle = t;
                    t = mine[i].0 + 300;
                    if t - idle > 2_000 {
                        self.bufs[w].push(rec(idle + 500, Event::Step { elided: 5, spin_ticks: 1_500 }));
                    }
                }
                self.bufs[w].push(rec(t, Event::ScheduleStart { op: 2 }));
                t = self.read_progress(w, t);
                while i < mine.len() && mine[i].0 <= t {
                    t += 200;
                    let (_, from, seq) = mine[i];
                    let channel = self.channel(seq);
                    self.bufs[w].push(rec(t, Event::MessageRecv { channel, from, seq, records: 100 }));
                    i += 1;
                }
                t += self.rng.range(1_000, 2_500);
                self.bufs[w].push(rec(t, Event::ScheduleStop { op: 2 }));
                t += 100;
            }
            self.bufs[w].push(rec(t, Event::Step { elided: 3, spin_ticks: 600 }));
            self.now[w] = t + self.rng.range(500, 2_000);
        }
    }

    /// Worker `w` reads the progress that has arrived by `t`, as it is
    /// scheduled; returns its clock after.
    fn read_progress(&mut self, w: usize, mut t: u64) -> u64 {
        let mut keep = Vec::new();
        for &(s, from, q) in &self.prog[w] {
            if s <= t {
                t += 50;
                self.bufs[w].push(rec(t, Event::ProgressRecv { channel: 0, from, seq: q }));
            } else {
                keep.push((s, from, q));
            }
        }
        self.prog[w] = keep;
        t
    }

    /// Counts the round's records and frames every worker's full batches.
    fn flush_round(&mut self, had: &[usize]) {
        for w in 0..self.p as usize {
            self.total += (self.bufs[w].len() - had[w]) as u64;
            self.flush(w, false);
        }
    }

    /// Frames worker `w`'s records once a batch is full (`force`: any).
    fn flush(&mut self, w: usize, force: bool) {
        if self.bufs[w].len() >= self.cfg.batch || (force && !self.bufs[w].is_empty()) {
            let sid = self.sid(w as u32);
            self.enc.records(sid, self.seqs[w], 0, DOMAIN, &[&self.bufs[w]], &mut self.out);
            self.seqs[w] += 1;
            self.bufs[w].clear();
        }
    }

    /// A clock sample every second of the trace.
    fn clock_sample_if_due(&mut self) {
        let tmax = *self.now.iter().max().unwrap();
        if tmax >= self.next_clock {
            self.clock_samples(self.next_clock);
            self.next_clock += 1_000_000_000;
        }
    }

    /// Progress still pending is read at the very end (no unmatched
    /// halves); then every stream's End frame.
    fn finish(&mut self) {
        for w in 0..self.p as usize {
            let t = self.now[w].max(self.prog[w].iter().map(|x| x.0).max().unwrap_or(0));
            for i in 0..self.prog[w].len() {
                let (_, from, q) = self.prog[w][i];
                self.bufs[w].push(rec(t, Event::ProgressRecv { channel: 0, from, seq: q }));
            }
            self.total += self.prog[w].len() as u64;
            self.flush(w, true);
            let sid = self.sid(w as u32);
            self.enc.end(sid, self.seqs[w], 0, DOMAIN, &EndStats { produced: 0, lost: 0, elided: 0 }, &mut self.out);
        }
        for k in 0..self.pw.len() {
            self.enc.end(self.pw[k], self.pw_seq[k], 0, DOMAIN, &EndStats::default(), &mut self.out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synth_decodes() {
        let mut bytes = Vec::new();
        let cfg = SynthConfig { records: 20_000, workers: 4, ..Default::default() };
        let n = generate(&cfg, &mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        let mut recs = 0;
        for f in ringlog::Decoder::new(&bytes[..]) {
            if let ringlog::Body::Records(r) = f.unwrap().body {
                recs += r.len() as u64;
            }
        }
        assert_eq!(recs, n);
    }

    /// Idle operators are declared with a channel each and never run; the
    /// exchange's messages go over the channels in turn, each matched:
    /// the windows are complete, and 3 channels carry data.
    #[test]
    fn idle_operators_are_declared_and_messages_spread_over_channels() {
        let mut bytes = Vec::new();
        let cfg = SynthConfig { records: 20_000, workers: 4, idle_operators: 50, channels: 3, ..Default::default() };
        generate(&cfg, &mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        let (mut ops, mut channels, mut ran) = (0, 0, std::collections::BTreeSet::new());
        let mut sent_on = std::collections::BTreeSet::new();
        for f in ringlog::Decoder::new(&bytes[..]) {
            match f.unwrap().body {
                ringlog::Body::Metadata(m) => {
                    ops += m.iter().filter(|e| matches!(e, Meta::Operator { .. })).count();
                    channels += m.iter().filter(|e| matches!(e, Meta::Channel { .. })).count();
                }
                ringlog::Body::Records(r) => {
                    for rec in r.iter() {
                        match rec.event() {
                            Some(Event::ScheduleStart { op }) => drop(ran.insert(op)),
                            Some(Event::MessageSend { channel, .. }) => drop(sent_on.insert(channel)),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        assert_eq!((ops, channels), (4 * 52, 4 * (1 + 2 + 50)));
        assert_eq!(ran.into_iter().collect::<Vec<_>>(), vec![1, 2], "the idle ones never run");
        assert_eq!(sent_on.len(), 3);
        let (reports, errors) = crate::pipeline::analyze_bytes(&[("t", &bytes)], 1_000_000);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(reports.iter().all(|r| r.complete && r.messages.data_unmatched == 0));
    }

    /// Ten workers, four per process: three processes (pids 4242–4244) of
    /// 4, 4 and 2 workers, each with its own process-wide Hello; worker 9
    /// is in the third. Analyzed, the cluster's one window is complete.
    #[test]
    fn workers_per_process_make_a_cluster_of_processes() {
        let mut bytes = Vec::new();
        let cfg = SynthConfig { records: 20_000, workers: 10, per_process: 4, ..Default::default() };
        generate(&cfg, &mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        let mut hellos = Vec::new();
        let mut process_of_9 = None;
        for f in ringlog::Decoder::new(&bytes[..]) {
            let f = f.unwrap();
            let s = f.header.stream;
            match f.body {
                ringlog::Body::Hello(h) if s.worker == ringlog::PROCESS_WIDE => {
                    hellos.push((s.process, h.pid, h.workers))
                }
                _ if s.worker == 9 => process_of_9 = Some(s.process),
                _ => {}
            }
        }
        assert_eq!(hellos, vec![(4242, 4242, 4), (4243, 4243, 4), (4244, 4244, 2)]);
        assert_eq!(process_of_9, Some(4244));
        let (reports, errors) = crate::pipeline::analyze_bytes(&[("cluster", &bytes)], 10_000_000_000);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(
            reports.iter().all(|r| r.complete),
            "{:?}",
            reports.iter().map(|r| &r.incomplete_reasons).collect::<Vec<_>>()
        );
    }

    /// Neighbours(2) of 5 workers: worker 4 sends to itself, 0 and 1; all
    /// to all, to everyone; a pattern wider than the workers is all of them.
    #[test]
    fn a_neighbour_pattern_sends_to_the_next_workers_around() {
        assert_eq!(Pattern::Neighbours(2).targets(4, 5), vec![0, 1, 4]);
        assert_eq!(Pattern::AllToAll.targets(1, 3), vec![0, 1, 2]);
        assert_eq!(Pattern::Neighbours(9).targets(0, 3), vec![0, 1, 2]);
        assert_eq!("neighbours:3".parse(), Ok(Pattern::Neighbours(3)));
        assert!("ring".parse::<Pattern>().is_err());
    }
}
