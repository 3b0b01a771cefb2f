//! The built-in rule set, as data. Thresholds are documented in
//! docs/alerts.md; the hardware-health rules are in `health.rs`. A summary's
//! `{for}`, `{keep_firing_for}` and `{window}` are spelled from the rule's
//! own durations, so a rules file that moves one moves the text too.

use super::rules::{BurnWindow, Cmp, Expr, HOUR, MIN, Rule, Severity, Signal, TTFT_OBJECTIVE};
use super::summary::REASON;
use model::catalogue::{ALLOCATOR_ALLOCATED, ECC_UNCORRECTED};
use std::time::Duration;

/// The availability SLO: of the requests an engine answers (a client's
/// abort is none), the share it must not fail.
pub const AVAILABILITY_OBJECTIVE: f64 = 0.999;

/// The built-in rules, in the order docs/alerts.md lists them.
#[allow(clippy::too_many_lines)] // a table of rules
pub fn defaults() -> Vec<Rule> {
    let burn = |long, short, factor| BurnWindow {
        long,
        short,
        factor,
    };
    let rule = Rule::new;
    let mut rules = vec![
        rule(
            "GPUThrottling",
            Expr::Gauge(Signal::Throttled),
            Cmp::Above,
            0.0,
            5 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} clocks held down by thermal, hw slowdown or power brake for {for}",
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
                "GPU {{ $labels.gpu }} logged Xid errors that need a reset or a replacement in the last {window}",
            )
        },
        rule(
            "GPUXidEvents",
            Expr::Increase(Signal::RecordedXid, 5 * MIN),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} recorded memory repairs or corrected errors (Xid 63, 92 or 94) in the last {window}",
        ),
        Rule {
            // Long enough to be acted on: one error is a dying GPU.
            keep_firing_for: HOUR,
            ..rule(
                "GPUUncorrectableECC",
                Expr::Increase(Signal::of(&ECC_UNCORRECTED), 5 * MIN),
                Cmp::Above,
                0.0,
                Duration::ZERO,
                Severity::Page,
                "GPU {{ $labels.gpu }} has uncorrectable ECC errors (the page holds {keep_firing_for} after the last)",
            )
        },
        rule(
            "KVFragmentationRisk",
            Expr::Gauge(Signal::LargestFreeRatio),
            Cmp::Below,
            0.05,
            5 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} largest free block is under 5% of memory while its allocator pools hold more, for {for}",
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
        Rule {
            runbook: "ExporterCollectFailing".into(),
            ..rule(
                "ExporterBlind",
                Expr::Gauge(Signal::ReadingsHidden),
                Cmp::Above,
                0.0,
                Duration::ZERO,
                Severity::Page,
                "gpu-exporter collections have failed or stalled past --collect.max-stale: the GPUs' readings are no longer served",
            )
        },
        rule(
            "GPUReadsLate",
            Expr::Increase(Signal::ReadsLate, 15 * MIN),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} NVML reads ran past the collection deadline in the last {window} ({{ printf \"%.1f\" $value }} more, extrapolated), so it was served from its last read",
        ),
        rule(
            "ExporterCollectFailing",
            Expr::Gauge(Signal::CollectSuccess),
            Cmp::Below,
            1.0,
            5 * MIN,
            Severity::Ticket,
            "gpu-exporter collections have failed or stalled for {for}; served readings are stale",
        ),
        rule(
            "ExporterDown",
            Expr::ExporterDown,
            Cmp::Above,
            0.0,
            MIN,
            Severity::Page,
            "Prometheus cannot scrape gpu-exporter at {{ $labels.instance }}: its GPUs are unmonitored",
        ),
        Rule {
            runbook: "ExporterDown".into(),
            ..rule(
                "ExporterAbsent",
                Expr::JobAbsent,
                Cmp::Above,
                0.0,
                2 * MIN,
                Severity::Page,
                "No gpu-exporter target is left in the scrape job {{ $labels.job }}",
            )
        },
        rule(
            "GPUCountDropped",
            Expr::GpuCountDropped,
            Cmp::Below,
            0.0,
            5 * MIN,
            Severity::Page,
            "gpu-exporter at {{ $labels.instance }} serves {{ $value }} GPUs, fewer than it did in the last day",
        ),
        rule(
            "GPUMemoryLeak",
            Expr::Deriv(Signal::of(&ALLOCATOR_ALLOCATED), HOUR),
            Cmp::Above,
            // 1 MiB a minute, held for 30m: steady growth, not a burst.
            1024.0 * 1024.0 / 60.0,
            30 * MIN,
            Severity::Ticket,
            "GPU {{ $labels.gpu }} allocator-allocated memory has grown steadily for {window}",
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
            "EngineDown",
            Expr::Gauge(Signal::EngineUp),
            Cmp::Below,
            1.0,
            2 * MIN,
            Severity::Ticket,
            "The engine serving {{ $labels.model_name }} has not answered gpu-exporter for {for}: the model's TTFT verdicts are held from its last good read",
        ),
        rule(
            "EngineEndpointDown",
            Expr::Gauge(Signal::EndpointUp),
            Cmp::Below,
            1.0,
            5 * MIN,
            Severity::Ticket,
            &[
                "Engine endpoint {{ $labels.endpoint }} has not answered gpu-exporter's reads for {for}: ",
                REASON,
            ]
            .concat(),
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
        rule(
            "EngineAvailabilityBurn",
            Expr::AvailabilityBurn {
                objective: AVAILABILITY_OBJECTIVE,
                windows: vec![burn(HOUR, 5 * MIN, 14.4), burn(6 * HOUR, 30 * MIN, 6.0)],
            },
            Cmp::Above,
            0.0,
            2 * MIN,
            Severity::Page,
            "{{ $labels.model_name }}'s engine is failing requests fast enough to burn its availability budget ({{ printf \"%.1f\" $value }}x)",
        ),
        Rule {
            runbook: "EngineAvailabilityBurn".into(),
            ..rule(
                "EngineAvailabilityBurnSlow",
                Expr::AvailabilityBurn {
                    objective: AVAILABILITY_OBJECTIVE,
                    windows: vec![burn(72 * HOUR, 6 * HOUR, 1.0)],
                },
                Cmp::Above,
                0.0,
                15 * MIN,
                Severity::Ticket,
                "{{ $labels.model_name }}'s engine is failing requests faster than its availability budget earns ({{ printf \"%.1f\" $value }}x)",
            )
        },
    ];
    rules.extend(super::health::rules());
    // Spelled again: the struct updates above set durations after `new`.
    rules.into_iter().map(Rule::spell).collect()
}
