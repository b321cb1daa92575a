//! Each workload, small, on 2 workers: its answer is right (checked against
//! a sequential computation), and with the probe on a file the trace
//! decodes, with every worker's stream complete and its operators named.

use std::collections::BTreeMap;
use std::sync::Arc;

use examples::{bfs, pagerank, reach, skew, wordcount, Opts, Tracing};
use probe::Sink;
use ringlog::{Body, Decoder, Event, Meta};

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("examples-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs `f` with the probe writing to a file; returns its output and, per
/// worker, the operator names and record count of the decoded trace.
fn traced<O>(
    name: &str,
    opts: &Opts,
    f: fn(&Opts, &Arc<Tracing>) -> Result<O, String>,
) -> (O, BTreeMap<u32, (Vec<String>, usize)>) {
    let path = tmp(name);
    let tracing = Arc::new(Tracing::new(opts, name, Sink::file(&path), None).unwrap());
    let out = f(opts, &tracing).unwrap();
    let stats = Arc::try_unwrap(tracing).ok().expect("workers gone").finish().expect("a probe");
    assert_eq!(stats.lost(), 0, "{stats:?}");
    assert!(stats.produced() > 0);
    let bytes = std::fs::read(&path).unwrap();
    let mut workers: BTreeMap<u32, (Vec<String>, usize)> = BTreeMap::new();
    let mut ends = 0;
    for f in Decoder::new(&bytes[..]) {
        let f = f.unwrap_or_else(|e| panic!("{name}: trace does not decode: {e:?}"));
        if f.header.stream.is_process_wide() {
            continue;
        }
        let w = workers.entry(f.header.stream.worker).or_default();
        match f.body {
            Body::Metadata(m) => w.0.extend(m.into_iter().filter_map(|m| match m {
                Meta::Operator { name, .. } => Some(name),
                _ => None,
            })),
            Body::Records(r) => {
                assert!(r.iter().all(|r| r.event().is_some()));
                w.1 += r.len();
            }
            Body::End(_) => ends += 1,
            _ => {}
        }
    }
    assert_eq!(ends, opts.workers(), "{name}: every worker's stream ends");
    assert_eq!(workers.len(), opts.workers());
    let _ = std::fs::remove_file(&path);
    (out, workers)
}

fn has_op(w: &BTreeMap<u32, (Vec<String>, usize)>, op: &str) {
    for (i, (names, records)) in w {
        assert!(names.iter().any(|n| n == op), "worker {i}: no {op} in {names:?}");
        assert!(*records > 0, "worker {i}: no records");
    }
}

#[test]
fn wordcount_counts_every_word() {
    let opts = Opts::for_test(2, &[("epochs", "4"), ("lines", "500"), ("vocab", "300")]);
    let (out, w) = traced("wordcount", &opts, wordcount::run);
    let p = out.params;
    assert_eq!(out.words, p.epochs * p.lines * wordcount::WORDS_PER_LINE);
    // Independently: the distinct words and the top count.
    let mut counts = std::collections::HashMap::new();
    for line in 0..p.epochs * p.lines {
        for k in 0..wordcount::WORDS_PER_LINE {
            *counts.entry(wordcount::word(line, k, p.vocab)).or_insert(0u64) += 1;
        }
    }
    assert_eq!(out.distinct, counts.len() as u64);
    assert_eq!(out.top, *counts.values().max().unwrap());
    has_op(&w, "Count");
}

#[test]
fn bfs_reaches_what_a_sequential_bfs_reaches() {
    let opts = Opts::for_test(2, &[("nodes", "20000"), ("edges", "60000")]);
    let (out, w) = traced("bfs", &opts, bfs::run);
    let want = bfs::sequential(out.params);
    assert!(want.reached > 1000, "a graph worth searching: {want:?}");
    assert_eq!(out, want);
    has_op(&w, "BFS");
}

#[test]
fn pagerank_matches_sequential_and_sums_to_one() {
    let opts = Opts::for_test(2, &[("nodes", "3000"), ("edges", "20000"), ("iters", "8")]);
    let (out, w) = traced("pagerank", &opts, pagerank::run);
    let ranks = pagerank::sequential(out.params);
    assert!((out.sum - 1.0).abs() < 1e-9, "{out}");
    let max = ranks.iter().copied().fold(0.0, f64::max);
    assert!((out.max - max).abs() < 1e-12, "{out} vs sequential max {max}");
    has_op(&w, "PageRank");
}

#[test]
fn skew_sends_everything_to_worker_zero() {
    let opts = Opts::for_test(2, &[("epochs", "3"), ("records", "5000"), ("work", "4")]);
    let (out, w) = traced("skew", &opts, skew::run);
    let p = out.params;
    assert_eq!(out.consumed, vec![p.epochs * p.records, 0]);
    assert_eq!(out.checksum, skew::sequential(p));
    has_op(&w, "Consume");
}

/// Without a probe, and with timely's own file logging instead.
#[test]
fn runs_untraced_and_with_timely_logging() {
    let mut opts = Opts::for_test(2, &[("epochs", "2"), ("records", "1000"), ("work", "1")]);
    opts.no_probe = true;
    let t = Arc::new(Tracing::new(&opts, "skew", Sink::Off, None).unwrap());
    let out = skew::run(&opts, &t).unwrap();
    assert!(!t.has_probe());
    assert_eq!(out.consumed[0], 2000);

    let base = tmp("timely-log");
    let base = base.to_str().unwrap().to_string();
    let t = Arc::new(Tracing::new(&opts, "skew", Sink::Off, Some(base.clone())).unwrap());
    skew::run(&opts, &t).unwrap();
    for w in 0..2 {
        let len = std::fs::metadata(format!("{base}.{w}")).unwrap().len();
        assert!(len > 1000, "worker {w}: timely log of {len} bytes");
        let _ = std::fs::remove_file(format!("{base}.{w}"));
    }
}

/// The probe and timely's file logging at once: both see every event.
#[test]
fn probe_and_timely_logging_together() {
    let opts = Opts::for_test(2, &[("epochs", "2"), ("records", "1000"), ("work", "1")]);
    let path = tmp("both.ringlog");
    let base = tmp("both-timely").to_str().unwrap().to_string();
    let t = Arc::new(Tracing::new(&opts, "skew", Sink::file(&path), Some(base.clone())).unwrap());
    skew::run(&opts, &t).unwrap();
    let stats = Arc::try_unwrap(t).ok().unwrap().finish().unwrap();
    assert!(stats.produced() > 0);
    let bytes = std::fs::read(&path).unwrap();
    let sends = Decoder::new(&bytes[..])
        .filter_map(|f| match f.unwrap().body {
            Body::Records(r) => Some(r.iter().filter(|r| matches!(r.event(), Some(Event::MessageSend { .. }))).count()),
            _ => None,
        })
        .sum::<usize>();
    assert!(sends > 0);
    for w in 0..2 {
        assert!(std::fs::metadata(format!("{base}.{w}")).unwrap().len() > 1000);
        let _ = std::fs::remove_file(format!("{base}.{w}"));
    }
    let _ = std::fs::remove_file(&path);
}

/// The binaries: flags, result line, probe line.
#[test]
fn binaries_print_result_and_probe_lines() {
    let cases: [(&str, &str, &[&str]); 4] = [
        (env!("CARGO_BIN_EXE_wordcount"), "wordcount:", &["--epochs", "2", "--lines", "200"]),
        (env!("CARGO_BIN_EXE_bfs"), "bfs:", &["--nodes", "2000", "--edges", "8000"]),
        (env!("CARGO_BIN_EXE_pagerank"), "pagerank:", &["--nodes", "500", "--edges", "2000", "--iters", "3"]),
        (env!("CARGO_BIN_EXE_skew"), "skew:", &["--epochs", "2", "--records", "100", "--work", "1"]),
    ];
    for (exe, prefix, flags) in cases {
        let path = tmp(&format!("{}.ringlog", prefix.trim_end_matches(':')));
        let out = std::process::Command::new(exe)
            .args(["-w", "2"])
            .args(flags)
            .env("PROBE_SINK", format!("file:{}", path.display()))
            .env_remove("TIMELY_LOG_FILE")
            .output()
            .unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{exe}: {stderr}");
        assert!(stdout.starts_with(prefix), "{exe}: {stdout}");
        assert!(stderr.contains("probe: sink=file:") && stderr.contains("lost=0"), "{exe}: {stderr}");
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
        let _ = std::fs::remove_file(&path);
        let out = std::process::Command::new(exe).args(flags).arg("--no-probe").output().unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("probe: not attached"));
    }
}

/// The differential workload, skewed: its distances are a sequential BFS's
/// on the live edges after the last round, and worker 0 (which holds the hot
/// nodes) produces most of the join's output.
#[test]
fn reach_matches_a_sequential_bfs_and_its_skew_lands_on_worker_zero() {
    let flags =
        [("nodes", "3000"), ("edges", "12000"), ("rounds", "3"), ("batch", "1000"), ("skew", "50"), ("work", "1")];
    let opts = Opts::for_test(2, &flags);
    let (out, w) = traced("reach", &opts, reach::run);
    let want = reach::sequential(out.params);
    assert!(want.reached > 1000, "a graph worth searching: {want:?}");
    assert_eq!((out.reached, out.depth, out.checksum), (want.reached, want.depth, want.checksum), "{out}");
    // Half the edges leave from 16 hot nodes, all on worker 0; the rest
    // spread evenly: worker 0 joins about 3/4 of the edges it meets.
    assert!(out.joined[0] > 2 * out.joined[1], "{out}");
    for op in ["Join", "Reduce", "ArrangeByKey"] {
        has_op(&w, op);
    }
    // Unskewed, the same search spreads: neither worker joins twice the other's.
    let mut flags = flags.to_vec();
    flags[4].1 = "0";
    let t = Arc::new(Tracing::new(&opts, "reach", Sink::Off, None).unwrap());
    let even = reach::run(&Opts::for_test(2, &flags), &t).unwrap();
    assert_eq!(even.reached, reach::sequential(even.params).reached);
    assert!(even.joined[0] < 2 * even.joined[1] && even.joined[1] < 2 * even.joined[0], "{even}");
}
