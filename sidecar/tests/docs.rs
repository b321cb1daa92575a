//! The user docs checked against the repository and the code: every
//! relative link and anchor resolves, every repository path quoted in
//! backticks exists, every subcommand is listed where the README and
//! commands.md list them, and every sample window line has the shape of a
//! line the sidecar prints for a recorded run, and every sample closing
//! summary has the lines `watch` prints, in their order.
//!
//! The pages: README.md, docs/*.md, ringlog/FORMAT.md.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The user-facing pages, relative to the repository root.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut v = vec![PathBuf::from("README.md"), PathBuf::from("ringlog/FORMAT.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| p.strip_prefix(&root).unwrap().to_path_buf())
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

fn read(page: &Path) -> String {
    std::fs::read_to_string(root().join(page)).unwrap_or_else(|e| panic!("{}: {e}", page.display()))
}

/// A page's lines outside code fences, with their line numbers (1-based),
/// and the lines inside fences apart.
struct Parsed {
    prose: Vec<(usize, String)>,
    fenced: Vec<(usize, String)>,
}

fn parse(text: &str) -> Parsed {
    let (mut prose, mut fenced, mut fence) = (Vec::new(), Vec::new(), None::<String>);
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| t.starts_with(m));
        match (&fence, marker) {
            (None, Some(m)) => fence = Some(m.to_string()),
            (Some(f), Some(m)) if f == m && t.trim_end() == m => fence = None,
            (Some(_), _) => fenced.push((i + 1, line.to_string())),
            (None, None) => prose.push((i + 1, line.to_string())),
        }
    }
    Parsed { prose, fenced }
}

/// Splits a prose line into its text outside inline code and its code spans.
fn split_code(line: &str) -> (String, Vec<String>) {
    let (mut text, mut spans) = (String::new(), Vec::new());
    let mut parts = line.split('`');
    let mut inside = false;
    for part in parts.by_ref() {
        if inside {
            spans.push(part.to_string());
        } else {
            text.push_str(part);
        }
        inside = !inside;
    }
    (text, spans)
}

/// The targets of `[text](target)` and `![alt](target)` links in a line's text.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let mut depth = 1;
        let end = after.char_indices().find(|&(_, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            depth == 0
        });
        match end {
            Some((j, _)) => {
                // A title after the target (`(x.md "title")`) is not part of it.
                let target = after[..j].split_whitespace().next().unwrap_or("").to_string();
                out.push(target);
                rest = &after[j..];
            }
            None => break,
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, letters, digits, `-` and `_`
/// kept, spaces become `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors a page's headings give (a repeated heading gets `-1`, `-2`, ...).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = HashSet::new();
    for (_, line) in parse(text).prose {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let s = slug(&line[hashes..]);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 { s.clone() } else { format!("{s}-{n}") });
        *n += 1;
    }
    out
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = root();
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().unwrap().to_path_buf();
        for (n, line) in parse(&text).prose {
            let (outside, _) = split_code(&line);
            for target in link_targets(&outside) {
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() { page.clone() } else { normalize(&dir.join(path)) };
                let at = format!("{}:{n}: ({target})", page.display());
                if !root.join(&file).exists() {
                    broken.push(format!("{at}: {} does not exist", file.display()));
                    continue;
                }
                if let Some(a) = anchor {
                    if file.extension().is_none_or(|x| x != "md") {
                        broken.push(format!("{at}: an anchor into a file that is not Markdown"));
                    } else if !anchors(&read(&file)).contains(a) {
                        broken.push(format!("{at}: {} has no heading with anchor #{a}", file.display()));
                    }
                }
            }
        }
    }
    assert!(checked > 40, "only {checked} links found: is the parser right?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// `a/b/../c` → `a/c` (the link is resolved as a browser would, not on the
/// file system, so a link through a missing folder is caught too).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn every_repository_path_quoted_in_the_docs_exists() {
    // `sidecar/src/ingest/sync.rs`, `docs/performance.md`: a path from the
    // repository's root, in backticks. Placeholders (FILE, *, ...) aside.
    let tops = [
        "README.md",
        "docs/",
        "sidecar/",
        "probe/",
        "ringlog/",
        "clocksync/",
        "benches/",
        "examples/",
        "fuzz/",
        ".ci/",
    ];
    let root = root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for page in pages() {
        for (n, line) in parse(&read(&page)).prose {
            for span in split_code(&line).1 {
                let word = span.trim().trim_end_matches([',', '.', ';', ':']);
                if !tops.iter().any(|t| word.starts_with(t))
                    || word.contains([' ', '*', '{', '<', '[', '$', '='])
                    || word.contains("...")
                    || word.chars().any(|c| c.is_ascii_uppercase() && word.contains("FILE"))
                {
                    continue;
                }
                // `path:line` and `path::item` name a place in the file.
                let path = word.split("::").next().unwrap();
                let path = path.split(':').next().unwrap();
                checked += 1;
                if !root.join(path).exists() {
                    missing.push(format!("{}:{n}: `{span}`", page.display()));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} paths found: is the parser right?");
    assert!(missing.is_empty(), "paths quoted in the docs that do not exist:\n{}", missing.join("\n"));
}

/// The subcommands `sidecar --help` lists.
fn subcommands() -> Vec<String> {
    let o = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    let list = text.split("Commands:").nth(1).expect("sidecar --help lists its commands");
    list.lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_table_and_the_commands_page_list_every_subcommand() {
    let subs = subcommands();
    assert!(subs.len() >= 7, "{subs:?}");
    let readme = read(Path::new("README.md"));
    let table = readme.split("## The subcommands").nth(1).expect("the README's subcommand table");
    let commands = read(Path::new("docs/commands.md"));
    let opening = commands.split("\n\n").nth(1).expect("commands.md's opening paragraph");
    let synopsis = commands.split("## Commands").nth(1).expect("commands.md's synopsis");
    for s in &subs {
        assert!(table.contains(&format!("| `sidecar {s}")), "the README's subcommand table lacks `sidecar {s}`");
        let listed = opening.contains(&format!("`{s}`")) || opening.contains(&format!("`sidecar {s}`"));
        assert!(listed, "commands.md's opening list lacks `{s}`:\n{opening}");
        assert!(synopsis.contains(&format!("sidecar {s} ")), "commands.md's synopsis lacks `sidecar {s}`");
    }
}

/// A line's shape: every number (digits, with `.` or `,` between digits)
/// becomes `#`, a figure's unit `<t>`. Two lines of the same shape differ
/// only in their figures. What only a live run prints is taken as a figure
/// too: an incompleteness's reason (`INCOMPLETE (late data ...)`) and a
/// wait on a worker not known yet (`w1→?`).
fn shape(line: &str) -> String {
    let mut line = line.trim().replace("→?", "→w0");
    if let Some(i) = line.find("INCOMPLETE (") {
        let open = i + "INCOMPLETE ".len();
        let mut depth = 0;
        let close = line[open..].char_indices().find_map(|(j, c)| {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            (depth == 0).then_some(open + j)
        });
        if let Some(close) = close {
            line.replace_range(open..=close, "(…)");
        }
    }
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let inside = |j: usize| {
                chars[j].is_ascii_digit()
                    || (matches!(chars[j], '.' | ',') && chars.get(j + 1).is_some_and(char::is_ascii_digit))
            };
            while i < chars.len() && inside(i) {
                i += 1;
            }
            out.push('#');
            // The unit goes with the figure: `5 µs` and `16 ms` are one shape.
            for unit in [" ns", " µs", " ms", " s"] {
                let u: Vec<char> = unit.chars().collect();
                if chars[i..].starts_with(&u) && !chars.get(i + u.len()).is_some_and(|c| c.is_alphanumeric()) {
                    out.push_str(" <t>");
                    i += u.len();
                    break;
                }
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn a_shape_replaces_numbers_and_keeps_the_words() {
    assert_eq!(shape("window 12 (250 ms)  complete"), "window # (# <t>)  complete");
    assert_eq!(shape("w1→w0 2.5 ms, w0→w1 1,600 µs"), "w#→w# # <t>, w#→w# # <t>");
    assert_eq!(shape("2 streams, 2 s, 2 steps"), "# streams, # <t>, # steps");
    assert_eq!(shape("2 streams, 465 events"), "# streams, # events");
    assert_eq!(shape("99.4%, w0 Dataflow 0.1%, ..."), "#%, w# Dataflow #%, ...");
    assert_ne!(shape("w0 Consume 99%"), shape("w0 Consume 99%, w1 Probe 0%"));
    assert_eq!(
        shape("INCOMPLETE (late data (w0))  waits: w1→? 5 ms"),
        shape("INCOMPLETE (a cut stream)  waits: w1→w0 2 ms")
    );
    assert_ne!(shape("INCOMPLETE (late data)  waits"), shape("complete  waits"));
}

/// The window lines `sidecar analyze` prints for the recorded example
/// workloads in tests/golden, at several window lengths (a window's length
/// is a figure of its line; the lengths give lines of every kind: one wait
/// or several, one operator or several, complete or not).
fn golden_lines() -> Vec<String> {
    let golden = root().join("sidecar/tests/golden");
    let mut lines = Vec::new();
    for t in ["skew", "pagerank", "wordcount", "bfs"] {
        for window in ["10ms", "50ms", "250ms", "1s"] {
            let o = Command::new(BIN)
                .args(["analyze", "--window", window])
                .arg(golden.join(format!("{t}.rlog")))
                .output()
                .unwrap();
            assert!(o.status.success(), "sidecar analyze {t}.rlog: {}", String::from_utf8_lossy(&o.stderr));
            let out = String::from_utf8(o.stdout).unwrap();
            lines.extend(out.lines().filter(|l| l.starts_with("window ")).map(str::to_string));
        }
    }
    lines
}

#[test]
fn every_sample_window_line_in_the_docs_has_the_shape_of_a_printed_one() {
    // A sample is a line starting with `window ` in a code block. Its
    // figures come from whatever run the page shows (live or recorded); its
    // words, their order and how many entries each list has must be what
    // the sidecar prints: some line of `sidecar analyze` on the recorded
    // workloads has the same shape.
    let mut samples = Vec::new();
    for page in pages() {
        for (n, line) in parse(&read(&page)).fenced {
            let l = line.trim();
            if l.starts_with("window ") {
                samples.push((format!("{}:{n}", page.display()), l.to_string()));
            }
        }
    }
    assert!(samples.len() >= 5, "only {} sample window lines found", samples.len());
    let printed = golden_lines();
    let shapes: HashSet<String> = printed.iter().map(|l| shape(l)).collect();
    let stale: Vec<String> = samples
        .iter()
        .filter(|(_, l)| !shapes.contains(&shape(l)))
        .map(|(at, l)| format!("{at}:\n  sample:          {l}\n  printed (first): {}", printed[0]))
        .collect();
    assert!(stale.is_empty(), "sample window lines the sidecar does not print (shape differs):\n{}", stale.join("\n"));
}

/// `issue 31`, `issue #4`, `session 14`: a reference to the project's own
/// history, which a reader of the docs cannot follow.
fn cites_history(line: &str) -> bool {
    let l = line.to_lowercase();
    ["issue", "session"].iter().any(|w| {
        l.match_indices(w).any(|(i, _)| {
            let rest = l[i + w.len()..].trim_start_matches([' ', '#', 's']);
            l[i + w.len()..].starts_with([' ', 's']) && rest.starts_with(|c: char| c.is_ascii_digit())
        })
    })
}

#[test]
fn a_reference_to_an_issue_or_a_session_is_recognized() {
    assert!(cites_history("the threshold of issue 31.1"));
    assert!(cites_history("(issues 4 and 5)"));
    assert!(cites_history("session 14's binary"));
    assert!(cites_history("see Issue #12"));
    assert!(!cites_history("an issue with 2 workers"));
    assert!(!cites_history("the sessions of a day"));
}

#[test]
fn the_user_docs_and_help_texts_cite_no_issue_or_session_numbers() {
    let mut texts: Vec<(String, String)> = pages().iter().map(|p| (p.display().to_string(), read(p))).collect();
    for sub in std::iter::once(String::new()).chain(subcommands()) {
        let o = Command::new(BIN).args([sub.as_str(), "--help"].iter().filter(|a| !a.is_empty())).output().unwrap();
        texts.push((format!("sidecar {sub} --help"), String::from_utf8_lossy(&o.stdout).into_owned()));
    }
    let cited: Vec<String> = texts
        .iter()
        .flat_map(|(name, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| cites_history(l))
                .map(move |(n, l)| format!("{name}:{}: {l}", n + 1))
        })
        .collect();
    assert!(cited.is_empty(), "user-facing text citing the project's history:\n{}", cited.join("\n"));
}

/// The lines of `watch`'s closing summary after its first, each by how it
/// starts, in the order `output/watch.rs` prints them (the optional ones
/// included: a tie, the arrangements, the idle steps).
const SUMMARY_LINES: [&str; 13] = [
    "windows: ",
    "critical path: ",
    "top operator tied: ",
    "waiting: ",
    "arrangements: ",
    "what-if: ",
    "tracing cost the worker threads ~",
    "apart: ~",
    "figures: ",
    "tracing cost: ",
    "in the worker threads ~",
    "and ~",
    "writer thread CPU ",
];

/// The lines of [`SUMMARY_LINES`] printed whatever the run.
const ALWAYS_PRINTED: [&str; 8] = [
    "windows: ",
    "critical path: ",
    "waiting: ",
    "tracing cost the worker threads ~",
    "figures: ",
    "tracing cost: ",
    "in the worker threads ~",
    "writer thread CPU ",
];

#[test]
fn every_sample_closing_summary_in_the_docs_has_the_lines_watch_prints_in_its_order() {
    // Each start is in the code that prints the summary (a renamed line
    // fails here, not silently in the docs).
    let code = std::fs::read_to_string(root().join("sidecar/src/output/watch.rs")).unwrap();
    for start in SUMMARY_LINES {
        assert!(code.contains(&format!("\"  {start}")) || code.contains(&format!("\"{start}")), "{start:?}");
    }
    // A sample: a fenced `sidecar watch: `...` exited with status` line and
    // the indented lines after it (`...` stands for lines left out).
    let mut samples = 0;
    for page in pages() {
        let fenced = parse(&read(&page)).fenced;
        for (i, (n, line)) in fenced.iter().enumerate() {
            if !(line.starts_with("sidecar watch: `") && line.contains("` exited with status ")) {
                continue;
            }
            samples += 1;
            // (The next line expected, and whether lines were left out
            // before this one.)
            let (mut at, mut elided) = (0, false);
            let lines = fenced[i + 1..].iter().take_while(|(_, l)| l.starts_with("  "));
            for (m, l) in lines.chain([&(0, "  writer thread CPU (end)".to_string())]) {
                let l = l.trim_start();
                if l == "..." {
                    elided = true;
                    continue;
                }
                let Some(k) = SUMMARY_LINES.iter().position(|s| l.starts_with(s)) else {
                    panic!("{}:{m}: a summary line watch does not print: {l}", page.display());
                };
                // (`what-if:` repeats: one line per prediction.)
                assert!(k + 1 >= at, "{}:{m}: out of the printed order (summary at line {n}): {l}", page.display());
                let skipped: Vec<&str> =
                    (at..k).filter(|&j| ALWAYS_PRINTED.contains(&SUMMARY_LINES[j])).map(|j| SUMMARY_LINES[j]).collect();
                assert!(
                    elided || skipped.is_empty(),
                    "{}:{n}: the sample lacks {skipped:?} (watch always prints it; `...` marks lines left out)",
                    page.display()
                );
                (at, elided) = (k + 1, false);
            }
        }
    }
    assert!(samples >= 2, "only {samples} sample summaries found");
}
