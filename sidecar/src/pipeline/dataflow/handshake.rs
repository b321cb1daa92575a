//! The processes of a cluster check, before anything else crosses between
//! them, that they read each other's messages the same way.
//!
//! What crosses between the sidecar processes of a timely cluster is this
//! build's own types (fragments, report lines), serialized by timely with
//! bincode, which carries no schema: a process of another build (a host
//! upgraded before the others) misreads them and stops on a decoding panic
//! that names bytes, not builds. So every worker first sends every other
//! worker its build's *wire fingerprint*, a hash of a sample of each type
//! that crosses as bincode writes it (a field added, removed or retyped
//! changes it), and a worker that receives another fingerprint stops the
//! run with an error naming the process and both fingerprints.
//!
//! The check itself is a dataflow of its own, built first and run to its
//! end, whose message (a worker's index and its fingerprint as text) must
//! never change. (Builds from before the check have no such dataflow:
//! meeting one, a process still stops on a decoding panic.)

use std::cell::RefCell;
use std::rc::Rc;

use timely::dataflow::operators::{Exchange, Input, Inspect, Probe};
use timely::dataflow::ProbeHandle;
use timely::worker::Worker;

use super::failure::Failure;
use super::ingest_op::TimedFragment;
use super::outputs::ReportLine;
use crate::analysis::model::{
    ArrangementLevel, Busy, ChannelMeta, Counters, Fragment, GapEnd, Half, Item, Messages, MsgKind, SeqMark, Sid,
    StreamMeta,
};

/// This build's wire fingerprint: the crate's version and a hash of one
/// sample of each type that crosses between processes (every vector with
/// an element, every option set), as bincode serializes them.
/// `SIDECAR_WIRE_FINGERPRINT` replaces it: a test makes a process pretend
/// to be of another build with it.
pub(super) fn fingerprint() -> String {
    if let Ok(f) = std::env::var("SIDECAR_WIRE_FINGERPRINT") {
        return f;
    }
    let mut msgs = Messages::default();
    let g = msgs.new_group(Half::Recv, 7, 1);
    msgs.push(g, 1, 10);
    let mut meta = StreamMeta::default();
    meta.operator(1, "Map".into(), vec![0, 1]);
    meta.span(2, "span".into());
    meta.channel(ChannelMeta::default());
    let fragment = Fragment {
        stream: Some(Sid { host: 1, process: 2, worker: 3 }),
        window: 4,
        items: vec![
            Item::Busy { start: 1, end: 2, what: Busy::Operator(1) },
            Item::Gap {
                start: 2,
                end: 3,
                cause_until: 2,
                next: GapEnd::Read { from: 1, channel: 7, kind: MsgKind::Data },
            },
        ],
        msgs,
        seq_before: vec![SeqMark { half: Half::Send, channel: 7, other: 1, seq: 1, at: 5 }],
        counters: Counters { records: 1, ..Default::default() },
        faults: vec!["fault".into()],
        meta: std::sync::Arc::new(meta),
        arrangements: vec![ArrangementLevel::default()],
        realtime_offset: Some(-1),
        peers_ended: vec![1],
        other_hosts: vec![2],
        timeline: Some(3),
        silent_since: Some(4),
        packed: vec![5],
        ..Default::default()
    };
    let figures = vec![(1, 2, crate::analysis::report::ProcessFigures::default())];
    let timed = TimedFragment { host: 1, time: 2, from: 3, fragment, figures };
    let line = ReportLine {
        time: 1,
        at: 2,
        host: 3,
        window: 4,
        json: "{}".into(),
        line: "window".into(),
        lanes: Some("[]".into()),
        complete: true,
        revision: 1,
        was_complete: false,
        replaces: Some("{}".into()),
        traffic: crate::output::http::WindowTraffic::default(),
    };
    let mut bytes = bincode::serialize(&timed).expect("a fragment serializes");
    bytes.extend(bincode::serialize(&line).expect("a report line serializes"));
    format!("{}-{:08x}", env!("CARGO_PKG_VERSION"), crc32fast::hash(&bytes))
}

/// Sends this worker's fingerprint to every worker and reads theirs: `Err`
/// names the first worker of another build (its process, as `--process`
/// counts them) and both fingerprints. With one process there is nothing
/// to check.
pub(super) fn check_builds(worker: &mut Worker, local_workers: usize, failure: &Failure) -> Result<(), String> {
    let peers = worker.peers();
    if peers <= local_workers {
        return Ok(());
    }
    let ours = fingerprint();
    let got: Rc<RefCell<Vec<(u64, String)>>> = Rc::default();
    let probe: ProbeHandle<u64> = ProbeHandle::new();
    let mut input = worker.dataflow::<u64, _, _>(|scope| {
        let (input, stream) = scope.new_input::<Vec<(u64, u64, String)>>();
        let got = got.clone();
        stream
            .exchange(|x: &(u64, u64, String)| x.0)
            .inspect(move |(_, from, fp): &(u64, u64, String)| got.borrow_mut().push((*from, fp.clone())))
            .probe_with(&probe);
        input
    });
    let me = worker.index() as u64;
    for to in 0..peers as u64 {
        input.send((to, me, ours.clone()));
    }
    input.close();
    // (As the run's own steps: a peer that failed, or a connection lost,
    // ends this too.)
    super::failure::step_while(worker, failure, || probe.less_than(&1));
    let got = got.borrow();
    match got.iter().find(|(_, fp)| *fp != ours) {
        Some((from, theirs)) => Err(format!(
            "process {} of the cluster runs another sidecar build (wire fingerprint {theirs}, this one's {ours}): \
             what crosses between the processes would be misread; run the same build on every process",
            *from as usize / local_workers
        )),
        None => Ok(()),
    }
}
