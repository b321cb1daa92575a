//! A worker timely keeps no log registry for (`Worker::new(config,
//! allocator, None)`, as timely's `threadless` example builds one): timely
//! logs nothing for it, so `attach` cannot trace it. It says so on standard
//! error, naming the fix, instead of leaving an empty recording without a
//! word; a worker given a start time is traced, and so is a
//! `timely::example` program written as docs/timely.md says.
#![cfg(feature = "timely")]

mod common;

use std::process::Command;
use std::time::Instant;

use common::{read_trace, tmp_path};
use probe::{Probe, Sink};
use timely::communication::allocator::Thread;
use timely::communication::Allocator;
use timely::dataflow::operators::{Inspect, Probe as _};
use timely::dataflow::InputHandle;
use timely::worker::Worker;
use timely::WorkerConfig;

/// One worker made by hand, `start` its start time, attached, running a
/// dataflow of ten rounds; the recording's path.
fn threadless(name: &str, start: Option<Instant>) -> std::path::PathBuf {
    let path = tmp_path(name);
    let probe = Probe::builder().sink(Sink::file(&path)).start().unwrap();
    let mut worker = Worker::new(WorkerConfig::default(), Allocator::Thread(Thread::default()), start);
    probe::timely::attach(&worker, &probe);
    let mut input = InputHandle::new();
    let handle = worker.dataflow(|scope| input.to_stream(scope).container::<Vec<u64>>().inspect(|_| {}).probe().0);
    for round in 0..10u64 {
        input.send(round);
        input.advance_to(round + 1);
        while handle.less_than(input.time()) {
            worker.step();
        }
    }
    drop(input);
    drop(worker);
    probe.shutdown().unwrap();
    path
}

#[test]
fn a_worker_without_a_log_registry_is_said_and_not_traced() {
    // (The probe's line goes to this process's standard error: the body
    // runs in a child, this test's own binary, which the parent reads.)
    if std::env::var_os("PROBE_TEST_NO_REGISTRY_CHILD").is_some() {
        let path = threadless("no-registry.rlog", None);
        println!("recording={}", path.display());
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_worker_without_a_log_registry_is_said_and_not_traced", "--nocapture", "--test-threads=1"])
        .env("PROBE_TEST_NO_REGISTRY_CHILD", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("probe: worker 0 keeps no log registry") && stderr.contains("Some(std::time::Instant::now())"),
        "{stderr}"
    );
    let path = stdout.lines().find_map(|l| l.split("recording=").nth(1)).expect("the child's recording");
    let t = read_trace(&std::fs::read(path).unwrap());
    assert!(t.hello.is_some() && t.workers.is_empty(), "no worker stream: {:?}", t.workers.keys());
}

#[test]
fn a_worker_given_a_start_time_is_traced() {
    let t = read_trace(&std::fs::read(threadless("registry.rlog", Some(Instant::now()))).unwrap());
    let w = t.workers.get(&0).expect("worker 0's stream");
    assert!(!w.records.is_empty() && w.end.is_some(), "records and an End");
}

/// `timely::example(|scope| ...)` gives no worker to attach to; the same
/// program through `timely::execute_directly`, the line before its
/// dataflow (docs/timely.md), is traced: its operators and schedules.
#[test]
fn an_example_program_written_with_execute_directly_is_traced() {
    use timely::dataflow::operators::vec::ToStream;
    let path = tmp_path("example.rlog");
    let probe = std::sync::Arc::new(Probe::builder().sink(Sink::file(&path)).start().unwrap());
    let p = probe.clone();
    timely::execute_directly(move |worker| {
        probe::timely::attach(worker, &p);
        worker.dataflow::<u64, _, _>(|scope| {
            (0..10u64).to_stream(scope).inspect(|_| {});
        })
    });
    std::sync::Arc::try_unwrap(probe).ok().expect("the worker is gone").shutdown().unwrap();
    let t = read_trace(&std::fs::read(&path).unwrap());
    let w = t.workers.get(&0).expect("worker 0's stream");
    let starts = w.records.iter().filter(|r| matches!(r.event(), Some(ringlog::Event::ScheduleStart { .. }))).count();
    assert!(starts > 0 && w.end.is_some(), "{starts} schedules");
}
