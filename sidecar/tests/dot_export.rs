//! `sidecar export --dot`: the dataflow graph of a recorded run, read back
//! with a real DOT parser (graphviz-rust's), against the operators and
//! channels the probe recorded (`sidecar dump` of the same file).

use std::path::{Path, PathBuf};
use std::process::Command;

use graphviz_rust::dot_structures::{Edge, EdgeTy, Graph, Id, Stmt, Subgraph, Vertex};

const BIN: &str = env!("CARGO_BIN_EXE_sidecar");

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sidecar-dot-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn id(i: &Id) -> String {
    match i {
        Id::Html(s) | Id::Escaped(s) | Id::Plain(s) | Id::Anonymous(s) => s.clone(),
    }
}

/// Clusters (name, depth), nodes (name, attributes) and edges (from, to,
/// attributes) of a parsed graph, at any depth.
#[derive(Default)]
struct Parts {
    clusters: Vec<(String, usize)>,
    nodes: Vec<(String, String)>,
    edges: Vec<(String, String, String)>,
}

fn attrs(a: &[graphviz_rust::dot_structures::Attribute]) -> String {
    a.iter().map(|a| format!("{}={}", id(&a.0), id(&a.1))).collect::<Vec<_>>().join(" ")
}

fn walk(stmts: &[Stmt], depth: usize, p: &mut Parts) {
    for s in stmts {
        match s {
            Stmt::Subgraph(Subgraph { id: i, stmts }) => {
                p.clusters.push((id(i), depth));
                walk(stmts, depth + 1, p);
            }
            Stmt::Node(n) => p.nodes.push((id(&n.id.0), attrs(&n.attributes))),
            Stmt::Edge(Edge { ty: EdgeTy::Pair(Vertex::N(a), Vertex::N(b)), attributes }) => {
                p.edges.push((id(&a.0), id(&b.0), attrs(attributes)))
            }
            Stmt::Edge(e) => panic!("an edge between two nodes: {e:?}"),
            _ => {}
        }
    }
}

fn export_dot(trace: &str) -> Parts {
    let out = tmp(&format!("{trace}.dot"));
    let run = Command::new(BIN)
        .args(["export", "--window", "50ms", "--dot", out.to_str().unwrap(), golden(trace).to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{err}");
    assert!(err.contains("dataflow graph (") && err.contains("written to"), "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let Graph::DiGraph { stmts, .. } = graphviz_rust::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}")) else {
        panic!("a digraph: {text}")
    };
    let mut p = Parts::default();
    walk(&stmts, 0, &mut p);
    p
}

#[test]
fn bfs_exports_as_dot_that_a_dot_parser_reads_back_whole() {
    // `sidecar dump tests/golden/bfs.rlog`: operators 1 ToStreamBuilder,
    // 2 Feedback, 3 BFS, 6 ToStreamBuilder, 7 Concatenate in the dataflow
    // 0 (addresses [0, i]); channels 1→3, 2→3, 3→7, 6→7, 7→2 (the loop).
    let p = export_dot("bfs.rlog");
    assert_eq!(p.clusters, vec![("cluster_0".to_string(), 0)], "the dataflow's box");
    let mut nodes: Vec<&str> = p.nodes.iter().map(|n| n.0.as_str()).collect();
    nodes.sort();
    assert_eq!(nodes, vec!["op1", "op2", "op3", "op6", "op7"]);
    let mut edges: Vec<(&str, &str)> = p.edges.iter().map(|e| (e.0.as_str(), e.1.as_str())).collect();
    edges.sort();
    assert_eq!(edges, vec![("op1", "op3"), ("op2", "op3"), ("op3", "op7"), ("op6", "op7"), ("op7", "op2")]);
    for (name, a) in &p.nodes {
        assert!(a.contains("of the critical path"), "{name}: {a}");
    }
    // One operator is the top of the path (thick red): the one with the
    // most critical-path time in `analyze --json`'s windows, summed over
    // workers (bfs has 5 operators: each window lists all of them).
    let hot: Vec<&str> = p.nodes.iter().filter(|n| n.1.contains("penwidth=3")).map(|n| n.0.as_str()).collect();
    assert_eq!(hot, vec![format!("op{}", top_operator("bfs.rlog"))], "{:?}", p.nodes);
    for (a, b, at) in &p.edges {
        assert!(at.contains("messages"), "{a} -> {b}: {at}");
    }
}

/// The operator id with the most time on the critical path over the
/// windows of `sidecar analyze --json`.
fn top_operator(trace: &str) -> u64 {
    let out = Command::new(BIN)
        .args(["analyze", "--window", "50ms", "-q", "--json", "-", golden(trace).to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut ns: std::collections::BTreeMap<u64, u64> = Default::default();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let w: serde_json::Value = serde_json::from_str(line).unwrap();
        for o in w["critical_path"]["top_operators"].as_array().unwrap() {
            *ns.entry(o["operator"].as_u64().unwrap()).or_default() += o["ns"].as_u64().unwrap();
        }
    }
    ns.into_iter().max_by_key(|&(op, n)| (n, std::cmp::Reverse(op))).expect("an operator on the path").0
}

#[test]
fn export_without_an_output_or_into_a_missing_folder_is_refused() {
    let t = golden("skew.rlog");
    let out = Command::new(BIN).args(["export", t.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--perfetto"), "names what is missing: {err}");
    let bad = tmp("no/such/folder/graph.dot");
    let out = Command::new(BIN).args(["export", "--dot", bad.to_str().unwrap(), t.to_str().unwrap()]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot create") && err.contains("graph.dot"), "{err}");
}
