//! The UDP ping-pong on 127.0.0.1 with simulated clocks (so the truth is known): the
//! intervals contain it; bad, foreign and stale datagrams are dropped and counted.

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clocksync::protocol::{Datagram, Prober, ProberConfig, ResponderHandle};
use clocksync::sim::SimClock;
use clocksync::FreeZer;

/// A simulated clock driven by the real (monotonic) time since `base`.
fn sim_clock(c: SimClock, base: Instant) -> impl Fn() -> u64 + Send + Sync + 'static {
    let c = Arc::new(c);
    move || c.read(base.elapsed().as_nanos() as i128 * 1000)
}

#[test]
fn probing_over_udp_bounds_the_simulated_truth() {
    let base = Instant::now();
    let reference = SimClock::new(31_415_926_535_897_932, 1_300_000_000);
    let source = SimClock::new(27_182_818_284_590_452, 2_100_000_007);
    let responder = ResponderHandle::spawn("127.0.0.1:0", sim_clock(source.clone(), base)).unwrap();
    let config = ProberConfig { rate_hz: 1000, reply_timeout: Duration::from_millis(100) };
    let mut prober = Prober::new("127.0.0.1:0", responder.addr(), sim_clock(reference.clone(), base), config).unwrap();
    let mut fz = FreeZer::new();
    let mut checked = 0;
    // 400 ms is enough on an idle machine; a loaded one gets more rounds, up to 20 s.
    let started = Instant::now();
    while checked < 100 && started.elapsed() < Duration::from_secs(20) {
        prober
            .run_for(&mut fz, Duration::from_millis(400), |_, fz| {
                if fz.is_calibrated() {
                    // An event now: read both simulated clocks at one real instant.
                    let t = base.elapsed().as_nanos() as i128 * 1000;
                    let (k, truth) = (source.read(t), reference.read_i128(t));
                    assert!(fz.to_reference(k).unwrap().contains(truth));
                    assert!(fz.to_reference_tight(k).unwrap().contains(truth));
                    checked += 1;
                }
            })
            .unwrap();
    }
    let st = prober.stats();
    println!(
        "{st:?}, {checked} checked, width now {:?}",
        fz.to_reference_tight(source.read(base.elapsed().as_nanos() as i128 * 1000)).map(|i| i.width())
    );
    assert!(st.exchanges >= 100, "{st:?}");
    assert_eq!(st.violations + st.bad + st.foreign + st.invalid, 0, "{st:?}");
    assert!(checked >= 100);
    let (fl, fu) = fz.frequency_bounds();
    let f = clocksync::Ratio::new(1_300_000_000, 2_100_000_007);
    assert!(fl <= f && f <= fu);
    let rs = responder.stop().unwrap();
    assert!(rs.pongs >= st.exchanges);
}

#[test]
fn bad_and_foreign_datagrams_are_dropped_and_counted() {
    let base = Instant::now();
    let tick = move || base.elapsed().as_nanos() as u64;
    let responder = ResponderHandle::spawn("127.0.0.1:0", tick).unwrap();
    // Every ping here must be answered: a long timeout, which an answer ends at once.
    let config = ProberConfig { rate_hz: 1000, reply_timeout: Duration::from_secs(10) };
    let mut prober = Prober::new("127.0.0.1:0", responder.addr(), tick, config).unwrap();
    let rogue = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = prober.local_addr().unwrap();
    // Garbage, a truncated datagram, and well-formed pongs from the wrong address (one
    // with the right session: still foreign, the address decides).
    rogue.send_to(b"hello", target).unwrap();
    let forged = Datagram { kind: 2, session: prober.session(), seq: 1, stamp: 42 }.encode();
    rogue.send_to(&forged[..20], target).unwrap();
    rogue.send_to(&forged, target).unwrap();
    let other = Datagram { kind: 2, session: prober.session() ^ 1, seq: 1, stamp: 42 }.encode();
    rogue.send_to(&other, target).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let x = prober.probe_once().unwrap().expect("the real pong still arrives");
    assert_ne!(x.r, 42, "a forged stamp was accepted");
    let st = prober.stats();
    assert_eq!((st.bad, st.foreign, st.exchanges), (2, 2, 1), "{st:?}");
    // Garbage at the responder: dropped and counted, the service goes on.
    rogue.send_to(b"\x00\x01", responder.addr()).unwrap();
    rogue.send_to(&forged, responder.addr()).unwrap(); // a pong is not a ping
    std::thread::sleep(Duration::from_millis(20));
    assert!(prober.probe_once().unwrap().is_some());
    let rs = responder.stop().unwrap();
    assert_eq!(rs.bad, 2, "{rs:?}");
    assert_eq!(rs.pongs, 2);
}

#[test]
fn late_pongs_are_stale_not_exchanges() {
    // A peer that answers the first ping too late (after the prober gave up on it).
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = peer.local_addr().unwrap();
    let base = Instant::now();
    let tick = move || base.elapsed().as_nanos() as u64;
    // The first ping times out whatever the timeout; the second's answer must come
    // within it, also on a loaded machine.
    let config = ProberConfig { rate_hz: 1000, reply_timeout: Duration::from_millis(1000) };
    let mut prober = Prober::new("127.0.0.1:0", addr, tick, config).unwrap();
    let fake = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let (n, from) = peer.recv_from(&mut buf).unwrap();
        let first = Datagram::decode(&buf[..n]).unwrap();
        let (n, _) = peer.recv_from(&mut buf).unwrap(); // the second ping: first has timed out
        let second = Datagram::decode(&buf[..n]).unwrap();
        for d in [first, second] {
            let pong = Datagram { kind: 2, session: d.session, seq: d.seq, stamp: 7 + d.seq };
            peer.send_to(&pong.encode(), from).unwrap();
        }
    });
    assert_eq!(prober.probe_once().unwrap(), None);
    let x = prober.probe_once().unwrap().expect("second pong");
    assert_eq!(x.r, 9);
    fake.join().unwrap();
    let st = prober.stats();
    assert_eq!((st.timeouts, st.stale, st.exchanges), (1, 1, 1), "{st:?}");
}

#[test]
fn a_dropped_datagram_does_not_shorten_later_reply_timeouts() {
    // A peer whose first pong comes late in the timeout, just after a stale one (the
    // answer to an earlier ping, as after a timeout): the prober waits for the real pong
    // with what is left of the timeout. The next ping, answered well within the
    // configured timeout, must not be given only what was left of the first one.
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = peer.local_addr().unwrap();
    let base = Instant::now();
    let tick = move || base.elapsed().as_nanos() as u64;
    // Margins of 430 ms (first pong) and 1.8 s (second) absorb a loaded machine; a
    // second timeout cut to what was left of the first (430 ms) misses the 1.2 s pong.
    let config = ProberConfig { rate_hz: 1000, reply_timeout: Duration::from_millis(3000) };
    let mut prober = Prober::new("127.0.0.1:0", addr, tick, config).unwrap();
    let fake = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        let (n, from) = peer.recv_from(&mut buf).unwrap();
        let first = Datagram::decode(&buf[..n]).unwrap();
        std::thread::sleep(Duration::from_millis(2550));
        let stale = Datagram { kind: 2, session: first.session, seq: first.seq - 1, stamp: 1 };
        peer.send_to(&stale.encode(), from).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let pong = Datagram { kind: 2, session: first.session, seq: first.seq, stamp: 2 };
        peer.send_to(&pong.encode(), from).unwrap();
        let (n, from) = peer.recv_from(&mut buf).unwrap();
        let second = Datagram::decode(&buf[..n]).unwrap();
        std::thread::sleep(Duration::from_millis(1200));
        let pong = Datagram { kind: 2, session: second.session, seq: second.seq, stamp: 3 };
        peer.send_to(&pong.encode(), from).unwrap();
    });
    assert_eq!(prober.probe_once().unwrap().map(|x| x.r), Some(2));
    let t = Instant::now();
    let second = prober.probe_once().unwrap();
    let waited = t.elapsed();
    fake.join().unwrap();
    assert_eq!(second.map(|x| x.r), Some(3), "gave up after {waited:?} of a 3 s timeout; {:?}", prober.stats());
    assert_eq!(prober.stats().timeouts, 0);
}
