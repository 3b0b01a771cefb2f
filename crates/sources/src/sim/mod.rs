//! The simulated fleet: deterministic, with scripted incidents and its own
//! clock. Its default is the seed lab's four GPUs (`scenarios/default.json`).
//!
//! Time: a counter is a function of wall time since [`EPOCH`], as a real
//! one lives in the driver: a restarted exporter goes on from where the
//! last one was, and no counter goes back. `t0` is when serving starts.
//! The poller replays [`Source::history_seconds`] of the past through the
//! alert evaluator before serving, so `for` durations and windows have
//! filled by the first scrape. Incidents are scripted at offsets from the
//! origin: `t0`, or `--sim.start` ([`Scenario::starting_at`]), with which a
//! restart replays the incidents already past and goes on with what they
//! added to the counters too.

mod health;
mod scenario;
mod users;

pub use scenario::Scenario;

use super::{Source, SourceError};
use base::units::MHZ;
use model::SourceKind;
use model::dcgm::prof;
use model::{Gpu, Health, Readings, TTFT_BUCKETS, TxRx, last_code, xid_errors};
use scenario::{Action, GpuState, ModelState};
use std::fmt::Write;

/// An Xid's Unix time and code.
type TimedXid = (f64, u32);

/// How much past the simulator replays before serving: enough for every
/// default rule's window plus its `for`, the 3-day SLO window included.
pub const HISTORY_SECONDS: f64 = 3.0 * 86_400.0 + 3600.0;

/// 2026-01-01T00:00:00Z, when the simulated driver loaded: its counters
/// count from here.
pub const EPOCH: f64 = 1_767_225_600.0;

/// A counter growing at a rate that incidents change: its value when the
/// rate last changed, and since when. Read in closed form, never summed
/// step by step, so that every run reads the same value at the same time
/// (to the bit), however many collections it made on the way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Counter {
    base: f64,
    since: f64,
    rate: f64,
}

impl Default for Counter {
    fn default() -> Counter {
        Counter {
            base: 0.0,
            since: EPOCH,
            rate: 0.0,
        }
    }
}

impl Counter {
    /// Its value at `t`; 0 before [`EPOCH`]. Monotonic in `t`: rounding a
    /// product or a sum never reverses an order.
    pub(super) fn at(&self, t: f64) -> f64 {
        self.base + self.rate * (t - self.since).max(0.0)
    }

    /// From `t` on it grows at `rate` (per second, at least 0).
    pub(super) fn set_rate(&mut self, t: f64, rate: f64) {
        if rate != self.rate {
            self.base = self.at(t);
            self.since = t.max(self.since);
            self.rate = rate;
        }
    }
}

/// Where a good request's TTFT falls (cumulative, for bounds up to the
/// SLO's 0.3 s) and where a slow one's does (for bounds above it).
const GOOD_SHAPE: [f64; 4] = [0.15, 0.55, 0.9, 1.0];
const SLOW_SHAPE: [f64; 6] = [0.45, 0.8, 0.95, 0.99, 1.0, 1.0];

impl ModelState {
    /// From `t` on, requests arrive at its `rps`, `slow` of them slow.
    fn set_rates(&mut self, t: f64) {
        let (good, slow) = (self.rps * (1.0 - self.slow), self.rps * self.slow);
        for (i, b) in self.buckets.iter_mut().enumerate() {
            let rate = match (
                GOOD_SHAPE.get(i),
                SLOW_SHAPE.get(i.wrapping_sub(GOOD_SHAPE.len())),
            ) {
                (Some(g), _) => good * g,
                (None, Some(s)) => good + slow * s,
                (None, None) => good + slow,
            };
            b.set_rate(t, rate);
        }
        self.sum.set_rate(t, good * 0.12 + slow * 0.9);
    }

    /// Its series at `at` as vLLM (v1) spells them on its `/metrics`: the
    /// TTFT histogram, and requests finished by reason (none in error).
    fn spell(&self, at: f64, out: &mut String) {
        let mut name = String::new();
        for c in self.name.chars() {
            match c {
                '\\' | '"' => name.extend(['\\', c]),
                '\n' => name.push_str("\\n"),
                c => name.push(c),
            }
        }
        let ttft = "vllm:time_to_first_token_seconds";
        let model = format!("model_name=\"{name}\"");
        let mut count = 0.0;
        for (&le, n) in TTFT_BUCKETS.iter().zip(self.buckets) {
            count = n.at(at).floor();
            let le = if le.is_finite() {
                le.to_string()
            } else {
                "+Inf".into()
            };
            let _ = writeln!(out, "{ttft}_bucket{{{model},le=\"{le}\"}} {count}");
        }
        let sum = (self.sum.at(at) * 1000.0).round() / 1000.0;
        let _ = writeln!(
            out,
            "{ttft}_sum{{{model}}} {sum}\n{ttft}_count{{{model}}} {count}"
        );
        for (reason, n) in [("stop", count), ("error", 0.0)] {
            let _ = writeln!(
                out,
                "vllm:request_success_total{{{model},finished_reason=\"{reason}\"}} {n}"
            );
        }
    }
}

impl GpuState {
    /// From `t` on, its counters grow as it stands: not at all while lost.
    fn set_rates(&mut self, t: f64) {
        let on = if self.lost { 0.0 } else { 1.0 };
        self.energy.set_rate(t, self.power * on);
        self.pcie.set_rate(t, self.pcie_rate * on);
        self.nvlink.set_rate(t, self.nvlink_rate * on);
        for (i, s) in self.event_seconds.iter_mut().enumerate() {
            let held = self.events & (1 << i) != 0;
            s.set_rate(t, if held { on } else { 0.0 });
        }
        self.health.set_rates(t, on);
    }
}

/// The simulated source: a [`Scenario`] advanced along a clock.
#[derive(Clone)]
pub struct Sim {
    scenario: Scenario,
    gpus: Vec<GpuState>,
    models: Vec<ModelState>,
    /// Unix time serving starts: an incident before it is history, and
    /// one that hangs is not slept.
    t0: f64,
    /// Unix time the incidents count from.
    origin: f64,
    /// Unix time of the latest collection: the clock never goes back.
    last: Option<f64>,
    next_incident: usize,
    failing_until: f64,
}

impl Sim {
    pub fn new(scenario: Scenario, t0: f64) -> Sim {
        let mut gpus = scenario.gpus.clone();
        for g in &mut gpus {
            g.set_rates(EPOCH);
        }
        let mut models = scenario.models.clone();
        for m in &mut models {
            m.set_rates(EPOCH);
        }
        Sim {
            gpus,
            models,
            origin: scenario.origin.unwrap_or(t0),
            scenario,
            t0,
            last: None,
            next_incident: 0,
            failing_until: f64::NEG_INFINITY,
        }
    }

    /// The clock: the latest time collected, or `t0` before any.
    fn now(&self) -> f64 {
        self.last.unwrap_or(self.t0)
    }

    /// Moves the clock to `at` (never back), through the incidents due.
    fn advance(&mut self, at: f64) {
        let at = at.max(self.last.unwrap_or(at));
        self.last = Some(at);
        while let Some(inc) = self.scenario.incidents.get(self.next_incident) {
            let t = self.origin + inc.at;
            if t > at {
                break;
            }
            self.next_incident += 1;
            match &inc.action {
                Action::Hang(_) if t < self.t0 => {}
                Action::Hang(d) => {
                    log::warn!("sim: scenario incident: this collection hangs for {d:?}");
                    std::thread::sleep(*d);
                }
                Action::Fail(d) => self.failing_until = t + d,
                Action::Slow(i, slow) => {
                    self.models[*i].slow = *slow;
                    self.models[*i].set_rates(t);
                }
                Action::Gpu(i, c) => {
                    let g = &mut self.gpus[*i];
                    g.events = c.events.unwrap_or(g.events);
                    g.temp = c.temp.unwrap_or(g.temp);
                    g.mem_temp = c.mem_temp.unwrap_or(g.mem_temp);
                    if let Some(h) = &c.health {
                        g.health.apply(h);
                    }
                    g.sm_mhz = c.sm_mhz.unwrap_or(g.sm_mhz);
                    g.largest_free = c.largest_free.unwrap_or(g.largest_free);
                    g.alloc_allocated = c.alloc_allocated.unwrap_or(g.alloc_allocated);
                    g.lost = c.lost.unwrap_or(g.lost);
                    if let Some((code, n)) = c.xid {
                        if n > 0 {
                            g.xid_incident = Some((t, code));
                        }
                        match g.xid_once.iter_mut().find(|(c, _)| *c == code) {
                            Some((_, count)) => *count += n,
                            None => g.xid_once.push((code, n)),
                        }
                    }
                    g.set_rates(t);
                }
            }
        }
    }

    /// A GPU's Xid counts at `at`, and the latest Xid, periodic (one
    /// every so often since [`EPOCH`]) or an incident's: its time and code.
    fn xids(g: &GpuState, at: f64) -> (Vec<(u32, u64)>, Option<TimedXid>) {
        let periodic = g
            .periodic_xid
            .map(|(code, every)| (code, ((at - EPOCH) / every).floor().max(0.0) as u64));
        let xids = xid_errors(g.xid_once.iter().chain(periodic.iter()).copied());
        let last = g
            .periodic_xid
            .zip(periodic)
            .filter(|&(_, (_, n))| n > 0)
            .map(|((code, every), (_, n))| (EPOCH + n as f64 * every, code))
            .into_iter()
            .chain(g.xid_incident)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        (xids, last)
    }

    fn gpu(&self, i: usize, g: &GpuState, at: f64) -> Gpu {
        let mut gpu = Gpu {
            index: i as u32,
            uuid: format!("GPU-5a1e0000-0000-4000-8000-{:012x}", i),
            model: g.model.clone(),
            pci_bus_id: format!("00000000:{:02X}:00.0", 0x18 + i),
            driver_version: self.scenario.driver_version.clone(),
            vbios_version: "96.00.A5.00.01".into(),
            inforom_version: "G520.0200.00.05".into(),
            minor: Some(i as u32),
            up: !g.lost,
            readings: Readings::default(),
            mig: Vec::new(),
            reads_late: 0,
        };
        if g.lost {
            // Its readings are gone; who held it is still known.
            gpu.readings.pods = g.users.pods.clone();
            gpu.readings.jobs = g.users.jobs.clone();
            return gpu;
        }
        let (xids, last_xid) = Sim::xids(g, at);
        let health = g.health.readings(g.sm_active, at);
        gpu.readings = Readings {
            temperature_celsius: Some(g.temp),
            memory_temperature_celsius: Some(g.mem_temp),
            sm_clock_hertz: Some(g.sm_mhz * MHZ),
            sm_clock_max_hertz: Some(g.sm_max_mhz * MHZ),
            memory_clock_hertz: Some(g.mem_mhz * MHZ),
            // HBM runs at one clock, busy or idle: its maximum.
            memory_clock_max_hertz: Some(g.mem_mhz * MHZ),
            clocks_event_mask: Some(g.events),
            power_usage_watts: Some(g.power),
            power_limit_watts: Some(g.power_limit),
            utilization_ratio: Some(g.util),
            // The time memory was read or written follows the DRAM traffic.
            memory_utilization_ratio: Some(g.dram_active),
            sm_active_ratio: Some(g.sm_active),
            sm_occupancy_ratio: Some(g.sm_occupancy),
            dram_active_ratio: Some(g.dram_active),
            memory_total_bytes: Some(g.total),
            memory_used_bytes: Some(g.used),
            memory_free_bytes: Some(g.total - g.used),
            memory_reserved_bytes: Some((g.total * 0.006).round()),
            allocator_reserved_bytes: Some(g.alloc_reserved),
            allocator_allocated_bytes: Some(g.alloc_allocated),
            largest_free_bytes: Some(g.largest_free),
            xid_errors: Some(xids),
            xid_last_timestamp_seconds: last_xid.map(|(t, _)| t),
            xid_last_code: Some(last_code(last_xid.map(|(_, c)| c))),
            xid_window: None,
            ecc_corrected_total: Some(0.0),
            ecc_uncorrected_total: Some(0.0),
            energy_joules_total: Some(g.energy.at(at).round()),
            pcie_bytes_total: Some(TxRx {
                tx: g.pcie.at(at).round(),
                rx: (g.pcie.at(at) * 0.8).round(),
            }),
            pcie_replay_errors_total: Some(g.health.replays(at)),
            nvlink_bytes_total: Some(TxRx {
                tx: g.nvlink.at(at).round(),
                rx: g.nvlink.at(at).round(),
            }),
            clocks_event_seconds_total: g.event_seconds.map(|s| Some(s.at(at))),
            profiling: profiling(g, &health),
            health,
            processes: g.users.processes.clone(),
            pods: g.users.pods.clone(),
            jobs: g.users.jobs.clone(),
        };
        gpu
    }
}

/// The GPM metrics of a GPM-capable H100 SXM (7 NVDEC, 7 NVJPG, an OFA;
/// NVLink over all links, not per link): each one's id, the reading it
/// follows ([`profiling`]'s `from`) and its share of it. The engines are
/// as busy as the media readings, most tensor work half-precision, and
/// the byte rates are those the counters grow at. A table, not code: the
/// binary is held to its size.
const H100_GPM: [(u32, usize, f64); 31] = {
    use prof::*;
    [
        (GRAPHICS_UTIL, 0, 1.0),
        (SM_UTIL, 1, 1.0),
        (SM_OCCUPANCY, 2, 1.0),
        (INTEGER_UTIL, 1, 0.15),
        (ANY_TENSOR_UTIL, 4, 1.0),
        (DFMA_TENSOR_UTIL, 4, 0.0),
        (HMMA_TENSOR_UTIL, 4, 0.9),
        (IMMA_TENSOR_UTIL, 4, 0.1),
        (DRAM_BW_UTIL, 3, 1.0),
        (FP64_UTIL, 5, 1.0),
        (FP32_UTIL, 6, 1.0),
        (FP16_UTIL, 7, 1.0),
        (PCIE_TX_PER_SEC, 8, 1.0),
        (PCIE_RX_PER_SEC, 8, 0.8),
        (NVOFA_0_UTIL, 12, 1.0),
        (NVLINK_TOTAL_RX_PER_SEC, 9, 1.0),
        (NVLINK_TOTAL_TX_PER_SEC, 9, 1.0),
        (NVDEC_0_UTIL, 10, 1.0),
        (NVDEC_0_UTIL + 1, 10, 1.0),
        (NVDEC_0_UTIL + 2, 10, 1.0),
        (NVDEC_0_UTIL + 3, 10, 1.0),
        (NVDEC_0_UTIL + 4, 10, 1.0),
        (NVDEC_0_UTIL + 5, 10, 1.0),
        (NVDEC_0_UTIL + 6, 10, 1.0),
        (NVJPG_0_UTIL, 11, 1.0),
        (NVJPG_0_UTIL + 1, 11, 1.0),
        (NVJPG_0_UTIL + 2, 11, 1.0),
        (NVJPG_0_UTIL + 3, 11, 1.0),
        (NVJPG_0_UTIL + 4, 11, 1.0),
        (NVJPG_0_UTIL + 5, 11, 1.0),
        (NVJPG_0_UTIL + 6, 11, 1.0),
    ]
};

/// [`H100_GPM`] in DCGM's units (byte rates whole) from the GPU's state
/// and its health readings.
fn profiling(g: &GpuState, h: &Health) -> Vec<(u32, f64)> {
    let (p, m) = (h.pipe_active_ratios, h.media_ratios);
    // 0-3 util, SM active, occupancy, DRAM; 4-7 the pipes; 8-9 PCIe TX and
    // NVLink byte rates; 10-12 decoder, JPEG, OFA.
    let from = [
        Some(g.util),
        Some(g.sm_active),
        Some(g.sm_occupancy),
        Some(g.dram_active),
        p[0],
        p[1],
        p[2],
        p[3],
        Some(g.pcie_rate),
        Some(g.nvlink_rate),
        m[1],
        m[2],
        m[3],
    ];
    let value = |&(id, i, share): &(u32, usize, f64)| {
        let v = from[i].unwrap_or(0.0) * share;
        (id, if i == 8 || i == 9 { v.round() } else { v })
    };
    H100_GPM.iter().map(value).collect()
}

impl Source for Sim {
    fn kind(&self) -> SourceKind {
        SourceKind::Sim
    }

    fn collect(&mut self, at: f64) -> Result<Vec<Gpu>, SourceError> {
        self.advance(at);
        if at < self.failing_until {
            return Err(SourceError(
                "simulated collection failure (scenario incident)".into(),
            ));
        }
        let now = self.now();
        Ok(self
            .gpus
            .iter()
            .enumerate()
            .map(|(i, g)| self.gpu(i, g, now))
            .collect())
    }

    /// Its models as a vLLM serves them: the poller reads the body as the
    /// engine reader does one fetched.
    fn models_text(&self) -> String {
        let mut body = String::new();
        for m in &self.models {
            m.spell(self.now(), &mut body);
        }
        body
    }

    fn history_seconds(&self) -> f64 {
        HISTORY_SECONDS
    }

    /// Itself at its origin: stepped through the same times, the copy and
    /// the original read the same values, to the last bit.
    fn replay_copy(&self) -> Option<Box<dyn Source>> {
        Some(Box::new(self.clone()))
    }

    fn skip_to(&mut self, at: f64) {
        self.advance(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: f64 = 1_800_000_000.0;

    #[test]
    fn default_fleet_is_the_seed() {
        let mut sim = Sim::new(Scenario::default_fleet(), T0);
        let gpus = sim.collect(T0).unwrap();
        let temps: Vec<_> = gpus
            .iter()
            .map(|g| g.readings.temperature_celsius.unwrap())
            .collect();
        assert_eq!(temps, [71.0, 88.0, 70.0, 69.0]);
        assert_eq!(gpus[1].readings.sm_clock_hertz, Some(1.1e9));
        assert_eq!(gpus[1].readings.throttled(), Some(true));
        assert_eq!(gpus[0].readings.throttled(), Some(false));
        assert_eq!(gpus[3].readings.largest_free_bytes, Some(1073741824.0));
        assert_eq!(gpus[0].readings.critical_xid_total(), Some(0.0));
    }

    #[test]
    fn counters_grow_and_xid_rises_every_150s() {
        let mut sim = Sim::new(Scenario::default_fleet(), T0);
        let a = sim.collect(T0 - 300.0).unwrap();
        let b = sim.collect(T0).unwrap();
        let xid = |g: &Gpu| g.readings.critical_xid_total().unwrap();
        assert_eq!(xid(&b[2]) - xid(&a[2]), 2.0);
        assert_eq!(xid(&b[0]), 0.0);
        // GPU 2's periodic Xid is the last code; the others read 0.
        let code = |g: &Gpu| g.readings.xid_last_code;
        assert_eq!((code(&b[2]), code(&b[0])), (Some(48.0), Some(0.0)));
        let e = |g: &Gpu| g.readings.energy_joules_total.unwrap();
        assert_eq!(e(&b[0]) - e(&a[0]), 520.0 * 300.0);
        let thermal = |g: &Gpu| g.readings.clocks_event_seconds_total[6].unwrap();
        assert_eq!(thermal(&b[1]) - thermal(&a[1]), 300.0);
        assert_eq!(thermal(&b[0]), 0.0);
    }

    /// Every kind of counter moving from the origin: energy, bytes, event
    /// seconds, health, a periodic Xid and a model's TTFT.
    const MOVING: &str = r#"{"gpus":[
        {"clock_events":["sw_thermal_slowdown"],"xid":48,"xid_every":"7s",
         "health":{"pcie_replays_per_second":0.3,"nvlink_errors_per_second":1.7}},
        {"power_watts":613.7,"pcie_bytes_per_second":3.3e9}],
        "models":[{"name":"m","requests_per_second":41,"slow_fraction":0.013}]}"#;

    /// Collects `sim` every `step` seconds from `from` to before `to`.
    fn run(sim: &mut Sim, from: f64, to: f64, step: f64) {
        for i in 0..=((to - from) / step) as u64 {
            let at = from + i as f64 * step;
            if at < to {
                sim.collect(at).unwrap();
            }
        }
    }

    #[test]
    fn a_restart_goes_on_from_the_same_counters() {
        let s = Scenario::parse(MOVING).unwrap();
        // One started an hour ago and collected every 15 s since, with a
        // replay's coarse steps before that; one starts a minute ago.
        let mut early = Sim::new(s.clone(), T0 - 3600.0);
        run(&mut early, T0 - 3600.0 - HISTORY_SECONDS, T0 - 3600.0, 60.0);
        run(&mut early, T0 - 3600.0, T0, 15.0);
        let mut late = Sim::new(s, T0 - 60.0);
        run(&mut late, T0 - 60.0, T0, 1.0);
        for at in [T0 + 0.25, T0 + 86_400.7] {
            let (a, b) = (early.collect(at).unwrap(), late.collect(at).unwrap());
            assert_eq!(a, b, "{at}");
            assert_eq!(early.models_text(), late.models_text(), "{at}");
            // They count from the epoch, not from either start.
            let since = at - EPOCH;
            let (r0, r1) = (&a[0].readings, &a[1].readings);
            assert_eq!(r1.energy_joules_total, Some((613.7 * since).round()));
            assert_eq!(r0.pcie_replay_errors_total, Some((0.3 * since).floor()));
            assert_eq!(r0.xid_total(&[48]), Some((since / 7.0).floor()));
        }
    }

    /// The counts of a GPU and of the models, in one list.
    fn counts(g: &Gpu, sim: &Sim) -> Vec<f64> {
        let r = &g.readings;
        let (pcie, nvlink) = (r.pcie_bytes_total.unwrap(), r.nvlink_bytes_total.unwrap());
        let mut v = vec![
            r.energy_joules_total.unwrap(),
            pcie.tx,
            pcie.rx,
            r.pcie_replay_errors_total.unwrap(),
            nvlink.tx,
            r.health.nvlink_errors[0].unwrap(),
            r.critical_xid_total().unwrap(),
        ];
        for m in &sim.models {
            v.extend(m.buckets.iter().map(|n| n.at(sim.now()).floor()));
        }
        v
    }

    #[test]
    fn counts_stay_whole_and_never_go_back() {
        // Two years on, NVLink's bytes are past 2^53, where doubles are
        // integers 512 apart.
        let t0 = EPOCH + 2.0 * 365.0 * 86_400.0;
        let mut sim = Sim::new(Scenario::parse(MOVING).unwrap(), t0);
        let mut last: Option<Vec<f64>> = None;
        for i in 0..3000 {
            let g = sim.collect(t0 + f64::from(i) * 0.37).unwrap();
            let now = counts(&g[0], &sim);
            assert!(now.iter().all(|n| n.fract() == 0.0), "{now:?}");
            assert!(now[4] > 2f64.powi(53), "{now:?}");
            if let Some(last) = &last {
                assert!(
                    last.iter().zip(&now).all(|(a, b)| a <= b),
                    "{last:?} {now:?}"
                );
            }
            last = Some(now);
        }
        // Asked about the past, the clock stays where it was.
        let before = counts(&sim.collect(t0).unwrap()[0], &sim);
        assert_eq!(Some(before), last);
    }

    #[test]
    fn incidents_happen_on_time() {
        let s = Scenario::parse(include_str!("../../../../scenarios/gameday.json")).unwrap();
        let mut sim = Sim::new(s, T0);
        let before = sim.collect(T0 + 29.0).unwrap();
        assert_eq!(before[1].readings.throttled(), Some(false));
        let after = sim.collect(T0 + 95.0).unwrap();
        assert_eq!(after[1].readings.throttled(), Some(true));
        assert_eq!(after[2].readings.critical_xid_total(), Some(1.0));
        // An incident's Xid is the last, with its time.
        assert_eq!(before[2].readings.xid_last_code, Some(0.0));
        assert_eq!(after[2].readings.xid_last_code, Some(79.0));
        assert_eq!(
            after[2].readings.xid_last_timestamp_seconds,
            Some(T0 + 60.0)
        );
        assert!(!after[3].up);
        assert_eq!(after[3].readings, Readings::default());
    }

    /// The game day without its 20 s hang, which would sleep for real.
    fn gameday() -> Scenario {
        let text = include_str!("../../../../scenarios/gameday.json")
            .replace(r#"{ "at": "150s", "hang": "20s" },"#, "");
        Scenario::parse(&text).unwrap()
    }

    /// The counts incidents move on a GPU that is up: Xid, PCIe replays,
    /// clock-event seconds, remapped rows, retired pages, lifetime ECC
    /// and NVLink errors (absent ones as -1).
    fn incident_counts(g: &Gpu) -> Vec<f64> {
        let (r, h) = (&g.readings, &g.readings.health);
        let xid = r.xid_errors.iter().flatten().map(|&(_, n)| n as f64).sum();
        let mut v = vec![xid, r.pcie_replay_errors_total.unwrap_or(-1.0)];
        v.extend(r.clocks_event_seconds_total.map(|s| s.unwrap_or(-1.0)));
        v.extend(
            [
                h.remapped_rows[1],
                h.retired_pages[1],
                h.ecc_uncorrected_lifetime,
            ]
            .map(|c| c.unwrap_or(-1.0)),
        );
        v.extend(h.nvlink_errors.map(|c| c.unwrap_or(-1.0)));
        v
    }

    #[test]
    fn a_restart_from_the_same_start_goes_on_with_the_incidents() {
        // Served from `origin` on, every second; restarted 230 s later,
        // after most incidents, with the same start and a coarse replay.
        let origin = T0 - 230.0;
        let s = gameday().starting_at(origin, T0).unwrap();
        let mut first = Sim::new(s.clone(), origin);
        let mut last: Vec<Vec<f64>> = Vec::new();
        for i in 0..230 {
            let gpus = first.collect(origin + f64::from(i)).unwrap();
            let now: Vec<_> = gpus.iter().map(incident_counts).collect();
            for (g, (a, b)) in gpus.iter().zip(last.iter().zip(&now)) {
                // Monotone in time, each count of each GPU that is up.
                let up = g.up;
                assert!(!up || a.iter().zip(b).all(|(a, b)| a <= b), "{a:?} {b:?}");
            }
            last = now;
        }
        let mut again = Sim::new(s, T0);
        run(&mut again, T0 - 3600.0, T0, 7.0);
        let mut fresh = Sim::new(gameday(), T0);
        for at in [T0, T0 + 0.5, T0 + 100.0] {
            let (a, b) = (first.collect(at).unwrap(), again.collect(at).unwrap());
            assert_eq!(a, b, "{at}");
            assert_eq!(a[2].readings.xid_total(&[79]), Some(1.0));
            assert_eq!(
                a[2].readings.xid_last_timestamp_seconds,
                Some(origin + 60.0)
            );
        }
        // Without a start, the restart's incidents come again: no Xid yet.
        let f = fresh.collect(T0 + 0.5).unwrap();
        assert_eq!(f[2].readings.xid_total(&[79]), Some(0.0));
        assert_eq!(f[0].readings.health.remapped_rows[1], Some(0.0));
    }

    #[test]
    fn a_start_outside_the_counters_span_is_refused() {
        let err = |origin| {
            Scenario::default_fleet()
                .starting_at(origin, T0)
                .unwrap_err()
        };
        assert_eq!(
            err(T0 + 1.0),
            "2027-01-15T08:00:01.000Z is in the future: now is 2027-01-15T08:00:00.000Z"
        );
        assert!(
            err(EPOCH - 1.0)
                .contains("before the simulated driver loaded at 2026-01-01T00:00:00.000Z")
        );
        for ok in [EPOCH, T0] {
            assert!(Scenario::default_fleet().starting_at(ok, T0).is_ok());
        }
    }

    #[test]
    fn a_hang_from_before_the_restart_is_history() {
        let s = r#"{"gpus":[{}],"incidents":[{"at":"1s","hang":"1h"}]}"#;
        let s = Scenario::parse(s)
            .unwrap()
            .starting_at(T0 - 10.0, T0)
            .unwrap();
        let mut sim = Sim::new(s, T0);
        let (tx, rx) = std::sync::mpsc::channel();
        // Its replay and first collection, on a thread: a sleeping one
        // fails the test rather than holding it for an hour.
        std::thread::spawn(move || {
            run(&mut sim, T0 - 60.0, T0, 1.0);
            let _ = tx.send(sim.collect(T0).is_ok());
        });
        assert_eq!(
            rx.recv_timeout(std::time::Duration::from_secs(20)),
            Ok(true)
        );
    }

    #[test]
    fn failing_collections() {
        let s = Scenario::parse(r#"{"gpus":[{}],"incidents":[{"at":"10s","fail":"5s"}]}"#).unwrap();
        let mut sim = Sim::new(s, T0);
        assert!(sim.collect(T0 + 9.0).is_ok());
        assert!(sim.collect(T0 + 10.0).is_err());
        assert!(sim.collect(T0 + 15.0).is_ok());
    }
}
