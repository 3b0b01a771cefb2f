//! A scrape renders into a reused buffer without touching the heap. A
//! counting global allocator proves it. It counts only on a thread inside
//! [`count`], so parallel tests and the harness don't disturb it.

use gpu_exporter::config::SourceKind;
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
            render(&snapshot, format, now, &mut buf);
            let size = buf.len();
            let allocations = count(|| {
                for _ in 0..100 {
                    buf.clear();
                    render(&snapshot, format, now, &mut buf);
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
fn the_counter_counts() {
    // A render into an empty buffer has to grow it.
    let snapshot = fleet(4);
    assert_the_counter_counts(|| render(&snapshot, Format::Text, Instant::now(), &mut Vec::new()));
}
