//! Writes Perfetto traces in the protobuf trace format (the format
//! `ui.perfetto.dev` and `trace_processor` open), streaming: each
//! `TracePacket` goes out as it is made, as field 1 of the `Trace` message,
//! so a long trace never sits in memory.
//!
//! Only the subset of the schema the sidecar uses is declared here, with
//! the field numbers of Perfetto's `protos/perfetto/trace/*.proto`; the
//! test decodes the output with the official generated bindings.

use std::io::{self, Write};

use prost::Message;

/// The messages, as in Perfetto's `.proto` files (same names and tags).
pub mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TracePacket {
        #[prost(uint64, optional, tag = "8")]
        pub timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "10")]
        pub trusted_packet_sequence_id: Option<u32>,
        #[prost(uint32, optional, tag = "13")]
        pub sequence_flags: Option<u32>,
        #[prost(message, optional, tag = "11")]
        pub track_event: Option<TrackEvent>,
        #[prost(message, optional, tag = "60")]
        pub track_descriptor: Option<TrackDescriptor>,
        #[prost(message, optional, tag = "12")]
        pub interned_data: Option<InternedData>,
    }

    /// Strings sent once per sequence and referred to by id (`*_iid`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InternedData {
        #[prost(message, repeated, tag = "1")]
        pub event_categories: Vec<Interned>,
        #[prost(message, repeated, tag = "2")]
        pub event_names: Vec<Interned>,
        #[prost(message, repeated, tag = "3")]
        pub debug_annotation_names: Vec<Interned>,
    }

    /// `EventCategory`, `EventName`, `DebugAnnotationName`: iid + name.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Interned {
        #[prost(uint64, optional, tag = "1")]
        pub iid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackDescriptor {
        #[prost(uint64, optional, tag = "1")]
        pub uuid: Option<u64>,
        #[prost(uint64, optional, tag = "5")]
        pub parent_uuid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub name: Option<String>,
        #[prost(message, optional, tag = "3")]
        pub process: Option<ProcessDescriptor>,
        #[prost(message, optional, tag = "4")]
        pub thread: Option<ThreadDescriptor>,
        #[prost(message, optional, tag = "8")]
        pub counter: Option<CounterDescriptor>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ProcessDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(string, optional, tag = "6")]
        pub process_name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ThreadDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub pid: Option<i32>,
        #[prost(int32, optional, tag = "2")]
        pub tid: Option<i32>,
        #[prost(string, optional, tag = "5")]
        pub thread_name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CounterDescriptor {
        /// 2 = UNIT_COUNT.
        #[prost(int32, optional, tag = "3")]
        pub unit: Option<i32>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TrackEvent {
        /// 1 slice begin, 2 slice end, 3 instant, 4 counter.
        #[prost(int32, optional, tag = "9")]
        pub r#type: Option<i32>,
        #[prost(uint64, optional, tag = "11")]
        pub track_uuid: Option<u64>,
        #[prost(string, optional, tag = "23")]
        pub name: Option<String>,
        #[prost(uint64, optional, tag = "10")]
        pub name_iid: Option<u64>,
        #[prost(string, repeated, tag = "22")]
        pub categories: Vec<String>,
        #[prost(uint64, repeated, packed = "false", tag = "3")]
        pub category_iids: Vec<u64>,
        #[prost(int64, optional, tag = "30")]
        pub counter_value: Option<i64>,
        #[prost(fixed64, repeated, packed = "false", tag = "47")]
        pub flow_ids: Vec<u64>,
        #[prost(fixed64, repeated, packed = "false", tag = "48")]
        pub terminating_flow_ids: Vec<u64>,
        #[prost(message, repeated, tag = "4")]
        pub debug_annotations: Vec<DebugAnnotation>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DebugAnnotation {
        #[prost(string, optional, tag = "10")]
        pub name: Option<String>,
        #[prost(uint64, optional, tag = "1")]
        pub name_iid: Option<u64>,
        #[prost(uint64, optional, tag = "3")]
        pub uint_value: Option<u64>,
        #[prost(string, optional, tag = "6")]
        pub string_value: Option<String>,
    }
}

use proto::*;

const SLICE_BEGIN: i32 = 1;
const SLICE_END: i32 = 2;
const INSTANT: i32 = 3;
const COUNTER: i32 = 4;
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;
const SEQUENCE: u32 = 1;

/// A debug argument on a slice.
#[derive(Clone, Debug)]
pub enum Arg {
    U(u64),
    S(String),
}

/// Streams a Perfetto trace into `out`.
pub struct Writer<W: Write> {
    out: W,
    next_uuid: u64,
    buf: Vec<u8>,
    first: bool,
    packets: u64,
    /// Interned strings (event names, categories, argument names): sent
    /// once, then referred to by iid, which keeps large traces small.
    names: std::collections::HashMap<String, u64>,
    cats: std::collections::HashMap<String, u64>,
    arg_names: std::collections::HashMap<String, u64>,
    pending: InternedData,
}

impl<W: Write> Writer<W> {
    pub fn new(out: W) -> Self {
        Writer {
            out,
            next_uuid: 1,
            buf: Vec::with_capacity(256),
            first: true,
            packets: 0,
            names: Default::default(),
            cats: Default::default(),
            arg_names: Default::default(),
            pending: InternedData::default(),
        }
    }

    fn intern(map: &mut std::collections::HashMap<String, u64>, out: &mut Vec<Interned>, s: &str) -> u64 {
        if let Some(&i) = map.get(s) {
            return i;
        }
        let i = map.len() as u64 + 1;
        map.insert(s.to_string(), i);
        out.push(Interned { iid: Some(i), name: Some(s.to_string()) });
        i
    }

    fn name_iid(&mut self, s: &str) -> u64 {
        Self::intern(&mut self.names, &mut self.pending.event_names, s)
    }

    fn cat_iid(&mut self, s: &str) -> u64 {
        Self::intern(&mut self.cats, &mut self.pending.event_categories, s)
    }

    fn arg_iid(&mut self, s: &str) -> u64 {
        Self::intern(&mut self.arg_names, &mut self.pending.debug_annotation_names, s)
    }

    fn packet(&mut self, mut p: TracePacket) -> io::Result<()> {
        p.trusted_packet_sequence_id = Some(SEQUENCE);
        if p.track_event.is_some() {
            p.sequence_flags = Some(SEQ_NEEDS_INCREMENTAL_STATE);
            let pending = std::mem::take(&mut self.pending);
            if pending != InternedData::default() {
                p.interned_data = Some(pending);
            }
        }
        if self.first {
            p.sequence_flags = Some(p.sequence_flags.unwrap_or(0) | SEQ_INCREMENTAL_STATE_CLEARED);
            self.first = false;
        }
        self.buf.clear();
        // Field 1 of `Trace`, length-delimited: (1 << 3) | 2.
        self.buf.push(0x0a);
        prost::encoding::encode_varint(p.encoded_len() as u64, &mut self.buf);
        p.encode(&mut self.buf).expect("a Vec grows as needed");
        self.packets += 1;
        self.out.write_all(&self.buf)
    }

    fn uuid(&mut self) -> u64 {
        self.next_uuid += 1;
        self.next_uuid
    }

    /// A process track (a group of thread tracks).
    pub fn process(&mut self, pid: u32, name: &str) -> io::Result<u64> {
        let uuid = self.uuid();
        self.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                process: Some(ProcessDescriptor { pid: Some(pid as i32), process_name: Some(name.into()) }),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// A thread track inside a process (one per engine worker).
    pub fn thread(&mut self, parent: u64, pid: u32, tid: u32, name: &str) -> io::Result<u64> {
        let uuid = self.uuid();
        self.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                thread: Some(ThreadDescriptor {
                    pid: Some(pid as i32),
                    tid: Some(tid as i32),
                    thread_name: Some(name.into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// A plain named track under `parent` (e.g. a lane for the critical path).
    pub fn track(&mut self, parent: u64, name: &str) -> io::Result<u64> {
        let uuid = self.uuid();
        self.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// A counter track under `parent`.
    pub fn counter_track(&mut self, parent: u64, name: &str) -> io::Result<u64> {
        let uuid = self.uuid();
        self.packet(TracePacket {
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(uuid),
                parent_uuid: Some(parent),
                name: Some(name.into()),
                counter: Some(CounterDescriptor { unit: Some(2) }),
                ..Default::default()
            }),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// A slice `[start, end]` on `track`. `flows_out` start flows here (a
    /// message sent), `flows_in` end flows here (a message received).
    ///
    /// Its end is written right after its beginning. Readers order a
    /// track's events by time, ties in the order written, and an end closes
    /// the innermost open slice: slices that touch or nest on one track
    /// must go through [`Writer::begin`] and [`Writer::end`] in nesting
    /// order instead.
    #[allow(clippy::too_many_arguments)]
    pub fn slice(
        &mut self,
        track: u64,
        start: u64,
        end: u64,
        name: &str,
        category: &str,
        flows_out: &[u64],
        flows_in: &[u64],
        args: &[(&str, Arg)],
    ) -> io::Result<()> {
        self.begin(track, start, name, category, flows_out, flows_in, args)?;
        self.end(track, end.max(start))
    }

    /// The beginning of a slice on `track` (it ends at the next
    /// [`Writer::end`] on the track that is not taken by a slice begun
    /// after it).
    #[allow(clippy::too_many_arguments)]
    pub fn begin(
        &mut self,
        track: u64,
        start: u64,
        name: &str,
        category: &str,
        flows_out: &[u64],
        flows_in: &[u64],
        args: &[(&str, Arg)],
    ) -> io::Result<()> {
        let debug_annotations = args
            .iter()
            .map(|(k, v)| DebugAnnotation {
                name_iid: Some(self.arg_iid(k)),
                uint_value: match v {
                    Arg::U(u) => Some(*u),
                    Arg::S(_) => None,
                },
                string_value: match v {
                    Arg::S(s) => Some(s.clone()),
                    Arg::U(_) => None,
                },
                ..Default::default()
            })
            .collect();
        let (name_iid, cat_iid) = (self.name_iid(name), self.cat_iid(category));
        self.packet(TracePacket {
            timestamp: Some(start),
            track_event: Some(TrackEvent {
                r#type: Some(SLICE_BEGIN),
                track_uuid: Some(track),
                name_iid: Some(name_iid),
                category_iids: vec![cat_iid],
                flow_ids: flows_out.to_vec(),
                terminating_flow_ids: flows_in.to_vec(),
                debug_annotations,
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// Ends the innermost slice open on `track` at `ts`.
    pub fn end(&mut self, track: u64, ts: u64) -> io::Result<()> {
        self.packet(TracePacket {
            timestamp: Some(ts),
            track_event: Some(TrackEvent { r#type: Some(SLICE_END), track_uuid: Some(track), ..Default::default() }),
            ..Default::default()
        })
    }

    /// A zero-length event (e.g. a message sent or received outside any
    /// slice) that can carry flow ends.
    pub fn instant(
        &mut self,
        track: u64,
        ts: u64,
        name: &str,
        category: &str,
        flows_out: &[u64],
        flows_in: &[u64],
    ) -> io::Result<()> {
        let (name_iid, cat_iid) = (self.name_iid(name), self.cat_iid(category));
        self.packet(TracePacket {
            timestamp: Some(ts),
            track_event: Some(TrackEvent {
                r#type: Some(INSTANT),
                track_uuid: Some(track),
                name_iid: Some(name_iid),
                category_iids: vec![cat_iid],
                flow_ids: flows_out.to_vec(),
                terminating_flow_ids: flows_in.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    pub fn counter(&mut self, track: u64, ts: u64, value: i64) -> io::Result<()> {
        self.packet(TracePacket {
            timestamp: Some(ts),
            track_event: Some(TrackEvent {
                r#type: Some(COUNTER),
                track_uuid: Some(track),
                counter_value: Some(value),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
