//! `sidecar whatif`: recorded probe files analyzed with a virtual speedup
//! (DProf §5.2; `sidecar::analysis::whatif`): the predicted run time
//! against the measured one, per window and in total.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use sidecar::analysis::whatif::{parse_spec, Speedup};
use sidecar::io::Named;
use sidecar::output::sink::Sink;

use super::analyze::offline_settings;
use super::common::{check_inputs, run_dataflow_into, Common};

#[derive(clap::Args)]
pub struct Args {
    /// The speedup: OPERATOR=FACTOR (every worker's executions of the
    /// operator (or span) named, or with that id, FACTOR times faster, 1 or
    /// more; `inf`: no time at all), wN:OPERATOR=FACTOR (worker N's only);
    /// several, separated by commas, at once (a later one overrides an
    /// earlier one for what both name).
    #[arg(long, value_name = "SPEC", value_parser = parse_spec, required = true)]
    speedup: Vec<Vec<Speedup>>,
    /// Print one JSON object (per window and in total) instead of text.
    #[arg(long)]
    json: bool,
    /// Window length: 1s, 500ms, 250us, 2.5s ... The default takes the
    /// whole run as one window, so that a speedup's effect crosses no
    /// window edge (see the README's what-if section).
    #[arg(long, default_value = "100000s", value_parser = super::common::parse_window)]
    window: u64,
    /// Analysis worker threads.
    #[arg(short = 'w', long, default_value = "1", value_parser = super::common::parse_workers)]
    workers: usize,
    /// Recorded probe files, analyzed together.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// One window's prediction.
#[derive(Serialize)]
struct WindowPrediction {
    host: String,
    window: u64,
    measured_ns: u64,
    predicted_ns: u64,
    naive_saved_ns: u64,
}

/// The whole run's.
#[derive(Serialize)]
struct Prediction {
    speedup: String,
    windows: Vec<WindowPrediction>,
    measured_ns: u64,
    predicted_ns: u64,
    saved_share: f64,
    naive_saved_ns: u64,
    /// Scopes whose progress the files do not carry: the waits it ended
    /// are kept as measured.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    untraced_progress: Vec<String>,
}

/// Analyzes the files with the speedup, prints the prediction: 0; 1 with
/// an input that cannot be read (nothing predicted) or decode errors (the
/// prediction of what could be read, said so); 2 when it could not run or
/// the speedup names what the files do not.
pub fn whatif(Args { speedup, json, window, workers, files }: Args) -> i32 {
    let speedup: Vec<Speedup> = speedup.into_iter().flatten().collect();
    if let Err(e) = check_inputs(&files) {
        sidecar::say!("sidecar: error: {e}; no prediction made");
        return 1;
    }
    if let Err(e) = check_speedup(&speedup, &sidecar::io::names_in(&files)) {
        sidecar::say!("sidecar: error: --speedup {e}");
        return 2;
    }
    let common = Common::offline(window, workers, "auto");
    let mut settings = match offline_settings(&common, &files) {
        Ok(s) => s,
        Err(e) => {
            sidecar::say!("sidecar: error: {e}; no prediction made");
            return 1;
        }
    };
    settings.what_if = Some(Arc::from(speedup.clone()));
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = Sink { json: Some(Box::new(Shared(reports.clone()))), ..Default::default() };
    let (code, _) = run_dataflow_into(settings, sidecar::pipeline::dataflow::Inputs::Files(files), &common, sink);
    if code == 2 {
        return code;
    }
    let text = String::from_utf8_lossy(&reports.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    let p = predict(&speedup, &text);
    if code != 0 {
        if p.windows.is_empty() {
            sidecar::say!("sidecar: error: no window could be analyzed (errors above); no prediction made");
            return code;
        }
        sidecar::say!("sidecar: the prediction below is of what could be read before the errors above");
    }
    if json {
        println!("{}", serde_json::to_string(&p).unwrap_or_default());
    } else {
        print!("{}", describe(&p));
    }
    code
}

/// Refuses a speedup that names a worker or an operator the files do not
/// (it would predict "0 % faster"), listing the ones they do. (A pipe's
/// names are not known before it is read: no check then.)
fn check_speedup(speedup: &[Speedup], named: &Named) -> Result<(), String> {
    if named.workers.is_empty() {
        return Ok(());
    }
    for s in speedup {
        if let Some(w) = s.worker.filter(|w| !named.workers.contains(w)) {
            let known: Vec<String> = named.workers.iter().map(|w| format!("w{w}")).collect();
            return Err(format!("{}: no worker w{w} in the files (workers: {})", s.text(), known.join(", ")));
        }
        if !named.has(&s.target) {
            let mut known: Vec<&str> = named.operators.iter().chain(&named.spans).map(String::as_str).collect();
            known.dedup();
            const SHOWN: usize = 40;
            let more = known.len().saturating_sub(SHOWN);
            known.truncate(SHOWN);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            return Err(format!(
                "{}: no operator or span named `{}` (nor with that id) in the files (known: {}{more})",
                s.text(),
                s.target,
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// The reports' JSON lines gathered into the prediction.
fn predict(speedup: &[Speedup], json_lines: &str) -> Prediction {
    let reports: Vec<Value> = json_lines.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect();
    let mut untraced_progress: Vec<String> = reports
        .iter()
        .flat_map(|r| r["untraced_progress"].as_array().into_iter().flatten())
        .filter_map(|u| Some(u["name"].as_str()?.to_string()))
        .collect();
    untraced_progress.sort();
    untraced_progress.dedup();
    let mut windows: Vec<WindowPrediction> = reports
        .iter()
        .filter_map(|r| {
            let w = r["what_if"].get(0)?;
            Some(WindowPrediction {
                host: r["host"].as_str().unwrap_or("").to_string(),
                window: r["window"].as_u64()?,
                measured_ns: w["measured_ns"].as_u64()?,
                predicted_ns: w["predicted_ns"].as_u64()?,
                naive_saved_ns: w["naive_saved_ns"].as_u64()?,
            })
        })
        .collect();
    windows.sort_by(|a, b| (a.window, &a.host).cmp(&(b.window, &b.host)));
    // (Windows of several hosts are summed as if one after the other.)
    let measured_ns = windows.iter().fold(0u64, |s, w| s.saturating_add(w.measured_ns));
    let predicted_ns = windows.iter().fold(0u64, |s, w| s.saturating_add(w.predicted_ns));
    Prediction {
        speedup: speedup.iter().map(Speedup::text).collect::<Vec<_>>().join(","),
        saved_share: measured_ns.saturating_sub(predicted_ns) as f64 / measured_ns.max(1) as f64,
        naive_saved_ns: windows.iter().fold(0u64, |s, w| s.saturating_add(w.naive_saved_ns)),
        windows,
        measured_ns,
        predicted_ns,
        untraced_progress,
    }
}

/// The prediction as text: a line per window, then the total.
fn describe(p: &Prediction) -> String {
    let ms = |ns: u64| ns as f64 / 1e6;
    let pct = |saved: u64, of: u64| 100.0 * saved as f64 / of.max(1) as f64;
    let mut s = format!("what if {}:\n  window   measured  predicted   saved\n", p.speedup);
    for w in &p.windows {
        s += &format!(
            "  {:>6} {:>8.1} ms {:>7.1} ms {:>6.1} %\n",
            w.window,
            ms(w.measured_ns),
            ms(w.predicted_ns),
            pct(w.measured_ns.saturating_sub(w.predicted_ns), w.measured_ns)
        );
    }
    s += &format!(
        "  total: measured {:.1} ms, predicted {:.1} ms: {:.1} % faster (a reading of the critical path's shares \
         would say {:.1} %)\n",
        ms(p.measured_ns),
        ms(p.predicted_ns),
        100.0 * p.saved_share,
        pct(p.naive_saved_ns, p.measured_ns)
    );
    if !p.untraced_progress.is_empty() {
        s += &format!(
            "  progress not traced in {}: the waits it ended are kept as measured, so the prediction can be too \
             small (register the scope's timestamp type with the probe: docs/timely.md)\n",
            sidecar::analysis::report::quoted_names(&p.untraced_progress)
        );
    }
    s
}

/// The JSON lines, kept in memory.
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
