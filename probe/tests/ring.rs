//! The ring between a worker thread and the writer thread, under load.

mod common;

use common::{read_trace, tmp_path};
use probe::{OnFull, Probe, Sink};
use ringlog::Event;

fn seqs(records: &[ringlog::Record]) -> Vec<u64> {
    records
        .iter()
        .filter_map(|r| match r.event() {
            Some(Event::MessageSend { seq, .. }) => Some(seq),
            _ => None,
        })
        .collect()
}

#[test]
fn block_loses_nothing_duplicates_nothing_keeps_order() {
    let p = tmp_path("ring-block.ringlog");
    // A tiny ring forces the worker to wait on the writer constantly.
    let probe = Probe::builder().sink(Sink::file(&p)).ring_capacity(8).on_full(OnFull::Block).start().unwrap();
    let n = 400_000u64;
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let mut w = probe.worker(i);
            std::thread::spawn(move || {
                for s in 0..n {
                    w.message_send(1, 1 - i, s, 1);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = probe.shutdown().unwrap();
    let t = read_trace(&std::fs::read(&p).unwrap());
    assert!(t.error.is_none(), "{:?}", t.error);
    for i in 0..2 {
        let s = &t.workers[&i];
        assert_eq!(seqs(&s.records), (0..n).collect::<Vec<_>>(), "worker {i}");
        assert_eq!(s.lost_in_headers, 0);
        assert_eq!(stats.workers[i as usize].lost(), 0);
        assert_eq!(stats.workers[i as usize].written, n);
    }
    std::fs::remove_file(p).ok();
}

#[test]
fn drop_accounts_for_every_record() {
    let p = tmp_path("ring-drop.ringlog");
    let probe = Probe::builder()
        .sink(Sink::file(&p))
        .ring_capacity(16)
        .on_full(OnFull::Drop)
        .idle_interval(std::time::Duration::from_millis(5))
        .start()
        .unwrap();
    let n = 2_000_000u64;
    let mut w = probe.worker(0);
    let h = std::thread::spawn(move || {
        for s in 0..n {
            w.message_send(1, 1, s, 1);
        }
    });
    h.join().unwrap();
    let stats = probe.shutdown().unwrap();
    let ws = &stats.workers[0];
    assert_eq!(ws.produced, n);
    assert_eq!(ws.written + ws.lost(), ws.produced, "{ws:?}");
    assert!(ws.lost_ring > 0, "a 16-slot ring must overflow: {ws:?}");
    let t = read_trace(&std::fs::read(&p).unwrap());
    assert!(t.error.is_none(), "{:?}", t.error);
    let s = &t.workers[&0];
    let got = seqs(&s.records);
    assert_eq!(got.len() as u64, ws.written);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "order kept, no duplicates");
    // The loss reaches the reader: header counts plus the end frame add up.
    assert_eq!(s.lost_in_headers, ws.lost_ring);
    assert_eq!(s.end.unwrap().lost, ws.lost());
    assert_eq!(s.end.unwrap().produced, n);
    std::fs::remove_file(p).ok();
}
