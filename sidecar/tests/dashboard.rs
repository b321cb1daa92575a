//! `--http` end to end on the `skew` workload (issue 33): the dashboard as
//! a real browser renders it (Debian's chromium, headless, driven over the
//! DevTools protocol), and `/metrics` read by a parser of the Prometheus
//! text format written here, against the JSON reports of the same run.
//!
//! The browser test needs chromium (`apt-get install -y chromium`; `.ci/run`
//! installs it): without it, it says so loudly and passes. It saves the
//! screenshot the browser took to `target/dashboard.png`, and to
//! `docs/dashboard.png` with `SIDECAR_SCREENSHOT=docs`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

mod common;
use common::{profile_dir, skew};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// `sidecar watch --http 127.0.0.1:0` on skew (2 workers, 250 ms windows),
/// its JSON lines into `json`: the process and the address it printed.
fn watch_skew(epochs: u32, json: &Path) -> (Child, String) {
    let _ = std::fs::remove_file(json);
    let mut child = Command::new(BIN)
        .args(["watch", "--window", "250ms", "-q", "--http", "127.0.0.1:0", "--http-windows", "1000"])
        .args(["--json", json.to_str().unwrap(), "--"])
        .arg(skew())
        .args(["-w", "2", "--epochs", &epochs.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut addr = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("sidecar: dashboard on http://") {
            addr = Some(rest.split('/').next().unwrap().to_string());
            break;
        }
    }
    // The rest of its standard error (skew's lines) is drained, not kept.
    std::thread::spawn(move || for _ in lines {});
    (child, addr.expect("sidecar watch printed the dashboard's address"))
}

/// A GET over a fresh connection: (status, content type, body).
fn get(addr: &str, path: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    // (To the end of the body: its Content-Length, or the connection's
    // end; chromium's DevTools server keeps the connection open.)
    let (mut raw, mut buf) = (Vec::new(), [0u8; 65536]);
    let mut want: Option<usize> = None;
    loop {
        if let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
            let len = head.lines().find_map(|l| l.strip_prefix("content-length:")?.trim().parse::<usize>().ok());
            want = len.map(|n| split + 4 + n);
        }
        if want.is_some_and(|w| raw.len() >= w) {
            break;
        }
        match s.read(&mut buf).unwrap() {
            0 => break,
            n => raw.extend_from_slice(&buf[..n]),
        }
    }
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let ctype = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type:").map(|v| v.trim().to_string()))
        .unwrap_or_default();
    (status, ctype, raw[split + 4..].to_vec())
}

fn get_text(addr: &str, path: &str) -> String {
    let (status, _, body) = get(addr, path);
    assert_eq!(status, 200, "GET {path}");
    String::from_utf8(body).unwrap()
}

// ---------------------------------------------------------------------------
// The Prometheus text format, parsed here (not with the library that wrote it).

/// A sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses exposition text: `# ...` lines skipped, each other line
/// `name{label="value",...} number` (escapes `\\`, `\"`, `\n` in values).
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let name_end = line.find(['{', ' ']).expect("a sample line");
        let name = line[..name_end].to_string();
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(r) => parse_labels(r),
            None => (BTreeMap::new(), line[name_end..].to_string()),
        };
        let value = match rest.split_whitespace().next().expect("a value") {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("a number: {line}")),
        };
        out.push(Sample { name, labels, value });
    }
    out
}

/// `a="x",b="y"} rest` → the labels and the rest.
fn parse_labels(s: &str) -> (BTreeMap<String, String>, String) {
    let c: Vec<char> = s.chars().collect();
    let (mut i, mut labels) = (0, BTreeMap::new());
    loop {
        while c[i] == ',' || c[i] == ' ' {
            i += 1;
        }
        if c[i] == '}' {
            break;
        }
        let k0 = i;
        while c[i] != '=' {
            i += 1;
        }
        let key: String = c[k0..i].iter().collect();
        assert_eq!(c[i + 1], '"', "a quoted label value");
        i += 2;
        let mut value = String::new();
        while c[i] != '"' {
            if c[i] == '\\' {
                i += 1;
                value.push(if c[i] == 'n' { '\n' } else { c[i] });
            } else {
                value.push(c[i]);
            }
            i += 1;
        }
        i += 1;
        labels.insert(key, value);
    }
    (labels, c[i + 1..].iter().collect())
}

fn sum(samples: &[Sample], name: &str, filter: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && filter.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .map(|s| s.value)
        .sum()
}

#[test]
fn the_exposition_parser_reads_labels_escapes_and_infinities() {
    let s = parse_exposition(
        "# HELP x y\nx_total{a=\"1\",b=\"q\\\"uo\\\\te\"} 2.5\nh_bucket{le=\"+Inf\"} 3\nplain 7\n# EOF\n",
    );
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].labels["b"], "q\"uo\\te");
    assert_eq!(s[0].value, 2.5);
    assert_eq!(s[1].labels["le"], "+Inf");
    assert_eq!(s[2], Sample { name: "plain".into(), labels: BTreeMap::new(), value: 7.0 });
}

/// `/metrics` and `/api/windows` read while nothing changed in between
/// (the windows counter is the same before and after): the samples and
/// the windows.
fn consistent_scrape(addr: &str) -> (Vec<Sample>, Vec<Value>) {
    for _ in 0..50 {
        let before = parse_exposition(&get_text(addr, "/metrics"));
        let windows: Vec<Value> = serde_json::from_str(&get_text(addr, "/api/windows?since=0")).unwrap();
        let after = parse_exposition(&get_text(addr, "/metrics"));
        let n = |s: &[Sample]| sum(s, "sidecar_windows_total", &[]);
        if n(&before) == n(&after) && n(&before) == windows.len() as f64 && windows.len() >= 3 {
            return (after, windows);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no quiet moment to scrape /metrics and /api/windows together");
}

#[test]
fn metrics_agree_with_the_json_reports_of_the_same_run() {
    let json = tmp("metrics.jsonl");
    let (mut child, addr) = watch_skew(60, &json);
    std::thread::sleep(Duration::from_millis(1500));
    let (samples, windows) = consistent_scrape(&addr);
    let (_, ctype, _) = get(&addr, "/metrics");
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    // /api/windows gives the --json objects themselves: the file's, each
    // window as one of its reports (a revision replaces a window's earlier
    // report, docs/json.md; one written after the scrape is not in it
    // yet), in the order the windows were first reported.
    let mut reports: Vec<Vec<Value>> = Vec::new();
    for line in std::fs::read_to_string(&json).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        match reports.iter_mut().find(|r| r[0]["host"] == v["host"] && r[0]["window"] == v["window"]) {
            Some(r) => r.push(v),
            None => reports.push(vec![v]),
        }
    }
    assert!(reports.len() >= windows.len());
    for (w, r) in windows.iter().zip(&reports) {
        assert!(r.contains(w), "window {} on the page is none of its {} reports in the file", w["window"], r.len());
    }
    let summary: Value = serde_json::from_str(&get_text(&addr, "/api/summary")).unwrap();
    assert_eq!(summary["exit_status"], Value::Null, "the run is still going");
    assert!(summary["cost"]["records"].as_u64().unwrap() > 0, "{summary}");
    // One cost account: the summary's, and /metrics' figure of it.
    assert!(summary["cost"]["account"].as_str().unwrap().starts_with("tracing cost the worker threads"), "{summary}");
    let text = get_text(&addr, "/metrics");
    assert!(text.contains("sidecar_tracing_cost_seconds{part=\"worker_threads\"}"), "{text}");
    // The probe's figures arrive in its stream while it runs (about once a
    // second): the live account takes them, with the writer thread's CPU.
    let t = std::time::Instant::now();
    let summary = loop {
        let s: Value = serde_json::from_str(&get_text(&addr, "/api/summary")).unwrap();
        if s["cost"]["source"] == "stream" || t.elapsed() > Duration::from_secs(10) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(summary["cost"]["source"], "stream", "{summary}");
    assert!(summary["cost"]["writer_cpu_ms"].as_f64().is_some_and(|ms| ms > 0.0), "{summary}");
    let text = get_text(&addr, "/metrics");
    assert!(text.contains("sidecar_tracing_cost_seconds{part=\"writer_thread\"}"), "{text}");
    // A query not understood is refused, saying why.
    let (status, _, body) = get(&addr, "/api/windows?since=abc");
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("since=abc: expected a window number"));
    // The Perfetto download: a trace Perfetto's own bindings decode.
    let (status, _, trace) = get(&addr, "/perfetto");
    assert_eq!(status, 200);
    {
        use protobuf::Message as _;
        let t = perfetto_protos::trace::Trace::parse_from_bytes(&trace).expect("a Perfetto trace");
        assert!(t.packet.len() > 10, "{} packets", t.packet.len());
        assert!(trace.windows(7).any(|w| w == b"Consume"), "the operators are named");
    }
    check_graph_api(&addr);
    let _ = child.kill();
    let _ = child.wait();
    // (A revision that moves path time from one operator to another raises
    // the second's counter and keeps the first's: counters never fall.)
    let firsts: Vec<Value> = reports.iter().take(windows.len()).map(|r| r[0].clone()).collect();
    check_figures(&samples, &windows, &firsts);
}

/// `/api/graph`: the dataflow graph of the last windows laid out, Consume
/// its hot operator; a window not kept and a nonsense query refused with
/// their reasons.
fn check_graph_api(addr: &str) {
    let g: Value = serde_json::from_str(&get_text(addr, "/api/graph?last=5")).unwrap();
    let nodes = g["nodes"].as_array().unwrap();
    let hot: Vec<&Value> = nodes.iter().filter(|n| n["hot"] == json!(true)).collect();
    assert_eq!(hot.len(), 1, "{g}");
    assert_eq!(hot[0]["name"], json!("Consume"), "{g}");
    assert!(hot[0]["share"].as_f64().unwrap() > 0.5, "{g}");
    assert!(g["edges"].as_array().unwrap().iter().all(|e| e["points"].as_array().unwrap().len() >= 2), "{g}");
    let (status, _, body) = get(addr, "/api/graph?window=999999999");
    assert_eq!(status, 404);
    assert!(String::from_utf8_lossy(&body).contains("not kept"));
    let (status, _, body) = get(addr, "/api/graph?last=0");
    assert_eq!(status, 400);
    assert!(String::from_utf8_lossy(&body).contains("between 1 and"));
}

/// The metrics' figures, recomputed from the windows' JSON.
/// (`firsts`: each window's first report; a revision replaces it in
/// `windows`.)
fn check_figures(samples: &[Sample], windows: &[Value], firsts: &[Value]) {
    let revised = windows.iter().zip(firsts).any(|(w, f)| w != f);
    let close = |a: f64, b: f64, what: &str| assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{what}: {a} vs {b}");
    let complete = windows.iter().filter(|w| w["complete"] == json!(true)).count() as f64;
    close(sum(samples, "sidecar_windows_total", &[("completeness", "complete")]), complete, "complete windows");
    let records: u64 =
        windows.iter().flat_map(|w| w["streams"].as_array().unwrap()).map(|s| s["records"].as_u64().unwrap()).sum();
    close(sum(samples, "sidecar_records_total", &[]), records as f64, "records");
    let cp: u64 = windows.iter().map(|w| w["critical_path"]["length_ns"].as_u64().unwrap()).sum();
    close(sum(samples, "sidecar_critical_path_length_seconds_total", &[]), cp as f64 / 1e9, "critical path");
    // A series a revision lowered keeps its first figure: at least the
    // reports' sum, then.
    let series = |a: f64, b: f64, what: &str| {
        if revised {
            assert!(a >= b - 1e-6 * b.abs().max(1.0), "{what}: {a} vs {b} (a window revised)");
        } else {
            close(a, b, what)
        }
    };
    // Every second of the path is booked once, named or as `other`.
    series(sum(samples, "sidecar_critical_path_seconds_total", &[]), cp as f64 / 1e9, "critical path by operator");
    let consume: u64 = windows
        .iter()
        .flat_map(|w| w["critical_path"]["top_operators"].as_array().unwrap().iter().take(5))
        .filter(|o| o["worker"] == json!(0) && o["name"] == json!("Consume"))
        .map(|o| o["ns"].as_u64().unwrap())
        .sum();
    let consume_s = sum(samples, "sidecar_critical_path_seconds_total", &[("worker", "0"), ("operator", "Consume")]);
    series(consume_s, consume as f64 / 1e9, "w0 Consume");
    assert!(consume_s > 0.5 * cp as f64 / 1e9, "w0 Consume is most of the path: {consume_s}");
    let waits_on_0: u64 = windows
        .iter()
        .flat_map(|w| w["waiting"].as_array().unwrap())
        .filter(|ww| ww["worker"] == json!(1))
        .flat_map(|ww| ww["on"].as_array().unwrap())
        .filter(|on| on["worker"] == json!(0))
        // (A wait open across windows counts where it ended: `carried_ns`.)
        .map(|on| on["ns"].as_u64().unwrap() + on["carried_ns"].as_u64().unwrap_or(0))
        .sum();
    let waits_s = sum(samples, "sidecar_wait_seconds_total", &[("worker", "1"), ("waited_on", "0")]);
    series(waits_s, waits_on_0 as f64 / 1e9, "w1 waiting on w0");
    assert!(waits_s > 0.0);
    // (Observed at a window's first report: a revision has no latency.)
    let latencies = firsts.iter().filter(|w| w["emitted_after_end_ms"].is_number()).count();
    close(sum(samples, "sidecar_analysis_latency_seconds_count", &[]), latencies as f64, "latency observations");
    close(sum(samples, "sidecar_connections_total", &[]), 1.0, "connections");
    close(sum(samples, "sidecar_decode_errors_total", &[]), 0.0, "decode errors");
}

// ---------------------------------------------------------------------------
// The browser.

fn chromium() -> Option<PathBuf> {
    let candidates = [std::env::var("CHROMIUM").unwrap_or_default(), "/usr/bin/chromium".into()];
    candidates.into_iter().filter(|c| !c.is_empty()).map(PathBuf::from).find(|p| p.exists())
}

/// A headless chromium with its DevTools endpoint on a free port; killed
/// when dropped.
struct Browser {
    child: Child,
    profile: PathBuf,
    port: u16,
}

impl Browser {
    fn start(exe: &Path) -> Browser {
        let profile = tmp(&format!("chromium-profile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).unwrap();
        let child = Command::new(exe)
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .args(["--window-size=1400,1250", "--remote-debugging-port=0", "about:blank"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromium");
        let port_file = profile.join("DevToolsActivePort");
        let t0 = Instant::now();
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file).ok().and_then(|s| s.lines().next()?.parse().ok()) {
                break p;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "chromium wrote no DevToolsActivePort");
            std::thread::sleep(Duration::from_millis(50));
        };
        Browser { child, profile, port }
    }

    /// The DevTools WebSocket of its page.
    fn page(&self) -> Cdp {
        let addr = format!("127.0.0.1:{}", self.port);
        let list: Value = serde_json::from_slice(&get(&addr, "/json/list").2).unwrap();
        let url = list.as_array().unwrap().iter().find(|t| t["type"] == json!("page")).expect("a page target")
            ["webSocketDebuggerUrl"]
            .as_str()
            .unwrap()
            .to_string();
        let (ws, _) = tungstenite::connect(url.as_str()).expect("the DevTools WebSocket");
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        }
        Cdp { ws, next: 0, events: Vec::new() }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// A DevTools protocol session: commands by id, events kept.
struct Cdp {
    ws: tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>,
    next: u64,
    events: Vec<Value>,
}

impl Cdp {
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.ws.send(tungstenite::Message::text(msg)).unwrap();
        loop {
            let m = self.ws.read().expect("a DevTools message");
            let Ok(text) = m.to_text() else { continue };
            let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
            if v["id"] == json!(id) {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
            if v["method"].is_string() {
                self.events.push(v);
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expr: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({"expression": expr, "returnByValue": true}));
        r["result"]["value"].clone()
    }

    /// Errors the page reported: uncaught exceptions, console.error, and
    /// the browser's log entries at level error.
    fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| {
                let p = &e["params"];
                match e["method"].as_str().unwrap_or("") {
                    "Runtime.exceptionThrown" => true,
                    "Runtime.consoleAPICalled" => p["type"] == json!("error"),
                    "Log.entryAdded" => p["entry"]["level"] == json!("error"),
                    _ => false,
                }
            })
            .map(|e| e.to_string())
            .collect()
    }
}

/// What the test reads of the rendered page.
const PROBE_DOM: &str = r##"JSON.stringify({
  top: document.getElementById("top-operator").textContent,
  headline: document.getElementById("headline").textContent,
  selected: document.getElementById("selected-title").textContent,
  waitCols: [...document.querySelectorAll("#waits th.col")].map(e => e.textContent),
  waitRows: [...document.querySelectorAll("#waits th.row")].map(e => e.textContent),
  waitTitles: [...document.querySelectorAll("#waits td.cell")].map(e => e.title).filter(t => t),
  bars: document.querySelectorAll("#timeline .win-bar").length,
  consumeSegments: document.querySelectorAll('#timeline rect.segment[data-label="w0 Consume"]').length,
  lanes: document.querySelectorAll("#lanes rect.critical").length,
  cost: document.getElementById("cost").textContent,
  whatif: document.getElementById("whatif").textContent,
  graphNodes: document.querySelectorAll("#graph .gnode").length,
  graphHot: [...document.querySelectorAll("#graph .gnode.hot")].map(e => e.dataset.name),
  graphCritical: [...document.querySelectorAll("#graph .gnode.critical")].map(e => e.dataset.name),
  graphEdges: document.querySelectorAll("#graph .gedge").length,
  graphScopes: document.querySelectorAll("#graph .gscope").length,
  whatifFits: document.getElementById("whatif").scrollWidth <= document.getElementById("whatif").parentElement.clientWidth,
  properties: document.getElementById("properties").textContent,
  lateIsNoFault: !faulty({streams: [{faults: ["late data for a window already analyzed"]}]}) &&
    faulty({streams: [{faults: ["decode error: bad checksum"]}]}),
  notes: selectedNotes({complete: false, incomplete_reasons: ["worker 1: the program bound its own logger"],
    critical_path: {length_ns: 200, by_kind: {unknown: 60, waiting_for_input: 10, data_message: 12, progress_message: 0}},
    untraced_progress: [{worker: 0, operator: 3, name: "Iterative"}, {worker: 1, operator: 3, name: "Iterative"}]}),
  quietNotes: document.getElementById("selected-notes").textContent,
  errors: document.getElementById("js-errors").textContent,
})"##;

#[test]
fn the_dashboard_renders_skew_in_a_real_browser() {
    let Some(exe) = chromium() else {
        eprintln!("\n\n*** SKIPPED: no chromium (apt-get install -y chromium, or set CHROMIUM=path): the dashboard was NOT tested in a browser ***\n");
        return;
    };
    let json = tmp("browser.jsonl");
    let (mut child, addr) = watch_skew(120, &json);
    let browser = Browser::start(&exe);
    let mut page = browser.page();
    for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
        page.call(domain, json!({}));
    }
    page.call("Page.navigate", json!({"url": format!("http://{addr}/")}));
    let t0 = Instant::now();
    let dom = loop {
        let dom: Value = page.eval(PROBE_DOM).as_str().and_then(|s| serde_json::from_str(s).ok()).unwrap_or_default();
        // (For the docs' screenshot, a fuller timeline.)
        let bars = if std::env::var("SIDECAR_SCREENSHOT").as_deref() == Ok("docs") { 24 } else { 4 };
        if dom["bars"].as_u64().unwrap_or(0) >= bars
            && !dom["waitCols"].as_array().is_none_or(|a| a.is_empty())
            && dom["graphNodes"].as_u64().unwrap_or(0) > 0
            && dom["cost"].as_str().is_some_and(|c| c.contains("from its stream"))
        {
            break dom;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the page never showed the windows: {dom}");
        std::thread::sleep(Duration::from_millis(250));
    };
    let shot = page.call("Page.captureScreenshot", json!({"format": "png"}));
    save_screenshot(shot["data"].as_str().unwrap(), "dashboard.png");
    let clip = section(&mut page, "graph-section");
    let shot =
        page.call("Page.captureScreenshot", json!({"format": "png", "clip": clip, "captureBeyondViewport": true}));
    save_screenshot(shot["data"].as_str().unwrap(), "dashboard-graph.png");
    let running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    assert!(running, "the page was read while the run was going");
    assert!(dom["top"].as_str().unwrap().starts_with("w0 Consume"), "top operator: {dom}");
    assert!(dom["waitCols"].as_array().unwrap().contains(&json!("w0")), "waits matrix: {dom}");
    assert!(dom["waitRows"].as_array().unwrap().contains(&json!("w1")), "waits matrix: {dom}");
    let titles = dom["waitTitles"].to_string();
    assert!(titles.contains("channel") && titles.contains("message"), "channel and kind on hover: {titles}");
    assert!(dom["bars"].as_u64().unwrap() >= 2, "{dom}");
    assert!(dom["consumeSegments"].as_u64().unwrap() >= 2, "{dom}");
    assert!(dom["lanes"].as_u64().unwrap() >= 1, "the selected window's critical path: {dom}");
    assert!(dom["cost"].as_str().unwrap().contains("bytes/record"), "{dom}");
    // The account the terminal says, first.
    assert!(dom["cost"].as_str().unwrap().contains("tracing cost the worker threads"), "{dom}");
    // The probe's figures, from its stream while it runs: the writer's CPU
    // is known before the command's exit.
    assert!(dom["cost"].as_str().unwrap().contains("the probe's figures from its stream (1 process, so far)"), "{dom}");
    assert!(!dom["cost"].as_str().unwrap().contains("writer CPUunknown"), "{dom}");
    assert_eq!(dom["whatifFits"], json!(true), "the what-if table fits its card: {dom}");
    let props = dom["properties"].as_str().unwrap();
    assert!(props.contains("exempt: stream starts") && !props.contains("min in degree 0"), "{dom}");
    assert_eq!(dom["lateIsNoFault"], json!(true), "late data marks a window incomplete, not its stream faulty");
    // The what-if ranking of the selected window (issue 32): w0's Consume.
    let whatif = dom["whatif"].as_str().unwrap();
    assert!(whatif.contains("Consume 2× faster") && whatif.contains("taking no time"), "what-if: {dom}");
    // The dataflow graph (skew: input → exchange → Consume → probe, in a
    // dataflow's box): drawn, with w0's Consume the hot operator.
    assert!(dom["graphNodes"].as_u64().unwrap() >= 3, "graph: {dom}");
    assert!(dom["graphEdges"].as_u64().unwrap() >= 2, "graph: {dom}");
    assert!(dom["graphScopes"].as_u64().unwrap() >= 1, "graph: {dom}");
    assert_eq!(dom["graphHot"], json!(["Consume"]), "the hot operator highlighted: {dom}");
    assert!(dom["graphCritical"].as_array().unwrap().contains(&json!("Consume")), "{dom}");
    // Windows are numbered from the run's start, as the terminal numbers
    // them (the monotonic clock over 250 ms gives thousands): the run
    // lasts a few seconds, so a few dozen windows at most.
    for text in [&dom["headline"], &dom["selected"]] {
        let n: u64 =
            text.as_str().and_then(|t| t.strip_prefix("window ")?.split([':', ' ']).next()?.parse().ok()).unwrap();
        assert!(n < 100, "window numbered from the run's start: {text}");
    }
    // What the window's line says beside its operators, under its title:
    // of a 200 ns path, 60 outside operators (30 %, from 10 %), 12 in
    // transit (6 %, from 5 %), 10 waiting for input (5 %: below 10 %, not
    // said); the scope named once for its two workers.
    assert_eq!(
        dom["notes"],
        json!(
            "incomplete: worker 1: the program bound its own logger · transit between processes 6% of the path · \
             outside operators 30% of the path · progress not traced in Iterative (its waits read as waiting for input)"
        ),
        "{dom}"
    );
    // (skew's windows: complete, all of the path in its operators.)
    assert_eq!(dom["quietNotes"], json!(""), "{dom}");
    assert_eq!(dom["errors"], json!(""), "errors caught by the page");
    assert_eq!(page.errors(), Vec::<String>::new(), "errors on the console");
}

/// The browser's screenshot, to target/NAME (and docs/NAME on request).
fn save_screenshot(b64: &str, name: &str) {
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(profile_dir().parent().unwrap().join(name), &png).unwrap();
    if std::env::var("SIDECAR_SCREENSHOT").as_deref() == Ok("docs") {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(name);
        std::fs::write(docs, &png).unwrap();
    }
}

/// A section of the page as a screenshot's clip (page coordinates).
fn section(page: &mut Cdp, id: &str) -> Value {
    let expr = format!(
        "(() => {{ const r = document.getElementById({id:?}).getBoundingClientRect(); \
         return JSON.stringify({{x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height, scale: 1}}); }})()"
    );
    serde_json::from_str(page.eval(&expr).as_str().expect("the section's box")).unwrap()
}
