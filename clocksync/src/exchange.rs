//! One clock exchange, the input of every part of FreeZer (the brackets, the landmarks,
//! the anchors, the model itself): it lives below them all, so that imports point one way
//! (`freezer` → `anchors`, `landmarks` → `bracket` → `exchange`).

/// One ping-pong between the reference (prober) and the source (responder).
///
/// `s` and `e` are read on the reference clock, `r` on the source clock, and in real time
/// `s ≤ r ≤ e` (the ping is sent after `s`, `r` is read when it arrives, the pong arrives
/// before `e`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Exchange {
    /// Reference clock, read just before the ping is sent.
    pub s: u64,
    /// Source clock, read when the ping is received.
    pub r: u64,
    /// Reference clock, read just after the pong is received.
    pub e: u64,
}

impl Exchange {
    /// Round trip in reference ticks (`e − s`), the width of this exchange's zero bracket.
    pub fn rtt(&self) -> u64 {
        self.e.saturating_sub(self.s)
    }
}
