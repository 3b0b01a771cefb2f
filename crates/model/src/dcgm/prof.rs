//! DCGM's profiling fields (`DCGM_FI_PROF_*`) that an NVML GPM metric
//! gives: the one table of field, GPM metric and unit. The NVML source
//! asks GPM for the metrics the counters file lists, the simulator models
//! them, the dcgm collector serves them, the fake NVML (`fake-nvml/`, which
//! includes this file) answers them, and a test holds the migration
//! document's table to it.
//!
//! Metric ids: nvml.h's `nvmlGpmMetricId_t` (NVIDIA/go-nvml
//! `gen/nvml/nvml.h`, NVML 12.2.140). Field names: go-dcgm's table
//! (`../dcgm-fields.txt`). GPM's utilizations are 0-100 where DCGM's are
//! ratios 0-1; its PCIe and NVLink rates are MiB/s where DCGM's are bytes
//! per second. `DCGM_FI_PROF_NVOFA1_ACTIVE` is left out: the nvml.h at
//! hand has no second OFA metric.
//!
//! Self-contained (no `use` of the crate), so that the fake can include it.

/// What GPM gives and how DCGM's unit follows from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// GPM's percent, DCGM's ratio.
    Percent,
    /// GPM's MiB/s, DCGM's bytes per second (an integer).
    MibPerSecond,
}

impl Scale {
    /// GPM's value `v` in DCGM's unit.
    pub fn dcgm(self, v: f64) -> f64 {
        match self {
            Scale::Percent => v / 100.0,
            Scale::MibPerSecond => (v * 1024.0 * 1024.0).round(),
        }
    }
}

/// One profiling field and the GPM metric that gives it.
pub struct Prof {
    pub field: &'static str,
    /// nvml.h `NVML_GPM_METRIC_*`.
    pub gpm: u32,
    pub scale: Scale,
}

const fn pct(field: &'static str, gpm: u32) -> Prof {
    Prof {
        field,
        gpm,
        scale: Scale::Percent,
    }
}

const fn mib(field: &'static str, gpm: u32) -> Prof {
    Prof {
        field,
        gpm,
        scale: Scale::MibPerSecond,
    }
}

// nvml.h's metric ids.
pub const GRAPHICS_UTIL: u32 = 1;
pub const SM_UTIL: u32 = 2;
pub const SM_OCCUPANCY: u32 = 3;
pub const INTEGER_UTIL: u32 = 4;
pub const ANY_TENSOR_UTIL: u32 = 5;
pub const DFMA_TENSOR_UTIL: u32 = 6;
pub const HMMA_TENSOR_UTIL: u32 = 7;
pub const IMMA_TENSOR_UTIL: u32 = 9;
pub const DRAM_BW_UTIL: u32 = 10;
pub const FP64_UTIL: u32 = 11;
pub const FP32_UTIL: u32 = 12;
pub const FP16_UTIL: u32 = 13;
pub const PCIE_TX_PER_SEC: u32 = 20;
pub const PCIE_RX_PER_SEC: u32 = 21;
/// NVDEC 0 to 7 are 30 to 37; NVJPG 0 to 7, 40 to 47.
pub const NVDEC_0_UTIL: u32 = 30;
pub const NVJPG_0_UTIL: u32 = 40;
pub const NVOFA_0_UTIL: u32 = 50;
pub const NVLINK_TOTAL_RX_PER_SEC: u32 = 60;
pub const NVLINK_TOTAL_TX_PER_SEC: u32 = 61;
/// Link n's receive rate is 62 + 2n, its transmit rate 63 + 2n (n < 18).
pub const NVLINK_L0_RX_PER_SEC: u32 = 62;
pub const NVLINK_L0_TX_PER_SEC: u32 = 63;

/// Every profiling field GPM gives, in DCGM's field id order.
pub const PROF: [Prof; 69] = [
    pct("DCGM_FI_PROF_GR_ENGINE_ACTIVE", GRAPHICS_UTIL),
    pct("DCGM_FI_PROF_SM_ACTIVE", SM_UTIL),
    pct("DCGM_FI_PROF_SM_OCCUPANCY", SM_OCCUPANCY),
    pct("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", ANY_TENSOR_UTIL),
    pct("DCGM_FI_PROF_DRAM_ACTIVE", DRAM_BW_UTIL),
    pct("DCGM_FI_PROF_PIPE_FP64_ACTIVE", FP64_UTIL),
    pct("DCGM_FI_PROF_PIPE_FP32_ACTIVE", FP32_UTIL),
    pct("DCGM_FI_PROF_PIPE_FP16_ACTIVE", FP16_UTIL),
    mib("DCGM_FI_PROF_PCIE_TX_BYTES", PCIE_TX_PER_SEC),
    mib("DCGM_FI_PROF_PCIE_RX_BYTES", PCIE_RX_PER_SEC),
    mib("DCGM_FI_PROF_NVLINK_TX_BYTES", NVLINK_TOTAL_TX_PER_SEC),
    mib("DCGM_FI_PROF_NVLINK_RX_BYTES", NVLINK_TOTAL_RX_PER_SEC),
    pct("DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", IMMA_TENSOR_UTIL),
    pct("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", HMMA_TENSOR_UTIL),
    pct("DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", DFMA_TENSOR_UTIL),
    pct("DCGM_FI_PROF_PIPE_INT_ACTIVE", INTEGER_UTIL),
    pct("DCGM_FI_PROF_NVDEC0_ACTIVE", NVDEC_0_UTIL),
    pct("DCGM_FI_PROF_NVDEC1_ACTIVE", NVDEC_0_UTIL + 1),
    pct("DCGM_FI_PROF_NVDEC2_ACTIVE", NVDEC_0_UTIL + 2),
    pct("DCGM_FI_PROF_NVDEC3_ACTIVE", NVDEC_0_UTIL + 3),
    pct("DCGM_FI_PROF_NVDEC4_ACTIVE", NVDEC_0_UTIL + 4),
    pct("DCGM_FI_PROF_NVDEC5_ACTIVE", NVDEC_0_UTIL + 5),
    pct("DCGM_FI_PROF_NVDEC6_ACTIVE", NVDEC_0_UTIL + 6),
    pct("DCGM_FI_PROF_NVDEC7_ACTIVE", NVDEC_0_UTIL + 7),
    pct("DCGM_FI_PROF_NVJPG0_ACTIVE", NVJPG_0_UTIL),
    pct("DCGM_FI_PROF_NVJPG1_ACTIVE", NVJPG_0_UTIL + 1),
    pct("DCGM_FI_PROF_NVJPG2_ACTIVE", NVJPG_0_UTIL + 2),
    pct("DCGM_FI_PROF_NVJPG3_ACTIVE", NVJPG_0_UTIL + 3),
    pct("DCGM_FI_PROF_NVJPG4_ACTIVE", NVJPG_0_UTIL + 4),
    pct("DCGM_FI_PROF_NVJPG5_ACTIVE", NVJPG_0_UTIL + 5),
    pct("DCGM_FI_PROF_NVJPG6_ACTIVE", NVJPG_0_UTIL + 6),
    pct("DCGM_FI_PROF_NVJPG7_ACTIVE", NVJPG_0_UTIL + 7),
    pct("DCGM_FI_PROF_NVOFA0_ACTIVE", NVOFA_0_UTIL),
    mib("DCGM_FI_PROF_NVLINK_L0_TX_BYTES", NVLINK_L0_TX_PER_SEC),
    mib("DCGM_FI_PROF_NVLINK_L0_RX_BYTES", NVLINK_L0_RX_PER_SEC),
    mib("DCGM_FI_PROF_NVLINK_L1_TX_BYTES", NVLINK_L0_TX_PER_SEC + 2),
    mib("DCGM_FI_PROF_NVLINK_L1_RX_BYTES", NVLINK_L0_RX_PER_SEC + 2),
    mib("DCGM_FI_PROF_NVLINK_L2_TX_BYTES", NVLINK_L0_TX_PER_SEC + 4),
    mib("DCGM_FI_PROF_NVLINK_L2_RX_BYTES", NVLINK_L0_RX_PER_SEC + 4),
    mib("DCGM_FI_PROF_NVLINK_L3_TX_BYTES", NVLINK_L0_TX_PER_SEC + 6),
    mib("DCGM_FI_PROF_NVLINK_L3_RX_BYTES", NVLINK_L0_RX_PER_SEC + 6),
    mib("DCGM_FI_PROF_NVLINK_L4_TX_BYTES", NVLINK_L0_TX_PER_SEC + 8),
    mib("DCGM_FI_PROF_NVLINK_L4_RX_BYTES", NVLINK_L0_RX_PER_SEC + 8),
    mib("DCGM_FI_PROF_NVLINK_L5_TX_BYTES", NVLINK_L0_TX_PER_SEC + 10),
    mib("DCGM_FI_PROF_NVLINK_L5_RX_BYTES", NVLINK_L0_RX_PER_SEC + 10),
    mib("DCGM_FI_PROF_NVLINK_L6_TX_BYTES", NVLINK_L0_TX_PER_SEC + 12),
    mib("DCGM_FI_PROF_NVLINK_L6_RX_BYTES", NVLINK_L0_RX_PER_SEC + 12),
    mib("DCGM_FI_PROF_NVLINK_L7_TX_BYTES", NVLINK_L0_TX_PER_SEC + 14),
    mib("DCGM_FI_PROF_NVLINK_L7_RX_BYTES", NVLINK_L0_RX_PER_SEC + 14),
    mib("DCGM_FI_PROF_NVLINK_L8_TX_BYTES", NVLINK_L0_TX_PER_SEC + 16),
    mib("DCGM_FI_PROF_NVLINK_L8_RX_BYTES", NVLINK_L0_RX_PER_SEC + 16),
    mib("DCGM_FI_PROF_NVLINK_L9_TX_BYTES", NVLINK_L0_TX_PER_SEC + 18),
    mib("DCGM_FI_PROF_NVLINK_L9_RX_BYTES", NVLINK_L0_RX_PER_SEC + 18),
    mib(
        "DCGM_FI_PROF_NVLINK_L10_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 20,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L10_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 20,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L11_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 22,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L11_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 22,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L12_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 24,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L12_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 24,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L13_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 26,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L13_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 26,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L14_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 28,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L14_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 28,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L15_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 30,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L15_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 30,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L16_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 32,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L16_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 32,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L17_TX_BYTES",
        NVLINK_L0_TX_PER_SEC + 34,
    ),
    mib(
        "DCGM_FI_PROF_NVLINK_L17_RX_BYTES",
        NVLINK_L0_RX_PER_SEC + 34,
    ),
];

/// The metrics given in MiB/s; the rest are percentages.
const MIB_PER_SECOND: GpmIds = {
    let (mut set, mut i) = (GpmIds::NONE, 0);
    while i < PROF.len() {
        if let Scale::MibPerSecond = PROF[i].scale {
            set = set.with(PROF[i].gpm);
        }
        i += 1;
    }
    set
};

/// How metric `id` of [`PROF`] is scaled (the table's names stay out of
/// a binary that only asks this).
pub fn scale(id: u32) -> Scale {
    if MIB_PER_SECOND.has(id) {
        Scale::MibPerSecond
    } else {
        Scale::Percent
    }
}

/// The metrics' ids below this fit a [`GpmIds`].
const ID_LIMIT: u32 = 128;
const _: () = {
    let mut i = 0;
    while i < PROF.len() {
        assert!(PROF[i].gpm < ID_LIMIT);
        i += 1;
    }
};

/// A set of GPM metric ids, passed by value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpmIds(u128);

impl GpmIds {
    pub const NONE: GpmIds = GpmIds(0);

    /// The set and `id` (an id past nvml.h's is left out).
    pub const fn with(self, id: u32) -> GpmIds {
        match 1u128.checked_shl(id) {
            Some(bit) if id < ID_LIMIT => GpmIds(self.0 | bit),
            _ => self,
        }
    }

    pub const fn has(self, id: u32) -> bool {
        id < ID_LIMIT && self.0 >> id & 1 == 1
    }

    /// The ids in either set.
    pub const fn or(self, other: GpmIds) -> GpmIds {
        GpmIds(self.0 | other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The ids in the set, smallest first.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0..ID_LIMIT).filter(move |&id| self.has(id))
    }
}
