//! Where reports go: the sinks a run writes to, and a writer whose errors
//! name their output.

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

/// A writer whose errors name its output ("out.jsonl: No space left on
/// device (os error 28)"), keeping their kind (a closed pipe stays
/// `BrokenPipe`).
pub struct NamedOutput<W> {
    name: String,
    inner: W,
}

impl<W: Write> NamedOutput<W> {
    pub fn new(name: impl Into<String>, inner: W) -> Self {
        NamedOutput { name: name.into(), inner }
    }

    fn named(&self, e: std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), format!("{}: {e}", self.name))
    }
}

impl<W: Write> Write for NamedOutput<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).map_err(|e| self.named(e))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().map_err(|e| self.named(e))
    }
}

/// The dataflow graph of the run, shared by the workers that own windows.
pub type SharedGraph = Arc<Mutex<super::graph::Dataflow>>;

/// The Perfetto export, shared by the workers that own windows.
pub type SharedPerfetto = Arc<Mutex<super::export::PerfettoExport<Box<dyn Write + Send>>>>;
