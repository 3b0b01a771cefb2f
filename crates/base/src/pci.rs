//! PCI bus ids in one form, so that the kernel log's, nvidia-smi's and
//! NVML's spellings of one GPU compare equal.

/// A PCI address in NVML's form, `00000000:9B:00.0`: 8-digit domain, bus,
/// device, function, upper-case hex. Accepts the kernel's `0000:9b:00`
/// (4-digit domain, no function: an Xid names the GPU, function 0), an
/// optional `PCI:` prefix, and a missing domain (`9b:00.0`). Anything else
/// is `None`.
pub fn normalize_bus_id(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s.strip_prefix("PCI:").unwrap_or(s);
    let (rest, function) = match s.rsplit_once('.') {
        Some((rest, f)) => (rest, hex(f, 1)?),
        None => (s, 0),
    };
    let mut parts = rest.split(':');
    let (domain, bus, device) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(d), Some(b), Some(v), None) => (hex(d, 8)?, hex(b, 2)?, hex(v, 2)?),
        (Some(b), Some(v), None, None) => (0, hex(b, 2)?, hex(v, 2)?),
        _ => return None,
    };
    if device > 0x1f || function > 7 {
        return None;
    }
    Some(format!("{domain:08X}:{bus:02X}:{device:02X}.{function:X}"))
}

/// 1 to `max_digits` hex digits (`from_str_radix` alone would take a sign).
fn hex(s: &str, max_digits: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max_digits || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_normalise_alike() {
        let nvml = Some("00000000:9B:00.0".to_string());
        for s in [
            "0000:9b:00",
            "00000000:9B:00.0",
            "PCI:0000:9b:00",
            "0000:9B:00.0",
            "9b:00.0",
            "9b:00",
            " 0000:9b:00 ",
        ] {
            assert_eq!(normalize_bus_id(s), nvml, "{s}");
        }
        assert_eq!(
            normalize_bus_id("0001:03:1f.7").as_deref(),
            Some("00000001:03:1F.7")
        );
        for bad in [
            "",
            "9b",
            "0000:9b:00:00",
            "000000000:9b:00.0",
            "0000:19b:00",
            "0000:9b:20",
            "0000:9b:00.8",
            "0000:9b:00.",
            "0000:+9:00",
            "0000:9b:00.0.0",
            "PCI:",
            "zz:00.0",
            "é:00.0",
        ] {
            assert_eq!(normalize_bus_id(bad), None, "{bad}");
        }
    }
}
