//! Drives the real probe into a live sidecar: `live_load SOCKET SECONDS
//! WORKERS` runs an exchange computation on WORKERS threads for SECONDS,
//! traced into `probe::Sink::unix(SOCKET)`; optional NAP_US sleeps between
//! steps (a machine not saturated by the load).
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn main() {
    let mut a = std::env::args().skip(1);
    let sock = a.next().expect("SOCKET");
    let secs: u64 = a.next().map(|s| s.parse().unwrap()).unwrap_or(10);
    let n: usize = a.next().map(|s| s.parse().unwrap()).unwrap_or(4);
    // Sleep between steps (µs): 0 = spin flat out.
    let nap: u64 = a.next().map(|s| s.parse().unwrap()).unwrap_or(0);
    let probe =
        probe::Probe::builder().sink(probe::Sink::unix(&sock)).workers(n).program("live_load").start().expect("probe");
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::channel::<(usize, u64)>()).unzip();
    let mut rxs: Vec<Option<mpsc::Receiver<(usize, u64)>>> = rxs.into_iter().map(Some).collect();
    let end = Instant::now() + Duration::from_secs(secs);
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
                while Instant::now() < end {
                    w.schedule_start(1);
                    for (to, tx) in txs.iter().enumerate() {
                        w.message_send(7, to, seq[to], 10);
                        let _ = tx.send((i, seq[to]));
                        seq[to] += 1;
                    }
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_micros(if i == 0 { 40 } else { 10 }) {}
                    w.schedule_stop(1);
                    w.progress_send(0, s);
                    s += 1;
                    w.schedule_start(2);
                    while let Ok((from, q)) = rx.try_recv() {
                        w.message_recv(7, from, q, 10);
                    }
                    w.schedule_stop(2);
                    w.step();
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
    let st = probe.shutdown().unwrap();
    eprintln!(
        "probe: {} records written, {} lost",
        st.workers.iter().map(|w| w.written).sum::<u64>(),
        st.workers.iter().map(|w| w.lost()).sum::<u64>()
    );
}
