//! `sidecar dump`: a file's frames as readable text.

use std::io::Write;
use std::path::Path;

use ringlog::{Body, Decoder, Meta};

/// What a dump read: its frames, and the decode error that ended it (for
/// the caller to say where errors go, not in the text).
#[derive(Debug, Default)]
pub struct Dumped {
    pub frames: u64,
    pub error: Option<String>,
}

/// Writes every frame of `path` as text, up to the first decode error (an
/// error ends the stream).
pub fn dump(path: &Path, max_records: usize, out: &mut dyn Write) -> std::io::Result<Dumped> {
    let f = std::fs::File::open(path).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let mut done = Dumped::default();
    for fr in Decoder::new(std::io::BufReader::new(f)) {
        let fr = match fr {
            Ok(f) => f,
            Err(e) => {
                done.error = Some(e.to_string());
                break;
            }
        };
        done.frames += 1;
        let h = &fr.header;
        write!(out, "{:?} #{} [{}] domain={:?}", h.kind, h.seq, h.stream, h.domain)?;
        if h.lost > 0 {
            write!(out, " LOST={}", h.lost)?;
        }
        match &fr.body {
            Body::Hello(x) => writeln!(
                out,
                " host={} program={} pid={} workers={} invariant_tsc={} ticks_per_sec={}",
                x.host_name, x.program, x.pid, x.workers, x.invariant_tsc, x.ticks_per_sec
            )?,
            Body::Clock(s) => {
                writeln!(out)?;
                for c in s {
                    writeln!(
                        out,
                        "  clock ticks={} monotonic_ns={} realtime_ns={}",
                        c.ticks, c.monotonic_ns, c.realtime_ns
                    )?;
                }
            }
            Body::Metadata(m) => {
                writeln!(out)?;
                for e in m {
                    match e {
                        Meta::Operator { id, name, addr } => writeln!(out, "  operator {id} {name:?} addr={addr:?}")?,
                        Meta::Channel { id, src, dst } => {
                            writeln!(out, "  channel {id} ({},{}) -> ({},{})", src.0, src.1, dst.0, dst.1)?
                        }
                        Meta::Span { id, name } => writeln!(out, "  span {id} {name:?}")?,
                    }
                }
            }
            Body::Records(r) => {
                writeln!(out, " records={}", r.len())?;
                let n = if max_records == 0 { r.len() } else { max_records.min(r.len()) };
                for rec in &r[..n] {
                    match rec.event() {
                        Some(ringlog::Event::Mark { id }) => {
                            writeln!(out, "  {:>20} Mark {{ id: {id} }} ({})", rec.ts, mark_meaning(id))?
                        }
                        Some(ev) => writeln!(out, "  {:>20} {:?}", rec.ts, ev)?,
                        None => writeln!(out, "  {:>20} unknown kind {}", rec.ts, rec.kind)?,
                    }
                }
                if n < r.len() {
                    writeln!(out, "  ... {} more", r.len() - n)?;
                }
            }
            Body::End(s) => writeln!(out, " produced={} lost={} elided={}", s.produced, s.lost, s.elided)?,
            Body::ClockSync(c) => {
                writeln!(out, " reference_host={:016x}", c.reference_host)?;
                for x in &c.exchanges {
                    writeln!(out, "  exchange t1={} t2={} t3={} t4={} rtt_ns={}", x.t1, x.t2, x.t3, x.t4, x.t4 - x.t1)?;
                }
            }
            Body::Stats(s) => {
                // By name where this reader knows the figure, else by number.
                let name = |id: u32| {
                    ringlog::StatFigure::ALL
                        .iter()
                        .find(|f| **f as u32 == id)
                        .map_or(format!("figure{id}"), |f| format!("{f:?}"))
                };
                let figures: Vec<String> = s.figures.iter().map(|&(id, v)| format!("{}={v}", name(id))).collect();
                writeln!(out, "{} {}", if s.last { " last" } else { "" }, figures.join(" "))?;
            }
        }
    }
    Ok(done)
}

/// What a Mark's id says, by its tag (ringlog FORMAT.md), in words.
fn mark_meaning(id: u64) -> String {
    use ringlog::Mark;
    match Mark::decode(id) {
        Some(Mark::PushProgress(op)) => format!("progress pushed to operator {op}"),
        Some(Mark::Shutdown(op)) => format!("operator {op} shut down"),
        Some(Mark::UntracedProgress(op)) => format!("scope {op}: its progress not traced"),
        Some(Mark::Detached) => "detached: the program took the engine's log".to_string(),
        // (A tag this format defines, with bits its marks never set.)
        _ if Mark::decode(id & ringlog::MARK_TAG).is_some() => format!("tag {}, not a known mark", id >> 56),
        _ => format!("tag {}, the engine's own", id >> 56),
    }
}

#[cfg(test)]
mod tests {
    use super::mark_meaning;

    #[test]
    fn marks_read_by_their_tags() {
        assert_eq!(mark_meaning(ringlog::MARK_SHUTDOWN | 4), "operator 4 shut down");
        assert_eq!(mark_meaning(ringlog::MARK_PUSH_PROGRESS | 2), "progress pushed to operator 2");
        assert_eq!(mark_meaning(ringlog::MARK_UNTRACED_PROGRESS | 9), "scope 9: its progress not traced");
        assert_eq!(mark_meaning(ringlog::MARK_DETACHED), "detached: the program took the engine's log");
        assert_eq!(mark_meaning(ringlog::MARK_DETACHED | 1), "tag 4, not a known mark");
        assert_eq!(mark_meaning(9 << 56 | 3), "tag 9, the engine's own");
        assert_eq!(mark_meaning(ringlog::MARK_SHUTDOWN | 1 << 40), "tag 2, not a known mark");
        assert_eq!(mark_meaning(1), "tag 0, the engine's own");
    }
}
