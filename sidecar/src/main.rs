//! `sidecar`: live wait-state and critical-path analysis of probe streams.

use std::io::{IsTerminal, Write as _};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use clap::{Parser, Subcommand};
use sidecar::io::{spawn_listener, Listen};
use sidecar::output::sink::{NamedOutput, Sink};
use sidecar::pipeline::dataflow::{self, Inputs, Settings};

/// Analyzes the streams a probe writes (live or recorded): per time window,
/// the critical path (which operators, workers and channels held the
/// computation back), who waited on whom, and checks of the trace.
#[derive(Parser)]
#[command(name = "sidecar", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
struct Common {
    /// Window length: 1s, 500ms, 250us, 2.5s ...
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    window: u64,
    /// Append one JSON object per window to FILE ("-" = standard output).
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Analysis worker threads (timely workers in this process).
    ///
    /// Offline (analyze, export), cores to spare also get helper threads:
    /// with more cores than workers, a reader that unpacks each file and a
    /// heap prefaulter; with two cores per worker, a thread per worker that
    /// analyzes its windows. SIDECAR_UNPACK, SIDECAR_PREFAULT and
    /// SIDECAR_ANALYSIS (on, off) override.
    #[arg(short = 'w', long, default_value_t = 1)]
    workers: usize,
    /// Run as process P of N (timely cluster); with --hostfile.
    #[arg(long, requires = "hostfile", value_name = "N")]
    processes: Option<usize>,
    /// This process's index in the cluster (0-based).
    #[arg(long, requires = "processes", value_name = "P")]
    process: Option<usize>,
    /// Cluster host file: one host:port per line, one line per process.
    #[arg(long, value_name = "FILE")]
    hostfile: Option<PathBuf>,
    /// Do not print the per-window summary lines.
    #[arg(long, short)]
    quiet: bool,
    /// Also write a Perfetto trace (protobuf) to FILE: one track per
    /// worker, operators, waits, messages as flows, the critical path.
    #[arg(long, value_name = "FILE")]
    perfetto: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Listen for probe connections and analyze them live.
    ///
    /// Example: sidecar run --listen unix:/tmp/sidecar.sock --json out.jsonl
    ///
    /// Then start the program with its probe sink set to that socket
    /// (PROBE_SINK=unix:/tmp/sidecar.sock, for a program that reads it).
    /// Ctrl-C analyzes what has arrived, prints the last windows and exits.
    Run {
        /// unix:PATH (created owner-only) or tcp:[ADDR:]PORT (a bare port
        /// listens on 127.0.0.1 only).
        #[arg(long)]
        listen: Listen,
        /// How long past a window's end to wait for a silent stream's data
        /// before closing the window without it.
        #[arg(long, default_value = "30ms", value_parser = parse_duration)]
        grace: u64,
        /// Answer clock exchanges from relays on other hosts (`sidecar relay
        /// --clock`): udp:[ADDR:]PORT (a bare port, or `udp:` alone for
        /// 7071, listens on 127.0.0.1 only). This host's timeline becomes the
        /// reference: relayed hosts, once calibrated, are analyzed on it.
        #[arg(long, value_name = "udp:[ADDR:]PORT", value_parser = parse_clock_listen)]
        clock_listen: Option<String>,
        /// This host's id as its probes write it, for --clock-listen (default:
        /// the machine-id hash, as the probe computes it; hex 0x… or decimal).
        #[arg(long, value_parser = ringlog::parse_host_id)]
        host_id: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// Forward the probe streams of this host to a sidecar on another host,
    /// with clock exchanges so that its times can be converted.
    ///
    /// Example, on host B (the sidecar runs on host A with
    /// `--listen tcp:0.0.0.0:7070 --clock-listen udp:0.0.0.0:7071`):
    ///
    /// sidecar relay --listen unix:/tmp/sidecar.sock --to tcp:hostA:7070 --clock udp:hostA:7071
    Relay {
        /// Where this host's probes connect: unix:PATH or tcp:[ADDR:]PORT.
        #[arg(long)]
        listen: Listen,
        /// The sidecar (or relay) to forward to: tcp:HOST:PORT or unix:PATH.
        #[arg(long)]
        to: sidecar::io::relay::Upstream,
        /// The reference sidecar's clock responder: udp:HOST:PORT. Without
        /// it streams are forwarded unsynchronized.
        #[arg(long, value_parser = sidecar::io::relay::parse_udp)]
        clock: Option<std::net::SocketAddr>,
        /// This host's id as its probes write it (default: the machine-id
        /// hash; set it to the probes' PROBE_HOST_ID where that is used).
        #[arg(long, value_parser = ringlog::parse_host_id)]
        host_id: Option<u64>,
        /// Time between clock exchanges once started (the first 20 are
        /// 20 ms apart).
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        clock_period: u64,
    },
    /// Analyze recorded probe files (one file per probe process or sink).
    ///
    /// Example: sidecar analyze trace.rlog --window 1s --json windows.jsonl
    Analyze {
        /// Recorded probe files (a file sink's output, e.g.
        /// PROBE_SINK=file:trace.rlog); analyzed together.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Run COMMAND with its probe pointed at a fresh socket, analyze it live,
    /// print a closing summary with what tracing cost, and exit with the
    /// command's status.
    ///
    /// Example: sidecar watch -- target/release/skew -w 2
    Watch {
        /// How long past a window's end to wait for a silent stream (a
        /// worker inside a long operator execution publishes nothing until
        /// it ends; longer than this and its window closes without it).
        #[arg(long, default_value = "500ms", value_parser = parse_duration)]
        grace: u64,
        /// Estimated probe cost per published record, ns (measured: ~12 ns
        /// on the development machine; `cargo bench -p benches --bench hot_path`).
        #[arg(long, default_value_t = sidecar::output::watch::NS_PER_RECORD)]
        ns_per_record: f64,
        /// Estimated probe cost per elided schedule pair, ns (measured: ~10 ns).
        #[arg(long, default_value_t = sidecar::output::watch::NS_PER_ELIDED)]
        ns_per_elided: f64,
        /// Write the closing summary as one JSON object to FILE.
        #[arg(long, value_name = "FILE")]
        summary_json: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
        /// The command to run (after `--`).
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Convert recorded probe files into a Perfetto trace.
    ///
    /// Example: sidecar export --perfetto trace.pftrace trace.rlog
    Export {
        /// The Perfetto trace to write.
        #[arg(long, value_name = "OUT", required = true)]
        perfetto: PathBuf,
        /// Recorded probe files, as for `analyze`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Window length.
        #[arg(long, default_value = "1s", value_parser = parse_duration)]
        window: u64,
        /// Analysis worker threads (helper threads as for analyze).
        #[arg(short = 'w', long, default_value_t = 1)]
        workers: usize,
    },
    /// Print a file's frames, records and metadata as text (for debugging
    /// a probe integration).
    Dump {
        /// A probe file (a file sink's output, e.g. PROBE_SINK=file:trace.rlog).
        file: PathBuf,
        /// Print at most this many records per frame (0 = all).
        #[arg(long, default_value_t = 0)]
        max_records: usize,
    },
}

fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("'{s}': expected a number with a unit, e.g. 1s or 500ms"))?;
    let mult = match unit {
        "s" | "" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" | "min" => 60e9,
        _ => return Err(format!("'{unit}': unknown unit (use s, ms, us, ns)")),
    };
    let ns = (v * mult) as u64;
    if ns == 0 {
        return Err("the duration must be positive".into());
    }
    Ok(ns)
}

/// `udp:` → 127.0.0.1:7071, `udp:PORT` → 127.0.0.1:PORT, `udp:ADDR:PORT`.
fn parse_clock_listen(s: &str) -> Result<String, String> {
    let a = s.strip_prefix("udp:").ok_or_else(|| format!("'{s}': expected udp:[ADDR:]PORT"))?;
    Ok(if a.is_empty() {
        "127.0.0.1:7071".into()
    } else if a.parse::<u16>().is_ok() {
        format!("127.0.0.1:{a}")
    } else {
        a.to_string()
    })
}

fn timely_args(c: &Common) -> Vec<String> {
    let mut a = vec!["-w".to_string(), c.workers.max(1).to_string()];
    if let (Some(n), Some(h)) = (c.processes, &c.hostfile) {
        a.extend(["-n".into(), n.to_string(), "-p".into(), c.process.unwrap_or(0).to_string()]);
        a.extend(["-h".into(), h.display().to_string()]);
    }
    a
}

fn sink(c: &Common) -> Result<Sink, String> {
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
        Some(Box::new(std::io::stderr()))
    } else {
        Some(Box::new(NamedOutput::new("standard output", std::io::stdout())))
    };
    let mut perfetto = None;
    if let Some(p) = &c.perfetto {
        let e = sidecar::output::export::PerfettoExport::create(p)
            .map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        perfetto = Some(Arc::new(Mutex::new(e)));
    }
    Ok(Sink { json, terminal, perfetto })
}

/// Whether a helper of an offline analysis runs: when a core is spare for
/// it (fewer analysis workers than cores), or as the environment variable
/// `var` says (`on` or `off`, for comparing with and without it).
fn offline_helper(var: &str, workers: usize) -> bool {
    offline_helper_with(var, workers + 1)
}

/// Whether the analysis threads run ([`sidecar::pipeline::analyst`]), one per worker,
/// busy as long as it: with a core for each beside the workers' own (`-w 1`
/// on 2 cores, as measured), or as `SIDECAR_ANALYSIS` says.
fn offline_analysis_threads(workers: usize) -> bool {
    offline_helper_with("SIDECAR_ANALYSIS", 2 * workers)
}

/// `var`'s `on` or `off`, else whether there are at least `cores` cores.
fn offline_helper_with(var: &str, cores: usize) -> bool {
    match std::env::var(var).as_deref() {
        Ok("on" | "1") => true,
        Ok("off" | "0") => false,
        _ => std::thread::available_parallelism().is_ok_and(|n| n.get() >= cores.max(2)),
    }
}

/// The heap prefaulter for an offline analysis (see [`sidecar::heap::Prefault`]),
/// as [`offline_helper`] decides with `SIDECAR_PREFAULT`.
fn offline_prefault(workers: usize) -> Option<sidecar::heap::Prefault> {
    offline_helper("SIDECAR_PREFAULT", workers)
        .then(|| sidecar::heap::Prefault::start(sidecar::heap::PREFAULT_PAD))
        .flatten()
}

fn main() {
    sidecar::heap::tune_allocator();
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Dump { file, max_records } => dump(&file, max_records),
        Cmd::Analyze { files, common } => {
            let settings = Settings {
                width: common.window,
                timely_args: timely_args(&common),
                progress_bar: std::io::stderr().is_terminal(),
                sync: Default::default(),
                unpack_thread: offline_helper("SIDECAR_UNPACK", common.workers),
                analysis_thread: offline_analysis_threads(common.workers),
            };
            let _prefault = offline_prefault(common.workers);
            run(settings, Inputs::Files(files), &common).0
        }
        Cmd::Export { perfetto, files, window, workers } => {
            let common = Common {
                window,
                json: None,
                workers,
                processes: None,
                process: None,
                hostfile: None,
                quiet: true,
                perfetto: Some(perfetto),
            };
            let settings = Settings {
                width: window,
                timely_args: timely_args(&common),
                progress_bar: std::io::stderr().is_terminal(),
                sync: Default::default(),
                unpack_thread: offline_helper("SIDECAR_UNPACK", workers),
                analysis_thread: offline_analysis_threads(workers),
            };
            let _prefault = offline_prefault(workers);
            run(settings, Inputs::Files(files), &common).0
        }
        Cmd::Watch { grace, ns_per_record, ns_per_elided, summary_json, common, command } => {
            watch(grace, ns_per_record, ns_per_elided, summary_json, common, command)
        }
        Cmd::Relay { listen, to, clock, host_id, clock_period } => {
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            if let Err(e) = ctrlc::set_handler(move || {
                if s2.swap(true, Ordering::SeqCst) {
                    std::process::exit(130);
                }
            }) {
                sidecar::say!("sidecar relay: cannot install the Ctrl-C handler: {e}");
            }
            let host_id = host_id.unwrap_or_else(|| ringlog::host_id(&ringlog::host_name()));
            sidecar::say!("sidecar relay: this host is {host_id:016x}");
            let cfg = sidecar::io::relay::Config {
                listen,
                to,
                clock,
                host_id,
                fast: 20,
                period: std::time::Duration::from_nanos(clock_period),
            };
            match sidecar::io::relay::run(cfg, stop) {
                Ok(st) => {
                    sidecar::say!("sidecar relay: {st}");
                    if st.errors.is_empty() {
                        0
                    } else {
                        1
                    }
                }
                Err(e) => {
                    sidecar::say!("sidecar relay: {e}");
                    2
                }
            }
        }
        Cmd::Run { listen, grace, clock_listen, host_id, common } => {
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            if let Err(e) = ctrlc::set_handler(move || {
                if s2.swap(true, Ordering::SeqCst) {
                    std::process::exit(130); // second Ctrl-C: now
                }
                sidecar::say!("\nsidecar: stopping: analyzing what has arrived");
            }) {
                sidecar::say!("sidecar: cannot install the Ctrl-C handler: {e}");
            }
            let n = common.workers.max(1);
            let queues = sidecar::io::queues(n);
            // Clock sync: with a responder, this host is the reference.
            let mut responder = None;
            let sync = match &clock_listen {
                None => sidecar::ingest::sync::SharedSync::default(),
                Some(addr) => {
                    let id = host_id.unwrap_or_else(|| ringlog::host_id(&ringlog::host_name()));
                    let offset = probe::realtime_ns() as i128 - probe::monotonic_ns() as i128;
                    match clocksync::protocol::ResponderHandle::spawn_with_id(addr.as_str(), probe::monotonic_ns, id) {
                        Ok(r) => {
                            sidecar::say!("sidecar: clock reference (host {id:016x}) answering on udp:{}", r.addr());
                            responder = Some(r);
                        }
                        Err(e) => {
                            sidecar::say!("sidecar: cannot answer clock exchanges on udp:{addr}: {e}");
                            std::process::exit(2);
                        }
                    }
                    sidecar::ingest::sync::SharedSync::new(sidecar::ingest::sync::Registry::with_reference(
                        id,
                        Some(offset),
                    ))
                }
            };
            let listener = match spawn_listener(
                listen.clone(),
                (common.window, grace),
                queues.clone(),
                stop.clone(),
                sync.clone(),
            ) {
                Ok(l) => l,
                Err(e) => {
                    sidecar::say!("sidecar: cannot listen on {listen}: {e}");
                    std::process::exit(2);
                }
            };
            let settings = Settings {
                width: common.window,
                timely_args: timely_args(&common),
                progress_bar: false,
                sync: sync.clone(),
                unpack_thread: false,
                analysis_thread: false,
            };
            let code = run(settings, Inputs::Live { queues, stop: stop.clone(), grace }, &common).0;
            stop.store(true, Ordering::SeqCst);
            let _ = listener.join();
            if let Some(r) = responder {
                if let Ok(st) = r.stop() {
                    let reg = sync.lock();
                    let hosts: Vec<String> = reg
                        .hosts
                        .iter()
                        .map(|(h, m)| {
                            format!("{h:016x}: {} exchanges, {} clock-model violations", m.exchanges, m.violations)
                        })
                        .collect();
                    sidecar::say!("sidecar: clock sync: {} exchanges answered; {}", st.pongs, hosts.join("; "));
                }
            }
            code
        }
    };
    std::process::exit(code);
}

/// `sidecar dump`: 0, or 1 if the file cannot be read or has a decode
/// error (as `analyze`), 2 if standard output cannot be written. A closed
/// standard output (`sidecar dump FILE | head`) ends it quietly with 0.
fn dump(file: &std::path::Path, max_records: usize) -> i32 {
    if let Err(e) = std::fs::File::open(file) {
        sidecar::say!("sidecar: {}: cannot open: {e}", file.display());
        return 1;
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match sidecar::output::dump::dump(file, max_records, &mut out).and_then(|n| out.flush().map(|_| n)) {
        Ok(0) => 0,
        Ok(_) => 1,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            sidecar::say!("sidecar: cannot write to standard output: {e}");
            2
        }
    }
}

fn run(settings: Settings, inputs: Inputs, common: &Common) -> (i32, Option<dataflow::RunStats>) {
    let sink = match sink(common) {
        Ok(s) => s,
        Err(e) => {
            sidecar::say!("sidecar: {e}");
            return (2, None);
        }
    };
    run_with(settings, inputs, common, sink)
}

/// [`run`] with its outputs already set up.
fn run_with(settings: Settings, inputs: Inputs, common: &Common, sink: Sink) -> (i32, Option<dataflow::RunStats>) {
    let t0 = std::time::Instant::now();
    match dataflow::run(settings, inputs, sink) {
        Ok(st) => {
            let secs = t0.elapsed().as_secs_f64();
            sidecar::say!(
                "sidecar: {} records, {} MB in {:.2} s ({:.2} M records/s); {} windows ({} incomplete); {} errors{}",
                st.records,
                st.bytes >> 20,
                secs,
                st.records as f64 / secs / 1e6,
                st.windows,
                st.incomplete,
                st.errors.len(),
                if st.output_closed { "; stopped there: the output was closed" } else { "" }
            );
            if let Some(p) = &common.perfetto {
                sidecar::say!("sidecar: Perfetto trace written to {} (open it in ui.perfetto.dev)", p.display());
            }
            (if st.errors.is_empty() { 0 } else { 1 }, Some(st))
        }
        Err(e) => {
            sidecar::say!("sidecar: {e}");
            (2, None)
        }
    }
}

/// `sidecar watch`: the command runs with `PROBE_SINK=unix:SOCKET` (a fresh
/// socket in a private directory); its standard error passes through and its
/// `probe:` line is kept for the cost summary. When it exits, the listener
/// takes the connections still pending, the analysis reads what has arrived
/// to its end, and the closing summary is printed.
fn watch(
    grace: u64,
    ns_per_record: f64,
    ns_per_elided: f64,
    summary_json: Option<PathBuf>,
    common: Common,
    command: Vec<String>,
) -> i32 {
    use std::io::BufRead;
    use std::os::unix::fs::DirBuilderExt;
    use std::os::unix::process::ExitStatusExt;
    // The outputs first: one that cannot be created is a setup error, found
    // before the command runs (it would otherwise run untraced).
    let outputs = match sink(&common) {
        Ok(s) => s,
        Err(e) => {
            sidecar::say!("sidecar: {e}");
            return 2;
        }
    };
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("sidecar-watch-{}-{nanos}", std::process::id()));
    if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        sidecar::say!("sidecar: cannot create {}: {e}", dir.display());
        return 2;
    }
    let sock = dir.join("probe.sock");
    let listen_stop = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let n = common.workers.max(1);
    let queues = sidecar::io::queues(n);
    let listener = match spawn_listener(
        Listen::Unix(sock.clone()),
        (common.window, grace),
        queues.clone(),
        listen_stop.clone(),
        Default::default(),
    ) {
        Ok(l) => l,
        Err(e) => {
            sidecar::say!("sidecar: cannot listen on {}: {e}", sock.display());
            let _ = std::fs::remove_dir_all(&dir);
            return 2;
        }
    };
    // Ctrl-C reaches the command too (same process group): let it end on
    // its own; a second Ctrl-C exits now.
    let interrupted = Arc::new(AtomicBool::new(false));
    let i2 = interrupted.clone();
    let dir2 = dir.clone();
    let _ = ctrlc::set_handler(move || {
        if i2.swap(true, Ordering::SeqCst) {
            // Exiting now skips the cleanup below: the socket goes here.
            let _ = std::fs::remove_dir_all(&dir2);
            std::process::exit(130);
        }
        sidecar::say!("\nsidecar: interrupted: waiting for the command to end (Ctrl-C again to quit now)");
    });
    let started = std::time::Instant::now();
    let mut child = match std::process::Command::new(&command[0])
        .args(&command[1..])
        .env("PROBE_SINK", format!("unix:{}", sock.display()))
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            sidecar::say!("sidecar: cannot start {:?}: {e}", command[0]);
            listen_stop.store(true, Ordering::SeqCst);
            let _ = listener.join();
            let _ = std::fs::remove_dir_all(&dir);
            return 127;
        }
    };
    let probe_line: Arc<Mutex<Option<sidecar::output::watch::ProbeLine>>> = Arc::new(Mutex::new(None));
    let stderr = child.stderr.take().expect("piped");
    let pl = probe_line.clone();
    let (echo_done, echo_ended) = std::sync::mpsc::channel::<()>();
    let echo = std::thread::spawn(move || {
        let mut r = std::io::BufReader::new(stderr);
        let mut line = String::new();
        while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            let _ = std::io::stderr().write_all(line.as_bytes());
            if let Some(p) = sidecar::output::watch::ProbeLine::parse(&line) {
                // (Every traced program of the command prints one.)
                pl.lock().unwrap().get_or_insert_with(Default::default).add(&p);
            }
            line.clear();
        }
        let _ = echo_done.send(());
    });
    let waiter = {
        let stop = stop.clone();
        let listen_stop = listen_stop.clone();
        std::thread::spawn(move || {
            let status = child.wait();
            let wall = started.elapsed();
            // The command's standard error is read to its end (its `probe:`
            // line is written before it exits), unless a background child
            // of the command inherited it and holds it open: that child is
            // not waited for (its lines are still passed through).
            if echo_ended.recv_timeout(std::time::Duration::from_secs(2)).is_ok() {
                let _ = echo.join();
            }
            // Connections not yet accepted are taken first, then the
            // analysis reads the rest and ends.
            listen_stop.store(true, Ordering::SeqCst);
            let _ = listener.join();
            stop.store(true, Ordering::SeqCst);
            (status, wall)
        })
    };
    let settings = Settings {
        width: common.window,
        timely_args: timely_args(&common),
        progress_bar: false,
        sync: Default::default(),
        unpack_thread: false,
        analysis_thread: false,
    };
    let (code, st) = run_with(settings, Inputs::Live { queues, stop, grace }, &common, outputs);
    let (status, wall) = waiter.join().expect("the waiting thread does not panic");
    let _ = std::fs::remove_dir_all(&dir);
    let exit = match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(e) => {
            sidecar::say!("sidecar: waiting for the command: {e}");
            1
        }
    };
    let Some(st) = st else { return if exit == 0 { code } else { exit } };
    let pl = probe_line.lock().unwrap().clone();
    let cost = sidecar::output::watch::Cost::new(&st.totals, pl.as_ref(), ns_per_record, ns_per_elided);
    let summary =
        sidecar::output::watch::Summary::new(&command, exit, wall.as_secs_f64() * 1e3, &st.totals, pl.as_ref(), cost);
    let text = summary.text();
    if common.json.as_deref() == Some("-") {
        let _ = write!(std::io::stderr(), "{text}");
    } else {
        // (a closed standard output, `| head`, is no reason to panic)
        let _ = write!(std::io::stdout(), "{text}");
    }
    if pl.is_none() {
        sidecar::say!("sidecar: no `probe:` line on the command's stderr: the writer thread's CPU is unknown");
    }
    if st.totals.streams.is_empty() {
        sidecar::say!("sidecar: no probe connected (does the program read PROBE_SINK?)");
    }
    if let Some(p) = summary_json {
        let j = serde_json::to_string(&summary).unwrap_or_default();
        if let Err(e) = std::fs::write(&p, j + "\n") {
            sidecar::say!("sidecar: cannot write {}: {e}", p.display());
            // One of watch's outputs failed: 2 if the command
            // succeeded.
            if exit == 0 {
                return 2;
            }
        }
    }
    exit
}
