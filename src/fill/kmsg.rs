//! Xid errors from the kernel log: `/dev/kmsg` records or saved `dmesg`
//! text.
//!
//! The NVIDIA driver reports an Xid as
//! `NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, name=python, GPU has fallen off the bus.`
//! (older drivers: `NVRM: Xid (0000:03:00): 14, Channel 00000001`) and names
//! a GPU's UUID once as `NVRM: GPU at PCI:0000:9b:00: GPU-<uuid>`. NVSwitch
//! `SXid` lines and the driver's prose about a GPU that fell off the bus
//! are not Xid and are not counted.
//!
//! The parsing half ([`split_line`], [`parse_xid`], [`parse_gpu_at`],
//! [`normalize_bus_id`], [`XidCounter`]) is pure and never panics, so fuzz
//! targets can call it; [`KmsgReader`] does the I/O.

use super::Filler;
use crate::base::time::{boot_time, unix_from_civil};
use crate::snapshot::{Gpu, xid_errors};
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::hash::{Hash, Hasher};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

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

/// When a line was logged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stamp {
    /// Seconds since boot: `/dev/kmsg` records and `[ 1234.567890]`.
    Monotonic(f64),
    /// Unix seconds: `dmesg -T` (read as UTC) and `--time-format=iso`.
    Unix(f64),
}

/// One kernel log line taken apart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line<'a> {
    /// The `/dev/kmsg` sequence number, when the line is a kmsg record.
    pub seq: Option<u64>,
    pub stamp: Option<Stamp>,
    /// The text after the prefixes.
    pub message: &'a str,
}

/// Takes a `/dev/kmsg` record (`6,1234,5678901,-;message`, continuation
/// lines after the first dropped) or a `dmesg` line apart: `--decode`'s
/// `kern  :warn  : ` prefix, then a `[ 1234.567890]` or `-T`
/// `[Mon Jan  1 00:00:00 2024]` stamp or an ISO
/// `2024-01-01T00:00:00,123456+00:00` stamp. A line with none of these is
/// all message (a continuation line, a syslog line).
pub fn split_line(line: &str) -> Line<'_> {
    let line = line.split('\n').next().unwrap_or_default();
    let line = line.trim_end_matches('\r');
    if let Some((seq, us, message)) = kmsg_record(line) {
        return Line {
            seq: Some(seq),
            stamp: Some(Stamp::Monotonic(us as f64 / 1e6)),
            message,
        };
    }
    let rest = strip_decode(line);
    if let Some(inner_rest) = rest.strip_prefix('[')
        && let Some((inner, message)) = inner_rest.split_once(']')
        && let Some(stamp) = monotonic(inner).or_else(|| ctime(inner))
    {
        return Line {
            seq: None,
            stamp: Some(stamp),
            message: message.trim_start(),
        };
    }
    if let Some((first, message)) = rest.split_once(' ')
        && let Some(t) = iso(first)
    {
        return Line {
            seq: None,
            stamp: Some(Stamp::Unix(t)),
            message: message.trim_start(),
        };
    }
    Line {
        seq: None,
        stamp: None,
        message: rest.trim_start(),
    }
}

/// `priority,sequence,timestamp_us,flags[,more];message`.
fn kmsg_record(line: &str) -> Option<(u64, u64, &str)> {
    let (prefix, message) = line.split_once(';')?;
    let mut fields = prefix.split(',');
    let digits = |s: Option<&str>| {
        s.filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))?
            .parse::<u64>()
            .ok()
    };
    digits(fields.next())?;
    let seq = digits(fields.next())?;
    let us = digits(fields.next())?;
    fields.next()?; // flags: `-`, `c`, `+`
    Some((seq, us, message))
}

/// Drops `dmesg --decode`'s `facility:level: ` prefix.
fn strip_decode(line: &str) -> &str {
    const FACILITIES: &[&str] = &[
        "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
        "authpriv", "ftp", "local0", "local1", "local2", "local3", "local4", "local5", "local6",
        "local7",
    ];
    const LEVELS: &[&str] = &[
        "emerg", "alert", "crit", "err", "warn", "notice", "info", "debug",
    ];
    let decoded = line.split_once(':').and_then(|(facility, rest)| {
        let (level, rest) = rest.split_once(':')?;
        (FACILITIES.contains(&facility.trim()) && LEVELS.contains(&level.trim()))
            .then(|| rest.trim_start())
    });
    decoded.unwrap_or(line)
}

/// `    1234.567890`: seconds since boot.
fn monotonic(s: &str) -> Option<Stamp> {
    let s = s.trim();
    let (secs, frac) = s.split_once('.')?;
    let digits = |d: &str| !d.is_empty() && d.len() <= 12 && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(secs) || !digits(frac) {
        return None;
    }
    s.parse::<f64>().ok().map(Stamp::Monotonic)
}

/// `Mon Jan  1 00:00:00 2024` (`dmesg -T`), read as UTC: dmesg prints local
/// time without a zone, and servers mostly run in UTC.
fn ctime(s: &str) -> Option<Stamp> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut t = s.split_whitespace();
    let (_weekday, month, day, time, year) =
        (t.next()?, t.next()?, t.next()?, t.next()?, t.next()?);
    if t.next().is_some() {
        return None;
    }
    let month = MONTHS.iter().position(|m| *m == month)? as u32 + 1;
    let day = number(day, 2)?;
    let year = number(year, 4)?;
    let (h, m, sec) = clock(time)?;
    unix_from_civil((year, month, day), (h, m, sec), 0.0).map(Stamp::Unix)
}

/// `2024-01-01T00:00:00,123456+00:00` (also `.` before the fraction and a
/// `Z` zone).
fn iso(s: &str) -> Option<f64> {
    let (date, rest) = s.split_once('T')?;
    let mut d = date.split('-');
    let (year, month, day) = (d.next()?, d.next()?, d.next()?);
    if d.next().is_some() || year.len() != 4 {
        return None;
    }
    let (year, month, day) = (number(year, 4)?, number(month, 2)?, number(day, 2)?);
    let time = rest.get(..8)?;
    let (h, m, sec) = clock(time)?;
    let rest = rest.get(8..)?;
    // Fraction: `,123456` or `.123456`, then the zone.
    let frac_len = match rest.as_bytes().first() {
        Some(b',' | b'.') => 1 + rest.bytes().skip(1).take_while(u8::is_ascii_digit).count(),
        _ => 0,
    };
    let (frac, zone) = rest.split_at_checked(frac_len)?;
    let frac = match frac.get(1..) {
        Some(f) if !f.is_empty() => format!("0.{f}").parse::<f64>().ok()?,
        Some(_) => return None,
        None => 0.0,
    };
    let offset = match zone {
        "Z" => 0,
        _ => {
            let sign = match zone.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (zh, zm) = zone.get(1..)?.split_once(':')?;
            let (zh, zm) = (number(zh, 2)?, number(zm, 2)?);
            if zh > 23 || zm > 59 {
                return None;
            }
            sign * (zh as i64 * 3600 + zm as i64 * 60)
        }
    };
    unix_from_civil((year, month, day), (h, m, sec), frac).map(|t| t - offset as f64)
}

/// 1 to `max` decimal digits.
fn number(s: &str, max: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `HH:MM:SS`.
fn clock(s: &str) -> Option<(u32, u32, u32)> {
    let mut t = s.split(':');
    let (h, m, sec) = (t.next()?, t.next()?, t.next()?);
    if t.next().is_some() || h.len() != 2 || m.len() != 2 || sec.len() != 2 {
        return None;
    }
    let (h, m, sec) = (number(h, 2)?, number(m, 2)?, number(sec, 2)?);
    (h < 24 && m < 60 && sec <= 60).then_some((h, m, sec))
}

/// One Xid: the GPU (normalised bus id) and the code.
#[derive(Clone, Debug, PartialEq)]
pub struct Xid {
    pub bus_id: String,
    pub code: u32,
}

/// The Xid in a message, if it is an `NVRM: Xid (<bus>): <code>` line with
/// a readable bus id and code.
pub fn parse_xid(message: &str) -> Option<Xid> {
    let (_, rest) = message.split_once("NVRM: Xid (")?;
    let (bus, rest) = rest.split_once(')')?;
    let bus_id = normalize_bus_id(bus)?;
    let rest = rest.strip_prefix(':')?.trim_start();
    let len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (code, after) = rest.split_at_checked(len)?;
    if !(after.is_empty() || after.starts_with(',') || after.starts_with(char::is_whitespace)) {
        return None;
    }
    let code = number(code, 10)?;
    Some(Xid { bus_id, code })
}

/// `NVRM: GPU at PCI:0000:9b:00: GPU-<uuid>`: (normalised bus id, UUID).
pub fn parse_gpu_at(message: &str) -> Option<(String, String)> {
    let (_, rest) = message.split_once("NVRM: GPU at ")?;
    let (bus, rest) = rest.split_once(": ")?;
    let uuid = rest.split_whitespace().next()?;
    let valid = uuid
        .strip_prefix("GPU-")
        .is_some_and(|u| !u.is_empty() && u.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'));
    if !valid {
        return None;
    }
    Some((normalize_bus_id(bus)?, uuid.to_string()))
}

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
    uuids: BTreeMap<String, String>,
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
        if let Some((bus, uuid)) = parse_gpu_at(line.message) {
            self.uuids.insert(bus, uuid);
            return None;
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

    /// The UUID the driver logged for a bus id.
    pub fn uuid(&self, bus_id: &str) -> Option<&str> {
        self.uuids
            .get(&normalize_bus_id(bus_id)?)
            .map(String::as_str)
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

fn hash_of(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

const EPIPE: i32 = 32;
/// Bytes for one read of `/dev/kmsg`: a record (with its continuation
/// lines) is at most 8 KiB, and a smaller buffer fails with EINVAL.
const RECORD_BUFFER: usize = 16 * 1024;
/// Most reads in one call, so a fast-filling log cannot hold it forever.
const MAX_READS: usize = 1 << 20;

/// Reads the kernel log into an [`XidCounter`]: `/dev/kmsg`, or a text file
/// holding `dmesg` output or kern.log.
///
/// A character device is read record by record without blocking and kept
/// open, so each call picks up where the last one stopped (the first
/// starts at the oldest record in the ring buffer). Any other file is read
/// whole each call and fed through [`XidCounter::feed_text`], which skips
/// what it has seen.
pub struct KmsgReader {
    path: PathBuf,
    device: Option<File>,
}

impl KmsgReader {
    pub fn new(path: impl Into<PathBuf>) -> KmsgReader {
        KmsgReader {
            path: path.into(),
            device: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what is new; the number of records or new lines read.
    pub fn read_into(&mut self, counter: &mut XidCounter) -> io::Result<usize> {
        if let Some(device) = &mut self.device {
            let result = read_records(device, counter);
            if result.is_err() {
                // Reopen next time; sequence numbers skip the replay.
                self.device = None;
            }
            return result;
        }
        let mut file = OpenOptions::new()
            .read(true)
            // A read of /dev/kmsg with nothing new returns EAGAIN instead
            // of blocking the collector.
            .custom_flags(super::O_NONBLOCK)
            .open(&self.path)?;
        if file.metadata()?.file_type().is_char_device() {
            let result = read_records(&mut file, counter);
            if result.is_ok() {
                self.device = Some(file);
            }
            return result;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes);
        let before = self.consumed_lines(counter);
        counter.feed_text(&self.path.to_string_lossy(), &text);
        let after = self.consumed_lines(counter);
        Ok(text
            .get(before..after)
            .map_or(0, |new| new.matches('\n').count()))
    }

    fn consumed_lines(&self, counter: &XidCounter) -> usize {
        counter
            .consumed
            .get(&*self.path.to_string_lossy())
            .map_or(0, |&(offset, _)| offset)
    }
}

/// Reads `/dev/kmsg`-style records (one per read) until EAGAIN (caught
/// up) or end of file. EPIPE means the records we were due to read next
/// were overwritten; the next read goes on from the oldest one left.
pub fn read_records<R: Read>(reader: &mut R, counter: &mut XidCounter) -> io::Result<usize> {
    let mut buf = vec![0u8; RECORD_BUFFER];
    let mut records = 0;
    for _ in 0..MAX_READS {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let record = String::from_utf8_lossy(buf.get(..n).unwrap_or_default());
                counter.feed_line(&record);
                records += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.raw_os_error() == Some(EPIPE) => {
                log::debug!("kmsg: records overwritten before we read them");
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(records)
}

/// Fills in Xid from the kernel log for GPUs whose source could not see
/// them (`xid_errors` is `None`): every GPU under `smi`, and GPUs without
/// NVML event support under `nvml`.
pub struct KernelLogXid {
    reader: KmsgReader,
    counter: XidCounter,
    failing: bool,
}

impl KernelLogXid {
    pub fn new(path: impl Into<PathBuf>) -> KernelLogXid {
        let mut counter = XidCounter::new();
        if let Some(boot) = boot_time() {
            counter.set_boot_time(boot);
        }
        KernelLogXid {
            reader: KmsgReader::new(path),
            counter,
            failing: false,
        }
    }
}

impl Filler for KernelLogXid {
    /// Reads what is new in the log and fills in the GPUs' Xid counters.
    fn fill(&mut self, _now: f64, gpus: &mut [Gpu]) {
        match self.reader.read_into(&mut self.counter) {
            Ok(_) => self.failing = false,
            Err(e) => {
                // Once per outage, not once per collection.
                if !self.failing {
                    log::warn!("xid: cannot read {}: {e}", self.reader.path().display());
                }
                self.failing = true;
            }
        }
        for g in gpus
            .iter_mut()
            .filter(|g| g.up && g.readings.xid_errors.is_none())
        {
            g.readings.xid_errors = Some(xid_errors(self.counter.counts(&g.pci_bus_id)));
            g.readings.xid_last_timestamp_seconds = self.counter.last_timestamp(&g.pci_bus_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::fixture;
    use std::collections::VecDeque;

    const DMESG_T: &str = fixture!("kmsg", "xid_dmesg-T_xid119-gsp-timeout_gpud.log");
    const DECODE_ISO: &str = fixture!("kmsg", "xid_dmesg-decode-iso_xid13-43_gpud_excerpt.log");
    const NO_XID: &str = fixture!(
        "kmsg",
        "xid_dmesg-monotonic_fallen-off-bus-multiline-no-xid_NVSentinel-155.log"
    );
    const XID79_SXID: &str = fixture!(
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
        assert_eq!(
            c.uuid("00000000:9B:00.0"),
            Some("GPU-509665ad-b600-ac93-3616-d754b23d636d")
        );
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
        assert_eq!(c.uuid("0000:38:00"), None);
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
        assert_eq!(
            c.uuid("00000000:91:00.0"),
            Some("GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b")
        );
        // Monotonic stamps of saved text give no Unix time.
        assert_eq!(c.last_timestamp("0000:91:00"), None);

        // Multi-line "fallen off the bus" with no Xid number: nothing.
        let c = fed(NO_XID);
        assert_eq!(c.total(), 0);
        assert_eq!(c.counts("0000:b3:00"), []);
        assert!(c.bus_ids().is_empty());
    }

    #[test]
    fn xid_forms() {
        let cases = [
            (
                "NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
                "00000000:9B:00.0",
                79,
            ),
            (
                "NVRM: Xid (0000:03:00): 14, Channel 00000001",
                "00000000:03:00.0",
                14,
            ),
            (
                "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception",
                "00000000:38:00.0",
                13,
            ),
            ("NVRM: Xid (PCI:0001:c1:1f): 48", "00000001:C1:1F.0", 48),
            ("NVRM: Xid (PCI:0000:9b:00):119 ", "00000000:9B:00.0", 119),
        ];
        for (message, bus, code) in cases {
            assert_eq!(
                parse_xid(message),
                Some(Xid {
                    bus_id: bus.into(),
                    code
                }),
                "{message}"
            );
        }
        for not_xid in [
            "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
            "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.",
            "NVRM: The NVIDIA GPU 0000:b3:00.0",
            "NVRM: fallen off the bus and is not responding to commands.",
            "NVRM: Xid (PCI:0000:9b:00): , pid=1",
            "NVRM: Xid (PCI:0000:9b:00): 79x",
            "NVRM: Xid (PCI:0000:9b:00) 79",
            "NVRM: Xid (PCI:zz:9b:00): 79",
            "NVRM: Xid (PCI:0000:9b:00): 99999999999, too big",
            "NVRM: Xid (PCI:0000:9b:00",
            "Xid (PCI:0000:9b:00): 79 without NVRM",
        ] {
            assert_eq!(parse_xid(not_xid), None, "{not_xid}");
        }
    }

    #[test]
    fn timestamp_styles() {
        let xid = "NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.";
        let cases = [
            (
                format!("[ 1234.567890] {xid}"),
                None,
                Some(Stamp::Monotonic(1234.56789)),
            ),
            (
                format!("[6781741.548779] {xid}"),
                None,
                Some(Stamp::Monotonic(6781741.548779)),
            ),
            (
                format!("[Mon Jan  1 00:00:00 2024] {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.0)),
            ),
            (
                format!("2024-01-01T00:00:00,000000+00:00 {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.0)),
            ),
            (
                format!("2024-02-29T12:00:00.5+05:30 {xid}"),
                None,
                Some(Stamp::Unix(1_709_188_200.5)),
            ),
            (
                format!("2024-01-01T00:00:00Z {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.0)),
            ),
            (
                format!("kern  :warn  : [ 1234.567890] {xid}"),
                None,
                Some(Stamp::Monotonic(1234.56789)),
            ),
            (
                format!("kern  :err   : [Mon Jan  1 00:00:00 2024] {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.0)),
            ),
            (
                format!("kern  :warn  : 2024-01-01T00:00:00,123456+00:00 {xid}"),
                None,
                Some(Stamp::Unix(1_704_067_200.123456)),
            ),
            (
                format!("4,1234,5678901,-;{xid}"),
                Some(1234),
                Some(Stamp::Monotonic(5.678901)),
            ),
            (
                format!(
                    "4,1234,5678901,-,caller=T42;{xid}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:9b:00.0"
                ),
                Some(1234),
                Some(Stamp::Monotonic(5.678901)),
            ),
            // syslog's kern.log: no stamp we read, Xid still found.
            (
                format!("Jan  1 00:00:00 host kernel: [ 12.5] {xid}"),
                None,
                None,
            ),
            (xid.to_string(), None, None),
        ];
        for (line, seq, stamp) in &cases {
            let l = split_line(line);
            assert_eq!((l.seq, l.stamp), (*seq, *stamp), "{line}");
            assert_eq!(parse_xid(l.message).map(|x| x.code), Some(79), "{line}");
        }
        // Stamp-shaped but wrong: left in the message, no stamp.
        for line in [
            "[Mon Foo  1 00:00:00 2024] x",
            "[ 12.x] x",
            "[ 1234] x",
            "2024-13-01T00:00:00Z x",
            "2024-01-01T25:00:00Z x",
            "2024-01-01T00:00:00+0000 x",
            "1,2,x,-;x",
        ] {
            assert_eq!(split_line(line).stamp, None, "{line}");
        }
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

    #[test]
    fn gpu_at_lines() {
        assert_eq!(
            parse_gpu_at("NVRM: GPU at PCI:0000:9b:00: GPU-509665ad-b600-ac93-3616-d754b23d636d"),
            Some((
                "00000000:9B:00.0".into(),
                "GPU-509665ad-b600-ac93-3616-d754b23d636d".into()
            ))
        );
        for bad in [
            "NVRM: GPU at PCI:0000:9b:00: ",
            "NVRM: GPU at PCI:0000:9b:00: MIG-1234",
            "NVRM: GPU at PCI:zz: GPU-1234",
            "NVRM: GPU Board Serial Number: 1650124014249",
        ] {
            assert_eq!(parse_gpu_at(bad), None, "{bad}");
        }
    }

    /// Hands out scripted results, one per read, like /dev/kmsg does.
    struct FakeKmsg(VecDeque<io::Result<Vec<u8>>>);

    impl Read for FakeKmsg {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.pop_front() {
                None => Err(io::ErrorKind::WouldBlock.into()),
                Some(Ok(bytes)) => {
                    let n = bytes.len().min(buf.len());
                    buf[..n].copy_from_slice(&bytes[..n]);
                    Ok(n)
                }
                Some(Err(e)) => Err(e),
            }
        }
    }

    #[test]
    fn record_reader_skips_overwritten_and_stops_when_caught_up() {
        let rec =
            |seq: u32, code: u32| {
                Ok(format!(
                    "3,{seq},100,-;NVRM: Xid (PCI:0000:9b:00): {code}, pid=1\n SUBSYSTEM=pci\n"
                )
                .into_bytes())
            };
        let mut fake = FakeKmsg(VecDeque::from([
            rec(1, 79),
            Err(io::Error::from_raw_os_error(EPIPE)),
            rec(7, 79),
            Err(io::ErrorKind::Interrupted.into()),
            rec(8, 48),
            rec(8, 48),
            Err(io::ErrorKind::WouldBlock.into()),
            rec(9, 13),
        ]));
        let mut c = XidCounter::new();
        assert_eq!(read_records(&mut fake, &mut c).unwrap(), 4);
        assert_eq!(c.counts("0000:9b:00"), [(48, 1), (79, 2)]);
        // The next call resumes after the EAGAIN.
        assert_eq!(read_records(&mut fake, &mut c).unwrap(), 1);
        assert_eq!(c.counts("0000:9b:00"), [(13, 1), (48, 1), (79, 2)]);

        let mut broken = FakeKmsg(VecDeque::from([Err(io::ErrorKind::InvalidInput.into())]));
        assert!(read_records(&mut broken, &mut c).is_err());
    }

    #[test]
    fn reader_on_a_text_file() {
        let path =
            std::env::temp_dir().join(format!("gpu-exporter-kmsg-{}.log", std::process::id()));
        std::fs::write(&path, DECODE_ISO).unwrap();
        let mut reader = KmsgReader::new(&path);
        let mut c = XidCounter::new();
        assert_eq!(reader.read_into(&mut c).unwrap(), 26);
        assert_eq!(reader.read_into(&mut c).unwrap(), 0);
        let mut grown = DECODE_ISO.to_string();
        grown.push_str("[ 1.0] NVRM: Xid (PCI:0000:38:00): 43, pid=1, name=x, Ch 00000008\n");
        std::fs::write(&path, &grown).unwrap();
        assert_eq!(reader.read_into(&mut c).unwrap(), 1);
        assert_eq!(c.counts("0000:38:00"), [(13, 24), (43, 3)]);
        let _ = std::fs::remove_file(&path);
        assert!(KmsgReader::new(&path).read_into(&mut c).is_err());
    }

    #[test]
    fn reader_on_dev_kmsg_does_not_block() {
        // Only where this host lets us read the kernel log.
        let Ok(meta) = std::fs::metadata("/dev/kmsg") else {
            return;
        };
        if !meta.file_type().is_char_device() || File::open("/dev/kmsg").is_err() {
            return;
        }
        let start = std::time::Instant::now();
        let mut reader = KmsgReader::new("/dev/kmsg");
        let mut c = XidCounter::new();
        // At least the "Linux version" record is in the ring buffer.
        assert!(reader.read_into(&mut c).unwrap() >= 1);
        reader.read_into(&mut c).unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
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
