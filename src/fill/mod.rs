//! Fillers: readers of what a real source cannot see, laid over the fleet
//! it collected. Each lives in its own file behind the small [`Filler`]
//! trait; like sources, they run on the collector thread.

pub mod kmsg;
#[cfg(feature = "kubernetes")]
pub mod pods;
pub mod workload;

use crate::snapshot::Gpu;

/// `O_NONBLOCK` on Linux (x86-64 and aarch64), for files that must never
/// block the collector: std has no constant for it.
const O_NONBLOCK: i32 = 0o4000;

/// Fills readings the source left out.
pub trait Filler: Send {
    /// Lays what this filler knows over `gpus`, a collection of the source
    /// at `now` (wall-clock Unix seconds).
    fn fill(&mut self, now: f64, gpus: &mut [Gpu]);
}
