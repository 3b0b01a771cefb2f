//! An active alert: what the evaluator reports and inhibition marks, apart
//! from both so that neither imports the other's file.

use super::rules::{Rule, Subject};
use std::fmt::{Display, Write};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Pending,
    Firing,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Firing => "firing",
        }
    }
}

/// An active (pending or firing) alert.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    pub rule: Arc<Rule>,
    pub subject: Subject,
    pub state: State,
    /// Unix time the condition first held.
    pub active_at: f64,
    /// Unix time it became firing, `active_at` while pending: Alertmanager's
    /// `startsAt`, as Prometheus sends its `FiredAt`.
    pub fired_at: f64,
    pub value: f64,
    /// The firing alert whose Alertmanager inhibition would mute this one
    /// (`deploy/alertmanager/alertmanager.yml`).
    pub muted_by: Option<Muted>,
}

impl Alert {
    /// Its labels after `alertname`, as the printed rules give the same
    /// alert in Prometheus less the scrape's `job` and `instance`: who it
    /// is about, `severity`, and `scope="node"` on a verdict over the
    /// engines' series (the exporter judges at node scope only). One list
    /// for `/alerts`, the log and what is sent to Alertmanager, so that
    /// Alertmanager deduplicates an alert sent by both evaluators.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut labels = self.subject.labels();
        labels.push(("severity", self.rule.severity.as_str().into()));
        if self.rule.over_engines() {
            labels.push(("scope", "node".into()));
        }
        labels
    }

    /// Writes its id on the status page, which the `generatorURL` sent for
    /// it points at: `alert.` then the rule's name and the subject's
    /// labels, `.`-separated, each byte outside `[A-Za-z0-9-]` written
    /// `_XX`. The same alert gets the same id at every render, two alerts
    /// never share one, and it needs escaping neither in HTML nor in a URL.
    pub fn anchor(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"alert");
        let mut part = |s: &dyn Display| {
            out.push(b'.');
            let _ = write!(Escaped(out), "{s}");
        };
        part(&self.rule.name);
        self.subject.each_label(&mut |k, v| {
            part(&k);
            part(v);
        });
    }
}

/// A writer of [`Alert::anchor`]'s escaped bytes.
struct Escaped<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        for b in s.bytes() {
            match b.is_ascii_alphanumeric() || b == b'-' {
                true => self.0.push(b),
                false => (self.0).extend_from_slice(&[
                    b'_',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ]),
            }
        }
        Ok(())
    }
}

/// Which firing alert mutes an alert, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Muted {
    pub by: Arc<Rule>,
    pub why: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::defaults;

    fn anchor(name: &str, subject: Subject) -> String {
        let rule = defaults().into_iter().find(|r| r.name == name).unwrap();
        let a = Alert {
            rule: rule.into(),
            subject,
            state: State::Firing,
            active_at: 0.0,
            fired_at: 0.0,
            value: 1.0,
            muted_by: None,
        };
        let mut out = Vec::new();
        a.anchor(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn anchors_name_the_alert_and_need_no_escaping() {
        let gpu = |index, uuid: &str| Subject::Gpu {
            index,
            uuid: uuid.into(),
        };
        assert_eq!(
            anchor("GPULost", gpu(1, "GPU-ab")),
            "alert.GPULost.gpu.1.uuid.GPU-ab"
        );
        let tenant = Subject::Model("a.b\"<x> #%_é".into());
        assert_eq!(
            anchor("TTFTBudgetBurn", tenant),
            "alert.TTFTBudgetBurn.model_5Fname.a_2Eb_22_3Cx_3E_20_23_25_5F_C3_A9"
        );
        // A separator in a value cannot make two alerts one.
        let (a, b) = (
            Subject::Model("x.model_5Fname.y".into()),
            Subject::Model("x".into()),
        );
        assert_ne!(anchor("TTFTBudgetBurn", a), anchor("TTFTBudgetBurn", b));
        assert_eq!(
            anchor("ExporterBlind", Subject::Exporter),
            "alert.ExporterBlind"
        );
        let down = Subject::Endpoint {
            url: "http://127.0.0.1:8000/metrics".into(),
            engine: String::new(),
            reason: "refused",
        };
        // The reason is no label: the anchor stays while it changes.
        assert_eq!(
            anchor("EngineDown", down),
            "alert.EngineDown.endpoint.http_3A_2F_2F127_2E0_2E0_2E1_3A8000_2Fmetrics"
        );
    }
}
