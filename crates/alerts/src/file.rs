//! `--rules.file`: JSON that merges into the default rules by name, or
//! replaces them with `"replace": true`.

use super::defaults;
use super::rules::{BurnWindow, Cmp, Expr, Rule, Severity, Signal};
use base::json;
use base::time::{format_duration, parse_duration};
use model::MAX_NAME;
use std::time::Duration;

#[allow(clippy::question_mark)] // in nanoserde's derived code
mod shape {
    use base::json::json_struct;

    json_struct! {
        pub struct RulesFile {
            pub replace: Option<bool>,
            pub rules: Vec<RuleSpec>,
        }
    }

    json_struct! {
        pub struct RuleSpec {
            pub name: String,
            pub kind: Option<String>,
            pub signal: Option<String>,
            pub window: Option<String>,
            pub op: Option<String>,
            pub threshold: Option<f64>,
            #[nserde(rename = "for")]
            pub for_: Option<String>,
            pub keep_firing_for: Option<String>,
            pub severity: Option<String>,
            pub summary: Option<String>,
            pub runbook: Option<String>,
            pub objective: Option<f64>,
            pub windows: Option<Vec<WindowSpec>>,
        }
    }

    json_struct! {
        pub struct WindowSpec {
            pub long: String,
            pub short: String,
            pub factor: f64,
        }
    }
}
use shape::{RuleSpec, RulesFile};

/// The runbook of a new rule that names none: a generic page that exists
/// (`docs/runbooks/CustomRule.md`), not a 404 under the rule's own name.
pub const CUSTOM_RUNBOOK: &str = "CustomRule";

/// The most rules a rule set holds, the defaults included: the start-up
/// replay and each evaluation are linear in rules × subjects.
pub const MAX_RULES: usize = 1000;
/// The most window pairs of one burn-rate rule.
pub const MAX_PAIRS: usize = 8;
/// The longest window: the history the tiers keep and the simulator replays.
pub const MAX_WINDOW: Duration = Duration::from_secs(3 * 86_400);
/// The longest `for` or `keep_firing_for`.
pub const MAX_HOLD: Duration = Duration::from_secs(7 * 86_400);
/// The longest summary, in bytes.
pub const MAX_SUMMARY: usize = 1024;

/// The default rules with `json` merged in; the error names the field.
pub fn load(json: &str) -> Result<Vec<Rule>, String> {
    let file: RulesFile = json::read(json)?;
    let mut rules = if file.replace == Some(true) {
        Vec::new()
    } else {
        defaults()
    };
    if file.rules.len() > MAX_RULES {
        return Err(format!(
            "rules: {} rules; a rules file holds at most {MAX_RULES}",
            file.rules.len()
        ));
    }
    for (i, spec) in file.rules.iter().enumerate() {
        let base = rules.iter().position(|r| r.name == spec.name);
        let rule = merge(spec, base.map(|b| &rules[b])).map_err(|e| format!("rules[{i}].{e}"))?;
        match base {
            Some(b) => rules[b] = rule,
            None => rules.push(rule),
        }
    }
    if rules.len() > MAX_RULES {
        return Err(format!(
            "rules: {} rules with the defaults; at most {MAX_RULES} (\"replace\": true drops the defaults)",
            rules.len()
        ));
    }
    Ok(rules)
}

fn dur(field: &str, s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| format!("{field}: {e}"))
}

/// A duration of at most `most`.
fn bounded(field: &str, s: &str, most: Duration) -> Result<Duration, String> {
    match dur(field, s)? {
        d if d > most => Err(format!(
            "{field}: {s:?} is longer than {}",
            format_duration(most)
        )),
        d => Ok(d),
    }
}

fn merge(spec: &RuleSpec, base: Option<&Rule>) -> Result<Rule, String> {
    check_texts(spec)?;
    let name = &spec.name;
    let expr = expr(spec, base)?;
    let cmp = match spec.op.as_deref() {
        Some(">") => Cmp::Above,
        Some("<") => Cmp::Below,
        Some(op) => return Err(format!("op: {op:?} is not > or <")),
        None => base.map_or(Cmp::Above, |b| b.cmp),
    };
    let threshold = match (spec.threshold, base, &expr) {
        (Some(t), _, _) if !t.is_finite() => {
            return Err("threshold: must be a finite number".into());
        }
        (Some(t), _, _) => t,
        (None, Some(b), _) => b.threshold,
        (None, None, Expr::BurnRate { .. } | Expr::AvailabilityBurn { .. }) => 0.0,
        (None, None, _) => return Err("threshold: missing for a new rule".into()),
    };
    let severity = match spec.severity.as_deref() {
        Some("page") => Severity::Page,
        Some("ticket") => Severity::Ticket,
        Some(s) => return Err(format!("severity: {s:?} is not page or ticket")),
        None => base
            .map(|b| b.severity)
            .ok_or("severity: missing for a new rule")?,
    };
    let keep = |field: &str, v: &Option<String>, old: Option<Duration>| match v {
        Some(s) => bounded(field, s, MAX_HOLD),
        None => Ok(old.unwrap_or(Duration::ZERO)),
    };
    Ok(Rule {
        name: name.clone(),
        expr,
        cmp,
        threshold,
        for_: keep("for", &spec.for_, base.map(|b| b.for_))?,
        keep_firing_for: keep(
            "keep_firing_for",
            &spec.keep_firing_for,
            base.map(|b| b.keep_firing_for),
        )?,
        gap_hold: base.map_or(Duration::ZERO, |b| b.gap_hold),
        severity,
        summary_template: spec
            .summary
            .clone()
            .or_else(|| base.map(|b| b.summary_template.clone()))
            .unwrap_or_default(),
        summary: String::new(),
        runbook: spec
            .runbook
            .clone()
            .or_else(|| base.map(|b| b.runbook.clone()))
            .unwrap_or_else(|| CUSTOM_RUNBOOK.into()),
        objectives: Vec::new(),
    }
    .spell())
}

/// The name, runbook and summary: sizes, and names Prometheus and the
/// runbooks accept.
fn check_texts(spec: &RuleSpec) -> Result<(), String> {
    let name = &spec.name;
    if name.is_empty()
        || name.len() > MAX_NAME
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || name.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!(
            "name: {:?} is not a valid alert name ([A-Za-z_][A-Za-z0-9_]*, at most {MAX_NAME} bytes)",
            truncate(name)
        ));
    }
    if let Some(r) = &spec.runbook {
        let plain = r
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b));
        if r.is_empty() || r.len() > MAX_NAME || !plain {
            return Err(format!(
                "runbook: {:?} is not a runbook name ([A-Za-z0-9_-], at most {MAX_NAME} bytes)",
                truncate(r)
            ));
        }
    }
    if let Some(s) = &spec.summary
        && s.len() > MAX_SUMMARY
    {
        return Err(format!("summary: {} bytes; at most {MAX_SUMMARY}", s.len()));
    }
    Ok(())
}

/// The expression: the spec's kind, signal and window, each falling back
/// to the rule it overrides.
fn expr(spec: &RuleSpec, base: Option<&Rule>) -> Result<Expr, String> {
    let signal = match &spec.signal {
        Some(s) => Some(Signal::all().find(|x| x.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Signal::all().map(|x| x.name()).collect();
            format!(
                "signal: unknown signal {s:?} (expected one of {})",
                names.join(", ")
            )
        })?),
        None => None,
    };
    let window = spec
        .window
        .as_deref()
        .map(|w| bounded("window", w, MAX_WINDOW))
        .transpose()?;
    let base_kind = base.map(|b| b.expr.kind());
    let kind = spec
        .kind
        .as_deref()
        .or(base_kind)
        .ok_or("kind: missing for a new rule")?;
    let base_signal = base.and_then(|b| b.expr.signal());
    let base_window = base.and_then(|b| match b.expr {
        Expr::Increase(_, w) | Expr::Rate(_, w) | Expr::Deriv(_, w) => Some(w),
        _ => None,
    });
    let need_signal = || {
        signal
            .or(base_signal)
            .ok_or("signal: missing for this kind")
    };
    let need_window = || {
        window
            .or(base_window)
            .ok_or("window: missing for this kind")
    };
    Ok(match kind {
        "gauge" => Expr::Gauge(need_signal()?),
        "increase" | "rate" | "deriv" => {
            let s = need_signal()?;
            if s.is_counter() != (kind != "deriv") {
                return Err(format!(
                    "signal: {} does not suit kind {kind} (increase and rate read counters, deriv reads gauges)",
                    s.name()
                ));
            }
            let w = need_window()?;
            match kind {
                "increase" => Expr::Increase(s, w),
                "rate" => Expr::Rate(s, w),
                _ => Expr::Deriv(s, w),
            }
        }
        "burn_rate" => burn_rate(spec, base)?,
        "availability_burn" => match burn_rate(spec, base)? {
            Expr::BurnRate { objective, windows } => Expr::AvailabilityBurn { objective, windows },
            other => other,
        },
        "driver_version_skew" => Expr::DriverVersionSkew,
        "exporter_down" => Expr::ExporterDown,
        "job_absent" => Expr::JobAbsent,
        "gpu_count_dropped" => Expr::GpuCountDropped,
        other => {
            return Err(format!(
                "kind: unknown kind {other:?} (expected gauge, increase, rate, deriv, burn_rate or availability_burn)"
            ));
        }
    })
}

/// A `burn_rate` expression: its objective and window pairs.
fn burn_rate(spec: &RuleSpec, base: Option<&Rule>) -> Result<Expr, String> {
    let (base_objective, base_windows) = match base.map(|b| &b.expr) {
        Some(
            Expr::BurnRate { objective, windows } | Expr::AvailabilityBurn { objective, windows },
        ) => (Some(*objective), Some(windows.clone())),
        _ => (None, None),
    };
    let objective = spec
        .objective
        .or(base_objective)
        .ok_or("objective: missing for burn_rate")?;
    if !(objective > 0.0 && objective < 1.0) {
        return Err(format!("objective: {objective} must be between 0 and 1"));
    }
    if spec.windows.as_ref().is_some_and(|w| w.len() > MAX_PAIRS) {
        return Err(format!("windows: at most {MAX_PAIRS} pairs"));
    }
    let windows = match &spec.windows {
        Some(ws) => ws
            .iter()
            .enumerate()
            .map(|(j, w)| {
                let at = |e: String| format!("windows[{j}].{e}");
                let long = bounded("long", &w.long, MAX_WINDOW).map_err(at)?;
                let short = bounded("short", &w.short, MAX_WINDOW).map_err(at)?;
                if !(w.factor.is_finite() && w.factor > 0.0) || short > long {
                    return Err(at(
                        "factor: must be above 0, with short no longer than long".into(),
                    ));
                }
                Ok(BurnWindow {
                    long,
                    short,
                    factor: w.factor,
                })
            })
            .collect::<Result<Vec<_>, String>>()?,
        None => base_windows.ok_or("windows: missing for burn_rate")?,
    };
    if windows.is_empty() {
        return Err("windows: needs at least one pair".into());
    }
    Ok(Expr::BurnRate { objective, windows })
}

/// The start of a name too long to quote whole.
fn truncate(s: &str) -> &str {
    let mut end = s.len().min(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(json: &str) -> String {
        load(json).unwrap_err()
    }

    #[test]
    fn merges_by_name_and_replaces() {
        let rules = load(r#"{"rules":[{"name":"GPUThrottling","for":"10s"},
            {"name":"HotGPU","kind":"gauge","signal":"temperature","op":">","threshold":85,"severity":"ticket"}]}"#)
        .unwrap();
        assert_eq!(rules.len(), defaults().len() + 1);
        let t = rules.iter().find(|r| r.name == "GPUThrottling").unwrap();
        assert_eq!(t.for_, Duration::from_secs(10));
        assert_eq!(t.expr, Expr::Gauge(Signal::Throttled));
        let hot = rules.last().unwrap();
        assert_eq!(
            (hot.expr.clone(), hot.threshold, hot.runbook.as_str()),
            (
                Expr::Gauge(Signal::of(&model::catalogue::TEMPERATURE)),
                85.0,
                CUSTOM_RUNBOOK
            )
        );
        let only = load(r#"{"replace":true,"rules":[{"name":"Burn","kind":"burn_rate","objective":0.99,"windows":[{"long":"1h","short":"5m","factor":2}],"severity":"page"}]}"#).unwrap();
        assert_eq!(only.len(), 1);
        assert!(matches!(&only[0].expr, Expr::BurnRate { objective, .. } if *objective == 0.99));
    }

    #[test]
    fn bad_files_name_the_field() {
        assert!(err(r#"{"rules":[{"name":"X","kind":"gauge","signal":"temp","threshold":1,"severity":"page"}]}"#).starts_with("rules[0].signal"));
        assert!(err(r#"{"rules":[{},{"name":"GPULost","for":"soon"}]}"#).contains("name"));
        assert!(err(r#"{"rules":[{"name":"GPULost","for":"soon"}]}"#).starts_with("rules[0].for"));
        assert!(
            err(r#"{"rules":[{"name":"GPULost","severity":"urgent"}]}"#)
                .starts_with("rules[0].severity")
        );
        assert!(
            err(r#"{"rules":[{"name":"New","kind":"gauge","signal":"up","severity":"page"}]}"#)
                .starts_with("rules[0].threshold")
        );
        assert!(err(r#"{"rules":[{"name":"New","kind":"increase","signal":"temperature","window":"5m","threshold":1,"severity":"page"}]}"#).starts_with("rules[0].signal"));
        assert!(
            err(r#"{"rules":[{"name":"bad name","kind":"gauge"}]}"#).starts_with("rules[0].name")
        );
        assert!(err(r#"{"rules":[{"name":"GPULost","op":"=="}]}"#).starts_with("rules[0].op"));
        assert!(err(r#"{"rules":[{"name":"N","kind":"sometimes"}]}"#).starts_with("rules[0].kind"));
        assert!(err(r#"{"rules":"#).contains("line 1"));
        assert_eq!(
            err(r#"{"rules":[{"name":"GPULost","fro":"1m"}]}"#),
            "rules[0].fro: unknown field"
        );
    }

    #[test]
    fn limits_are_one_line_each() {
        let many = |n: usize| {
            let rules: Vec<String> = (0..n)
                .map(|i| format!(r#"{{"name":"R{i}","kind":"gauge","signal":"up","threshold":1,"severity":"page"}}"#))
                .collect();
            format!(r#"{{"replace":true,"rules":[{}]}}"#, rules.join(","))
        };
        assert_eq!(load(&many(MAX_RULES)).unwrap().len(), MAX_RULES);
        assert_eq!(
            err(&many(MAX_RULES + 1)),
            "rules: 1001 rules; a rules file holds at most 1000"
        );
        let defaults_too = many(MAX_RULES).replace(r#""replace":true,"#, "");
        let with = MAX_RULES + defaults::defaults().len();
        let e = err(&defaults_too);
        assert!(
            e.starts_with(&format!(
                "rules: {with} rules with the defaults; at most 1000"
            )),
            "{e}"
        );
        let long = "N".repeat(MAX_NAME + 1);
        let e = err(&format!(r#"{{"rules":[{{"name":"{long}"}}]}}"#));
        assert!(e.starts_with("rules[0].name: "), "{e}");
        for (json, field) in [
            (
                r#"{"name":"GPULost","runbook":"../../etc/passwd"}"#,
                "rules[0].runbook",
            ),
            (
                r#"{"name":"GPUXidErrors","window":"4d"}"#,
                "rules[0].window",
            ),
            (r#"{"name":"GPULost","for":"8d"}"#, "rules[0].for"),
            (
                r#"{"name":"TTFTBudgetBurn","windows":[{"long":"30d","short":"1h","factor":1}]}"#,
                "rules[0].windows[0].long",
            ),
        ] {
            let e = err(&format!(r#"{{"rules":[{json}]}}"#));
            assert!(e.starts_with(field), "{e}");
            assert!(!e.contains('\n'));
        }
        let pairs = [r#"{"long":"1h","short":"5m","factor":1}"#; MAX_PAIRS + 1].join(",");
        let e = err(&format!(
            r#"{{"rules":[{{"name":"TTFTBudgetBurn","windows":[{pairs}]}}]}}"#
        ));
        assert_eq!(e, "rules[0].windows: at most 8 pairs");
        let summary = "s".repeat(MAX_SUMMARY + 1);
        let e = err(&format!(
            r#"{{"rules":[{{"name":"GPULost","summary":"{summary}"}}]}}"#
        ));
        assert_eq!(e, "rules[0].summary: 1025 bytes; at most 1024");
    }
}
