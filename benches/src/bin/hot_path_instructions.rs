//! Instruction counts per event, for `valgrind --tool=callgrind` (stable
//! where timings are noisy). Run twice with different N and divide the
//! difference of the totals by the difference of N:
//!
//! `valgrind --tool=callgrind target/release/hot_path_instructions KIND N`
//!
//! KIND: floor | send | local (a message to the worker itself: counted,
//! not written) | elided | disabled. The probe's ring is large enough
//! that nothing is lost and its sink is /dev/null.

use std::hint::black_box;

use probe::{OnFull, Probe, Sink};
use ringlog::{Kind, Record};

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().expect("KIND");
    let n: u64 = args.next().expect("N").parse().unwrap();
    match kind.as_str() {
        "floor" => {
            let mut arr = [Record::default(); 64];
            for i in 0..n {
                let ts = probe::rdtsc();
                arr[(i & 63) as usize] = Record::new(Kind::MessageSend, ts, i, 1, 2, 3);
                black_box(&arr[(i & 63) as usize]);
            }
        }
        "send" | "local" | "elided" | "disabled" => {
            let p = if kind == "disabled" {
                Probe::disabled()
            } else {
                Probe::builder()
                    .sink(Sink::file("/dev/null"))
                    .ring_capacity(1 << 22)
                    .on_full(OnFull::Drop)
                    .start()
                    .unwrap()
            };
            let mut w = p.worker(0);
            if kind == "elided" {
                for _ in 0..n {
                    w.schedule_start(black_box(5));
                    w.schedule_stop(black_box(5));
                }
            } else {
                let to = if kind == "local" { 0 } else { 1 };
                for i in 0..n {
                    w.message_send(black_box(3), black_box(to), i, black_box(64));
                }
            }
            drop(w);
            let s = p.shutdown().unwrap();
            assert_eq!(s.lost(), 0);
        }
        k => panic!("unknown kind {k}"),
    }
}
