//! Building traces by hand for the tests.
#![allow(dead_code)]

use ringlog::{ClockDomain, ClockSample, Encoder, EndStats, Event, Hello, Meta, Record, StreamId, PROCESS_WIDE};

pub use ringlog::Event::*;

pub const HOST: u64 = 0xabc;
pub const PID: u32 = 77;

/// Encodes one process: worker `i` gets `workers[i]` (ns, event) in order.
/// `end`: write End frames (a clean shutdown); otherwise the stream is cut.
pub fn encode_opts(workers: &[Vec<(u64, Event)>], end: bool, lost: &[(usize, usize, u64)]) -> Vec<u8> {
    encode_host(HOST, PID, 0, workers, end, lost)
}

/// Like `encode_opts` for process `pid` on `host`, whose workers are
/// numbered from `first` (timely's global worker index).
pub fn encode_host(
    host: u64,
    pid: u32,
    first: u32,
    workers: &[Vec<(u64, Event)>],
    end: bool,
    lost: &[(usize, usize, u64)],
) -> Vec<u8> {
    encode_in_frames(host, pid, first, workers, end, lost, 4)
}

/// Like `encode_host`, each worker's records in frames of `per_frame`.
pub fn encode_in_frames(
    host: u64,
    pid: u32,
    first: u32,
    workers: &[Vec<(u64, Event)>],
    end: bool,
    lost: &[(usize, usize, u64)],
    per_frame: usize,
) -> Vec<u8> {
    let dom = ClockDomain::MonotonicNs;
    let mut e = Encoder::new();
    let mut out = Vec::new();
    let pw = StreamId { host, process: pid, worker: PROCESS_WIDE };
    let hello = Hello {
        host_name: "test".into(),
        program: "known-answer".into(),
        pid,
        workers: workers.len() as u32,
        invariant_tsc: false,
        ticks_per_sec: 1_000_000_000,
    };
    e.hello(pw, 0, dom, &hello, &mut out);
    e.clock(pw, 1, dom, &[ClockSample { ticks: 0, monotonic_ns: 0, realtime_ns: 1_000_000 }], &mut out);
    for (w, evs) in workers.iter().enumerate() {
        let sid = StreamId { host, process: pid, worker: first + w as u32 };
        e.hello(sid, 0, dom, &hello, &mut out);
        let meta: Vec<Meta> = (1..=4)
            .map(|i| Meta::Operator { id: i, name: ["A", "B", "C", "D"][i as usize - 1].into(), addr: vec![0, i] })
            .chain([Meta::Span { id: 1, name: "read input".into() }])
            .collect();
        e.metadata(sid, 1, dom, &meta, &mut out);
        let recs: Vec<Record> = evs.iter().map(|&(t, ev)| Record::from_event(t, ev)).collect();
        // Split into frames of `per_frame` (loss can sit between frames).
        let mut seq = 2;
        for (fi, chunk) in recs.chunks(per_frame).enumerate() {
            let l = lost.iter().find(|x| x.0 == w && x.1 == fi).map_or(0, |x| x.2);
            e.records(sid, seq, l, dom, &[chunk], &mut out);
            seq += 1;
        }
        if end {
            e.end(sid, seq, 0, dom, &EndStats::default(), &mut out);
        }
    }
    if end {
        e.end(pw, 2, 0, dom, &EndStats::default(), &mut out);
    }
    out
}

pub fn encode(workers: &[Vec<(u64, Event)>]) -> Vec<u8> {
    encode_opts(workers, true, &[])
}

pub fn send(channel: u32, to: u32, seq: u64) -> Event {
    MessageSend { channel, to, seq, records: 1 }
}
pub fn recv(channel: u32, from: u32, seq: u64) -> Event {
    MessageRecv { channel, from, seq, records: 1 }
}
pub fn start(op: u32) -> Event {
    ScheduleStart { op }
}
pub fn stop(op: u32) -> Event {
    ScheduleStop { op }
}
pub fn step() -> Event {
    Step { elided: 1, spin_ticks: 5 }
}

/// A synthetic trace (`synth`) of `records` records from `workers` streams.
pub fn synth_bytes(records: u64, workers: u32) -> Vec<u8> {
    synth_bytes_at(records, workers, sidecar::synth::SynthConfig::default().t0_ns)
}

/// [`synth_bytes`] starting at `t0_ns` on the host's monotonic clock.
pub fn synth_bytes_at(records: u64, workers: u32, t0_ns: u64) -> Vec<u8> {
    synth_bytes_of(&sidecar::synth::SynthConfig { records, workers, t0_ns, ..Default::default() })
}

/// The synthetic trace `cfg` describes, in memory.
pub fn synth_bytes_of(cfg: &sidecar::synth::SynthConfig) -> Vec<u8> {
    let mut bytes = Vec::new();
    sidecar::synth::generate(cfg, &mut |b| {
        bytes.extend_from_slice(b);
        Ok(())
    })
    .unwrap();
    bytes
}

/// Waits for `child` to exit; after 60 s kills it and fails the test,
/// naming `what`.
pub fn wait_exit(mut child: std::process::Child, what: &str) -> std::process::ExitStatus {
    let t = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if t.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().ok();
            child.wait().ok();
            panic!("{what} did not exit within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The frames of `bytes` (whole, sound headers): (byte offset, header).
pub fn frames(bytes: &[u8]) -> Vec<(usize, ringlog::FrameHeader)> {
    let (mut v, mut off) = (Vec::new(), 0);
    while off < bytes.len() {
        let (h, _) = ringlog::frame::parse_header(&bytes[off..]).expect("a frame header");
        v.push((off, h));
        off += ringlog::frame::HEADER_LEN + h.payload_len as usize;
    }
    v
}

/// `bytes` (whole frames) without the frames of worker `worker`: as if its
/// stream never reached the sidecar.
pub fn without_worker(bytes: &[u8], worker: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for (off, h) in frames(bytes) {
        if h.stream.worker != worker {
            out.extend_from_slice(&bytes[off..off + ringlog::frame::HEADER_LEN + h.payload_len as usize]);
        }
    }
    out
}

/// Waits (at most 20 s) until `p` exists.
pub fn wait_for(p: &std::path::Path) {
    let t = std::time::Instant::now();
    while !p.exists() {
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{} was not created", p.display());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Starts `sidecar run --listen unix:SOCK ARGS...` (stderr piped) and waits
/// until it listens.
pub fn live_sidecar(sock: &std::path::Path, args: &[&str]) -> std::process::Child {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .args(["run", "--listen", &format!("unix:{}", sock.display())])
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the sidecar");
    wait_for(sock);
    child
}

/// target/<profile>, from the test's executable (target/<profile>/deps/x).
pub fn profile_dir() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// The `skew` example binary, built once per test binary (same profile and
/// target dir).
pub fn skew() -> std::path::PathBuf {
    example("skew")
}

/// An example binary (`examples/src/bin`), built once per test binary
/// (same profile and target dir).
pub fn example(bin: &str) -> std::path::PathBuf {
    static BUILT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let dir = profile_dir();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !built.iter().any(|b| b == bin) {
        let mut c = std::process::Command::new(env!("CARGO"));
        c.args(["build", "-p", "examples", "--bin", bin]).env("CARGO_TARGET_DIR", dir.parent().unwrap());
        if dir.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        assert!(c.status().expect("cargo build -p examples").success(), "building {bin} failed");
        built.push(bin.to_string());
    }
    dir.join(bin)
}

/// The count before `what` in the sidecar's closing line on stderr `err`
/// ("refused over --max-connections", " windows (").
pub fn closing_count(err: &str, what: &str) -> u64 {
    let line = err.lines().rev().find(|l| l.contains(" windows (")).unwrap_or_else(|| panic!("no closing line: {err}"));
    let before = &line[..line.find(what).unwrap_or_else(|| panic!("'{what}' not in {line}"))];
    before.split_whitespace().last().and_then(|n| n.trim_start_matches('(').parse().ok()).unwrap()
}
