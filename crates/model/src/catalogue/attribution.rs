//! The attribution families: who uses each GPU (pods, processes, batch
//! jobs) and the kubelet client's own health. The join families belong to
//! `info`, like `gpu_info`; the processes to their own collector. Their label values come
//! from the snapshot, so `exposition::attribution` writes them rather
//! than the table of [`crate::readings`].

use super::{Family, Kind, family};
use crate::Collector;
use Kind::{Counter, Gauge, Info};

pub static POD_INFO: Family = family(
    "gpu_pod",
    Info,
    "A container the kubelet says holds this GPU (or MIG instance, with mig_instance). One series per container; several on a shared GPU. Always 1: join on gpu and uuid (and mig_instance).",
)
.of(Collector::Info);
pub static POD_DRA_INFO: Family = family(
    "gpu_pod_dra",
    Info,
    "A DRA device of NVIDIA's GPU driver a container holds, by the driver's names: no gpu or uuid, as the kubelet gives none. Always 1.",
)
.of(Collector::Info);
pub static JOB_INFO: Family = family(
    "gpu_job",
    Info,
    "A batch job running on this GPU, from --hpc.job-mapping-dir. Always 1.",
)
.of(Collector::Info);
pub static PROCESS_MEMORY: Family = family(
    "gpu_process_memory_used_bytes",
    Gauge,
    "GPU memory a process uses, by host PID: the largest few per GPU, the rest summed as pid=\"other\". container_id and pod_uid where the host's PIDs are visible; on MIG, mig_compute_instance where NVML names it.",
)
.of(Collector::Processes);
pub static KUBELET_LAST_SUCCESS: Family = family(
    "gpu_exporter_kubelet_last_success_timestamp_seconds",
    Gauge,
    "When the kubelet's pod-resources API last answered; the pods served are from then.",
);
pub static KUBELET_ERRORS: Family = family(
    "gpu_exporter_kubelet_errors",
    Counter,
    "Failed calls to the kubelet's pod-resources API, by reason; the last good pods stay served.",
);
pub static KUBELET_SKIPPED: Family = family(
    "gpu_exporter_kubelet_pods_skipped",
    Counter,
    "Pods the kubelet listed but the exporter left out: oversize (one pod over 1 MiB) or over_budget (GPU pods past 2 MiB in all).",
);
