//! Which container and pod each GPU process runs in, from
//! `/proc/<pid>/cgroup`. NVML names processes by their host PID, so this
//! only means something where the exporter shares the host's PID
//! namespace (`hostPID: true`, or no container at all): checked once at
//! start from `NSpid` in `/proc/self/status`, which lists one PID per
//! namespace level. Elsewhere the labels are left out, never guessed.
//!
//! The kubelet names a pod's cgroup after its UID and a container's after
//! its runtime id, under either cgroup driver:
//!
//! ```text
//! systemd:  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/cri-containerd-<id>.scope
//! cgroupfs: /kubepods/burstable/pod<uid>/<id>
//! ```
//!
//! (`<uid_>` is the UID with `_` for `-`; the runtime prefix may be
//! `cri-containerd-`, `crio-`, `docker-` or none). `container_id` is the
//! 64-hex id kube-state-metrics shows after `containerd://`, and `pod_uid`
//! joins `kube_pod_info{uid}`.

use super::Filler;
use model::{Gpu, GpuProcess};
use std::io::Read;
use std::path::PathBuf;

/// A cgroup file is a few lines; more is not read.
const MAX_BYTES: u64 = 16 * 1024;

/// Whether `status` (the text of `/proc/self/status`) is a process in the
/// host's PID namespace: its `NSpid` line holds one PID. Without the line
/// (kernels before 4.1) nothing can be told, and the answer is no.
pub fn host_pids(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .is_some_and(|pids| pids.split_whitespace().count() == 1)
}

fn is_hex(s: &str, n: usize) -> bool {
    s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod UID (8-4-4-4-12 hex) with `-` or the systemd driver's `_`.
fn pod_uid(s: &str) -> Option<String> {
    let uid = s.get(..36)?.replace('_', "-");
    let parts: Vec<&str> = uid.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    (parts.len() == 5 && parts.iter().zip(lens).all(|(p, n)| is_hex(p, n)))
        .then(|| uid.to_ascii_lowercase())
}

/// (container id, pod UID) from a cgroup file's text; each empty where
/// its path does not say. The cgroup v2 line (`0::`) wins over v1 lines.
pub fn parse(text: &str) -> (String, String) {
    let mut paths: Vec<&str> = text
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .collect();
    // The unified hierarchy first, where there is one.
    paths.sort_by_key(|p| !text.contains(&format!("0::{p}")));
    for path in paths {
        let mut container = String::new();
        let mut pod = String::new();
        for seg in path.split('/') {
            let seg = seg.strip_suffix(".slice").unwrap_or(seg);
            if let Some(i) = seg.rfind("pod")
                && let Some(uid) = pod_uid(&seg[i + 3..])
                && seg.len() == i + 3 + 36
            {
                pod = uid;
                continue;
            }
            let id = seg.strip_suffix(".scope").unwrap_or(seg);
            let id = ["cri-containerd-", "crio-", "docker-", "containerd-"]
                .iter()
                .find_map(|p| id.strip_prefix(p))
                .unwrap_or(id);
            if is_hex(id, 64) {
                container = id.to_ascii_lowercase();
            }
        }
        if !container.is_empty() || !pod.is_empty() {
            return (container, pod);
        }
    }
    (String::new(), String::new())
}

/// Labels each GPU process with its container and pod.
pub struct ProcessCgroups {
    proc_root: PathBuf,
}

impl ProcessCgroups {
    /// `None` where the host's PIDs are not this process's: then NVML's
    /// PIDs name other processes here, or none.
    pub fn new() -> Option<ProcessCgroups> {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        if !host_pids(&status) {
            log::info!(
                "processes: not in the host's PID namespace; container_id and pod_uid are left out (see docs/attribution.md: hostPID)"
            );
            return None;
        }
        Some(ProcessCgroups {
            proc_root: PathBuf::from("/proc"),
        })
    }

    fn label(&self, p: &mut GpuProcess) {
        let Some(pid) = p.pid else { return };
        let path = self.proc_root.join(pid.to_string()).join("cgroup");
        let Ok(file) = std::fs::File::open(path) else {
            return; // gone, or not ours to read
        };
        let mut text = String::new();
        if file.take(MAX_BYTES).read_to_string(&mut text).is_ok() {
            (p.container_id, p.pod_uid) = parse(&text);
        }
    }
}

impl Filler for ProcessCgroups {
    fn fill(&mut self, _now: f64, gpus: &mut [Gpu]) {
        for g in gpus {
            let migs = g.mig.iter_mut().map(|m| &mut m.readings);
            for r in std::iter::once(&mut g.readings).chain(migs) {
                for p in &mut r.processes {
                    self.label(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4c2f6d8e0b1a3c5e7f9d2b4a6c8e0f1a3b5d7c9e1f3a5b7d9c1e3f5a7b9d1c3e";
    const UID: &str = "0f5c2e9a-7b3d-4e1f-8a6c-2d9b4e7f1a3c";

    #[test]
    fn both_cgroup_drivers_and_runtimes() {
        let uid_ = UID.replace('-', "_");
        let systemd = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid_}.slice/cri-containerd-{ID}.scope\n"
        );
        assert_eq!(parse(&systemd), (ID.into(), UID.into()));
        let cgroupfs = format!(
            "12:memory:/kubepods/besteffort/pod{UID}/{ID}\n11:cpu:/kubepods/besteffort/pod{UID}/{ID}\n"
        );
        assert_eq!(parse(&cgroupfs), (ID.into(), UID.into()));
        let crio = format!("0::/kubepods.slice/kubepods-pod{uid_}.slice/crio-{ID}.scope");
        assert_eq!(parse(&crio), (ID.into(), UID.into()));
        let docker = format!("0::/system.slice/docker-{ID}.scope\n");
        assert_eq!(parse(&docker), (ID.into(), String::new()));
        // A host process, and garbage: nothing.
        for text in [
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            "",
            "garbage",
            "0::/kubepods/podnot-a-uid/xyz\n",
        ] {
            assert_eq!(parse(text), (String::new(), String::new()), "{text:?}");
        }
    }

    #[test]
    fn host_pid_namespace_from_nspid() {
        assert!(host_pids("Name:\tx\nNSpid:\t4242\n"));
        assert!(!host_pids("Name:\tx\nNSpid:\t4242\t7\n"));
        assert!(!host_pids("Name:\tx\n"));
    }
}
