#![allow(dead_code)]
//! Reading a trace back for the tests.

use std::collections::BTreeMap;

use ringlog::{Body, Decoder, EndStats, Hello, Meta, ProbeStats, Record, StreamError};

#[derive(Default, Debug)]
pub struct StreamData {
    pub records: Vec<Record>,
    pub meta: Vec<Meta>,
    pub end: Option<EndStats>,
    pub lost_in_headers: u64,
    pub frames: u64,
    pub seq_gaps: u64,
    next_seq: u64,
}

#[derive(Default, Debug)]
pub struct Trace {
    pub hello: Option<Hello>,
    pub process_end: bool,
    pub clock_samples: usize,
    /// The probe's Stats frames, in order.
    pub stats: Vec<ProbeStats>,
    pub workers: BTreeMap<u32, StreamData>,
    pub error: Option<String>,
}

pub fn read_trace(bytes: &[u8]) -> Trace {
    let mut t = Trace::default();
    for f in Decoder::new(bytes) {
        let f = match f {
            Ok(f) => f,
            Err(StreamError { offset, error, .. }) => {
                t.error = Some(format!("at {offset}: {error}"));
                break;
            }
        };
        let h = f.header;
        if h.stream.is_process_wide() {
            match f.body {
                Body::Hello(hello) => t.hello = Some(hello),
                Body::Clock(c) => t.clock_samples += c.len(),
                Body::End(_) => t.process_end = true,
                Body::Stats(s) => t.stats.push(s),
                other => panic!("unexpected process-wide frame {other:?}"),
            }
            continue;
        }
        let s = t.workers.entry(h.stream.worker).or_default();
        if h.seq != s.next_seq {
            s.seq_gaps += 1;
        }
        s.next_seq = h.seq + 1;
        s.frames += 1;
        s.lost_in_headers += h.lost;
        match f.body {
            Body::Records(r) => s.records.extend(r),
            Body::Metadata(m) => s.meta.extend(m),
            Body::End(e) => s.end = Some(e),
            Body::Hello(_) => {}
            Body::Clock(_) => panic!("clock frame on a worker stream"),
            Body::ClockSync(_) => panic!("the probe never writes clock-sync frames"),
            Body::Stats(_) => panic!("stats frame on a worker stream"),
        }
    }
    t
}

pub fn tmp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("probe-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}
