//! Batch jobs per GPU from `--hpc.job-mapping-dir`, in the layout
//! dcgm-exporter reads: one file per GPU, named by its NVML index (`0`,
//! `1`, …) or `GPU.GI` for a MIG instance (`1.2`: GPU 1, GPU instance 2),
//! holding the ids of the jobs running on it, one per line. A Slurm
//! prolog writes the file and its epilog removes it, so a file is current
//! for as long as it exists: unlike the workload stats, there is no age
//! rule.
//!
//! The workload directory's other rules hold:
//!
//! - names starting with `.` or ending in `.tmp` are never read, so a
//!   prolog can write a temporary file and rename it;
//! - a file with another name, over [`MAX_FILE_BYTES`], holding a bad id
//!   (empty lines aside: longer than [`MAX_JOB_ID`] bytes, control
//!   characters, not UTF-8) or more than [`MAX_JOBS`] of them, or naming
//!   no GPU of the fleet, is skipped and logged once; again only once it
//!   changes (path, size, mtime and inode). The others still apply.
//!   Other names are never read, and only the first [`ODD_NAMES_LOGGED`]
//!   are logged, then one line that there are more;
//! - at most [`MAX_FILES`] files are read per collection, and at most
//!   [`MAX_ENTRIES`] names looked at;
//! - a missing or unreadable directory is logged once and changes nothing.

use super::{Files, Filler};
use model::Gpu;
use std::collections::HashSet;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A job file holds a few ids; anything near this is not one.
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Job ids per GPU: the `hpc_job` label's bound.
pub const MAX_JOBS: usize = 16;
/// The longest job id taken (Slurm's are numbers; arrays `123_4`).
pub const MAX_JOB_ID: usize = 128;
/// Files read per collection: a GPU each, with room.
pub const MAX_FILES: usize = 1024;
/// Directory entries looked at per collection.
pub const MAX_ENTRIES: usize = 8 * MAX_FILES;

/// The GPU a file name names: its index, and the GPU instance for a MIG
/// instance. `None`: not a job file's name.
pub fn target(name: &str) -> Option<(u32, Option<u32>)> {
    let number = |s: &str| {
        (!s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    match name.split_once('.') {
        None => Some((number(name)?, None)),
        Some((gpu, gi)) => Some((number(gpu)?, Some(number(gi)?))),
    }
}

/// The job ids of one file, in its order, without duplicates.
pub fn parse(text: &[u8]) -> Result<Vec<String>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8".to_string())?;
    let mut jobs: Vec<String> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let id = line.trim();
        if id.is_empty() {
            continue;
        }
        if id.len() > MAX_JOB_ID || id.chars().any(char::is_control) {
            return Err(format!(
                "line {}: not a job id (at most {MAX_JOB_ID} bytes, no control characters)",
                n + 1
            ));
        }
        if !jobs.iter().any(|j| j == id) {
            if jobs.len() == MAX_JOBS {
                return Err(format!("more than {MAX_JOBS} job ids"));
            }
            jobs.push(id.to_string());
        }
    }
    Ok(jobs)
}

fn read(mut file: fs::File, len: u64) -> Result<Vec<String>, String> {
    if len > MAX_FILE_BYTES {
        return Err(format!("{len} bytes; at most {MAX_FILE_BYTES}"));
    }
    let mut buf = Vec::new();
    // One byte past the limit tells a file that grew since the stat.
    file.by_ref()
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("unreadable: {e}"))?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("over {MAX_FILE_BYTES} bytes"));
    }
    parse(&buf)
}

/// Reads the job directory on every collection.
pub struct JobMapping {
    dir: PathBuf,
    files: Files<Vec<String>>,
    /// Names that are no job file's, logged once each, the first
    /// [`ODD_NAMES_LOGGED`] of them; then one line says there are more.
    odd_names: HashSet<String>,
    said_more: bool,
}

/// How many names that are no job file's are logged one by one: a
/// directory of junk must not flood the log.
pub const ODD_NAMES_LOGGED: usize = 8;

impl JobMapping {
    pub fn new(dir: PathBuf) -> JobMapping {
        JobMapping {
            dir,
            files: Files::default(),
            odd_names: HashSet::new(),
            said_more: false,
        }
    }

    fn odd(&mut self, name: &str, path: &Path, problems: &mut Vec<String>) {
        if self.odd_names.contains(name) || self.said_more {
            return;
        }
        if self.odd_names.len() == ODD_NAMES_LOGGED {
            self.said_more = true;
            problems.push(format!(
                "{:?}: more names that are not a GPU index or GPU.GI; skipped, and no longer logged",
                self.dir
            ));
            return;
        }
        self.odd_names.insert(name.to_string());
        problems.push(format!("{path:?}: not a GPU index or GPU.GI; skipped"));
    }

    /// Lays each file's jobs on its GPU or MIG instance; the problems
    /// found by this call, each once.
    pub fn apply(&mut self, gpus: &mut [Gpu]) -> Vec<String> {
        let mut problems = Vec::new();
        let Some(entries) = self.files.list(&self.dir, &mut problems) else {
            return problems;
        };
        let mut present = HashSet::new();
        let mut limit_hit = false;
        for (n, entry) in entries.enumerate() {
            if n >= MAX_ENTRIES || present.len() >= MAX_FILES {
                limit_hit = true;
                break;
            }
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name.ends_with(".tmp") {
                continue;
            }
            let Some((index, gi)) = target(&name) else {
                self.odd(&name, &entry.path(), &mut problems);
                continue;
            };
            let path = entry.path();
            let Some(seen) = self.files.look(&path, read) else {
                continue; // gone since the listing
            };
            present.insert(path.clone());
            let place = gpus
                .iter_mut()
                .find(|g| g.index == index)
                .and_then(|g| match gi {
                    None => Some(&mut g.readings),
                    Some(gi) => g
                        .mig
                        .iter_mut()
                        .find(|m| m.gpu_instance_id == gi)
                        .map(|m| &mut m.readings),
                });
            let problem = match (&seen.parsed, place) {
                (Ok(jobs), Some(r)) => {
                    r.jobs.clone_from(jobs);
                    continue;
                }
                (Err(e), _) => e.clone(),
                (Ok(_), None) => "names no GPU or MIG instance here".to_string(),
            };
            if !seen.logged {
                seen.logged = true;
                problems.push(format!("{path:?}: {problem}"));
            }
        }
        let limits = (MAX_FILES, MAX_ENTRIES);
        self.files
            .done(&self.dir, &present, limit_hit, limits, &mut problems);
        problems
    }
}

impl Filler for JobMapping {
    fn fill(&mut self, _now: f64, gpus: &mut [Gpu]) {
        for problem in self.apply(gpus) {
            log::warn!("hpc job mapping: {problem}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::MigInstance;

    #[test]
    fn names_and_contents() {
        assert_eq!(target("0"), Some((0, None)));
        assert_eq!(target("12.3"), Some((12, Some(3))));
        for bad in ["", "a", "1.", ".1", "1.2.3", "-1", "+1", "1 ", "9999999999"] {
            assert_eq!(target(bad), None, "{bad:?}");
        }
        assert_eq!(parse(b"4711\n\n 4712 \n4711\n").unwrap(), ["4711", "4712"]);
        assert_eq!(parse(b"").unwrap(), Vec::<String>::new());
        assert!(parse(b"a\x01b\n").unwrap_err().starts_with("line 1"));
        assert!(parse(&[0xff]).is_err());
        let many: String = (0..=MAX_JOBS).map(|i| format!("{i}\n")).collect();
        assert!(parse(many.as_bytes()).is_err());
        let long = "9".repeat(MAX_JOB_ID + 1);
        assert!(parse(long.as_bytes()).is_err());
    }

    #[test]
    fn a_directory_of_job_files() {
        let dir = std::env::temp_dir().join(format!("gpu-exporter-jobs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &[u8]| fs::write(dir.join(name), text).unwrap();
        write("0", b"100\n101\n");
        write("1.2", b"200\n");
        write("7", b"700\n"); // no GPU 7
        write("notes.txt", b"x"); // not a job file's name
        write(".0.tmp", b"garbage");
        write("1", &[b'9'; MAX_FILE_BYTES as usize + 1]);
        let mut gpus = vec![
            Gpu {
                index: 0,
                ..Gpu::default()
            },
            Gpu {
                index: 1,
                mig: vec![MigInstance {
                    gpu_instance_id: 2,
                    ..MigInstance::default()
                }],
                ..Gpu::default()
            },
        ];
        let mut m = JobMapping::new(dir.clone());
        let problems = m.apply(&mut gpus);
        assert_eq!(gpus[0].readings.jobs, ["100", "101"]);
        assert_eq!(gpus[1].mig[0].readings.jobs, ["200"]);
        assert!(gpus[1].readings.jobs.is_empty());
        assert_eq!(problems.len(), 3, "{problems:?}");
        // Logged once: the same files say nothing the second time.
        for g in &mut gpus {
            g.readings.jobs.clear();
        }
        assert!(m.apply(&mut gpus).is_empty());
        assert_eq!(gpus[0].readings.jobs, ["100", "101"]);
        // An epilog removes the file: the job is gone at once.
        fs::remove_file(dir.join("0")).unwrap();
        gpus[0].readings.jobs.clear();
        m.apply(&mut gpus);
        assert!(gpus[0].readings.jobs.is_empty());
        fs::remove_dir_all(&dir).unwrap();
        let problems = m.apply(&mut gpus);
        assert_eq!(problems.len(), 1);
        assert!(m.apply(&mut gpus).is_empty());
    }

    /// Junk names neither take the file budget nor flood the log.
    #[test]
    fn a_directory_of_junk_names_logs_a_few_and_still_reads_the_job_file() {
        let dir =
            std::env::temp_dir().join(format!("gpu-exporter-jobs-junk-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for i in 0..5_000 {
            fs::write(dir.join(format!("junk-{i}")), b"1\n").unwrap();
        }
        fs::write(dir.join("0"), b"4711\n").unwrap();
        let mut gpus = vec![Gpu::default()];
        let mut m = JobMapping::new(dir.clone());
        let problems = m.apply(&mut gpus);
        assert_eq!(gpus[0].readings.jobs, ["4711"]);
        assert_eq!(problems.len(), ODD_NAMES_LOGGED + 1, "{problems:?}");
        assert!(
            problems.last().unwrap().contains("more names"),
            "{problems:?}"
        );
        assert!(m.apply(&mut gpus).is_empty());
        assert!(m.odd_names.len() <= ODD_NAMES_LOGGED);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_out_of_the_directory_is_refused_and_one_within_it_followed() {
        let dir = std::env::temp_dir().join(format!("gpu-exporter-jobs-ln-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("..data")).unwrap();
        let outside = dir.with_extension("secret");
        fs::write(&outside, b"vm\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("0")).unwrap();
        // A ConfigMap volume's layout: the name links into ..data.
        fs::write(dir.join("..data/1"), b"4711\n").unwrap();
        std::os::unix::fs::symlink("..data/1", dir.join("1")).unwrap();
        let mut gpus: Vec<Gpu> = (0..2)
            .map(|index| Gpu {
                index,
                ..Gpu::default()
            })
            .collect();
        let problems = JobMapping::new(dir.clone()).apply(&mut gpus);
        assert!(
            gpus[0].readings.jobs.is_empty(),
            "{:?}",
            gpus[0].readings.jobs
        );
        assert_eq!(gpus[1].readings.jobs, ["4711"]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("a symbolic link out of its directory"),
            "{problems:?}"
        );
        fs::remove_dir_all(&dir).unwrap();
        fs::remove_file(&outside).unwrap();
    }
}
