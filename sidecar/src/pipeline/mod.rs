//! The pipeline: ingest and analysis wired on timely ([`dataflow`]: one
//! operator per step, ingest → exchange → analyze and report → print), a
//! worker's windows analyzed on a thread of its own ([`analyst`]), and the
//! same stages in one thread without timely ([`analyze_bytes`], for tests
//! and tools).
//!
//! It decides what is exchanged between timely workers (streams by their
//! reader, window fragments by window) and when a window is complete; the
//! algorithms are in [`crate::analysis`] and [`crate::ingest`]. It may import
//! those, [`crate::io`] (the inputs) and [`crate::output`] (the sinks).

pub mod analyst;
pub mod dataflow;
pub mod grace;
mod inline;
pub mod revise;

pub use inline::{analyze_bytes, analyze_bytes_as_reported, analyze_bytes_live};
