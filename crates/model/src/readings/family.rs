//! What a declaration is made of: a metric family (name, type, unit,
//! help, and the collector it belongs to) and a physical range.

use crate::Collector;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    /// `name_info` with value 1: a gauge in 0.0.4, `info` in OpenMetrics.
    Info,
    /// `name_bucket{le}`, `name_sum` and `name_count`.
    Histogram,
}

/// A metric family. `name` is the family name without the
/// `_total`/`_info` suffix its samples carry.
#[derive(Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Option<&'static str>,
    pub help: &'static str,
    /// The help holds nothing to escape, so it is written as it is.
    pub plain_help: bool,
    /// The collector it belongs to; `None` for the exporter's own, which
    /// are always written.
    pub collector: Option<Collector>,
}

impl Family {
    /// What its samples' names add to `name`: `_total`, `_info` or nothing.
    pub fn suffix(&self) -> &'static str {
        match self.kind {
            Kind::Gauge | Kind::Histogram => "",
            Kind::Counter => "_total",
            Kind::Info => "_info",
        }
    }

    /// The name samples carry, e.g. `gpu_energy_joules_total`.
    pub fn sample_name(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.name.as_bytes());
        out.extend_from_slice(self.suffix().as_bytes());
    }

    /// [`Family::sample_name`] as a String, for PromQL.
    pub fn sample(&self) -> String {
        format!("{}{}", self.name, self.suffix())
    }

    /// The family, as part of collector `c`.
    pub const fn of(mut self, c: Collector) -> Family {
        self.collector = Some(c);
        self
    }
}

pub const fn family(name: &'static str, kind: Kind, help: &'static str) -> Family {
    // The unit is the name's last word where that is a base unit.
    const UNITS: [&str; 7] = [
        "celsius", "hertz", "watts", "ratio", "bytes", "joules", "seconds",
    ];
    let mut unit = None;
    let mut i = 0;
    while i < UNITS.len() {
        if ends_with(name.as_bytes(), UNITS[i].as_bytes()) {
            unit = Some(UNITS[i]);
        }
        i += 1;
    }
    let mut plain_help = true;
    let mut i = 0;
    while i < help.len() {
        plain_help &= !matches!(help.as_bytes()[i], b'\\' | b'\n' | b'"');
        i += 1;
    }
    Family {
        name,
        kind,
        unit,
        help,
        plain_help,
        collector: None,
    }
}

const fn ends_with(s: &[u8], suffix: &[u8]) -> bool {
    if s.len() <= suffix.len() || s[s.len() - suffix.len() - 1] != b'_' {
        return false;
    }
    let mut i = 0;
    while i < suffix.len() {
        if s[s.len() - suffix.len() + i] != suffix[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The plausible values of a reading, both ends included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Range {
    pub min: f64,
    pub max: f64,
}

impl Range {
    pub fn holds(self, v: f64) -> bool {
        v.is_finite() && self.min <= v && v <= self.max
    }

    /// The range without 0: a maximum, limit or total of 0 is a source
    /// that could not read it, not a GPU that has none.
    pub const fn above_zero(self) -> Range {
        Range {
            min: f64::MIN_POSITIVE,
            max: self.max,
        }
    }

    /// Whether [`Range::above_zero`] made it: its low end reads "above 0".
    pub fn excludes_zero(self) -> bool {
        self.min == f64::MIN_POSITIVE
    }
}

/// Die and memory temperature.
pub const TEMPERATURE_CELSIUS: Range = Range {
    min: -40.0,
    max: 150.0,
};
/// SM and memory clocks: no GPU clocks at 10 GHz.
pub const CLOCK_HERTZ: Range = Range {
    min: 0.0,
    max: 1e10,
};
/// Power draw and limit: a GB200 superchip's board is under 3 kW.
pub const POWER_WATTS: Range = Range {
    min: 0.0,
    max: 10_000.0,
};
/// Shares of time or capacity.
pub const RATIO: Range = Range { min: 0.0, max: 1.0 };
/// A profiling field's rate (GPM's PCIe and NVLink traffic, bytes per
/// second): a GB200's 18 NVLinks carry 1.8 TB/s, so 10 TB/s is none.
pub const LINK_BYTES_PER_SECOND: Range = Range {
    min: 0.0,
    max: 1e13,
};
/// Fan speed as a ratio: NVML says a fan may report over 100%.
pub const FAN_RATIO: Range = Range { min: 0.0, max: 2.0 };
/// Memory sizes: up to 1 PiB per GPU.
pub const MEMORY_BYTES: Range = Range {
    min: 0.0,
    max: 1_125_899_906_842_624.0,
};
/// Counters: never negative; an all-ones 64-bit sentinel (1.8e19) is out.
pub const COUNT: Range = Range {
    min: 0.0,
    max: 9.2e18,
};
/// Byte counters: NVML counts NVLink traffic in KiB, so a GPU can pass
/// 2^63 bytes (four months at 900 GB/s) before any sentinel; an all-ones
/// 64-bit KiB count (1.9e22 bytes) is still out.
pub const BYTE_COUNT: Range = Range {
    min: 0.0,
    max: 9.44e21,
};
/// Memory repairs (rows remapped, pages retired) over a board's life: a
/// GPU has spare rows for some thousands of banks, never four billion.
pub const REPAIRS: Range = Range {
    min: 0.0,
    max: 100_000.0,
};
/// PCIe generations so far: 1 to 6.
pub const PCIE_GENERATION: Range = Range { min: 1.0, max: 6.0 };
/// PCIe lanes: x1 to x32.
pub const PCIE_WIDTH: Range = Range {
    min: 1.0,
    max: 32.0,
};
/// NVLinks of one GPU: 18 on Hopper and Blackwell.
pub const NVLINKS: Range = Range {
    min: 0.0,
    max: 64.0,
};
/// The recovery actions NVML names (0 none to 5 recover IMEX domain); a
/// value past them is not one to act on.
pub const RECOVERY: Range = Range { min: 0.0, max: 5.0 };
/// P-states: P0 to P15.
pub const PSTATE: Range = Range {
    min: 0.0,
    max: 15.0,
};
/// Compute modes: 0 default to 3 exclusive process.
pub const COMPUTE_MODE: Range = Range { min: 0.0, max: 3.0 };
/// Xid codes: 0 for none yet; NVIDIA's catalogue stops below 200, so a
/// code past 1023 (an all-ones sentinel, say) is no Xid.
pub const XID_CODE: Range = Range {
    min: 0.0,
    max: 1023.0,
};
/// Unix time of the last Xid: after 2000 and before 2200.
pub const UNIX_SECONDS: Range = Range {
    min: 946_684_800.0,
    max: 7_258_118_400.0,
};
