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
