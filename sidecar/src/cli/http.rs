//! `--http ADDR` (`run`, `watch`): the flag, and starting the server.

use sidecar::output::http::{self, Feed, Options};

#[derive(clap::Args, Clone, Default)]
pub struct Http {
    /// Serve a live dashboard (`/`), Prometheus metrics (`/metrics`), the
    /// windows and the summary as JSON (`/api/windows?since=N`,
    /// `/api/summary`) and the last windows as a Perfetto trace
    /// (`/perfetto`) on ADDR: HOST:PORT, or a bare PORT on 127.0.0.1 (0
    /// picks a free port; the address is printed). Off by default.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Windows the dashboard, `/api/windows` and `/perfetto` keep.
    #[arg(long, value_name = "N", default_value_t = 60, requires = "http")]
    pub http_windows: usize,
}

impl Http {
    /// Starts the server if asked: its feed, for the outputs; 2 (said) if
    /// it cannot listen.
    pub fn start(&self, command: &[String], width: u64) -> Result<Option<Feed>, i32> {
        let Some(addr) = &self.http else { return Ok(None) };
        let opts = Options { keep_windows: self.http_windows.max(1), command: command.to_vec(), width };
        match http::start(addr, opts) {
            Ok(h) => {
                sidecar::say!("sidecar: dashboard on http://{}/ (Prometheus metrics: /metrics)", h.addr);
                Ok(Some(h.feed))
            }
            Err(e) => {
                sidecar::say!("sidecar: error: cannot serve HTTP on {addr}: {e}");
                Err(2)
            }
        }
    }
}
