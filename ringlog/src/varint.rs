//! LEB128 varints and a bounds-checked reader for payloads.

use crate::DecodeError;

#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u64(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Reads from a payload; every read names what it was reading when it fails.
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

    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::PayloadTruncated { what })?;
        self.pos += 1;
        Ok(b)
    }

    #[inline]
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = *self.buf.get(self.pos).ok_or(DecodeError::PayloadTruncated { what })?;
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(DecodeError::BadPayload { what, why: "varint overflows 64 bits" });
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(DecodeError::BadPayload { what, why: "varint longer than 10 bytes" });
            }
        }
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let v = self.u64(what)?;
        u32::try_from(v).map_err(|_| DecodeError::BadPayload { what, why: "value exceeds 32 bits" })
    }

    pub fn fixed_u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let s = self.bytes_exact(8, what)?;
        Ok(u64::from_le_bytes(s.try_into().unwrap()))
    }

    pub fn bytes_exact(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return Err(DecodeError::PayloadTruncated { what });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// A length-prefixed byte string of at most `max` bytes.
    pub fn bytes(&mut self, max: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.u64(what)?;
        if n > max as u64 {
            return Err(DecodeError::BadPayload { what, why: "length over its limit" });
        }
        self.bytes_exact(n as usize, what)
    }

    pub fn string(&mut self, max: usize, what: &'static str) -> Result<String, DecodeError> {
        let b = self.bytes(max, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError::BadPayload { what, why: "not UTF-8" })
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

    #[test]
    fn overlong_varint_is_an_error() {
        let bytes = [0xffu8; 11];
        assert!(Reader::new(&bytes).u64("x").is_err());
        let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Reader::new(&bytes).u64("x").is_err());
    }
}
