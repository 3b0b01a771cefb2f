//! The fleet model: plain data that a source publishes and every consumer
//! (exposition, alerts, the status page) reads. No I/O handles live here,
//! and nothing of the configuration: the flags are parsed above it, and
//! name its types (collectors, source kinds, engines, dcgm fields).
//!
//! A reading a source cannot give is `None`, and its series is left out.
//! Sentinel numbers (0xFFFFFFFF, -1) never get this far.
#![forbid(unsafe_code)]

pub mod catalogue;
mod collectors;
pub use collectors::{Collector, Collectors, UnknownCollector, names as collector_names};
// Each variant and field is named for the dcgm-exporter field in `FIELDS`.
#[allow(missing_docs)]
pub mod dcgm;
mod engines;
pub use engines::*;
pub mod profile;
pub mod readings;
pub mod reason;
pub use readings::Readings;
mod users;
pub use users::*;
mod xid_window;
pub use xid_window::XidWindow;

use std::time::{Duration, Instant};

/// The longest name a flag or file may give (a model, a node, an alert,
/// a runbook): label values stay bounded.
pub const MAX_NAME: usize = 128;

/// Where readings come from: the `source` label of
/// `gpu_exporter_source_info`, and what `--source` names (with `auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// NVML, loaded at run time.
    Nvml,
    /// nvidia-smi, run each collection.
    Smi,
    /// The simulated fleet.
    Sim,
}

impl SourceKind {
    /// The name flags and labels use.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Nvml => "nvml",
            SourceKind::Smi => "smi",
            SourceKind::Sim => "sim",
        }
    }
}

/// NVML clock event reasons, in bit order: reason `i` is bit `1 << i`.
pub const CLOCK_EVENT_REASONS: [&str; 9] = [
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
];

/// Reasons that mean the GPU is losing performance it should have:
/// hw slowdown, sw/hw thermal slowdown and power brake. `sw_power_cap`
/// alone is normal under load and is not in this set.
pub const THROTTLE_MASK: u64 = 0x8 | 0x20 | 0x40 | 0x80;

/// Bit mask for a reason name, if it is one of [`CLOCK_EVENT_REASONS`].
pub fn clock_event_bit(name: &str) -> Option<u64> {
    CLOCK_EVENT_REASONS
        .iter()
        .position(|r| *r == name)
        .map(|i| 1u64 << i)
}

/// Xid codes that page: NVIDIA's Xid catalogue says reset the GPU (or
/// replace it) now. 48 double-bit ECC, 62 internal micro-controller halt,
/// 64 a row remap or page retirement that failed, 74 NVLink, 79 fallen off
/// the bus, 95 uncontained ECC, 119 and 120 GSP (see docs/alerts.md).
pub const PAGE_XIDS: [u32; 8] = [48, 62, 64, 74, 79, 95, 119, 120];

/// Xid codes of recorded or corrected events, worth a ticket: 63 a row
/// remap or page retirement recorded (it takes effect at the next reset),
/// 92 a high single-bit ECC error rate (corrected), 94 a contained ECC
/// error (the catalogue's action: restart the application; the GPU goes on).
pub const TICKET_XIDS: [u32; 3] = [63, 92, 94];

/// Every Xid code an alert watches, sorted: each is served at 0 until it
/// happens.
pub const CRITICAL_XIDS: [u32; 11] = [48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120];

/// What [`Readings::xid_errors`] holds for a source that sees Xid: every
/// code seen with its count (a code seen twice adds up), and every one of
/// [`CRITICAL_XIDS`] at 0 until it happens, so that `increase()` sees the
/// first; sorted by code.
pub fn xid_errors(seen: impl IntoIterator<Item = (u32, u64)>) -> Vec<(u32, u64)> {
    let mut counts: Vec<(u32, u64)> = CRITICAL_XIDS.iter().map(|&c| (c, 0)).collect();
    for (code, n) in seen {
        match counts.iter_mut().find(|(c, _)| *c == code) {
            Some((_, count)) => *count += n,
            None => counts.push((code, n)),
        }
    }
    counts.sort_unstable();
    counts
}

/// `xid_last_code` from the code of the latest Xid seen: 0 before any
/// (no Xid has code 0), as dcgm-exporter's `DCGM_FI_DEV_XID_ERRORS`.
pub fn last_code(latest: Option<u32>) -> f64 {
    latest.map_or(0.0, f64::from)
}

/// A value per direction, for PCIe and NVLink byte counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TxRx {
    pub tx: f64,
    pub rx: f64,
}

/// Fans read per GPU at most.
pub const MAX_FANS: usize = 8;

/// One NVLink, for the opt-in per-link series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NvlinkLink {
    pub link: u32,
    pub active: Option<bool>,
    /// As [`Health::nvlink_errors`].
    pub errors: [Option<f64>; 4],
}

/// Hardware health and state: memory repairs, links, recovery, fans,
/// media engines, pipes and modes. Every reading as in [`Readings`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    /// Rows remapped: correctable, uncorrectable (Ampere and later).
    pub remapped_rows: [Option<f64>; 2],
    pub row_remap_pending: Option<bool>,
    pub row_remap_failed: Option<bool>,
    /// Pages retired: single-bit, double-bit (before Ampere).
    pub retired_pages: [Option<f64>; 2],
    pub retired_pages_pending: Option<bool>,
    /// ECC errors since the board was made (NVML aggregate).
    pub ecc_corrected_lifetime: Option<f64>,
    pub ecc_uncorrected_lifetime: Option<f64>,
    pub pcie_link_generation: Option<f64>,
    pub pcie_link_generation_max: Option<f64>,
    pub pcie_link_width: Option<f64>,
    pub pcie_link_width_max: Option<f64>,
    /// Summed over links: CRC flit, CRC data, replay, recovery.
    pub nvlink_errors: [Option<f64>; 4],
    pub nvlink_links: Option<f64>,
    pub nvlink_links_active: Option<f64>,
    pub nvlink_per_link: Vec<NvlinkLink>,
    /// NVML's recovery action; values it does not name are kept.
    pub recovery_action: Option<f64>,
    /// Each fan's speed over its maximum; may exceed 1.
    pub fan_speed_ratios: [Option<f64>; MAX_FANS],
    /// Encoder, decoder, JPEG, OFA.
    pub media_ratios: [Option<f64>; 4],
    /// Any tensor core, then the non-tensor FP64, FP32 and FP16 pipes.
    pub pipe_active_ratios: [Option<f64>; 4],
    /// P0 (fastest) to P15.
    pub performance_state: Option<f64>,
    pub persistence_mode: Option<bool>,
    /// NVML's compute mode: 0 default, 1 exclusive thread, 2 prohibited,
    /// 3 exclusive process.
    pub compute_mode: Option<f64>,
    pub mig_mode: Option<bool>,
    /// The memory temperature at which the GPU slows down
    /// (NVML_TEMPERATURE_THRESHOLD_MEM_MAX).
    pub memory_temperature_max_celsius: Option<f64>,
}

impl Readings {
    /// Sum of the watched Xid counters ([`CRITICAL_XIDS`]), if the source
    /// sees Xid.
    pub fn critical_xid_total(&self) -> Option<f64> {
        self.xid_total(&CRITICAL_XIDS)
    }

    /// Sum of the Xid counters of `codes`, if the source sees Xid.
    pub fn xid_total(&self, codes: &[u32]) -> Option<f64> {
        let xids = self.xid_errors.as_ref()?;
        Some(
            xids.iter()
                .filter(|(code, _)| codes.contains(code))
                .map(|&(_, n)| n as f64)
                .sum(),
        )
    }

    /// Whether any reason in [`THROTTLE_MASK`] is active.
    pub fn throttled(&self) -> Option<bool> {
        self.clocks_event_mask.map(|m| m & THROTTLE_MASK != 0)
    }

    /// Leaves out every reading of a collector not in `on`, so that a
    /// disabled collector's readings reach no consumer, whatever the
    /// source read.
    pub fn retain(&mut self, on: Collectors) {
        for reading in readings::all() {
            if reading.family.collector.is_some_and(|c| !on.has(c)) {
                (reading.read.field)(self).clear();
            }
        }
        if !on.has(Collector::Processes) {
            self.processes.clear();
        }
        if !on.has(Collector::Gpm) {
            self.profiling.clear();
        }
    }
}

/// One MIG GPU instance of a GPU. Its series carry the parent GPU's
/// `gpu` and `uuid`, plus `mig_instance` (the GPU instance id) and
/// `mig_profile`; memory and GPM readings belong to the GPU instance, so
/// its compute instances share them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MigInstance {
    /// The MIG UUID of its first compute instance (the only one in the
    /// common layout); every one is in `compute`.
    pub uuid: String,
    pub gpu_instance_id: u32,
    pub profile: String,
    /// Its compute instances, each a MIG device with a MIG UUID of its own.
    pub compute: Vec<ComputeInstance>,
    pub readings: Readings,
}

/// One compute instance of a MIG GPU instance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComputeInstance {
    /// `None` where the driver cannot say (no nvmlDeviceGetComputeInstanceId).
    pub id: Option<u32>,
    pub uuid: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Gpu {
    pub index: u32,
    pub uuid: String,
    /// The product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub model: String,
    /// As NVML spells it: `00000000:3B:00.0`.
    pub pci_bus_id: String,
    pub driver_version: String,
    /// Firmware versions, empty where unknown; they never change while
    /// the driver runs.
    pub vbios_version: String,
    pub inforom_version: String,
    /// The device minor number (`/dev/nvidia<minor>`), where the source
    /// gives it: GKE's device plugin names GPUs by it.
    pub minor: Option<u32>,
    /// False once the GPU is lost (NVML_ERROR_GPU_IS_LOST, or gone from
    /// the source); its readings are then empty.
    pub up: bool,
    pub readings: Readings,
    pub mig: Vec<MigInstance>,
    /// Collections whose deadline came while this GPU's read was still
    /// out (NVML): they served its last finished read.
    pub reads_late: u64,
}

/// The exporter's own process, read from /proc by the poller.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub resident_memory_bytes: Option<f64>,
    pub cpu_seconds_total: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub start_time_seconds: Option<f64>,
}

/// Upper bounds of the `llm_ttft_seconds` buckets; 0.3 is the TTFT SLO's
/// threshold, so it must stay one of them.
pub const TTFT_BUCKETS: [f64; 10] = [0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0, f64::INFINITY];

/// The SLO's threshold: a request is good when its first token came
/// within this many seconds.
pub const TTFT_SLO_SECONDS: f64 = 0.3;

/// A cumulative histogram, Prometheus style: `buckets[i]` counts
/// observations at or below `bounds[i]`, the last bound being +Inf.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
}

impl Histogram {
    pub fn count(&self) -> f64 {
        self.buckets.last().map_or(0.0, |&(_, n)| n)
    }

    /// Observations at or below `le`, if `le` is a bucket bound.
    pub fn at_or_below(&self, le: f64) -> Option<f64> {
        self.buckets
            .iter()
            .find(|&&(b, _)| b == le)
            .map(|&(_, n)| n)
    }
}

/// Request metrics of one served model, labelled `model_name` as vLLM
/// labels them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Model {
    pub name: String,
    pub ttft_seconds: Histogram,
    /// The bucket bound a request is judged good at: the SLO's threshold,
    /// or an engine's nearest bound below it. `None`: the engine has no
    /// bound at or below the threshold, so no verdict.
    pub good_within: Option<f64>,
    /// The engine endpoint it was read from, by its place in
    /// [`Snapshot::engines`]; `None` for the simulator's.
    pub endpoint: Option<usize>,
    /// Its engine did not answer the last read: these are the counts of
    /// the last good one, held so that its verdicts are neither resolved
    /// nor invented while it is down.
    pub stale: bool,
    /// Its engine's request outcomes, where the engine counts failures
    /// (see `fill::engines::profile`); `None`: no availability verdict.
    pub outcomes: Option<Outcomes>,
    /// Each endpoint's own counts where several serve the model
    /// (replicas), whose sums the fields above hold; empty where one
    /// endpoint serves it. See [`Model::shares`].
    pub replicas: Vec<Replica>,
}

/// One endpoint's counts of a model that several endpoints serve. The
/// alert evaluator takes each counter's increase per replica and sums
/// after, as Prometheus takes `sum(rate())`: a replica that restarts
/// resets its own counters, not the model's, so neither its lifetime
/// counts nor another replica's land in a window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replica {
    /// Its endpoint, by its place in [`Snapshot::engines`].
    pub endpoint: Option<usize>,
    /// Requests timed, and of them those within the model's bound.
    pub requests: f64,
    pub good: Option<f64>,
    pub outcomes: Option<Outcomes>,
    /// Its endpoint did not answer the last read: these counts are held.
    pub stale: bool,
}

impl Model {
    /// Requests whose first token came within [`Model::good_within`].
    pub fn good(&self) -> Option<f64> {
        self.ttft_seconds.at_or_below(self.good_within?)
    }

    /// Its counts as one replica, where it is served by one endpoint.
    pub fn own_share(&self) -> Replica {
        Replica {
            endpoint: self.endpoint,
            requests: self.ttft_seconds.count(),
            good: self.good(),
            outcomes: self.outcomes,
            stale: self.stale,
        }
    }

    /// Calls `f` with each series its counters are taken by: each
    /// replica's, or its own where one endpoint serves it.
    pub fn shares(&self, f: &mut dyn FnMut(&Replica)) {
        if self.replicas.is_empty() {
            f(&self.own_share());
        }
        self.replicas.iter().for_each(f);
    }

    /// Whether every endpoint serving it is down: its counts are all
    /// held, so its burn verdicts must be held too.
    pub fn held(&self) -> bool {
        self.stale && self.replicas.iter().all(|r| r.stale)
    }
}

/// How each collector fared in one collection, where the source can say.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Collectors with a call that failed; NOT_SUPPORTED is no failure.
    pub failed: Collectors,
    /// Seconds each collector took, by [`Collector`] index, where timed.
    pub seconds: [Option<f64>; Collector::COUNT],
}

impl Timings {
    /// Adds `seconds` to what `c` took.
    pub fn add(&mut self, c: Collector, seconds: f64) {
        let s = &mut self.seconds[c as usize];
        *s = Some(s.unwrap_or(0.0) + seconds);
    }

    /// Adds what `other` saw: its failures and its seconds.
    pub fn merge(&mut self, other: &Timings) {
        for c in Collector::ALL {
            if other.failed.has(c) {
                self.failed = self.failed.with(c);
            }
            if let Some(s) = other.seconds[c as usize] {
                self.add(c, s);
            }
        }
    }
}

/// What one collection produced. The poller stamps timing and outcome.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub gpus: Vec<Gpu>,
    /// Request metrics of the models served on this node, when known.
    pub models: Vec<Model>,
    /// The source that produced the fleet.
    pub source: SourceKind,
    /// Unix time of the collection (the simulator's clock for `sim`).
    pub at: f64,
    /// Monotonic time its readings were collected, for their age: on a
    /// failed collection, the last good one's.
    pub published: Instant,
    /// Monotonic time the collection that made it ended, failed or not: a
    /// collection is stalled while none has ended for a while.
    pub finished: Instant,
    pub collect_duration: Duration,
    /// `None` when the collection succeeded; the reason otherwise. On
    /// failure `gpus` holds the last good readings while they are fresh.
    pub error: Option<String>,
    pub process: ProcessStats,
    /// The collectors that ran (the flags'), and how each fared.
    pub collectors: Collectors,
    /// The collectors whose readings were kept: those on, and those the
    /// dcgm collector's fields and the alert rules read where their
    /// families are not served. What the rules see.
    pub reads: Collectors,
    pub timings: Timings,
    /// Readings left out as out of range since start, by family.
    pub rejected: Vec<(&'static str, u64)>,
    /// Pod attribution: the kubelet's state, and the pod labels switch.
    pub kubernetes: Kubernetes,
    /// The dcgm collector's fields and host label, where it is on.
    pub dcgm: Option<std::sync::Arc<crate::dcgm::Dcgm>>,
    /// The engine endpoints of `--engine.endpoint`, in their order.
    pub engines: Vec<EngineEndpoint>,
    /// The objectives the rules judge the models at.
    pub objectives: std::sync::Arc<Objectives>,
}

/// The reason a snapshot gives before the first collection is done.
pub const STARTING: &str = "first collection in progress";

impl Snapshot {
    /// What is served from start until the first collection (and, for the
    /// simulator, its history replay) is done: no fleet, not a success.
    pub fn starting(source: SourceKind) -> Snapshot {
        Snapshot {
            error: Some(STARTING.into()),
            ..Snapshot::empty(source)
        }
    }

    /// Whether this is [`Snapshot::starting`]'s placeholder.
    pub fn is_starting(&self) -> bool {
        self.error.as_deref() == Some(STARTING)
    }

    pub fn empty(source: SourceKind) -> Snapshot {
        Snapshot {
            gpus: Vec::new(),
            models: Vec::new(),
            source,
            at: 0.0,
            published: Instant::now(),
            finished: Instant::now(),
            collect_duration: Duration::ZERO,
            error: Some("no collection has completed yet".into()),
            process: ProcessStats::default(),
            collectors: Collectors::DEFAULT,
            reads: Collectors::DEFAULT,
            timings: Timings::default(),
            rejected: Vec::new(),
            kubernetes: Kubernetes::default(),
            dcgm: None,
            engines: Vec::new(),
            objectives: Default::default(),
        }
    }

    pub fn success(&self) -> bool {
        self.error.is_none()
    }

    /// The models served while `fresh` holds, and where the first is in
    /// `models`: every one; while the GPUs' readings are withheld, only
    /// those read from engines (the poller appends them after the
    /// source's), whose reader never waits on the GPUs and which a failing
    /// collection still takes fresh; none while the collection is stalled
    /// too, as they are then as old as the snapshot.
    pub fn served_models(&self, fresh: Freshness) -> (usize, &[Model]) {
        let from = match (fresh.hidden, fresh.stalled) {
            (false, _) => 0,
            (true, false) => self
                .models
                .iter()
                .position(|m| m.endpoint.is_some())
                .unwrap_or(self.models.len()),
            (true, true) => self.models.len(),
        };
        (from, &self.models[from..])
    }

    /// How its readings stand at `now` (see [`Freshness`]).
    pub fn freshness(&self, now: Instant, bounds: Bounds) -> Freshness {
        let since = |t: Instant| now.saturating_duration_since(t);
        // The placeholder's `finished` is the start: a first collection
        // (or NVML's first init) that hangs is a stall like any other.
        let stalled = since(self.finished) > bounds.stall_after;
        if self.is_starting() {
            return Freshness {
                stalled,
                hidden: false,
            };
        }
        let failing = stalled || !self.success();
        Freshness {
            stalled,
            hidden: failing && !self.gpus.is_empty() && since(self.published) > bounds.max_stale,
        }
    }
}

/// When served readings stop counting as current.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    /// A collection not ended this long after the last one is stalled.
    pub stall_after: Duration,
    /// While collections fail or stall, the last good readings are served
    /// this long (`--collect.max-stale`), then withheld.
    pub max_stale: Duration,
}

impl Bounds {
    /// A few intervals: three, and a second for a slow source.
    pub fn new(interval: Duration, max_stale: Duration) -> Bounds {
        Bounds {
            stall_after: interval * 3 + Duration::from_secs(1),
            max_stale,
        }
    }
}

/// How a snapshot's readings stand at a moment, worked out the same way
/// where they are served (HTTP) and where they are evaluated (the alert
/// evaluator's thread), never on the poller thread, which may be stuck.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Freshness {
    /// A collection has run past [`Bounds::stall_after`]: served as a
    /// failed collection, `gpu_exporter_collect_success 0`.
    pub stalled: bool,
    /// Collections fail or stall and the last good readings are older than
    /// [`Bounds::max_stale`]: the GPUs' series are withheld, and the models'
    /// but for the engines' (see [`Snapshot::served_models`]).
    pub hidden: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn withheld_readings_keep_the_engines_models_until_a_stall() {
        let model = |name: &str, endpoint| Model {
            name: name.into(),
            ttft_seconds: Histogram::default(),
            good_within: None,
            endpoint,
            stale: false,
            outcomes: None,
            replicas: Vec::new(),
        };
        let mut s = Snapshot::empty(SourceKind::Sim);
        s.models = vec![model("sim", None), model("vllm", Some(0))];
        let names = |fresh: Freshness| {
            let (from, models) = s.served_models(fresh);
            (
                from,
                models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            )
        };
        let fresh = |hidden, stalled| Freshness { stalled, hidden };
        assert_eq!(names(fresh(false, false)), (0, vec!["sim", "vllm"]));
        assert_eq!(names(fresh(false, true)), (0, vec!["sim", "vllm"]));
        assert_eq!(names(fresh(true, false)), (1, vec!["vllm"]));
        assert_eq!(names(fresh(true, true)), (2, vec![]));
    }

    #[test]
    fn xid_errors_hold_every_critical_code_and_every_code_seen() {
        let counts = xid_errors([(13, 2), (79, 1), (13, 3)]);
        assert_eq!(counts.len(), CRITICAL_XIDS.len() + 1);
        assert!(counts.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(
            counts.contains(&(13, 5)) && counts.contains(&(79, 1)) && counts.contains(&(48, 0))
        );
        assert_eq!(xid_errors([]), CRITICAL_XIDS.map(|c| (c, 0)));
    }
}
