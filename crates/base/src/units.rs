//! Units the sources and pages convert with, defined once.

/// Bytes in a KiB.
pub const KIB: f64 = 1024.0;
/// Bytes in a MiB.
pub const MIB: f64 = KIB * KIB;
/// Bytes in a GiB.
pub const GIB: f64 = MIB * KIB;
/// Hertz in a MHz.
pub const MHZ: f64 = 1e6;
