//! The rule data. Each rule reads one per-GPU [`Signal`], either as a gauge
//! or as a counter's `increase()` over a window, and compares it.

use crate::snapshot::Gpu;
use std::time::Duration;

/// A per-GPU number a rule can read from a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// 1 while hw slowdown, sw/hw thermal slowdown or power brake is active.
    Throttled,
    /// The sum of the critical Xid counters (a counter).
    CriticalXid,
    /// The uncorrected ECC counter.
    EccUncorrected,
    /// Largest free block over total memory, while any memory is in use.
    LargestFreeFraction,
    /// 1 while the GPU answers.
    Up,
}

impl Signal {
    pub fn read(self, g: &Gpu) -> Option<f64> {
        let r = &g.readings;
        match self {
            Signal::Throttled => r.throttled().map(|t| if t { 1.0 } else { 0.0 }),
            Signal::CriticalXid => r.critical_xid_total(),
            Signal::EccUncorrected => r.ecc_uncorrected_total,
            Signal::LargestFreeFraction => {
                let (free, total, used) = (
                    r.largest_free_bytes?,
                    r.memory_total_bytes?,
                    r.memory_used_bytes?,
                );
                (total > 0.0 && used > 0.0).then(|| free / total)
            }
            Signal::Up => Some(if g.up { 1.0 } else { 0.0 }),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Expr {
    Gauge(Signal),
    /// Prometheus' `increase()` of a counter signal over the window.
    Increase(Signal, Duration),
}

impl Expr {
    pub fn signal(self) -> Signal {
        match self {
            Expr::Gauge(s) | Expr::Increase(s, _) => s,
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
    pub summary: String,
}

impl Rule {
    /// The runbook for this rule: `docs/runbooks/<name>.md` under `base`.
    pub fn runbook_url(&self, base: &str) -> String {
        format!("{base}{}.md", self.name)
    }
}

const MIN: Duration = Duration::from_secs(60);

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
            Expr::Gauge(Signal::LargestFreeFraction),
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
    ]
}
