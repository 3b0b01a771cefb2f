//! Xid errors from the kernel log: `/dev/kmsg` records or a text file
//! (kern.log, saved `dmesg` output).
//!
//! The NVIDIA driver reports an Xid as
//! `NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, name=python, GPU has fallen off the bus.`
//! (older drivers: `NVRM: Xid (0000:03:00): 14, Channel 00000001`), by bus
//! id; GPUs are matched to it by their bus id. NVSwitch `SXid` lines and
//! the driver's prose about a GPU that fell off the bus are not Xid and
//! are not counted.
//!
//! Only Xid after the exporter started count (see [`XidCounter`]); those
//! from before show in the GPU's last Xid time and one log line. `dmesg -T`
//! stamps are the host's local time, read in its zone ([`base::tz`]).
//!
//! The parsing half ([`line`], [`counter`]) is pure and never panics, so
//! fuzz targets can call it; [`KmsgReader`] does the I/O ([`follow`] for
//! text files), and [`KernelLogXid`] fills in the fleet.

pub mod counter;
pub mod follow;
pub mod line;

use super::Filler;
use base::quiet::Repeating;
use base::time::{boot_time, unix_now};
use counter::XidCounter;
use follow::Follower;
use model::{Gpu, last_code, xid_errors};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const EPIPE: i32 = 32;
/// Bytes for one read of `/dev/kmsg`: a record (with its continuation
/// lines) is at most 8 KiB, and a smaller buffer fails with EINVAL.
const RECORD_BUFFER: usize = 16 * 1024;
/// Most reads in one call, so a fast-filling log cannot hold it forever.
const MAX_READS: usize = 1 << 20;
/// `/dev/kmsg` is character device 1:11.
const KMSG_DEVICE: (u64, u64) = (1, 11);

/// Major and minor number of a device (glibc's `dev_t` encoding).
fn major_minor(rdev: u64) -> (u64, u64) {
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0xfff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
    (major, minor)
}

/// Whether `path` is something the kernel-log reader takes: a regular file
/// or `/dev/kmsg` (the device, under any name), and readable. Directories,
/// FIFOs, sockets and other devices are refused without being opened, so
/// none is ever waited on.
pub fn check_path(path: &Path) -> Result<(), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let t = meta.file_type();
    let kmsg = t.is_char_device() && major_minor(meta.rdev()) == KMSG_DEVICE;
    let kind = if t.is_file() || kmsg {
        None
    } else if t.is_dir() {
        Some("a directory")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_char_device() {
        Some("a character device other than /dev/kmsg")
    } else {
        Some("not a regular file")
    };
    if let Some(kind) = kind {
        return Err(format!(
            "{shown} is {kind}; give a kernel log file or /dev/kmsg"
        ));
    }
    open(path)
        .map(drop)
        .map_err(|e| format!("cannot read {shown}: {e}"))
}

/// Opens without blocking: a read of `/dev/kmsg` with nothing new returns
/// EAGAIN instead of blocking the poller.
fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(super::O_NONBLOCK)
        .open(path)
}

/// Reads the kernel log into an [`XidCounter`]: `/dev/kmsg`, or a text file
/// holding `dmesg` output or kern.log.
///
/// A character device is read record by record without blocking and kept
/// open, so each call picks up where the last one stopped (the first
/// starts at the oldest record in the ring buffer). A text file is
/// followed ([`Follower`]).
pub struct KmsgReader {
    path: PathBuf,
    device: Option<File>,
    text: Option<Follower>,
}

impl KmsgReader {
    /// A reader of `path`; for a text file, what it holds now is from
    /// before start.
    pub fn new(path: impl Into<PathBuf>) -> KmsgReader {
        let path = path.into();
        let is_file = std::fs::metadata(&path).is_ok_and(|m| m.is_file());
        KmsgReader {
            text: is_file.then(|| Follower::new(&path)),
            path,
            device: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what is new; the number of records or new lines read.
    pub fn read_into(&mut self, counter: &mut XidCounter) -> io::Result<usize> {
        if let Some(text) = &mut self.text {
            return text.read_into(counter);
        }
        if let Some(device) = &mut self.device {
            let result = read_records(device, counter);
            if result.is_err() {
                // Reopen next time; sequence numbers skip the replay.
                self.device = None;
            }
            return result;
        }
        let mut file = open(&self.path)?;
        let meta = file.metadata()?;
        if meta.file_type().is_char_device() && major_minor(meta.rdev()) == KMSG_DEVICE {
            let result = read_records(&mut file, counter);
            if result.is_ok() {
                self.device = Some(file);
            }
            return result;
        }
        if meta.is_file() {
            // A file where there was none at start: followed from now on.
            drop(file);
            let mut text = Follower::new(&self.path);
            let result = text.read_into(counter);
            self.text = Some(text);
            return result;
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "neither a regular file nor /dev/kmsg",
        ))
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

/// Seconds since boot, from /proc/uptime.
fn uptime() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/uptime").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Fills in Xid from the kernel log: for GPUs whose source could not see
/// them (`xid_errors` is `None`: every GPU under `smi`, GPUs without NVML
/// event support) the log's counts, and for the others the log's counts
/// merged into the source's by code; lost GPUs too, by the bus id the
/// fleet memory keeps for them.
pub struct KernelLogXid {
    reader: KmsgReader,
    counter: XidCounter,
    failing: Repeating,
    /// Whether the Xid from before start were logged.
    told: bool,
}

impl KernelLogXid {
    /// Reads `path`, counting only what the kernel logs from now on.
    pub fn new(path: impl Into<PathBuf>) -> KernelLogXid {
        let mut counter = XidCounter::new();
        if let Some(boot) = boot_time() {
            counter.set_boot_time(boot);
        }
        counter.set_start(unix_now(), uptime());
        let (zone, warning) = base::tz::local();
        if let Some(w) = warning {
            log::warn!("xid: {w}");
        }
        counter.set_zone(zone);
        KernelLogXid {
            reader: KmsgReader::new(path),
            counter,
            failing: Repeating::new(),
            told: false,
        }
    }
}

impl Filler for KernelLogXid {
    /// Reads what is new in the log and fills in the GPUs' Xid counters.
    fn fill(&mut self, _now: f64, gpus: &mut [Gpu]) {
        let what = format!("xid: reading {}", self.reader.path().display());
        match self.reader.read_into(&mut self.counter) {
            Ok(_) => {
                self.failing.ok(&what);
                if !self.told {
                    self.told = true;
                    if let (n @ 1.., Some((xid, at))) = self.counter.before_start() {
                        let at =
                            at.map_or(String::new(), |t| format!(" at {}", base::time::rfc3339(t)));
                        log::info!(
                            "xid: {} holds {n} Xid from before the exporter started, not counted as new \
                             (the latest: Xid {} on {}{at})",
                            self.reader.path().display(),
                            xid.code,
                            xid.bus_id
                        );
                    }
                }
            }
            Err(e) => self.failing.fail(&what, &e.to_string()),
        }
        // A stamp past now is a clock that was wrong, not a future Xid.
        let now = unix_now();
        for g in gpus.iter_mut().filter(|g| !g.pci_bus_id.is_empty()) {
            let (bus, r) = (&g.pci_bus_id, &mut g.readings);
            let logged = self.counter.counts(bus);
            r.xid_errors = Some(match r.xid_errors.take() {
                None => xid_errors(logged),
                Some(seen) => by_code_max(seen, logged),
            });
            let stamp = self.counter.last_timestamp(bus).map(|t| t.min(now));
            if r.xid_last_code.is_none() || stamp > r.xid_last_timestamp_seconds {
                r.xid_last_timestamp_seconds = stamp;
                r.xid_last_code = Some(last_code(self.counter.last_code(bus)));
            }
        }
    }
}

/// The source's Xid counts with the kernel log's merged in, code by code:
/// the larger count of the two, since an Xid the source saw is in the log
/// too. The log is what still speaks for a GPU that fell off the bus,
/// whose events the source no longer gets.
fn by_code_max(seen: Vec<(u32, u64)>, logged: Vec<(u32, u64)>) -> Vec<(u32, u64)> {
    let mut out = seen;
    for (code, n) in logged {
        match out.iter_mut().find(|(c, _)| *c == code) {
            Some((_, count)) => *count = (*count).max(n),
            None => out.push((code, n)),
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::counter::tests::DECODE_ISO;
    use super::*;
    use std::collections::VecDeque;

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
        // What the file held when the reader began is from before start.
        assert_eq!(c.before_start().0, 26);
        assert_eq!(c.counts("0000:38:00"), [(43, 1)]);
        let _ = std::fs::remove_file(&path);
        assert!(KmsgReader::new(&path).read_into(&mut c).is_err());
    }

    /// A GPU whose source counts Xid (NVML events) gets the log's counts
    /// merged in by code, never added twice; a stamp from the future is
    /// taken as now.
    #[test]
    fn the_log_merges_into_the_sources_counts_by_code() {
        let path = std::env::temp_dir().join(format!(
            "gpu-exporter-kmsg-merge-{}.log",
            std::process::id()
        ));
        std::fs::write(&path, "").unwrap();
        let mut filler = KernelLogXid::new(&path);
        let line = |code: u32| {
            format!(
                "kern  :warn  : 2999-01-21T02:21:33,498559+00:00 NVRM: Xid (PCI:0000:38:00): {code}, pid=1, name=x, msg\n"
            )
        };
        std::fs::write(&path, format!("{}{}{}", line(79), line(79), line(13))).unwrap();
        let gpu = |seen: Option<Vec<(u32, u64)>>| {
            let mut g = Gpu {
                pci_bus_id: "00000000:38:00.0".into(),
                ..Gpu::default()
            };
            g.readings.xid_errors = seen;
            g
        };
        // The source saw one 79 and three 48; the log two 79 and a 13.
        let mut gpus = [gpu(Some(vec![(48, 3), (79, 1)])), gpu(None)];
        let before = unix_now();
        filler.fill(0.0, &mut gpus);
        let merged = gpus[0].readings.xid_errors.clone().unwrap();
        assert_eq!(merged, [(13, 1), (48, 3), (79, 2)]);
        let logged = gpus[1].readings.xid_errors.clone().unwrap();
        assert!(logged.contains(&(79, 2)) && logged.contains(&(13, 1)));
        for g in &gpus {
            let stamp = g.readings.xid_last_timestamp_seconds.unwrap();
            assert!(stamp >= before && stamp <= unix_now(), "{stamp}");
            assert_eq!(g.readings.xid_last_code, Some(13.0));
        }
        let _ = std::fs::remove_file(&path);
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
}
