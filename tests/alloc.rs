//! A scrape renders into a reused buffer without touching the heap. A
//! counting global allocator proves it. It counts only on a thread inside
//! [`count`], so parallel tests and the harness don't disturb it.

use exposition::{Format, Scrape};
use model::Collectors;
use model::Snapshot;
use sources::sim::Scenario;
use std::time::Instant;

#[path = "support/counting.rs"]
mod counting;
use counting::{Counting, assert_the_counter_counts, count};

#[global_allocator]
static GLOBAL: Counting = Counting;

#[path = "support/fleet.rs"]
mod support_fleet;

/// `gpus` simulated GPUs (4: the default fleet), with the process's stats.
fn fleet(gpus: usize) -> Snapshot {
    let mut s = match gpus {
        4 => support_fleet::collected(Scenario::default_fleet()),
        n => support_fleet::snapshot(n),
    };
    s.process = poller::process::read_stats();
    s
}

/// Renders `snapshot` once to warm the buffer, then 100 times counting:
/// (allocations, bytes), each render the same size.
fn renders(snapshot: &Snapshot, format: Format) -> (usize, usize) {
    let mut buf = Vec::new();
    let scrape = Scrape::of(snapshot).format(format);
    scrape.render(&mut buf);
    let size = buf.len();
    let allocations = count(|| {
        for _ in 0..100 {
            buf.clear();
            scrape.render(&mut buf);
        }
    });
    assert_eq!(buf.len(), size);
    (allocations, size)
}

#[test]
fn a_scrape_allocates_nothing_after_warm_up() {
    for gpus in [1, 4, 64] {
        let snapshot = fleet(gpus);
        for format in [Format::Text, Format::OpenMetrics] {
            let (allocations, size) = renders(&snapshot, format);
            assert_eq!(
                allocations, 0,
                "{gpus} GPUs, {format:?}: {allocations} allocations"
            );
            assert!(size > gpus * 1000, "{size} bytes for {gpus} GPUs");
        }
    }
}

#[test]
fn a_scrape_with_attribution_allocates_nothing() {
    use model::{DraDevice, Kubelet};
    let mut snapshot = fleet(4);
    snapshot.collectors = Collectors::ALL;
    let plain = Scrape::of(&snapshot).text();
    snapshot.kubernetes.pod_labels = true;
    snapshot.kubernetes.kubelet = Some(Kubelet {
        last_success: Some(1.8e9),
        errors: [0, 2, 0, 1, 0, 0, 0],
        skipped: [1, 0],
        dra: vec![DraDevice {
            namespace: "ml".into(),
            pod: "dra-pod".into(),
            container: "main".into(),
            claim_namespace: "ml".into(),
            claim: "gpu-claim".into(),
            driver: "gpu.nvidia.com".into(),
            pool: "node-1".into(),
            device: "gpu-0".into(),
        }],
    });
    for format in [Format::Text, Format::OpenMetrics] {
        let (allocations, _) = renders(&snapshot, format);
        assert_eq!(allocations, 0, "{format:?}: {allocations} allocations");
    }
    let text = Scrape::of(&snapshot).text();
    // The demo: one pod on GPUs 0 and 1, two time-slicing GPU 2, a batch
    // job on GPU 3.
    assert_eq!(plain.matches("\ngpu_pod_info{").count(), 4);
    assert_eq!(plain.matches("\ngpu_job_info{").count(), 1);
    assert_eq!(plain.matches("\ngpu_process_memory_used_bytes{").count(), 5);
    assert!(text.contains("\ngpu_pod_dra_info{namespace=\"ml\",pod=\"dra-pod\",container=\"main\",claim_namespace=\"ml\",claim=\"gpu-claim\",driver=\"gpu.nvidia.com\",pool=\"node-1\",device=\"gpu-0\"} 1\n"));
    assert!(text.contains("\ngpu_exporter_kubelet_errors_total{reason=\"timeout\"} 2\n"));
    assert!(text.contains("\ngpu_exporter_kubelet_last_success_timestamp_seconds 1800000000\n"));
    // Pod labels: GPU 2's series twice, one per pod; GPU 3's once, bare.
    let temps = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("gpu_temperature_celsius{"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let (bare, labelled) = (temps(&plain), temps(&text));
    assert_eq!((bare.len(), labelled.len()), (4, 5));
    assert!(
        labelled[2]
            .contains(",namespace=\"research\",pod=\"notebook-alice\",container=\"jupyter\"}")
    );
    assert!(labelled[3].contains(",pod=\"notebook-bob\","));
    assert_eq!(labelled[4], bare[3]);
}

#[test]
fn a_filtered_scrape_allocates_nothing_and_writes_only_its_collectors() {
    use model::Collector::{Gpm, Temperature, Xid};
    use routes::query;
    let snapshot = fleet(4);
    let now = Instant::now();
    let queries = [
        "collect%5B%5D=gpm&collect%5B%5D=xid",
        "collect[]=temperature&exclude[]=temperature",
        "exclude%5B%5D=clocks&exclude%5B%5D=nvlink",
    ];
    let mut full = Vec::new();
    let scrape = |only| Scrape {
        only,
        now,
        ..Scrape::of(&snapshot)
    };
    scrape(Collectors::ALL).render(&mut full);
    for q in queries {
        let only = query::collectors(q).unwrap();
        let mut buf = Vec::new();
        scrape(only).render(&mut buf);
        let size = buf.len();
        assert!(size < full.len(), "{q}");
        let allocations = count(|| {
            for _ in 0..100 {
                buf.clear();
                let only = query::collectors(std::hint::black_box(q)).unwrap();
                scrape(only).render(&mut buf);
            }
        });
        assert_eq!(allocations, 0, "{q}: {allocations} allocations");
        assert_eq!(buf.len(), size);
    }
    let mut buf = Vec::new();
    let only = Collectors::NONE.with(Gpm).with(Xid);
    scrape(only).render(&mut buf);
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
    assert_the_counter_counts(|| Scrape::of(&snapshot).render(&mut Vec::new()));
}

#[test]
fn a_scrape_with_the_dcgm_collector_allocates_nothing() {
    use model::dcgm::{DEFAULT_COUNTERS, parse};
    let mut d = parse(DEFAULT_COUNTERS, "default").unwrap();
    d.hostname = Some("node-\"1\"".into());
    let mut snapshot = fleet(4);
    snapshot.collectors = Collectors::ALL;
    snapshot.dcgm = Some(std::sync::Arc::new(d));
    snapshot.kubernetes.pod_labels = true;
    for format in [Format::Text, Format::OpenMetrics] {
        let (allocations, _) = renders(&snapshot, format);
        assert_eq!(allocations, 0, "{format:?}: {allocations} allocations");
    }
    let text = Scrape::of(&snapshot).text();
    let temps: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{"))
        .collect();
    // One copy per pod on the time-sliced GPU 2, as dcgm-exporter does;
    // the host name escaped, where dcgm-exporter prints it raw.
    assert_eq!(temps.len(), 5, "{temps:?}");
    assert!(
        temps[2].contains(",Hostname=\"node-\\\"1\\\"\","),
        "{}",
        temps[2]
    );
    let pod = ",pod=\"notebook-alice\",namespace=\"research\",container=\"jupyter\"}";
    assert!(temps[2].contains(pod), "{}", temps[2]);
}
