//! One GPU's readings, each converted to base units; a reading NVML does
//! not support, or a symbol the driver lacks, leaves its field `None`, and
//! so does NVML's "not available" sentinel (all ones).
//! Each collector's calls are made only when it is on, and timed.

use super::ffi::{
    self, CLOCK_MEM, CLOCK_SM, Device, Error, FI_DEV_MEMORY_TEMP, FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
    FI_DEV_NVLINK_THROUGHPUT_DATA_TX, Library, PERF_POLICY_POWER, PERF_POLICY_SYNC_BOOST,
    PERF_POLICY_THERMAL, SCOPE_ALL_LINKS,
};
use super::gpm::{self, GPM_PCIE, GpmSlot, set_gpm};
use super::health;
use super::probe::Probe;
use super::processes;
use base::units::{KIB, MHZ, MIB};
use model::Collector::{
    self, Clocks, Ecc, Gpm, Info, Memory, Nvlink, NvlinkLink, Pcie, Power, Processes, Recovery,
    Temperature, Utilization,
};
use model::Collectors;
use model::dcgm::prof::GpmIds;
use model::{CLOCK_EVENT_REASONS, ComputeInstance, Gpu, MigInstance, Readings, Timings, TxRx};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Bytes per NVML PCIe throughput "KB".
pub(super) const PCIE_KB: f64 = KIB;

/// Bytes per KiB of NVML's NVLink throughput fields.
pub(super) const NVLINK_KIB: f64 = KIB;

/// Violation policies and the reason each one's time is reported under;
/// policies without an honest counterpart are not read.
///
/// Thermal is taken as software thermal capping (`sw_thermal_slowdown`):
/// like every policy it counts time the driver held the clocks below the
/// application clocks, whereas HW slowdown is the hardware cutting the
/// clocks by half or more (nvml.h's clocks event reasons), which no
/// policy counts. No source says software or hardware outright: nvml.h
/// has "how long did thermal violations cause the GPU to be below
/// application clocks", DCGM's matching field DCGM_FI_DEV_THERMAL_VIOLATION
/// "Thermal Violation time in usec" (dcgm_fields.h), and dcgm-exporter
/// "Throttling duration due to thermal constraints".
pub(super) const VIOLATIONS: [(u32, &str); 3] = [
    (PERF_POLICY_POWER, "sw_power_cap"),
    (PERF_POLICY_THERMAL, "sw_thermal_slowdown"),
    (PERF_POLICY_SYNC_BOOST, "sync_boost"),
];

#[derive(Debug, Default)]
pub(super) struct PcieCounter {
    total: TxRx,
    /// The previous sample, bytes/s, and when it was taken.
    pub(super) last: Option<(Instant, TxRx)>,
}

impl PcieCounter {
    pub(super) fn advance(&mut self, now: Instant, rate: TxRx) -> TxRx {
        if let Some((then, prev)) = self.last {
            let dt = now.saturating_duration_since(then).as_secs_f64();
            self.total.tx += (prev.tx + rate.tx) / 2.0 * dt;
            self.total.rx += (prev.rx + rate.rx) / 2.0 * dt;
        }
        self.last = Some((now, rate));
        self.total
    }

    /// Adds bytes known exactly (GPM's average over the interval); the
    /// next sampled rate starts a new integration.
    pub(super) fn add(&mut self, bytes: TxRx) -> TxRx {
        self.total.tx += bytes.tx;
        self.total.rx += bytes.rx;
        self.last = None;
        self.total
    }
}

pub(super) fn mhz(v: u32) -> f64 {
    f64::from(v) * MHZ
}

pub(super) fn milli(v: f64) -> f64 {
    v / 1000.0
}

/// What a read is asked: the collectors on, and the GPM metrics of the
/// dcgm collector's profiling fields.
#[derive(Clone, Copy)]
pub(super) struct Ask {
    pub(super) on: Collectors,
    pub(super) prof: GpmIds,
}

/// What a read says besides the GPU: the readings that answered NVML's
/// sentinel, and the profiling fields' metrics the GPU (or a MIG
/// instance) does not give.
#[derive(Default)]
pub(super) struct Notes {
    pub(super) sentinels: Vec<&'static str>,
    pub(super) refused: GpmIds,
}

/// The readings of one GPU and its MIG instances; how each collector
/// fared is added to `timings`, and what else it says to `notes`.
#[allow(clippy::too_many_arguments, reason = "one GPU's state, read once")]
pub(super) fn read_gpu(
    index: u32,
    device: Result<Device<'_>, Error>,
    lib: &Arc<Library>,
    ask: Ask,
    pcie: &mut HashMap<String, PcieCounter>,
    gpm_slots: &mut HashMap<String, GpmSlot>,
    timings: &mut Timings,
    notes: &mut Notes,
) -> Gpu {
    let on = ask.on;
    let down = |why: Error| {
        // Shown as up = false; a warning every collection would be noise.
        if why != Error::GPU_IS_LOST {
            log::debug!("source nvml: GPU {index}: {why}");
        }
        Gpu {
            index,
            up: false,
            ..Gpu::default()
        }
    };
    let d = match device {
        Ok(d) => d,
        Err(e) => return down(e),
    };
    let mut p = Probe::new(on);
    let uuid = p.get("uuid", || d.uuid()).unwrap_or_default();
    let model = p.get("name", || d.name()).unwrap_or_default();
    let pci_bus_id = p.get("pci info", || d.pci_bus_id()).unwrap_or_default();
    let minor = p.get("minor number", || d.minor_number());

    let mut r = Readings::default();
    let (mut vbios_version, mut inforom_version) = (String::new(), String::new());
    p.section(Info, |p| {
        vbios_version = p.get("vbios", || d.vbios_version()).unwrap_or_default();
        inforom_version = p.get("inforom", || d.inforom_version()).unwrap_or_default();
    });
    read_basics(&mut r, d, &mut p);
    health::read(&mut r.health, d, &mut p);
    set_fields(&mut r, d, &mut p);

    let slots = (pcie, &mut *gpm_slots);
    let gpm_supported = read_gpm_and_pcie(&mut r, d, &mut p, lib, &uuid, slots, ask, notes);

    let mig_on = p.get("mig mode", || d.mig_enabled());
    if p.on(model::Collector::State) {
        r.health.mig_mode = mig_on;
    }
    let mig = if mig_on == Some(true) {
        read_mig(d, &mut p, lib, gpm_slots, gpm_supported, ask.prof, notes)
    } else {
        // Under MIG, processes are listed per MIG device.
        p.section(Processes, |p| processes::read(d, None, p, &mut r.processes));
        Vec::new()
    };

    timings.merge(&p.timings);
    notes.sentinels.append(&mut p.sentinels);
    let identity = Gpu {
        index,
        uuid,
        model,
        pci_bus_id,
        minor,
        up: !p.lost,
        ..Gpu::default()
    };
    // Lost during the read: only the identity it answered first is kept.
    if p.lost {
        return identity;
    }
    Gpu {
        vbios_version,
        inforom_version,
        readings: r,
        mig,
        ..identity
    }
}

/// The readings every GPU has a call for: temperature, clocks, power,
/// utilization, ECC and memory.
fn read_basics(r: &mut Readings, d: Device<'_>, p: &mut Probe) {
    p.section(Temperature, |p| {
        r.temperature_celsius = p.value("temperature", || d.temperature()).map(f64::from);
        r.health.memory_temperature_max_celsius = p
            .value("memory max temperature", || d.memory_temperature_max())
            .map(f64::from);
    });
    p.section(Clocks, |p| {
        r.sm_clock_hertz = p.value("sm clock", || d.clock(CLOCK_SM)).map(mhz);
        r.sm_clock_max_hertz = p.value("max sm clock", || d.max_clock(CLOCK_SM)).map(mhz);
        r.memory_clock_hertz = p.value("memory clock", || d.clock(CLOCK_MEM)).map(mhz);
        r.memory_clock_max_hertz = p
            .value("max memory clock", || d.max_clock(CLOCK_MEM))
            .map(mhz);
        r.clocks_event_mask = p.get("clock event reasons", || d.clocks_event_reasons());
        set_violations(r, d, p);
    });
    p.section(Power, |p| {
        r.power_usage_watts = p
            .value("power", || d.power_usage())
            .map(|mw| milli(mw.into()));
        r.power_limit_watts = p
            .value("power limit", || d.power_limit())
            .map(|mw| milli(mw.into()));
        r.energy_joules_total = p
            .value("energy", || d.total_energy())
            .map(|mj| milli(mj as f64));
    });
    p.section(Utilization, |p| {
        let u = p.value("utilization", || d.utilization());
        let ratio = |pc: u32| f64::from(pc) / 100.0;
        r.utilization_ratio = u.map(|(gpu, _)| ratio(gpu));
        r.memory_utilization_ratio = u.map(|(_, memory)| ratio(memory));
    });
    p.section(Ecc, |p| {
        let n = |v: u64| v as f64;
        r.ecc_corrected_total = p
            .value("ecc corrected", || d.ecc_total(false, false))
            .map(n);
        r.ecc_uncorrected_total = p
            .value("ecc uncorrected", || d.ecc_total(true, false))
            .map(n);
        let h = &mut r.health;
        h.ecc_corrected_lifetime = p.value("ecc lifetime", || d.ecc_total(false, true)).map(n);
        h.ecc_uncorrected_lifetime = p.value("ecc lifetime", || d.ecc_total(true, true)).map(n);
    });
    p.section(Memory, |p| set_memory(r, p.value("memory", || d.memory())));
}

/// GPM's samples for the gpm collector, the profiling fields and, where
/// it can, the PCIe counter, then the PCIe readings; whether the GPU
/// supports GPM.
#[allow(clippy::too_many_arguments, reason = "one GPU's state, read once")]
fn read_gpm_and_pcie(
    r: &mut Readings,
    d: Device<'_>,
    p: &mut Probe,
    lib: &Arc<Library>,
    uuid: &str,
    (pcie, gpm_slots): (
        &mut HashMap<String, PcieCounter>,
        &mut HashMap<String, GpmSlot>,
    ),
    ask: Ask,
    notes: &mut Notes,
) -> bool {
    let (want_gpm, want_pcie) = (p.on(Gpm), p.on(Pcie));
    let wanted = if want_gpm { ask.prof } else { GpmIds::NONE };
    let gpm_supported =
        (want_gpm || want_pcie) && p.get("gpm support", || d.gpm_supported()) == Some(true);
    let mut sampled = None;
    if !p.lost && gpm_supported {
        let slot = gpm_slots
            .entry(uuid.to_string())
            .or_insert_with(|| GpmSlot::new(true));
        let ids = gpm::metrics(want_gpm, want_pcie, wanted);
        p.section(if want_gpm { Gpm } else { Pcie }, |p| {
            sampled = slot.advance(lib, p, &ids, |s| s.take(d));
        });
        if want_gpm {
            notes.refused = set_gpm(r, sampled.as_ref(), wanted);
        }
    } else if !p.lost {
        // No GPM: none of the profiling fields has a series here.
        notes.refused = wanted;
    }
    p.section(Pcie, |p| {
        r.pcie_replay_errors_total = p
            .value("pcie replay", || d.pcie_replay_counter())
            .map(f64::from);
        r.pcie_bytes_total = pcie_bytes(d, p, pcie.entry(uuid.to_string()).or_default(), &sampled);
    });

    gpm_supported
}

/// PCIe bytes: from GPM's traffic over the interval where it has it,
/// exact; else NVML's ~20 ms throughput sample, integrated.
fn pcie_bytes(
    d: Device<'_>,
    p: &mut Probe,
    counter: &mut PcieCounter,
    gpm: &Option<gpm::Gpm>,
) -> Option<TxRx> {
    if let Some(g) = gpm
        && let (Some(tx), Some(rx)) = (g.get(GPM_PCIE[0]), g.get(GPM_PCIE[1]))
    {
        let bytes = |mibps: f64| mibps * MIB * g.seconds;
        return Some(counter.add(TxRx {
            tx: bytes(tx),
            rx: bytes(rx),
        }));
    }
    let tx = p.value("pcie tx", || d.pcie_throughput(false));
    let rx = p.value("pcie rx", || d.pcie_throughput(true));
    match (tx, rx) {
        (Some(tx), Some(rx)) => {
            let rate = TxRx {
                tx: f64::from(tx) * PCIE_KB,
                rx: f64::from(rx) * PCIE_KB,
            };
            Some(counter.advance(Instant::now(), rate))
        }
        // Not integrated across a gap: the counter resumes where it was.
        _ => {
            counter.last = None;
            None
        }
    }
}

/// Clock-event seconds for the reasons in [`VIOLATIONS`]; each policy
/// NVML refuses leaves its reason `None`.
pub(super) fn set_violations(r: &mut Readings, d: Device<'_>, p: &mut Probe) {
    for (policy, reason) in VIOLATIONS {
        let Some(i) = CLOCK_EVENT_REASONS.iter().position(|&n| n == reason) else {
            continue;
        };
        r.clocks_event_seconds_total[i] = p
            .value("violation status", || d.violation_ns(policy))
            .map(|ns| ns as f64 / 1e9);
    }
}

/// What the one `nvmlDeviceGetFieldValues` call per GPU asks for, by
/// collector: memory temperature (temperature); NVLink TX and RX bytes
/// over all links, the link count and the error totals (nvlink; the
/// link count for nvlink_link too); the recovery action (recovery).
fn field_ids(p: &Probe) -> Vec<(Collector, u32, u32)> {
    let mut ids = Vec::new();
    if p.on(Temperature) {
        ids.push((Temperature, FI_DEV_MEMORY_TEMP, 0));
    }
    if p.on(Nvlink) {
        ids.push((Nvlink, FI_DEV_NVLINK_THROUGHPUT_DATA_TX, SCOPE_ALL_LINKS));
        ids.push((Nvlink, FI_DEV_NVLINK_THROUGHPUT_DATA_RX, SCOPE_ALL_LINKS));
        ids.extend(health::NVLINK_FIELDS.map(|(f, scope)| (Nvlink, f, scope)));
    }
    if p.on(Nvlink) || p.on(NvlinkLink) {
        ids.push((Nvlink, ffi::FI_DEV_NVLINK_LINK_COUNT, 0));
    }
    if p.on(Recovery) {
        ids.push((Recovery, ffi::FI_DEV_GET_GPU_RECOVERY_ACTION, 0));
    }
    ids
}

/// Memory temperature, NVLink and the recovery action from one
/// field-values call, its time shared among the collectors that asked.
/// NVLink bytes need both directions, so a half-answered pair is left out.
pub(super) fn set_fields(r: &mut Readings, d: Device<'_>, p: &mut Probe) {
    let ids = field_ids(p);
    if ids.is_empty() || p.lost {
        return;
    }
    let asked: Vec<(u32, u32)> = ids.iter().map(|&(_, f, s)| (f, s)).collect();
    let started = Instant::now();
    let result = d.field_values(&asked);
    let mut by: Vec<Collector> = ids.iter().map(|&(c, ..)| c).collect();
    by.dedup();
    let share = started.elapsed().as_secs_f64() / by.len() as f64;
    for &c in &by {
        p.timings.add(c, share);
        if let Err(e) = result {
            p.check_as::<()>(c, "field values", Err(e));
        }
    }
    let Ok(values) = result else { return };
    let mut got = Vec::with_capacity(ids.len());
    for (&(c, id, _), v) in ids.iter().zip(values) {
        // A field this driver does not know is unsupported, not a failure.
        if v != Err(Error::INVALID_ARGUMENT)
            && let Some(v) = p.check_as(c, "field value", v)
        {
            got.push((id, v));
        }
    }
    let field = |id| health::field(&got, id);
    r.memory_temperature_celsius = field(FI_DEV_MEMORY_TEMP);
    if let (Some(tx), Some(rx)) = (
        field(FI_DEV_NVLINK_THROUGHPUT_DATA_TX),
        field(FI_DEV_NVLINK_THROUGHPUT_DATA_RX),
    ) {
        r.nvlink_bytes_total = Some(TxRx {
            tx: tx * NVLINK_KIB,
            rx: rx * NVLINK_KIB,
        });
    }
    r.health.recovery_action = field(ffi::FI_DEV_GET_GPU_RECOVERY_ACTION);
    health::nvlink(&mut r.health, d, p, &got);
}

pub(super) fn set_memory(r: &mut Readings, m: Option<ffi::Memory>) {
    if let Some(m) = m {
        r.memory_total_bytes = Some(m.total as f64);
        r.memory_reserved_bytes = m.reserved.map(|v| v as f64);
        r.memory_free_bytes = Some(m.free as f64);
        r.memory_used_bytes = Some(m.used as f64);
    }
}

/// The MIG GPU instances of a GPU in MIG mode. NVML lists a MIG device per
/// compute instance; those of one GPU instance share its memory and GPM
/// readings, so they are one [`MigInstance`] with every compute instance in
/// `compute`, read once. NVML refuses most readings on them; those stay
/// `None`. Their memory, utilization and GPM (with the profiling fields'
/// `wanted`; a metric an instance refuses is added to `notes`) belong to
/// those collectors.
pub(super) fn read_mig(
    d: Device<'_>,
    p: &mut Probe,
    lib: &Arc<Library>,
    gpm_slots: &mut HashMap<String, GpmSlot>,
    gpm_supported: bool,
    wanted: GpmIds,
    notes: &mut Notes,
) -> Vec<MigInstance> {
    let slots = p
        .get("max mig devices", || d.max_mig_devices())
        .unwrap_or(0);
    let mut out: Vec<MigInstance> = Vec::new();
    for slot in 0..slots {
        // NOT_FOUND: an empty slot.
        let Some(m) = p.get("mig device", || d.mig_device(slot)) else {
            continue;
        };
        let uuid = p.get("mig uuid", || m.uuid());
        let id = p.get("gpu instance id", || m.gpu_instance_id());
        let (Some(uuid), Some(gpu_instance_id)) = (uuid, id) else {
            continue;
        };
        let compute = ComputeInstance {
            id: p.get("compute instance id", || m.compute_instance_id()),
            uuid: uuid.clone(),
        };
        let ci = compute.id;
        if let Some(gi) = out
            .iter_mut()
            .find(|g| g.gpu_instance_id == gpu_instance_id)
        {
            gi.compute.push(compute);
            p.section(Processes, |p| {
                processes::read(m, ci, p, &mut gi.readings.processes)
            });
            continue;
        }
        let name = p.get("mig name", || m.name()).unwrap_or_default();
        let mut readings = Readings::default();
        p.section(Utilization, |p| {
            readings.utilization_ratio = p
                .value("mig utilization", || m.utilization())
                .map(|(pc, _)| f64::from(pc) / 100.0);
        });
        p.section(Memory, |p| {
            set_memory(&mut readings, p.value("mig memory", || m.memory()))
        });
        p.section(Processes, |p| {
            processes::read(m, ci, p, &mut readings.processes)
        });
        p.section(Gpm, |p| {
            let slot = gpm_slots
                .entry(uuid.clone())
                .or_insert_with(|| GpmSlot::new(gpm_supported));
            let ids = gpm::metrics(true, false, wanted);
            let sampled = slot.advance(lib, p, &ids, |s| s.take_mig(d, gpu_instance_id));
            let refused = set_gpm(&mut readings, sampled.as_ref(), wanted);
            notes.refused = notes.refused.or(refused);
        });
        out.push(MigInstance {
            uuid,
            gpu_instance_id,
            profile: mig_profile(&name),
            compute: vec![compute],
            readings,
        });
    }
    out
}

/// The profile a MIG device name ends in: `NVIDIA H100 80GB HBM3 MIG
/// 3g.40gb` → `3g.40gb`; empty when the name has no MIG suffix.
pub(super) fn mig_profile(name: &str) -> String {
    name.rsplit_once("MIG ")
        .map(|(_, p)| p.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn violation_reasons_are_known_reasons() {
        for (_, reason) in VIOLATIONS {
            assert!(CLOCK_EVENT_REASONS.contains(&reason), "{reason}");
        }
    }

    #[test]
    fn mig_profile_is_the_name_suffix() {
        assert_eq!(mig_profile("NVIDIA H100 80GB HBM3 MIG 3g.40gb"), "3g.40gb");
        assert_eq!(
            mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb+me"),
            "1g.5gb+me"
        );
        assert_eq!(mig_profile("NVIDIA H100 80GB HBM3"), "");
    }

    #[test]
    fn pcie_counter_integrates_the_rate() {
        let mut c = PcieCounter::default();
        let t0 = Instant::now();
        let rate = TxRx {
            tx: 1000.0,
            rx: 2000.0,
        };
        assert_eq!(c.advance(t0, rate), TxRx::default());
        let total = c.advance(
            t0 + Duration::from_secs(2),
            TxRx {
                tx: 3000.0,
                rx: 2000.0,
            },
        );
        assert_eq!(
            total,
            TxRx {
                tx: 4000.0,
                rx: 4000.0
            }
        );
    }
}
