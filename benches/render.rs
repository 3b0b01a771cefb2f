//! Render and alert-evaluation benchmarks on divan.
//!
//! - Render: one scrape of the fleet into a reused buffer, both formats,
//!   for 1, 8 and 64 GPUs and 8 GPUs with 7 MIG instances each; next to
//!   the official `prometheus-client` crate encoding the same families and
//!   series. After divan's table, an interleaved side-by-side run prints
//!   the ratio.
//! - Alerts: one evaluation of the default rules over a full history
//!   (three days replayed), per collection.
//!
//! `cargo bench --bench render`

use alerts::{Evaluator, defaults};
use divan::Bencher;
use exposition::{Format, Scrape};
use fill::engines::watch::Memory;
use model::catalogue::{Extra, Kind};
use model::readings::GPU_READINGS;
use model::{Collectors, SourceKind};
use model::{Gpu, MigInstance, Snapshot};
use poller::source_models;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sources::Source;
use sources::sim::{Scenario, Sim};
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

const FLEETS: [&str; 4] = ["1", "8", "64", "8x7mig"];
#[path = "../tests/support/fleet.rs"]
mod fleet;
use fleet::T0;

fn snapshot(fleet: &str) -> Snapshot {
    let (gpus, mig) = match fleet {
        "8x7mig" => (8, 7),
        n => (n.parse().unwrap(), 0),
    };
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
    s
}

type Labels = Vec<(String, String)>;

/// The same GPU families and series in a prometheus-client registry.
fn registry(s: &Snapshot) -> Registry {
    let mut reg = Registry::default();
    fn targets(g: &Gpu) -> Vec<(Option<&MigInstance>, &model::Readings)> {
        let mut t = vec![(None, &g.readings)];
        t.extend(g.mig.iter().map(|m| (Some(m), &m.readings)));
        t
    }
    let labels = |g: &Gpu, m: Option<&MigInstance>, extra: Extra| {
        let mut l: Labels = vec![
            ("gpu".into(), g.index.to_string()),
            ("uuid".into(), m.map_or(&g.uuid, |m| &m.uuid).clone()),
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
    };
    let info = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let up = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    for g in &s.gpus {
        let mut l = labels(g, None, Extra::None);
        l.extend([
            ("model".into(), g.model.clone()),
            ("pci_bus_id".into(), g.pci_bus_id.clone()),
            ("driver_version".into(), g.driver_version.clone()),
        ]);
        info.get_or_create(&l).set(1.0);
        up.get_or_create(&labels(g, None, Extra::None)).set(1.0);
    }
    reg.register("gpu_info", "GPU identity", info);
    reg.register("gpu_up", "1 if the GPU answers", up);
    for r in &GPU_READINGS {
        let (fam, series) = (&r.family, r.read.series);
        match fam.kind {
            Kind::Counter => {
                let f = Family::<Labels, Counter<f64, AtomicU64>>::default();
                for g in &s.gpus {
                    for (m, r) in targets(g) {
                        series(r, &mut |extra, v| {
                            f.get_or_create(&labels(g, m, extra)).inc_by(v);
                        });
                    }
                }
                reg.register(fam.name, fam.help, f);
            }
            _ => {
                let f = Family::<Labels, Gauge<f64, AtomicU64>>::default();
                for g in &s.gpus {
                    for (m, r) in targets(g) {
                        series(r, &mut |extra, v| {
                            f.get_or_create(&labels(g, m, extra)).set(v);
                        });
                    }
                }
                reg.register(fam.name, fam.help, f);
            }
        }
    }
    reg
}

#[divan::bench(args = FLEETS)]
fn ours_text(b: Bencher, fleet: &str) {
    let s = snapshot(fleet);
    let (mut buf, now) = (Vec::new(), Instant::now());
    b.bench_local(|| {
        buf.clear();
        Scrape {
            snapshot: &s,
            fresh: Default::default(),
            http: None,
            format: Format::Text,
            only: Collectors::ALL,
            now,
        }
        .render(&mut buf);
    });
}

#[divan::bench(args = FLEETS)]
fn ours_openmetrics(b: Bencher, fleet: &str) {
    let s = snapshot(fleet);
    let (mut buf, now) = (Vec::new(), Instant::now());
    b.bench_local(|| {
        buf.clear();
        Scrape {
            snapshot: &s,
            fresh: Default::default(),
            http: None,
            format: Format::OpenMetrics,
            only: Collectors::ALL,
            now,
        }
        .render(&mut buf);
    });
}

#[divan::bench(args = FLEETS)]
fn prometheus_client(b: Bencher, fleet: &str) {
    let reg = registry(&snapshot(fleet));
    let mut out = String::new();
    b.bench_local(|| {
        out.clear();
        prometheus_client::encoding::text::encode(&mut out, &reg).unwrap();
    });
}

/// An evaluator after three days of replayed history, and the next
/// collections to feed it.
fn settled() -> (Evaluator, Vec<Snapshot>) {
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
    let next = (0..2000).map(|i| snap(&mut sim, T0 + i as f64)).collect();
    (e, next)
}

#[divan::bench(sample_count = 20, sample_size = 100)]
fn alerts_per_collection(b: Bencher) {
    let (mut e, next) = settled();
    let mut it = next.iter().cycle();
    let mut shift = 0.0;
    b.bench_local(|| {
        // Time only moves forward: each pass over the prepared snapshots
        // is shifted past the last.
        let s = it.next().unwrap();
        if s.at == T0 {
            shift += 2000.0;
        }
        let mut s = s.clone();
        s.at += shift;
        e.eval(&s)
    });
}

/// Interleaved, side by side: how many times faster ours is.
fn ratios() {
    println!("\nrender, side by side (median of 9 interleaved rounds):");
    println!(
        "| fleet | ours 0.0.4 | ours OpenMetrics | prometheus-client | prometheus-client / ours |"
    );
    println!("|---|---|---|---|---|");
    for fleet in FLEETS {
        let s = snapshot(fleet);
        let reg = registry(&s);
        let (mut buf, mut text, now) = (Vec::new(), String::new(), Instant::now());
        let iters = if fleet == "1" { 2000 } else { 200 };
        let time = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters
        };
        let mut rounds: Vec<(Duration, Duration, Duration)> = (0..9)
            .map(|_| {
                let a = time(&mut || {
                    buf.clear();
                    Scrape {
                        snapshot: &s,
                        fresh: Default::default(),
                        http: None,
                        format: Format::Text,
                        only: Collectors::ALL,
                        now,
                    }
                    .render(&mut buf);
                });
                let b = time(&mut || {
                    buf.clear();
                    Scrape {
                        snapshot: &s,
                        fresh: Default::default(),
                        http: None,
                        format: Format::OpenMetrics,
                        only: Collectors::ALL,
                        now,
                    }
                    .render(&mut buf);
                });
                let c = time(&mut || {
                    text.clear();
                    prometheus_client::encoding::text::encode(&mut text, &reg).unwrap();
                });
                (a, b, c)
            })
            .collect();
        rounds.sort_by_key(|r| r.0);
        let (a, b, c) = rounds[4];
        println!(
            "| {fleet} | {a:.2?} | {b:.2?} | {c:.2?} | {:.1}x |",
            c.as_secs_f64() / a.as_secs_f64()
        );
    }
}

fn main() {
    divan::main();
    if std::env::args().any(|a| a == "--bench") {
        ratios();
    }
}
