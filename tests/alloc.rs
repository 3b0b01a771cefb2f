//! A scrape renders into a reused buffer without touching the heap. A
//! counting global allocator proves it. It counts only on a thread inside
//! [`count`], so parallel tests and the harness don't disturb it.

use gpu_exporter::config::{Collectors, SourceKind};
use gpu_exporter::internals::exposition::{Format, render};
use gpu_exporter::internals::snapshot::Snapshot;
use gpu_exporter::internals::source::Source;
use gpu_exporter::internals::source::sim::{Scenario, Sim};
use std::time::Instant;

#[path = "support/counting.rs"]
mod counting;
use counting::{Counting, assert_the_counter_counts, count};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn fleet(gpus: usize) -> Snapshot {
    let scenario = if gpus == 4 {
        Scenario::default_fleet()
    } else {
        let list =
            vec![r#"{"xid":79,"xid_every":"60s","clock_events":["sw_power_cap"]}"#; gpus].join(",");
        Scenario::parse(&format!(r#"{{"gpus":[{list}]}}"#)).unwrap()
    };
    let mut sim = Sim::new(scenario, 1.8e9);
    let mut s = Snapshot::empty(SourceKind::Sim);
    sim.collect(1.8e9 - 600.0).unwrap();
    s.gpus = sim.collect(1.8e9).unwrap();
    s.error = None;
    s.process = gpu_exporter::internals::process::read_stats();
    s
}

#[test]
fn a_scrape_allocates_nothing_after_warm_up() {
    for gpus in [1, 4, 64] {
        let snapshot = fleet(gpus);
        for format in [Format::Text, Format::OpenMetrics] {
            let (mut buf, now) = (Vec::new(), Instant::now());
            render(
                &snapshot,
                Default::default(),
                format,
                Collectors::ALL,
                now,
                &mut buf,
            );
            let size = buf.len();
            let allocations = count(|| {
                for _ in 0..100 {
                    buf.clear();
                    render(
                        &snapshot,
                        Default::default(),
                        format,
                        Collectors::ALL,
                        now,
                        &mut buf,
                    );
                }
            });
            assert_eq!(
                allocations, 0,
                "{gpus} GPUs, {format:?}: {allocations} allocations"
            );
            assert_eq!(buf.len(), size);
            assert!(size > gpus * 1000, "{size} bytes for {gpus} GPUs");
        }
    }
}

#[test]
fn a_filtered_scrape_allocates_nothing_and_writes_only_its_collectors() {
    use gpu_exporter::config::Collector::{Gpm, Temperature, Xid};
    use gpu_exporter::internals::http::query;
    let snapshot = fleet(4);
    let now = Instant::now();
    let queries = [
        "collect%5B%5D=gpm&collect%5B%5D=xid",
        "collect[]=temperature&exclude[]=temperature",
        "exclude%5B%5D=clocks&exclude%5B%5D=nvlink",
    ];
    let mut full = Vec::new();
    render(
        &snapshot,
        Default::default(),
        Format::Text,
        Collectors::ALL,
        now,
        &mut full,
    );
    for q in queries {
        let only = query::collectors(q).unwrap();
        let mut buf = Vec::new();
        render(
            &snapshot,
            Default::default(),
            Format::Text,
            only,
            now,
            &mut buf,
        );
        let size = buf.len();
        assert!(size < full.len(), "{q}");
        let allocations = count(|| {
            for _ in 0..100 {
                buf.clear();
                let only = query::collectors(std::hint::black_box(q)).unwrap();
                render(
                    &snapshot,
                    Default::default(),
                    Format::Text,
                    only,
                    now,
                    &mut buf,
                );
            }
        });
        assert_eq!(allocations, 0, "{q}: {allocations} allocations");
        assert_eq!(buf.len(), size);
    }
    let mut buf = Vec::new();
    let only = Collectors::NONE.with(Gpm).with(Xid);
    render(
        &snapshot,
        Default::default(),
        Format::Text,
        only,
        now,
        &mut buf,
    );
    let text = String::from_utf8(buf).unwrap();
    assert!(text.contains("\ngpu_sm_active_ratio{") && text.contains("\ngpu_xid_errors_total{"));
    assert!(!text.contains("gpu_temperature_celsius") && !text.contains("gpu_info{"));
    // The exporter's own families stay, and only those collectors' rows.
    assert!(text.contains("gpu_exporter_collect_success 1"));
    assert!(text.contains("gpu_exporter_collector_success{collector=\"xid\"} 1"));
    assert!(!text.contains(&format!("collector=\"{}\"", Temperature.name())));
}

#[test]
fn the_counter_counts() {
    // A render into an empty buffer has to grow it.
    let snapshot = fleet(4);
    assert_the_counter_counts(|| {
        render(
            &snapshot,
            Default::default(),
            Format::Text,
            Collectors::ALL,
            Instant::now(),
            &mut Vec::new(),
        )
    });
}
