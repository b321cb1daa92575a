//! Where reports go: the sinks a run writes to (the writer whose errors
//! name their output is in `named`, below the outputs that use it).

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Where reports go: JSON lines, terminal lines, a Perfetto trace, the
/// HTTP server's feed.
#[derive(Default)]
pub struct Sink {
    pub json: Option<Box<dyn Write + Send>>,
    pub terminal: Option<Box<dyn Write + Send>>,
    /// Timeline export; windows are written by their owners as analyzed.
    pub perfetto: Option<SharedPerfetto>,
    /// The dataflow graph (`export --dot`): every window's detail folded
    /// in by its owner.
    pub graph: Option<SharedGraph>,
    /// `--http`: the dashboard's and `/metrics`' feed (never blocks).
    pub http: Option<super::http::Feed>,
    /// The terminal lines in their compact form (`--compact-lines`).
    pub compact_lines: bool,
}

pub use super::named::NamedOutput;

/// The dataflow graph of the run, shared by the workers that own windows.
pub type SharedGraph = Arc<Mutex<super::graph::Dataflow>>;

/// The Perfetto export, shared by the workers that own windows.
pub type SharedPerfetto = Arc<Mutex<super::export::PerfettoExport<Box<dyn Write + Send>>>>;
