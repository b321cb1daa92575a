//! What a worker step that does nothing costs: one timely worker with a
//! small dataflow (a `u64` input, an exchange and an `iterative` scope)
//! steps `STEPS` times with nothing to do, with the probe attached or not.
//! Prints the time per step; run it under `valgrind --tool=callgrind` for
//! instruction counts that a loaded machine does not move.
//!
//! ```sh
//! cargo build --release -p probe --features timely --example idle_steps
//! PROBE_SINK=file:/tmp/idle.ringlog target/release/examples/idle_steps 1000000
//! PROBE_SINK=off target/release/examples/idle_steps 1000000                       # no probe
//! PROBE_TIMELY_PROGRESS='(),usize,...' PROBE_SINK=file:... target/release/examples/idle_steps  # a fixed list
//! ```

use std::time::Instant;

use timely::dataflow::operators::{Enter, Exchange, Inspect, Probe as _};
use timely::dataflow::{InputHandle, ProbeHandle};

fn main() {
    let steps: u64 = std::env::args().nth(1).map_or(1_000_000, |s| s.parse().expect("steps: a number"));
    let probe = std::sync::Arc::new(probe::Probe::builder().workers(1).start().expect("probe"));
    let p = probe.clone();
    timely::execute(timely::Config::thread(), move |worker| {
        probe::timely::attach(worker, &p);
        let mut input = InputHandle::new();
        let done = ProbeHandle::new();
        worker.dataflow::<u64, _, _>(|scope| {
            let s = input.to_stream(scope).container::<Vec<u64>>().exchange(|x: &u64| *x);
            scope.iterative::<u64, _, _>(|inner| {
                s.clone().enter(inner).inspect(|_| {});
            });
            s.probe_with(&done);
        });
        input.send(1u64);
        input.advance_to(1);
        while done.less_than(input.time()) {
            worker.step();
        }
        let t = Instant::now();
        for _ in 0..steps {
            worker.step();
        }
        let ns = t.elapsed().as_nanos() as f64 / steps as f64;
        println!("idle step: {ns:.1} ns ({steps} steps, probe {})", if p.is_enabled() { "on" } else { "off" });
    })
    .expect("timely")
    .join();
    if let Ok(p) = std::sync::Arc::try_unwrap(probe) {
        if let Ok(s) = p.shutdown() {
            eprintln!(
                "probe: engine_flushes={} idle_flushes={} idle_engine={:.2}ms idle_adapter={:.2}ms",
                s.engine_flushes(),
                s.engine_idle_flushes(),
                s.engine_idle_flush_ns() as f64 / 1e6,
                s.adapter_idle_ns() as f64 / 1e6
            );
        }
    }
}
