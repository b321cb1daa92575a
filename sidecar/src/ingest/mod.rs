//! Ingest: bytes → per-stream, per-window fragments.
//!
//! [`stream::Ingest`] decodes one byte stream's frames (one probe process or
//! one file), converts its clock readings to nanoseconds ([`clock`]) and, for
//! streams of other hosts, to the reference host's timeline ([`sync`],
//! FreeZer), and cuts each worker's records into window fragments for the
//! [`crate::analysis`]. No sockets, no files, no timely: callers hand it
//! bytes. It may import [`crate::analysis`] and nothing else of the sidecar.

pub mod clock;
pub mod stream;
pub mod sync;

pub use stream::Ingest;
