//! Every record exchanged to worker 0 (ST2's case study): worker 0 does all
//! the work while the others wait on it, a known bottleneck for the
//! analysis to find.
//!
//! Each epoch every worker generates its share of `--records` records;
//! an exchange sends all of them to worker 0, whose `Consume` operator
//! spends `--work` rounds of hashing on each and folds them into a
//! checksum.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use timely::dataflow::channels::pact::Exchange;
use timely::dataflow::operators::{Operator, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};

use crate::{join, mix, Opts, Tracing};

pub const FLAGS: &[&str] = &["epochs", "records", "work", "spread", "slow"];
pub const USAGE: &str = "[--epochs 10] [--records 200000 (per epoch)] [--work 128 (hash rounds per record)] \
                         [--spread 0|1 (1: records spread over all workers)] [--slow Consume[@WORKER]=FACTOR]";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub epochs: u64,
    pub records: u64,
    pub work: u64,
}

impl Params {
    pub fn from_opts(o: &Opts) -> Result<Params, String> {
        Ok(Params { epochs: o.get("epochs", 10)?, records: o.get("records", 200_000)?, work: o.get("work", 128)? })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub params: Params,
    /// Records consumed, per worker.
    pub consumed: Vec<u64>,
    /// Wrapping sum of every record's hash chain.
    pub checksum: u64,
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = self.params;
        write!(
            f,
            "skew: epochs={} records={} work={} consumed_per_worker={:?} checksum={:016x}",
            p.epochs,
            p.epochs * p.records,
            p.work,
            self.consumed,
            self.checksum
        )
    }
}

/// The work done on one record.
#[inline]
pub fn cost(x: u64, rounds: u64) -> u64 {
    (0..rounds).fold(x, |h, _| mix(h))
}

/// The checksum, sequentially (for checking).
pub fn sequential(p: Params) -> u64 {
    (0..p.epochs * p.records).fold(0u64, |s, x| s.wrapping_add(cost(x, p.work)))
}

pub fn run(opts: &Opts, tracing: &Arc<Tracing>) -> Result<Output, String> {
    let p = Params::from_opts(opts)?;
    let spread = opts.get("spread", 0u32)? == 1;
    let slow: Vec<f64> = (0..opts.workers().max(1)).map(|w| opts.slowdown("Consume", w)).collect::<Result<_, _>>()?;
    let tracing = tracing.clone();
    let per_worker = join(timely::execute_from_args(opts.timely_args.clone().into_iter(), move |worker| {
        tracing.attach(worker);
        let index = worker.index() as u64;
        let mut input = InputHandle::new();
        let probe = ProbeHandle::new();
        let consumed = Rc::new(Cell::new(0u64));
        let checksum = Rc::new(Cell::new(0u64));
        let (c2, s2) = (consumed.clone(), checksum.clone());
        // `--slow Consume@W=F`: this worker's rounds per record, F times as many.
        let rounds = (p.work as f64 * slow.get(index as usize).copied().unwrap_or(1.0)).round() as u64;
        let peers = worker.peers() as u64;
        worker.dataflow::<u64, _, _>(|scope| {
            input
                .to_stream(scope)
                .container::<Vec<u64>>()
                .unary(
                    Exchange::new(move |x: &u64| if spread { x % peers } else { 0 }),
                    "Consume",
                    move |_cap, _info| {
                        move |input, output| {
                            input.for_each(|cap, data| {
                                for &x in data.iter() {
                                    s2.set(s2.get().wrapping_add(cost(x, rounds)));
                                }
                                c2.set(c2.get() + data.len() as u64);
                                output.session(&cap).give(data.len() as u64);
                            });
                        }
                    },
                )
                .container::<Vec<u64>>()
                .probe_with(&probe);
        });
        for epoch in 0..p.epochs {
            for i in (index..p.records).step_by(worker.peers()) {
                input.send(epoch * p.records + i);
            }
            input.advance_to(epoch + 1);
            while probe.less_than(input.time()) {
                worker.step();
            }
        }
        (consumed.get(), checksum.get())
    }))?;
    Ok(Output {
        params: p,
        consumed: per_worker.iter().map(|x| x.0).collect(),
        checksum: per_worker.iter().fold(0u64, |s, x| s.wrapping_add(x.1)),
    })
}
