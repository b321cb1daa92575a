//! Every scope's progress messages on a differential `iterate` (a `u32`
//! dataflow whose loop runs in `Product<u32, u64>`, a type the adapter's
//! first fixed list missed): the adapter learns the type from the scopes
//! built, and the trace holds each progress channel's messages, whole.
#![cfg(feature = "differential")]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use common::{read_trace, tmp_path};
use differential_dataflow::input::Input;
use differential_dataflow::operators::Iterate;
use probe::{OnFull, Probe, Sink};
use ringlog::Event;
use timely::logging::{CommChannelKind, TimelyEvent, TimelyEventBuilder};

const WORKERS: usize = 2;

#[test]
fn every_progress_channel_of_an_iterate_is_traced_whole() {
    let path = tmp_path("differential_iterate");
    let probe =
        Arc::new(Probe::builder().sink(Sink::file(&path)).on_full(OnFull::Block).workers(WORKERS).start().unwrap());
    // Per worker, the progress channels timely made (one per scope), from
    // a second consumer of the "timely" log.
    let channels: Arc<Mutex<BTreeMap<usize, BTreeSet<u32>>>> = Arc::default();
    let (p, c) = (probe.clone(), channels.clone());
    timely::execute(timely::Config::process(WORKERS), move |worker| {
        let index = worker.index();
        let a = probe::timely::Adapter::new(worker, &p).expect("probe enabled");
        let c = c.clone();
        let fwd = a.clone();
        worker.log_register().unwrap().insert::<TimelyEventBuilder, _>("timely", move |time, data| {
            for (_, e) in data.iter().flatten() {
                if let TimelyEvent::CommChannels(cc) = e {
                    if cc.kind == CommChannelKind::Progress {
                        c.lock().unwrap().entry(index).or_default().insert(cc.identifier as u32);
                    }
                }
            }
            fwd.on_timely(time, data);
        });
        a.register_common_progress(worker);
        a.register_differential(worker);
        // Collatz steps to 1 for 1..=200, in differential's iterate: a
        // join-free loop with a reduce (min) inside.
        let (mut input, done) = worker.dataflow::<u32, _, _>(|scope| {
            let (input, start) = scope.new_collection::<u64, isize>();
            let out = start.map(|x| (x, x)).iterate(|_inner, walk| {
                walk.clone()
                    .map(|(x, y)| {
                        (
                            x,
                            if y <= 1 {
                                1
                            } else if y % 2 == 0 {
                                y / 2
                            } else {
                                3 * y + 1
                            },
                        )
                    })
                    .concat(walk)
                    .reduce(|_x, s, t| t.push((*s[0].0, 1)))
            });
            (input, out.probe().0)
        });
        if index == 0 {
            (1..=200u64).for_each(|x| input.insert(x));
        }
        input.advance_to(1);
        input.flush();
        worker.step_while(|| done.less_than(input.time()));
    })
    .unwrap()
    .join();
    let stats = Arc::try_unwrap(probe).ok().expect("workers done").shutdown().unwrap();
    assert_eq!(stats.lost(), 0);

    let channels = channels.lock().unwrap().clone();
    let trace = read_trace(&std::fs::read(&path).unwrap());
    assert!(trace.error.is_none(), "{:?}", trace.error);
    // Two scopes per worker: the dataflow (u32) and the iterate
    // (Product<u32, u64>).
    for (w, chans) in &channels {
        assert_eq!(chans.len(), 2, "worker {w}: {chans:?}");
    }
    // Per (worker, channel): the sequence numbers sent, and each receive.
    let mut sent: BTreeMap<(u32, u32), Vec<u64>> = BTreeMap::new();
    let mut recvs: Vec<(u32, u32, u32, u64)> = Vec::new();
    for (w, s) in &trace.workers {
        for r in &s.records {
            match r.event() {
                Some(Event::ProgressSend { channel, seq }) => sent.entry((*w, channel)).or_default().push(seq),
                Some(Event::ProgressRecv { channel, from, seq }) => recvs.push((*w, channel, from, seq)),
                _ => {}
            }
        }
    }
    for (w, chans) in &channels {
        for ch in chans {
            // Timely numbers a worker's progress messages on a channel from
            // 0 with no gap: any message not traced would leave one.
            let seqs =
                sent.get(&(*w as u32, *ch)).unwrap_or_else(|| panic!("worker {w}: channel {ch}: no progress sent"));
            assert_eq!(*seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "worker {w} channel {ch}");
        }
    }
    // Every progress message read was sent, in the trace (none from an
    // untraced scope).
    for (w, channel, from, seq) in &recvs {
        let s =
            sent.get(&(*from, *channel)).unwrap_or_else(|| panic!("w{w} read ch {channel} from w{from}: never sent"));
        assert!(*seq < s.len() as u64, "w{w} read ch {channel} #{seq} from w{from}: not in the trace");
    }
    assert!(!recvs.is_empty());
    let _ = std::fs::remove_file(&path);
}
