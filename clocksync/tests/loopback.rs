//! Two processes on one host, one TSC: the responder is this test binary re-executed with
//! `CLOCKSYNC_LOOPBACK_CHILD` set. Source and reference are the same counter, so the truth
//! of the identity conversion is known exactly: `k` itself. The interval must contain it,
//! and its width is reported against the round trip.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use clocksync::protocol::{Clock, Prober, ProberConfig, Responder, TscClock};
use clocksync::FreeZer;

const CHILD: &str = "CLOCKSYNC_LOOPBACK_CHILD";

/// The responder side. Does nothing unless started by `identity_conversion_on_loopback`;
/// serves until its stdin closes (the parent ends or drops it), at most 20 s.
#[test]
fn loopback_child_responder() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let mut r = Responder::bind("127.0.0.1:0", TscClock).unwrap();
    println!("CLOCKSYNC_PORT={}", r.local_addr().unwrap().port());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) && std::time::Instant::now() < deadline {
        r.serve_one().unwrap();
    }
}

#[test]
fn identity_conversion_on_loopback() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["loopback_child_responder", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = lines
        .by_ref()
        .map_while(Result::ok)
        // libtest may print "test name ... " on the same line first.
        .find_map(|l| l.split("CLOCKSYNC_PORT=").nth(1).map(|p| p.trim().parse().unwrap()))
        .expect("child did not report its port");
    let peer = format!("127.0.0.1:{port}").parse().unwrap();
    let mut prober = Prober::new("127.0.0.1:0", peer, TscClock, ProberConfig::default()).unwrap();
    let mut fz = FreeZer::new();
    let mut rtts = vec![];
    let mut checked = 0;
    // 1.5 s is enough on an idle machine; a loaded one gets more rounds, up to 15 s.
    let started = std::time::Instant::now();
    while prober.stats().exchanges <= 500 && started.elapsed() < Duration::from_secs(15) {
        prober
            .run_for(&mut fz, Duration::from_millis(1500), |x, fz| {
                rtts.push(x.rtt());
                if fz.is_calibrated() {
                    // The identity: a reading of the shared counter converts to an interval
                    // containing itself, both for the responder's stamp and for "now".
                    for k in [x.r, TscClock.now()] {
                        assert!(fz.to_reference(k).unwrap().contains(k as i128), "anchored misses {k}");
                        assert!(fz.to_reference_tight(k).unwrap().contains(k as i128), "tight misses {k}");
                        checked += 1;
                    }
                }
            })
            .unwrap();
    }
    drop(child.stdin.take()); // tells the child to stop
    let _ = child.wait();
    let st = prober.stats();
    assert!(st.exchanges > 500, "{st:?}");
    assert_eq!(st.violations, 0, "{st:?}");
    rtts.sort_unstable();
    let median = rtts[rtts.len() / 2];
    let min = rtts[0];
    let now = TscClock.now();
    let tight = fz.to_reference_tight(now).unwrap().width();
    let anchored = fz.to_reference(now).unwrap().width();
    let (fl, fu) = fz.frequency_bounds();
    println!(
        "loopback: {} exchanges, rtt min {min} median {median} ticks; identity width now: tight {tight}, anchored {anchored} ticks; F in [{:.9}, {:.9}]; {checked} checked",
        st.exchanges,
        fl.to_f64(),
        fu.to_f64()
    );
    assert!(fl.to_f64() <= 1.0 && 1.0 <= fu.to_f64());
    // "About one round trip or less" for an event near the latest exchange.
    assert!(tight as f64 <= 1.5 * median as f64, "tight width {tight} vs median rtt {median}");
}
