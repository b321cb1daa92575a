//! `sidecar watch -- COMMAND`: the closing summary, and what tracing cost.
//!
//! The cost figures come from two places: the streams themselves (records,
//! elided schedules, bytes and traced worker time, summed over the
//! windows), and the workload's own `probe:` line on its standard error
//! (what the probe produced and lost, and the writer thread's CPU time,
//! which no frame carries). The time spent in the probe is an estimate:
//! records × the per-record cost plus elided pairs × the per-pair cost,
//! as a share of the traced worker time.

use serde::Serialize;

use crate::summary::RunTotals;

/// Measured on the development machine (2 cores, invariant TSC): about
/// 12 ns per published record and 10 ns per elided schedule pair
/// (`cargo bench -p benches --bench hot_path`). Override with
/// `--ns-per-record` / `--ns-per-elided` for another machine.
pub const NS_PER_RECORD: f64 = 12.0;
pub const NS_PER_ELIDED: f64 = 10.0;

/// The figures of a workload's `probe: ...` stderr line (see
/// `examples::stats_line`), or the sum of several (a command that runs
/// more than one traced program, each printing its own).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProbeLine {
    /// How many `probe:` lines were summed.
    pub lines: u64,
    pub workers: Option<u64>,
    pub produced: Option<u64>,
    pub written: Option<u64>,
    pub lost: Option<u64>,
    pub elided: Option<u64>,
    /// Worker-local message halves the probe counted but did not write.
    pub local: Option<u64>,
    pub bytes: Option<u64>,
    pub writer_cpu_ms: Option<f64>,
}

impl ProbeLine {
    /// Parses a `probe: key=value ...` line; None for other lines.
    pub fn parse(line: &str) -> Option<ProbeLine> {
        let rest = line.trim().strip_prefix("probe: ")?;
        let mut p = ProbeLine::default();
        let mut any = false;
        for kv in rest.split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else { continue };
            let u = || v.parse::<u64>().ok();
            match k {
                "workers" => p.workers = u(),
                "produced" => p.produced = u(),
                "written" => p.written = u(),
                "lost" => p.lost = u(),
                "elided" => p.elided = u(),
                "local" => p.local = u(),
                "bytes" => p.bytes = u(),
                "writer_cpu" => p.writer_cpu_ms = v.strip_suffix("ms").and_then(|x| x.parse().ok()),
                _ => continue,
            }
            any = true;
        }
        p.lines = 1;
        any.then_some(p)
    }

    /// Adds another program's figures: a figure is known if any line gave
    /// it.
    pub fn add(&mut self, o: &ProbeLine) {
        fn sum<T: Copy>(a: Option<T>, b: Option<T>, add: fn(T, T) -> T) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(add(x, y)),
                (x, y) => x.or(y),
            }
        }
        // (The figures are parsed from the command's output: saturating,
        // so that absurd ones cannot overflow.)
        let add = u64::saturating_add;
        self.lines = self.lines.saturating_add(o.lines);
        self.workers = sum(self.workers, o.workers, add);
        self.produced = sum(self.produced, o.produced, add);
        self.written = sum(self.written, o.written, add);
        self.lost = sum(self.lost, o.lost, add);
        self.elided = sum(self.elided, o.elided, add);
        self.local = sum(self.local, o.local, add);
        self.bytes = sum(self.bytes, o.bytes, add);
        self.writer_cpu_ms = sum(self.writer_cpu_ms, o.writer_cpu_ms, |x, y| x + y);
    }
}

/// What tracing cost, as printed and as `--summary-json`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Cost {
    /// Records published (the probe's `written`, else the records read).
    pub records: u64,
    pub records_lost: u64,
    pub elided_schedules: u64,
    /// Worker-local message halves counted, not written (only the probe's
    /// line knows them).
    pub local_messages: Option<u64>,
    pub bytes: u64,
    pub bytes_per_record: f64,
    pub ns_per_record: f64,
    pub ns_per_elided: f64,
    /// records × ns_per_record + elided × ns_per_elided.
    pub est_probe_ms: f64,
    /// Traced worker time: Σ over workers of the time their streams cover.
    pub worker_ms: f64,
    /// est_probe_ms / worker_ms.
    pub est_probe_share: f64,
    /// The probe's writer thread (from the workload's `probe:` line).
    pub writer_cpu_ms: Option<f64>,
    /// writer CPU over the traced wall time (worker time / workers).
    pub writer_cpu_share: Option<f64>,
}

impl Cost {
    pub fn new(t: &RunTotals, p: Option<&ProbeLine>, ns_per_record: f64, ns_per_elided: f64) -> Cost {
        let i = &t.instrumentation;
        let p = p.cloned().unwrap_or_default();
        let records = p.written.unwrap_or(i.records);
        let elided = p.elided.unwrap_or(i.elided_schedules);
        let bytes = p.bytes.unwrap_or(i.bytes);
        let est = records as f64 * ns_per_record + elided as f64 * ns_per_elided;
        let workers = t.streams.len().max(1) as f64;
        let wall_ns = t.worker_ns as f64 / workers;
        Cost {
            records,
            records_lost: p.lost.unwrap_or(i.records_lost),
            elided_schedules: elided,
            local_messages: p.local,
            bytes,
            bytes_per_record: bytes as f64 / records.max(1) as f64,
            ns_per_record,
            ns_per_elided,
            est_probe_ms: est / 1e6,
            worker_ms: t.worker_ns as f64 / 1e6,
            est_probe_share: if t.worker_ns > 0 { est / t.worker_ns as f64 } else { 0.0 },
            writer_cpu_ms: p.writer_cpu_ms,
            writer_cpu_share: p.writer_cpu_ms.filter(|_| wall_ns > 0.0).map(|ms| ms * 1e6 / wall_ns),
        }
    }
}

/// The closing summary as JSON (`--summary-json`).
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub command: Vec<String>,
    pub exit_status: i32,
    pub wall_ms: f64,
    pub windows: u64,
    pub incomplete_windows: u64,
    pub property_violation_windows: u64,
    pub workers: usize,
    pub critical_path_ms: f64,
    /// (worker, operator, share of the critical path), largest first.
    pub top_operators: Vec<(u32, String, f64)>,
    /// (worker, waited on, ms), largest first.
    pub waits: Vec<(u32, Option<u32>, f64)>,
    pub cost: Cost,
    pub probe_line: Option<ProbeLine>,
}

impl Summary {
    pub fn new(
        command: &[String],
        exit_status: i32,
        wall_ms: f64,
        t: &RunTotals,
        probe: Option<&ProbeLine>,
        cost: Cost,
    ) -> Summary {
        let cp = t.critical_path_ns.max(1) as f64;
        let mut ops: Vec<(u32, String, f64)> =
            t.operators.iter().map(|((w, n), ns)| (*w, n.clone(), *ns as f64 / cp)).collect();
        ops.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        ops.truncate(5);
        let mut waits: Vec<(u32, Option<u32>, f64)> =
            t.waits.iter().map(|((w, on), ns)| (*w, *on, *ns as f64 / 1e6)).collect();
        waits.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        waits.truncate(8);
        Summary {
            command: command.to_vec(),
            exit_status,
            wall_ms,
            windows: t.windows,
            incomplete_windows: t.incomplete,
            property_violation_windows: t.property_violations,
            workers: t.streams.len(),
            critical_path_ms: t.critical_path_ns as f64 / 1e6,
            top_operators: ops,
            waits,
            cost,
            probe_line: probe.cloned(),
        }
    }

    /// The terminal form.
    pub fn text(&self) -> String {
        let c = &self.cost;
        let mut s = format!(
            "sidecar watch: `{}` exited with status {} after {:.2} s\n",
            self.command.join(" "),
            self.exit_status,
            self.wall_ms / 1e3
        );
        s += &format!(
            "  windows: {} ({} incomplete, {} with property violations); {} workers traced, {:.1} ms of worker time\n",
            self.windows, self.incomplete_windows, self.property_violation_windows, self.workers, c.worker_ms
        );
        let ops: Vec<String> =
            self.top_operators.iter().map(|(w, n, sh)| format!("w{w} {n} {:.1}%", sh * 100.0)).collect();
        s += &format!(
            "  critical path: {:.1} ms; top: {}\n",
            self.critical_path_ms,
            if ops.is_empty() { "-".into() } else { ops.join(", ") }
        );
        let waits: Vec<String> = self
            .waits
            .iter()
            .map(|(w, on, ms)| match on {
                Some(o) => format!("w{w} on w{o} {ms:.1} ms"),
                None => format!("w{w} on ? {ms:.1} ms"),
            })
            .collect();
        s += &format!("  waiting: {}\n", if waits.is_empty() { "-".into() } else { waits.join(", ") });
        s += &format!(
            "  tracing cost: {} records ({} lost), {} schedules elided{}, {} bytes ({:.1} B/record); \
             probe time ~{:.2} ms = {:.3}% of worker time ({} ns/record, {} ns/elided pair); writer thread CPU {}\n",
            c.records,
            c.records_lost,
            c.elided_schedules,
            c.local_messages.map(|n| format!(", {n} worker-local message halves not written")).unwrap_or_default(),
            c.bytes,
            c.bytes_per_record,
            c.est_probe_ms,
            c.est_probe_share * 100.0,
            c.ns_per_record,
            c.ns_per_elided,
            match (c.writer_cpu_ms, c.writer_cpu_share) {
                (Some(ms), Some(sh)) => format!("{ms:.1} ms ({:.2}% of one core over the traced time)", sh * 100.0),
                (Some(ms), None) => format!("{ms:.1} ms"),
                _ => "unknown (no `probe:` line on the command's stderr)".into(),
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_probe_line() {
        let l = "probe: sink=unix:/tmp/x io=io_uring workers=2 produced=100 written=98 lost=2 elided=7 local=40 bytes=1234 bytes/record=12.59 writer_cpu=3.5ms ticks/s=1000";
        let p = ProbeLine::parse(l).unwrap();
        assert_eq!(p.workers, Some(2));
        assert_eq!(p.produced, Some(100));
        assert_eq!(p.written, Some(98));
        assert_eq!(p.lost, Some(2));
        assert_eq!(p.elided, Some(7));
        assert_eq!(p.local, Some(40));
        assert_eq!(p.bytes, Some(1234));
        assert_eq!(p.writer_cpu_ms, Some(3.5));
        assert_eq!(p.lines, 1);
        assert!(ProbeLine::parse("probe: off (PROBE_SINK unset or off)").is_none());
        assert!(ProbeLine::parse("Compiling x").is_none());
    }

    #[test]
    fn probe_lines_of_several_programs_add_up() {
        let mut p = ProbeLine::parse("probe: workers=2 written=98 lost=2 bytes=1000 writer_cpu=3.5ms").unwrap();
        p.add(&ProbeLine::parse("probe: workers=1 written=10 elided=4 local=6 bytes=200 writer_cpu=0.5ms").unwrap());
        let want = ProbeLine {
            lines: 2,
            workers: Some(3),
            produced: None,
            written: Some(108),
            lost: Some(2),
            elided: Some(4),
            local: Some(6),
            bytes: Some(1200),
            writer_cpu_ms: Some(4.0),
        };
        assert_eq!(p, want);
        // Absurd figures saturate instead of overflowing the sum.
        p.add(&ProbeLine::parse(&format!("probe: lost={}", u64::MAX)).unwrap());
        assert_eq!(p.lost, Some(u64::MAX));
    }

    #[test]
    fn cost_is_records_times_constants_over_worker_time() {
        let mut t = RunTotals { worker_ns: 2_000_000_000, ..Default::default() };
        t.streams.insert(("h".into(), 0, 0));
        t.streams.insert(("h".into(), 0, 1));
        let p = ProbeLine {
            written: Some(1_000_000),
            elided: Some(1_000_000),
            writer_cpu_ms: Some(10.0),
            ..Default::default()
        };
        let c = Cost::new(&t, Some(&p), 12.0, 10.0);
        assert!((c.est_probe_ms - 22.0).abs() < 1e-9);
        assert!((c.est_probe_share - 0.011).abs() < 1e-9);
        assert!((c.writer_cpu_share.unwrap() - 0.01).abs() < 1e-9);
    }
}
