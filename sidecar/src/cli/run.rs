//! `sidecar run`: listen for probe connections and analyze them live until
//! Ctrl-C; with `--clock-listen`, this host is the clock reference that
//! relays on other hosts sync to.

use std::sync::atomic::Ordering;

use clocksync::protocol::ResponderHandle;
use sidecar::ingest::sync::{Registry, SharedSync};
use sidecar::io::os_clock::{monotonic_ns, realtime_ns};
use sidecar::io::{spawn_listener, Limits, Listen};
use sidecar::pipeline::dataflow::Inputs;
use sidecar::pipeline::grace::Grace;

use super::common::{
    live_settings, outputs, parse_buffer_limit, parse_duration, run_dataflow_into, say_cost, stop_on_ctrl_c, Common,
};

#[derive(clap::Args)]
pub struct Args {
    /// unix:PATH (created owner-only) or tcp:[ADDR:]PORT (a bare port
    /// listens on 127.0.0.1 only).
    #[arg(long)]
    listen: Listen,
    /// How long past a window's end to wait for a silent stream's data
    /// before closing the window without it. Without it, 30ms to start
    /// with, doubled for each window that loses data arriving later (up to
    /// 5 s); given, it stays.
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
    /// Answer clock exchanges from relays on other hosts (`sidecar relay
    /// --clock`): udp:[ADDR:]PORT (a bare port, or `udp:` alone for
    /// 7071, listens on 127.0.0.1 only). This host's timeline becomes the
    /// reference: relayed hosts, once calibrated, are analyzed on it.
    #[arg(long, value_name = "udp:[ADDR:]PORT", value_parser = parse_clock_listen)]
    clock_listen: Option<String>,
    /// This host's id as its probes write it, for --clock-listen (default:
    /// the machine-id hash, as the probe computes it; hex 0x… or decimal).
    #[arg(long, value_parser = ringlog::parse_host_id)]
    host_id: Option<u64>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    http: super::http::Http,
}

/// What the sidecar holds for its connections, at most (see the README's
/// robustness section). Each refusal is an error line (at most 10 per 10 s
/// per kind, the rest counted) and a count in the closing line.
#[derive(clap::Args)]
struct LimitArgs {
    /// Connections open at once; one more is closed as soon as it is
    /// accepted.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// A connection that has sent no Hello frame (what a probe sends first)
    /// by then is closed.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    hello_timeout: u64,
    /// Bytes read off one connection and not yet analyzed, at most: past
    /// it the connection is not read until its analysis takes some (the
    /// probe's socket fills; the probe counts what it cannot send). 64MB,
    /// 512KB, 1GB ...
    #[arg(long, default_value = "64MB", value_parser = parse_buffer_limit)]
    max_buffered: u64,
    /// Bytes read off all connections together and not yet analyzed, at
    /// most: past it no connection is read until the analysis takes some
    /// (without it the worst case is --max-connections × --max-buffered).
    #[arg(long, default_value = "256MB", value_parser = parse_buffer_limit)]
    max_buffered_total: u64,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            max_connections: self.max_connections as usize,
            hello_timeout: std::time::Duration::from_nanos(self.hello_timeout),
            max_buffered: self.max_buffered as usize,
            max_buffered_total: self.max_buffered_total as usize,
        }
    }
}

/// `udp:` → 127.0.0.1:7071, `udp:PORT` → 127.0.0.1:PORT, `udp:ADDR:PORT`.
fn parse_clock_listen(s: &str) -> Result<String, String> {
    let a = s.strip_prefix("udp:").ok_or_else(|| format!("'{s}': expected udp:[ADDR:]PORT"))?;
    Ok(if a.is_empty() {
        "127.0.0.1:7071".into()
    } else if a.parse::<u16>().is_ok() {
        format!("127.0.0.1:{a}")
    } else {
        a.to_string()
    })
}

/// Analyzes live until Ctrl-C (then what has arrived): the exit status as
/// `analyze`'s; 2 (at once) if it cannot listen or answer clock exchanges.
pub fn run(
    Args { listen, grace, revise_within, max_backlog, clock_listen, host_id, limits, common, http }: Args,
) -> i32 {
    // (--http: the outputs are set up here, with the server's feed.)
    let mut sink = match outputs(&common) {
        Ok(s) => s,
        Err(e) => {
            sidecar::say!("sidecar: error: {e}");
            return 2;
        }
    };
    sink.http = match http.start(&[], common.window) {
        Ok(feed) => feed,
        Err(code) => return code,
    };
    let stop = stop_on_ctrl_c("sidecar", Some("\nsidecar: stopping: analyzing what has arrived"));
    let queues = sidecar::io::queues(common.workers.max(1));
    let (sync, responder) = match &clock_listen {
        None => (SharedSync::default(), None),
        Some(addr) => clock_reference(addr, host_id),
    };
    let grace = grace.map_or(Grace::adaptive(30_000_000), Grace::fixed);
    let io = (listen.clone(), (common.window, grace.base), limits.limits());
    say_open_files_limit(io.2.max_connections);
    let listener = match spawn_listener(io.0, io.1, io.2, queues.clone(), stop.clone(), sync.clone()) {
        Ok(l) => l,
        Err(e) => {
            sidecar::say!("sidecar: error: cannot listen on {listen}: {e}");
            sidecar::detached::exit(2, std::time::Duration::from_secs(2));
        }
    };
    // (Every 10 s: see `heap::trim`.)
    let trimmer = sidecar::heap::Trimmer::every(std::time::Duration::from_secs(10));
    let settings = live_settings(&common, sync.clone());
    let (code, stats) = run_dataflow_into(
        settings,
        Inputs::Live { queues, stop: stop.clone(), grace, revise_within, max_backlog },
        &common,
        sink,
    );
    if let Some(st) = &stats {
        say_cost(st);
    }
    stop.store(true, Ordering::SeqCst);
    let _ = listener.join();
    drop(trimmer);
    if let Some(r) = responder {
        say_clock_sync(r, &sync);
    }
    code
}

/// Raises the open files limit to hold `--max-connections`; says so if it
/// cannot (connections past the limit then wait in the listen queue).
fn say_open_files_limit(max_connections: usize) {
    match sidecar::io::raise_open_files_limit(max_connections) {
        Ok(n) if n < max_connections as u64 + 16 => sidecar::say!(
            "sidecar: warning: {n} open files at most (ulimit -n): fewer than --max-connections {max_connections}"
        ),
        Ok(_) => {}
        Err(e) => sidecar::say!("sidecar: warning: cannot read or raise the open files limit: {e}"),
    }
}

/// Makes this host the clock reference: a responder answering relays'
/// exchanges on `addr`, stamped with this host's CLOCK_MONOTONIC, and the
/// clock models with this host (`host_id`, default the machine's) as the
/// reference. Exits with 2 if it cannot answer on `addr`.
fn clock_reference(addr: &str, host_id: Option<u64>) -> (SharedSync, Option<ResponderHandle>) {
    let id = host_id.unwrap_or_else(|| ringlog::host_id(&ringlog::host_name()));
    let offset = realtime_ns() as i128 - monotonic_ns() as i128;
    let responder = match ResponderHandle::spawn_with_id(addr, monotonic_ns, id) {
        Ok(r) => {
            sidecar::say!("sidecar: clock reference (host {id:016x}) answering on udp:{}", r.addr());
            r
        }
        Err(e) => {
            sidecar::say!("sidecar: error: cannot answer clock exchanges on udp:{addr}: {e}");
            sidecar::detached::exit(2, std::time::Duration::from_secs(2));
        }
    };
    (SharedSync::new(Registry::with_reference(id, Some(offset))), Some(responder))
}

/// Stops the clock responder and says what clock sync did: the exchanges
/// answered, and per relayed host its exchanges and clock-model violations.
fn say_clock_sync(responder: ResponderHandle, sync: &SharedSync) {
    if let Ok(st) = responder.stop() {
        let reg = sync.lock();
        let hosts: Vec<String> = reg
            .hosts
            .iter()
            .map(|(h, m)| format!("{h:016x}: {} exchanges, {} clock-model violations", m.exchanges, m.violations))
            .collect();
        sidecar::say!("sidecar: clock sync: {} exchanges answered; {}", st.pongs, hosts.join("; "));
    }
}
