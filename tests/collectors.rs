//! Collectors, two ways to the same output: a collector switched off for
//! collection (its readings dropped by `Readings::retain`) and one filtered
//! out of a scrape (`collect[]`, `exclude[]`, by the catalogue's family
//! membership) render alike, so the two mappings agree.

use exposition::{Format, Scrape};
use model::{Collector, Collectors};
use model::{Health, NvlinkLink, Snapshot};
use poller::Poller;
use sources::sim::{Scenario, Sim};
use std::time::Duration;

/// The demo fleet with every collector's readings, per-link NVLink and
/// fans included.
fn full() -> Snapshot {
    let t0 = 1.8e9;
    let sim = Sim::new(Scenario::default_fleet(), t0);
    let mut c = Poller::new(Box::new(sim), Duration::from_secs(1)).with_collectors(Collectors::ALL);
    c.collect_at(t0 - 30.0);
    let mut s = c.collect_at(t0);
    let h: &mut Health = &mut s.gpus[0].readings.health;
    h.fan_speed_ratios[0] = Some(0.4);
    h.nvlink_per_link.push(NvlinkLink {
        link: 0,
        active: Some(true),
        errors: [Some(1.0); 4],
    });
    s
}

fn text(s: &Snapshot, only: Collectors) -> String {
    let mut out = Vec::new();
    // At the snapshot's own time: its age is always 0.
    Scrape {
        snapshot: s,
        fresh: Default::default(),
        http: None,
        format: Format::OpenMetrics,
        only,
        now: s.published,
    }
    .render(&mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn switched_off_and_filtered_out_render_alike() {
    let s = full();
    let everything = text(&s, Collectors::ALL);
    for c in Collector::ALL {
        let rest = Collectors::ALL.without(c);
        let mut off = s.clone();
        off.collectors = rest;
        for g in &mut off.gpus {
            g.readings.retain(rest);
            for m in &mut g.mig {
                m.readings.retain(rest);
            }
        }
        let filtered = text(&s, rest);
        let switched = text(&off, Collectors::ALL);
        let first = switched.lines().zip(filtered.lines()).find(|(a, b)| a != b);
        assert_eq!(first, None, "{}", c.name());
        assert_eq!(switched.len(), filtered.len(), "{}", c.name());
        if !matches!(c, Collector::Processes) {
            assert_ne!(filtered, everything, "{} has no family", c.name());
        }
    }
}
