//! The availability SLO over the engines' own request counters, as
//! `fill::engines::profile` reads them: per model, the requests the engine
//! failed of those it answered (a client's abort is in neither).

use super::{Scope, error_ratio as ttft_ratio};
use crate::rules::{Expr, Rule};
use base::time::format_duration;
use model::profile::{self, Role};
use std::fmt::Write;
use std::time::Duration;

/// The recorded availability error ratio over `window`, at `scope`.
pub fn error_ratio(scope: Scope, window: Duration) -> String {
    ttft_ratio(scope, window).replace("llm_ttft_slo_errors", "engine_request_errors")
}

/// The failed and the answered requests by model at `scope`, over every
/// engine's counters, each selected series put through `of` (a `rate`, or
/// none).
pub fn requests(of: &dyn Fn(String) -> String, scope: Scope) -> (String, String) {
    let (mut failed, mut answered) = (Vec::new(), Vec::new());
    for p in profile::all().iter().filter(|p| !p.outcomes.is_empty()) {
        let sum = |role: Role| {
            let parts: Vec<String> = p
                .outcomes
                .iter()
                .filter(|o| o.role == role)
                .map(|o| {
                    let m = o.keep.matcher();
                    let m = if m.is_empty() { m } else { format!("{{{m}}}") };
                    let e = of(format!("{}{m}", o.counter));
                    let e = match p.model_label {
                        "model_name" => e,
                        l => {
                            format!("label_replace({e}, \"model_name\", \"$1\", \"{l}\", \"(.+)\")")
                        }
                    };
                    format!("sum by ({}) ({e})", scope.by())
                })
                .collect();
            (!parts.is_empty()).then(|| parts.join(" + "))
        };
        let Some(f) = sum(Role::Failed) else { continue };
        let a = match (sum(Role::Answered), sum(Role::Served)) {
            (Some(a), _) => a,
            (None, Some(s)) => format!("({s} + {f})"),
            (None, None) => continue,
        };
        failed.push(f);
        answered.push(a);
    }
    let any = |v: Vec<String>| format!("({})", v.join(" or "));
    (any(failed), any(answered))
}

/// The error ratio's records at `scope`, one per window in `windows`.
pub fn records(y: &mut String, windows: &[Duration], scope: Scope) {
    for &w in windows {
        let rate = |s: String| format!("rate({s}[{}])", format_duration(w));
        let (failed, answered) = requests(&rate, scope);
        let _ = writeln!(y, "      - record: {}", error_ratio(scope, w));
        let _ = writeln!(
            y,
            "        expr: {}",
            super::quoted(&format!("{failed} / {answered}"))
        );
    }
}

/// Whether a rule reads the availability records.
pub fn reads(r: &Rule) -> bool {
    matches!(r.expr, Expr::AvailabilityBurn { .. })
}
