//! A window's detail → what the dashboard draws of it: one lane per worker
//! (its operators, spans and waits) and the critical path over them, in
//! µs from the window's start, bounded in size whatever the window holds.

use serde_json::{json, Value};

use crate::analysis::analyze::{ActivityKind, CriticalKind, WindowDetail};

/// Activities drawn per lane at most, and critical path pieces.
const MAX_PER_LANE: usize = 300;
const MAX_CRITICAL: usize = 400;
/// Activities shorter than the window over this are not drawn (a pixel at
/// most on a page's lane).
const MIN_FRACTION: u64 = 1000;

/// The lanes of a window, as the page's JSON: `{window, span_ns, lanes:
/// [{stream, worker, lost, acts: [[start_us, end_us, kind, label]]}],
/// critical: [[lane, start_us, end_us, label]]}` (`kind`: `o` operator,
/// `s` span, `w` wait, `i` waiting for input).
pub fn lanes(d: &WindowDetail) -> Value {
    let (ws, we) = d.span;
    let min = (we.saturating_sub(ws) / MIN_FRACTION).max(1);
    let us = |t: u64| t.saturating_sub(ws) as f64 / 1e3;
    let op_name = |i: usize, op: u32| d.op_name(i, op).map_or_else(|| format!("operator {op}"), str::to_string);
    let span_name = |i: usize, id: u64| d.span_name(i, id).map_or_else(|| format!("span {id}"), str::to_string);
    let mut acts: Vec<Vec<Value>> = vec![Vec::new(); d.streams.len()];
    for a in &d.activities {
        let i = a.stream as usize;
        if a.end.saturating_sub(a.start) < min || acts[i].len() >= MAX_PER_LANE {
            continue;
        }
        let (kind, label) = match a.what {
            ActivityKind::Operator(op) => ("o", op_name(i, op)),
            ActivityKind::Span(id) => ("s", span_name(i, id)),
            ActivityKind::Waiting { on, channel, kind } => {
                let on = on.map_or("?".to_string(), |w| format!("w{w}"));
                let ch = channel.map(|c| format!(" ch{c}")).unwrap_or_default();
                ("w", format!("wait on {on}{ch} ({kind})"))
            }
            ActivityKind::WaitingForInput => ("i", "waiting for input".to_string()),
        };
        acts[i].push(json!([us(a.start), us(a.end), kind, label]));
    }
    let mut critical: Vec<(usize, u64, u64, String)> = Vec::new();
    for p in d.critical.iter().rev() {
        let i = p.stream as usize;
        let label = match p.what {
            CriticalKind::Operator(op) => op_name(i, op),
            CriticalKind::Span(id) => span_name(i, id),
            CriticalKind::WaitingForInput => "waiting for input".into(),
            CriticalKind::Unknown => "unknown".into(),
            CriticalKind::Message { from, channel, .. } if p.end > p.start => {
                format!("transit ch{channel} from w{}", d.streams[from as usize].worker)
            }
            CriticalKind::Message { from, channel, .. } => {
                format!("message ch{channel} from w{}", d.streams[from as usize].worker)
            }
        };
        let full = critical.len() >= MAX_CRITICAL;
        match critical.last_mut() {
            Some(last) if last.0 == i && last.3 == label && last.2 >= p.start => last.2 = p.end.max(last.2),
            _ if full => break,
            _ => critical.push((i, p.start, p.end, label)),
        }
    }
    let lanes: Vec<Value> = d
        .streams
        .iter()
        .zip(acts)
        .enumerate()
        .map(|(i, (s, acts))| {
            json!({
                "stream": stream_label(s.host, s.process, s.worker),
                "worker": s.worker,
                "lost": d.counters.get(i).map_or(0, |c| c.lost),
                "acts": acts,
            })
        })
        .collect();
    let critical: Vec<Value> = critical.into_iter().map(|(i, s, e, l)| json!([i, us(s), us(e), l])).collect();
    json!({
        "window": d.window,
        "host": format!("{:016x}", d.host),
        "span_ns": [ws, we],
        "lanes": lanes,
        "critical": critical,
    })
}

/// As the metrics name a stream: the host's last four hex digits, the
/// process and the worker.
pub fn stream_label(host: u64, process: u32, worker: u32) -> String {
    format!("{:04x}/{process}/{worker}", host & 0xffff)
}

/// (stream, records lost) of a window's lanes.
pub fn lost(lanes: &Value) -> Vec<(String, u64)> {
    lanes["lanes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| (l["stream"].as_str().unwrap_or("?").to_string(), l["lost"].as_u64().unwrap_or(0)))
        .collect()
}
