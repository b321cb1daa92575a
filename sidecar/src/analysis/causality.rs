//! Causality across hosts: a window that holds streams converted from other
//! hosts' clocks gets its message receives clamped to their sends before it
//! is analyzed, and the sync facts (hosts, widest clock interval, clamps) go
//! into its report. Why the analysis uses one point of each converted
//! interval and may clamp it: `crate::ingest::sync`'s module doc (DESIGN
//! "Clocks"; freezer-notes §2.5).

use rustc_hash::FxHashMap;

use crate::analysis::model::{Fragment, Half, Messages, Ns};
use crate::analysis::report::WindowReport;

/// The host whose windows a fragment belongs to.
pub fn window_host(f: &Fragment) -> u64 {
    f.timeline.or(f.stream.map(|s| s.host)).unwrap_or(0)
}

/// What [`enforce_causality`] did to one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Causality {
    /// Receives moved to their send.
    pub clamps: u64,
    /// Of those, inversions larger than the two ends' clock uncertainty
    /// together: the guarantee did not hold (a TSC mapping error, a broken
    /// model), reported as a fault.
    pub beyond_bound: u64,
}

/// Message edges between workers on different hosts are causal: where the
/// converted times place a receive before its send, the receive is moved to
/// the send (within the interval: both ends' intervals overlap there when the
/// bounds hold). Data messages match on (channel, sender, receiver, seq),
/// progress on (channel, sender, seq). Edges within one host are left alone
/// (one clock; the analysis has its own accounting for them).
pub fn enforce_causality(frags: &mut [Fragment]) -> Causality {
    let mut host_of: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
    for f in frags.iter() {
        if let Some(s) = f.stream {
            host_of.insert(s.worker, (s.host, f.counters.clock_uncertainty_ns));
        }
    }
    let mut data: FxHashMap<(u32, u32, u32, u64), Ns> = FxHashMap::default();
    let mut progress: FxHashMap<(u32, u32, u64), Ns> = FxHashMap::default();
    for f in frags.iter() {
        let Some(s) = f.stream else { continue };
        for g in &f.msgs.groups {
            match g.half {
                Half::Send if host_of.get(&g.other).is_some_and(|h| h.0 != s.host) => {
                    data.extend(g.entries.iter().map(|e| ((g.channel, s.worker, g.other, e.seq), e.at)));
                }
                Half::PSend => progress.extend(g.entries.iter().map(|e| ((g.channel, s.worker, e.seq), e.at))),
                _ => {}
            }
        }
    }
    let mut c = Causality::default();
    if data.is_empty() && progress.is_empty() {
        return c;
    }
    for f in frags.iter_mut() {
        let Some(s) = f.stream else { continue };
        let mine = f.counters.clock_uncertainty_ns;
        let Messages { groups, reads, moved } = &mut f.msgs;
        for g in groups.iter() {
            let from = g.other;
            let theirs = host_of.get(&from).map_or(0, |h| h.1);
            let other_host = host_of.get(&from).is_some_and(|h| h.0 != s.host);
            for e in g.entries.iter() {
                let sent = match g.half {
                    Half::Recv => data.get(&(g.channel, from, s.worker, e.seq)).copied(),
                    Half::PRecv if other_host => progress.get(&(g.channel, from, e.seq)).copied(),
                    _ => None,
                };
                let Some(sent) = sent else { continue };
                // (A read: its time is in `reads`.)
                let read = &mut reads[e.at as usize];
                if *read < sent {
                    if sent - *read > mine.saturating_add(theirs) {
                        c.beyond_bound += 1;
                    }
                    *read = sent;
                    *moved = true;
                    c.clamps += 1;
                }
            }
        }
    }
    c
}

/// Sync facts of one window, gathered from its fragments before analysis.
#[derive(Clone, Debug, Default)]
pub struct WindowSync {
    /// Hosts other than the window's whose streams are in it (converted).
    pub hosts: Vec<u64>,
    /// Widest converted interval used in the window (None: nothing converted).
    pub uncertainty_ns: Option<u64>,
    pub causality: Causality,
}

/// Prepares a window's fragments (causality clamps) and gathers its sync facts.
pub fn prepare(host: u64, frags: &mut [Fragment]) -> WindowSync {
    let mut hosts: Vec<u64> =
        frags.iter().filter(|f| !f.marker).filter_map(|f| f.stream.map(|s| s.host)).filter(|&h| h != host).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let uncertainty_ns = frags.iter().filter(|f| f.timeline.is_some()).map(|f| f.counters.clock_uncertainty_ns).max();
    let causality = if hosts.is_empty() { Causality::default() } else { enforce_causality(frags) };
    WindowSync { hosts, uncertainty_ns, causality }
}

/// Adds the sync facts to a window's report.
pub fn report(rep: &mut WindowReport, s: &WindowSync) {
    rep.synchronized_hosts = s.hosts.iter().map(|h| format!("{h:016x}")).collect();
    rep.clock_uncertainty_ns = s.uncertainty_ns;
    rep.causality_clamps = s.causality.clamps;
    if s.causality.beyond_bound > 0 {
        rep.incomplete_reasons.push(format!(
            "clock sync: {} message receives before their send by more than the clock bound (clamped)",
            s.causality.beyond_bound
        ));
        rep.complete = false;
    }
}

/// [`super::analyze::analyze_detail`] of a window that may hold converted
/// streams of other hosts: causality first, sync facts in the report.
pub fn analyze_window(
    host: u64,
    index: u64,
    width: Ns,
    mut frags: Vec<Fragment>,
    detail: Option<&mut super::analyze::WindowDetail>,
    what_if: Option<&[super::whatif::Speedup]>,
    crew: Option<&std::sync::Arc<super::crew::Crew>>,
) -> WindowReport {
    let s = prepare(host, &mut frags);
    let mut rep = super::analyze::analyze_detail(host, index, width, frags, detail, what_if, crew);
    report(&mut rep, &s);
    rep
}
