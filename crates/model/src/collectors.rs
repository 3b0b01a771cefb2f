//! Named collectors, in node_exporter's convention: every GPU family
//! belongs to one, `--collector.NAME` and `--no-collector.NAME` switch one
//! on or off, and `--collector.disable-defaults` starts from none. A
//! collector turned off by name is never read; one left out by
//! `--collector.disable-defaults` is still read where the dcgm fields or
//! the alert rules need its readings (`Config::reads`), but not served.

use std::fmt;

/// One collector. The order is `--help`'s, docs/metrics.md's and the
/// `collector` label's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collector {
    /// `gpu_info` (with VBIOS and InfoROM versions) and `gpu_up`.
    Info,
    /// Die and memory temperature, and the memory's maximum.
    Temperature,
    /// Clocks, clock event reasons and their seconds.
    Clocks,
    /// Power draw, limit and energy.
    Power,
    /// Whole-GPU utilization: its readings are those of `snapshot::readings` that name it.
    Utilization,
    /// GPM (Hopper and later): SM, DRAM and pipe activity.
    Gpm,
    /// Device memory.
    Memory,
    /// Workload allocator stats and the largest free block.
    Allocator,
    /// Xid errors.
    Xid,
    /// ECC error counts, volatile and lifetime.
    Ecc,
    /// Row remapping and retired pages.
    Remap,
    /// PCIe bytes, replays and link.
    Pcie,
    /// NVLink bytes, errors and links.
    Nvlink,
    /// Per-link NVLink series.
    NvlinkLink,
    /// The driver's recovery action.
    Recovery,
    /// Fan speeds.
    Fans,
    /// Encoder, decoder, JPEG and OFA utilization.
    Media,
    /// P-state, persistence, compute and MIG modes.
    State,
    /// Served models' request metrics.
    Models,
    /// Per-process GPU memory, bounded per GPU.
    Processes,
    /// dcgm-exporter's names, labels and units (`--compat.dcgm-counters`).
    Dcgm,
}

impl Collector {
    /// How many there are.
    pub const COUNT: usize = 21;

    /// Every collector, in order.
    pub const ALL: [Collector; Collector::COUNT] = [
        Collector::Info,
        Collector::Temperature,
        Collector::Clocks,
        Collector::Power,
        Collector::Utilization,
        Collector::Gpm,
        Collector::Memory,
        Collector::Allocator,
        Collector::Xid,
        Collector::Ecc,
        Collector::Remap,
        Collector::Pcie,
        Collector::Nvlink,
        Collector::NvlinkLink,
        Collector::Recovery,
        Collector::Fans,
        Collector::Media,
        Collector::State,
        Collector::Models,
        Collector::Processes,
        Collector::Dcgm,
    ];

    /// Its name in flags, `collect[]` and the `collector` label.
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// The collector a name stands for.
    pub fn from_name(name: &str) -> Option<Collector> {
        NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Collector::ALL[i])
    }

    /// On unless turned off: all but the per-link NVLink series (up to 90
    /// a GPU), `processes`, whose `pid` label is an opt-in, and `dcgm`,
    /// a second copy of the readings under dcgm-exporter's names.
    pub fn default_on(self) -> bool {
        !matches!(
            self,
            Collector::NvlinkLink | Collector::Processes | Collector::Dcgm
        )
    }

    const fn bit(self) -> u32 {
        1 << self as u32
    }
}

const NAMES: [&str; Collector::COUNT] = [
    "info",
    "temperature",
    "clocks",
    "power",
    "utilization",
    "gpm",
    "memory",
    "allocator",
    "xid",
    "ecc",
    "remap",
    "pcie",
    "nvlink",
    "nvlink_link",
    "recovery",
    "fans",
    "media",
    "state",
    "models",
    "processes",
    "dcgm",
];

/// Every collector name, comma-separated, for messages and `--help`.
pub fn names() -> String {
    NAMES.join(", ")
}

/// An unknown collector name: one line, for exit code 2 or a 400.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownCollector<'a>(pub &'a str);

impl fmt::Display for UnknownCollector<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Name by name: a 400 at scrape time allocates nothing.
        write!(f, "unknown collector {:?} (expected one of ", self.0)?;
        for (i, name) in NAMES.iter().enumerate() {
            f.write_str(if i == 0 { "" } else { ", " })?;
            f.write_str(name)?;
        }
        f.write_str(")")
    }
}

/// A set of collectors; `Default` is the empty set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collectors(u32);

impl Collectors {
    /// No collector.
    pub const NONE: Collectors = Collectors(0);
    /// Every collector.
    pub const ALL: Collectors = Collectors((1 << Collector::COUNT) - 1);
    /// What runs without any `--collector.*` flag.
    pub const DEFAULT: Collectors = Collectors(
        Self::ALL.0
            & !Collector::NvlinkLink.bit()
            & !Collector::Processes.bit()
            & !Collector::Dcgm.bit(),
    );

    /// Whether `c` is in the set.
    pub fn has(self, c: Collector) -> bool {
        self.0 & c.bit() != 0
    }

    /// The set and `c`.
    pub fn with(self, c: Collector) -> Collectors {
        Collectors(self.0 | c.bit())
    }

    /// The set but `c`.
    pub fn without(self, c: Collector) -> Collectors {
        Collectors(self.0 & !c.bit())
    }

    /// The collectors in either set.
    pub fn or(self, other: Collectors) -> Collectors {
        Collectors(self.0 | other.0)
    }

    /// Every collector not in the set.
    pub fn complement(self) -> Collectors {
        Collectors(Self::ALL.0 & !self.0)
    }

    /// The collectors in both sets.
    pub fn and(self, other: Collectors) -> Collectors {
        Collectors(self.0 & other.0)
    }

    /// Whether no collector is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members, in [`Collector::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Collector> {
        Collector::ALL.into_iter().filter(move |&c| self.has(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sets() {
        for (i, c) in Collector::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
            assert_eq!(Collector::from_name(c.name()), Some(*c));
            assert_eq!(Collectors::DEFAULT.has(*c), c.default_on());
            assert!(
                c.name()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_')
            );
        }
        assert_eq!(Collector::from_name("nope"), None);
        let s = Collectors::NONE.with(Collector::Fans).with(Collector::Xid);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            [Collector::Xid, Collector::Fans]
        );
        assert!(!s.without(Collector::Xid).has(Collector::Xid));
        assert_eq!(s.and(Collectors::DEFAULT), s);
        assert!(Collectors::default().is_empty());
        let e = UnknownCollector("gpus").to_string();
        assert!(
            e.starts_with("unknown collector \"gpus\" (expected one of info, "),
            "{e}"
        );
    }
}
