//! Helpers for the crate's own unit tests: the generated tables of the
//! README and docs/ held to the code.

pub mod readme;
mod tables;
