//! The generated tables of docs/ that the model declares: the GPU's
//! readings and the dcgm profiling fields.

use model::dcgm::prof;
use model::readings;

/// The docs' table of the GPU's readings, from the declarations.
fn readme_table() -> String {
    use std::fmt::Write;
    let num = |x: f64| match x.abs() >= 1e10 {
        true => format!("{x:e}"),
        false => format!("{x}"),
    };
    let mut t = String::from(
        "| metric | type | collector | sources | range | meaning |\n|---|---|---|---|---|---|\n",
    );
    let rows = readings::all()
        .map(|r| (&r.family, r))
        .chain(readings::all().filter_map(|r| Some((r.mig.as_ref()?, r))));
    for (f, r) in rows {
        let labels = match r.labels {
            "" => String::new(),
            l => format!("{{{l}}}"),
        };
        let kind = format!("{:?}", f.kind).to_lowercase();
        let collector = f.collector.map_or("", |c| c.name());
        let range = r.range.map_or(String::new(), |g| {
            let low = match g.excludes_zero() {
                true => "above 0".to_string(),
                false => num(g.min),
            };
            format!("{low} to {}", num(g.max))
        });
        let name = f.sample();
        let sources = if r.mig.as_ref().is_some_and(|m| std::ptr::eq(m, f)) {
            "N"
        } else {
            r.sources
        };
        writeln!(
            t,
            "| `{name}{labels}` | {kind} | {collector} | {sources} | {range} | {} |",
            f.help
        )
        .unwrap();
    }
    t
}

/// docs/metrics.md holds [`readme_table`] between its markers;
/// `GPU_EXPORTER_BLESS=1` writes it there.
#[test]
fn readme_lists_the_readings() {
    super::readme::holds("metrics", &readme_table());
}

/// docs/migrating-from-dcgm-exporter.md's table of the profiling
/// fields, from [`prof::PROF`].
#[test]
fn the_migration_document_lists_the_profiling_fields() {
    let mut t = String::from("| field | GPM metric (nvml.h id) | served as |\n|---|---|---|\n");
    for p in &prof::PROF {
        let unit = match p.scale {
            prof::Scale::Percent => "ratio (GPM's % / 100)",
            prof::Scale::MibPerSecond => "bytes per second (GPM's MiB/s × 1048576)",
        };
        t.push_str(&format!("| `{}` | {} | {unit} |\n", p.field, p.gpm));
    }
    super::readme::holds("dcgm-prof", &t);
}

/// What `deploy/prometheus/dcgm-compat-rules.yml` says of itself.
const COMPAT_HEAD: &str = "\
# dcgm-exporter names in Prometheus, from gpu-exporter's native families:
# for users who keep the native names in the exporter (no --collector.dcgm)
# and want dashboard 12239 and dcgm alerts to keep working. Units and labels
# are the dcgm collector's: gpu, UUID, pci_bus_id, modelName from gpu_info
# (device and Hostname are the dcgm collector's alone); integer fields are
# whole numbers as dcgm-exporter prints them (MiB cut down, the rest
# rounded). Tested with promtool
# (tests/promtool/dcgm-compat.test.yml). See docs/migrating-from-dcgm-exporter.md.
# Generated from the reading table: GPU_EXPORTER_BLESS=1 cargo test --lib readme.
groups:
  - name: dcgm-compat
    rules:
      - record: gpu:dcgm_identity
        expr: label_replace(label_replace(max without (driver_version, vbios_version, inforom_version) (gpu_info), \"modelName\", \"$1\", \"model\", \"(.*)\"), \"UUID\", \"$1\", \"uuid\", \"(.*)\")
";

/// The fields recorded beyond dcgm-exporter's default file: the
/// saturation signals and the volatile ECC counts dcgm alerts read.
const COMPAT_MORE: &str = "\
DCGM_FI_PROF_SM_ACTIVE, gauge, h
DCGM_FI_PROF_SM_OCCUPANCY, gauge, h
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, h
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, h
";

/// The compat rules: a rule for each field of the default file and
/// [`COMPAT_MORE`] that one of our families gives, in their order.
fn compat_rules() -> String {
    use model::dcgm;
    let files = format!("{}{COMPAT_MORE}", dcgm::DEFAULT_COUNTERS);
    let fields = dcgm::parse(&files, "default").expect("the default file parses");
    let mut t = String::from(COMPAT_HEAD);
    for f in &fields.fields {
        let Some(native) = f.field.native() else {
            continue;
        };
        t.push_str(&format!(
            "      - record: {}\n        expr: max without (uuid, model) ({} * on (job, instance, gpu, uuid) group_left (UUID, modelName, pci_bus_id) gpu:dcgm_identity)\n",
            f.name,
            native.printed()
        ));
    }
    t
}

/// deploy/prometheus/dcgm-compat-rules.yml is [`compat_rules`];
/// `GPU_EXPORTER_BLESS=1` writes it.
#[test]
fn readme_dcgm_compat_rules() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/prometheus/dcgm-compat-rules.yml"
    );
    super::readme::holds_file(path, &compat_rules());
}

/// The migration guide's table of the fields a reading declares
/// (`Reading::dcgm`), in the reading table's order: the type and unit
/// dcgm-exporter prints, and the PromQL over our family that gives it
/// (the compat rule's, not yet made whole).
fn dcgm_faces_table() -> String {
    use model::dcgm::{self, Field, Unit};
    use model::readings::{Field as Value, Readings};
    let mut t = String::from(
        "| field | type | served | ours, and PromQL for our names |\n|---|---|---|---|\n",
    );
    for (r, face) in dcgm::faces() {
        let flag = matches!((r.read.field)(&mut Readings::default()), Value::Flag(_));
        let unit = match (face.unit, r.family.unit) {
            _ if flag => ", 0/1",
            (Unit::Same, Some("celsius")) => ", °C",
            (Unit::Same, Some("watts")) => ", W",
            (Unit::Same, None) => "",
            (Unit::Mhz, _) => ", MHz",
            (Unit::Mib, _) => ", MiB",
            (Unit::Percent, _) => ", %",
            (Unit::Millijoules, _) => ", mJ",
            (Unit::Same, Some(u)) => panic!("{}: no dcgm spelling of {u}", face.field),
        };
        let native = Field::Reading(r).native().expect("a face");
        let kind = format!("{:?}", r.family.kind).to_lowercase();
        t.push_str(&format!(
            "| `{}` | {kind} | yes{unit} | `{}` |\n",
            face.field,
            native.scaled()
        ));
    }
    t
}

/// docs/migrating-from-dcgm-exporter.md holds [`dcgm_faces_table`].
#[test]
fn readme_dcgm_faces() {
    super::readme::holds("dcgm-faces", &dcgm_faces_table());
}
