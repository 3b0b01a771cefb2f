//! The hardware-health columns of nvidia-smi's `--query-gpu` CSV, and
//! which collector every queried field belongs to.

use super::cell::{is_missing, parse_flag, parse_number, parse_pstate};
use model::Collector::{self, *};
use model::{Health, MAX_FANS, readings};

/// The health fields asked for after [`super::csv::fields`], in order.
pub const HEALTH_FIELDS: &[&str] = &[
    "vbios_version",
    "inforom.img",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count",
    "retired_pages.pending",
    "ecc.errors.corrected.aggregate.total",
    "ecc.errors.uncorrected.aggregate.total",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
    "gpu_recovery_action",
    "fan.speed",
    "utilization.encoder",
    "utilization.decoder",
    "utilization.jpeg",
    "utilization.ofa",
    "pstate",
    "persistence_mode",
    "compute_mode",
    "mig.mode.current",
];

/// The collector a `--query-gpu` field belongs to: its reading's, where
/// the reading names the column, else by prefix; `None` for identity
/// (index, uuid, name, PCI bus id, driver), which every GPU needs.
pub fn collector_of(field: &str) -> Option<Collector> {
    if let Some(r) = readings::all().find(|r| r.smi == field) {
        return r.family.collector;
    }
    const BY_PREFIX: [(&str, Collector); 18] = [
        ("temperature.", Temperature),
        ("clocks", Clocks),
        ("power.", Power),
        ("enforced.power", Power),
        ("utilization.", Media),
        ("memory.", Memory),
        ("ecc.", Ecc),
        ("remapped_rows.", Remap),
        ("retired_pages.", Remap),
        ("pcie.", Pcie),
        ("gpu_recovery_action", Recovery),
        ("fan.", Fans),
        ("pstate", State),
        ("persistence_mode", State),
        ("compute_mode", State),
        ("mig.mode", State),
        ("vbios_version", Info),
        ("inforom.", Info),
    ];
    BY_PREFIX
        .iter()
        .find(|(p, _)| field.starts_with(p))
        .map(|&(_, c)| c)
}

/// nvidia-smi's spelling of the recovery action, as NVML's number (see
/// `gpu_recovery_action` in docs/metrics.md); other spellings are left out.
pub fn recovery_action(cell: &str) -> Option<f64> {
    let v = match cell.trim().to_ascii_lowercase().as_str() {
        "none" => 0,
        "reset" | "gpu reset" | "gpu reset required" => 1,
        "reboot" | "node reboot" | "node reboot required" => 2,
        "drain p2p" => 3,
        "drain and reset" => 4,
        "recover imex domain" => 5,
        _ => return None,
    };
    Some(f64::from(v))
}

fn compute_mode(cell: &str) -> Option<f64> {
    [
        "Default",
        "Exclusive_Thread",
        "Prohibited",
        "Exclusive_Process",
    ]
    .iter()
    .position(|m| *m == cell.trim())
    .map(|i| i as f64)
}

/// How a health column reads, in [`HEALTH_FIELDS`] order.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Number,
    Percent,
    Flag,
    Pstate,
    Recovery,
    Compute,
}

const KINDS: [Kind; 25] = {
    use Kind::*;
    [
        Text, Text, Number, Number, Flag, Flag, Number, Number, Flag, Number, Number, Number,
        Number, Number, Number, Recovery, Percent, Percent, Percent, Percent, Percent, Pstate,
        Flag, Compute, Flag,
    ]
};

fn value(kind: Kind, cell: &str) -> Option<f64> {
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    match kind {
        Kind::Text => None,
        Kind::Number => parse_number(cell, ""),
        Kind::Percent => parse_number(cell, "%").map(|v| v / 100.0),
        Kind::Flag => parse_flag(cell).map(flag),
        Kind::Pstate => parse_pstate(cell).map(f64::from),
        Kind::Recovery => recovery_action(cell),
        Kind::Compute => compute_mode(cell),
    }
}

/// Column positions of [`HEALTH_FIELDS`] in a header.
pub struct HealthColumns([Option<usize>; 25]);

impl HealthColumns {
    pub fn new(columns: &[String]) -> HealthColumns {
        let mut at = [None; 25];
        for (slot, field) in at.iter_mut().zip(HEALTH_FIELDS) {
            *slot = columns.iter().position(|c| c == field);
        }
        HealthColumns(at)
    }

    /// (VBIOS version, InfoROM image version, health) from one row.
    pub fn read(&self, values: &[&str]) -> (String, String, Health) {
        let cell = |i: usize| {
            self.0[i]
                .and_then(|c| values.get(c))
                .copied()
                .filter(|v| !is_missing(v))
        };
        let mut v = [None; 25];
        for (i, (out, kind)) in v.iter_mut().zip(KINDS).enumerate() {
            *out = cell(i).and_then(|c| value(kind, c));
        }
        let on = |i: usize| v[i].map(|x: f64| x != 0.0);
        let mut fans = [None; MAX_FANS];
        fans[0] = v[16];
        let health = Health {
            remapped_rows: [v[2], v[3]],
            row_remap_pending: on(4),
            row_remap_failed: on(5),
            retired_pages: [v[6], v[7]],
            retired_pages_pending: on(8),
            ecc_corrected_lifetime: v[9],
            ecc_uncorrected_lifetime: v[10],
            pcie_link_generation: v[11],
            pcie_link_generation_max: v[12],
            pcie_link_width: v[13],
            pcie_link_width_max: v[14],
            recovery_action: v[15],
            fan_speed_ratios: fans,
            media_ratios: [v[17], v[18], v[19], v[20]],
            performance_state: v[21],
            persistence_mode: on(22),
            compute_mode: v[23],
            mig_mode: on(24),
            ..Health::default()
        };
        let text = |i| cell(i).unwrap_or_default().to_string();
        (text(0), text(1), health)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smi::csv::parse;
    use base::fixture;

    fn health(csv: &str) -> (String, String, Health) {
        let g = parse(csv, &[]).unwrap().remove(0);
        (g.vbios_version, g.inforom_version, g.readings.health)
    }

    #[test]
    fn full_field_captures() {
        let (vbios, inforom, h) = health(fixture!(
            "nvidia-smi",
            "querygpu_h100-80gb-hbm3_590.48.01_idle.csv"
        ));
        assert_eq!(
            (vbios.as_str(), inforom.as_str()),
            ("96.00.A5.00.01", "G520.0200.00.05")
        );
        let want = Health {
            remapped_rows: [Some(0.0), Some(0.0)],
            row_remap_pending: Some(false),
            row_remap_failed: Some(false),
            // [N/A] on Hopper, which remaps rows instead.
            retired_pages: [None, None],
            retired_pages_pending: None,
            ecc_corrected_lifetime: Some(0.0),
            ecc_uncorrected_lifetime: Some(0.0),
            pcie_link_generation: Some(5.0),
            pcie_link_generation_max: Some(5.0),
            pcie_link_width: Some(16.0),
            pcie_link_width_max: Some(16.0),
            recovery_action: Some(0.0),
            media_ratios: [Some(0.0); 4],
            performance_state: Some(0.0),
            persistence_mode: Some(true),
            compute_mode: Some(0.0),
            mig_mode: Some(false),
            ..Health::default()
        };
        assert_eq!(h, want);

        let (vbios, _, h) = health(fixture!(
            "nvidia-smi",
            "querygpu_rtx4080super_595.71.05_load.csv"
        ));
        assert_eq!(vbios, "95.03.44.00.B2");
        assert_eq!(h.remapped_rows, [None, None]);
        assert_eq!(h.row_remap_pending, None);
        assert_eq!(
            (h.pcie_link_generation, h.pcie_link_width),
            (Some(4.0), Some(16.0))
        );
        assert_eq!(h.recovery_action, Some(0.0));
        assert_eq!(h.fan_speed_ratios[..2], [Some(0.0), None]);
        assert_eq!(
            h.media_ratios,
            [Some(0.72), Some(0.0), Some(0.0), Some(0.0)]
        );
        assert_eq!(h.performance_state, Some(2.0));
        assert_eq!(h.persistence_mode, Some(false));
        assert_eq!(h.mig_mode, None);

        let (_, _, h) = health(fixture!(
            "nvidia-smi",
            "querygpu_rtx2080super_windows-wddm_610.62_idle.csv"
        ));
        assert_eq!(h.fan_speed_ratios[0], Some(0.38));
        assert_eq!(h.performance_state, Some(8.0));
        assert_eq!(h.pcie_link_generation_max, Some(3.0));
        assert_eq!(h.persistence_mode, None);

        let (_, _, h) = health(fixture!(
            "nvidia-smi",
            "querygpu_h100-80gb-hbm3-MIG_590.48.01_load.csv"
        ));
        assert_eq!(h.mig_mode, Some(true));
        assert_eq!(h.remapped_rows, [None, None]);
        assert_eq!(h.media_ratios, [None; 4]);
    }

    #[test]
    fn spellings() {
        for (cell, want) in [
            ("None", Some(0.0)),
            ("Reset", Some(1.0)),
            ("GPU Reset Required", Some(1.0)),
            ("Node Reboot", Some(2.0)),
            ("Drain P2P", Some(3.0)),
            ("Drain and Reset", Some(4.0)),
            ("Recover IMEX Domain", Some(5.0)),
            ("Bus Reset", None),
        ] {
            assert_eq!(recovery_action(cell), want, "{cell}");
        }
        assert_eq!(compute_mode("Exclusive_Process"), Some(3.0));
        assert_eq!(compute_mode("Shared"), None);
        assert_eq!(collector_of("utilization.gpu"), Some(Utilization));
        assert_eq!(collector_of("utilization.encoder"), Some(Media));
        assert_eq!(collector_of("clocks_event_reasons.active"), Some(Clocks));
        assert_eq!(collector_of("mig.mode.current"), Some(State));
        assert_eq!(collector_of("uuid"), None);
        for f in HEALTH_FIELDS
            .iter()
            .copied()
            .chain(crate::smi::csv::fields())
        {
            let identity = ["index", "uuid", "name", "pci.bus_id", "driver_version"];
            assert_eq!(collector_of(f).is_none(), identity.contains(&f), "{f}");
        }
    }
}
