//! A timely program that builds and drops dataflows one after another, as
//! an interactive differential program installs and retires its queries:
//! each dataflow exchanges 1,000 numbers twice between 2 workers, runs to
//! its end, and is dropped. Traced by the probe into a file.
//!
//! ```sh
//! cargo run --release -p probe --features timely --example dataflow_churn -- 20000 /tmp/churn.rlog
//! sidecar analyze /tmp/churn.rlog --window 100ms
//! ```

use probe::{OnFull, Probe, Sink};
use timely::dataflow::operators::{Exchange, Input, Inspect, Probe as _};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dataflows), Some(path)) = (args.next().and_then(|n| n.parse::<u64>().ok()), args.next()) else {
        eprintln!("usage: dataflow_churn DATAFLOWS FILE");
        std::process::exit(2);
    };
    let probe = Probe::builder().sink(Sink::file(&path)).on_full(OnFull::Block).workers(2).start();
    let probe = std::sync::Arc::new(probe.unwrap_or_else(|e| {
        eprintln!("dataflow_churn: {e}");
        std::process::exit(1)
    }));
    let p = probe.clone();
    timely::execute(timely::Config::process(2), move |worker| {
        probe::timely::attach(worker, &p);
        for round in 0..dataflows {
            let (mut input, done) = worker.dataflow::<u64, _, _>(|scope| {
                let (input, numbers) = scope.new_input::<Vec<u64>>();
                let done = numbers.exchange(|x| *x).inspect(|_| {}).exchange(|x| *x + 1).inspect(|_| {}).probe().0;
                (input, done)
            });
            if worker.index() == 0 {
                (0..1000).for_each(|x| input.send(round * 1000 + x));
            }
            input.advance_to(1);
            while done.less_than(&1) {
                worker.step();
            }
            let id = *worker.installed_dataflows().last().expect("the dataflow just built");
            worker.drop_dataflow(id);
        }
    })
    .expect("timely runs");
    let probe = std::sync::Arc::try_unwrap(probe).ok().expect("the workers are done");
    if let Err(e) = probe.shutdown() {
        eprintln!("dataflow_churn: {e}");
        std::process::exit(1);
    }
}
