//! One declaration per GPU reading: its family (name, type, unit, help,
//! labels), its collector, its physical range, and which [`Readings`]
//! field it is, with how its series are read. Everything that used to say
//! it again is derived from [`GPU_READINGS`] and [`HEALTH_READINGS`]:
//! the catalogue's per-GPU table and its render order (`exposition`), the
//! range checks (`fleet::range`), [`Readings::retain`], and the metric
//! table of docs/metrics.md (a test below writes it and holds the page to it).
//!
//! Why here, in the fleet model (floor 2): the consumers are floor 3
//! (`exposition`, `fleet`), which may not import each other, and the
//! declaration is about the model's own fields. The collector names and
//! their `--help` stay in `config::collectors` (floor 1), which this
//! module names and cannot be named by. The sources keep their own
//! reading code: NVML's calls, nvidia-smi's columns and the simulator's
//! model differ too much to be one table.

mod family;
pub mod health;
mod profiling;

use super::{GpuProcess, Health, NvlinkLink, Pod, TxRx};
use crate::Collector;
pub use family::*;

/// Everything a source can read about one GPU (or MIG instance). Gauges
/// and counters are in base units.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Readings {
    pub temperature_celsius: Option<f64>,
    pub memory_temperature_celsius: Option<f64>,
    pub sm_clock_hertz: Option<f64>,
    pub sm_clock_max_hertz: Option<f64>,
    pub memory_clock_hertz: Option<f64>,
    /// Active clock event reasons as the NVML bit mask.
    pub clocks_event_mask: Option<u64>,
    pub power_usage_watts: Option<f64>,
    pub power_limit_watts: Option<f64>,
    pub utilization_ratio: Option<f64>,
    pub memory_utilization_ratio: Option<f64>,
    pub sm_active_ratio: Option<f64>,
    pub sm_occupancy_ratio: Option<f64>,
    pub dram_active_ratio: Option<f64>,
    pub memory_total_bytes: Option<f64>,
    pub memory_used_bytes: Option<f64>,
    pub memory_free_bytes: Option<f64>,
    pub memory_reserved_bytes: Option<f64>,
    pub allocator_reserved_bytes: Option<f64>,
    pub allocator_allocated_bytes: Option<f64>,
    pub largest_free_bytes: Option<f64>,

    /// Xid counts by code, as [`super::xid_errors`] builds them; `None` when the
    /// source cannot see Xid at all.
    pub xid_errors: Option<Vec<(u32, u64)>>,
    pub xid_last_timestamp_seconds: Option<f64>,
    /// The code of the GPU's latest Xid, 0 until one is seen, wherever
    /// `xid_errors` is read: no Xid has code 0, and dcgm-exporter's
    /// `DCGM_FI_DEV_XID_ERRORS` reads 0 then too.
    pub xid_last_code: Option<f64>,
    /// Xid counts by code over the dcgm collector's window, as
    /// [`super::XidWindow`] sets them where its counters file asks for
    /// `DCGM_EXP_XID_ERRORS_COUNT`; else, and where `xid_errors` is `None`,
    /// `None`.
    pub xid_window: Option<Vec<(u32, u64)>>,
    pub ecc_corrected_total: Option<f64>,
    pub ecc_uncorrected_total: Option<f64>,
    pub energy_joules_total: Option<f64>,
    pub pcie_bytes_total: Option<TxRx>,
    pub pcie_replay_errors_total: Option<f64>,
    pub nvlink_bytes_total: Option<TxRx>,
    /// Seconds spent under each reason in [`super::CLOCK_EVENT_REASONS`] order;
    /// NVML reports violation time only for some of them.
    pub clocks_event_seconds_total: [Option<f64>; 9],
    /// The dcgm collector's profiling fields, by GPM metric (`profiling.rs`).
    pub profiling: Vec<(u32, f64)>,
    /// Hardware health and state beyond the readings above.
    pub health: Health,
    /// Processes using the memory (the `processes` collector), the
    /// largest first once the collector has bounded them
    /// ([`super::bound_processes`]).
    pub processes: Vec<GpuProcess>,
    /// Containers the kubelet says hold this GPU or MIG instance, sorted;
    /// several on a shared GPU.
    pub pods: Vec<Pod>,
    /// Batch jobs running on it (`--hpc.job-mapping-dir`), in file order.
    pub jobs: Vec<String>,
}

impl Family {
    /// The reading this family shows, read by `read`; no range, no
    /// labels but `gpu` and `uuid` until said.
    pub const fn reads(self, read: Read) -> Reading {
        Reading {
            family: self,
            labels: "",
            sources: "N S M",
            smi: "",
            range: None,
            read,
            mig: None,
        }
    }
}

/// An extra label after `gpu` and `uuid`: a whole one spelled out
/// (`,reason="hw_slowdown"`), a number, or a number and then a whole one.
#[derive(Clone, Copy)]
pub enum Extra {
    None,
    Label(&'static str),
    Num(&'static str, u32),
    NumLabel(&'static str, u32, &'static str),
}

/// A reading's series: each extra label set and its value.
pub type Series = fn(&Readings, &mut dyn FnMut(Extra, f64));

/// The [`Readings`] field a reading is, to check and to clear.
pub enum Field<'a> {
    Value(&'a mut Option<f64>),
    Values(&'a mut [Option<f64>]),
    Pair(&'a mut Option<TxRx>),
    Mask(&'a mut Option<u64>),
    Flag(&'a mut Option<bool>),
    Xids(&'a mut Option<Vec<(u32, u64)>>),
    Links(&'a mut Vec<NvlinkLink>),
}

impl Field<'_> {
    /// Leaves the reading out.
    pub fn clear(self) {
        match self {
            Field::Value(v) => *v = None,
            Field::Values(v) => v.fill(None),
            Field::Pair(v) => *v = None,
            Field::Mask(v) => *v = None,
            Field::Flag(v) => *v = None,
            Field::Xids(v) => *v = None,
            Field::Links(v) => v.clear(),
        }
    }
}

/// How a reading is read: its series for the render, its field for the
/// range check and [`Readings::retain`]. The macros below make both from
/// the field's path.
#[derive(Clone, Copy)]
pub struct Read {
    pub series: Series,
    pub field: for<'a> fn(&'a mut Readings) -> Field<'a>,
}

/// One GPU reading, declared once.
pub struct Reading {
    pub family: Family,
    /// Its labels after `gpu` and `uuid`, comma-separated, for docs/metrics.md.
    pub labels: &'static str,
    /// Who reads it, for docs/metrics.md: `N` NVML, `S` nvidia-smi, `M` the
    /// simulator; "N S M" until said.
    pub sources: &'static str,
    /// The nvidia-smi `--query-gpu` column it is read from, where it is
    /// one column; the smi source finds the column's collector by it.
    pub smi: &'static str,
    /// Its physical range; `None` for states, masks and codes.
    pub range: Option<Range>,
    pub read: Read,
    /// The family that stands in for it on a MIG instance: while MIG is
    /// on, `gpu_memory_*` stay the whole GPU's (its real total), so
    /// `sum by (gpu)` of either never counts a byte twice.
    pub mig: Option<Family>,
}

impl Reading {
    pub const fn within(mut self, range: Range) -> Reading {
        self.range = Some(range);
        self
    }

    pub const fn from(mut self, sources: &'static str) -> Reading {
        self.sources = sources;
        self
    }

    pub const fn smi(mut self, column: &'static str) -> Reading {
        self.smi = column;
        self
    }

    pub const fn by(mut self, labels: &'static str) -> Reading {
        self.labels = labels;
        self
    }

    pub const fn on_mig(mut self, family: Family) -> Reading {
        self.mig = Some(family);
        self
    }
}

/// Every GPU reading, in output order.
pub fn all() -> impl Iterator<Item = &'static Reading> {
    GPU_READINGS.iter().chain(&health::HEALTH_READINGS)
}

/// One series, from an `Option<f64>` field.
macro_rules! one {
    ($($f:ident).+) => {
        $crate::readings::Read {
            series: |r, f| {
                if let Some(v) = r.$($f).+ {
                    f($crate::readings::Extra::None, v)
                }
            },
            field: |r| $crate::readings::Field::Value(&mut r.$($f).+),
        }
    };
}
pub(crate) use one;

/// One series a label, from an array field: `each!(path, LABELS)`.
macro_rules! each {
    ($($f:ident).+, $labels:expr) => {
        $crate::readings::Read {
            series: |r, f| $crate::readings::each_label(&$labels, &r.$($f).+, f),
            field: |r| $crate::readings::Field::Values(&mut r.$($f).+),
        }
    };
}
pub(crate) use each;

/// 1 or 0, from an `Option<bool>` field.
macro_rules! flag {
    ($($f:ident).+) => {
        $crate::readings::Read {
            series: |r, f| {
                if let Some(v) = r.$($f).+ {
                    f($crate::readings::Extra::None, if v { 1.0 } else { 0.0 })
                }
            },
            field: |r| $crate::readings::Field::Flag(&mut r.$($f).+),
        }
    };
}
pub(crate) use flag;

pub fn each_label(labels: &[&'static str], values: &[Option<f64>], f: &mut dyn FnMut(Extra, f64)) {
    for (label, v) in labels.iter().zip(values) {
        if let Some(v) = v {
            f(Extra::Label(label), *v);
        }
    }
}

fn directions(v: Option<TxRx>, f: &mut dyn FnMut(Extra, f64)) {
    if let Some(v) = v {
        f(Extra::Label(",direction=\"tx\""), v.tx);
        f(Extra::Label(",direction=\"rx\""), v.rx);
    }
}

/// `,reason="…"` for each of [`super::CLOCK_EVENT_REASONS`], in order.
pub const REASON_LABELS: [&str; 9] = [
    ",reason=\"gpu_idle\"",
    ",reason=\"applications_clocks_setting\"",
    ",reason=\"sw_power_cap\"",
    ",reason=\"hw_slowdown\"",
    ",reason=\"sync_boost\"",
    ",reason=\"sw_thermal_slowdown\"",
    ",reason=\"hw_thermal_slowdown\"",
    ",reason=\"hw_power_brake_slowdown\"",
    ",reason=\"display_clock_setting\"",
];

use Collector::{
    Allocator, Clocks, Ecc, Gpm, Memory, Nvlink, Pcie, Power, Temperature, Utilization, Xid,
};
use Kind::{Counter, Gauge};

// The families the PromQL rules name (`promql`) are constants of
// their own; the rest are written in place in the table below.
pub const TEMPERATURE: Family = family(
    "gpu_temperature_celsius",
    Gauge,
    "GPU die temperature. Lags throttling; watch gpu_clocks_event_active too.",
)
.of(Temperature);
pub const CLOCKS_EVENT_ACTIVE: Family = family(
    "gpu_clocks_event_active",
    Gauge,
    "1 while an NVML clock event reason holds clocks down. Thermal, hw slowdown and power brake are silent performance loss; sw_power_cap alone is normal under load.",
)
.of(Clocks);
pub const MEMORY_TOTAL: Family =
    family("gpu_memory_total_bytes", Gauge, "Total device memory.").of(Memory);
pub const MEMORY_USED: Family =
    family("gpu_memory_used_bytes", Gauge, "Device memory in use.").of(Memory);
pub const ALLOCATOR_ALLOCATED: Family = family(
    "gpu_allocator_allocated_bytes",
    Gauge,
    "Memory the workload's tensors occupy. Rising steadily means a leak.",
)
.of(Allocator);
pub const LARGEST_FREE: Family = family(
    "gpu_memory_largest_free_bytes",
    Gauge,
    "Largest contiguous free block: the fragmentation early warning, before an OOM at 60% used.",
)
.of(Allocator);
pub const XID_ERRORS: Family = family(
    "gpu_xid_errors",
    Counter,
    "Xid errors by code. Alert on increase(), never on the value. Critical codes are present at 0 until they happen.",
)
.of(Xid);
pub const ECC_UNCORRECTED: Family = family(
    "gpu_ecc_uncorrected_errors",
    Counter,
    "Uncorrected ECC errors (volatile). Any increase means a dying GPU: page.",
)
.of(Ecc);
pub const MEMORY_TEMPERATURE: Family =
    family("gpu_memory_temperature_celsius", Gauge, "HBM temperature.").of(Temperature);
pub const SM_ACTIVE: Family = family(
    "gpu_sm_active_ratio",
    Gauge,
    "Fraction of time SMs had at least one warp resident: the real saturation signal.",
)
.of(Gpm);
pub const ALLOCATOR_RESERVED: Family = family(
    "gpu_allocator_reserved_bytes",
    Gauge,
    "Memory the workload's caching allocator holds. Reserved minus allocated is cache.",
)
.of(Allocator);
pub const PCIE_REPLAYS: Family = family(
    "gpu_pcie_replay_errors",
    Counter,
    "PCIe replays: a flaky link or riser.",
)
.of(Pcie);

/// The GPU's (and MIG instance's) readings after `gpu_info` and `gpu_up`,
/// in output order; the hardware-health ones follow
/// ([`health::HEALTH_READINGS`]).
pub static GPU_READINGS: [Reading; 30] = [
    TEMPERATURE
        .reads(one!(temperature_celsius))
        .smi("temperature.gpu")
        .within(TEMPERATURE_CELSIUS),
    MEMORY_TEMPERATURE
        .reads(one!(memory_temperature_celsius))
        .smi("temperature.memory")
        .within(TEMPERATURE_CELSIUS),
    family("gpu_sm_clock_hertz", Gauge, "Current SM clock.")
        .of(Clocks)
        .reads(one!(sm_clock_hertz))
        .smi("clocks.current.sm")
        .within(CLOCK_HERTZ),
    family(
        "gpu_sm_clock_max_hertz",
        Gauge,
        "Maximum SM clock; the current clock well below it means lost performance.",
    )
    .of(Clocks)
    .reads(one!(sm_clock_max_hertz))
    .smi("clocks.max.sm")
    .within(CLOCK_HERTZ.above_zero()),
    family("gpu_memory_clock_hertz", Gauge, "Current memory clock.")
        .of(Clocks)
        .reads(one!(memory_clock_hertz))
        .smi("clocks.current.memory")
        .within(CLOCK_HERTZ),
    CLOCKS_EVENT_ACTIVE
        .reads(Read {
            series: |r, f| {
                if let Some(mask) = r.clocks_event_mask {
                    for (i, label) in REASON_LABELS.iter().enumerate() {
                        f(Extra::Label(label), ((mask >> i) & 1) as f64);
                    }
                }
            },
            field: |r| Field::Mask(&mut r.clocks_event_mask),
        })
        .by("reason"),
    family("gpu_power_usage_watts", Gauge, "Power draw.")
        .of(Power)
        .reads(one!(power_usage_watts))
        .smi("power.draw")
        .within(POWER_WATTS),
    family("gpu_power_limit_watts", Gauge, "Enforced power limit.")
        .of(Power)
        .reads(one!(power_limit_watts))
        .within(POWER_WATTS.above_zero()),
    family(
        "gpu_utilization_ratio",
        Gauge,
        "Fraction of time a kernel ran (nvidia-smi utilization.gpu). Misleading: one tiny kernel reads as 100%, so it says nothing about how busy the SMs are. Use gpu_sm_active_ratio; never alert on this.",
    )
    .of(Utilization)
    .reads(one!(utilization_ratio))
    .smi("utilization.gpu")
    .within(RATIO),
    family(
        "gpu_memory_utilization_ratio",
        Gauge,
        "Fraction of time device memory was read or written (nvidia-smi utilization.memory; dcgm-exporter DCGM_FI_DEV_MEM_COPY_UTIL).",
    )
    .of(Utilization)
    .reads(one!(memory_utilization_ratio))
    .smi("utilization.memory")
    .within(RATIO),
    SM_ACTIVE.reads(one!(sm_active_ratio)).from("N M").within(RATIO),
    family(
        "gpu_sm_occupancy_ratio",
        Gauge,
        "Resident warps as a fraction of the SMs' maximum.",
    )
    .of(Gpm)
    .reads(one!(sm_occupancy_ratio))
    .from("N M")
    .within(RATIO),
    family(
        "gpu_dram_active_ratio",
        Gauge,
        "Fraction of time the memory interface was busy: the bandwidth signal.",
    )
    .of(Gpm)
    .reads(one!(dram_active_ratio))
    .from("N M")
    .within(RATIO),
    MEMORY_TOTAL
        .reads(one!(memory_total_bytes))
        .smi("memory.total")
        .within(MEMORY_BYTES.above_zero())
        .on_mig(
            family(
                "gpu_mig_memory_total_bytes",
                Gauge,
                "Memory of a MIG GPU instance; gpu_memory_total_bytes stays the whole GPU's.",
            )
            .of(Memory),
        ),
    MEMORY_USED
        .reads(one!(memory_used_bytes))
        .smi("memory.used")
        .within(MEMORY_BYTES)
        .on_mig(
            family(
                "gpu_mig_memory_used_bytes",
                Gauge,
                "Memory in use in a MIG GPU instance.",
            )
            .of(Memory),
        ),
    family(
        "gpu_memory_free_bytes",
        Gauge,
        "Device memory free. Free is not allocatable when it is fragmented; see gpu_memory_largest_free_bytes.",
    )
    .of(Memory)
    .reads(one!(memory_free_bytes))
    .smi("memory.free")
    .within(MEMORY_BYTES)
    .on_mig(
        family(
            "gpu_mig_memory_free_bytes",
            Gauge,
            "Memory free in a MIG GPU instance.",
        )
        .of(Memory),
    ),
    family(
        "gpu_memory_reserved_bytes",
        Gauge,
        "Device memory reserved by the driver and firmware.",
    )
    .of(Memory)
    .reads(one!(memory_reserved_bytes))
    .smi("memory.reserved")
    .within(MEMORY_BYTES)
    .on_mig(
        family(
            "gpu_mig_memory_reserved_bytes",
            Gauge,
            "Memory of a MIG GPU instance reserved by the driver.",
        )
        .of(Memory),
    ),
    ALLOCATOR_RESERVED
        .reads(one!(allocator_reserved_bytes))
        .from("M, workload files")
        .within(MEMORY_BYTES),
    ALLOCATOR_ALLOCATED
        .reads(one!(allocator_allocated_bytes))
        .from("M, workload files")
        .within(MEMORY_BYTES),
    LARGEST_FREE
        .reads(one!(largest_free_bytes))
        .from("M, workload files")
        .within(MEMORY_BYTES)
        .on_mig(
            family(
                "gpu_mig_memory_largest_free_bytes",
                Gauge,
                "Largest contiguous free block in a MIG GPU instance (workload stats).",
            )
            .of(Allocator),
        ),
    family(
        "gpu_xid_last_timestamp_seconds",
        Gauge,
        "Unix time of the last Xid error seen on this GPU.",
    )
    .of(Xid)
    .reads(one!(xid_last_timestamp_seconds))
    .from("N M, kernel log")
    .within(UNIX_SECONDS),
    family(
        "gpu_xid_last_code",
        Gauge,
        "Code of the last Xid seen on this GPU, 0 until one is: for tables. A repeat of the same code leaves it unchanged, so alert on increase(gpu_xid_errors_total), never on this.",
    )
    .of(Xid)
    .reads(one!(xid_last_code))
    .from("N M, kernel log")
    .within(XID_CODE),
    XID_ERRORS
        .reads(Read {
            series: |r, f| {
                for &(code, n) in r.xid_errors.iter().flatten() {
                    f(Extra::Num("xid", code), n as f64);
                }
            },
            field: |r| Field::Xids(&mut r.xid_errors),
        })
        .from("N M, kernel log")
        .by("xid"),
    family(
        "gpu_ecc_corrected_errors",
        Counter,
        "Corrected ECC errors (volatile).",
    )
    .of(Ecc)
    .reads(one!(ecc_corrected_total))
    .smi("ecc.errors.corrected.volatile.total")
    .within(COUNT),
    ECC_UNCORRECTED
        .reads(one!(ecc_uncorrected_total))
        .smi("ecc.errors.uncorrected.volatile.total")
        .within(COUNT),
    family(
        "gpu_energy_joules",
        Counter,
        "Energy consumed since the driver loaded.",
    )
    .of(Power)
    .reads(one!(energy_joules_total))
    .from("N M")
    .within(COUNT),
    family("gpu_pcie_bytes", Counter, "PCIe bytes moved, by direction.")
        .of(Pcie)
        .reads(Read {
            series: |r, f| directions(r.pcie_bytes_total, f),
            field: |r| Field::Pair(&mut r.pcie_bytes_total),
        })
        .from("N M")
        .by("direction")
        .within(BYTE_COUNT),
    PCIE_REPLAYS
        .reads(one!(pcie_replay_errors_total))
        .from("N M")
        .within(COUNT),
    family(
        "gpu_nvlink_bytes",
        Counter,
        "NVLink bytes moved, by direction. Low during tensor parallelism means a topology problem.",
    )
    .of(Nvlink)
    .reads(Read {
        series: |r, f| directions(r.nvlink_bytes_total, f),
        field: |r| Field::Pair(&mut r.nvlink_bytes_total),
    })
    .from("N M")
    .by("direction")
    .within(BYTE_COUNT),
    family(
        "gpu_clocks_event_seconds",
        Counter,
        "Seconds clocks were held down, by reason.",
    )
    .of(Clocks)
    .reads(each!(clocks_event_seconds_total, REASON_LABELS))
    .by("reason")
    .within(COUNT),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_labels_follow_the_reasons() {
        use crate::CLOCK_EVENT_REASONS;
        for (label, reason) in REASON_LABELS.iter().zip(CLOCK_EVENT_REASONS) {
            assert_eq!(*label, format!(",reason=\"{reason}\""));
        }
    }

    #[test]
    fn readings_belong_to_collectors() {
        for r in all() {
            assert!(r.family.collector.is_some(), "{}", r.family.name);
            if let Some(m) = &r.mig {
                assert_eq!(m.collector, r.family.collector, "{}", m.name);
            }
        }
        assert_eq!(GPU_READINGS[0].family.unit, Some("celsius"));
    }
}
