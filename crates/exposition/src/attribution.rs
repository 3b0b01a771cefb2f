//! Who uses each GPU: `gpu_pod_info`, `gpu_pod_dra_info`, `gpu_job_info`
//! and `gpu_process_memory_used_bytes`, whose label values come from the
//! snapshot; the kubelet client's own families; and the copies of a GPU
//! series per pod that `--kubernetes.pod-labels` asks for.

use super::writer::{Writer, each_target};
use model::catalogue::attribution::{
    JOB_INFO, KUBELET_ERRORS, KUBELET_LAST_SUCCESS, KUBELET_SKIPPED, POD_DRA_INFO, POD_INFO,
    PROCESS_MEMORY,
};
use model::{Collector, Collectors};
use model::{Gpu, Pod, Readings, Snapshot};
use model::{KUBELET_ERRORS as ERROR_REASONS, KUBELET_SKIPPED as SKIP_REASONS};

/// The copies of one GPU series: one per pod with pod labels on and pods
/// there, else one without.
#[inline(always)]
pub(super) fn copies(r: &Readings, pod_labels: bool) -> impl Iterator<Item = Option<&Pod>> {
    let n = if pod_labels { r.pods.len() } else { 0 };
    (0..n.max(1)).map(move |i| r.pods.get(i).filter(|_| pod_labels))
}

impl Writer<'_> {
    /// `namespace`, `pod` and `container`, after the target's labels.
    #[inline(always)]
    pub(super) fn pod(&mut self, p: Option<&Pod>) {
        if let Some(p) = p {
            self.label("namespace", &p.namespace);
            self.label("pod", &p.pod);
            self.label("container", &p.container);
        }
    }
}

/// The attribution families of `gpus` (the snapshot's, or none while
/// its readings are withheld), after the GPU families.
pub(super) fn render(w: &mut Writer, snapshot: &Snapshot, gpus: &[Gpu], on: Collectors) {
    if on.has(Collector::Info) {
        joins(w, snapshot, gpus);
    }
    if !on.has(Collector::Processes) {
        return;
    }
    let mut headed = false;
    each_target(gpus, |t, r| {
        for p in &r.processes {
            let Some(used) = p.used_bytes else { continue };
            if !std::mem::replace(&mut headed, true) {
                w.head(&PROCESS_MEMORY);
            }
            w.name(&PROCESS_MEMORY);
            w.target(t);
            match p.pid {
                Some(pid) => w.num_label("pid", pid),
                None => w.label("pid", "other"),
            }
            if let Some(ci) = p.compute_instance {
                w.num_label("mig_compute_instance", ci);
            }
            if !p.container_id.is_empty() {
                w.label("container_id", &p.container_id);
            }
            if !p.pod_uid.is_empty() {
                w.label("pod_uid", &p.pod_uid);
            }
            w.value(used);
        }
    });
}

/// `gpu_pod_info`, `gpu_pod_dra_info` and `gpu_job_info`.
fn joins(w: &mut Writer, snapshot: &Snapshot, gpus: &[Gpu]) {
    let mut headed = false;
    each_target(gpus, |t, r| {
        for p in &r.pods {
            if !std::mem::replace(&mut headed, true) {
                w.head(&POD_INFO);
            }
            w.name(&POD_INFO);
            w.target(t);
            w.pod(Some(p));
            w.value(1.0);
        }
    });
    if let Some(k) = &snapshot.kubernetes.kubelet
        && !k.dra.is_empty()
    {
        w.head(&POD_DRA_INFO);
        for d in &k.dra {
            w.name(&POD_DRA_INFO);
            w.open_label("namespace", &d.namespace);
            for (k, v) in [
                ("pod", &d.pod),
                ("container", &d.container),
                ("claim_namespace", &d.claim_namespace),
                ("claim", &d.claim),
                ("driver", &d.driver),
                ("pool", &d.pool),
                ("device", &d.device),
            ] {
                w.label(k, v);
            }
            w.value(1.0);
        }
    }
    let mut headed = false;
    each_target(gpus, |t, r| {
        for job in &r.jobs {
            if !std::mem::replace(&mut headed, true) {
                w.head(&JOB_INFO);
            }
            w.name(&JOB_INFO);
            w.target(t);
            w.label("hpc_job", job);
            w.value(1.0);
        }
    });
}

/// The kubelet client's own families, where attribution is on.
pub(super) fn own(w: &mut Writer, snapshot: &Snapshot) {
    let Some(k) = &snapshot.kubernetes.kubelet else {
        return;
    };
    if let Some(t) = k.last_success {
        w.scalar(&KUBELET_LAST_SUCCESS, t);
    }
    for (fam, reasons, counts) in [
        (&KUBELET_ERRORS, &ERROR_REASONS[..], &k.errors[..]),
        (&KUBELET_SKIPPED, &SKIP_REASONS[..], &k.skipped[..]),
    ] {
        w.head(fam);
        for (reason, n) in reasons.iter().zip(counts) {
            w.name(fam);
            w.open_label("reason", reason);
            w.value(*n as f64);
        }
    }
}
