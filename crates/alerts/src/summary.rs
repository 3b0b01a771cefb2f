//! Alert annotations: the Prometheus template variables a summary may
//! use, and the queries of the `workloads` annotation, expanded by one
//! scanner for the status page (streamed, escaped as HTML), `/alerts` (a
//! String) and the alert log lines.
//!
//! `{{ $value }}`, `{{ printf "%.1f" $value }}` and `{{ $labels.<name> }}`
//! for the subject's labels are expanded, and so are the three `range`
//! blocks of [`WORKLOADS`], from the same snapshot a scrape renders, and
//! an endpoint's [`REASON`]; anything else stays as written.

use super::Subject;
use base::numbers::{digits, write_u64};
use model::{Gpu, GpuProcess, Readings};
use std::io::Write;

// The blocks as literals, so that [`WORKLOADS`] is their concatenation.
macro_rules! pods {
    () => {
        "{{ range printf \"gpu_pod_info{uuid=%q}\" $labels.uuid | query | sortByLabel \"pod\" }}pod {{ .Labels.namespace }}/{{ .Labels.pod }} ({{ .Labels.container }}) {{ end }}"
    };
}
macro_rules! jobs {
    () => {
        "{{ range printf \"gpu_job_info{uuid=%q}\" $labels.uuid | query | sortByLabel \"hpc_job\" }}job {{ .Labels.hpc_job }} {{ end }}"
    };
}
macro_rules! processes {
    () => {
        "{{ range printf \"gpu_process_memory_used_bytes{uuid=%q}\" $labels.uuid | query | sortByLabel \"pid\" }}pid {{ .Labels.pid }} {{ end }}"
    };
}

/// Why an engine endpoint is down: the reason of its last read, which
/// Prometheus queries from `gpu_exporter_engine_down` and the exporter
/// reads from the alert's subject. Never a label, so that a reason that
/// changes keeps the alert (and its `for`).
pub const REASON: &str = "{{ with printf \"gpu_exporter_engine_down{job=%q,instance=%q,endpoint=%q}\" $labels.job $labels.instance $labels.endpoint | query }}{{ . | first | label \"reason\" }}{{ end }}";

/// The pods on an alert's GPU, its MIG instances included: Prometheus
/// runs the query over `gpu_pod_info`, the exporter reads its snapshot.
const PODS: &str = pods!();
/// Its batch jobs, over `gpu_job_info`.
const JOBS: &str = jobs!();
/// Its processes, over `gpu_process_memory_used_bytes`.
const PROCESSES: &str = processes!();

/// The `workloads` annotation of every rule about a GPU: who uses it,
/// named through annotations only, so that an alert's identity (its
/// expression and labels) never depends on pods.
pub const WORKLOADS: &str = concat!(pods!(), jobs!(), processes!());

/// `template` expanded into `out`; its own text and label values go
/// through `text` (an escaper, say), numbers are written as they are.
/// `gpus` are the snapshot's, for the [`WORKLOADS`] blocks.
pub fn expand_into(
    out: &mut Vec<u8>,
    template: &str,
    subject: &Subject,
    value: f64,
    gpus: &[Gpu],
    text: fn(&mut Vec<u8>, &str),
) {
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        text(out, &rest[..i]);
        rest = &rest[i..];
        if let Some(after) = block(out, rest, subject, gpus, text) {
            rest = after;
            continue;
        }
        let end = rest.find("}}").map_or(rest.len(), |j| j + 2);
        let (var, after) = rest.split_at(end);
        if !variable(out, var, subject, value, text) {
            text(out, &var[..2]);
            rest = &rest[2..];
            continue;
        }
        rest = after;
    }
    text(out, rest);
}

/// `template` expanded, as a String.
pub fn expand(template: &str, subject: &Subject, value: f64, gpus: &[Gpu]) -> String {
    let mut out = Vec::new();
    expand_into(&mut out, template, subject, value, gpus, |out, s| {
        out.extend_from_slice(s.as_bytes())
    });
    // Template text and label values are whole strs; numbers are ASCII.
    String::from_utf8(out).unwrap_or_default()
}

/// One of the [`WORKLOADS`] blocks at the start of `rest`, for a GPU
/// subject: writes what Prometheus' query would list, in its order, and
/// returns the template after the block.
fn block<'t>(
    out: &mut Vec<u8>,
    rest: &'t str,
    subject: &Subject,
    gpus: &[Gpu],
    text: fn(&mut Vec<u8>, &str),
) -> Option<&'t str> {
    if let Some(after) = rest.strip_prefix(REASON) {
        if let Subject::Endpoint { reason, .. } = subject {
            text(out, reason);
        }
        return Some(after);
    }
    let Subject::Gpu { uuid, .. } = subject else {
        return None;
    };
    let gpu = gpus.iter().find(|g| g.uuid == *uuid);
    let targets = || targets(gpu);
    if let Some(after) = rest.strip_prefix(PODS) {
        // sortByLabel "pod" is stable over the series' label order:
        // container, then mig_instance, then namespace.
        in_order(
            targets().flat_map(|(mig, r)| r.pods.iter().map(move |p| (mig, p))),
            |a, b| {
                (&a.1.pod, &a.1.container, a.0, &a.1.namespace).cmp(&(
                    &b.1.pod,
                    &b.1.container,
                    b.0,
                    &b.1.namespace,
                ))
            },
            |(_, p)| {
                text(out, "pod ");
                text(out, &p.namespace);
                text(out, "/");
                text(out, &p.pod);
                text(out, " (");
                text(out, &p.container);
                text(out, ") ");
            },
        );
        return Some(after);
    }
    if let Some(after) = rest.strip_prefix(JOBS) {
        in_order(
            targets().flat_map(|(mig, r)| r.jobs.iter().map(move |j| (mig, j))),
            |a, b| (a.1, a.0).cmp(&(b.1, b.0)),
            |(_, j)| {
                text(out, "job ");
                text(out, j);
                text(out, " ");
            },
        );
        return Some(after);
    }
    if let Some(after) = rest.strip_prefix(PROCESSES) {
        // Only processes the scrape writes: a known memory use.
        let mut buf = [0u8; 20];
        in_order(
            targets().flat_map(|(mig, r)| {
                let listed = r.processes.iter().filter(|p| p.used_bytes.is_some());
                listed.map(move |p| (mig, p))
            }),
            |a, b| {
                // As strings: "other" after the digits, "10" before "9".
                (pid_str(a.1, &mut [0; 20]).cmp(pid_str(b.1, &mut [0; 20]))).then(a.0.cmp(&b.0))
            },
            |(_, p)| {
                text(out, "pid ");
                text(out, std::str::from_utf8(pid_str(p, &mut buf)).unwrap_or(""));
                text(out, " ");
            },
        );
        return Some(after);
    }
    None
}

/// The GPU's readings, then its MIG instances' (as `gpu` and
/// `mig_instance` order the series), each with its instance.
fn targets(gpu: Option<&Gpu>) -> impl Iterator<Item = (u32, &Readings)> + Clone {
    gpu.into_iter().flat_map(|g| {
        std::iter::once((0, &g.readings)).chain(
            g.mig
                .iter()
                .map(|m| (m.gpu_instance_id.saturating_add(1), &m.readings)),
        )
    })
}

/// A pid label's value: its digits, or `other`.
fn pid_str<'b>(p: &GpuProcess, buf: &'b mut [u8; 20]) -> &'b [u8] {
    match p.pid {
        Some(pid) => digits(u64::from(pid), buf),
        None => b"other",
    }
}

/// Calls `f` on each item of `items` in the order `cmp` gives, equal
/// items once each in the order met, without allocating: a selection
/// over the few items one GPU has.
fn in_order<I, T>(items: I, cmp: impl Fn(&T, &T) -> std::cmp::Ordering, mut f: impl FnMut(T))
where
    I: Iterator<Item = T> + Clone,
    T: Copy,
{
    use std::cmp::Ordering::{Greater, Less};
    let mut last: Option<(T, usize)> = None;
    loop {
        let mut next: Option<(T, usize)> = None;
        for (i, t) in items.clone().enumerate() {
            let after_last = last.is_none_or(|(l, li)| match cmp(&t, &l) {
                Greater => true,
                Less => false,
                _ => i > li,
            });
            let before_next = next.is_none_or(|(n, ni)| match cmp(&t, &n) {
                Less => true,
                Greater => false,
                _ => i < ni,
            });
            if after_last && before_next {
                next = Some((t, i));
            }
        }
        match next {
            Some((t, i)) => {
                f(t);
                last = Some((t, i));
            }
            None => return,
        }
    }
}

/// Writes the value of one `{{ ... }}`; false when it is not a variable
/// known for this subject.
fn variable(
    out: &mut Vec<u8>,
    var: &str,
    subject: &Subject,
    value: f64,
    text: fn(&mut Vec<u8>, &str),
) -> bool {
    match var {
        "{{ $value }}" => {
            // Three decimals at most, without trailing zeros.
            let start = out.len();
            let _ = write!(out, "{value:.3}");
            while out.len() > start && out.last() == Some(&b'0') {
                out.pop();
            }
            if out.len() > start && out.last() == Some(&b'.') {
                out.pop();
            }
            true
        }
        "{{ printf \"%.1f\" $value }}" => {
            let _ = write!(out, "{value:.1}");
            true
        }
        _ => {
            let Some(key) = var
                .strip_prefix("{{ $labels.")
                .and_then(|v| v.strip_suffix(" }}"))
            else {
                return false;
            };
            match (subject, key) {
                (Subject::Gpu { index, .. }, "gpu") => write_u64(out, u64::from(*index)),
                (Subject::Gpu { uuid, .. }, "uuid") => text(out, uuid),
                (Subject::Model(name), "model_name") => text(out, name),
                (Subject::Endpoint { url, .. }, "endpoint") => text(out, url),
                (Subject::Endpoint { engine, .. }, "engine") => text(out, engine),
                (Subject::Endpoint { reason, .. }, "reason") => text(out, reason),
                _ => return false,
            }
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand_like_prometheus() {
        let s = Subject::Model("m".into());
        let t = "{{ $labels.model_name }}: {{ printf \"%.1f\" $value }}x, {{ $value }}";
        assert_eq!(expand(t, &s, 30.000000000000025, &[]), "m: 30.0x, 30");
        let gpu = Subject::Gpu {
            index: 12,
            uuid: "GPU-x".into(),
        };
        let t = "{{ $labels.gpu }}/{{ $labels.uuid }} {{ $labels.model_name }} {{ $value }}{{";
        assert_eq!(
            expand(t, &gpu, 0.0125, &[]),
            "12/GPU-x {{ $labels.model_name }} 0.013{{"
        );
        assert_eq!(
            expand("{{{{ $value }}}} }}", &Subject::Exporter, 1.5, &[]),
            "{{1.5}} }}"
        );
    }

    #[test]
    fn workloads_expand_in_prometheus_order() {
        use model::{GpuProcess, MigInstance, Pod, Readings};
        let pod = |ns: &str, p: &str, c: &str| Pod {
            namespace: ns.into(),
            pod: p.into(),
            container: c.into(),
        };
        let proc_ = |pid: Option<u32>, used: Option<f64>| GpuProcess {
            pid,
            used_bytes: used,
            ..GpuProcess::default()
        };
        let gpus = [Gpu {
            index: 0,
            uuid: "GPU-a".into(),
            readings: Readings {
                pods: vec![pod("x", "b", "c"), pod("y", "a", "z"), pod("x", "a", "z")],
                jobs: vec!["9".into(), "10".into()],
                processes: vec![
                    proc_(Some(9), Some(1.0)),
                    proc_(Some(10), Some(2.0)),
                    proc_(None, Some(3.0)),
                    proc_(Some(7), None),
                ],
                ..Readings::default()
            },
            mig: vec![MigInstance {
                gpu_instance_id: 1,
                readings: Readings {
                    pods: vec![pod("m", "a", "a")],
                    ..Readings::default()
                },
                ..MigInstance::default()
            }],
            ..Gpu::default()
        }];
        let s = Subject::Gpu {
            index: 0,
            uuid: "GPU-a".into(),
        };
        // sortByLabel "pod", stable over container, mig_instance, namespace;
        // jobs and pids as strings; a process of unknown use is no series.
        assert_eq!(
            expand(WORKLOADS, &s, 1.0, &gpus),
            "pod m/a (a) pod x/a (z) pod y/a (z) pod x/b (c) job 10 job 9 pid 10 pid 9 pid other "
        );
        let other = Subject::Gpu {
            index: 1,
            uuid: "GPU-b".into(),
        };
        assert_eq!(expand(WORKLOADS, &other, 1.0, &gpus), "");
        assert_eq!(expand(WORKLOADS, &Subject::Exporter, 1.0, &gpus), WORKLOADS);
    }
}
