//! The sidecar: live wait-state and critical-path analysis of probe streams.
//!
//! One folder per part, imports pointing one way (the command line →
//! [`pipeline`], [`io`], [`output`] → [`ingest`] → [`analysis`]); the map,
//! with what each part must never do, is `docs/architecture.md`.
//!
//! - [`analysis`]: a window's fragments → its report (activities, waits, the
//!   window graph, critical path, participation, trace properties). Plain
//!   functions over plain data: no I/O, no timely.
//! - [`ingest`]: bytes → per-stream, per-window fragments (frame decoding,
//!   TSC → ns, cross-host conversion with FreeZer).
//! - [`pipeline`]: the timely dataflow that wires ingest and analysis across
//!   workers, and the thread that analyzes a worker's windows.
//! - [`io`]: files, listeners, connections, the relay.
//! - [`output`]: report lines (JSON, terminal), the Perfetto export,
//!   `sidecar dump`, the closing summary of `sidecar watch`.
//!
//! Beside them: [`synth`] writes synthetic traces for tests and benchmarks,
//! and [`heap`] holds the binary's process-wide allocator settings.
//!
//! ```no_run
//! // Analyze a recorded trace in one thread, without timely:
//! let bytes = std::fs::read("trace.rlog").unwrap();
//! let (reports, errors) = sidecar::pipeline::analyze_bytes(&[("trace.rlog", &bytes[..])], 1_000_000_000);
//! for r in &reports {
//!     println!("window {}: critical path {} ns", r.window, r.critical_path.length_ns);
//! }
//! assert!(errors.is_empty());
//! ```

/// A line to standard error that never panics (`eprintln!` does when stderr
/// is closed or full) and never blocks (a thread writes it: see
/// [`detached`]): a failed diagnostic must not end a run whose results go
/// elsewhere, nor change its exit status, nor stall the analysis.
#[doc(hidden)]
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        $crate::detached::say_line(format!($($arg)*));
    }};
}

/// A panic's message: its payload when that is a string (as `panic!`
/// makes it), else "(no message)".
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

pub mod analysis;
pub mod detached;
pub mod heap;
pub mod ingest;
pub mod io;
pub mod output;
pub mod pipeline;
pub mod synth;
