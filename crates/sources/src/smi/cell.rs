//! One cell of nvidia-smi's CSV: its spellings of "no value", numbers
//! with units, masks, flags and performance states.

/// True for the spellings nvidia-smi uses for "no value": `[N/A]`,
/// `[Not Supported]`, `[Unknown Error]`, ... (any bracketed text), a bare
/// `N/A`, and an empty cell.
pub fn is_missing(cell: &str) -> bool {
    let cell = cell.trim();
    cell.is_empty() || cell == "N/A" || (cell.starts_with('[') && cell.ends_with(']'))
}

/// A number with an optional unit (`250.00 W`, `250.00`). A unit other than
/// `unit`, a missing value or anything that is not a finite number is
/// `None`.
pub fn parse_number(cell: &str, unit: &str) -> Option<f64> {
    let cell = cell.trim();
    if is_missing(cell) {
        return None;
    }
    let number = match cell.split_once(' ') {
        Some((n, u)) if u.trim() == unit => n,
        Some(_) => return None,
        None => cell,
    };
    number.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A hex bit mask such as `0x0000000000000040`.
pub fn parse_mask(cell: &str) -> Option<u64> {
    let hex = cell.trim().strip_prefix("0x")?;
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// `Active`/`Not Active`, `Enabled`/`Disabled`, `Yes`/`No`, `On`/`Off`.
pub fn parse_flag(cell: &str) -> Option<bool> {
    match cell.trim() {
        "Active" | "Enabled" | "Yes" | "On" => Some(true),
        "Not Active" | "Disabled" | "No" | "Off" => Some(false),
        _ => None,
    }
}

/// A performance state `P0` (fastest) to `P15`.
pub fn parse_pstate(cell: &str) -> Option<u8> {
    let n = cell.trim().strip_prefix('P')?;
    if n.is_empty() || n.len() > 2 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse::<u8>().ok().filter(|&p| p <= 15)
}
