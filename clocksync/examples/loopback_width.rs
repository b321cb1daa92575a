//! Interval width after 1 s, 10 s and 60 s of probing at 1 kHz between two processes on
//! this host (same TSC, so the identity conversion's truth is known).
//!
//! `cargo run --release -p clocksync --example loopback_width [seconds]`
//!
//! The responder is this binary re-executed with `--responder`.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clocksync::protocol::{Clock, Prober, ProberConfig, Responder, TscClock};
use clocksync::FreeZer;

fn responder() {
    let mut r = Responder::bind("127.0.0.1:0", TscClock).unwrap();
    println!("PORT={}", r.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    r.serve(&stop).unwrap();
}

fn main() {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--responder") {
        return responder();
    }
    let seconds: u64 = first.and_then(|a| a.parse().ok()).unwrap_or(60);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg("--responder")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = lines.find_map(|l| l.ok()?.strip_prefix("PORT=")?.trim().parse().ok()).unwrap();
    let peer = format!("127.0.0.1:{port}").parse().unwrap();
    let mut prober = Prober::new("127.0.0.1:0", peer, TscClock, ProberConfig::default()).unwrap();
    let mut fz = FreeZer::new();
    let (t0, k0) = (Instant::now(), TscClock.now());
    let mut marks: Vec<u64> = [1, 10, 60].into_iter().filter(|&m| m <= seconds).collect();
    if marks.last() != Some(&seconds) {
        marks.push(seconds);
    }
    let mut fixed_k = None; // an event 0.5 s into the run, re-converted at every mark
    let mut rtts: Vec<u64> = vec![];
    let mut violations = 0;
    println!("| probing | exchanges | rtt min / median (µs, last second) | tight width now (µs) | anchored width now (µs) | width of the event at 0.5 s (µs) | zero width (µs) | F^U - F^L (ppm) | truth inside |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut elapsed_s = 0;
    for &m in &marks {
        prober
            .run_for(&mut fz, Duration::from_secs(m - elapsed_s), |x, _| {
                rtts.push(x.rtt());
                if fixed_k.is_none() && t0.elapsed() >= Duration::from_millis(500) {
                    fixed_k = Some(x.r);
                }
            })
            .unwrap();
        elapsed_s = m;
        violations = prober.stats().violations;
        let now = TscClock.now();
        let hz = (now - k0) as f64 / t0.elapsed().as_secs_f64();
        let us = |ticks: u128| ticks as f64 / hz * 1e6;
        let tight = fz.to_reference_tight(now).unwrap();
        let anchored = fz.to_reference(now).unwrap();
        let fk = fixed_k.unwrap();
        let fixed = fz.to_reference(fk).unwrap();
        let (fl, fu) = fz.frequency_bounds();
        let zero = fz.zero().unwrap().1;
        let last: Vec<u64> = {
            let n = rtts.len().min(1000);
            let mut v = rtts[rtts.len() - n..].to_vec();
            v.sort_unstable();
            v
        };
        let inside = tight.contains(now as i128) && anchored.contains(now as i128) && fixed.contains(fk as i128);
        println!(
            "| {m} s | {} | {:.1} / {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {:.4} | {inside} |",
            prober.stats().exchanges,
            us(last[0] as u128),
            us(last[last.len() / 2] as u128),
            us(tight.width()),
            us(anchored.width()),
            us(fixed.width()),
            us(zero.width()),
            (fu.to_f64() - fl.to_f64()) * 1e6,
        );
    }
    drop(child.stdin.take());
    let _ = child.wait();
    println!("\nprober: {:?}; clock-model violations: {violations}", prober.stats());
}
