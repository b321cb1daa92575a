//! Memory bounded by the windows in flight however short the windows: a
//! read of a trace is bounded in windows, not only in bytes. (Its own test
//! binary: it measures its children's peak memory.)

mod common;

/// The peak resident memory of every child waited for so far, KB.
fn children_peak_kb() -> i64 {
    // SAFETY: getrusage writes the struct it is given and nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is a valid `who`.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) }, 0);
    u.ru_maxrss
}

fn analyze(file: &std::path::Path, window: &str) {
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_sidecar"))
        .args(["analyze", "--window", window, "-q"])
        .arg(file)
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "analyze --window {window}");
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
    analyze(&file, "10ms");
    let ordinary = children_peak_kb();
    analyze(&file, "30us");
    let tiny = children_peak_kb();
    let _ = std::fs::remove_file(&file);
    assert!(tiny <= 3 * ordinary, "peak {tiny} KB at 30 µs windows against {ordinary} KB at 10 ms");
}
