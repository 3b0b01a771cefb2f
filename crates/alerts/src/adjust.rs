//! The rules as loaded: pages made to survive failures, and the burn
//! rules given each model's objective. Both apply in process and to the
//! printed rules alike.

use super::rules::{Expr, Rule, Severity};
use model::Objectives;
use std::time::Duration;

/// Pages survive failures: while collections fail or stall, the GPUs'
/// readings are served for `max_stale`, then dropped, and the exporter's
/// failure pages (ExporterBlind when the readings go, ExporterDown when
/// Prometheus cannot scrape) fire after their own `for`. Every other page
/// outlasts its series at least that long ([`outlast`]), so it never
/// resolves before one of them takes over. The printed rules carry the
/// same holds, so both evaluators agree.
pub fn cover_failures(rules: Vec<Rule>, max_stale: Duration) -> Vec<Rule> {
    let handover = rules
        .iter()
        .filter(|r| r.severity == Severity::Page && r.about_exporter())
        .map(|r| r.for_)
        .max()
        .unwrap_or(Duration::ZERO);
    let floor = max_stale + handover;
    rules
        .into_iter()
        .map(
            |r| match r.severity == Severity::Page && !r.about_exporter() {
                true => outlast(r, floor),
                false => r,
            },
        )
        .collect()
}

/// `r` made to go on firing at least `at_least` once its series stop. A
/// gauge holds through the gap (`gap_hold`: the printed rule reads the
/// last sample within it) and resolves at once on a reading that clears
/// it, so a GPU that comes back is quiet; the rest, whose windows would
/// not see a recovery sooner, keep firing (`keep_firing_for`).
pub fn outlast(r: Rule, at_least: Duration) -> Rule {
    let short = at_least.saturating_sub(r.gap_hold + r.keep_firing_for);
    match (short.is_zero(), &r.expr) {
        (true, _) => r,
        (false, Expr::Gauge(_)) => Rule {
            gap_hold: r.gap_hold + short,
            ..r
        },
        (false, _) => Rule {
            keep_firing_for: r.keep_firing_for + short,
            ..r
        }
        .spell(),
    }
}

/// Every burn-rate rule of `rules` with the models' own objectives
/// (`--engine.config`): a model's replaces the rule's objective for it, in
/// process and in the printed rules.
pub fn with_objectives(mut rules: Vec<Rule>, objectives: &[(String, f64)]) -> Vec<Rule> {
    for r in &mut rules {
        if matches!(r.expr, Expr::BurnRate { .. }) {
            r.objectives = objectives.to_vec();
        }
    }
    rules
}

/// The objectives `rules` judge the models at: the first TTFT burn-rate
/// rule's with the models' own, and the first availability burn rule's,
/// as the evaluator takes them.
pub fn objectives(rules: &[Rule]) -> Objectives {
    let ttft = rules.iter().find_map(|r| match r.expr {
        Expr::BurnRate { objective, .. } => Some((objective, r.objectives.clone())),
        _ => None,
    });
    let availability = rules.iter().find_map(|r| match r.expr {
        Expr::AvailabilityBurn { objective, .. } => Some(objective),
        _ => None,
    });
    Objectives {
        ttft: ttft.as_ref().map(|t| t.0),
        own: ttft.map(|t| t.1).unwrap_or_default(),
        availability,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TTFT objective is the burn rule's with the models' own, the
    /// availability one its rule's, as the evaluator judges them.
    #[test]
    fn the_objectives_are_the_burn_rules() {
        let rules = with_objectives(super::super::defaults(), &[("a".into(), 0.99)]);
        let o = objectives(&rules);
        assert_eq!(o.ttft_of("a"), Some(0.99));
        assert_eq!(o.ttft_of("b"), Some(0.999));
        assert_eq!(o.availability, Some(0.999));
        assert_eq!(objectives(&[]), Objectives::default());
    }
}
