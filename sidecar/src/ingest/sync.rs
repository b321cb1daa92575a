//! Cross-host clock synchronization (DESIGN "Clocks"; issue 4 stage 1): the
//! exchange frames a relay adds to a remote host's streams feed one
//! [`clocksync::FreeZer`] per remote host; once calibrated, that host's
//! timestamps (already CLOCK_MONOTONIC ns of the host, by [`crate::ingest::clock`])
//! are converted to the reference host's CLOCK_MONOTONIC, and its streams
//! are windowed and analyzed on the reference timeline together with the
//! reference host's own streams. No I/O.
//!
//! # Orientation
//!
//! The relay on the remote host probes; the reference sidecar answers. An
//! exchange is `t1 ≤ t2 ≤ t3 ≤ t4` in real time, `t1, t4` on the remote
//! clock, `t2, t3` on the reference clock. FreeZer's bracket has the two
//! outer stamps on its *reference* clock, so the FreeZer here has the remote
//! host as its reference R and the reference host as its source S:
//! `Exchange { s: t1, r: t2, e: t4 }` (and `r: t3` when it differs). It then
//! converts reference-host times to remote times; we need the inverse. Both
//! clocks are increasing and the model is linear (`c_R = F·c_S + C`,
//! `F ∈ [F^L, F^U]`, a bracket `c_R ∈ [Z^L, Z^U]` at source position `z`,
//! freezer-notes §2.6), so for a remote reading `k` (continuous value in
//! `[k, k + 1)`):
//!
//! ```text
//! c_S = z + (c_R − c_R(z)) / F,   c_R − c_R(z) ∈ [k − Z^U, k + 1 − Z^L] = [D_lo, D_hi]
//! lo = z + D_lo / F^U  if D_lo ≥ 0,   z − |D_lo| / F^L  if D_lo < 0     (rounded down)
//! hi = z + D_hi / F^L  if D_hi ≥ 0,   z − |D_hi| / F^U  if D_hi < 0     (rounded up)
//! ```
//!
//! computed exactly in integers with outward rounding (64.64 fixed-point
//! inverses, rounded outward like FreeZer's own multipliers; freezer-notes
//! §2.7), through both the zero bracket and the most recent one, and
//! intersected (as [`clocksync::FreeZer::to_reference_tight`] does). The
//! result contains the reference reading at the instant the remote clock
//! read `k`, whatever the delays were. (What it cannot cover is the error
//! of the TSC → CLOCK_MONOTONIC interpolation of [`crate::ingest::clock`], which
//! happens before; on hosts whose probes stamp CLOCK_MONOTONIC directly
//! there is none.)
//!
//! # The point the analysis uses
//!
//! The analysis needs one time per event. It uses the **midpoint** of the
//! interval: with nothing known inside the interval, it is the point whose
//! worst-case error is smallest (half the width). FreeZer's warning against
//! midpoints (freezer-notes §2.5) is about the *bounds*: they are kept, and
//! every window reports the widest interval it used
//! (`clock_uncertainty_ns`). The one relation the point may not break is
//! causality: a receive placed before its send is clamped to the send
//! ([`crate::analysis::causality::enforce_causality`]), and such clamps are
//! counted.
//!
//! # When a host counts as synchronized
//!
//! Per process, at its first Records frame: the host's model must be
//! calibrated, and the byte stream must itself have carried exchanges for
//! the host before that frame (the relay sends them first). The decision
//! holds for the life of the connection, so a process's windows never
//! switch timelines. Hosts not calibrated then stay exactly as before:
//! their own timeline, reported as unsynchronized, never mixed. A model
//! violation (a clock jump: FreeZer's [`clocksync::Error::ClockModel`])
//! starts a new calibration epoch; until it is calibrated the last model of
//! the old epoch is used and the windows concerned carry a fault.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use clocksync::{Error as FzError, Exchange, FreeZer, Interval, OfflineFreeZer, Ratio};
use ringlog::{ClockExchange, ClockSync};
use rustc_hash::FxHashMap;

use crate::analysis::model::Ns;

/// `floor(x · fp / 2^64)` (`up`: ceiling) for `x < 2^64`; `None` on overflow.
#[inline]
fn mul_fp(x: u128, fp: u128, up: bool) -> Option<u128> {
    if x >> 64 != 0 {
        return None;
    }
    const MASK: u128 = (1 << 64) - 1;
    let lo = x * (fp & MASK);
    let q = x.checked_mul(fp >> 64)?.checked_add(lo >> 64)?;
    Some(if up && lo & MASK != 0 { q + 1 } else { q })
}

/// Converts one remote host's CLOCK_MONOTONIC ns to intervals of the
/// reference host's CLOCK_MONOTONIC ns. Taken once per Records frame, so the
/// per-record path takes no lock.
#[derive(Clone, Debug)]
pub enum Converter {
    /// Live: a snapshot of the host's [`FreeZer`], converting through two
    /// of its brackets.
    Online(Snapshot),
    /// A recorded run whose exchanges were all read before its records
    /// ([`Registry::offline`]): each event is converted with the exchanges
    /// on both sides of it, with the tightest frequency bounds any pair of
    /// the run gives ([`OfflineFreeZer`]; issue 31.3).
    Offline(Arc<OfflineFreeZer>),
}

impl PartialEq for Converter {
    fn eq(&self, other: &Converter) -> bool {
        match (self, other) {
            (Converter::Online(a), Converter::Online(b)) => a == b,
            (Converter::Offline(a), Converter::Offline(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Converter {
    /// From a calibrated FreeZer (remote host = its reference, reference
    /// host = its source). `None` while it cannot convert: not calibrated,
    /// or no positive lower frequency bound yet.
    pub fn of(fz: &FreeZer) -> Option<Converter> {
        Snapshot::of(fz).map(Converter::Online)
    }

    /// The calibration epoch converted with (an offline converter is built
    /// only for a host whose model never broke: epoch 0).
    pub fn epoch(&self) -> u32 {
        match self {
            Converter::Online(s) => s.epoch,
            Converter::Offline(_) => 0,
        }
    }

    /// The interval of reference-host ns that contains the reference
    /// reading at the instant this host's CLOCK_MONOTONIC read `k`. `None`:
    /// out of range (distances beyond 2^64), or the brackets disagree (the
    /// model broke in a way no exchange has shown yet).
    #[inline]
    pub fn interval(&self, k: Ns) -> Option<Interval> {
        match self {
            Converter::Online(s) => s.interval(k),
            Converter::Offline(off) => off.to_source(k).ok(),
        }
    }

    /// The point the analysis uses (the midpoint, see the module docs) and
    /// the interval's width, ns.
    #[inline]
    pub fn point(&self, k: Ns) -> Option<(Ns, u64)> {
        let iv = self.interval(k)?;
        let m = iv.midpoint().clamp(0, u64::MAX as i128) as u64;
        Some((m, iv.width().min(u64::MAX as u128) as u64))
    }
}

/// A snapshot of one remote host's live model: two brackets and the
/// frequency bounds' inverses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub epoch: u32,
    /// Brackets `(z, Z^L, Z^U)`: the newest anchor (FreeZer's anchors are
    /// placed as the run goes on, each the tightest bracket carried to it:
    /// converting through the newest instead of the zero keeps the width of
    /// an event near it small however long the run; issue 31.3) and the
    /// most recent exchange's.
    brackets: [(u64, i128, i128); 2],
    /// `floor(2^64 / F^U)`: dividing by the largest F, rounded down.
    inv_fu_floor: u128,
    /// `ceil(2^64 / F^L)`: dividing by the smallest F, rounded up. (Where
    /// the bounds swap, `D < 0`, `lo` takes `|D| / F^L` rounded up and `hi`
    /// `|D| / F^U` rounded down: the same two multipliers.)
    inv_fl_ceil: u128,
}

impl Snapshot {
    fn of(fz: &FreeZer) -> Option<Snapshot> {
        if !fz.is_calibrated() {
            return None;
        }
        let (fl, fu) = fz.frequency_bounds();
        if fl.num == 0 || fu.is_infinite() || fu.num == 0 {
            return None;
        }
        let (z, zi) = fz.newest_anchor()?;
        let (r, ri) = fz.recent().unwrap_or((z, zi));
        let inv_fu_floor = Ratio::new(fu.den, fu.num).fp_floor();
        let inv_fl_ceil = Ratio::new(fl.den, fl.num).fp_ceil();
        Some(Snapshot {
            epoch: fz.epoch(),
            brackets: [(z, zi.lo, zi.hi), (r, ri.lo, ri.hi)],
            inv_fu_floor,
            inv_fl_ceil,
        })
    }

    #[inline]
    fn through(&self, (z, zl, zu): (u64, i128, i128), k: u64) -> Option<Interval> {
        let d_lo = k as i128 - zu;
        let d_hi = k as i128 + 1 - zl;
        let lo = if d_lo >= 0 {
            z as i128 + mul_fp(d_lo as u128, self.inv_fu_floor, false)? as i128
        } else {
            z as i128 - mul_fp(d_lo.unsigned_abs(), self.inv_fl_ceil, true)? as i128
        };
        let hi = if d_hi >= 0 {
            z as i128 + mul_fp(d_hi as u128, self.inv_fl_ceil, true)? as i128
        } else {
            z as i128 - mul_fp(d_hi.unsigned_abs(), self.inv_fu_floor, false)? as i128
        };
        Some(Interval::new(lo, hi))
    }

    #[inline]
    fn interval(&self, k: Ns) -> Option<Interval> {
        let a = self.through(self.brackets[0], k)?;
        let b = self.through(self.brackets[1], k)?;
        a.intersect(&b)
    }
}

/// What the registry keeps per remote host.
#[derive(Debug, Default)]
pub struct HostModel {
    pub fz: FreeZer,
    /// `t1` of the last exchange fed: every byte stream of the host carries
    /// the same exchanges (one relay, several connections), so later copies
    /// and older ones are skipped, and FreeZer sees each once, in order
    /// (unless the model says an "older" one is the host's clock restarting:
    /// [`HostModel::restarted`]).
    last_t1: Option<u64>,
    /// `t3` of that exchange (the reference's clock, which does not restart
    /// while this sidecar runs).
    last_t3: u64,
    pub exchanges: u64,
    pub duplicates: u64,
    pub invalid: u64,
    /// Model violations (each started a new epoch), and the last one.
    pub violations: u32,
    pub last_violation: Option<String>,
    /// The whole run's conversion, when the run was recorded and all its
    /// exchanges were read first ([`Registry::offline`]); used while the
    /// model read along with the records has not broken.
    pub offline: Option<Arc<OfflineFreeZer>>,
    /// The exchanges fed to `fz`, kept only while a registry reads a
    /// recorded run's exchanges for [`Registry::offline`].
    fed: Option<Vec<Exchange>>,
}

impl HostModel {
    /// The converter for this host now: the offline one while the model
    /// holds, else the live model's snapshot.
    pub fn converter(&self) -> Option<Converter> {
        match &self.offline {
            Some(off) if self.violations == 0 => Some(Converter::Offline(off.clone())),
            _ => Converter::of(&self.fz),
        }
    }

    /// For an exchange not newer than the last one fed on this host's clock:
    /// why it must be this host's clock restarting (None: it is a copy or an
    /// older exchange). It is a restart when the reference clock says the
    /// exchange came after the last one fed (`t2` past its `t3`) and it does
    /// not fit the model: in every genuine exchange this host's clock read
    /// `[t1, t4]` when the reference read `t2`, and the calibrated model's
    /// interval for that instant holds the truth, so the two meet (FreeZer's
    /// guarantee; exchanges of two relays of one host that overlap in time
    /// fit it).
    fn restarted(&self, x: &ClockExchange) -> Option<String> {
        // Older on the reference clock too: a copy, or an old exchange a
        // later connection carries again (which need not fit the model of a
        // later epoch).
        if x.t2 <= self.last_t3 {
            return None;
        }
        let iv = self.fz.to_reference(x.t2).ok()?;
        let seen = Interval::new(x.t1 as i128, x.t4 as i128 + 1);
        iv.intersect(&seen).is_none().then(|| {
            format!(
                "the host's clock went back (an exchange at {} ns after one at {} ns, far from the model's {iv}): \
                 the host restarted",
                x.t1,
                self.last_t1.unwrap_or(0)
            )
        })
    }
}

/// Clock models of the hosts of one sidecar process, shared by every byte
/// stream it reads (exchanges for a host may arrive on any connection).
#[derive(Debug, Default)]
pub struct Registry {
    /// The host whose timeline is the common one (the sidecar's own host
    /// when it answers exchanges; else the first reference seen in frames).
    pub reference: Option<u64>,
    /// realtime − monotonic of the reference host, to report windows as
    /// UNIX times when none of its own streams is read here.
    pub reference_realtime_offset: Option<i128>,
    pub hosts: BTreeMap<u64, HostModel>,
    /// Exchanges against some other reference host: not usable here.
    pub foreign: u64,
    /// Keep the exchanges fed per host (for [`Registry::offline`]).
    recording: bool,
}

impl Registry {
    /// A registry whose timeline is `host`'s (the sidecar answering the
    /// exchanges), with its realtime − monotonic offset.
    pub fn with_reference(host: u64, realtime_offset: Option<i128>) -> Registry {
        Registry { reference: Some(host), reference_realtime_offset: realtime_offset, ..Default::default() }
    }

    /// Feeds the exchanges of a ClockSync frame written on `host`. Returns
    /// how many were new.
    pub fn observe(&mut self, host: u64, cs: &ClockSync) -> usize {
        let reference = *self.reference.get_or_insert(cs.reference_host);
        if cs.reference_host != reference || host == reference {
            self.foreign += cs.exchanges.len() as u64;
            return 0;
        }
        let recording = self.recording;
        let m =
            self.hosts.entry(host).or_insert_with(|| HostModel { fed: recording.then(Vec::new), ..Default::default() });
        let mut new = 0;
        for x in &cs.exchanges {
            if m.last_t1.is_some_and(|l| x.t1 <= l) {
                // A copy of an exchange already fed (every connection of a
                // relay carries the same ones), or an older one: either way
                // it agrees with the model. One that does not is the host's
                // clock starting again (a reboot: CLOCK_MONOTONIC restarts
                // near 0), which must not be skipped as a copy: the old
                // model would go on converting the new clock.
                match m.restarted(x) {
                    None => {
                        m.duplicates += 1;
                        continue;
                    }
                    Some(why) => {
                        m.violations += 1;
                        m.last_violation = Some(format!("epoch {}: {why}", m.fz.epoch()));
                        m.fz.new_epoch();
                    }
                }
            }
            m.last_t1 = Some(x.t1);
            m.last_t3 = x.t3;
            m.exchanges += 1;
            new += 1;
            // FreeZer's R is this host (t1, t4), its S the reference (t2, t3).
            let mut feed = |q: Exchange| match m.fz.observe(q) {
                Ok(()) => m.fed.iter_mut().for_each(|fed| fed.push(q)),
                Err(FzError::ClockModel { epoch, violation }) => {
                    m.violations += 1;
                    m.last_violation = Some(format!("epoch {epoch}: {violation}"));
                    m.fz.new_epoch();
                    let _ = m.fz.observe(q);
                }
                Err(_) => m.invalid += 1,
            };
            feed(Exchange { s: x.t1, r: x.t2, e: x.t4 });
            if x.t3 != x.t2 {
                feed(Exchange { s: x.t1, r: x.t3, e: x.t4 });
            }
        }
        new
    }

    pub fn converter(&self, host: u64) -> Option<Converter> {
        self.hosts.get(&host).and_then(HostModel::converter)
    }

    /// The registry for a recorded run whose exchanges are all known before
    /// its records are read (`frames`: the run's ClockSync frames with the
    /// host that wrote each, in the order the files hold them). Every host
    /// whose exchanges fit one clock model gets an [`OfflineFreeZer`] of
    /// all of them, so its events are converted with the exchanges on both
    /// sides (an event early in the run no longer as wide as the drift
    /// accumulated until the exchanges after it). The exchanges are read
    /// again with the records as for a live run: a host whose model breaks
    /// there (or whose exchanges did not fit one model) is converted as
    /// live, epoch by epoch, with the faults that go with it.
    pub fn offline<'a>(frames: impl IntoIterator<Item = (u64, &'a ClockSync)>) -> Registry {
        let mut all = Registry { recording: true, ..Default::default() };
        for (host, cs) in frames {
            all.observe(host, cs);
        }
        let mut reg = Registry { reference: all.reference, ..Default::default() };
        for (host, m) in all.hosts {
            let fed = m.fed.unwrap_or_default();
            if m.violations != 0 || fed.is_empty() {
                continue;
            }
            // (As live: no converter without a positive lower frequency
            // bound, which every conversion divides by.)
            match OfflineFreeZer::new(&fed) {
                Ok(off) if off.frequency_bounds().0.num != 0 => {
                    reg.hosts.insert(host, HostModel { offline: Some(Arc::new(off)), ..Default::default() });
                }
                _ => {}
            }
        }
        reg
    }
}

/// The registry as the byte streams share it.
#[derive(Clone, Debug, Default)]
pub struct SharedSync(pub Arc<Mutex<Registry>>);

impl SharedSync {
    pub fn new(r: Registry) -> SharedSync {
        SharedSync(Arc::new(Mutex::new(r)))
    }
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug, Default)]
struct ProcState {
    decided: bool,
    /// The converter of the latest calibrated model (kept through a
    /// recalibration: see the module docs).
    conv: Option<Converter>,
    /// The registry's violation count when `conv` was taken.
    violations: u32,
}

/// One byte stream's view: which of its processes are converted.
#[derive(Debug, Default)]
pub struct StreamSync {
    pub shared: SharedSync,
    /// Exchanges for each host seen in this byte stream.
    seen: FxHashMap<u64, u64>,
    procs: FxHashMap<(u64, u32), ProcState>,
}

impl StreamSync {
    pub fn new(shared: SharedSync) -> StreamSync {
        StreamSync { shared, ..Default::default() }
    }

    /// A ClockSync frame of this byte stream, written on `host`.
    pub fn clock_sync(&mut self, host: u64, cs: &ClockSync) {
        *self.seen.entry(host).or_default() += cs.exchanges.len() as u64;
        self.shared.lock().observe(host, cs);
    }

    /// At each Records frame of process `(host, pid)`: the converter to
    /// apply (None: the host's own timeline) and a fault for the frame's
    /// windows if the model broke since the last frame.
    pub fn frame(&mut self, host: u64, pid: u32) -> (Option<Converter>, Option<String>) {
        let st = self.procs.entry((host, pid)).or_default();
        if st.decided && st.conv.is_none() {
            return (None, None);
        }
        let reg = self.shared.lock();
        let model = reg.hosts.get(&host);
        let now = model.and_then(HostModel::converter);
        if !st.decided {
            st.decided = true;
            // Calibrated, and this stream carried the host's exchanges.
            if self.seen.get(&host).copied().unwrap_or(0) == 0 {
                return (None, None);
            }
            st.conv = now.clone();
            st.violations = model.map_or(0, |m| m.violations);
            return (now, None);
        }
        let m = model.expect("a converted host has a model");
        let mut fault = None;
        if m.violations != st.violations {
            st.violations = m.violations;
            fault = Some(format!(
                "clock sync: clock model of host {host:016x} broken ({}); new calibration epoch {}{}",
                m.last_violation.as_deref().unwrap_or("?"),
                m.fz.epoch(),
                if now.is_none() { ", converting with the previous epoch's model until it is calibrated" } else { "" }
            ));
        } else if now.is_none() {
            fault = Some(format!(
                "clock sync: host {host:016x} recalibrating (epoch {}): converted with the previous epoch's model",
                m.fz.epoch()
            ));
        }
        if now.is_some() {
            st.conv = now;
        }
        (st.conv.clone(), fault)
    }

    /// The host whose timeline the streams of `(host, pid)` are on.
    pub fn timeline(&self, host: u64, pid: u32) -> u64 {
        match self.procs.get(&(host, pid)) {
            Some(st) if st.conv.is_some() => self.shared.lock().reference.unwrap_or(host),
            _ => host,
        }
    }

    /// Whether `(host, pid)` is converted to another host's timeline.
    pub fn converted(&self, host: u64, pid: u32) -> bool {
        self.procs.get(&(host, pid)).is_some_and(|s| s.conv.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::causality::{enforce_causality, prepare, Causality};
    use crate::analysis::model::{Counters, Fragment, Half, Messages, Sid};
    use clocksync::sim::{DelayModel, Link, Rng, SimClock, MILLISECOND, SECOND};
    use proptest::prelude::*;
    use ringlog::ClockExchange;

    const A: u64 = 0xa; // reference host
    const B: u64 = 0xb; // remote host

    /// The relay on B probes the responder on A: in sim terms B's clock is
    /// the prober's ("reference") and A's the responder's ("source").
    fn link(rng: &mut Rng, off_a: i128, off_b: i128, ppm_b: i64) -> Link {
        let a = SimClock::new(off_a, 1_000_000_000);
        let b = SimClock::new(off_b, (1_000_000_000i64 + ppm_b * 1000) as u64);
        Link {
            reference: b,
            source: a,
            fwd: DelayModel::random(rng),
            bwd: DelayModel::random(rng),
            jitter: DelayModel::constant(0.0),
        }
    }

    fn frame_of(l: &Link, t0: i128, n: usize, period: i128, rng: &mut Rng) -> ClockSync {
        let exchanges = l
            .run(t0, period, n, rng)
            .into_iter()
            .map(|rt| ClockExchange { t1: rt.x.s, t2: rt.x.r, t3: rt.r_send, t4: rt.x.e })
            .collect();
        ClockSync { reference_host: A, exchanges }
    }

    #[test]
    fn worked_inverse_example() {
        // B = A + 5 s exactly, 10 µs each way: the interval holds the truth
        // and is about one round trip wide.
        let mut reg = Registry::with_reference(A, None);
        let xs = (0..5u64)
            .map(|i| {
                let t = 1_000_000_000 + i * 100_000_000; // A's clock at the request
                ClockExchange { t1: t + 5_000_000_000 - 10_000, t2: t, t3: t, t4: t + 5_000_000_000 + 10_000 }
            })
            .collect();
        assert_eq!(reg.observe(B, &ClockSync { reference_host: A, exchanges: xs }), 5);
        let c = reg.converter(B).unwrap();
        for a in [900_000_000u64, 1_000_000_000, 1_250_000_000, 3_000_000_000] {
            let iv = c.interval(a + 5_000_000_000).unwrap();
            assert!(iv.contains(a as i128), "{a}: {iv}");
            assert!(iv.width() <= 25_000 + (a.abs_diff(1_400_000_000) / 1000) as u128, "{a}: {iv}");
            let (p, w) = c.point(a + 5_000_000_000).unwrap();
            assert!(iv.contains(p as i128) && w as u128 == iv.width());
        }
        // Exchanges against another reference, and repeats, are not fed.
        let again = ClockSync { reference_host: A, exchanges: vec![ClockExchange { t1: 1, t2: 1, t3: 1, t4: 2 }] };
        assert_eq!(reg.observe(B, &again), 0);
        assert_eq!(reg.hosts[&B].duplicates, 1);
        let other = ClockSync { reference_host: 0xc, ..again };
        assert_eq!(reg.observe(B, &other), 0);
        assert_eq!(reg.foreign, 1);
    }

    #[test]
    fn one_exchange_is_not_calibrated_and_streams_without_exchanges_stay_unsynchronized() {
        let shared = SharedSync::new(Registry::with_reference(A, None));
        let mut s = StreamSync::new(shared.clone());
        let one = ClockSync { reference_host: A, exchanges: vec![ClockExchange { t1: 10, t2: 5, t3: 5, t4: 20 }] };
        s.clock_sync(B, &one);
        assert_eq!(s.frame(B, 1), (None, None));
        assert_eq!(s.timeline(B, 1), B);
        // Calibrated later: process 1 keeps its decision, process 2 converts.
        let more = ClockSync {
            reference_host: A,
            exchanges: vec![ClockExchange { t1: 1_000_010, t2: 1_000_005, t3: 1_000_005, t4: 1_000_020 }],
        };
        s.clock_sync(B, &more);
        assert_eq!(s.frame(B, 1), (None, None));
        assert!(s.frame(B, 2).0.is_some());
        assert_eq!((s.timeline(B, 1), s.timeline(B, 2)), (B, A));
        // Another byte stream that carried no exchanges: own timeline.
        let mut other = StreamSync::new(shared);
        assert_eq!(other.frame(B, 3), (None, None));
    }

    #[test]
    fn a_clock_jump_starts_a_new_epoch_and_faults_the_frames() {
        let mut rng = Rng::new(7);
        let mut l = link(&mut rng, 10 * SECOND / 1000, 50 * SECOND / 1000, 30);
        l.fwd = DelayModel::constant(20e6);
        l.bwd = DelayModel::constant(20e6);
        let mut s = StreamSync::new(SharedSync::new(Registry::with_reference(A, None)));
        s.clock_sync(B, &frame_of(&l, SECOND, 20, 50 * MILLISECOND, &mut rng));
        let (c0, f0) = s.frame(B, 1);
        assert!(c0.is_some() && f0.is_none());
        // B's clock steps forward by 3 ms.
        l.reference = l.reference.clone().with_jump(3 * SECOND, 3_000_000);
        s.clock_sync(B, &frame_of(&l, 4 * SECOND, 1, 0, &mut rng));
        let (c1, f1) = s.frame(B, 1);
        assert_eq!(c1, c0, "the old model is used until the new epoch is calibrated");
        assert!(f1.as_deref().is_some_and(|f| f.contains("broken") && f.contains("epoch 1")), "{f1:?}");
        s.clock_sync(B, &frame_of(&l, 5 * SECOND, 5, 50 * MILLISECOND, &mut rng));
        let (c2, f2) = s.frame(B, 1);
        assert_eq!(c2.map(|c| c.epoch()), Some(1));
        assert!(f2.is_none(), "{f2:?}");
    }

    /// A remote host that restarts (its CLOCK_MONOTONIC begins again near
    /// 0) sends exchanges older on its clock than the last one fed: they are
    /// not copies, the model must start again instead of converting the new
    /// clock with the old one. (Before: all 20 skipped as duplicates, and
    /// B's reading at A's 500 102 s converted to about 200 040 s.)
    #[test]
    fn a_host_that_restarts_is_recalibrated_not_deduplicated() {
        let mut rng = Rng::new(3);
        let a = SimClock::new(500_000 * SECOND / 1000, 1_000_000_000); // up 500 000 s
        let b = SimClock::new(300_000 * SECOND / 1000, 1_000_040_000); // up 300 000 s, 40 ppm fast
        let mut l = Link {
            reference: b,
            source: a.clone(),
            fwd: DelayModel::constant(30e6),
            bwd: DelayModel::constant(30e6),
            jitter: DelayModel::constant(0.0),
        };
        let mut s = StreamSync::new(SharedSync::new(Registry::with_reference(A, None)));
        s.clock_sync(B, &frame_of(&l, 10 * SECOND, 20, 20 * MILLISECOND, &mut rng));
        assert!(s.frame(B, 1).0.is_some());
        // B reboots at 100 s: its clock reads 30 s from then on.
        l.reference = l.reference.clone().with_reset(100 * SECOND, 30 * SECOND / 1000);
        s.clock_sync(B, &frame_of(&l, 101 * SECOND, 20, 20 * MILLISECOND, &mut rng));
        {
            let reg = s.shared.lock();
            let m = &reg.hosts[&B];
            assert_eq!((m.violations, m.duplicates, m.fz.epoch()), (1, 0, 1), "{m:?}");
            let t = 102 * SECOND;
            let iv = reg.converter(B).unwrap().interval(l.reference.read(t)).unwrap();
            assert!(iv.contains(a.read_i128(t)), "{iv} truth {}", a.read_i128(t));
        }
        // The process converted before says so; a copy of a new exchange is
        // still a copy.
        let (_, fault) = s.frame(B, 1);
        assert!(fault.is_some_and(|f| f.contains("restarted")));
        let last = *frame_of(&l, 102 * SECOND, 1, 0, &mut rng).exchanges.first().unwrap();
        let mut reg = s.shared.lock();
        reg.observe(B, &ClockSync { reference_host: A, exchanges: vec![last] });
        assert_eq!(reg.observe(B, &ClockSync { reference_host: A, exchanges: vec![last] }), 0);
        assert_eq!((reg.hosts[&B].violations, reg.hosts[&B].duplicates), (1, 1));
    }

    /// A relay's later connection carries its first exchanges again (the
    /// head it keeps for new connections). After the model broke and a new
    /// epoch began, those old exchanges do not fit the new model, yet they
    /// are copies, not a restart: skipped, no violation.
    #[test]
    fn old_exchanges_after_a_new_epoch_are_still_copies() {
        let mut rng = Rng::new(4);
        let a = SimClock::new(500_000 * SECOND / 1000, 1_000_000_000);
        let b = SimClock::new(300_000 * SECOND / 1000, 1_000_040_000);
        let mut l = Link {
            reference: b,
            source: a,
            fwd: DelayModel::constant(30e6),
            bwd: DelayModel::constant(30e6),
            jitter: DelayModel::constant(0.0),
        };
        let mut reg = Registry::with_reference(A, None);
        let head = frame_of(&l, 10 * SECOND, 20, 20 * MILLISECOND, &mut rng);
        reg.observe(B, &head);
        // B's clock steps 5 ms forward: one violation, a new epoch.
        l.reference = l.reference.clone().with_jump(11 * SECOND, 5_000_000);
        reg.observe(B, &frame_of(&l, 12 * SECOND, 20, 20 * MILLISECOND, &mut rng));
        assert_eq!((reg.hosts[&B].violations, reg.hosts[&B].fz.epoch()), (1, 1));
        assert_eq!(reg.observe(B, &head), 0);
        assert_eq!((reg.hosts[&B].violations, reg.hosts[&B].duplicates), (1, 20));
    }

    /// Issue 31.3 in the sidecar: a recorded run with a relay's exchanges
    /// (20 at 20 ms, then one a second, for a minute) over an asymmetric
    /// heavy-tailed link (few tight exchanges). Every interval, live or
    /// offline, holds the truth; the
    /// offline conversion (the exchanges on both sides of the event) is
    /// much narrower than what the live model could give when the event
    /// happened (only the exchanges before it), and for a host whose model
    /// broke there is none (it is converted live, epoch by epoch).
    #[test]
    fn a_recorded_run_converts_with_the_exchanges_on_both_sides() {
        use clocksync::sim::asymmetric_heavy_tail_link;
        for seed in [11u64, 12, 13] {
            let mut rng = Rng::new(seed);
            let mut l = asymmetric_heavy_tail_link(&mut rng, 0.0);
            l.reference = SimClock::new(70_000 * SECOND / 1000, 1_000_030_000); // B: 30 ppm fast
            l.source = SimClock::new(20_000 * SECOND / 1000, 1_000_000_000);
            let (a, b) = (l.source.clone(), l.reference.clone());
            let mut secs = vec![frame_of(&l, SECOND, 20, 20 * MILLISECOND, &mut rng)];
            secs.extend((0..60).map(|i| frame_of(&l, (2 + i) * SECOND, 1, 0, &mut rng)));
            let offline = Registry::offline(secs.iter().map(|cs| (B, cs)));
            let off = offline.converter(B).unwrap();
            assert!(matches!(off, Converter::Offline(_)));
            let mut live = Registry::with_reference(A, None);
            let (mut live_w, mut off_w) = (Vec::new(), Vec::new());
            for (i, cs) in secs.iter().enumerate() {
                live.observe(B, cs);
                // An event half a second after the last exchange, converted
                // as a live frame would be then, and offline.
                let t = (1 + i as i128) * SECOND + SECOND / 2;
                let Some(now) = live.converter(B) else { continue };
                for (c, widths) in [(&now, &mut live_w), (&off, &mut off_w)] {
                    let iv = c.interval(b.read(t)).unwrap();
                    assert!(iv.contains(a.read_i128(t)), "seed {seed} second {i}: {iv} truth {}", a.read_i128(t));
                    widths.push(iv.width());
                }
            }
            live_w.sort_unstable();
            off_w.sort_unstable();
            let (lm, om) = (live_w[live_w.len() / 2], off_w[off_w.len() / 2]);
            eprintln!(
                "seed {seed}: median width live {lm} ns, offline {om} ns (max {} / {})",
                live_w.last().unwrap(),
                off_w.last().unwrap()
            );
            assert!(om * 2 <= lm, "seed {seed}: offline {om} ns vs live {lm} ns");
        }
        // Exchanges that bound the frequency only from above: no offline
        // model (it could convert nothing), as live.
        let two = ClockSync {
            reference_host: A,
            exchanges: vec![
                ClockExchange { t1: 100, t2: 150, t3: 150, t4: 200 },
                ClockExchange { t1: 201, t2: 250, t3: 250, t4: 300 },
            ],
        };
        let reg = Registry::offline([(B, &two)]);
        assert!(reg.converter(B).is_none(), "{:?}", reg.converter(B));
        // A host whose clock jumped: no offline model, the live one instead.
        let mut rng = Rng::new(5);
        let mut l = link(&mut rng, 10 * SECOND / 1000, 50 * SECOND / 1000, 30);
        l.fwd = DelayModel::constant(20e6);
        l.bwd = DelayModel::constant(20e6);
        let before = frame_of(&l, SECOND, 20, 50 * MILLISECOND, &mut rng);
        l.reference = l.reference.clone().with_jump(3 * SECOND, 3_000_000);
        let after = frame_of(&l, 4 * SECOND, 20, 50 * MILLISECOND, &mut rng);
        let reg = Registry::offline([(B, &before), (B, &after)]);
        assert!(reg.hosts.get(&B).is_none_or(|m| m.offline.is_none()));
    }

    /// A stream's fragment with these message halves: (half, other worker,
    /// seq, time), channel 5.
    fn frag(host: u64, worker: u32, msgs: &[(Half, u32, u64, Ns)], u: u64) -> Fragment {
        let mut m = Messages::default();
        for &(half, other, seq, t) in msgs {
            let g = m.group(half, 5, other);
            m.push(g, seq, t);
        }
        Fragment {
            stream: Some(Sid { host, process: worker + 1, worker }),
            msgs: m,
            counters: Counters { clock_uncertainty_ns: u, ..Default::default() },
            timeline: (host != A).then_some(A),
            ..Default::default()
        }
    }

    #[test]
    fn receives_before_their_send_are_clamped_across_hosts_only() {
        use Half::{Recv, Send};
        let mut fs = vec![
            frag(A, 0, &[(Send, 1, 0, 100), (Send, 1, 1, 200), (Send, 2, 0, 300)], 0),
            frag(B, 1, &[(Recv, 0, 0, 90), (Recv, 0, 1, 250)], 20),
            frag(A, 2, &[(Recv, 0, 0, 290)], 0), // same host: left alone
        ];
        let c = prepare(A, &mut fs);
        assert_eq!(c.hosts, vec![B]);
        assert_eq!(c.uncertainty_ns, Some(20));
        assert_eq!(c.causality, Causality { clamps: 1, beyond_bound: 0 });
        let halves = |f: &Fragment| f.msgs.iter().collect::<Vec<_>>();
        assert_eq!(halves(&fs[1]), vec![(Recv, 5, 0, 0, 100), (Recv, 5, 0, 1, 250)]);
        assert_eq!(fs[1].msgs.reads, vec![100, 250], "the read times move with their entries");
        assert!(fs[1].msgs.moved && !fs[2].msgs.moved);
        assert_eq!(halves(&fs[2]), vec![(Recv, 5, 0, 0, 290)]);
        // An inversion wider than the bounds is clamped and flagged.
        let mut fs = vec![frag(A, 0, &[(Send, 1, 0, 100)], 0), frag(B, 1, &[(Recv, 0, 0, 50)], 20)];
        assert_eq!(enforce_causality(&mut fs), Causality { clamps: 1, beyond_bound: 1 });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// DESIGN "Clocks": every converted timestamp's interval contains the
        /// true reference time, the analysis's point is inside it, and after
        /// the causality pass no message edge is inverted.
        #[test]
        fn converted_intervals_hold_the_truth(
            seed in any::<u64>(),
            off_a in 1_000_000_000i128..100_000_000_000_000,
            off_b in 1_000_000_000i128..100_000_000_000_000,
            ppm in -300i64..300,
            n in 2usize..40,
        ) {
            let mut rng = Rng::new(seed);
            let l = link(&mut rng, off_a, off_b, ppm);
            let (a, b) = (l.source.clone(), l.reference.clone());
            let mut reg = Registry::with_reference(A, None);
            let t0 = 10 * SECOND;
            reg.observe(B, &frame_of(&l, t0, n, 100 * MILLISECOND, &mut rng));
            let c = reg.converter(B);
            // Exchanges 100 ms apart always bound F (needs two a few ticks apart).
            prop_assert!(c.is_some());
            let c = c.unwrap();
            let mut fs = vec![frag(A, 0, &[], 0), frag(B, 1, &[], 0)];
            let push = |f: &mut Fragment, half, channel, other, seq, t| {
                let g = f.msgs.group(half, channel, other);
                f.msgs.push(g, seq, t);
            };
            for i in 0..200u64 {
                // Events from 1 s before the first exchange to 10 s after the last.
                let t = t0 - SECOND + (rng.next_u64() % (12 * SECOND as u64 + n as u64 * 125 * MILLISECOND as u64)) as i128;
                let truth = a.read_i128(t);
                let iv = c.interval(b.read(t)).unwrap();
                prop_assert!(iv.contains(truth), "t={} truth={} iv={}", t, truth, iv);
                let (p, w) = c.point(b.read(t)).unwrap();
                prop_assert!(iv.contains(p as i128));
                // A message from A at t to B, received after a random delay.
                let tr = t + (rng.next_u64() % (2 * MILLISECOND as u64)) as i128;
                let (rp, rw) = c.point(b.read(tr)).unwrap();
                push(&mut fs[0], Half::Send, 1, 1, i, a.read(t));
                push(&mut fs[1], Half::Recv, 1, 0, i, rp);
                // ... and one from B at t to A.
                push(&mut fs[1], Half::Send, 2, 0, i, p);
                push(&mut fs[0], Half::Recv, 2, 1, i, a.read(tr));
                fs[1].counters.clock_uncertainty_ns = fs[1].counters.clock_uncertainty_ns.max(w).max(rw);
            }
            let caus = enforce_causality(&mut fs);
            prop_assert_eq!(caus.beyond_bound, 0);
            let mut sends = std::collections::HashMap::new();
            for f in &fs {
                for (half, channel, _, seq, ts) in f.msgs.iter() {
                    if half == Half::Send {
                        sends.insert((channel, seq), ts);
                    }
                }
            }
            for f in &fs {
                for (half, channel, _, seq, ts) in f.msgs.iter() {
                    if half == Half::Recv {
                        prop_assert!(ts >= sends[&(channel, seq)], "edge inverted");
                    }
                }
            }
        }
    }
}
