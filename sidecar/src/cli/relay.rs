//! `sidecar relay`: this host's probe streams forwarded to a sidecar on
//! another host, with clock exchanges (the work is in
//! [`sidecar::io::relay`]).

use sidecar::io::relay::{self as io_relay, Upstream};
use sidecar::io::Listen;

use super::common::{parse_buffer_limit, parse_duration, stop_on_ctrl_c};

#[derive(clap::Args)]
pub struct Args {
    /// Where this host's probes connect: unix:PATH or tcp:[ADDR:]PORT.
    #[arg(long)]
    listen: Listen,
    /// The sidecar (or relay) to forward to: tcp:HOST:PORT or unix:PATH.
    #[arg(long)]
    to: Upstream,
    /// The reference sidecar's clock responder: udp:HOST:PORT. Without
    /// it streams are forwarded unsynchronized.
    #[arg(long, value_parser = io_relay::parse_udp)]
    clock: Option<std::net::SocketAddr>,
    /// This host's id as its probes write it (default: the machine-id
    /// hash; set it to the probes' PROBE_HOST_ID where that is used).
    #[arg(long, value_parser = ringlog::parse_host_id)]
    host_id: Option<u64>,
    /// Time between clock exchanges once started (the first 20 are
    /// 20 ms apart).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    clock_period: u64,
    /// Connections open at once; one more is closed as soon as it is
    /// accepted.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// A connection that has sent no Hello frame (what a probe sends first)
    /// by then is closed.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    hello_timeout: u64,
    /// Bytes of one frame held before it is whole and forwarded, at most:
    /// a connection past it is closed. 64MB, 512KB, 1GB ...
    #[arg(long, default_value = "64MB", value_parser = parse_buffer_limit)]
    max_buffered: u64,
}

/// Forwards until Ctrl-C: 0, 1 if a stream had errors, 2 if the relay
/// could not start.
pub fn relay(
    Args { listen, to, clock, host_id, clock_period, max_connections, hello_timeout, max_buffered }: Args,
) -> i32 {
    let stop = stop_on_ctrl_c("sidecar relay", None);
    let host_id = host_id.unwrap_or_else(|| ringlog::host_id(&ringlog::host_name()));
    sidecar::say!("sidecar relay: this host is {host_id:016x}");
    let cfg = io_relay::Config {
        listen,
        to,
        clock,
        host_id,
        fast: 20,
        period: std::time::Duration::from_nanos(clock_period),
        limits: sidecar::io::Limits {
            max_connections: max_connections as usize,
            hello_timeout: std::time::Duration::from_nanos(hello_timeout),
            max_buffered: max_buffered as usize,
            ..Default::default()
        },
    };
    match io_relay::run(cfg, stop) {
        Ok(st) => {
            sidecar::say!("sidecar relay: {st}");
            if st.errors.is_empty() {
                0
            } else {
                1
            }
        }
        Err(e) => {
            sidecar::say!("sidecar relay: error: {e}");
            2
        }
    }
}
