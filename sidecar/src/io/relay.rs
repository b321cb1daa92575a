//! `sidecar relay`: the per-host agent of clock sync (DESIGN "Clocks").
//!
//! Probes on a host connect to the relay as they would to `sidecar run`; the
//! relay forwards each connection's bytes upstream (to the reference
//! sidecar, or to another relay) frame by frame, without decoding or
//! re-encoding a record ([`ringlog::FrameBuffer::next_raw`]), and adds
//! ClockSync frames: the clock exchanges it makes with the reference
//! sidecar's responder (`sidecar run --clock-listen`) over UDP
//! ([`clocksync::protocol::Prober`]), stamped with this host's
//! CLOCK_MONOTONIC, which is what the probes' clock samples map to.
//!
//! The logic ([`ExchangeLog`], [`Forwarder`]) has no I/O; the threads that
//! accept, read, write and probe are at the edge ([`run`]). A reference that
//! is absent or answers badly never stops forwarding: exchanges that get no
//! answer are counted as lost, and streams forwarded before the first
//! exchanges stay unsynchronized at the sidecar (they are never mixed).

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clocksync::protocol::{Prober, ProberConfig};
use ringlog::{ClockExchange, ClockSync, Encoder, FrameBuffer, StreamError, StreamId, PROCESS_WIDE};

use crate::io::Listen;

/// Where the relay sends the streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Upstream {
    Tcp(String),
    Unix(PathBuf),
}

impl std::str::FromStr for Upstream {
    type Err = String;
    fn from_str(s: &str) -> Result<Upstream, String> {
        if let Some(p) = s.strip_prefix("unix:").filter(|p| !p.is_empty()) {
            Ok(Upstream::Unix(PathBuf::from(p)))
        } else if let Some(a) = s.strip_prefix("tcp:").filter(|a| a.contains(':')) {
            Ok(Upstream::Tcp(a.to_string()))
        } else {
            Err(format!("'{s}': expected tcp:HOST:PORT or unix:PATH"))
        }
    }
}

impl std::fmt::Display for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Tcp(a) => write!(f, "tcp:{a}"),
            Upstream::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// The reference's clock responder: `udp:HOST:PORT`.
pub fn parse_udp(s: &str) -> Result<SocketAddr, String> {
    let a = s.strip_prefix("udp:").ok_or_else(|| format!("'{s}': expected udp:HOST:PORT"))?;
    a.to_socket_addrs().map_err(|e| format!("'{s}': {e}"))?.next().ok_or_else(|| format!("'{s}': no address"))
}

/// Exchanges kept for connections that start later: the first ones (the
/// sidecar's FreeZer picks its anchor among the first of an epoch) and the
/// most recent ones.
const KEEP_HEAD: usize = 64;
const KEEP_TAIL: usize = 256;

/// The exchanges made so far, numbered in order.
#[derive(Debug, Default)]
pub struct ExchangeLog {
    /// The reference host's id (from its responder), once known.
    pub reference: Option<u64>,
    head: Vec<ClockExchange>,
    tail: VecDeque<ClockExchange>,
    /// Exchanges made (the next one's number).
    pub made: u64,
    /// Exchanges that got no valid answer in time, or failed to send.
    pub lost: u64,
}

impl ExchangeLog {
    pub fn push(&mut self, x: ClockExchange) {
        if self.head.len() < KEEP_HEAD {
            self.head.push(x);
        } else {
            if self.tail.len() == KEEP_TAIL {
                self.tail.pop_front();
            }
            self.tail.push_back(x);
        }
        self.made += 1;
    }

    /// The kept exchanges numbered `from` or later, in order, and the number
    /// to ask from next time.
    pub fn since(&self, from: u64) -> (Vec<ClockExchange>, u64) {
        let head_n = self.head.len() as u64;
        let mut out: Vec<ClockExchange> = self.head.iter().skip(from.min(head_n) as usize).copied().collect();
        let tail_first = self.made - self.tail.len() as u64;
        let skip = from.max(tail_first) - tail_first;
        out.extend(self.tail.iter().skip(skip.min(self.tail.len() as u64) as usize));
        (out, self.made)
    }
}

/// One forwarded connection: probe bytes in, upstream bytes out, with the
/// ClockSync frames added between whole frames.
pub struct Forwarder {
    fb: FrameBuffer,
    enc: Encoder,
    /// The ClockSync frames' stream: this host, the relay's process id (so
    /// they have a sequence of their own, FORMAT.md), process-wide.
    stream: StreamId,
    seq: u64,
    next_exchange: u64,
    failed: bool,
    pub frames: u64,
    pub bytes: u64,
    pub injected: u64,
    /// Whether a Hello frame has passed (`--hello-timeout`).
    pub hello_seen: bool,
}

impl Forwarder {
    pub fn new(host: u64, relay_pid: u32) -> Forwarder {
        Forwarder {
            fb: FrameBuffer::new(),
            enc: Encoder::new(),
            stream: StreamId { host, process: relay_pid, worker: PROCESS_WIDE },
            seq: 0,
            next_exchange: 0,
            failed: false,
            frames: 0,
            bytes: 0,
            injected: 0,
            hello_seen: false,
        }
    }

    /// Bytes held that do not form a whole frame yet (a frame is forwarded
    /// whole).
    pub fn pending(&self) -> usize {
        if self.failed {
            0
        } else {
            self.fb.pending()
        }
    }

    /// New exchanges of `log` as a ClockSync frame, if any.
    fn inject(&mut self, log: &ExchangeLog, out: &mut Vec<u8>) {
        let Some(reference) = log.reference else { return };
        if log.made <= self.next_exchange {
            return;
        }
        let (exchanges, next) = log.since(self.next_exchange);
        self.next_exchange = next;
        if exchanges.is_empty() {
            return;
        }
        self.enc.clock_sync(self.stream, self.seq, &ClockSync { reference_host: reference, exchanges }, out);
        self.seq += 1;
        self.injected += 1;
    }

    /// Bytes from the probe; appends to `out` what goes upstream. After a
    /// framing error (returned once) the rest is passed through unchanged:
    /// the sidecar reports the fault itself.
    pub fn feed(&mut self, bytes: &[u8], log: &ExchangeLog, out: &mut Vec<u8>) -> Option<StreamError> {
        self.bytes += bytes.len() as u64;
        if self.failed {
            out.extend_from_slice(bytes);
            return None;
        }
        self.fb.feed(bytes);
        loop {
            // Exchanges go in before the frame: the first ones precede the
            // first record frame.
            match self.fb.next_raw() {
                Ok(Some((h, raw))) => {
                    self.hello_seen |= h.kind == ringlog::FrameKind::Hello;
                    let raw = raw.to_vec();
                    self.inject(log, out);
                    out.extend_from_slice(&raw);
                    self.frames += 1;
                }
                Ok(None) => return None,
                Err(e) => {
                    self.failed = true;
                    out.extend_from_slice(self.fb.unparsed());
                    return Some(e);
                }
            }
        }
    }
}

/// The relay's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: Listen,
    pub to: Upstream,
    /// The reference sidecar's clock responder (None: forward only).
    pub clock: Option<SocketAddr>,
    /// This host's id (as its probes write it).
    pub host_id: u64,
    /// Exchanges per second while starting (the first `fast` exchanges),
    /// then one per `period`.
    pub fast: u64,
    pub period: Duration,
    /// What it holds at most: connections open, the time to a Hello, the
    /// bytes of one frame not yet whole (`--max-connections`,
    /// `--hello-timeout`, `--max-buffered`, as for `sidecar run`).
    pub limits: crate::io::Limits,
}

/// What a relay did.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub connections: u64,
    pub frames: u64,
    pub bytes: u64,
    pub injected: u64,
    pub exchanges: u64,
    pub lost: u64,
    pub errors: Vec<String>,
    /// Connections closed at once: `--max-connections` were open.
    pub refused: u64,
    /// Closed without a Hello by `--hello-timeout`.
    pub no_hello: u64,
    /// Closed holding more than `--max-buffered` bytes of one frame.
    pub over_buffered: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} connections, {} frames ({} bytes) forwarded, {} clock-sync frames added; {} exchanges, {} lost; {} \
             refused over --max-connections, {} closed without a Hello by --hello-timeout, {} closed over \
             --max-buffered",
            self.connections,
            self.frames,
            self.bytes,
            self.injected,
            self.exchanges,
            self.lost,
            self.refused,
            self.no_hello,
            self.over_buffered
        )
    }
}

fn connect(to: &Upstream) -> std::io::Result<Box<dyn Write + Send>> {
    Ok(match to {
        Upstream::Tcp(a) => {
            let s = TcpStream::connect(a)?;
            let _ = s.set_nodelay(true);
            Box::new(s)
        }
        Upstream::Unix(p) => Box::new(UnixStream::connect(p)?),
    })
}

/// Probes the reference until `stop`: a few quick exchanges, then one per
/// period. Failures are counted, never fatal.
fn probe_loop(addr: SocketAddr, cfg: &Config, log: &Mutex<ExchangeLog>, stop: &AtomicBool) {
    let bind = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let clock = super::os_clock::monotonic_ns;
    let pc = ProberConfig { rate_hz: 1, reply_timeout: Duration::from_millis(100) };
    let mut prober = loop {
        match Prober::new(bind, addr, clock, pc) {
            Ok(p) => break p,
            Err(e) => {
                crate::say!("sidecar relay: error: cannot open a UDP socket for clock exchanges: {e}");
                std::thread::sleep(Duration::from_secs(1));
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
        }
    };
    let mut warned = false;
    while !stop.load(Ordering::Relaxed) {
        let known = log.lock().unwrap().reference.is_some();
        let ok = if !known {
            match prober.identify() {
                Ok(Some(id)) => {
                    log.lock().unwrap().reference = Some(id);
                    crate::say!("sidecar relay: clock reference is host {id:016x} at udp:{addr}");
                    continue;
                }
                _ => false,
            }
        } else {
            match prober.probe_once() {
                Ok(Some(x)) => {
                    // Prober's s, e are this host's clock; r the reference's.
                    log.lock().unwrap().push(ClockExchange { t1: x.s, t2: x.r, t3: x.r, t4: x.e });
                    true
                }
                _ => false,
            }
        };
        let made = {
            let mut l = log.lock().unwrap();
            if !ok {
                l.lost += 1;
            }
            l.made
        };
        if !ok && !warned {
            warned = true;
            crate::say!(
                "sidecar relay: no answer from the clock reference at udp:{addr} (retrying; forwarding goes on)"
            );
        }
        let wait = if known && made < cfg.fast { Duration::from_millis(20) } else { cfg.period };
        let until = Instant::now() + wait;
        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10).min(until.saturating_duration_since(Instant::now())));
        }
    }
}

/// One connection: upstream connection, then read, forward, until EOF.
fn serve(
    mut down: Box<dyn Read + Send>,
    name: String,
    cfg: &Config,
    log: &Mutex<ExchangeLog>,
    totals: &Mutex<Stats>,
    stop: &AtomicBool,
) {
    let mut up = None;
    let t0 = Instant::now();
    while up.is_none() {
        match connect(&cfg.to) {
            Ok(u) => up = Some(u),
            Err(e) if t0.elapsed() > Duration::from_secs(5) || stop.load(Ordering::Relaxed) => {
                let msg = format!("{name}: cannot connect upstream to {}: {e}; connection dropped", cfg.to);
                crate::say!("sidecar relay: error: {msg}");
                totals.lock().unwrap().errors.push(msg);
                return;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    let mut up = up.unwrap();
    let mut fw = Forwarder::new(cfg.host_id, std::process::id());
    let mut buf = vec![0u8; 1 << 16];
    let mut out = Vec::with_capacity(1 << 16);
    let limits = cfg.limits;
    loop {
        if !fw.hello_seen && t0.elapsed() >= limits.hello_timeout {
            let secs = limits.hello_timeout.as_secs_f64();
            crate::say!("sidecar relay: error: {name} closed: no Hello frame within {secs} s (--hello-timeout)");
            totals.lock().unwrap().no_hello += 1;
            break;
        }
        let n = match down.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::Interrupted) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                continue;
            }
            Err(e) => {
                crate::say!("sidecar relay: error: {name}: read error: {e}");
                break;
            }
        };
        out.clear();
        let err = {
            let l = log.lock().unwrap();
            fw.feed(&buf[..n], &l, &mut out)
        };
        if let Some(e) = err {
            let msg = format!("{name}: not a well-formed stream ({e}); passing the rest through");
            crate::say!("sidecar relay: error: {msg}");
            totals.lock().unwrap().errors.push(msg);
        }
        if fw.pending() > limits.max_buffered {
            let max = limits.max_buffered;
            crate::say!("sidecar relay: error: {name} closed: more than {max} bytes of one frame (--max-buffered)");
            totals.lock().unwrap().over_buffered += 1;
            break;
        }
        if let Err(e) = up.write_all(&out) {
            let msg = format!("{name}: upstream write failed: {e}; connection dropped");
            crate::say!("sidecar relay: error: {msg}");
            totals.lock().unwrap().errors.push(msg);
            break;
        }
    }
    let _ = up.flush();
    let mut t = totals.lock().unwrap();
    t.frames += fw.frames;
    t.bytes += fw.bytes;
    t.injected += fw.injected;
}

/// Runs the relay until `stop` is set; returns what it did.
pub fn run(cfg: Config, stop: Arc<AtomicBool>) -> std::io::Result<Stats> {
    let mut l = crate::io::Listener::bind(&cfg.listen, "sidecar relay")?;
    let cfg = Arc::new(cfg);
    let log = Arc::new(Mutex::new(ExchangeLog::default()));
    let totals = Arc::new(Mutex::new(Stats::default()));
    let mut threads = Vec::new();
    let mut refusals = crate::io::RateLimited::new("connections refused");
    let mut prober = None;
    if let Some(addr) = cfg.clock {
        let (cfg2, log2, stop2) = (cfg.clone(), log.clone(), stop.clone());
        prober = Some(std::thread::spawn(move || probe_loop(addr, &cfg2, &log2, &stop2)));
        // A short head start, so that probes connecting right away get the
        // first exchanges before their first records (bounded: an absent
        // reference must not hold the streams up).
        let t0 = Instant::now();
        while log.lock().unwrap().made < 2 && t0.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        // (Accepting failed, out of file descriptors say: a pause, not a
        // spin on a listener that stays readable.)
        let next = l.accept().unwrap_or_else(|_| {
            std::thread::sleep(Duration::from_millis(100));
            None
        });
        // (Threads of connections that ended are let go: what the relay
        // holds is bounded by the connections open.)
        threads.retain(|t: &std::thread::JoinHandle<()>| !t.is_finished());
        match next {
            Some((sock, name)) if threads.len() >= cfg.limits.max_connections => {
                drop(sock);
                totals.lock().unwrap().refused += 1;
                let max = cfg.limits.max_connections;
                refusals.say(|| {
                    format!("sidecar relay: error: {name} refused: {max} connections open already (--max-connections)")
                });
            }
            Some((sock, name)) => {
                let _ = sock.set_nonblocking(false);
                let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
                let r: Box<dyn Read + Send> = Box::new(sock);
                let (cfg, log, totals, stop) = (cfg.clone(), log.clone(), totals.clone(), stop.clone());
                threads.push(std::thread::spawn(move || serve(r, name, &cfg, &log, &totals, &stop)));
            }
            None if stopping => break,
            // Sleeps until a connection comes (the timeout bounds how late
            // a stop is seen).
            None => l.wait(Duration::from_millis(100)),
        }
    }
    for t in threads.into_iter().chain(prober) {
        let _ = t.join();
    }
    let accepted = l.accepted();
    drop(l); // removes a unix socket
    let mut st = totals.lock().unwrap().clone();
    let l = log.lock().unwrap();
    st.connections = accepted;
    st.exchanges = l.made;
    st.lost = l.lost;
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog::{Body, ClockDomain, ClockSample, Decoder, Event, Hello, Record};

    fn x(i: u64) -> ClockExchange {
        ClockExchange { t1: 10 * i, t2: 1_000 + 10 * i, t3: 1_000 + 10 * i, t4: 10 * i + 5 }
    }

    #[test]
    fn log_keeps_head_and_tail_in_order() {
        let mut l = ExchangeLog::default();
        for i in 0..1000 {
            l.push(x(i));
        }
        let (all, next) = l.since(0);
        assert_eq!(next, 1000);
        assert_eq!(all.len(), KEEP_HEAD + KEEP_TAIL);
        assert!(all.windows(2).all(|w| w[0].t1 < w[1].t1));
        assert_eq!(all[0], x(0));
        assert_eq!(*all.last().unwrap(), x(999));
        assert_eq!(l.since(998).0, vec![x(998), x(999)]);
        assert_eq!(l.since(10).0.len(), KEEP_HEAD - 10 + KEEP_TAIL);
        assert!(l.since(1000).0.is_empty());
    }

    fn probe_bytes() -> Vec<u8> {
        let mut e = Encoder::new();
        let mut out = Vec::new();
        let pw = StreamId { host: 0xb, process: 5, worker: PROCESS_WIDE };
        let w0 = StreamId { worker: 0, ..pw };
        let hello = Hello {
            host_name: "b".into(),
            program: "p".into(),
            pid: 5,
            workers: 1,
            invariant_tsc: true,
            ticks_per_sec: 1_000_000_000,
        };
        e.hello(pw, 0, ClockDomain::Tsc, &hello, &mut out);
        e.clock(pw, 1, ClockDomain::Tsc, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 1 }], &mut out);
        let recs: Vec<Record> = (0..50).map(|i| Record::from_event(i * 10, Event::Mark { id: i })).collect();
        e.records(w0, 0, 0, ClockDomain::Tsc, &[&recs], &mut out);
        e.records(w0, 1, 0, ClockDomain::Tsc, &[&recs], &mut out);
        out
    }

    #[test]
    fn forwarder_passes_frames_unchanged_and_adds_exchanges_between_them() {
        let input = probe_bytes();
        let mut log = ExchangeLog { reference: Some(0xa), ..Default::default() };
        log.push(x(1));
        log.push(x(2));
        let mut fw = Forwarder::new(0xb, 99);
        let mut out = Vec::new();
        // In odd pieces; a new exchange arrives in the middle.
        let (a, b) = input.split_at(input.len() - 40);
        for c in a.chunks(13) {
            assert!(fw.feed(c, &log, &mut out).is_none());
        }
        log.push(x(3));
        assert!(fw.feed(b, &log, &mut out).is_none());
        let frames: Vec<_> = Decoder::new(&out[..]).map(|f| f.unwrap()).collect();
        let kinds: Vec<_> = frames.iter().map(|f| f.header.kind).collect();
        use ringlog::FrameKind::*;
        assert_eq!(kinds, vec![ClockSync, Hello, Clock, Records, ClockSync, Records]);
        let Body::ClockSync(cs) = &frames[0].body else { panic!() };
        assert_eq!((cs.reference_host, cs.exchanges.clone()), (0xa, vec![x(1), x(2)]));
        assert_eq!(frames[0].header.stream, StreamId { host: 0xb, process: 99, worker: PROCESS_WIDE });
        let Body::ClockSync(cs) = &frames[4].body else { panic!() };
        assert_eq!(cs.exchanges, vec![x(3)]);
        assert_eq!((frames[0].header.seq, frames[4].header.seq), (0, 1));
        // The probe's frames, byte for byte, once the added ones are removed.
        let mut fb = FrameBuffer::new();
        fb.feed(&out);
        let mut rest = Vec::new();
        while let Some((h, raw)) = fb.next_raw().unwrap() {
            if h.kind != ClockSync {
                rest.extend_from_slice(raw);
            }
        }
        assert_eq!(rest, input);
        assert_eq!((fw.frames, fw.injected), (4, 2));
    }

    #[test]
    fn forwarder_without_reference_only_forwards_and_bad_bytes_pass_through() {
        let input = probe_bytes();
        let mut log = ExchangeLog::default(); // reference unknown: no exchanges to add
        log.push(x(1));
        let mut fw = Forwarder::new(0xb, 99);
        let mut out = Vec::new();
        assert!(fw.feed(&input, &log, &mut out).is_none());
        assert_eq!(out, input);
        let mut fw = Forwarder::new(0xb, 99);
        let mut out = Vec::new();
        let mut bad = input.clone();
        bad[80] ^= 0xff; // inside the first frame's payload
        assert!(fw.feed(&bad, &log, &mut out).is_some());
        assert!(fw.feed(b"more", &log, &mut out).is_none());
        assert_eq!(out, [&bad[..], b"more"].concat());
    }

    #[test]
    fn specs_parse() {
        assert_eq!("tcp:h:1".parse::<Upstream>(), Ok(Upstream::Tcp("h:1".into())));
        assert_eq!("unix:/x".parse::<Upstream>(), Ok(Upstream::Unix("/x".into())));
        // Said as it was given (in the error for an upstream it cannot reach).
        for spec in ["tcp:h:1", "unix:/x"] {
            assert_eq!(spec.parse::<Upstream>().map(|u| u.to_string()), Ok(spec.to_string()));
        }
        assert!("tcp:1".parse::<Upstream>().is_err());
        assert_eq!(parse_udp("udp:127.0.0.1:9").unwrap(), "127.0.0.1:9".parse().unwrap());
        assert!(parse_udp("127.0.0.1:9").is_err());
    }
}
