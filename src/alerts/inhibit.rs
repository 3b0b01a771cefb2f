//! One page per incident: which firing alert mutes which follow-ups, as
//! the `inhibit_rules` of `deploy/alertmanager/alertmanager.yml` say (a
//! test holds the file to this table). The in-process evaluator marks the
//! alerts those rules would mute, on `/alerts` and the status page.

use super::alert::{Alert, Muted, State};
use super::rules::Subject;

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
    use crate::alerts::defaults;
    use std::collections::BTreeSet;

    /// (source, targets, equal) of each inhibit rule in the shipped
    /// Alertmanager configuration, read line by line.
    fn shipped() -> Vec<(String, BTreeSet<String>, String)> {
        let yml = include_str!("../../deploy/alertmanager/alertmanager.yml");
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
