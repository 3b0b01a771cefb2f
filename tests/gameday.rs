//! The hardware-health rules on the simulator: each fires on its game-day
//! incident (`scenarios/gameday.json`), on the GPU the incident names, and
//! none fires on the healthy default fleet.

use alerts::{Evaluator, State, Subject, defaults};
use poller::Poller;
use sources::sim::{Scenario, Sim};
use std::collections::BTreeSet;
use std::time::Duration;

const HEALTH_RULES: [&str; 10] = [
    "GPURowRemapFailure",
    "GPURowRemapPending",
    "GPURetiredPagesPending",
    "GPUPCIeLinkDegraded",
    "GPUNVLinkErrors",
    "GPUNVLinkDown",
    "GPUPCIeReplayErrors",
    "GPUMemoryTemperatureHigh",
    "GPURecoveryReset",
    "GPURecoveryRebootOrDrain",
];

const T0: f64 = 1.8e9;

/// The firing (rule, GPU) pairs after `minutes` of `scenario`, collected
/// every 15 s from the start of serving.
fn firing(scenario: Scenario, minutes: u64) -> BTreeSet<(String, u32)> {
    let mut c = Poller::new(Box::new(Sim::new(scenario, T0)), Duration::from_secs(15));
    let mut e = Evaluator::new(defaults());
    for step in 0..=minutes * 4 {
        e.eval(&c.collect_at(T0 + step as f64 * 15.0));
    }
    let alerts = e.alerts();
    alerts
        .iter()
        .filter(|a| a.state == State::Firing)
        .filter_map(|a| match a.subject {
            Subject::Gpu { index, .. } => Some((a.rule.name.clone(), index)),
            _ => None,
        })
        .collect()
}

#[test]
fn each_health_rule_fires_on_its_incident() {
    // The game day's 20 s hang would sleep for real; it is not ours.
    let text = include_str!("../scenarios/gameday.json")
        .replace(r#"{ "at": "150s", "hang": "20s" },"#, "");
    let fired = firing(Scenario::parse(&text).unwrap(), 20);
    let health: BTreeSet<(String, u32)> = fired
        .into_iter()
        .filter(|(rule, _)| HEALTH_RULES.contains(&rule.as_str()))
        .collect();
    let want: BTreeSet<(String, u32)> = [
        ("GPURowRemapPending", 0),
        ("GPURecoveryReset", 0),
        ("GPUMemoryTemperatureHigh", 1),
        ("GPUNVLinkErrors", 2),
        ("GPURowRemapFailure", 4),
        ("GPURecoveryRebootOrDrain", 4),
        ("GPURetiredPagesPending", 5),
        ("GPUPCIeLinkDegraded", 6),
        ("GPUPCIeReplayErrors", 6),
        ("GPUNVLinkDown", 7),
    ]
    .into_iter()
    .map(|(r, g)| (r.to_string(), g))
    .collect();
    assert_eq!(health, want);
}

#[test]
fn the_healthy_default_fleet_fires_no_health_rule() {
    let fired = firing(Scenario::default_fleet(), 20);
    assert!(!fired.is_empty(), "the demo's own alerts fire");
    for (rule, gpu) in &fired {
        assert!(
            !HEALTH_RULES.contains(&rule.as_str()),
            "{rule} on gpu {gpu}"
        );
    }
}

/// `scenarios/preallocated.json`: GPU 0 is an engine that preallocated 96%
/// of memory into pools it has filled (vLLM's KV cache), so the device has
/// 3.2 GiB free and the pools none: full, not fragmented, and silent. GPU 1
/// has a 1 GiB largest block while its pools hold 6 GiB free: fragmented.
#[test]
fn a_preallocated_engine_is_not_fragmentation() {
    let scenario = Scenario::parse(include_str!("../scenarios/preallocated.json")).unwrap();
    let mut c = Poller::new(
        Box::new(Sim::new(scenario.clone(), T0)),
        Duration::from_secs(15),
    );
    // The rule before it required allocator stats and free pools: largest
    // free block under 5% of memory while memory is in use. It held for
    // GPU 0.
    let s = c.collect_at(T0);
    let r = &s.gpus[0].readings;
    let old = r.largest_free_bytes.unwrap() / r.memory_total_bytes.unwrap() < 0.05
        && r.memory_used_bytes.unwrap() > 0.0;
    assert!(old, "the old rule fired on GPU 0");
    let kv: BTreeSet<(String, u32)> = firing(scenario, 10)
        .into_iter()
        .filter(|(rule, _)| rule == "KVFragmentationRisk")
        .collect();
    assert_eq!(kv, [("KVFragmentationRisk".to_string(), 1)].into());
}

/// One page per incident, in-process: a GPU logs Xid 79 and falls off the
/// bus; both page, and the Xid page is marked as the one Alertmanager's
/// inhibition mutes (`deploy/alertmanager/alertmanager.yml`).
#[test]
fn the_lost_gpus_xid_page_is_marked_muted() {
    let scenario = Scenario::parse(
        r#"{"gpus":[{},{}],"incidents":[{"at":"30s","gpu":1,"xid":79},{"at":"60s","gpu":1,"lost":true}]}"#,
    )
    .unwrap();
    let mut c = Poller::new(Box::new(Sim::new(scenario, T0)), Duration::from_secs(15));
    let mut e = Evaluator::new(defaults());
    for step in 0..=12 {
        e.eval(&c.collect_at(T0 + step as f64 * 15.0));
    }
    let marks: BTreeSet<(String, Option<String>)> = e
        .alerts()
        .iter()
        .filter(|a| a.state == State::Firing)
        .map(|a| {
            let by = a.muted_by.as_ref().map(|m| m.by.name.clone());
            (a.rule.name.clone(), by)
        })
        .collect();
    let want: BTreeSet<(String, Option<String>)> = [
        ("GPULost".to_string(), None),
        ("GPUXidErrors".to_string(), Some("GPULost".to_string())),
    ]
    .into();
    assert_eq!(marks, want);
}
