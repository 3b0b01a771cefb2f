//! Readings inside physical ranges: a value a GPU cannot have (an NVML
//! sentinel that slipped through, a broken sensor, a parse gone wrong) is
//! left out like an unsupported reading, and logged once per GPU and
//! family. Each reading's range is in its declaration
//! ([`crate::snapshot::readings`]); fans run 0 to 2, as NVML says a fan
//! may run above 100% ([`readings::FAN_RATIO`]).

use crate::base::quiet::Noted;
use crate::snapshot::readings::{self, Field};
use crate::snapshot::{Readings, TxRx};

/// Leaves out every reading of `r` outside its range, logging each
/// (GPU `who`, family) the first time.
pub fn check(r: &mut Readings, who: &str, noted: &mut Noted<(String, &'static str)>) {
    for reading in readings::all() {
        let Some(range) = reading.range else { continue };
        let family = reading.family.name;
        let mut keep = |v: &mut Option<f64>| {
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
        match (reading.read.field)(r) {
            Field::Value(v) => keep(v),
            Field::Values(vs) => vs.iter_mut().for_each(keep),
            Field::Pair(pair) => {
                if let Some(TxRx { tx, rx }) = *pair {
                    let (mut t, mut x) = (Some(tx), Some(rx));
                    keep(&mut t);
                    keep(&mut x);
                    *pair = t.zip(x).map(|(tx, rx)| TxRx { tx, rx });
                }
            }
            Field::Mask(_) | Field::Flag(_) | Field::Xids(_) | Field::Links(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::readings::{FAN_RATIO, RATIO, TEMPERATURE_CELSIUS};

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
