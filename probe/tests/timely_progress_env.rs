//! The progress logs `attach` registers (each costs a flush call at every
//! worker step): learnt from the scopes of the first dataflow built, or
//! the fixed list of `PROBE_TIMELY_PROGRESS`. Its own test binary: the
//! variable is process-wide.
#![cfg(feature = "timely")]

mod common;

use std::sync::{Arc, Mutex};

use common::tmp_path;
use probe::{Probe, Sink};

/// The timestamp types of the progress logs among log `names`, as
/// `PROBE_TIMELY_PROGRESS` names them (`Product<u32,u64>`).
fn progress_types(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter_map(|n| n.strip_prefix("timely/progress/"))
        .map(|t| {
            t.replace("timely::order::product::", "")
                .replace("differential_dataflow::dynamic::pointstamp::", "")
                .replace("core::time::", "")
                .replace(' ', "")
        })
        .collect()
}

/// The log names a worker has after `attach`, with `PROBE_TIMELY_PROGRESS`
/// set to `list` (or unset).
fn names_after_attach(list: Option<&str>) -> Vec<String> {
    names_after(list, |_| {})
}

/// The log names a worker has after `attach` and `build`, with
/// `PROBE_TIMELY_PROGRESS` set to `list` (or unset).
fn names_after(list: Option<&str>, build: fn(&mut timely::worker::Worker)) -> Vec<String> {
    // The tests of this binary run in parallel; the variable is shared.
    static ENV: Mutex<()> = Mutex::new(());
    let _env = ENV.lock().unwrap_or_else(|p| p.into_inner());
    match list {
        Some(v) => std::env::set_var("PROBE_TIMELY_PROGRESS", v),
        None => std::env::remove_var("PROBE_TIMELY_PROGRESS"),
    }
    let path = tmp_path("timely-progress-env.ringlog");
    let probe = Arc::new(Probe::builder().sink(Sink::file(&path)).workers(1).start().unwrap());
    let names: Arc<Mutex<Vec<String>>> = Arc::default();
    let (p, n) = (probe.clone(), names.clone());
    timely::execute(timely::Config::thread(), move |worker| {
        probe::timely::attach(worker, &p);
        build(worker);
        let mut got: Vec<String> = worker.log_register().unwrap().names().map(str::to_string).collect();
        got.sort();
        *n.lock().unwrap() = got;
    })
    .unwrap()
    .join();
    std::env::remove_var("PROBE_TIMELY_PROGRESS");
    drop(probe);
    let _ = std::fs::remove_file(&path);
    Arc::try_unwrap(names).unwrap().into_inner().unwrap()
}

#[test]
fn progress_logs_follow_the_variable() {
    let all = names_after_attach(None);
    let n = probe::timely::common_progress_names().count();
    assert_eq!(all.len(), 1 + 2 * n, "the timely log, {n} progress logs and their summary logs: {all:?}");
    assert!(all.iter().any(|n| n == "timely/progress/u64"), "{all:?}");
    let some = names_after_attach(Some("u64, Product<u64, u32>"));
    let want = [
        "timely".to_string(),
        "timely/progress/timely::order::product::Product<u64, u32>".to_string(),
        "timely/progress/u64".to_string(),
    ];
    assert_eq!(some, want);
    assert_eq!(names_after_attach(Some("")), ["timely"]);
    // An unknown name: learnt, as without the variable.
    assert_eq!(names_after_attach(Some("u64,u128")), all);
}

/// Once the first dataflow is built, only the progress logs of the types
/// its scopes use are left, with one level of nesting more (a later
/// `iterate`), and no summary log.
#[test]
fn after_the_first_dataflow_only_the_types_its_scopes_use_are_left() {
    use timely::dataflow::operators::Inspect;
    let got = names_after(None, |worker| {
        worker.dataflow::<u32, _, _>(|scope| {
            scope.iterative::<u64, _, _>(|inner| {
                timely::dataflow::operators::vec::ToStream::to_stream(0..3u8, inner).inspect(|_| {});
            });
        });
    });
    let progress = progress_types(&got);
    // The dataflow is u32, its iterative scope Product<u32,u64>; kept one
    // level deeper: Product<u32,B> and Product<Product<u32,u64>,B> for B in
    // u32, u64, usize. No other plain type: no scope uses one.
    let mut want = vec![
        "u32",
        "Product<u32,u32>",
        "Product<u32,u64>",
        "Product<u32,usize>",
        "Product<Product<u32,u64>,u32>",
        "Product<Product<u32,u64>,u64>",
        "Product<Product<u32,u64>,usize>",
    ];
    want.sort();
    let mut progress = progress;
    progress.sort();
    assert_eq!(progress, want, "{got:?}");
    assert!(!got.iter().any(|n| n.starts_with("timely/summary/")), "{got:?}");
}

/// Each name of the documented list registers the log of its own type (the
/// names and the registrations are two lists in the adapter, kept in step).
#[test]
fn each_name_registers_its_own_type() {
    for name in probe::timely::common_progress_names() {
        let got = names_after_attach(Some(&name));
        let progress = progress_types(&got);
        assert_eq!(progress, [name.clone()], "{name}: {got:?}");
    }
}

/// A scope nested as differential's graph algorithms nest theirs (`scc`:
/// `usize` rounds inside `usize` rounds inside the dataflow's time) has
/// its progress log kept once the first dataflow is built: its waits are
/// not read as waiting for input.
#[test]
fn scopes_nested_as_differentials_scc_nests_them_are_traced() {
    use timely::dataflow::operators::Inspect;
    use timely::order::Product;
    let got = names_after(None, |worker| {
        worker.dataflow::<u32, _, _>(|scope| {
            scope.scoped::<Product<u32, usize>, _, _>("StronglyConnected", |outer| {
                outer.scoped::<Product<Product<u32, usize>, usize>, _, _>("Propagate", |inner| {
                    timely::dataflow::operators::vec::ToStream::to_stream(0..3u8, inner).inspect(|_| {});
                });
            });
        });
    });
    let progress = progress_types(&got);
    for used in ["u32", "Product<u32,usize>", "Product<Product<u32,usize>,usize>"] {
        assert!(progress.iter().any(|p| p == used), "{used}: {got:?}");
    }
}
