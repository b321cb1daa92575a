//! Untrusted datagrams through the clock-sync protocol's decoder (what a
//! responder or prober does with whatever arrives on its UDP port): it
//! never panics, and whatever it accepts re-encodes to the same bytes, so
//! no two datagrams decode alike and nothing is accepted that the encoder
//! could not have written.
#![no_main]

use clocksync::protocol::{Datagram, DATAGRAM_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(d) = Datagram::decode(data) {
        assert_eq!(&d.encode()[..], data, "{d:?} re-encodes differently");
    }
    // The other way: fields taken from the input encode to a datagram
    // that decodes to them exactly when their kind is one of the protocol's.
    if data.len() >= 25 {
        let word = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().unwrap());
        let d = Datagram { kind: data[0], session: word(1), seq: word(9), stamp: word(17) };
        let bytes = d.encode();
        assert_eq!(bytes.len(), DATAGRAM_LEN);
        let back = Datagram::decode(&bytes);
        assert_eq!(back.is_some(), (1..=4).contains(&d.kind), "{d:?}");
        if let Some(b) = back {
            assert_eq!(b, d);
        }
    }
});
