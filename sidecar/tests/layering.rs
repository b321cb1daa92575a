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

/// Every module of the library (a file: `output/sink.rs` is
/// `output::sink`, `output/http/mod.rs` is `output::http`) and the modules
/// its code names by `crate::` or `super::` paths, each resolved to the
/// longest module it starts with. A module also stands on its children (a
/// folder's module is its files), and naming an ancestor is no edge (a
/// child may use what its folder shares).
fn module_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let module_of = |f: &Path| -> String {
        let rel = f.strip_prefix(&root).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|l| l == "mod" || l == "lib" || l == "main") {
            parts.pop();
        }
        parts.join("::")
    };
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let resolve = |path: &str| -> Option<String> {
        let parts: Vec<&str> = path.split("::").collect();
        (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| modules.contains(m))
    };
    let is_ancestor = |a: &str, of: &str| a.is_empty() || of.starts_with(&format!("{a}::"));
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let m = module_of(f);
        if m.is_empty() || m.starts_with("cli") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        // (Tests may reach anywhere: only the module's own code counts.)
        let own = text.split("#[cfg(test)]").next().unwrap_or("");
        let is_folder = f.file_stem().is_some_and(|s| s == "mod");
        let parent = if is_folder { m.clone() } else { m.rsplit_once("::").map_or(String::new(), |p| p.0.to_string()) };
        let edges = g.entry(m.clone()).or_default();
        for line in own.lines().map(|l| l.split("//").next().unwrap_or("")) {
            for (prefix, base) in [("crate::", String::new()), ("super::", parent.clone())] {
                for (i, _) in line.match_indices(prefix) {
                    if prefix == "super::" && i >= 7 && line[..i].ends_with("crate::") {
                        continue;
                    }
                    let rest: String = line[i + prefix.len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    // (`super::super::x`, and `super::` in a folder's module: one more level.)
                    let mut base = base.clone();
                    let mut rest = rest.as_str();
                    if prefix == "super::" && is_folder {
                        base = base.rsplit_once("::").map_or(String::new(), |p| p.0.to_string());
                    }
                    while let Some(r) = rest.strip_prefix("super::") {
                        base = base.rsplit_once("::").map_or(String::new(), |p| p.0.to_string());
                        rest = r;
                    }
                    let full = if base.is_empty() { rest.to_string() } else { format!("{base}::{rest}") };
                    if let Some(t) = resolve(full.trim_end_matches(':')) {
                        if t != m && !is_ancestor(&t, &m) {
                            edges.insert(t);
                        }
                    }
                }
            }
        }
    }
    for m in &modules {
        if let Some((parent, _)) = m.rsplit_once("::") {
            g.entry(parent.to_string()).or_default().insert(m.clone());
        }
    }
    g
}

/// A circle through `from` (the modules on it), if any.
fn circle(
    g: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    from: &str,
) -> Option<Vec<String>> {
    fn walk(
        g: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<String>,
        seen: &mut std::collections::BTreeSet<String>,
    ) -> bool {
        let at = path.last().unwrap().clone();
        for next in g.get(&at).into_iter().flatten() {
            if *next == path[0] {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(g, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![from.to_string()];
    walk(g, &mut path, &mut Default::default()).then_some(path)
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let g = module_graph();
    assert!(g["output::http::server"].contains("output::export"), "the check reads the imports: {g:#?}");
    assert!(g["pipeline::dataflow::report"].contains("pipeline::dataflow::outputs"), "{g:#?}");
    let circles: std::collections::BTreeSet<String> =
        g.keys().filter_map(|m| circle(&g, m)).map(|c| c.join(" → ")).collect();
    assert!(circles.is_empty(), "import circles: {circles:#?}");
}
