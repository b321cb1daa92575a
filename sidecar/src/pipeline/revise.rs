//! Live: the windows a window owner keeps after reporting them, so that
//! late records can still correct them. A worker inside one long execution
//! (a differential arrangement merging a big batch) publishes its records
//! only when the execution's step ends (timely's logger delivers a step's
//! events then, and the probe keeps a schedule start pending until its
//! stop), seconds after the windows it spans were reported on time. Those
//! records come as late fragments ([`Fragment::late`]); the owner folds
//! them into the window's kept fragments ([`Fragment::fold_late`]) and
//! analyzes it again: the revised report replaces the first in the run's
//! totals, `/metrics` and the dashboard. A window older than the last
//! `--revise-within` windows is gone: its late records fault the stream's
//! next window as before (INCOMPLETE, `late data`).
//!
//! Memory: the fragments and the report of at most `keep` windows per
//! host on each owner (plus two, for windows still in analysis).

use std::collections::BTreeMap;

use crate::analysis::model::{Fragment, Ns};
use crate::analysis::report::WindowReport;

/// `--revise-within`'s default: 16 windows (16 s at the default 1 s
/// windows), longer than most executions of a differential arrangement's
/// merge, and 16 windows of fragments per owner.
pub const DEFAULT_REVISE_WITHIN: u64 = 16;

/// The windows (by timely time, host) a window owner keeps for revision.
#[derive(Default)]
pub struct Retained {
    keep: u64,
    windows: BTreeMap<(u64, u64), Kept>,
}

/// One kept window: its fragments as analyzed, its latest report.
struct Kept {
    window: u64,
    frags: Vec<Fragment>,
    report: Option<WindowReport>,
    revision: u32,
}

/// A kept window with late records folded in, to analyze again.
pub struct Revision {
    pub key: (u64, u64),
    pub window: u64,
    pub frags: Vec<Fragment>,
    /// Its number (1: the first revision).
    pub revision: u32,
    /// The workers whose late records it takes.
    pub late_from: Vec<u32>,
}

/// What became of a late fragment.
pub enum Late {
    /// Its window is kept: analyze it again.
    Revise(Revision),
    /// Its window is too old (or was never analyzed here).
    Gone,
}

impl Retained {
    /// Keeps the last `keep` windows of each host (0: none).
    pub fn new(keep: u64) -> Retained {
        Retained { keep, windows: BTreeMap::new() }
    }

    pub fn on(&self) -> bool {
        self.keep > 0
    }

    /// A window goes to analysis with `frags`: kept (a copy), and the
    /// windows too old for revision forgotten.
    pub fn analyzed(&mut self, key: (u64, u64), window: u64, frags: &[Fragment]) {
        if self.keep == 0 {
            return;
        }
        self.windows.insert(key, Kept { window, frags: frags.to_vec(), report: None, revision: 0 });
        // (The windower revises its stream's last `keep` windows; two more
        // here for windows a late fragment overtakes on the way.)
        let (time, host) = key;
        let keep = self.keep.saturating_add(2);
        self.windows.retain(|&(t, h), _| h != host || t.saturating_add(keep) > time);
    }

    /// A window's report, as it went out (its first, or a revision):
    /// returns the one it replaces.
    pub fn reported(&mut self, key: (u64, u64), report: &WindowReport) -> Option<WindowReport> {
        let k = self.windows.get_mut(&key)?;
        k.report.replace(report.clone())
    }

    /// Whether `key`'s window is kept and its report not out yet (in the
    /// analysis thread).
    pub fn awaits_report(&self, key: (u64, u64)) -> bool {
        self.windows.get(&key).is_some_and(|k| k.report.is_none())
    }

    /// Late records for window `key`: folded into it, to analyze again.
    pub fn late(&mut self, key: (u64, u64), width: Ns, patch: Fragment) -> Late {
        let Some(k) = self.windows.get_mut(&key) else { return Late::Gone };
        let late_from: Vec<u32> = patch.stream.map(|s| s.worker).into_iter().collect();
        Fragment::fold_late(&mut k.frags, width, patch);
        k.revision += 1;
        Late::Revise(Revision { key, window: k.window, frags: k.frags.clone(), revision: k.revision, late_from })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_keeps_its_last_windows_and_no_more() {
        let mut r = Retained::new(3);
        for t in 0..10 {
            r.analyzed((t, 7), t, &[]);
            r.analyzed((t, 8), t, &[]);
        }
        // keep + 2 per host: times 5..=9.
        let kept: Vec<u64> = r.windows.keys().filter(|k| k.1 == 7).map(|k| k.0).collect();
        assert_eq!(kept, vec![5, 6, 7, 8, 9]);
        assert!(matches!(r.late((4, 7), 10, Fragment { late: true, ..Default::default() }), Late::Gone));
        match r.late((6, 7), 10, Fragment { late: true, ..Default::default() }) {
            Late::Revise(v) => assert_eq!((v.window, v.revision), (6, 1)),
            Late::Gone => panic!("window 6 is kept"),
        }
        let mut off = Retained::new(0);
        off.analyzed((1, 7), 1, &[]);
        assert!(!off.on() && off.windows.is_empty());
    }
}
