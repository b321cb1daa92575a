//! The sidecar: live wait-state and critical-path analysis of probe streams.
//!
//! Stages (each a plain module with no I/O and no timely types):
//! [`clock`] (ticks → ns), [`ingest`] (frames → per-worker activities, per
//! window), [`activity`] (operator executions, gaps, messages), [`window`]
//! (projection onto fixed windows), [`waits`] (Waiting / Waiting-for-Input),
//! [`graph`] (window graph, critical path, participation), [`properties`]
//! (Sager's trace properties), [`analyze`] + [`summary`] (the per-window
//! report). [`dataflow`] wires them on timely (with [`analyst`], a worker's
//! windows analyzed on a thread of its own); [`io`] reads files and sockets.
//! [`export`] turns windows into a Perfetto trace (written by the streaming
//! protobuf writer in [`perfetto`]); [`watch`] is the closing summary of
//! `sidecar watch` and what tracing cost. [`sync`] converts synchronized
//! hosts' times to the reference host's timeline (clock sync, FreeZer);
//! [`relay`] is the per-host agent that forwards streams and makes the
//! clock exchanges. [`model`] holds the types the stages share, [`dump`] is
//! `sidecar dump`, and [`synth`] writes synthetic traces for tests and
//! benchmarks. [`heap`] holds the binary's process-wide allocator settings.

/// A line to standard error that never panics (`eprintln!` does when stderr
/// is closed or full): a failed diagnostic must not end a run whose results
/// go elsewhere, nor change its exit status.
#[doc(hidden)]
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
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

pub mod activity;
pub mod analyst;
pub mod analyze;
pub mod clock;
pub mod dataflow;
pub mod dump;
pub mod export;
pub mod graph;
pub mod heap;
pub mod ingest;
pub mod io;
pub mod model;
pub mod perfetto;
pub mod properties;
pub mod relay;
pub mod summary;
pub mod sync;
pub mod synth;
pub mod waits;
pub mod watch;
pub mod window;
