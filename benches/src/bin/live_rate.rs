//! The highest record rate a live sidecar sustains, against its timely
//! workers: `sidecar run -w W` fed by the live load generator (the real
//! probe, `live_load`, paced to a target rate), searched per W.
//!
//! `cargo build --release -p sidecar --bin sidecar --example live_load &&
//!  cargo run --release -p benches --bin live_rate -- [--workers 1,2]
//!  [--seconds 6] [--window 250ms] [--start-rate 250000] [--bisections 4]
//!  [--rounds 1] [--connections 2] [--load-workers 2] [--late-windows 2]
//!  [--generator probe|synth] [--sidecar PATH] [--load PATH] [-- SIDECAR ARGS]`
//!
//! One trial at rate R: `sidecar run -w W --listen unix:SOCK --window 250ms
//! --json FILE -q` (plus SIDECAR ARGS), then `--connections` generator
//! processes (`live_load SOCK SECONDS LOAD_WORKERS 0 R/connections`, each a
//! probe and its own connection: a connection's streams are decoded by one
//! sidecar worker, so one connection could not use two), and once they end,
//! SIGINT to the sidecar. The sidecar kept up when all of these hold:
//!
//! 1. the generators made ≥ 97 % of R (on a machine they share with the
//!    sidecar, they may not: the table says why the lowest failed rate
//!    failed, so a limit of the generators shows as one);
//! 2. the probes lost no record (a sidecar that stops reading fills their
//!    sockets);
//! 3. the sidecar's closing line counts every record the probes wrote as
//!    analyzed, with 0 errors;
//! 4. every window from 1 s after the first to the one before the last
//!    (where the streams end) is reported once, complete, not revised (no
//!    late data), with `emitted_after_end_ms` ≤ `--late-windows` windows.
//!
//! The search per W: R doubles from `--start-rate` until a trial fails (or
//! halves until one passes), then `--bisections` trials halve the interval
//! between the highest kept-up rate and the lowest failed one. The
//! workers are alternated within each round and the medians of the rounds
//! reported, each with its ratio to the first worker count. CPU times are
//! the children's user + system time (getrusage): the generators' (they
//! share the machine with the sidecar) and the sidecar's, as a share of one
//! core over the trial at the highest kept-up rate.
//!
//! Threading: `sidecar run -w W` runs W timely worker threads and one I/O
//! thread (poll and read of the sockets), and with `SIDECAR_ANALYSIS=on`
//! (this benchmark passes its environment on; the table says which) a
//! thread per worker that analyzes its windows; the offline reader and
//! prefault threads are never started by `run`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use benches::stats::median;

struct Args {
    workers: Vec<usize>,
    seconds: u64,
    window: String,
    window_ms: f64,
    start_rate: f64,
    bisections: usize,
    rounds: usize,
    connections: usize,
    load_workers: usize,
    late_windows: f64,
    sidecar: PathBuf,
    load: PathBuf,
    /// The paced synthetic stream (`benches::paced`) instead of live_load.
    synth: bool,
    extra: Vec<String>,
}

const USAGE: &str = "live_rate [--workers 1,2] [--seconds S] [--window 250ms] [--start-rate R] [--bisections N] \
[--rounds N] [--connections N] [--load-workers N] [--late-windows N] [--generator probe|synth] [--sidecar PATH] [--load PATH] \
[-- SIDECAR ARGS]";

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().is_some_and(|a| a == "--emit") {
        // A generator of the synthetic stream: `--emit SOCK SECONDS WORKERS RATE`.
        let n = |i: usize| argv.get(i).and_then(|s| s.parse::<f64>().ok()).expect("--emit SOCK SECONDS WORKERS RATE");
        match benches::paced::emit(Path::new(&argv[1]), n(2), n(3) as u32, n(4)) {
            Ok(written) => eprintln!("synth: {written} records written, 0 lost"),
            Err(e) => {
                eprintln!("synth: the sidecar's socket failed: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: {USAGE}");
        return;
    }
    let a = match parse_args(argv.into_iter()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("live_rate: error: {e}\nusage: {USAGE}");
            std::process::exit(2);
        }
    };
    for p in [&a.sidecar].into_iter().chain((!a.synth).then_some(&a.load)) {
        if !p.exists() {
            eprintln!("live_rate: error: {} does not exist (cargo build --release -p sidecar --bin sidecar --example live_load)", p.display());
            std::process::exit(2);
        }
    }
    bench(&a);
}

/// The command line, or what is wrong with it.
fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        workers: vec![1, 2],
        seconds: 6,
        window: "250ms".into(),
        window_ms: 250.0,
        start_rate: 250_000.0,
        bisections: 4,
        rounds: 1,
        connections: 2,
        load_workers: 2,
        late_windows: 2.0,
        sidecar: PathBuf::from("target/release/sidecar"),
        load: PathBuf::from("target/release/examples/live_load"),
        synth: false,
        extra: Vec::new(),
    };
    let mut it = args;
    while let Some(x) = it.next() {
        if x == "--" {
            a.extra = it.by_ref().collect();
            break;
        }
        let v = it.next().ok_or_else(|| format!("{x} needs a value"))?;
        match x.as_str() {
            "--workers" => {
                a.workers = v.split(',').map(|w| positive(&x, w)).collect::<Result<_, _>>()?;
            }
            "--seconds" => a.seconds = positive(&x, &v)? as u64,
            "--window" => {
                a.window_ms = window_ms(&v).ok_or_else(|| format!("--window {v:?}: expected e.g. 250ms or 1s"))?;
                a.window = v;
            }
            "--start-rate" => a.start_rate = positive(&x, &v)? as f64,
            "--bisections" => a.bisections = v.parse().map_err(|_| format!("--bisections {v:?}: not a count"))?,
            "--rounds" => a.rounds = positive(&x, &v)?,
            "--connections" => a.connections = positive(&x, &v)?,
            "--load-workers" => a.load_workers = positive(&x, &v)?,
            "--late-windows" => a.late_windows = positive(&x, &v)? as f64,
            "--sidecar" => a.sidecar = PathBuf::from(v),
            "--load" => a.load = PathBuf::from(v),
            "--generator" => {
                a.synth = match v.as_str() {
                    "probe" => false,
                    "synth" => true,
                    _ => return Err(format!("--generator {v:?}: expected probe (live_load) or synth")),
                }
            }
            _ => return Err(format!("unknown argument {x:?}")),
        }
    }
    Ok(a)
}

/// `s` as a whole number ≥ 1, or an error naming `flag`.
fn positive(flag: &str, s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{flag} {s:?}: expected a whole number ≥ 1")),
    }
}

/// `250ms`, `1s`, `100us` in milliseconds (> 0).
fn window_ms(s: &str) -> Option<f64> {
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic())?);
    let n: f64 = num.parse().ok().filter(|n: &f64| *n > 0.0 && n.is_finite())?;
    Some(
        n * match unit {
            "us" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            _ => return None,
        },
    )
}

/// The highest rate `kept` holds at, searched as the file's doc says:
/// from `start`, doubling while it holds (halving while it does not),
/// then `bisections` halvings of the interval between the highest rate it
/// held at and the lowest it failed at. Returns that pair (`lo`, `hi`):
/// `lo` is None if it held at no rate tried (down to `start` / 2^8), `hi`
/// None if it failed at none (up to `start` × 2^8). `kept` is taken to be
/// monotone: true below some rate, false above.
fn search(start: f64, bisections: usize, kept: &mut dyn FnMut(f64) -> bool) -> (Option<f64>, Option<f64>) {
    const DOUBLINGS: i32 = 8;
    let (mut lo, mut hi) = (None, None);
    if kept(start) {
        lo = Some(start);
        for k in 1..=DOUBLINGS {
            let r = start * 2f64.powi(k);
            if !kept(r) {
                hi = Some(r);
                break;
            }
            lo = Some(r);
        }
    } else {
        hi = Some(start);
        for k in 1..=DOUBLINGS {
            let r = start / 2f64.powi(k);
            if kept(r) {
                lo = Some(r);
                break;
            }
            hi = Some(r);
        }
    }
    if let (Some(l), Some(h)) = (&mut lo, &mut hi) {
        for _ in 0..bisections {
            let m = (*l + *h) / 2.0;
            if kept(m) {
                *l = m;
            } else {
                *h = m;
            }
        }
    }
    (lo, hi)
}

/// What one trial measured.
#[derive(Default)]
struct Trial {
    /// Records the probes wrote, per second of the generators' run.
    made_rate: f64,
    /// Why the sidecar did not keep up (empty: it did).
    failures: Vec<String>,
    /// CPU, as a share of one core over the generators' run.
    generator_cpu: f64,
    sidecar_cpu: f64,
    /// The largest `emitted_after_end_ms` of the judged windows.
    worst_delay_ms: f64,
}

/// The CPU time (user + system, s) of the children waited for so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes a plain struct we own; RUSAGE_CHILDREN is valid.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// Waits for `child` at most `limit`; kills it past that. True if it
/// exited by itself.
fn wait_or_kill(child: &mut Child, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// A child killed if the benchmark panics while it runs (a generator that
/// failed), so that no sidecar outlives it.
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts the sidecar on `sock`, its standard error into `err`; waits
/// until it listens.
fn start_sidecar(a: &Args, workers: usize, sock: &Path, json: &Path, err: &Path) -> Child {
    let _ = std::fs::remove_file(sock);
    let _ = std::fs::remove_file(json);
    let mut child = Command::new(&a.sidecar)
        .args(["run", "-w", &workers.to_string(), "--listen", &format!("unix:{}", sock.display())])
        .args(["--window", &a.window, "--json", &json.display().to_string(), "-q"])
        .args(&a.extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(err).expect("create the sidecar's log"))
        .spawn()
        .expect("start the sidecar");
    let t = Instant::now();
    while !sock.exists() {
        if t.elapsed() > Duration::from_secs(10) || matches!(child.try_wait(), Ok(Some(_))) {
            let _ = child.kill();
            panic!("the sidecar did not listen on {}: {}", sock.display(), read(err));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn read(p: &Path) -> String {
    let mut s = String::new();
    let _ = std::fs::File::open(p).and_then(|mut f| f.read_to_string(&mut s));
    s
}

/// The generators at `rate` in all: (records written, records lost, their
/// CPU s, their wall s, why any of them failed).
fn run_generators(a: &Args, sock: &Path, rate: f64) -> (u64, u64, f64, f64, Vec<String>) {
    let cpu0 = children_cpu();
    let t = Instant::now();
    let per = rate / a.connections as f64;
    let kids: Vec<Child> = (0..a.connections)
        .map(|_| {
            let mut c = if a.synth {
                let mut c = Command::new(std::env::current_exe().expect("this program's path"));
                c.arg("--emit").arg(sock).args([a.seconds.to_string(), a.load_workers.to_string()]);
                c
            } else {
                let mut c = Command::new(&a.load);
                c.arg(sock).args([a.seconds.to_string(), a.load_workers.to_string(), "0".into()]);
                c
            };
            c.arg(format!("{per:.0}"))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start the load generator")
        })
        .collect();
    let (mut written, mut lost, mut failed) = (0, 0, Vec::new());
    for k in kids {
        let out = k.wait_with_output().expect("wait for the load generator");
        let err = String::from_utf8_lossy(&out.stderr);
        // "probe: N records written, M lost" (after any warnings of the
        // probe's, which also start with "probe: ").
        let counts = err
            .lines()
            .find(|l| l.contains(" records written, "))
            .map(|l| l.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok()).collect::<Vec<u64>>());
        match counts.as_deref() {
            Some([w, l, ..]) => {
                written += w;
                lost += l;
            }
            // (A generator whose sidecar closed its connection, or that
            // crashed: the trial fails, the search goes on.)
            _ => failed.push(format!(
                "a generator failed ({}): {}",
                out.status,
                err.lines().last().unwrap_or("it said nothing")
            )),
        }
    }
    (written, lost, children_cpu() - cpu0, t.elapsed().as_secs_f64(), failed)
}

/// One trial of `workers` at `rate`, judged by the file doc's rules.
fn trial(a: &Args, workers: usize, rate: f64, dir: &Path) -> Trial {
    let (sock, json, err) = (dir.join("sock"), dir.join("windows.jsonl"), dir.join("sidecar.err"));
    let mut sidecar = Stopped(start_sidecar(a, workers, &sock, &json, &err));
    let sidecar = &mut sidecar.0;
    let (written, lost, gen_cpu, gen_wall, generator_failures) = run_generators(a, &sock, rate);
    let cpu0 = children_cpu();
    // The streams ended with the generators: their last windows close by
    // themselves; then Ctrl-C.
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our own child's pid, not yet waited for.
    unsafe { libc::kill(sidecar.id() as i32, libc::SIGINT) };
    let stopped = wait_or_kill(sidecar, Duration::from_secs(60));
    let mut t = Trial {
        made_rate: written as f64 / gen_wall,
        generator_cpu: gen_cpu / gen_wall,
        sidecar_cpu: (children_cpu() - cpu0) / gen_wall,
        ..Default::default()
    };
    t.failures.extend(generator_failures);
    if t.made_rate < 0.97 * rate {
        t.failures.push(format!("the generators made {:.0} records/s of {rate:.0}", t.made_rate));
    }
    if lost > 0 {
        t.failures.push(format!("the probes lost {lost} records"));
    }
    if !stopped {
        t.failures.push("the sidecar did not stop within 60 s of Ctrl-C".into());
    }
    judge_closing(&read(&err), written, &mut t);
    judge_windows(&read(&json), a, &mut t);
    t
}

/// Rule 3: the closing line says every record written was analyzed, and
/// no error.
fn judge_closing(err: &str, written: u64, t: &mut Trial) {
    let Some(line) = err.lines().find(|l| l.starts_with("sidecar: analyzed ")) else {
        t.failures.push("no closing line from the sidecar".into());
        return;
    };
    let num = |after: &str| -> Option<u64> { line.split_once(after)?.1.split_whitespace().next()?.parse().ok() };
    let analyzed = num("sidecar: analyzed ").unwrap_or(0);
    if analyzed != written {
        t.failures.push(format!("the sidecar analyzed {analyzed} records of {written} written"));
    }
    let errors = line.split_once(" errors").and_then(|(b, _)| b.rsplit(' ').next()?.parse::<u64>().ok());
    if errors != Some(0) {
        t.failures.push(format!("the sidecar reported errors: {line}"));
    }
}

/// Rule 4 on the JSON lines: the windows from 1 s after the first to the
/// one before the last, each once, complete, not revised, and on time.
fn judge_windows(jsonl: &str, a: &Args, t: &mut Trial) {
    let mut wins: Vec<(i64, bool, Option<f64>, u64)> = Vec::new();
    for l in jsonl.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            t.failures.push(format!("a JSON line that does not parse: {l:.80}"));
            continue;
        };
        let revision = v["revision"].as_u64().unwrap_or(0);
        wins.push((
            v["window"].as_i64().unwrap_or(-1),
            v["complete"] == true,
            v["emitted_after_end_ms"].as_f64(),
            revision,
        ));
    }
    if let Some(w) = wins.iter().find(|w| w.3 > 0) {
        t.failures.push(format!("window {} was revised (late data)", w.0));
    }
    let (Some(first), Some(last)) = (wins.iter().map(|w| w.0).min(), wins.iter().map(|w| w.0).max()) else {
        t.failures.push("no window reported".into());
        return;
    };
    let skip = (1000.0 / a.window_ms).ceil() as i64;
    let bound = a.late_windows * a.window_ms;
    for k in first + skip..last {
        let these: Vec<_> = wins.iter().filter(|w| w.0 == k).collect();
        match these.as_slice() {
            [] => t.failures.push(format!("window {k} not reported")),
            [w] if !w.1 => t.failures.push(format!("window {k} incomplete")),
            [w] => {
                let d = w.2.unwrap_or(f64::INFINITY);
                t.worst_delay_ms = t.worst_delay_ms.max(d);
                if d > bound {
                    t.failures.push(format!("window {k} reported {d:.0} ms after its end (bound {bound:.0} ms)"));
                }
            }
            _ => t.failures.push(format!("window {k} reported {} times", these.len())),
        }
    }
    if first + skip >= last {
        t.failures.push(format!("too few windows to judge ({})", wins.len()));
    }
}

/// Whether the sidecars run with their analysis threads
/// (`SIDECAR_ANALYSIS=on` in this benchmark's environment, passed on).
fn analysis_threads_on() -> bool {
    matches!(std::env::var("SIDECAR_ANALYSIS").as_deref(), Ok("on" | "1"))
}

/// The result of one search: the highest kept-up rate and the lowest
/// failed one, each with its trial.
struct Found {
    lo: Option<(f64, Trial)>,
    hi: Option<(f64, Trial)>,
}

/// Searches the highest rate `workers` sustains, printing each trial.
fn find(a: &Args, workers: usize, dir: &Path) -> Found {
    let mut found = Found { lo: None, hi: None };
    search(a.start_rate, a.bisections, &mut |rate| {
        let t = trial(a, workers, rate, dir);
        let verdict = if t.failures.is_empty() {
            "kept up".to_string()
        } else {
            t.failures[..t.failures.len().min(3)].join("; ")
        };
        eprintln!(
            "  -w {workers} at {rate:>9.0}/s: made {:>9.0}/s, generators {:4.1}% of a core, sidecar {:5.1}%, worst window {:6.1} ms: {verdict}",
            t.made_rate,
            100.0 * t.generator_cpu,
            100.0 * t.sidecar_cpu,
            t.worst_delay_ms
        );
        let kept = t.failures.is_empty();
        let slot = if kept { &mut found.lo } else { &mut found.hi };
        if slot.as_ref().is_none_or(|s| if kept { rate > s.0 } else { rate < s.0 }) {
            *slot = Some((rate, t));
        }
        kept
    });
    found
}

/// `/proc/loadavg`'s first three figures.
fn load() -> String {
    read(Path::new("/proc/loadavg")).split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn bench(a: &Args) {
    let dir = std::env::temp_dir().join(format!("live_rate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a directory for the sockets");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "live_rate: {cores} cores; load average {} at the start; {} s per trial, {} windows; {} generator processes ({}) × {} workers; sidecar args {:?}",
        load(),
        a.seconds,
        a.window,
        a.connections,
        if a.synth { "the paced synthetic stream" } else { "live_load, the real probe" },
        a.load_workers,
        a.extra
    );
    let mut found: Vec<Vec<Found>> = a.workers.iter().map(|_| Vec::new()).collect();
    for round in 0..a.rounds {
        for (i, &w) in a.workers.iter().enumerate() {
            eprintln!("round {} of {}, -w {w} (load average {}):", round + 1, a.rounds, load());
            found[i].push(find(a, w, &dir));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    table(a, &found);
    println!("load average {} at the end", load());
}

/// The medians of the rounds, per worker count.
fn table(a: &Args, found: &[Vec<Found>]) {
    println!("| workers | threading | max sustained records/s, median [range] | vs -w {} | lowest failed rate: why | generators' CPU, % of a core | sidecar's CPU, % of a core | worst window delay, ms |", a.workers[0]);
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    let med = |f: &[Found], g: &dyn Fn(&Found) -> Option<f64>| -> (f64, f64, f64) {
        let v: Vec<f64> = f.iter().map(|x| g(x).unwrap_or(0.0)).collect();
        let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = v.iter().cloned().fold(0.0, f64::max);
        (median(&v), min, max)
    };
    let base = med(&found[0], &|f| f.lo.as_ref().map(|l| l.0)).0;
    for (i, &w) in a.workers.iter().enumerate() {
        let f = &found[i];
        let (rate, min, max) = med(f, &|f| f.lo.as_ref().map(|l| l.0));
        let hi = med(f, &|f| f.hi.as_ref().map(|h| h.0)).0;
        let gcpu = med(f, &|f| f.lo.as_ref().map(|l| 100.0 * l.1.generator_cpu)).0;
        let scpu = med(f, &|f| f.lo.as_ref().map(|l| 100.0 * l.1.sidecar_cpu)).0;
        let delay = med(f, &|f| f.lo.as_ref().map(|l| l.1.worst_delay_ms)).0;
        let mut why: Vec<&str> = f.iter().filter_map(|x| Some(x.hi.as_ref()?.1.failures.first()?.as_str())).collect();
        why.dedup();
        println!(
            "| {w} | {w} worker thread{} + {} + 1 I/O thread | {rate:.0} [{min:.0}, {max:.0}] | {:.2}× | {hi:.0}: {} | {gcpu:.1} | {scpu:.1} | {delay:.0} |",
            if w == 1 { "" } else { "s" },
            if analysis_threads_on() { "an analysis thread each" } else { "no analysis thread" },
            rate / base,
            why.join(" / "),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    /// A kept-up predicate true up to a boundary B: the search brackets B
    /// (lo ≤ B < hi) to within the first bracket / 2^bisections, for
    /// boundaries above, below and at the start rate.
    #[test]
    fn the_search_brackets_the_highest_kept_up_rate() {
        for boundary in [1.0, 99_999.0, 100_000.0, 123_456.0, 777_777.0, 3_000_000.0] {
            let mut trials = 0;
            let (lo, hi) = search(100_000.0, 5, &mut |r| {
                trials += 1;
                r <= boundary
            });
            let (lo, hi) = (lo.unwrap_or(0.0), hi.unwrap());
            assert!(lo <= boundary && boundary < hi, "{boundary}: [{lo}, {hi}]");
            // The first bracket is [r, 2r] (or [r/2, r]) with r ≤ 2 hi: a
            // width ≤ hi, halved five times.
            assert!(hi - lo <= hi / 32.0 + 1e-9 || lo == 0.0, "{boundary}: [{lo}, {hi}] after {trials} trials");
        }
    }

    /// Held everywhere: no failed rate, the highest tried (start × 2^8);
    /// held nowhere: no kept-up rate.
    #[test]
    fn the_search_says_when_it_found_no_boundary() {
        assert_eq!(search(10.0, 3, &mut |_| true), (Some(2560.0), None));
        assert_eq!(search(10.0, 3, &mut |_| false), (None, Some(10.0 / 256.0)));
    }

    #[test]
    fn bad_arguments_are_refused_naming_what_is_wrong() {
        let err = |s: &str| args(s).err().unwrap_or_else(|| panic!("{s:?} accepted"));
        assert!(err("--start-rate 0").contains("--start-rate \"0\""));
        assert!(err("--workers 1,0").contains("--workers"));
        assert!(err("--workers 1,x").contains("--workers"));
        assert!(err("--seconds").contains("--seconds needs a value"));
        assert!(err("--frobnicate 3").contains("unknown argument \"--frobnicate\""));
        assert!(err("--window 250").contains("--window"));
        assert!(err("--window 0ms").contains("--window"));
        assert!(err("--generator fast").contains("--generator \"fast\""));
        let a = args("--workers 1,2,3 --window 1s -- --what-if off").unwrap();
        assert_eq!(
            (a.workers, a.window_ms, a.extra),
            (vec![1, 2, 3], 1000.0, vec!["--what-if".to_string(), "off".into()])
        );
    }
}
