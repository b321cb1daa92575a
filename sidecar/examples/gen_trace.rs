//! Writes a synthetic probe trace (ringlog frames) for benchmarks:
//! `cargo run --release -p sidecar --example gen_trace -- OUT [RECORDS] [WORKERS] [zstd|none] [PATTERN] [PER_PROCESS] [IDLE_OPERATORS] [CHANNELS] [HOST]`
//! (zstd|none: how Records frames are compressed, as the probe does into a
//! file (zstd, the default) or into a Unix socket (none); PATTERN: whom
//! each worker sends to, `all` (the default) or `neighbours:K`;
//! PER_PROCESS: workers per process of a cluster on one host, 0 (the
//! default) for all in one process; IDLE_OPERATORS: operators each worker
//! declares that never run, 0 by default; CHANNELS: how many channels the
//! messages are spread over, 1 by default; HOST: the host id the streams
//! are written on, hex with 0x or decimal, 0x5eed by default).
use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let out =
        args.next().expect("usage: gen_trace OUT [RECORDS] [WORKERS] [zstd|none] [all|neighbours:K] [PER_PROCESS] [IDLE_OPERATORS] [CHANNELS] [HOST]");
    let records: u64 = args.next().map(|s| s.parse().expect("RECORDS")).unwrap_or(50_000_000);
    let workers: u32 = args.next().map(|s| s.parse().expect("WORKERS")).unwrap_or(8);
    let compression = args.next().map(|s| s.parse().expect("zstd or none")).unwrap_or_default();
    let pattern = args.next().map(|s| s.parse().unwrap_or_else(|e| panic!("PATTERN: {e}"))).unwrap_or_default();
    let per_process: u32 = args.next().map(|s| s.parse().expect("PER_PROCESS")).unwrap_or(0);
    let idle_operators: u32 = args.next().map(|s| s.parse().expect("IDLE_OPERATORS")).unwrap_or(0);
    let channels: u32 = args.next().map(|s| s.parse().expect("CHANNELS")).unwrap_or(1);
    let host = args.next().map(|s| match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).expect("HOST"),
        None => s.parse().expect("HOST"),
    });
    let cfg = sidecar::synth::SynthConfig {
        records,
        workers,
        compression,
        pattern,
        per_process,
        idle_operators,
        channels,
        host: host.unwrap_or(sidecar::synth::SynthConfig::default().host),
        ..Default::default()
    };
    let f = std::fs::File::create(&out).expect("create output");
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    let t = std::time::Instant::now();
    let n = sidecar::synth::generate(&cfg, &mut |b| w.write_all(b)).expect("write");
    w.flush().unwrap();
    eprintln!("wrote {n} records from {workers} workers to {out} in {:.1} s", t.elapsed().as_secs_f64());
}
