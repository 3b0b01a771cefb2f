//! Alert rules as data, their evaluator and its history, the same rules as
//! PromQL, which alerts mute which, and their summaries. The evaluator
//! reads the same snapshots a scrape renders.
#![forbid(unsafe_code)]

pub mod adjust;
pub mod alert;
mod defaults;
pub mod eval;
pub mod file;
mod health;
pub mod history;
pub mod inhibit;
pub mod rules;
mod signals;
pub mod summary;

pub mod promql;

pub use alert::{Alert, State};
pub use defaults::defaults;
pub use eval::{Evaluator, Transition};
pub use rules::{Rule, Severity, Signal, Subject};
pub use summary::{WORKLOADS, expand, expand_into};
