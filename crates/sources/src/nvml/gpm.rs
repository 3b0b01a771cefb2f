//! GPM (Hopper and later): SM active, SM occupancy, DRAM active, the
//! tensor and FP pipes, PCIe traffic, and the dcgm collector's profiling
//! fields, between this collection's sample and the previous one, for
//! GPUs and MIG instances alike; the first collection has none.

use super::ffi::{Error, GpmSample, Library};
use super::probe::Probe;
use model::Readings;
use model::dcgm::prof::{self, GpmIds};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// GPM wants its two samples at least this far apart.
pub(super) const GPM_MIN_INTERVAL: Duration = Duration::from_millis(100);

/// What the `gpm` collector reads: SM active, SM occupancy, DRAM active,
/// then the pipes in [`model::Health::pipe_active_ratios`] order.
const GPM_METRICS: [u32; 7] = [
    prof::SM_UTIL,
    prof::SM_OCCUPANCY,
    prof::DRAM_BW_UTIL,
    prof::ANY_TENSOR_UTIL,
    prof::FP64_UTIL,
    prof::FP32_UTIL,
    prof::FP16_UTIL,
];

/// PCIe traffic from and to the GPU, MiB/s.
pub(super) const GPM_PCIE: [u32; 2] = [prof::PCIE_TX_PER_SEC, prof::PCIE_RX_PER_SEC];

/// The metrics to ask for: `gpm`'s, PCIe's when `pcie` too, and the
/// profiling fields' `wanted`, each once.
pub(super) fn metrics(gpm: bool, pcie: bool, wanted: GpmIds) -> Vec<u32> {
    const fn set(ids: &[u32]) -> GpmIds {
        let (mut set, mut i) = (GpmIds::NONE, 0);
        while i < ids.len() {
            set = set.with(ids[i]);
            i += 1;
        }
        set
    }
    const OURS: GpmIds = set(&GPM_METRICS);
    const PCIE: GpmIds = set(&GPM_PCIE);
    let none = GpmIds::NONE;
    let set = wanted.or(if gpm { OURS } else { none });
    set.or(if pcie { PCIE } else { none }).iter().collect()
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

/// Metrics between two samples, each with NVML's answer, and the seconds
/// between the samples.
pub(super) struct Gpm {
    values: Vec<(u32, Result<f64, Error>)>,
    pub(super) seconds: f64,
}

impl Gpm {
    /// Metric `id`, where NVML gave a number.
    pub(super) fn get(&self, id: u32) -> Option<f64> {
        let v = self.values.iter().find(|v| v.0 == id)?.1;
        v.ok().filter(|v| v.is_finite())
    }
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
                values: ids.iter().copied().zip(v).collect(),
                seconds: taken.saturating_duration_since(then).as_secs_f64(),
            });
            *spare = Some(earlier);
        }
        *last = Some((taken, sample));
        out
    }
}

/// Lays `gpm`'s own metrics over `r`, as ratios, and the profiling
/// fields' `wanted` in DCGM's units; the ones of `wanted` NVML refused.
pub(super) fn set_gpm(r: &mut Readings, gpm: Option<&Gpm>, wanted: GpmIds) -> GpmIds {
    let Some(g) = gpm else {
        return GpmIds::NONE;
    };
    let ratio = |id: u32| g.get(id).map(|pc| pc / 100.0);
    r.sm_active_ratio = ratio(GPM_METRICS[0]);
    r.sm_occupancy_ratio = ratio(GPM_METRICS[1]);
    r.dram_active_ratio = ratio(GPM_METRICS[2]);
    for (o, &id) in r
        .health
        .pipe_active_ratios
        .iter_mut()
        .zip(&GPM_METRICS[3..])
    {
        *o = ratio(id);
    }
    let mut refused = GpmIds::NONE;
    for &(id, v) in g.values.iter().filter(|v| wanted.has(v.0)) {
        match v {
            Ok(v) if v.is_finite() => r.profiling.push((id, prof::scale(id).dcgm(v))),
            Ok(_) => {}
            Err(_) => refused = refused.with(id),
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_asked_for_are_each_once() {
        let wanted = GpmIds::NONE.with(prof::GRAPHICS_UTIL).with(prof::SM_UTIL);
        assert_eq!(metrics(false, false, GpmIds::NONE), Vec::<u32>::new());
        assert_eq!(metrics(false, true, GpmIds::NONE), [20, 21]);
        assert_eq!(metrics(true, false, wanted), [1, 2, 3, 5, 10, 11, 12, 13]);
        assert_eq!(metrics(false, false, wanted), [1, 2]);
    }

    /// Our ratios and the wanted fields in DCGM's units; a metric NVML
    /// refused is named, one it answered with no number is just absent.
    #[test]
    fn set_gpm_scales_and_names_what_nvml_refused() {
        let g = Gpm {
            values: vec![
                (prof::SM_UTIL, Ok(50.0)),
                (prof::PCIE_TX_PER_SEC, Ok(100.0)),
                (prof::NVLINK_TOTAL_TX_PER_SEC, Err(Error::NOT_SUPPORTED)),
                (prof::INTEGER_UTIL, Ok(f64::NAN)),
            ],
            seconds: 1.0,
        };
        let wanted = [
            prof::SM_UTIL,
            prof::PCIE_TX_PER_SEC,
            prof::NVLINK_TOTAL_TX_PER_SEC,
            prof::INTEGER_UTIL,
        ]
        .into_iter()
        .fold(GpmIds::NONE, GpmIds::with);
        let mut r = Readings::default();
        let refused = set_gpm(&mut r, Some(&g), wanted);
        assert_eq!(refused, GpmIds::NONE.with(prof::NVLINK_TOTAL_TX_PER_SEC));
        assert_eq!(r.sm_active_ratio, Some(0.5));
        assert_eq!(r.profiling, [(2, 0.5), (20, 104_857_600.0)]);
        assert_eq!(set_gpm(&mut r, None, wanted), GpmIds::NONE);
    }
}
