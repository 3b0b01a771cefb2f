//! Per-process GPU memory (the `processes` collector): the compute and
//! graphics processes NVML lists on a GPU, or on each MIG device of a GPU
//! in MIG mode, by host PID. A process in both lists is one, and a memory
//! use NVML cannot give (NVML_VALUE_NOT_AVAILABLE, e.g. without the
//! permission to see it) is left out, never written as a number. The
//! collector bounds the list per GPU.

use super::ffi::Device;
use super::probe::Probe;
use model::{GpuProcess, add_process};

/// Adds the processes on `d` (MIG compute instance `ci`, if it is one) to
/// `out`, merging by PID.
pub(super) fn read(d: Device<'_>, ci: Option<u32>, p: &mut Probe, out: &mut Vec<GpuProcess>) {
    for (what, graphics) in [("compute processes", false), ("graphics processes", true)] {
        let Some(list) = p.get(what, || d.running_processes(graphics)) else {
            continue;
        };
        for (pid, used) in list {
            add_process(out, pid, ci, used.map(|b| b as f64));
        }
    }
}
