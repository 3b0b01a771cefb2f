//! A text kernel log (kern.log, `dmesg > file`) followed like `tail -F`,
//! in bounded memory.
//!
//! - Each read goes on from the offset the last one stopped at, in chunks
//!   of [`CHUNK`] bytes; a line longer than [`MAX_LINE`] is cut there.
//! - Rotation is noticed by the path naming another file (device and
//!   inode): the rest of the old one is read, then the new one from its
//!   start. Truncation (logrotate's copytruncate) is a size below the
//!   offset. A rewrite in place (`dmesg > file`), or a truncation the file
//!   has regrown past between two reads, is the file no longer holding
//!   what was read: its first [`HEAD`] bytes, or the last whole line read
//!   (its stamp included) with what follows it up to the offset, are not
//!   those read ([`Proof`]). Any of these is read again from the start,
//!   and the counter told ([`XidCounter::reread`]), so lines seen before
//!   are not counted again.
//! - What the file held when the exporter started is [`Mode::Scan`]: from
//!   before start.
//! - A last line without its newline is counted once: when its newline
//!   comes, or once the file has stayed the same size for two reads.

use super::counter::{Mode, XidCounter};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

/// Bytes read at once.
pub const CHUNK: usize = 64 * 1024;
/// Longest line kept; the rest of a longer one is dropped.
pub const MAX_LINE: usize = 8 * 1024;
/// Most bytes read in one call, so that a huge backlog is read over
/// several collections rather than holding one.
pub const MAX_BYTES_PER_READ: u64 = 256 << 20;
/// Bytes at the file's start checked to notice a rewrite in place.
const HEAD: u64 = 4096;
/// Most bytes before the offset checked: the last line read, cut to this.
const LAST: u64 = 2 * MAX_LINE as u64;
/// Reads with the size unchanged before a last line without its newline
/// counts.
const UNCHANGED_READS: u32 = 2;

/// Which file a path names: device and inode.
type Identity = (u64, u64);

/// The file being followed.
struct Open {
    file: File,
    id: Identity,
    /// Bytes read so far.
    offset: u64,
    /// Where the line being read starts, and the last whole line before it.
    line_start: u64,
    last_line: u64,
    /// What was read, to check it is still there.
    proof: Option<Proof>,
    /// Bytes below this offset are from before start.
    scan_until: u64,
    /// A line still without its newline.
    pending: Vec<u8>,
    /// The pending line was counted (the file stayed unchanged): the rest
    /// of it, up to its newline, is skipped.
    pending_counted: bool,
    /// Reads in a row that found the size unchanged.
    unchanged: u32,
    last_size: u64,
}

pub struct Follower {
    path: PathBuf,
    open: Option<Open>,
    /// The file and its size when the exporter started.
    at_start: Option<(Identity, u64)>,
    buf: Vec<u8>,
}

fn identity(m: &std::fs::Metadata) -> Identity {
    (m.dev(), m.ino())
}

impl Follower {
    /// Follows `path`, noting which file it is now: what that file holds
    /// now is from before start.
    pub fn new(path: impl Into<PathBuf>) -> Follower {
        let path = path.into();
        let at_start = std::fs::metadata(&path)
            .ok()
            .filter(|m| m.is_file())
            .map(|m| (identity(&m), m.len()));
        Follower {
            path,
            open: None,
            at_start,
            buf: Vec::new(),
        }
    }

    /// Reads what is new into `counter`; the number of lines read.
    pub fn read_into(&mut self, counter: &mut XidCounter) -> io::Result<usize> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            // Gone for a moment (between logrotate's rename and create):
            // read what the old file still has.
            Err(e) if e.kind() == io::ErrorKind::NotFound && self.open.is_some() => {
                return self.read_open(counter);
            }
            Err(e) => return Err(e),
        };
        if !meta.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file any more",
            ));
        }
        let mut lines = 0;
        let rotated = self.open.as_ref().is_some_and(|o| o.id != identity(&meta));
        if rotated {
            // The rest of the old file, then the new one from its start.
            lines += self.read_open(counter)?;
            self.flush_pending(counter);
            self.open = None;
        }
        if self.open.is_none() {
            let file = OpenOptions::new()
                .read(true)
                .custom_flags(super::super::O_NONBLOCK)
                .open(&self.path)?;
            let m = file.metadata()?;
            if !m.is_file() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a regular file",
                ));
            }
            let id = identity(&m);
            // The file of the start: its bytes then are from before start.
            // Any other may hold lines already seen.
            let scan_until = match self.at_start.take() {
                Some((start_id, size)) if start_id == id && !rotated => size,
                _ => {
                    counter.reread();
                    0
                }
            };
            self.open = Some(Open::at_start(file, id, scan_until, m.len()));
        } else if let Some(o) = &mut self.open {
            let size = meta.len();
            if size < o.offset || !o.still_holds() {
                // Truncated or rewritten: from the start again.
                counter.reread();
                *o = Open::at_start(o.file.try_clone()?, o.id, 0, size);
            }
        }
        lines += self.read_open(counter)?;
        Ok(lines)
    }

    /// Reads the open file from its offset to its end (at most
    /// [`MAX_BYTES_PER_READ`]).
    fn read_open(&mut self, counter: &mut XidCounter) -> io::Result<usize> {
        let Some(o) = &mut self.open else {
            return Ok(0);
        };
        let size = o.file.metadata()?.len();
        o.unchanged = if size == o.last_size {
            o.unchanged.saturating_add(1)
        } else {
            0
        };
        o.last_size = size;
        o.file.seek(SeekFrom::Start(o.offset))?;
        self.buf.resize(CHUNK, 0);
        let mut lines = 0;
        let mut read_now = 0u64;
        loop {
            if read_now >= MAX_BYTES_PER_READ {
                o.proof = Proof::of(&o.file, o.offset, o.last_line);
                return Ok(lines);
            }
            let n = match o.file.read(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            read_now += n as u64;
            o.unchanged = 0;
            lines += o.take(&self.buf[..n], counter);
        }
        if read_now > 0 {
            o.proof = Proof::of(&o.file, o.offset, o.last_line);
        }
        if !o.pending.is_empty() && !o.pending_counted && o.unchanged >= UNCHANGED_READS {
            // A last line without its newline, unchanged for two reads.
            let mode = o.mode_at(o.offset);
            feed(counter, &o.pending, mode);
            o.pending.clear();
            o.pending_counted = true;
            lines += 1;
        }
        Ok(lines)
    }

    /// A pending line of a file being left counts as it is.
    fn flush_pending(&mut self, counter: &mut XidCounter) {
        if let Some(o) = &mut self.open
            && !o.pending.is_empty()
            && !o.pending_counted
        {
            feed(counter, &o.pending, o.mode_at(o.offset));
            o.pending.clear();
        }
    }
}

impl Open {
    /// `file`, to be read from its start.
    fn at_start(file: File, id: Identity, scan_until: u64, size: u64) -> Open {
        Open {
            file,
            id,
            offset: 0,
            line_start: 0,
            last_line: 0,
            proof: None,
            scan_until,
            pending: Vec::new(),
            pending_counted: false,
            unchanged: 0,
            last_size: size,
        }
    }

    /// How a line ending at byte `end` is taken.
    fn mode_at(&self, end: u64) -> Mode {
        if end <= self.scan_until {
            Mode::Scan
        } else {
            Mode::Follow
        }
    }

    /// Whether the file still holds what was read up to the offset.
    fn still_holds(&self) -> bool {
        self.proof
            .is_none_or(|p| Proof::of(&self.file, self.offset, self.last_line) == Some(p))
    }

    /// Takes `bytes`, read at the offset, line by line; the lines fed.
    fn take(&mut self, bytes: &[u8], counter: &mut XidCounter) -> usize {
        let start = self.offset;
        self.offset += bytes.len() as u64;

        let mut lines = 0;
        let mut rest = bytes;
        let mut at = start;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            let (line, after) = (&rest[..nl], &rest[nl + 1..]);
            at += nl as u64 + 1;
            (self.last_line, self.line_start) = (self.line_start, at);
            if self.pending_counted {
                // The rest of a line counted before its newline came.
                self.pending_counted = false;
            } else if self.pending.is_empty() {
                feed(counter, &line[..line.len().min(MAX_LINE)], self.mode_at(at));
                lines += 1;
            } else {
                self.push_pending(line);
                feed(counter, &self.pending, self.mode_at(at));
                self.pending.clear();
                lines += 1;
            }
            rest = after;
        }
        // Unless it is still the rest of a counted line, a line without
        // its newline waits.
        if !rest.is_empty() && !self.pending_counted {
            self.push_pending(rest);
        }
        lines
    }

    fn push_pending(&mut self, bytes: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.pending.len());
        self.pending
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

/// Evidence that a file still holds what was read up to an offset, much
/// stronger than a few bytes before it, which a truncated log regrown with
/// other lines can match by chance: hashes of its first [`HEAD`] bytes and
/// of the bytes from the last whole line read (its stamp included, at most
/// [`LAST`]) to the offset. Checking reads at most 20 KiB.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Proof {
    head: u64,
    last: u64,
}

impl Proof {
    fn of(file: &File, offset: u64, last_line: u64) -> Option<Proof> {
        let from = last_line.max(offset.saturating_sub(LAST));
        Some(Proof {
            head: digest(file, 0, offset.min(HEAD))?,
            last: digest(file, from, offset - from)?,
        })
    }
}

fn digest(file: &File, at: u64, len: u64) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut bytes = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact_at(&mut bytes, at).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

fn feed(counter: &mut XidCounter, line: &[u8], mode: Mode) {
    counter.feed(&String::from_utf8_lossy(line), mode);
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Temp(PathBuf);

    impl Temp {
        fn new(name: &str) -> Temp {
            let dir = std::env::temp_dir()
                .join(format!("gpu-exporter-follow-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Temp(dir)
        }

        fn log(&self) -> PathBuf {
            self.0.join("kern.log")
        }

        fn append(&self, text: &str) {
            use std::io::Write;
            let mut f = OpenOptions::new()
                .append(true)
                .create(true)
                .open(self.log())
                .unwrap();
            f.write_all(text.as_bytes()).unwrap();
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn xid(t: u32, code: u32) -> String {
        format!("[{t}.000000] NVRM: Xid (PCI:0000:9b:00): {code}, pid=1, name=x, Ch 00000008\n")
    }

    fn started() -> XidCounter {
        let mut c = XidCounter::new();
        c.set_start(1_700_000_100.0, Some(100.0));
        c
    }

    #[test]
    fn appended_lines_count_once_and_old_ones_never() {
        let t = Temp::new("append");
        t.append(&xid(50, 79));
        let mut f = Follower::new(t.log());
        let mut c = started();
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), []);
        assert_eq!(c.before_start().0, 1);
        t.append(&format!("{}{}", xid(150, 79), xid(151, 48)));
        assert_eq!(f.read_into(&mut c).unwrap(), 2);
        assert_eq!(f.read_into(&mut c).unwrap(), 0);
        assert_eq!(c.counts("0000:9b:00"), [(48, 1), (79, 1)]);
    }

    #[test]
    fn a_last_line_without_newline_counts_once() {
        let t = Temp::new("partial");
        t.append("");
        let mut f = Follower::new(t.log());
        let mut c = started();
        f.read_into(&mut c).unwrap();
        let line = xid(150, 79);
        let (head, tail) = line.split_at(30);
        t.append(head);
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), []);
        // Its newline comes: counted then.
        t.append(tail);
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(79, 1)]);
        // A last line that never gets one: counted after two unchanged reads.
        t.append(xid(151, 48).trim_end());
        f.read_into(&mut c).unwrap();
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(79, 1)]);
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(48, 1), (79, 1)]);
        // Its newline comes late, then another line: each counted once.
        t.append(&format!("\n{}", xid(152, 48)));
        f.read_into(&mut c).unwrap();
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(48, 2), (79, 1)]);
    }

    #[test]
    fn rotation_truncation_and_rewrites_count_nothing_twice() {
        let t = Temp::new("rotate");
        t.append(&xid(50, 79));
        let mut f = Follower::new(t.log());
        let mut c = started();
        f.read_into(&mut c).unwrap();
        t.append(&xid(150, 79));
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(79, 1)]);

        // `dmesg > file`: the same inode rewritten with everything again,
        // one new line at the end.
        std::fs::write(
            t.log(),
            format!("{}{}{}", xid(50, 79), xid(150, 79), xid(160, 79)),
        )
        .unwrap();
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(79, 2)]);

        // copytruncate: emptied, then new lines appended.
        std::fs::write(t.log(), "").unwrap();
        f.read_into(&mut c).unwrap();
        t.append(&xid(170, 48));
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(48, 1), (79, 2)]);

        // Rotation by rename: a line appended to the old file after the
        // last read still counts, then the new file's.
        t.append(&xid(171, 48));
        std::fs::rename(t.log(), t.0.join("kern.log.1")).unwrap();
        t.append(&xid(172, 13));
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(13, 1), (48, 2), (79, 2)]);
        assert_eq!(f.read_into(&mut c).unwrap(), 0);
        assert_eq!(c.counts("0000:9b:00"), [(13, 1), (48, 2), (79, 2)]);
    }

    #[test]
    fn a_truncation_regrown_past_the_offset_is_read_again() {
        let noise = |t: u32| {
            format!(
                "[{t}.000000] pcieport 0000:00:01.1: pciehp: Slot(0): Link Down, padding to a hundred bytes\n"
            )
        };
        let t = Temp::new("regrow");
        t.append(&(10..50).map(noise).collect::<String>());
        let mut f = Follower::new(t.log());
        let mut c = started();
        f.read_into(&mut c).unwrap();
        t.append(&format!("{}{}", xid(150, 79), noise(151)));
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(79, 1)]);
        let offset = std::fs::metadata(t.log()).unwrap().len() as usize;
        // Truncated and regrown between two reads: 44 new Xid, then a line
        // ending at the old offset with the same 64 bytes before it (the
        // same message, another stamp), then one more.
        let xids: String = (200..244).map(|s| xid(s, 79)).collect();
        let stamp = "[244.000000] ";
        let pad = offset - xids.len() - noise(250).len() - stamp.len() - 1;
        let regrown = format!("{xids}{stamp}{}\n{}", "x".repeat(pad), noise(250));
        assert_eq!(regrown.len(), offset);
        let old = std::fs::read(t.log()).unwrap();
        assert_eq!(regrown.as_bytes()[offset - 64..], old[offset - 64..]);
        std::fs::write(t.log(), format!("{regrown}{}", xid(251, 13))).unwrap();
        f.read_into(&mut c).unwrap();
        assert_eq!(c.counts("0000:9b:00"), [(13, 1), (79, 45)]);
        // Read on without a change: nothing again.
        assert_eq!(f.read_into(&mut c).unwrap(), 0);
        assert_eq!(c.counts("0000:9b:00"), [(13, 1), (79, 45)]);
    }

    #[test]
    fn long_lines_are_cut_and_memory_stays_bounded() {
        let t = Temp::new("long");
        t.append("");
        let mut f = Follower::new(t.log());
        let mut c = started();
        f.read_into(&mut c).unwrap();
        let long = format!("{}{}", "x".repeat(3 * CHUNK), xid(150, 79));
        t.append(&long);
        t.append(&xid(151, 79));
        f.read_into(&mut c).unwrap();
        // The long line lost its Xid past MAX_LINE; the next one counts.
        assert_eq!(c.counts("0000:9b:00"), [(79, 1)]);
        assert_eq!(f.buf.len(), CHUNK);
        assert!(f.open.as_ref().unwrap().pending.capacity() <= 2 * MAX_LINE);
    }
}
