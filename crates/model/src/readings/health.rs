//! The hardware-health readings: memory repairs, PCIe and NVLink links,
//! the recovery action, fans, media engines, pipes and modes. Rendered
//! after [`super::GPU_READINGS`], the same way.

use super::{COMPUTE_MODE, NVLINKS, PCIE_GENERATION, PCIE_WIDTH, PSTATE, RECOVERY, REPAIRS};
use super::{COUNT, Extra, FAN_RATIO, Family, Field, Kind, RATIO, Read, Reading};
use super::{TEMPERATURE_CELSIUS, each, family, flag, one};
use crate::Collector::{
    Ecc, Fans, Gpm, Media, Nvlink, NvlinkLink, Pcie, Recovery, Remap, State, Temperature,
};
use crate::Health;
use crate::dcgm::{Unit::Same, face};
use Kind::{Counter, Gauge};

/// `,error="…"` in [`Health::nvlink_errors`] order.
pub const ERROR_LABELS: [&str; 4] = [
    ",error=\"crc_flit\"",
    ",error=\"crc_data\"",
    ",error=\"replay\"",
    ",error=\"recovery\"",
];
/// `,engine="…"` in [`Health::media_ratios`] order.
pub const ENGINE_LABELS: [&str; 4] = [
    ",engine=\"encoder\"",
    ",engine=\"decoder\"",
    ",engine=\"jpeg\"",
    ",engine=\"ofa\"",
];
/// `,pipe="…"` in [`Health::pipe_active_ratios`] order.
pub const PIPE_LABELS: [&str; 4] = [
    ",pipe=\"tensor\"",
    ",pipe=\"fp64\"",
    ",pipe=\"fp32\"",
    ",pipe=\"fp16\"",
];
/// Correctable, then uncorrectable; single-bit, then double-bit.
const REMAP_CAUSES: [&str; 2] = [",cause=\"correctable\"", ",cause=\"uncorrectable\""];
const RETIRE_CAUSES: [&str; 2] = [",cause=\"single_bit\"", ",cause=\"double_bit\""];

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

/// The health readings, in output order.
pub static HEALTH_READINGS: [Reading; 25] = [
    MEMORY_TEMPERATURE_MAX
        .reads(one!(health.memory_temperature_max_celsius))
        .from("N M")
        .within(TEMPERATURE_CELSIUS)
        .dcgm(face("DCGM_FI_DEV_MEM_MAX_OP_TEMP", Same)),
    family(
        "gpu_remapped_rows",
        Counter,
        "Memory rows remapped to spares after ECC errors, by cause, over the board's life (Ampere and later). Only grows, so a counter.",
    )
    .of(Remap)
    .reads(each!(health.remapped_rows, REMAP_CAUSES))
    .by("cause")
    .within(REPAIRS),
    ROW_REMAP_PENDING
        .reads(flag!(health.row_remap_pending))
        .signal("row_remap_pending"),
    ROW_REMAP_FAILED.reads(flag!(health.row_remap_failed))
        .dcgm(face("DCGM_FI_DEV_ROW_REMAP_FAILURE", Same))
        .signal("row_remap_failed"),
    family(
        "gpu_retired_pages",
        Counter,
        "Memory pages retired after ECC errors, by cause, over the board's life (before Ampere). Only grows, so a counter.",
    )
    .of(Remap)
    .reads(each!(health.retired_pages, RETIRE_CAUSES))
    .by("cause")
    .within(REPAIRS),
    RETIRED_PAGES_PENDING.reads(flag!(health.retired_pages_pending))
        .dcgm(face("DCGM_FI_DEV_RETIRED_PENDING", Same))
        .signal("retired_pages_pending"),
    family(
        "gpu_ecc_corrected_errors_lifetime",
        Counter,
        "Corrected ECC errors over the board's life (NVML aggregate, kept across driver reloads), a count, so a counter.",
    )
    .of(Ecc)
    .reads(one!(health.ecc_corrected_lifetime))
    .within(COUNT)
    .dcgm(face("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", Same)),
    family(
        "gpu_ecc_uncorrected_errors_lifetime",
        Counter,
        "Uncorrected ECC errors over the board's life (NVML aggregate), a count, so a counter.",
    )
    .of(Ecc)
    .reads(one!(health.ecc_uncorrected_lifetime))
    .within(COUNT)
    .dcgm(face("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", Same)),
    family(
        "gpu_pcie_link_generation",
        Gauge,
        "PCIe generation the link runs at now, a level, so a gauge. Drops at idle are power saving, not a fault.",
    )
    .of(Pcie)
    .reads(one!(health.pcie_link_generation))
    .within(PCIE_GENERATION)
    .dcgm(face("DCGM_FI_DEV_PCIE_LINK_GEN", Same)),
    family(
        "gpu_pcie_link_generation_max",
        Gauge,
        "Highest PCIe generation the GPU and the slot allow.",
    )
    .of(Pcie)
    .reads(one!(health.pcie_link_generation_max))
    .within(PCIE_GENERATION)
    .dcgm(face("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", Same)),
    PCIE_LINK_WIDTH
        .reads(one!(health.pcie_link_width))
        .within(PCIE_WIDTH)
        .dcgm(face("DCGM_FI_DEV_PCIE_LINK_WIDTH", Same)),
    PCIE_LINK_WIDTH_MAX
        .reads(one!(health.pcie_link_width_max))
        .within(PCIE_WIDTH)
        .dcgm(face("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", Same)),
    NVLINK_ERRORS
        .reads(each!(health.nvlink_errors, ERROR_LABELS))
        .from("N M")
        .by("error")
        .within(COUNT),
    NVLINK_LINKS
        .reads(one!(health.nvlink_links))
        .from("N M")
        .within(NVLINKS),
    NVLINK_LINKS_ACTIVE
        .reads(one!(health.nvlink_links_active))
        .from("N M")
        .within(NVLINKS),
    family(
        "gpu_nvlink_link_active",
        Gauge,
        "1 while this NVLink is up, per link (opt-in: collector nvlink_link).",
    )
    .of(NvlinkLink)
    .reads(Read {
        series: |r, f| links(&r.health, f),
        field: |r| Field::Links(&mut r.health.nvlink_per_link),
    })
    .from("N")
    .by("link"),
    family(
        "gpu_nvlink_link_errors",
        Counter,
        "NVLink errors per link, by error (opt-in: collector nvlink_link), a count, so a counter.",
    )
    .of(NvlinkLink)
    .reads(Read {
        series: |r, f| link_errors(&r.health, f),
        field: |r| Field::Links(&mut r.health.nvlink_per_link),
    })
    .from("N")
    .by("link,error"),
    RECOVERY_ACTION
        .reads(one!(health.recovery_action))
        .within(RECOVERY)
        .signal("recovery_action"),
    family(
        "gpu_fan_speed_ratio",
        Gauge,
        "Fan speed over its rated maximum, per fan; may exceed 1. Absent on fanless boards.",
    )
    .of(Fans)
    .reads(Read {
        series: |r, f| {
            for (i, v) in r.health.fan_speed_ratios.iter().enumerate() {
                if let Some(v) = v {
                    f(Extra::Num("fan", i as u32), *v);
                }
            }
        },
        field: |r| Field::Values(&mut r.health.fan_speed_ratios),
    })
    .by("fan")
    .within(FAN_RATIO),
    family(
        "gpu_media_utilization_ratio",
        Gauge,
        "Fraction of time each media engine (encoder, decoder, jpeg, ofa) was busy, a share, so a gauge.",
    )
    .of(Media)
    .reads(each!(health.media_ratios, ENGINE_LABELS))
    .by("engine")
    .within(RATIO),
    family(
        "gpu_pipe_active_ratio",
        Gauge,
        "Fraction of time the SMs used each pipe (GPM, Hopper and later): tensor is any tensor core, fp64/fp32/fp16 the non-tensor pipes. A share, so a gauge.",
    )
    .of(Gpm)
    .reads(each!(health.pipe_active_ratios, PIPE_LABELS))
    .from("N M")
    .by("pipe")
    .within(RATIO),
    family(
        "gpu_performance_state",
        Gauge,
        "P-state, 0 (fastest) to 15. A state, so a gauge.",
    )
    .of(State)
    .reads(one!(health.performance_state))
    .within(PSTATE)
    .dcgm(face("DCGM_FI_DEV_PSTATE", Same)),
    family(
        "gpu_persistence_mode",
        Gauge,
        "1 while persistence mode keeps the driver loaded without clients.",
    )
    .of(State)
    .reads(flag!(health.persistence_mode)),
    family(
        "gpu_compute_mode",
        Gauge,
        "Compute mode: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process. An enum, so a gauge.",
    )
    .of(State)
    .reads(one!(health.compute_mode))
    .within(COMPUTE_MODE),
    family("gpu_mig_mode", Gauge, "1 while MIG mode is on.")
        .of(State)
        .reads(flag!(health.mig_mode)),
];
