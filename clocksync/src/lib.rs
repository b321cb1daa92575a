//! Bounded clock conversion between hosts.
pub mod baseline;
pub mod experiment;
mod freezer;
mod interval;
pub mod protocol;
mod ratio;
pub mod sim;

pub use freezer::{convert_path, convert_path_tight, Error, Exchange, FreeZer, Violation, DEFAULT_WARMUP};
pub use interval::{Interval, Order};
pub use ratio::Ratio;
