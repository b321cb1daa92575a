//! One window, start to finish, on the worker that owns it: the fragments
//! of every stream of one host → its [`WindowReport`]. No I/O.
//!
//! [`analyze_detail`] is the recipe; each stage is a module of its own:
//!
//! 1. [`fragments`]: one fragment per stream; what the streams that ended
//!    before the window said.
//! 2. [`streams`]: the window's streams and processes, how a worker index
//!    resolves to a stream (timely clusters number workers globally);
//! 3. and whether the window is complete, with the instrumentation summed.
//! 4. [`matching`]: messages matched send to read (data point to point,
//!    progress one to N: Sager §4.2.2), arrivals per worker.
//! 5. [`timelines`]: each worker's executions and gaps laid into the window
//!    graph (Sager §3.1),
//! 6. each gap typed Waiting / Waiting-for-Input / unknown (Sager §5.1,
//!    sager-notes §2.4), and a wait on a peer that was itself waiting
//!    charged to the peer's cause ([`root_causes`]),
//! 7. and the window graph built.
//! 8. [`critical`]: the critical path (Sager Algorithm 1, §5.3) summed,
//! 9. [`participation`]: critical participation (SnailTrail),
//! 10. [`trace_checks`]: Sager's trace properties (§3.3), while the
//!     what-if's layout (the window's messages placed on the chains, each
//!     vertex's rule) is made beside these three (on another thread if a
//!     [`Crew`] has one free);
//! 11. [`what_if`]: what speeding up the path's top operators would save
//!     (DProf §5.2, [`crate::analysis::whatif`]).
//! 12. [`arrangements`]: differential's arrangements, as the window leaves
//!     them.
//! 13. The report's last facts: other timelines, completeness.

use std::sync::Arc;

mod arrangements;
mod critical;
mod detail;
mod fragments;
mod matching;
mod participation;
mod streams;
pub use streams::LATE_DATA;
mod root_causes;
mod tables;
mod timelines;
mod trace_checks;
mod what_if;

pub use detail::{Activity, ActivityKind, CriticalKind, CriticalPiece, Message, WindowDetail};
#[cfg(test)]
pub(crate) use matching::whole_and_halved;

use crate::analysis::crew::{self, Crew};
use crate::analysis::model::{Fragment, MsgKind, Ns, StreamMeta};
use crate::analysis::report::WindowReport;
use crate::analysis::whatif::Speedup;
use streams::Streams;

/// How many operators, spans, channels, waits and participants a report
/// lists.
const TOP: usize = 10;

fn kind_name(k: MsgKind) -> &'static str {
    match k {
        MsgKind::Data => "data_message",
        MsgKind::Progress => "progress_message",
    }
}

/// Per stream: its operators' and spans' names (the stream's metadata,
/// not copied: a window's cost does not grow with the operators it did
/// not run).
struct Names<'f> {
    metas: Vec<&'f StreamMeta>,
}

impl<'f> Names<'f> {
    fn of(frags: &'f [Fragment]) -> Self {
        Names { metas: frags.iter().map(|f| &*f.meta).collect() }
    }

    fn op(&self, stream: usize, op: u32) -> Option<&'f str> {
        self.metas[stream].op_name(op)
    }

    fn span(&self, stream: usize, id: u64) -> Option<&'f str> {
        self.metas[stream].span_name(id)
    }
}

/// Analyzes window `index` (of width `width` ns) of host `host` from the
/// fragments its streams sent.
pub fn analyze(host: u64, index: u64, width: Ns, frags: Vec<Fragment>) -> WindowReport {
    analyze_detail(host, index, width, frags, None, None, None)
}

/// [`analyze`], also filling `detail` (for timeline exports) when given,
/// predicting the speedup `what_if` asks for (else the automatic what-if
/// ranking), and offering parts of the work to `crew` when given (the
/// report is the same whoever runs them).
pub fn analyze_detail(
    host: u64,
    index: u64,
    width: Ns,
    frags: Vec<Fragment>,
    mut detail: Option<&mut WindowDetail>,
    what_if: Option<&[Speedup]>,
    crew: Option<&Arc<Crew>>,
) -> WindowReport {
    let window = (index.saturating_mul(width), index.saturating_add(1).saturating_mul(width));
    let mut rep = WindowReport {
        host: format!("{host:016x}"),
        window: index,
        start_ns: window.0,
        end_ns: window.1,
        ..Default::default()
    };
    rep.inside_execution = inside_execution(&frags);
    rep.untraced_progress = untraced_progress(&frags);
    let merged = fragments::merge_fragments(index, width, frags);
    let mut frags = merged.frags;
    let streams = Arc::new(Streams::new(host, &frags));
    rep.start_unix_ns = unix_start(&frags, window.0);
    if let Some(d) = detail.as_deref_mut() {
        *d = WindowDetail::describe(host, index, window, &streams.sids, &frags);
    }
    let (mut reasons, missing) = streams::check_completeness(&streams, &frags, &merged.ended_of, &mut rep);
    let mut matched = matching::match_messages(
        &streams,
        &mut frags,
        merged.ended_marks,
        window,
        &mut rep.messages,
        detail.as_deref_mut(),
        crew,
    );
    // (With hosts on timelines of their own, an absent worker may be
    // running there: nothing is said of it.)
    let elsewhere = frags.iter().any(|f| !f.other_hosts.is_empty());
    let absent = streams::not_started(&streams, &merged.ended_of, &matched.strangers, elsewhere);
    reasons.extend(absent.reason());
    rep.workers_not_started = absent.workers.clone();
    let began = timelines::stream_starts(&frags, window);
    // (The messages the matching found in two halves are put in one order,
    // for the what-if, beside the graph's build.)
    let links = std::mem::take(&mut matched.links);
    let (g, waiting, links) = timelines::lay_out_timelines(
        &streams.sids,
        matched,
        window,
        &absent,
        &began,
        detail.as_deref_mut(),
        crew,
        move || links.in_order(),
    );
    rep.waiting = waiting;
    let g = Arc::new(g);
    let names = Names::of(&frags);
    let starting = !absent.workers.is_empty();
    // The what-if's layout of the window's points needs the graph and the
    // messages alone: its two halves (the placement of the messages, each
    // vertex's rule) are offered to the crew, the rules offered again by
    // whichever thread makes the placement, while this thread summarizes
    // the path, ranks participation and checks the trace (which need the
    // graph alone too). Whichever side is done first takes the rules: on 10
    // M records in one window, participation and the checks took 95 ms,
    // the placement 66 and the rules 18, and with the rules on this side
    // the crew's thread waited for it.
    let replayed = what_if::replayed(&g, what_if);
    let layout = what_if::layout(&g, links, replayed, crew);
    let ((cp, participation, properties), (rules, placement), elsewhere) = crew::join(
        crew,
        || {
            let cp = critical::summarize_critical_path(&g, &streams.sids, &names, detail);
            let participation = participation::rank_participation(&g, &streams.sids, &names);
            let properties = trace_checks::check_trace_properties(&g, &frags, &streams, &missing, starting, window);
            (cp, participation, properties)
        },
        layout,
    );
    let replay = what_if::replay(&g, rules, placement);
    rep.critical_path = cp;
    // (Its replays are split over the crew only when a thread was free to
    // take the layout: otherwise the halves cost more than the whole.)
    let crew = crew.filter(|_| elsewhere);
    rep.what_if = what_if::rank_what_ifs(replay, &streams.sids, &names, &rep.critical_path, what_if, crew);
    rep.participation = participation;
    rep.critical_path.tie = participation::top_operator_tie(&rep.critical_path, &rep.participation);
    rep.properties = properties;
    rep.arrangements = arrangements::list_arrangements(&frags, &names);
    other_timelines(&mut rep, &frags, absent.halves, &mut reasons);
    for f in frags {
        crate::analysis::model::give_items(f.items);
    }
    conclude(&mut rep, reasons, streams.len());
    rep
}

/// Workers silent inside one step while their writer lived
/// (`Fragment::silent_since`), by worker.
fn inside_execution(frags: &[Fragment]) -> Vec<crate::analysis::report::InsideExecution> {
    let mut v: Vec<_> = frags
        .iter()
        .filter_map(|f| {
            Some(crate::analysis::report::InsideExecution { worker: f.stream?.worker, since_ns: f.silent_since? })
        })
        .collect();
    v.sort_by_key(|i| (i.worker, i.since_ns));
    v.dedup_by_key(|i| i.worker);
    v
}

/// The scopes whose progress the streams do not carry, by worker.
fn untraced_progress(frags: &[Fragment]) -> Vec<crate::analysis::report::UntracedScope> {
    let mut v: Vec<_> = frags
        .iter()
        .filter_map(|f| Some((f.stream?.worker, &*f.meta)))
        .flat_map(|(worker, meta)| {
            meta.untraced.iter().map(move |&operator| crate::analysis::report::UntracedScope {
                worker,
                operator,
                name: meta.op_name(operator).unwrap_or_default().to_string(),
            })
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The window's start as UNIX time, from a stream's clock samples. (A
/// corrupt clock sample can put it past what an i64 holds: unknown.)
fn unix_start(frags: &[Fragment], ws: Ns) -> Option<i64> {
    frags.iter().find_map(|f| f.realtime_offset).and_then(|o| i64::try_from(ws as i128 + o as i128).ok())
}

/// Messages whose other half is not on this timeline: the other worker is
/// on another host (unsynchronized, analyzed in its own windows) or its
/// stream is missing. (`explained` of them name a worker whose process has
/// not started yet: the reason for that says so.)
fn other_timelines(rep: &mut WindowReport, frags: &[Fragment], explained: u64, reasons: &mut Vec<String>) {
    let mut others: Vec<u64> = frags.iter().flat_map(|f| f.other_hosts.iter().copied()).collect();
    others.sort_unstable();
    others.dedup();
    rep.unsynchronized_hosts = others.iter().map(|h| format!("{h:016x}")).collect();
    let unmatched = (rep.messages.data_unmatched + rep.messages.progress_unmatched).saturating_sub(explained);
    if unmatched > 0 {
        reasons.push(if others.is_empty() {
            format!("{unmatched} message halves with a worker not on this timeline (a missing stream?)")
        } else {
            format!(
                "{unmatched} message halves with workers on other hosts ({}): unsynchronized, not mixed",
                rep.unsynchronized_hosts.join(", ")
            )
        });
    }
}

/// Complete when nothing made it otherwise and some stream was there.
fn conclude(rep: &mut WindowReport, mut reasons: Vec<String>, streams: usize) {
    reasons.sort();
    reasons.dedup();
    rep.complete = reasons.is_empty() && streams > 0;
    if streams == 0 {
        reasons.push("no streams".into());
    }
    rep.incomplete_reasons = reasons;
}
