//! A clock simulator with a truth oracle (freezer-notes §7), for tests, benchmarks and the
//! comparison with the baselines.
//!
//! Real time is an exact integer number of picoseconds. A clock reads
//! `floor(base + hz · (t − start) / 10^12)` on each of its segments; a second segment
//! models a fault (a jump, a reset, a change of rate). Delays and jitter are drawn in
//! floating point: they are inputs of the simulation, not part of any bound.

use crate::exchange::Exchange;

const PS_PER_S: i128 = 1_000_000_000_000;

/// SplitMix64: small, fast, good enough for simulation, and no dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }
    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
    /// Pareto with scale `xm` and shape `alpha` (heavy tail).
    pub fn pareto(&mut self, xm: f64, alpha: f64) -> f64 {
        xm / (1.0 - self.f64()).powf(1.0 / alpha)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    start_ps: i128,
    base: i128,
    hz: u64,
}

/// A simulated clock: piecewise linear, read with `floor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimClock {
    segs: Vec<Segment>,
}

impl SimClock {
    /// A constant-rate clock reading `offset` at real time 0 and ticking `hz` times a
    /// second.
    pub fn new(offset: i128, hz: u64) -> SimClock {
        SimClock { segs: vec![Segment { start_ps: 0, base: offset, hz }] }
    }

    /// From real time `at_ps` on, the clock reads `jump` ticks more (negative: less).
    pub fn with_jump(mut self, at_ps: i128, jump: i128) -> SimClock {
        let now = self.read_i128(at_ps);
        let hz = self.segs.last().unwrap().hz;
        self.segs.push(Segment { start_ps: at_ps, base: now + jump, hz });
        self
    }

    /// From real time `at_ps` on, the clock ticks `hz` times a second.
    pub fn with_rate(mut self, at_ps: i128, hz: u64) -> SimClock {
        let now = self.read_i128(at_ps);
        self.segs.push(Segment { start_ps: at_ps, base: now, hz });
        self
    }

    /// From real time `at_ps` on, the clock restarts from `value` (a TSC reset).
    pub fn with_reset(mut self, at_ps: i128, value: i128) -> SimClock {
        let hz = self.segs.last().unwrap().hz;
        self.segs.push(Segment { start_ps: at_ps, base: value, hz });
        self
    }

    /// The rate of the first segment.
    pub fn hz(&self) -> u64 {
        self.segs[0].hz
    }

    fn seg(&self, t_ps: i128) -> &Segment {
        self.segs.iter().rev().find(|s| s.start_ps <= t_ps).unwrap_or(&self.segs[0])
    }

    /// The reading at real time `t_ps` (may be negative before the clock's zero).
    pub fn read_i128(&self, t_ps: i128) -> i128 {
        let s = self.seg(t_ps);
        s.base + (s.hz as i128 * (t_ps - s.start_ps)).div_euclid(PS_PER_S)
    }

    /// The reading at real time `t_ps`, as a counter.
    pub fn read(&self, t_ps: i128) -> u64 {
        u64::try_from(self.read_i128(t_ps)).expect("simulated clock reading out of u64 range")
    }
}

/// A delay distribution: with probability `zero_prob` exactly zero, otherwise
/// `min + Exp(exp_mean)`, plus with probability `tail_prob` a Pareto(`tail_scale`,
/// `tail_alpha`) excursion. All in picoseconds.
#[derive(Clone, Copy, Debug)]
pub struct DelayModel {
    /// Probability of a zero delay.
    pub zero_prob: f64,
    /// Fixed part.
    pub min_ps: f64,
    /// Mean of the exponential part.
    pub exp_mean_ps: f64,
    /// Probability of a heavy-tailed excursion.
    pub tail_prob: f64,
    /// Pareto scale.
    pub tail_scale_ps: f64,
    /// Pareto shape (smaller: heavier).
    pub tail_alpha: f64,
}

impl DelayModel {
    /// A constant delay.
    pub fn constant(ps: f64) -> DelayModel {
        DelayModel { zero_prob: 0.0, min_ps: ps, exp_mean_ps: 0.0, tail_prob: 0.0, tail_scale_ps: 1.0, tail_alpha: 2.0 }
    }

    /// Draw one delay.
    pub fn sample(&self, rng: &mut Rng) -> i128 {
        if rng.f64() < self.zero_prob {
            return 0;
        }
        let mut d = self.min_ps + rng.exp(self.exp_mean_ps);
        if rng.f64() < self.tail_prob {
            d += rng.pareto(self.tail_scale_ps, self.tail_alpha);
        }
        d.min(1e13) as i128
    }

    /// A random model: zero delays possible, exponential body, Pareto tail.
    pub fn random(rng: &mut Rng) -> DelayModel {
        DelayModel {
            zero_prob: if rng.f64() < 0.5 { rng.uniform(0.0, 0.2) } else { 0.0 },
            min_ps: if rng.f64() < 0.3 { 0.0 } else { rng.uniform(0.0, 20e6) },
            exp_mean_ps: rng.uniform(0.5e6, 50e6),
            tail_prob: rng.uniform(0.0, 0.05),
            tail_scale_ps: rng.uniform(10e6, 1e9),
            tail_alpha: rng.uniform(1.1, 2.5),
        }
    }
}

/// One ping-pong as the simulator ran it, with the real times.
#[derive(Clone, Copy, Debug)]
pub struct RoundTrip {
    /// What the prober records.
    pub x: Exchange,
    /// Source reading when the pong was sent (after scheduling jitter).
    pub r_send: u64,
    /// Real times of `s`, `r`, the pong send, and `e`.
    pub t_s: i128,
    /// Real time of `r`.
    pub t_r: i128,
    /// Real time of the pong send.
    pub t_r_send: i128,
    /// Real time of `e`.
    pub t_e: i128,
}

/// A prober on `reference` and a responder on `source`, with delays each way and
/// scheduling jitter between a timestamp and its send or receive.
#[derive(Clone, Debug)]
pub struct Link {
    /// The prober's clock (FreeZer's reference).
    pub reference: SimClock,
    /// The responder's clock (FreeZer's source).
    pub source: SimClock,
    /// Ping delay.
    pub fwd: DelayModel,
    /// Pong delay.
    pub bwd: DelayModel,
    /// Scheduling jitter between a stamp and the syscall next to it.
    pub jitter: DelayModel,
}

impl Link {
    /// One round trip with the ping's `s` read at real time `t_s`.
    pub fn round_trip(&self, t_s: i128, rng: &mut Rng) -> RoundTrip {
        let sent = t_s + self.jitter.sample(rng);
        let t_r = sent + self.fwd.sample(rng) + self.jitter.sample(rng);
        let t_r_send = t_r + self.jitter.sample(rng);
        let t_e = t_r_send + self.bwd.sample(rng) + self.jitter.sample(rng);
        RoundTrip {
            x: Exchange { s: self.reference.read(t_s), r: self.source.read(t_r), e: self.reference.read(t_e) },
            r_send: self.source.read(t_r_send),
            t_s,
            t_r,
            t_r_send,
            t_e,
        }
    }

    /// Round trips every `period_ps` (± uniform jitter of a quarter period) starting at
    /// `t0`, each starting after the previous one ended.
    pub fn run(&self, t0: i128, period_ps: i128, n: usize, rng: &mut Rng) -> Vec<RoundTrip> {
        let mut out = Vec::with_capacity(n);
        let mut t = t0;
        for _ in 0..n {
            let rt = self.round_trip(t, rng);
            let next = t + period_ps + (rng.f64() * period_ps as f64 / 4.0) as i128;
            t = next.max(rt.t_e + 1);
            out.push(rt);
        }
        out
    }

    /// An event at real time `t_ps`: `(source reading, true reference reading)`.
    pub fn event(&self, t_ps: i128) -> (u64, i128) {
        (self.source.read(t_ps), self.reference.read_i128(t_ps))
    }
}

/// A random 17-digit offset (as TSC values are after a few months of uptime).
pub fn random_offset(rng: &mut Rng) -> i128 {
    rng.range(10_000_000_000_000_000, 99_999_999_999_999_999) as i128
}

/// A random rate between 0.8 and 2.3 GHz, to the hertz (the paper's cluster ran
/// 800–2,261 MHz, FreeZer §3.3).
pub fn random_hz(rng: &mut Rng) -> u64 {
    rng.range(800_000_000, 2_300_000_001)
}

/// A random link: 17-digit offsets, 0.8–2.3 GHz rates (so a constant relative drift),
/// independent asymmetric heavy-tailed delay models each way, scheduling jitter.
pub fn random_link(rng: &mut Rng) -> Link {
    let reference = SimClock::new(random_offset(rng), random_hz(rng));
    let source = SimClock::new(random_offset(rng), random_hz(rng));
    random_link_between(reference, source, rng)
}

/// A random link between two given clocks.
pub fn random_link_between(reference: SimClock, source: SimClock, rng: &mut Rng) -> Link {
    let fwd = DelayModel::random(rng);
    let bwd = DelayModel::random(rng);
    let jitter = DelayModel {
        zero_prob: 0.3,
        min_ps: 0.0,
        exp_mean_ps: rng.uniform(0.0, 3e6),
        tail_prob: 0.01,
        tail_scale_ps: 20e6,
        tail_alpha: 1.5,
    };
    Link { reference, source, fwd, bwd, jitter }
}

/// The asymmetric, heavy-tailed link of issue 31.3: the ping's delay is Pareto with scale
/// 3 µs, the pong's Pareto with scale 40 µs (shape 1.5 both: infinite variance), and 5 % of
/// the delays each way are zero; scheduling jitter exponential with mean `jitter_ps` at
/// each of the four stamps (none if 0); random 17-digit offsets and 0.8–2.3 GHz rates.
/// Round trips are rarely short: both delays are zero in one exchange of 400, so the first
/// 64 exchanges usually contain no tight one.
pub fn asymmetric_heavy_tail_link(rng: &mut Rng, jitter_ps: f64) -> Link {
    let reference = SimClock::new(random_offset(rng), random_hz(rng));
    let source = SimClock::new(random_offset(rng), random_hz(rng));
    let pareto = |scale_ps: i128| DelayModel {
        zero_prob: 0.05,
        min_ps: 0.0,
        exp_mean_ps: 0.0,
        tail_prob: 1.0,
        tail_scale_ps: scale_ps as f64,
        tail_alpha: 1.5,
    };
    let jitter = DelayModel { exp_mean_ps: jitter_ps, ..DelayModel::constant(0.0) };
    Link { reference, source, fwd: pareto(3 * MICROSECOND), bwd: pareto(40 * MICROSECOND), jitter }
}

/// True `F = hz(reference) / hz(source)` of the first segments, as `(num, den)`.
pub fn true_ratio(link: &Link) -> (u64, u64) {
    (link.reference.hz(), link.source.hz())
}

/// One second in picoseconds.
pub const SECOND: i128 = PS_PER_S;
/// One millisecond in picoseconds.
pub const MILLISECOND: i128 = PS_PER_S / 1000;
/// One microsecond in picoseconds.
pub const MICROSECOND: i128 = PS_PER_S / 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_reads_floor_and_faults() {
        let c = SimClock::new(100, 1_000_000_000); // 1 tick per ns
        assert_eq!(c.read(0), 100);
        assert_eq!(c.read(999), 100);
        assert_eq!(c.read(1000), 101);
        assert_eq!(c.read_i128(-1), 99);
        let j = c.clone().with_jump(10 * MICROSECOND, 500);
        assert_eq!(j.read(10 * MICROSECOND), 100 + 10_000 + 500);
        let r = c.clone().with_reset(MICROSECOND, 7);
        assert_eq!(r.read(MICROSECOND + 2000), 9);
        let f = c.with_rate(MICROSECOND, 2_000_000_000);
        assert_eq!(f.read(MICROSECOND + 1000), 100 + 1000 + 2);
    }

    #[test]
    fn round_trips_respect_causality() {
        let mut rng = Rng::new(1);
        for _ in 0..20 {
            let link = random_link(&mut rng);
            for rt in link.run(0, MILLISECOND, 200, &mut rng) {
                assert!(rt.t_s <= rt.t_r && rt.t_r <= rt.t_r_send && rt.t_r_send <= rt.t_e);
                assert!(rt.x.s <= rt.x.e);
            }
        }
    }
}
