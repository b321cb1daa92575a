//! A differential program that builds and drops queries one after another:
//! each dataflow arranges 100 updates by key, runs to its end, and is
//! dropped with its trace. Traced by the probe (with differential's
//! arrangement log) into a file.
//!
//! ```sh
//! cargo run --release -p probe --features differential --example arrangement_churn -- 6000 /tmp/ddchurn.rlog
//! sidecar analyze /tmp/ddchurn.rlog --window 10ms
//! ```

use differential_dataflow::input::Input;
use probe::{OnFull, Probe, Sink};
use timely::dataflow::operators::Probe as _;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(queries), Some(path)) = (args.next().and_then(|n| n.parse::<u64>().ok()), args.next()) else {
        eprintln!("usage: arrangement_churn QUERIES FILE");
        std::process::exit(2);
    };
    let probe = Probe::builder().sink(Sink::file(&path)).on_full(OnFull::Block).workers(1).start();
    let probe = std::sync::Arc::new(probe.unwrap_or_else(|e| {
        eprintln!("arrangement_churn: {e}");
        std::process::exit(1)
    }));
    let p = probe.clone();
    timely::execute(timely::Config::thread(), move |worker| {
        probe::differential::attach(worker, &p);
        for query in 0..queries {
            let (mut input, done) = worker.dataflow::<u64, _, _>(|scope| {
                let (input, updates) = scope.new_collection::<(u64, u64), isize>();
                (input, updates.arrange_by_key().stream.probe().0)
            });
            (0..100u64).for_each(|x| input.insert((x % 10, query * 100 + x)));
            input.advance_to(1);
            input.flush();
            while done.less_than(&1) {
                worker.step();
            }
            drop(input);
            let id = *worker.installed_dataflows().last().expect("the dataflow just built");
            worker.drop_dataflow(id);
        }
    })
    .expect("timely runs");
    let probe = std::sync::Arc::try_unwrap(probe).ok().expect("the worker is done");
    if let Err(e) = probe.shutdown() {
        eprintln!("arrangement_churn: {e}");
        std::process::exit(1);
    }
}
