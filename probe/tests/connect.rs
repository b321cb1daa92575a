//! When the writer connects to a live sidecar, relative to the records it
//! will send.

mod common;

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use common::{read_trace, tmp_path};
use probe::{Probe, Sink};

/// A live sidecar holds back its windows for a new connection only from its
/// accept on. The writer calibrates the TSC for 20 ms before it can send a
/// Hello; it must connect before that, not after, or the records stamped
/// meanwhile can fall in windows the sidecar has already analyzed.
#[test]
fn the_socket_is_connected_before_the_calibration() {
    let p = tmp_path("connect-early.sock");
    let l = UnixListener::bind(&p).unwrap();
    let side = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let accepted = Instant::now();
        let mut bytes = vec![0u8; 1];
        s.read_exact(&mut bytes).unwrap();
        let first_byte = Instant::now();
        s.read_to_end(&mut bytes).unwrap();
        (first_byte - accepted, bytes)
    });
    let probe = Probe::builder().sink(Sink::unix(&p)).start().unwrap();
    let mut w = probe.worker(0);
    w.mark(1);
    drop(w);
    // (A probe stopped sooner cuts its calibration short.)
    std::thread::sleep(Duration::from_millis(50));
    probe.shutdown().unwrap();
    let (gap, bytes) = side.join().unwrap();
    let t = read_trace(&bytes);
    assert!(t.error.is_none(), "{:?}", t.error);
    let events: Vec<_> = t.workers[&0].records.iter().map(|r| r.event()).collect();
    assert_eq!(events.first(), Some(&Some(ringlog::Event::Mark { id: 1 })), "{events:?}");
    if !t.hello.expect("a Hello").invariant_tsc {
        eprintln!("no invariant TSC here: the probe reads CLOCK_MONOTONIC and does not calibrate");
        return;
    }
    // The calibration sleeps 20 ms between the connect and the Hello; the
    // accept is seen when this test's thread wakes, a few ms late on a busy
    // host. (Connecting after the calibration: well under 1 ms.)
    assert!(gap >= Duration::from_millis(10), "connected only {gap:?} before sending: after the calibration");
}
