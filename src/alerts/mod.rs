//! Alert rules as data and their evaluator, fed by the same snapshots a
//! scrape renders.

pub mod api;
pub mod eval;
pub mod promql;
pub mod rules;

pub use eval::{Alert, Evaluator, State, Transition};
pub use rules::{Cmp, Expr, Rule, Severity, Signal};
