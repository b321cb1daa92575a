//! Outputs: what a person or a program reads of the analysis.
//!
//! The Perfetto export ([`export`], written by the streaming protobuf writer
//! in [`perfetto`]), `sidecar dump`'s text ([`dump`]), the dataflow graph drawn and
//! written for Graphviz ([`graph`]), the closing
//! summary of `sidecar watch` with what tracing cost ([`watch`]), and
//! `--http`'s dashboard, `/metrics` and JSON API ([`http`]). It may
//! import [`crate::analysis`] (the reports it formats) and nothing of the
//! pipeline.

pub mod dump;
pub mod export;
pub mod graph;
pub mod http;
pub mod named;
pub mod perfetto;
pub mod sink;
pub mod watch;
