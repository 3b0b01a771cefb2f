//! The hardware-health rules, as data: (name, expr, cmp, threshold, for,
//! severity, summary). The two recovery-action rules share a runbook.

use super::rules::{Cmp, Expr, MIN, Rule, Severity, Signal};
use model::catalogue::PCIE_REPLAYS;
use model::catalogue::health::{
    RECOVERY_ACTION, RETIRED_PAGES_PENDING, ROW_REMAP_FAILED, ROW_REMAP_PENDING,
};
use std::time::Duration;

/// The rules, in the order the defaults list them.
#[allow(clippy::too_many_lines)] // a table of rules
pub(super) fn rules() -> [Rule; 10] {
    let health = [
        (
            "GPURowRemapFailure",
            Expr::Gauge(Signal::of(&ROW_REMAP_FAILED)),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Page,
            "GPU {{ $labels.gpu }} failed to remap a memory row; replace it",
        ),
        (
            "GPURowRemapPending",
            Expr::Gauge(Signal::of(&ROW_REMAP_PENDING)),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} has a row remap waiting for a GPU reset",
        ),
        (
            "GPURetiredPagesPending",
            Expr::Gauge(Signal::of(&RETIRED_PAGES_PENDING)),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} has a page retirement waiting for a GPU reset",
        ),
        (
            "GPUPCIeLinkDegraded",
            Expr::Gauge(Signal::PcieLinkWidthRatio),
            Cmp::Below,
            1.0,
            // Settle time: a link retrains after a reset or a hot plug.
            10 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} PCIe link has run at {{ $value }} of its lanes for {for}",
        ),
        (
            "GPUNVLinkErrors",
            Expr::Rate(Signal::NvlinkErrors, 10 * MIN),
            Cmp::Above,
            // DCGM's health check: CRC errors matter at 100+ a second,
            // replays and recoveries at any; one a second of all of them
            // for 10m is a link to look at.
            1.0,
            Duration::ZERO,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} NVLink errors at {{ printf \"%.1f\" $value }}/s over {window}",
        ),
        (
            "GPUNVLinkDown",
            Expr::Gauge(Signal::NvlinkDownWhileBusy),
            Cmp::Above,
            0.0,
            2 * MIN,
            Severity::Page,
            "GPU {{ $labels.gpu }} has {{ $value }} NVLinks down while it is busy",
        ),
        (
            "GPUPCIeReplayErrors",
            Expr::Increase(Signal::of(&PCIE_REPLAYS), 10 * MIN),
            Cmp::Above,
            // DCGM's health check: more than 8 replays a minute.
            80.0,
            Duration::ZERO,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} PCIe link replayed {{ printf \"%.1f\" $value }} times in {window}",
        ),
        (
            "GPUMemoryTemperatureHigh",
            Expr::Gauge(Signal::MemoryTemperatureHeadroom),
            Cmp::Below,
            // Degrees below NVML's memory max temperature.
            5.0,
            5 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} memory is {{ $value }} °C from its slowdown temperature",
        ),
        (
            "GPURecoveryReset",
            Expr::Gauge(Signal::RecoveryReset),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Ticket,
            "The driver asks for a reset of GPU {{ $labels.gpu }}",
        ),
        (
            "GPURecoveryRebootOrDrain",
            Expr::Gauge(Signal::of(&RECOVERY_ACTION)),
            Cmp::Above,
            1.0,
            Duration::ZERO,
            Severity::Page,
            "The driver asks for a node reboot or a drain for GPU {{ $labels.gpu }} (recovery action {{ $value }})",
        ),
    ];
    health.map(|(name, expr, cmp, threshold, for_, severity, summary)| {
        let r = Rule::new(name, expr, cmp, threshold, for_, severity, summary);
        match name.starts_with("GPURecovery") {
            true => Rule {
                runbook: "GPURecoveryAction".into(),
                ..r
            },
            false => r,
        }
    })
}
