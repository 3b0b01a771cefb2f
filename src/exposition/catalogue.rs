//! The metric catalogue: every family the exporter writes, its type, unit
//! and help, and how to read its series from a snapshot. The table is one
//! long list of the same shape on purpose: a family is added or changed in
//! one place, and the render walks it in output order.

pub mod attribution;
pub mod health;

use crate::config::Collector;
use crate::snapshot::{ProcessStats, Readings, TxRx};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    /// `name_info` with value 1: a gauge in 0.0.4, `info` in OpenMetrics.
    Info,
    /// `name_bucket{le}`, `name_sum` and `name_count`.
    Histogram,
}

/// A metric family as the catalogue defines it. `name` is the family name
/// without the `_total`/`_info` suffix its samples carry.
#[derive(Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Option<&'static str>,
    pub help: &'static str,
    /// The help holds nothing to escape, so it is written as it is.
    pub(super) plain_help: bool,
    /// The collector it belongs to; `None` for the exporter's own, which
    /// are always written.
    pub collector: Option<Collector>,
}

impl Family {
    fn suffix(&self) -> &'static str {
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
    pub(super) const fn of(mut self, c: Collector) -> Family {
        self.collector = Some(c);
        self
    }
}

pub(super) const fn family(name: &'static str, kind: Kind, help: &'static str) -> Family {
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

use Collector::{
    Allocator, Clocks, Ecc, Gpm, Memory, Models, Nvlink, Pcie, Power, Temperature, Utilization, Xid,
};
use Kind::{Counter, Gauge, Info};

/// An extra label after `gpu` and `uuid`: one of the catalogue's own,
/// spelled out whole (`,reason="hw_slowdown"`), a number, or a number
/// and then one of the catalogue's own.
#[derive(Clone, Copy)]
pub enum Extra {
    None,
    Label(&'static str),
    Num(&'static str, u32),
    NumLabel(&'static str, u32, &'static str),
}

/// `,reason="…"` for each of [`CLOCK_EVENT_REASONS`], in order.
pub(super) const REASON_LABELS: [&str; 9] = [
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

pub type Series = fn(&Readings, &mut dyn FnMut(Extra, f64));

macro_rules! one {
    ($field:ident) => {
        |r: &Readings, f: &mut dyn FnMut(Extra, f64)| {
            if let Some(v) = r.$field {
                f(Extra::None, v)
            }
        }
    };
}

fn directions(v: Option<TxRx>, f: &mut dyn FnMut(Extra, f64)) {
    if let Some(v) = v {
        f(Extra::Label(",direction=\"tx\""), v.tx);
        f(Extra::Label(",direction=\"rx\""), v.rx);
    }
}

pub static GPU_INFO: Family = family(
    "gpu",
    Info,
    "GPU identity: product name, PCI bus id, driver, VBIOS and InfoROM versions. Always 1.",
)
.of(Collector::Info);
pub static GPU_UP: Family = family(
    "gpu_up",
    Gauge,
    "1 if the GPU answers, 0 once it is lost (fallen off the bus, NVML GPU_IS_LOST).",
)
.of(Collector::Info);

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
/// Every per-GPU (and per-MIG-instance) family after `gpu_info` and
/// `gpu_up`, in output order, with how to read its series.
pub static GPU_FAMILIES: [(Family, Series); 28] = [
    (TEMPERATURE, one!(temperature_celsius)),
    (
        MEMORY_TEMPERATURE,
        one!(memory_temperature_celsius),
    ),
    (
        family("gpu_sm_clock_hertz", Gauge, "Current SM clock.")
        .of(Clocks),
        one!(sm_clock_hertz),
    ),
    (
        family(
            "gpu_sm_clock_max_hertz",
            Gauge,
            "Maximum SM clock; the current clock well below it means lost performance.",
        )
        .of(Clocks),
        one!(sm_clock_max_hertz),
    ),
    (
        family("gpu_memory_clock_hertz", Gauge, "Current memory clock.")
        .of(Clocks),
        one!(memory_clock_hertz),
    ),
    (CLOCKS_EVENT_ACTIVE, |r, f| {
        if let Some(mask) = r.clocks_event_mask {
            for (i, label) in REASON_LABELS.iter().enumerate() {
                f(Extra::Label(label), ((mask >> i) & 1) as f64);
            }
        }
    }),
    (
        family("gpu_power_usage_watts", Gauge, "Power draw.")
        .of(Power),
        one!(power_usage_watts),
    ),
    (
        family("gpu_power_limit_watts", Gauge, "Enforced power limit.")
        .of(Power),
        one!(power_limit_watts),
    ),
    (
        family(
            "gpu_utilization_ratio",
            Gauge,
            "Fraction of time a kernel ran (nvidia-smi utilization.gpu). Misleading: one tiny kernel reads as 100%, so it says nothing about how busy the SMs are. Use gpu_sm_active_ratio; never alert on this.",
        )
        .of(Utilization),
        one!(utilization_ratio),
    ),
    (
        SM_ACTIVE,
        one!(sm_active_ratio),
    ),
    (
        family(
            "gpu_sm_occupancy_ratio",
            Gauge,
            "Resident warps as a fraction of the SMs' maximum.",
        )
        .of(Gpm),
        one!(sm_occupancy_ratio),
    ),
    (
        family(
            "gpu_dram_active_ratio",
            Gauge,
            "Fraction of time the memory interface was busy: the bandwidth signal.",
        )
        .of(Gpm),
        one!(dram_active_ratio),
    ),
    (MEMORY_TOTAL, one!(memory_total_bytes)),
    (MEMORY_USED, one!(memory_used_bytes)),
    (
        family(
            "gpu_memory_free_bytes",
            Gauge,
            "Device memory free. Free is not allocatable when it is fragmented; see gpu_memory_largest_free_bytes.",
        )
        .of(Memory),
        one!(memory_free_bytes),
    ),
    (
        family(
            "gpu_memory_reserved_bytes",
            Gauge,
            "Device memory reserved by the driver and firmware.",
        )
        .of(Memory),
        one!(memory_reserved_bytes),
    ),
    (
        ALLOCATOR_RESERVED,
        one!(allocator_reserved_bytes),
    ),
    (ALLOCATOR_ALLOCATED, one!(allocator_allocated_bytes)),
    (LARGEST_FREE, one!(largest_free_bytes)),
    (
        family(
            "gpu_xid_last_timestamp_seconds",
            Gauge,
            "Unix time of the last Xid error seen on this GPU.",
        )
        .of(Xid),
        one!(xid_last_timestamp_seconds),
    ),
    (XID_ERRORS, |r, f| {
        for &(code, n) in r.xid_errors.iter().flatten() {
            f(Extra::Num("xid", code), n as f64);
        }
    }),
    (
        family(
            "gpu_ecc_corrected_errors",
            Counter,
            "Corrected ECC errors (volatile).",
        )
        .of(Ecc),
        one!(ecc_corrected_total),
    ),
    (ECC_UNCORRECTED, one!(ecc_uncorrected_total)),
    (
        family(
            "gpu_energy_joules",
            Counter,
            "Energy consumed since the driver loaded.",
        )
        .of(Power),
        one!(energy_joules_total),
    ),
    (
        family("gpu_pcie_bytes", Counter, "PCIe bytes moved, by direction.")
        .of(Pcie),
        |r, f| directions(r.pcie_bytes_total, f),
    ),
    (
        PCIE_REPLAYS,
        one!(pcie_replay_errors_total),
    ),
    (
        family(
            "gpu_nvlink_bytes",
            Counter,
            "NVLink bytes moved, by direction. Low during tensor parallelism means a topology problem.",
        )
        .of(Nvlink),
        |r, f| directions(r.nvlink_bytes_total, f),
    ),
    (
        family(
            "gpu_clocks_event_seconds",
            Counter,
            "Seconds clocks were held down, by reason.",
        )
        .of(Clocks),
        |r, f| {
            for (label, s) in REASON_LABELS.iter().zip(r.clocks_event_seconds_total) {
                if let Some(s) = s {
                    f(Extra::Label(label), s);
                }
            }
        },
    ),
];

/// The MIG instance's own memory: while MIG is on, `gpu_memory_*` stay
/// the whole GPU's (its real total), so `sum by (gpu)` of either family
/// never counts a byte twice. In the order of the render, with the
/// `gpu_memory_*` family each stands in for on a MIG instance.
pub static MIG_MEMORY: [(Family, &str, Series); 5] = [
    (
        family(
            "gpu_mig_memory_total_bytes",
            Gauge,
            "Memory of a MIG GPU instance; gpu_memory_total_bytes stays the whole GPU's.",
        )
        .of(Memory),
        MEMORY_TOTAL.name,
        one!(memory_total_bytes),
    ),
    (
        family(
            "gpu_mig_memory_used_bytes",
            Gauge,
            "Memory in use in a MIG GPU instance.",
        )
        .of(Memory),
        MEMORY_USED.name,
        one!(memory_used_bytes),
    ),
    (
        family(
            "gpu_mig_memory_free_bytes",
            Gauge,
            "Memory free in a MIG GPU instance.",
        )
        .of(Memory),
        "gpu_memory_free_bytes",
        one!(memory_free_bytes),
    ),
    (
        family(
            "gpu_mig_memory_reserved_bytes",
            Gauge,
            "Memory of a MIG GPU instance reserved by the driver.",
        )
        .of(Memory),
        "gpu_memory_reserved_bytes",
        one!(memory_reserved_bytes),
    ),
    (
        family(
            "gpu_mig_memory_largest_free_bytes",
            Gauge,
            "Largest contiguous free block in a MIG GPU instance (workload stats).",
        )
        .of(Allocator),
        LARGEST_FREE.name,
        one!(largest_free_bytes),
    ),
];

/// One series per MIG compute instance: its MIG UUID, and the ids that
/// join it to its GPU instance's series.
pub static MIG_INFO: Family = family(
    "gpu_mig",
    Info,
    "A MIG device: the GPU instance (mig_instance) and compute instance (mig_compute_instance) it is, and its own MIG UUID (mig_uuid). Always 1.",
)
.of(Collector::Info);

/// GPUs in the served snapshot, lost ones included.
pub static GPUS: Family = family(
    "gpu_exporter_gpus",
    Gauge,
    "GPUs in the served snapshot, lost ones included. 0 with a loaded driver means it sees no GPU.",
);

pub static TTFT: Family = family(
    "llm_ttft_seconds",
    Kind::Histogram,
    "Time to first token per request, by served model. The TTFT SLO counts a request as good when it is at most 0.3 s.",
)
.of(Models);

pub static BUILD_INFO: Family = family(
    "gpu_exporter_build",
    Info,
    "The exporter's version. Always 1.",
);
pub static SOURCE_INFO: Family = family(
    "gpu_exporter_source",
    Info,
    "Where readings come from: sim, nvml or smi. Always 1.",
);
pub static COLLECT_DURATION: Family = family(
    "gpu_exporter_collect_duration_seconds",
    Gauge,
    "How long the last collection took.",
);
pub static COLLECT_SUCCESS: Family = family(
    "gpu_exporter_collect_success",
    Gauge,
    "1 if the last collection succeeded and none has stalled since.",
);
pub static COLLECT_STALLED: Family = family(
    "gpu_exporter_collect_stalled",
    Gauge,
    "1 while a collection has run past three intervals and a second.",
);
pub static READINGS_HIDDEN: Family = family(
    "gpu_exporter_readings_hidden",
    Gauge,
    "1 while collections fail or stall and the last readings, older than --collect.max-stale, are withheld.",
);
pub static SNAPSHOT_AGE: Family = family(
    "gpu_exporter_snapshot_age_seconds",
    Gauge,
    "Seconds since the served readings were collected.",
);
pub static COLLECTOR_DURATION: Family = family(
    "gpu_exporter_collector_duration_seconds",
    Gauge,
    "Seconds each collector's calls took in the last collection, all GPUs together; left out where the source cannot time them (nvidia-smi, the simulator).",
);
pub static COLLECTOR_SUCCESS: Family = family(
    "gpu_exporter_collector_success",
    Gauge,
    "1 if none of the collector's calls failed in the last collection. A reading the GPU does not support (NOT_SUPPORTED) is no failure.",
);
pub static HTTP_OPEN: Family = family(
    "gpu_exporter_http_connections_open",
    Gauge,
    "HTTP connections open now, at most --web.max-connections plus the one held while making room.",
);
pub static HTTP_EVICTED: Family = family(
    "gpu_exporter_http_connections_evicted",
    Counter,
    "HTTP connections closed to make room, by reason: idle keep-alive and incomplete_head connections at the connection cap, stalled_write when a request needed the response slot of a client that was not reading.",
);
pub static HTTP_ACCEPT_PAUSED: Family = family(
    "gpu_exporter_http_accept_paused_seconds",
    Counter,
    "Seconds the HTTP server stopped accepting at the connection cap with nothing to evict, new connections waiting in the kernel's queue.",
);

pub static HTTP_GZIPPED: Family = family(
    "gpu_exporter_http_gzipped_responses",
    Counter,
    "HTTP responses sent gzipped, as the client's Accept-Encoding asked (Prometheus asks on every scrape).",
);
pub static TLS_HANDSHAKE_ERRORS: Family = family(
    "gpu_exporter_tls_handshake_errors",
    Counter,
    "TLS handshakes that did not complete, by reason: timeout within --web.header-timeout, or failed (no common version or suite, a client certificate refused, garbage).",
);

pub type ProcessReading = fn(&ProcessStats) -> Option<f64>;

pub static PROCESS: [(Family, ProcessReading); 5] = [
    (
        family(
            "process_cpu_seconds",
            Counter,
            "Total user and system CPU time spent in seconds.",
        ),
        |p| p.cpu_seconds_total,
    ),
    (
        family(
            "process_resident_memory_bytes",
            Gauge,
            "Resident memory size in bytes.",
        ),
        |p| p.resident_memory_bytes,
    ),
    (
        family(
            "process_open_fds",
            Gauge,
            "Number of open file descriptors.",
        ),
        |p| p.open_fds,
    ),
    (
        family(
            "process_max_fds",
            Gauge,
            "Maximum number of open file descriptors.",
        ),
        |p| p.max_fds,
    ),
    (
        family(
            "process_start_time_seconds",
            Gauge,
            "Start time of the process since unix epoch in seconds.",
        ),
        |p| p.start_time_seconds,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_labels_follow_the_reasons() {
        use crate::snapshot::CLOCK_EVENT_REASONS;
        for (label, reason) in REASON_LABELS.iter().zip(CLOCK_EVENT_REASONS) {
            assert_eq!(*label, format!(",reason=\"{reason}\""));
        }
    }

    #[test]
    fn gpu_families_belong_to_collectors() {
        for (f, _) in &GPU_FAMILIES {
            assert!(f.collector.is_some(), "{}", f.name);
        }
        assert_eq!(BUILD_INFO.collector, None);
    }

    #[test]
    fn units_follow_names() {
        assert_eq!(GPU_FAMILIES[0].0.unit, Some("celsius"));
        assert_eq!(GPU_UP.unit, None);
        assert_eq!(COLLECT_SUCCESS.unit, None);
        assert_eq!(SNAPSHOT_AGE.unit, Some("seconds"));
        assert_eq!(PROCESS[0].0.unit, Some("seconds"));
    }
}
