//! Readings inside physical ranges: a value a GPU cannot have (an NVML
//! sentinel that slipped through, a broken sensor, a parse gone wrong) is
//! left out like an unsupported reading, and logged once per GPU and
//! family. Each reading's range is in its declaration
//! ([`model::readings`]); fans run 0 to 2, as NVML says a fan
//! may run above 100% ([`readings::FAN_RATIO`]).

use base::quiet::Noted;
use model::dcgm::prof::{self, Scale};
use model::readings::{self, Field, LINK_BYTES_PER_SECOND, MEMORY_BYTES, RATIO, Range};
use model::{CLOCK_EVENT_REASONS, Readings, TxRx};
use std::collections::BTreeMap;

/// Readings left out, by family, since the exporter started:
/// `gpu_exporter_readings_rejected_total{reading}`.
pub type Rejected = BTreeMap<&'static str, u64>;

/// The key of the profiling fields (`DCGM_FI_PROF_*`) left out.
const PROFILING: &str = "DCGM_FI_PROF";

/// The clock event bits NVML defines; a mask with any other set is no
/// reading (all ones would set every reason).
const KNOWN_EVENTS: u64 = (1 << CLOCK_EVENT_REASONS.len()) - 1;

/// What a check tells of a reading it leaves out.
struct Check<'a> {
    who: &'a str,
    noted: &'a mut Noted<(String, &'static str)>,
    rejected: &'a mut Rejected,
}

impl Check<'_> {
    /// Leaves `v` out when `range` does not hold it.
    fn keep(&mut self, family: &'static str, v: &mut Option<f64>, range: Range) {
        if let Some(x) = *v
            && !range.holds(x)
        {
            *v = None;
            let what = match range.excludes_zero() && x == 0.0 {
                true => "0, which is no maximum, limit or total".to_string(),
                false => format!("{x}, outside {}..={}", range.min, range.max),
            };
            self.reject(family, &what);
        }
    }

    fn reject(&mut self, family: &'static str, what: &str) {
        *self.rejected.entry(family).or_default() += 1;
        if self.noted.first((self.who.to_string(), family)) {
            log::warn!(
                "GPU {}: {family} reads {what}; left out (logged once per GPU and family)",
                self.who
            );
        }
    }
}

/// Leaves out every reading of `r` outside its range, or past what the
/// GPU itself says it has (memory used, free or held by a process above
/// its total), counting each in `rejected` and logging each (GPU `who`,
/// family) the first time.
pub fn check(
    r: &mut Readings,
    who: &str,
    noted: &mut Noted<(String, &'static str)>,
    rejected: &mut Rejected,
) {
    let mut c = Check {
        who,
        noted,
        rejected,
    };
    for reading in readings::all() {
        let family = reading.family.name;
        match ((reading.read.field)(r), reading.range) {
            (Field::Value(v), Some(range)) => c.keep(family, v, range),
            (Field::Values(vs), Some(range)) => {
                vs.iter_mut().for_each(|v| c.keep(family, v, range))
            }
            (Field::Pair(pair), Some(range)) => {
                if let Some(TxRx { tx, rx }) = *pair {
                    let (mut t, mut x) = (Some(tx), Some(rx));
                    c.keep(family, &mut t, range);
                    c.keep(family, &mut x, range);
                    *pair = t.zip(x).map(|(tx, rx)| TxRx { tx, rx });
                }
            }
            (Field::Mask(m), _) => {
                if let Some(mask) = *m
                    && mask & !KNOWN_EVENTS != 0
                {
                    *m = None;
                    c.reject(family, &format!("{mask:#x}, bits NVML does not define"));
                }
            }
            _ => {}
        }
    }
    within_total(r, &mut c);
    lanes(r, &mut c);
    profiling(r, &mut c);
}

/// GPM's profiling fields, in DCGM's units: a utilization is a ratio, a
/// rate a link can carry. Counted under one key, as the fields are served
/// under DCGM's names only in the dcgm collector's families.
fn profiling(r: &mut Readings, c: &mut Check) {
    r.profiling.retain(|&(id, v)| {
        let range = match prof::scale(id) {
            Scale::Percent => RATIO,
            Scale::MibPerSecond => LINK_BYTES_PER_SECOND,
        };
        let kept = range.holds(v);
        if !kept {
            let what = format!(
                "{v} for GPM metric {id}, outside {}..={}",
                range.min, range.max
            );
            c.reject(PROFILING, &what);
        }
        kept
    });
}

/// A PCIe link has 1, 2, 4, 8, 16 or 32 lanes; the range already holds
/// 1 to 32, so what is left is the powers of two.
fn lanes(r: &mut Readings, c: &mut Check) {
    let h = &mut r.health;
    for (family, v) in [
        ("gpu_pcie_link_width", &mut h.pcie_link_width),
        ("gpu_pcie_link_width_max", &mut h.pcie_link_width_max),
    ] {
        if let Some(x) = *v
            && !(x >= 1.0 && x.fract() == 0.0 && (x as u32).is_power_of_two())
        {
            *v = None;
            c.reject(
                family,
                &format!("{x}, not a PCIe link width (1, 2, 4, 8, 16 or 32)"),
            );
        }
    }
}

/// Memory a GPU cannot hold: more used, free or reserved than its total,
/// or a process holding more than it.
fn within_total(r: &mut Readings, c: &mut Check) {
    let Some(total) = r.memory_total_bytes else {
        return;
    };
    let most = Range {
        max: total,
        ..MEMORY_BYTES
    };
    c.keep("gpu_memory_used_bytes", &mut r.memory_used_bytes, most);
    c.keep("gpu_memory_free_bytes", &mut r.memory_free_bytes, most);
    c.keep(
        "gpu_memory_reserved_bytes",
        &mut r.memory_reserved_bytes,
        most,
    );
    for p in &mut r.processes {
        c.keep("gpu_process_memory_used_bytes", &mut p.used_bytes, most);
    }
    // Used and reserved are disjoint parts of the total: together past it,
    // one is wrong, and reserved (NVML's newer call) is the one let go.
    if let (Some(used), Some(reserved)) = (r.memory_used_bytes, r.memory_reserved_bytes)
        && used + reserved > total
    {
        r.memory_reserved_bytes = None;
        c.reject(
            "gpu_memory_reserved_bytes",
            &format!("{reserved} with {used} used, past the total {total}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::readings::{FAN_RATIO, RATIO, TEMPERATURE_CELSIUS};

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
        let mut rejected = Rejected::new();
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
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
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(r.health.fan_speed_ratios[..2], [Some(1.5), None]);
        assert!(TEMPERATURE_CELSIUS.holds(-40.0) && TEMPERATURE_CELSIUS.holds(150.0));
        assert_eq!(rejected["gpu_temperature_celsius"], 1);
        assert_eq!(rejected["gpu_fan_speed_ratio"], 1);
    }

    #[test]
    fn profiling_fields_outside_their_unit_are_left_out_and_counted() {
        let mut r = Readings {
            profiling: vec![
                (prof::SM_UTIL, 0.5),
                (prof::SM_UTIL + 1, 1.5),
                (prof::PCIE_TX_PER_SEC, 3.2e10),
                (prof::PCIE_TX_PER_SEC + 1, -1.0),
                (prof::NVLINK_TOTAL_TX_PER_SEC, 4.2e13),
            ],
            ..Readings::default()
        };
        let (mut noted, mut rejected) = (Noted::default(), Rejected::new());
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(
            r.profiling,
            [(prof::SM_UTIL, 0.5), (prof::PCIE_TX_PER_SEC, 3.2e10)]
        );
        assert_eq!(rejected[PROFILING], 3);
    }

    #[test]
    fn a_zero_maximum_limit_or_total_is_no_reading() {
        let mut r = Readings {
            sm_clock_hertz: Some(1.98e9),
            sm_clock_max_hertz: Some(0.0),
            power_limit_watts: Some(0.0),
            memory_total_bytes: Some(0.0),
            memory_used_bytes: Some(0.0),
            ..Readings::default()
        };
        let (mut noted, mut rejected) = (Noted::default(), Rejected::new());
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(
            (
                r.sm_clock_max_hertz,
                r.power_limit_watts,
                r.memory_total_bytes
            ),
            (None, None, None)
        );
        // A current clock and used memory of 0 are readings.
        assert_eq!(
            (r.sm_clock_hertz, r.memory_used_bytes),
            (Some(1.98e9), Some(0.0))
        );
        for family in [
            "gpu_sm_clock_max_hertz",
            "gpu_power_limit_watts",
            "gpu_memory_total_bytes",
        ] {
            assert_eq!(rejected[family], 1, "{family}");
        }
    }

    #[test]
    fn used_and_reserved_fit_in_the_total() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        let mut r = Readings {
            memory_total_bytes: Some(80.0 * gib),
            memory_used_bytes: Some(70.0 * gib),
            memory_reserved_bytes: Some(20.0 * gib),
            ..Readings::default()
        };
        let (mut noted, mut rejected) = (Noted::default(), Rejected::new());
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(
            (r.memory_used_bytes, r.memory_reserved_bytes),
            (Some(70.0 * gib), None)
        );
        assert_eq!(rejected["gpu_memory_reserved_bytes"], 1);
        r.memory_reserved_bytes = Some(10.0 * gib);
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(r.memory_reserved_bytes, Some(10.0 * gib));
    }

    #[test]
    fn a_link_width_is_a_power_of_two() {
        let mut r = Readings::default();
        r.health.pcie_link_width = Some(12.0);
        r.health.pcie_link_width_max = Some(16.0);
        let (mut noted, mut rejected) = (Noted::default(), Rejected::new());
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(
            (r.health.pcie_link_width, r.health.pcie_link_width_max),
            (None, Some(16.0))
        );
        assert_eq!(rejected["gpu_pcie_link_width"], 1);
        r.health.pcie_link_width = Some(3.0);
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(rejected["gpu_pcie_link_width"], 2);
    }

    /// A byte counter may pass 2^63 (NVML counts NVLink in KiB); the
    /// all-ones KiB sentinel may not.
    #[test]
    fn byte_counters_run_past_two_to_the_63() {
        let mut r = Readings {
            nvlink_bytes_total: Some(TxRx { tx: 1e19, rx: 1e21 }),
            pcie_bytes_total: Some(TxRx {
                tx: u64::MAX as f64 * 1024.0,
                rx: 1.0,
            }),
            ..Readings::default()
        };
        let (mut noted, mut rejected) = (Noted::default(), Rejected::new());
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        assert_eq!(r.nvlink_bytes_total, Some(TxRx { tx: 1e19, rx: 1e21 }));
        assert_eq!(r.pcie_bytes_total, None);
        assert_eq!(rejected["gpu_pcie_bytes"], 1);
    }

    /// The values independent doubles found passing (issue 23): each is
    /// left out and counted.
    #[test]
    fn what_no_gpu_can_read_is_left_out_and_counted() {
        use model::GpuProcess;
        let all_ones = 4_294_967_295.0;
        let mut r = Readings {
            memory_total_bytes: Some(48e9),
            memory_used_bytes: Some(95.0 * 1024f64.powi(4)),
            memory_free_bytes: Some(1e9),
            clocks_event_mask: Some(u64::MAX),
            xid_last_code: Some(all_ones),
            processes: vec![
                GpuProcess {
                    pid: Some(7),
                    used_bytes: Some(1.8e19),
                    ..GpuProcess::default()
                },
                GpuProcess {
                    pid: Some(8),
                    used_bytes: Some(1e9),
                    ..GpuProcess::default()
                },
            ],
            ..Readings::default()
        };
        let h = &mut r.health;
        h.remapped_rows = [Some(all_ones), Some(3.0)];
        h.pcie_link_width = Some(all_ones);
        h.pcie_link_width_max = Some(0.0);
        h.pcie_link_generation = Some(all_ones);
        h.nvlink_links = Some(all_ones);
        h.recovery_action = Some(99.0);
        let (mut noted, mut rejected) = (Noted::default(), Rejected::new());
        check(&mut r, "GPU-a", &mut noted, &mut rejected);
        let h = &r.health;
        assert_eq!(h.remapped_rows, [None, Some(3.0)]);
        assert_eq!(
            (
                h.pcie_link_width,
                h.pcie_link_width_max,
                h.pcie_link_generation
            ),
            (None, None, None)
        );
        assert_eq!((h.nvlink_links, h.recovery_action), (None, None));
        assert_eq!(r.clocks_event_mask, None);
        assert_eq!(r.xid_last_code, None);
        assert_eq!(r.memory_used_bytes, None);
        assert_eq!(r.memory_free_bytes, Some(1e9));
        let used: Vec<_> = r.processes.iter().map(|p| p.used_bytes).collect();
        assert_eq!(used, [None, Some(1e9)]);
        for family in [
            "gpu_remapped_rows",
            "gpu_pcie_link_generation",
            "gpu_nvlink_links",
            "gpu_recovery_action",
            "gpu_clocks_event_active",
            "gpu_memory_used_bytes",
            "gpu_process_memory_used_bytes",
            "gpu_xid_last_code",
        ] {
            assert_eq!(rejected.get(family), Some(&1), "{family}");
        }
        assert_eq!(rejected.get("gpu_pcie_link_width"), Some(&1));
        assert_eq!(rejected.get("gpu_pcie_link_width_max"), Some(&1));
        // A sane mask passes.
        let mut r = Readings {
            clocks_event_mask: Some(0x1FF),
            xid_last_code: Some(79.0),
            ..Readings::default()
        };
        check(&mut r, "GPU-b", &mut noted, &mut rejected);
        assert_eq!(r.clocks_event_mask, Some(0x1FF));
        assert_eq!(r.xid_last_code, Some(79.0));
    }
}
