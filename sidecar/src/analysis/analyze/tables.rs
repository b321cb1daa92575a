//! The tables message matching works in: dense indices of the channels and
//! workers a window saw, group numbers by (channel, sender, receiver), and
//! the groups themselves. Flat tables while the key space is small, maps
//! beyond (a window's key space is workers² × channels, nearly always small).

use rustc_hash::FxHashMap;

use crate::analysis::model::{give_entries, MsgEntry};

/// Dense indices (0, 1, 2, … in order of first sight) of ids that are
/// usually small integers (channels, worker indices): a direct table for
/// small ids, a hash map beyond.
#[derive(Default)]
pub(super) struct DenseIds {
    small: Vec<u32>,
    big: FxHashMap<u32, u32>,
    n: u32,
}

impl DenseIds {
    const SMALL: u32 = 1 << 12;

    #[inline]
    pub(super) fn id(&mut self, v: u32) -> u32 {
        if v < Self::SMALL {
            if let Some(&d) = self.small.get(v as usize) {
                if d != u32::MAX {
                    return d;
                }
            } else {
                self.small.resize(v as usize + 1, u32::MAX);
            }
            self.small[v as usize] = self.n;
        } else {
            if let Some(&d) = self.big.get(&v) {
                return d;
            }
            self.big.insert(v, self.n);
        }
        self.n += 1;
        self.n - 1
    }

    /// The dense index of `v`, if it has one.
    pub(super) fn find(&self, v: u32) -> Option<u32> {
        let d = if v < Self::SMALL { self.small.get(v as usize).copied() } else { self.big.get(&v).copied() };
        d.filter(|&d| d != u32::MAX)
    }
}

/// Group numbers by a key of three dense indices: a flat table while the
/// key space is small (workers² × channels usually is), a hash map beyond,
/// or when the table would be mostly empty. The table is built anew for
/// every window: with a thousand streams, each talking to a few, it was
/// 1024² × channels slots for a few thousand groups, zeroed and regrown
/// each window (13 % of the instructions of a 1,000-stream trace,
/// docs/performance.md); lookups are per group, not per message, so the
/// map costs little where the table would be large.
#[derive(Default)]
pub(super) struct GroupIndex {
    dims: [u32; 3],
    table: Vec<u32>,
    keys: Vec<[u32; 3]>,
    map: Option<FxHashMap<[u32; 3], u32>>,
}

impl GroupIndex {
    const MAX_TABLE: usize = 1 << 22;
    /// Below this many slots (256 KB) the table is kept whatever its use.
    const SMALL_TABLE: usize = 1 << 16;
    /// Past [`Self::SMALL_TABLE`], slots per group the table may have.
    const SLOTS_PER_GROUP: usize = 16;

    #[inline]
    fn slot(&self, k: [u32; 3]) -> Option<usize> {
        let d = self.dims;
        (k[0] < d[0] && k[1] < d[1] && k[2] < d[2])
            .then(|| (k[0] as usize * d[1] as usize + k[1] as usize) * d[2] as usize + k[2] as usize)
    }

    /// The group of `k`; a new one is numbered `next` (the caller's count).
    #[inline(always)]
    pub(super) fn get(&mut self, k: [u32; 3], next: usize) -> usize {
        if self.map.is_none() {
            if let Some(s) = self.slot(k) {
                let g = self.table[s];
                if g != u32::MAX {
                    return g as usize;
                }
            }
        }
        self.get_new(k, next)
    }

    #[inline(never)]
    fn get_new(&mut self, k: [u32; 3], next: usize) -> usize {
        if let Some(m) = &mut self.map {
            return *m.entry(k).or_insert(next as u32) as usize;
        }
        let s = match self.slot(k) {
            Some(s) => s,
            None => {
                self.grow(k);
                if let Some(m) = &mut self.map {
                    return *m.entry(k).or_insert(next as u32) as usize;
                }
                self.slot(k).unwrap()
            }
        };
        let g = self.table[s];
        if g != u32::MAX {
            return g as usize;
        }
        self.table[s] = next as u32;
        self.keys.push(k);
        next
    }

    pub(super) fn find(&self, k: [u32; 3]) -> Option<usize> {
        match &self.map {
            Some(m) => m.get(&k).map(|&g| g as usize),
            None => self.slot(k).map(|s| self.table[s]).filter(|&g| g != u32::MAX).map(|g| g as usize),
        }
    }

    #[cold]
    fn grow(&mut self, k: [u32; 3]) {
        let mut d = self.dims;
        for (x, &v) in d.iter_mut().zip(&k) {
            while *x <= v && *x < u32::MAX {
                *x = x.saturating_mul(2).max(4);
            }
        }
        let size = d.iter().map(|&x| x as usize).product::<usize>();
        let sparse = size > Self::SMALL_TABLE && size > Self::SLOTS_PER_GROUP * (self.keys.len() + 1);
        if size > Self::MAX_TABLE || sparse {
            let m = self.keys.iter().map(|&k| (k, self.find(k).unwrap() as u32)).collect();
            self.map = Some(m);
            return;
        }
        let old: Vec<([u32; 3], u32)> = self.keys.iter().map(|&k| (k, self.find(k).unwrap() as u32)).collect();
        self.dims = d;
        self.table.clear();
        self.table.resize(size, u32::MAX);
        for (k, g) in old {
            let s = self.slot(k).unwrap();
            self.table[s] = g;
        }
    }
}

/// Whether a table sorted by (sequence number, ...) already is: sequence
/// numbers nearly always increase strictly, which decides it; otherwise the
/// whole entries are compared.
pub(super) fn sorted_by_seq<T: Ord>(v: &[T], seq: impl Fn(&T) -> u64) -> bool {
    v.windows(2).all(|p| seq(&p[0]) < seq(&p[1])) || v.is_sorted()
}

/// The two halves of one (channel, sender, receiver): the window's data
/// messages on it, matched by merging the two sorted lists.
pub(super) struct DataGroup {
    pub key: (u32, u32, u32),
    pub si: Option<usize>,
    /// (seq, sent)
    pub sends: Vec<MsgEntry>,
    pub ri: Option<usize>,
    /// (seq, slot in the reader's inbox, which holds the read time)
    pub reads: Vec<MsgEntry>,
}

impl DataGroup {
    pub(super) fn new(key: (u32, u32, u32)) -> Self {
        DataGroup { key, si: None, sends: Vec::new(), ri: None, reads: Vec::new() }
    }
}

/// Progress sent on a channel by a worker: (channel, from worker, sender
/// local, (seq, sent)).
pub(super) type ProgressSends = (u32, u32, usize, Vec<MsgEntry>);

/// Adds a stream's table to a window group's (nearly always the only one:
/// taken over whole).
pub(super) fn join(to: &mut Vec<MsgEntry>, from: Vec<MsgEntry>) {
    if to.is_empty() {
        *to = from;
    } else {
        to.extend_from_slice(&from);
        give_entries(from);
    }
}

/// Progress read by one worker from one sender on one channel.
pub(super) struct ProgressReads {
    pub channel: u32,
    pub from: u32,
    /// The reader (local index).
    pub j: usize,
    /// (channel, sender) as dense indices.
    pub key: (u32, u32),
    pub reads: Vec<MsgEntry>,
}

#[cfg(test)]
mod tests {
    use super::GroupIndex;

    /// Numbers the keys in order of first sight, as the matching does.
    fn number(ix: &mut GroupIndex, keys: &[[u32; 3]]) -> Vec<usize> {
        let mut next = 0;
        keys.iter()
            .map(|&k| {
                let g = ix.get(k, next);
                next = next.max(g + 1);
                g
            })
            .collect()
    }

    #[test]
    fn a_group_index_numbers_keys_alike_as_a_table_or_a_map() {
        // A few workers: a dense key space, kept as a table.
        let dense: Vec<[u32; 3]> = (0..200).map(|i| [i % 3, (i * 7) % 8, (i * 5) % 8]).collect();
        let mut ix = GroupIndex::default();
        let groups = number(&mut ix, &dense);
        assert!(ix.map.is_none(), "8 workers, 3 channels: a table");
        // Each distinct key got the next number at its first sight, the
        // same key the same number later.
        let mut firsts: Vec<[u32; 3]> = Vec::new();
        for (k, g) in dense.iter().zip(&groups) {
            match firsts.iter().position(|f| f == k) {
                Some(p) => assert_eq!(*g, p),
                None => {
                    assert_eq!(*g, firsts.len());
                    firsts.push(*k);
                }
            }
        }
        for (k, g) in dense.iter().zip(&groups) {
            assert_eq!(ix.find(*k), Some(*g));
        }
        // A thousand workers each with two neighbours: a sparse key space
        // (1024² slots per channel for 2,000 groups) goes to the map, and
        // numbers the keys as the table would.
        let sparse: Vec<[u32; 3]> =
            (0..1000u32).flat_map(|w| [[0, w, (w + 1) % 1000], [0, w, (w + 999) % 1000]]).collect();
        let mut ix = GroupIndex::default();
        let groups = number(&mut ix, &sparse);
        assert!(ix.map.is_some(), "sparse: a map");
        assert_eq!(groups, (0..2000).collect::<Vec<_>>(), "each key new, numbered in order");
        assert_eq!(ix.find([0, 5, 6]), Some(10));
        assert_eq!(ix.find([0, 5, 7]), None);
    }
}
