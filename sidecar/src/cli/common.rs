//! What several subcommands share: the analysis flags ([`Common`]), the
//! outputs they name, the timely arguments, and running the dataflow with
//! its closing line on standard error.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sidecar::ingest::sync::SharedSync;
use sidecar::output::sink::{NamedOutput, Sink};
use sidecar::pipeline::dataflow::{self, Inputs, RunStats, Settings};

/// The flags of the subcommands that analyze (`run`, `analyze`, `watch`).
#[derive(clap::Args, Clone)]
pub struct Common {
    /// Window length: 1s, 500ms, 250us, 2.5s ... (1us to 7 days)
    #[arg(long, default_value = "1s", value_parser = parse_window)]
    pub window: u64,
    /// Append one JSON object per window to FILE ("-" = standard output).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// Analysis worker threads (timely workers in this process).
    ///
    /// Offline (analyze, export), cores to spare also get helper threads:
    /// with more cores than workers, a reader that unpacks each file and a
    /// heap prefaulter; with two cores per worker, a thread per worker that
    /// analyzes its windows (live, run and watch: only with
    /// SIDECAR_ANALYSIS=on, for a sidecar that falls behind). SIDECAR_UNPACK,
    /// SIDECAR_PREFAULT and SIDECAR_ANALYSIS (on, off) override.
    #[arg(short = 'w', long, default_value = "1", value_parser = parse_workers)]
    pub workers: usize,
    /// Run as process P of N (timely cluster); with --hostfile.
    #[arg(long, requires = "hostfile", value_name = "N")]
    pub processes: Option<usize>,
    /// This process's index in the cluster (0-based).
    #[arg(long, requires = "processes", value_name = "P")]
    pub process: Option<usize>,
    /// Cluster host file: one host:port per line, one line per process.
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// Do not print the per-window summary lines.
    #[arg(long, short)]
    pub quiet: bool,
    /// Print the per-window lines in the compact form of earlier versions
    /// (`[3409  47296] ok  streams 2 events 524 cp 250.0ms (op 99% ...`),
    /// for scripts that parse them.
    #[arg(long)]
    pub compact_lines: bool,
    /// Also write a Perfetto trace (protobuf) to FILE: one track per
    /// worker, operators, waits, messages as flows, the critical path.
    #[arg(long, value_name = "FILE")]
    pub perfetto: Option<PathBuf>,
    /// `auto`: every window predicts what speeding up its critical path's
    /// top operator would save (`what_if` in the report; costs up to four
    /// replays of the window); `off`: none.
    #[arg(long = "what-if", value_name = "auto|off", default_value = "auto", value_parser = ["auto", "off"])]
    pub what_if: String,
}

impl Common {
    /// The flags of an offline command that writes no reports of its own
    /// (`export`, `whatif`): `window`, `workers`, quiet, `what_if`.
    pub fn offline(window: u64, workers: usize, what_if: &str) -> Common {
        Common {
            window,
            json: None,
            workers,
            processes: None,
            process: None,
            hostfile: None,
            quiet: true,
            compact_lines: false,
            perfetto: None,
            what_if: what_if.into(),
        }
    }

    /// The settings' what-if: None ranks, an empty spec turns it off.
    pub fn what_if(&self) -> Option<Arc<[sidecar::analysis::whatif::Speedup]>> {
        (self.what_if == "off").then(|| Arc::from(Vec::new()))
    }
}

/// A duration flag: a number with its unit (s, ms, us, ns, m), in ns. A
/// bare number is refused: `--window 1` could mean a second or a
/// nanosecond.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let ns = parse_ns(s)?;
    if ns < 1.0 {
        return Err(format!("'{}': a duration is at least 1ns", s.trim()));
    }
    Ok(ns as u64)
}

/// A number with a unit, in ns (not rounded; 0 allowed).
fn parse_ns(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("'{s}': expected a number with a unit, e.g. 1s or 500ms"))?;
    let mult = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        // (`0` suggests `1s`, not `0s`: no duration is 0.)
        "" if v > 0.0 => return Err(format!("'{s}': a unit is needed (e.g. {s}s or {s}ms; units: s, ms, us, ns, m)")),
        "" => return Err(format!("'{s}': a unit is needed (e.g. 1s or 500ms; units: s, ms, us, ns, m)")),
        _ => return Err(format!("'{unit}': unknown unit (use s, ms, us, ns, m)")),
    };
    let ns = v * mult;
    if ns > u64::MAX as f64 / 2.0 {
        return Err(format!("'{s}': too long"));
    }
    Ok(ns)
}

/// The shortest window (`--window`): 1 µs.
pub const MIN_WINDOW_NS: u64 = 1_000;
/// The longest window: 7 days.
pub const MAX_WINDOW_NS: u64 = 7 * 86_400 * 1_000_000_000;

/// `--window`: a duration from [`MIN_WINDOW_NS`] to [`MAX_WINDOW_NS`]
/// (`0s` too is told the range, not a smaller minimum).
pub fn parse_window(s: &str) -> Result<u64, String> {
    let ns = parse_ns(s)?;
    if !(MIN_WINDOW_NS as f64..=MAX_WINDOW_NS as f64).contains(&ns) {
        return Err(format!("'{}': a window is 1us to 7 days long", s.trim()));
    }
    Ok(ns as u64)
}

/// The most analysis workers (`-w`) one process runs: each is a thread
/// with its own buffers (a thousand took 1.4 GB and 20 s on a 3 s trace).
pub const MAX_WORKERS: usize = 128;

/// `-w`: 1 to [`MAX_WORKERS`] analysis workers.
pub fn parse_workers(s: &str) -> Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|_| format!("'{s}': expected a number of workers (1 to {MAX_WORKERS})"))?;
    if !(1..=MAX_WORKERS).contains(&n) {
        return Err(format!(
            "'{n}': analysis workers are 1 to {MAX_WORKERS} per process (for more, a cluster: --processes, --hostfile)"
        ));
    }
    Ok(n)
}

/// The most windows a live window owner keeps for revisions
/// (`--revise-within`): each is a window's fragments and report.
pub const MAX_REVISE_WITHIN: u64 = 1024;

/// `--revise-within`: 0 to [`MAX_REVISE_WITHIN`] windows.
pub fn parse_revise_within(s: &str) -> Result<u64, String> {
    let n: u64 =
        s.trim().parse().map_err(|_| format!("'{s}': expected a number of windows (0 to {MAX_REVISE_WITHIN})"))?;
    if n > MAX_REVISE_WITHIN {
        return Err(format!(
            "'{n}': a window owner keeps 0 to {MAX_REVISE_WITHIN} windows for revisions (each holds its fragments)"
        ));
    }
    Ok(n)
}

/// `--max-backlog`: a duration from 0 (a backlog holds nothing) to
/// [`MAX_MAX_BACKLOG_NS`](sidecar::pipeline::grace::MAX_MAX_BACKLOG_NS).
pub fn parse_max_backlog(s: &str) -> Result<u64, String> {
    use sidecar::pipeline::grace::MAX_MAX_BACKLOG_NS;
    let ns = if s.trim() == "0" { 0.0 } else { parse_ns(s)? };
    if ns > MAX_MAX_BACKLOG_NS as f64 {
        return Err(format!(
            "'{}': a backlog holds windows back 0 to {} s (every other stream's fragments wait meanwhile)",
            s.trim(),
            MAX_MAX_BACKLOG_NS / 1_000_000_000
        ));
    }
    Ok(ns as u64)
}

/// A size in bytes: 64MB, 512KB, 1GB, 4096 (binary units: 1KB = 1024).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: u64 = num.parse().map_err(|_| format!("'{s}': expected a size, e.g. 64MB or 512KB"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(format!("'{unit}': unknown unit (use B, KB, MB, GB)")),
    };
    match v.checked_mul(1 << shift) {
        Some(0) => Err("the size must be positive".into()),
        Some(n) => Ok(n),
        None => Err(format!("'{s}': too large")),
    }
}

/// The smallest buffer limit (`--max-buffered`, `--max-buffered-total`, a
/// relay's `--max-buffered`): one read of a socket (64 KB). Below it every
/// read pauses the connection (or, in a relay, closes it at its first
/// frame), the probes' sockets fill and their records are lost at any rate.
pub const MIN_BUFFER_LIMIT: u64 = 64 << 10;

/// A buffer limit: a size ([`parse_bytes`]) of at least [`MIN_BUFFER_LIMIT`].
pub fn parse_buffer_limit(s: &str) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if n < MIN_BUFFER_LIMIT {
        return Err(format!("'{s}': a buffer limit is at least 64KB (one read of a socket)"));
    }
    Ok(n)
}

/// Refuses input files that cannot be meant before anything is written:
/// one that cannot be opened, a directory, or an empty regular file (a
/// pipe or FIFO is read as it comes). The message names the file.
pub fn check_inputs(files: &[PathBuf]) -> Result<(), String> {
    for f in files {
        let meta = std::fs::metadata(f).map_err(|e| format!("{}: cannot open: {e}", f.display()))?;
        if meta.is_dir() {
            return Err(format!("{}: a directory, not a probe file", f.display()));
        }
        std::fs::File::open(f).map_err(|e| format!("{}: cannot open: {e}", f.display()))?;
        if meta.is_file() && meta.len() == 0 {
            return Err(format!(
                "{}: the file is empty (no probe frames: did the program run with its probe's sink set to it?)",
                f.display()
            ));
        }
    }
    Ok(())
}

/// The cluster flags, checked before anything starts: at least one
/// process, this one among them, and a hostfile that can be read with an
/// address (`HOST:PORT`) on each of its first `--processes` lines. (Timely
/// reads the file itself, later, and says less: not which file, or which
/// line; and a line that is no address left the other processes waiting
/// for that one forever.)
pub fn check_cluster(c: &Common) -> Result<(), String> {
    let (Some(n), Some(h)) = (c.processes, &c.hostfile) else { return Ok(()) };
    if n == 0 {
        return Err("--processes 0: a cluster has 1 or more processes".into());
    }
    let p = c.process.unwrap_or(0);
    if p >= n {
        return Err(format!("--process {p}: the processes of --processes {n} are numbered 0 to {}", n - 1));
    }
    let text = std::fs::read_to_string(h).map_err(|e| format!("--hostfile {}: cannot read it: {e}", h.display()))?;
    let lines: Vec<&str> = text.lines().take(n).collect();
    if lines.len() < n {
        let l = lines.len();
        return Err(format!(
            "--hostfile {}: {l} line{}, but --processes {n} needs one address (HOST:PORT) per process",
            h.display(),
            if l == 1 { "" } else { "s" }
        ));
    }
    for (i, line) in lines.iter().enumerate() {
        let port = line.rsplit_once(':').filter(|(host, _)| !host.is_empty() && !host.contains(char::is_whitespace));
        if port.is_none_or(|(_, port)| port.parse::<u16>().is_err()) {
            return Err(format!(
                "--hostfile {} line {}: `{line}` is not an address HOST:PORT (process {i}'s)",
                h.display(),
                i + 1
            ));
        }
    }
    Ok(())
}

/// The arguments timely's own parser takes: workers, and the cluster.
pub fn timely_args(c: &Common) -> Vec<String> {
    let mut a = vec!["-w".to_string(), c.workers.max(1).to_string()];
    if let (Some(n), Some(h)) = (c.processes, &c.hostfile) {
        a.extend(["-n".into(), n.to_string(), "-p".into(), c.process.unwrap_or(0).to_string()]);
        a.extend(["-h".into(), h.display().to_string()]);
    }
    a
}

/// Whether a process's workers share the analysis of its windows
/// ([`Settings::shared_analysis`]): yes, unless `SIDECAR_SHARED_ANALYSIS`
/// is `off` (for comparison).
pub fn shared_analysis() -> bool {
    !matches!(std::env::var("SIDECAR_SHARED_ANALYSIS").as_deref(), Ok("off" | "0"))
}

/// The settings of a live analysis (`run`, `watch`): no progress bar and
/// no helper threads (the cores belong to the traced program), unless
/// `SIDECAR_ANALYSIS=on` asks for a thread per worker that analyzes its
/// windows while the worker goes on reading. It uses no more CPU, only at
/// other times: without it a worker reads nothing while it analyzes a
/// window, its streams' data waits in their sockets, and every other
/// worker's windows wait for its streams. Measured with `live_rate` on 2
/// cores (docs/performance.md): 6.5 M records/s sustained without it at
/// `-w 1` and `-w 2`, 10 M with it. Not the default: beside a program on
/// the same two cores (`watch`), the analysis running while the program
/// runs moved which of reach's workers looked hot in 1 of 4 runs (none of
/// 4 without), where the program is the thing measured. With several
/// workers, a window's owner offers parts of its analysis to a worker with
/// nothing to read ([`shared_analysis`]): no thread more.
pub fn live_settings(c: &Common, sync: SharedSync) -> Settings {
    Settings {
        width: c.window,
        timely_args: timely_args(c),
        progress_bar: false,
        sync,
        unpack_thread: false,
        analysis_thread: matches!(std::env::var("SIDECAR_ANALYSIS").as_deref(), Ok("on" | "1")),
        shared_analysis: shared_analysis(),
        what_if: c.what_if(),
        stream_bytes: Default::default(),
        timelines: None,
    }
}

impl Common {
    /// The files the output flags name, with their flags (not standard
    /// output).
    pub fn output_paths(&self) -> Vec<(&'static str, &Path)> {
        let json = self.json.as_deref().filter(|j| *j != "-").map(|j| ("--json", Path::new(j)));
        json.into_iter().chain(self.perfetto.as_deref().map(|p| ("--perfetto", p))).collect()
    }
}

/// Outputs that would destroy an input or each other, refused before
/// anything is opened: an output that is one of the `inputs` (opening it
/// truncates or appends to the recording being read), and two outputs
/// naming one file (their bytes would interleave). Devices (`/dev/null`)
/// may be named by several outputs.
pub fn check_paths(inputs: &[PathBuf], outputs: &[(&str, &Path)]) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let inode = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino(), m.is_file()));
    for (flag, out) in outputs {
        let Some((dev, ino, true)) = inode(out) else { continue };
        if let Some(input) = inputs.iter().find(|i| inode(i).is_some_and(|(d, n, _)| (d, n) == (dev, ino))) {
            return Err(format!(
                "{flag} {} is the input file {}: writing it would destroy the recording; name another file",
                out.display(),
                input.display()
            ));
        }
    }
    // A file is the same whether it exists yet or not: by its inode, else
    // by its directory's real path and its name.
    let key = |p: &Path| -> Option<Result<(u64, u64), PathBuf>> {
        match inode(p) {
            Some((dev, ino, true)) => Some(Ok((dev, ino))),
            Some(_) => None,
            None => {
                let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                Some(Err(std::fs::canonicalize(dir).ok()?.join(p.file_name()?)))
            }
        }
    };
    let keys: Vec<_> = outputs.iter().map(|(_, p)| key(p)).collect();
    for (i, (flag, out)) in outputs.iter().enumerate() {
        if let Some(j) = (i + 1..outputs.len()).find(|&j| keys[i].is_some() && keys[j] == keys[i]) {
            return Err(format!(
                "{flag} and {} both name {}: each output needs a file of its own",
                outputs[j].0,
                out.display()
            ));
        }
    }
    Ok(())
}

/// The outputs the flags name: the JSON lines (a file, appended to, or
/// standard output), the terminal lines (standard output, or standard error
/// when the JSON goes to standard output; none with `--quiet`), and the
/// Perfetto trace. An output that cannot be opened is an error, and so,
/// first, is a cluster the flags cannot make ([`check_cluster`]) or two
/// outputs that name one file ([`check_paths`]).
pub fn outputs(c: &Common) -> Result<Sink, String> {
    check_cluster(c)?;
    check_paths(&[], &c.output_paths())?;
    let mut json: Option<Box<dyn std::io::Write + Send>> = None;
    let mut json_stdout = false;
    if let Some(j) = &c.json {
        if j == "-" {
            json = Some(Box::new(NamedOutput::new("standard output", std::io::stdout())));
            json_stdout = true;
        } else {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(j)
                .map_err(|e| format!("cannot open {j} for the JSON output: {e}"))?;
            json = Some(Box::new(NamedOutput::new(j.as_str(), std::io::BufWriter::new(f))));
        }
    }
    let terminal: Option<Box<dyn std::io::Write + Send>> = if c.quiet {
        None
    } else if json_stdout {
        // (Never blocks: a standard error nobody reads drops lines, counted.)
        Some(sidecar::detached::stderr())
    } else {
        Some(Box::new(NamedOutput::new("standard output", std::io::stdout())))
    };
    let mut perfetto = None;
    if let Some(p) = &c.perfetto {
        let e = sidecar::output::export::PerfettoExport::create(p)
            .map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        perfetto = Some(Arc::new(Mutex::new(e)));
    }
    Ok(Sink { json, terminal, perfetto, graph: None, http: None, compact_lines: c.compact_lines })
}

/// Runs the dataflow on `inputs` into `sink` (the outputs the flags name,
/// set up by [`outputs`]): the exit status (0, 1 with decode errors, 2
/// when it could not run) and the run's totals.
pub fn run_dataflow_into(settings: Settings, inputs: Inputs, common: &Common, sink: Sink) -> (i32, Option<RunStats>) {
    let t0 = std::time::Instant::now();
    // (Live: what the connection limits did goes in the closing line.)
    let live = match &inputs {
        Inputs::Live { queues, .. } => Some(queues.clone()),
        Inputs::Files(_) => None,
    };
    sidecar::heap::arenas_for_workers(common.workers);
    match dataflow::run(settings, inputs, sink) {
        Ok(st) => {
            let secs = t0.elapsed().as_secs_f64();
            // Live, records come at the program's pace (and `watch` may
            // spend most of its time building it): no rate.
            let read = if live.is_some() {
                format!("analyzed {} records ({}) live over {secs:.2} s", st.records, human_bytes(st.bytes))
            } else {
                let rate = st.records as f64 / secs.max(1e-9) / 1e6;
                format!("{} records, {} in {secs:.2} s ({rate:.2} M records/s)", st.records, human_bytes(st.bytes))
            };
            // (Several workers: what their fragments cost to move.)
            let crossing = crossing_line(&st);
            sidecar::say!(
                "sidecar: {read}{crossing}; {}; {} errors{}{}",
                windows_said(&st),
                st.error_count,
                live.as_ref().map_or(String::new(), |q| format!("; {}", q.counts.summary())),
                if st.output_closed { "; stopped there: the output was closed" } else { "" }
            );
            if st.bytes == 0 && live.is_none() && st.error_count == 0 {
                // (A pipe that gave nothing: there was nothing to analyze.
                // With errors, they said why nothing was read.)
                sidecar::say!("sidecar: error: the input was empty (no probe frames)");
            }
            if let Some(p) = &common.perfetto {
                let what = if st.error_count == 0 { "" } else { ", from what could be read before the errors above" };
                sidecar::say!("sidecar: Perfetto trace written to {}{what} (open it in ui.perfetto.dev)", p.display());
            }
            let failed = st.error_count > 0 || (st.bytes == 0 && live.is_none());
            (if failed { 1 } else { 0 }, Some(st))
        }
        Err(e) => {
            sidecar::say!("sidecar: error: {e}");
            (2, None)
        }
    }
}

/// What tracing cost, on standard error after the closing line (`run`,
/// `analyze`), when the streams carried the probes' figures: the account
/// (the same line as `watch`'s summary, the JSON's, `/metrics`' and the
/// dashboard's) and the figures behind it.
pub fn say_cost(st: &RunStats) {
    use sidecar::output::watch::{Cost, NS_PER_ELIDED, NS_PER_RECORD};
    let c = Cost::new(&st.totals, None, NS_PER_RECORD, NS_PER_ELIDED);
    if c.source != "stream" {
        return;
    }
    sidecar::say!("sidecar: {}", c.account);
    if let Some(idle) = &c.idle_account {
        sidecar::say!("sidecar: {idle}");
    }
    let writer = c.writer_cpu_ms.map_or("unknown".into(), |ms| format!("{ms:.1} ms"));
    sidecar::say!(
        "sidecar: {}: {} records written, {} lost, {} schedules elided, {}, writer thread CPU {writer}",
        c.source_words,
        c.records,
        c.records_lost,
        c.elided_schedules,
        human_bytes(c.bytes)
    );
}

/// The windows of the closing line: those printed, or, in a process of a
/// cluster whose reports process 0 prints, those analyzed here.
fn windows_said(st: &RunStats) -> String {
    if st.reports_elsewhere {
        format!("{} windows analyzed here, reported by process 0", st.analyzed_here)
    } else {
        format!("{} windows ({} incomplete)", st.windows, st.incomplete)
    }
}

/// What this process's fragments cost to move (several workers): bytes
/// sent to other workers' windows per record, and of those to other
/// processes', against the bytes this process read (its probes' frames).
fn crossing_line(st: &RunStats) -> String {
    if st.crossing_workers == 0 {
        return String::new();
    }
    let to_processes = match st.crossing_processes {
        0 => "0 B".to_string(),
        b => format!("{} ({:.1}× the bytes read)", human_bytes(b), b as f64 / st.bytes.max(1) as f64),
    };
    format!(
        "; fragments to other workers {} ({:.1} B/record), to other processes {to_processes}",
        human_bytes(st.crossing_workers),
        st.crossing_workers as f64 / st.records.max(1) as f64,
    )
}

/// `812 B`, `19.2 KB`, `2.3 MB`, `1.2 GB` (powers of 1024).
fn human_bytes(b: u64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// A flag the first Ctrl-C sets (saying `first`, if any); a second one
/// exits at once with 130. A handler that cannot be installed is said
/// (`who`: "sidecar", "sidecar relay") and the run goes on without it.
pub fn stop_on_ctrl_c(who: &str, first: Option<&'static str>) -> Arc<AtomicBool> {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        if s2.swap(true, Ordering::SeqCst) {
            sidecar::detached::exit(130, std::time::Duration::from_millis(200));
            // second Ctrl-C: now
        }
        if let Some(m) = first {
            sidecar::say!("{m}");
        }
    }) {
        sidecar::say!("{who}: cannot install the Ctrl-C handler: {e}");
    }
    stop
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_backlog_takes_0_to_60_seconds_and_refuses_more() {
        assert_eq!(parse_max_backlog("2s"), Ok(2_000_000_000));
        assert_eq!(parse_max_backlog("0"), Ok(0));
        assert_eq!(parse_max_backlog("0ms"), Ok(0));
        assert_eq!(parse_max_backlog("60s"), Ok(60_000_000_000));
        assert!(parse_max_backlog("61s").unwrap_err().contains("0 to 60 s"));
        assert!(parse_max_backlog("2").unwrap_err().contains("unit"));
    }

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_bytes("64MB"), Ok(64 << 20));
        assert_eq!(parse_bytes("512kb"), Ok(512 << 10));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("0MB").is_err());
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("99999999999GB").is_err());
        assert_eq!(parse_buffer_limit("64KB"), Ok(64 << 10));
        assert!(parse_buffer_limit("65535").unwrap_err().contains("at least 64KB"));
    }

    #[test]
    fn a_duration_needs_its_unit_and_a_window_its_bounds() {
        assert_eq!(parse_duration("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration("1.5s"), Ok(1_500_000_000));
        let bare = parse_duration("1").unwrap_err();
        assert!(bare.contains("a unit is needed"), "{bare}");
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("0.1ns").is_err());
        assert_eq!(parse_window("1us"), Ok(1_000));
        assert!(parse_window("999ns").unwrap_err().contains("1us to 7 days"));
        assert!(parse_window("8d").is_err());
        assert!(parse_window("10081m").unwrap_err().contains("1us to 7 days"));
        assert!(parse_window("0s").unwrap_err().contains("1us to 7 days"), "not `at least 1ns`");
        assert!(parse_duration("0s").unwrap_err().contains("at least 1ns"));
        assert!(!parse_window("0").unwrap_err().contains("0s"), "no example that is refused in turn");
    }

    #[test]
    fn workers_are_one_to_the_limit() {
        assert_eq!(parse_workers("2"), Ok(2));
        assert!(parse_workers("0").unwrap_err().contains("1 to 128"));
        assert!(parse_workers("100000").unwrap_err().contains("1 to 128"));
        assert!(parse_workers("two").is_err());
    }
}
