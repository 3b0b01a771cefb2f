//! dcgm-exporter's counters file (`--compat.dcgm-counters`, the file it
//! takes with `-f`): one `DCGM FIELD, type, help` a line, `#` comments.
//! Here it is parsed and checked against the fields we know; which of our
//! readings each field shows, and its unit, is the `dcgm` collector's
//! (`exposition::dcgm`). A field we know but cannot serve is logged once,
//! with why, and left out.

use super::{Collector, Collectors, ConfigError};
use Collector::*;

/// A dcgm-exporter field we know by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    SmClock,
    MemClock,
    MemoryTemp,
    GpuTemp,
    PowerUsage,
    TotalEnergy,
    PcieReplay,
    GpuUtil,
    MemCopyUtil,
    EncUtil,
    DecUtil,
    XidErrors,
    FbFree,
    FbUsed,
    FbReserved,
    UncorrectableRemapped,
    CorrectableRemapped,
    RowRemapFailure,
    DriverVersion,
    TensorActive,
    DramActive,
    SmActive,
    SmOccupancy,
    Fp64Active,
    Fp32Active,
    Fp16Active,
    EccSbeVol,
    EccDbeVol,
    EccSbeAgg,
    EccDbeAgg,
    RetiredSbe,
    RetiredDbe,
    RetiredPending,
    NvlinkCrcFlit,
    NvlinkCrcData,
    NvlinkReplay,
    NvlinkRecovery,
    PowerViolation,
    ThermalViolation,
    SyncBoostViolation,
    XidCount,
    /// Known, but nothing of ours shows it.
    Unservable,
}

/// How we serve a field: from a collector's readings, or not, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serve {
    By(Collector),
    Not(&'static str),
}

/// Every field we know: its name, what it is here, and how it is served.
pub const FIELDS: &[(&str, Field, Serve)] = &[
    ("DCGM_FI_DEV_SM_CLOCK", Field::SmClock, Serve::By(Clocks)),
    ("DCGM_FI_DEV_MEM_CLOCK", Field::MemClock, Serve::By(Clocks)),
    (
        "DCGM_FI_DEV_MEMORY_TEMP",
        Field::MemoryTemp,
        Serve::By(Temperature),
    ),
    (
        "DCGM_FI_DEV_GPU_TEMP",
        Field::GpuTemp,
        Serve::By(Temperature),
    ),
    (
        "DCGM_FI_DEV_POWER_USAGE",
        Field::PowerUsage,
        Serve::By(Power),
    ),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        Field::TotalEnergy,
        Serve::By(Power),
    ),
    (
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        Field::PcieReplay,
        Serve::By(Pcie),
    ),
    (
        "DCGM_FI_DEV_GPU_UTIL",
        Field::GpuUtil,
        Serve::By(Utilization),
    ),
    (
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        Field::MemCopyUtil,
        Serve::By(Utilization),
    ),
    ("DCGM_FI_DEV_ENC_UTIL", Field::EncUtil, Serve::By(Media)),
    ("DCGM_FI_DEV_DEC_UTIL", Field::DecUtil, Serve::By(Media)),
    ("DCGM_FI_DEV_XID_ERRORS", Field::XidErrors, Serve::By(Xid)),
    ("DCGM_FI_DEV_FB_FREE", Field::FbFree, Serve::By(Memory)),
    ("DCGM_FI_DEV_FB_USED", Field::FbUsed, Serve::By(Memory)),
    (
        "DCGM_FI_DEV_FB_RESERVED",
        Field::FbReserved,
        Serve::By(Memory),
    ),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        Field::UncorrectableRemapped,
        Serve::By(Remap),
    ),
    (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        Field::CorrectableRemapped,
        Serve::By(Remap),
    ),
    (
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        Field::RowRemapFailure,
        Serve::By(Remap),
    ),
    (
        "DCGM_FI_DRIVER_VERSION",
        Field::DriverVersion,
        Serve::By(Info),
    ),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        Field::TensorActive,
        Serve::By(Gpm),
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        Field::DramActive,
        Serve::By(Gpm),
    ),
    ("DCGM_FI_PROF_SM_ACTIVE", Field::SmActive, Serve::By(Gpm)),
    (
        "DCGM_FI_PROF_SM_OCCUPANCY",
        Field::SmOccupancy,
        Serve::By(Gpm),
    ),
    (
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        Field::Fp64Active,
        Serve::By(Gpm),
    ),
    (
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        Field::Fp32Active,
        Serve::By(Gpm),
    ),
    (
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        Field::Fp16Active,
        Serve::By(Gpm),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        Field::EccSbeVol,
        Serve::By(Ecc),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        Field::EccDbeVol,
        Serve::By(Ecc),
    ),
    (
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        Field::EccSbeAgg,
        Serve::By(Ecc),
    ),
    (
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        Field::EccDbeAgg,
        Serve::By(Ecc),
    ),
    (
        "DCGM_FI_DEV_RETIRED_SBE",
        Field::RetiredSbe,
        Serve::By(Remap),
    ),
    (
        "DCGM_FI_DEV_RETIRED_DBE",
        Field::RetiredDbe,
        Serve::By(Remap),
    ),
    (
        "DCGM_FI_DEV_RETIRED_PENDING",
        Field::RetiredPending,
        Serve::By(Remap),
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        Field::NvlinkCrcFlit,
        Serve::By(Nvlink),
    ),
    (
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        Field::NvlinkCrcData,
        Serve::By(Nvlink),
    ),
    (
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        Field::NvlinkReplay,
        Serve::By(Nvlink),
    ),
    (
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        Field::NvlinkRecovery,
        Serve::By(Nvlink),
    ),
    (
        "DCGM_FI_DEV_POWER_VIOLATION",
        Field::PowerViolation,
        Serve::By(Clocks),
    ),
    (
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        Field::ThermalViolation,
        Serve::By(Clocks),
    ),
    (
        "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
        Field::SyncBoostViolation,
        Serve::By(Clocks),
    ),
    ("DCGM_EXP_XID_ERRORS_COUNT", Field::XidCount, Serve::By(Xid)),
    (
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        Field::Unservable,
        Serve::Not(
            "NVML's NVLink counters are bytes by direction, not DCGM's all-lane bandwidth counter; use rate(gpu_nvlink_bytes_total[1m])",
        ),
    ),
    (
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        Field::Unservable,
        Serve::Not("vGPU licensing is not read"),
    ),
    (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        Field::Unservable,
        Serve::Not(
            "it needs GPM's graphics-activity metric, which is not read; gpu_sm_active_ratio is the nearest",
        ),
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        Field::Unservable,
        Serve::Not(
            "the snapshot holds byte counters, not rates; use rate(gpu_pcie_bytes_total{direction=\"tx\"}[1m])",
        ),
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        Field::Unservable,
        Serve::Not(
            "the snapshot holds byte counters, not rates; use rate(gpu_pcie_bytes_total{direction=\"rx\"}[1m])",
        ),
    ),
    (
        "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
        Field::Unservable,
        Serve::Not("NVML reports no violation time for it"),
    ),
    (
        "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
        Field::Unservable,
        Serve::Not("NVML reports no violation time for it"),
    ),
    (
        "DCGM_FI_DEV_RELIABILITY_VIOLATION",
        Field::Unservable,
        Serve::Not("NVML reports no violation time for it"),
    ),
    (
        "DCGM_EXP_CLOCK_EVENTS_COUNT",
        Field::Unservable,
        Serve::Not("use increase(gpu_clocks_event_seconds_total[5m])"),
    ),
    (
        "DCGM_EXP_GPU_HEALTH_STATUS",
        Field::Unservable,
        Serve::Not("DCGM's health watches are not run; the built-in alerts cover them"),
    ),
];

/// dcgm-exporter's `etc/default-counters.csv`, the file without `-f`.
pub const DEFAULT_COUNTERS: &str = include_str!("dcgm-default-counters.csv");

/// A counters file's type column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    Label,
}

/// One field a counters file asks for that we serve.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    pub name: &'static str,
    pub field: Field,
    pub kind: Kind,
    pub collector: Collector,
    pub help: String,
}

/// The dcgm collector's settings: the fields served, the fields left out
/// (with why), and the `hostname` label.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Dcgm {
    pub fields: Vec<Wanted>,
    pub left_out: Vec<(String, &'static str)>,
    /// `hostname`'s value, `None` to leave it out (`--compat.dcgm-no-hostname`).
    pub hostname: Option<String>,
    /// Spell it `Hostname`, as releases before 3.3 did.
    pub old_hostname: bool,
}

impl Dcgm {
    /// The collectors whose readings the fields show: their calls are made
    /// even where the collectors themselves are off.
    pub fn needs(&self) -> Collectors {
        self.fields
            .iter()
            .fold(Collectors::NONE, |s, f| s.with(f.collector))
    }
}

/// Parses a counters file's `text`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Dcgm, ConfigError> {
    let mut d = Dcgm::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| ConfigError(format!("{file}:{}: {why}: {line:?}", i + 1));
        let mut cols = line.splitn(3, ',').map(str::trim);
        let (Some(name), Some(kind), help) = (cols.next(), cols.next(), cols.next()) else {
            return Err(bad("expected \"DCGM FIELD, type, help\""));
        };
        let kind = match kind {
            "gauge" => Kind::Gauge,
            "counter" => Kind::Counter,
            "label" => Kind::Label,
            _ => return Err(bad("the type is not gauge, counter or label")),
        };
        let Some(&(name, field, serve)) = FIELDS.iter().find(|f| f.0 == name) else {
            return Err(bad("unknown field"));
        };
        // Only the driver version is a string; it is nothing but a label.
        if (kind == Kind::Label) != (field == Field::DriverVersion) {
            return Err(bad(if kind == Kind::Label {
                "only DCGM_FI_DRIVER_VERSION can be a label"
            } else {
                "DCGM_FI_DRIVER_VERSION is a label"
            }));
        }
        match serve {
            Serve::Not(why) => d.left_out.push((name.to_string(), why)),
            Serve::By(collector) => {
                if d.fields.iter().any(|f| f.name == name) {
                    return Err(bad("field listed twice"));
                }
                d.fields.push(Wanted {
                    name,
                    field,
                    kind,
                    collector,
                    help: help.unwrap_or("").to_string(),
                });
            }
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_file_and_edge_cases() {
        let d = parse(DEFAULT_COUNTERS, "default").unwrap();
        assert_eq!(d.fields.len(), 21);
        assert_eq!(d.left_out.len(), 5);
        assert!(d.needs().has(Gpm) && d.needs().has(Xid) && !d.needs().has(Fans));
        let d = parse(
            "  # c\n DCGM_FI_DEV_GPU_TEMP ,gauge,  t, with a comma\n",
            "f",
        )
        .unwrap();
        assert_eq!(d.fields[0].help, "t, with a comma");
        for (text, want) in [
            (
                "DCGM_FI_X, gauge, h",
                "f:1: unknown field: \"DCGM_FI_X, gauge, h\"",
            ),
            ("\nDCGM_FI_DEV_GPU_TEMP", "f:2: expected"),
            ("DCGM_FI_DEV_GPU_TEMP, gaug", "f:1: the type is not"),
            (
                "DCGM_FI_DEV_GPU_TEMP, label",
                "f:1: only DCGM_FI_DRIVER_VERSION can be a label",
            ),
            (
                "DCGM_FI_DRIVER_VERSION, gauge",
                "f:1: DCGM_FI_DRIVER_VERSION is a label",
            ),
            (
                "DCGM_FI_DEV_GPU_TEMP,gauge\nDCGM_FI_DEV_GPU_TEMP,gauge",
                "f:2: field listed twice",
            ),
        ] {
            let e = parse(text, "f").unwrap_err().0;
            assert!(e.starts_with(want) && !e.contains('\n'), "{e}");
        }
    }
}
