//! dcgm-exporter's counters file (`--compat.dcgm-counters`, the file it
//! takes with `-f`): one `DCGM FIELD, type, help` a line, `#` comments.
//! It is read as dcgm-exporter reads it: every DCGM field name (and
//! go-dcgm's legacy lowercase names, `names.rs`) is accepted, so a file
//! it runs never stops us; a field we cannot serve is one log line and
//! left out. Only a name that is no DCGM field, a type that is none or a
//! malformed line is an error. Which of our readings each served field
//! shows, and its unit, is the `dcgm` collector's (`exposition::dcgm`).

pub mod names;
mod native;
pub mod prof;
mod table;

pub use native::Native;
pub use table::FIELDS;

use crate::readings::{self, Reading};
use crate::{Collector, Collectors};

/// A dcgm-exporter field we know by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// A reading whose declaration names the field ([`Face`]).
    Reading(&'static Reading),
    EncUtil,
    DecUtil,
    XidErrors,
    UncorrectableRemapped,
    CorrectableRemapped,
    DriverVersion,
    DevName,
    DevUuid,
    PciBusId,
    VbiosVersion,
    InforomImage,
    /// A profiling field: the GPM metric that gives it ([`prof::PROF`]).
    Prof(u32),
    RetiredSbe,
    RetiredDbe,
    NvlinkCrcFlit,
    NvlinkCrcData,
    NvlinkReplay,
    NvlinkRecovery,
    PowerViolation,
    ThermalViolation,
    SyncBoostViolation,
    FanSpeed,
    ClocksEventReasons,
    XidCount,
    /// Known, but nothing of ours shows it.
    Unservable,
}

impl Field {
    /// How dcgm-exporter prints it: a reading's as its face says, the
    /// profiling fields as read (the byte rates are whole where they were
    /// read), the rest (counts, %, ns) rounded.
    pub fn whole(self) -> Whole {
        match self {
            Field::Reading(r) => r.dcgm.map_or(Whole::Round, |f| f.whole),
            Field::Prof(_) => Whole::AsRead,
            _ => Whole::Round,
        }
    }

    /// A string, served only as a label on the other series.
    pub fn is_label(self) -> bool {
        use Field::*;
        matches!(
            self,
            DriverVersion | DevName | DevUuid | PciBusId | VbiosVersion | InforomImage
        )
    }
}

/// How a reading shows as a dcgm-exporter field, in its declaration
/// (`Reading::dcgm`): the field, its unit from ours, how it is printed,
/// and what a MIG instance's series shows.
#[derive(Clone, Copy, Debug)]
pub struct Face {
    pub field: &'static str,
    pub unit: Unit,
    pub whole: Whole,
    pub mig: Mig,
}

/// The field `field` in `unit`, printed whole (rounded), on a MIG
/// instance its GPU's reading.
pub const fn face(field: &'static str, unit: Unit) -> Face {
    Face {
        field,
        unit,
        whole: Whole::Round,
        mig: Mig::Gpu,
    }
}

impl Face {
    pub const fn whole(mut self, whole: Whole) -> Face {
        self.whole = whole;
        self
    }

    pub const fn on_mig(mut self, mig: Mig) -> Face {
        self.mig = mig;
        self
    }
}

/// dcgm-exporter's unit, from ours: the same, MHz from Hz, MiB from
/// bytes, % from a ratio, mJ from J. A byte each in the reading table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Same,
    Mhz,
    Mib,
    Percent,
    Millijoules,
}

impl Unit {
    pub fn of(self, v: f64) -> f64 {
        match self {
            Unit::Same => v,
            Unit::Mhz => v / 1e6,
            Unit::Mib => v / (1024.0 * 1024.0),
            Unit::Percent => v * 100.0,
            Unit::Millijoules => v * 1000.0,
        }
    }

    /// [`Unit::of`] in PromQL, after our value.
    pub fn promql(self) -> &'static str {
        match self {
            Unit::Same => "",
            Unit::Mhz => " / 1e6",
            Unit::Mib => " / 1048576",
            Unit::Percent => " * 100",
            Unit::Millijoules => " * 1000",
        }
    }
}

/// How dcgm-exporter prints a field: DCGM's integer fields as integers
/// (its MiB are whole, cut down as DCGM divides; the rest are NVML's
/// integers that our units carried through a float), the others as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whole {
    Round,
    Floor,
    AsRead,
}

/// What a MIG instance's series of a field shows: its own reading, its
/// GPU's (the device-wide fields, as DCGM gives them), or none (the whole
/// GPU's utilizations).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mig {
    Own,
    Gpu,
    None,
}

/// How we serve a field: from a collector's readings, or not, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serve {
    By(Collector),
    Not(&'static str),
}

/// Each profiling field's name hash, then its GPM metric, worked out at
/// compile time: the names stay out of the binary.
static PROF_HASHES: [u32; prof::PROF.len()] = {
    let mut out = [0; prof::PROF.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = names::hash(prof::PROF[i].field);
        i += 1;
    }
    out
};
static PROF_IDS: [u8; prof::PROF.len()] = {
    let mut out = [0; prof::PROF.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = prof::PROF[i].gpm as u8;
        i += 1;
    }
    out
};

/// dcgm-exporter's `etc/default-counters.csv`, the file without `-f`.
pub const DEFAULT_COUNTERS: &str = include_str!("dcgm-default-counters.csv");

/// A counters file's type column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Gauge,
    Counter,
    Label,
}

/// One field a counters file asks for that we serve, under the name the
/// file gives (a legacy name stays legacy).
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    pub name: String,
    pub field: Field,
    pub kind: Kind,
    pub collector: Collector,
    pub help: String,
}

/// The dcgm collector's settings: the fields served, the fields left out
/// (with why), what the file got wrong without stopping us, and the host
/// label.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Dcgm {
    pub fields: Vec<Wanted>,
    pub left_out: Vec<(String, String)>,
    /// Said once at start, as warnings.
    pub warnings: Vec<String>,
    /// The host label's value, `None` to leave it out
    /// (`--compat.dcgm-no-hostname`, dcgm-exporter's `-n`).
    pub hostname: Option<String>,
    /// Spell it `hostname`, as dcgm-exporter's unreleased main does; every
    /// release prints `Hostname` (`--compat.dcgm-lowercase-hostname`).
    pub lowercase_hostname: bool,
    /// What `DCGM_EXP_XID_ERRORS_COUNT` counts over, in ms
    /// (`--compat.dcgm-xid-window`, dcgm-exporter's `-x`).
    pub xid_window_ms: u64,
    /// Spell the UUID label `uuid`, as dcgm-exporter 1.x did
    /// (`--compat.dcgm-old-namespace`, its `-o`).
    pub old_namespace: bool,
    /// `modelName` with each blank a dash
    /// (`--compat.dcgm-model-dashes`, its `--replace-blanks-in-model-name`).
    pub model_dashes: bool,
}

impl Dcgm {
    /// The collectors whose readings the fields show: their calls are made
    /// even where the collectors themselves are off.
    pub fn needs(&self) -> Collectors {
        self.fields
            .iter()
            .fold(Collectors::NONE, |s, f| s.with(f.collector))
    }

    /// Whether the file asks for `DCGM_EXP_XID_ERRORS_COUNT`, which needs
    /// Xid counted over a window ([`crate::XidWindow`]).
    pub fn counts_xid(&self) -> bool {
        self.fields.iter().any(|f| f.field == Field::XidCount)
    }

    /// The host label's name.
    pub fn hostname_label(&self) -> &'static str {
        if self.lowercase_hostname {
            "hostname"
        } else {
            "Hostname"
        }
    }

    /// The profiling fields listed: each one's GPM metric and the name the
    /// file gives it.
    pub fn prof(&self) -> impl Iterator<Item = (u32, &str)> {
        self.fields.iter().filter_map(|f| match f.field {
            Field::Prof(id) => Some((id, f.name.as_str())),
            _ => None,
        })
    }

    /// Takes the file's field `name` (a DCGM field, whose current name
    /// hashes to `current`) as `kind`: served, or left out with why.
    fn take(&mut self, name: &str, current: u32, kind: Kind, help: &str) {
        let listed = |n: &str| {
            self.fields.iter().any(|f| f.name == n) || self.left_out.iter().any(|f| f.0 == n)
        };
        if listed(name) {
            self.warnings
                .push(format!("{name} is listed again: its first line counts"));
            return;
        }
        let prof = PROF_HASHES.iter().position(|&h| h == current);
        let prof = prof.map(|i| Field::Prof(PROF_IDS[i].into()));
        let known = prof.map(|f| (f, Serve::By(Collector::Gpm)));
        let known = known.or_else(|| {
            let f = FIELDS.iter().find(|f| names::hash(f.0) == current)?;
            Some((f.1, f.2))
        });
        let known = known.or_else(|| {
            let r = faces().find(|(_, f)| names::hash(f.field) == current)?.0;
            Some((Field::Reading(r), Serve::By(r.family.collector?)))
        });
        let served = match known {
            None => Err("no reading of ours gives it"),
            Some((_, Serve::Not(why))) => Err(why),
            Some((field, Serve::By(_))) if field.is_label() != (kind == Kind::Label) => {
                Err(if field.is_label() {
                    "it is a string: list it as a label"
                } else {
                    "we have no string for it: only our string fields can be labels"
                })
            }
            Some((field, Serve::By(collector))) => Ok((field, collector)),
        };
        match served {
            Ok((field, collector)) => self.fields.push(Wanted {
                name: name.to_string(),
                field,
                kind,
                collector,
                help: help.to_string(),
            }),
            Err(why) => self.left_out.push((name.to_string(), why.to_string())),
        }
    }
}

/// The readings dcgm-exporter fields show, each with its face.
pub fn faces() -> impl Iterator<Item = (&'static Reading, Face)> {
    readings::all().filter_map(|r| Some((r, r.dcgm?)))
}

/// A line's three columns, as Go's CSV reader gives them to dcgm-exporter
/// (a quoted column loses its quotes, `""` is a quote, a comma inside
/// quotes is text), each trimmed; the help keeps any further commas.
fn columns(line: &str) -> Result<[String; 3], &'static str> {
    let (mut commas, mut n, mut quoted) = ([0; 2], 0, false);
    for (i, b) in line.bytes().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted && n < 2 => {
                commas[n] = i;
                n += 1;
            }
            _ => {}
        }
    }
    if quoted {
        return Err("a quote is not closed");
    }
    if n < 2 {
        return Err("expected \"DCGM FIELD, type, help\"");
    }
    let [a, b] = commas;
    Ok([&line[..a], &line[a + 1..b], &line[b + 1..]].map(|c| {
        let c = c.trim();
        match c.strip_prefix('"').and_then(|c| c.strip_suffix('"')) {
            Some(q) => q.replace("\"\"", "\""),
            None => c.to_string(),
        }
    }))
}

/// Parses a counters file's `text`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Dcgm, String> {
    if text.starts_with('\u{feff}') {
        return Err(format!(
            "{file}:1: the file starts with a byte-order mark (U+FEFF), which dcgm-exporter refuses too: save it as UTF-8 without one"
        ));
    }
    let mut d = Dcgm::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("{file}:{}: {why}: {line:?}", i + 1);
        let [name, kind, help] = columns(line).map_err(bad)?;
        let kind = match kind.as_str() {
            "gauge" => Kind::Gauge,
            "counter" => Kind::Counter,
            "label" => Kind::Label,
            // dcgm-exporter takes them and prints one value: so do we.
            "histogram" | "summary" => {
                d.warnings.push(format!(
                    "{name}: a single value is no {kind}: served as a gauge"
                ));
                Kind::Gauge
            }
            _ => return Err(bad("the type is not gauge, counter or label")),
        };
        let Some(current) = names::current(&name) else {
            return Err(bad("no DCGM field has this name (nor a legacy one)"));
        };
        d.take(&name, current, kind, &help);
    }
    if d.fields.is_empty() {
        d.warnings.push(format!(
            "{file} serves no field: the dcgm collector has nothing to show"
        ));
    }
    Ok(d)
}

impl Dcgm {
    /// The UUID label's name.
    pub fn uuid_label(&self) -> &'static str {
        if self.old_namespace { "uuid" } else { "UUID" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Collector::{Fans, Gpm, Xid};

    fn left_out(d: &Dcgm) -> Vec<&str> {
        d.left_out.iter().map(|f| f.0.as_str()).collect()
    }

    #[test]
    fn the_default_file_and_edge_cases() {
        let d = parse(DEFAULT_COUNTERS, "default").unwrap();
        // All but NVLINK_BANDWIDTH_TOTAL and VGPU_LICENSE_STATUS.
        assert_eq!(d.fields.len(), 24);
        assert_eq!(d.left_out.len(), 2);
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
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
                "f:1: no DCGM field has this name (nor a legacy one): \"DCGM_FI_X, gauge, h\"",
            ),
            ("\nDCGM_FI_DEV_GPU_TEMP", "f:2: expected"),
            ("DCGM_FI_DEV_GPU_TEMP, gauge", "f:1: expected"),
            ("DCGM_FI_DEV_GPU_TEMP, gaug, h", "f:1: the type is not"),
            (
                "DCGM_FI_DEV_GPU_TEMP, gauge, \"h",
                "f:1: a quote is not closed",
            ),
            (
                "\u{feff}# c\n",
                "f:1: the file starts with a byte-order mark (U+FEFF)",
            ),
        ] {
            let e = parse(text, "f").unwrap_err();
            assert!(e.starts_with(want) && !e.contains('\n'), "{e}");
            assert!(!e.contains("\\u{feff}"), "{e}");
        }
    }

    /// Every real field name is taken; one we cannot serve is left out
    /// with why, never an error.
    #[test]
    fn real_fields_we_cannot_serve_are_left_out() {
        let d = parse(
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0, counter, f\nDCGM_FI_PROF_NVOFA1_ACTIVE, gauge, i\n\
             DCGM_EXP_P2P_STATUS, gauge, p\nDCGM_FI_DEV_SERIAL, label, s\n\
             DCGM_FI_DEV_GPU_TEMP, label, t\nDCGM_FI_DRIVER_VERSION, gauge, v\n\
             DCGM_FI_DEV_VBIOS_VERSION, label, b\n",
            "f",
        )
        .unwrap();
        assert_eq!(
            left_out(&d),
            [
                "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0",
                "DCGM_FI_PROF_NVOFA1_ACTIVE",
                "DCGM_EXP_P2P_STATUS",
                "DCGM_FI_DEV_SERIAL",
                "DCGM_FI_DEV_GPU_TEMP",
                "DCGM_FI_DRIVER_VERSION"
            ]
        );
        assert_eq!(d.fields.len(), 1);
        assert_eq!(
            (d.fields[0].field, d.fields[0].kind),
            (Field::VbiosVersion, Kind::Label)
        );
        assert!(d.left_out[4].1.contains("only our string fields"));
        assert!(d.left_out[5].1.contains("list it as a label"));
    }

    /// Legacy names are served under the file's name; a name listed twice
    /// is served once, with one warning; quotes are Go's CSV reader's.
    #[test]
    fn legacy_names_duplicates_and_quotes() {
        let d = parse(
            "dcgm_gpu_temp, gauge, t\ndcgm_gpu_temp, gauge, again\n\
             DCGM_FI_DEV_SM_CLOCK,\"gauge\", \"SM \"\"clock\"\", in MHz\"\n\
             DCGM_FI_DEV_MEM_CLOCK, histogram, m\n\
             DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, gauge, r\n",
            "f",
        )
        .unwrap();
        let names: Vec<_> = d.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "dcgm_gpu_temp",
                "DCGM_FI_DEV_SM_CLOCK",
                "DCGM_FI_DEV_MEM_CLOCK",
                "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
            ]
        );
        // The deprecated alias is the current field, under the old name.
        assert_eq!(d.fields[3].field, Field::ClocksEventReasons);
        let temp =
            |f: Field| matches!(f, Field::Reading(r) if r.family.name == "gpu_temperature_celsius");
        assert!(temp(d.fields[0].field), "{:?}", d.fields[0].field);
        assert_eq!(d.fields[0].help, "t");
        assert_eq!(d.fields[1].help, "SM \"clock\", in MHz");
        assert_eq!(d.fields[2].kind, Kind::Gauge);
        assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
        assert!(d.warnings[0].starts_with("dcgm_gpu_temp is listed again"));
        assert!(d.warnings[1].contains("no histogram"));
    }

    #[test]
    fn an_empty_file_is_a_warning() {
        for text in ["", "# only comments\n\n", "DCGM_FI_DEV_SERIAL, label, s\n"] {
            let d = parse(text, "f").unwrap();
            assert_eq!(
                d.warnings,
                ["f serves no field: the dcgm collector has nothing to show"]
            );
        }
    }

    /// The profiling table against go-dcgm's field ids and nvml.h's
    /// metric ids: each DCGM field is the GPM metric of the same meaning.
    #[test]
    fn profiling_fields_are_gpm_metrics() {
        let text = include_str!("dcgm-fields.txt");
        let dcgm_id = |name: &str| -> u32 {
            let row = text
                .lines()
                .find(|l| l.starts_with(&format!("field {name} ")));
            row.and_then(|l| l.rsplit(' ').next()?.parse().ok())
                .unwrap_or_else(|| panic!("{name} is no DCGM field"))
        };
        // DCGM 1001-1016 as nvml.h numbers them; then NVDEC 0-7, NVJPG 0-7,
        // NVOFA 0, and each link's TX then RX, as GPM's do (RX first).
        let first = [1, 2, 3, 5, 10, 11, 12, 13, 20, 21, 61, 60, 9, 7, 6, 4];
        let gpm = |id: u32| match id {
            1001..=1016 => first[(id - 1001) as usize],
            1017..=1024 => 30 + id - 1017,
            1025..=1032 => 40 + id - 1025,
            1033 => 50,
            1040..=1075 => 62 + (id - 1040) / 2 * 2 + (1 - (id - 1040) % 2),
            _ => panic!("{id}: no GPM metric"),
        };
        let mut ids = prof::GpmIds::NONE;
        for p in &prof::PROF {
            assert_eq!(gpm(dcgm_id(p.field)), p.gpm, "{}", p.field);
            let bytes = p.field.ends_with("_BYTES");
            assert_eq!(bytes, p.scale == prof::Scale::MibPerSecond, "{}", p.field);
            assert_eq!(prof::scale(p.gpm), p.scale, "{}", p.field);
            assert!(!ids.has(p.gpm), "{} twice", p.gpm);
            ids = ids.with(p.gpm);
            let d = parse(&format!("{}, gauge, h\n", p.field), "f").unwrap();
            assert_eq!(d.fields[0].field, Field::Prof(p.gpm));
            assert_eq!(d.prof().collect::<Vec<_>>(), [(p.gpm, p.field)]);
        }
        assert_eq!(ids.iter().count(), 69);
        // Every other profiling field of DCGM's has no GPM metric.
        let others: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("field DCGM_FI_PROF_"))
            .filter_map(|l| l.split(' ').next())
            .filter(|n| !prof::PROF.iter().any(|p| p.field[13..] == **n))
            .collect();
        assert_eq!(
            others,
            [
                "NVOFA1_ACTIVE",
                "C2C_TX_ALL_BYTES",
                "C2C_TX_DATA_BYTES",
                "C2C_RX_ALL_BYTES",
                "C2C_RX_DATA_BYTES",
                "HOSTMEM_CACHE_HIT",
                "HOSTMEM_CACHE_MISS",
                "PEERMEM_CACHE_HIT",
                "PEERMEM_CACHE_MISS"
            ]
        );
        assert_eq!(prof::Scale::MibPerSecond.dcgm(100.0), 104_857_600.0);
        assert_eq!(prof::Scale::Percent.dcgm(50.0), 0.5);
        assert!(!ids.has(200) && ids.with(200) == ids && !ids.has(0));
    }
}
