//! What recorded files name, read before their records (as the clock
//! exchanges are, [`super::exchanges`]): the workers that wrote streams and
//! the operators and spans their metadata names. `sidecar whatif` checks
//! its speedup against them, so that a name that matches nothing is
//! refused instead of predicting "0 % faster".

use std::collections::BTreeSet;
use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use ringlog::{Body, FrameKind, Meta};

/// The workers, operators and spans recorded files name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// Worker indices of the streams (a cluster's are global).
    pub workers: BTreeSet<u32>,
    /// Operator names, and ids.
    pub operators: BTreeSet<String>,
    pub operator_ids: BTreeSet<u64>,
    /// Span names, and ids.
    pub spans: BTreeSet<String>,
    pub span_ids: BTreeSet<u64>,
}

impl Named {
    /// Whether `target` (a name or an id, as a speedup gives it) names an
    /// operator or a span.
    pub fn has(&self, target: &str) -> bool {
        let id: Option<u64> = target.parse().ok();
        self.operators.contains(target)
            || self.spans.contains(target)
            || id.is_some_and(|i| self.operator_ids.contains(&i) || self.span_ids.contains(&i))
    }
}

/// What the regular files among `files` name (a pipe or FIFO is read once,
/// by the analysis: it adds nothing here).
pub fn names_in(files: &[PathBuf]) -> Named {
    let mut out = Named::default();
    for path in files {
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        if let Ok(f) = File::open(path) {
            names_in_stream(BufReader::with_capacity(1 << 16, f), &mut out);
        }
    }
    out
}

/// What one byte stream names, added to `out`.
pub fn names_in_stream(r: impl std::io::Read + std::io::Seek, out: &mut Named) {
    super::exchanges::first_pass(
        r,
        |k| k == FrameKind::Metadata,
        |h, body| {
            if !h.stream.is_process_wide() {
                out.workers.insert(h.stream.worker);
            }
            for m in match body {
                Some(Body::Metadata(m)) => m,
                _ => return,
            } {
                match m {
                    Meta::Operator { id, name, .. } => {
                        out.operator_ids.insert(id as u64);
                        out.operators.insert(name);
                    }
                    Meta::Span { id, name } => {
                        out.span_ids.insert(id);
                        out.spans.insert(name);
                    }
                    Meta::Channel { .. } => {}
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringlog::{ClockDomain, Encoder, StreamId};
    use std::io::Cursor;

    /// Workers come from the frames' streams, names and ids from
    /// the metadata; a Records payload is skipped, not decoded.
    #[test]
    fn the_first_pass_finds_workers_operators_and_spans() {
        let mut enc = Encoder::new();
        let w1 = StreamId { host: 1, process: 2, worker: 1 };
        let mut bytes = Vec::new();
        let meta = [
            Meta::Operator { id: 7, name: "Count".into(), addr: vec![0, 7] },
            Meta::Span { id: 40, name: "load".into() },
        ];
        enc.metadata(w1, 0, ClockDomain::MonotonicNs, &meta, &mut bytes);
        enc.records(w1, 1, 0, ClockDomain::MonotonicNs, &[], &mut bytes);
        let mut n = Named::default();
        names_in_stream(Cursor::new(&bytes), &mut n);
        assert_eq!(n.workers, BTreeSet::from([1]));
        assert!(n.has("Count") && n.has("7") && n.has("load") && n.has("40"));
        assert!(!n.has("Nope") && !n.has("8"));
    }
}
