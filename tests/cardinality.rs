//! The cardinality budget: at most 93 series per GPU over the simulator's
//! H100 fleet with the default collectors, and at most 16 per MIG
//! instance over the fake NVML's MIG scenario. Opt-in collectors
//! (`nvlink_link`) are outside it, as their help says.

use exposition::Scrape;
use model::Snapshot;
use model::SourceKind;
use poller::Poller;
use sources::Source;
use sources::nvml::{Nvml, Options};
use sources::sim::{Scenario, Sim};
use std::collections::BTreeMap;
use std::time::Duration;

#[path = "support/fake_nvml.rs"]
mod fake_nvml;
use fake_nvml::Fixture;

// 91: gpu_memory_utilization_ratio added one series a GPU; 92:
// gpu_xid_last_code another; 93: gpu_memory_clock_max_hertz
// (dcgm-exporter's DCGM_FI_DEV_MAX_MEM_CLOCK).
const PER_GPU: usize = 93;
const PER_MIG_INSTANCE: usize = 16;

/// Series per target: `gpu="N"` alone, or `gpu="N"` with its
/// `mig_instance`.
fn series(snapshot: &Snapshot) -> BTreeMap<String, usize> {
    let mut per = BTreeMap::new();
    for line in Scrape::of(snapshot).text().lines() {
        let Some(at) = line.find("{gpu=\"") else {
            continue;
        };
        let labels = &line[at..];
        let gpu = labels.split('"').nth(1).unwrap();
        let target = match labels.split("mig_instance=\"").nth(1) {
            Some(rest) => format!("gpu{gpu}/mig{}", rest.split('"').next().unwrap()),
            None => format!("gpu{gpu}"),
        };
        *per.entry(target).or_insert(0) += 1;
    }
    per
}

#[test]
fn an_h100_renders_at_most_93_series() {
    // The default fleet's H100s, and one with a periodic Xid (which adds
    // its last timestamp).
    for scenario in [
        Scenario::default_fleet(),
        Scenario::parse(r#"{"gpus":[{"xid":79,"xid_every":"10s"}]}"#).unwrap(),
    ] {
        let t0 = 1.8e9;
        let mut c = Poller::new(Box::new(Sim::new(scenario, t0)), Duration::from_secs(1));
        c.collect_at(t0 - 60.0);
        let per = series(&c.collect_at(t0));
        println!("series per simulated H100: {per:?}");
        assert!(!per.is_empty());
        for (gpu, n) in per {
            assert!(n <= PER_GPU, "{gpu}: {n} series");
        }
    }
}

#[test]
fn a_mig_instance_renders_at_most_16_series() {
    let gpm = r#""gpm":{"sm_active":75.0,"sm_occupancy":30.0,"dram_active":12.5,
        "tensor":40.0,"fp64":1.0,"fp32":5.0,"fp16":2.0}"#;
    let mig = format!(
        r#"{{"gpus":[{{"uuid":"GPU-mig","temperature":50,"memory_temperature":61,{gpm},
        "memory":{{"total":85520809984,"reserved":536870912,"free":1000,"used":2000}},
        "mig":[
          {{"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-a","gpu_instance_id":1,
           "memory":{{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960}},{gpm}}},
          {{"name":"NVIDIA H100 80GB HBM3 MIG 4g.40gb","uuid":"MIG-b","gpu_instance_id":2,
           "memory":{{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960}},{gpm}}}
        ]}}]}}"#
    );
    let f = Fixture::new("cardinality-mig", &mig);
    let mut nvml = Nvml::open_with(Some(&f.lib), Options::default()).unwrap();
    nvml.collect(0.0).unwrap();
    std::thread::sleep(Duration::from_millis(150));
    let mut snapshot = Snapshot::empty(SourceKind::Nvml);
    snapshot.gpus = nvml.collect(0.0).unwrap();
    snapshot.error = None;
    let per = series(&snapshot);
    println!("series per target: {per:?}");
    let instances: Vec<_> = per.iter().filter(|(t, _)| t.contains("/mig")).collect();
    assert_eq!(instances.len(), 2, "{per:?}");
    for (target, &n) in instances {
        assert!(n <= PER_MIG_INSTANCE, "{target}: {n} series");
        // Memory and GPM, with the pipes: what a MIG instance has.
        assert!(n >= 11, "{target}: {n} series");
    }
}
