//! The metric catalogue: every family the exporter writes, its type, unit
//! and help. The GPU's readings are declared in the fleet model
//! ([`crate::readings`]), each once, and rendered from there;
//! this table holds the rest, whose series the render writes itself.

pub mod attribution;
pub mod engines;
/// The hardware-health readings, where the PromQL rules name them.
pub mod health {
    pub use crate::readings::health::*;
}

use crate::Collector;
use crate::ProcessStats;
pub use crate::readings::{
    ALLOCATOR_ALLOCATED, ALLOCATOR_RESERVED, CLOCKS_EVENT_ACTIVE, ECC_UNCORRECTED, Extra, Family,
    Kind, LARGEST_FREE, MEMORY_TEMPERATURE, MEMORY_TOTAL, MEMORY_USED, PCIE_REPLAYS, SM_ACTIVE,
    Series, TEMPERATURE, XID_ERRORS, family,
};
use Kind::{Counter, Gauge, Info};

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
.of(Collector::Models);

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
pub static READINGS_REJECTED: Family = family(
    "gpu_exporter_readings_rejected",
    Counter,
    "Readings left out since start because a GPU cannot have them (out of range, a sentinel, more memory than the GPU has), by reading family. Logged once per GPU and family.",
);
pub static GPU_READS_LATE: Family = family(
    "gpu_exporter_gpu_reads_late",
    Counter,
    "Collections that served a GPU's last readings because its read (NVML, a thread per GPU) had not ended within --collect.interval; left out until the first.",
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
    "HTTP connections closed to make room, by reason: idle keep-alive, incomplete_head and tls_handshake (mid-handshake) connections at the connection cap, stalled_write when a request needed the response slot of a client that was not reading.",
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
pub static HTTP_PAGES_REFUSED: Family = family(
    "gpu_exporter_http_pages_refused",
    Counter,
    "Requests for the status page or /alerts answered 503 with Retry-After, not rendered: the responses in flight held the pages' 2 MiB budget already (clients that ask and never read).",
);
pub static TLS_HANDSHAKE_ERRORS: Family = family(
    "gpu_exporter_tls_handshake_errors",
    Counter,
    "TLS handshakes that did not complete, by reason: timeout within --web.header-timeout, failed (no common version or suite, a client certificate refused, garbage), or closed by the client (a TCP health check, a client that gave up). A connection evicted mid-handshake is counted in gpu_exporter_http_connections_evicted_total instead.",
);

pub static ALERTMANAGER_SENT: Family = family(
    "gpu_exporter_alertmanager_notifications",
    Counter,
    "Posts of the exporter's own alerts that an Alertmanager (--alertmanager.url) took, by url.",
);
pub static ALERTMANAGER_FAILED: Family = family(
    "gpu_exporter_alertmanager_notifications_failed",
    Counter,
    "Posts to an Alertmanager that failed, by url and reason: connect, timeout (within --alertmanager.timeout), status (an answer other than 200, a redirect included), parse, or tls (an https:// Alertmanager's certificate not trusted or not naming its host, a peer that speaks no TLS).",
);
pub static ALERTMANAGER_DROPPED: Family = family(
    "gpu_exporter_alertmanager_dropped",
    Counter,
    "Alerts dropped unsent, the oldest first, because the queue held --alertmanager.queue-capacity.",
);
pub static ALERTMANAGER_QUEUE: Family = family(
    "gpu_exporter_alertmanager_queue_length",
    Gauge,
    "Alerts waiting to be sent to Alertmanager.",
);
pub static ALERTMANAGER_LATENCY: Family = family(
    "gpu_exporter_alertmanager_latency_seconds",
    Gauge,
    "Seconds the last post an Alertmanager took lasted, by url.",
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
    fn units_follow_names() {
        assert_eq!(BUILD_INFO.collector, None);
        assert_eq!(GPU_UP.unit, None);
        assert_eq!(COLLECT_SUCCESS.unit, None);
        assert_eq!(SNAPSHOT_AGE.unit, Some("seconds"));
        assert_eq!(PROCESS[0].0.unit, Some("seconds"));
    }
}
