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
    /// The window whose items the caller's vector holds (its first `.1`
    /// items; the fragment's own vector is empty meanwhile): the activity
    /// builder then appends straight to the window's items, and a batch that
    /// stays inside that window needs no copy.
    lent: Option<(u64, usize)>,
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
            lent: None,
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

    /// Bounds of window `k`, if representable.
    fn bounds(&self, k: u64) -> Option<(Ns, Ns)> {
        let w = self.width;
        Some((k.checked_mul(w)?, k.checked_add(1)?.checked_mul(w)?))
    }

    /// Whether every item lies inside window `k` (start in it, end by its
    /// end), with the least start and greatest end.
    fn inside(&self, k: u64, items: &[Item]) -> Option<(Ns, Ns)> {
        let (lo, hi) = self.bounds(k)?;
        let (mut s_min, mut e_max, mut inside) = (Ns::MAX, 0, true);
        for it in items {
            let (s, e) = (it.start(), it.end());
            inside &= s >= lo && s < hi && e <= hi;
            s_min = s_min.min(s);
            e_max = e_max.max(e);
        }
        inside.then_some((s_min, e_max))
    }

    fn open_frag(&mut self, k: u64) -> &mut Fragment {
        self.open[(k - self.next) as usize].as_mut().expect("lent window is open")
    }

    /// Adds the items of `items` (in any order) not added before; returns
    /// how many fell into windows that were already handed over (late;
    /// counted by the caller as a fault). Afterwards `items` may hold the
    /// items of the window the last one fell in: give the same vector to
    /// every call, and to `take_ready` and `finish`.
    pub fn add(&mut self, items: &mut Vec<Item>) -> u64 {
        let mut spare = Vec::new();
        if let Some((k, len)) = self.lent.take() {
            if let Some((s_min, e_max)) = self.inside(k, &items[len..]) {
                let n = items.len();
                let f = self.open_frag(k);
                f.covered.0 = f.covered.0.min(s_min);
                f.covered.1 = f.covered.1.max(e_max);
                self.lent = Some((k, n));
                return 0;
            }
            // Window `k` gets its items back; the new ones are placed.
            let mut new = items.split_off(len);
            std::mem::swap(items, &mut self.open_frag(k).items);
            std::mem::swap(items, &mut new);
            spare = new;
        }
        let (late, last) = self.place(items);
        if spare.capacity() > items.capacity() {
            std::mem::swap(items, &mut spare);
        }
        crate::model::give_items(spare);
        if let Some(k) = last {
            std::mem::swap(items, &mut self.open_frag(k).items);
            self.lent = Some((k, items.len()));
        }
        late
    }

    /// Gives the lent window its items back (`items` as given to `add`).
    fn reclaim(&mut self, items: &mut Vec<Item>) {
        if self.lent.is_some_and(|(_, len)| items.len() > len) {
            self.add(items);
        }
        if let Some((k, _)) = self.lent.take() {
            std::mem::swap(items, &mut self.open_frag(k).items);
        }
    }

    /// Places every item of `items` (leaving it empty); returns the late
    /// count and the open window the last item went to.
    fn place(&mut self, items: &mut Vec<Item>) -> (u64, Option<u64>) {
        let mut late = 0;
        let w = self.width;
        // Usually a whole batch falls inside one window: moved in one piece
        // (the per-item path below would put each in that window, in order).
        if let Some(first) = items.first() {
            let k = self.index(first.start());
            if let Some((s_min, e_max)) = self.inside(k, items) {
                if !self.started {
                    self.started = true;
                    self.next = k;
                }
                if let Some(f) = self.frag(k) {
                    if f.items.is_empty() {
                        std::mem::swap(&mut f.items, items);
                    } else {
                        f.items.append(items);
                    }
                    f.covered.0 = f.covered.0.min(s_min);
                    f.covered.1 = f.covered.1.max(e_max);
                    return (0, Some(k));
                }
            }
        }
        // The window the last item landed in, while it stays open: (offset
        // in `open`, start, end). Items come nearly in time order, so most
        // fall inside it and skip the index divisions and the lookup.
        // (`next` and the offsets of open windows do not move during `add`.)
        let mut cur: Option<(usize, Ns, Ns)> = None;
        let mut last = None;
        for it in items.drain(..) {
            let (s, e) = (it.start(), it.end());
            if let Some((off, lo, hi)) = cur {
                if s >= lo && s < hi && e <= hi {
                    if let Some(Some(f)) = self.open.get_mut(off) {
                        f.items.push(it);
                        f.covered.0 = f.covered.0.min(s);
                        f.covered.1 = f.covered.1.max(e);
                        last = Some(self.next + off as u64);
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
                        last = Some(k);
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
        (late, last)
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

    /// Hands over every window that ends at or before `settled` (`items`:
    /// the vector given to `add`).
    pub fn take_ready(&mut self, settled: Ns, items: &mut Vec<Item>, out: &mut Vec<Fragment>) {
        let upto = settled / self.width; // windows < upto end <= settled
        if self.lent.is_some_and(|(k, _)| k < upto) {
            self.reclaim(items);
        }
        self.take_below(upto, out);
    }

    fn take_below(&mut self, upto: u64, out: &mut Vec<Fragment>) {
        if !self.started || upto <= self.next {
            return;
        }
        assert!(self.lent.is_none_or(|(k, _)| k >= upto), "lent window handed over");
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
    pub fn finish(&mut self, clean: bool, fault: Option<&str>, items: &mut Vec<Item>, out: &mut Vec<Fragment>) {
        self.reclaim(items);
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
        w.take_ready(199, &mut items, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].covered, (10, 100));
        w.take_ready(300, &mut items, &mut out);
        assert_eq!(out.iter().map(|f| f.window).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(out[1].counters.records, 3);
        assert_eq!(out[2].items.len(), 3); // busy tail, gap, psend
                                           // the gap ends exactly at 300: it is not in window 3
        items.push(Item::Recv { ts: 50, from: 0, channel: 0, seq: 0, records: 0 });
        assert_eq!(w.add(&mut items), 1);
        w.finish(true, None, &mut items, &mut out);
        assert_eq!(out.len(), 3);
    }
}
