//! GPM (Hopper and later): SM active, SM occupancy, DRAM active, the
//! tensor and FP pipes, and PCIe traffic, between this collection's sample
//! and the previous one, for GPUs and MIG instances alike; the first
//! collection has none.

use super::ffi::{
    Error, GPM_DRAM_BW_UTIL, GPM_PCIE, GPM_PIPES, GPM_SM_OCCUPANCY, GPM_SM_UTIL, GpmSample, Library,
};
use super::probe::Probe;
use crate::snapshot::Readings;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// GPM wants its two samples at least this far apart.
pub(super) const GPM_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// What the `gpm` collector reads: SM active, SM occupancy, DRAM active,
/// then the pipes in [`crate::snapshot::Health::pipe_active_ratios`] order.
pub(super) const GPM_METRICS: [u32; 7] = [
    GPM_SM_UTIL,
    GPM_SM_OCCUPANCY,
    GPM_DRAM_BW_UTIL,
    GPM_PIPES[0],
    GPM_PIPES[1],
    GPM_PIPES[2],
    GPM_PIPES[3],
];

/// The metrics to ask for: `gpm`'s, then PCIe (tx, rx) when `pcie` too.
pub(super) fn metrics(gpm: bool, pcie: bool) -> &'static [u32] {
    const BOTH: [u32; 9] = [
        GPM_METRICS[0],
        GPM_METRICS[1],
        GPM_METRICS[2],
        GPM_METRICS[3],
        GPM_METRICS[4],
        GPM_METRICS[5],
        GPM_METRICS[6],
        GPM_PCIE[0],
        GPM_PCIE[1],
    ];
    match (gpm, pcie) {
        (true, true) => &BOTH,
        (true, false) => &GPM_METRICS,
        (false, true) => &GPM_PCIE,
        (false, false) => &[],
    }
}

pub(super) enum GpmSlot {
    Unsupported,
    Sampling {
        /// The previous sample and when it was taken.
        last: Option<(Instant, GpmSample)>,
        /// A buffer to reuse for the next sample.
        spare: Option<GpmSample>,
    },
}

/// Metrics between two samples, in the order asked for, and the seconds
/// between the samples.
pub(super) struct Gpm {
    pub(super) values: Vec<Option<f64>>,
    pub(super) seconds: f64,
}

impl GpmSlot {
    pub(super) fn new(supported: bool) -> GpmSlot {
        if supported {
            GpmSlot::Sampling {
                last: None,
                spare: None,
            }
        } else {
            GpmSlot::Unsupported
        }
    }

    /// Takes a sample with `take` and returns the metrics `ids` since the
    /// previous one, as NVML gives them.
    pub(super) fn advance(
        &mut self,
        lib: &Arc<Library>,
        p: &mut Probe,
        ids: &[u32],
        take: impl FnOnce(&mut GpmSample) -> Result<(), Error>,
    ) -> Option<Gpm> {
        let GpmSlot::Sampling { last, spare } = self else {
            return None;
        };
        if ids.is_empty()
            || last
                .as_ref()
                .is_some_and(|(t, _)| t.elapsed() < GPM_MIN_INTERVAL)
        {
            return None;
        }
        let sample = match spare.take() {
            Some(s) => Some(s),
            None => p.get("gpm sample alloc", || GpmSample::alloc(lib.clone())),
        };
        let mut sample = sample?;
        if p.get("gpm sample", || take(&mut sample)).is_none() {
            *spare = Some(sample);
            *last = None;
            return None;
        }
        let taken = Instant::now();
        let mut out = None;
        if let Some((then, earlier)) = last.take() {
            let values = p.get("gpm metrics", || sample.metrics_since(&earlier, ids));
            out = values.map(|v| Gpm {
                values: v.into_iter().map(Result::ok).collect(),
                seconds: taken.saturating_duration_since(then).as_secs_f64(),
            });
            *spare = Some(earlier);
        }
        *last = Some((taken, sample));
        out
    }
}

/// Lays `gpm`'s own metrics (the first [`GPM_METRICS`]) over `r`, as ratios.
pub(super) fn set_gpm(r: &mut Readings, gpm: Option<&Gpm>) {
    let Some(g) = gpm else { return };
    let ratio = |i: usize| g.values.get(i).copied().flatten().map(|pc| pc / 100.0);
    r.sm_active_ratio = ratio(0);
    r.sm_occupancy_ratio = ratio(1);
    r.dram_active_ratio = ratio(2);
    for (i, o) in r.health.pipe_active_ratios.iter_mut().enumerate() {
        *o = ratio(3 + i);
    }
}
