//! `/alerts`: the active alerts as JSON, in the shape of Prometheus'
//! `/api/v1/alerts`, so the same tooling reads either. Two additions that
//! tooling ignores: an alert Alertmanager's inhibitions would mute carries
//! `"mutedBy"`, and while the history replays, `"warnings"` say so (the
//! alerts are not settled yet).

use alerts::{Subject, WORKLOADS, expand};
use base::json::string;
use base::time::rfc3339;
use poller::Published;
use std::io::Write;

/// The alerts of `p`; those about a GPU with a `workloads` annotation,
/// who uses it by the snapshot's GPUs.
pub fn write_json(p: &Published, runbook_base: &str, out: &mut Vec<u8>) {
    let gpus = &p.snapshot.gpus;
    out.extend_from_slice(br#"{"status":"success","data":{"alerts":["#);
    for (i, a) in p.alerts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"labels":{"alertname":"#);
        string(out, &a.rule.name);
        for (k, v) in a.labels() {
            out.push(b',');
            string(out, k);
            out.push(b':');
            string(out, &v);
        }
        out.extend_from_slice(br#"},"annotations":{"summary":"#);
        string(out, &expand(&a.rule.summary, &a.subject, a.value, gpus));
        if matches!(a.subject, Subject::Gpu { .. }) {
            out.extend_from_slice(br#","workloads":"#);
            string(out, &expand(WORKLOADS, &a.subject, a.value, gpus));
        }
        out.extend_from_slice(br#","runbook_url":"#);
        string(out, &a.rule.runbook_url(runbook_base));
        out.extend_from_slice(br#"},"state":"#);
        string(out, a.state.as_str());
        out.extend_from_slice(br#","activeAt":"#);
        string(out, &rfc3339(a.active_at));
        out.extend_from_slice(br#","value":"#);
        string(out, &go_exponent(a.value));
        if let Some(m) = &a.muted_by {
            out.extend_from_slice(br#","mutedBy":"#);
            string(out, &m.by.name);
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
    if let Some(r) = p.replay {
        let _ = write!(
            out,
            r#","warnings":["alert history is still replaying ({} of {} steps): these alerts are not settled"]"#,
            r.done, r.total
        );
    }
    out.extend_from_slice(b"}\n");
}

/// Go's `strconv.FormatFloat(v, 'e', -1, 64)`, as Prometheus spells values.
fn go_exponent(v: f64) -> String {
    if !v.is_finite() {
        return if v.is_nan() {
            "NaN".into()
        } else if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let s = format!("{v:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_strings() {
        assert_eq!(go_exponent(1.0), "1e+00");
        assert_eq!(go_exponent(2.0066889632107023), "2.0066889632107023e+00");
        assert_eq!(go_exponent(0.0125), "1.25e-02");
        assert_eq!(go_exponent(0.0), "0e+00");
        let mut out = Vec::new();
        string(&mut out, "a\"b\\c\nd");
        assert_eq!(out, br#""a\"b\\c\u000ad""#);
    }
}

#[cfg(test)]
mod shape {
    use super::*;
    use alerts::alert::Muted;
    use alerts::{Alert, State, Subject, defaults};
    use model::Snapshot;
    use model::SourceKind;
    use poller::Progress;
    use std::sync::Arc;

    #[test]
    fn muted_alerts_and_a_replay_are_said() {
        let rules = defaults();
        let rule = |n: &str| Arc::new(rules.iter().find(|r| r.name == n).unwrap().clone());
        let subject = Subject::Gpu {
            index: 1,
            uuid: "GPU-1".into(),
        };
        let alert = Alert {
            rule: rule("GPUXidErrors"),
            subject,
            state: State::Firing,
            active_at: 0.0,
            fired_at: 0.0,
            value: 1.0,
            muted_by: Some(Muted {
                by: rule("GPULost"),
                why: "",
            }),
        };
        let p = Published {
            snapshot: Arc::new(Snapshot::empty(SourceKind::Sim)),
            alerts: Arc::new(vec![alert]),
            replay: Some(Progress {
                done: 256,
                total: 5280,
                first: true,
            }),
            recent: Default::default(),
        };
        let mut out = Vec::new();
        write_json(&p, "docs/runbooks/", &mut out);
        let json = String::from_utf8(out).unwrap();
        assert!(
            json.contains(r#","value":"1e+00","mutedBy":"GPULost"}"#),
            "{json}"
        );
        assert!(
            json.ends_with(
                "]},\"warnings\":[\"alert history is still replaying (256 of 5280 steps): \
                 these alerts are not settled\"]}\n"
            ),
            "{json}"
        );
        assert!(json.contains(r#""runbook_url":"docs/runbooks/GPUXidErrors.md""#));
    }
}
