//! The rule data. A rule reads one [`Signal`] per subject (a GPU, a served
//! model, or the exporter itself) through an [`Expr`], and compares it.

use crate::snapshot::{Snapshot, TTFT_SLO_SECONDS};
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
}

impl Signal {
    pub const ALL: [Signal; 10] = [
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
        }
    }

    pub fn is_counter(self) -> bool {
        matches!(
            self,
            Signal::CriticalXid | Signal::EccUncorrected | Signal::Requests | Signal::GoodRequests
        )
    }

    /// Each subject's value in `snap`; a subject that lacks the reading is
    /// left out, as its series would be.
    pub fn read(self, snap: &Snapshot, out: &mut Vec<(Subject, f64)>) {
        let gpu_value = |g: &crate::snapshot::Gpu| {
            let r = &g.readings;
            match self {
                Signal::Throttled => r.throttled().map(|t| if t { 1.0 } else { 0.0 }),
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
                Signal::Up => Some(if g.up { 1.0 } else { 0.0 }),
                Signal::AllocatorAllocated => r.allocator_allocated_bytes,
                Signal::Temperature => r.temperature_celsius,
                _ => None,
            }
        };
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
                    if let Some(v) = gpu_value(g) {
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
    /// The runbook for this rule: `<runbook>.md` under `base`.
    pub fn runbook_url(&self, base: &str) -> String {
        format!("{base}{}.md", self.runbook)
    }
}

const MIN: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);

/// The TTFT SLO: 99.9% of requests get their first token within 0.3 s.
pub const TTFT_OBJECTIVE: f64 = 0.999;

/// The built-in rule set. Thresholds are documented in the README.
pub fn defaults() -> Vec<Rule> {
    let rule = |name: &str, expr, cmp, threshold, for_, severity, summary: &str| Rule {
        name: name.into(),
        expr,
        cmp,
        threshold,
        for_,
        keep_firing_for: Duration::ZERO,
        severity,
        summary: summary.into(),
        runbook: name.into(),
    };
    let burn = |long, short, factor| BurnWindow {
        long,
        short,
        factor,
    };
    vec![
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
    ]
}
