//! The connections between the sidecar processes of a timely cluster, made
//! before timely starts, so that a cluster starts as soon as its processes
//! are there.
//!
//! Timely's own setup (`timely_communication::networking::create_sockets`)
//! makes the same connections the same way: each process listens at its
//! address, connects to every process before it and sends it its index (8
//! bytes, big-endian), and accepts every process after it. But it sleeps a
//! whole second after each refused connection and after each look at its
//! listener that found nobody, so a cluster took 0.5–1.5 s to start on
//! loopback whatever its input (docs/performance.md, "The scale
//! benchmark"). Here a refused connection is tried again after 1 ms,
//! doubling to at most [`RETRY_MAX`], and the listener is looked at every
//! [`POLL`]. What the two sides send each other is timely's, so a process
//! set up here and one set up by timely understand each other.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// The longest wait between two tries to reach a process that does not
/// listen yet.
const RETRY_MAX: Duration = Duration::from_millis(100);

/// How often the listener is looked at while processes after this one are
/// still to connect.
const POLL: Duration = Duration::from_millis(2);

/// How long an accepted connection has to send its process index: a
/// connection that sends nothing (not a sidecar) is refused by name rather
/// than holding the cluster's start.
const INDEX_WITHIN: Duration = Duration::from_secs(10);

/// After how long without reaching a process this one says so (once) on
/// standard error: an address that nothing will ever listen at is tried
/// for as long as timely would, without end.
const TELL_AFTER: Duration = Duration::from_secs(5);

/// A connection to every other process of the cluster (`None` at `me`),
/// in process order: those before `me` connected to, those after it
/// accepted. `addresses` are the hostfile's lines, `me` this process's
/// index. An error names what failed.
pub fn connect(addresses: &[String], me: usize) -> io::Result<Vec<Option<TcpStream>>> {
    // (Listening first: the processes after this one can connect while it
    // reaches those before it.)
    let mine = addresses.get(me).ok_or_else(|| invalid(format!("no address for process {me}")))?;
    let listeners = mine
        .split_whitespace()
        .map(|a| TcpListener::bind(a).map_err(|e| io::Error::new(e.kind(), format!("listening at {a}: {e}"))))
        .collect::<io::Result<Vec<_>>>()?;
    for l in &listeners {
        l.set_nonblocking(true)?;
    }
    let mut out: Vec<Option<TcpStream>> = Vec::with_capacity(addresses.len());
    for (i, address) in addresses.iter().enumerate().take(me) {
        out.push(Some(reach(address, i, me)?));
    }
    out.push(None);
    out.extend(accept(&listeners, me, addresses.len())?);
    Ok(out)
}

/// A connection to process `i` at `address`, tried until it listens, with
/// this process's index sent on it.
fn reach(address: &str, i: usize, me: usize) -> io::Result<TcpStream> {
    let (start, mut wait, mut told) = (Instant::now(), Duration::from_millis(1), false);
    loop {
        match TcpStream::connect(address) {
            Ok(mut s) => {
                s.set_nodelay(true)?;
                s.write_all(&(me as u64).to_be_bytes())?;
                return Ok(s);
            }
            Err(e) => {
                if !told && start.elapsed() >= TELL_AFTER {
                    eprintln!("sidecar: process {me} cannot reach process {i} at {address} yet ({e}); trying on");
                    told = true;
                }
                sleep(wait);
                wait = (wait * 2).min(RETRY_MAX);
            }
        }
    }
}

/// The connections of processes `me + 1..n`, each placed by the index it
/// sends.
fn accept(listeners: &[TcpListener], me: usize, n: usize) -> io::Result<Vec<Option<TcpStream>>> {
    let mut later: Vec<Option<TcpStream>> = (me + 1..n).map(|_| None).collect();
    while later.iter().any(Option::is_none) {
        let mut got = false;
        for l in listeners {
            match l.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false)?;
                    s.set_nodelay(true)?;
                    s.set_read_timeout(Some(INDEX_WITHIN))?;
                    let mut index = [0u8; 8];
                    s.read_exact(&mut index).map_err(|e| {
                        invalid(format!(
                            "a connection to process {me} sent no process index within {INDEX_WITHIN:?}: {e}"
                        ))
                    })?;
                    s.set_read_timeout(None)?;
                    let id = u64::from_be_bytes(index);
                    let slot = usize::try_from(id).ok().filter(|&id| id > me && id < n).map(|id| id - me - 1);
                    match slot {
                        Some(k) if later[k].is_none() => later[k] = Some(s),
                        _ => return Err(invalid(format!("a connection to process {me} said it was process {id}"))),
                    }
                    got = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if !got {
            sleep(POLL);
        }
    }
    Ok(later)
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three processes started in any order connect to each other: each
    /// gets a connection to every other, and bytes written on one end come
    /// out at the other.
    #[test]
    fn three_processes_connect_whatever_their_order() {
        let ports: Vec<TcpListener> = (0..3).map(|_| TcpListener::bind("127.0.0.1:0").unwrap()).collect();
        let addresses: Vec<String> = ports.iter().map(|l| l.local_addr().unwrap().to_string()).collect();
        drop(ports);
        // (The last first, the first last: each reaches a listener not there yet.)
        let handles: Vec<_> = [2, 1, 0]
            .into_iter()
            .map(|me| {
                let a = addresses.clone();
                let h = std::thread::spawn(move || (me, connect(&a, me).unwrap()));
                sleep(Duration::from_millis(20));
                h
            })
            .collect();
        let mut all: Vec<(usize, Vec<Option<TcpStream>>)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        all.sort_by_key(|x| x.0);
        for (me, socks) in &all {
            assert_eq!(socks.len(), 3);
            assert!(socks[*me].is_none());
            assert!(socks.iter().enumerate().all(|(i, s)| (i == *me) != s.is_some()));
        }
        // Process 0 writes to each other process; each reads it from its socket to 0.
        for j in 1..3 {
            all[0].1[j].as_ref().unwrap().write_all(&[j as u8; 4]).unwrap();
        }
        for j in 1..3 {
            let mut b = [0u8; 4];
            all[j].1[0].as_ref().unwrap().read_exact(&mut b).unwrap();
            assert_eq!(b, [j as u8; 4]);
        }
    }

    /// A connection that names a process it cannot be is refused by name.
    #[test]
    fn a_peer_naming_an_impossible_index_is_refused() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap();
        let addresses = vec![port.local_addr().unwrap().to_string(), "127.0.0.1:1".to_string()];
        drop(port);
        let a = addresses.clone();
        let h = std::thread::spawn(move || connect(&a, 0));
        let mut s = loop {
            if let Ok(s) = TcpStream::connect(&addresses[0]) {
                break s;
            }
            sleep(Duration::from_millis(5));
        };
        s.write_all(&7u64.to_be_bytes()).unwrap();
        let err = h.join().unwrap().unwrap_err();
        assert!(err.to_string().contains("said it was process 7"), "{err}");
    }
}
