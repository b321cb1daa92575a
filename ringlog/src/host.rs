//! Host ids: the `host` field of every frame header. The probe, the relay
//! and the sidecar compute them the same way, so a sidecar knows which
//! streams come from its own host (the reference timeline of clock sync).

/// FNV-1a 64 of `bytes`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// The id of a host from its `/etc/machine-id` contents (or, where there is
/// none, its host name): FNV-1a 64 of the trimmed text.
pub fn host_id_of(machine_id_or_name: &str) -> u64 {
    fnv1a(machine_id_or_name.trim().as_bytes())
}

/// This host's name (the kernel's, as gethostname(2) gives it), or
/// "unknown".
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// This host's id: [`host_id_of`] of `/etc/machine-id`, else of
/// `host_name`. (Overrides, e.g. the probe's `PROBE_HOST_ID`, are the
/// caller's business.)
pub fn host_id(host_name: &str) -> u64 {
    let src = std::fs::read_to_string("/etc/machine-id").unwrap_or_else(|_| host_name.to_string());
    host_id_of(&src)
}

/// Parses a host id as written on command lines and in reports: `0x…` or
/// 16 hex digits (as the sidecar prints them) are hex, else decimal.
pub fn parse_host_id(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let r = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16)
    } else if s.len() == 16 {
        u64::from_str_radix(s, 16)
    } else {
        s.parse::<u64>()
    };
    r.map_err(|_| format!("'{s}': not a host id (0xHEX, 16 hex digits, or decimal)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_hash() {
        assert_eq!(parse_host_id("0x10"), Ok(16));
        assert_eq!(parse_host_id("0000000000000010"), Ok(16));
        assert_eq!(parse_host_id("16"), Ok(16));
        assert!(parse_host_id("zz").is_err());
        // FNV-1a 64 test vector ("a") and trimming.
        assert_eq!(host_id_of("a\n"), 0xaf63_dc4c_8601_ec8c);
    }
}
