//! The subcommands of the `sidecar` binary, one module each (its flags, and
//! a top-level function that reads as its steps); [`common`] holds the
//! flags and steps several of them share.
//!
//! The command line only wires the library's parts together: it may import
//! [`sidecar::pipeline`], [`sidecar::io`], [`sidecar::output`] and
//! [`sidecar::ingest`], and nothing in the library imports it.

pub mod analyze;
pub mod common;
pub mod dump;
pub mod export;
pub mod http;
pub mod relay;
pub mod run;
pub mod watch;
pub mod whatif;
