//! `sidecar export`: recorded probe files into a Perfetto trace; an
//! `analyze` whose only output is the trace.

use std::path::PathBuf;

use super::analyze::analyze_files;
use super::common::{parse_duration, Common};

#[derive(clap::Args)]
pub struct Args {
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
}

pub fn export(Args { perfetto, files, window, workers }: Args) -> i32 {
    let common = Common {
        window,
        json: None,
        workers,
        processes: None,
        process: None,
        hostfile: None,
        quiet: true,
        compact_lines: false,
        perfetto: Some(perfetto),
    };
    analyze_files(files, &common)
}
