//! `sidecar watch`: run a command with its probe pointed at a fresh socket,
//! analyze it live, print a closing summary with what tracing cost, and
//! exit with the command's status.

use std::io::{BufRead, Write as _};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sidecar::io::{spawn_listener, Listen, Queues};
use sidecar::output::watch::{Cost, ProbeLine, Summary, NS_PER_ELIDED, NS_PER_RECORD};
use sidecar::pipeline::dataflow::{Inputs, RunStats};
use sidecar::pipeline::grace::Grace;

use super::common::{live_settings, outputs, parse_duration, run_dataflow_into, Common};

#[derive(clap::Args)]
pub struct Args {
    /// How long past a window's end to wait for a silent stream (a
    /// worker inside a long operator execution publishes nothing until
    /// it ends; longer than this and its window closes without it).
    /// Without it, 500ms to start with, doubled for each window that
    /// loses data arriving later (up to 5 s); given, it stays.
    #[arg(long, value_parser = parse_duration)]
    grace: Option<u64>,
    /// How many of the last windows reported late records still correct:
    /// such a window is analyzed again and reported again (JSON
    /// `revision`). Each window owner keeps that many windows' data for
    /// it; late records for an older window mark the next one INCOMPLETE
    /// (`late data`). 0: no revisions; at most 1024.
    #[arg(long, value_name = "WINDOWS", default_value_t = sidecar::pipeline::revise::DEFAULT_REVISE_WITHIN, value_parser = super::common::parse_revise_within)]
    revise_within: u64,
    /// How long a connection's backlog (bytes the sidecar has received but
    /// not read yet, after it was busy) holds its windows back past the
    /// grace: they wait for it, as it is not late data. Past it they close
    /// without it (counted in the closing line) and its records for them
    /// come late. 0: they never wait; at most 60s.
    #[arg(long, default_value = "2s", value_parser = super::common::parse_max_backlog)]
    max_backlog: u64,
    /// Estimated probe cost per published record, ns (measured: ~12 ns
    /// on the development machine; `cargo bench -p benches --bench hot_path`).
    #[arg(long, default_value_t = NS_PER_RECORD)]
    ns_per_record: f64,
    /// Estimated probe cost per elided schedule pair, ns (measured: ~10 ns).
    #[arg(long, default_value_t = NS_PER_ELIDED)]
    ns_per_elided: f64,
    /// Write the closing summary as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    summary_json: Option<PathBuf>,
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    http: super::http::Http,
    /// The command to run (after `--`).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// `sidecar watch`: the command runs with `PROBE_SINK=unix:SOCKET` (a fresh
/// socket in a private directory); the cost summary takes the probe's
/// figures from its stream; its standard error passes through, and its
/// `probe:` line is kept for a probe that sends no figures (an older one). When it exits, the listener
/// takes the connections still pending, the analysis reads what has arrived
/// to its end, and the closing summary is printed.
///
/// The exit status is the command's; when it succeeded, the analysis's
/// (2 for an output that failed). A setup failure is 2, a command that
/// cannot start 127.
pub fn watch(args: Args) -> i32 {
    let ended = match run_traced(&args) {
        Ok(ended) => ended,
        Err(status) => return status,
    };
    match &ended.stats {
        Some(st) => summarize(&args, &ended, st),
        None if ended.exit == 0 => ended.analysis,
        None => ended.exit,
    }
}

/// What a traced run of the command left.
struct Ended {
    /// The command's exit status (128 + the signal that ended it).
    exit: i32,
    /// From its start to its exit.
    wall: Duration,
    /// The analysis's exit status, and its totals if it ran.
    analysis: i32,
    stats: Option<RunStats>,
    /// The `probe:` lines on its standard error, added up.
    probe_line: Option<ProbeLine>,
    /// `--http`: where the closing summary goes too.
    feed: Option<sidecar::output::http::Feed>,
}

/// Runs the command traced and analyzes it live to the end: the outputs,
/// the socket and its listener, the command and its standard error, the
/// analysis; then cleans up. `Err`: the exit status of a setup failure
/// (said already).
fn run_traced(args: &Args) -> Result<Ended, i32> {
    // The outputs first: one that cannot be created is a setup error, found
    // before the command runs (it would otherwise run untraced).
    let mut outputs = outputs(&args.common).map_err(|e| {
        sidecar::say!("sidecar: error: {e}");
        2
    })?;
    outputs.http = args.http.start(&args.command, args.common.window)?;
    let feed = outputs.http.clone();
    let dir = PrivateDir::create()?;
    let sock = dir.path.join("probe.sock");
    let queues = sidecar::io::queues(args.common.workers.max(1));
    let grace = args.grace.map_or(Grace::adaptive(500_000_000), Grace::fixed);
    let listening = Listening::start(&sock, &args.common, grace.base, queues.clone())?;
    wait_for_the_command_on_ctrl_c(dir.path.clone());
    let started = Instant::now();
    let mut child = match spawn_traced(&args.command, &sock) {
        Ok(child) => child,
        Err(status) => {
            listening.close();
            return Err(status);
        }
    };
    let probe_line = Arc::new(Mutex::new(None));
    let echo = echo_stderr(&mut child, probe_line.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let waiter = wait_then_stop(child, started, echo, listening, stop.clone());
    let settings = live_settings(&args.common, Default::default());
    let inputs = Inputs::Live { queues, stop, grace, revise_within: args.revise_within, max_backlog: args.max_backlog };
    let (analysis, stats) = run_dataflow_into(settings, inputs, &args.common, outputs);
    let (status, wall) = waiter.join().expect("the waiting thread does not panic");
    drop(dir);
    let exit = exit_status(status);
    let probe_line = probe_line.lock().unwrap().clone();
    Ok(Ended { exit, wall, analysis, stats, probe_line, feed })
}

/// A fresh directory only this user can enter, for the command's socket;
/// removed, with what it holds, when dropped.
struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    fn create() -> Result<PrivateDir, i32> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("sidecar-watch-{}-{nanos}", std::process::id()));
        if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&path) {
            sidecar::say!("sidecar: error: cannot create {}: {e}", path.display());
            return Err(2);
        }
        Ok(PrivateDir { path })
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The I/O thread listening on the command's socket, reading its
/// connections into `queues`.
struct Listening {
    thread: JoinHandle<()>,
    stop: Arc<AtomicBool>,
}

impl Listening {
    fn start(sock: &Path, common: &Common, grace: u64, queues: Queues) -> Result<Listening, i32> {
        let stop = Arc::new(AtomicBool::new(false));
        let listen = Listen::Unix(sock.to_path_buf());
        // (Default limits: the socket is the command's own.)
        let limits = sidecar::io::Limits::default();
        match spawn_listener(listen, (common.window, grace), limits, queues, stop.clone(), Default::default()) {
            Ok(thread) => Ok(Listening { thread, stop }),
            Err(e) => {
                sidecar::say!("sidecar: error: cannot listen on {}: {e}", sock.display());
                Err(2)
            }
        }
    }

    /// Takes the connections not yet accepted, reads what the sockets
    /// hold, and ends.
    fn close(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
    }
}

/// Ctrl-C reaches the command too (same process group): let it end on its
/// own; a second Ctrl-C exits now, removing `dir` (the cleanup it skips).
fn wait_for_the_command_on_ctrl_c(dir: PathBuf) {
    let interrupted = Arc::new(AtomicBool::new(false));
    let _ = ctrlc::set_handler(move || {
        if interrupted.swap(true, Ordering::SeqCst) {
            // Exiting now skips the cleanup: the socket goes here.
            let _ = std::fs::remove_dir_all(&dir);
            sidecar::detached::exit(130, Duration::from_millis(200));
        }
        sidecar::say!("\nsidecar: interrupted: waiting for the command to end (Ctrl-C again to quit now)");
    });
}

/// Starts `command` with its probe sink set to `sock` and its standard
/// error piped; 127 (said) if it cannot start. The command gets SIGTERM if
/// `watch` dies first (killed, say): it is not left running untraced.
/// (Called on the main thread: the signal follows the thread that forked.)
fn spawn_traced(command: &[String], sock: &Path) -> Result<Child, i32> {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..]).env("PROBE_SINK", format!("unix:{}", sock.display())).stderr(std::process::Stdio::piped());
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes one prctl(2) call
    // and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().map_err(|e| {
        sidecar::say!("sidecar: error: cannot start {:?}: {e}", command[0]);
        127
    })
}

/// The thread that passes the command's standard error through, and a
/// message when it has read it to its end.
struct Echo {
    thread: JoinHandle<()>,
    ended: Receiver<()>,
}

/// Passes the command's standard error through to ours, adding up the
/// `probe:` lines in it (every traced program of the command prints one)
/// into `probe_line`.
fn echo_stderr(child: &mut Child, probe_line: Arc<Mutex<Option<ProbeLine>>>) -> Echo {
    let stderr = child.stderr.take().expect("piped");
    let (echo_done, ended) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let mut r = std::io::BufReader::new(stderr);
        let mut line = String::new();
        while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
            // (Never blocks: a standard error nobody reads drops lines.)
            sidecar::detached::say_line(line.trim_end_matches('\n').to_string());
            if let Some(p) = ProbeLine::parse(&line) {
                probe_line.lock().unwrap().get_or_insert_with(Default::default).add(&p);
            }
            line.clear();
        }
        let _ = echo_done.send(());
    });
    Echo { thread, ended }
}

/// A thread that waits for the command to exit, then ends the live input:
/// the listener first, then the analysis (`stop`). It returns the command's
/// exit and how long it ran.
fn wait_then_stop(
    mut child: Child,
    started: Instant,
    echo: Echo,
    listening: Listening,
    stop: Arc<AtomicBool>,
) -> JoinHandle<(std::io::Result<ExitStatus>, Duration)> {
    std::thread::spawn(move || {
        let status = child.wait();
        let wall = started.elapsed();
        // The command's standard error is read to its end (its `probe:`
        // line is written before it exits), unless a background child
        // of the command inherited it and holds it open: that child is
        // not waited for (its lines are still passed through).
        if echo.ended.recv_timeout(Duration::from_secs(2)).is_ok() {
            let _ = echo.thread.join();
        }
        // Connections not yet accepted are taken first, then the
        // analysis reads the rest and ends.
        listening.close();
        stop.store(true, Ordering::SeqCst);
        (status, wall)
    })
}

/// The command's exit status as a shell gives it (128 + the signal that
/// ended it); 1 (said) if it could not be waited for.
fn exit_status(status: std::io::Result<ExitStatus>) -> i32 {
    match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(e) => {
            sidecar::say!("sidecar: error: waiting for the command: {e}");
            1
        }
    }
}

/// Prints the closing summary (to standard output, or standard error when
/// the JSON lines go to standard output), says what it could not know, and
/// writes `--summary-json`: the command's exit status, or 2 if it succeeded
/// and the JSON summary could not be written.
fn summarize(args: &Args, ended: &Ended, st: &RunStats) -> i32 {
    let pl = ended.probe_line.as_ref();
    let cost = Cost::new(&st.totals, pl, args.ns_per_record, args.ns_per_elided);
    let no_figures = cost.source == "none";
    let summary = Summary::new(&args.command, ended.exit, ended.wall.as_secs_f64() * 1e3, &st.totals, cost);
    let untraced = st.totals.streams.is_empty();
    // (No stream: the summary's figures would all be zeros; its first line,
    // the command's end, is what there is to say.)
    let text = if untraced { summary.headline() } else { summary.text() };
    if args.common.json.as_deref() == Some("-") {
        sidecar::detached::say_line(text.trim_end_matches('\n').to_string());
    } else {
        // (a closed standard output, `| head`, is no reason to panic)
        let _ = write!(std::io::stdout(), "{text}");
    }
    if no_figures && !st.totals.streams.is_empty() {
        sidecar::say!(
            "sidecar: no probe figures in the streams nor a `probe:` line on the command's stderr: the writer \
             thread's CPU is unknown"
        );
    }
    if untraced {
        sidecar::say!(
            "sidecar: no probe connected: `{}` ran untraced, nothing was analyzed (a program is traced when it \
             links the probe and its adapter reads PROBE_SINK: docs/probe.md)",
            args.command.join(" ")
        );
    }
    if let Some(feed) = &ended.feed {
        feed.summary(serde_json::to_string(&summary).unwrap_or_default());
        // A moment for the browsers watching to get it before the server
        // ends with the process.
        std::thread::sleep(Duration::from_millis(300));
    }
    if let Some(p) = &args.summary_json {
        let j = serde_json::to_string(&summary).unwrap_or_default();
        if let Err(e) = std::fs::write(p, j + "\n") {
            sidecar::say!("sidecar: error: cannot write {}: {e}", p.display());
            // One of watch's outputs failed: 2 if the command succeeded.
            if ended.exit == 0 {
                return 2;
            }
        }
    }
    ended.exit
}
