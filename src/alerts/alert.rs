//! An active alert: what the evaluator reports and inhibition marks, apart
//! from both so that neither imports the other's file.

use super::rules::{Rule, Subject};
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
}

/// Which firing alert mutes an alert, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Muted {
    pub by: Arc<Rule>,
    pub why: &'static str,
}
