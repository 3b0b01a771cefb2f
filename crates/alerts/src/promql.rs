//! The same rules as PromQL: a Prometheus rule file that evaluates exactly
//! what the exporter evaluates itself, plus the SLO recording rules.

use crate::rules::{BUSY_SM_ACTIVE, BurnWindow, Cmp, Expr, Rule, Signal};
use crate::summary::WORKLOADS;
use base::numbers::write_f64;
use base::time::format_duration;
use model::catalogue::engines::{ENGINE_DOWN, ENGINE_MODEL_SLO, ENGINE_MODEL_UP, ENGINE_UP};
use model::catalogue::health::{
    MEMORY_TEMPERATURE_MAX, NVLINK_ERRORS, NVLINK_LINKS, NVLINK_LINKS_ACTIVE, PCIE_LINK_WIDTH,
    PCIE_LINK_WIDTH_MAX, RECOVERY_ACTION,
};
use model::catalogue::{
    ALLOCATOR_ALLOCATED, ALLOCATOR_RESERVED, CLOCKS_EVENT_ACTIVE, COLLECT_STALLED, COLLECT_SUCCESS,
    GPU_INFO, GPU_READS_LATE, GPU_UP, GPUS, LARGEST_FREE, MEMORY_TEMPERATURE, MEMORY_TOTAL,
    MEMORY_USED, READINGS_HIDDEN, SM_ACTIVE, TTFT, XID_ERRORS,
};
use model::profile;
use model::{CLOCK_EVENT_REASONS, PAGE_XIDS, THROTTLE_MASK, TICKET_XIDS, TTFT_SLO_SECONDS};
use std::fmt::Write;
use std::time::Duration;

/// Where the exporter serves its own runbooks.
pub const OWN_RUNBOOKS: &str = "/docs/runbooks/";

pub mod availability;

/// The windows the SLI error ratio is always recorded over, for the
/// dashboard; the burn-rate rules' own windows are recorded too.
pub const SLI_WINDOWS: [u64; 7] = [300, 1800, 3600, 7200, 21_600, 86_400, 259_200];

/// Every window the error ratio is recorded over: [`SLI_WINDOWS`] and each
/// window a burn-rate rule reads, shortest first. The rules read the
/// records, so a rule's window never lacks one.
pub fn recorded_windows(rules: &[Rule]) -> Vec<Duration> {
    let mut w: Vec<Duration> = SLI_WINDOWS.map(Duration::from_secs).to_vec();
    for r in rules {
        if let Expr::BurnRate { windows, .. } | Expr::AvailabilityBurn { windows, .. } = &r.expr {
            w.extend(windows.iter().flat_map(|b| [b.long, b.short]));
        }
    }
    w.sort();
    w.dedup();
    w
}

fn num(v: f64) -> String {
    let mut out = Vec::new();
    write_f64(&mut out, v);
    String::from_utf8(out).unwrap_or_default()
}

/// Where a verdict on the engines' models is taken. `Node`: per engine
/// instance, keeping `instance` as every per-node alert does; the exporter
/// judges its node's models so (summing a model that two of its endpoints
/// serve). `Fleet`: per model across every instance, which only Prometheus
/// sees. Both page; Alertmanager mutes a model's node alerts while its
/// fleet alert fires, so that one incident pages once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Scope {
    Node,
    Fleet,
}

impl Scope {
    pub const BOTH: [Scope; 2] = [Scope::Node, Scope::Fleet];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Node => "node",
            Scope::Fleet => "fleet",
        }
    }

    /// The labels a model's series are summed by.
    fn by(self) -> &'static str {
        match self {
            Scope::Node => NODE_MODEL,
            Scope::Fleet => "model_name",
        }
    }

    /// The level of a record's name (`level:metric:operations`).
    fn level(self) -> &'static str {
        match self {
            Scope::Node => "instance_model_name",
            Scope::Fleet => "model_name",
        }
    }
}

/// The recorded TTFT error ratio over `window`, at `scope`.
pub fn error_ratio(scope: Scope, window: Duration) -> String {
    format!(
        "{}:llm_ttft_slo_errors:ratio_rate{}",
        scope.level(),
        format_duration(window)
    )
}

/// What an aggregation over one GPU's series keeps: the GPU and the node
/// (scrape job and target) it is on, so that its alert links to that
/// exporter's runbook and Alertmanager's `equal: [instance, uuid]`
/// inhibitions match.
const NODE_GPU: &str = "job, instance, gpu, uuid";

/// The same for a model an engine serves: the engine's target, or the
/// exporter's for the simulator's models.
const NODE_MODEL: &str = "job, instance, model_name";

impl Signal {
    /// An instant vector, one sample per subject: a counter summed over
    /// its series, a gauge as it is.
    fn gauge(self) -> String {
        if self.is_counter() {
            return format!("sum by ({}) ({})", self.by(), self.series());
        }
        match self {
            Signal::Throttled => {
                let reasons: Vec<&str> = CLOCK_EVENT_REASONS
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| THROTTLE_MASK & (1 << i) != 0)
                    .map(|(_, r)| *r)
                    .collect();
                format!(
                    "max by ({NODE_GPU}) ({}{{reason=~\"{}\"}})",
                    CLOCKS_EVENT_ACTIVE.name,
                    reasons.join("|")
                )
            }
            // Only a GPU with allocator stats, whose pools hold more free
            // memory than the largest block: fragmented, not merely full.
            Signal::LargestFreeRatio => format!(
                "({free} / {} and {} > 0 and ({} - {}) > {free})",
                MEMORY_TOTAL.name,
                MEMORY_USED.name,
                ALLOCATOR_RESERVED.name,
                ALLOCATOR_ALLOCATED.name,
                free = LARGEST_FREE.name,
            ),
            Signal::Up => GPU_UP.name.into(),
            Signal::CollectSuccess => COLLECT_SUCCESS.name.into(),
            Signal::CollectStalled => COLLECT_STALLED.name.into(),
            Signal::ReadingsHidden => READINGS_HIDDEN.name.into(),
            Signal::EngineUp => ENGINE_MODEL_UP.name.into(),
            // Down once read and failed (the reason is the summary's).
            Signal::EndpointUp => format!(
                "({} and on (job, instance, endpoint) {})",
                ENGINE_UP.name, ENGINE_DOWN.name
            ),
            Signal::PcieLinkWidthRatio => {
                format!("({} / {})", PCIE_LINK_WIDTH.name, PCIE_LINK_WIDTH_MAX.name)
            }
            // Busy as the GPU itself is, not its MIG instances: the same
            // readings the exporter's evaluator looks at.
            Signal::NvlinkDownWhileBusy => format!(
                "(({} - {}) and on ({NODE_GPU}) ({}{{mig_instance=\"\"}} > {} or {}{{mig_instance=\"\"}} > 0))",
                NVLINK_LINKS.name,
                NVLINK_LINKS_ACTIVE.name,
                SM_ACTIVE.name,
                num(BUSY_SM_ACTIVE),
                ALLOCATOR_RESERVED.name
            ),
            Signal::MemoryTemperatureHeadroom => format!(
                "({} - {})",
                MEMORY_TEMPERATURE_MAX.name, MEMORY_TEMPERATURE.name
            ),
            Signal::Reading(r) => r.family.name.into(),
            Signal::RecoveryReset => format!("({} == 1)", RECOVERY_ACTION.name),
            // The counters, summed above (`Signal::is_counter` lists them);
            // a test holds every signal to a non-empty expression.
            _ => String::new(),
        }
    }

    fn by(self) -> &'static str {
        match self {
            Signal::Requests | Signal::GoodRequests | Signal::EngineUp => NODE_MODEL,
            Signal::AnsweredRequests | Signal::ServedRequests => NODE_MODEL,
            _ => NODE_GPU,
        }
    }

    /// The raw series a range function reads.
    fn series(self) -> String {
        match self {
            Signal::CriticalXid | Signal::RecordedXid => {
                let codes = if self == Signal::CriticalXid {
                    &PAGE_XIDS[..]
                } else {
                    &TICKET_XIDS[..]
                };
                let codes: Vec<String> = codes.iter().map(u32::to_string).collect();
                format!("{}{{xid=~\"{}\"}}", XID_ERRORS.sample(), codes.join("|"))
            }
            Signal::NvlinkErrors => NVLINK_ERRORS.sample(),
            Signal::ReadsLate => GPU_READS_LATE.sample(),
            Signal::Requests => format!("{}_count", TTFT.name),
            Signal::GoodRequests => {
                format!("{}_bucket{{le=\"{}\"}}", TTFT.name, num(TTFT_SLO_SECONDS))
            }
            Signal::AnsweredRequests | Signal::ServedRequests => self.outcomes(&|s| s),
            Signal::Reading(r) if self.is_counter() => r.family.sample(),
            // A counter without its series: empty, and a test fails.
            _ if self.is_counter() => String::new(),
            gauge => gauge.gauge(),
        }
    }
}

impl Signal {
    /// Every engine's answered or served requests as the reader sums them,
    /// by model, each counter put through `of`: a range function must
    /// reach the counters themselves, not the sum over them.
    fn outcomes(self, of: &dyn Fn(String) -> String) -> String {
        let (failed, answered) = availability::requests(of, Scope::Node);
        match self {
            Signal::AnsweredRequests => answered,
            _ => format!("({answered} - {failed})"),
        }
    }
}

impl Rule {
    /// The rule's expression, its verdicts on models taken at `scope`
    /// (the exporter's own are at `Node`); `job` is the scrape job of the
    /// exporters, for the rules on Prometheus' own `up`.
    pub fn promql(&self, job: &str, scope: Scope) -> String {
        let cmp = |value: String| format!("{value} {} {}", self.cmp.as_str(), num(self.threshold));
        let range = |f: &str, s: Signal, w: Duration| {
            let w = format_duration(w);
            match s {
                Signal::AnsweredRequests | Signal::ServedRequests => {
                    s.outcomes(&|c| format!("{f}({c}[{w}])"))
                }
                _ => format!("sum by ({}) ({f}({}[{w}]))", s.by(), s.series()),
            }
        };
        match &self.expr {
            Expr::Gauge(s) if !self.gap_hold.is_zero() => self.held(&s.gauge()),
            Expr::Gauge(s) => cmp(s.gauge()),
            &Expr::Increase(s, w) => cmp(range("increase", s, w)),
            &Expr::Rate(s, w) => cmp(range("rate", s, w)),
            &Expr::Deriv(s, w) => cmp(format!("deriv({})", ranged(&s.gauge(), w))),
            Expr::BurnRate { objective, windows }
            | Expr::AvailabilityBurn { objective, windows } => {
                self.burn(*objective, windows, scope)
            }
            Expr::DriverVersionSkew => cmp(format!(
                "count(count by (driver_version) ({}))",
                GPU_INFO.sample()
            )),
            Expr::ExporterDown => format!("up{{job=\"{job}\"}} == 0"),
            Expr::JobAbsent => format!("absent(up{{job=\"{job}\"}})"),
            Expr::GpuCountDropped => format!(
                "{g}{{job=\"{job}\"}} < max_over_time({g}{{job=\"{job}\"}}[1d])",
                g = GPUS.name
            ),
        }
    }

    /// A gauge held through a gap (`gap_hold`): its last sample within
    /// it, so one that clears it resolves it at once, as does one of the
    /// same GPU under another index (a restarted exporter's numbering).
    fn held(&self, live: &str) -> String {
        let (n, last) = (num(self.threshold), ranged(live, self.gap_hold));
        let held = format!("last_over_time({last}) {} {n}", self.cmp.as_str());
        let clear = if self.cmp == Cmp::Above { "<=" } else { ">=" };
        match self.about_gpus() {
            true => format!("{held} unless on (job, instance, uuid) {live} {clear} {n}"),
            false => held,
        }
    }

    /// A burn-rate rule's pairs of windows over the recorded ratios at
    /// `scope`.
    fn burn(&self, objective: f64, windows: &[BurnWindow], scope: Scope) -> String {
        let ratio = |w| match availability::reads(self) {
            true => availability::error_ratio(scope, w),
            false => error_ratio(scope, w),
        };
        // The value is the burn rate itself, as the exporter reports
        // it: the error ratio over the budget. 1 − 0.999 is spelled
        // 0.001, not 0.0010000000000000009.
        let pairs = |sel: &str, objective: f64| {
            let budget = num(format!("{:.12e}", 1.0 - objective)
                .parse()
                .unwrap_or(f64::NAN));
            let pairs: Vec<String> = windows
                .iter()
                .map(|b| {
                    let f = num(b.factor);
                    format!(
                        "({}{sel} / {budget} > {f} and {}{sel} / {budget} > {f})",
                        ratio(b.long),
                        ratio(b.short)
                    )
                })
                .collect();
            pairs.join(" or ")
        };
        if self.objectives.is_empty() {
            return pairs("", objective);
        }
        // A model with its own objective is judged by it; the
        // rest by the rule's.
        let own = self.objectives.iter();
        let mut parts: Vec<String> = own
            .map(|(m, o)| format!("({})", pairs(&selector("model_name", "=", m), *o)))
            .collect();
        let rest: Vec<String> = (self.objectives.iter())
            .map(|(m, _)| format!("model_name!=\"{}\"", escaped(m)))
            .collect();
        let rest = format!("{{{}}}", rest.join(","));
        parts.push(format!("({})", pairs(&rest, objective)));
        parts.join(" or ")
    }
}

/// `expr` over the range `w`: a selector's, or over an expression a
/// subquery at the evaluation interval (a range needs a selector).
fn ranged(expr: &str, w: Duration) -> String {
    let w = format_duration(w);
    match (expr.chars()).all(|c| c.is_ascii_alphanumeric() || "_:".contains(c)) {
        true => format!("{expr}[{w}]"),
        false => format!("({expr})[{w}:]"),
    }
}

/// A label value as a PromQL string's insides.
fn escaped(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

/// `{label="value"}` with `op` (`=`, `!=`).
fn selector(label: &str, op: &str, value: &str) -> String {
    format!("{{{label}{op}\"{}\"}}", escaped(value))
}

/// A YAML single-quoted scalar.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// What the printed rule file needs beyond the rules.
pub struct Printing<'a> {
    /// The runbooks' base, absolute (`Config::printed_runbook_base`).
    pub runbook_base: &'a str,
    /// Whether `--alerts.runbook-base-url` set that base: a host that is up
    /// when an exporter is not, which fleet alerts and ExporterDown link
    /// through. Without it they name their runbook and link nowhere.
    pub stable_runbooks: bool,
    /// `--collect.max-stale`, which the pages' `keep_firing_for` follows.
    pub max_stale: Duration,
    /// The job Prometheus scrapes the exporters under.
    pub job: &'a str,
    /// `--engine.ttft-threshold` or `--engine.config`'s, for the rules
    /// over the engines' series.
    pub ttft_threshold: f64,
    /// The models with a threshold of their own (`--engine.config`).
    pub thresholds: &'a [(String, f64)],
}

/// A bound as a regex of its spellings: prometheus_client writes `100.0`
/// where prometheus-cpp writes `100`.
fn le(v: f64) -> String {
    match v.fract() == 0.0 {
        true => format!("le=~\"{}|{}.0\"", num(v), num(v)),
        false => format!("le=~\"{}\"", num(v)),
    }
}

/// The good and the total requests' rates over `w` (`5m`), by model, from
/// the simulator's `llm_ttft_seconds` and every engine's own TTFT
/// histogram. An engine's series are judged at the bound an exporter
/// reading the model serves (`gpu_exporter_engine_model_slo_info`, its
/// `bucket` joined on `le`, and on `model_name`); a model no exporter reads, at the threshold
/// where it is a bound, else at the nearest of its engine's known default
/// bounds below it ([`fallback`]). A series with no bucket at its judged
/// bound is in neither the good nor the total: the total is the `_count`
/// of the series judged. Per series, `le` dropped: recorded once a window
/// ([`series_rate`]) and summed at each scope.
fn requests(w: &str, threshold: f64, own: &[(String, f64)]) -> (String, String) {
    let mut good = vec![format!("rate({}[{w}])", Signal::GoodRequests.series())];
    let mut total = vec![format!("rate({}[{w}])", Signal::Requests.series())];
    let info = ENGINE_MODEL_SLO.sample();
    let mut seen: Vec<&str> = Vec::new();
    for p in profile::all() {
        for &name in p.ttft {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            let engines: Vec<&str> = (profile::all().iter())
                .filter(|q| q.ttft.contains(&name))
                .map(|q| q.engine.name())
                .collect();
            let bucket = |sel: &str| named(p, format!("rate({name}_bucket{sel}[{w}])"));
            // `bucket` is the `le` judged (`le` is a histogram's own label).
            let read = format!(
                "label_replace(max by (model_name, bucket) ({info}{{engine=~\"{}\"}}), \"le\", \"$1\", \"bucket\", \"(.*)\")",
                engines.join("|")
            );
            let judged = format!("{} * on (model_name, le) group_left () {read}", bucket(""));
            let fallback = fallback(p, &bucket, threshold, own);
            let g = format!("({judged} or (({fallback}) unless on (model_name) {info}))");
            good.push(format!("min without (le) {g}"));
            let count = named(p, format!("rate({name}_count[{w}])"));
            total.push(format!("({count} and ignoring (le) {g})"));
        }
    }
    (good.join(" or "), total.join(" or "))
}

/// `e` with `p`'s model label copied to `model_name` (Triton's `model`).
fn named(p: &profile::Profile, e: String) -> String {
    match p.model_label {
        "model_name" => e,
        l => format!("label_replace({e}, \"model_name\", \"$1\", \"{l}\", \"(.+)\")"),
    }
}

/// The judged buckets of models no exporter reads: at the threshold where
/// a series has it as a bound, else at the nearest below it of `p`'s known
/// releases' default bounds that the series has; the models of `own` at
/// their own thresholds, the rest at `threshold`. `bucket` selects the
/// histogram's buckets.
fn fallback(
    p: &profile::Profile,
    bucket: &dyn Fn(&str) -> String,
    threshold: f64,
    own: &[(String, f64)],
) -> String {
    let l = p.model_label;
    let judged = |threshold: f64, sel: &str| {
        let t = threshold * p.per_second;
        let mut at = vec![t];
        for list in p.defaults {
            if let Some(b) = list.iter().copied().rfind(|&b| b < t)
                && !at.contains(&b)
            {
                at.push(b);
            }
        }
        at[1..].sort_by(|a, b| b.total_cmp(a));
        let one = |v: f64| bucket(&format!("{{{sel}{}}}", le(v)));
        let mut terms = vec![one(t)];
        for (i, &b) in at.iter().enumerate().skip(1) {
            let above: Vec<String> = at[..i].iter().map(|&a| one(a)).collect();
            terms.push(format!(
                "({} unless ignoring (le) ({}))",
                one(b),
                above.join(" or ")
            ));
        }
        match terms.len() {
            1 => terms.remove(0),
            _ => format!("({})", terms.join(" or ")),
        }
    };
    let mut g: Vec<String> = (own.iter())
        .map(|(m, t)| judged(*t, &format!("{l}=\"{}\",", escaped(m))))
        .collect();
    let rest: String = (own.iter())
        .map(|(m, _)| format!("{l}!=\"{}\",", escaped(m)))
        .collect();
    g.push(judged(threshold, &rest));
    g.join(" or ")
}

/// The record of the TTFT requests judged (`good`: of them, the good ones)
/// per histogram series over `w`, before any sum: one evaluation of the
/// judging a window, which both scopes sum.
fn series_rate(good: bool, w: Duration) -> String {
    let what = if good {
        "llm_ttft_good_requests"
    } else {
        "llm_ttft_requests"
    };
    format!("series:{what}:rate{}", format_duration(w))
}

/// The Prometheus rule file `--print-rules` writes.
pub fn rule_file(rules: &[Rule], p: &Printing) -> String {
    let mut y = String::from(
        "# Generated by `gpu-exporter --print-rules` from the exporter's own rule data.\n\
         # The exporter evaluates these same rules itself, except DriverVersionSkew,\n\
         # ExporterDown, ExporterAbsent and GPUCountDropped, which need what only\n\
         # Prometheus sees; see README.md.\n",
    );
    let _ = writeln!(
        y,
        "# Printed with --collect.max-stale {}: every page outlasts its series at\n\
         # least that plus the longest `for` of the exporter's own failure pages\n\
         # (adjust::cover_failures), so print again when the flag changes.",
        format_duration(p.max_stale)
    );
    y.push_str("groups:\n  - name: gpu-exporter-slo\n    rules:\n");
    let windows = recorded_windows(rules);
    for &w in &windows {
        let (good, total) = requests(&format_duration(w), p.ttft_threshold, p.thresholds);
        for (good_or_all, expr) in [(true, good), (false, total)] {
            let _ = writeln!(y, "      - record: {}", series_rate(good_or_all, w));
            let _ = writeln!(y, "        expr: {}", quoted(&expr));
        }
    }
    for scope in Scope::BOTH {
        let sum =
            |good: bool, w: Duration| format!("sum by ({}) ({})", scope.by(), series_rate(good, w));
        let five = Duration::from_secs(300);
        let goodput = format!("{}:llm_goodput_requests:rate5m", scope.level());
        let _ = writeln!(y, "      - record: {goodput}");
        let _ = writeln!(y, "        expr: {}", quoted(&sum(true, five)));
        for &w in &windows {
            let expr = format!("1 - ({} / {})", sum(true, w), sum(false, w));
            let _ = writeln!(y, "      - record: {}", error_ratio(scope, w));
            let _ = writeln!(y, "        expr: {}", quoted(&expr));
        }
        availability::records(&mut y, &windows, scope);
    }
    y.push_str("  - name: gpu-exporter\n    rules:\n");
    for r in rules {
        // A verdict on models is printed at both scopes, node first.
        let scopes = match r.over_engines() {
            true => &Scope::BOTH[..],
            false => &[Scope::Node][..],
        };
        for &scope in scopes {
            alert(&mut y, r, p, scope);
        }
    }
    y
}

/// One alerting rule, its verdicts on models taken at `scope`.
fn alert(y: &mut String, r: &Rule, p: &Printing, scope: Scope) {
    let _ = writeln!(y, "      - alert: {}", r.name);
    let _ = writeln!(y, "        expr: {}", quoted(&r.promql(p.job, scope)));
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
    let _ = writeln!(y, "        labels:");
    let _ = writeln!(y, "          severity: {}", r.severity.as_str());
    if r.over_engines() {
        let _ = writeln!(y, "          scope: {}", scope.as_str());
    }
    let _ = writeln!(y, "        annotations:");
    let _ = writeln!(y, "          summary: {}", quoted(&r.summary));
    if r.about_gpus() {
        let _ = writeln!(y, "          workloads: {}", quoted(WORKLOADS));
    }
    annotate_runbook(y, r, p);
}

/// A fleet alert's `scope`, and the runbook: linked through the exporter
/// the alert is about while it is up, through `--alerts.runbook-base-url`
/// where it is not or there is none, else named without a link.
fn annotate_runbook(y: &mut String, r: &Rule, p: &Printing) {
    if r.fleet() {
        let _ = writeln!(
            y,
            "          scope: {}",
            quoted(
                "fleet: this alert has no instance label; it is about every target of the job, not one node"
            )
        );
    }
    if r.runbook_on_instance() || p.stable_runbooks {
        let url = r.runbook_url(p.runbook_base);
        let _ = writeln!(y, "          runbook_url: {}", quoted(&url));
        return;
    }
    let text = format!(
        "{name}.md: every gpu-exporter serves it at {OWN_RUNBOOKS}{name}.md; \
         --alerts.runbook-base-url makes this a link that needs no exporter up",
        name = r.runbook
    );
    let _ = writeln!(y, "          runbook: {}", quoted(&text));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults;

    fn printing() -> Printing<'static> {
        Printing {
            runbook_base: "x/",
            stable_runbooks: false,
            max_stale: Duration::from_secs(60),
            job: "gpu",
            ttft_threshold: 0.3,
            thresholds: &[],
        }
    }

    #[test]
    fn every_signal_has_an_expression_and_counters_a_series() {
        for s in Signal::all() {
            assert!(!s.gauge().is_empty(), "{s:?}");
            assert!(!s.series().is_empty(), "{s:?}");
            assert_eq!(s.gauge().starts_with("sum by"), s.is_counter(), "{s:?}");
        }
    }

    #[test]
    fn default_rules_as_promql() {
        let rules = defaults();
        let q = |name: &str| {
            rules
                .iter()
                .find(|r| r.name == name)
                .unwrap()
                .promql("gpu", Scope::Node)
        };
        assert_eq!(
            q("GPUThrottling"),
            "max by (job, instance, gpu, uuid) (gpu_clocks_event_active{reason=~\"hw_slowdown|sw_thermal_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown\"}) > 0"
        );
        assert_eq!(
            q("GPUXidErrors"),
            "sum by (job, instance, gpu, uuid) (increase(gpu_xid_errors_total{xid=~\"48|62|64|74|79|95|119|120\"}[5m])) > 0"
        );
        assert_eq!(
            q("GPUXidEvents"),
            "sum by (job, instance, gpu, uuid) (increase(gpu_xid_errors_total{xid=~\"63|92|94\"}[5m])) > 0"
        );
        assert_eq!(q("ExporterDown"), "up{job=\"gpu\"} == 0");
        assert_eq!(q("ExporterAbsent"), "absent(up{job=\"gpu\"})");
        assert_eq!(
            q("GPUCountDropped"),
            "gpu_exporter_gpus{job=\"gpu\"} < max_over_time(gpu_exporter_gpus{job=\"gpu\"}[1d])"
        );
        assert_eq!(q("GPULost"), "gpu_up < 1");
        assert_eq!(
            q("KVFragmentationRisk"),
            "(gpu_memory_largest_free_bytes / gpu_memory_total_bytes and gpu_memory_used_bytes > 0 \
             and (gpu_allocator_reserved_bytes - gpu_allocator_allocated_bytes) > gpu_memory_largest_free_bytes) < 0.05"
        );
        assert_eq!(
            q("TTFTBudgetBurn"),
            "(instance_model_name:llm_ttft_slo_errors:ratio_rate1h / 0.001 > 14.4 and instance_model_name:llm_ttft_slo_errors:ratio_rate5m / 0.001 > 14.4) or \
             (instance_model_name:llm_ttft_slo_errors:ratio_rate6h / 0.001 > 6 and instance_model_name:llm_ttft_slo_errors:ratio_rate30m / 0.001 > 6)"
        );
        let burn = rules.iter().find(|r| r.name == "TTFTBudgetBurn").unwrap();
        assert_eq!(
            burn.promql("gpu", Scope::Fleet),
            q("TTFTBudgetBurn").replace("instance_model_name:", "model_name:")
        );
        assert_eq!(
            q("DriverVersionSkew"),
            "count(count by (driver_version) (gpu_info)) > 1"
        );
        let p = printing();
        assert!(!rule_file(&rules, &p).contains("utilization"));
    }

    /// A per-node alert keeps `instance`: every aggregation keeps it, and
    /// none counts or tests absence across series. A fleet alert says it
    /// has none. A verdict on models is printed at both scopes, labelled
    /// so, and links its runbook through no engine.
    #[test]
    fn per_node_alerts_keep_their_instance() {
        let p = printing();
        let mut fleet = Vec::new();
        let mut both = Vec::new();
        for r in defaults() {
            let q = r.promql("gpu", Scope::Node);
            if r.fleet() {
                fleet.push(r.name.clone());
                continue;
            }
            let file = rule_file(std::slice::from_ref(&r), &p);
            if r.over_engines() {
                both.push(r.name.clone());
                let node = file.find("scope: node\n").unwrap();
                let fleet = file.find("scope: fleet\n").unwrap();
                assert!(node < fleet, "{file}");
                assert!(!file.contains("runbook_url"), "{file}");
                for by in file.split(" by (").skip(1) {
                    let labels = &by[..by.find(')').unwrap()];
                    // The last: the judged bounds the exporters serve, joined on.
                    let ok = [
                        "job, instance, model_name",
                        "model_name",
                        "model_name, bucket",
                    ];
                    assert!(ok.contains(&labels), "{labels}");
                }
                continue;
            }
            assert!(
                !q.contains("count(") && !q.contains("absent("),
                "{}: {q}",
                r.name
            );
            for by in q.split(" by (").skip(1).chain(q.split(" on (").skip(1)) {
                let labels = &by[..by.find(')').unwrap()];
                assert!(labels.contains("instance"), "{}: {q}", r.name);
            }
            assert!(file.contains("runbook_url: 'x/") || r.name == "ExporterDown");
            assert!(!file.contains("scope:"), "{}", r.name);
        }
        assert_eq!(fleet, ["ExporterAbsent", "DriverVersionSkew"]);
        assert_eq!(
            both,
            [
                "TTFTBudgetBurn",
                "TTFTBudgetBurnSlow",
                "EngineAvailabilityBurn",
                "EngineAvailabilityBurnSlow"
            ]
        );
    }

    #[test]
    fn every_burn_window_is_recorded() {
        use crate::rules::{BurnWindow, Cmp, Severity};
        let custom = Rule::new(
            "Burn",
            Expr::BurnRate {
                objective: 0.99,
                windows: vec![BurnWindow {
                    long: Duration::from_secs(90),
                    short: Duration::from_secs(10),
                    factor: 2.0,
                }],
            },
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Page,
            "",
        );
        let p = printing();
        let file = rule_file(std::slice::from_ref(&custom), &p);
        for w in ["10s", "90s", "5m", "3d"] {
            for level in ["model_name", "instance_model_name"] {
                let record = format!("- record: {level}:llm_ttft_slo_errors:ratio_rate{w}\n");
                assert!(file.contains(&record), "{w}: {file}");
            }
        }
        assert!(
            custom
                .promql("gpu", Scope::Node)
                .contains("ratio_rate90s / 0.01 > 2")
        );
    }

    /// A model's own threshold and objective select it by name, quotes and
    /// backslashes escaped; the rest keep the defaults.
    #[test]
    fn per_model_settings_select_their_model() {
        let name = "o'k\"x\\y";
        let own = [(name.to_string(), 0.5)];
        let (good, _) = requests("5m", 0.3, &own);
        let at = r#"rate(vllm:time_to_first_token_seconds_bucket{model_name="o'k\"x\\y",le=~"0.5"}[5m])"#;
        assert!(good.contains(at), "{good}");
        let rest = r#"rate(vllm:time_to_first_token_seconds_bucket{model_name!="o'k\"x\\y",le=~"0.3"}[5m])"#;
        assert!(good.contains(rest), "{good}");
        assert!(
            good.contains(r#"{model!="o'k\"x\\y",le=~"100|100.0"}"#),
            "{good}"
        );
        let burn = Rule {
            objectives: vec![(name.to_string(), 0.99)],
            ..defaults()
                .into_iter()
                .find(|r| r.name == "TTFTBudgetBurnSlow")
                .unwrap()
        };
        assert_eq!(
            burn.promql("gpu", Scope::Fleet),
            r#"((model_name:llm_ttft_slo_errors:ratio_rate3d{model_name="o'k\"x\\y"} / 0.01 > 1 and model_name:llm_ttft_slo_errors:ratio_rate6h{model_name="o'k\"x\\y"} / 0.01 > 1)) or ((model_name:llm_ttft_slo_errors:ratio_rate3d{model_name!="o'k\"x\\y"} / 0.001 > 1 and model_name:llm_ttft_slo_errors:ratio_rate6h{model_name!="o'k\"x\\y"} / 0.001 > 1))"#
        );
        let p = Printing {
            thresholds: &own,
            ..printing()
        };
        assert!(rule_file(&[burn], &p).contains(r#"{model_name="o''k\"x\\y",le=~"0.5"}"#));
    }
}
