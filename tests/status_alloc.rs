//! The status page at `/` renders into a reused buffer without touching
//! the heap, like a scrape (`tests/alloc.rs`). A counting global allocator
//! proves it; it counts only on a thread inside [`count`], so parallel
//! tests and the harness don't disturb it.

// A test tells its scenario whole: clippy's bound on a function's
// length (the workspace's lints) is for the code that ships.
#![allow(clippy::too_many_lines)]
use alerts::{Severity, State, defaults};
use model::Bounds;
use model::Collector::Processes;
use model::Collectors;
use model::{MigInstance, Readings};
use poller::judge::settled;
use poller::{Poller, Published};
use routes::status::render;
use sources::sim::{Scenario, Sim};
use std::time::{Duration, Instant};

#[path = "support/counting.rs"]
mod counting;
use counting::{Counting, assert_the_counter_counts, count};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The demo fleet as the binary publishes it: history replayed, so the
/// alerts have settled.
fn published() -> Published {
    let t0 = 1.8e9;
    let sim = Sim::new(Scenario::default_fleet(), t0);
    let mut c = Poller::new(Box::new(sim), Duration::from_secs(1))
        .with_collectors(Collectors::DEFAULT.with(Processes));
    settled(&mut c, defaults(), bounds(), t0).0
}

fn bounds() -> Bounds {
    Bounds::new(Duration::from_secs(1), Duration::from_secs(60))
}

fn page(p: &Published, buf: &mut Vec<u8>, now: Instant) {
    render(
        p,
        "/metrics",
        "https://runbooks.example/gpu/",
        bounds(),
        now,
        buf,
    );
}

#[test]
fn the_status_page_allocates_nothing_after_warm_up() {
    let demo = published();
    let names: Vec<&str> = demo.alerts.iter().map(|a| a.rule.name.as_str()).collect();
    for want in [
        "GPUThrottling",
        "GPUXidErrors",
        "KVFragmentationRisk",
        "TTFTBudgetBurn",
    ] {
        assert!(names.contains(&want), "{want} not in {names:?}");
    }
    assert!(
        demo.alerts
            .iter()
            .any(|a| a.rule.severity == Severity::Page)
    );
    assert!(
        demo.alerts
            .iter()
            .any(|a| a.rule.severity == Severity::Ticket)
    );

    // The same fleet failing its collection, with a MIG instance and a
    // pending alert: the branches the demo does not reach.
    let mut snapshot = (*demo.snapshot).clone();
    let mut alerts = (*demo.alerts).clone();
    snapshot.error = Some("nvml: <driver> & 'gone'".into());
    snapshot.gpus[0].up = false;
    snapshot.gpus[1].mig.push(MigInstance {
        uuid: "MIG-1".into(),
        gpu_instance_id: 1,
        profile: "3g.40gb".into(),
        compute: Vec::new(),
        readings: Readings {
            memory_total_bytes: Some(4e10),
            ..Default::default()
        },
    });
    alerts[0].state = State::Pending;
    // And hardware health to report: a reset asked for, a pending remap,
    // a narrow PCIe link.
    let h = &mut snapshot.gpus[2].readings.health;
    h.recovery_action = Some(1.0);
    h.row_remap_pending = Some(true);
    h.pcie_link_width = Some(8.0);
    let degraded = Published {
        snapshot: snapshot.into(),
        alerts: alerts.into(),
        replay: None,
        recent: Default::default(),
    };

    for (name, p) in [("demo", &demo), ("degraded", &degraded)] {
        let (mut buf, now) = (Vec::new(), Instant::now());
        page(p, &mut buf, now);
        let size = buf.len();
        let allocations = count(|| {
            for _ in 0..100 {
                buf.clear();
                page(p, &mut buf, now);
            }
        });
        assert_eq!(allocations, 0, "{name}: {allocations} allocations");
        assert_eq!(buf.len(), size, "{name}");
        let html = String::from_utf8(buf).unwrap();
        for a in p.alerts.iter() {
            assert!(html.contains(&a.rule.name), "{name}: {}", a.rule.name);
        }
        assert!(html.contains("https://runbooks.example/gpu/GPUXidErrors.md"));
        assert_eq!(html.matches("<tr id=\"gpu-").count(), 4, "{name}");
        let reasons = "driver asks for a GPU reset; row remap waits for a reset; PCIe x8 of x16";
        assert_eq!(html.contains(reasons), name == "degraded", "{name}");
        // Who uses each GPU: in its row, and in the alerts about it.
        assert!(
            html.contains(
                "pod research/notebook-alice <small>jupyter</small><br>pod research/notebook-bob"
            ),
            "{name}"
        );
        assert!(
            html.contains("job 4711<br>pid 9001 <small>58 GiB</small>"),
            "{name}"
        );
        assert!(
            html.contains("<small class=\"who\">pod research/notebook-alice (jupyter) pod research/notebook-bob (jupyter) pid 5120 pid 5377 </small>"),
            "{name}: GPU 2's Xid alert names its pods"
        );
    }
    // The demo fleet is healthy hardware: every GPU's health cell says ok.
    let mut buf = Vec::new();
    page(&demo, &mut buf, Instant::now());
    let html = String::from_utf8(buf).unwrap();
    assert_eq!(
        html.matches("<td>ok</td><td class=\"who\">").count(),
        4,
        "{html}"
    );
}

#[test]
fn the_counter_counts() {
    // A page rendered into an empty buffer has to grow it.
    let p = published();
    assert_the_counter_counts(|| page(&p, &mut Vec::new(), Instant::now()));
}
