//! The same rules as PromQL: a Prometheus rule file that evaluates exactly
//! what the exporter evaluates itself, plus the SLO recording rules.

use super::rules::{BUSY_SM_ACTIVE, Expr, Rule, Signal};
use super::summary::WORKLOADS;
use crate::base::numbers::write_f64;
use crate::base::time::format_duration;
use crate::exposition::catalogue::health::{
    MEMORY_TEMPERATURE_MAX, NVLINK_ERRORS, NVLINK_LINKS, NVLINK_LINKS_ACTIVE, PCIE_LINK_WIDTH,
    PCIE_LINK_WIDTH_MAX, RECOVERY_ACTION, RETIRED_PAGES_PENDING, ROW_REMAP_FAILED,
    ROW_REMAP_PENDING,
};
use crate::exposition::catalogue::{
    ALLOCATOR_ALLOCATED, ALLOCATOR_RESERVED, CLOCKS_EVENT_ACTIVE, COLLECT_SUCCESS, ECC_UNCORRECTED,
    GPU_INFO, GPU_UP, LARGEST_FREE, MEMORY_TEMPERATURE, MEMORY_TOTAL, MEMORY_USED, PCIE_REPLAYS,
    SM_ACTIVE, TEMPERATURE, TTFT, XID_ERRORS,
};
use crate::snapshot::{CLOCK_EVENT_REASONS, CRITICAL_XIDS, THROTTLE_MASK, TTFT_SLO_SECONDS};
use std::fmt::Write;
use std::time::Duration;

/// The windows of the SLI error-ratio recording rules.
pub const SLI_WINDOWS: [u64; 7] = [300, 1800, 3600, 7200, 21_600, 86_400, 259_200];

fn num(v: f64) -> String {
    let mut out = Vec::new();
    write_f64(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

/// The recorded TTFT error ratio over `window`.
pub fn error_ratio(window: Duration) -> String {
    format!(
        "model_name:llm_ttft_slo_errors:ratio_rate{}",
        format_duration(window)
    )
}

impl Signal {
    /// An instant vector, one sample per subject.
    fn gauge(self) -> String {
        match self {
            Signal::Throttled => {
                let reasons: Vec<&str> = CLOCK_EVENT_REASONS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| THROTTLE_MASK & (1 << i) != 0)
                    .map(|(_, r)| *r)
                    .collect();
                format!(
                    "max by (gpu, uuid) ({}{{reason=~\"{}\"}})",
                    CLOCKS_EVENT_ACTIVE.name,
                    reasons.join("|")
                )
            }
            Signal::LargestFreeRatio => format!(
                "({} / {} and {} > 0)",
                LARGEST_FREE.name, MEMORY_TOTAL.name, MEMORY_USED.name
            ),
            Signal::Up => GPU_UP.name.into(),
            Signal::AllocatorAllocated => ALLOCATOR_ALLOCATED.name.into(),
            Signal::Temperature => TEMPERATURE.name.into(),
            Signal::CollectSuccess => COLLECT_SUCCESS.name.into(),
            Signal::RowRemapFailed => ROW_REMAP_FAILED.name.into(),
            Signal::RowRemapPending => ROW_REMAP_PENDING.name.into(),
            Signal::RetiredPagesPending => RETIRED_PAGES_PENDING.name.into(),
            Signal::PcieLinkWidthRatio => {
                format!("({} / {})", PCIE_LINK_WIDTH.name, PCIE_LINK_WIDTH_MAX.name)
            }
            // Busy as the GPU itself is, not its MIG instances: the same
            // readings the exporter's evaluator looks at.
            Signal::NvlinkDownWhileBusy => format!(
                "(({} - {}) and on (gpu, uuid) ({}{{mig_instance=\"\"}} > {} or {}{{mig_instance=\"\"}} > 0))",
                NVLINK_LINKS.name,
                NVLINK_LINKS_ACTIVE.name,
                SM_ACTIVE.name,
                num(BUSY_SM_ACTIVE),
                ALLOCATOR_RESERVED.name
            ),
            Signal::MemoryTemperature => MEMORY_TEMPERATURE.name.into(),
            Signal::MemoryTemperatureHeadroom => format!(
                "({} - {})",
                MEMORY_TEMPERATURE_MAX.name, MEMORY_TEMPERATURE.name
            ),
            Signal::RecoveryAction => RECOVERY_ACTION.name.into(),
            Signal::RecoveryReset => format!("({} == 1)", RECOVERY_ACTION.name),
            Signal::CriticalXid
            | Signal::EccUncorrected
            | Signal::Requests
            | Signal::GoodRequests
            | Signal::NvlinkErrors
            | Signal::PcieReplays => {
                format!("sum by ({}) ({})", self.by(), self.series())
            }
        }
    }

    fn by(self) -> &'static str {
        match self {
            Signal::Requests | Signal::GoodRequests => "model_name",
            _ => "gpu, uuid",
        }
    }

    /// The raw series a range function reads.
    fn series(self) -> String {
        match self {
            Signal::CriticalXid => {
                let codes: Vec<String> = CRITICAL_XIDS.iter().map(u32::to_string).collect();
                format!("{}{{xid=~\"{}\"}}", XID_ERRORS.sample(), codes.join("|"))
            }
            Signal::EccUncorrected => ECC_UNCORRECTED.sample(),
            Signal::NvlinkErrors => NVLINK_ERRORS.sample(),
            Signal::PcieReplays => PCIE_REPLAYS.sample(),
            Signal::Requests => format!("{}_count", TTFT.name),
            Signal::GoodRequests => {
                format!("{}_bucket{{le=\"{}\"}}", TTFT.name, num(TTFT_SLO_SECONDS))
            }
            other => other.gauge(),
        }
    }
}

impl Rule {
    pub fn promql(&self) -> String {
        let cmp = |value: String| format!("{value} {} {}", self.cmp.as_str(), num(self.threshold));
        let range = |f: &str, s: Signal, w: Duration| {
            format!(
                "sum by ({}) ({f}({}[{}]))",
                s.by(),
                s.series(),
                format_duration(w)
            )
        };
        match &self.expr {
            Expr::Gauge(s) => cmp(s.gauge()),
            &Expr::Increase(s, w) => cmp(range("increase", s, w)),
            &Expr::Rate(s, w) => cmp(range("rate", s, w)),
            &Expr::Deriv(s, w) => cmp(format!("deriv({}[{}])", s.gauge(), format_duration(w))),
            Expr::BurnRate { objective, windows } => {
                // The value is the burn rate itself, as the exporter reports
                // it: the error ratio over the budget. 1 − 0.999 is spelled
                // 0.001, not 0.0010000000000000009.
                let budget = num(format!("{:.12e}", 1.0 - objective)
                    .parse()
                    .unwrap_or(f64::NAN));
                let pairs: Vec<String> = windows
                    .iter()
                    .map(|b| {
                        let f = num(b.factor);
                        format!(
                            "({} / {budget} > {f} and {} / {budget} > {f})",
                            error_ratio(b.long),
                            error_ratio(b.short)
                        )
                    })
                    .collect();
                pairs.join(" or ")
            }
            Expr::DriverVersionSkew => cmp(format!(
                "count(count by (driver_version) ({}))",
                GPU_INFO.sample()
            )),
        }
    }
}

/// A YAML single-quoted scalar.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The Prometheus rule file `--print-rules` writes.
pub fn rule_file(rules: &[Rule], runbook_base: &str) -> String {
    let mut y = String::from(
        "# Generated by `gpu-exporter --print-rules` from the exporter's own rule data.\n\
         # The exporter evaluates these same rules itself, except DriverVersionSkew,\n\
         # which needs the whole fleet; see README.md.\n\
         groups:\n  - name: gpu-exporter-slo\n    rules:\n",
    );
    let good = Signal::GoodRequests;
    let _ = writeln!(y, "      - record: model_name:llm_goodput_requests:rate5m");
    let _ = writeln!(
        y,
        "        expr: {}",
        quoted(&format!(
            "sum by (model_name) (rate({}[5m]))",
            good.series()
        ))
    );
    for w in SLI_WINDOWS.map(Duration::from_secs) {
        let d = format_duration(w);
        let expr = format!(
            "1 - (sum by (model_name) (rate({}[{d}])) / sum by (model_name) (rate({}[{d}])))",
            good.series(),
            Signal::Requests.series()
        );
        let _ = writeln!(y, "      - record: {}", error_ratio(w));
        let _ = writeln!(y, "        expr: {}", quoted(&expr));
    }
    y.push_str("  - name: gpu-exporter\n    rules:\n");
    for r in rules {
        let _ = writeln!(y, "      - alert: {}", r.name);
        let _ = writeln!(y, "        expr: {}", quoted(&r.promql()));
        if !r.for_.is_zero() {
            let _ = writeln!(y, "        for: {}", format_duration(r.for_));
        }
        if !r.keep_firing_for.is_zero() {
            let _ = writeln!(
                y,
                "        keep_firing_for: {}",
                format_duration(r.keep_firing_for)
            );
        }
        let _ = writeln!(
            y,
            "        labels:\n          severity: {}",
            r.severity.as_str()
        );
        let _ = writeln!(y, "        annotations:");
        let _ = writeln!(y, "          summary: {}", quoted(&r.summary));
        if r.about_gpus() {
            let _ = writeln!(y, "          workloads: {}", quoted(WORKLOADS));
        }
        let _ = writeln!(
            y,
            "          runbook_url: {}",
            quoted(&r.runbook_url(runbook_base))
        );
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::rules::defaults;

    #[test]
    fn default_rules_as_promql() {
        let rules = defaults();
        let q = |name: &str| rules.iter().find(|r| r.name == name).unwrap().promql();
        assert_eq!(
            q("GPUThrottling"),
            "max by (gpu, uuid) (gpu_clocks_event_active{reason=~\"hw_slowdown|sw_thermal_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown\"}) > 0"
        );
        assert_eq!(
            q("GPUXidErrors"),
            "sum by (gpu, uuid) (increase(gpu_xid_errors_total{xid=~\"48|62|63|64|74|79|92|94|95|119|120\"}[5m])) > 0"
        );
        assert_eq!(q("GPULost"), "gpu_up < 1");
        assert!(q("KVFragmentationRisk").ends_with("gpu_memory_used_bytes > 0) < 0.05"));
        assert_eq!(
            q("TTFTBudgetBurn"),
            "(model_name:llm_ttft_slo_errors:ratio_rate1h / 0.001 > 14.4 and model_name:llm_ttft_slo_errors:ratio_rate5m / 0.001 > 14.4) or \
             (model_name:llm_ttft_slo_errors:ratio_rate6h / 0.001 > 6 and model_name:llm_ttft_slo_errors:ratio_rate30m / 0.001 > 6)"
        );
        assert_eq!(
            q("DriverVersionSkew"),
            "count(count by (driver_version) (gpu_info)) > 1"
        );
        assert!(!rule_file(&rules, "x/").contains("utilization"));
    }
}
