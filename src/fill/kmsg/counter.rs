//! Xid counts per GPU and code, from kernel log lines, each counted once.

use super::line::{Stamp, Xid, normalize_bus_id, parse_xid, split_line};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

/// Counts Xid per (bus id, code) from kernel log lines.
///
/// Repeats: a `/dev/kmsg` record is counted when its sequence number is
/// above every one seen before. Sequence numbers grow by one per record for
/// the whole boot, and reading `/dev/kmsg` afresh replays the ring buffer
/// from its oldest record, so a number at or below the highest seen is a
/// replay; identical messages with different numbers are different errors.
/// Plain text has no numbers: [`XidCounter::feed_text`] remembers how far
/// it has read each source instead.
#[derive(Clone, Debug, Default)]
pub struct XidCounter {
    counts: BTreeMap<(String, u32), u64>,
    last: BTreeMap<String, f64>,
    last_seq: Option<u64>,
    boot_time: Option<f64>,
    /// Per text source: bytes consumed, and a hash of them to notice the
    /// file was replaced or rotated.
    consumed: HashMap<String, (usize, u64)>,
}

impl XidCounter {
    pub fn new() -> XidCounter {
        XidCounter::default()
    }

    /// Unix time of boot (see [`boot_time`]). With it, a `/dev/kmsg`
    /// record's monotonic stamp becomes Unix time: boot + stamp. The kernel
    /// clock stops during suspend, so after a suspend this is early by the
    /// time suspended; servers do not suspend. Monotonic `[ 1234.5]` stamps
    /// of dmesg text are not converted: a saved file may come from an
    /// earlier boot.
    pub fn set_boot_time(&mut self, unix: f64) {
        self.boot_time = Some(unix).filter(|t| t.is_finite());
    }

    /// Feeds one line or `/dev/kmsg` record; the Xid it counted, if any.
    pub fn feed_line(&mut self, line: &str) -> Option<Xid> {
        let line = split_line(line);
        let mut time = match line.stamp {
            Some(Stamp::Unix(t)) => Some(t),
            _ => None,
        };
        if let Some(seq) = line.seq {
            if self.last_seq.is_some_and(|last| seq <= last) {
                return None;
            }
            self.last_seq = Some(seq);
            if let (Some(Stamp::Monotonic(m)), Some(boot)) = (line.stamp, self.boot_time) {
                time = Some(boot + m);
            }
        }
        let xid = parse_xid(line.message)?;
        *self
            .counts
            .entry((xid.bus_id.clone(), xid.code))
            .or_default() += 1;
        if let Some(t) = time {
            let last = self.last.entry(xid.bus_id.clone()).or_insert(t);
            *last = last.max(t);
        }
        Some(xid)
    }

    /// Feeds the whole current text of a file (`source` names it), counting
    /// only lines not consumed by an earlier call for the same source: it
    /// remembers the byte offset consumed and a hash of those bytes. When
    /// the text no longer starts with them (the file was rotated or
    /// rewritten) it reads from the start again. A last line without its
    /// newline is left for the next call, as it may still be being written.
    /// Returns the Xid counted.
    pub fn feed_text(&mut self, source: &str, text: &str) -> u64 {
        let start = match self.consumed.get(source) {
            Some(&(offset, hash)) if text.get(..offset).map(hash_of) == Some(hash) => offset,
            _ => 0,
        };
        let rest = text.get(start..).unwrap_or_default();
        let end = start + rest.rfind('\n').map_or(0, |i| i + 1);
        let mut counted = 0;
        for line in text.get(start..end).unwrap_or_default().lines() {
            counted += u64::from(self.feed_line(line).is_some());
        }
        let hash = hash_of(text.get(..end).unwrap_or_default());
        self.consumed.insert(source.to_string(), (end, hash));
        counted
    }

    /// Xid counts of a GPU, sorted by code. `bus_id` in any form
    /// [`normalize_bus_id`] takes.
    pub fn counts(&self, bus_id: &str) -> Vec<(u32, u64)> {
        let Some(bus) = normalize_bus_id(bus_id) else {
            return Vec::new();
        };
        self.counts
            .iter()
            .filter(|((b, _), _)| *b == bus)
            .map(|(&(_, code), &n)| (code, n))
            .collect()
    }

    /// Unix time of the GPU's latest Xid, where a stamp gave one.
    pub fn last_timestamp(&self, bus_id: &str) -> Option<f64> {
        self.last.get(&normalize_bus_id(bus_id)?).copied()
    }

    /// Bytes of `source` that [`XidCounter::feed_text`] has consumed.
    pub fn consumed(&self, source: &str) -> usize {
        self.consumed.get(source).map_or(0, |&(offset, _)| offset)
    }

    /// Bus ids that had an Xid, normalised, sorted.
    #[cfg(feature = "internals")]
    pub fn bus_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.counts.keys().map(|(b, _)| b.as_str()).collect();
        ids.dedup();
        ids
    }

    /// All Xid counted, every GPU and code.
    #[cfg(feature = "internals")]
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

fn hash_of(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::base::fixture;
    use crate::snapshot::xid_errors;

    pub(crate) const DMESG_T: &str = fixture!("kmsg", "xid_dmesg-T_xid119-gsp-timeout_gpud.log");
    pub(crate) const DECODE_ISO: &str =
        fixture!("kmsg", "xid_dmesg-decode-iso_xid13-43_gpud_excerpt.log");
    pub(crate) const NO_XID: &str = fixture!(
        "kmsg",
        "xid_dmesg-monotonic_fallen-off-bus-multiline-no-xid_NVSentinel-155.log"
    );
    pub(crate) const XID79_SXID: &str = fixture!(
        "kmsg",
        "xid_dmesg-monotonic_xid79-sxid20034_gpud-readme.log"
    );

    fn fed(text: &str) -> XidCounter {
        let mut c = XidCounter::new();
        c.feed_text("test", text);
        c
    }

    #[test]
    fn every_fixture_is_used() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kmsg");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 4);
    }

    #[test]
    fn dmesg_t_gsp_timeouts() {
        let c = fed(DMESG_T);
        assert_eq!(c.counts("0000:9b:00"), [(119, 5)]);
        assert_eq!(c.counts("00000000:9B:00.0"), [(119, 5)]);
        assert_eq!(c.total(), 5);
        assert_eq!(c.bus_ids(), ["00000000:9B:00.0"]);
        // [Sun Feb 23 16:30:13 2025], read as UTC.
        assert_eq!(c.last_timestamp("0000:9b:00"), Some(1_740_328_213.0));
    }

    #[test]
    fn decode_iso_sm_exceptions() {
        let c = fed(DECODE_ISO);
        assert_eq!(c.counts("00000000:38:00.0"), [(13, 24), (43, 2)]);
        assert_eq!(c.total(), 26);
        let last = c.last_timestamp("0000:38:00").unwrap();
        assert!((last - 1_737_427_440.566_421).abs() < 1e-5, "{last}");
    }

    #[test]
    fn fallen_off_the_bus_and_sxid() {
        // Xid 79 counts; the prose after it and the NVSwitch SXid do not.
        let c = fed(XID79_SXID);
        assert_eq!(c.counts("0000:91:00"), [(79, 1)]);
        assert_eq!(c.total(), 1);
        for switch in ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0"] {
            assert_eq!(c.counts(switch), [], "{switch}");
        }
        // Monotonic stamps of saved text give no Unix time.
        assert_eq!(c.last_timestamp("0000:91:00"), None);

        // Multi-line "fallen off the bus" with no Xid number: nothing.
        let c = fed(NO_XID);
        assert_eq!(c.total(), 0);
        assert_eq!(c.counts("0000:b3:00"), []);
        assert!(c.bus_ids().is_empty());
    }

    #[test]
    fn kmsg_sequence_numbers_dedupe() {
        let rec = |seq: u64| {
            format!(
                "3,{seq},{}000,-;NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
                seq
            )
        };
        let mut c = XidCounter::new();
        c.set_boot_time(1_700_000_000.0);
        assert!(c.feed_line(&rec(10)).is_some());
        // The same record again (a reopen replays the ring buffer): once.
        assert!(c.feed_line(&rec(10)).is_none());
        // Same message, new number: a second error.
        assert!(c.feed_line(&rec(11)).is_some());
        // Older than the newest seen: a replay.
        assert!(c.feed_line(&rec(5)).is_none());
        assert_eq!(c.counts("0000:9b:00"), [(79, 2)]);
        // Boot time + 11 ms.
        let last = c.last_timestamp("0000:9b:00").unwrap();
        assert!((last - 1_700_000_000.011).abs() < 1e-6, "{last}");

        // Plain lines have no numbers: identical lines both count.
        let mut c = XidCounter::new();
        let line = "[ 5.0] NVRM: Xid (PCI:0000:9b:00): 79, pid=1";
        c.feed_line(line);
        c.feed_line(line);
        assert_eq!(c.counts("0000:9b:00"), [(79, 2)]);
        // Without a boot time a kmsg stamp gives no Unix time.
        let mut c = XidCounter::new();
        c.feed_line(&rec(1));
        assert_eq!(c.last_timestamp("0000:9b:00"), None);
    }

    #[test]
    fn text_fed_again_counts_only_new_lines() {
        let mut c = XidCounter::new();
        assert_eq!(c.feed_text("dmesg.log", XID79_SXID), 1);
        assert_eq!(c.feed_text("dmesg.log", XID79_SXID), 0);
        // Appended lines count; a partial last line waits for its newline.
        let more = format!(
            "{XID79_SXID}[6781800.0] NVRM: Xid (PCI:0000:91:00): 48, pid=1\n[6781801.0] NVRM: Xid (PCI:0000:91:00): 48"
        );
        assert_eq!(c.feed_text("dmesg.log", &more), 1);
        assert_eq!(c.feed_text("dmesg.log", &format!("{more}, pid=2\n")), 1);
        assert_eq!(c.counts("0000:91:00"), [(48, 2), (79, 1)]);
        // Another source with the same text counts on its own.
        assert_eq!(c.feed_text("other.log", XID79_SXID), 1);
        // A rotated file (new content) is read from its start.
        assert_eq!(c.feed_text("dmesg.log", DMESG_T), 5);
        assert_eq!(c.feed_text("dmesg.log", ""), 0);
        assert_eq!(c.feed_text("dmesg.log", DMESG_T), 5);
        assert_eq!(c.counts("0000:91:00"), [(48, 2), (79, 2)]);
        assert_eq!(c.counts("0000:9b:00"), [(119, 10)]);
    }

    #[test]
    fn counts_sorted_by_code_and_critical_zeros() {
        let mut c = XidCounter::new();
        for code in [79, 13, 79, 48, 13, 13] {
            c.feed_line(&format!("NVRM: Xid (PCI:0000:9b:00): {code}, pid=1"));
        }
        c.feed_line("NVRM: Xid (PCI:0000:3b:00): 94, pid=1");
        assert_eq!(c.counts("0000:9b:00"), [(13, 3), (48, 1), (79, 2)]);
        assert_eq!(c.counts("0000:3b:00.0"), [(94, 1)]);
        assert_eq!(c.counts("not a bus"), []);
        assert_eq!(c.bus_ids(), ["00000000:3B:00.0", "00000000:9B:00.0"]);
        assert_eq!(
            xid_errors(c.counts("0000:9b:00")),
            [
                (13, 3),
                (48, 1),
                (62, 0),
                (63, 0),
                (64, 0),
                (74, 0),
                (79, 2),
                (92, 0),
                (94, 0),
                (95, 0),
                (119, 0),
                (120, 0)
            ]
        );
    }

    #[test]
    fn never_panics_on_cut_or_mangled_lines() {
        for text in [DMESG_T, DECODE_ISO, NO_XID, XID79_SXID] {
            let mut c = XidCounter::new();
            for line in text.lines() {
                for (i, _) in line.char_indices() {
                    c.feed_line(&line[..i]);
                    c.feed_line(&line[i..]);
                }
            }
            let mangled: String = text
                .chars()
                .enumerate()
                .map(|(i, ch)| match i % 13 {
                    0 => ':',
                    4 => ';',
                    9 => '\u{00e9}',
                    _ => ch,
                })
                .collect();
            c.feed_text("m", &mangled);
            let half: String = mangled.chars().take(mangled.chars().count() / 2).collect();
            c.feed_text("m", &half);
        }
        for odd in [
            "",
            ";",
            ",,,;",
            "[",
            "]",
            "[]",
            "0,0,0,;",
            "kern:warn:",
            "\u{0}",
            "T",
        ] {
            XidCounter::new().feed_line(odd);
        }
    }
}
