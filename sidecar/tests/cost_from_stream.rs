//! What tracing cost, from the stream itself: a program that prints
//! nothing (its standard error discarded, or a program calling the probe
//! directly) still gets its cost reported by `sidecar watch`, `run` and
//! `analyze`, with the figures its probe counted.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;
use sidecar::output::watch::ProbeLine;

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");
const SKEW: &[&str] = &["-w", "2", "--epochs", "3", "--records", "5000", "--work", "256"];

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-cost-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The `probe:` line the program wrote to `file` (its standard error, which
/// the sidecar never saw).
fn probe_line_in(file: &std::path::Path) -> ProbeLine {
    probe_line_in_text(&std::fs::read_to_string(file).unwrap())
}

/// `watch` on a command whose standard error goes to a file: the summary's
/// cost is there, from the stream, and its figures are the probe's own
/// (its `probe:` line, which the sidecar never read).
#[test]
fn watch_reports_the_cost_of_a_program_whose_stderr_it_never_sees() {
    let (summary, err) = (tmp("watch-summary.json"), tmp("watch-skew.stderr"));
    let skew = common::skew();
    let cmd = format!("exec {} {} 2>{}", skew.display(), SKEW.join(" "), err.display());
    let o = Command::new(BIN)
        .args(["watch", "-q", "--window", "50ms", "--summary-json", summary.to_str().unwrap(), "--", "sh", "-c", &cmd])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    assert!(!said.contains("no probe figures"), "{said}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let c = &s["cost"];
    assert_eq!(c["source"], "stream", "{s}");
    assert_eq!(c["source_words"], "the probe's figures from its stream (1 process, final)", "{s}");
    let mine = probe_line_in(&err);
    let got = &s["probe_line"];
    for k in ["workers", "produced", "written", "lost", "elided", "local", "engine_events", "engine_flushes"] {
        let want = serde_json::to_value(&mine).unwrap()[k].clone();
        assert!(want.as_u64().is_some(), "{k}: {mine:?}");
        assert_eq!(got[k], want, "{k}: stream {got} against the probe's line {mine:?}");
    }
    assert_eq!(c["records"].as_u64(), mine.written);
    // Times: the line prints them to a µs; the writer's CPU and the bytes
    // went on after the last Stats frame (it and the End frames).
    for (k, want) in [("adapter_ms", mine.adapter_ms), ("engine_log_ms", mine.engine_log_ms)] {
        let (got, want) = (got[k].as_f64().unwrap(), want.unwrap());
        assert!((got - want).abs() <= 0.0011, "{k}: {got} against {want}");
    }
    let cpu = c["writer_cpu_ms"].as_f64().expect("the writer's CPU, from the stream");
    assert!(cpu > 0.0 && cpu <= mine.writer_cpu_ms.unwrap() + 0.05, "{cpu} against {mine:?}");
    let bytes = c["bytes"].as_u64().unwrap();
    assert!(bytes <= mine.bytes.unwrap() && mine.bytes.unwrap() - bytes < 1000, "{bytes} against {mine:?}");
    assert!(c["worker_threads_ms"].as_f64().unwrap() > 0.0, "{s}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("  figures: the probe's figures from its stream (1 process, final)"), "{text}");
    assert!(text.contains(c["account"].as_str().unwrap()), "{text}");
}

/// `run`: a program that prints nothing (its standard error discarded)
/// connects; at the end the sidecar says what its tracing cost.
#[test]
fn run_says_the_cost_of_a_program_that_prints_nothing() {
    let sock = tmp("run.sock");
    let _ = std::fs::remove_file(&sock);
    let sidecar = common::live_sidecar(&sock, &["-q", "--window", "50ms"]);
    let st = Command::new(common::skew())
        .args(SKEW)
        .env("PROBE_SINK", format!("unix:{}", sock.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    // (The last frames are in the socket when the program has exited.)
    std::thread::sleep(std::time::Duration::from_millis(300));
    Command::new("kill").args(["-INT", &sidecar.id().to_string()]).status().unwrap();
    let o = sidecar.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    let account = said.lines().find(|l| l.starts_with("sidecar: tracing cost the worker threads ~")).expect(&said);
    assert!(account.ends_with("(measured, with the engine's logging)"), "{said}");
    let figures = said.lines().find(|l| l.contains("the probe's figures from its stream")).expect(&said);
    assert!(figures.contains("(1 process, final)") && figures.contains(" 0 lost"), "{figures}");
    assert!(figures.contains("writer thread CPU ") && !figures.contains("CPU unknown"), "{figures}");
}

/// `analyze` on a file a program wrote through the probe's API (no
/// adapter, nothing printed): the account and the figures are the probe's
/// own counters, exactly.
#[test]
fn analyze_reports_the_figures_the_probe_counted() {
    let file = tmp("direct.rlog");
    let probe = probe::Probe::builder().sink(probe::Sink::file(&file)).workers(2).start().unwrap();
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let mut w = probe.worker(i);
            std::thread::spawn(move || {
                w.operator(1, "Work", &[0, 1]);
                for seq in 0..5000u64 {
                    w.schedule_start(1);
                    w.message_send(7, 1 - i, seq, 3);
                    w.schedule_stop(1);
                    w.schedule_start(1);
                    w.schedule_stop(1); // elided
                    w.step();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let s = probe.shutdown().unwrap();
    assert!(s.stats_frames >= 1 && s.written() > 10_000 && s.elided() >= 9_000, "{s:?}");
    let o = Command::new(BIN).args(["analyze", "-q", "--window", "10ms", file.to_str().unwrap()]).output().unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{said}");
    let want = format!(
        "sidecar: the probe's figures from its stream (1 process, final): {} records written, 0 lost, {} schedules \
         elided",
        s.written(),
        s.elided()
    );
    assert!(said.contains(&want), "want {want:?} in\n{said}");
    // No adapter: the pushes are estimated.
    assert!(said.contains("sidecar: tracing cost the worker threads ~") && said.contains("(estimated)"), "{said}");
    // The file's frames, in `dump`: the last Stats frame, by name.
    let o = Command::new(BIN).args(["dump", "--max-records", "0", file.to_str().unwrap()]).output().unwrap();
    let dump = String::from_utf8_lossy(&o.stdout);
    let last = dump.lines().filter(|l| l.starts_with("Stats #")).last().expect(&dump);
    assert!(last.contains(" last ") && last.contains(&format!("Written={}", s.written())), "{last}");
    let _ = std::fs::remove_file(&file);
}

/// A probe that sends no figures (as older probes; here turned off with
/// `PROBE_STATS=off`): `watch` falls back on its `probe:` line on the
/// command's standard error, and says so.
#[test]
fn watch_falls_back_on_the_probe_line_of_a_probe_that_sends_no_figures() {
    let summary = tmp("watch-fallback.json");
    let skew = common::skew();
    let mut args = vec!["watch", "-q", "--window", "50ms", "--summary-json", summary.to_str().unwrap(), "--"];
    args.push(skew.to_str().unwrap());
    args.extend(SKEW);
    let o = Command::new(BIN).args(&args).env("PROBE_STATS", "off").output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let c = &s["cost"];
    assert_eq!(c["source"], "stderr", "{s}");
    assert!(c["source_words"].as_str().unwrap().contains("`probe:` line on stderr"), "{s}");
    let mine = probe_line_in_text(&String::from_utf8_lossy(&o.stderr));
    assert_eq!(c["records"].as_u64(), mine.written, "{s}");
    assert_eq!(c["writer_cpu_ms"].as_f64(), mine.writer_cpu_ms, "{s}");
}

fn probe_line_in_text(text: &str) -> ProbeLine {
    text.lines().find_map(ProbeLine::parse).unwrap_or_else(|| panic!("no probe: line in {text}"))
}
