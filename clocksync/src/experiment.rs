//! The paper's headline comparison (FreeZer §3.4, Table 2) reproduced in simulation:
//! how many messages look as if they were received before they were sent ("fast sends")
//! once their timestamps are converted to one clock, for FreeZer, linear regression and
//! the convex hull, all fitted on the same exchanges.
//!
//! For point estimators a message is a fast send when `conv(recv) < conv(send)`. For
//! FreeZer four readings are reported:
//!
//! * `certain`: `recv.hi < send.lo`, the intervals *prove* the wrong order. The guarantee
//!   says this never happens.
//! * `both ends` (lower bounds compared with lower bounds, upper with upper; FreeZer §4.5):
//!   `recv.lo < send.lo` **and** `recv.hi < send.hi`.
//! * `either end`: `recv.lo < send.lo` **or** `recv.hi < send.hi`.
//! * `midpoint`: the paper's own choice for its table ("we use the interval midpoints").

use crate::baseline::{ConvexHull, Estimator, LinearRegression};
use crate::freezer::FreeZer;
use crate::interval::Interval;
use crate::sim::{self, Link, Rng, SimClock, MILLISECOND, SECOND};

/// Counters for a point estimator.
#[derive(Clone, Copy, Debug, Default)]
pub struct PointStats {
    /// Messages judged.
    pub messages: u64,
    /// `conv(recv) < conv(send)`.
    pub fast_sends: u64,
    /// Converted timestamps.
    pub conversions: u64,
    /// Conversions equal to the truth (a point "contains" the truth only if it is it).
    pub exact: u64,
    /// Sum of |error| in nanoseconds.
    pub sum_abs_err_ns: f64,
    /// Conversions that produced no estimate.
    pub missing: u64,
}

/// Counters for FreeZer's intervals.
#[derive(Clone, Copy, Debug, Default)]
pub struct IntervalStats {
    /// Messages judged.
    pub messages: u64,
    /// `recv.hi < send.lo`.
    pub certain: u64,
    /// `recv.lo < send.lo && recv.hi < send.hi`.
    pub both_ends: u64,
    /// `recv.lo < send.lo || recv.hi < send.hi`.
    pub either_end: u64,
    /// `mid(recv) < mid(send)`.
    pub midpoint: u64,
    /// Converted timestamps.
    pub conversions: u64,
    /// Conversions whose interval contains the truth.
    pub contained: u64,
    /// Sum of widths in nanoseconds.
    pub sum_width_ns: f64,
    /// Sum of |midpoint − truth| in nanoseconds.
    pub sum_abs_err_ns: f64,
    /// Errors from FreeZer (violations would be bugs: the simulated clocks are ideal).
    pub errors: u64,
}

/// One trial: the same messages judged by the three methods.
#[derive(Clone, Copy, Debug, Default)]
pub struct TrialReport {
    /// FreeZer (tight conversion).
    pub freezer: IntervalStats,
    /// Linear regression.
    pub lr: PointStats,
    /// Convex hull.
    pub ch: PointStats,
    /// Times the convex hull had no separating line and fell back to regression.
    pub ch_fallbacks: u64,
}

fn ns(ticks: f64, hz: u64) -> f64 {
    ticks * 1e9 / hz as f64
}

/// A timestamp as the three methods see it after conversion.
struct Conv {
    fz: Option<Interval>,
    lr: Option<i128>,
    ch: Option<i128>,
    truth: i128,
    /// False for a reading already on the reference clock (nothing to convert, not counted
    /// in containment, width or error).
    converted: bool,
}

struct Converters<'a> {
    fz: &'a FreeZer,
    lr: &'a LinearRegression,
    ch: &'a ConvexHull,
}

impl Converters<'_> {
    fn conv(&self, k: u64, truth: i128) -> Conv {
        Conv {
            fz: self.fz.to_reference_tight(k).ok(),
            lr: self.lr.to_reference(k),
            ch: self.ch.to_reference(k),
            truth,
            converted: true,
        }
    }
}

fn exact(t: i128) -> Conv {
    Conv { fz: Some(Interval::new(t, t)), lr: Some(t), ch: Some(t), truth: t, converted: false }
}

impl TrialReport {
    fn count_point(
        st: &mut PointStats,
        send: Option<i128>,
        recv: Option<i128>,
        ends: [(&Option<i128>, i128, bool); 2],
        hz: u64,
    ) {
        st.messages += 1;
        for (p, truth, _) in ends.into_iter().filter(|e| e.2) {
            st.conversions += 1;
            match p {
                Some(p) => {
                    st.exact += (*p == truth) as u64;
                    st.sum_abs_err_ns += ns((p - truth).abs() as f64, hz);
                }
                None => st.missing += 1,
            }
        }
        if let (Some(s), Some(r)) = (send, recv) {
            st.fast_sends += (r < s) as u64;
        }
    }

    /// Judge one message from `send` to `recv` (both converted to the reference).
    fn judge(&mut self, send: &Conv, recv: &Conv, hz: u64) {
        Self::count_point(
            &mut self.lr,
            send.lr,
            recv.lr,
            [(&send.lr, send.truth, send.converted), (&recv.lr, recv.truth, recv.converted)],
            hz,
        );
        Self::count_point(
            &mut self.ch,
            send.ch,
            recv.ch,
            [(&send.ch, send.truth, send.converted), (&recv.ch, recv.truth, recv.converted)],
            hz,
        );
        let f = &mut self.freezer;
        f.messages += 1;
        for c in [send, recv].into_iter().filter(|c| c.converted) {
            f.conversions += 1;
            match c.fz {
                Some(iv) => {
                    f.contained += iv.contains(c.truth) as u64;
                    f.sum_width_ns += ns(iv.width() as f64, hz);
                    f.sum_abs_err_ns += ns((iv.midpoint() - c.truth).abs() as f64, hz);
                }
                None => f.errors += 1,
            }
        }
        if let (Some(s), Some(r)) = (send.fz, recv.fz) {
            f.certain += (r.hi < s.lo) as u64;
            f.both_ends += (r.lo < s.lo && r.hi < s.hi) as u64;
            f.either_end += (r.lo < s.lo || r.hi < s.hi) as u64;
            f.midpoint += (r.midpoint() < s.midpoint()) as u64;
        }
    }
}

fn fit(link: &Link, rts: &[sim::RoundTrip]) -> (FreeZer, LinearRegression, ConvexHull, u64) {
    let mut fz = FreeZer::new();
    let mut lr = LinearRegression::new();
    let mut ch = ConvexHull::new();
    let mut errors = 0;
    for rt in rts {
        errors += fz.observe(rt.x).is_err() as u64;
        lr.observe(rt.x).unwrap();
        ch.observe(rt.x).unwrap();
    }
    let _ = link;
    (fz, lr, ch, errors)
}

/// The paper's setting (FreeZer §3.4): two machines exchange messages both ways; one of
/// them is the reference. The ping-pongs themselves are the messages, and all three
/// methods are fitted on them (offline, as in the paper) before the messages are judged.
pub fn two_host_trial(seed: u64, round_trips: usize) -> TrialReport {
    let mut rng = Rng::new(seed);
    let link = sim::random_link(&mut rng);
    let rts = link.run(SECOND, MILLISECOND, round_trips, &mut rng);
    let (fz, lr, ch, errors) = fit(&link, &rts);
    let c = Converters { fz: &fz, lr: &lr, ch: &ch };
    let hz = link.reference.hz();
    let mut rep = TrialReport::default();
    for rt in &rts {
        // Ping: sent on the reference at s, received on the source at r.
        let send = exact(rt.x.s as i128);
        let recv = c.conv(rt.x.r, link.reference.read_i128(rt.t_r));
        rep.judge(&send, &recv, hz);
        // Pong: sent on the source at r_send, received on the reference at e.
        let send = c.conv(rt.r_send, link.reference.read_i128(rt.t_r_send));
        let recv = exact(rt.x.e as i128);
        rep.judge(&send, &recv, hz);
    }
    rep.freezer.errors += errors;
    rep.ch_fallbacks = ch.fallbacks();
    rep
}

/// The application setting (FreeZer §6): hosts A and B exchange messages; both are
/// converted to a third host C that probes each of them.
pub fn three_host_trial(seed: u64, round_trips: usize) -> TrialReport {
    let mut rng = Rng::new(seed);
    let c_clock = SimClock::new(sim::random_offset(&mut rng), sim::random_hz(&mut rng));
    let a_clock = SimClock::new(sim::random_offset(&mut rng), sim::random_hz(&mut rng));
    let b_clock = SimClock::new(sim::random_offset(&mut rng), sim::random_hz(&mut rng));
    let ca = sim::random_link_between(c_clock.clone(), a_clock.clone(), &mut rng);
    let cb = sim::random_link_between(c_clock.clone(), b_clock.clone(), &mut rng);
    let ab = sim::random_link_between(a_clock, b_clock, &mut rng);
    let rts_a = ca.run(SECOND, MILLISECOND, round_trips, &mut rng);
    let rts_b = cb.run(SECOND + MILLISECOND / 2, MILLISECOND, round_trips, &mut rng);
    let app = ab.run(SECOND + MILLISECOND / 3, MILLISECOND, round_trips, &mut rng);
    let (fa, la, ha, ea) = fit(&ca, &rts_a);
    let (fb, lb, hb, eb) = fit(&cb, &rts_b);
    let conv_a = Converters { fz: &fa, lr: &la, ch: &ha };
    let conv_b = Converters { fz: &fb, lr: &lb, ch: &hb };
    let hz = c_clock.hz();
    let mut rep = TrialReport::default();
    for rt in &app {
        // A -> B: sent on A at s, received on B at r.
        let send = conv_a.conv(rt.x.s, c_clock.read_i128(rt.t_s));
        let recv = conv_b.conv(rt.x.r, c_clock.read_i128(rt.t_r));
        rep.judge(&send, &recv, hz);
        // B -> A: sent on B at r_send, received on A at e.
        let send = conv_b.conv(rt.r_send, c_clock.read_i128(rt.t_r_send));
        let recv = conv_a.conv(rt.x.e, c_clock.read_i128(rt.t_e));
        rep.judge(&send, &recv, hz);
    }
    rep.freezer.errors += ea + eb;
    rep.ch_fallbacks = ha.fallbacks() + hb.fallbacks();
    rep
}

fn pct(n: u64, d: u64) -> f64 {
    if d == 0 {
        0.0
    } else {
        100.0 * n as f64 / d as f64
    }
}

fn min_avg_max(v: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let v: Vec<f64> = v.collect();
    let n = v.len().max(1) as f64;
    (
        v.iter().cloned().fold(f64::INFINITY, f64::min),
        v.iter().sum::<f64>() / n,
        v.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    )
}

/// A markdown table over trials: fast sends (min / avg / max % over trials), containment,
/// mean width, mean |error|.
pub fn table(reports: &[TrialReport]) -> String {
    let mut out = String::new();
    out.push_str(
        "| method | fast sends % (min / avg / max) | truth contained % | mean width ns | mean abs error ns |\n",
    );
    out.push_str("|---|---|---|---|---|\n");
    let sum =
        |f: &dyn Fn(&TrialReport) -> (u64, u64)| reports.iter().map(f).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    type Pick = fn(&TrialReport) -> (u64, u64);
    let row = |name: &str, fast: &dyn Fn(&TrialReport) -> (u64, u64), contained: (u64, u64), width: f64, err: f64| {
        let (lo, avg, hi) = min_avg_max(reports.iter().map(|r| {
            let (n, d) = fast(r);
            pct(n, d)
        }));
        format!(
            "| {name} | {lo:.3} / {avg:.3} / {hi:.3} | {:.4} | {width:.1} | {err:.1} |\n",
            pct(contained.0, contained.1)
        )
    };
    let fz_conv = sum(&|r| (r.freezer.contained, r.freezer.conversions));
    let fz_width = reports.iter().map(|r| r.freezer.sum_width_ns).sum::<f64>() / fz_conv.1.max(1) as f64;
    let fz_err = reports.iter().map(|r| r.freezer.sum_abs_err_ns).sum::<f64>() / fz_conv.1.max(1) as f64;
    for (name, get) in [
        ("FreeZer, certain (recv.hi < send.lo)", (|r: &TrialReport| (r.freezer.certain, r.freezer.messages)) as Pick),
        ("FreeZer, lo vs lo and hi vs hi", |r: &TrialReport| (r.freezer.both_ends, r.freezer.messages)),
        ("FreeZer, lo vs lo or hi vs hi", |r: &TrialReport| (r.freezer.either_end, r.freezer.messages)),
        ("FreeZer, midpoints", |r: &TrialReport| (r.freezer.midpoint, r.freezer.messages)),
    ] {
        out += &row(name, &get, fz_conv, fz_width, fz_err);
    }
    for (name, get) in [
        ("linear regression", (|r: &TrialReport| r.lr) as fn(&TrialReport) -> PointStats),
        ("convex hull", |r: &TrialReport| r.ch),
    ] {
        let conv = sum(&|r| (get(r).exact, get(r).conversions));
        let err = reports.iter().map(|r| get(r).sum_abs_err_ns).sum::<f64>() / conv.1.max(1) as f64;
        out += &row(name, &|r| (get(r).fast_sends, get(r).messages), conv, 0.0, err);
    }
    out
}
