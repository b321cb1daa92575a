//! LEB128 varints and a bounds-checked reader for payloads.

use crate::DecodeError;

#[inline]
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0u8; 10];
    let mut n = 0;
    put_u64_at(&mut buf, &mut n, v);
    out.extend_from_slice(&buf[..n]);
}

/// [`put_u64`] into `buf` at `*at` (advanced past it), which must have room
/// for 10 bytes there: no capacity check per byte.
#[inline(always)]
pub fn put_u64_at(buf: &mut [u8], at: &mut usize, mut v: u64) {
    while v >= 0x80 {
        buf[*at] = (v as u8) | 0x80;
        *at += 1;
        v >>= 7;
    }
    buf[*at] = v as u8;
    *at += 1;
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A varint of at most 8 bytes at `at` in `w` (which must leave 8 bytes
/// readable there: the caller bounds `at`); `(value, length)`, or `None`
/// for a longer varint.
#[inline(always)]
pub fn short_at<const N: usize>(w: &[u8; N], at: usize) -> Option<(u64, usize)> {
    let word: [u8; 8] = w[at..at + 8].try_into().ok()?;
    short_word(u64::from_le_bytes(word))
}

/// The varint at the start of the little-endian word `w`, if it ends within
/// its 8 bytes: `(value, length)`.
#[inline(always)]
fn short_word(w: u64) -> Option<(u64, usize)> {
    if w & 0x80 == 0 {
        return Some((w & 0x7f, 1));
    }
    // Two and three bytes (message sizes, sequence numbers, most time
    // deltas) directly; the general compaction costs about three times as
    // many instructions.
    if w & 0x8000 == 0 {
        return Some(((w & 0x7f) | ((w >> 1) & 0x3f80), 2));
    }
    if w & 0x80_0000 == 0 {
        return Some(((w & 0x7f) | ((w >> 1) & 0x3f80) | ((w >> 2) & 0x1f_c000), 3));
    }
    let stops = !w & 0x8080_8080_8080_8080;
    if stops == 0 {
        return None;
    }
    let bits = stops.trailing_zeros() + 1; // through the last byte's stop bit
    let len = (bits / 8) as usize;
    let mut x = if bits >= 64 { w } else { w & ((1u64 << bits) - 1) };
    x &= 0x7f7f_7f7f_7f7f_7f7f;
    // Compact the 7-bit groups: 8 → 16 → 32 → 64-bit lanes.
    x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
    x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
    x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
    Some((x, len))
}

pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A read failure inside a payload: small and `Copy`, so the hot loops carry
/// no drop glue; converted to a [`DecodeError`] once, where it leaves the
/// frame decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadError {
    Truncated { what: &'static str },
    Bad { what: &'static str, why: &'static str },
}

impl From<ReadError> for DecodeError {
    #[cold]
    fn from(e: ReadError) -> DecodeError {
        match e {
            ReadError::Truncated { what } => DecodeError::PayloadTruncated { what },
            ReadError::Bad { what, why } => DecodeError::BadPayload { what, why },
        }
    }
}

/// Reads from a payload; every read names what it was reading when it fails.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    #[inline]
    pub fn u8(&mut self, what: &'static str) -> Result<u8, ReadError> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(ReadError::Truncated { what }),
        }
    }

    #[inline]
    pub fn u64(&mut self, what: &'static str) -> Result<u64, ReadError> {
        // One-byte values are the common case.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        self.u64_slow(what)
    }

    fn u64_slow(&mut self, what: &'static str) -> Result<u64, ReadError> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else { return Err(ReadError::Truncated { what }) };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(ReadError::Bad { what, why: "varint overflows 64 bits" });
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(ReadError::Bad { what, why: "varint longer than 10 bytes" });
            }
        }
    }

    /// The next `N` bytes, if that many remain (for decoders that parse a
    /// whole record from a fixed-size window without a check per field).
    #[inline(always)]
    pub fn window<const N: usize>(&self) -> Option<&'a [u8; N]> {
        self.buf.get(self.pos..self.pos + N)?.try_into().ok()
    }

    /// Moves forward `n` bytes (a record parsed from [`Reader::window`]).
    #[inline(always)]
    pub fn skip(&mut self, n: usize) {
        self.pos += n;
    }

    /// Position (for the callers that retry a record on the checked path).
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn set_pos(&mut self, pos: usize) {
        self.pos = pos;
    }

    #[inline]
    pub fn u32(&mut self, what: &'static str) -> Result<u32, ReadError> {
        let v = self.u64(what)?;
        u32::try_from(v).map_err(|_| ReadError::Bad { what, why: "value exceeds 32 bits" })
    }

    pub fn fixed_u64(&mut self, what: &'static str) -> Result<u64, ReadError> {
        let s = self.bytes_exact(8, what)?;
        Ok(u64::from_le_bytes(s.try_into().unwrap()))
    }

    pub fn bytes_exact(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ReadError> {
        if self.buf.len() - self.pos < n {
            return Err(ReadError::Truncated { what });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A length-prefixed byte string of at most `max` bytes.
    pub fn bytes(&mut self, max: usize, what: &'static str) -> Result<&'a [u8], ReadError> {
        let n = self.u64(what)?;
        if n > max as u64 {
            return Err(ReadError::Bad { what, why: "length over its limit" });
        }
        self.bytes_exact(n as usize, what)
    }

    pub fn string(&mut self, max: usize, what: &'static str) -> Result<String, ReadError> {
        let b = self.bytes(max, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| ReadError::Bad { what, why: "not UTF-8" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<u64>(), s in any::<i64>()) {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            put_u64(&mut out, zigzag(s));
            let mut r = Reader::new(&out);
            prop_assert_eq!(r.u64("v").unwrap(), v);
            prop_assert_eq!(unzigzag(r.u64("s").unwrap()), s);
            prop_assert!(r.is_empty());
        }
    }

    /// Values of every varint length (1..=10 bytes), not just the long ones
    /// `any::<u64>()` gives almost always.
    fn any_length() -> impl Strategy<Value = u64> {
        (any::<u64>(), 0u32..64).prop_map(|(v, shift)| v >> shift)
    }

    proptest! {
        #[test]
        fn window_path_agrees_with_checked(v in any_length(), at in 0usize..9, fill in any::<u8>()) {
            let mut w = [fill; 24];
            let mut enc = Vec::new();
            put_u64(&mut enc, v);
            let n = enc.len().min(24 - at);
            w[at..at + n].copy_from_slice(&enc[..n]);
            match short_at(&w, at) {
                Some((x, len)) => {
                    prop_assert_eq!(x, v);
                    prop_assert_eq!(len, enc.len());
                }
                None => prop_assert!(enc.len() > 8),
            }
        }
    }

    #[test]
    fn overlong_varint_is_an_error() {
        let bytes = [0xffu8; 11];
        assert!(Reader::new(&bytes).u64("x").is_err());
        let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader::new(&bytes).u64("x").is_err());
    }
}
