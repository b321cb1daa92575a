//! A streaming word count over generated text, in epochs.
//!
//! Each epoch every worker generates its share of `--lines` lines of
//! `WORDS_PER_LINE` words drawn from a skewed vocabulary of `--vocab`
//! words; the words are exchanged by hash to the worker that counts them,
//! and each epoch's counts are folded into the running totals once the
//! epoch is complete (the frontier has passed it).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Inspect, Operator, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};

use crate::{join, mix, Opts, Tracing};

pub const FLAGS: &[&str] = &["epochs", "lines", "vocab"];
pub const USAGE: &str = "[--epochs 20] [--lines 20000 (per epoch)] [--vocab 10000]";
pub const WORDS_PER_LINE: u64 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub epochs: u64,
    pub lines: u64,
    pub vocab: u64,
}

impl Params {
    pub fn from_opts(o: &Opts) -> Result<Params, String> {
        Ok(Params {
            epochs: o.get("epochs", 20)?,
            lines: o.get("lines", 20_000)?,
            vocab: o.get("vocab", 10_000)?.max(1),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Output {
    pub params: Params,
    /// Words counted (sum of all counts).
    pub words: u64,
    /// Distinct words seen.
    pub distinct: u64,
    /// The count of the most frequent word.
    pub top: u64,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.params;
        let expected = p.epochs * p.lines * WORDS_PER_LINE;
        write!(
            f,
            "wordcount: epochs={} lines/epoch={} words={} expected={} distinct={} top={} {}",
            p.epochs,
            p.lines,
            self.words,
            expected,
            self.distinct,
            self.top,
            if self.words == expected { "ok" } else { "MISMATCH" }
        )
    }
}

/// Word `k` of line `line`: skewed towards small ids (a product of two
/// uniform draws).
pub fn word(line: u64, k: u64, vocab: u64) -> u64 {
    let h = mix(line * WORDS_PER_LINE + k);
    ((h & 0xffff_ffff) % vocab) * ((h >> 32) % vocab) / vocab
}

pub fn run(opts: &Opts, tracing: &Arc<Tracing>) -> Result<Output, String> {
    let p = Params::from_opts(opts)?;
    let tracing = tracing.clone();
    let per_worker = join(timely::execute_from_args(opts.timely_args.clone().into_iter(), move |worker| {
        tracing.attach(worker);
        let (index, peers) = (worker.index() as u64, worker.peers() as u64);
        let mut input = InputHandle::new();
        let probe = ProbeHandle::new();
        let counts: Rc<RefCell<HashMap<String, u64>>> = Rc::default();
        let counted: Rc<RefCell<u64>> = Rc::default();
        let (c2, n2) = (counts.clone(), counted.clone());
        worker.dataflow::<u64, _, _>(|scope| {
            input
                .to_stream(scope)
                .container::<Vec<String>>()
                .flat_map(|line: String| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
                .unary_frontier(
                    Exchange::new(|w: &String| mix(w.bytes().fold(0, |h, b| h * 31 + b as u64))),
                    "Count",
                    move |_cap, _info| {
                        // Keyed by capability, as in timely's own word count.
                        #[allow(clippy::mutable_key_type)]
                        let mut queues = HashMap::new();
                        move |(input, frontier), output| {
                            input.for_each_stamp(|cap, data| {
                                if let Some(cap) = cap.retain_least(output.output_index()) {
                                    queues.entry(cap).or_insert_with(Vec::new).extend(data.map(std::mem::take));
                                }
                            });
                            let mut counts = c2.borrow_mut();
                            for (cap, batches) in queues.iter_mut() {
                                if !frontier.less_equal(cap.time()) {
                                    let mut n = 0u64;
                                    for mut batch in batches.drain(..) {
                                        for w in batch.drain(..) {
                                            *counts.entry(w).or_insert(0) += 1;
                                            n += 1;
                                        }
                                    }
                                    output.session(cap).give((*cap.time(), n));
                                }
                            }
                            queues.retain(|_, b: &mut Vec<Vec<String>>| !b.is_empty());
                        }
                    },
                )
                .container::<Vec<(u64, u64)>>()
                .inspect(move |&(_, n)| *n2.borrow_mut() += n)
                .probe_with(&probe);
        });
        let mut line = String::new();
        for epoch in 0..p.epochs {
            for j in (index..p.lines).step_by(peers as usize) {
                let id = epoch * p.lines + j;
                line.clear();
                for k in 0..WORDS_PER_LINE {
                    use std::fmt::Write;
                    let _ = write!(line, "w{} ", word(id, k, p.vocab));
                }
                input.send(line.clone());
            }
            input.advance_to(epoch + 1);
            while probe.less_than(input.time()) {
                worker.step();
            }
        }
        let counts = counts.borrow();
        let n = *counted.borrow();
        (n, counts.len() as u64, counts.values().copied().max().unwrap_or(0))
    }))?;
    Ok(Output {
        params: p,
        words: per_worker.iter().map(|x| x.0).sum(),
        distinct: per_worker.iter().map(|x| x.1).sum(),
        top: per_worker.iter().map(|x| x.2).max().unwrap_or(0),
    })
}
