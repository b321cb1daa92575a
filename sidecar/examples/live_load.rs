//! Drives the real probe into a live sidecar: `live_load SOCKET SECONDS
//! WORKERS [NAP_US] [RATE]` runs an exchange computation on WORKERS threads
//! for SECONDS, traced into `probe::Sink::unix(SOCKET)`.
//!
//! Without RATE (or RATE 0) each worker spins through its steps (operator 1
//! busy 40 µs on worker 0, 10 µs on the others), NAP_US sleeping between
//! steps (a machine not saturated by the load). With RATE, records/s of
//! the whole program, each worker is paced to its share of it: the steps do
//! no busy work (a few records each, cheap to make), a worker catches up
//! with its schedule every millisecond and sleeps in between, so the
//! program's own CPU stays small beside the sidecar's (`benches --bin
//! live_rate` drives a sidecar with it). On exit it says the records written
//! and lost and, paced, the rate reached.
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often a paced worker catches up with its schedule.
const PACE_TICK: Duration = Duration::from_millis(1);

fn main() {
    let mut a = std::env::args().skip(1);
    let sock = a.next().expect("SOCKET");
    let secs: u64 = a.next().map(|s| s.parse().unwrap()).unwrap_or(10);
    let n: usize = a.next().map(|s| s.parse().unwrap()).unwrap_or(4);
    // Sleep between steps (µs): 0 = spin flat out.
    let nap: u64 = a.next().map(|s| s.parse().unwrap()).unwrap_or(0);
    // Records/s of the whole program: 0 = unpaced.
    let rate: f64 = a.next().map(|s| s.parse().expect("RATE: records/s")).unwrap_or(0.0);
    assert!(rate >= 0.0 && rate.is_finite(), "RATE must be a number of records/s ≥ 0, not {rate}");
    let probe =
        probe::Probe::builder().sink(probe::Sink::unix(&sock)).workers(n).program("live_load").start().expect("probe");
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::channel::<(usize, u64)>()).unzip();
    let mut rxs: Vec<Option<mpsc::Receiver<(usize, u64)>>> = rxs.into_iter().map(Some).collect();
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let mut w = probe.worker(i);
            let txs = txs.clone();
            let rx = rxs[i].take().unwrap();
            std::thread::spawn(move || {
                w.operator(1, "Exchange", &[0, 1]);
                w.operator(2, "Count", &[0, 2]);
                let mut seq = vec![0u64; n];
                let mut s = 0;
                // Records made so far, and each worker's share of RATE.
                let mut made = 0u64;
                let per_worker = rate / n as f64;
                let busy = Duration::from_micros(if rate > 0.0 {
                    0
                } else if i == 0 {
                    40
                } else {
                    10
                });
                while Instant::now() < end {
                    if per_worker > 0.0 {
                        let due = (per_worker * start.elapsed().as_secs_f64()) as u64;
                        if made >= due {
                            std::thread::sleep(PACE_TICK);
                            continue;
                        }
                    }
                    w.schedule_start(1);
                    for (to, tx) in txs.iter().enumerate() {
                        w.message_send(7, to, seq[to], 10);
                        let _ = tx.send((i, seq[to]));
                        seq[to] += 1;
                    }
                    let t = Instant::now();
                    while t.elapsed() < busy {}
                    w.schedule_stop(1);
                    w.progress_send(0, s);
                    s += 1;
                    w.schedule_start(2);
                    while let Ok((from, q)) = rx.try_recv() {
                        w.message_recv(7, from, q, 10);
                        made += u64::from(from != i);
                    }
                    w.schedule_stop(2);
                    w.step();
                    // Start, stop, progress, start, stop, step, and the
                    // sends to other workers (the probe does not write a
                    // worker's messages to itself).
                    made += 6 + n as u64 - 1;
                    if nap > 0 {
                        std::thread::sleep(Duration::from_micros(nap));
                    }
                }
            })
        })
        .collect();
    drop(txs);
    for h in hs {
        h.join().unwrap();
    }
    let wall = start.elapsed().as_secs_f64();
    let st = probe.shutdown().unwrap();
    let written: u64 = st.workers.iter().map(|w| w.written).sum();
    eprintln!("probe: {} records written, {} lost", written, st.workers.iter().map(|w| w.lost()).sum::<u64>());
    if rate > 0.0 {
        eprintln!("paced: {:.0} records/s reached of {rate:.0} over {wall:.2} s", written as f64 / wall);
    }
}
