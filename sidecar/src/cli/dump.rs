//! `sidecar dump`: a probe file's frames, records and metadata as text.

use std::io::Write as _;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A probe file (a file sink's output, e.g. PROBE_SINK=file:trace.rlog).
    file: PathBuf,
    /// Print at most this many records per frame (0 = all).
    #[arg(long, default_value_t = 0)]
    max_records: usize,
}

/// `sidecar dump`: 0, or 1 if the file cannot be read, is empty or has a
/// decode error (as `analyze`), 2 if standard output cannot be written. A
/// closed standard output (`sidecar dump FILE | head`) ends it quietly
/// with 0.
pub fn dump(Args { file, max_records }: Args) -> i32 {
    if let Err(e) = super::common::check_inputs(std::slice::from_ref(&file)) {
        sidecar::say!("sidecar: error: {e}");
        return 1;
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match sidecar::output::dump::dump(&file, max_records, &mut out).and_then(|n| out.flush().map(|_| n)) {
        Ok(d) if d.error.is_none() && d.frames > 0 => 0,
        Ok(d) => {
            let why = d.error.unwrap_or_else(|| "no probe frames".into());
            sidecar::say!("sidecar: error: {}: {why} (after {} frames)", file.display(), d.frames);
            1
        }
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            sidecar::say!("sidecar: error: cannot write to standard output: {e}");
            2
        }
    }
}
