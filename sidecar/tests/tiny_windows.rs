//! Memory bounded by the windows in flight however short the windows: a
//! read of a trace is bounded in windows, not only in bytes. (Its own test
//! binary: it measures its children's peak memory.)

mod common;

/// `sidecar analyze --window WINDOW -q FILE`: its peak resident memory,
/// KB, and the windows it reported. (Each child's own peak, from `wait4`:
/// the tests of this binary run side by side.)
fn analyze(file: &std::path::Path, window: &str) -> (i64, u64) {
    analyze_with(file, window, &[])
}

/// [`analyze`] with more arguments.
fn analyze_with(file: &std::path::Path, window: &str, more: &[&std::ffi::OsStr]) -> (i64, u64) {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .args(["analyze", "--window", window, "-q"])
        .args(more)
        .arg(file)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = String::new();
    child.stderr.take().unwrap().read_to_string(&mut said).unwrap();
    let mut status = 0;
    // SAFETY: rusage is plain integers, for which all zeros is a value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 writes the status and the struct it is given and
    // nothing else; the child is ours and not waited for elsewhere.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut u) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4: {}", std::io::Error::last_os_error());
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "analyze --window {window}: {said}");
    (u.ru_maxrss, common::closing_count(&said, " windows ("))
}

/// A 2-million-record trace of 2 workers (about 3 s of trace): at 10 ms
/// windows (300 of them) the sidecar peaks at some size; at 30 µs (101,000
/// windows) the windows in flight are as many, so the peak must stay
/// within 3× of it. (It was 9×, 1.26 GB against 140 MB: one 4 MB read
/// made 66,000 windows' fragments and reports at once.)
#[test]
fn tiny_windows_take_about_the_memory_of_ordinary_ones() {
    let file = std::env::temp_dir().join(format!("tiny-windows-{}.rlog", std::process::id()));
    std::fs::write(&file, common::synth_bytes(2_000_000, 2)).unwrap();
    let (ordinary, _) = analyze(&file, "10ms");
    let (tiny, _) = analyze(&file, "30us");
    let _ = std::fs::remove_file(&file);
    assert!(tiny <= 3 * ordinary, "peak {tiny} KB at 30 µs windows against {ordinary} KB at 10 ms");
}

/// One worker whose 12 records each carry its stream 20,000 windows of
/// 10 ms on: 6 schedules of 200 s, 200 s apart. Each is placed in its first
/// 10,000 windows (`MAX_SPAN`) and each silence spelled out for 10,000
/// (`MAX_SKIP`): about 110,000 windows from one small read. Their fragments
/// come at once, but the analysis reports them a few at a time, so a
/// window in flight costs its fragment, not its report: the peak over that
/// of 1 s windows (about 2,200 of them) is at most 4 KB a window. (It was
/// 11.6 KB: all the reports were held at once, each in room for a batch of
/// them, 8 KB apiece.)
#[test]
fn records_far_apart_hold_their_fragments_not_their_reports() {
    use common::{start, stop};
    const S: u64 = 1_000_000_000;
    let file = std::env::temp_dir().join(format!("far-apart-{}.rlog", std::process::id()));
    let events: Vec<_> = (0..6).flat_map(|i| [(i * 400 * S, start(1)), (i * 400 * S + 200 * S, stop(1))]).collect();
    std::fs::write(&file, common::encode(&[events])).unwrap();
    let (few, few_windows) = analyze(&file, "1s");
    let (many, windows) = analyze(&file, "10ms");
    let _ = std::fs::remove_file(&file);
    assert!(windows >= 100_000 && few_windows < 3_000, "{windows} and {few_windows} windows");
    let per_window = (many - few) * 1024 / windows as i64;
    eprintln!("{per_window} B a window: peak {many} KB for {windows} windows, {few} KB for {few_windows}");
    assert!(
        per_window <= 4096,
        "{per_window} B a window: peak {many} KB for {windows} windows, {few} KB for {few_windows}"
    );
}

/// The same schedules, 100 of them, all in one frame: each record carries
/// the stream 20,000 windows on, 2 million in all, but a frame fills at
/// most `FRAME_WINDOWS` (100,000) windows beyond its records' own; the rest
/// is silence, skipped, and a fault says so. (Without the bound the peak
/// was GBs.)
#[test]
fn a_frame_of_records_far_apart_fills_a_bounded_number_of_windows() {
    const S: u64 = 1_000_000_000;
    let dir = std::env::temp_dir();
    let file = dir.join(format!("far-apart-frame-{}.rlog", std::process::id()));
    let json = dir.join(format!("far-apart-frame-{}.jsonl", std::process::id()));
    let events: Vec<_> =
        (0..100).flat_map(|i| [(i * 400 * S, common::start(1)), (i * 400 * S + 200 * S, common::stop(1))]).collect();
    std::fs::write(&file, common::encode_in_frames(common::HOST, common::PID, 0, &[events], true, &[], 200)).unwrap();
    let (few, few_windows) = analyze(&file, "1s");
    let (many, windows) = analyze_with(&file, "10ms", &["--json".as_ref(), json.as_os_str()]);
    let reports = std::fs::read_to_string(&json).unwrap();
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&json);
    // (At 1 s: 40,000 windows, each schedule's 200 and its silence's.)
    assert!(few_windows >= 39_000, "{few_windows} windows at 1 s");
    // The 100,000 windows filled, the windows the 200 records start in,
    // and the window the last record's stream ends in.
    assert!((100_000..=100_201).contains(&windows), "{windows} windows at 10 ms");
    assert!(reports.contains("one frame's records reach more than 100000 windows past their own"));
    let mb = (many - few) / 1024;
    eprintln!("peak {many} KB at 10 ms, {few} KB at 1 s: {mb} MB more for {windows} windows");
    assert!(mb <= 400, "peak {many} KB at 10 ms against {few} KB at 1 s");
}
