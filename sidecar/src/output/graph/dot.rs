//! The dataflow graph as Graphviz DOT (`sidecar export --dot`): scopes as
//! nested `subgraph cluster_…`, each operator labelled with its name and
//! its share of the critical path, each edge with its channels, messages
//! and share of the waits; the critical path's operators and edges in red.

use std::io::Write;

use super::{Graph, Node};

const HOT: &str = "#c62828";
const JOINS: &str = "#e57373";

/// A DOT string literal: quotes and backslashes escaped, line breaks as
/// DOT's `\n`.
fn quoted(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => {}
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn pct(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

fn ms(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}

/// Writes the graph as one `digraph`.
pub fn write_dot(g: &Graph, out: &mut impl Write) -> std::io::Result<()> {
    let range = match g.window_range {
        Some((a, b)) if a == b => format!("window {a}"),
        Some((a, b)) => format!("windows {a}–{b}"),
        None => "no windows".into(),
    };
    let title = format!(
        "dataflow: {range} ({} analyzed); critical path {}, waiting {} ({} on progress, {} without a visible cause)",
        g.windows,
        ms(g.critical_ns),
        ms(g.wait_ns),
        ms(g.progress_wait_ns),
        ms(g.unknown_wait_ns)
    );
    writeln!(out, "digraph dataflow {{")?;
    writeln!(out, "  graph [label={}, labelloc=t, fontname=\"sans-serif\", compound=true];", quoted(&title))?;
    writeln!(out, "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", fontname=\"sans-serif\"];")?;
    writeln!(out, "  edge [fontname=\"sans-serif\", fontsize=10];")?;
    let hot = g.hot();
    // Scopes and their members, nested: children of each scope, then the
    // nodes directly in it.
    let mut kids: Vec<Vec<usize>> = vec![Vec::new(); g.scopes.len()];
    let mut roots = Vec::new();
    for (i, s) in g.scopes.iter().enumerate() {
        match s.parent {
            Some(p) => kids[p].push(i),
            None => roots.push(i),
        }
    }
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); g.scopes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        match n.scope {
            Some(s) => members[s].push(i),
            None => write_node(g, i, n, hot, 1, out)?,
        }
    }
    for r in roots {
        write_scope(g, r, &kids, &members, hot, 1, out)?;
    }
    for e in &g.edges {
        let (on, joins) = g.edge_on_path(e);
        let chans: Vec<String> = e.channels.iter().map(|c| c.to_string()).collect();
        let mut label = format!("ch {}: {} messages", chans.join(", "), e.messages);
        if e.wait_ns > 0 {
            label += &format!("\n{} of the waits ({})", pct(g.wait_share(e)), ms(e.wait_ns));
        }
        if e.critical_ns > 0 {
            label += &format!("\non the critical path {} ({}×)", ms(e.critical_ns), e.crossings);
        }
        let style = if on {
            format!(", color=\"{HOT}\", fontcolor=\"{HOT}\", penwidth=2.5")
        } else if joins {
            format!(", color=\"{JOINS}\", penwidth=1.8")
        } else {
            String::new()
        };
        writeln!(out, "  op{} -> op{} [label={}{style}];", g.nodes[e.from].op, g.nodes[e.to].op, quoted(&label))?;
    }
    writeln!(out, "}}")
}

fn write_scope(
    g: &Graph,
    s: usize,
    kids: &[Vec<usize>],
    members: &[Vec<usize>],
    hot: Option<usize>,
    depth: usize,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let ind = "  ".repeat(depth);
    let sc = &g.scopes[s];
    writeln!(out, "{ind}subgraph cluster_{} {{", sc.op)?;
    writeln!(
        out,
        "{ind}  label={}; style=\"rounded\"; color=\"#9e9e9e\";",
        quoted(&format!("{} (op {})", sc.name, sc.op))
    )?;
    for &k in &kids[s] {
        write_scope(g, k, kids, members, hot, depth + 1, out)?;
    }
    for &i in &members[s] {
        write_node(g, i, &g.nodes[i], hot, depth + 1, out)?;
    }
    writeln!(out, "{ind}}}")
}

fn write_node(
    g: &Graph,
    i: usize,
    n: &Node,
    hot: Option<usize>,
    depth: usize,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let ind = "  ".repeat(depth);
    let f = &n.figures;
    let mut label = format!("{}\n{} of the critical path", f.name, pct(g.critical_share(n)));
    if f.busy_ns > 0 {
        label += &format!("\nran {}", ms(f.busy_ns));
    }
    let style = if hot == Some(i) {
        format!(", color=\"{HOT}\", fillcolor=\"#ffcdd2\", penwidth=3")
    } else if f.critical_ns > 0 {
        format!(", color=\"{HOT}\", fillcolor=\"#ffebee\", penwidth=1.5")
    } else {
        String::new()
    };
    writeln!(out, "{ind}op{} [label={}{style}];", n.op, quoted(&label))
}
