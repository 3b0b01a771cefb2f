//! One page per incident: which firing alert mutes which follow-ups, as
//! the `inhibit_rules` of `deploy/alertmanager/alertmanager.yml` say (a
//! test holds the file to this table). The in-process evaluator marks the
//! alerts those rules would mute, on `/alerts` and the status page.

use super::adjust::outlast;
use super::alert::{Alert, Muted, State};
use super::rules::{Rule, Subject};
use std::time::Duration;

/// A firing `source` mutes `targets` about the same GPU (Alertmanager's
/// `equal: [cluster, instance, uuid]`) or, for the exporter's own alerts,
/// the same exporter (`equal: [cluster, instance]`).
pub struct Inhibition {
    pub source: &'static str,
    pub targets: &'static [&'static str],
    pub per_gpu: bool,
    /// Why the targets are follow-ups of the source.
    pub why: &'static str,
}

const RECOVERY: [&str; 2] = ["GPURecoveryReset", "GPURecoveryRebootOrDrain"];

pub const INHIBITIONS: &[Inhibition] = &[
    Inhibition {
        source: "GPULost",
        targets: &[
            "GPUXidErrors",
            "GPUUncorrectableECC",
            RECOVERY[0],
            RECOVERY[1],
        ],
        per_gpu: true,
        why: "a GPU off the bus logs Xid 79, may count ECC errors on its way out, and the driver asks to recover it: one incident, GPULost's runbook",
    },
    Inhibition {
        source: "GPUXidErrors",
        targets: &RECOVERY,
        per_gpu: true,
        why: "the recovery action the driver sets after a critical Xid is that Xid's remedy, which GPUXidErrors' runbook carries out",
    },
    Inhibition {
        source: "GPUUncorrectableECC",
        targets: &["GPUXidErrors", "GPUXidEvents", RECOVERY[0], RECOVERY[1]],
        per_gpu: true,
        why: "Xid 48, 94 and 95 report the uncorrectable errors the ECC counter counts, and the recovery action follows them",
    },
    Inhibition {
        source: "GPURowRemapFailure",
        targets: &[
            "GPURowRemapPending",
            "GPUUncorrectableECC",
            "GPUXidErrors",
            "GPUXidEvents",
        ],
        per_gpu: true,
        why: "a failed remap (Xid 64) means replacing the GPU, which settles its memory errors and pending remaps too",
    },
    Inhibition {
        source: "GPURowRemapPending",
        targets: &["GPUXidEvents"],
        per_gpu: true,
        why: "Xid 63 records the remap that is now pending: one ticket, reset the GPU when drained",
    },
    Inhibition {
        source: "GPURetiredPagesPending",
        targets: &["GPUXidEvents"],
        per_gpu: true,
        why: "before Ampere, Xid 63 records the page retirement that is now pending",
    },
    Inhibition {
        source: "GPUNVLinkDown",
        targets: &["GPUNVLinkErrors"],
        per_gpu: true,
        why: "the errors of a link that went down are that link's failure",
    },
    Inhibition {
        source: "ExporterBlind",
        targets: &["ExporterCollectFailing", "GPUCountDropped"],
        per_gpu: false,
        why: "once collections have failed past --collect.max-stale the GPUs are no longer served: the failing collection and the missing GPUs are that page",
    },
];

/// Marks each firing alert that a firing alert about the same subject
/// would mute.
pub fn mark(alerts: &mut [Alert]) {
    for k in 0..alerts.len() {
        let a = &alerts[k];
        if a.state != State::Firing {
            continue;
        }
        let by = INHIBITIONS
            .iter()
            .filter(|i| i.targets.contains(&a.rule.name.as_str()))
            .find_map(|i| {
                let s = alerts.iter().find(|s| {
                    s.state == State::Firing
                        && s.rule.name == i.source
                        && same(&s.subject, &a.subject, i.per_gpu)
                })?;
                Some(Muted {
                    by: s.rule.clone(),
                    why: i.why,
                })
            });
        alerts[k].muted_by = by;
    }
}

/// How long an alert of `r` can go on firing once the exporter's series
/// stop (it died, or Prometheus lost it): a range function still sees the
/// samples of its window, a gauge its last sample for `gap_hold`, then
/// `keep_firing_for` holds it.
pub fn hold(r: &Rule) -> Duration {
    let window = r.expr.windows().iter().map(|w| w.1).max();
    window.unwrap_or(Duration::ZERO) + r.gap_hold + r.keep_firing_for
}

/// Inhibitions that survive a gap: each source keeps firing at least as
/// long as the alerts it mutes ([`hold`]), so that when the exporter
/// stops, no muted follow-up outlives its source and pages on its own.
/// A source that falls short is made to outlast its series by the
/// difference ([`outlast`]: a gauge through the gap only, never after a
/// recovery), in process and in the printed rules. Sources mute sources
/// (GPULost mutes GPUUncorrectableECC, which mutes GPUXidErrors), so this
/// repeats until nothing moves: at most once per inhibition, since a
/// source's hold only ever grows to one of its targets'.
pub fn cover_inhibitions(mut rules: Vec<Rule>) -> Vec<Rule> {
    for _ in 0..=INHIBITIONS.len() {
        let mut moved = false;
        for i in INHIBITIONS {
            let longest = (rules.iter())
                .filter(|r| i.targets.contains(&r.name.as_str()))
                .map(hold)
                .max()
                .unwrap_or(Duration::ZERO);
            for r in rules.iter_mut().filter(|r| r.name == i.source) {
                let short = longest.saturating_sub(hold(r));
                if !short.is_zero() {
                    let after = r.gap_hold + r.keep_firing_for + short;
                    *r = outlast(r.clone(), after);
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    rules
}

fn same(a: &Subject, b: &Subject, per_gpu: bool) -> bool {
    match (a, b) {
        (Subject::Gpu { uuid: x, .. }, Subject::Gpu { uuid: y, .. }) => per_gpu && x == y,
        (Subject::Exporter, _) | (_, Subject::Exporter) => !per_gpu,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults;
    use std::collections::BTreeSet;

    /// (source, targets, equal) of each inhibit rule in the shipped
    /// Alertmanager configuration, read line by line.
    fn shipped() -> Vec<(String, BTreeSet<String>, String)> {
        let yml = include_str!("../../../deploy/alertmanager/alertmanager.yml");
        let inner = |line: &str, key: &str| -> Option<String> {
            let v = line.trim().strip_prefix(key)?;
            Some(v.trim_matches(|c| " []'\"".contains(c)).to_string())
        };
        let mut out = Vec::new();
        let mut lines = yml.lines();
        while let Some(line) = lines.next() {
            let Some(source) = inner(line, "- source_matchers:") else {
                continue;
            };
            let targets = inner(lines.next().unwrap(), "target_matchers:").unwrap();
            let equal = inner(lines.next().unwrap(), "equal:").unwrap();
            // Fleet alerts muting node ones: Prometheus' alone.
            if source == "scope=\"fleet" {
                assert_eq!(targets, "scope=\"node");
                assert_eq!(equal, "cluster, alertname, model_name");
                continue;
            }
            let source = source.strip_prefix("alertname=\"").unwrap().to_string();
            let targets = targets.strip_prefix("alertname=~\"").unwrap();
            let targets = targets.split('|').map(String::from).collect();
            out.push((source, targets, equal));
        }
        out
    }

    #[test]
    fn alertmanager_yml_holds_the_same_inhibitions() {
        let ours: Vec<(String, BTreeSet<String>, String)> = INHIBITIONS
            .iter()
            .map(|i| {
                let equal = match i.per_gpu {
                    true => "cluster, instance, uuid",
                    false => "cluster, instance",
                };
                let targets = i.targets.iter().map(|t| t.to_string()).collect();
                (i.source.to_string(), targets, equal.to_string())
            })
            .collect();
        assert_eq!(shipped(), ours);
        let names: BTreeSet<String> = defaults().into_iter().map(|r| r.name).collect();
        for i in INHIBITIONS {
            for name in std::iter::once(&i.source).chain(i.targets) {
                assert!(names.contains(*name), "{name} is no rule");
            }
        }
    }

    /// Every rule of the shipped file's sources outlasts its targets when
    /// the series stop, whatever `--collect.max-stale` (which moves the
    /// pages' `keep_firing_for`) and with a rules file that lengthens a
    /// target.
    #[test]
    fn every_shipped_source_outlasts_what_it_mutes() {
        use crate::adjust::cover_failures;
        use crate::rules::{HOUR, MIN};
        let longer = |mut rules: Vec<Rule>| {
            let ecc = rules.iter_mut().find(|r| r.name == "GPUXidEvents");
            ecc.unwrap().keep_firing_for = 3 * HOUR;
            rules
        };
        for (stale, rules) in [
            (Duration::ZERO, defaults()),
            (MIN, defaults()),
            (2 * HOUR, defaults()),
            (MIN, longer(defaults())),
        ] {
            let rules = cover_inhibitions(cover_failures(rules, stale));
            let of = |n: &str| rules.iter().find(|r| r.name == n).unwrap();
            for (source, targets, _) in shipped() {
                for t in &targets {
                    assert!(
                        hold(of(&source)) >= hold(of(t)),
                        "{source} ({:?}) mutes {t} ({:?}) with max-stale {stale:?}",
                        hold(of(&source)),
                        hold(of(t))
                    );
                }
            }
        }
        // The gap the independent check found: the pending remaps hold
        // through a gap as long as GPUXidEvents' window. Gauges hold
        // through the gap only, never after a recovery: GPULost and
        // GPURowRemapFailure outlast GPUUncorrectableECC's hour so.
        let rules = cover_inhibitions(cover_failures(defaults(), MIN));
        let of = |n: &str| rules.iter().find(|r| r.name == n).unwrap();
        for (name, gap) in [
            ("GPURowRemapPending", 5 * MIN),
            ("GPURetiredPagesPending", 5 * MIN),
            ("GPULost", 65 * MIN),
            ("GPURowRemapFailure", 65 * MIN),
        ] {
            assert_eq!(
                (of(name).gap_hold, of(name).keep_firing_for),
                (gap, Duration::ZERO),
                "{name}"
            );
        }
        // A window does not see a recovery sooner: GPUXidErrors, which
        // mutes the recovery actions, keeps firing.
        assert_eq!(of("GPUXidErrors").gap_hold, Duration::ZERO);
        let rules = cover_inhibitions(defaults());
        let of = |n: &str| rules.iter().find(|r| r.name == n).unwrap();
        // What mutes nothing is left as it was.
        assert_eq!(of("GPUThrottling"), &defaults()[0]);
    }

    fn alert(name: &str, gpu: u32, state: State) -> Alert {
        let rule = defaults().into_iter().find(|r| r.name == name).unwrap();
        Alert {
            rule: rule.into(),
            subject: Subject::Gpu {
                index: gpu,
                uuid: format!("GPU-{gpu}"),
            },
            state,
            active_at: 0.0,
            fired_at: 0.0,
            value: 1.0,
            muted_by: None,
        }
    }

    #[test]
    fn follow_ups_of_the_same_gpu_are_marked() {
        let mut alerts = vec![
            alert("GPUXidErrors", 0, State::Firing),
            alert("GPUXidErrors", 1, State::Firing),
            alert("GPULost", 0, State::Firing),
            alert("GPURecoveryRebootOrDrain", 1, State::Firing),
            // A pending source mutes nothing.
            alert("GPULost", 2, State::Pending),
            alert("GPUXidErrors", 2, State::Firing),
        ];
        mark(&mut alerts);
        let muted: Vec<Option<&str>> = alerts
            .iter()
            .map(|a| a.muted_by.as_ref().map(|m| m.by.name.as_str()))
            .collect();
        assert_eq!(
            muted,
            [
                Some("GPULost"),
                None,
                None,
                Some("GPUXidErrors"),
                None,
                None
            ]
        );
    }
}
