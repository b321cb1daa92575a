//! Stage 10: Sager's three trace properties (§3.3: minimum in-degree, wait
//! termination, communication existence), checked on the window graph by
//! [`crate::analysis::properties::check`], with the violations that a stream
//! starting inside the window explains set apart.

use super::streams::Streams;
use crate::analysis::graph::Graph;
use crate::analysis::model::{Fragment, Ns};
use crate::analysis::properties::{self, Properties};

/// The window's property checks, violations named by worker index.
pub(super) fn check_trace_properties(
    g: &Graph,
    frags: &[Fragment],
    streams: &Streams,
    missing: &[usize],
    cluster_starting: bool,
    window: (Ns, Ns),
) -> Properties {
    let mut props = properties::check(g);
    explain_stream_starts(&mut props, g, frags, streams, missing, cluster_starting, window);
    for v in props
        .min_in_degree
        .at
        .iter_mut()
        .chain(props.wait_termination.at.iter_mut())
        .chain(props.communication_existence.at.iter_mut())
    {
        if let Some(w) = v.worker {
            v.worker = Some(streams.sids[w as usize].worker);
        }
    }
    props
}

/// Streams that begin inside the window (see `Properties::stream_starts`):
/// a timeline's first vertex has no predecessor, and a worker that waits on
/// one not started yet (a thread of its process, or a process of its
/// cluster: `cluster_starting`) has nothing in flight. Those violations
/// move to `stream_starts`.
fn explain_stream_starts(
    props: &mut Properties,
    g: &Graph,
    frags: &[Fragment],
    streams: &Streams,
    missing: &[usize],
    cluster_starting: bool,
    (ws, we): (Ns, Ns),
) {
    let began: Vec<Option<Ns>> =
        frags.iter().map(|f| (f.covered.0 > ws && f.covered.0 < we).then_some(f.covered.0)).collect();
    // A worker of a process that has not started yet (fewer streams here
    // than the process runs, none of the absent ones ended): the workers
    // present may wait on it with nothing in flight.
    let not_started = cluster_starting
        || streams
            .procs
            .iter()
            .enumerate()
            .any(|(p, members)| missing[p] > 0 && members.iter().all(|&i| !frags[i].ended));
    let last_start = if not_started { Some(we) } else { began.iter().flatten().max().copied() };
    let Some(last_start) = last_start else { return };
    let tmin = g.t.iter().copied().min().unwrap_or(ws);
    for (w, &(a, b)) in g.chains.iter().enumerate() {
        if b > a && g.t[a as usize] > tmin && began[w].is_some_and(|s| g.t[a as usize] >= s) {
            let m = &mut props.min_in_degree;
            m.violations -= 1;
            m.at.retain(|v| !(v.worker == Some(w as u32) && v.at_ns == g.t[a as usize]));
            props.stream_starts.min_in_degree += 1;
        }
    }
    let c = &mut props.communication_existence;
    let before = c.at.len();
    c.at.retain(|v| v.until_ns.is_none_or(|u| u > last_start));
    let gone = (before - c.at.len()) as u64;
    c.violations -= gone;
    props.stream_starts.communication_existence += gone;
    props.min_in_degree.ok = props.min_in_degree.violations == 0;
    props.communication_existence.ok = props.communication_existence.violations == 0;
}
