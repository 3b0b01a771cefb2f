//! The work the render bench times (`benches/render.rs`) and the counting
//! tool counts (`benches/counts.py --render`), built in one place: fleets
//! as snapshots, the same families and series in a `prometheus-client`
//! registry, and an alert evaluator with a settled history.

use alerts::{Evaluator, defaults};
use fill::engines::reader::Memory;
use model::catalogue::{Extra, Family as CatalogueFamily, Kind, Series};
use model::readings;
use model::{Gpu, MigInstance, Snapshot, SourceKind};
use poller::source_models;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sources::Source;
use sources::sim::{Scenario, Sim};
use std::sync::atomic::AtomicU64;

#[path = "../../../tests/support/fleet.rs"]
pub mod fleet;
use fleet::T0;

/// The fleets rendered: 1, 8 and 64 GPUs, and 8 GPUs of 7 MIG instances.
pub const FLEETS: [&str; 4] = ["1", "8", "64", "8x7mig"];

/// The snapshot of a fleet such as [`FLEETS`]': `N` GPUs or `NxMmig`, N
/// GPUs of M MIG instances each (N from 1 to 64, M at most 7); `None` for
/// another name.
pub fn snapshot(fleet: &str) -> Option<Snapshot> {
    let (gpus, mig): (usize, u32) = match fleet.strip_suffix("mig") {
        Some(f) => f
            .split_once('x')
            .and_then(|(n, m)| Some((n.parse().ok()?, m.parse().ok()?)))?,
        None => (fleet.parse().ok()?, 0),
    };
    if !(1..=64).contains(&gpus) || mig > 7 {
        return None;
    }
    let mut s = fleet::snapshot(gpus);
    for g in &mut s.gpus {
        g.mig = (0..mig)
            .map(|i| {
                let r = &g.readings;
                MigInstance {
                    uuid: format!("MIG-{:08x}-0000-4000-8000-{:012x}", g.index, i),
                    gpu_instance_id: i + 1,
                    profile: "1g.10gb".into(),
                    compute: Vec::new(),
                    readings: model::Readings {
                        memory_total_bytes: r.memory_total_bytes.map(|t| t / 8.0),
                        memory_used_bytes: r.memory_used_bytes.map(|u| u / 8.0),
                        memory_free_bytes: r.memory_free_bytes.map(|f| f / 8.0),
                        sm_active_ratio: r.sm_active_ratio,
                        ..Default::default()
                    },
                }
            })
            .collect();
    }
    Some(s)
}

type Labels = Vec<(String, String)>;

/// A series' labels, as ours writes them.
fn labels(g: &Gpu, m: Option<&MigInstance>, extra: Extra) -> Labels {
    let mut l: Labels = vec![
        ("gpu".into(), g.index.to_string()),
        ("uuid".into(), g.uuid.clone()),
    ];
    if let Some(m) = m {
        l.push(("mig_instance".into(), m.gpu_instance_id.to_string()));
        l.push(("mig_profile".into(), m.profile.clone()));
    }
    let (num, text) = match extra {
        Extra::None => (None, None),
        Extra::Label(text) => (None, Some(text)),
        Extra::Num(k, n) => (Some((k, n)), None),
        Extra::NumLabel(k, n, text) => (Some((k, n)), Some(text)),
    };
    if let Some((k, n)) = num {
        l.push((k.into(), n.to_string()));
    }
    if let Some(text) = text {
        let (k, v) = text.trim_start_matches(',').split_once('=').unwrap();
        l.push((k.into(), v.trim_matches('"').into()));
    }
    l
}

/// A GPU's readings and its MIG instances'.
fn targets(g: &Gpu) -> Vec<(Option<&MigInstance>, &model::Readings)> {
    let mut t = vec![(None, &g.readings)];
    t.extend(g.mig.iter().map(|m| (Some(m), &m.readings)));
    t
}

/// The same GPU families and series as ours writes in a prometheus-client
/// registry: identity, up, and every reading (`readings::all`), where a
/// reading has a family of its own for MIG instances, theirs in that.
pub fn registry(s: &Snapshot) -> Registry {
    let mut reg = Registry::default();
    let info = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let up = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    for g in &s.gpus {
        let mut l = labels(g, None, Extra::None);
        l.extend([
            ("model".into(), g.model.clone()),
            ("pci_bus_id".into(), g.pci_bus_id.clone()),
            ("driver_version".into(), g.driver_version.clone()),
        ]);
        for (k, v) in [
            ("vbios_version", &g.vbios_version),
            ("inforom_version", &g.inforom_version),
        ] {
            if !v.is_empty() {
                l.push((k.into(), v.clone()));
            }
        }
        info.get_or_create(&l).set(1.0);
        up.get_or_create(&labels(g, None, Extra::None)).set(1.0);
    }
    reg.register("gpu_info", "GPU identity", info);
    reg.register("gpu_up", "1 if the GPU answers", up);
    for r in readings::all() {
        let only = r.mig.as_ref().map(|_| true);
        register(&mut reg, s, &r.family, r.read.series, only);
    }
    for r in readings::all() {
        if let Some(fam) = &r.mig {
            register(&mut reg, s, fam, r.read.series, Some(false));
        }
    }
    reg
}

/// One family's series of every target, or with `only`, of the GPUs
/// (`Some(true)`) or the MIG instances (`Some(false)`); none registered
/// where it has none, as ours leaves such a family out.
fn register(
    reg: &mut Registry,
    s: &Snapshot,
    fam: &CatalogueFamily,
    series: Series,
    only: Option<bool>,
) {
    let each = |f: &mut dyn FnMut(Labels, f64)| {
        for g in &s.gpus {
            for (m, r) in targets(g) {
                if only.is_none_or(|gpu| gpu == m.is_none()) {
                    series(r, &mut |extra, v| f(labels(g, m, extra), v));
                }
            }
        }
    };
    let mut any = false;
    each(&mut |_, _| any = true);
    if !any {
        return;
    }
    if fam.kind == Kind::Counter {
        let f = Family::<Labels, Counter<f64, AtomicU64>>::default();
        each(&mut |l, v| {
            f.get_or_create(&l).inc_by(v);
        });
        reg.register(fam.name, fam.help, f);
    } else {
        let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        each(&mut |l, v| {
            f.get_or_create(&l).set(v);
        });
        reg.register(fam.name, fam.help, f);
    }
}

/// An evaluator of the default rules after three days of the default
/// fleet's replayed history, and the next `next` collections to feed it,
/// a second apart.
pub fn settled(next: usize) -> (Evaluator, Vec<Snapshot>) {
    let mut sim = Sim::new(Scenario::default_fleet(), T0);
    let mut e = Evaluator::new(defaults());
    let snap = |sim: &mut Sim, at: f64| {
        let mut s = Snapshot::empty(SourceKind::Sim);
        s.gpus = sim.collect(at).unwrap();
        s.models = source_models(sim, &mut Memory::new(None));
        s.error = None;
        s.at = at;
        s
    };
    let mut t = T0 - sim.history_seconds();
    while t < T0 {
        let step = if t < T0 - 900.0 { 60.0 } else { 1.0 };
        e.eval(&snap(&mut sim, t));
        t += step;
    }
    let next = (0..next).map(|i| snap(&mut sim, T0 + i as f64)).collect();
    (e, next)
}
#[cfg(test)]
mod tests {
    use super::*;

    /// Each sample's name and labels, sorted: what both write alike
    /// (values are spelled differently, `1` and `1.0`).
    fn series(text: &str) -> Vec<&str> {
        let mut v: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("gpu_exporter_"))
            .map(|l| l.rsplit_once(' ').expect("a sample has a value").0)
            .collect();
        v.sort_unstable();
        v
    }

    /// The comparison is fair: prometheus-client encodes every GPU series
    /// ours writes, and no other (ours adds only its own families).
    /// 16x7mig: more targets than ours' small label-set cache holds.
    #[test]
    fn the_registry_holds_the_series_ours_writes() {
        for fleet in FLEETS.into_iter().chain(["16x7mig"]) {
            let s = snapshot(fleet).unwrap();
            let ours = exposition::Scrape::of(&s).text();
            let mut theirs = String::new();
            prometheus_client::encoding::text::encode(&mut theirs, &registry(&s)).unwrap();
            let (a, b) = (series(&ours), series(&theirs));
            assert!(a.len() > 80 * s.gpus.len(), "{fleet}: {} series", a.len());
            let only = |x: &[&str], y: &[&str]| -> Vec<String> {
                x.iter()
                    .filter(|l| !y.contains(l))
                    .map(|l| l.to_string())
                    .collect()
            };
            assert!(
                a == b,
                "{fleet}: ours only {:?}, theirs only {:?}",
                only(&a, &b),
                only(&b, &a)
            );
        }
    }

    #[test]
    fn a_fleet_is_named() {
        for bad in ["0", "65", "8x", "8x8mig", "x7mig", "8y7mig"] {
            assert!(snapshot(bad).is_none(), "{bad}");
        }
        assert_eq!(snapshot("8x7mig").unwrap().gpus[0].mig.len(), 7);
    }
}
