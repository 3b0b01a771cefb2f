//! The ground floor: helpers any module may use, which use nothing of the
//! crate's own. Time and durations, the time zone, number spelling, the
//! strict JSON pass, reading the files flags name, units, PCI bus ids, quiet
//! logs and rate limits.

pub mod file;
pub mod json;
pub mod numbers;
pub mod pci;
pub mod quiet;
#[cfg(feature = "tls")]
pub mod rate;
#[cfg(test)]
pub mod readme;
pub mod time;
pub mod tz;
pub mod units;

/// A test fixture under `tests/fixtures/<dir>/`, built into the test.
#[cfg(test)]
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
#[cfg(test)]
pub(crate) use fixture;
