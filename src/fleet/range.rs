//! Readings inside physical ranges: a value a GPU cannot have (an NVML
//! sentinel that slipped through, a broken sensor, a parse gone wrong) is
//! left out like an unsupported reading, and logged once per GPU and
//! family.
//!
//! A family with a range of its own gets a [`Range`] constant here and a
//! line in [`check`]; fans run 0 to 2, as NVML says a fan may run above
//! 100% ([`FAN_RATIO`]).

use crate::base::quiet::Noted;
use crate::snapshot::{Readings, TxRx};

/// The plausible values of a family, both ends included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

impl Range {
    pub fn holds(self, v: f64) -> bool {
        v.is_finite() && self.min <= v && v <= self.max
    }
}

/// Die and memory temperature. The simulator's scenario check uses the
/// same bounds.
pub const TEMPERATURE_CELSIUS: Range = Range {
    min: -40.0,
    max: 150.0,
};
/// SM and memory clocks: no GPU clocks at 10 GHz.
pub const CLOCK_HERTZ: Range = Range {
    min: 0.0,
    max: 1e10,
};
/// Power draw and limit: a GB200 superchip's board is under 3 kW.
pub const POWER_WATTS: Range = Range {
    min: 0.0,
    max: 10_000.0,
};
/// Utilization, SM active and occupancy, DRAM active.
pub const RATIO: Range = Range { min: 0.0, max: 1.0 };
/// Fan speed as a ratio: NVML says a fan may report over 100%.
pub const FAN_RATIO: Range = Range { min: 0.0, max: 2.0 };
/// Memory sizes: up to 1 PiB per GPU.
pub const MEMORY_BYTES: Range = Range {
    min: 0.0,
    max: 1_125_899_906_842_624.0,
};
/// Counters: never negative; an all-ones 64-bit sentinel (1.8e19) is out.
pub const COUNT: Range = Range {
    min: 0.0,
    max: 9.2e18,
};
/// Unix time of the last Xid: after 2000 and before 2200.
pub const UNIX_SECONDS: Range = Range {
    min: 946_684_800.0,
    max: 7_258_118_400.0,
};

/// Leaves out every reading of `r` outside its family's range, logging each
/// (GPU `who`, family) the first time.
pub fn check(r: &mut Readings, who: &str, noted: &mut Noted<(String, &'static str)>) {
    let mut keep = |family: &'static str, v: &mut Option<f64>, range: Range| {
        if let Some(x) = *v
            && !range.holds(x)
        {
            *v = None;
            if noted.first((who.to_string(), family)) {
                log::warn!(
                    "GPU {who}: {family} reads {x}, outside {}..={}; left out (logged once per GPU and family)",
                    range.min,
                    range.max
                );
            }
        }
    };
    keep(
        "gpu_temperature_celsius",
        &mut r.temperature_celsius,
        TEMPERATURE_CELSIUS,
    );
    keep(
        "gpu_memory_temperature_celsius",
        &mut r.memory_temperature_celsius,
        TEMPERATURE_CELSIUS,
    );
    keep("gpu_sm_clock_hertz", &mut r.sm_clock_hertz, CLOCK_HERTZ);
    keep(
        "gpu_sm_clock_max_hertz",
        &mut r.sm_clock_max_hertz,
        CLOCK_HERTZ,
    );
    keep(
        "gpu_memory_clock_hertz",
        &mut r.memory_clock_hertz,
        CLOCK_HERTZ,
    );
    keep(
        "gpu_power_usage_watts",
        &mut r.power_usage_watts,
        POWER_WATTS,
    );
    keep(
        "gpu_power_limit_watts",
        &mut r.power_limit_watts,
        POWER_WATTS,
    );
    keep("gpu_utilization_ratio", &mut r.utilization_ratio, RATIO);
    keep("gpu_sm_active_ratio", &mut r.sm_active_ratio, RATIO);
    keep("gpu_sm_occupancy_ratio", &mut r.sm_occupancy_ratio, RATIO);
    keep("gpu_dram_active_ratio", &mut r.dram_active_ratio, RATIO);
    for (family, v) in [
        ("gpu_memory_total_bytes", &mut r.memory_total_bytes),
        ("gpu_memory_used_bytes", &mut r.memory_used_bytes),
        ("gpu_memory_free_bytes", &mut r.memory_free_bytes),
        ("gpu_memory_reserved_bytes", &mut r.memory_reserved_bytes),
        (
            "gpu_allocator_reserved_bytes",
            &mut r.allocator_reserved_bytes,
        ),
        (
            "gpu_allocator_allocated_bytes",
            &mut r.allocator_allocated_bytes,
        ),
        ("gpu_memory_largest_free_bytes", &mut r.largest_free_bytes),
    ] {
        keep(family, v, MEMORY_BYTES);
    }
    keep(
        "gpu_xid_last_timestamp_seconds",
        &mut r.xid_last_timestamp_seconds,
        UNIX_SECONDS,
    );
    for (family, v) in [
        ("gpu_ecc_corrected_errors_total", &mut r.ecc_corrected_total),
        (
            "gpu_ecc_uncorrected_errors_total",
            &mut r.ecc_uncorrected_total,
        ),
        ("gpu_energy_joules_total", &mut r.energy_joules_total),
        (
            "gpu_pcie_replay_errors_total",
            &mut r.pcie_replay_errors_total,
        ),
    ] {
        keep(family, v, COUNT);
    }
    for (family, pair) in [
        ("gpu_pcie_bytes_total", &mut r.pcie_bytes_total),
        ("gpu_nvlink_bytes_total", &mut r.nvlink_bytes_total),
    ] {
        if let Some(TxRx { tx, rx }) = *pair {
            let (mut t, mut x) = (Some(tx), Some(rx));
            keep(family, &mut t, COUNT);
            keep(family, &mut x, COUNT);
            *pair = t.zip(x).map(|(tx, rx)| TxRx { tx, rx });
        }
    }
    for v in &mut r.clocks_event_seconds_total {
        keep("gpu_clocks_event_seconds_total", v, COUNT);
    }
    let h = &mut r.health;
    keep(
        "gpu_memory_temperature_max_celsius",
        &mut h.memory_temperature_max_celsius,
        TEMPERATURE_CELSIUS,
    );
    for v in &mut h.fan_speed_ratios {
        keep("gpu_fan_speed_ratio", v, FAN_RATIO);
    }
    for v in &mut h.media_ratios {
        keep("gpu_media_utilization_ratio", v, RATIO);
    }
    for v in &mut h.pipe_active_ratios {
        keep("gpu_pipe_active_ratio", v, RATIO);
    }
    for (family, v) in [
        (
            "gpu_ecc_corrected_errors_lifetime_total",
            &mut h.ecc_corrected_lifetime,
        ),
        (
            "gpu_ecc_uncorrected_errors_lifetime_total",
            &mut h.ecc_uncorrected_lifetime,
        ),
    ] {
        keep(family, v, COUNT);
    }
    for v in h.remapped_rows.iter_mut() {
        keep("gpu_remapped_rows_total", v, COUNT);
    }
    for v in h.retired_pages.iter_mut() {
        keep("gpu_retired_pages_total", v, COUNT);
    }
    for v in h.nvlink_errors.iter_mut() {
        keep("gpu_nvlink_errors_total", v, COUNT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_readings_are_left_out_and_noted_once() {
        let mut noted = Noted::default();
        let mut r = Readings {
            temperature_celsius: Some(4_294_967_295.0),
            power_usage_watts: Some(350.0),
            utilization_ratio: Some(1.5),
            sm_clock_hertz: Some(f64::NAN),
            memory_total_bytes: Some(18_446_744_073_709_551_615.0),
            ecc_corrected_total: Some(-1.0),
            pcie_bytes_total: Some(TxRx { tx: 1.0, rx: -2.0 }),
            ..Readings::default()
        };
        check(&mut r, "GPU-a", &mut noted);
        assert_eq!(r.temperature_celsius, None);
        assert_eq!(r.power_usage_watts, Some(350.0));
        assert_eq!(r.utilization_ratio, None);
        assert_eq!(r.sm_clock_hertz, None);
        assert_eq!(r.memory_total_bytes, None);
        assert_eq!(r.ecc_corrected_total, None);
        assert_eq!(r.pcie_bytes_total, None);
        // Noted once per GPU and family.
        assert!(!noted.first(("GPU-a".into(), "gpu_temperature_celsius")));
        assert!(noted.first(("GPU-b".into(), "gpu_temperature_celsius")));
        assert!(FAN_RATIO.holds(1.2) && !FAN_RATIO.holds(2.5) && !RATIO.holds(1.2));
        let mut r = Readings::default();
        r.health.fan_speed_ratios[0] = Some(1.5);
        r.health.fan_speed_ratios[1] = Some(3.0);
        check(&mut r, "GPU-a", &mut noted);
        assert_eq!(r.health.fan_speed_ratios[..2], [Some(1.5), None]);
        assert!(TEMPERATURE_CELSIUS.holds(-40.0) && TEMPERATURE_CELSIUS.holds(150.0));
    }
}
