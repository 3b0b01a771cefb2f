//! A simulated GPU's hardware health: memory repairs, links, recovery,
//! fans, media engines, pipes and modes. Healthy by default; a GPU's
//! `health` object sets it at the origin, an incident's changes it.

use super::Counter;
use model::{Health, MAX_FANS};

/// A GPU's `health` object, or an incident's; every field is optional.
#[allow(clippy::question_mark)] // in nanoserde's derived code
mod file {
    use base::json::json_struct;

    json_struct! {
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct HealthSpec {
            pub row_remap_pending: Option<bool>,
            pub row_remap_failed: Option<bool>,
            /// Set (either way), the GPU is a pre-Ampere one: retired
            /// pages instead of remapped rows.
            pub retired_pages_pending: Option<bool>,
            pub pcie_link_width: Option<f64>,
            pub pcie_replays_per_second: Option<f64>,
            pub nvlink_links_active: Option<f64>,
            pub nvlink_errors_per_second: Option<f64>,
            pub recovery_action: Option<f64>,
            pub fans_percent: Option<Vec<f64>>,
        }
    }
}
pub use file::HealthSpec;

/// H100 SXM: 18 NVLinks, PCIe 5 x16, HBM3 slowing down at 95 °C.
const NVLINKS: f64 = 18.0;
const PCIE_GEN: f64 = 5.0;
const PCIE_LANES: f64 = 16.0;
const MEMORY_MAX_CELSIUS: f64 = 95.0;

/// The health of one simulated GPU, advanced along the clock.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct HealthState {
    remap_pending: bool,
    remap_failed: bool,
    /// Rows remapped for uncorrectable errors: one per pending remap.
    rows_uncorrectable: f64,
    /// Some for a pre-Ampere GPU: whether a retirement is pending.
    pages_pending: Option<bool>,
    pages_double_bit: f64,
    width: f64,
    replay_rate: f64,
    replays: Counter,
    links_active: f64,
    nvlink_rate: f64,
    nvlink_errors: Counter,
    recovery: f64,
    fans: Vec<f64>,
}

impl Default for HealthState {
    fn default() -> HealthState {
        HealthState {
            remap_pending: false,
            remap_failed: false,
            rows_uncorrectable: 0.0,
            pages_pending: None,
            pages_double_bit: 0.0,
            width: PCIE_LANES,
            replay_rate: 0.0,
            replays: Counter::default(),
            links_active: NVLINKS,
            nvlink_rate: 0.0,
            nvlink_errors: Counter::default(),
            recovery: 0.0,
            fans: Vec::new(),
        }
    }
}

fn range(name: &str, v: Option<f64>, lo: f64, hi: f64) -> Result<(), String> {
    match v {
        Some(v) if !(v.is_finite() && (lo..=hi).contains(&v)) => {
            Err(format!("health.{name}: {v} is outside {lo}..={hi}"))
        }
        _ => Ok(()),
    }
}

/// Checks a `health` object; the error names the field.
pub(super) fn check(s: &HealthSpec) -> Result<(), String> {
    range("pcie_link_width", s.pcie_link_width, 1.0, PCIE_LANES)?;
    range(
        "pcie_replays_per_second",
        s.pcie_replays_per_second,
        0.0,
        1e6,
    )?;
    range("nvlink_links_active", s.nvlink_links_active, 0.0, NVLINKS)?;
    range(
        "nvlink_errors_per_second",
        s.nvlink_errors_per_second,
        0.0,
        1e9,
    )?;
    range("recovery_action", s.recovery_action, 0.0, 255.0)?;
    let fans = s.fans_percent.as_deref().unwrap_or_default();
    if fans.len() > MAX_FANS {
        return Err(format!("health.fans_percent: at most {MAX_FANS} fans"));
    }
    for &f in fans {
        range("fans_percent", Some(f), 0.0, 200.0)?;
    }
    if s.recovery_action.is_some_and(|a| a.fract() != 0.0) {
        return Err("health.recovery_action: a whole number".into());
    }
    Ok(())
}

impl HealthState {
    /// Lays a checked `health` object over the state.
    pub(super) fn apply(&mut self, s: &HealthSpec) {
        if let Some(p) = s.row_remap_pending {
            // A remap follows an uncorrectable error.
            if p && !self.remap_pending {
                self.rows_uncorrectable += 1.0;
            }
            self.remap_pending = p;
        }
        self.remap_failed = s.row_remap_failed.unwrap_or(self.remap_failed);
        if let Some(p) = s.retired_pages_pending {
            if p && self.pages_pending != Some(true) {
                self.pages_double_bit += 1.0;
            }
            self.pages_pending = Some(p);
        }
        self.width = s.pcie_link_width.unwrap_or(self.width);
        self.replay_rate = s.pcie_replays_per_second.unwrap_or(self.replay_rate);
        self.links_active = s.nvlink_links_active.unwrap_or(self.links_active);
        self.nvlink_rate = s.nvlink_errors_per_second.unwrap_or(self.nvlink_rate);
        self.recovery = s.recovery_action.unwrap_or(self.recovery);
        if let Some(f) = &s.fans_percent {
            self.fans = f.clone();
        }
    }

    /// From `t` on, its counters grow at their rates times `on` (0 while
    /// the GPU is lost).
    pub(super) fn set_rates(&mut self, t: f64, on: f64) {
        self.replays.set_rate(t, self.replay_rate * on);
        self.nvlink_errors.set_rate(t, self.nvlink_rate * on);
    }

    pub(super) fn replays(&self, at: f64) -> f64 {
        self.replays.at(at).floor()
    }

    /// The readings at `at`, for a GPU whose SMs are `sm_active` busy.
    pub(super) fn readings(&self, sm_active: f64, at: f64) -> Health {
        let pages = self.pages_pending.is_some();
        let rows = |v: f64| (!pages).then_some(v);
        let mut fans = [None; MAX_FANS];
        for (f, pc) in fans.iter_mut().zip(&self.fans) {
            *f = Some(pc / 100.0);
        }
        // A flaky link shows CRC errors, each answered by a replay.
        let errors = (self.nvlink_errors.at(at) / 2.0).floor();
        Health {
            remapped_rows: [rows(0.0), rows(self.rows_uncorrectable)],
            row_remap_pending: rows(0.0).map(|_| self.remap_pending),
            row_remap_failed: rows(0.0).map(|_| self.remap_failed),
            retired_pages: if pages {
                [Some(0.0), Some(self.pages_double_bit)]
            } else {
                [None; 2]
            },
            retired_pages_pending: self.pages_pending,
            ecc_corrected_lifetime: Some(0.0),
            ecc_uncorrected_lifetime: Some(self.rows_uncorrectable + self.pages_double_bit),
            pcie_link_generation: Some(PCIE_GEN),
            pcie_link_generation_max: Some(PCIE_GEN),
            pcie_link_width: Some(self.width),
            pcie_link_width_max: Some(PCIE_LANES),
            nvlink_errors: [Some(errors), Some(0.0), Some(errors), Some(0.0)],
            nvlink_links: Some(NVLINKS),
            nvlink_links_active: Some(self.links_active),
            nvlink_per_link: Vec::new(),
            recovery_action: Some(self.recovery),
            fan_speed_ratios: fans,
            media_ratios: [Some(0.0), Some(0.02), Some(0.0), Some(0.0)],
            pipe_active_ratios: [
                Some(sm_active * 0.6),
                Some(0.0),
                Some(sm_active * 0.1),
                Some(sm_active * 0.05),
            ],
            performance_state: Some(0.0),
            persistence_mode: Some(true),
            compute_mode: Some(0.0),
            mig_mode: Some(false),
            memory_temperature_max_celsius: Some(MEMORY_MAX_CELSIUS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incidents_change_health() {
        // An incident at `t`, read 10 s later.
        let t = super::super::EPOCH + 1000.0;
        let mut h = HealthState::default();
        let healthy = h.readings(0.5, t);
        assert_eq!(healthy.row_remap_pending, Some(false));
        assert_eq!(healthy.retired_pages, [None; 2]);
        assert_eq!(healthy.fan_speed_ratios, [None; MAX_FANS]);
        h.apply(&HealthSpec {
            row_remap_pending: Some(true),
            nvlink_errors_per_second: Some(4.0),
            fans_percent: Some(vec![38.0, 120.0]),
            ..Default::default()
        });
        h.set_rates(t, 1.0);
        let r = h.readings(0.5, t + 10.0);
        assert_eq!(r.remapped_rows, [Some(0.0), Some(1.0)]);
        assert_eq!(
            r.nvlink_errors,
            [Some(20.0), Some(0.0), Some(20.0), Some(0.0)]
        );
        assert_eq!(&r.fan_speed_ratios[..3], [Some(0.38), Some(1.2), None]);
        h.apply(&HealthSpec {
            retired_pages_pending: Some(true),
            ..Default::default()
        });
        let r = h.readings(0.5, t + 10.0);
        assert_eq!(r.remapped_rows, [None; 2]);
        assert_eq!(r.retired_pages, [Some(0.0), Some(1.0)]);
        for (bad, field) in [
            (r#"{"pcie_link_width":17}"#, "health.pcie_link_width"),
            (r#"{"recovery_action":1.5}"#, "health.recovery_action"),
            (
                r#"{"fans_percent":[1,2,3,4,5,6,7,8,9]}"#,
                "health.fans_percent",
            ),
        ] {
            let spec: HealthSpec = base::json::read(bad).unwrap();
            assert!(check(&spec).unwrap_err().starts_with(field), "{bad}");
        }
    }
}
