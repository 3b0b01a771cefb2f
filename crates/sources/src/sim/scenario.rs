//! Scenario files: the fleet at its origin and the incident script, read
//! and checked field by field; every error names the field.

use super::health::{self, HealthSpec, HealthState};
use super::users::{self, Users};
use super::{Counter, EPOCH};
use base::json;
use base::time::{parse_duration, rfc3339};
use base::units::GIB;
use model::MAX_NAME;
use model::{TTFT_BUCKETS, clock_event_bit};
use std::time::Duration;

/// The most GPUs, served models and incidents a scenario holds: the replay
/// at start is linear in rules × GPUs (and models), so they are bounded.
pub const MAX_GPUS: usize = 64;
pub const MAX_MODELS: usize = 16;
pub const MAX_INCIDENTS: usize = 1000;

/// The built-in fleet, `scenarios/default.json`: the seed lab's four GPUs.
const DEFAULT_SCENARIO: &str = include_str!("../../../../scenarios/default.json");

/// The file's shape, as nanoserde reads it.
#[allow(clippy::question_mark)] // in nanoserde's derived code
mod file {
    use crate::sim::health::HealthSpec;
    use crate::sim::users::{PodSpec, ProcessSpec};
    use base::json::json_struct;

    json_struct! {
        pub struct ScenarioFile {
            pub driver_version: Option<String>,
            pub gpus: Vec<GpuSpec>,
            pub models: Option<Vec<ModelSpec>>,
            pub incidents: Option<Vec<IncidentSpec>>,
        }
    }

    json_struct! {
        /// A served model: requests per second and the fraction of them
        /// whose first token takes longer than the SLO's 0.3 s.
        pub struct ModelSpec {
            pub name: String,
            pub requests_per_second: Option<f64>,
            pub slow_fraction: Option<f64>,
        }
    }

    json_struct! {
        /// One GPU; every field has a healthy default.
        #[derive(Default)]
        pub struct GpuSpec {
            pub model: Option<String>,
            pub memory_total_gib: Option<f64>,
            pub memory_used_gib: Option<f64>,
            pub temperature_celsius: Option<f64>,
            pub memory_temperature_celsius: Option<f64>,
            pub sm_clock_mhz: Option<f64>,
            pub sm_clock_max_mhz: Option<f64>,
            pub memory_clock_mhz: Option<f64>,
            pub clock_events: Option<Vec<String>>,
            pub power_watts: Option<f64>,
            pub power_limit_watts: Option<f64>,
            pub utilization_percent: Option<f64>,
            pub sm_active: Option<f64>,
            pub sm_occupancy: Option<f64>,
            pub dram_active: Option<f64>,
            pub largest_free_gib: Option<f64>,
            pub allocator_reserved_gib: Option<f64>,
            pub allocator_allocated_gib: Option<f64>,
            pub pcie_bytes_per_second: Option<f64>,
            pub nvlink_bytes_per_second: Option<f64>,
            /// A periodic Xid: `xid` happens once every `xid_every`.
            pub xid: Option<u32>,
            pub xid_every: Option<String>,
            pub health: Option<HealthSpec>,
            /// Who uses it: containers, processes, batch jobs.
            pub pods: Option<Vec<PodSpec>>,
            pub processes: Option<Vec<ProcessSpec>>,
            pub jobs: Option<Vec<String>>,
        }
    }

    json_struct! {
        /// Something that happens at `at` after serving starts.
        pub struct IncidentSpec {
            pub at: String,
            pub gpu: Option<u32>,
            /// A served model whose `slow_fraction` changes.
            pub model: Option<String>,
            pub slow_fraction: Option<f64>,
            pub clock_events: Option<Vec<String>>,
            pub temperature_celsius: Option<f64>,
            pub memory_temperature_celsius: Option<f64>,
            pub sm_clock_mhz: Option<f64>,
            pub largest_free_gib: Option<f64>,
            pub allocator_allocated_gib: Option<f64>,
            pub lost: Option<bool>,
            /// One occurrence of this Xid code (`count` of them).
            pub xid: Option<u32>,
            pub count: Option<u64>,
            pub health: Option<HealthSpec>,
            /// The next collection blocks this long.
            pub hang: Option<String>,
            /// Collections fail for this long.
            pub fail: Option<String>,
        }
    }
}
use file::{GpuSpec, IncidentSpec, ModelSpec, ScenarioFile};

/// One GPU as the simulator keeps it: its state at the origin, then
/// advanced along the clock.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct GpuState {
    pub(super) model: String,
    pub(super) lost: bool,
    pub(super) total: f64,
    pub(super) used: f64,
    pub(super) temp: f64,
    pub(super) mem_temp: f64,
    pub(super) sm_mhz: f64,
    pub(super) sm_max_mhz: f64,
    pub(super) mem_mhz: f64,
    pub(super) events: u64,
    pub(super) power: f64,
    pub(super) power_limit: f64,
    pub(super) util: f64,
    pub(super) sm_active: f64,
    pub(super) sm_occupancy: f64,
    pub(super) dram_active: f64,
    pub(super) largest_free: f64,
    pub(super) alloc_reserved: f64,
    pub(super) alloc_allocated: f64,
    pub(super) pcie_rate: f64,
    pub(super) nvlink_rate: f64,
    pub(super) periodic_xid: Option<(u32, f64)>,
    // Counters: the incidents' Xid since the origin, the rest since the
    // epoch.
    pub(super) xid_once: Vec<(u32, u64)>,
    /// When the latest incident Xid came, and its code.
    pub(super) xid_incident: Option<super::TimedXid>,
    pub(super) energy: Counter,
    pub(super) pcie: Counter,
    pub(super) nvlink: Counter,
    pub(super) event_seconds: [Counter; 9],
    pub(super) health: HealthState,
    pub(super) users: Users,
}
/// One served model and its TTFT histogram so far.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ModelState {
    pub(super) name: String,
    pub(super) rps: f64,
    pub(super) slow: f64,
    /// Requests at or below each of [`TTFT_BUCKETS`], since the epoch.
    pub(super) buckets: [Counter; TTFT_BUCKETS.len()],
    pub(super) sum: Counter,
}
/// What an incident does.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Action {
    Gpu(usize, Box<GpuChange>),
    /// A model's slow fraction changes.
    Slow(usize, f64),
    Hang(Duration),
    Fail(f64),
}
/// The readings an incident changes on one GPU.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct GpuChange {
    pub(super) events: Option<u64>,
    pub(super) temp: Option<f64>,
    pub(super) mem_temp: Option<f64>,
    pub(super) sm_mhz: Option<f64>,
    pub(super) largest_free: Option<f64>,
    pub(super) alloc_allocated: Option<f64>,
    pub(super) lost: Option<bool>,
    pub(super) xid: Option<(u32, u64)>,
    pub(super) health: Option<HealthSpec>,
}
/// An action at `at` seconds after serving starts.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Incident {
    pub(super) at: f64,
    pub(super) action: Action,
}
/// A validated scenario: the fleet at its origin and the incident script.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub(super) driver_version: String,
    pub(super) gpus: Vec<GpuState>,
    pub(super) models: Vec<ModelState>,
    pub(super) incidents: Vec<Incident>,
    /// Unix time the incidents count from; `None`: the process start.
    pub(super) origin: Option<f64>,
}
impl Scenario {
    pub fn default_fleet() -> Scenario {
        Scenario::parse(DEFAULT_SCENARIO).expect("the built-in scenario is valid")
    }

    /// Reads a scenario; the error names the bad field.
    pub fn parse(json: &str) -> Result<Scenario, String> {
        let file: ScenarioFile = json::read(json)?;
        if file.gpus.is_empty() || file.gpus.len() > MAX_GPUS {
            return Err(format!(
                "gpus: {} GPUs; a scenario holds 1 to {MAX_GPUS}",
                file.gpus.len()
            ));
        }
        let counts = [
            (
                "models",
                file.models.as_ref().map_or(0, Vec::len),
                MAX_MODELS,
            ),
            (
                "incidents",
                file.incidents.as_ref().map_or(0, Vec::len),
                MAX_INCIDENTS,
            ),
        ];
        for (field, n, most) in counts {
            if n > most {
                return Err(format!(
                    "{field}: {n} of them; a scenario holds at most {most}"
                ));
            }
        }
        if let Some(v) = &file.driver_version {
            name("driver_version", v)?;
        }
        let gpus = file
            .gpus
            .iter()
            .enumerate()
            .map(|(i, g)| gpu_state(g).map_err(|e| format!("gpus[{i}].{e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let models = file
            .models
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, m)| model_state(m).map_err(|e| format!("models[{i}].{e}")))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, m) in models.iter().enumerate() {
            if models[..i].iter().any(|o| o.name == m.name) {
                return Err(format!("models[{i}].name: {:?} appears twice", m.name));
            }
        }
        let mut incidents = Vec::new();
        for (i, s) in file.incidents.iter().flatten().enumerate() {
            incidents
                .push(incident(s, gpus.len(), &models).map_err(|e| format!("incidents[{i}].{e}"))?);
        }
        // Stable: incidents at the same time keep their file order.
        incidents.sort_by(|a, b| a.at.total_cmp(&b.at));
        let driver_version = file.driver_version.unwrap_or_else(|| "550.90.07".into());
        Ok(Scenario {
            driver_version,
            gpus,
            models,
            incidents,
            origin: None,
        })
    }

    /// The scenario with its incidents at their offsets from `origin`
    /// (Unix time, `--sim.start`) rather than from the process start: at
    /// or after the simulated driver's load ([`EPOCH`], where every counter
    /// starts) and at or before `now`.
    pub fn starting_at(mut self, origin: f64, now: f64) -> Result<Scenario, String> {
        let (why, bound) = match origin {
            o if o < EPOCH => ("before the simulated driver loaded at", EPOCH),
            o if o > now => ("in the future: now is", now),
            _ => {
                self.origin = Some(origin);
                return Ok(self);
            }
        };
        Err(format!("{} is {why} {}", rfc3339(origin), rfc3339(bound)))
    }
}
// The bounds a scenario's readings are held to.
const CELSIUS: (f64, f64) = (-40.0, 150.0);
const MHZ: (f64, f64) = (0.0, 10_000.0);
const MEMORY_MHZ: (f64, f64) = (0.0, 20_000.0);
const WATTS: (f64, f64) = (0.0, 5_000.0);
const PERCENT: (f64, f64) = (0.0, 100.0);
const RATIO: (f64, f64) = (0.0, 1.0);

/// `v`, or `default` where the scenario leaves it out, within `lo..=hi`.
fn check(name: &str, v: Option<f64>, default: f64, (lo, hi): (f64, f64)) -> Result<f64, String> {
    let v = v.unwrap_or(default);
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{name}: {v} is outside {lo}..={hi}"))
    }
}
fn events_mask(name: &str, reasons: &[String]) -> Result<u64, String> {
    reasons.iter().try_fold(0, |m, r| {
        clock_event_bit(r)
            .map(|b| m | b)
            .ok_or_else(|| format!("{name}: unknown clock event reason {r:?}"))
    })
}
fn duration(name: &str, s: &str) -> Result<f64, String> {
    parse_duration(s)
        .map(|d| d.as_secs_f64())
        .map_err(|e| format!("{name}: {e}"))
}
fn xid_code(name: &str, code: u32) -> Result<u32, String> {
    if (1..=1000).contains(&code) {
        Ok(code)
    } else {
        Err(format!("{name}: {code} is not an Xid code (1..=1000)"))
    }
}
/// A GPU's memory and its allocator's pools, in bytes.
struct Memory {
    total: f64,
    used: f64,
    largest_free: f64,
    alloc_reserved: f64,
    alloc_allocated: f64,
}

fn memory(g: &GpuSpec) -> Result<Memory, String> {
    let total = check(
        "memory_total_gib",
        g.memory_total_gib,
        80.0,
        (0.001, 4096.0),
    )? * GIB;
    let used = check(
        "memory_used_gib",
        g.memory_used_gib,
        60.0,
        (0.0, total / GIB),
    )? * GIB;
    let largest_free = check(
        "largest_free_gib",
        g.largest_free_gib,
        18.0,
        (0.0, total / GIB),
    )? * GIB;
    let alloc_reserved = check(
        "allocator_reserved_gib",
        g.allocator_reserved_gib,
        used / GIB - 2.0,
        (0.0, total / GIB),
    )? * GIB;
    let alloc_allocated = check(
        "allocator_allocated_gib",
        g.allocator_allocated_gib,
        alloc_reserved / GIB - 6.0,
        (0.0, total / GIB),
    )? * GIB;
    Ok(Memory {
        total,
        used,
        largest_free,
        alloc_reserved,
        alloc_allocated,
    })
}

/// The Xid a GPU raises every so often: both fields or neither.
fn periodic_xid(g: &GpuSpec) -> Result<Option<(u32, f64)>, String> {
    Ok(match (g.xid, &g.xid_every) {
        (None, None) => None,
        (Some(code), Some(every)) => {
            let every = duration("xid_every", every)?;
            if every <= 0.0 {
                return Err("xid_every: must be above 0".into());
            }
            Some((xid_code("xid", code)?, every))
        }
        (Some(_), None) => return Err("xid_every: missing; xid needs it".into()),
        (None, Some(_)) => return Err("xid: missing; xid_every needs it".into()),
    })
}

fn gpu_state(g: &GpuSpec) -> Result<GpuState, String> {
    let Memory {
        total,
        used,
        largest_free,
        alloc_reserved,
        alloc_allocated,
    } = memory(g)?;
    let periodic_xid = periodic_xid(g)?;
    let temp = check("temperature_celsius", g.temperature_celsius, 65.0, CELSIUS)?;
    if let Some(m) = &g.model {
        name("model", m)?;
    }
    let mut health = HealthState::default();
    if let Some(h) = &g.health {
        health::check(h)?;
        health.apply(h);
    }
    Ok(GpuState {
        model: g
            .model
            .clone()
            .unwrap_or_else(|| "NVIDIA H100 80GB HBM3".into()),
        lost: false,
        total,
        used,
        temp,
        mem_temp: check(
            "memory_temperature_celsius",
            g.memory_temperature_celsius,
            temp - 4.0,
            CELSIUS,
        )?,
        sm_mhz: check("sm_clock_mhz", g.sm_clock_mhz, 1410.0, MHZ)?,
        sm_max_mhz: check("sm_clock_max_mhz", g.sm_clock_max_mhz, 1980.0, MHZ)?,
        mem_mhz: check("memory_clock_mhz", g.memory_clock_mhz, 2619.0, MEMORY_MHZ)?,
        events: events_mask(
            "clock_events",
            g.clock_events.as_deref().unwrap_or_default(),
        )?,
        power: check("power_watts", g.power_watts, 520.0, WATTS)?,
        power_limit: check("power_limit_watts", g.power_limit_watts, 700.0, WATTS)?,
        util: check("utilization_percent", g.utilization_percent, 97.0, PERCENT)? / 100.0,
        sm_active: check("sm_active", g.sm_active, 0.62, RATIO)?,
        sm_occupancy: check("sm_occupancy", g.sm_occupancy, 0.41, RATIO)?,
        dram_active: check("dram_active", g.dram_active, 0.55, RATIO)?,
        largest_free,
        alloc_reserved,
        alloc_allocated,
        pcie_rate: check(
            "pcie_bytes_per_second",
            g.pcie_bytes_per_second,
            2.5e9,
            (0.0, 1e12),
        )?,
        nvlink_rate: check(
            "nvlink_bytes_per_second",
            g.nvlink_bytes_per_second,
            1.2e11,
            (0.0, 1e13),
        )?,
        periodic_xid,
        xid_once: Vec::new(),
        xid_incident: None,
        energy: Counter::default(),
        pcie: Counter::default(),
        nvlink: Counter::default(),
        event_seconds: [Counter::default(); 9],
        health,
        users: users::check(&g.pods, &g.processes, &g.jobs, total)?,
    })
}
/// A name a scenario gives (a label value): 1 to [`MAX_NAME`] bytes.
fn name(field: &str, v: &str) -> Result<(), String> {
    if v.is_empty() || v.len() > MAX_NAME {
        return Err(format!(
            "{field}: {} bytes; a name holds 1 to {MAX_NAME}",
            v.len()
        ));
    }
    Ok(())
}
fn model_state(m: &ModelSpec) -> Result<ModelState, String> {
    name("name", &m.name)?;
    Ok(ModelState {
        name: m.name.clone(),
        rps: check(
            "requests_per_second",
            m.requests_per_second,
            50.0,
            (0.0, 1e6),
        )?,
        slow: check("slow_fraction", m.slow_fraction, 0.0002, (0.0, 1.0))?,
        buckets: [Counter::default(); TTFT_BUCKETS.len()],
        sum: Counter::default(),
    })
}
fn incident(s: &IncidentSpec, gpus: usize, models: &[ModelState]) -> Result<Incident, String> {
    let at = duration("at", &s.at)?;
    if let Some(name) = &s.model {
        let i = models
            .iter()
            .position(|m| &m.name == name)
            .ok_or_else(|| format!("model: {name:?} is not in the scenario's models"))?;
        let slow = s
            .slow_fraction
            .ok_or("slow_fraction: missing; a model change needs it")?;
        let slow = check("slow_fraction", Some(slow), 0.0, (0.0, 1.0))?;
        return Ok(Incident {
            at,
            action: Action::Slow(i, slow),
        });
    }
    let change = GpuChange {
        events: s
            .clock_events
            .as_deref()
            .map(|r| events_mask("clock_events", r))
            .transpose()?,
        temp: s
            .temperature_celsius
            .map(|v| check("temperature_celsius", Some(v), 0.0, (-40.0, 150.0)))
            .transpose()?,
        mem_temp: s
            .memory_temperature_celsius
            .map(|v| check("memory_temperature_celsius", Some(v), 0.0, (-40.0, 150.0)))
            .transpose()?,
        sm_mhz: s
            .sm_clock_mhz
            .map(|v| check("sm_clock_mhz", Some(v), 0.0, (0.0, 10_000.0)))
            .transpose()?,
        largest_free: s
            .largest_free_gib
            .map(|v| check("largest_free_gib", Some(v), 0.0, (0.0, 4096.0)).map(|v| v * GIB))
            .transpose()?,
        alloc_allocated: s
            .allocator_allocated_gib
            .map(|v| check("allocator_allocated_gib", Some(v), 0.0, (0.0, 4096.0)).map(|v| v * GIB))
            .transpose()?,
        lost: s.lost,
        xid: s
            .xid
            .map(|c| xid_code("xid", c).map(|c| (c, s.count.unwrap_or(1))))
            .transpose()?,
        health: match &s.health {
            Some(h) => {
                health::check(h)?;
                Some(h.clone())
            }
            None => None,
        },
    };
    let fleet = [s.hang.as_deref(), s.fail.as_deref()];
    let action = match (s.gpu, fleet, change == GpuChange::default()) {
        (None, [Some(h), None], true) => {
            Action::Hang(Duration::from_secs_f64(duration("hang", h)?))
        }
        (None, [None, Some(f)], true) => Action::Fail(duration("fail", f)?),
        (Some(g), [None, None], false) if (g as usize) < gpus => {
            Action::Gpu(g as usize, Box::new(change))
        }
        (Some(g), [None, None], false) => {
            return Err(format!("gpu: {g} is not in the fleet (0..{gpus})"));
        }
        (Some(_), [None, None], true) => {
            return Err("gpu: names a GPU but no change (clock_events, temperature_celsius, memory_temperature_celsius, sm_clock_mhz, largest_free_gib, allocator_allocated_gib, lost, xid or health)".into());
        }
        (None, [None, None], _) => {
            return Err(
                "gpu: missing; a GPU change needs a gpu, or give hang or fail alone".into(),
            );
        }
        _ => return Err("hang: hang and fail stand alone, without gpu or GPU changes".into()),
    };
    Ok(Incident { at, action })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(json: &str) -> String {
        Scenario::parse(json).unwrap_err()
    }

    #[test]
    fn bad_scenarios_name_the_field() {
        assert!(err(r#"{"gpus":[]}"#).starts_with("gpus:"));
        assert!(err(r#"{}"#).contains("gpus"));
        assert!(
            err(r#"{"gpus":[{},{"temperature_celsius":300}]}"#)
                .starts_with("gpus[1].temperature_celsius")
        );
        assert!(err(r#"{"gpus":[{"clock_events":["hot"]}]}"#).contains("gpus[0].clock_events"));
        assert!(err(r#"{"gpus":[{"xid":79}]}"#).starts_with("gpus[0].xid_every"));
        assert!(err(r#"{"gpus":[{"memory_used_gib":90}]}"#).starts_with("gpus[0].memory_used_gib"));
        assert!(
            err(r#"{"gpus":[{}],"incidents":[{"at":"1s","gpu":3,"lost":true}]}"#)
                .starts_with("incidents[0].gpu")
        );
        assert!(
            err(r#"{"gpus":[{}],"incidents":[{"at":"soon","hang":"1s"}]}"#)
                .starts_with("incidents[0].at")
        );
        assert!(
            err(r#"{"gpus":[{}],"incidents":[{"at":"1s","gpu":0}]}"#)
                .starts_with("incidents[0].gpu")
        );
        assert!(err(r#"{"gpus":[{"temperature_celsius":"hot"}]}"#).contains("line 1"));
        assert_eq!(
            err(r#"{"gpus":[{},{"temprature_celsius":80}]}"#),
            "gpus[1].temprature_celsius: unknown field"
        );
        // nanoserde's own skipping panics on the first and hangs on the
        // second; the strict pass in front of it refuses both.
        assert!(err(r#"{"gpus":[{}],"x":}"#).contains("not valid JSON"));
        assert!(err(r#"{"gpus":[{}],"x":["#).contains("not valid JSON"));
        let many = format!(r#"{{"gpus":[{}]}}"#, vec!["{}"; 65].join(","));
        assert!(err(&many).starts_with("gpus: 65"));
    }
}
