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

use divan::Bencher;
use exposition::{Format, Scrape};
use gpu_exporter_counts::{FLEETS, fleet::T0, registry, settled};
use model::Collectors;
use std::time::{Duration, Instant};

fn snapshot(fleet: &str) -> model::Snapshot {
    gpu_exporter_counts::snapshot(fleet).expect("one of FLEETS")
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

#[divan::bench(sample_count = 20, sample_size = 100)]
fn alerts_per_collection(b: Bencher) {
    let (mut e, next) = settled(2000);
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
