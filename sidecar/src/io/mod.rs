//! The I/O edge: byte streams (files, accepted connections) read in bounded
//! slices and fed to an [`Ingest`](crate::ingest::stream::Ingest); the
//! listener and the I/O thread for live probes; the relay; this host's
//! clocks.
//!
//! - `reader`: one byte stream → its fragments ([`Reader`]),
//!   with `unpack`: its frames unpacked ahead on a helper thread, and
//!   `split`: a file shared by several workers read once ([`Splitter`],
//!   [`Share`]).
//! - `listener`: where probes connect ([`Listen`], [`Listener`]).
//! - `connections`: the I/O thread that accepts and reads them
//!   ([`spawn_listener`]), each into a `pipe`, for the workers'
//!   `queues`, within the `limits` ([`Limits`]).
//! - `exchanges`: the first pass over recorded files ([`first_pass_of`]):
//!   their clock exchanges, for the offline clock conversion, and each
//!   stream's bytes, by which the workers deal the streams out
//!   (`split`'s `StreamPlan`); `names`: the workers, operators and spans
//!   they name ([`names_in`]).
//! - [`relay`]: `sidecar relay`, forwarding a host's streams upstream.
//! - [`os_clock`]: CLOCK_MONOTONIC, CLOCK_REALTIME, the wall clock.
//! - [`cluster`]: the connections between the processes of a cluster.
//!
//! May import [`crate::ingest`] and [`crate::analysis`] (for the fragment
//! types); never the pipeline, the outputs or the command line.

pub mod cluster;
mod connections;
mod exchanges;
mod limits;
mod listener;
mod names;
pub mod os_clock;
mod pipe;
mod queues;
mod reader;
pub mod relay;
mod split;
mod unpack;

pub use connections::spawn_listener;
pub use exchanges::{first_pass_in, first_pass_of, FirstPass, RepeatedFrames};
pub use limits::{raise_open_files_limit, ConnCounts, Limits, RateLimited};
pub use listener::{bind_unix, Listen, Listener, Socket};
pub use names::{names_in, names_in_stream, Named};
pub use os_clock::now_unix_ns;
pub use queues::{queues, Live, Queues, WorkerQueue};
pub use reader::{Polled, Reader};
pub use split::Splitter;
pub use split::{known_workers, Share, StreamBytes, StreamPlan};
