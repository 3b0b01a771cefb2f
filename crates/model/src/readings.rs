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
//! reading code where it differs too much to be one table (NVML's calls,
//! the simulator's model); nvidia-smi's column for a reading of one
//! column is its `smi` face.

mod family;
pub mod health;
mod profiling;
mod read;
pub mod status;

use super::{GpuProcess, Health, Pod, TxRx};
use crate::Collector;
use crate::dcgm::{Face, Mig, Unit, Whole, face};
pub use family::*;
pub use read::*;
pub(crate) use read::{each, flag, one};
use status::{Cell, Column, GIB_CELL, column, number};

/// Everything a source can read about one GPU (or MIG instance). Gauges
/// and counters are in base units.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Readings {
    pub temperature_celsius: Option<f64>,
    pub memory_temperature_celsius: Option<f64>,
    pub sm_clock_hertz: Option<f64>,
    pub sm_clock_max_hertz: Option<f64>,
    pub memory_clock_hertz: Option<f64>,
    pub memory_clock_max_hertz: Option<f64>,
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
            dcgm: None,
            signal: None,
            status: None,
        }
    }
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
    /// one column: the smi source asks for it, reads it (in the unit
    /// nvidia-smi prints for this reading's unit) and finds the column's
    /// collector by it.
    pub smi: &'static str,
    /// Its physical range; `None` for states, masks and codes.
    pub range: Option<Range>,
    pub read: Read,
    /// The family that stands in for it on a MIG instance: while MIG is
    /// on, `gpu_memory_*` stay the whole GPU's (its real total), so
    /// `sum by (gpu)` of either never counts a byte twice.
    pub mig: Option<Family>,
    /// The dcgm-exporter field it is shown as, where it is one series
    /// (`dcgm::FIELDS` has the others).
    pub dcgm: Option<Face>,
    /// Its name in alert rule files, where a rule reads it as it is
    /// (`alerts::rules::Signal::Reading`).
    pub signal: Option<&'static str>,
    /// Its column on the status page, in the table's order (a reference:
    /// few readings have one, and the table is in the binary).
    pub status: Option<&'static Column>,
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

    pub const fn dcgm(mut self, face: Face) -> Reading {
        self.dcgm = Some(face);
        self
    }

    pub const fn signal(mut self, name: &'static str) -> Reading {
        self.signal = Some(name);
        self
    }

    pub const fn status(mut self, column: &'static Column) -> Reading {
        self.status = Some(column);
        self
    }
}

/// Every GPU reading, in output order.
pub fn all() -> impl Iterator<Item = &'static Reading> {
    GPU_READINGS.iter().chain(&health::HEALTH_READINGS)
}

/// The reading that `family` shows.
pub fn of(family: &Family) -> Option<&'static Reading> {
    all().find(|r| r.family.name == family.name)
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

/// A framebuffer field: whole MiB, cut down as DCGM divides, a MIG
/// instance's own.
const fn fb(field: &'static str) -> Face {
    face(field, Unit::Mib).whole(Whole::Floor).on_mig(Mig::Own)
}

// The families the PromQL rules (`promql`) and the status page's pairs
// name are constants of their own; the rest are written in place in the
// table below.
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
pub const SM_CLOCK_MAX: Family = family(
    "gpu_sm_clock_max_hertz",
    Gauge,
    "Maximum SM clock; the current clock well below it means lost performance.",
)
.of(Clocks);
pub const POWER_LIMIT: Family =
    family("gpu_power_limit_watts", Gauge, "Enforced power limit.").of(Power);
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
pub static GPU_READINGS: [Reading; 31] = [
    TEMPERATURE
        .reads(one!(temperature_celsius))
        .smi("temperature.gpu")
        .within(TEMPERATURE_CELSIUS)
        .dcgm(face("DCGM_FI_DEV_GPU_TEMP", Unit::Same))
        .signal("temperature")
        .status(&const { column("temp", Cell::Value(number(1.0, 0, " &deg;C"))) }),
    MEMORY_TEMPERATURE
        .reads(one!(memory_temperature_celsius))
        .smi("temperature.memory")
        .within(TEMPERATURE_CELSIUS)
        .dcgm(face("DCGM_FI_DEV_MEMORY_TEMP", Unit::Same))
        .signal("memory_temperature"),
    family("gpu_sm_clock_hertz", Gauge, "Current SM clock.")
        .of(Clocks)
        .reads(one!(sm_clock_hertz))
        .smi("clocks.current.sm")
        .within(CLOCK_HERTZ)
        .dcgm(face("DCGM_FI_DEV_SM_CLOCK", Unit::Mhz))
        .status(&const { column(
            "SM clock / max",
            Cell::Over(&SM_CLOCK_MAX, number(1e6, 0, " MHz")),
        ) }),
    SM_CLOCK_MAX
        .reads(one!(sm_clock_max_hertz))
        .smi("clocks.max.sm")
        .within(CLOCK_HERTZ.above_zero()),
    family("gpu_memory_clock_hertz", Gauge, "Current memory clock.")
        .of(Clocks)
        .reads(one!(memory_clock_hertz))
        .smi("clocks.current.memory")
        .within(CLOCK_HERTZ)
        .dcgm(face("DCGM_FI_DEV_MEM_CLOCK", Unit::Mhz)),
    family(
        "gpu_memory_clock_max_hertz",
        Gauge,
        "Maximum memory clock; the current clock below it under load means lost bandwidth.",
    )
    .of(Clocks)
    .reads(one!(memory_clock_max_hertz))
    .from("N M")
    .within(CLOCK_HERTZ.above_zero())
    .dcgm(face("DCGM_FI_DEV_MAX_MEM_CLOCK", Unit::Mhz)),
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
        .by("reason")
        .status(&const { column("throttled", Cell::Throttled) }),
    family("gpu_power_usage_watts", Gauge, "Power draw.")
        .of(Power)
        .reads(one!(power_usage_watts))
        .smi("power.draw")
        .within(POWER_WATTS)
        .dcgm(face("DCGM_FI_DEV_POWER_USAGE", Unit::Same).whole(Whole::AsRead))
        .status(&const { column(
            "power / limit",
            Cell::Over(&POWER_LIMIT, number(1.0, 0, " W")),
        ) }),
    POWER_LIMIT
        .reads(one!(power_limit_watts))
        .within(POWER_WATTS.above_zero())
        .dcgm(face("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", Unit::Same).whole(Whole::AsRead)),
    family(
        "gpu_utilization_ratio",
        Gauge,
        "Fraction of time a kernel ran (nvidia-smi utilization.gpu). Misleading: one tiny kernel reads as 100%, so it says nothing about how busy the SMs are. Use gpu_sm_active_ratio; never alert on this.",
    )
    .of(Utilization)
    .reads(one!(utilization_ratio))
    .smi("utilization.gpu")
    .within(RATIO)
    .dcgm(face("DCGM_FI_DEV_GPU_UTIL", Unit::Percent).on_mig(Mig::None)),
    family(
        "gpu_memory_utilization_ratio",
        Gauge,
        "Fraction of time device memory was read or written (nvidia-smi utilization.memory; dcgm-exporter DCGM_FI_DEV_MEM_COPY_UTIL).",
    )
    .of(Utilization)
    .reads(one!(memory_utilization_ratio))
    .smi("utilization.memory")
    .within(RATIO)
    .dcgm(face("DCGM_FI_DEV_MEM_COPY_UTIL", Unit::Percent).on_mig(Mig::None)),
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
        .dcgm(fb("DCGM_FI_DEV_FB_TOTAL"))
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
        .dcgm(fb("DCGM_FI_DEV_FB_USED"))
        .status(&const { column(
            "memory used / total",
            Cell::Over(&MEMORY_TOTAL, GIB_CELL),
        ) })
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
    .dcgm(fb("DCGM_FI_DEV_FB_FREE"))
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
    .dcgm(fb("DCGM_FI_DEV_FB_RESERVED"))
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
        .within(MEMORY_BYTES)
        .signal("allocator_allocated"),
    LARGEST_FREE
        .reads(one!(largest_free_bytes))
        .from("M, workload files")
        .within(MEMORY_BYTES)
        .status(&const { column("largest free", Cell::Value(GIB_CELL)) })
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
        .by("xid")
        .status(&const { column("Xid since driver load", Cell::CriticalXid).titled(
            "the watched codes, that page or open a ticket: a counter since the driver loaded, not a window",
        ) }),
    family(
        "gpu_ecc_corrected_errors",
        Counter,
        "Corrected ECC errors (volatile).",
    )
    .of(Ecc)
    .reads(one!(ecc_corrected_total))
    .smi("ecc.errors.corrected.volatile.total")
    .within(COUNT)
    .dcgm(face("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", Unit::Same)),
    ECC_UNCORRECTED
        .reads(one!(ecc_uncorrected_total))
        .smi("ecc.errors.uncorrected.volatile.total")
        .within(COUNT)
        .dcgm(face("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", Unit::Same))
        .signal("ecc_uncorrected"),
    family(
        "gpu_energy_joules",
        Counter,
        "Energy consumed since the driver loaded.",
    )
    .of(Power)
    .reads(one!(energy_joules_total))
    .from("N M")
    .within(COUNT)
    .dcgm(face("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Unit::Millijoules)),
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
        .within(COUNT)
        .dcgm(face("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", Unit::Same))
        .signal("pcie_replays"),
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

    /// A reading with a dcgm field or a signal is one series, which
    /// [`Reading::value`] reads.
    #[test]
    fn faces_read_one_series() {
        for r in all().filter(|r| r.dcgm.is_some() || r.signal.is_some()) {
            let mut one = Readings::default();
            match (r.read.field)(&mut one) {
                Field::Value(v) => *v = Some(2.0),
                Field::Flag(v) => *v = Some(true),
                _ => panic!("{}: no single value", r.family.name),
            }
            let mut n = 0;
            (r.read.series)(&one, &mut |e, _| {
                assert!(matches!(e, Extra::None), "{}", r.family.name);
                n += 1;
            });
            assert_eq!(n, 1, "{}", r.family.name);
            assert!(r.value(&one).is_some() && r.value(&Readings::default()).is_none());
            assert!(of(&r.family) == Some(r));
        }
    }

    /// A dcgm field is one reading's or one `FIELDS` row's, never both
    /// nor twice; a signal name is one reading's.
    #[test]
    fn dcgm_fields_and_signals_are_named_once() {
        let fields = crate::dcgm::FIELDS.iter().map(|f| f.0);
        let faces = crate::dcgm::faces().map(|(_, f)| f.field);
        for mut names in [
            fields.chain(faces).collect::<Vec<_>>(),
            all().filter_map(|r| r.signal).collect(),
        ] {
            let all = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), all, "a name given twice: {names:?}");
        }
    }
}
