//! The ground-truth benchmark: hundreds of seeded scenarios
//! (`benches::scenarios`: gather with a straggler, pipeline with a slow
//! stage, input-bound sources, an operator that works silently), each run
//! on real threads through the probe and analyzed by the sidecar; prints
//! the share of runs where the sidecar named the injected cause, per shape,
//! and what it said instead where it did not.
//!
//! `cargo run --release -p benches --bin scenarios -- [--per-shape 100] [--first-seed 1] [--shapes gather,pipeline,input-bound,silent] [--work sleep|spin] [--verbose]`

use benches::scenarios::{run_one, tally, Shape, Work};
use clap::Parser;

#[derive(Parser)]
#[command(about = "Scenarios with a known bottleneck: how often the sidecar names it")]
struct Args {
    /// Scenarios per shape.
    #[arg(long, default_value_t = 100)]
    per_shape: u64,
    /// Seeds are first-seed, first-seed + 1, ...
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Shapes to run (comma-separated): gather, pipeline, input-bound, silent.
    #[arg(long, value_delimiter = ',')]
    shapes: Vec<String>,
    /// How operators spend their cost: `sleep` or `spin` (CPU time: wants
    /// a core per worker).
    #[arg(long, default_value = "sleep")]
    work: String,
    /// Print every scenario, not only the wrong ones.
    #[arg(long)]
    verbose: bool,
}

fn main() {
    let args = Args::parse();
    let shapes: Vec<Shape> = if args.shapes.is_empty() {
        Shape::ALL.to_vec()
    } else {
        args.shapes
            .iter()
            .map(|s| {
                Shape::parse(s).unwrap_or_else(|| panic!("unknown shape {s:?} (gather, pipeline, input-bound, silent)"))
            })
            .collect()
    };
    let work = Work::parse(&args.work).unwrap_or_else(|| panic!("--work: {:?} is neither sleep nor spin", args.work));
    let t0 = std::time::Instant::now();
    let mut outcomes = Vec::new();
    // Shapes interleaved, so a slow spell of the machine hits all alike.
    for seed in args.first_seed..args.first_seed + args.per_shape {
        for &shape in &shapes {
            let o = run_one(shape, seed, work);
            if args.verbose || !o.right() {
                println!("{} {o}", o.verdict());
            }
            outcomes.push(o);
        }
    }
    // Right out of judged (runs that realized their plan); void: no run of
    // the scenario did; attempts: runs made in all.
    println!("\n{:<12} {:>9} {:>7} {:>5} {:>9}", "shape", "right", "score", "void", "attempts");
    let t = tally(&outcomes);
    let attempts = |s: Shape| outcomes.iter().filter(|o| o.scenario.shape == s).map(|o| o.attempts as u64).sum::<u64>();
    let pct = |r: usize, n: usize| 100.0 * r as f64 / n.max(1) as f64;
    for (&s, x) in &t {
        println!(
            "{:<12} {:>4}/{:<4} {:>6.1}% {:>5} {:>9}",
            s.name(),
            x.right,
            x.judged,
            pct(x.right, x.judged),
            x.void,
            attempts(s)
        );
    }
    let (r, n, v) = t.values().fold((0, 0, 0), |a, b| (a.0 + b.right, a.1 + b.judged, a.2 + b.void));
    println!("{:<12} {:>4}/{:<4} {:>6.1}% {:>5}   ({:.0} s)", "all", r, n, pct(r, n), v, t0.elapsed().as_secs_f64());
}
