//! The overhead harness: runs real timely workloads in alternation under
//!
//! - (a) no logging at all (`--no-probe`),
//! - (b) the probe through the timely adapter into a live `sidecar run`,
//! - (c) the probe attached with `PROBE_SINK=off`,
//! - (d) timely's own logging into a file with its `BatchLogger`
//!   (`TIMELY_LOG_FILE`, how ST2 and ddshow collect),
//!
//! and, with `--idle-sidecar`, (b') as (b) with the sidecar at `SCHED_IDLE`
//! (`chrt --idle 0`: it runs only on cores the engine leaves idle), and with
//! `--breakdown`, (b0) the probe into a Unix socket whose bytes the harness
//! discards, (bf) the probe into a file and (bt) no probe, timely's events
//! built and dropped (`TIMELY_LOG_DROP=1`); with `--keep-local`, (bk) as
//! (b) with worker-local message halves written (`PROBE_LOCAL_MESSAGES=keep`;
//! by default the probe only counts them); with `--variant KEY=VALUE,...`
//! (repeatable), (v1), (v2), ... as (b0) with that environment for the
//! traced process (a probe setting weighed in the same rotation); and
//! reports, per workload, the
//! median over rounds of each mode's wall time and CPU time (the traced
//! process, all its threads, writer included) relative to (a) in the same
//! round, the sidecar's CPU time, engine events (records written plus the
//! two events of each elided schedule pair and the worker-local message
//! halves) and records per second, bytes
//! on the wire per event and per record, the share of schedule pairs
//! elided (from one extra, untimed run into a file that is decoded), and,
//! beside (b)'s measured CPU over (a), the probe's own account of its cost
//! (its `probe:` line: timely's logging, the adapter, the writer thread; the
//! figures `sidecar watch` reports: the steps that did work, and apart the
//! flush calls of steps that did nothing).
//! `--modes` runs a subset ((a) always): a goal that concerns two modes
//! gets more rounds in the same time.
//!
//! Each median ratio comes with a distribution-free 95 % interval for the
//! median (`benches::stats::median_ci`: order statistics of the per-round
//! ratios; 10 rounds give the 2nd smallest to the 2nd largest), and each
//! goal of the issue ((b) within 2 % of (a), (c) indistinguishable from
//! (a), (b) cheaper than (d)) is called met or not only when its interval
//! is clear of the bound ((c): lies within 2 % of 1, or excludes 1); on a
//! noisy machine the harness says "undecided" rather than guess from a
//! median.
//!
//! `cargo run --release -p benches --bin overhead -- [--rounds 10] [--workloads bfs,pagerank] [-w 2] [--no-build] [--modes a,b,c,d] [--idle-sidecar] [--breakdown] [--keep-local] [--variant KEY=VALUE,...] [-- WORKLOAD ARGS]`

use std::collections::BTreeMap;

use benches::stats;
use sidecar::output::watch::ProbeLine;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    None,
    Sidecar,
    Off,
    TimelyLog,
    /// (b) with the sidecar at `SCHED_IDLE` (`--idle-sidecar`).
    SidecarIdle,
    /// (b) with a reader that discards the bytes in place of the sidecar
    /// (`--breakdown`): the probe's own share of (b).
    Discard,
    /// The probe into a file with its default compression (`--breakdown`).
    File,
    /// No probe; timely's events built and dropped (`--breakdown`): the
    /// floor of any logger on timely's log registry.
    DropLog,
    /// (b) with worker-local message halves written (`--keep-local`).
    KeepLocal,
    /// (b0) with the environment of the `--variant` at this index.
    Variant(u8),
}

/// The `--variant` settings (environment of the traced process), and each
/// one's label; set once in `main`.
static VARIANTS: std::sync::OnceLock<Vec<(Vec<(String, String)>, &'static str)>> = std::sync::OnceLock::new();

/// The environment the harness sets (or clears) for each mode.
const PINNED_ENV: [&str; 5] =
    ["PROBE_SINK", "TIMELY_LOG_FILE", "PROBE_ATTACH", "TIMELY_LOG_DROP", "PROBE_LOCAL_MESSAGES"];

/// Probe settings read from the environment: exported in the shell, they
/// apply to every mode (the harness says so at the start), and a variant
/// overrides them for its mode.
const TUNING_ENV: [&str; 6] =
    ["PROBE_RING_CAPACITY", "PROBE_COMPRESS", "PROBE_IO", "PROBE_TIMELY_PROGRESS", "PROBE_CLOCK", "PROBE_HOST_ID"];

/// Reads a `--variant` value: `KEY=VALUE[,KEY=VALUE...]`. A comma
/// separates only where a `KEY=` follows it, so a value may hold commas
/// (`PROBE_TIMELY_PROGRESS=u64,Product<u64,u32>`).
fn parse_variant(s: &str) -> Result<Vec<(String, String)>, String> {
    let starts_pair = |rest: &str| {
        let rest = rest.trim_start();
        let key_len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        key_len > 0 && rest[key_len..].starts_with('=')
    };
    let mut parts = vec![String::new()];
    for (i, c) in s.char_indices() {
        if c == ',' && starts_pair(&s[i + 1..]) {
            parts.push(String::new());
        } else {
            parts.last_mut().expect("one part at least").push(c);
        }
    }
    parts
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if PINNED_ENV.contains(&k.trim()) => {
                Err(format!("{} is set by the harness for each mode; a variant cannot change it", k.trim()))
            }
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(format!("{kv:?} is not KEY=VALUE")),
        })
        .collect()
}

impl Mode {
    /// The four modes: what runs without `--modes`.
    const ALL: [Mode; 4] = [Mode::None, Mode::Sidecar, Mode::Off, Mode::TimelyLog];
    /// Every mode, the diagnostic ones too: what `--modes` may name.
    const EVERY: [Mode; 9] = [
        Mode::None,
        Mode::Sidecar,
        Mode::Off,
        Mode::TimelyLog,
        Mode::SidecarIdle,
        Mode::Discard,
        Mode::File,
        Mode::DropLog,
        Mode::KeepLocal,
    ];
    fn label(self) -> &'static str {
        match self {
            Mode::None => "(a) no logging",
            Mode::Sidecar => "(b) probe -> live sidecar",
            Mode::Off => "(c) probe, PROBE_SINK=off",
            Mode::TimelyLog => "(d) timely BatchLogger -> file",
            Mode::SidecarIdle => "(b') as (b), sidecar at SCHED_IDLE",
            Mode::Discard => "(b0) probe -> Unix socket, bytes discarded",
            Mode::File => "(bf) probe -> file (zstd)",
            Mode::DropLog => "(bt) timely's log events built and dropped",
            Mode::KeepLocal => "(bk) as (b), worker-local messages written",
            Mode::Variant(i) => VARIANTS.get().and_then(|v| v.get(i as usize)).map_or("(v?)", |v| v.1),
        }
    }

    /// The mode a `--modes` name stands for: the letter of its label.
    fn parse(name: &str) -> Result<Mode, String> {
        let code = |m: Mode| m.label()[1..].split(')').next().unwrap_or("").to_string();
        Mode::EVERY.into_iter().find(|&m| code(m) == name.trim()).ok_or_else(|| {
            let known: Vec<String> = Mode::EVERY.into_iter().map(code).collect();
            format!("unknown mode {name:?}; the modes are {}", known.join(", "))
        })
    }
}

#[derive(Default, Clone, Debug)]
struct Run {
    wall: f64,
    cpu: f64,
    sidecar_cpu: f64,
    written: u64,
    bytes: u64,
    elided: u64,
    /// Worker-local message halves counted, not written.
    local: u64,
    /// The probe's own account of its cost (its `probe:` line, as `sidecar
    /// watch` reports it), in seconds: timely's logging (estimated), the
    /// adapter (measured), the writer thread's CPU; and the parts of the
    /// first two spent in steps that did nothing.
    engine_log: f64,
    adapter: f64,
    writer: f64,
    idle_engine: f64,
    idle_adapter: f64,
}

/// Runs timely workloads in alternation with and without tracing and
/// reports what tracing costs (see the module documentation).
#[derive(clap::Parser, Debug)]
#[command(name = "overhead")]
struct Args {
    /// Rounds: each runs every mode once, in turn (A B C D A B C D ...).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// Workloads, comma-separated (binaries of the `examples` crate).
    #[arg(long, value_delimiter = ',', default_value = "bfs,pagerank")]
    workloads: Vec<String>,
    /// Timely worker threads of each workload run.
    #[arg(short = 'w', default_value_t = 2)]
    workers: usize,
    /// Use the binaries already built (skip `cargo build --release`).
    #[arg(long)]
    no_build: bool,
    /// Run only these modes, comma-separated (a, b, c, d, b', b0, bf, bt,
    /// bk; (a) always runs, the ratios are against it), e.g. `--modes a,c`
    /// to decide (c) with many rounds of two modes instead of four.
    #[arg(long, value_delimiter = ',', value_parser = Mode::parse)]
    modes: Vec<Mode>,
    /// Also run (b') the live sidecar at SCHED_IDLE (`chrt --idle 0`).
    #[arg(long)]
    idle_sidecar: bool,
    /// Also run (b0) the probe into a Unix socket whose bytes a reader
    /// thread of the harness discards, (bf) the probe into a file: what (b)
    /// costs without the sidecar's analysis; and (bt) no probe, timely's
    /// events built and dropped: the floor of any logger on timely.
    #[arg(long)]
    breakdown: bool,
    /// Also run (bk): (b) with worker-local message halves written too
    /// (`PROBE_LOCAL_MESSAGES=keep`), what eliding them saves.
    #[arg(long)]
    keep_local: bool,
    /// Also run (v1), (v2), ...: (b0) with this environment for the traced
    /// process, `KEY=VALUE[,KEY=VALUE...]` (repeatable), e.g.
    /// `--variant PROBE_RING_CAPACITY=4096` to weigh a probe setting in
    /// the same rotation.
    #[arg(long, value_parser = parse_variant)]
    variant: Vec<Vec<(String, String)>>,
    /// Arguments passed to every workload (after `--`), e.g. `-- --iters 60`.
    #[arg(last = true)]
    extra: Vec<String>,
}

fn main() {
    let a = <Args as clap::Parser>::parse();
    let (rounds, workloads, workers, build, extra) = (a.rounds as usize, a.workloads, a.workers, !a.no_build, a.extra);
    let mut modes: Vec<Mode> = if a.modes.is_empty() { Mode::ALL.to_vec() } else { a.modes.clone() };
    if !modes.contains(&Mode::None) {
        modes.insert(0, Mode::None);
    }
    if a.idle_sidecar {
        modes.push(Mode::SidecarIdle);
    }
    if a.breakdown {
        modes.extend([Mode::Discard, Mode::File, Mode::DropLog]);
    }
    if a.keep_local {
        modes.push(Mode::KeepLocal);
    }
    assert!(a.variant.len() <= 32, "at most 32 variants");
    let labelled = a
        .variant
        .iter()
        .enumerate()
        .map(|(i, env)| {
            let kv: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let label: &'static str = Box::leak(format!("(v{}) as (b0), {}", i + 1, kv.join(" ")).into_boxed_str());
            (env.clone(), label)
        })
        .collect();
    VARIANTS.set(labelled).expect("set once");
    if !a.variant.is_empty() && !modes.contains(&Mode::Discard) {
        // A variant is weighed against (b0), which it differs from only in
        // its environment.
        modes.push(Mode::Discard);
    }
    modes.extend((0..a.variant.len()).map(|i| Mode::Variant(i as u8)));
    let mut seen = std::collections::BTreeSet::new();
    modes.retain(|m| seen.insert(*m));
    let bin_dir = benches::release_bins(build);
    let tmp = std::env::temp_dir().join(format!("overhead-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();

    println!("overhead harness: {rounds} rounds per workload, -w {workers}, modes in rotating order each round");
    let inherited: Vec<String> =
        TUNING_ENV.iter().filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}"))).collect();
    if !inherited.is_empty() {
        println!("probe settings from the environment, in every mode (a variant overrides): {}", inherited.join(" "));
    }
    for wl in &workloads {
        let exe = bin_dir.join(wl);
        let mut runs: BTreeMap<Mode, Vec<Run>> = BTreeMap::new();
        for round in 0..rounds {
            for k in 0..modes.len() {
                let mode = modes[(round + k) % modes.len()];
                let r = run_once(&exe, &bin_dir.join("sidecar"), mode, workers, &extra, &tmp);
                runs.entry(mode).or_default().push(r);
            }
        }
        // (Only (b)'s figures use it.)
        let share = if modes.contains(&Mode::Sidecar) { elided_share(&exe, workers, &extra, &tmp) } else { 0.0 };
        report(wl, &runs, share);
    }
    std::fs::remove_dir_all(&tmp).ok();
}

fn run_once(exe: &Path, sidecar: &Path, mode: Mode, workers: usize, extra: &[String], tmp: &Path) -> Run {
    let mut cmd = Command::new(exe);
    cmd.arg("-w").arg(workers.to_string()).args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
    for k in PINNED_ENV {
        cmd.env_remove(k);
    }
    let mut side = None;
    let mut discard = None;
    let sock = tmp.join("sidecar.sock");
    match mode {
        Mode::Discard | Mode::Variant(_) => {
            if let Mode::Variant(i) = mode {
                for (k, v) in &VARIANTS.get().expect("set in main")[i as usize].0 {
                    cmd.env(k, v);
                }
            }
            std::fs::remove_file(&sock).ok();
            let listener = std::os::unix::net::UnixListener::bind(&sock).expect("bind the discarding socket");
            discard = Some(std::thread::spawn(move || discard_connection(listener)));
            cmd.env("PROBE_SINK", format!("unix:{}", sock.display()));
        }
        Mode::File => {
            cmd.env("PROBE_SINK", format!("file:{}", tmp.join("trace.ringlog").display()));
        }
        Mode::DropLog => {
            cmd.arg("--no-probe").env("TIMELY_LOG_DROP", "1");
        }
        Mode::None => {
            cmd.arg("--no-probe");
        }
        Mode::Sidecar | Mode::SidecarIdle | Mode::KeepLocal => {
            std::fs::remove_file(&sock).ok();
            let mut side_cmd = Command::new(sidecar);
            if mode == Mode::SidecarIdle {
                side_cmd = Command::new("chrt");
                side_cmd.args(["--idle", "0"]).arg(sidecar);
            }
            let child = side_cmd
                .args(["run", "--listen"])
                .arg(format!("unix:{}", sock.display()))
                .arg("--json")
                .arg(tmp.join("windows.jsonl"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start the sidecar");
            let deadline = Instant::now() + Duration::from_secs(10);
            while !sock.exists() {
                assert!(Instant::now() < deadline, "the sidecar did not create its socket");
                std::thread::sleep(Duration::from_millis(5));
            }
            side = Some(child);
            cmd.env("PROBE_SINK", format!("unix:{}", sock.display()));
            if mode == Mode::KeepLocal {
                cmd.env("PROBE_LOCAL_MESSAGES", "keep");
            }
        }
        Mode::Off => {
            cmd.env("PROBE_SINK", "off");
        }
        Mode::TimelyLog => {
            cmd.arg("--no-probe").env("TIMELY_LOG_FILE", tmp.join("timely.log"));
        }
    }
    let (wall, cpu, stderr, ok) = spawn_measured(&mut cmd);
    assert!(ok, "{} failed under {:?}: {stderr}", exe.display(), mode);
    let mut r = Run { wall, cpu, ..Run::default() };
    if let Some(reader) = discard {
        assert!(reader.join().expect("the discarding reader") > 0, "the probe sent nothing to the discarding reader");
    }
    std::fs::remove_file(tmp.join("trace.ringlog")).ok();
    if let Some(child) = side {
        // Ctrl-C: the sidecar flushes its last windows and exits.
        // SAFETY: plain kill(2) on a child we started and have not reaped.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let (_, side_cpu, _ok) = wait_measured(child.id() as i32, Instant::now());
        r.sidecar_cpu = side_cpu;
        std::mem::forget(child);
    }
    // The workload's `probe:` line, read as `sidecar watch` reads it.
    let p = stderr.lines().filter_map(ProbeLine::parse).fold(ProbeLine::default(), |mut sum, l| {
        sum.add(&l);
        sum
    });
    (r.written, r.bytes, r.elided, r.local) =
        (p.written.unwrap_or(0), p.bytes.unwrap_or(0), p.elided.unwrap_or(0), p.local.unwrap_or(0));
    let s = |ms: Option<f64>| ms.unwrap_or(0.0) / 1e3;
    (r.engine_log, r.adapter, r.writer) = (s(p.engine_log_ms), s(p.adapter_ms), s(p.writer_cpu_ms));
    (r.idle_engine, r.idle_adapter) = (s(p.idle_engine_ms), s(p.idle_adapter_ms));
    for f in std::fs::read_dir(tmp).unwrap().flatten() {
        if f.file_name().to_string_lossy().starts_with("timely.log") {
            std::fs::remove_file(f.path()).ok();
        }
    }
    r
}

/// Accepts the probe's one connection and reads it to its end, throwing the
/// bytes away; how many there were (0 if no probe came within 10 s).
fn discard_connection(listener: std::os::unix::net::UnixListener) -> u64 {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            Err(_) => return 0,
        }
    };
    conn.set_nonblocking(false).unwrap();
    std::io::copy(&mut conn, &mut std::io::sink()).unwrap_or(0)
}

/// Runs the command to completion; wall seconds, CPU seconds (user + system
/// of the process and all its threads), its stderr, and success.
fn spawn_measured(cmd: &mut Command) -> (f64, f64, String, bool) {
    let start = Instant::now();
    let mut child = cmd.spawn().expect("start the workload");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut stderr).ok();
    }
    let (wall, cpu, ok) = wait_measured(child.id() as i32, start);
    std::mem::forget(child);
    (wall, cpu, stderr, ok)
}

fn wait_measured(pid: i32, start: Instant) -> (f64, f64, bool) {
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value for wait4 to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `ru` are valid pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let wall = start.elapsed().as_secs_f64();
    assert_eq!(r, pid, "wait4 failed");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (wall, tv(ru.ru_utime) + tv(ru.ru_stime), ok)
}

/// The share of schedule pairs elided: one untimed run into a file, decoded.
fn elided_share(exe: &Path, workers: usize, extra: &[String], tmp: &Path) -> f64 {
    let path = tmp.join("share.ringlog");
    let mut cmd = Command::new(exe);
    cmd.arg("-w").arg(workers.to_string()).args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd.env("PROBE_SINK", format!("file:{}", path.display()));
    let (_, _, _, ok) = spawn_measured(&mut cmd);
    assert!(ok);
    let mut published = 0u64;
    let mut elided = 0u64;
    for f in ringlog::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap())) {
        if let ringlog::Body::Records(recs) = f.expect("the trace decodes").body {
            for r in recs {
                match r.event() {
                    Some(ringlog::Event::ScheduleStart { .. }) => published += 1,
                    Some(ringlog::Event::Step { elided: e, .. }) => elided += e,
                    _ => {}
                }
            }
        }
    }
    std::fs::remove_file(&path).ok();
    elided as f64 / (elided + published).max(1) as f64
}

/// A median ratio with its distribution-free interval (see
/// [`stats::median_ci`]): `1.0123 [0.99, 1.03]`.
fn ratio_cell(v: &[f64]) -> String {
    match stats::median_ci(v, CONFIDENCE) {
        Some((lo, hi, _)) => format!("{:.4} [{:.3}, {:.3}]", stats::median(v), lo, hi),
        None => format!("{:.4}", stats::median(v)),
    }
}

/// Whether the interval of the per-round ratios `v` lies below `bound`
/// (met), above it (not met), or straddles it (the runs cannot tell).
fn verdict(v: &[f64], bound: f64) -> &'static str {
    match stats::median_ci(v, CONFIDENCE) {
        Some((_, hi, _)) if hi < bound => "met",
        Some((lo, _, _)) if lo > bound => "not met",
        Some(_) => "undecided at this many rounds",
        None => "undecided (too few rounds for an interval)",
    }
}

/// The confidence of the intervals printed with the median ratios.
const CONFIDENCE: f64 = 0.95;

fn report(workload: &str, runs: &BTreeMap<Mode, Vec<Run>>, elided_share: f64) {
    let base = &runs[&Mode::None];
    let n = base.len();
    let intervals = stats::median_ci_rank(n, CONFIDENCE).map_or(
        "too few rounds for an interval around the median".to_string(),
        |(_, c)| {
            format!("with the interval that holds the median ratio at {:.1} % confidence, distribution-free", c * 100.0)
        },
    );
    println!(
        "\n## {workload}  (median of {n} rounds; ratios are per round against (a) of the same round, {intervals})"
    );
    println!("| mode | wall s | wall / (a) | CPU s | CPU / (a) | sidecar CPU s |");
    println!("|---|---:|---:|---:|---:|---:|");
    let ratios =
        |rs: &[Run], f: fn(&Run) -> f64| -> Vec<f64> { rs.iter().zip(base).map(|(r, b)| f(r) / f(b)).collect() };
    for (&mode, rs) in runs {
        let side = if matches!(mode, Mode::Sidecar | Mode::SidecarIdle | Mode::KeepLocal) {
            format!("{:.3}", stats::median(&rs.iter().map(|r| r.sidecar_cpu).collect::<Vec<_>>()))
        } else {
            "-".into()
        };
        println!(
            "| {} | {:.3} | {} | {:.3} | {} | {} |",
            mode.label(),
            stats::median(&rs.iter().map(|r| r.wall).collect::<Vec<_>>()),
            ratio_cell(&ratios(rs, |r| r.wall)),
            stats::median(&rs.iter().map(|r| r.cpu).collect::<Vec<_>>()),
            ratio_cell(&ratios(rs, |r| r.cpu)),
            side
        );
    }
    // The goals, each decided only when its interval is clear of
    // the bound: (b) within 2 % of (a); (c) indistinguishable from (a);
    // (b) cheaper than (d) (per round, (b)'s wall over (d)'s below 1).
    // Each needs its modes in the run (`--modes`).
    // A goal whose modes were left out by `--modes` still gets its line,
    // so that a report never reads as if the goal had been forgotten.
    let not_run = |goal: &str, modes: &str| println!("{goal}: not run (needs {modes} in --modes)");
    let b = runs.get(&Mode::Sidecar);
    if let Some(b) = b {
        report_b(b, base, elided_share, &ratios(b, |r| r.wall));
    } else {
        not_run("(b) within 2 % of (a) in wall time", "b");
    }
    if let Some(c) = runs.get(&Mode::Off) {
        // Equivalence, not a failure to find a difference: a wide interval
        // that holds 1 says nothing. Yes only when the whole interval lies
        // within the same 2 % as (b)'s goal.
        let same = match stats::median_ci(&ratios(c, |r| r.wall), CONFIDENCE) {
            Some((lo, hi, _)) if lo >= 0.98 && hi <= 1.02 => "yes (its interval lies within 2 % of 1)",
            Some((lo, hi, _)) if lo > 1.0 || hi < 1.0 => "no (its interval excludes 1)",
            Some(_) => "undecided at this many rounds (its interval holds 1 but is wider than 2 %)",
            None => "undecided (too few rounds for an interval)",
        };
        println!("(c) indistinguishable from (a) in wall time: {same}");
    } else {
        not_run("(c) indistinguishable from (a) in wall time", "c");
    }
    if let (Some(b), Some(d)) = (b, runs.get(&Mode::TimelyLog)) {
        let bd: Vec<f64> = b.iter().zip(d).map(|(b, d)| b.wall / d.wall).collect();
        println!("(b) cheaper than (d) in wall time: {} (median (b)/(d) {})", verdict(&bd, 1.0), ratio_cell(&bd));
    } else {
        not_run("(b) cheaper than (d) in wall time", "b and d");
    }
    if let (Some(b), Some(k)) = (b, runs.get(&Mode::KeepLocal)) {
        let per = |f: fn(&Run) -> f64| -> String {
            ratio_cell(&b.iter().zip(k).map(|(b, k)| f(b) / f(k)).collect::<Vec<_>>())
        };
        let recs = |rs: &[Run]| stats::median(&rs.iter().map(|r| r.written as f64).collect::<Vec<_>>());
        println!(
            "worker-local messages elided, (b)/(bk): wall {}, CPU {}, sidecar CPU {}; records {:.0} against {:.0}",
            per(|r| r.wall),
            per(|r| r.cpu),
            per(|r| r.sidecar_cpu),
            recs(b),
            recs(k)
        );
    }
}

/// The figures of (b): event and record rates, bytes on the wire, the
/// share elided, and its first goal (`wall`: its per-round wall-time
/// ratios to (a)).
fn report_b(b: &[Run], a: &[Run], elided_share: f64, wall: &[f64]) {
    let rate = stats::median(&b.iter().map(|r| r.written as f64 / r.wall).collect::<Vec<_>>());
    let bpe = stats::median(&b.iter().map(|r| r.bytes as f64 / r.written.max(1) as f64).collect::<Vec<_>>());
    // The engine's events: the records written plus the two schedule
    // events of every elided pair and the worker-local message halves
    // (what the probe saw, not what it sent).
    let events = |r: &Run| (r.written + 2 * r.elided + r.local) as f64;
    let ev_rate = stats::median(&b.iter().map(|r| events(r) / r.wall).collect::<Vec<_>>());
    let bpev = stats::median(&b.iter().map(|r| r.bytes as f64 / events(r).max(1.0)).collect::<Vec<_>>());
    println!(
        "under (b): {:.2} M engine events/s ({:.2} M records/s); bytes on the wire per engine event {:.2}, per record {:.2}; schedule pairs elided: {:.1}%",
        ev_rate / 1e6,
        rate / 1e6,
        bpev,
        bpe,
        elided_share * 100.0
    );
    // What the probe accounts for (`sidecar watch`'s figures) against what
    // the harness measures, both over (a)'s CPU time in the same round.
    let share = |f: fn(&Run) -> f64| stats::median(&b.iter().zip(a).map(|(r, a)| f(r) / a.cpu).collect::<Vec<_>>());
    println!(
        "the probe's own account under (b), over (a)'s CPU: in the steps that did work, timely's logging {:.2}% \
         (estimated), the adapter {:.2}% (measured), the writer thread {:.2}%; in all {:.2}%; and in the flush \
         calls of steps that did nothing {:.2}% (a polling worker spends it instead of spinning); against {:.2}% \
         measured ((b)'s CPU over (a)'s)",
        share(|r| r.engine_log - r.idle_engine) * 100.0,
        share(|r| r.adapter - r.idle_adapter) * 100.0,
        share(|r| r.writer) * 100.0,
        share(|r| r.engine_log - r.idle_engine + r.adapter - r.idle_adapter + r.writer) * 100.0,
        share(|r| r.idle_engine + r.idle_adapter) * 100.0,
        (stats::median(&b.iter().zip(a).map(|(r, a)| r.cpu / a.cpu).collect::<Vec<_>>()) - 1.0) * 100.0
    );
    println!("(b) within 2 % of (a) in wall time: {}", verdict(wall, 1.02));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_read_as_environment() {
        assert_eq!(
            parse_variant("PROBE_RING_CAPACITY=4096, PROBE_IO=syscall").unwrap(),
            [("PROBE_RING_CAPACITY".to_string(), "4096".to_string()), ("PROBE_IO".to_string(), "syscall".to_string())]
        );
        assert_eq!(parse_variant("PROBE_COMPRESS=").unwrap(), [("PROBE_COMPRESS".to_string(), String::new())]);
        assert_eq!(
            parse_variant("PROBE_TIMELY_PROGRESS=u64,Product<u64,u32>,PROBE_IO=syscall").unwrap(),
            [
                ("PROBE_TIMELY_PROGRESS".to_string(), "u64,Product<u64,u32>".to_string()),
                ("PROBE_IO".to_string(), "syscall".to_string())
            ]
        );
        let e = parse_variant("PROBE_IO").unwrap_err();
        assert!(e.contains("\"PROBE_IO\"") && e.contains("KEY=VALUE"), "{e}");
        assert!(parse_variant("=4096").is_err());
        let e = parse_variant("PROBE_RING_CAPACITY=4096,PROBE_SINK=off").unwrap_err();
        assert!(e.contains("PROBE_SINK") && e.contains("cannot change"), "{e}");
    }

    #[test]
    fn modes_parse_by_their_letter() {
        assert_eq!(Mode::parse("b0"), Ok(Mode::Discard));
        assert_eq!(Mode::parse(" b' "), Ok(Mode::SidecarIdle));
        assert_eq!(Mode::parse("bt"), Ok(Mode::DropLog));
        let e = Mode::parse("v1").unwrap_err();
        assert!(e.contains("\"v1\"") && e.contains("bk"), "{e}");
    }
}
