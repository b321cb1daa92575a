//! More processes (timely's cluster configuration, `--processes N --process
//! I --hostfile H`): the same analysis as one process, and a failure in one
//! process ends the run in all of them instead of leaving the others
//! waiting for its progress.

mod common;

use sidecar::analysis::report::{RunTotals, WindowReport};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A hostfile for `n` processes on loopback, on ports free a moment ago.
fn hostfile(name: &str, n: usize) -> PathBuf {
    let ports: Vec<u16> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect::<Vec<_>>()
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect();
    let p = tmp(name);
    std::fs::write(&p, ports.iter().map(|p| format!("127.0.0.1:{p}\n")).collect::<String>()).unwrap();
    p
}

fn analyze(file: &Path, json: &Path, extra: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .arg("analyze")
        .arg(file)
        .args(["--window", "20ms", "-q", "--json"])
        .arg(json)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The JSON lines of a report file.
fn reports(p: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// A 4-stream trace (`{tag}.rlog`), the reports of one process with two
/// workers on it (`one-{tag}.jsonl`), and a hostfile for two processes.
fn trace_and_reference(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let file = tmp(&format!("{tag}.rlog"));
    std::fs::write(&file, common::synth_bytes(300_000, 4)).unwrap();
    let one = tmp(&format!("one-{tag}.jsonl"));
    let s = common::wait_exit(analyze(&file, &one, &["-w", "2"]), "the single process");
    assert!(s.success(), "{s}");
    (file, one, hostfile(&format!("hosts-{tag}.txt"), 2))
}

#[test]
fn two_processes_report_what_one_process_does() {
    let (file, one, hosts) = trace_and_reference("four");
    let h = hosts.to_str().unwrap();
    let (j0, j1) = (tmp("p0.jsonl"), tmp("p1.jsonl"));
    let p1 = analyze(&file, &j1, &["-w", "1", "--processes", "2", "--process", "1", "--hostfile", h]);
    let p0 = analyze(&file, &j0, &["-w", "1", "--processes", "2", "--process", "0", "--hostfile", h]);
    let (s0, s1) = (common::wait_exit(p0, "process 0"), common::wait_exit(p1, "process 1"));
    assert!(s0.success() && s1.success(), "{s0} {s1}");

    // Worker 0 (in process 0) prints every window, in order; process 1
    // analyzes its share of them and prints none.
    let single = reports(&one);
    assert!(single.len() >= 5, "{} windows", single.len());
    assert_eq!(reports(&j0), single);
    assert!(reports(&j1).is_empty());
    for p in [&file, &one, &j0, &j1, &hosts] {
        let _ = std::fs::remove_file(p);
    }
}

/// A process of another build (its wire fingerprint made to differ, as a
/// host upgraded before the others would have it) is refused by name, by
/// both processes, before any fragment crosses: not a decoding panic.
#[test]
fn processes_of_different_builds_refuse_each_other_by_name() {
    let file = tmp("builds.rlog");
    std::fs::write(&file, common::synth_bytes(50_000, 2)).unwrap();
    let hosts = hostfile("hosts-builds.txt", 2);
    let h = hosts.to_str().unwrap();
    let start = |p: &str, fingerprint: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sidecar"));
        c.arg("analyze").arg(&file).args(["-q", "--json", "/dev/null", "-w", "1", "--processes", "2"]);
        c.args(["--process", p, "--hostfile", h]).stdout(Stdio::null()).stderr(Stdio::piped());
        if let Some(f) = fingerprint {
            c.env("SIDECAR_WIRE_FINGERPRINT", f);
        }
        c.spawn().unwrap()
    };
    let (p0, p1) = (start("0", None), start("1", Some("0.0.0-another")));
    let (o0, o1) = (p0.wait_with_output().unwrap(), p1.wait_with_output().unwrap());
    let (e0, e1) = (String::from_utf8_lossy(&o0.stderr), String::from_utf8_lossy(&o1.stderr));
    assert_eq!((o0.status.code(), o1.status.code()), (Some(2), Some(2)), "{e0}\n{e1}");
    assert!(e0.contains("process 1 of the cluster runs another sidecar build (wire fingerprint 0.0.0-another"), "{e0}");
    assert!(
        e1.contains("process 0 of the cluster runs another sidecar build") && e1.contains("this one's 0.0.0-another"),
        "{e1}"
    );
    assert!(!e0.contains("panicked") && !e1.contains("panicked"), "{e0}\n{e1}");
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&hosts);
}

#[test]
fn a_process_whose_output_fails_leaves_no_silent_gap_in_the_reports() {
    if std::fs::OpenOptions::new().write(true).open("/dev/full").is_err() {
        return;
    }
    let (file, one, hosts) = trace_and_reference("four-full");
    let h = hosts.to_str().unwrap();
    let (j0, j1) = (tmp("p0-full.jsonl"), tmp("p1-full.jsonl"));
    // Process 1 cannot write its Perfetto trace: it stops reading its share
    // and exits 2, but still analyzes the windows it owns for process 0.
    let p1 = analyze(
        &file,
        &j1,
        &["-w", "1", "--processes", "2", "--process", "1", "--hostfile", h, "--perfetto", "/dev/full"],
    );
    let p0 = analyze(&file, &j0, &["-w", "1", "--processes", "2", "--process", "0", "--hostfile", h]);
    let (s0, s1) = (common::wait_exit(p0, "process 0"), common::wait_exit(p1, "process 1"));
    assert_eq!(s1.code(), Some(2), "{s1}");
    assert_ne!(s0.code(), Some(2), "{s0}");
    let (single, got) = (reports(&one), reports(&j0));
    assert_eq!(got.len(), single.len(), "every window is reported");
    // A window is either what one process reports, or marked incomplete:
    // never complete with streams left out.
    for (g, s) in got.iter().zip(&single) {
        assert!(g == s || g["complete"] == false, "{g}");
    }
    for p in [&file, &one, &j0, &j1, &hosts] {
        let _ = std::fs::remove_file(p);
    }
}

/// Children killed when the test ends, whichever way.
struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            c.kill().ok();
            c.wait().ok();
        }
    }
}

/// Established TCP connections on loopback with `port` at either end
/// (/proc/net/tcp: local and remote address columns, state 01).
fn established(port: u16) -> usize {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let hex = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[3] == "01" && (f[1].ends_with(&hex) || f[2].ends_with(&hex))
        })
        .count()
}

#[test]
fn a_process_that_dies_ends_the_others_with_an_error() {
    // Three live processes (`run` never ends on its own), connected in a
    // cluster; process 0 is killed, as by the OOM killer or a lost machine.
    let n = 3;
    let hosts = hostfile("crash-hosts.txt", n);
    let ports: Vec<u16> = std::fs::read_to_string(&hosts)
        .unwrap()
        .lines()
        .map(|l| l.rsplit(':').next().unwrap().parse().unwrap())
        .collect();
    let errs: Vec<PathBuf> = (0..n).map(|i| tmp(&format!("crash{i}.err"))).collect();
    let mut kids = Kill(Vec::new());
    for i in (0..n).rev() {
        let sock = tmp(&format!("crash{i}.sock"));
        let _ = std::fs::remove_file(&sock);
        let child = Command::new(env!("CARGO_BIN_EXE_sidecar"))
            .arg("run")
            .arg(format!("--listen=unix:{}", sock.display()))
            .args(["--window", "100ms", "-w", "1", "--processes", &n.to_string(), "--process", &i.to_string()])
            .arg("--hostfile")
            .arg(&hosts)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&errs[i]).unwrap())
            .spawn()
            .unwrap();
        kids.0.push(child);
    }
    kids.0.reverse();
    // Every pair connected: process i accepts from each j > i on its port.
    let t = Instant::now();
    while (0..n).map(|i| established(ports[i])).sum::<usize>() < n * (n - 1) {
        for (i, k) in kids.0.iter_mut().enumerate() {
            if let Some(s) = k.try_wait().unwrap() {
                panic!(
                    "process {i} ended ({s}) before the cluster connected: {}",
                    std::fs::read_to_string(&errs[i]).unwrap()
                );
            }
        }
        assert!(t.elapsed() < Duration::from_secs(60), "the cluster did not connect within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    kids.0[0].kill().unwrap();
    kids.0[0].wait().unwrap();
    for (i, (kid, err_path)) in kids.0.iter_mut().zip(&errs).enumerate().skip(1) {
        let t = Instant::now();
        let status = loop {
            if let Some(s) = kid.try_wait().unwrap() {
                break s;
            }
            assert!(t.elapsed() < Duration::from_secs(60), "process {i} still runs 60 s after process 0 was killed");
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = std::fs::read_to_string(err_path).unwrap();
        // Not 101 (a panic out of the run) nor 134 (a panic inside an unwind).
        assert_eq!(status.code(), Some(2), "process {i}: {status}; stderr:\n{err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(last.starts_with("sidecar: error: lost the connection to another process of the cluster"), "{err}");
        // The broken connection's panic is printed, not those it causes.
        assert_eq!(err.matches("timely communication error").count(), 2, "the panic and the error line: {err}");
        assert!(!err.contains("MergeQueue poisoned") && !err.contains("Send thread panic"), "{err}");
    }
}

/// `n` probe workers that pass messages around for `steps` steps of ~0.5 ms
/// each, traced into `sock`; returns the records written.
fn probe_run(sock: &Path, n: usize, steps: u64) -> u64 {
    let probe = probe::Probe::builder()
        .sink(probe::Sink::unix(sock))
        .workers(n)
        .program("cluster")
        .start()
        .expect("probe start");
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| std::sync::mpsc::channel::<(usize, u64)>()).unzip();
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let mut w = probe.worker(i);
            let txs = txs.clone();
            std::thread::spawn(move || {
                w.operator(1, "Exchange", &[0, 1]);
                w.operator(2, "Count", &[0, 2]);
                w.channel(7, (1, 0), (2, 0));
                let mut seq = vec![0u64; n];
                for _ in 0..steps {
                    w.schedule_start(1);
                    for (to, tx) in txs.iter().enumerate().filter(|(to, _)| *to != i) {
                        w.message_send(7, to, seq[to], 10);
                        let _ = tx.send((i, seq[to]));
                        seq[to] += 1;
                    }
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_micros(300) {}
                    w.schedule_stop(1);
                    w.schedule_start(2);
                    while let Ok((from, q)) = rx.try_recv() {
                        w.message_recv(7, from, q, 10);
                    }
                    w.schedule_stop(2);
                    w.step();
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        })
        .collect();
    drop(txs);
    for h in handles {
        h.join().unwrap();
    }
    probe.shutdown().expect("probe shutdown").workers.iter().map(|w| w.written).sum()
}

/// `GET path` on `addr`: the response's body.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else { return String::new() };
    let _ = write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.split_once("\r\n\r\n").map_or(String::new(), |(_, body)| body.to_string())
}

/// The OpenMetrics samples whose series (name and labels as written)
/// begins with `series`, summed; 0 when there are none.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics.lines().filter(|l| l.starts_with(series)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

/// Ctrl-C to every process of a live cluster (each goes on until its
/// own inputs end and the others' windows are done); their exit statuses
/// and standard errors.
fn interrupt_all(children: Vec<Child>) -> Vec<(std::process::ExitStatus, String)> {
    for c in &children {
        Command::new("kill").args(["-INT", &c.id().to_string()]).status().unwrap();
    }
    children
        .into_iter()
        .enumerate()
        .map(|(i, mut child)| {
            let mut err = String::new();
            let mut pipe = child.stderr.take().unwrap();
            let status = common::wait_exit(child, &format!("process {i}"));
            std::io::Read::read_to_string(&mut pipe, &mut err).unwrap();
            (status, err)
        })
        .collect()
}

#[test]
fn a_window_owner_in_another_process_receives_fragments_never_raw_records() {
    // Two live sidecars of one cluster, one per "host": the probes connect
    // to process 1 only. Windows are owned by both workers in turn, so
    // process 0 analyzes about half of them without having read a byte of
    // their streams: it accepted no connection and decoded no record (its
    // closing line: 0 records), and what reached it were process 1's
    // fragments, which its /metrics count against the windows' input.
    let hosts = hostfile("traffic-hosts.txt", 2);
    let http = format!("127.0.0.1:{}", TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port());
    let socks = [tmp("traffic0.sock"), tmp("traffic1.sock")];
    let json = tmp("traffic0.jsonl");
    let start = |i: usize, extra: &[&str]| {
        let _ = std::fs::remove_file(&socks[i]);
        Command::new(env!("CARGO_BIN_EXE_sidecar"))
            .arg("run")
            .arg(format!("--listen=unix:{}", socks[i].display()))
            .args(["--window", "100ms", "-w", "1", "--processes", "2", "--process", &i.to_string()])
            .arg("--hostfile")
            .arg(&hosts)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let p1 = start(1, &[]);
    let p0 = start(0, &["--http", &http, "--json", json.to_str().unwrap()]);
    common::wait_for(&socks[0]);
    common::wait_for(&socks[1]);
    let records = probe_run(&socks[1], 2, 2000);
    // The windows out (the last ones close when the clocks pass them; on
    // a loaded machine that can take a while).
    let t = Instant::now();
    let mut metrics = String::new();
    // (Read while it is written: a line not yet whole is not counted.)
    let in_windows = |json: &std::path::Path| -> u64 {
        let text = std::fs::read_to_string(json).unwrap_or_default();
        let reps = text.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
        reps.flat_map(|r| r["streams"].as_array().cloned().unwrap_or_default())
            .map(|s| s["records"].as_u64().unwrap_or(0))
            .sum()
    };
    while t.elapsed() < Duration::from_secs(30) {
        metrics = http_get(&http, "/metrics");
        if sample(&metrics, "sidecar_records_total{stream=") > 0.0
            && sample(&metrics, "sidecar_fragment_bytes_total{from=\"other_processes\"}") > 0.0
            && sample(&metrics, "sidecar_windows_total{completeness=\"complete\"}") >= 6.0
            && in_windows(&json) * 10 >= records * 9
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut done = interrupt_all(vec![p0, p1]).into_iter();
    let ((s0, e0), (s1, e1)) = (done.next().unwrap(), done.next().unwrap());
    assert!(s0.success() && s1.success(), "{s0}: {e0}\n{s1}: {e1}");

    // Process 0 read nothing; process 1 read every record.
    assert!(e0.contains("analyzed 0 records (0 B) live"), "{e0}");
    assert!(e1.contains(&format!("analyzed {records} records")), "{e1}");
    // Its reports hold the probes' records all the same, and their
    // operators' names: a stream's metadata crossed to it once, and its
    // later fragments came without it (`meta_kept`).
    let in_windows = in_windows(&json);
    assert!(in_windows * 10 >= records * 9, "{in_windows} of {records} records in the windows");
    let text = std::fs::read_to_string(&json).unwrap();
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(|r| r["critical_path"]["top_operators"].as_array().cloned().unwrap_or_default())
        .map(|o| o["name"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(names.len() >= 6, "{names:?}");
    assert!(names.iter().all(|n| n == "Exchange" || n == "Count"), "{names:?}");
    // What crossed to it were fragments, counted against the windows'
    // input; none crossed inside a process of one worker.
    assert_eq!(sample(&metrics, "sidecar_connections_total "), 0.0, "{metrics}");
    let input = sample(&metrics, "sidecar_window_input_bytes_total ");
    let other = sample(&metrics, "sidecar_fragment_bytes_total{from=\"other_processes\"}");
    assert!(input > 0.0 && other > 0.0, "{metrics}");
    assert_eq!(sample(&metrics, "sidecar_fragment_bytes_total{from=\"this_process\"}"), 0.0, "{metrics}");
    assert!(sample(&metrics, "sidecar_window_crossing_ratio_count ") >= 6.0, "{metrics}");
    // Process 0 sums every window and the probe's figures, though process 1
    // analyzed some windows and read every frame: the probe's final figures
    // reach it, though they come after the stream's last window.
    for e in [&e0, &e1] {
        assert!(
            e.contains(&format!("the probe's figures from its stream (1 process, final): {records} records written")),
            "{e}"
        );
    }
    assert!(e0.contains("tracing cost the worker threads"), "{e0}");
    // Process 1 says what it sent, against what it read, and how many
    // windows it analyzed for process 0.
    assert!(e1.contains("to other processes") && e1.contains("× the bytes read"), "{e1}");
    assert!(e1.contains("windows analyzed here, reported by process 0"), "{e1}");
    for p in [&json, &hosts] {
        let _ = std::fs::remove_file(p);
    }
}

/// The printing process sums the run's totals from the windows' JSON lines
/// (their owners may be other processes): a report read back from its JSON
/// is the same report, and the totals of the reports read back are the
/// totals of the reports themselves.
#[test]
fn a_report_read_back_from_its_json_gives_the_same_totals() {
    let bytes = common::synth_bytes(200_000, 4);
    for width in [2_000_000, 20_000_000] {
        let (reps, errors) = sidecar::pipeline::analyze_bytes_as_reported(&[("t", &bytes)], width);
        assert!(errors.is_empty() && reps.len() > 2, "{errors:?}");
        let (mut direct, mut read_back) = (RunTotals::default(), RunTotals::default());
        for r in &reps {
            let json = serde_json::to_string(r).unwrap();
            let back: WindowReport = serde_json::from_str(&json).expect("a report's JSON reads back");
            assert_eq!(serde_json::to_string(&back).unwrap(), json);
            direct.add(r);
            read_back.add(&back);
        }
        assert!(direct.critical_path_ns > 0 && !direct.waits.is_empty());
        assert_eq!(format!("{read_back:?}"), format!("{direct:?}"));
    }
}
