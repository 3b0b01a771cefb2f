//! The hardware-health families of the catalogue: memory repairs, PCIe
//! and NVLink links, the recovery action, fans, media engines, pipes and
//! modes. Rendered after [`super::GPU_FAMILIES`], the same way.

use super::{Extra, Family, Kind, Series, family};
use crate::config::Collector::{
    Ecc, Fans, Gpm, Media, Nvlink, NvlinkLink, Pcie, Recovery, Remap, State, Temperature,
};
use crate::snapshot::{Health, Readings};
use Kind::{Counter, Gauge};

/// `,error="…"` in [`Health::nvlink_errors`] order.
pub(super) const ERROR_LABELS: [&str; 4] = [
    ",error=\"crc_flit\"",
    ",error=\"crc_data\"",
    ",error=\"replay\"",
    ",error=\"recovery\"",
];
/// `,engine="…"` in [`Health::media_ratios`] order.
pub(super) const ENGINE_LABELS: [&str; 4] = [
    ",engine=\"encoder\"",
    ",engine=\"decoder\"",
    ",engine=\"jpeg\"",
    ",engine=\"ofa\"",
];
/// `,pipe="…"` in [`Health::pipe_active_ratios`] order.
pub(super) const PIPE_LABELS: [&str; 4] = [
    ",pipe=\"tensor\"",
    ",pipe=\"fp64\"",
    ",pipe=\"fp32\"",
    ",pipe=\"fp16\"",
];
/// Correctable, then uncorrectable; single-bit, then double-bit.
const REMAP_CAUSES: [&str; 2] = [",cause=\"correctable\"", ",cause=\"uncorrectable\""];
const RETIRE_CAUSES: [&str; 2] = [",cause=\"single_bit\"", ",cause=\"double_bit\""];

fn each(labels: &[&'static str], values: &[Option<f64>], f: &mut dyn FnMut(Extra, f64)) {
    for (label, v) in labels.iter().zip(values) {
        if let Some(v) = v {
            f(Extra::Label(label), *v);
        }
    }
}

fn flag(v: Option<bool>, f: &mut dyn FnMut(Extra, f64)) {
    if let Some(v) = v {
        f(Extra::None, if v { 1.0 } else { 0.0 });
    }
}

macro_rules! h {
    ($field:ident) => {
        |r: &Readings, f: &mut dyn FnMut(Extra, f64)| {
            if let Some(v) = r.health.$field {
                f(Extra::None, v)
            }
        }
    };
}

fn links(h: &Health, f: &mut dyn FnMut(Extra, f64)) {
    for l in &h.nvlink_per_link {
        if let Some(a) = l.active {
            f(Extra::Num("link", l.link), if a { 1.0 } else { 0.0 });
        }
    }
}

fn link_errors(h: &Health, f: &mut dyn FnMut(Extra, f64)) {
    for l in &h.nvlink_per_link {
        for (label, v) in ERROR_LABELS.iter().zip(l.errors) {
            if let Some(v) = v {
                f(Extra::NumLabel("link", l.link, label), v);
            }
        }
    }
}

pub const MEMORY_TEMPERATURE_MAX: Family = family(
            "gpu_memory_temperature_max_celsius",
            Gauge,
            "Memory temperature at which the GPU slows its memory down (NVML MEM_MAX threshold), a level, so a gauge.",
        )
        .of(Temperature);
pub const ROW_REMAP_PENDING: Family = family(
    "gpu_row_remap_pending",
    Gauge,
    "1 while a row remap waits for a GPU reset to take effect. A state, so a gauge.",
)
.of(Remap);
pub const ROW_REMAP_FAILED: Family = family(
    "gpu_row_remap_failed",
    Gauge,
    "1 once a row remap failed (no spare left): replace the GPU. A state, so a gauge.",
)
.of(Remap);
pub const RETIRED_PAGES_PENDING: Family = family(
    "gpu_retired_pages_pending",
    Gauge,
    "1 while a page retirement waits for a GPU reset. A state, so a gauge.",
)
.of(Remap);
pub const PCIE_LINK_WIDTH: Family = family(
            "gpu_pcie_link_width",
            Gauge,
            "PCIe lanes the link runs at now, a level, so a gauge. Below gpu_pcie_link_width_max the host bandwidth is cut.",
        )
        .of(Pcie);
pub const PCIE_LINK_WIDTH_MAX: Family = family(
    "gpu_pcie_link_width_max",
    Gauge,
    "Most PCIe lanes the link can train at.",
)
.of(Pcie);
pub const NVLINK_ERRORS: Family = family(
            "gpu_nvlink_errors",
            Counter,
            "NVLink errors summed over links, by error (CRC flit and data, replay, recovery), a count, so a counter. Alert on rate().",
        )
        .of(Nvlink);
pub const NVLINK_LINKS: Family =
    family("gpu_nvlink_links", Gauge, "NVLinks the GPU has.").of(Nvlink);
pub const NVLINK_LINKS_ACTIVE: Family = family(
    "gpu_nvlink_links_active",
    Gauge,
    "NVLinks up now, a level, so a gauge. Below gpu_nvlink_links, peers fall back to slower paths.",
)
.of(Nvlink);
pub const RECOVERY_ACTION: Family = family(
            "gpu_recovery_action",
            Gauge,
            "The recovery the driver asks for: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset, 5 recover IMEX domain; newer values as NVML gives them. An enum, so a gauge.",
        )
        .of(Recovery);

/// The health families, in output order, with how to read their series.
pub static HEALTH_FAMILIES: [(Family, Series); 25] = [
    (
        MEMORY_TEMPERATURE_MAX,
        h!(memory_temperature_max_celsius),
    ),
    (
        family(
            "gpu_remapped_rows",
            Counter,
            "Memory rows remapped to spares after ECC errors, by cause, over the board's life (Ampere and later). Only grows, so a counter.",
        )
        .of(Remap),
        |r, f| each(&REMAP_CAUSES, &r.health.remapped_rows, f),
    ),
    (
        ROW_REMAP_PENDING,
        |r, f| flag(r.health.row_remap_pending, f),
    ),
    (
        ROW_REMAP_FAILED,
        |r, f| flag(r.health.row_remap_failed, f),
    ),
    (
        family(
            "gpu_retired_pages",
            Counter,
            "Memory pages retired after ECC errors, by cause, over the board's life (before Ampere). Only grows, so a counter.",
        )
        .of(Remap),
        |r, f| each(&RETIRE_CAUSES, &r.health.retired_pages, f),
    ),
    (
        RETIRED_PAGES_PENDING,
        |r, f| flag(r.health.retired_pages_pending, f),
    ),
    (
        family(
            "gpu_ecc_corrected_errors_lifetime",
            Counter,
            "Corrected ECC errors over the board's life (NVML aggregate, kept across driver reloads), a count, so a counter.",
        )
        .of(Ecc),
        h!(ecc_corrected_lifetime),
    ),
    (
        family(
            "gpu_ecc_uncorrected_errors_lifetime",
            Counter,
            "Uncorrected ECC errors over the board's life (NVML aggregate), a count, so a counter.",
        )
        .of(Ecc),
        h!(ecc_uncorrected_lifetime),
    ),
    (
        family(
            "gpu_pcie_link_generation",
            Gauge,
            "PCIe generation the link runs at now, a level, so a gauge. Drops at idle are power saving, not a fault.",
        )
        .of(Pcie),
        h!(pcie_link_generation),
    ),
    (
        family(
            "gpu_pcie_link_generation_max",
            Gauge,
            "Highest PCIe generation the GPU and the slot allow.",
        )
        .of(Pcie),
        h!(pcie_link_generation_max),
    ),
    (
        PCIE_LINK_WIDTH,
        h!(pcie_link_width),
    ),
    (
        PCIE_LINK_WIDTH_MAX,
        h!(pcie_link_width_max),
    ),
    (
        NVLINK_ERRORS,
        |r, f| each(&ERROR_LABELS, &r.health.nvlink_errors, f),
    ),
    (
        NVLINK_LINKS,
        h!(nvlink_links),
    ),
    (
        NVLINK_LINKS_ACTIVE,
        h!(nvlink_links_active),
    ),
    (
        family(
            "gpu_nvlink_link_active",
            Gauge,
            "1 while this NVLink is up, per link (opt-in: collector nvlink_link).",
        )
        .of(NvlinkLink),
        |r, f| links(&r.health, f),
    ),
    (
        family(
            "gpu_nvlink_link_errors",
            Counter,
            "NVLink errors per link, by error (opt-in: collector nvlink_link), a count, so a counter.",
        )
        .of(NvlinkLink),
        |r, f| link_errors(&r.health, f),
    ),
    (
        RECOVERY_ACTION,
        h!(recovery_action),
    ),
    (
        family(
            "gpu_fan_speed_ratio",
            Gauge,
            "Fan speed over its rated maximum, per fan; may exceed 1. Absent on fanless boards.",
        )
        .of(Fans),
        |r, f| {
            for (i, v) in r.health.fan_speed_ratios.iter().enumerate() {
                if let Some(v) = v {
                    f(Extra::Num("fan", i as u32), *v);
                }
            }
        },
    ),
    (
        family(
            "gpu_media_utilization_ratio",
            Gauge,
            "Fraction of time each media engine (encoder, decoder, jpeg, ofa) was busy, a share, so a gauge.",
        )
        .of(Media),
        |r, f| each(&ENGINE_LABELS, &r.health.media_ratios, f),
    ),
    (
        family(
            "gpu_pipe_active_ratio",
            Gauge,
            "Fraction of time the SMs used each pipe (GPM, Hopper and later): tensor is any tensor core, fp64/fp32/fp16 the non-tensor pipes. A share, so a gauge.",
        )
        .of(Gpm),
        |r, f| each(&PIPE_LABELS, &r.health.pipe_active_ratios, f),
    ),
    (
        family(
            "gpu_performance_state",
            Gauge,
            "P-state, 0 (fastest) to 15. A state, so a gauge.",
        )
        .of(State),
        h!(performance_state),
    ),
    (
        family(
            "gpu_persistence_mode",
            Gauge,
            "1 while persistence mode keeps the driver loaded without clients.",
        )
        .of(State),
        |r, f| flag(r.health.persistence_mode, f),
    ),
    (
        family(
            "gpu_compute_mode",
            Gauge,
            "Compute mode: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process. An enum, so a gauge.",
        )
        .of(State),
        h!(compute_mode),
    ),
    (
        family("gpu_mig_mode", Gauge, "1 while MIG mode is on.").of(State),
        |r, f| flag(r.health.mig_mode, f),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_families_belong_to_collectors() {
        for (f, _) in &HEALTH_FAMILIES {
            assert!(f.collector.is_some(), "{}", f.name);
        }
    }
}
