//! GPM (Hopper and later): SM active, SM occupancy and DRAM active between
//! this collection's sample and the previous one, for GPUs and MIG
//! instances alike; the first collection has none.

use super::ffi::{Error, GPM_DRAM_BW_UTIL, GPM_SM_OCCUPANCY, GPM_SM_UTIL, GpmSample, Library};
use super::read::Probe;
use crate::snapshot::Readings;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// GPM wants its two samples at least this far apart.
pub(super) const GPM_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// SM active, SM occupancy, DRAM active, in [`Readings`] order.
pub(super) const GPM_METRICS: [u32; 3] = [GPM_SM_UTIL, GPM_SM_OCCUPANCY, GPM_DRAM_BW_UTIL];

pub(super) enum GpmSlot {
    Unsupported,
    Sampling {
        /// The previous sample and when it was taken.
        last: Option<(Instant, GpmSample)>,
        /// A buffer to reuse for the next sample.
        spare: Option<GpmSample>,
    },
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

    /// Takes a sample with `take` and returns the GPM metrics since the
    /// previous one, as ratios.
    pub(super) fn advance(
        &mut self,
        lib: &Arc<Library>,
        p: &mut Probe,
        take: impl FnOnce(&mut GpmSample) -> Result<(), Error>,
    ) -> [Option<f64>; 3] {
        let mut out = [None; 3];
        let GpmSlot::Sampling { last, spare } = self else {
            return out;
        };
        if last
            .as_ref()
            .is_some_and(|(t, _)| t.elapsed() < GPM_MIN_INTERVAL)
        {
            return out;
        }
        let sample = match spare.take() {
            Some(s) => Some(s),
            None => p.get("gpm sample alloc", || GpmSample::alloc(lib.clone())),
        };
        let Some(mut sample) = sample else {
            return out;
        };
        if p.get("gpm sample", || take(&mut sample)).is_none() {
            *spare = Some(sample);
            *last = None;
            return out;
        }
        let taken = Instant::now();
        if let Some((_, earlier)) = last.take() {
            let values = p.get("gpm metrics", || {
                sample.metrics_since(&earlier, &GPM_METRICS)
            });
            for (o, v) in out.iter_mut().zip(values.into_iter().flatten()) {
                *o = v.ok().map(|percent| percent / 100.0);
            }
            *spare = Some(earlier);
        }
        *last = Some((taken, sample));
        out
    }
}

pub(super) fn set_gpm(r: &mut Readings, [sm_active, sm_occupancy, dram_active]: [Option<f64>; 3]) {
    r.sm_active_ratio = sm_active;
    r.sm_occupancy_ratio = sm_occupancy;
    r.dram_active_ratio = dram_active;
}
