//! Faults that end streams: a decode error (the whole byte stream, or one
//! worker stream whose frame header was sound), the end of input before a
//! stream's End frame, a stop; and the faults that found no window to sit
//! on, which become errors of the input.

use ringlog::StreamError;

use super::{Ingest, Stream};
use crate::analysis::model::{Fragment, Ns, Sid};

/// A fault to place on the windows it concerns: (from, to, what).
pub(super) type Fault = (Ns, Ns, String);

impl Stream {
    /// Ends the stream before its End frame (input over, a stop, a fault):
    /// its open windows go to `out` marked incomplete with `why`. (Late
    /// items are not counted: no fragment follows to carry the fault.)
    /// Returns the faults that found no window (the stream had no records).
    pub(super) fn cut(&mut self, why: Option<&str>, out: &mut Vec<Fragment>) -> Vec<String> {
        self.done = true;
        self.builder.finish();
        self.windower.new_frame();
        self.windower.add(&mut self.builder.out);
        self.windower.finish(false, why, &mut self.builder.out, out);
        self.windower.unplaced_faults()
    }
}

impl Ingest {
    pub(super) fn fault(&mut self, what: String) {
        self.errors.push(format!("{}: {}", self.name, what));
    }

    /// Faults of a stream that ended before its first record: no window
    /// holds them, so they are errors of the input.
    pub(super) fn report_unplaced(&mut self, sid: Sid, faults: Vec<String>) {
        for why in faults {
            self.fault(format!("stream {sid}: {why} (no record of it arrived)"));
        }
    }

    /// of it ends with the fault named.
    pub fn decode_error(&mut self, e: &StreamError) {
        let what = format!("decode error at byte {}: {}", e.offset, e.error);
        self.fault(what.clone());
        self.end_all(Some(&what));
        self.failed = true;
    }

    /// A decode error: if it concerns one worker stream's frame only (its
    /// header sound, see [`StreamError::stream`]), that stream is dropped —
    /// its open windows end incomplete with the fault, and its later frames
    /// are ignored — and true is returned: the byte stream's other streams
    /// go on. Otherwise (the framing is lost, or a process-wide frame that
    /// every stream of the process depends on) everything ends as with
    /// [`Ingest::decode_error`], and false is returned.
    ///
    /// A dropped stream is not ended: the windows after it lack that worker
    /// and are reported incomplete rather than analyzed as if it had
    /// finished.
    pub fn stream_error(&mut self, e: &StreamError) -> bool {
        let Some(id) = e.stream.filter(|s| !s.is_process_wide()) else {
            self.decode_error(e);
            return false;
        };
        let what = format!("stream {id} dropped: decode error at byte {}: {}", e.offset, e.error);
        self.stream(Sid::from(id));
        let st = self.streams.get_mut(&Sid::from(id)).expect("just made");
        if st.done {
            // Dropped (or ended) before: reported then. A probe that keeps
            // sending corrupt frames must not flood the errors.
            return true;
        }
        let before = self.out.len();
        let unplaced = st.cut(Some(&what), &mut self.out);
        self.fault(what);
        self.report_unplaced(Sid::from(id), unplaced);
        self.finish_batch(before);
        true
    }

    /// End of input (file end, connection closed). Streams without their
    /// End frame were cut off: their last windows are incomplete.
    pub fn eof(&mut self) {
        let cut: Vec<Sid> = self.streams.iter().filter(|(_, s)| !s.done).map(|(k, _)| *k).collect();
        if !cut.is_empty() {
            self.fault(format!(
                "{} stream(s) ended without an End frame (disconnect or truncation): {}",
                cut.len(),
                cut.iter().map(|s| s.worker.to_string()).collect::<Vec<_>>().join(",")
            ));
        }
        self.end_all(Some("stream cut off without End (disconnect)"));
    }

    /// The sidecar is stopping (Ctrl-C): open streams end here; their last
    /// windows are marked as cut by the stop, not by the probe.
    pub fn stop(&mut self) {
        self.end_all(Some("analysis stopped (Ctrl-C) before the stream ended"));
    }

    pub(super) fn end_all(&mut self, why: Option<&str>) {
        let before = self.out.len();
        let mut ended = Vec::new();
        for (sid, st) in self.streams.iter_mut() {
            if st.done {
                continue;
            }
            let unplaced = st.cut(why, &mut self.out);
            ended.push((*sid, unplaced));
        }
        for (sid, unplaced) in ended {
            self.report_unplaced(sid, unplaced);
            self.mark_ended(sid);
        }
        self.finish_batch(before);
    }

    /// A stream ended: note the first window it is absent from, so that the
    /// owners of later windows do not count it as missing.
    pub(super) fn mark_ended(&mut self, sid: Sid) {
        if let Some(st) = self.streams.get(&sid) {
            self.ended.push((sid, st.windower.next_window(), st.windower.last_marks()));
        }
    }
}
