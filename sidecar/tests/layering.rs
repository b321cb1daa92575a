//! The sidecar's parts import one way (docs/architecture.md): the command
//! line → pipeline, io, output → ingest → analysis, and the analysis does no
//! I/O and knows no timely. Checked on the source text: every `crate::X`
//! path outside comments must name a part the folder may import, and the
//! analysis and ingest folders must not name the crates or std modules that
//! do I/O.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its comments (line comments and doc lines;
/// the sources use no block comments).
fn code(p: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(p).unwrap();
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or("").to_string()))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect()
}

/// `crate::X` (or `sidecar::X` from the binary's modules): the X's named.
fn parts_named(line: &str, prefix: &str) -> Vec<String> {
    line.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &line[i + prefix.len()..];
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect()
        })
        .collect()
}

/// Every violation of `folder` may import only `allowed` (and may not
/// mention `forbidden`), as "file:line: what".
fn check(folder: &str, prefix: &str, allowed: &[&str], forbidden: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(folder);
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(!files.is_empty(), "no sources under {}", root.display());
    let mut bad = Vec::new();
    for f in &files {
        for (n, line) in code(f) {
            for part in parts_named(&line, prefix) {
                if !allowed.contains(&part.as_str()) {
                    bad.push(format!("{}:{n}: imports {prefix}{part}", f.display()));
                }
            }
            for word in forbidden {
                if line.contains(word) {
                    bad.push(format!("{}:{n}: mentions {word}", f.display()));
                }
            }
        }
    }
    bad
}

/// What does I/O or runs the dataflow: none of it in the analysis or ingest.
const IO: &[&str] = &["timely::", "std::fs", "std::net", "std::os::", "std::process", "clap::", "libc::", "socket2::"];

#[test]
fn the_analysis_imports_nothing_else_of_the_sidecar_and_does_no_io() {
    let bad = check("analysis", "crate::", &["analysis"], IO);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn ingest_imports_only_the_analysis() {
    let bad = check("ingest", "crate::", &["analysis", "ingest"], IO);
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn io_and_output_import_only_what_is_below_them() {
    let mut bad = check("io", "crate::", &["analysis", "ingest", "io", "say", "panic_message"], &[]);
    bad.extend(check("output", "crate::", &["analysis", "output", "say"], &[]));
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_pipeline_does_not_import_the_command_line() {
    let parts = ["analysis", "ingest", "io", "output", "pipeline", "say", "panic_message", "synth"];
    let bad = check("pipeline", "crate::", &parts, &[]);
    assert!(bad.is_empty(), "{bad:#?}");
}
