//! The dcgm-exporter fields we know by their current DCGM name that no
//! reading's declaration names (`Reading::dcgm`, the plain ones): which
//! collector's readings serve each, or why none does. The profiling
//! fields GPM gives are in `prof.rs`; every other DCGM name (`names.rs`)
//! is left out with a generic reason.

use super::{Field, Serve};
use crate::Collector::*;

/// Every field we know: its name, what it is here, and how it is served.
pub const FIELDS: &[(&str, Field, Serve)] = &[
    ("DCGM_FI_DEV_ENC_UTIL", Field::EncUtil, Serve::By(Media)),
    ("DCGM_FI_DEV_DEC_UTIL", Field::DecUtil, Serve::By(Media)),
    ("DCGM_FI_DEV_XID_ERRORS", Field::XidErrors, Serve::By(Xid)),
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
        "DCGM_FI_DRIVER_VERSION",
        Field::DriverVersion,
        Serve::By(Info),
    ),
    ("DCGM_FI_DEV_NAME", Field::DevName, Serve::By(Info)),
    ("DCGM_FI_DEV_UUID", Field::DevUuid, Serve::By(Info)),
    ("DCGM_FI_DEV_PCI_BUSID", Field::PciBusId, Serve::By(Info)),
    (
        "DCGM_FI_DEV_VBIOS_VERSION",
        Field::VbiosVersion,
        Serve::By(Info),
    ),
    (
        "DCGM_FI_DEV_INFOROM_IMAGE_VER",
        Field::InforomImage,
        Serve::By(Info),
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
    (
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        Field::Unservable,
        Serve::Not("NVML's enforced limit is read: DCGM_FI_DEV_ENFORCED_POWER_LIMIT"),
    ),
    ("DCGM_FI_DEV_FAN_SPEED", Field::FanSpeed, Serve::By(Fans)),
    (
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        Field::ClocksEventReasons,
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
        "DCGM_EXP_P2P_STATUS",
        Field::Unservable,
        Serve::Not("GPU peer-to-peer status is not read"),
    ),
    (
        "DCGM_EXP_GPU_HEALTH_STATUS",
        Field::Unservable,
        Serve::Not("DCGM's health watches are not run; the built-in alerts cover them"),
    ),
];
