//! What each frame does: process-wide frames (hello, clock samples, end)
//! to the process's clock and facts, worker frames to their stream
//! (metadata, end; Records to the per-record loop in `records`), and the
//! sequence numbers that show frames missing.

use std::borrow::Borrow;
use std::sync::Arc;

use ringlog::{Body, DecodeError, Frame, FrameHeader, Meta, Payload, Record, PROCESS_WIDE};

use super::faults::Fault;
use super::records::take_records;
use super::Ingest;
use crate::analysis::model::{Counters, Ns, Sid};
use crate::analysis::report::{ProbeFigures, ProcessFigures};

impl Ingest {
    /// Handles one decoded frame of `bytes` bytes.
    pub fn frame(&mut self, f: Frame, bytes: u64) {
        match f.body {
            Body::Records(recs) => {
                self.records_frame(f.header, recs.into_iter(), bytes);
            }
            body => self.other_frame(f.header, body, bytes),
        }
    }

    /// Handles one frame from [`ringlog::decode_frame_with`] (a Records
    /// frame's records decoded as they are ingested). A fault in its
    /// records is returned, for the caller to drop the stream
    /// ([`Ingest::stream_error`]); the records before it have been taken.
    pub fn payload(&mut self, h: FrameHeader, payload: Payload<'_>, bytes: u64) -> Result<(), DecodeError> {
        match payload {
            Payload::Records(recs) => {
                let mut recs = self.records_frame(h, recs, bytes);
                // (What a dropped frame did not take is checked all the same.)
                recs.by_ref().for_each(drop);
                recs.finish()
            }
            Payload::Other(body) => {
                self.other_frame(h, body, bytes);
                Ok(())
            }
        }
    }

    /// Handles a Records frame whose records were decoded elsewhere (on a
    /// reading thread, see `io::Unpacker`): the same as [`Ingest::payload`]
    /// with a payload that decodes to `recs`.
    pub fn records(&mut self, h: FrameHeader, recs: &[Record], bytes: u64) {
        // (Decoded already: what a dropped frame did not take needs no
        // check.)
        let _ = self.records_frame(h, recs.iter(), bytes);
    }

    /// A process-wide frame (hello, clock samples, the probe's figures,
    /// end).
    pub(super) fn process_frame(&mut self, h: &FrameHeader, body: Option<Body>) {
        let sid = Sid::from(h.stream);
        let p = self.proc(sid.host, sid.process, h.domain);
        // (A first frame numbered past 0 is a process joined mid-way: a
        // probe that reconnected to a restarted sidecar. Its worker streams
        // say what that means for their windows.)
        let expected = p.next_seq.unwrap_or(h.seq as u128);
        let gap = h.seq as u128 != expected;
        p.next_seq = Some(h.seq as u128 + 1);
        match body {
            Some(Body::Hello(hello)) => {
                p.program = hello.program.clone();
                p.host_name = hello.host_name.clone();
                p.workers = hello.workers;
                p.clock.set_ticks_per_sec(hello.ticks_per_sec);
            }
            Some(Body::Clock(samples)) => {
                let bad: Vec<_> = samples.into_iter().filter_map(|s| p.clock.add(s).err()).collect();
                for why in bad {
                    self.fault(format!("{}: clock #{}: {why}", h.stream, h.seq));
                }
            }
            Some(Body::End(_)) => p.ended = true,
            Some(Body::Stats(s)) => {
                p.stats_frames += 1;
                let program = p.program.clone();
                let figures = ProcessFigures { program, seq: h.seq, figures: probe_figures(&s) };
                // Running totals: a process's newer frame replaces its
                // older one not yet taken (bounded by the processes).
                match self.probe_figures.iter_mut().find(|(h, p, _)| (*h, *p) == (sid.host, sid.process)) {
                    Some(e) if e.2.seq <= figures.seq => e.2 = figures,
                    Some(_) => {}
                    None => self.probe_figures.push((sid.host, sid.process, figures)),
                }
            }
            _ => {}
        }
        if gap {
            self.fault(format!("{}: process frames missing (frame #{} after #{})", h.stream, h.seq, expected));
        }
    }

    /// The bookkeeping of every worker frame: its stream (made if new),
    /// and the faults its sequence number shows. `None`: the stream is
    /// done, the frame is ignored.
    pub(super) fn worker_frame(&mut self, h: &FrameHeader) -> Option<Vec<Fault>> {
        let sid = Sid::from(h.stream);
        let (program, host_name, workers) = {
            let p = self.proc(sid.host, sid.process, h.domain);
            (p.program.clone(), p.host_name.clone(), p.workers)
        };
        let process_workers = self.know_worker(sid);
        let st = self.stream(sid);
        st.windower.workers_expected = workers;
        st.windower.process_workers = process_workers;
        st.windower.program = program;
        st.windower.host_name = host_name;
        if st.done {
            return None;
        }
        let mut faults: Vec<Fault> = Vec::new();
        match st.next_seq {
            // Joined mid-way (a probe reconnected to a restarted sidecar,
            // or a file missing its start): the stream's first window lacks
            // what came before. (The windower puts a fault that comes
            // before any record in the stream's first window.)
            None if h.seq > 0 => faults.push((
                0,
                0,
                format!("joined the stream mid-way (first frame #{}): earlier frames not seen", h.seq),
            )),
            Some(n) if h.seq as u128 != n => {
                let from = st.last_ts.unwrap_or(0);
                faults.push((from, from, format!("frames missing (got #{} expected #{n})", h.seq)));
            }
            _ => {}
        }
        st.next_seq = Some(h.seq as u128 + 1);
        Some(faults)
    }

    /// A Records frame, its records taken from `recs` as they are ingested;
    /// gives `recs` back (owned by the pass over them, so its loop keeps the
    /// decoder's state in registers). The frame's bookkeeping, the pass
    /// ([`take_records`]), then its last window and faults booked
    /// ([`Stream::close_records_frame`]).
    pub(super) fn records_frame<R: Borrow<Record>, I: Iterator<Item = R>>(
        &mut self,
        h: FrameHeader,
        recs: I,
        bytes: u64,
    ) -> I {
        if self.failed {
            return recs;
        }
        self.bytes += bytes;
        if h.stream.worker == PROCESS_WIDE {
            self.process_frame(&h, None);
            return recs;
        }
        let Some(faults) = self.worker_frame(&h) else { return recs };
        let sid = Sid::from(h.stream);
        let (conv, sync_fault) = self.sync.frame(sid.host, sid.process);
        let Some(p) = self.procs.get_mut(&(sid.host, sid.process)) else { return recs };
        if !p.clock.has_sample() {
            self.records_before_clock(&h, sid);
            return recs;
        }
        let st = self.streams.get_mut(&sid).unwrap();
        st.stats_seen = p.stats_frames;
        // A stream clock that went back: every frame from then on is
        // faulted (once the TSC passes its old value, samples are accepted
        // again, but the segment across the reset maps wrongly).
        let clock_fault = (p.clock.went_back() > 0).then(|| {
            "the stream clock went back (a TSC reset or write): its times from here on are not on the host's \
             timeline"
                .to_string()
        });
        let (recs, pass) = take_records(recs, p, st, &conv, self.width, bytes);
        self.records += pass.taken;
        st.close_records_frame(&h, bytes, pass, faults, [sync_fault, clock_fault]);
        Self::flush(st, &mut self.out, false);
        if let Some(t) = st.detached_at {
            self.detached(sid, t);
        }
        recs
    }

    /// The probe receives nothing more of this stream's worker from `t` on
    /// (its Mark `MARK_DETACHED`: the program bound its own logger to the
    /// engine's log in the probe's place): the stream ends there, said in
    /// its last window and among the input's errors (the run did not trace
    /// what the program did after it). Its later frames are ignored.
    #[cold]
    fn detached(&mut self, sid: Sid, t: Ns) {
        let why = "the program bound its own logger to the engine's log in the probe's place: nothing of this \
                   worker is traced from here on (docs/timely.md)";
        self.fault(format!("stream {sid}: {why}"));
        let st = self.streams.get_mut(&sid).expect("a stream of the frame");
        st.windower.fault(t, t, why);
        self.end_stream(sid, Vec::new());
    }

    /// The stream `sid` is over (its End frame, or what ended it): its
    /// windows are handed over, with `faults`, and it counts as ended.
    fn end_stream(&mut self, sid: Sid, faults: Vec<Fault>) {
        let st = self.streams.get_mut(&sid).expect("a stream of the frame");
        st.builder.finish();
        st.done = true;
        for (a, b, why) in faults {
            st.windower.fault(a, b, &why);
        }
        let before = self.out.len();
        Self::flush(st, &mut self.out, true);
        st.windower.finish(true, None, &mut st.builder.out, &mut self.out);
        let unplaced = st.windower.unplaced_faults();
        self.report_unplaced(sid, unplaced);
        self.mark_ended(sid);
        self.finish_batch(before);
    }

    /// A Records frame of a process with no clock sample yet: its records
    /// cannot be placed, and are dropped.
    pub(super) fn records_before_clock(&mut self, h: &FrameHeader, sid: Sid) {
        let n = h.count;
        self.fault(format!("{}: {} records before any clock sample, dropped", h.stream, n));
        let st = self.streams.get_mut(&sid).unwrap();
        let t = st.last_ts.unwrap_or(0);
        st.windower.fault(t, t, "records before any clock sample");
    }

    /// Any frame but Records.
    pub(super) fn other_frame(&mut self, h: FrameHeader, body: Body, bytes: u64) {
        if self.failed {
            return;
        }
        self.bytes += bytes;
        self.greeted |= matches!(body, Body::Hello(_));
        let sid = Sid::from(h.stream);
        if let Body::ClockSync(cs) = &body {
            // A relay's frames, with a process id of their own (FORMAT.md).
            self.sync.clock_sync(sid.host, cs);
            return;
        }
        if h.stream.worker == PROCESS_WIDE {
            return self.process_frame(&h, Some(body));
        }
        // Per-worker frame.
        let Some(mut faults) = self.worker_frame(&h) else { return };
        let st = self.streams.get_mut(&sid).expect("made by worker_frame");
        match body {
            // (The decoder refuses worker-specific ClockSync and Stats
            // frames; Records go to `records_frame`.)
            Body::Hello(_) | Body::ClockSync(_) | Body::Records(_) | Body::Stats(_) => {}
            Body::Metadata(m) => {
                let meta = Arc::make_mut(&mut st.meta);
                let before = st.metadata_refused;
                for e in m {
                    // (A stream's metadata is kept for as long as it lives:
                    // bounded, so that no probe makes it grow without end.)
                    if meta.adds(&e) && meta.entries() >= self.max_metadata {
                        st.metadata_refused += 1;
                        continue;
                    }
                    match e {
                        Meta::Operator { id, name, addr } => meta.operator(id, name, addr),
                        Meta::Channel { id, src, dst } => meta.channel((id, src, dst)),
                        Meta::Span { id, name } => meta.span(id, name),
                    }
                }
                if before == 0 && st.metadata_refused > 0 {
                    self.fault(format!(
                        "stream {sid}: metadata past {} operators, channels and spans: the rest is ignored (operators named by their ids)",
                        self.max_metadata
                    ));
                }
            }
            Body::Clock(_) => {}
            Body::End(_) => {
                if h.lost > 0 {
                    let t = st.last_ts.unwrap_or(0);
                    st.windower.count(t, &Counters { lost: h.lost, ..Default::default() });
                    st.windower.fault(t, t, &format!("{} records lost", h.lost));
                }
                self.end_stream(sid, faults);
                return;
            }
        }
        let st = self.streams.get_mut(&sid).unwrap();
        for (a, b, why) in faults.drain(..) {
            st.windower.fault(a, b, &why);
        }
    }
}

/// A Stats frame's figures as the sidecar keeps them (figures it does not
/// know, a newer probe's, are skipped).
fn probe_figures(s: &ringlog::ProbeStats) -> ProbeFigures {
    use ringlog::StatFigure as F;
    ProbeFigures {
        workers: s.get(F::Workers),
        produced: s.get(F::Produced),
        written: s.get(F::Written),
        lost: s.get(F::Lost),
        elided: s.get(F::Elided),
        local_messages: s.get(F::LocalMessages),
        bytes: s.get(F::Bytes),
        writer_cpu_ns: s.get(F::WriterCpuNs),
        adapter_ns: s.get(F::AdapterNs),
        engine_events: s.get(F::EngineEvents),
        engine_log_ns: s.get(F::EngineLogNs),
        engine_flushes: s.get(F::EngineFlushes),
        engine_flush_ns: s.get(F::EngineFlushNs),
        idle_flushes: s.get(F::IdleFlushes),
        idle_engine_ns: s.get(F::IdleEngineNs),
        idle_adapter_ns: s.get(F::IdleAdapterNs),
        last: s.last,
    }
}
