//! A paced synthetic live stream: one process's worth of worker streams,
//! encoded here (no probe) and written into a sidecar's Unix socket at a
//! target rate, stamped with this host's clocks as they run, so that the
//! sidecar judges them against the wall clock as it would a probe's. The
//! rounds have the shape of `live_load`'s (each worker: operator 1 sends a
//! message to every other worker, progress, operator 2 reads the round's
//! messages, a step), at a fraction of a probe's CPU per record: the
//! alternative generator of `live_rate` when the probe's threads take too
//! much of a small machine from the sidecar they feed.

use std::io::Write;
use std::time::{Duration, Instant};

use ringlog::{ClockDomain, ClockSample, Encoder, EndStats, Event, Hello, Meta, Record, StreamId, PROCESS_WIDE};

const DOMAIN: ClockDomain = ClockDomain::MonotonicNs;
/// How often the stream catches up with its schedule (a frame per worker).
const TICK: Duration = Duration::from_millis(1);

/// Records of one worker's round with `p` workers: start, the sends to the
/// `p − 1` others, stop, progress, start, the reads from them, stop, step.
pub fn records_per_round(p: u32) -> u64 {
    6 + 2 * (p as u64 - 1)
}

/// One process of `workers` streams into `sock` at `rate` records/s for
/// `seconds`; returns the records written.
pub fn emit(sock: &std::path::Path, seconds: f64, workers: u32, rate: f64) -> std::io::Result<u64> {
    let mut conn = std::os::unix::net::UnixStream::connect(sock)?;
    let mut s = Stream::new(workers.max(1));
    s.headers();
    let start = Instant::now();
    let rounds_per_sec = rate / (records_per_round(s.p) * s.p as u64) as f64;
    let (mut rounds, mut last, mut next_clock) = (0u64, probe::monotonic_ns(), 1.0);
    while start.elapsed().as_secs_f64() < seconds {
        let due = (rounds_per_sec * start.elapsed().as_secs_f64()) as u64;
        let now = probe::monotonic_ns();
        if due > rounds {
            s.rounds(last, now, due - rounds);
            rounds = due;
            last = now;
        }
        if start.elapsed().as_secs_f64() >= next_clock {
            s.clock_sample();
            next_clock += 1.0;
        }
        conn.write_all(&s.out)?;
        s.out.clear();
        std::thread::sleep(TICK);
    }
    s.finish();
    conn.write_all(&s.out)?;
    Ok(s.written)
}

/// The encoder's state: this process's streams and their frame numbers.
struct Stream {
    p: u32,
    enc: Encoder,
    out: Vec<u8>,
    pw: StreamId,
    pw_seq: u64,
    /// Per worker: its stream, next frame number, records of this tick.
    sids: Vec<StreamId>,
    seqs: Vec<u64>,
    bufs: Vec<Vec<Record>>,
    /// Per (from, to): the next message's sequence number; per worker, its
    /// progress's.
    msg_seq: Vec<u64>,
    progress_seq: Vec<u64>,
    written: u64,
}

impl Stream {
    fn new(p: u32) -> Stream {
        let host = ringlog::host_id(&ringlog::host_name());
        let pid = std::process::id();
        let mut enc = Encoder::new();
        enc.set_compression(ringlog::Compression::None);
        let n = p as usize;
        Stream {
            p,
            enc,
            out: Vec::with_capacity(1 << 20),
            pw: StreamId { host, process: pid, worker: PROCESS_WIDE },
            pw_seq: 0,
            sids: (0..p).map(|w| StreamId { host, process: pid, worker: w }).collect(),
            seqs: vec![0; n],
            bufs: vec![Vec::new(); n],
            msg_seq: vec![0; n * n],
            progress_seq: vec![0; n],
            written: 0,
        }
    }

    /// The process's Hello and first clock sample, each worker's Hello and
    /// metadata (two operators and the channel between them).
    fn headers(&mut self) {
        let hello = Hello {
            host_name: ringlog::host_name(),
            program: "live_rate".into(),
            pid: self.pw.process,
            workers: self.p,
            invariant_tsc: false,
            ticks_per_sec: 1_000_000_000,
        };
        self.enc.hello(self.pw, self.pw_seq, DOMAIN, &hello, &mut self.out);
        self.pw_seq += 1;
        self.clock_sample();
        let meta = [
            Meta::Operator { id: 1, name: "Exchange".into(), addr: vec![0, 1] },
            Meta::Operator { id: 2, name: "Count".into(), addr: vec![0, 2] },
            Meta::Channel { id: 7, src: (1, 0), dst: (2, 0) },
        ];
        for w in 0..self.p as usize {
            self.enc.hello(self.sids[w], 0, DOMAIN, &hello, &mut self.out);
            self.enc.metadata(self.sids[w], 1, DOMAIN, &meta, &mut self.out);
            self.seqs[w] = 2;
        }
    }

    /// A clock sample now: monotonic and real time, as the probe takes them.
    fn clock_sample(&mut self) {
        let m = probe::monotonic_ns();
        let s = ClockSample { ticks: m, monotonic_ns: m, realtime_ns: probe::realtime_ns() };
        self.enc.clock(self.pw, self.pw_seq, DOMAIN, &[s], &mut self.out);
        self.pw_seq += 1;
    }

    /// `n` rounds spread evenly over (`from`, `to`] ns, framed per worker.
    /// Within a round's stretch every worker's records sit at the same
    /// slots: the sends before any read of them.
    fn rounds(&mut self, from: u64, to: u64, n: u64) {
        let p = self.p;
        let per = records_per_round(p);
        let stretch = ((to - from) / n).max(1);
        for k in 0..n {
            let t0 = from + k * stretch;
            let at = |slot: u64| t0 + stretch * slot / per;
            for w in 0..p {
                let mut slot = 0;
                let mut push = |b: &mut Vec<Record>, ev: Event| {
                    b.push(Record::from_event(at(slot), ev));
                    slot += 1;
                };
                let buf = &mut self.bufs[w as usize];
                push(buf, Event::ScheduleStart { op: 1 });
                for to in (0..p).filter(|&to| to != w) {
                    let q = &mut self.msg_seq[(w * p + to) as usize];
                    push(buf, Event::MessageSend { channel: 7, to, seq: *q, records: 10 });
                    *q += 1;
                }
                push(buf, Event::ScheduleStop { op: 1 });
                let q = &mut self.progress_seq[w as usize];
                push(buf, Event::ProgressSend { channel: 0, seq: *q });
                *q += 1;
                push(buf, Event::ScheduleStart { op: 2 });
                for from in (0..p).filter(|&f| f != w) {
                    // This round's message from `from`: its number is one
                    // less than the next, which the send above moved on
                    // (senders before `w`) or will (after `w`).
                    let next = self.msg_seq[(from * p + w) as usize];
                    let seq = if from < w { next - 1 } else { next };
                    push(buf, Event::MessageRecv { channel: 7, from, seq, records: 10 });
                }
                push(buf, Event::ScheduleStop { op: 2 });
                push(buf, Event::Step { elided: 0, spin_ticks: 0 });
            }
        }
        for w in 0..p as usize {
            self.enc.records(self.sids[w], self.seqs[w], 0, DOMAIN, &[&self.bufs[w]], &mut self.out);
            self.seqs[w] += 1;
            self.written += self.bufs[w].len() as u64;
            self.bufs[w].clear();
        }
    }

    /// Every stream's End frame, then the process's.
    fn finish(&mut self) {
        for w in 0..self.p as usize {
            let st = EndStats { produced: self.written / self.p as u64, lost: 0, elided: 0 };
            self.enc.end(self.sids[w], self.seqs[w], 0, DOMAIN, &st, &mut self.out);
        }
        self.enc.end(self.pw, self.pw_seq, 0, DOMAIN, &EndStats::default(), &mut self.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three workers, two rounds: every record decodes, 10 per worker and
    /// round (6 + 2 × 2), each stream's times rise, and every read names a
    /// message its sender sent earlier.
    #[test]
    fn paced_rounds_decode_with_every_read_after_its_send() {
        let mut s = Stream::new(3);
        s.headers();
        s.rounds(1_000_000, 1_100_000, 2);
        s.finish();
        let mut sends = std::collections::HashMap::new();
        let mut reads = Vec::new();
        let mut per_worker = [0u64; 3];
        for f in ringlog::Decoder::new(&s.out[..]) {
            let f = f.unwrap();
            if let ringlog::Body::Records(rs) = f.body {
                let w = f.header.stream.worker;
                let mut last = 0;
                for r in rs {
                    assert!(r.ts >= last, "worker {w}: time goes back");
                    last = r.ts;
                    per_worker[w as usize] += 1;
                    match r.event().unwrap() {
                        Event::MessageSend { to, seq, .. } => assert!(sends.insert((w, to, seq), r.ts).is_none()),
                        Event::MessageRecv { from, seq, .. } => reads.push(((from, w, seq), r.ts)),
                        _ => {}
                    }
                }
            }
        }
        assert_eq!(per_worker, [20; 3]);
        assert_eq!(s.written, 60);
        assert_eq!(reads.len(), 12);
        for (k, t) in reads {
            assert!(sends.get(&k).is_some_and(|&s| s < t), "{k:?} read before it was sent, or never sent");
        }
    }
}
