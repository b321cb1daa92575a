//! The ping-pong protocol between two hosts (freezer-notes §2.10 `probe`, §8): a
//! [`Prober`] on the reference host and a [`Responder`] on the source host exchange small
//! UDP datagrams; each round trip becomes one [`Exchange`] for a [`FreeZer`].
//!
//! The paper sends its probes over plain UDP rather than a higher layer, to avoid
//! unpredictable delays (FreeZer §4.1). Here too every stamp is taken next to the syscall
//! it brackets: `s` just before `send_to`, `r` just after the responder's `recv_from`
//! returns, `e` just after the prober's `recv_from` returns. Nothing else happens in
//! between, so the round trip (the width of a zero bracket) is as small as user space
//! allows.
//!
//! # Wire format (40 bytes, little endian)
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `CSYN` |
//! | 4 | version (1) |
//! | 5 | kind: 1 ping, 2 pong, 3 identify, 4 identity |
//! | 6..8 | reserved, zero |
//! | 8..16 | session: random per prober, echoed by the responder |
//! | 16..24 | sequence number, echoed |
//! | 24..32 | the responder's `r` (pong), its host id (identity), zero (ping, identify) |
//! | 32..40 | FNV-1a 64 of bytes 0..32 |
//!
//! Identify/identity let a prober learn which host answers (the sidecar's
//! host id, so exchanges can name their reference host); a responder
//! without an id counts an identify as bad and does not answer.
//!
//! A datagram that is short, long, corrupt, of another version or kind, from another
//! address, of another session, or answering an older ping is dropped and counted; it is
//! never fed to FreeZer. (A checksum is not authentication: a peer that lies about `r`
//! consistently cannot be detected, one that lies inconsistently breaks the clock model
//! and is reported as such.)

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::exchange::Exchange;
use crate::freezer::{Error, FreeZer};

/// A source of timestamps for one host.
pub trait Clock {
    /// The current reading.
    fn now(&self) -> u64;
}

impl<F: Fn() -> u64> Clock for F {
    fn now(&self) -> u64 {
        self()
    }
}

/// The time-stamp counter (`rdtsc`, no fence: the same instruction the probe uses). On
/// other architectures, falls back to [`RealtimeClock`]. All processes on one host with an
/// invariant TSC read the same counter.
#[derive(Clone, Copy, Debug, Default)]
pub struct TscClock;

impl Clock for TscClock {
    #[inline]
    fn now(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: rdtsc has no preconditions; it only reads the counter.
            #[allow(unused_unsafe)]
            unsafe {
                core::arch::x86_64::_rdtsc()
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            RealtimeClock.now()
        }
    }
}

/// `CLOCK_REALTIME` in nanoseconds since the Unix epoch: shared by every process on a host
/// (std's `Instant` is not comparable across processes), but it can be stepped, which
/// FreeZer reports as a broken model.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealtimeClock;

impl Clock for RealtimeClock {
    fn now(&self) -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    }
}

const MAGIC: &[u8; 4] = b"CSYN";
const VERSION: u8 = 1;
const PING: u8 = 1;
const PONG: u8 = 2;
const IDENTIFY: u8 = 3;
const IDENTITY: u8 = 4;
/// Size of every datagram of the protocol.
pub const DATAGRAM_LEN: usize = 40;

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A decoded datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// 1 ping, 2 pong, 3 identify, 4 identity.
    pub kind: u8,
    /// The prober's session.
    pub session: u64,
    /// Sequence number of the ping.
    pub seq: u64,
    /// The responder's receive stamp (pong only).
    pub stamp: u64,
}

impl Datagram {
    /// Encode into exactly [`DATAGRAM_LEN`] bytes.
    pub fn encode(&self) -> [u8; DATAGRAM_LEN] {
        let mut b = [0u8; DATAGRAM_LEN];
        b[0..4].copy_from_slice(MAGIC);
        b[4] = VERSION;
        b[5] = self.kind;
        b[8..16].copy_from_slice(&self.session.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.stamp.to_le_bytes());
        let c = fnv1a(&b[0..32]);
        b[32..40].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// Decode, or `None` for anything that is not a well-formed datagram of this protocol.
    pub fn decode(b: &[u8]) -> Option<Datagram> {
        if b.len() != DATAGRAM_LEN || &b[0..4] != MAGIC || b[4] != VERSION || b[6] != 0 || b[7] != 0 {
            return None;
        }
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if word(32) != fnv1a(&b[0..32]) {
            return None;
        }
        let kind = b[5];
        if !(PING..=IDENTITY).contains(&kind) {
            return None;
        }
        Some(Datagram { kind, session: word(8), seq: word(16), stamp: word(24) })
    }
}

/// Counters of a [`Responder`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderStats {
    /// Valid pings answered.
    pub pongs: u64,
    /// Datagrams dropped as malformed (or a pong sent to the responder).
    pub bad: u64,
    /// Identify requests answered.
    pub identities: u64,
}

/// The source side: answers every valid ping with a pong carrying its receive stamp.
pub struct Responder<C: Clock> {
    socket: UdpSocket,
    clock: C,
    stats: ResponderStats,
    id: Option<u64>,
}

impl<C: Clock> Responder<C> {
    /// Bind to `addr` (for example `"127.0.0.1:0"`).
    pub fn bind(addr: impl ToSocketAddrs, clock: C) -> io::Result<Self> {
        let socket = UdpSocket::bind(addr)?;
        socket.set_read_timeout(Some(Duration::from_millis(20)))?;
        Ok(Responder { socket, clock, stats: ResponderStats::default(), id: None })
    }

    /// Also answer identify requests with `id` (the host id of this clock).
    pub fn with_id(mut self, id: u64) -> Self {
        self.id = Some(id);
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Counters so far.
    pub fn stats(&self) -> ResponderStats {
        self.stats
    }

    /// Wait (up to 20 ms) for one datagram and answer it if it is a valid ping.
    pub fn serve_one(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 64];
        match self.socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                // The stamp first: everything after this line adds to the round trip but
                // not to the uncertainty of `r`.
                let r = self.clock.now();
                match Datagram::decode(&buf[..n]) {
                    Some(d) if d.kind == PING => {
                        let pong = Datagram { kind: PONG, session: d.session, seq: d.seq, stamp: r };
                        self.socket.send_to(&pong.encode(), from)?;
                        self.stats.pongs += 1;
                    }
                    Some(d) if d.kind == IDENTIFY && self.id.is_some() => {
                        let id = self.id.unwrap_or(0);
                        let rep = Datagram { kind: IDENTITY, session: d.session, seq: d.seq, stamp: id };
                        self.socket.send_to(&rep.encode(), from)?;
                        self.stats.identities += 1;
                    }
                    _ => self.stats.bad += 1,
                }
                Ok(())
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Serve until `stop` is set (checked at least every 20 ms).
    pub fn serve(&mut self, stop: &AtomicBool) -> io::Result<()> {
        while !stop.load(Ordering::Relaxed) {
            self.serve_one()?;
        }
        Ok(())
    }
}

/// A responder running on its own thread; [`ResponderHandle::stop`] ends it.
pub struct ResponderHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<ResponderStats>>>,
}

impl ResponderHandle {
    /// Bind a responder on `addr` and serve on a new thread.
    pub fn spawn<C: Clock + Send + 'static>(addr: impl ToSocketAddrs, clock: C) -> io::Result<ResponderHandle> {
        Self::spawn_responder(Responder::bind(addr, clock)?)
    }

    /// As [`ResponderHandle::spawn`], answering identify requests with `id`.
    pub fn spawn_with_id<C: Clock + Send + 'static>(
        addr: impl ToSocketAddrs,
        clock: C,
        id: u64,
    ) -> io::Result<ResponderHandle> {
        Self::spawn_responder(Responder::bind(addr, clock)?.with_id(id))
    }

    fn spawn_responder<C: Clock + Send + 'static>(mut r: Responder<C>) -> io::Result<ResponderHandle> {
        let addr = r.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            r.serve(&flag)?;
            Ok(r.stats())
        });
        Ok(ResponderHandle { addr, stop, thread: Some(thread) })
    }

    /// Where the responder listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop and return the counters.
    pub fn stop(mut self) -> io::Result<ResponderStats> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().map_err(|_| io::Error::other("responder thread panicked"))?
    }
}

impl Drop for ResponderHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Settings of a [`Prober`].
#[derive(Clone, Copy, Debug)]
pub struct ProberConfig {
    /// Exchanges per second (the paper does not fix one; 1 kHz costs ~80 kB/s).
    pub rate_hz: u32,
    /// How long to wait for a pong before giving the exchange up.
    pub reply_timeout: Duration,
}

impl Default for ProberConfig {
    fn default() -> Self {
        ProberConfig { rate_hz: 1000, reply_timeout: Duration::from_millis(50) }
    }
}

/// Counters of a [`Prober`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProberStats {
    /// Pings sent.
    pub sent: u64,
    /// Complete exchanges.
    pub exchanges: u64,
    /// Pings with no valid pong in time.
    pub timeouts: u64,
    /// Malformed datagrams.
    pub bad: u64,
    /// Well-formed datagrams from another address or session.
    pub foreign: u64,
    /// Pongs answering an older ping.
    pub stale: u64,
    /// Exchanges FreeZer rejected as invalid.
    pub invalid: u64,
    /// Clock-model violations (each one started a new epoch).
    pub violations: u64,
}

/// The reference side: sends pings, times the pongs, feeds a [`FreeZer`].
pub struct Prober<C: Clock> {
    socket: UdpSocket,
    peer: SocketAddr,
    clock: C,
    config: ProberConfig,
    session: u64,
    seq: u64,
    stats: ProberStats,
}

impl<C: Clock> Prober<C> {
    /// Bind to `bind` and probe `peer`.
    pub fn new(bind: impl ToSocketAddrs, peer: SocketAddr, clock: C, config: ProberConfig) -> io::Result<Self> {
        let socket = UdpSocket::bind(bind)?;
        socket.set_read_timeout(Some(config.reply_timeout))?;
        let local = socket.local_addr()?;
        // A session id no other prober is likely to share, so pongs meant for another
        // prober (or a previous run on the same port) are recognised as foreign.
        let mut h = crate::sim::Rng::new(clock.now() ^ ((std::process::id() as u64) << 32) ^ local.port() as u64);
        let session = h.next_u64();
        Ok(Prober { socket, peer, clock, config, session, seq: 0, stats: ProberStats::default() })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Counters so far.
    pub fn stats(&self) -> ProberStats {
        self.stats
    }

    /// This prober's session id.
    pub fn session(&self) -> u64 {
        self.session
    }

    /// One ping-pong. `Ok(None)` if no valid pong arrived within the reply timeout.
    pub fn probe_once(&mut self) -> io::Result<Option<Exchange>> {
        self.request(PING, PONG)
    }

    /// Asks the responder which host it is (see the module docs). `Ok(None)`
    /// if no identity arrived within the reply timeout (an old responder,
    /// one without an id, or none at all). Counted like a ping.
    pub fn identify(&mut self) -> io::Result<Option<u64>> {
        Ok(self.request(IDENTIFY, IDENTITY)?.map(|x| x.r))
    }

    fn request(&mut self, kind: u8, answer: u8) -> io::Result<Option<Exchange>> {
        self.seq += 1;
        let ping = Datagram { kind, session: self.session, seq: self.seq, stamp: 0 }.encode();
        let mut buf = [0u8; 64];
        let deadline = Instant::now() + self.config.reply_timeout;
        let s = self.clock.now();
        self.socket.send_to(&ping, self.peer)?;
        self.stats.sent += 1;
        let mut shortened = false;
        let got = loop {
            let got = self.socket.recv_from(&mut buf);
            let e = self.clock.now();
            match got {
                Ok((n, from)) => {
                    match Datagram::decode(&buf[..n]) {
                        None => self.stats.bad += 1,
                        Some(_) if from != self.peer => self.stats.foreign += 1,
                        Some(d) if d.session != self.session => self.stats.foreign += 1,
                        Some(d) if d.kind != answer => self.stats.bad += 1,
                        Some(d) if d.seq != self.seq => self.stats.stale += 1,
                        Some(d) => {
                            self.stats.exchanges += (answer == PONG) as u64;
                            break Ok(Some(Exchange { s, r: d.stamp, e }));
                        }
                    }
                    // Dropped: keep waiting for the real pong, within the same deadline.
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break Ok(None);
                    }
                    if let Err(err) = self.socket.set_read_timeout(Some(left)) {
                        break Err(err);
                    }
                    shortened = true;
                }
                Err(err) if matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    break Ok(None)
                }
                Err(err) => break Err(err),
            }
        };
        // However it ended, the next request gets the whole timeout again (not what
        // was left of this one after a dropped datagram).
        if shortened {
            self.socket.set_read_timeout(Some(self.config.reply_timeout))?;
        }
        let got = got?;
        if got.is_none() {
            self.stats.timeouts += 1;
        }
        Ok(got)
    }

    /// Feed one exchange, handling a broken model by counting it and starting a new epoch
    /// seeded with this exchange.
    pub fn feed(&mut self, fz: &mut FreeZer, x: Exchange) {
        match fz.observe(x) {
            Ok(()) => {}
            Err(Error::ClockModel { .. }) => {
                self.stats.violations += 1;
                fz.new_epoch();
                let _ = fz.observe(x);
            }
            Err(_) => self.stats.invalid += 1,
        }
    }

    /// Probe at the configured rate for `duration`, feeding `fz`; `each` sees every
    /// exchange after it was fed.
    pub fn run_for(
        &mut self,
        fz: &mut FreeZer,
        duration: Duration,
        mut each: impl FnMut(&Exchange, &FreeZer),
    ) -> io::Result<()> {
        let period = Duration::from_secs_f64(1.0 / self.config.rate_hz.max(1) as f64);
        let start = Instant::now();
        let mut next = start;
        while start.elapsed() < duration {
            if let Some(x) = self.probe_once()? {
                self.feed(fz, x);
                each(&x, fz);
            }
            next += period;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now; // behind schedule: do not burst to catch up
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_answers_with_the_responder_id_only_when_it_has_one() {
        // Timeouts where an answer is expected are long: the responder thread may wait
        // for a core on a loaded machine, and an answer ends the wait at once.
        let clock = || 7u64;
        let patient = ProberConfig { reply_timeout: Duration::from_secs(10), ..Default::default() };
        let with = ResponderHandle::spawn_with_id("127.0.0.1:0", clock, 0xfeed).unwrap();
        let mut p = Prober::new("127.0.0.1:0", with.addr(), clock, patient).unwrap();
        assert_eq!(p.identify().unwrap(), Some(0xfeed));
        assert_eq!(p.probe_once().unwrap(), Some(Exchange { s: 7, r: 7, e: 7 }));
        assert_eq!(with.stop().unwrap().identities, 1);
        let without = ResponderHandle::spawn("127.0.0.1:0", clock).unwrap();
        let hasty = ProberConfig { reply_timeout: Duration::from_millis(30), ..Default::default() };
        let mut p = Prober::new("127.0.0.1:0", without.addr(), clock, hasty).unwrap();
        assert_eq!(p.identify().unwrap(), None);
        // A pong proves the responder has read the identify request: on loopback a
        // datagram is queued at the receiver as it is sent, so the request is ahead.
        let mut p = Prober::new("127.0.0.1:0", without.addr(), clock, patient).unwrap();
        assert!(p.probe_once().unwrap().is_some());
        let stats = without.stop().unwrap();
        assert_eq!((stats.bad, stats.pongs), (1, 1), "{stats:?}");
    }

    #[test]
    fn datagram_round_trip_and_rejection() {
        let d = Datagram { kind: PONG, session: 7, seq: 9, stamp: 123_456_789_012_345_678 };
        let b = d.encode();
        assert_eq!(Datagram::decode(&b), Some(d));
        for i in 0..DATAGRAM_LEN {
            let mut c = b;
            c[i] ^= 0x10;
            assert_eq!(Datagram::decode(&c), None, "flip in byte {i} accepted");
        }
        assert_eq!(Datagram::decode(&b[..39]), None);
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(Datagram::decode(&long), None);
    }
}
