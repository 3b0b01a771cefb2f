//! The dcgm collector's profiling fields in the fleet model:
//! [`Readings::profiling`] holds GPM metrics by nvml.h id
//! (`config::dcgm::prof`), in DCGM's units (ratios, bytes per second), and
//! belongs to the `gpm` collector. NVML reads the metrics the counters file
//! lists, the simulator all it models; a metric a GPU does not give is
//! absent, never a made-up value.

use super::Readings;

impl Readings {
    /// GPM metric `id` of [`Readings::profiling`], where read.
    pub fn profiling(&self, id: u32) -> Option<f64> {
        let found = self.profiling.iter().find(|p| p.0 == id);
        found.map(|p| p.1)
    }
}
