//! `sidecar`: live wait-state and critical-path analysis of probe streams.
//!
//! This file is the command line: the program, its subcommands and what
//! each is for. Each subcommand's flags and steps are in its module under
//! `cli/` (`cli/run.rs` for `sidecar run`, ...), the flags and steps they
//! share in `cli/common.rs`.

mod cli;

use clap::{Parser, Subcommand};
use cli::{analyze, dump, export, relay, run, watch, whatif};

/// Analyzes the streams a probe writes (live or recorded): per time window,
/// the critical path (which operators, workers and channels held the
/// computation back), who waited on whom, and checks of the trace.
#[derive(Parser)]
#[command(name = "sidecar", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Listen for probe connections and analyze them live.
    ///
    /// Example: sidecar run --listen unix:/tmp/sidecar.sock --json out.jsonl --http 9090
    ///
    /// Then start the program with its probe sink set to that socket
    /// (PROBE_SINK=unix:/tmp/sidecar.sock, for a program that reads it),
    /// and open http://127.0.0.1:9090/ for the live dashboard (Prometheus
    /// scrapes /metrics). Ctrl-C analyzes what has arrived, prints the last
    /// windows and exits.
    Run(run::Args),
    /// Forward the probe streams of this host to a sidecar on another host,
    /// with clock exchanges so that its times can be converted.
    ///
    /// Example, on host B (the sidecar runs on host A with
    /// `--listen tcp:0.0.0.0:7070 --clock-listen udp:0.0.0.0:7071`):
    ///
    /// sidecar relay --listen unix:/tmp/sidecar.sock --to tcp:hostA:7070 --clock udp:hostA:7071
    Relay(relay::Args),
    /// Analyze recorded probe files (one file per probe process or sink).
    ///
    /// Example: sidecar analyze trace.rlog --window 1s --json windows.jsonl
    Analyze(analyze::Args),
    /// Run COMMAND with its probe pointed at a fresh socket, analyze it live,
    /// print a closing summary with what tracing cost, and exit with the
    /// command's status.
    ///
    /// Example: sidecar watch --window 250ms -- target/release/skew -w 2
    ///
    /// With the live dashboard on http://127.0.0.1:9090/ while it runs:
    ///
    /// sidecar watch --http 127.0.0.1:9090 -- target/release/skew -w 2 --epochs 100
    ///
    /// COMMAND is timed from its start to its exit: give it a built program
    /// (cargo build --release first), not `cargo run`, whose build would be
    /// timed too and whose lines would mix with the sidecar's.
    Watch(watch::Args),
    /// Convert recorded probe files into a Perfetto trace, or a Graphviz
    /// drawing of the dataflow graph.
    ///
    /// Example: sidecar export --perfetto trace.pftrace --dot graph.dot trace.rlog
    Export(export::Args),
    /// Print a file's frames, records and metadata as text (for debugging
    /// a probe integration).
    // (The example after the options: a long description would put every
    // option's help on a line of its own.)
    #[command(after_help = "Example: sidecar dump trace.rlog | less")]
    Dump(dump::Args),
    /// Predict how much faster recorded runs would have been with some
    /// operators faster (the trace replayed with a virtual speedup).
    ///
    /// Example: sidecar whatif --speedup w0:Consume=2 trace.rlog
    Whatif(whatif::Args),
}

fn main() {
    sidecar::heap::tune_allocator();
    let code = match Cli::parse().cmd {
        Cmd::Run(args) => run::run(args),
        Cmd::Relay(args) => relay::relay(args),
        Cmd::Analyze(args) => analyze::analyze(args),
        Cmd::Watch(args) => watch::watch(args),
        Cmd::Export(args) => export::export(args),
        Cmd::Dump(args) => dump::dump(args),
        Cmd::Whatif(args) => whatif::whatif(args),
    };
    // (Standard error is written by a thread: its last lines first.)
    sidecar::detached::exit(code, std::time::Duration::from_secs(2));
}
