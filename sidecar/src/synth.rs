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
    let p = cfg.workers.max(1);
    let dom = ClockDomain::Tsc;
    let mut enc = Encoder::new();
    enc.set_compression(cfg.compression);
    let mut out = Vec::with_capacity(1 << 20);
    let pw = StreamId { host: cfg.host, process: cfg.pid, worker: PROCESS_WIDE };
    let hello = Hello {
        host_name: "synth".into(),
        program: "synth".into(),
        pid: cfg.pid,
        workers: p,
        invariant_tsc: true,
        ticks_per_sec: 1_000_000_000 * TICKS_PER_NS,
    };
    let mut pw_seq = 0;
    enc.hello(pw, pw_seq, dom, &hello, &mut out);
    pw_seq += 1;
    let sample = |ns: u64| ClockSample {
        ticks: ns * TICKS_PER_NS,
        monotonic_ns: ns,
        realtime_ns: ns + 1_700_000_000_000_000_000,
    };
    enc.clock(pw, pw_seq, dom, &[sample(cfg.t0_ns)], &mut out);
    pw_seq += 1;
    let sid = |w: u32| StreamId { host: cfg.host, process: cfg.pid, worker: w };
    let mut seqs = vec![0u64; p as usize];
    for w in 0..p {
        enc.hello(sid(w), 0, dom, &hello, &mut out);
        let meta = vec![
            Meta::Operator { id: 1, name: "Exchange".into(), addr: vec![0, 1] },
            Meta::Operator { id: 2, name: "Count".into(), addr: vec![0, 2] },
            Meta::Channel { id: 7, src: (1, 0), dst: (2, 0) },
        ];
        enc.metadata(sid(w), 1, dom, &meta, &mut out);
        seqs[w as usize] = 2;
    }
    write(&out)?;
    out.clear();
    let mut bufs: Vec<Vec<Record>> = vec![Vec::with_capacity(cfg.batch); p as usize];
    let mut now: Vec<u64> = vec![cfg.t0_ns; p as usize];
    // pending progress per destination: (send ns, from, seq)
    let mut prog: Vec<Vec<(u64, u32, u64)>> = vec![Vec::new(); p as usize];
    let mut pseq = vec![0u64; p as usize];
    let mut msg_seq = vec![0u64; (p * p) as usize];
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut total = 0u64;
    let mut next_clock = cfg.t0_ns + 1_000_000_000;
    let rec = |ns: u64, ev: Event| Record::from_event(ns * TICKS_PER_NS, ev);
    let flush = |w: usize,
                 bufs: &mut Vec<Vec<Record>>,
                 seqs: &mut Vec<u64>,
                 enc: &mut Encoder,
                 out: &mut Vec<u8>,
                 force: bool| {
        if bufs[w].len() >= cfg.batch || (force && !bufs[w].is_empty()) {
            enc.records(sid(w as u32), seqs[w], 0, dom, &[&bufs[w]], out);
            seqs[w] += 1;
            bufs[w].clear();
        }
    };
    while total < cfg.records {
        let had: Vec<usize> = bufs.iter().map(|b| b.len()).collect();
        // Phase A: each worker reads progress that has arrived, runs op 1
        // (sends one message to every worker).
        let mut sends: Vec<(u32, u32, u64, u64)> = Vec::new(); // (from, to, seq, at)
        for w in 0..p as usize {
            let mut t = now[w];
            bufs[w].push(rec(t, Event::ScheduleStart { op: 1 }));
            let mut dur = rng.range(20_000, 40_000);
            if cfg.straggler == Some(w as u32) {
                dur *= cfg.slow.max(1);
            }
            let targets = cfg.pattern.targets(w as u32, p);
            for &to in &targets {
                t += dur / (targets.len() as u64 + 1);
                let k = (w as u32 * p + to) as usize;
                let q = msg_seq[k];
                msg_seq[k] += 1;
                bufs[w].push(rec(t, Event::MessageSend { channel: 7, to, seq: q, records: 100 }));
                sends.push((w as u32, to, q, t));
            }
            t += dur / (targets.len() as u64 + 1);
            bufs[w].push(rec(t, Event::ScheduleStop { op: 1 }));
            // progress after an active operator (Sager PC4), broadcast
            t += 100;
            let q = pseq[w];
            pseq[w] += 1;
            bufs[w].push(rec(t, Event::ProgressSend { channel: 0, seq: q }));
            for &d in &targets {
                if d as usize != w {
                    prog[d as usize].push((t, w as u32, q));
                }
            }
            now[w] = t;
        }
        // Phase B: op 2 reads the messages that have arrived; if the last
        // one (the straggler's) is late, the worker steps idly until it
        // arrives and reads it in a second execution: a wait on the sender.
        for w in 0..p as usize {
            let mut mine: Vec<(u64, u32, u64)> =
                sends.iter().filter(|s| s.1 as usize == w).map(|&(from, _, q, at)| (at, from, q)).collect();
            mine.sort_unstable();
            let mut t = now[w] + 100;
            let mut i = 0;
            while i < mine.len() {
                if mine[i].0 > t {
                    // nothing to read: spin until it arrives
                    let idle = t;
                    t = mine[i].0 + 300;
                    if t - idle > 2_000 {
                        bufs[w].push(rec(idle + 500, Event::Step { elided: 5, spin_ticks: 1_500 }));
                    }
                }
                bufs[w].push(rec(t, Event::ScheduleStart { op: 2 }));
                // progress that has arrived is read while scheduling
                let mut keep = Vec::new();
                for &(s, from, q) in &prog[w] {
                    if s <= t {
                        t += 50;
                        bufs[w].push(rec(t, Event::ProgressRecv { channel: 0, from, seq: q }));
                    } else {
                        keep.push((s, from, q));
                    }
                }
                prog[w] = keep;
                while i < mine.len() && mine[i].0 <= t {
                    t += 200;
                    bufs[w]
                        .push(rec(t, Event::MessageRecv { channel: 7, from: mine[i].1, seq: mine[i].2, records: 100 }));
                    i += 1;
                }
                t += rng.range(1_000, 2_500);
                bufs[w].push(rec(t, Event::ScheduleStop { op: 2 }));
                t += 100;
            }
            bufs[w].push(rec(t, Event::Step { elided: 3, spin_ticks: 600 }));
            now[w] = t + rng.range(500, 2_000);
        }
        for w in 0..p as usize {
            total += (bufs[w].len() - had[w]) as u64;
            flush(w, &mut bufs, &mut seqs, &mut enc, &mut out, false);
        }
        let tmax = *now.iter().max().unwrap();
        if tmax >= next_clock {
            enc.clock(pw, pw_seq, dom, &[sample(next_clock)], &mut out);
            pw_seq += 1;
            next_clock += 1_000_000_000;
        }
        if out.len() > (1 << 20) {
            write(&out)?;
            out.clear();
        }
    }
    // Progress still pending is read at the very end (no unmatched halves).
    for w in 0..p as usize {
        let t = now[w].max(prog[w].iter().map(|x| x.0).max().unwrap_or(0));
        for &(_, from, q) in &prog[w] {
            bufs[w].push(rec(t, Event::ProgressRecv { channel: 0, from, seq: q }));
        }
        total += prog[w].len() as u64;
        flush(w, &mut bufs, &mut seqs, &mut enc, &mut out, true);
        enc.end(sid(w as u32), seqs[w], 0, dom, &EndStats { produced: 0, lost: 0, elided: 0 }, &mut out);
    }
    enc.end(pw, pw_seq, 0, dom, &EndStats::default(), &mut out);
    write(&out)?;
    Ok(total)
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
