//! Fillers: readers of what a real source cannot see, laid over the fleet
//! it collected. Each lives in its own file behind the small [`Filler`]
//! trait; like sources, they run on the collector thread.

pub mod cgroup;
pub mod jobs;
pub mod kmsg;
#[cfg(feature = "kubernetes")]
pub mod pods;
pub mod workload;

use crate::snapshot::{Gpu, Kubelet};
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// `O_NONBLOCK` on Linux (x86-64 and aarch64), for files that must never
/// block the collector: std has no constant for it.
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
}

impl<T> Default for Files<T> {
    fn default() -> Files<T> {
        Files {
            files: HashMap::new(),
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
                Ok(m) if !m.is_file() => Err("not a regular file".to_string()),
                // Non-blocking, and checked again once open: a FIFO swapped
                // in after the stat must not block the collector.
                Ok(m) => match fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(O_NONBLOCK)
                    .open(path)
                {
                    // Deleted since the stat: gone, not bad.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
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

    /// Forgets the files `keep` says are gone.
    pub fn retain(&mut self, mut keep: impl FnMut(&Path) -> bool) {
        self.files.retain(|p, _| keep(p));
    }
}
