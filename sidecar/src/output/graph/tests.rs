use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::*;
use crate::analysis::analyze::{Activity, CriticalPiece, Message};
use crate::analysis::model::{Sid, StreamMeta};

/// A dataflow (op 0, address [0]) with an input (1), an iteration scope
/// (2) holding a Map (3) and its Feedback (4), and a Probe (5) after it,
/// on two workers. The channels as the probe resolves them (a scope's own
/// id for its boundary):
///
/// | ch | from → to | what it is |
/// |---|---|---|
/// | 10 | (1,0) → (2,0) | the input into the iteration (outside) |
/// | 11 | (2,0) → (3,0) | the iteration's input 0 to Map (inside) |
/// | 12 | (3,0) → (4,0) | Map to Feedback |
/// | 13 | (4,0) → (3,1) | Feedback back to Map (the cycle) |
/// | 14 | (3,0) → (2,0) | Map to the iteration's output 0 (inside) |
/// | 15 | (2,0) → (5,0) | the iteration's output to Probe (outside) |
pub(super) fn iterate_detail() -> WindowDetail {
    let names: FxHashMap<u32, String> =
        [(0, "Dataflow"), (1, "Input"), (2, "Iterate"), (3, "Map"), (4, "Feedback"), (5, "Probe")]
            .into_iter()
            .map(|(i, n)| (i, n.to_string()))
            .collect();
    let addrs: FxHashMap<u32, Vec<u32>> =
        [(0, vec![0]), (1, vec![0, 1]), (2, vec![0, 2]), (3, vec![0, 2, 1]), (4, vec![0, 2, 2]), (5, vec![0, 3])]
            .into_iter()
            .collect();
    let channels = vec![
        (10, (1, 0), (2, 0)),
        (11, (2, 0), (3, 0)),
        (12, (3, 0), (4, 0)),
        (13, (4, 0), (3, 1)),
        (14, (3, 0), (2, 0)),
        (15, (2, 0), (5, 0)),
    ];
    let sid = |w| Sid { host: 1, process: 0, worker: w };
    let act = |stream, start, end, what| Activity { stream, start, end, what };
    let piece = |stream, start, end, what| CriticalPiece { stream, start, end, what };
    let msg = |src, dst| Message { src, dst, sent: 0, read: 1, channel: 11, kind: MsgKind::Data };
    WindowDetail {
        window: 7,
        streams: vec![sid(0), sid(1)],
        metas: vec![Arc::new(StreamMeta::new(names, addrs, channels, FxHashMap::default())); 2],
        activities: vec![
            act(0, 0, 600, ActivityKind::Operator(3)),
            act(1, 0, 400, ActivityKind::Waiting { on: Some(0), channel: Some(11), kind: "data_message" }),
            act(1, 400, 500, ActivityKind::Waiting { on: Some(0), channel: Some(9), kind: "progress_message" }),
            act(1, 700, 1000, ActivityKind::Operator(5)),
        ],
        messages: vec![msg(0, 1), msg(1, 0)],
        critical: vec![
            piece(1, 700, 1000, CriticalKind::Operator(5)),
            piece(1, 600, 700, CriticalKind::Message { from: 0, channel: 11, kind: MsgKind::Data }),
            piece(0, 0, 600, CriticalKind::Operator(3)),
        ],
        ..Default::default()
    }
}

fn graph() -> Graph {
    let mut d = Dataflow::default();
    d.add(&iterate_detail());
    d.graph()
}

fn node(g: &Graph, op: u32) -> usize {
    g.nodes.iter().position(|n| n.op == op).unwrap()
}

#[test]
fn scopes_become_boxes_and_their_operators_nodes_inside_them() {
    let g = graph();
    let ops: Vec<u32> = g.nodes.iter().map(|n| n.op).collect();
    assert_eq!(ops, vec![1, 3, 4, 5], "the leaves; 0 and 2 hold others");
    let scopes: Vec<(u32, Option<usize>)> = g.scopes.iter().map(|s| (s.op, s.parent)).collect();
    assert_eq!(scopes, vec![(0, None), (2, Some(0))], "Iterate inside the dataflow");
    assert_eq!(g.nodes[node(&g, 3)].scope, Some(1), "Map inside Iterate");
    assert_eq!(g.nodes[node(&g, 1)].scope, Some(0), "Input in the dataflow only");
    assert_eq!(g.scope_paths()[node(&g, 4)], vec![0, 1]);
}

#[test]
fn channels_through_a_scope_boundary_join_into_edges_between_operators() {
    let g = graph();
    let mut edges: Vec<(u32, u32, Vec<u32>)> =
        g.edges.iter().map(|e| (g.nodes[e.from].op, g.nodes[e.to].op, e.channels.clone())).collect();
    edges.sort();
    // Input → (into Iterate) → Map; Map → (out of Iterate) → Probe.
    assert_eq!(edges, vec![(1, 3, vec![10, 11]), (3, 4, vec![12]), (3, 5, vec![14, 15]), (4, 3, vec![13])]);
}

#[test]
fn figures_are_the_windows_critical_path_waits_and_messages() {
    let g = graph();
    // Path: Map 600 + the message on ch 11 100 + Probe 300 = 1000 ns.
    assert_eq!(g.critical_ns, 1000);
    let map = &g.nodes[node(&g, 3)];
    assert_eq!(g.critical_share(map), 0.6);
    assert_eq!(map.figures.critical_by_worker, BTreeMap::from([(0, 600)]));
    assert_eq!(map.figures.busy_ns, 600);
    assert_eq!(g.hot(), Some(node(&g, 3)), "Map has the most of the path");
    // Waits: 400 ns on ch 11 (data), 100 ns on a progress message: 500.
    assert_eq!((g.wait_ns, g.progress_wait_ns, g.unknown_wait_ns), (500, 100, 0));
    let into = g.edges.iter().find(|e| e.channels == vec![10, 11]).unwrap();
    assert_eq!((into.messages, into.wait_ns, into.critical_ns, into.crossings), (2, 400, 100, 1));
    assert_eq!(g.wait_share(into), 0.8);
    assert_eq!(g.edge_on_path(into), (true, false), "its message was on the path; Input was not");
    let out = g.edges.iter().find(|e| e.channels == vec![14, 15]).unwrap();
    assert_eq!(g.edge_on_path(out), (false, true), "Map and Probe both were");
}

#[test]
fn folding_windows_adds_their_figures() {
    let mut d = Dataflow::default();
    let mut w = iterate_detail();
    d.add(&w);
    w.window = 9;
    d.add(&w);
    let g = d.graph();
    assert_eq!((g.windows, g.window_range, g.critical_ns), (2, Some((7, 9)), 2000));
    assert_eq!(g.critical_share(&g.nodes[node(&g, 3)]), 0.6);
}

#[test]
fn operators_the_metadata_never_named_still_get_nodes() {
    let mut w = iterate_detail();
    let channels = w.metas[0].channels.clone();
    w.metas =
        vec![Arc::new(StreamMeta::new(FxHashMap::default(), FxHashMap::default(), channels, FxHashMap::default())); 2];
    let mut d = Dataflow::default();
    d.add(&w);
    let g = d.graph();
    // No addresses: no scopes; ops 1..5 from the channels and the path.
    assert!(g.scopes.is_empty());
    assert!(g.nodes.iter().any(|n| n.figures.name == "operator 2"));
    assert_eq!(g.hot().map(|i| g.nodes[i].op), Some(3));
}

#[test]
fn the_layout_json_marks_the_hot_operator_and_places_every_node() {
    let g = graph();
    let v = g.layout_json().unwrap();
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    let hot: Vec<&str> = nodes.iter().filter(|n| n["hot"] == true).map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(hot, vec!["Map"]);
    assert_eq!(v["scopes"].as_array().unwrap().len(), 2);
    // The feedback edge closes the cycle: one edge of Map ⇄ Feedback is
    // drawn against the layers.
    let reversed = v["edges"].as_array().unwrap().iter().filter(|e| e["reversed"] == true).count();
    assert_eq!(reversed, 1);
}

mod dot_output {
    use graphviz_rust::dot_structures::{Graph as DotGraph, Id, Stmt, Subgraph};

    use super::*;

    fn id(i: &Id) -> String {
        match i {
            Id::Html(s) | Id::Escaped(s) | Id::Plain(s) | Id::Anonymous(s) => s.clone(),
        }
    }

    /// Subgraph names, nested as in the text: (name, depth), and the
    /// nodes with their attributes.
    fn walk(stmts: &[Stmt], depth: usize, clusters: &mut Vec<(String, usize)>, nodes: &mut Vec<(String, String)>) {
        for s in stmts {
            match s {
                Stmt::Subgraph(Subgraph { id: i, stmts }) => {
                    clusters.push((id(i), depth));
                    walk(stmts, depth + 1, clusters, nodes);
                }
                Stmt::Node(n) => {
                    let attrs: Vec<String> =
                        n.attributes.iter().map(|a| format!("{}={}", id(&a.0), id(&a.1))).collect();
                    nodes.push((id(&n.id.0), attrs.join(" ")));
                }
                _ => {}
            }
        }
    }

    #[test]
    fn the_dot_output_parses_with_a_real_dot_parser_and_nests_the_scopes() {
        let mut g = graph();
        // A name with a quote and a backslash must survive the escaping.
        g.nodes[0].figures.name = "In\"put\\1".into();
        let mut text = Vec::new();
        dot::write_dot(&g, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        let parsed = graphviz_rust::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let DotGraph::DiGraph { stmts, .. } = parsed else { panic!("a digraph") };
        let (mut clusters, mut nodes) = (Vec::new(), Vec::new());
        walk(&stmts, 0, &mut clusters, &mut nodes);
        assert_eq!(clusters, vec![("cluster_0".to_string(), 0), ("cluster_2".to_string(), 1)]);
        let names: Vec<&str> = nodes.iter().map(|n| n.0.as_str()).collect();
        assert_eq!(names, vec!["op3", "op4", "op1", "op5"], "Iterate's members, then the dataflow's");
        let map = &nodes[0].1;
        assert!(map.contains("Map\\n60.0 % of the critical path") && map.contains("penwidth=3"), "{map}");
        assert!(nodes[2].1.contains(r#"In\"put\\1"#), "{}", nodes[2].1);
        let edges: Vec<&Stmt> = stmts.iter().filter(|s| matches!(s, Stmt::Edge(_))).collect();
        assert_eq!(edges.len(), 4);
        assert!(text.contains("op1 -> op3 [label=\"ch 10, 11: 2 messages\\n80.0 % of the waits"), "{text}");
    }
}

/// A stream's metadata is folded in again only when it changed: a window
/// with the same metadata adds its figures but no operators, a window whose
/// metadata gained an operator adds that operator.
#[test]
fn metadata_is_folded_again_only_when_it_changed() {
    let w = iterate_detail();
    let mut d = Dataflow::default();
    d.add(&w);
    d.add(&w);
    assert_eq!(d.windows, 2);
    assert_eq!(d.ops.len(), 6);
    let mut later = iterate_detail();
    let mut meta = (*later.metas[1]).clone();
    meta.operator(6, "Late".into(), vec![0, 4]);
    later.metas[1] = Arc::new(meta);
    d.add(&later);
    assert_eq!(d.ops.len(), 7);
    assert_eq!(d.ops[&6].name, "Late");
    assert_eq!(d.ops[&6].addr, vec![0, 4]);
}
