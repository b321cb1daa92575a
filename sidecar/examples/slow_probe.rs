//! A probe workload for live reproductions:
//! `cargo run --release -p sidecar --example slow_probe -- SOCKET SECONDS [LONG_OP_MS] [WORKERS]`
//! Each worker runs 1 ms operators with 0.5 ms gaps (a message exchanged
//! between workers each iteration), for SECONDS; with LONG_OP_MS, worker 0
//! runs one long operator of that length at the midpoint (preceded by a gap).
use std::time::{Duration, Instant};

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {}
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let sock = a[0].clone();
    let secs: f64 = a[1].parse().unwrap();
    let long_ms: u64 = a.get(2).map_or(0, |x| x.parse().unwrap());
    let workers: usize = a.get(3).map_or(1, |x| x.parse().unwrap());
    let probe = probe::Probe::builder().sink(probe::Sink::unix(&sock)).workers(workers).start().unwrap();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for wi in 0..workers {
            let probe = &probe;
            s.spawn(move || {
                let mut w = probe.worker(wi);
                w.operator(3, "Work", &[0, 3]);
                w.operator(4, "Long", &[0, 4]);
                let mut seq = 0u64;
                let mut long_done = long_ms == 0 || wi != 0;
                while t0.elapsed().as_secs_f64() < secs {
                    if !long_done && t0.elapsed().as_secs_f64() > secs / 2.0 {
                        long_done = true;
                        std::thread::sleep(Duration::from_millis(2));
                        eprintln!("long op starts at {:.3}", t0.elapsed().as_secs_f64());
                        w.schedule_start(4);
                        // an input-like operator: sends a batch every 10 ms
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_millis(long_ms) {
                            w.message_send(2, (wi + 1) % workers, 1_000_000 + seq, 100);
                            seq += 1;
                            spin(Duration::from_millis(10));
                        }
                        w.schedule_stop(4);
                        eprintln!("long op ends at {:.3}", t0.elapsed().as_secs_f64());
                    }
                    w.schedule_start(3);
                    w.message_send(1, (wi + 1) % workers, seq, 1);
                    spin(Duration::from_millis(1));
                    w.schedule_stop(3);
                    w.step();
                    seq += 1;
                    std::thread::sleep(Duration::from_micros(500));
                }
            });
        }
    });
    let st = probe.shutdown().unwrap();
    eprintln!("probe done: {:?}", st.connects);
}
