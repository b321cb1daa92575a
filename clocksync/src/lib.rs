//! Bounded clock conversion between hosts: every converted timestamp is an interval that is
//! guaranteed to contain the true time, so a cause is never placed after its effect.
//!
//! This is FreeZer (Benavides, Vora, Gupta, "DProf: Distributed Profiler with Strong
//! Guarantees", OOPSLA 2019), with the algorithm bodies the paper's text lacks
//! reconstructed in `shared/papers/notes/freezer-notes.md` §2.4–§2.10, made online.
//!
//! ```
//! use clocksync::{Exchange, FreeZer, Interval, Order};
//! let mut fz = FreeZer::new();
//! // s and e read on the reference clock, r on the source clock; in real time s < r < e.
//! // (Here: source = reference + 1_000_000, 5 ticks each way, one exchange per 1000 ticks.)
//! for i in 0..10u64 {
//!     let t = 1_000 * i;
//!     fz.observe(Exchange { s: t, r: t + 5 + 1_000_000, e: t + 10 })?;
//! }
//! let iv: Interval = fz.to_reference(1_004_500)?; // k on the source clock
//! assert!(iv.contains(4_500));
//! let (f_lo, f_hi) = fz.frequency_bounds();       // exact rationals around 1
//! assert!(f_lo.to_f64() <= 1.0 && 1.0 <= f_hi.to_f64());
//! assert_eq!(iv.order(&Interval::point(9_000)), Order::Before);
//! # Ok::<(), clocksync::Error>(())
//! ```
//!
//! # Modules
//!
//! * [`FreeZer`] (`freezer`): exchanges in, exact frequency bounds and brackets kept online
//!   in bounded memory, following the best exchanges of the whole run (landmarks: the best
//!   exchanges of each stretch of the run, paired with every new one; anchors: brackets at
//!   geometrically spaced positions), conversions out ([`FreeZer::to_reference`],
//!   [`FreeZer::to_reference_tight`], [`convert_path`] through several hops), clock-model
//!   violations detected ([`Error::ClockModel`]) with a new calibration epoch to follow.
//!   The rules and their sources are in the `freezer` module's documentation.
//! * [`OfflineFreeZer`] (`offline`): a recorded run's exchanges in, conversions that use the
//!   exchanges on both sides of each event and the best pair of the whole run.
//! * [`Interval`] and [`Order`]: the three-valued order `Before` / `After` / `Uncertain`.
//! * [`Ratio`]: exact rationals of cycle counts; the bound path is integer-only with
//!   directed rounding (lower bounds down, upper bounds up).
//! * [`baseline`]: linear regression and Duda's convex hull behind [`baseline::Estimator`],
//!   for comparison only.
//! * [`protocol`]: the UDP ping-pong ([`protocol::Prober`], [`protocol::Responder`]) that
//!   sidecars on different hosts run between themselves, with a caller-supplied
//!   [`protocol::Clock`] (the TSC, or a simulated clock in tests).
//! * [`sim`]: a clock simulator with a truth oracle; [`experiment`]: the paper's fast-send
//!   comparison (Table 2) on simulated data.
//!
//! No dependency beyond `std`; no `unsafe` except the `rdtsc` read.

#![warn(missing_docs)]

mod anchors;
pub mod baseline;
mod bracket;
mod exchange;
pub mod experiment;
mod freezer;
mod interval;
mod landmarks;
mod offline;
pub mod protocol;
mod ratio;
pub mod sim;

pub use exchange::Exchange;
pub use freezer::{convert_path, convert_path_tight, Error, FreeZer, Violation, DEFAULT_WARMUP};
pub use interval::{Interval, Order};
pub use offline::OfflineFreeZer;
pub use ratio::Ratio;
