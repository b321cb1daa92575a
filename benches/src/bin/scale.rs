//! How the sidecar's offline analysis scales with its timely workers:
//! throughput (records/s), CPU seconds per million records, the bytes of
//! fragments that cross between workers per record, and the latency of a
//! single window, against the number of workers, on synthetic traces of 8,
//! 64 and 1,000 streams (and on any trace given, e.g. t50).
//!
//! `cargo run --release -p benches --bin scale -- [--records N] [--rounds R]
//!  [--workers 1,2,4] [--windows N] [--trace FILE]... [--sidecar PATH] [-- SIDECAR ARGS]`
//!
//! Each run is `sidecar analyze FILE -w W -q --json /dev/null` with the
//! offline helper threads off (SIDECAR_UNPACK, SIDECAR_ANALYSIS,
//! SIDECAR_PREFAULT), so that each worker is one thread; the worker counts
//! are alternated within each round and the medians reported, each with
//! its ratio to one worker. CPU time is the child's user + system time
//! (getrusage). The single-window trace is the 8-stream one analyzed as one
//! window (`--window 60s`), with as many records; the other synthetic traces are analyzed in
//! windows as wide as makes about `--windows N` (16) of them, t50's count
//! (their spans shrink with their streams: 5 M records of 8 streams span
//! ~1.7 s, of 1,000 streams ~0.1 s, so 1 s windows would leave one or two
//! windows for two workers), given traces in 1 s ones. The table says the
//! width and how many windows each run had. Each trace's last row is a
//! cluster of two processes on loopback, one worker each: its bytes per
//! record are what the two sent each other (fragments packed to cross
//! processes), its CPU both processes', and its wall time includes the
//! cluster's start (milliseconds since the sidecar makes the connections
//! itself: `sidecar/src/io/cluster.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use sidecar::synth::{generate, Pattern, SynthConfig};

struct Args {
    records: u64,
    rounds: usize,
    workers: Vec<usize>,
    traces: Vec<PathBuf>,
    windows: u64,
    sidecar: PathBuf,
    extra: Vec<String>,
}

const USAGE: &str = "usage: scale [--records N] [--rounds R] [--workers 1,2,4] [--windows N] [--trace FILE]... \
[--sidecar PATH] [-- SIDECAR ARGS]";

/// Says what was wrong with the arguments, and how they go; exit status 2.
fn refuse(why: &str) -> ! {
    eprintln!("scale: {why}\n{USAGE}");
    std::process::exit(2)
}

fn args() -> Args {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut a = Args {
        records: 10_000_000,
        rounds: 3,
        workers: vec![1, 2, cores],
        traces: Vec::new(),
        windows: 16,
        sidecar: PathBuf::from("target/release/sidecar"),
        extra: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| refuse(&format!("{x} needs a value")));
        let number = |v: String| v.parse::<u64>().ok().filter(|&n| n > 0);
        match x.as_str() {
            "--records" => a.records = number(val()).unwrap_or_else(|| refuse("--records takes a number of records")),
            "--rounds" => {
                a.rounds = number(val()).unwrap_or_else(|| refuse("--rounds takes a number of rounds")) as usize
            }
            "--workers" => {
                a.workers = val()
                    .split(',')
                    .map(|w| number(w.to_string()).unwrap_or_else(|| refuse("--workers takes counts: 1,2,4")) as usize)
                    .collect()
            }
            "--windows" => a.windows = number(val()).unwrap_or_else(|| refuse("--windows takes a number of windows")),
            "--trace" => a.traces.push(PathBuf::from(val())),
            "--sidecar" => a.sidecar = PathBuf::from(val()),
            "--" => a.extra = it.by_ref().collect(),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            _ => refuse(&format!("unknown argument {x:?}")),
        }
    }
    a.workers.dedup();
    a
}

/// Writes a synthetic trace of `streams` streams (one per worker of one
/// process) with message `pattern`, unless it is there already.
fn synth(dir: &Path, records: u64, streams: u32, pattern: Pattern, per_process: u32) -> PathBuf {
    let name = format!("scale-{streams}-{records}-{pattern:?}-{per_process}.rlog").replace(['(', ')'], "");
    let path = dir.join(name);
    if !path.exists() {
        let cfg = SynthConfig { records, workers: streams, pattern, per_process, ..Default::default() };
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path).expect("create trace"));
        generate(&cfg, &mut |b| std::io::Write::write_all(&mut w, b)).expect("write trace");
        std::io::Write::flush(&mut w).unwrap();
    }
    path
}

/// The CPU time (user + system, s) of the children waited for so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes a plain struct we own; RUSAGE_CHILDREN is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// One run's figures.
struct Run {
    wall: f64,
    cpu: f64,
    records: u64,
    /// Bytes of fragments to other workers.
    crossing: u64,
    windows: u64,
}

/// `sidecar analyze` on `trace` with `window`, `workers` workers, the
/// helper threads off, and the arguments `more`.
fn analyze(a: &Args, trace: &Path, workers: usize, window: &str, more: &[String]) -> Command {
    let mut c = Command::new(&a.sidecar);
    c.args(["analyze", &trace.display().to_string(), "-w", &workers.to_string(), "--window", window])
        .args(["-q", "--json", "/dev/null"])
        .args(more)
        .args(&a.extra)
        .envs([("SIDECAR_UNPACK", "off"), ("SIDECAR_ANALYSIS", "off"), ("SIDECAR_PREFAULT", "off")]);
    c
}

/// One run of the sidecar on `trace`.
fn run(a: &Args, trace: &Path, workers: usize, window: &str) -> Run {
    let cpu0 = children_cpu();
    let t = Instant::now();
    let out = analyze(a, trace, workers, window, &[]).output().expect("run the sidecar");
    let wall = t.elapsed().as_secs_f64();
    let cpu = children_cpu() - cpu0;
    let closing = closing_line(&out.stderr);
    // "fragments to other workers 12.3 MB (4.5 B/record)": the per-record
    // figure times the records.
    let per_record: f64 = closing
        .split_once("fragments to other workers ")
        .and_then(|(_, r)| r.split_once('(')?.1.split_once(" B/record").map(|x| x.0.parse().ok()))
        .flatten()
        .unwrap_or(0.0);
    let records = records_in(&closing);
    let windows = windows_in(&closing).expect("windows in the closing line");
    Run { wall, cpu, records, crossing: (per_record * records as f64) as u64, windows }
}

/// Two sidecar processes of one timely cluster on loopback, one worker
/// each, both reading `trace` (each decodes the streams its worker owns):
/// the wall time until both ended, their CPU, their records, the bytes of
/// fragments they sent each other (packed, as they cross), and the windows
/// process 0 reported.
fn run_cluster(a: &Args, trace: &Path, window: &str) -> Run {
    let hosts = std::env::temp_dir().join(format!("scale-hosts-{}.txt", std::process::id()));
    // (Two ports free a moment ago, both held while they are read.)
    let free: Vec<std::net::TcpListener> =
        (0..2).map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("a free port")).collect();
    let ports: Vec<u16> = free.iter().map(|l| l.local_addr().expect("its address").port()).collect();
    drop(free);
    std::fs::write(&hosts, format!("127.0.0.1:{}\n127.0.0.1:{}\n", ports[0], ports[1])).expect("write the hostfile");
    let cluster = |p: usize| -> Vec<String> {
        ["--processes", "2", "--process", &p.to_string(), "--hostfile", &hosts.display().to_string()]
            .map(String::from)
            .to_vec()
    };
    let start = |p: usize| {
        let mut c = analyze(a, trace, 1, window, &cluster(p));
        c.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
        c.spawn().unwrap_or_else(|e| panic!("start process {p}: {e}"))
    };
    let cpu0 = children_cpu();
    let t = Instant::now();
    let (first, second) = (start(0), start(1));
    let first = first.wait_with_output().expect("run process 0");
    let second = second.wait_with_output().expect("run process 1");
    let wall = t.elapsed().as_secs_f64();
    let cpu = children_cpu() - cpu0;
    let _ = std::fs::remove_file(&hosts);
    let (c0, c1) = (closing_line(&first.stderr), closing_line(&second.stderr));
    // "to other processes 6.9 MB (0.8× the bytes read)"
    let sent = |c: &str| c.split_once("to other processes ").and_then(|(_, r)| bytes_of(r)).unwrap_or(0);
    Run {
        wall,
        cpu,
        records: records_in(&c0) + records_in(&c1),
        crossing: sent(&c0) + sent(&c1),
        windows: windows_in(&c0).expect("windows in process 0's closing line"),
    }
}

/// The closing line (`sidecar: N records, ...`) of a run's standard error.
fn closing_line(stderr: &[u8]) -> String {
    let err = String::from_utf8_lossy(stderr);
    let line = err.lines().rev().find(|l| l.contains(" records, "));
    line.unwrap_or_else(|| panic!("no closing line: {err}")).to_string()
}

fn records_in(closing: &str) -> u64 {
    closing.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("records in the closing line")
}

/// "; 17 windows (0 incomplete)"
fn windows_in(closing: &str) -> Option<u64> {
    closing.split_once(" windows (").and_then(|(w, _)| w.rsplit(' ').next()?.parse().ok())
}

/// "6.9 MB ..." as bytes (the closing line's units are powers of 1024).
fn bytes_of(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    let n: f64 = words.next()?.parse().ok()?;
    let unit = words.next()?;
    let unit = ["B", "KB", "MB", "GB", "TB"].iter().position(|&u| u == unit)?;
    Some((n * 1024f64.powi(unit as i32)) as u64)
}

/// A window width that cuts `trace` into about `a.windows` windows: its
/// span measured in 1 ms windows (one run at `-w 1`), divided.
fn width_for(a: &Args, trace: &Path) -> String {
    let ms = run(a, trace, 1, "1ms").windows;
    format!("{}us", (ms * 1000 / a.windows.max(1)).max(1))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let a = args();
    let dir = std::env::temp_dir();
    let mut traces: Vec<(String, PathBuf, String)> = vec![
        // (As many records as the others, in one window: at a tenth of
        // them the run was ~0.1 s, mostly the process's start and exit.)
        ("8 streams, one window".into(), synth(&dir, a.records, 8, Pattern::AllToAll, 0), "60s".into()),
        ("8 streams".into(), synth(&dir, a.records, 8, Pattern::AllToAll, 0), String::new()),
        ("64 streams".into(), synth(&dir, a.records, 64, Pattern::Neighbours(4), 0), String::new()),
        // As a cluster of 125 processes of 8 workers (the 1,000 hosts of
        // the model in docs/performance.md), not one process of 1,000: the
        // analysis lays each progress message's arrival at every other
        // worker of its process (timely broadcasts progress), quadratic in
        // a process's workers (docs/performance.md).
        (
            "1000 streams (125 processes × 8)".into(),
            synth(&dir, a.records, 1000, Pattern::Neighbours(2), 8),
            String::new(),
        ),
    ];
    for (_, path, window) in traces.iter_mut().filter(|t| t.2.is_empty()) {
        *window = width_for(&a, path);
    }
    for t in &a.traces {
        traces.push((t.display().to_string(), t.clone(), "1s".into()));
    }
    println!("| trace | window | windows | workers | wall s | M records/s | vs 1 worker | CPU s per M records | fragment bytes to other workers per record |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    // Each worker count of `a.workers`, then (the last row) two processes
    // of one worker each, where every byte that crosses crosses processes.
    let setups: Vec<Option<usize>> = a.workers.iter().map(|&w| Some(w)).chain([None]).collect();
    for (name, path, window) in &traces {
        let mut runs: Vec<Vec<Run>> = setups.iter().map(|_| Vec::new()).collect();
        for _ in 0..a.rounds {
            for (i, setup) in setups.iter().enumerate() {
                runs[i].push(match setup {
                    Some(w) => run(&a, path, *w, window),
                    None => run_cluster(&a, path, window),
                });
            }
        }
        let base = median(runs[0].iter().map(|r| r.wall).collect());
        for (i, setup) in setups.iter().enumerate() {
            let last = runs[i].last().expect("a round");
            let m = last.records as f64 / 1e6;
            let wall = median(runs[i].iter().map(|r| r.wall).collect());
            let workers = setup.map_or("2 processes × 1".to_string(), |w| w.to_string());
            println!(
                "| {name} | {window} | {} | {workers} | {wall:.2} | {:.2} | {:.2}× | {:.3} | {:.1} |",
                last.windows,
                m / wall,
                base / wall,
                median(runs[i].iter().map(|r| r.cpu).collect()) / m,
                last.crossing as f64 / last.records.max(1) as f64
            );
        }
    }
}
