//! The simulated fleet that tests and benches render: `gpus` H100s, each
//! with a periodic Xid 79 and a power-cap clock event, collected twice so
//! that the second collection has a past.
#![allow(dead_code)] // each user takes its own part

use model::Snapshot;
use model::SourceKind;
use sources::Source;
use sources::sim::{Scenario, Sim};

/// When the fleet is read.
pub const T0: f64 = 1.8e9;

/// The scenario file of `gpus` such GPUs.
pub fn json(gpus: usize) -> String {
    let gpu = r#"{"xid":79,"xid_every":"60s","clock_events":["sw_power_cap"]}"#;
    format!(r#"{{"gpus":[{}]}}"#, vec![gpu; gpus].join(","))
}

/// [`json`], parsed.
pub fn scenario(gpus: usize) -> Scenario {
    Scenario::parse(&json(gpus)).expect("the fleet's scenario parses")
}

/// A successful collection of `scenario` at [`T0`], a minute after the one
/// before it.
pub fn collected(scenario: Scenario) -> Snapshot {
    let mut sim = Sim::new(scenario, T0);
    let mut s = Snapshot::empty(SourceKind::Sim);
    sim.collect(T0 - 60.0).expect("the simulator collects");
    s.gpus = sim.collect(T0).expect("the simulator collects");
    s.error = None;
    s
}

/// [`collected`] of `gpus` GPUs.
pub fn snapshot(gpus: usize) -> Snapshot {
    collected(scenario(gpus))
}
