//! The HTTP server (tiny_http): a few threads answering requests from the
//! hub's state, and a thread per browser event stream.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use tiny_http::{Header, Method, Request, Response};

use super::hub::State;
use crate::output::export::PerfettoExport;

/// The page, embedded: it needs no network.
const DASHBOARD: &str = include_str!("dashboard.html");
/// Threads answering requests (event streams get threads of their own).
const THREADS: usize = 3;
/// How often an idle event stream sends a comment (a browser gone is seen
/// at the next write).
const KEEPALIVE: Duration = Duration::from_secs(5);

pub struct Server {
    http: Arc<tiny_http::Server>,
    state: State,
}

impl Server {
    pub fn bind(addr: &str, state: State) -> std::io::Result<Server> {
        let http = tiny_http::Server::http(addr).map_err(std::io::Error::other)?;
        Ok(Server { http: Arc::new(http), state })
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        self.http.server_addr().to_ip().expect("a TCP listener")
    }

    /// The server's threads; they run until the process ends.
    pub fn spawn(self) {
        for i in 0..THREADS {
            let (http, state) = (self.http.clone(), self.state.clone());
            std::thread::Builder::new()
                .name(format!("sidecar-http-{i}"))
                .spawn(move || {
                    while let Ok(rq) = http.recv() {
                        answer(rq, &state);
                    }
                })
                .expect("spawning an HTTP thread");
        }
    }
}

fn header(k: &str, v: &str) -> Header {
    Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("a valid header")
}

fn text(body: impl Into<String>, content_type: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    Response::from_string(body.into()).with_header(header("Content-Type", content_type))
}

/// Answers one request (a failed answer is the browser's problem).
fn answer(rq: Request, state: &State) {
    if *rq.method() != Method::Get && *rq.method() != Method::Head {
        let _ = rq.respond(text("GET only\n", "text/plain").with_status_code(405));
        return;
    }
    let url = rq.url().to_string();
    let (path, query) = url.split_once('?').unwrap_or((&url, ""));
    let r = match path {
        "/" | "/index.html" => text(DASHBOARD, "text/html; charset=utf-8"),
        "/events" => return events(rq, state),
        "/metrics" => {
            let body = state.inner.lock().unwrap().metrics.text();
            text(body, "application/openmetrics-text; version=1.0.0; charset=utf-8")
        }
        "/api/windows" => match windows(state, query) {
            Ok(body) => text(body, "application/json"),
            Err(why) => text(why + "\n", "text/plain").with_status_code(400),
        },
        "/api/summary" => text(state.inner.lock().unwrap().summary.to_string(), "application/json"),
        "/perfetto" => perfetto(state),
        "/api/graph" => graph(state, query),
        _ => text("not found\n", "text/plain").with_status_code(404),
    };
    // Every body whole, with its Content-Length: tiny_http would send one
    // past 32 KB chunked to an HTTP/1.1 client (the `/perfetto` and
    // `/api/windows` bodies often are), which a download cannot size and a
    // plain client (a scraper, the tests) reads as a corrupt body.
    let _ = rq.respond(r.with_chunked_threshold(usize::MAX));
}

/// `GET /api/windows?since=N`: a JSON array of the kept windows' `--json`
/// objects whose window number is N or later (all kept ones without N);
/// `Err` (a 400) says why a query is not understood.
fn windows(state: &State, query: &str) -> Result<String, String> {
    let since = since(query)?;
    let inner = state.inner.lock().unwrap();
    let objs: Vec<&str> = inner.windows.iter().filter(|k| k.window >= since).map(|k| &*k.json).collect();
    Ok(format!("[{}]", objs.join(",")))
}

/// The `since=N` of a query (0 without one); anything else in it is refused.
fn since(query: &str) -> Result<u64, String> {
    let mut since = 0;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        match kv.split_once('=') {
            Some(("since", v)) => {
                since = v.parse().map_err(|_| format!("since={v}: expected a window number (since=0, since=3291)"))?
            }
            _ => return Err(format!("{kv}: unknown parameter (the one known: since=N)")),
        }
    }
    Ok(since)
}

#[cfg(test)]
mod tests {
    use super::since;

    #[test]
    fn since_takes_a_window_number_and_refuses_anything_else() {
        assert_eq!(since(""), Ok(0));
        assert_eq!(since("since=42"), Ok(42));
        assert!(since("since=abc").unwrap_err().contains("since=abc: expected a window number"));
        assert!(since("since=-1").is_err());
        assert!(since("until=3").unwrap_err().contains("unknown parameter"));
    }
}

/// `GET /api/graph?window=N` (that window), `?last=K` (the last K windows
/// kept, 60 at most; the default: the last one): the dataflow graph laid
/// out, with its figures ([`crate::output::graph::Graph::layout_json`]),
/// built from the windows' details outside the hub's lock. A window not
/// kept is a 404, a query that is not understood a 400; both say why.
fn graph(state: &State, query: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    let error = |code: u16, why: String| {
        text(serde_json::json!({ "error": why }).to_string(), "application/json").with_status_code(code)
    };
    let (mut window, mut last) = (None, None);
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let n = match v.parse::<u64>() {
            Ok(n) => n,
            Err(_) => return error(400, format!("{k}={v}: expected a number")),
        };
        match k {
            "window" => window = Some(n),
            "last" if (1..=MAX_GRAPH_WINDOWS).contains(&n) => last = Some(n),
            "last" => return error(400, format!("last={n}: between 1 and {MAX_GRAPH_WINDOWS} windows")),
            _ => return error(400, format!("{k}: unknown parameter (window=N or last=K)")),
        }
    }
    let details: Vec<_> = state.inner.lock().unwrap().details.iter().cloned().collect();
    let mut kept: Vec<u64> = details.iter().map(|d| d.window).collect();
    kept.sort_unstable();
    kept.dedup();
    let chosen: Vec<u64> = match window {
        Some(w) if kept.binary_search(&w).is_ok() => vec![w],
        Some(w) => return error(404, format!("window {w} is not kept (kept: {})", range_of(&kept))),
        None => kept[kept.len().saturating_sub(last.unwrap_or(1) as usize)..].to_vec(),
    };
    let mut flow = crate::output::graph::Dataflow::default();
    for d in details.iter().filter(|d| chosen.binary_search(&d.window).is_ok()) {
        flow.add(d);
    }
    match flow.graph().layout_json() {
        Ok(mut v) => {
            v["kept"] = serde_json::json!(kept);
            text(v.to_string(), "application/json")
        }
        Err(why) => error(422, why),
    }
}

/// Windows the graph view folds together at most (`last=K`).
const MAX_GRAPH_WINDOWS: u64 = 60;

fn range_of(kept: &[u64]) -> String {
    match (kept.first(), kept.last()) {
        (Some(a), Some(b)) => format!("{a}–{b}"),
        _ => "none yet".into(),
    }
}

/// `GET /perfetto`: the kept windows' details as one Perfetto trace,
/// encoded outside the hub's lock.
fn perfetto(state: &State) -> Response<std::io::Cursor<Vec<u8>>> {
    let mut details: Vec<_> = state.inner.lock().unwrap().details.iter().cloned().collect();
    details.sort_by_key(|d| (d.host, d.window));
    let mut export = PerfettoExport::new(Vec::new());
    for d in &details {
        if export.window(d).is_err() {
            break;
        }
    }
    let bytes = export.finish().unwrap_or_default();
    let name = format!("attachment; filename=\"sidecar-last-{}-windows.perfetto-trace\"", details.len());
    Response::from_data(bytes)
        .with_header(header("Content-Type", "application/octet-stream"))
        .with_header(header("Content-Disposition", &name))
}

/// `GET /events`: Server-Sent Events, on a thread of its own: the kept
/// windows, then each new one as it comes. Its queue is bounded (the hub
/// drops and counts what a slow browser does not take).
fn events(rq: Request, state: &State) {
    let Some((backlog, rx)) = state.subscribe() else {
        let _ = rq.respond(text("too many event streams\n", "text/plain").with_status_code(503));
        return;
    };
    let _ = std::thread::Builder::new().name("sidecar-http-events".into()).spawn(move || {
        let mut w = rq.into_writer();
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                    Connection: close\r\n\r\n";
        if w.write_all(head.as_bytes()).is_err() {
            return;
        }
        for e in backlog {
            if w.write_all(e.as_bytes()).is_err() {
                return;
            }
        }
        loop {
            if w.flush().is_err() {
                return;
            }
            let e: Arc<str> = match rx.recv_timeout(KEEPALIVE) {
                Ok(e) => e,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Arc::from(": keepalive\n\n"),
                Err(_) => return,
            };
            if w.write_all(e.as_bytes()).is_err() {
                return;
            }
        }
    });
}
