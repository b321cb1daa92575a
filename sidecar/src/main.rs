//! `sidecar`: live wait-state and critical-path analysis of probe streams.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use clap::{Parser, Subcommand};
use sidecar::dataflow::{self, Inputs, Settings, Sink};
use sidecar::io::{spawn_listener, Listen};

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
}

#[derive(Subcommand)]
enum Cmd {
    /// Listen for probe connections and analyze them live.
    ///
    /// Example: sidecar run --listen unix:/tmp/sidecar.sock --json out.jsonl
    /// then start the program with its probe sink set to that socket.
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
        #[command(flatten)]
        common: Common,
    },
    /// Analyze recorded probe files (one file per probe process or sink).
    ///
    /// Example: sidecar analyze trace.rlog --window 1s --json windows.jsonl
    Analyze {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Print a file's frames, records and metadata as text (for debugging
    /// a probe integration).
    Dump {
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
            json = Some(Box::new(std::io::stdout()));
            json_stdout = true;
        } else {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(j)
                .map_err(|e| format!("cannot open {j} for the JSON output: {e}"))?;
            json = Some(Box::new(std::io::BufWriter::new(f)));
        }
    }
    let terminal: Option<Box<dyn std::io::Write + Send>> = if c.quiet {
        None
    } else if json_stdout {
        Some(Box::new(std::io::stderr()))
    } else {
        Some(Box::new(std::io::stdout()))
    };
    Ok(Sink { json, terminal })
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Dump { file, max_records } => match sidecar::dump::dump(&file, max_records, &mut std::io::stdout().lock()) {
            Ok(0) => 0,
            Ok(_) => 1,
            Err(e) => {
                eprintln!("sidecar: {e}");
                2
            }
        },
        Cmd::Analyze { files, common } => {
            let settings = Settings {
                width: common.window,
                timely_args: timely_args(&common),
                progress_bar: std::io::stderr().is_terminal(),
            };
            run(settings, Inputs::Files(files), &common)
        }
        Cmd::Run { listen, grace, common } => {
            let stop = Arc::new(AtomicBool::new(false));
            let s2 = stop.clone();
            if let Err(e) = ctrlc::set_handler(move || {
                if s2.swap(true, Ordering::SeqCst) {
                    std::process::exit(130); // second Ctrl-C: now
                }
                eprintln!("\nsidecar: stopping: analyzing what has arrived");
            }) {
                eprintln!("sidecar: cannot install the Ctrl-C handler: {e}");
            }
            let n = common.workers.max(1);
            let queues = Arc::new((0..n).map(|_| Mutex::new(Vec::new())).collect::<Vec<_>>());
            let listener = match spawn_listener(listen.clone(), common.window, queues.clone(), stop.clone()) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("sidecar: cannot listen on {listen:?}: {e}");
                    std::process::exit(2);
                }
            };
            let settings = Settings { width: common.window, timely_args: timely_args(&common), progress_bar: false };
            let code = run(settings, Inputs::Live { queues, stop: stop.clone(), grace }, &common);
            stop.store(true, Ordering::SeqCst);
            let _ = listener.join();
            code
        }
    };
    std::process::exit(code);
}

fn run(settings: Settings, inputs: Inputs, common: &Common) -> i32 {
    let sink = match sink(common) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sidecar: {e}");
            return 2;
        }
    };
    let t0 = std::time::Instant::now();
    match dataflow::run(settings, inputs, sink) {
        Ok(st) => {
            let secs = t0.elapsed().as_secs_f64();
            eprintln!(
                "sidecar: {} records, {} MB in {:.2} s ({:.2} M records/s); {} windows ({} incomplete); {} errors",
                st.records,
                st.bytes >> 20,
                secs,
                st.records as f64 / secs / 1e6,
                st.windows,
                st.incomplete,
                st.errors.len()
            );
            if st.errors.is_empty() {
                0
            } else {
                1
            }
        }
        Err(e) => {
            eprintln!("sidecar: {e}");
            2
        }
    }
}
