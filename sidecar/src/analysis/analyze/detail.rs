//! What a timeline export needs of one window beyond its report: built only
//! when asked for, by the stages that see each piece.

use std::sync::Arc;

use crate::analysis::model::{Fragment, MsgKind, Ns, Sid, StreamMeta};

/// What a timeline export (Perfetto) needs of one window, beyond the report:
/// every worker's activities and waits, the messages between workers, and
/// the critical path piece by piece. Built only when asked for
/// ([`super::analyze_detail`]); the default path does not pay for it.
#[derive(Clone, Debug, Default)]
pub struct WindowDetail {
    pub host: u64,
    pub window: u64,
    /// Window bounds, ns.
    pub span: (Ns, Ns),
    /// The window's streams; `stream` fields below index this.
    pub streams: Vec<Sid>,
    pub programs: Vec<String>,
    /// Per stream: its metadata so far (operators' names and addresses,
    /// channels, spans' names), shared with its fragments, not copied.
    pub metas: Vec<Arc<StreamMeta>>,
    /// Per stream: its instrumentation counters in this window.
    pub counters: Vec<crate::analysis::model::Counters>,
    /// Operator executions, spans, waits (clipped to the window).
    pub activities: Vec<Activity>,
    /// Data messages matched between two workers of the window, and the
    /// progress messages that ended a wait.
    pub messages: Vec<Message>,
    /// The critical path, from the window's end backwards.
    pub critical: Vec<CriticalPiece>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActivityKind {
    Operator(u32),
    Span(u64),
    /// Waiting, ended by a message from `on` (a global worker index; None:
    /// nothing visible) on `channel`.
    Waiting {
        on: Option<u32>,
        channel: Option<u32>,
        kind: &'static str,
    },
    WaitingForInput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Activity {
    pub stream: u32,
    pub start: Ns,
    pub end: Ns,
    pub what: ActivityKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    pub src: u32,
    pub dst: u32,
    pub sent: Ns,
    pub read: Ns,
    pub channel: u32,
    pub kind: MsgKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CriticalKind {
    Operator(u32),
    Span(u64),
    WaitingForInput,
    Unknown,
    /// A message that ended a wait: from stream `from` (at `start`) to this
    /// piece's stream (at `end`).
    Message {
        from: u32,
        channel: u32,
        kind: MsgKind,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CriticalPiece {
    pub stream: u32,
    pub start: Ns,
    pub end: Ns,
    pub what: CriticalKind,
}

impl WindowDetail {
    /// A window's detail before its stages add to it: the streams, their
    /// programs, names and counters.
    pub(super) fn describe(host: u64, window: u64, span: (Ns, Ns), sids: &[Sid], frags: &[Fragment]) -> Self {
        let mut d = WindowDetail { host, window, span, streams: sids.to_vec(), ..Default::default() };
        for f in frags {
            d.programs.push(f.program.clone());
            d.metas.push(Arc::clone(&f.meta));
            d.counters.push(f.counters);
        }
        d
    }

    /// Stream `i`'s name for operator `op`.
    pub fn op_name(&self, i: usize, op: u32) -> Option<&str> {
        self.metas[i].op_name(op)
    }

    /// Stream `i`'s name for span `id`.
    pub fn span_name(&self, i: usize, id: u64) -> Option<&str> {
        self.metas[i].span_name(id)
    }
}
