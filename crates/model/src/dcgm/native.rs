//! Each dcgm-exporter field as PromQL over our own families, in its unit
//! and print form: what the recording rules of
//! `deploy/prometheus/dcgm-compat-rules.yml` and the migration guide's
//! table are generated from. A reading's comes from its declaration
//! ([`super::Face`]); the others are written here, by [`Field`], so a new
//! field is a compile error until it says.

use super::{Field, Unit, Whole};

/// A field as our families give it.
pub struct Native {
    /// The PromQL in our unit: one series per GPU, no extra label.
    pub ours: String,
    pub unit: Unit,
    pub whole: Whole,
}

impl Native {
    /// In dcgm-exporter's unit, not yet made whole: `gpu_sm_clock_hertz / 1e6`.
    pub fn scaled(&self) -> String {
        format!("{}{}", self.ours, self.unit.promql())
    }

    /// As dcgm-exporter prints it: `round(gpu_sm_clock_hertz / 1e6)`.
    pub fn printed(&self) -> String {
        let how = match self.whole {
            Whole::Round => "round",
            Whole::Floor => "floor",
            Whole::AsRead => "",
        };
        format!("{how}({})", self.scaled())
    }
}

/// One series of a family with an extra label, the label dropped.
fn one(family: &str, label: &str, value: &str) -> String {
    format!("max without ({label}) ({family}{{{label}=\"{value}\"}})")
}

impl Field {
    /// The field over our families; `None` where no series of ours is it
    /// as it is: a string (a label field), a bit mask, a count over a
    /// window, nanoseconds of violation, a profiling field with no family
    /// of its own, or one we do not serve.
    pub fn native(self) -> Option<Native> {
        use Field::*;
        use Unit::{Percent, Same};
        let (ours, unit) = match self {
            Reading(r) => (r.family.sample(), r.dcgm?.unit),
            EncUtil => (
                one("gpu_media_utilization_ratio", "engine", "encoder"),
                Percent,
            ),
            DecUtil => (
                one("gpu_media_utilization_ratio", "engine", "decoder"),
                Percent,
            ),
            XidErrors => ("gpu_xid_last_code".into(), Same),
            UncorrectableRemapped => (remapped("uncorrectable"), Same),
            CorrectableRemapped => (remapped("correctable"), Same),
            RetiredSbe => (one("gpu_retired_pages_total", "cause", "single_bit"), Same),
            RetiredDbe => (one("gpu_retired_pages_total", "cause", "double_bit"), Same),
            NvlinkCrcFlit => (nvlink("crc_flit"), Same),
            NvlinkCrcData => (nvlink("crc_data"), Same),
            NvlinkReplay => (nvlink("replay"), Same),
            NvlinkRecovery => (nvlink("recovery"), Same),
            FanSpeed => (one("gpu_fan_speed_ratio", "fan", "0"), Percent),
            Prof(gpm) => (prof(gpm)?, Same),
            DriverVersion | DevName | DevUuid | PciBusId | VbiosVersion | InforomImage
            | ClocksEventReasons | XidCount | PowerViolation | ThermalViolation
            | SyncBoostViolation | Unservable => return None,
        };
        Some(Native {
            ours,
            unit,
            whole: self.whole(),
        })
    }
}

fn remapped(cause: &str) -> String {
    one("gpu_remapped_rows_total", "cause", cause)
}

fn nvlink(error: &str) -> String {
    one("gpu_nvlink_errors_total", "error", error)
}

/// The profiling fields that one of our families gives as it is, by GPM
/// metric (`prof::PROF`): the GPM readings and the pipes.
fn prof(gpm: u32) -> Option<String> {
    let pipe = |p| one("gpu_pipe_active_ratio", "pipe", p);
    Some(match gpm {
        2 => "gpu_sm_active_ratio".into(),
        3 => "gpu_sm_occupancy_ratio".into(),
        10 => "gpu_dram_active_ratio".into(),
        5 => pipe("tensor"),
        11 => pipe("fp64"),
        12 => pipe("fp32"),
        13 => pipe("fp16"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dcgm::{FIELDS, faces, prof::PROF};
    use crate::readings;

    /// Every family an expression names is a reading's, and each
    /// reading's face and unit step say what `Unit::of` does.
    #[test]
    fn expressions_name_our_families() {
        let fields = FIELDS.iter().map(|f| f.1);
        let fields = fields.chain(faces().map(|(r, _)| Field::Reading(r)));
        let fields = fields.chain(PROF.iter().map(|p| Field::Prof(p.gpm)));
        let mut n = 0;
        for native in fields.filter_map(Field::native) {
            let names = native
                .ours
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
            let gpu = names.filter(|w| w.starts_with("gpu_")).collect::<Vec<_>>();
            assert_eq!(gpu.len(), 1, "{}", native.ours);
            assert!(
                readings::all().any(|r| r.family.sample() == gpu[0]),
                "{}: no reading's family",
                native.ours
            );
            n += 1;
        }
        assert!(n >= 30, "{n}");
        for unit in [
            Unit::Same,
            Unit::Mhz,
            Unit::Mib,
            Unit::Percent,
            Unit::Millijoules,
        ] {
            let by = |op: &str| unit.promql().strip_prefix(op)?.parse::<f64>().ok();
            let v = 3.0e6;
            let promql = match (by(" / "), by(" * ")) {
                (Some(d), _) => v / d,
                (_, Some(m)) => v * m,
                _ => v,
            };
            assert_eq!(promql, unit.of(v), "{unit:?}");
        }
    }
}
