//! The window analysis: a window's fragments → its [`report::WindowReport`].
//!
//! This part owns the shared types ([`model`]), the activities and gaps of a
//! worker ([`activity`]), the projection onto fixed windows ([`window`]), the
//! wait states ([`waits`]), the window graph with its critical path and
//! critical participation ([`graph`]), Sager's trace properties
//! ([`properties`]), the what-if replay ([`whatif`]), the report
//! ([`report`]) and a fragment packed to cross to another process
//! ([`pack`]); [`analyze`] is the recipe
//! that runs them in order on one window.
//!
//! It may import only `ringlog` (the record types), `clocksync`'s interval
//! type and std-like helpers: no I/O, no timely, no clap, no sockets, no
//! files, so another engine's tooling can embed it and every stage can be
//! tested alone. Everything else in the sidecar imports it, never the
//! reverse.

pub mod activity;
pub mod analyze;
pub mod causality;
pub mod crew;
pub mod graph;
pub mod model;
pub mod pack;
pub mod properties;
pub mod report;
pub mod waits;
pub mod whatif;
pub mod window;
