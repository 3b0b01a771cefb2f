//! Xid errors from the kernel log: `/dev/kmsg` records or saved `dmesg`
//! text.
//!
//! The NVIDIA driver reports an Xid as
//! `NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, name=python, GPU has fallen off the bus.`
//! (older drivers: `NVRM: Xid (0000:03:00): 14, Channel 00000001`), by bus
//! id; GPUs are matched to it by their bus id. NVSwitch `SXid` lines and the driver's prose about a GPU that fell off the bus
//! are not Xid and are not counted.
//!
//! The parsing half ([`line`], [`counter`]) is pure and never panics, so
//! fuzz targets can call it; [`KmsgReader`] does the I/O, and
//! [`KernelLogXid`] fills in the fleet.

pub mod counter;
pub mod line;

use super::Filler;
use crate::base::time::boot_time;
use crate::snapshot::{Gpu, xid_errors};
use counter::XidCounter;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

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
        let source = self.path.to_string_lossy();
        let before = counter.consumed(&source);
        counter.feed_text(&source, &text);
        let after = counter.consumed(&source);
        Ok(text
            .get(before..after)
            .map_or(0, |new| new.matches('\n').count()))
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
}
