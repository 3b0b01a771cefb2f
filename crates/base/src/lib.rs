//! The ground floor: helpers every crate of the exporter may use, which use
//! none of its others. Time and durations, the time zone, number spelling,
//! the strict JSON pass, reading the files flags name, units, PCI bus ids,
//! quiet logs, rate limits and the stderr logger.

pub mod file;
pub mod json;
pub mod logger;
pub mod numbers;
pub mod pci;
pub mod quiet;
pub mod rate;
pub mod time;
pub mod tz;
pub mod units;

/// A file of the repository's `tests/fixtures/DIR/`, as text, for the unit
/// tests of a crate under `crates/` (the binary's tests have their own).
#[macro_export]
macro_rules! fixture {
    ($dir:literal, $name:literal) => {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/",
            $dir,
            "/",
            $name
        ))
    };
}
