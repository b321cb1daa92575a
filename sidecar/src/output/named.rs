//! A writer whose errors name their output, for every output that writes a
//! file or a standard stream (the sinks, the Perfetto export).

use std::io::Write;

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
