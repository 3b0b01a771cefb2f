//! nvidia-smi's `--query-gpu` CSV, taken apart: which fields to ask for,
//! what each column means, and its cells. Pure, and never panics, so the
//! fuzz targets call it directly.

use super::cell::{is_missing, parse_flag, parse_mask, parse_number};
use super::health::{HEALTH_FIELDS, HealthColumns};
use base::pci::normalize_bus_id;
use base::units::{MHZ, MIB};
use model::readings::{self, Field, Reading};
use model::{CLOCK_EVENT_REASONS, Gpu, Readings, clock_event_bit};
use std::collections::HashSet;

/// The `--query-gpu` fields we ask for, in the newer (driver 535+)
/// spelling: the GPU's identity, then each reading's columns in the
/// reading table's order: its own (`Reading::smi`, read in the unit
/// [`smi_unit`] gives) or its [`SHARED`] ones.
/// [`supported_fields`] drops those the installed driver does not list and
/// swaps in `clocks_throttle_reasons.*` on older drivers.
pub fn fields() -> impl Iterator<Item = &'static str> {
    let shared = |r: &Reading| SHARED.iter().find(|(f, _)| *f == r.family.name);
    let columns = readings::all().flat_map(move |r| match shared(r) {
        Some((_, columns)) => columns,
        None => std::slice::from_ref(&r.smi),
    });
    IDENTITY
        .iter()
        .chain(columns)
        .copied()
        .filter(|c| !c.is_empty())
}

/// The columns every GPU needs, whatever the collectors.
const IDENTITY: [&str; 5] = ["index", "uuid", "name", "pci.bus_id", "driver_version"];

/// The columns that are no one reading's value, by the family they give:
/// the clock event mask (or, where it does not read, the reasons it is
/// made of), the two power limits one reading falls back between, and the
/// violation counters, a reading of several series.
///
/// There is no `clocks_event_reasons.display_clock_setting` query field (it
/// is only in `nvidia-smi -q`); its bit 0x100 still arrives through
/// `clocks_event_reasons.active`. Only five reasons have violation-time
/// counters (`clocks_event_reasons_counters.*`, in µs).
const SHARED: [(&str, &[&str]); 3] = [
    (
        "gpu_clocks_event_active",
        &[
            "clocks_event_reasons.active",
            "clocks_event_reasons.gpu_idle",
            "clocks_event_reasons.applications_clocks_setting",
            "clocks_event_reasons.sw_power_cap",
            "clocks_event_reasons.hw_slowdown",
            "clocks_event_reasons.sync_boost",
            "clocks_event_reasons.sw_thermal_slowdown",
            "clocks_event_reasons.hw_thermal_slowdown",
            "clocks_event_reasons.hw_power_brake_slowdown",
        ],
    ),
    (
        "gpu_power_limit_watts",
        &["enforced.power.limit", "power.limit"],
    ),
    (
        "gpu_clocks_event_seconds",
        &[
            "clocks_event_reasons_counters.sw_power_cap",
            "clocks_event_reasons_counters.sync_boost",
            "clocks_event_reasons_counters.sw_thermal_slowdown",
            "clocks_event_reasons_counters.hw_thermal_slowdown",
            "clocks_event_reasons_counters.hw_power_brake_slowdown",
        ],
    ),
];

/// The unit nvidia-smi prints a reading's column in, by the reading's own
/// unit, and the step from it to ours; `None` for a unit it has no
/// column of.
fn smi_unit(ours: Option<&str>) -> Option<(&'static str, ToOurs)> {
    let same: ToOurs = |v| v;
    Some(match ours {
        Some("celsius") => ("C", same),
        Some("hertz") => ("MHz", |v| v * MHZ),
        Some("watts") => ("W", same),
        Some("ratio") => ("%", |v| v / 100.0),
        Some("bytes") => ("MiB", |v| v * MIB),
        None => ("", same),
        Some(_) => return None,
    })
}

/// From nvidia-smi's unit to ours.
type ToOurs = fn(f64) -> f64;

/// The pre-535 spelling of the `clocks_event_reasons.*` fields.
const THROTTLE_FIELDS: &[&str] = &[
    "clocks_throttle_reasons.active",
    "clocks_throttle_reasons.gpu_idle",
    "clocks_throttle_reasons.applications_clocks_setting",
    "clocks_throttle_reasons.sw_power_cap",
    "clocks_throttle_reasons.hw_slowdown",
    "clocks_throttle_reasons.sync_boost",
    "clocks_throttle_reasons.sw_thermal_slowdown",
    "clocks_throttle_reasons.hw_thermal_slowdown",
    "clocks_throttle_reasons.hw_power_brake_slowdown",
];

/// Query aliases (`--help-query-gpu` lists them as `"a" or "b"`) and the
/// name nvidia-smi prints in the header for them.
const ALIASES: &[(&str, &str)] = &[
    ("gpu_name", "name"),
    ("gpu_serial", "serial"),
    ("gpu_uuid", "uuid"),
    ("gpu_bus_id", "pci.bus_id"),
    ("clocks.gr", "clocks.current.graphics"),
    ("clocks.sm", "clocks.current.sm"),
    ("clocks.mem", "clocks.current.memory"),
    ("clocks.video", "clocks.current.video"),
    ("clocks.max.gr", "clocks.max.graphics"),
    ("clocks.max.mem", "clocks.max.memory"),
];

/// The one name a column goes by, whatever spelling produced it: drops a
/// ` [unit]` suffix, resolves aliases, and maps the old
/// `clocks_throttle_reasons` prefix to `clocks_event_reasons`.
pub fn canonical_field(name: &str) -> String {
    let name = name.trim();
    let name = match name.split_once(" [") {
        Some((field, unit)) if unit.ends_with(']') => field.trim(),
        _ => name,
    };
    if let Some(rest) = name.strip_prefix("clocks_throttle_reasons.") {
        return format!("clocks_event_reasons.{rest}");
    }
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canonical)| canonical)
        .to_string()
}

/// The fields of [`fields`] this driver knows, given its
/// `nvidia-smi --help-query-gpu` output. One unknown field fails the whole
/// query, so a field the help does not name is left out; the
/// clock-event fields fall back to the `clocks_throttle_reasons.*` spelling
/// when only that one is listed.
pub fn supported_fields(help_query_gpu_output: &str) -> Vec<&'static str> {
    // Field names are the quoted words on lines that start with a quote
    // (`"name" or "gpu_name"`). Descriptions quote values too ("Enabled"),
    // but those never equal a field we want.
    let known: HashSet<&str> = help_query_gpu_output
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('"'))
        .flat_map(|l| l.split('"').skip(1).step_by(2))
        .collect();
    fields()
        .chain(HEALTH_FIELDS.iter().copied())
        .filter_map(|field| {
            if known.contains(field) {
                return Some(field);
            }
            let reason = field.strip_prefix("clocks_event_reasons.")?;
            THROTTLE_FIELDS
                .iter()
                .copied()
                .find(|old| old.strip_prefix("clocks_throttle_reasons.") == Some(reason))
                .filter(|old| known.contains(old))
        })
        .collect()
}

fn cells(line: &str) -> Vec<&str> {
    line.split(',').map(str::trim).collect()
}

/// Whether a line reads as the CSV header: either exactly the queried
/// fields, or every cell shaped like a field name (a letter, then letters,
/// digits, `_` and `.`, then an optional ` [unit]`) with at least one
/// holding a `.` or being one of [`fields`]. Value rows fail this: numbers
/// start with a digit, names and UUIDs hold spaces or dashes, `[N/A]` a
/// bracket.
fn is_header(cells: &[&str], queried: &[&str]) -> bool {
    if !queried.is_empty()
        && cells.len() == queried.len()
        && cells
            .iter()
            .zip(queried)
            .all(|(c, q)| canonical_field(c) == canonical_field(q))
    {
        return true;
    }
    let name_shaped = |c: &str| {
        let name = match c.split_once(" [") {
            Some((n, u)) if u.ends_with(']') => n,
            _ => c,
        };
        let mut bytes = name.bytes();
        bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    };
    cells.iter().all(|c| name_shaped(c))
        && cells.iter().any(|c| {
            let c = canonical_field(c);
            c.contains('.')
                || fields()
                    .chain(HEALTH_FIELDS.iter().copied())
                    .any(|f| f == c)
        })
}

/// How rows of one GPU are recognised in `-l` loop output.
#[derive(PartialEq)]
enum Key {
    Index(u32),
    Uuid(String),
    Row(usize),
}

/// Parses `--query-gpu` CSV output into GPUs, with or without header and
/// units.
///
/// With a header, columns map by their (canonical) header name and
/// `queried` is not needed; without one, they map by `queried`, which must
/// then list exactly the fields asked for.
///
/// Loop output (`-l N`: one header, rows repeated) keeps the LAST row of
/// each GPU, the newest reading. Rows belong to the same GPU when they
/// share an `index` (else a `uuid`); with neither column every row is a
/// GPU of its own. GPUs come back sorted by index; without an `index`
/// column a GPU's index is its order of first appearance.
///
/// Structural problems (no rows, a row with the wrong number of values, an
/// unreadable index) are an `Err` of one line; an unreadable or missing
/// value leaves its reading `None`.
///
/// nvidia-smi's line for a GPU it cannot reach ("Unable to determine the
/// device handle for GPU 0000:0B:00.0: Unknown Error", see
/// [`unreachable`]) marks that GPU, not the node: it comes back as a GPU
/// with that bus id and `up == false`, after the GPUs that answered.
/// "No devices were found" is a fleet of none.
pub fn parse(csv: &str, queried: &[&str]) -> Result<Vec<Gpu>, String> {
    let Sorted {
        kept,
        lost,
        none_found,
    } = sort_lines(csv);
    let mut lines = kept.into_iter();
    let Some((first_no, first)) = lines.next() else {
        if none_found || !lost.is_empty() {
            return Ok(lost);
        }
        return Err("nvidia-smi printed nothing".into());
    };
    let first_cells = cells(first);
    let header = is_header(&first_cells, queried);
    let columns: Vec<String> = if header {
        first_cells.iter().map(|c| canonical_field(c)).collect()
    } else if queried.is_empty() {
        return Err("no CSV header and no queried field list to map the columns by".into());
    } else {
        queried.iter().map(|q| canonical_field(q)).collect()
    };
    let rows = (!header)
        .then_some((first_no, first))
        .into_iter()
        .chain(lines)
        // A repeated header (outputs of several runs concatenated) is no GPU.
        .filter(|(_, l)| !(header && *l == first));
    let row = Row::new(&columns);
    let mut gpus: Vec<(Key, Gpu)> = Vec::new();
    for (line_no, line) in rows {
        let values = cells(line);
        if values.len() != columns.len() {
            if values.len() == 1 {
                return Err(format!("line {line_no}: not CSV: {}", clip(line)));
            }
            return Err(format!(
                "line {line_no}: {} values for {} columns",
                values.len(),
                columns.len()
            ));
        }
        let (key, mut gpu) = row
            .gpu(&values, gpus.len())
            .map_err(|e| format!("line {line_no}: {e}"))?;
        match gpus.iter_mut().find(|(k, _)| *k == key) {
            Some((_, old)) => {
                gpu.index = old.index;
                *old = gpu;
            }
            None => gpus.push((key, gpu)),
        }
    }
    if gpus.is_empty() && lost.is_empty() && !none_found {
        return Err("nvidia-smi printed a header but no GPU rows".into());
    }
    let mut gpus: Vec<Gpu> = gpus.into_iter().map(|(_, g)| g).collect();
    gpus.sort_by_key(|g| g.index);
    gpus.extend(lost);
    Ok(gpus)
}

/// nvidia-smi's lines sorted: the CSV ones with their numbers, the GPUs
/// it could not reach, and whether it found no device at all.
struct Sorted<'a> {
    kept: Vec<(usize, &'a str)>,
    lost: Vec<Gpu>,
    none_found: bool,
}

fn sort_lines(csv: &str) -> Sorted<'_> {
    let mut lost = Vec::new();
    let mut none_found = false;
    let mut after_unreachable = false;
    let mut kept = Vec::new();
    for (i, l) in csv.lines().enumerate() {
        let l = l.trim_end_matches('\r');
        if l.trim().is_empty() {
            continue;
        }
        if let Some((bus, _)) = unreachable(l) {
            lost.push(Gpu {
                pci_bus_id: bus,
                ..Gpu::default()
            });
            after_unreachable = true;
            continue;
        }
        // A console that wrapped the message: its rest, with no comma.
        if after_unreachable && !l.contains(',') {
            continue;
        }
        after_unreachable = false;
        if l.trim() == NO_DEVICES {
            none_found = true;
            continue;
        }
        kept.push((i + 1, l));
    }
    Sorted {
        kept,
        lost,
        none_found,
    }
}

/// What nvidia-smi prints when the driver sees no GPU.
const NO_DEVICES: &str = "No devices were found";

/// A GPU nvidia-smi names as unreachable, and why: `Unable to determine the
/// device handle for GPU 0000:0B:00.0: Unknown Error`, in every spelling
/// seen (`GPU0000:…` without the space, `gpu` from `-L`, `GPU1: 0000:…`
/// with an index); the bus id normalised.
pub fn unreachable(line: &str) -> Option<(String, String)> {
    let rest = line
        .trim()
        .strip_prefix("Unable to determine the device handle for ")?;
    let rest = rest
        .strip_prefix("GPU")
        .or_else(|| rest.strip_prefix("gpu"))?
        .trim_start();
    let rest = match rest.split_once(": ") {
        Some((n, r)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => r,
        _ => rest,
    };
    let (bus, reason) = rest.split_once(": ")?;
    Some((normalize_bus_id(bus)?, clip(reason.trim())))
}

/// nvidia-smi's own message from a failed run: its non-empty lines (a CSV
/// header aside), stderr first, joined by `; `, at most 300 characters.
pub fn failure_message(stderr: &str, stdout: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !is_header(&cells(l), &[]))
        .collect();
    if lines.is_empty() {
        return "no message".into();
    }
    clip_to(&lines.join("; "), 300)
}

/// At most 120 characters of untrusted text, for an error message.
pub(super) fn clip(s: &str) -> String {
    clip_to(s, 120)
}

fn clip_to(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    out
}

/// Column positions of the fields a row turns into readings.
struct Row {
    index: Option<usize>,
    uuid: Option<usize>,
    name: Option<usize>,
    bus_id: Option<usize>,
    driver: Option<usize>,
    /// Each reading's own column, with the reading.
    plain: Vec<(usize, &'static Reading)>,
    mask: Option<usize>,
    /// `clocks_event_reasons.<reason>` columns, in bit order.
    reasons: [Option<usize>; 9],
    /// `clocks_event_reasons_counters.<reason>` columns, in bit order.
    counters: [Option<usize>; 9],
    enforced_limit: Option<usize>,
    limit: Option<usize>,
    health: HealthColumns,
}

impl Row {
    fn new(columns: &[String]) -> Row {
        let col = |name: &str| columns.iter().position(|c| c == name);
        Row {
            index: col("index"),
            uuid: col("uuid"),
            name: col("name"),
            bus_id: col("pci.bus_id"),
            driver: col("driver_version"),
            plain: readings::all()
                .filter(|r| !r.smi.is_empty())
                .filter_map(|r| Some((col(r.smi)?, r)))
                .collect(),
            mask: col("clocks_event_reasons.active"),
            reasons: CLOCK_EVENT_REASONS.map(|r| col(&format!("clocks_event_reasons.{r}"))),
            counters: CLOCK_EVENT_REASONS
                .map(|r| col(&format!("clocks_event_reasons_counters.{r}"))),
            enforced_limit: col("enforced.power.limit"),
            limit: col("power.limit"),
            health: HealthColumns::new(columns),
        }
    }

    fn gpu(&self, values: &[&str], position: usize) -> Result<(Key, Gpu), String> {
        let cell = |c: Option<usize>| c.and_then(|i| values.get(i)).copied();
        let text = |c: Option<usize>| {
            cell(c)
                .filter(|v| !is_missing(v))
                .unwrap_or_default()
                .to_string()
        };
        let num = |c: Option<usize>, unit: &str| cell(c).and_then(|v| parse_number(v, unit));
        let uuid = text(self.uuid);
        let (key, index) = match cell(self.index) {
            Some(v) => {
                let i = v
                    .parse::<u32>()
                    .map_err(|_| format!("index {:?} is not a GPU index", clip(v)))?;
                (Key::Index(i), i)
            }
            None if !uuid.is_empty() => (Key::Uuid(uuid.clone()), position as u32),
            None => (Key::Row(position), position as u32),
        };
        // The mask column when it reads; otherwise the per-reason columns,
        // when at least one of them reads.
        let from_reasons = self
            .reasons
            .iter()
            .zip(CLOCK_EVENT_REASONS)
            .filter_map(|(&c, r)| Some((parse_flag(cell(c)?)?, clock_event_bit(r)?)))
            .fold(None, |m: Option<u64>, (on, bit)| {
                Some(m.unwrap_or(0) | if on { bit } else { 0 })
            });
        let clocks_event_mask = cell(self.mask).and_then(parse_mask).or(from_reasons);
        let mut readings = Readings {
            clocks_event_mask,
            power_limit_watts: num(self.enforced_limit, "W").or(num(self.limit, "W")),
            clocks_event_seconds_total: self.counters.map(|c| num(c, "us").map(|v| v / 1e6)),
            ..Readings::default()
        };
        for &(c, r) in &self.plain {
            if let (Field::Value(v), Some((unit, to_ours))) =
                ((r.read.field)(&mut readings), smi_unit(r.family.unit))
            {
                *v = num(Some(c), unit).map(to_ours);
            }
        }
        let (vbios_version, inforom_version, health) = self.health.read(values);
        let readings = Readings { health, ..readings };
        let gpu = Gpu {
            index,
            uuid,
            model: text(self.name),
            pci_bus_id: text(self.bus_id),
            driver_version: text(self.driver),
            vbios_version,
            inforom_version,
            // Not a --query-gpu field.
            minor: None,
            up: true,
            readings,
            mig: Vec::new(),
            reads_late: 0,
        };
        Ok((key, gpu))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::smi::cell::parse_pstate;
    use base::fixture;

    const H100_IDLE: &str = fixture!("nvidia-smi", "querygpu_h100-80gb-hbm3_590.48.01_idle.csv");
    const H100_MIG: &str = fixture!(
        "nvidia-smi",
        "querygpu_h100-80gb-hbm3-MIG_590.48.01_load.csv"
    );
    const RTX4080: &str = fixture!("nvidia-smi", "querygpu_rtx4080super_595.71.05_load.csv");
    const RTX2080S_WIN: &str = fixture!(
        "nvidia-smi",
        "querygpu_rtx2080super_windows-wddm_610.62_idle.csv"
    );
    const THROTTLE: &str = fixture!(
        "nvidia-smi",
        "querygpu_rtx2080super_465.27_throttle-naming.csv"
    );
    const P100: &str = fixture!(
        "nvidia-smi",
        "querygpu_tesla-p100-pcie-16gb_csv-nounits_netdata.csv"
    );
    const V100_LOOP: &str = fixture!(
        "nvidia-smi",
        "querygpu_v100-32gb_loop-l5_aau-aicloud-docs.csv"
    );
    const GTX770: &str = fixture!(
        "nvidia-smi",
        "querygpu_gtx770_windows_noheader_not-supported_Megaminer-235.csv"
    );
    const I3_NA: &str = fixture!(
        "nvidia-smi",
        "querygpu_unknown-2GB_noheader-nounits_NA_i3pystatus-776.csv"
    );
    const I3_NS: &str = fixture!(
        "nvidia-smi",
        "querygpu_unknown-2GB_noheader-nounits_not-supported-olddriver_i3pystatus-776.csv"
    );
    const MINDMINER: &str = fixture!(
        "nvidia-smi",
        "querygpu_rtx2080ti_windows-442.19_nounits_unknown-error_MindMiner-627.csv"
    );
    const GPU_UTILS: &str = fixture!(
        "nvidia-smi",
        "querygpu_rtx2080_440.64_noheader-nounits_bare-NA_gpu-utils-83.csv"
    );

    // Queried field lists of the headerless fixtures, from SOURCES.md.
    const GTX770_FIELDS: &[&str] = &[
        "gpu_name",
        "utilization.gpu",
        "utilization.memory",
        "temperature.gpu",
        "power.draw",
        "power.limit",
        "fan.speed",
        "pstate",
        "clocks.current.graphics",
        "clocks.current.memory",
        "power.max_limit",
        "power.default_limit",
    ];
    const I3_FIELDS: &[&str] = &[
        "memory.total",
        "memory.free",
        "memory.used",
        "temperature.gpu",
        "fan.speed",
        "utilization.gpu",
        "utilization.memory",
    ];
    const GPU_UTILS_FIELDS: &[&str] = &[
        "power.limit",
        "power.min_limit",
        "power.max_limit",
        "memory.total",
        "vbios_version",
        "driver_version",
        "name",
        "gpu_uuid",
        "power.draw",
        "temperature.gpu",
        "temperature.memory",
        "clocks.current.graphics",
        "clocks.sm",
        "clocks.mem",
        "utilization.gpu",
        "utilization.memory",
        "fan.speed",
        "pcie.link.width.current",
        "pstate",
    ];

    const GTX1080TI_8X: &str = fixture!(
        "nvidia-smi",
        "querygpu_8x-gtx1080ti_noheader_one-unknown-error-cell_Megaminer-376.csv"
    );
    const H100L_VGPU: &str = fixture!(
        "nvidia-smi",
        "querygpu_h100l-2-24c_noheader-nounits_NA-clock_prmon-317.csv"
    );
    const PRMON_FIELDS: &[&str] = &["clocks.max.sm", "memory.total", "gpu_name"];

    /// nvidia-smi's failure outputs (FAILURES) and the message the source
    /// quotes from each.
    const FAILURES: &[(&str, &str)] = &[
        (
            fixture!("nvidia-smi", "nodriver_535.309.01_query-gpu_exit9.stdout"),
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
             Make sure that the latest NVIDIA driver is installed and running.",
        ),
        (
            fixture!("nvidia-smi", "nodriver_couldnt-communicate_nvml-fix-36.txt"),
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. \
             Make sure that the latest NVIDIA driver is installed and running.",
        ),
        (
            fixture!("nvidia-smi", "nolib_535.309.01_plain_exit12.stdout"),
            "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure \
             that the NVIDIA Display Driver is properly installed and present in your system.; \
             Please also try adding directory that contains libnvidia-ml.so to your system PATH.",
        ),
        (
            fixture!(
                "nvidia-smi",
                "mismatch_535.161_two-line_exit18_gputil-55.txt"
            ),
            "Failed to initialize NVML: Driver/library version mismatch; NVML library version: 535.161",
        ),
        (
            fixture!(
                "nvidia-smi",
                "mismatch_570.124_two-line_tinygrad-ogkm-47.txt"
            ),
            "Failed to initialize NVML: Driver/library version mismatch; NVML library version: 570.124",
        ),
        (
            fixture!("nvidia-smi", "mismatch_one-line_shine-cluster-30.txt"),
            "Failed to initialize NVML: Driver/library version mismatch",
        ),
    ];

    /// nvidia-smi naming one GPU it cannot reach: the bus id and reason.
    const UNREACHABLE: &[(&str, &str, &str)] = &[
        (
            fixture!(
                "nvidia-smi",
                "devhandle_unknown-error_old-format_xxd3vin-workspace-19.txt"
            ),
            "00000000:0B:00.0",
            "Unknown Error",
        ),
        (
            fixture!(
                "nvidia-smi",
                "devhandle_unknown-error_old-format_a-i0_nvidia-docker-1553.txt"
            ),
            "00000000:09:00.0",
            "Unknown Error",
        ),
        (
            fixture!(
                "nvidia-smi",
                "devhandle_unknown-error_no-space_syno-nvidia-22.txt"
            ),
            "00000000:07:00.0",
            "Unknown Error",
        ),
        (
            fixture!(
                "nvidia-smi",
                "devhandle_unknown-error_list-L-lowercase_gpustat-125.txt"
            ),
            "00000000:08:00.0",
            "Unknown Error",
        ),
        (
            fixture!("nvidia-smi", "devhandle_gpu-is-lost_OWOD-81.txt"),
            "00000000:02:00.0",
            "GPU is lost. Reboot the system to recover this GPU",
        ),
        (
            fixture!(
                "nvidia-smi",
                "devhandle_gpu-is-lost_windows-wrapped_darknet-86.txt"
            ),
            "00000000:03:00.0",
            "GPU is lost.  Reboot",
        ),
    ];

    const NO_DEVICES_FOUND: &str = fixture!("nvidia-smi", "no-devices-found_singuconda-6.txt");

    /// Every `--query-gpu` fixture in tests/fixtures/nvidia-smi, with the
    /// field list to give `parse` (empty where the file has a header).
    const ALL: &[(&str, &str, &[&str])] = &[
        ("h100 idle", H100_IDLE, &[]),
        ("h100 mig", H100_MIG, &[]),
        ("rtx4080", RTX4080, &[]),
        ("rtx2080s windows", RTX2080S_WIN, &[]),
        ("throttle naming", THROTTLE, &[]),
        ("p100", P100, &[]),
        ("v100 loop", V100_LOOP, &[]),
        ("gtx770", GTX770, GTX770_FIELDS),
        ("i3 N/A", I3_NA, I3_FIELDS),
        ("i3 not supported", I3_NS, I3_FIELDS),
        ("mindminer", MINDMINER, &[]),
        ("gpu-utils", GPU_UTILS, GPU_UTILS_FIELDS),
        ("8x gtx1080ti", GTX1080TI_8X, GTX770_FIELDS),
        ("h100l vgpu", H100L_VGPU, PRMON_FIELDS),
    ];

    fn one(csv: &str, queried: &[&str]) -> Gpu {
        let mut gpus = parse(csv, queried).unwrap();
        assert_eq!(gpus.len(), 1);
        gpus.remove(0)
    }

    #[test]
    fn every_fixture_parses() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/nvidia-smi"
        );
        // The --query-compute-apps captures are apps.rs's.
        let on_disk = std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                !e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("computeapps_")
            })
            .count();
        assert_eq!(
            on_disk,
            ALL.len() + FAILURES.len() + UNREACHABLE.len() + 1,
            "a fixture file is in no list"
        );
        for (what, csv, queried) in ALL {
            let gpus = parse(csv, queried).unwrap_or_else(|e| panic!("{what}: {e}"));
            let want = if *what == "8x gtx1080ti" { 8 } else { 1 };
            assert_eq!(gpus.len(), want, "{what}");
            assert!(gpus.iter().all(|g| g.up), "{what}");
            assert_eq!(gpus[0].readings.xid_errors, None, "{what}");
        }
        // One GPU's [Unknown Error] fan cell leaves only that reading out.
        let gpus = parse(GTX1080TI_8X, GTX770_FIELDS).unwrap();
        assert_eq!(gpus[0].readings.temperature_celsius, Some(84.0));
        assert_eq!(gpus[7].model, "GeForce GTX 1080");
        assert_eq!(gpus[7].index, 7);
        // A vGPU's [N/A] max clock.
        let g = one(H100L_VGPU, PRMON_FIELDS);
        assert_eq!(g.readings.sm_clock_max_hertz, None);
        assert_eq!(g.readings.memory_total_bytes, Some(24576.0 * MIB));
    }

    #[test]
    fn nvidia_smi_failures_are_quoted_in_its_own_words() {
        for (out, want) in FAILURES {
            assert_eq!(failure_message("", out), *want);
            // None of them is a fleet.
            assert!(parse(out, &["index", "uuid"]).is_err(), "{out}");
        }
        // A CSV header before the message is not the message.
        let out = "index, uuid\nFailed to initialize NVML: Unknown Error\n";
        assert_eq!(
            failure_message("", out),
            "Failed to initialize NVML: Unknown Error"
        );
        assert_eq!(failure_message("", ""), "no message");
        assert_eq!(failure_message("on stderr\n", "\n"), "on stderr");
        assert!(failure_message("", &"x".repeat(1000)).len() < 310);
    }

    #[test]
    fn a_gpu_nvidia_smi_cannot_reach_is_that_gpu_lost_not_the_node() {
        for (out, bus, why) in UNREACHABLE {
            assert_eq!(
                unreachable(out.lines().next().unwrap()),
                Some((bus.to_string(), why.to_string()))
            );
            let gpus = parse(out, &["index", "uuid"]).unwrap();
            assert_eq!(gpus.len(), 1, "{out}");
            assert!(!gpus[0].up);
            assert_eq!(gpus[0].pci_bus_id, *bus);
        }
        // With the index form, among the other GPUs' rows.
        let csv = "index, uuid, pci.bus_id\n0, GPU-a, 00000000:33:00.0\n\
                   Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n\
                   2, GPU-c, 00000000:35:00.0\n";
        let gpus = parse(csv, &[]).unwrap();
        let got: Vec<_> = gpus
            .iter()
            .map(|g| (g.uuid.as_str(), g.pci_bus_id.as_str(), g.up))
            .collect();
        assert_eq!(
            got,
            [
                ("GPU-a", "00000000:33:00.0", true),
                ("GPU-c", "00000000:35:00.0", true),
                ("", "00000000:34:00.0", false)
            ]
        );
        // No driver-side GPU at all: an empty fleet, not an error.
        assert_eq!(parse(NO_DEVICES_FOUND, &["index", "uuid"]), Ok(Vec::new()));
    }

    #[test]
    fn h100_idle_reads_every_field() {
        let g = one(H100_IDLE, &[]);
        assert_eq!(g.index, 0);
        assert_eq!(g.model, "NVIDIA H100 80GB HBM3");
        assert_eq!(g.uuid, "GPU-00000000-0000-0000-0000-000000000000");
        assert_eq!(g.pci_bus_id, "00000000:00:09.0");
        assert_eq!(g.driver_version, "590.48.01");
        let r = &g.readings;
        assert_eq!(r.temperature_celsius, Some(41.0));
        assert_eq!(r.memory_temperature_celsius, Some(48.0));
        assert_eq!(r.sm_clock_hertz, Some(345e6));
        assert_eq!(r.sm_clock_max_hertz, Some(1980e6));
        assert_eq!(r.memory_clock_hertz, Some(2619e6));
        assert_eq!(r.clocks_event_mask, Some(0x1));
        assert_eq!(r.throttled(), Some(false));
        assert_eq!(r.power_usage_watts, Some(69.85));
        assert_eq!(r.power_limit_watts, Some(700.0));
        assert_eq!(r.utilization_ratio, Some(0.0));
        assert_eq!(r.memory_total_bytes, Some(81559.0 * MIB));
        assert_eq!(r.memory_total_bytes, Some(85_520_809_984.0));
        assert_eq!(r.memory_used_bytes, Some(0.0));
        assert_eq!(r.memory_free_bytes, Some(81081.0 * MIB));
        assert_eq!(r.memory_reserved_bytes, Some(479.0 * MIB));
        assert_eq!(r.ecc_corrected_total, Some(0.0));
        assert_eq!(r.ecc_uncorrected_total, Some(0.0));
        // Counters exist for sw_power_cap, sync_boost, sw/hw thermal and
        // power brake only.
        let have: Vec<bool> = r
            .clocks_event_seconds_total
            .iter()
            .map(Option::is_some)
            .collect();
        assert_eq!(
            have,
            [false, false, true, false, true, true, true, true, false]
        );
        assert_eq!(r.clocks_event_seconds_total[2], Some(0.0));
    }

    #[test]
    fn mig_and_consumer_cards() {
        let g = one(H100_MIG, &[]);
        // utilization.gpu and .memory are [N/A] under MIG.
        assert_eq!(g.readings.utilization_ratio, None);
        assert_eq!(g.readings.memory_utilization_ratio, None);
        assert_eq!(g.readings.temperature_celsius, Some(53.0));
        assert_eq!(g.readings.memory_used_bytes, Some(11125.0 * MIB));
        assert_eq!(g.readings.power_usage_watts, Some(433.78));
        assert_eq!(g.readings.clocks_event_mask, Some(0));

        let g = one(RTX4080, &[]);
        assert_eq!(g.model, "NVIDIA GeForce RTX 4080 SUPER");
        assert_eq!(g.readings.utilization_ratio, Some(0.07));
        assert_eq!(g.readings.memory_utilization_ratio, Some(0.02));
        assert_eq!(g.readings.memory_temperature_celsius, None); // bare N/A
        assert_eq!(g.readings.ecc_corrected_total, None); // [N/A]
        assert_eq!(g.readings.memory_clock_hertz, Some(11251e6));
        assert_eq!(g.readings.sm_clock_max_hertz, Some(3165e6));

        let g = one(RTX2080S_WIN, &[]);
        assert_eq!(g.readings.memory_total_bytes, Some(8192.0 * MIB));
        assert_eq!(g.readings.temperature_celsius, Some(40.0));
        assert_eq!(g.readings.clocks_event_mask, Some(0x1));
    }

    #[test]
    fn old_throttle_naming() {
        let g = one(THROTTLE, &[]);
        assert_eq!(g.driver_version, "465.27");
        assert_eq!(g.readings.clocks_event_mask, Some(0x1));
        assert_eq!(g.readings.temperature_celsius, Some(32.0));
        assert_eq!(g.readings.memory_temperature_celsius, None);
        assert_eq!(g.readings.memory_total_bytes, Some(7979.0 * MIB));
        assert_eq!(g.readings.power_limit_watts, Some(250.0));
        assert_eq!(g.readings.ecc_uncorrected_total, None);
        assert_eq!(g.readings.clocks_event_seconds_total, [None; 9]);

        // Per-reason columns in the old spelling build the mask too.
        let csv = "index, clocks_throttle_reasons.gpu_idle, clocks_throttle_reasons.hw_slowdown\n\
                   0, Not Active, Active\n";
        assert_eq!(one(csv, &[]).readings.clocks_event_mask, Some(0x8));
    }

    #[test]
    fn headerless_fixtures_map_by_the_queried_list() {
        let g = one(GPU_UTILS, GPU_UTILS_FIELDS);
        assert_eq!(g.model, "GeForce RTX 2080");
        assert_eq!(g.uuid, "GPU-22b2c6ac-2d49-4863-197c-9c469071178a");
        assert_eq!(g.driver_version, "440.64");
        assert_eq!(g.readings.power_limit_watts, Some(200.0));
        assert_eq!(g.readings.memory_total_bytes, Some(7979.0 * MIB));
        assert_eq!(g.readings.power_usage_watts, Some(176.98));
        assert_eq!(g.readings.temperature_celsius, Some(45.0));
        assert_eq!(g.readings.memory_temperature_celsius, None);
        // Aliases clocks.sm and clocks.mem.
        assert_eq!(g.readings.sm_clock_hertz, Some(1965e6));
        assert_eq!(g.readings.memory_clock_hertz, Some(7199e6));
        assert_eq!(g.readings.utilization_ratio, Some(0.86));

        let g = one(GTX770, GTX770_FIELDS);
        assert_eq!(g.index, 0);
        assert_eq!(g.model, "GeForce GTX 770");
        assert_eq!(g.readings.utilization_ratio, None); // [Not Supported]
        assert_eq!(g.readings.power_usage_watts, None);
        assert_eq!(g.readings.temperature_celsius, Some(52.0));
        assert_eq!(g.readings.memory_clock_hertz, None);

        for csv in [I3_NA, I3_NS] {
            let g = one(csv, I3_FIELDS);
            assert_eq!(g.readings.memory_total_bytes, Some(2004.0 * MIB));
            assert_eq!(g.readings.memory_free_bytes, Some(2004.0 * MIB));
            assert_eq!(g.readings.memory_used_bytes, Some(0.0));
            assert_eq!(g.readings.temperature_celsius, Some(44.0));
            assert_eq!(g.readings.utilization_ratio, Some(0.0));
        }

        // Word-like values are not mistaken for a header.
        let g = one("P0, Enabled\n", &["pstate", "display_mode"]);
        assert_eq!(g.index, 0);
        let g = one("3, 45\n", &["index", "temperature.gpu"]);
        assert_eq!((g.index, g.readings.temperature_celsius), (3, Some(45.0)));

        // Without the list there is nothing to map the columns by.
        assert!(parse(GPU_UTILS, &[]).unwrap_err().contains("no CSV header"));
        // A wrong list is caught by the column count.
        assert!(
            parse(GPU_UTILS, I3_FIELDS)
                .unwrap_err()
                .contains("19 values for 7 columns")
        );
    }

    #[test]
    fn nounits_header_and_odd_layouts() {
        // nounits, no trailing newline, no index column.
        let g = one(P100, &[]);
        assert_eq!(g.index, 0);
        assert_eq!(g.model, "Tesla P100-PCIE-16GB");
        assert_eq!(g.readings.memory_reserved_bytes, Some(103.0 * MIB));
        assert_eq!(g.readings.memory_total_bytes, None); // not queried
        assert_eq!(g.readings.temperature_celsius, Some(37.0));
        assert_eq!(g.readings.sm_clock_hertz, Some(405e6));
        assert_eq!(g.readings.power_usage_watts, Some(28.16));

        // A blank line after the header; [Unknown Error] in a column we skip.
        let g = one(MINDMINER, &[]);
        assert_eq!(g.model, "GeForce RTX 2080 Ti");
        assert_eq!(g.readings.utilization_ratio, Some(1.0));
        assert_eq!(g.readings.power_limit_watts, Some(210.0));
        assert_eq!(g.readings.memory_clock_hertz, Some(6800e6));
    }

    #[test]
    fn loop_output_keeps_the_last_row_per_gpu() {
        let g = one(V100_LOOP, &[]);
        assert_eq!(g.readings.utilization_ratio, Some(0.98));
        assert_eq!(g.readings.memory_total_bytes, Some(32480.0 * MIB));
        assert_eq!(g.readings.memory_used_bytes, Some(30994.0 * MIB));

        let csv = "index, temperature.gpu, memory.total [MiB]\n\
                   1, 50, 100 MiB\n0, 40, 100 MiB\n1, 51, 100 MiB\n\
                   index, temperature.gpu, memory.total [MiB]\n0, 41, [N/A]\n";
        let gpus = parse(csv, &[]).unwrap();
        let got: Vec<_> = gpus
            .iter()
            .map(|g| {
                (
                    g.index,
                    g.readings.temperature_celsius,
                    g.readings.memory_total_bytes,
                )
            })
            .collect();
        assert_eq!(
            got,
            [(0, Some(41.0), None), (1, Some(51.0), Some(100.0 * MIB))]
        );

        // No index: rows of one uuid are one GPU, indexed by first sighting.
        let csv = "uuid, temperature.gpu\nGPU-a, 1\nGPU-b, 2\nGPU-a, 3\n";
        let got: Vec<_> = parse(csv, &[])
            .unwrap()
            .iter()
            .map(|g| (g.index, g.uuid.clone(), g.readings.temperature_celsius))
            .collect();
        assert_eq!(
            got,
            [
                (0, "GPU-a".into(), Some(3.0)),
                (1, "GPU-b".into(), Some(2.0))
            ]
        );
    }

    #[test]
    fn header_aliases_and_units() {
        let csv = "gpu_name, gpu_uuid, gpu_bus_id, clocks.sm [MHz], clocks.mem [MHz], \
                   utilization.gpu [%], utilization.memory [%], power.draw [W], temperature.gpu\n\
                   NVIDIA A100, GPU-x, 00000000:3B:00.0, 1410 MHz, 1215 MHz, 35 %, 12 %, 250.00 W, 45 C\r\n";
        let g = one(csv, &[]);
        assert_eq!(g.model, "NVIDIA A100");
        assert_eq!(g.uuid, "GPU-x");
        assert_eq!(g.pci_bus_id, "00000000:3B:00.0");
        assert_eq!(g.readings.sm_clock_hertz, Some(1410e6));
        assert_eq!(g.readings.memory_clock_hertz, Some(1215e6));
        assert_eq!(g.readings.utilization_ratio, Some(0.35));
        assert_eq!(g.readings.memory_utilization_ratio, Some(0.12));
        assert_eq!(g.readings.power_usage_watts, Some(250.0));
        assert_eq!(g.readings.temperature_celsius, Some(45.0));
    }

    #[test]
    fn clock_event_mask_sources() {
        // From the per-reason columns when there is no mask column.
        let csv = "index, clocks_event_reasons.hw_slowdown, clocks_event_reasons.sw_thermal_slowdown, \
                   clocks_event_reasons.gpu_idle\n0, Active, Active, Not Active\n";
        let r = one(csv, &[]).readings;
        assert_eq!(r.clocks_event_mask, Some(0x28));
        assert_eq!(r.throttled(), Some(true));
        // The mask column wins when it reads; reasons fill in when it does not.
        let csv = "index, clocks_event_reasons.active, clocks_event_reasons.hw_slowdown\n\
                   0, 0x0000000000000040, Not Active\n1, [N/A], Active\n2, [N/A], [N/A]\n";
        let masks: Vec<_> = parse(csv, &[])
            .unwrap()
            .iter()
            .map(|g| g.readings.clocks_event_mask)
            .collect();
        assert_eq!(masks, [Some(0x40), Some(0x8), None]);
    }

    #[test]
    fn missing_value_spellings_are_none() {
        for missing in [
            "[N/A]",
            "N/A",
            "[Not Supported]",
            "[Insufficient Permissions]",
            "[Unknown Error]",
            "[Function Not Found]",
            "[Requested functionality has been deprecated]",
            "",
        ] {
            let csv = format!(
                "index, temperature.gpu, clocks_event_reasons.active, name\n0, {missing}, {missing}, {missing}\n"
            );
            let g = one(&csv, &[]);
            assert_eq!(g.readings.temperature_celsius, None, "{missing}");
            assert_eq!(g.readings.clocks_event_mask, None, "{missing}");
            assert_eq!(g.model, "", "{missing}");
        }
    }

    #[test]
    fn value_helpers() {
        assert_eq!(parse_number("250.00 W", "W"), Some(250.0));
        assert_eq!(parse_number("250.00", "W"), Some(250.0));
        assert_eq!(parse_number("250.00 MHz", "W"), None);
        assert_eq!(parse_number("-5 C", "C"), Some(-5.0));
        for bad in ["inf", "NaN", "1e999", "12abc", "0x10", "W", " ", "1 2 W"] {
            assert_eq!(parse_number(bad, "W"), None, "{bad}");
        }
        assert_eq!(parse_mask("0x0000000000000040"), Some(0x40));
        assert_eq!(parse_mask("0x00000000000001FF"), Some(0x1ff));
        for bad in ["0x", "40", "0x00000000000000040", "0xZZ", "0x-1", "[N/A]"] {
            assert_eq!(parse_mask(bad), None, "{bad}");
        }
        assert_eq!(parse_flag("Enabled"), Some(true));
        assert_eq!(parse_flag("Disabled"), Some(false));
        assert_eq!(parse_flag("Yes"), Some(true));
        assert_eq!(parse_flag("No"), Some(false));
        assert_eq!(parse_flag("Active"), Some(true));
        assert_eq!(parse_flag("Not Active"), Some(false));
        assert_eq!(parse_flag("[N/A]"), None);
        assert_eq!(parse_pstate("P0"), Some(0));
        assert_eq!(parse_pstate("P8"), Some(8));
        assert_eq!(parse_pstate("P12"), Some(12));
        for bad in ["P", "P16", "P-1", "P+1", "P123", "8", "[N/A]", "p0"] {
            assert_eq!(parse_pstate(bad), None, "{bad}");
        }
    }

    #[test]
    fn structural_errors_are_one_line() {
        let cases: &[(&str, &[&str], &str)] = &[
            ("", &[], "printed nothing"),
            ("\n\r\n  \n", &[], "printed nothing"),
            ("index, temperature.gpu\n", &[], "no GPU rows"),
            (
                "index, temperature.gpu\n0, 1, 2\n",
                &[],
                "line 2: 3 values for 2 columns",
            ),
            (
                "No GPU was found\n",
                &["index", "uuid"],
                "line 1: not CSV: No GPU was found",
            ),
            (
                "\n\n0, GPU-a, 1\n",
                &["index", "uuid"],
                "line 3: 3 values for 2 columns",
            ),
            (
                "index, temperature.gpu\nx, 40\n",
                &[],
                "line 2: index \"x\" is not a GPU index",
            ),
            (
                "index, temperature.gpu\n-1, 40\n",
                &[],
                "is not a GPU index",
            ),
            ("\u{0}\u{1}garbage\u{7f}", &[], "no CSV header"),
        ];
        for (csv, queried, want) in cases {
            let e = parse(csv, queried).unwrap_err();
            assert!(e.contains(want), "{csv:?}: {e}");
            assert!(!e.contains('\n'), "{csv:?}: {e}");
        }
        let long = format!("{}\n", "é".repeat(500));
        let e = parse(&long, &["index", "uuid"]).unwrap_err();
        assert!(e.len() < 400, "{e}");
    }

    #[test]
    fn never_panics_on_cut_or_mangled_fixtures() {
        for (_, csv, queried) in ALL {
            let cuts = csv.char_indices().map(|(i, _)| i).step_by(3);
            for cut in cuts {
                let _ = parse(&csv[..cut], queried);
                let _ = parse(&csv[cut..], queried);
                let _ = parse(&csv[cut..], &[]);
            }
            let mangled: String = csv
                .chars()
                .enumerate()
                .map(|(i, c)| match i % 11 {
                    0 => ',',
                    5 => '[',
                    7 => '\u{2603}',
                    _ => c,
                })
                .collect();
            let _ = parse(&mangled, queried);
        }
    }

    const HELP_NEW: &str = r#"List of valid properties to query for the switch "--query-gpu":

"index"
Zero based index of the GPU. Can change at each boot.

"name" or "gpu_name"
The official product name of the GPU.

"display_mode"
"Enabled" indicates an attached display. "Disabled" indicates otherwise.

"clocks_event_reasons.active" or "clocks_throttle_reasons.active"
Bitmask of active clock event reasons.

"clocks_event_reasons.hw_slowdown" or "clocks_throttle_reasons.hw_slowdown"
HW Slowdown is engaged.

"temperature.gpu"
 Core GPU temperature. in degrees C.
"#;

    pub(crate) const HELP_OLD: &str = r#"List of valid properties to query for the switch "--query-gpu=":

"index"
Zero based index of the GPU.

"clocks_throttle_reasons.active"
Bitmask of active clock throttle reasons.

"clocks_throttle_reasons.sw_thermal_slowdown"
SW Thermal capping algorithm is reducing clocks.

"memory.total"
Total installed GPU memory.
"#;

    /// A reading's column is asked for once, in a unit nvidia-smi prints,
    /// and read into that reading: every column of the H100 capture that
    /// is a reading's gives it a value.
    #[test]
    fn each_readings_column_is_read_into_it() {
        let mut asked: Vec<&str> = fields().chain(HEALTH_FIELDS.iter().copied()).collect();
        let n = asked.len();
        asked.sort_unstable();
        asked.dedup();
        assert_eq!(asked.len(), n, "a column asked for twice");
        for (family, _) in SHARED {
            let r = readings::all().find(|r| r.family.name == family);
            assert!(r.is_some_and(|r| r.smi.is_empty()), "{family}");
        }
        let header: Vec<String> = cells(H100_IDLE.lines().next().unwrap())
            .iter()
            .map(|c| canonical_field(c))
            .collect();
        let mut g = one(H100_IDLE, &[]);
        let mut read = 0;
        for r in readings::all().filter(|r| !r.smi.is_empty()) {
            assert!(smi_unit(r.family.unit).is_some(), "{}", r.family.name);
            let in_header = header.iter().any(|c| c == r.smi);
            match (r.read.field)(&mut g.readings) {
                Field::Value(v) => assert_eq!(v.is_some(), in_header, "{}", r.family.name),
                _ => panic!("{}: not one value", r.family.name),
            }
            read += usize::from(in_header);
        }
        assert!(read >= 10, "{read}");
    }

    #[test]
    fn supported_fields_follow_the_driver() {
        // In FIELDS order; "display_mode" and the quoted values are not ours.
        assert_eq!(
            supported_fields(HELP_NEW),
            [
                "index",
                "name",
                "temperature.gpu",
                "clocks_event_reasons.active",
                "clocks_event_reasons.hw_slowdown"
            ]
        );
        assert_eq!(
            supported_fields(HELP_OLD),
            [
                "index",
                "clocks_throttle_reasons.active",
                "clocks_throttle_reasons.sw_thermal_slowdown",
                "memory.total"
            ]
        );
        assert_eq!(supported_fields(""), Vec::<&str>::new());
        assert_eq!(
            supported_fields("\"Enabled\"\n\"0: Default\"\n"),
            Vec::<&str>::new()
        );
    }
}
