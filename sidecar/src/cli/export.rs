//! `sidecar export`: recorded probe files into a Perfetto trace; an
//! `analyze` whose only output is the trace.

use std::path::PathBuf;

use super::analyze::analyze_files;
use super::common::{parse_window, parse_workers, Common};

#[derive(clap::Args)]
pub struct Args {
    /// The Perfetto trace to write.
    #[arg(long, value_name = "OUT", required = true)]
    perfetto: PathBuf,
    /// Recorded probe files, as for `analyze`.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Window length.
    #[arg(long, default_value = "1s", value_parser = parse_window)]
    window: u64,
    /// Analysis worker threads (helper threads as for analyze).
    #[arg(short = 'w', long, default_value = "1", value_parser = parse_workers)]
    workers: usize,
}

pub fn export(Args { perfetto, files, window, workers }: Args) -> i32 {
    // (A trace has no place for predictions.)
    let common = Common { perfetto: Some(perfetto), ..Common::offline(window, workers, "off") };
    analyze_files(files, &common)
}
