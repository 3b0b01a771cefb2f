//! Fillers: readers of what a real source cannot see, laid over the fleet
//! it collected. Each lives in its own file behind the small [`Filler`]
//! trait; like sources, they run on the poller thread.

pub mod cgroup;
pub mod engines;
pub mod jobs;
pub mod kmsg;
#[cfg(feature = "kubernetes")]
pub mod pods;
pub mod workload;

use model::{Gpu, Kubelet};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// `O_NONBLOCK` on Linux (x86-64 and aarch64), for files that must never
/// block the poller: std has no constant for it.
const O_NONBLOCK: i32 = 0o4000;

/// Fills readings the source left out.
pub trait Filler: Send {
    /// Lays what this filler knows over `gpus`, a collection of the source
    /// at `now` (wall-clock Unix seconds).
    fn fill(&mut self, now: f64, gpus: &mut [Gpu]);

    /// The kubelet's state, from the filler that lists pods.
    fn kubelet(&self) -> Option<Kubelet> {
        None
    }
}

/// Opens `path` to read without blocking (a FIFO must never block the
/// poller) and without leaving its directory: a symbolic link out of it
/// (`3.2 -> /etc/hostname`) is `EXDEV`, never read, while links within it,
/// as a Kubernetes ConfigMap volume lays its files out, are followed. The
/// kernel decides as it opens (`openat2` with `RESOLVE_BENEATH`), so a link
/// swapped in after a check cannot lead out. Kernels before 5.6 (and
/// sandboxes that refuse the call) get the check and then the open.
fn open_within(path: &Path, beneath: bool) -> std::io::Result<fs::File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    if beneath && let (Some(dir), Some(name)) = (path.parent(), path.file_name()) {
        let dir = rustix::fs::open(
            dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match rustix::fs::openat2(&dir, name, flags, Mode::empty(), ResolveFlags::BENEATH) {
            Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {}
            opened => return Ok(fs::File::from(opened?)),
        }
    }
    if escapes(path) {
        return Err(rustix::io::Errno::XDEV.into());
    }
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
}

/// Whether `path` is a symbolic link that resolves outside its directory.
fn escapes(path: &Path) -> bool {
    if !fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return false;
    }
    let dir = path.parent().and_then(|d| fs::canonicalize(d).ok());
    match (fs::canonicalize(path), dir) {
        (Ok(target), Some(dir)) => !target.starts_with(dir),
        _ => true,
    }
}

/// What identifies a version of a file: a rename over it changes the inode
/// even within one mtime tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Version {
    len: u64,
    mtime_s: i64,
    mtime_ns: i64,
    ino: u64,
}

/// One version of a file, read and parsed once.
pub struct Seen<T> {
    version: Version,
    /// Its mtime in Unix seconds (0 where unknown).
    pub mtime: f64,
    pub parsed: Result<T, String>,
    /// Whether this version's problem has been logged.
    pub logged: bool,
}

/// The small files of a directory that a filler reads on every
/// collection, each read and parsed once per version, so an unchanged
/// file is neither re-read nor re-logged.
pub struct Files<T> {
    files: HashMap<PathBuf, Seen<T>>,
    /// Whether the directory failed to read last time, or the limits cut
    /// its listing short: each is said once, until it changes.
    dir_failed: bool,
    limit_hit: bool,
}

impl<T> Default for Files<T> {
    fn default() -> Files<T> {
        Files {
            files: HashMap::new(),
            dir_failed: false,
            limit_hit: false,
        }
    }
}

impl<T> Files<T> {
    /// The file's current version, read with `read` (given the open file
    /// and its length) at most once. `None` when the file has gone.
    pub fn look(
        &mut self,
        path: &Path,
        read: impl FnOnce(fs::File, u64) -> Result<T, String>,
    ) -> Option<&mut Seen<T>> {
        let meta = match fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            meta => meta,
        };
        // An unstattable file is one version (all zero; no file has inode 0).
        let version = meta.as_ref().map_or(Version::default(), |m| Version {
            len: m.len(),
            mtime_s: m.mtime(),
            mtime_ns: m.mtime_nsec(),
            ino: m.ino(),
        });
        if self.files.get(path).is_none_or(|s| s.version != version) {
            let parsed = match &meta {
                Err(e) => Err(format!("unreadable: {e}")),
                // Never opened: a device may act on an open.
                Ok(m) if !m.is_file() => Err("not a regular file".to_string()),
                // Checked again once open: a FIFO swapped in after the stat.
                Ok(m) => match open_within(path, true) {
                    // Deleted since the stat: gone, not bad.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
                    Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => {
                        Err("a symbolic link out of its directory".to_string())
                    }
                    Err(e) => Err(format!("unreadable: {e}")),
                    Ok(file) if !file.metadata().is_ok_and(|m| m.is_file()) => {
                        Err("not a regular file".to_string())
                    }
                    Ok(file) => read(file, m.len()),
                },
            };
            let mtime = meta
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0.0, |d| d.as_secs_f64());
            let seen = Seen {
                version,
                mtime,
                parsed,
                logged: false,
            };
            self.files.insert(path.to_path_buf(), seen);
        }
        self.files.get_mut(path)
    }

    /// How many files are remembered.
    #[cfg(test)]
    pub fn remembered(&self) -> usize {
        self.files.len()
    }

    /// Lists `dir` for one collection. A directory that cannot be read is
    /// a problem once, until it reads again.
    pub fn list(&mut self, dir: &Path, problems: &mut Vec<String>) -> Option<fs::ReadDir> {
        match fs::read_dir(dir) {
            Ok(entries) => {
                self.dir_failed = false;
                Some(entries)
            }
            Err(e) => {
                if !std::mem::replace(&mut self.dir_failed, true) {
                    problems.push(format!("{dir:?}: {e}"));
                }
                None
            }
        }
    }

    /// Ends a collection's pass over `dir`: forgets the files not
    /// `present`, and says once that `limits` (files, entries) cut the
    /// listing short, when they first do.
    pub fn done(
        &mut self,
        dir: &Path,
        present: &HashSet<PathBuf>,
        limit_hit: bool,
        limits: (usize, usize),
        problems: &mut Vec<String>,
    ) {
        if limit_hit && !self.limit_hit {
            problems.push(format!(
                "{dir:?}: more than {} files or {} entries; reading only the first",
                limits.0, limits.1
            ));
        }
        self.limit_hit = limit_hit;
        self.files.retain(|p, _| present.contains(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_opens_within_its_directory_with_and_without_openat2() {
        let dir = std::env::temp_dir().join(format!("gpu-exporter-within-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("..data")).unwrap();
        let outside = dir.with_extension("secret");
        fs::write(&outside, b"vm\n").unwrap();
        fs::write(dir.join("..data/1"), b"4711\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("abs")).unwrap();
        std::os::unix::fs::symlink("../gpu-exporter-up", dir.join("up")).unwrap();
        std::os::unix::fs::symlink("..data/1", dir.join("in")).unwrap();
        let xdev = Some(rustix::io::Errno::XDEV.raw_os_error());
        for beneath in [true, false] {
            let read =
                |name: &str| open_within(&dir.join(name), beneath).map_err(|e| e.raw_os_error());
            assert_eq!(read("abs").err(), Some(xdev), "beneath {beneath}");
            assert!(read("up").is_err(), "beneath {beneath}");
            let text = std::io::read_to_string(read("in").unwrap()).unwrap();
            assert_eq!(text, "4711\n");
        }
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_file(&outside).unwrap();
    }
}
