//! Who uses a simulated GPU: the pods, processes and batch jobs a
//! scenario declares, so the demo, the dashboard and the status page show
//! attribution without a cluster. They are what a kubelet, NVML and a
//! Slurm prolog would report, laid on the GPU as the real fillers lay
//! theirs: pods and jobs always, processes under the `processes`
//! collector.

use base::units::GIB;
use model::{GpuProcess, Pod};

#[allow(clippy::question_mark)] // in nanoserde's derived code
mod file {
    use base::json::json_struct;

    json_struct! {
        /// A container holding the GPU, as the kubelet would list it.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct PodSpec {
            pub namespace: String,
            pub pod: String,
            pub container: Option<String>,
        }
    }

    json_struct! {
        /// A process using the GPU's memory, as NVML would list it.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct ProcessSpec {
            pub pid: u32,
            pub used_gib: Option<f64>,
            pub container_id: Option<String>,
            pub pod_uid: Option<String>,
        }
    }
}
pub use file::{PodSpec, ProcessSpec};

/// Per GPU at most: more would be a scenario mistake, not a fleet.
const MAX_USERS: usize = 64;
/// The longest name or id taken.
const MAX_NAME: usize = 253;

/// The pods, processes and jobs of one simulated GPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Users {
    pub(super) pods: Vec<Pod>,
    pub(super) processes: Vec<GpuProcess>,
    pub(super) jobs: Vec<String>,
}

fn name(field: &str, s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > MAX_NAME || s.chars().any(char::is_control) {
        return Err(format!(
            "{field}: {s:?} must be 1 to {MAX_NAME} bytes without control characters"
        ));
    }
    Ok(s.to_string())
}

fn count<T>(field: &str, v: &Option<Vec<T>>) -> Result<(), String> {
    match v {
        Some(v) if v.len() > MAX_USERS => {
            Err(format!("{field}: {} entries; at most {MAX_USERS}", v.len()))
        }
        _ => Ok(()),
    }
}

/// Checks a GPU's `pods`, `processes` and `jobs`; every error names the
/// field. `total` is the GPU's memory in bytes, which no process exceeds.
pub(super) fn check(
    pods: &Option<Vec<PodSpec>>,
    processes: &Option<Vec<ProcessSpec>>,
    jobs: &Option<Vec<String>>,
    total: f64,
) -> Result<Users, String> {
    count("pods", pods)?;
    count("processes", processes)?;
    count("jobs", jobs)?;
    let mut users = Users::default();
    for (i, p) in pods.iter().flatten().enumerate() {
        users.pods.push(Pod {
            namespace: name(&format!("pods[{i}].namespace"), &p.namespace)?,
            pod: name(&format!("pods[{i}].pod"), &p.pod)?,
            container: name(
                &format!("pods[{i}].container"),
                p.container.as_deref().unwrap_or("main"),
            )?,
        });
    }
    users.pods.sort();
    users.pods.dedup();
    for (i, p) in processes.iter().flatten().enumerate() {
        if p.pid == 0 {
            return Err(format!("processes[{i}].pid: 0 is no process"));
        }
        if users.processes.iter().any(|q| q.pid == Some(p.pid)) {
            return Err(format!("processes[{i}].pid: {} is listed twice", p.pid));
        }
        let used = match p.used_gib {
            Some(g) if !(g.is_finite() && (0.0..=total / GIB).contains(&g)) => {
                return Err(format!(
                    "processes[{i}].used_gib: {g} is outside 0..={}",
                    total / GIB
                ));
            }
            used => used.map(|g| (g * GIB).round()),
        };
        let id = |field: &str, v: &Option<String>| match v {
            Some(v) => name(&format!("processes[{i}].{field}"), v),
            None => Ok(String::new()),
        };
        users.processes.push(GpuProcess {
            pid: Some(p.pid),
            used_bytes: used,
            container_id: id("container_id", &p.container_id)?,
            pod_uid: id("pod_uid", &p.pod_uid)?,
            compute_instance: None,
        });
    }
    for (i, j) in jobs.iter().flatten().enumerate() {
        users.jobs.push(name(&format!("jobs[{i}]"), j)?);
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_checked_field_by_field() {
        let pod = |ns: &str, pod: &str| PodSpec {
            namespace: ns.into(),
            pod: pod.into(),
            container: None,
        };
        let proc_ = |pid, gib| ProcessSpec {
            pid,
            used_gib: Some(gib),
            ..ProcessSpec::default()
        };
        let u = check(
            &Some(vec![pod("b", "x"), pod("a", "y"), pod("a", "y")]),
            &Some(vec![proc_(7, 1.5)]),
            &Some(vec!["4711".into()]),
            80.0 * GIB,
        )
        .unwrap();
        assert_eq!(u.pods.len(), 2);
        assert_eq!(u.pods[0].namespace, "a");
        assert_eq!(u.pods[0].container, "main");
        assert_eq!(u.processes[0].used_bytes, Some(1.5 * GIB));
        assert_eq!(u.jobs, ["4711"]);
        for (pods, procs, jobs, want) in [
            (Some(vec![pod("", "x")]), None, None, "pods[0].namespace"),
            (None, Some(vec![proc_(0, 1.0)]), None, "processes[0].pid"),
            (
                None,
                Some(vec![proc_(3, 1.0), proc_(3, 2.0)]),
                None,
                "processes[1].pid",
            ),
            (
                None,
                Some(vec![proc_(3, 81.0)]),
                None,
                "processes[0].used_gib",
            ),
            (None, None, Some(vec!["a\nb".to_string()]), "jobs[0]"),
        ] {
            let e = check(&pods, &procs, &jobs, 80.0 * GIB).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }
}
