//! `sidecar analyze`: recorded probe files, analyzed together, with the
//! helper threads that cores to spare allow.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use sidecar::ingest::sync::{Registry, SharedSync};
use sidecar::pipeline::dataflow::{Inputs, Settings};

use sidecar::output::sink::Sink;

use super::common::{
    check_inputs, check_paths, outputs, run_dataflow_into, say_cost, shared_analysis, timely_args, Common,
};

#[derive(clap::Args)]
pub struct Args {
    /// Recorded probe files (a file sink's output, e.g.
    /// PROBE_SINK=file:trace.rlog); analyzed together.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    common: Common,
}

pub fn analyze(Args { files, common }: Args) -> i32 {
    analyze_files(files, &common)
}

/// Analyzes `files` into the outputs `common` names, then says what
/// tracing cost (if the streams carried the probes' figures): the exit
/// status.
pub fn analyze_files(files: Vec<PathBuf>, common: &Common) -> i32 {
    if let Err(e) = check_paths(&files, &common.output_paths()) {
        sidecar::say!("sidecar: error: {e}");
        return 2;
    }
    let nothing = if common.perfetto.is_some() { "; no Perfetto trace written" } else { "; nothing analyzed" };
    let settings = match check_inputs(&files).and_then(|_| offline_settings(common, &files).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            sidecar::say!("sidecar: error: {e}{nothing}");
            return 1;
        }
    };
    match outputs(common) {
        Ok(sink) => {
            let (code, stats) = analyze_files_into(settings, files, common, sink);
            if let Some(st) = &stats {
                say_cost(st);
            }
            code
        }
        Err(e) => {
            sidecar::say!("sidecar: error: {e}");
            2
        }
    }
}

/// The analysis of [`analyze_files`] into outputs already set up (the
/// inputs checked and their settings made, [`offline_settings`]; `export`
/// too): the exit status and the run's figures.
pub fn analyze_files_into(
    settings: Settings,
    files: Vec<PathBuf>,
    common: &Common,
    sink: Sink,
) -> (i32, Option<sidecar::pipeline::dataflow::RunStats>) {
    let _prefault = offline_prefault(common.workers);
    run_dataflow_into(settings, Inputs::Files(files), common, sink)
}

/// The settings of an offline analysis: a progress bar on a terminal, the
/// helper threads there are cores for, and the remote hosts' clocks
/// converted with all the files' exchanges (read first). Files that hold
/// the same frames of a stream are refused: analyzed together, each
/// stream's records would count twice and its messages match twice.
pub fn offline_settings(common: &Common, files: &[PathBuf]) -> Result<Settings, sidecar::io::RepeatedFrames> {
    let first = sidecar::io::first_pass_of(files);
    if let Some(r) = first.repeated {
        return Err(r);
    }
    let registry = Registry::offline(first.clock_sync.iter().map(|(host, cs)| (*host, cs)));
    let timelines = first.timelines(&registry).map(Arc::new);
    Ok(Settings {
        width: common.window,
        timely_args: timely_args(common),
        progress_bar: std::io::stderr().is_terminal(),
        sync: SharedSync::new(registry),
        unpack_thread: offline_helper("SIDECAR_UNPACK", common.workers),
        analysis_thread: offline_analysis_threads(common.workers),
        shared_analysis: shared_analysis(),
        what_if: common.what_if(),
        stream_bytes: Arc::new(first.stream_bytes),
        timelines,
    })
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
/// as [`offline_helper`] decides with `SIDECAR_PREFAULT`. One worker only:
/// several allocate from arenas of their own
/// ([`sidecar::heap::arenas_for_workers`]), not the main heap it watches.
fn offline_prefault(workers: usize) -> Option<sidecar::heap::Prefault> {
    (workers == 1 && offline_helper("SIDECAR_PREFAULT", workers))
        .then(|| sidecar::heap::Prefault::start(sidecar::heap::PREFAULT_PAD))
        .flatten()
}
