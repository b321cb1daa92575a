//! Sager's trace properties (§3.3, sager-notes §4; issue stage 7), checked
//! on every window graph and reported with where they fail.
//!
//! * 3.9 Minimum in-degree: every vertex after the window's first timestamp
//!   has an incoming edge — no worker appears out of the blue.
//! * 3.10 Communication existence: whenever every running worker waits, a
//!   message is in flight — otherwise a deadlock or missing instrumentation.
//! * 3.11 Wait termination: every wait ends together with the message that
//!   ended it; only waits cut at the window's end are exempt.

use serde::{Deserialize, Serialize};

use crate::analysis::graph::{EKind, Graph, NONE};
use crate::analysis::model::Ns;

/// Where a property failed: worker (local index) and time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub worker: Option<u32>,
    pub at_ns: Ns,
    pub until_ns: Option<Ns>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub ok: bool,
    pub violations: u64,
    /// The first few, for finding them.
    #[serde(rename = "where")]
    pub at: Vec<Violation>,
}

const KEEP: usize = 8;

impl Check {
    fn add(&mut self, v: Violation) {
        self.violations += 1;
        if self.at.len() < KEEP {
            self.at.push(v);
        }
    }
    fn done(mut self) -> Check {
        self.ok = self.violations == 0;
        self
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Properties {
    pub min_in_degree: Check,
    pub communication_existence: Check,
    pub wait_termination: Check,
    /// Not counted above: worker timelines that begin inside the window
    /// because the worker's stream starts there (a thread starting is not a
    /// worker "out of the blue"), and the all-waiting stretches before the
    /// last such start, or anywhere in a window where some worker of the
    /// process has not started yet (the workers waited on had not started).
    pub stream_starts: StreamStarts,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamStarts {
    pub min_in_degree: u64,
    pub communication_existence: u64,
}

/// The three properties of the window graph `g`, each with where it fails.
pub fn check(g: &Graph) -> Properties {
    let min_in_degree = min_in_degree(g).done();
    let wait_termination = wait_termination(g).done();
    let communication_existence = communication_existence(g).done();
    Properties { min_in_degree, communication_existence, wait_termination, stream_starts: StreamStarts::default() }
}

/// Property 3.9: chain starts later than the first vertex have no in-edge
/// (a terminating message can only end a wait, so never a chain start).
fn min_in_degree(g: &Graph) -> Check {
    let mut check = Check::default();
    // (Times increase along a chain: the least is a chain's first.)
    let tmin = g.chains.iter().filter(|(a, b)| b > a).map(|&(a, _)| g.t[a as usize]).min().unwrap_or(g.window.0);
    for &(a, b) in &g.chains {
        if b > a && g.t[a as usize] > tmin {
            check.add(Violation { worker: Some(g.w[a as usize]), at_ns: g.t[a as usize], until_ns: None });
        }
    }
    check
}

/// Property 3.11: a wait that ends inside the window without a terminator.
fn wait_termination(g: &Graph) -> Check {
    let mut check = Check::default();
    for v in 0..g.len() {
        if g.kind[v] == EKind::Wait && g.term[v] == NONE && g.t[v] < g.window.1 {
            check.add(Violation { worker: Some(g.w[v]), at_ns: g.t[v], until_ns: None });
        }
    }
    check
}

/// Property 3.10: a sweep over the running and waiting workers and the
/// messages in flight ([`running_and_waiting`]); a stretch where every
/// running worker waits and no message is in flight is a violation.
fn communication_existence(g: &Graph) -> Check {
    let mut check = Check::default();
    let ev = running_and_waiting(g);
    let (mut running, mut waiting) = (0i64, 0i64);
    let mut open: Option<Ns> = None;
    let mut i = 0;
    while i < ev.len() {
        let t = ev[i].0;
        while i < ev.len() && ev[i].0 == t {
            running += ev[i].1 as i64;
            waiting += ev[i].2 as i64;
            i += 1;
        }
        let all = running > 0 && waiting >= running;
        match (open, all) {
            (None, true) => open = Some(t),
            (Some(s), false) => {
                if t > s {
                    check.add(Violation { worker: None, at_ns: s, until_ns: Some(t) });
                }
                open = None;
            }
            _ => {}
        }
    }
    let we = g.window.1;
    if let Some(s) = open {
        if we > s {
            check.add(Violation { worker: None, at_ns: s, until_ns: Some(we) });
        }
    }
    check
}

/// The sweep's events in time order, as (time, change in running workers,
/// change in waiting ones): chain start (+running), chain end (−running),
/// wait start (+waiting), wait end (−waiting); a message in flight
/// (positive duration) counts as 100 workers not waiting.
fn running_and_waiting(g: &Graph) -> Vec<(Ns, i8, i8)> {
    let mut ev: Vec<(Ns, i8, i8)> = Vec::new();
    for &(a, b) in &g.chains {
        if b <= a {
            continue;
        }
        ev.push((g.t[a as usize], 1, 0));
        ev.push((g.t[b as usize - 1], -1, 0));
        for v in a as usize + 1..b as usize {
            if g.kind[v] == EKind::Wait {
                ev.push((g.t[v - 1], 0, 1));
                ev.push((g.t[v], 0, -1));
            }
        }
    }
    // Messages in flight (positive duration) also satisfy the property.
    for c in &g.comms {
        let (s, d) = (g.t[c.src as usize], g.t[c.dst as usize]);
        if d > s {
            ev.push((s, 0, -100));
            ev.push((d, 0, 100));
        }
    }
    // Each chain's events are in time order already: the stable sort finds
    // those runs and merges them. (Events at one time are summed before the
    // test, so their order among themselves is moot.)
    ev.sort();
    ev
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graph::GraphBuilder;

    #[test]
    fn all_hold_on_a_good_graph() {
        let p = check(&crate::analysis::graph::tests::two_workers());
        assert!(p.min_in_degree.ok && p.communication_existence.ok && p.wait_termination.ok);
    }

    #[test]
    fn violations_are_located() {
        let mut b = GraphBuilder::new((0, 100), 2);
        b.segment(0, 0, 20, EKind::Op(1));
        b.segment(0, 20, 50, EKind::Wait); // never terminated
        b.segment(0, 50, 100, EKind::Op(1));
        b.segment(1, 10, 40, EKind::Wait); // appears at 10, out of the blue
        b.segment(1, 40, 100, EKind::Op(2));
        let p = check(&b.build());
        assert_eq!(p.min_in_degree.at, vec![Violation { worker: Some(1), at_ns: 10, until_ns: None }]);
        assert_eq!(p.wait_termination.violations, 2);
        // both wait during [20, 40]
        assert_eq!(p.communication_existence.at, vec![Violation { worker: None, at_ns: 20, until_ns: Some(40) }]);
    }
}
