//! Cutting one stream's timeline into fixed windows (Sager §3.1 edge
//! projection; issue stage 4). Items are assigned to every window they
//! overlap, with their original times: the owner projects them (clips to
//! `[start, end]`), so a wait cut at a window's end continues in the next.
//! A window is handed over once the stream's builder has settled past its
//! end; memory is bounded by the windows in flight.

use std::collections::VecDeque;

use crate::model::{Counters, Fragment, Item, Ns, Sid};

#[derive(Debug)]
pub struct Windower {
    pub width: Ns,
    stream: Sid,
    /// Open windows `next ..`, by offset from `next`.
    open: VecDeque<Option<Fragment>>,
    /// Windows below this index were handed over.
    next: u64,
    started: bool,
    pub workers_expected: u32,
    pub program: String,
}

impl Windower {
    pub fn new(stream: Sid, width: Ns) -> Windower {
        Windower {
            width: width.max(1),
            stream,
            open: VecDeque::new(),
            next: 0,
            started: false,
            workers_expected: 0,
            program: String::new(),
        }
    }

    pub fn index(&self, t: Ns) -> u64 {
        t / self.width
    }

    fn frag(&mut self, k: u64) -> Option<&mut Fragment> {
        if k < self.next {
            return None; // already handed over: late data
        }
        let off = (k - self.next) as usize;
        if off > 10_000_000 {
            return None; // absurd jump (corrupt clock): do not allocate for it
        }
        while self.open.len() <= off {
            self.open.push_back(None);
        }
        let (stream, we, prog) = (self.stream, self.workers_expected, &self.program);
        Some(self.open[off].get_or_insert_with(|| Fragment {
            stream: Some(stream),
            window: k,
            workers_expected: we,
            program: prog.clone(),
            covered: (Ns::MAX, 0),
            items: crate::model::take_items(),
            ..Default::default()
        }))
    }

    /// Adds items (in any order); returns how many fell into windows that
    /// were already handed over (late; counted by the caller as a fault).
    pub fn add(&mut self, items: &mut Vec<Item>) -> u64 {
        let mut late = 0;
        let w = self.width;
        // The window the last item landed in, while it stays open: (offset
        // in `open`, start, end). Items come nearly in time order, so most
        // fall inside it and skip the index divisions and the lookup.
        // (`next` and the offsets of open windows do not move during `add`.)
        let mut cur: Option<(usize, Ns, Ns)> = None;
        for it in items.drain(..) {
            let (s, e) = (it.start(), it.end());
            if let Some((off, lo, hi)) = cur {
                if s >= lo && s < hi && e <= hi {
                    if let Some(Some(f)) = self.open.get_mut(off) {
                        f.items.push(it);
                        f.covered.0 = f.covered.0.min(s);
                        f.covered.1 = f.covered.1.max(e);
                        continue;
                    }
                }
            }
            if !self.started {
                self.started = true;
                self.next = self.index(s);
            }
            let k1 = self.index(s);
            let k2 = if e > s { self.index(e - 1) } else { k1 };
            // A corrupt clock can make one item span absurdly many windows.
            let k2 = k2.min(k1.saturating_add(10_000));
            cur = None;
            for k in k1..=k2 {
                match self.frag(k) {
                    Some(f) => {
                        f.items.push(it);
                        let (ws, we) = (k.saturating_mul(w), k.saturating_add(1).saturating_mul(w));
                        f.covered.0 = f.covered.0.min(s.max(ws));
                        f.covered.1 = f.covered.1.max(e.min(we));
                        if k == k2 {
                            if let (Some(lo), Some(hi)) =
                                (k.checked_mul(w), k.checked_add(1).and_then(|k| k.checked_mul(w)))
                            {
                                cur = Some(((k - self.next) as usize, lo, hi));
                            }
                        }
                    }
                    None => late += 1,
                }
            }
        }
        late
    }

    /// Adds counters to the window holding time `t`.
    pub fn count(&mut self, t: Ns, c: &Counters) {
        let k = self.index(t).max(self.next);
        if !self.started {
            self.started = true;
            self.next = k;
        }
        if let Some(f) = self.frag(k) {
            f.counters.add(c);
        }
    }

    /// Marks the windows overlapping `[from, to]` with a fault.
    pub fn fault(&mut self, from: Ns, to: Ns, why: &str) {
        let k1 = self.index(from).max(self.next);
        let k2 = self.index(to).max(k1);
        if !self.started {
            self.started = true;
            self.next = k1;
        }
        for k in k1..=k2.min(k1 + 100_000) {
            if let Some(f) = self.frag(k) {
                if !f.faults.iter().any(|x| x == why) {
                    f.faults.push(why.to_string());
                }
            }
        }
    }

    /// Hands over every window that ends at or before `settled`.
    pub fn take_ready(&mut self, settled: Ns, out: &mut Vec<Fragment>) {
        let upto = settled / self.width; // windows < upto end <= settled
        self.take_below(upto, out);
    }

    fn take_below(&mut self, upto: u64, out: &mut Vec<Fragment>) {
        if !self.started || upto <= self.next {
            return;
        }
        // Every window between handed-over ones exists (items tile the
        // timeline); empty ones get an empty fragment so the owner knows the
        // stream was present. A jump of more than MAX_SKIP windows (a stream
        // silent for days, or a bogus timestamp) is not spelled out window
        // by window: the windows past the cap are skipped, and said so.
        const MAX_SKIP: u64 = 10_000;
        let stop = upto.min(self.next.saturating_add(MAX_SKIP));
        for k in self.next..stop {
            let w = self.width;
            let slot = self.open.pop_front().flatten();
            let mut f = slot.unwrap_or_else(|| Fragment {
                stream: Some(self.stream),
                window: k,
                workers_expected: self.workers_expected,
                program: self.program.clone(),
                covered: (k.saturating_mul(w), k.saturating_add(1).saturating_mul(w)),
                ..Default::default()
            });
            if f.covered.0 > f.covered.1 {
                f.covered = (k.saturating_mul(w), k.saturating_mul(w));
            }
            out.push(f);
        }
        if stop < upto {
            if let Some(f) = out.last_mut() {
                f.faults.push(format!("stream jumps {} windows ahead; windows in between skipped", upto - stop));
            }
            self.open.clear();
        }
        self.next = upto;
    }

    /// The stream is over: hands over everything, marking the last window
    /// `ended` (clean end) or with `fault` (disconnect, decode error).
    pub fn finish(&mut self, clean: bool, fault: Option<&str>, out: &mut Vec<Fragment>) {
        let last = self.open.iter().rposition(|f| f.is_some()).map(|i| self.next + i as u64);
        if let Some(last) = last {
            if let Some(Some(f)) = self.open.get_mut((last - self.next) as usize) {
                f.ended = clean;
                if let Some(why) = fault {
                    f.faults.push(why.to_string());
                }
            }
            self.take_below(last + 1, out);
        }
    }

    /// Index of the first window not handed over yet.
    pub fn next_window(&self) -> u64 {
        self.next
    }

    pub fn started(&self) -> bool {
        self.started
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Busy, GapEnd};

    #[test]
    fn items_split_across_windows_and_handed_over_in_order() {
        let sid = Sid { host: 1, process: 1, worker: 0 };
        let mut w = Windower::new(sid, 100);
        let mut items = vec![
            Item::Busy { start: 10, end: 250, what: Busy::Operator(1) },
            Item::Gap { start: 250, end: 300, cause_until: 250, next: GapEnd::NoCause },
            Item::PSend { ts: 200, channel: 0, seq: 0 },
        ];
        assert_eq!(w.add(&mut items), 0);
        w.count(150, &Counters { records: 3, ..Default::default() });
        let mut out = vec![];
        w.take_ready(199, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].covered, (10, 100));
        w.take_ready(300, &mut out);
        assert_eq!(out.iter().map(|f| f.window).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(out[1].counters.records, 3);
        assert_eq!(out[2].items.len(), 3); // busy tail, gap, psend
                                           // the gap ends exactly at 300: it is not in window 3
        let mut late = vec![Item::Recv { ts: 50, from: 0, channel: 0, seq: 0, records: 0 }];
        assert_eq!(w.add(&mut late), 1);
        w.finish(true, None, &mut out);
        assert_eq!(out.len(), 3);
    }
}
