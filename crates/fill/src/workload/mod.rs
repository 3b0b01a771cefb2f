//! Workload allocator stats: what NVML cannot see. The caching allocator of
//! a process (PyTorch's, say) knows how much it reserved, how much its
//! tensors occupy and how fragmented its pool is; the process writes that
//! to a small JSON file in a directory (`--workload.stats-dir`), and
//! [`WorkloadStats::apply`] lays it over the readings a source collected.
//!
//! # Files
//!
//! One file per process and GPU, named `*.json`, written atomically (write a
//! temporary file, then rename it over the old one). Names starting with `.`
//! or ending in `.tmp` are never read, so the temporary file can sit in the
//! same directory. Each file is one JSON object:
//!
//! ```json
//! {"gpu_uuid": "GPU-5f1e…", "pid": 4242, "reserved_bytes": 68719476736,
//!  "allocated_bytes": 60129542144, "largest_free_bytes": 2147483648,
//!  "timestamp": 1764500000.5}
//! ```
//!
//! - `gpu_uuid`: the GPU (`GPU-…`) or MIG instance (`MIG-…`) as NVML spells
//!   it, or the bare UUID without that prefix, as
//!   `torch.cuda.get_device_properties(i).uuid` prints it.
//! - `reserved_bytes`, `allocated_bytes`: `reserved_bytes.all.current` and
//!   `allocated_bytes.all.current` of `torch.cuda.memory_stats()`.
//! - `largest_free_bytes`: the largest inactive block in the process's pool
//!   (from `torch.cuda.memory_snapshot()`), 0 when there is none.
//! - `pid` (optional): for the log only; never a label.
//! - `timestamp` (optional): Unix seconds of the reading; the file's mtime
//!   otherwise.
//!
//! Byte counts are whole numbers from 0 to 2^53, with allocated and largest
//! free at most reserved. Other keys with scalar values are ignored, so a
//! writer may add context; nested values are refused.
//!
//! # Several processes on one GPU
//!
//! Reserved and allocated are summed. The largest free block is the largest
//! allocation that *every* reporting process can still make without an
//! out-of-memory error. A process can serve its next allocation from a free
//! block of its own pool, or from a fresh segment out of the device's free
//! memory `D` (NVML's `memory_free_bytes`); pools are private, so one
//! process's cache never serves another. Its headroom is `max(own largest
//! free, D)`, and the GPU's is the smallest of those: `max(D, MIN over
//! processes of largest free)`.
//!
//! - MAX over processes would hide the fragmented process: the one that
//!   OOMs is the one with no big block left, whatever its neighbours hold.
//! - MIN without `D` would cry wolf: a process whose pool is simply full
//!   (allocated equals reserved, normal after warm-up) reads 0 while the
//!   device has plenty left for a new segment.
//!
//! Without `D` from the source, `largest_free_bytes` is left as the source
//! gave it. PyTorch also frees its own wholly free segments and retries on
//! OOM; counting those would add to `D`, so the figure errs low, towards an
//! early warning.
//!
//! # Rules
//!
//! - A file whose timestamp is more than `max_age` old is stale and ignored
//!   (a process that exits leaves its file behind; delete it on exit to drop
//!   its numbers sooner). One more than `max_age` in the future is refused:
//!   milliseconds written as seconds.
//! - A file that is not valid, bigger than [`MAX_FILE_BYTES`], or names no
//!   GPU of the fleet is skipped and logged once; again only once it changes
//!   (path, size, mtime and inode). The others still apply.
//! - At most [`MAX_FILES`] files are read per collection (which ones is up
//!   to the directory's order), and at most [`MAX_ENTRIES`] names looked at.
//! - A missing or unreadable directory is logged once and changes nothing.
//! - Files of a lost GPU (`up == false`) are not applied: its readings stay
//!   empty.

pub mod file;

use file::{Stats, read};

use super::{Files, Filler, Seen};
use model::{Gpu, Readings};
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

/// A stats file is ~200 bytes; anything near this is not one.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Files read per collection: more processes than that on one node is a
/// leak of files, not a workload.
pub const MAX_FILES: usize = 1024;
/// Directory entries looked at per collection, temporary files included,
/// so a directory flooded with other names cannot stall the poller.
pub const MAX_ENTRIES: usize = 8 * MAX_FILES;

/// What one [`WorkloadStats::apply`] did; the filler logs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Fresh files laid over a GPU or MIG instance.
    pub applied: usize,
    /// Files older than `max_age`.
    pub stale: usize,
    /// Files skipped as bad (invalid, too big, unknown GPU, future time),
    /// whether logged now or before.
    pub rejected: usize,
    /// Problems to log, found by this call. Each is reported once, until
    /// it changes: a file's new version, the directory failing anew, the
    /// limit reached anew.
    pub problems: Vec<String>,
}

/// Reads the stats directory on every collection; remembers each file's
/// parse by version so an unchanged file is neither re-read nor re-logged.
pub struct WorkloadStats {
    dir: PathBuf,
    max_age: f64,
    files: Files<Stats>,
    /// The last (applied, stale, rejected) counts logged.
    counts: (usize, usize, usize),
}

/// Where a file's numbers go: a GPU, or one of its MIG instances.
type Target = (usize, Option<usize>);

struct Sum {
    reserved: u64,
    allocated: u64,
    min_largest_free: u64,
}

impl WorkloadStats {
    pub fn new(dir: PathBuf, max_age: Duration) -> WorkloadStats {
        WorkloadStats {
            dir,
            max_age: max_age.as_secs_f64(),
            files: Files::default(),
            counts: (0, 0, 0),
        }
    }

    /// Reads the directory and fills `allocator_reserved_bytes`,
    /// `allocator_allocated_bytes` and `largest_free_bytes` of every GPU or
    /// MIG instance with a fresh file (see the module doc for how several
    /// combine). Others keep what the source gave. `now` is the wall clock
    /// in Unix seconds, as files are stamped: not the simulator's replayed
    /// past, against which every file would be in the future.
    pub fn apply(&mut self, now: f64, gpus: &mut [Gpu]) -> Outcome {
        let mut out = Outcome::default();
        let Some(entries) = self.files.list(&self.dir, &mut out.problems) else {
            return out;
        };

        let mut present = HashSet::new();
        let mut sums: HashMap<Target, Sum> = HashMap::new();
        let mut limit_hit = false;
        let max_age = self.max_age;
        for (n, entry) in entries.enumerate() {
            if n >= MAX_ENTRIES {
                limit_hit = true;
                break;
            }
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !name.ends_with(".json") || name.starts_with('.') {
                continue;
            }
            if present.len() >= MAX_FILES {
                limit_hit = true;
                break;
            }
            let path = entry.path();
            let Some(seen) = self.files.look(&path, read) else {
                continue; // gone since the listing: renamed over or deleted
            };
            present.insert(path.clone());
            let target = match verdict(seen, now, max_age, gpus) {
                Verdict::Fresh(target) => target,
                Verdict::Stale => {
                    out.stale += 1;
                    continue;
                }
                Verdict::Bad(why) => {
                    out.rejected += 1;
                    if !seen.logged {
                        seen.logged = true;
                        out.problems.push(format!("{path:?}: {why}"));
                    }
                    continue;
                }
            };
            // A lost GPU's readings stay empty; its files are not bad.
            if !gpus.get(target.0).is_some_and(|g| g.up) {
                continue;
            }
            let Ok(s) = &seen.parsed else { continue };
            out.applied += 1;
            let sum = sums.entry(target).or_insert(Sum {
                reserved: 0,
                allocated: 0,
                min_largest_free: u64::MAX,
            });
            // At most MAX_FILES addends of at most 2^53: no overflow.
            sum.reserved += s.reserved_bytes;
            sum.allocated += s.allocated_bytes;
            sum.min_largest_free = sum.min_largest_free.min(s.largest_free_bytes);
        }
        let limits = (MAX_FILES, MAX_ENTRIES);
        self.files
            .done(&self.dir, &present, limit_hit, limits, &mut out.problems);

        for ((g, m), sum) in sums {
            let Some(gpu) = gpus.get_mut(g) else { continue };
            let r = match m {
                None => &mut gpu.readings,
                Some(m) => match gpu.mig.get_mut(m) {
                    Some(mig) => &mut mig.readings,
                    None => continue,
                },
            };
            fill(r, &sum);
        }
        out
    }
}

impl Filler for WorkloadStats {
    /// Applies the stats files and logs what is new: each problem once,
    /// and (at debug level) the counts when they change.
    fn fill(&mut self, now: f64, gpus: &mut [Gpu]) {
        let out = self.apply(now, gpus);
        for problem in &out.problems {
            log::warn!("workload stats: {problem}");
        }
        let counts = (out.applied, out.stale, out.rejected);
        if counts != self.counts {
            self.counts = counts;
            log::debug!(
                "workload stats: {} files applied, {} stale, {} refused",
                out.applied,
                out.stale,
                out.rejected
            );
        }
    }
}

enum Verdict {
    Fresh(Target),
    Stale,
    Bad(String),
}

fn verdict(seen: &Seen<Stats>, now: f64, max_age: f64, gpus: &[Gpu]) -> Verdict {
    let s = match &seen.parsed {
        Ok(s) => s,
        Err(e) => return Verdict::Bad(e.clone()),
    };
    let (at, what) = match s.timestamp {
        Some(t) => (t, "timestamp"),
        None => (seen.mtime, "mtime"),
    };
    if now - at > max_age {
        return Verdict::Stale;
    }
    if at - now > max_age {
        return Verdict::Bad(format!(
            "{what}: {at} is {:.0}s in the future; Unix seconds expected",
            at - now
        ));
    }
    match target(gpus, &s.gpu_uuid) {
        Some(t) => Verdict::Fresh(t),
        None => Verdict::Bad(format!(
            "gpu_uuid: no GPU or MIG instance {:?} here",
            s.gpu_uuid
        )),
    }
}

/// The GPU or MIG instance a UUID names, in NVML's spelling or bare.
fn target(gpus: &[Gpu], uuid: &str) -> Option<Target> {
    let matches = |nvml: &str, prefix: &str| {
        if nvml.eq_ignore_ascii_case(uuid) {
            return true;
        }
        let (Some(head), Some(rest)) = (nvml.get(..prefix.len()), nvml.get(prefix.len()..)) else {
            return false;
        };
        head.eq_ignore_ascii_case(prefix) && rest.eq_ignore_ascii_case(uuid)
    };
    for (g, gpu) in gpus.iter().enumerate() {
        if matches(&gpu.uuid, "GPU-") {
            return Some((g, None));
        }
        // Any compute instance's MIG UUID names its GPU instance.
        let mig = |m: &model::MigInstance| {
            matches(&m.uuid, "MIG-") || m.compute.iter().any(|c| matches(&c.uuid, "MIG-"))
        };
        if let Some(m) = gpu.mig.iter().position(mig) {
            return Some((g, Some(m)));
        }
    }
    None
}

fn fill(r: &mut Readings, sum: &Sum) {
    r.allocator_reserved_bytes = Some(sum.reserved as f64);
    r.allocator_allocated_bytes = Some(sum.allocated as f64);
    if let Some(device_free) = r.memory_free_bytes {
        r.largest_free_bytes = Some(device_free.max(sum.min_largest_free as f64));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use model::MigInstance;
    use std::fs;
    use std::time::{SystemTime, UNIX_EPOCH};

    const GIB: u64 = 1 << 30;
    const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30);
    pub(super) const GPU0: &str = "GPU-0b42632a-bc5c-f731-724b-6936a19c4b24";
    const GPU1: &str = "GPU-11111111-2222-3333-4444-555555555555";
    const MIG1: &str = "MIG-66666666-7777-8888-9999-aaaaaaaaaaaa";

    /// A directory of its own under the temp dir, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let p = std::env::temp_dir().join(format!(
                "gpu-exporter-workload-{}-{name}",
                std::process::id()
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Dir(p)
        }

        /// As a writer should: a temporary file renamed over the old one.
        fn put(&self, name: &str, text: &str) {
            let tmp = self.0.join(format!(".{name}.tmp"));
            fs::write(&tmp, text).unwrap();
            fs::rename(&tmp, self.0.join(name)).unwrap();
        }

        fn stats(&self) -> WorkloadStats {
            WorkloadStats::new(self.0.clone(), DEFAULT_MAX_AGE)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn now() -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    }

    pub(super) fn doc(uuid: &str, reserved: u64, allocated: u64, free: u64, at: f64) -> String {
        format!(
            r#"{{"gpu_uuid": "{uuid}", "pid": 7, "reserved_bytes": {reserved},
            "allocated_bytes": {allocated}, "largest_free_bytes": {free}, "timestamp": {at}}}"#
        )
    }

    fn readings(free_gib: u64) -> Readings {
        Readings {
            memory_total_bytes: Some((80 * GIB) as f64),
            memory_free_bytes: Some((free_gib * GIB) as f64),
            ..Readings::default()
        }
    }

    /// GPU 0 with 1 GiB free; GPU 1 in MIG mode, its instance 2 GiB free.
    fn fleet() -> Vec<Gpu> {
        vec![
            Gpu {
                index: 0,
                uuid: GPU0.into(),
                up: true,
                readings: readings(1),
                ..Gpu::default()
            },
            Gpu {
                index: 1,
                uuid: GPU1.into(),
                up: true,
                readings: readings(40),
                mig: vec![MigInstance {
                    uuid: MIG1.into(),
                    gpu_instance_id: 1,
                    profile: "3g.40gb".into(),
                    compute: Vec::new(),
                    readings: readings(2),
                }],
                ..Gpu::default()
            },
        ]
    }

    fn triple(r: &Readings) -> (Option<f64>, Option<f64>, Option<f64>) {
        (
            r.allocator_reserved_bytes,
            r.allocator_allocated_bytes,
            r.largest_free_bytes,
        )
    }

    fn gib(n: u64) -> Option<f64> {
        Some((n * GIB) as f64)
    }

    #[test]
    fn several_processes_sum_and_the_worst_headroom_counts() {
        let d = Dir::new("sum");
        let t = now();
        // GPU 0 has 1 GiB free on the device. Process a keeps a 6 GiB
        // block, process b only 3 GiB: b is the one that would OOM first.
        d.put("a.json", &doc(GPU0, 40 * GIB, 30 * GIB, 6 * GIB, t));
        d.put("b.json", &doc(GPU0, 20 * GIB, 15 * GIB, 3 * GIB, t));
        let mut gpus = fleet();
        let out = d.stats().apply(t, &mut gpus);
        assert_eq!((out.applied, out.rejected, out.problems.len()), (2, 0, 0));
        assert_eq!(triple(&gpus[0].readings), (gib(60), gib(45), gib(3)));
        // A full pool (0 free) is no risk while the device has room for a
        // new segment: the device's free memory is that process's headroom.
        d.put("b.json", &doc(GPU0, 20 * GIB, 20 * GIB, 0, t));
        let mut gpus = fleet();
        d.stats().apply(t, &mut gpus);
        assert_eq!(triple(&gpus[0].readings), (gib(60), gib(50), gib(1)));
        // Without the device's free memory the rule cannot be applied.
        let mut gpus = fleet();
        gpus[0].readings.memory_free_bytes = None;
        gpus[0].readings.largest_free_bytes = Some(5.0);
        d.stats().apply(t, &mut gpus);
        assert_eq!(triple(&gpus[0].readings), (gib(60), gib(50), Some(5.0)));
        // GPU 1 had no file: as the source left it.
        assert_eq!(gpus[1], fleet()[1]);
    }

    #[test]
    fn mig_and_bare_uuids_match() {
        let d = Dir::new("mig");
        let t = now();
        d.put("mig.json", &doc(MIG1, 10 * GIB, 4 * GIB, 5 * GIB, t));
        // Bare and in other case, as torch prints it.
        let bare = GPU0.trim_start_matches("GPU-").to_uppercase();
        d.put("bare.json", &doc(&bare, 8 * GIB, 8 * GIB, 0, t));
        let mut gpus = fleet();
        let out = d.stats().apply(t, &mut gpus);
        assert_eq!((out.applied, out.rejected), (2, 0));
        assert_eq!(triple(&gpus[1].mig[0].readings), (gib(10), gib(4), gib(5)));
        assert_eq!(triple(&gpus[1].readings), (None, None, None));
        assert_eq!(triple(&gpus[0].readings), (gib(8), gib(8), gib(1)));
        // A prefix alone, or the wrong prefix, names nothing.
        d.put("bare.json", &doc("GPU-", 8 * GIB, 8 * GIB, 0, t));
        d.put(
            "mig.json",
            &doc(&MIG1.replace("MIG-", "GPU-"), GIB, 0, 0, t),
        );
        let mut gpus = fleet();
        let out = d.stats().apply(t, &mut gpus);
        assert_eq!((out.applied, out.rejected), (0, 2));
    }

    #[test]
    fn stale_files_are_ignored() {
        let d = Dir::new("stale");
        let t = now();
        d.put("old.json", &doc(GPU0, 10 * GIB, 5 * GIB, 5 * GIB, t - 31.0));
        d.put("new.json", &doc(GPU0, 2 * GIB, GIB, GIB, t - 29.0));
        let mut gpus = fleet();
        let mut w = d.stats();
        let out = w.apply(t, &mut gpus);
        assert_eq!((out.applied, out.stale, out.rejected), (1, 1, 0));
        assert_eq!(triple(&gpus[0].readings), (gib(2), gib(1), gib(1)));
        // Both stale later on: the readings stay the source's.
        let mut gpus = fleet();
        let out = w.apply(t + 60.0, &mut gpus);
        assert_eq!((out.applied, out.stale), (0, 2));
        assert_eq!(gpus, fleet());
        // Without a timestamp the file's mtime counts.
        let mtime = r#"{"gpu_uuid":"GPU-0b42632a-bc5c-f731-724b-6936a19c4b24",
            "reserved_bytes":1,"allocated_bytes":1,"largest_free_bytes":0}"#;
        d.put("old.json", mtime);
        fs::remove_file(d.0.join("new.json")).unwrap();
        let out = w.apply(now(), &mut fleet());
        assert_eq!((out.applied, out.stale), (1, 0));
        let out = w.apply(now() + 31.0, &mut fleet());
        assert_eq!((out.applied, out.stale), (0, 1));
    }

    #[test]
    fn a_timestamp_in_the_future_is_refused() {
        let d = Dir::new("future");
        let t = now();
        // Milliseconds instead of seconds.
        d.put("ms.json", &doc(GPU0, GIB, 0, 0, t * 1000.0));
        d.put("skew.json", &doc(GPU0, GIB, 0, 0, t + 5.0));
        let mut gpus = fleet();
        let out = d.stats().apply(t, &mut gpus);
        assert_eq!((out.applied, out.rejected, out.problems.len()), (1, 1, 1));
        assert_eq!(gpus[0].readings.allocator_reserved_bytes, gib(1));
    }

    #[test]
    fn a_bad_file_is_skipped_and_logged_once() {
        let d = Dir::new("bad");
        let t = now();
        d.put("good.json", &doc(GPU0, 4 * GIB, 2 * GIB, GIB, t));
        d.put("garbage.json", "{\"gpu_uuid\": ");
        d.put("unknown.json", &doc("GPU-nope", GIB, 0, 0, t));
        d.put(
            "negative.json",
            &doc(GPU1, GIB, 0, 0, t).replace("\"pid\": 7", "\"pid\": -7"),
        );
        let mut w = d.stats();
        let mut gpus = fleet();
        let out = w.apply(t, &mut gpus);
        assert_eq!(
            (out.applied, out.stale, out.rejected, out.problems.len()),
            (1, 0, 3, 3)
        );
        assert_eq!(triple(&gpus[0].readings), (gib(4), gib(2), gib(1)));
        assert_eq!(gpus[1], fleet()[1]);
        // Unchanged: still skipped, not logged again.
        let out = w.apply(t + 1.0, &mut fleet());
        assert_eq!((out.applied, out.rejected, out.problems.len()), (1, 3, 0));
        // A new version of a bad file is logged again; a fixed one applies.
        d.put("garbage.json", "{\"gpu_uuid\": 12}");
        d.put("negative.json", &doc(GPU1, GIB, 0, 0, t));
        let mut gpus = fleet();
        let out = w.apply(t + 2.0, &mut gpus);
        assert_eq!((out.applied, out.rejected, out.problems.len()), (2, 2, 1));
        assert_eq!(gpus[1].readings.allocator_reserved_bytes, gib(1));
        // The unknown GPU's file applies once the GPU is there, and the
        // file of the GPU it replaced is logged now.
        let mut gpus = fleet();
        gpus[1].uuid = "GPU-nope".into();
        let out = w.apply(t + 3.0, &mut gpus);
        assert_eq!((out.applied, out.rejected, out.problems.len()), (2, 2, 1));
        assert_eq!(gpus[1].readings.allocator_reserved_bytes, gib(1));
    }

    #[test]
    fn oversized_files_are_refused() {
        let d = Dir::new("big");
        let t = now();
        let exact = doc(GPU0, GIB, 0, 0, t);
        let pad = MAX_FILE_BYTES as usize - exact.len();
        d.put("exact.json", &format!("{exact}{}", " ".repeat(pad)));
        d.put("over.json", &format!("{exact}{}", " ".repeat(pad + 1)));
        let mut gpus = fleet();
        let mut w = d.stats();
        let out = w.apply(t, &mut gpus);
        assert_eq!((out.applied, out.rejected, out.problems.len()), (1, 1, 1));
        assert_eq!(gpus[0].readings.allocator_reserved_bytes, gib(1));
        assert_eq!(w.apply(t, &mut fleet()).problems.len(), 0);
        // One that grew past the limit since its stat is refused too.
        let grown = fs::File::open(d.0.join("over.json")).unwrap();
        assert!(read(grown, MAX_FILE_BYTES).unwrap_err().contains("at most"));
    }

    #[test]
    fn a_fifo_never_blocks_the_collector() {
        let d = Dir::new("fifo");
        let t = now();
        d.put("good.json", &doc(GPU0, GIB, 0, 0, t));
        let fifo = d.0.join("pipe.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("SKIP: mkfifo failed");
            return;
        }
        let started = std::time::Instant::now();
        let out = d.stats().apply(t, &mut fleet());
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!((out.applied, out.rejected), (1, 1));
    }

    #[test]
    fn only_json_names_are_read() {
        let d = Dir::new("names");
        let t = now();
        d.put("p.json", &doc(GPU0, GIB, 0, 0, t));
        for name in [".p.json", "p.json.tmp", "p.tmp", "p.txt", "json"] {
            d.put(name, &doc(GPU0, 100 * GIB, 0, 0, t));
        }
        fs::create_dir(d.0.join("dir.json")).unwrap();
        let mut gpus = fleet();
        let out = d.stats().apply(t, &mut gpus);
        assert_eq!((out.applied, out.rejected), (1, 1));
        assert_eq!(gpus[0].readings.allocator_reserved_bytes, gib(1));
    }

    #[test]
    fn a_missing_directory_is_logged_once_and_changes_nothing() {
        let d = Dir::new("missing");
        let gone = d.0.join("not-yet");
        let mut w = WorkloadStats::new(gone.clone(), DEFAULT_MAX_AGE);
        let mut gpus = fleet();
        assert_eq!(w.apply(now(), &mut gpus).problems.len(), 1);
        assert_eq!(w.apply(now(), &mut gpus).problems.len(), 0);
        assert_eq!(gpus, fleet());
        fs::create_dir(&gone).unwrap();
        fs::write(gone.join("p.json"), doc(GPU0, GIB, 0, 0, now())).unwrap();
        let out = w.apply(now(), &mut gpus);
        assert_eq!((out.applied, out.problems.len()), (1, 0));
        fs::remove_dir_all(&gone).unwrap();
        assert_eq!(w.apply(now(), &mut fleet()).problems.len(), 1);
    }

    #[test]
    fn a_lost_gpu_stays_empty() {
        let d = Dir::new("lost");
        let t = now();
        d.put("p.json", &doc(GPU0, GIB, 0, 0, t));
        let mut gpus = fleet();
        gpus[0].up = false;
        gpus[0].readings = Readings::default();
        let out = d.stats().apply(t, &mut gpus);
        assert_eq!((out.applied, out.rejected), (0, 0));
        assert_eq!(gpus[0].readings, Readings::default());
    }

    #[test]
    fn at_most_max_files_are_read() {
        let d = Dir::new("many");
        let t = now();
        for i in 0..=MAX_FILES {
            d.put(&format!("{i}.json"), &doc(GPU0, 1, 0, 0, t));
        }
        let mut w = d.stats();
        let mut gpus = fleet();
        let out = w.apply(t, &mut gpus);
        assert_eq!((out.applied, out.problems.len()), (MAX_FILES, 1));
        assert_eq!(
            gpus[0].readings.allocator_reserved_bytes,
            Some(MAX_FILES as f64)
        );
        assert_eq!(w.apply(t, &mut fleet()).problems.len(), 0);
        fs::remove_file(d.0.join("0.json")).unwrap();
        assert_eq!(w.apply(t, &mut fleet()).problems.len(), 0);
        assert_eq!(w.files.remembered(), MAX_FILES);
    }
}
