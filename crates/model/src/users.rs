//! Who uses each GPU: the pods the kubelet says hold it, its processes,
//! its batch jobs (per GPU and MIG instance, in [`super::Readings`]), and
//! the kubelet client's state for the node.

/// One container holding a GPU or MIG instance, from the kubelet.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pod {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

/// One process using a GPU's memory, as the source saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuProcess {
    /// The host PID; `None` for the processes past the bound, summed.
    pub pid: Option<u32>,
    /// `None` where the driver cannot say (its "not available" value).
    pub used_bytes: Option<f64>,
    /// From `/proc/<pid>/cgroup` where the host's PIDs are visible;
    /// empty where unknown.
    pub container_id: String,
    pub pod_uid: String,
    /// The MIG compute instance it runs on; `None` on a whole GPU, or
    /// where the source cannot tell.
    pub compute_instance: Option<u32>,
}

/// Adds process `pid`, on MIG compute instance `ci` if any, to a GPU's
/// list. One listed twice on one compute instance (compute and graphics)
/// is kept once, with the larger of its figures.
pub fn add_process(list: &mut Vec<GpuProcess>, pid: u32, ci: Option<u32>, used: Option<f64>) {
    match list
        .iter_mut()
        .find(|q| q.pid == Some(pid) && q.compute_instance == ci)
    {
        Some(q) => {
            q.used_bytes = match (q.used_bytes, used) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            }
        }
        None => list.push(GpuProcess {
            pid: Some(pid),
            used_bytes: used,
            compute_instance: ci,
            ..GpuProcess::default()
        }),
    }
}

/// Processes kept per GPU or MIG instance: the largest, then the rest as
/// one `pid="other"` series.
pub const MAX_PROCESSES: usize = 8;

/// Keeps the `max` processes using the most memory (a process whose use is
/// unknown counts as the least; ties by PID) and sums the rest into one
/// without a PID, so a GPU writes at most `max + 1` process series.
pub fn bound_processes(processes: &mut Vec<GpuProcess>, max: usize) {
    processes.sort_by(|a, b| {
        let used = |p: &GpuProcess| p.used_bytes.unwrap_or(-1.0);
        used(b).total_cmp(&used(a)).then(a.pid.cmp(&b.pid))
    });
    if processes.len() <= max {
        return;
    }
    let used = processes[max..]
        .iter()
        .filter_map(|p| p.used_bytes)
        .fold(None, |sum: Option<f64>, v| Some(sum.unwrap_or(0.0) + v));
    processes.truncate(max);
    processes.push(GpuProcess {
        pid: None,
        used_bytes: used,
        ..GpuProcess::default()
    });
}

/// Failed kubelet calls are counted by these reasons, in this order.
pub const KUBELET_ERRORS: [&str; 7] = [
    "connect",
    "timeout",
    "closed",
    "protocol",
    "grpc",
    "too_large",
    "decode",
];

/// Pods left out of a listing are counted by these reasons.
pub const KUBELET_SKIPPED: [&str; 2] = ["oversize", "over_budget"];

/// A DRA device of NVIDIA's GPU driver held by a container. It names the
/// driver's device, not a GPU: no UUID to join on (see docs/attribution.md, DRA).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct DraDevice {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub claim_namespace: String,
    pub claim: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// The kubelet's pod-resources API as the refresher last saw it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kubelet {
    /// Unix time of the last listing that succeeded; `None` before one.
    pub last_success: Option<f64>,
    /// Failed calls by [`KUBELET_ERRORS`] reason, since start.
    pub errors: [u64; KUBELET_ERRORS.len()],
    /// Pods left out by [`KUBELET_SKIPPED`] reason, since start.
    pub skipped: [u64; KUBELET_SKIPPED.len()],
    /// DRA devices of the last good listing, sorted.
    pub dra: Vec<DraDevice>,
}

/// Pod attribution for the node: the kubelet's state where attribution is
/// on, and whether GPU series carry the pods (`--kubernetes.pod-labels`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kubernetes {
    pub kubelet: Option<Kubelet>,
    pub pod_labels: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_are_bounded_largest_first_and_the_rest_summed() {
        let p = |pid, used: Option<f64>| GpuProcess {
            pid: Some(pid),
            used_bytes: used,
            ..GpuProcess::default()
        };
        let mut v = vec![
            p(5, Some(1.0)),
            p(3, None),
            p(9, Some(7.0)),
            p(2, Some(7.0)),
        ];
        bound_processes(&mut v, 8);
        let pids: Vec<_> = v.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [Some(2), Some(9), Some(5), Some(3)]);
        bound_processes(&mut v, 2);
        assert_eq!(v.len(), 3);
        assert_eq!(
            v[2],
            GpuProcess {
                pid: None,
                used_bytes: Some(1.0),
                ..GpuProcess::default()
            }
        );
        // Nothing known past the bound: the rest is there, its use unknown.
        let mut v = vec![p(1, Some(1.0)), p(2, None), p(3, None)];
        bound_processes(&mut v, 1);
        assert_eq!(
            v[1],
            GpuProcess {
                pid: None,
                used_bytes: None,
                ..GpuProcess::default()
            }
        );
    }
}
