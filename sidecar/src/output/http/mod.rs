//! `--http ADDR` (`sidecar run`, `sidecar watch`): what a browser and
//! Prometheus read of a live run, served by the sidecar itself.
//!
//! * `GET /`: the dashboard, one self-contained page ([`dashboard.html`],
//!   embedded), updated by Server-Sent Events (`GET /events`);
//! * `GET /metrics`: Prometheus / OpenMetrics text ([`metrics`]);
//! * `GET /api/windows?since=N`: the kept windows' `--json` objects, from
//!   window N on; `GET /api/summary`: the `--summary-json` object so far;
//! * `GET /perfetto`: the kept windows as a Perfetto trace;
//! * `GET /api/graph?window=N` or `?last=K`: the dataflow graph of a window
//!   or of the last windows, laid out ([`crate::output::graph`]).
//!
//! The analysis never waits for any of it: the pipeline hands each window
//! to a [`Feed`] (a bounded channel, `try_send`: a full channel drops the
//! update and counts it), a hub thread ([`hub`]) keeps the last windows and
//! the metrics, and the server's threads ([`server`]) read the hub's state
//! under a lock the analysis never takes. Each browser's event stream has
//! its own bounded queue and thread: a slow or stuck browser loses updates
//! (counted), nobody else does.

mod hub;
pub mod lanes;
pub mod metrics;
mod server;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

use crate::analysis::analyze::WindowDetail;
use crate::analysis::report::RunTotals;

/// Updates the hub has not taken yet before new ones are dropped.
const FEED_CAPACITY: usize = 256;

/// How the server is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// Windows kept for the page, `/api/windows` and `/perfetto`.
    pub keep_windows: usize,
    /// The traced command (`watch`), for `/api/summary`.
    pub command: Vec<String>,
    /// Window length, ns.
    pub width: u64,
}

/// One window as worker 0 prints it, with what the page needs beyond its
/// JSON.
pub struct WindowUpdate {
    /// The `--json` object.
    pub json: String,
    /// The window's number from the run's start, as the terminal lines
    /// say it (the JSON's `window` is the host's clock divided by the
    /// window length).
    pub number: u64,
    /// The window's lanes ([`lanes::lanes_json`]), when its detail was
    /// built in this process.
    pub lanes: Option<String>,
    /// The run's sums so far (for `/api/summary`).
    pub totals: RunTotals,
    /// Decode errors so far, and probe connections accepted so far.
    pub errors: u64,
    pub connections: u64,
    /// Live: connections refused by `--max-connections`, closed without a
    /// Hello by `--hello-timeout`, times a buffer reached `--max-buffered`
    /// and times all reached `--max-buffered-total`, so far.
    pub refused: [u64; 5],
    /// What the window's analysis took in, and from where.
    pub traffic: WindowTraffic,
}

/// What a window's owner received for it: the window's bytes on the wire
/// (the probes' frames its records came in, read by whichever worker
/// ingested each stream) and the fragments that crossed to the owner from
/// other workers of its process and from other processes (their size on
/// the wire, estimated). Raw records never cross: a stream's frames are
/// read and decoded by the worker that ingests it, and only its fragments
/// (activities, gaps, message halves) travel to the window's owner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowTraffic {
    pub input_bytes: u64,
    pub from_this_process: u64,
    pub from_other_processes: u64,
}

impl WindowTraffic {
    /// Adds `o`'s figures.
    pub fn add(&mut self, o: &WindowTraffic) {
        self.input_bytes += o.input_bytes;
        self.from_this_process += o.from_this_process;
        self.from_other_processes += o.from_other_processes;
    }
}

/// What the hub takes from the pipeline.
enum Update {
    Window(Box<WindowUpdate>),
    /// A window's detail, for `/perfetto` (from its owner, any order).
    Detail(Arc<WindowDetail>),
    /// The closing `--summary-json` object (`watch`, at the end).
    Summary(String),
}

/// The pipeline's handle on the hub: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Feed {
    tx: SyncSender<Update>,
    dropped: Arc<AtomicU64>,
}

impl Feed {
    fn send(&self, u: Update) {
        match self.tx.try_send(u) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A window printed (worker 0, in window order).
    pub fn window(&self, w: WindowUpdate) {
        self.send(Update::Window(Box::new(w)));
    }

    /// A window's detail (its owner).
    pub fn detail(&self, d: WindowDetail) {
        self.send(Update::Detail(Arc::new(d)));
    }

    /// The closing summary, once known.
    pub fn summary(&self, json: String) {
        self.send(Update::Summary(json));
    }

    /// Updates dropped because the hub was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// A running server: where it listens; it stops with the process.
pub struct Http {
    pub addr: std::net::SocketAddr,
    pub feed: Feed,
}

/// Binds `addr` (`HOST:PORT`, or a bare port on 127.0.0.1; port 0 picks
/// one) and starts the hub and the server's threads.
pub fn start(addr: &str, opts: Options) -> std::io::Result<Http> {
    let addr = if addr.parse::<u16>().is_ok() { format!("127.0.0.1:{addr}") } else { addr.to_string() };
    let dropped = Arc::new(AtomicU64::new(0));
    let (tx, rx) = sync_channel(FEED_CAPACITY);
    let state = hub::Hub::new(opts, dropped.clone());
    let server = server::Server::bind(&addr, state.clone())?;
    let bound = server.addr();
    hub::spawn(rx, state);
    server.spawn();
    Ok(Http { addr: bound, feed: Feed { tx, dropped } })
}
