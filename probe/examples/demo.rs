//! A small instrumented workload: worker threads count words of generated
//! text, exchanging batches by hash of the word (like a timely exchange),
//! polling operators that are often idle (so elision has work to do). The
//! trace goes to `PROBE_SINK` (default: a file), and is then read back and
//! summarized.
//!
//! `cargo run --release -p probe --example demo -- [WORKERS] [ROUNDS]`

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Instant;

use probe::{Probe, Sink};
use ringlog::{Body, Decoder, Event};

const OP_READ: usize = 1;
const OP_EXCHANGE: usize = 2;
const OP_COUNT: usize = 3;
const CH_WORDS: usize = 1;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().map_or(2, |s| s.parse().expect("WORKERS"));
    let rounds: u64 = args.next().map_or(2000, |s| s.parse().expect("ROUNDS"));
    let default_path = std::env::temp_dir().join("probe-demo.ringlog");
    let sink = Sink::from_env_or(Sink::file(&default_path));
    println!("tracing {workers} workers x {rounds} rounds into {sink}");
    let probe = Probe::builder().sink(sink.clone()).workers(workers).start()?;

    let (txs, rxs): (Vec<_>, Vec<_>) = (0..workers).map(|_| mpsc::channel::<(usize, u64, Vec<String>)>()).unzip();
    let t = Instant::now();
    let mut counts = HashMap::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(me, rx)| {
                let txs = txs.clone();
                let mut w = probe.worker(me);
                s.spawn(move || {
                    w.operator(OP_READ, "Read", &[0, OP_READ]);
                    w.operator(OP_EXCHANGE, "Exchange", &[0, OP_EXCHANGE]);
                    w.operator(OP_COUNT, "Count", &[0, OP_COUNT]);
                    w.channel(CH_WORDS, (OP_EXCHANGE, 0), (OP_COUNT, 0));
                    let mut seq = vec![0u64; workers];
                    let mut counts: HashMap<String, u64> = HashMap::new();
                    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ me as u64;
                    for round in 0..rounds {
                        // Read: only every fourth round has input.
                        w.schedule_start(OP_READ);
                        let input: Vec<String> = if round % 4 == 0 {
                            w.span_start(round);
                            let v = (0..64).map(|_| format!("w{}", next(&mut rng) % 500)).collect();
                            w.span_stop(round);
                            v
                        } else {
                            Vec::new()
                        };
                        w.schedule_stop(OP_READ);
                        // Exchange: words go to the worker that owns them.
                        w.schedule_start(OP_EXCHANGE);
                        if !input.is_empty() {
                            let mut parts = vec![Vec::new(); workers];
                            for word in input {
                                parts[hash(&word) % workers].push(word);
                            }
                            for (to, part) in parts.into_iter().enumerate() {
                                w.message_send(CH_WORDS, to, seq[to], part.len());
                                let _ = txs[to].send((me, seq[to], part));
                                seq[to] += 1;
                            }
                        }
                        w.schedule_stop(OP_EXCHANGE);
                        // Count: whatever arrived.
                        w.schedule_start(OP_COUNT);
                        while let Ok((from, s, part)) = rx.try_recv() {
                            w.message_recv(CH_WORDS, from, s, part.len());
                            for word in part {
                                *counts.entry(word).or_default() += 1;
                            }
                        }
                        w.schedule_stop(OP_COUNT);
                        w.step();
                    }
                    drop(txs);
                    // Drain what is still in flight.
                    w.schedule_start(OP_COUNT);
                    while let Ok((from, s, part)) = rx.recv_timeout(std::time::Duration::from_millis(50)) {
                        w.message_recv(CH_WORDS, from, s, part.len());
                        for word in part {
                            *counts.entry(word).or_default() += 1;
                        }
                    }
                    w.schedule_stop(OP_COUNT);
                    w.step();
                    counts
                })
            })
            .collect();
        drop(txs);
        for h in handles {
            for (k, v) in h.join().unwrap() {
                *counts.entry(k).or_insert(0u64) += v;
            }
        }
    });
    let elapsed = t.elapsed();
    let stats = probe.shutdown()?;
    let total: u64 = counts.values().sum();
    println!("counted {total} words ({} distinct) in {elapsed:.2?}", counts.len());
    println!(
        "probe: {} records written, {} lost, {} schedule pairs elided, {} bytes ({:.2} B/record), writer {} CPU {:.1} ms",
        stats.written(),
        stats.lost(),
        stats.elided(),
        stats.bytes,
        stats.bytes as f64 / stats.written().max(1) as f64,
        stats.io_backend,
        stats.writer_cpu_ns as f64 / 1e6
    );
    if let Some(e) = &stats.last_error {
        println!("probe sink error: {e}");
    }
    if let Sink::File(path) = &sink {
        summarize(path)?;
    }
    Ok(())
}

/// Reads the trace back and counts what each worker's stream holds.
fn summarize(path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut per_worker: std::collections::BTreeMap<u32, (u64, u64, u64, u64)> = Default::default();
    for f in Decoder::new(std::io::BufReader::new(std::fs::File::open(path)?)) {
        let f = f?;
        if let Body::Records(recs) = f.body {
            let e = per_worker.entry(f.header.stream.worker).or_default();
            for r in recs {
                e.0 += 1;
                match r.event() {
                    Some(Event::MessageSend { .. }) => e.1 += 1,
                    Some(Event::MessageRecv { .. }) => e.2 += 1,
                    Some(Event::Step { elided, .. }) => e.3 += elided,
                    _ => {}
                }
            }
        }
    }
    println!("decoded {}:", path.display());
    for (w, (recs, sent, recv, elided)) in per_worker {
        println!("  worker {w}: {recs} records, {sent} messages sent, {recv} received, {elided} pairs elided");
    }
    Ok(())
}

fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn hash(w: &str) -> usize {
    w.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize))
}
