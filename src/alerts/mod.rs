//! Alert rules as data, their evaluator, the same rules as PromQL, and
//! their summaries. The evaluator reads the same snapshots a scrape renders.

pub mod eval;
pub mod file;
mod health;
pub mod promql;
pub mod rules;
mod summary;

pub use eval::{Alert, Evaluator, State, Transition};
pub use rules::{Rule, Severity, Signal, Subject};
pub use summary::{WORKLOADS, expand, expand_into};
