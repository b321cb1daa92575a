//! Real timely workloads with the probe attached in one line, for the
//! overhead harness and the sidecar's end-to-end tests.
//!
//! | binary | what it runs |
//! |---|---|
//! | `wordcount` | a streaming word count over generated text, in epochs |
//! | `bfs` | breadth-first search on a generated random graph (Sager's Timely-BFS) |
//! | `pagerank` | PageRank iterations on a generated graph (DProf's PageRank) |
//! | `skew` | every record exchanged to worker 0 (ST2's case study): a known bottleneck |
//! | `reach` | differential dataflow: BFS distances in rounds, skewed onto worker 0 |
//!
//! Every binary takes its own size flags (`--name value`, see `--help`),
//! `--no-probe`, and timely's own arguments (`-w N` worker threads, `-n`,
//! `-p`, `-h` for more processes), and prints one result line on stdout
//! and, at exit, one probe line on stderr.
//!
//! Tracing, chosen by the environment:
//!
//! - `PROBE_SINK=file:PATH | unix:PATH | tcp:HOST:PORT | off` (unset: off):
//!   the probe, attached with `probe::timely::attach(worker, &probe)`;
//!   with the sink off it is attached but disabled, so it registers
//!   nothing with timely.
//! - `--no-probe` or `PROBE_ATTACH=0`: the probe is not even created.
//! - `TIMELY_LOG_FILE=PATH`: timely's own logging, as ST2 and ddshow collect
//!   it: a `BatchLogger` over an `EventWriter` (bincode) into
//!   `PATH.<worker index>` through a `BufWriter`, bound to the `"timely"`
//!   log. With the probe also on, both see every event.
//! - `TIMELY_LOG_DROP=1` (with `--no-probe`): timely builds its events for
//!   the `"timely"` log and the `"timely/progress/u64"` log (the logs the
//!   probe's adapter reads for these workloads) and hands them to closures
//!   that drop them: the floor any logger on timely's log registry pays,
//!   for the overhead harness's `--breakdown`.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use probe::{Probe, Sink};
use timely::dataflow::operators::capture::EventWriter;
use timely::logging::{BatchLogger, TimelyEvent, TimelyEventBuilder, TimelyProgressEventBuilder};
use timely::worker::Worker;

pub mod bfs;
pub mod pagerank;
pub mod reach;
pub mod skew;
pub mod wordcount;

/// Command-line options: the workload's own `--name value` flags and
/// `--no-probe`, with everything else left for timely.
#[derive(Clone, Debug, Default)]
pub struct Opts {
    values: HashMap<String, String>,
    /// `--no-probe` (or `PROBE_ATTACH=0`): do not create a probe at all.
    pub no_probe: bool,
    /// The arguments for `timely::execute_from_args` (program name first).
    pub timely_args: Vec<String>,
}

impl Opts {
    /// Splits `args` (program name first) into the flags named in `known`
    /// (each `--name value` or `--name=value`), `--no-probe`, and timely's.
    pub fn parse(args: impl IntoIterator<Item = String>, known: &[&str]) -> Result<Opts, String> {
        let mut opts = Opts { no_probe: std::env::var("PROBE_ATTACH").is_ok_and(|v| v == "0"), ..Opts::default() };
        let mut it = args.into_iter();
        opts.timely_args.extend(it.next());
        while let Some(a) = it.next() {
            if a == "--no-probe" {
                opts.no_probe = true;
                continue;
            }
            if let Some(flag) = a.strip_prefix("--") {
                let (name, inline) = match flag.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (flag, None),
                };
                if known.contains(&name) {
                    let v = match inline {
                        Some(v) => v,
                        None => it.next().ok_or_else(|| format!("--{name} needs a value"))?,
                    };
                    opts.values.insert(name.to_string(), v);
                    continue;
                }
            }
            opts.timely_args.push(a);
        }
        Ok(opts)
    }

    /// Options for a run inside a test: `-w workers`, the given flags.
    pub fn for_test(workers: usize, flags: &[(&str, &str)]) -> Opts {
        Opts {
            values: flags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            no_probe: false,
            timely_args: vec!["test".into(), "-w".into(), workers.to_string()],
        }
    }

    /// The value of `--name`, or `default`.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{name}: cannot read {v:?}")),
        }
    }

    /// `--slow OPERATOR[@WORKER]=FACTOR[,...]`: how many times heavier
    /// `operator`'s work is made on `worker` (on every worker without
    /// `@WORKER`); 1 if not named. For making a speedup real: the what-if
    /// accuracy benchmark runs a workload slowed, predicts the speedup from
    /// its trace, and reruns it with the operator lighter.
    pub fn slowdown(&self, operator: &str, worker: usize) -> Result<f64, String> {
        let Some(spec) = self.values.get("slow") else { return Ok(1.0) };
        let mut factor = 1.0;
        for item in spec.split(',').filter(|i| !i.is_empty()) {
            let (who, f) =
                item.split_once('=').ok_or_else(|| format!("--slow {item}: expected OPERATOR[@WORKER]=FACTOR"))?;
            let f: f64 =
                f.parse().ok().filter(|f: &f64| *f > 0.0).ok_or_else(|| format!("--slow {item}: bad factor"))?;
            let (op, w) = match who.split_once('@') {
                Some((op, w)) => (op, Some(w.parse::<usize>().map_err(|_| format!("--slow {item}: bad worker"))?)),
                None => (who, None),
            };
            if op == operator && w.is_none_or(|w| w == worker) {
                factor = f;
            }
        }
        Ok(factor)
    }

    /// Worker threads per process, as timely will read them (`-w`/`--threads`).
    pub fn workers(&self) -> usize {
        let a = &self.timely_args;
        for (i, x) in a.iter().enumerate() {
            let v = if x == "-w" || x == "--threads" {
                a.get(i + 1).map(String::as_str)
            } else if let Some(v) = x.strip_prefix("--threads=") {
                Some(v)
            } else {
                x.strip_prefix("-w").filter(|v| !v.is_empty())
            };
            if let Some(n) = v.and_then(|v| v.parse().ok()) {
                return n;
            }
        }
        1
    }
}

/// The tracing a run uses: the probe (attached in one line), timely's own
/// file logging, both, or neither.
pub struct Tracing {
    probe: Option<Arc<Probe>>,
    timely_log: Option<String>,
    /// `TIMELY_LOG_DROP=1`: register closures that drop timely's events.
    drop_log: bool,
}

impl Tracing {
    /// From the environment (see the crate docs) and `opts`.
    pub fn from_env(opts: &Opts, program: &str) -> Result<Tracing, String> {
        let mut t = Tracing::new(opts, program, Sink::from_env_or(Sink::Off), std::env::var("TIMELY_LOG_FILE").ok())?;
        t.drop_log = std::env::var("TIMELY_LOG_DROP").is_ok_and(|v| v == "1");
        Ok(t)
    }

    pub fn new(opts: &Opts, program: &str, sink: Sink, timely_log: Option<String>) -> Result<Tracing, String> {
        let probe = if opts.no_probe {
            None
        } else {
            let p = Probe::builder().sink(sink).workers(opts.workers()).program(program).start();
            Some(Arc::new(p.map_err(|e| e.to_string())?))
        };
        Ok(Tracing { probe, timely_log, drop_log: false })
    }

    /// Attaches to a worker: first thing in the worker closure.
    pub fn attach(&self, worker: &mut Worker) {
        if self.drop_log && self.probe.is_none() && self.timely_log.is_none() {
            if let Some(mut reg) = worker.log_register() {
                // Cleared, not taken: timely reuses the batch's allocation,
                // as it does with the adapter's (which drains it).
                reg.insert::<TimelyEventBuilder, _>("timely", |_, data| data.iter_mut().for_each(Vec::clear));
                reg.insert::<TimelyProgressEventBuilder<u64>, _>(
                    &format!("timely/progress/{}", std::any::type_name::<u64>()),
                    |_, data| data.iter_mut().for_each(Vec::clear),
                );
            }
            return;
        }
        let Some(path) = &self.timely_log else {
            if let Some(p) = &self.probe {
                probe::timely::attach(worker, p); // <- the one line
            }
            return;
        };
        // Timely's own logging into a file, as ST2 and ddshow collect it.
        let file = File::create(format!("{path}.{}", worker.index()))
            .unwrap_or_else(|e| panic!("TIMELY_LOG_FILE: cannot create {path}.{}: {e}", worker.index()));
        let mut logger = BatchLogger::new(EventWriter::<Duration, Vec<(Duration, TimelyEvent)>, _>::new(
            BufWriter::with_capacity(1 << 20, file),
        ));
        let adapter = self.probe.as_deref().and_then(|p| probe::timely::Adapter::new(worker, p));
        if let Some(a) = &adapter {
            a.register_common_progress(worker);
        }
        if let Some(mut reg) = worker.log_register() {
            reg.insert::<TimelyEventBuilder, _>("timely", move |time, data| {
                if let Some(a) = &adapter {
                    let mut copy = data.clone();
                    a.on_timely(time, &mut copy);
                }
                logger.publish_batch(time, data);
            });
        }
    }

    /// Whether a probe was created (it may still be disabled: sink off).
    pub fn has_probe(&self) -> bool {
        self.probe.is_some()
    }

    /// Shuts the probe down (after the workers are gone) and prints its
    /// line to stderr; returns the final stats if there was a probe.
    pub fn finish(self) -> Option<probe::Stats> {
        let tl = self.timely_log.as_deref().map(|p| format!(" timely_log={p}.*")).unwrap_or_default();
        let Some(p) = self.probe else {
            eprintln!("probe: not attached{tl}");
            return None;
        };
        let enabled = p.is_enabled();
        let stats = match Arc::try_unwrap(p) {
            Ok(p) => p.shutdown().unwrap_or_else(|e| {
                eprintln!("probe: {e}");
                probe::Stats::default()
            }),
            Err(p) => p.stats(),
        };
        if enabled {
            eprintln!("{}{tl}", stats_line(&stats));
        } else {
            eprintln!("probe: off (PROBE_SINK unset or off){tl}");
        }
        Some(stats)
    }
}

/// One line of probe accounting.
pub fn stats_line(s: &probe::Stats) -> String {
    format!(
        "probe: sink={} io={} compression={} workers={} produced={} written={} lost={} elided={} local={} bytes={} bytes/record={:.2} writer_cpu={:.1}ms adapter={:.3}ms engine_events={} engine_log={:.3}ms engine_flushes={} engine_flush={:.3}ms idle_flushes={} idle_engine={:.3}ms idle_adapter={:.3}ms ticks/s={}{}",
        s.sink,
        s.io_backend,
        s.compression,
        s.workers.len(),
        s.produced(),
        s.written(),
        s.lost(),
        s.elided(),
        s.local_messages(),
        s.bytes,
        s.bytes as f64 / s.written().max(1) as f64,
        s.writer_cpu_ns as f64 / 1e6,
        s.adapter_ns() as f64 / 1e6,
        s.engine_events(),
        s.engine_log_ns() as f64 / 1e6,
        s.engine_flushes(),
        s.engine_flush_ns() as f64 / 1e6,
        s.engine_idle_flushes(),
        s.engine_idle_flush_ns() as f64 / 1e6,
        s.adapter_idle_ns() as f64 / 1e6,
        s.ticks_per_sec,
        s.last_error.as_deref().map(|e| format!(" last_error={e:?}")).unwrap_or_default(),
    )
}

/// Runs a workload from the command line: parses the options, sets up the
/// tracing, prints the result line (stdout) and the probe line (stderr).
pub fn main_with<O: std::fmt::Display>(
    name: &str,
    known: &[&str],
    usage: &str,
    run: fn(&Opts, &Arc<Tracing>) -> Result<O, String>,
) -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help") {
        println!(
            "usage: {name} [-w THREADS] [--no-probe] {usage}\n\
             env: PROBE_SINK, PROBE_ATTACH=0, TIMELY_LOG_FILE, TIMELY_LOG_DROP=1 (with --no-probe)"
        );
        return std::process::ExitCode::SUCCESS;
    }
    let result = Opts::parse(args, known).and_then(|opts| {
        let tracing = Arc::new(Tracing::from_env(&opts, name)?);
        let start = Instant::now();
        let out = run(&opts, &tracing);
        let elapsed = start.elapsed();
        if let Ok(t) = Arc::try_unwrap(tracing) {
            t.finish();
        }
        out.map(|o| (o, elapsed))
    });
    match result {
        Ok((o, elapsed)) => {
            println!("{o} elapsed_ms={:.1}", elapsed.as_secs_f64() * 1e3);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Joins timely's workers, turning a panic into an error.
pub fn join<T: Send + 'static>(
    guards: Result<timely::communication::WorkerGuards<T>, String>,
) -> Result<Vec<T>, String> {
    guards?.join().into_iter().collect()
}

/// The out-edges of one worker's share of a graph (worker `index` of
/// `peers` owns nodes `v * peers + index`, local index `v`), compressed:
/// the targets of local node `v` are `targets[offsets[v]..offsets[v + 1]]`.
#[derive(Default)]
pub struct Csr {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Csr {
    pub fn build(mut edges: Vec<(u32, u32)>, local: usize, peers: usize, index: usize) -> Csr {
        edges.sort_unstable();
        let targets = edges.iter().map(|e| e.1).collect();
        let mut offsets = Vec::with_capacity(local + 1);
        let mut e = 0;
        for v in 0..local {
            offsets.push(e as u32);
            let node = (v * peers + index) as u32;
            while e < edges.len() && edges[e].0 == node {
                e += 1;
            }
        }
        offsets.push(e as u32);
        Csr { offsets, targets }
    }

    /// Not built yet (`Csr::default()`).
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn targets(&self, v: usize) -> &[u32] {
        &self.targets[self.offsets[v] as usize..self.offsets[v + 1] as usize]
    }
}

/// SplitMix64: the deterministic hash the generators use (independent of
/// the worker count, so a run's answer does not depend on `-w`).
#[inline]
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Edge `i` of the generated random graph on `nodes` nodes.
#[inline]
pub fn edge(i: u64, nodes: u64) -> (u32, u32) {
    ((mix(2 * i) % nodes) as u32, (mix(2 * i + 1) % nodes) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opts_split_ours_from_timely() {
        let args = ["prog", "-w", "3", "--nodes", "10", "--no-probe", "--edges=7", "-n", "1"].map(String::from);
        let o = Opts::parse(args, &["nodes", "edges"]).unwrap();
        assert_eq!(o.timely_args, ["prog", "-w", "3", "-n", "1"]);
        assert_eq!(o.get("nodes", 0u64).unwrap(), 10);
        assert_eq!(o.get("edges", 0u64).unwrap(), 7);
        assert_eq!(o.get("other", 5u64).unwrap(), 5);
        assert!(o.no_probe);
        assert_eq!(o.workers(), 3);
        assert_eq!(Opts::parse(["p", "-w4"].map(String::from), &[]).unwrap().workers(), 4);
        assert_eq!(Opts::parse(["p"].map(String::from), &[]).unwrap().workers(), 1);
        assert!(Opts::parse(["p", "--nodes"].map(String::from), &["nodes"]).is_err());
    }
}

/// Makes the work since `since` take `factor` times as long, by computing
/// (hash rounds, not sleeping: a slowed operator is busy, as a heavier one
/// would be) until `factor` times the time it took so far has passed. For
/// `--slow` ([`Opts::slowdown`]) on operators whose work has no size knob.
pub fn slow_down(since: std::time::Instant, factor: f64) -> u64 {
    if factor <= 1.0 {
        return 0;
    }
    let until = since.elapsed().mul_f64(factor);
    let mut h = 0u64;
    while since.elapsed() < until {
        for _ in 0..64 {
            h = mix(h);
        }
    }
    h
}
