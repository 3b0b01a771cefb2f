//! Inputs the fuzz targets (`fuzz/`) found that break a parser, kept as
//! plain tests. Each runs the parser on a thread and fails if it panics or
//! does not return within a few seconds.
//!
//! Found by `rules_json` and reproduced for `scenario_json`: nanoserde
//! 0.2.1 skips the value of a key the target struct does not have with
//! `DeJsonState::whole_field`, which loops forever when an array or object
//! is still open at the end of the input (`next_tok` returns `Eof`
//! forever) and panics (`unimplemented!`) when the value is not a value
//! (`}`, `]`, `,`, `:`). `--rules.file` and `--sim.scenario` then hung the
//! exporter at start (100% CPU) or aborted it. The strict pass in front of
//! nanoserde (`crates/base/src/json.rs`) now refuses such files first, with the
//! line and column, so nanoserde never skips anything.

use sources::sim::Scenario;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// What `f` returns, or why it returned nothing.
fn outcome<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, &'static str> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(v) => Ok(v),
        Err(RecvTimeoutError::Timeout) => Err("still running after 5 s"),
        Err(RecvTimeoutError::Disconnected) => Err("panicked"),
    }
}

fn rules_error(json: &'static str) -> Result<bool, &'static str> {
    outcome(move || alerts::file::load(json).is_err())
}

fn scenario_error(json: &'static str) -> Result<bool, &'static str> {
    outcome(move || Scenario::parse(json).is_err())
}

#[test]
fn rules_unknown_key_with_unterminated_array() {
    assert_eq!(rules_error(r#"{"x":["#), Ok(true));
    assert_eq!(rules_error(r#"{"rules":[{"x":{"#), Ok(true));
}

#[test]
fn rules_unknown_key_without_value() {
    assert_eq!(rules_error(r#"{"x":}"#), Ok(true));
    assert_eq!(rules_error(r#"{"rules":[],"x":,}"#), Ok(true));
}

#[test]
fn scenario_unknown_key_with_unterminated_array() {
    assert_eq!(scenario_error(r#"{"x":["#), Ok(true));
    assert_eq!(scenario_error(r#"{"gpus":[{"x":["#), Ok(true));
}

#[test]
fn scenario_unknown_key_without_value() {
    assert_eq!(scenario_error(r#"{"x":}"#), Ok(true));
    assert_eq!(scenario_error(r#"{"gpus":[{"x":]}]}"#), Ok(true));
}

/// The same parsers on well-formed unknown keys: an error or ignored, in
/// time. Guards `outcome` itself.
#[test]
fn unknown_keys_with_whole_values_return() {
    assert!(rules_error(r#"{"x":[1,{"y":2}],"rules":[]}"#).is_ok());
    assert!(scenario_error(r#"{"x":{"y":[]},"gpus":[{}]}"#).is_ok());
}
