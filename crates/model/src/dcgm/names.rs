//! Every name a counters file may give, as dcgm-exporter looks it up:
//! go-dcgm's field table, its legacy 1.x names, deprecated aliases and
//! the exporter's own fields (`dcgm-fields.txt`, which says where each
//! came from). A name outside it is no DCGM field at all.
//!
//! The binary keeps a 32-bit hash of each name, worked out at compile
//! time, not the 31 KB of text: the build without default features has a
//! few KB left under its ceiling. The unit test holds that no two names
//! of the table, nor any name we serve, share a hash.

const TABLE: &[u8] = include_bytes!("../dcgm-fields.txt");

/// FNV-1a of `bytes[start..end]`.
const fn fnv(bytes: &[u8], start: usize, end: usize) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let mut i = start;
    while i < end {
        h ^= bytes[i] as u32;
        h = h.wrapping_mul(0x0100_0193);
        i += 1;
    }
    h
}

/// A name's hash, as the table's are kept.
pub const fn hash(name: &str) -> u32 {
    fnv(name.as_bytes(), 0, name.len())
}

/// Where the line starting at `i` ends.
const fn line_end(i: usize) -> usize {
    let mut j = i;
    while j < TABLE.len() && TABLE[j] != b'\n' {
        j += 1;
    }
    j
}

/// The spans of a row's space-separated columns (kind, name, id, current
/// name); a column the row lacks is empty.
const fn columns(start: usize, end: usize) -> [(usize, usize); 4] {
    let mut out = [(0, 0); 4];
    let (mut c, mut from, mut i) = (0, start, start);
    while i <= end && c < 4 {
        if i == end || TABLE[i] == b' ' {
            out[c] = (from, i);
            c += 1;
            from = i + 1;
        }
        i += 1;
    }
    out
}

/// How many rows the table has: with a current-name column (`aliases`),
/// or all.
const fn count(aliases: bool) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < TABLE.len() {
        let end = line_end(i);
        if end > i && TABLE[i] != b'#' {
            let c = columns(i, end);
            if !aliases || c[3].1 > c[3].0 {
                n += 1;
            }
        }
        i = end + 1;
    }
    n
}

const NAMES: usize = count(false);
const ALIASES: usize = count(true);

/// Every name's hash, in the table's order.
static HASHES: [u32; NAMES] = {
    let mut out = [0; NAMES];
    let (mut n, mut i) = (0, 0);
    while i < TABLE.len() {
        let end = line_end(i);
        if end > i && TABLE[i] != b'#' {
            let c = columns(i, end);
            out[n] = fnv(TABLE, c[1].0, c[1].1);
            n += 1;
        }
        i = end + 1;
    }
    out
};

/// Each legacy or deprecated name's hash, with its current name's.
static CURRENT: [(u32, u32); ALIASES] = {
    let mut out = [(0, 0); ALIASES];
    let (mut n, mut i) = (0, 0);
    while i < TABLE.len() {
        let end = line_end(i);
        let c = columns(i, end);
        if end > i && TABLE[i] != b'#' && c[3].1 > c[3].0 {
            out[n] = (fnv(TABLE, c[1].0, c[1].1), fnv(TABLE, c[3].0, c[3].1));
            n += 1;
        }
        i = end + 1;
    }
    out
};

/// The hash of the current name of `name`'s field (its own, but for a
/// legacy or deprecated name), `None` where no DCGM field is so named.
pub fn current(name: &str) -> Option<u32> {
    let h = hash(name);
    if !HASHES.contains(&h) {
        return None;
    }
    Some(CURRENT.iter().find(|a| a.0 == h).map_or(h, |a| a.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's rows as text: kind, name, id.
    fn rows() -> Vec<(String, String, u16)> {
        std::str::from_utf8(TABLE)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let c: Vec<&str> = l.split(' ').collect();
                (c[0].to_string(), c[1].to_string(), c[2].parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn the_table_names_each_field_once_and_resolves_old_names() {
        let all = rows();
        // go-dcgm's 624 current names, 41 legacy, 1 alias, 4 of the exporter's.
        let count = |k: &str| all.iter().filter(|r| r.0 == k).count();
        assert_eq!(
            ["field", "legacy", "deprecated", "exporter"].map(count),
            [624, 41, 1, 4]
        );
        assert_eq!((NAMES, ALIASES), (all.len(), 42));
        // No two names, nor a served one and another, share a hash.
        let mut hashes: Vec<u32> = all.iter().map(|r| hash(&r.1)).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), all.len(), "two names share a hash");
        let faces = super::super::faces().map(|(_, f)| f.field);
        for name in super::super::FIELDS.iter().map(|f| f.0).chain(faces) {
            assert_eq!(current(name), Some(hash(name)), "{name}");
        }
        // An alias's current name is the first current name of its id.
        for (_, name, id) in all
            .iter()
            .filter(|r| r.0 == "legacy" || r.0 == "deprecated")
        {
            let first = all.iter().find(|r| r.0 == "field" && r.2 == *id).unwrap();
            assert_eq!(current(name), Some(hash(&first.1)), "{name}");
        }
        for (name, want) in [
            ("dcgm_gpu_temp", Some("DCGM_FI_DEV_GPU_TEMP")),
            (
                "dcgm_fi_prof_pcie_tx_bytes",
                Some("DCGM_FI_PROF_PCIE_TX_BYTES"),
            ),
            (
                "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
                Some("DCGM_FI_DEV_CLOCKS_EVENT_REASONS"),
            ),
            ("DCGM_FI_DEV_FAN_SPEED", Some("DCGM_FI_DEV_FAN_SPEED")),
            ("DCGM_EXP_P2P_STATUS", Some("DCGM_EXP_P2P_STATUS")),
            ("DCGM_FI_NOPE", None),
            ("dcgm_fi_dev_gpu_temp", None),
            ("", None),
        ] {
            assert_eq!(current(name), want.map(hash), "{name}");
        }
    }
}
