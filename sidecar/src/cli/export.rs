//! `sidecar export`: recorded probe files into a Perfetto trace, a Graphviz
//! drawing of the dataflow, or both; an `analyze` whose only outputs are
//! those.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use sidecar::output::graph::{dot::write_dot, Dataflow};

use super::analyze::{analyze_files_into, offline_settings};
use super::common::{check_inputs, check_paths, outputs, parse_window, parse_workers, Common};

#[derive(clap::Args)]
pub struct Args {
    /// The Perfetto trace to write.
    #[arg(long, value_name = "OUT", required_unless_present = "dot")]
    perfetto: Option<PathBuf>,
    /// The dataflow graph of the whole run to write as Graphviz DOT: the
    /// operators with their share of the critical path, the channels with
    /// their messages and share of the waits, the scopes as clusters
    /// (`dot -Tsvg FILE -o graph.svg` draws it).
    #[arg(long, value_name = "FILE")]
    dot: Option<PathBuf>,
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

pub fn export(Args { perfetto, dot, files, window, workers }: Args) -> i32 {
    // (A trace has no place for predictions.)
    let common = Common { perfetto, ..Common::offline(window, workers, "off") };
    let outputs_named: Vec<(&str, &std::path::Path)> =
        common.output_paths().into_iter().chain(dot.as_deref().map(|d| ("--dot", d))).collect();
    if let Err(e) = check_paths(&files, &outputs_named) {
        sidecar::say!("sidecar: error: {e}");
        return 2;
    }
    let settings = match check_inputs(&files) {
        Err(e) => Err(format!("{e}; nothing written")),
        Ok(()) => offline_settings(&common, &files).map_err(|e| format!("{e}; nothing written")),
    };
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            sidecar::say!("sidecar: error: {e}");
            return 1;
        }
    };
    let mut sink = match outputs(&common) {
        Ok(s) => s,
        Err(e) => {
            sidecar::say!("sidecar: error: {e}");
            return 2;
        }
    };
    // Created before the analysis: a path that cannot be written is said
    // at once, not after minutes of it.
    let dot = match dot.map(|p| std::fs::File::create(&p).map(|f| (p.clone(), f)).map_err(|e| (p, e))).transpose() {
        Ok(d) => d,
        Err((p, e)) => {
            sidecar::say!("sidecar: error: cannot create {}: {e}", p.display());
            return 2;
        }
    };
    let flow = Arc::new(Mutex::new(Dataflow::default()));
    if dot.is_some() {
        sink.graph = Some(flow.clone());
    }
    let code = analyze_files_into(settings, files, &common, sink).0;
    if let (Some((path, file)), true) = (dot, code != 2) {
        let graph = flow.lock().unwrap().graph();
        let mut w = std::io::BufWriter::new(file);
        if let Err(e) = write_dot(&graph, &mut w).and_then(|_| w.flush()) {
            sidecar::say!("sidecar: error: {}: {e}", path.display());
            return 2;
        }
        sidecar::say!(
            "sidecar: dataflow graph ({} operators, {} edges, {} scopes) written to {} (draw it: dot -Tsvg {} -o graph.svg)",
            graph.nodes.len(),
            graph.edges.len(),
            graph.scopes.len(),
            path.display(),
            path.display()
        );
    }
    code
}
