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

/// Which firing alert mutes an alert, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Muted {
    pub by: Arc<Rule>,
    pub why: &'static str,
}
