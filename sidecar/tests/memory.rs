//! The sidecar's memory stays bounded by the windows in flight, not by the
//! length of the run. (Its own test binary: the item pool is process-wide.)

use sidecar::analysis::model::{give_items, kept_item_vectors, Busy, GapEnd, Item, Sid};
use sidecar::analysis::window::Windower;

/// A stream whose every batch of items falls in a new window, each handed
/// over and recycled (as the analysis recycles it) once the stream settles
/// past it: the windower moves every batch out of the window it lent the
/// builder. The pool must end up holding about what one window in flight
/// needs, not a vector per window.
#[test]
fn the_item_pool_does_not_grow_with_the_windows_handed_over() {
    const WIDTH: u64 = 1_000_000;
    let mut w = Windower::new(Sid { host: 1, process: 1, worker: 0 }, WIDTH);
    let (mut items, mut out) = (Vec::new(), Vec::new());
    let before = kept_item_vectors();
    for k in 0..2_000u64 {
        let t0 = k * WIDTH;
        // Enough items that their vectors are worth keeping (1024 or more).
        for j in 0..1_100 {
            let s = t0 + j * 500;
            items.push(Item::Busy { start: s, end: s + 400, what: Busy::Operator(1) });
            items.push(Item::Gap { start: s + 400, end: s + 500, cause_until: s + 400, next: GapEnd::NoCause });
        }
        assert_eq!(w.add(&mut items), 0);
        w.take_ready(t0, &mut items, &mut out);
        for f in out.drain(..) {
            give_items(f.items);
        }
    }
    let grown = kept_item_vectors() - before;
    assert!(grown <= 8, "the pool grew by {grown} vectors over 2000 windows");
}
