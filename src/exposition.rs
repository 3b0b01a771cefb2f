//! Renders a snapshot as Prometheus text 0.0.4 or OpenMetrics 1.0.0 into a
//! caller's buffer. Once the buffer has grown to fit, a render allocates
//! nothing: numbers are spelled on the stack, labels escaped in place.

use crate::base::numbers::{write_f64, write_u64};
use crate::snapshot::{Gpu, MigInstance, Readings, Snapshot, TxRx};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// Picks the format from an `Accept` header by q-value. OpenMetrics
    /// wins only when a range naming it ranks highest; anything else, a
    /// missing header included, gets text 0.0.4.
    pub fn negotiate(accept: Option<&[u8]>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let mut best = (Format::Text, -1.0f32);
        for range in accept.split(|&b| b == b',') {
            let mut parts = range.split(|&b| b == b';').map(|p| p.trim_ascii());
            let media = parts.next().unwrap_or_default();
            let mut q = 1.0f32;
            let mut version_ok = true;
            for p in parts {
                let (k, v) = match p.iter().position(|&b| b == b'=') {
                    Some(i) => (p[..i].trim_ascii(), p[i + 1..].trim_ascii()),
                    None => (p, &b""[..]),
                };
                if k.eq_ignore_ascii_case(b"q") {
                    q = std::str::from_utf8(v)
                        .ok()
                        .and_then(|v| v.parse().ok())
                        .filter(|q: &f32| (0.0..=1.0).contains(q))
                        .unwrap_or(0.0);
                } else if k.eq_ignore_ascii_case(b"version") {
                    version_ok = v == b"1.0.0" || v == b"0.0.1";
                }
            }
            let format =
                if media.eq_ignore_ascii_case(b"application/openmetrics-text") && version_ok {
                    Format::OpenMetrics
                } else {
                    Format::Text
                };
            // Ties keep the first range listed.
            if q > 0.0 && q > best.1 {
                best = (format, q);
            }
        }
        best.0
    }
}

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
    plain_help: bool,
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
}

const fn family(name: &'static str, kind: Kind, help: &'static str) -> Family {
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

use Kind::{Counter, Gauge, Info};

/// An extra label after `gpu` and `uuid`: one of the catalogue's own,
/// spelled out whole (`,reason="hw_slowdown"`), or a number.
#[derive(Clone, Copy)]
pub enum Extra {
    None,
    Label(&'static str),
    Num(&'static str, u32),
}

/// `,reason="…"` for each of [`CLOCK_EVENT_REASONS`], in order.
const REASON_LABELS: [&str; 9] = [
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
    "GPU identity: product name, PCI bus id and driver version. Always 1.",
);
pub static GPU_UP: Family = family(
    "gpu_up",
    Gauge,
    "1 if the GPU answers, 0 once it is lost (fallen off the bus, NVML GPU_IS_LOST).",
);

/// Every per-GPU (and per-MIG-instance) family after `gpu_info` and
/// `gpu_up`, in output order, with how to read its series.
pub static GPU_FAMILIES: [(Family, Series); 28] = [
    (
        family(
            "gpu_temperature_celsius",
            Gauge,
            "GPU die temperature. Lags throttling; watch gpu_clocks_event_active too.",
        ),
        one!(temperature_celsius),
    ),
    (
        family("gpu_memory_temperature_celsius", Gauge, "HBM temperature."),
        one!(memory_temperature_celsius),
    ),
    (
        family("gpu_sm_clock_hertz", Gauge, "Current SM clock."),
        one!(sm_clock_hertz),
    ),
    (
        family(
            "gpu_sm_clock_max_hertz",
            Gauge,
            "Maximum SM clock; the current clock well below it means lost performance.",
        ),
        one!(sm_clock_max_hertz),
    ),
    (
        family("gpu_memory_clock_hertz", Gauge, "Current memory clock."),
        one!(memory_clock_hertz),
    ),
    (
        family(
            "gpu_clocks_event_active",
            Gauge,
            "1 while an NVML clock event reason holds clocks down. Thermal, hw slowdown and power brake are silent performance loss; sw_power_cap alone is normal under load.",
        ),
        |r, f| {
            if let Some(mask) = r.clocks_event_mask {
                for (i, label) in REASON_LABELS.iter().enumerate() {
                    f(Extra::Label(label), ((mask >> i) & 1) as f64);
                }
            }
        },
    ),
    (
        family("gpu_power_usage_watts", Gauge, "Power draw."),
        one!(power_usage_watts),
    ),
    (
        family("gpu_power_limit_watts", Gauge, "Enforced power limit."),
        one!(power_limit_watts),
    ),
    (
        family(
            "gpu_utilization_ratio",
            Gauge,
            "Fraction of time a kernel ran (nvidia-smi utilization.gpu). Misleading: one tiny kernel reads as 100%, so it says nothing about how busy the SMs are. Use gpu_sm_active_ratio; never alert on this.",
        ),
        one!(utilization_ratio),
    ),
    (
        family(
            "gpu_sm_active_ratio",
            Gauge,
            "Fraction of time SMs had at least one warp resident: the real saturation signal.",
        ),
        one!(sm_active_ratio),
    ),
    (
        family(
            "gpu_sm_occupancy_ratio",
            Gauge,
            "Resident warps as a fraction of the SMs' maximum.",
        ),
        one!(sm_occupancy_ratio),
    ),
    (
        family(
            "gpu_dram_active_ratio",
            Gauge,
            "Fraction of time the memory interface was busy: the bandwidth signal.",
        ),
        one!(dram_active_ratio),
    ),
    (
        family("gpu_memory_total_bytes", Gauge, "Total device memory."),
        one!(memory_total_bytes),
    ),
    (
        family("gpu_memory_used_bytes", Gauge, "Device memory in use."),
        one!(memory_used_bytes),
    ),
    (
        family(
            "gpu_memory_free_bytes",
            Gauge,
            "Device memory free. Free is not allocatable when it is fragmented; see gpu_memory_largest_free_bytes.",
        ),
        one!(memory_free_bytes),
    ),
    (
        family(
            "gpu_memory_reserved_bytes",
            Gauge,
            "Device memory reserved by the driver and firmware.",
        ),
        one!(memory_reserved_bytes),
    ),
    (
        family(
            "gpu_allocator_reserved_bytes",
            Gauge,
            "Memory the workload's caching allocator holds. Reserved minus allocated is cache.",
        ),
        one!(allocator_reserved_bytes),
    ),
    (
        family(
            "gpu_allocator_allocated_bytes",
            Gauge,
            "Memory the workload's tensors occupy. Rising steadily means a leak.",
        ),
        one!(allocator_allocated_bytes),
    ),
    (
        family(
            "gpu_memory_largest_free_bytes",
            Gauge,
            "Largest contiguous free block: the fragmentation early warning, before an OOM at 60% used.",
        ),
        one!(largest_free_bytes),
    ),
    (
        family(
            "gpu_xid_last_timestamp_seconds",
            Gauge,
            "Unix time of the last Xid error seen on this GPU.",
        ),
        one!(xid_last_timestamp_seconds),
    ),
    (
        family(
            "gpu_xid_errors",
            Counter,
            "Xid errors by code. Alert on increase(), never on the value. Critical codes are present at 0 until they happen.",
        ),
        |r, f| {
            for &(code, n) in r.xid_errors.iter().flatten() {
                f(Extra::Num("xid", code), n as f64);
            }
        },
    ),
    (
        family(
            "gpu_ecc_corrected_errors",
            Counter,
            "Corrected ECC errors (volatile).",
        ),
        one!(ecc_corrected_total),
    ),
    (
        family(
            "gpu_ecc_uncorrected_errors",
            Counter,
            "Uncorrected ECC errors (volatile). Any increase means a dying GPU: page.",
        ),
        one!(ecc_uncorrected_total),
    ),
    (
        family(
            "gpu_energy_joules",
            Counter,
            "Energy consumed since the driver loaded.",
        ),
        one!(energy_joules_total),
    ),
    (
        family("gpu_pcie_bytes", Counter, "PCIe bytes moved, by direction."),
        |r, f| directions(r.pcie_bytes_total, f),
    ),
    (
        family(
            "gpu_pcie_replay_errors",
            Counter,
            "PCIe replays: a flaky link or riser.",
        ),
        one!(pcie_replay_errors_total),
    ),
    (
        family(
            "gpu_nvlink_bytes",
            Counter,
            "NVLink bytes moved, by direction. Low during tensor parallelism means a topology problem.",
        ),
        |r, f| directions(r.nvlink_bytes_total, f),
    ),
    (
        family(
            "gpu_clocks_event_seconds",
            Counter,
            "Seconds clocks were held down, by reason.",
        ),
        |r, f| {
            for (label, s) in REASON_LABELS.iter().zip(r.clocks_event_seconds_total) {
                if let Some(s) = s {
                    f(Extra::Label(label), s);
                }
            }
        },
    ),
];

pub static TTFT: Family = family(
    "llm_ttft_seconds",
    Kind::Histogram,
    "Time to first token per request, by served model. The TTFT SLO counts a request as good when it is at most 0.3 s.",
);

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
    "1 if the last collection succeeded.",
);
pub static SNAPSHOT_AGE: Family = family(
    "gpu_exporter_snapshot_age_seconds",
    Gauge,
    "Seconds since the served readings were collected.",
);
type ProcessReading = fn(&crate::snapshot::ProcessStats) -> Option<f64>;

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

/// Writes `snapshot` in `format` to `out`, after whatever `out` holds.
pub fn render(snapshot: &Snapshot, format: Format, now: Instant, out: &mut Vec<u8>) {
    let mut w = Writer {
        out,
        om: format == Format::OpenMetrics,
        cached: [(0, 0); CACHED_TARGETS],
    };
    let gpus = &snapshot.gpus;

    let gpu_targets = |f: &mut dyn FnMut(Target)| {
        each_target(gpus, |t, _| {
            if t.mig.is_none() {
                f(t)
            }
        })
    };
    if !gpus.is_empty() {
        w.head(&GPU_INFO);
        gpu_targets(&mut |t| {
            w.name(&GPU_INFO);
            w.target(t);
            let g = t.gpu;
            for (k, v) in [
                ("model", &g.model),
                ("pci_bus_id", &g.pci_bus_id),
                ("driver_version", &g.driver_version),
            ] {
                w.label(k, v);
            }
            w.value(1.0);
        });
        w.head(&GPU_UP);
        gpu_targets(&mut |t| {
            w.name(&GPU_UP);
            w.target(t);
            w.value(if t.gpu.up { 1.0 } else { 0.0 });
        });
    }
    for (fam, series) in &GPU_FAMILIES {
        // The head goes before the first sample; a family without any
        // (every reading absent) is left out whole.
        let mut headed = false;
        each_target(gpus, |t, r| {
            series(r, &mut |extra, v| {
                if !headed {
                    w.head(fam);
                    headed = true;
                }
                w.name(fam);
                w.target(t);
                match extra {
                    Extra::None => {}
                    Extra::Label(text) => w.put(text),
                    Extra::Num(k, n) => w.num_label(k, n),
                }
                w.value(v);
            })
        });
    }

    if !snapshot.models.is_empty() {
        w.head(&TTFT);
        for m in &snapshot.models {
            let h = &m.ttft_seconds;
            for &(le, n) in &h.buckets {
                w.put(TTFT.name);
                w.put("_bucket");
                w.open_label("model_name", &m.name);
                w.out.extend_from_slice(b",le=\"");
                write_f64(w.out, le);
                w.out.push(b'"');
                w.value(n);
            }
            for (suffix, v) in [("_sum", h.sum), ("_count", h.count())] {
                w.put(TTFT.name);
                w.put(suffix);
                w.open_label("model_name", &m.name);
                w.value(v);
            }
        }
    }

    w.head(&BUILD_INFO);
    w.name(&BUILD_INFO);
    w.open_label("version", env!("CARGO_PKG_VERSION"));
    w.value(1.0);
    w.head(&SOURCE_INFO);
    w.name(&SOURCE_INFO);
    w.open_label("source", snapshot.source.as_str());
    w.value(1.0);
    w.scalar(&COLLECT_DURATION, snapshot.collect_duration.as_secs_f64());
    w.scalar(&COLLECT_SUCCESS, if snapshot.success() { 1.0 } else { 0.0 });
    let age = now
        .saturating_duration_since(snapshot.published)
        .as_secs_f64();
    w.scalar(&SNAPSHOT_AGE, (age * 1000.0).round() / 1000.0);
    for (fam, read) in &PROCESS {
        if let Some(v) = read(&snapshot.process) {
            w.scalar(fam, v);
        }
    }
    if w.om {
        w.out.extend_from_slice(b"# EOF\n");
    }
}

/// Calls `f` for each GPU and then each of its MIG instances.
/// A GPU or one of its MIG instances, numbered in render order.
#[derive(Clone, Copy)]
struct Target<'a> {
    n: usize,
    gpu: &'a Gpu,
    mig: Option<&'a MigInstance>,
}

/// Calls `f` for each GPU and then each of its MIG instances.
fn each_target<'a>(gpus: &'a [Gpu], mut f: impl FnMut(Target<'a>, &'a Readings)) {
    let mut n = 0;
    for gpu in gpus {
        f(Target { n, gpu, mig: None }, &gpu.readings);
        n += 1;
        for m in &gpu.mig {
            f(
                Target {
                    n,
                    gpu,
                    mig: Some(m),
                },
                &m.readings,
            );
            n += 1;
        }
    }
}

/// Targets whose label set is written once per render and then copied.
const CACHED_TARGETS: usize = 576;

struct Writer<'a> {
    out: &'a mut Vec<u8>,
    om: bool,
    /// Where each target's label set was first written in `out`: every
    /// later line of that target copies those bytes instead of spelling
    /// and escaping them again. (0, 0) until then.
    cached: [(usize, usize); CACHED_TARGETS],
}

impl Writer<'_> {
    #[inline(always)]
    fn put(&mut self, s: &str) {
        self.out.extend_from_slice(s.as_bytes());
    }

    /// HELP, TYPE and (OpenMetrics only) UNIT for a family.
    fn head(&mut self, f: &Family) {
        let (kind, suffix) = match (f.kind, self.om) {
            (Kind::Gauge, _) => ("gauge", ""),
            (Kind::Counter, true) => ("counter", ""),
            (Kind::Counter, false) => ("counter", "_total"),
            (Kind::Info, true) => ("info", ""),
            (Kind::Info, false) => ("gauge", "_info"),
            (Kind::Histogram, _) => ("histogram", ""),
        };
        for (line, rest) in [("# HELP ", None), ("# TYPE ", Some(kind))] {
            self.put(line);
            self.put(f.name);
            self.put(suffix);
            self.out.push(b' ');
            match rest {
                Some(kind) => self.put(kind),
                None if f.plain_help => self.put(f.help),
                None => escape(self.out, f.help, self.om),
            }
            self.out.push(b'\n');
        }
        if let (Some(unit), true) = (f.unit, self.om) {
            self.put("# UNIT ");
            self.put(f.name);
            self.out.push(b' ');
            self.put(unit);
            self.out.push(b'\n');
        }
    }

    #[inline(always)]
    fn name(&mut self, f: &Family) {
        f.sample_name(self.out);
    }

    /// Opens a target's label set: `{gpu="0",uuid="…"` and, for a MIG
    /// instance, `mig_instance` and `mig_profile`.
    #[inline(always)]
    fn target(&mut self, t: Target) {
        match self.cached.get(t.n) {
            Some(&(start, end)) if end > start => self.out.extend_from_within(start..end),
            _ => {
                let start = self.out.len();
                match t.mig {
                    None => self.gpu_labels(t.gpu.index, &t.gpu.uuid),
                    Some(m) => {
                        self.gpu_labels(t.gpu.index, &m.uuid);
                        self.num_label("mig_instance", m.gpu_instance_id);
                        self.label("mig_profile", &m.profile);
                    }
                }
                if let Some(slot) = self.cached.get_mut(t.n) {
                    *slot = (start, self.out.len());
                }
            }
        }
    }

    #[inline(always)]
    fn gpu_labels(&mut self, index: u32, uuid: &str) {
        self.out.extend_from_slice(b"{gpu=\"");
        write_u64(self.out, index as u64);
        self.out.push(b'"');
        self.label("uuid", uuid);
    }

    /// The first label, opening the set.
    #[inline(always)]
    fn open_label(&mut self, k: &str, v: &str) {
        self.out.push(b'{');
        self.put(k);
        self.out.extend_from_slice(b"=\"");
        escape(self.out, v, true);
        self.out.push(b'"');
    }

    #[inline(always)]
    fn label(&mut self, k: &str, v: &str) {
        self.out.push(b',');
        self.put(k);
        self.out.extend_from_slice(b"=\"");
        escape(self.out, v, true);
        self.out.push(b'"');
    }

    #[inline(always)]
    fn num_label(&mut self, k: &str, n: u32) {
        self.out.push(b',');
        self.put(k);
        self.out.extend_from_slice(b"=\"");
        write_u64(self.out, n as u64);
        self.out.push(b'"');
    }

    /// Closes the label set (if any) and writes the value. A label set
    /// always ends in a quote and a bare name never does.
    #[inline(always)]
    fn value(&mut self, v: f64) {
        if self.out.last() == Some(&b'"') {
            self.out.push(b'}');
        }
        self.out.push(b' ');
        write_f64(self.out, v);
        self.out.push(b'\n');
    }

    fn scalar(&mut self, f: &Family, v: f64) {
        self.head(f);
        self.name(f);
        self.value(v);
    }
}

/// Escapes `\`, newline and (in label values and OpenMetrics HELP) `"`.
#[inline]
pub fn escape(out: &mut Vec<u8>, s: &str, quote: bool) {
    // Nearly every value needs no escaping: copy it whole.
    if !s
        .bytes()
        .any(|b| b == b'\\' || b == b'\n' || (quote && b == b'"'))
    {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    for &b in s.as_bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'"' if quote => out.extend_from_slice(b"\\\""),
            _ => out.push(b),
        }
    }
}

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
    fn escaping() {
        let mut out = Vec::new();
        escape(&mut out, "a\\b\"c\nd", true);
        assert_eq!(out, br#"a\\b\"c\nd"#);
        out.clear();
        escape(&mut out, "a\\b\"c\nd", false);
        assert_eq!(out, br#"a\\b"c\nd"#);
    }

    #[test]
    fn help_needing_escapes_is_escaped() {
        let f = family("x_seconds", Kind::Gauge, "a \"quoted\" \\ help\nline");
        assert!(!f.plain_help && GPU_UP.plain_help);
        for (om, want) in [
            (false, "# HELP x_seconds a \"quoted\" \\\\ help\\nline\n"),
            (true, "# HELP x_seconds a \\\"quoted\\\" \\\\ help\\nline\n"),
        ] {
            let mut out = Vec::new();
            Writer {
                out: &mut out,
                om,
                cached: [(0, 0); CACHED_TARGETS],
            }
            .head(&f);
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with(want), "{text}");
        }
    }

    #[test]
    fn units_follow_names() {
        assert_eq!(GPU_FAMILIES[0].0.unit, Some("celsius"));
        assert_eq!(GPU_UP.unit, None);
        assert_eq!(COLLECT_SUCCESS.unit, None);
        assert_eq!(SNAPSHOT_AGE.unit, Some("seconds"));
        assert_eq!(PROCESS[0].0.unit, Some("seconds"));
    }

    #[test]
    fn negotiation() {
        use Format::*;
        let cases: [(&[u8], Format); 12] = [
            (b"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", OpenMetrics),
            (b"application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2", OpenMetrics),
            (b"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2", OpenMetrics),
            (b"text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5", Text),
            (b"text/plain", Text),
            (b"*/*", Text),
            (b"", Text),
            (b"garbage;;;==,", Text),
            (b"application/openmetrics-text; version=1.0.0", OpenMetrics),
            (b"application/openmetrics-text;version=2.0.0", Text),
            (b"application/openmetrics-text;q=0", Text),
            (b"APPLICATION/OpenMetrics-Text ; q=0.8, text/plain;q=0.7", OpenMetrics),
        ];
        for (accept, want) in cases {
            assert_eq!(
                Format::negotiate(Some(accept)),
                want,
                "{}",
                String::from_utf8_lossy(accept)
            );
        }
        assert_eq!(Format::negotiate(None), Text);
    }
}
