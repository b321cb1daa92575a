//! Stage 9: what speeding up the critical path's top operators would save
//! (the replay of [`crate::analysis::whatif`], DProf §5.2): for the first
//! operator of the path on all workers, and for the path's first (worker,
//! operator) pair, 2× faster and taking no time; or, with `sidecar whatif`,
//! the speedup asked for.

use std::sync::Arc;

use super::Names;
use crate::analysis::crew::{self, Crew};
use crate::analysis::graph::{EKind, Graph};
use crate::analysis::model::{Ns, Sid};
use crate::analysis::report::{CpSummary, OpShare, WhatIf};
use crate::analysis::whatif::{Link, Placement, Prediction, Replay, Rules, Scales, Speedup};

/// (worker, operator) pairs of the path ranked on their own. (Each costs two
/// replays of the window: see docs/performance.md.)
const PAIRS: usize = 1;
/// The factors the automatic ranking tries.
const FACTORS: [f64; 2] = [2.0, f64::INFINITY];

/// Whether the window is replayed: not when the what-if is turned off (an
/// empty spec) or the graph is empty.
pub(super) fn replayed(g: &Graph, asked: Option<&[Speedup]>) -> bool {
    !matches!(asked, Some([])) && !g.is_empty()
}

/// The what-if's layout of the window, as a task for whichever thread
/// makes it: its half that needs the graph alone (each vertex's rule) and
/// its half that needs the window's messages (their points placed on the
/// chains), the first offered to `crew` while the second is made; `None`s
/// when the window is not `replayed`.
pub(super) fn layout(
    g: &Arc<Graph>,
    links: Vec<Link>,
    replayed: bool,
    crew: Option<&Arc<Crew>>,
) -> impl FnOnce() -> (Option<Rules>, Option<Placement>) + Send + 'static {
    let (g, crew) = (g.clone(), crew.cloned());
    move || {
        let there = g.clone();
        let (placement, rules, _) = crew::join(
            crew.as_ref(),
            || replayed.then(|| Placement::of(&g, links)),
            move || replayed.then(|| Rules::of(&there)),
        );
        (rules, placement)
    }
}

/// The window's replay, from both halves (`None`: not replayed).
pub(super) fn replay(g: &Arc<Graph>, rules: Option<Rules>, placement: Option<Placement>) -> Option<Arc<Replay>> {
    Some(Arc::new(Replay::of_parts(g.clone(), rules?, placement?)))
}

/// The window's what-if entries, the largest saving first: for `asked`
/// when given (one entry, all its items at once; none for an empty spec:
/// what-if turned off), else the automatic ranking; the replays split over
/// `crew` when given.
pub(super) fn rank_what_ifs(
    replay: Option<Arc<Replay>>,
    sids: &[Sid],
    names: &Names,
    cp: &CpSummary,
    asked: Option<&[Speedup]>,
    crew: Option<&Arc<Crew>>,
) -> Vec<WhatIf> {
    let Some(replay) = replay else { return Vec::new() };
    let candidates = match asked {
        Some([]) => return Vec::new(),
        Some(spec) => vec![spec.to_vec()],
        None => automatic(cp),
    };
    if candidates.is_empty() {
        return Vec::new();
    }
    let g = replay.graph();
    // (A speedup of every worker's operator that only one worker runs is
    // that worker's: replayed once.) The distinct speedups are replayed
    // together, in one pass over the window's points.
    let scales: Vec<Scales> = candidates.iter().map(|spec| scales_of(spec, g, sids, names)).collect();
    let mut distinct: Vec<&Scales> = Vec::new();
    let which: Vec<usize> = scales
        .iter()
        .map(|s| {
            distinct.iter().position(|d| *d == s).unwrap_or_else(|| {
                distinct.push(s);
                distinct.len() - 1
            })
        })
        .collect();
    let distinct: Vec<Scales> = distinct.into_iter().cloned().collect();
    let predictions = replay_spread(&replay, distinct, crew);
    let mut out: Vec<WhatIf> = candidates
        .iter()
        .zip(which)
        .map(|(spec, i)| entry(spec, cp, predictions[i].measured_ns, predictions[i].predicted_ns))
        .collect();
    if asked.is_none() {
        // (Of equal savings, the one worker's first: it says more.)
        out.sort_by(|a, b| {
            b.saved_ns
                .cmp(&a.saved_ns)
                .then(b.worker.is_some().cmp(&a.worker.is_some()))
                .then(a.speedup.cmp(&b.speedup))
        });
    }
    out
}

/// Each of `all` replayed (its spans): in one pass here, or, with a crew
/// that has nothing else waiting, half of them offered to it and half here.
/// (Two passes of half the replays cost about 1.5 passes of all: worth it
/// for a window's latency while a thread is free, not when windows wait
/// for it. Each replay's times are its own whichever others share its
/// pass: the predictions are the same.)
fn replay_spread(replay: &Arc<Replay>, mut all: Vec<Scales>, crew: Option<&Arc<Crew>>) -> Vec<Prediction> {
    let crew = crew.filter(|c| !c.has_other_work());
    if crew.is_none() || all.len() < 2 {
        return replay.spans_all(&all);
    }
    let second = all.split_off(all.len().div_ceil(2));
    let there = replay.clone();
    let (mut first, second, _) = crew::join(crew, || replay.spans_all(&all), move || there.spans_all(&second));
    first.extend(second);
    first
}

/// The speedups the ranking tries: the path's first operator by name on
/// every worker, and its first [`PAIRS`] (worker, operator) pairs, each at
/// every factor of [`FACTORS`].
fn automatic(cp: &CpSummary) -> Vec<Vec<Speedup>> {
    // (An operator without a name is named by its id.)
    let name = |o: &OpShare| if o.name.is_empty() { o.operator.to_string() } else { o.name.clone() };
    let mut targets: Vec<(Option<u32>, String)> = Vec::new();
    if let Some(o) = cp.top_operators.first() {
        targets.push((None, name(o)));
    }
    for o in cp.top_operators.iter().take(PAIRS) {
        targets.push((Some(o.worker), name(o)));
    }
    targets
        .into_iter()
        .flat_map(|(worker, target)| FACTORS.map(|factor| vec![Speedup { worker, target: target.clone(), factor }]))
        .collect()
}

/// What `spec` shrinks on each of the window's streams: the operators (and
/// spans) so named, or with that id.
/// A later item of the spec overrides an earlier one for what both name
/// (`Consume=2,w0:Consume=4`: w0's 4×, the others' 2×).
fn scales_of(spec: &[Speedup], g: &Graph, sids: &[Sid], names: &Names) -> Scales {
    let mut scales = Scales(vec![Vec::new(); sids.len()]);
    let mut set = |j: usize, k: EKind, scale: f64| match scales.0[j].iter_mut().find(|(x, _)| *x == k) {
        Some(e) => e.1 = scale,
        None => scales.0[j].push((k, scale)),
    };
    for s in spec {
        let scale = 1.0 / s.factor;
        // (An id names an operator or span whether it has a name or not.)
        let id: Option<u64> = s.target.parse().ok();
        for (j, sid) in sids.iter().enumerate() {
            if s.worker.is_some_and(|w| w != sid.worker) {
                continue;
            }
            for &op in names.metas[j].ops_named(&s.target) {
                set(j, EKind::Op(op), scale);
            }
            if let Some(op) = id.and_then(|id| u32::try_from(id).ok()) {
                set(j, EKind::Op(op), scale);
            }
            for (ix, &span) in g.spans.iter().enumerate() {
                if names.span(j, span).is_some_and(|n| n == s.target) || Some(span) == id {
                    set(j, EKind::Span(ix as u32), scale);
                }
            }
        }
    }
    scales
}

/// The report's entry for `spec`.
fn entry(spec: &[Speedup], cp: &CpSummary, measured_ns: Ns, predicted_ns: Ns) -> WhatIf {
    let saved_ns = measured_ns.saturating_sub(predicted_ns);
    let naive: f64 = spec
        .iter()
        .map(|s| {
            let on_path: Ns = cp
                .top_operators
                .iter()
                .filter(|o| s.worker.is_none_or(|w| w == o.worker))
                .filter(|o| o.name == s.target || o.operator.to_string() == s.target)
                .map(|o| o.ns)
                .sum();
            on_path as f64 * (1.0 - 1.0 / s.factor)
        })
        .sum();
    let one = spec.len() == 1;
    WhatIf {
        speedup: spec.iter().map(Speedup::text).collect::<Vec<_>>().join(","),
        worker: if one { spec[0].worker } else { None },
        operator: spec.iter().map(|s| s.target.as_str()).collect::<Vec<_>>().join(","),
        factor: if one { spec[0].factor_text() } else { String::new() },
        measured_ns,
        predicted_ns,
        saved_ns,
        saved_share: saved_ns as f64 / measured_ns.max(1) as f64,
        naive_saved_ns: (naive.round() as Ns).min(measured_ns),
    }
}
