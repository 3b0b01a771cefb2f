//! Helpers for the crate's own unit tests: fixtures built in, and the
//! generated tables of the README and docs/ held to the code.

pub mod readme;
mod tables;

/// A test fixture under `tests/fixtures/<dir>/`, built into the test.
macro_rules! fixture {
    ($dir:literal, $name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/",
            $dir,
            "/",
            $name
        ))
    };
}
pub(crate) use fixture;
