//! Xid counts per GPU and code, from kernel log lines, each counted once.

use super::line::{Stamp, Xid, normalize_bus_id, parse_xid, split_line};
use base::time::unix_now;
use base::tz::Zone;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};

/// Xid lines remembered to tell a reread line from a new one.
pub const RECENT: usize = 4096;

/// How a line reached the counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In a file as it was when the exporter started: from before start,
    /// never counted (its time still shows).
    Scan,
    /// Read after start: new, unless the counter is rereading (see
    /// [`XidCounter::reread`]). Also every `/dev/kmsg` record, which its
    /// sequence number and stamp judge.
    Follow,
}

/// The Xid lines seen lately (a hash of each, whole), and the latest stamp
/// of those forgotten: a line stamped at or before it is older than what
/// is remembered.
#[derive(Clone, Debug, Default)]
struct Recent {
    order: VecDeque<(u64, Option<Stamp>)>,
    high: [Option<f64>; 2],
    forgotten: [Option<f64>; 2],
}

fn kind(s: Stamp) -> (usize, f64) {
    match s {
        Stamp::Unix(t) | Stamp::Local(t) => (0, t),
        Stamp::Monotonic(m) => (1, m),
    }
}

fn raise(slot: &mut Option<f64>, v: f64) {
    *slot = Some(slot.map_or(v, |h| h.max(v)));
}

impl Recent {
    fn contains(&self, hash: u64) -> bool {
        self.order.iter().any(|&(h, _)| h == hash)
    }

    fn insert(&mut self, hash: u64, stamp: Option<Stamp>) {
        if self.contains(hash) {
            return;
        }
        self.order.push_back((hash, stamp));
        if let Some(s) = stamp {
            let (k, v) = kind(s);
            raise(&mut self.high[k], v);
        }
        if self.order.len() > RECENT
            && let Some((_, Some(s))) = self.order.pop_front()
        {
            let (k, v) = kind(s);
            raise(&mut self.forgotten[k], v);
        }
    }

    /// Whether a line read again was seen already. A wall-clock stamp
    /// forgotten in the future of `now` says the clock stepped back: lines
    /// logged since are older by their stamps and still new, so only their
    /// hash tells.
    fn seen(&self, hash: u64, stamp: Option<Stamp>, now: f64) -> bool {
        if self.contains(hash) {
            return true;
        }
        stamp.is_some_and(|s| {
            let (k, v) = kind(s);
            let trusted = |f: f64| k == 1 || f <= now;
            self.forgotten[k].is_some_and(|f| v <= f && trusted(f))
        })
    }

    /// Whether `stamp` is after every line remembered.
    fn past(&self, stamp: Stamp) -> bool {
        let (k, v) = kind(stamp);
        self.high[k].is_none_or(|h| v > h)
    }
}

fn hash_of(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

/// Counts Xid per (bus id, code) from kernel log lines.
///
/// **Only what happens after start counts.** Nothing is persisted, so an
/// exporter that restarts starts its counters at 0 (Prometheus reads a
/// reset, never an increase). A `/dev/kmsg` record counts when its
/// monotonic stamp is after the exporter's start ([`XidCounter::set_start`])
/// and its sequence number above every one seen (reopening replays the
/// ring buffer). A text line counts when it was appended after start: not
/// [`Mode::Scan`], and not stamped at or before start. After a rotation,
/// truncation or rewrite ([`XidCounter::reread`]) lines may come again:
/// until one stamped after every Xid line remembered arrives, a line counts
/// only if it is none of the last [`RECENT`] Xid lines (whole, stamp
/// included) nor older than them (where their wall-clock stamps are not
/// in the future: after the clock steps back, only the hash tells). Xids
/// from before start are tallied
/// ([`XidCounter::before_start`]) and set the GPU's last Xid time, but are
/// not counted.
#[derive(Clone, Debug, Default)]
pub struct XidCounter {
    counts: BTreeMap<(String, u32), u64>,
    last: BTreeMap<String, f64>,
    /// The code of each GPU's latest Xid line, in log order.
    last_code: BTreeMap<String, u32>,
    last_seq: Option<u64>,
    boot_time: Option<f64>,
    /// The zone `dmesg -T` stamps are read in.
    zone: Zone,
    /// Unix time and uptime (seconds since boot) of the exporter's start.
    start: Option<(f64, Option<f64>)>,
    recent: Recent,
    rereading: bool,
    /// Xid from before start, by GPU and code, and the latest of them.
    before: BTreeMap<(String, u32), u64>,
    latest_before: Option<(Xid, Option<f64>)>,
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
    ///
    /// [`boot_time`]: base::time::boot_time
    pub fn set_boot_time(&mut self, unix: f64) {
        self.boot_time = Some(unix).filter(|t| t.is_finite());
    }

    /// The host's time zone, which `dmesg -T` stamps are in (UTC until
    /// set).
    pub fn set_zone(&mut self, zone: Zone) {
        self.zone = zone;
    }

    /// The exporter's start, as Unix time and seconds since boot: records
    /// and lines stamped at or before it are not counted. Without it every
    /// record counts.
    pub fn set_start(&mut self, unix: f64, uptime: Option<f64>) {
        self.start = Some((unix, uptime));
    }

    /// What comes next may have been read before (the file was rotated,
    /// truncated or rewritten): see [`XidCounter`].
    pub fn reread(&mut self) {
        self.rereading = true;
    }

    /// Feeds one line or `/dev/kmsg` record as [`Mode::Follow`]; the Xid
    /// it counted, if any.
    pub fn feed_line(&mut self, line: &str) -> Option<Xid> {
        self.feed(line, Mode::Follow)
    }

    /// Feeds one line or record that reached us as `mode` says; the Xid it
    /// counted, if any.
    pub fn feed(&mut self, text: &str, mode: Mode) -> Option<Xid> {
        // Most lines are not Xid: skip them before taking them apart. Only
        // Xid records need their sequence number remembered.
        if !text.contains("NVRM: Xid (") {
            return None;
        }
        let line = split_line(text);
        let record = line.seq.is_some();
        if let Some(seq) = line.seq {
            if self.last_seq.is_some_and(|last| seq <= last) {
                return None;
            }
            self.last_seq = Some(seq);
        }
        let xid = parse_xid(line.message)?;
        let stamp = match line.stamp {
            Some(Stamp::Local(l)) => Some(Stamp::Unix(self.zone.to_unix(l))),
            s => s,
        };
        let time = match stamp {
            Some(Stamp::Unix(t)) => Some(t),
            Some(Stamp::Monotonic(m)) if record => self.boot_time.map(|b| b + m),
            _ => None,
        };
        if let Some(t) = time {
            let last = self.last.entry(xid.bus_id.clone()).or_insert(t);
            *last = last.max(t);
        }
        let before_start = mode == Mode::Scan || self.stamped_before_start(stamp);
        let again = if record {
            false
        } else {
            let hash = hash_of(text.trim_end_matches(['\n', '\r']));
            let seen = self.recent.seen(hash, stamp, unix_now());
            if self.rereading && stamp.is_some_and(|s| self.recent.past(s)) {
                self.rereading = false;
            }
            let again = self.rereading && seen;
            self.recent.insert(hash, stamp);
            again
        };
        if again {
            return None;
        }
        self.last_code.insert(xid.bus_id.clone(), xid.code);
        if before_start {
            *self
                .before
                .entry((xid.bus_id.clone(), xid.code))
                .or_default() += 1;
            self.latest_before = Some((xid, time));
            return None;
        }
        *self
            .counts
            .entry((xid.bus_id.clone(), xid.code))
            .or_default() += 1;
        Some(xid)
    }

    /// Whether a stamp says the line was logged before the exporter started.
    fn stamped_before_start(&self, stamp: Option<Stamp>) -> bool {
        match (self.start, stamp) {
            (Some((unix, _)), Some(Stamp::Unix(t))) => t <= unix,
            (Some((_, Some(up))), Some(Stamp::Monotonic(m))) => m <= up,
            _ => false,
        }
    }

    /// Feeds the whole text `text` as [`Mode::Follow`] lines, a last line
    /// without its newline included; the Xid counted. For tests and fuzz
    /// targets: the reader follows files itself.
    pub fn feed_text(&mut self, text: &str) -> u64 {
        text.lines()
            .map(|l| u64::from(self.feed_line(l).is_some()))
            .sum()
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

    /// Unix time of the GPU's latest Xid, where a stamp gave one; Xids
    /// from before start included.
    pub fn last_timestamp(&self, bus_id: &str) -> Option<f64> {
        self.last.get(&normalize_bus_id(bus_id)?).copied()
    }

    /// The code of the GPU's latest Xid line, Xids from before start
    /// included, as [`XidCounter::last_timestamp`]; a line read again
    /// after a rotation does not count as later.
    pub fn last_code(&self, bus_id: &str) -> Option<u32> {
        self.last_code.get(&normalize_bus_id(bus_id)?).copied()
    }

    /// How many Xid from before start were seen, and the latest of them
    /// with its Unix time where known.
    pub fn before_start(&self) -> (u64, Option<&(Xid, Option<f64>)>) {
        (self.before.values().sum(), self.latest_before.as_ref())
    }

    /// Bus ids that had an Xid, normalised, sorted.
    pub fn bus_ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.counts.keys().map(|(b, _)| b.as_str()).collect();
        ids.dedup();
        ids
    }

    /// All Xid counted, every GPU and code.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use base::fixture;
    use model::xid_errors;

    pub(crate) const DMESG_T: &str = fixture!("kmsg", "xid_dmesg-T_xid119-gsp-timeout_gpud.log");
    const TOKYO: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/tz/Asia-Tokyo"
    ));
    const GMT5: &[u8] = include_bytes!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/tz/Etc-GMT+5"
    ));
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
        c.feed_text(text);
        c
    }

    pub(crate) const SYSLOG: &str = fixture!(
        "kmsg",
        "xid_syslog-kernlog_xid79-pid-unknown_fallen-off-bus_pop-os-3363.log"
    );
    const BURST: &str = fixture!(
        "kmsg",
        "xid_dmesg-monotonic_xid31-mmu-pid-name_xid62_xid45-burst_chia-gigahorse-301_excerpt.log"
    );
    const JOURNAL: &str = fixture!(
        "kmsg",
        "xid_journal-k_xid45-caused-by-previous-xid145-149_ogkm-1150_excerpt.log"
    );
    const NO_STAMP: &str = fixture!("kmsg", "xid_no-timestamp_xid31-mmu-fault-pte_ogkm-363.log");
    const CTIME: &str = fixture!(
        "kmsg",
        "xid_dmesg-ctime_xid13-pid-unknown_xid109-pid-name_gpud-pr46.log"
    );
    const NVLINK: &str = fixture!(
        "kmsg",
        "xid_bare_nvlink-xid149-145-subcodes_gpud-pr1174.log"
    );
    const RMINIT: &str = fixture!(
        "kmsg",
        "rminit_journal_no-devices-found_ogkm-862_excerpt.log"
    );

    #[test]
    fn every_fixture_is_used() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/kmsg");
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 11);
    }

    #[test]
    fn every_kernel_log_form() {
        // kern.log: the kernel's stamp inside the syslog line; the pciehp
        // lines and the prose after Xid 79 are not Xid.
        let c = fed(SYSLOG);
        assert_eq!(c.counts("0000:01:00"), [(79, 1)]);
        assert_eq!(c.total(), 1);
        // Monotonic dmesg: an MMU fault, a 62, a burst of 45 (one per
        // channel, each an error), an unrelated line between.
        let c = fed(BURST);
        assert_eq!(c.counts("0000:0a:00"), [(31, 1), (45, 8), (62, 1)]);
        assert_eq!(c.last_code("0000:0a:00"), Some(45));
        // journalctl -k: the "caused by previous Xid" suffix is not a code.
        let c = fed(JOURNAL);
        assert_eq!(c.counts("0000:dc:00"), [(45, 2)]);
        assert_eq!(c.counts("0000:ed:00"), [(45, 2)]);
        assert_eq!(c.counts("0000:ba:00"), [(45, 2)]);
        assert_eq!(c.counts("0000:97:00"), [(45, 1)]);
        assert_eq!(c.total(), 7);
        // No stamps at all: counted, no time.
        let c = fed(NO_STAMP);
        assert_eq!(c.counts("0000:08:00"), [(31, 2)]);
        assert_eq!(c.last_timestamp("0000:08:00"), None);
        // dmesg --ctime: wall-clock stamps give the time.
        let c = fed(CTIME);
        assert_eq!(c.counts("0000:cb:00"), [(13, 3), (109, 1)]);
        assert_eq!(c.last_timestamp("0000:cb:00"), Some(1_725_018_194.0));
        // The last code is the latest line's: 109 after three 13s.
        assert_eq!(c.last_code("0000:cb:00"), Some(109));
        assert_eq!(c.last_code("0000:0a:00"), None);
        // NVLink Xids with other domains.
        let c = fed(NVLINK);
        assert_eq!(c.counts("0019:01:00"), [(149, 1)]);
        assert_eq!(c.counts("0018:01:00"), [(145, 1)]);
        assert_eq!(c.counts("0000:00:00"), [(149, 1)]);
        // RmInitAdapter failed: the GPU never came up; no Xid.
        assert_eq!(fed(RMINIT).total(), 0);
    }

    #[test]
    fn dmesg_t_gsp_timeouts() {
        let c = fed(DMESG_T);
        assert_eq!(c.counts("0000:9b:00"), [(119, 5)]);
        assert_eq!(c.counts("00000000:9B:00.0"), [(119, 5)]);
        assert_eq!(c.total(), 5);
        assert_eq!(c.bus_ids(), ["00000000:9B:00.0"]);
        // [Sun Feb 23 16:30:13 2025], in UTC until a zone is set.
        assert_eq!(c.last_timestamp("0000:9b:00"), Some(1_740_328_213.0));
        // Local time in Tokyo (UTC+9) and at UTC-5: 9 hours earlier, 5 later.
        for (zone, hours) in [(TOKYO, -9.0), (GMT5, 5.0)] {
            let mut c = XidCounter::new();
            c.set_zone(base::tz::parse_tzif(zone).unwrap());
            c.feed_text(DMESG_T);
            let expect = 1_740_328_213.0 + hours * 3600.0;
            assert_eq!(c.last_timestamp("0000:9b:00"), Some(expect));
        }
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
    fn only_xids_after_start_count() {
        let rec = |seq: u64, us: u64| {
            format!(
                "3,{seq},{us},-;NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus."
            )
        };
        let mut c = XidCounter::new();
        c.set_boot_time(1_700_000_000.0);
        // Started 100 s after boot.
        c.set_start(1_700_000_100.0, Some(100.0));
        assert!(c.feed_line(&rec(1, 50_000_000)).is_none());
        assert!(c.feed_line(&rec(2, 99_000_000)).is_none());
        assert!(c.feed_line(&rec(3, 101_000_000)).is_some());
        assert_eq!(c.counts("0000:9b:00"), [(79, 1)]);
        let (n, latest) = c.before_start();
        assert_eq!(n, 2);
        assert_eq!(latest.unwrap().1, Some(1_700_000_099.0));
        // The last time includes the counted one.
        assert_eq!(c.last_timestamp("0000:9b:00"), Some(1_700_000_101.0));

        // Text: what a file held at start never counts; appended lines do,
        // equal stamps and all.
        let line = |t: &str, code: u32| format!("[{t}] NVRM: Xid (PCI:0000:9b:00): {code}, pid=1");
        let mut c = XidCounter::new();
        c.set_start(1_700_000_100.0, Some(100.0));
        assert!(c.feed(&line("50.0", 48), Mode::Scan).is_none());
        assert!(c.feed(&line("150.0", 48), Mode::Scan).is_none());
        assert!(c.feed(&line("200.0", 79), Mode::Follow).is_some());
        assert!(c.feed(&line("200.0", 79), Mode::Follow).is_some());
        // Appended, but stamped before start.
        assert!(c.feed(&line("99.0", 79), Mode::Follow).is_none());
        // A rewrite (`dmesg > file`): what was seen comes again, uncounted,
        // until a line stamped after all of it.
        c.reread();
        for l in [line("50.0", 48), line("150.0", 48), line("200.0", 79)] {
            assert!(c.feed(&l, Mode::Follow).is_none(), "{l}");
        }
        assert!(c.feed(&line("200.5", 13), Mode::Follow).is_some());
        // Rereading is over: an equal line now is a new error.
        assert!(c.feed(&line("200.5", 13), Mode::Follow).is_some());
        // Unstamped lines: new unless rereading and seen.
        let bare = "NVRM: Xid (PCI:0000:9b:00): 31, pid=1";
        assert!(c.feed(bare, Mode::Follow).is_some());
        c.reread();
        assert!(c.feed(bare, Mode::Follow).is_none());
        assert!(c.feed(bare, Mode::Scan).is_none());
        assert_eq!(c.counts("0000:9b:00"), [(13, 2), (31, 1), (79, 2)]);
        assert_eq!(c.before_start().0, 3);
        // Wall-clock stamps: after start counts.
        let iso = "2030-01-01T00:00:00,000000+00:00 NVRM: Xid (PCI:0000:9b:00): 94, pid=1";
        assert!(c.feed(iso, Mode::Follow).is_some());
        let iso_old = "2020-01-01T00:00:00,000000+00:00 NVRM: Xid (PCI:0000:9b:00): 94, pid=1";
        assert!(c.feed(iso_old, Mode::Follow).is_none());
    }

    #[test]
    fn a_reread_past_what_is_remembered_is_still_old() {
        let line = |t: usize| format!("[{t}.0] NVRM: Xid (PCI:0000:9b:00): 45, pid=1, Ch {t:08x}");
        let mut c = XidCounter::new();
        c.set_start(1_700_000_000.0, Some(1.0));
        let n = RECENT + 100;
        for t in 2..n {
            c.feed(&line(t), Mode::Follow);
        }
        let total = c.total();
        // All of it again: the oldest are forgotten, but older than what
        // is remembered.
        c.reread();
        for t in 2..n {
            assert!(c.feed(&line(t), Mode::Follow).is_none(), "{t}");
        }
        assert_eq!(c.total(), total);
        assert!(c.feed(&line(n), Mode::Follow).is_some());
    }

    /// The clock stepped back after a day of Xid stamped in what is now
    /// the future: a rotation's new file, stamped now, is not taken for
    /// the forgotten past.
    #[test]
    fn after_a_clock_step_back_a_new_files_lines_count() {
        let now = unix_now();
        let line = |t: f64, code: u32| {
            format!(
                "{} NVRM: Xid (PCI:0000:9b:00): {code}, pid=1",
                base::time::rfc3339(t)
            )
        };
        let mut c = XidCounter::new();
        c.set_start(now - 86_400.0, None);
        for i in 0..RECENT + 10 {
            assert!(
                c.feed(&line(now + 3600.0 + i as f64, 13), Mode::Follow)
                    .is_some()
            );
        }
        c.reread();
        for i in 0..5 {
            assert!(
                c.feed(&line(now - 60.0 + i as f64, 79), Mode::Follow)
                    .is_some(),
                "{i}"
            );
        }
        assert_eq!(c.counts("0000:9b:00"), [(13, RECENT as u64 + 10), (79, 5)]);
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
        for text in [
            DMESG_T, DECODE_ISO, NO_XID, XID79_SXID, SYSLOG, BURST, JOURNAL, NO_STAMP, CTIME,
            NVLINK, RMINIT,
        ] {
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
            c.feed_text(&mangled);
            let half: String = mangled.chars().take(mangled.chars().count() / 2).collect();
            for mode in [Mode::Scan, Mode::Follow] {
                c.reread();
                for l in half.lines() {
                    c.feed(l, mode);
                }
            }
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
