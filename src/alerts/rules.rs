//! The rule data. A rule reads one [`Signal`] per subject (a GPU, a served
//! model, or the exporter itself) through an [`Expr`], and compares it.

use crate::config::{Collector, Collectors};
use crate::snapshot::{Readings, Snapshot, TTFT_SLO_SECONDS};
use std::time::Duration;

/// Who an alert is about; its labels.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    Exporter,
    Gpu { index: u32, uuid: String },
    Model(String),
}

impl Subject {
    /// The labels an alert about this subject carries, after `alertname`.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        match self {
            Subject::Exporter => Vec::new(),
            Subject::Gpu { index, uuid } => {
                vec![("gpu", index.to_string()), ("uuid", uuid.clone())]
            }
            Subject::Model(name) => vec![("model_name", name.clone())],
        }
    }
}

/// A number per subject that a rule can read from a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// 1 while hw slowdown, sw/hw thermal slowdown or power brake is active.
    Throttled,
    /// The sum of the critical Xid counters (a counter).
    CriticalXid,
    /// The uncorrected ECC counter.
    EccUncorrected,
    /// Largest free block over total memory, while any memory is in use.
    LargestFreeRatio,
    /// 1 while the GPU answers.
    Up,
    /// Bytes the workload's allocator has handed out.
    AllocatorAllocated,
    Temperature,
    /// 1 when the last collection succeeded (the exporter's own).
    CollectSuccess,
    /// Requests served, per model (a counter: the TTFT histogram's count).
    Requests,
    /// Requests whose first token came within the SLO (a counter).
    GoodRequests,
    /// 1 once a row remap failed.
    RowRemapFailed,
    /// 1 while a row remap waits for a reset.
    RowRemapPending,
    /// 1 while a page retirement waits for a reset.
    RetiredPagesPending,
    /// PCIe link width over its maximum.
    PcieLinkWidthRatio,
    /// NVLink errors of every kind, summed (a counter).
    NvlinkErrors,
    /// NVLinks down, on a busy GPU only: SM active above [`BUSY_SM_ACTIVE`]
    /// or a workload reporting allocator memory on it.
    NvlinkDownWhileBusy,
    /// PCIe replays (a counter).
    PcieReplays,
    MemoryTemperature,
    /// Degrees between the memory's slowdown temperature and its own.
    MemoryTemperatureHeadroom,
    /// NVML's recovery action.
    RecoveryAction,
    /// 1 while the recovery action is a GPU reset.
    RecoveryReset,
}

/// SM active above this makes a GPU busy for [`Signal::NvlinkDownWhileBusy`].
pub const BUSY_SM_ACTIVE: f64 = 0.1;

impl Signal {
    pub const ALL: [Signal; 21] = [
        Signal::Throttled,
        Signal::CriticalXid,
        Signal::EccUncorrected,
        Signal::LargestFreeRatio,
        Signal::Up,
        Signal::AllocatorAllocated,
        Signal::Temperature,
        Signal::CollectSuccess,
        Signal::Requests,
        Signal::GoodRequests,
        Signal::RowRemapFailed,
        Signal::RowRemapPending,
        Signal::RetiredPagesPending,
        Signal::PcieLinkWidthRatio,
        Signal::NvlinkErrors,
        Signal::NvlinkDownWhileBusy,
        Signal::PcieReplays,
        Signal::MemoryTemperature,
        Signal::MemoryTemperatureHeadroom,
        Signal::RecoveryAction,
        Signal::RecoveryReset,
    ];

    /// Its name in rule files.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Throttled => "throttled",
            Signal::CriticalXid => "critical_xid",
            Signal::EccUncorrected => "ecc_uncorrected",
            Signal::LargestFreeRatio => "largest_free_ratio",
            Signal::Up => "up",
            Signal::AllocatorAllocated => "allocator_allocated",
            Signal::Temperature => "temperature",
            Signal::CollectSuccess => "collect_success",
            Signal::Requests => "requests",
            Signal::GoodRequests => "good_requests",
            Signal::RowRemapFailed => "row_remap_failed",
            Signal::RowRemapPending => "row_remap_pending",
            Signal::RetiredPagesPending => "retired_pages_pending",
            Signal::PcieLinkWidthRatio => "pcie_link_width_ratio",
            Signal::NvlinkErrors => "nvlink_errors",
            Signal::NvlinkDownWhileBusy => "nvlink_down_while_busy",
            Signal::PcieReplays => "pcie_replays",
            Signal::MemoryTemperature => "memory_temperature",
            Signal::MemoryTemperatureHeadroom => "memory_temperature_headroom",
            Signal::RecoveryAction => "recovery_action",
            Signal::RecoveryReset => "recovery_reset",
        }
    }

    pub fn is_counter(self) -> bool {
        matches!(
            self,
            Signal::CriticalXid
                | Signal::EccUncorrected
                | Signal::Requests
                | Signal::GoodRequests
                | Signal::NvlinkErrors
                | Signal::PcieReplays
        )
    }

    /// The collectors whose readings it reads.
    pub fn needs(self) -> Collectors {
        use Collector::*;
        let one = |c| Collectors::NONE.with(c);
        match self {
            Signal::Throttled => one(Clocks),
            Signal::CriticalXid => one(Xid),
            Signal::EccUncorrected => one(Ecc),
            Signal::LargestFreeRatio => one(Allocator).with(Memory),
            Signal::Up => one(Info),
            Signal::AllocatorAllocated => one(Allocator),
            Signal::Temperature | Signal::MemoryTemperature => one(Temperature),
            Signal::MemoryTemperatureHeadroom => one(Temperature),
            Signal::CollectSuccess => Collectors::NONE,
            Signal::Requests | Signal::GoodRequests => one(Models),
            Signal::RowRemapFailed | Signal::RowRemapPending | Signal::RetiredPagesPending => {
                one(Remap)
            }
            Signal::PcieLinkWidthRatio | Signal::PcieReplays => one(Pcie),
            Signal::NvlinkErrors | Signal::NvlinkDownWhileBusy => one(Nvlink),
            Signal::RecoveryAction | Signal::RecoveryReset => one(Recovery),
        }
    }

    /// One GPU's value of a GPU signal.
    fn of_gpu(self, up: bool, r: &Readings) -> Option<f64> {
        let h = &r.health;
        let flag = |b: Option<bool>| b.map(|b| if b { 1.0 } else { 0.0 });
        match self {
            Signal::Throttled => flag(r.throttled()),
            Signal::CriticalXid => r.critical_xid_total(),
            Signal::EccUncorrected => r.ecc_uncorrected_total,
            Signal::LargestFreeRatio => {
                let (free, total, used) = (
                    r.largest_free_bytes?,
                    r.memory_total_bytes?,
                    r.memory_used_bytes?,
                );
                (total > 0.0 && used > 0.0).then(|| free / total)
            }
            Signal::Up => flag(Some(up)),
            Signal::AllocatorAllocated => r.allocator_allocated_bytes,
            Signal::Temperature => r.temperature_celsius,
            Signal::RowRemapFailed => flag(h.row_remap_failed),
            Signal::RowRemapPending => flag(h.row_remap_pending),
            Signal::RetiredPagesPending => flag(h.retired_pages_pending),
            Signal::PcieLinkWidthRatio => Some(h.pcie_link_width? / h.pcie_link_width_max?),
            Signal::NvlinkErrors => {
                let mut it = h.nvlink_errors.iter().flatten().peekable();
                it.peek()?;
                Some(it.sum())
            }
            Signal::NvlinkDownWhileBusy => {
                let busy = r.sm_active_ratio.is_some_and(|a| a > BUSY_SM_ACTIVE)
                    || r.allocator_reserved_bytes.is_some_and(|b| b > 0.0);
                busy.then_some(h.nvlink_links? - h.nvlink_links_active?)
            }
            Signal::PcieReplays => r.pcie_replay_errors_total,
            Signal::MemoryTemperature => r.memory_temperature_celsius,
            Signal::MemoryTemperatureHeadroom => {
                Some(h.memory_temperature_max_celsius? - r.memory_temperature_celsius?)
            }
            Signal::RecoveryAction => h.recovery_action,
            Signal::RecoveryReset => h.recovery_action.map(|a| if a == 1.0 { 1.0 } else { 0.0 }),
            Signal::CollectSuccess | Signal::Requests | Signal::GoodRequests => None,
        }
    }

    /// Each subject's value in `snap`; a subject that lacks the reading is
    /// left out, as its series would be.
    pub fn read(self, snap: &Snapshot, out: &mut Vec<(Subject, f64)>) {
        // A collector that is off leaves the rule without data, as its
        // series would be absent from Prometheus.
        if self.needs().iter().any(|c| !snap.collectors.has(c)) {
            return;
        }
        match self {
            Signal::CollectSuccess => {
                out.push((Subject::Exporter, if snap.success() { 1.0 } else { 0.0 }))
            }
            Signal::Requests | Signal::GoodRequests => {
                for m in &snap.models {
                    let h = &m.ttft_seconds;
                    let v = match self {
                        Signal::Requests => Some(h.count()),
                        _ => h.at_or_below(TTFT_SLO_SECONDS),
                    };
                    if let Some(v) = v {
                        out.push((Subject::Model(m.name.clone()), v));
                    }
                }
            }
            _ => {
                for g in &snap.gpus {
                    if let Some(v) = self.of_gpu(g.up, &g.readings) {
                        out.push((
                            Subject::Gpu {
                                index: g.index,
                                uuid: g.uuid.clone(),
                            },
                            v,
                        ));
                    }
                }
            }
        }
    }
}

/// One pair of a multi-window burn-rate alert: both windows must burn the
/// error budget faster than `factor`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurnWindow {
    pub long: Duration,
    pub short: Duration,
    pub factor: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The signal's current value.
    Gauge(Signal),
    /// Prometheus' `increase()` of a counter signal over the window.
    Increase(Signal, Duration),
    /// Prometheus' `rate()`: the increase per second.
    Rate(Signal, Duration),
    /// Prometheus' `deriv()`: a gauge's least-squares slope per second.
    Deriv(Signal, Duration),
    /// The TTFT SLO's error budget burning: fires when any pair holds.
    /// The value compared is the burn rate (error ratio over budget);
    /// the threshold is unused.
    BurnRate {
        objective: f64,
        windows: Vec<BurnWindow>,
    },
    /// Across the fleet, more than one driver version. Only Prometheus
    /// sees the fleet, so only the printed rule file evaluates it.
    DriverVersionSkew,
}

impl Expr {
    /// Every (signal, window) the evaluator must keep history for.
    pub fn windows(&self) -> Vec<(Signal, Duration)> {
        match self {
            Expr::Increase(s, w) | Expr::Rate(s, w) | Expr::Deriv(s, w) => vec![(*s, *w)],
            Expr::BurnRate { windows, .. } => windows
                .iter()
                .flat_map(|b| [b.long, b.short])
                .flat_map(|w| [(Signal::Requests, w), (Signal::GoodRequests, w)])
                .collect(),
            Expr::Gauge(_) | Expr::DriverVersionSkew => Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Above,
    Below,
}

impl Cmp {
    pub fn holds(self, v: f64, threshold: f64) -> bool {
        match self {
            Cmp::Above => v > threshold,
            Cmp::Below => v < threshold,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Cmp::Above => ">",
            Cmp::Below => "<",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Page,
    Ticket,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Page => "page",
            Severity::Ticket => "ticket",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub name: String,
    pub expr: Expr,
    pub cmp: Cmp,
    pub threshold: f64,
    pub for_: Duration,
    pub keep_firing_for: Duration,
    pub severity: Severity,
    /// A Prometheus template; `{{ $labels.<name> }}`, `{{ $value }}` and
    /// `{{ printf "%.1f" $value }}` are expanded in `/alerts` too.
    pub summary: String,
    /// The runbook's file name without `.md`; the rule's name by default.
    pub runbook: String,
}

impl Rule {
    /// The collectors whose readings the rule reads.
    pub fn needs(&self) -> Collectors {
        match &self.expr {
            Expr::Gauge(s) | Expr::Increase(s, _) | Expr::Rate(s, _) | Expr::Deriv(s, _) => {
                s.needs()
            }
            Expr::BurnRate { .. } => Signal::Requests.needs(),
            Expr::DriverVersionSkew => Signal::Up.needs(),
        }
    }

    /// Whether its alerts are about GPUs (labelled `gpu` and `uuid`):
    /// those name who uses the GPU in a `workloads` annotation.
    pub fn about_gpus(&self) -> bool {
        match &self.expr {
            Expr::Gauge(s) | Expr::Increase(s, _) | Expr::Rate(s, _) | Expr::Deriv(s, _) => {
                !matches!(
                    s,
                    Signal::CollectSuccess | Signal::Requests | Signal::GoodRequests
                )
            }
            Expr::BurnRate { .. } | Expr::DriverVersionSkew => false,
        }
    }

    /// The runbook for this rule: `<runbook>.md` under `base`.
    pub fn runbook_url(&self, base: &str) -> String {
        format!("{base}{}.md", self.runbook)
    }
}

pub(super) const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// The TTFT SLO: 99.9% of requests get their first token within 0.3 s.
pub const TTFT_OBJECTIVE: f64 = 0.999;

/// A rule without `keep_firing_for`, with its own runbook.
pub(super) fn rule(
    name: &str,
    expr: Expr,
    cmp: Cmp,
    threshold: f64,
    for_: Duration,
    severity: Severity,
    summary: &str,
) -> Rule {
    Rule {
        name: name.into(),
        expr,
        cmp,
        threshold,
        for_,
        keep_firing_for: Duration::ZERO,
        severity,
        summary: summary.into(),
        runbook: name.into(),
    }
}

/// The built-in rule set. Thresholds are documented in the README.
pub fn defaults() -> Vec<Rule> {
    let burn = |long, short, factor| BurnWindow {
        long,
        short,
        factor,
    };
    let mut rules = vec![
        rule(
            "GPUThrottling",
            Expr::Gauge(Signal::Throttled),
            Cmp::Above,
            0.0,
            5 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} clocks held down by thermal, hw slowdown or power brake for 5m",
        ),
        Rule {
            keep_firing_for: 10 * MIN,
            ..rule(
                "GPUXidErrors",
                Expr::Increase(Signal::CriticalXid, 5 * MIN),
                Cmp::Above,
                0.0,
                Duration::ZERO,
                Severity::Page,
                "GPU {{ $labels.gpu }} logged critical Xid errors in the last 5m",
            )
        },
        rule(
            "GPUUncorrectableECC",
            Expr::Increase(Signal::EccUncorrected, 5 * MIN),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Page,
            "GPU {{ $labels.gpu }} has uncorrectable ECC errors",
        ),
        rule(
            "KVFragmentationRisk",
            Expr::Gauge(Signal::LargestFreeRatio),
            Cmp::Below,
            0.05,
            5 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} largest free block is under 5% of memory",
        ),
        rule(
            "GPULost",
            Expr::Gauge(Signal::Up),
            Cmp::Below,
            1.0,
            MIN,
            Severity::Page,
            "GPU {{ $labels.gpu }} stopped answering",
        ),
        rule(
            "ExporterCollectFailing",
            Expr::Gauge(Signal::CollectSuccess),
            Cmp::Below,
            1.0,
            5 * MIN,
            Severity::Ticket,
            "gpu-exporter collections have failed for 5m; served readings are stale",
        ),
        rule(
            "GPUMemoryLeak",
            Expr::Deriv(Signal::AllocatorAllocated, HOUR),
            Cmp::Above,
            // 1 MiB a minute, held for 30m: steady growth, not a burst.
            1024.0 * 1024.0 / 60.0,
            30 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} allocator-allocated memory has grown steadily for an hour",
        ),
        rule(
            "DriverVersionSkew",
            Expr::DriverVersionSkew,
            Cmp::Above,
            1.0,
            30 * MIN,
            Severity::Ticket,
            "More than one NVIDIA driver version is running across the fleet",
        ),
        rule(
            "TTFTBudgetBurn",
            Expr::BurnRate {
                objective: TTFT_OBJECTIVE,
                windows: vec![burn(HOUR, 5 * MIN, 14.4), burn(6 * HOUR, 30 * MIN, 6.0)],
            },
            Cmp::Above,
            0.0,
            2 * MIN,
            Severity::Page,
            "{{ $labels.model_name }} is burning its TTFT error budget fast ({{ printf \"%.1f\" $value }}x)",
        ),
        Rule {
            runbook: "TTFTBudgetBurn".into(),
            ..rule(
                "TTFTBudgetBurnSlow",
                Expr::BurnRate {
                    objective: TTFT_OBJECTIVE,
                    windows: vec![burn(72 * HOUR, 6 * HOUR, 1.0)],
                },
                Cmp::Above,
                0.0,
                15 * MIN,
                Severity::Ticket,
                "{{ $labels.model_name }} is spending its TTFT error budget faster than it earns it ({{ printf \"%.1f\" $value }}x)",
            )
        },
    ];
    rules.extend(super::health::rules());
    rules
}
