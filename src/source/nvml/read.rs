//! One GPU's readings, each converted to base units; a reading NVML does
//! not support, or a symbol the driver lacks, leaves its field `None`.

use super::ffi::{
    self, CLOCK_MEM, CLOCK_SM, Device, Error, FI_DEV_MEMORY_TEMP, FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
    FI_DEV_NVLINK_THROUGHPUT_DATA_TX, Library, PERF_POLICY_POWER, PERF_POLICY_SYNC_BOOST,
    PERF_POLICY_THERMAL, SCOPE_ALL_LINKS,
};
use super::gpm::{GpmSlot, set_gpm};
use crate::base::units::{KIB, MHZ};
use crate::snapshot::{CLOCK_EVENT_REASONS, ComputeInstance, Gpu, MigInstance, Readings, TxRx};
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

/// What one `nvmlDeviceGetFieldValues` call per GPU asks for, in this
/// order: NVLink TX and RX over all links, then memory temperature.
pub(super) const FIELDS: [(u32, u32); 3] = [
    (FI_DEV_NVLINK_THROUGHPUT_DATA_TX, SCOPE_ALL_LINKS),
    (FI_DEV_NVLINK_THROUGHPUT_DATA_RX, SCOPE_ALL_LINKS),
    (FI_DEV_MEMORY_TEMP, 0),
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
}

/// Calls NVML for one GPU, remembering whether it answered GPU_IS_LOST
/// (after which nothing more is asked of it) and which readings answered
/// the "not available" sentinel.
#[derive(Default)]
pub(super) struct Probe {
    pub(super) lost: bool,
    pub(super) sentinels: Vec<&'static str>,
}

/// NVML's NVML_VALUE_NOT_AVAILABLE: -1 in an unsigned reading, all ones.
pub(super) trait Sentinel: Copy {
    fn is_sentinel(self) -> bool;
}

impl Sentinel for u32 {
    fn is_sentinel(self) -> bool {
        self == u32::MAX
    }
}

impl Sentinel for u64 {
    fn is_sentinel(self) -> bool {
        self == u64::MAX
    }
}

impl Sentinel for ffi::Memory {
    fn is_sentinel(self) -> bool {
        self.total.is_sentinel() || self.used.is_sentinel() || self.free.is_sentinel()
    }
}

impl Probe {
    pub(super) fn get<T>(
        &mut self,
        what: &str,
        call: impl FnOnce() -> Result<T, Error>,
    ) -> Option<T> {
        if self.lost {
            return None;
        }
        match call() {
            Ok(v) => Some(v),
            Err(Error::GPU_IS_LOST) => {
                self.lost = true;
                None
            }
            Err(Error::NOT_SUPPORTED | Error::FUNCTION_NOT_FOUND) => None,
            Err(e) => {
                log::debug!("source nvml: {what}: {e}");
                None
            }
        }
    }

    /// [`Probe::get`] for a reading, which NVML's sentinel leaves out.
    pub(super) fn value<T: Sentinel>(
        &mut self,
        what: &'static str,
        call: impl FnOnce() -> Result<T, Error>,
    ) -> Option<T> {
        let v = self.get(what, call)?;
        self.keep(what, v.is_sentinel()).then_some(v)
    }

    /// Whether a reading is kept; a sentinel is noted instead.
    #[inline(never)]
    fn keep(&mut self, what: &'static str, sentinel: bool) -> bool {
        if sentinel {
            self.sentinels.push(what);
        }
        !sentinel
    }
}

pub(super) fn mhz(v: u32) -> f64 {
    f64::from(v) * MHZ
}

pub(super) fn milli(v: f64) -> f64 {
    v / 1000.0
}

/// One GPU, and the readings that answered NVML's sentinel.
pub(super) fn read_gpu(
    index: u32,
    device: Result<Device<'_>, Error>,
    lib: &Arc<Library>,
    pcie: &mut HashMap<String, PcieCounter>,
    gpm: &mut HashMap<String, GpmSlot>,
) -> (Gpu, Vec<&'static str>) {
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
        Err(e) => return (down(e), Vec::new()),
    };
    let mut p = Probe::default();
    let uuid = p.get("uuid", || d.uuid()).unwrap_or_default();
    let model = p.get("name", || d.name()).unwrap_or_default();
    let pci_bus_id = p.get("pci info", || d.pci_bus_id()).unwrap_or_default();

    let mut r = Readings {
        temperature_celsius: p.value("temperature", || d.temperature()).map(f64::from),
        sm_clock_hertz: p.value("sm clock", || d.clock(CLOCK_SM)).map(mhz),
        sm_clock_max_hertz: p.value("max sm clock", || d.max_clock(CLOCK_SM)).map(mhz),
        memory_clock_hertz: p.value("memory clock", || d.clock(CLOCK_MEM)).map(mhz),
        clocks_event_mask: p.get("clock event reasons", || d.clocks_event_reasons()),
        power_usage_watts: p
            .value("power", || d.power_usage())
            .map(|mw| milli(mw.into())),
        power_limit_watts: p
            .value("power limit", || d.power_limit())
            .map(|mw| milli(mw.into())),
        energy_joules_total: p
            .value("energy", || d.total_energy())
            .map(|mj| milli(mj as f64)),
        utilization_ratio: p
            .value("utilization", || d.utilization())
            .map(|pc| f64::from(pc) / 100.0),
        ecc_corrected_total: p
            .value("ecc corrected", || d.ecc_volatile_total(false))
            .map(|n| n as f64),
        ecc_uncorrected_total: p
            .value("ecc uncorrected", || d.ecc_volatile_total(true))
            .map(|n| n as f64),
        pcie_replay_errors_total: p
            .value("pcie replay", || d.pcie_replay_counter())
            .map(f64::from),
        ..Readings::default()
    };
    set_memory(&mut r, p.value("memory", || d.memory()));
    set_violations(&mut r, d, &mut p);
    set_fields(&mut r, d, &mut p);

    let tx = p.value("pcie tx", || d.pcie_throughput(false));
    let rx = p.value("pcie rx", || d.pcie_throughput(true));
    r.pcie_bytes_total = match (tx, rx) {
        (Some(tx), Some(rx)) => {
            let rate = TxRx {
                tx: f64::from(tx) * PCIE_KB,
                rx: f64::from(rx) * PCIE_KB,
            };
            let counter = pcie.entry(uuid.clone()).or_default();
            Some(counter.advance(Instant::now(), rate))
        }
        // Not integrated across a gap: the counter resumes where it was.
        _ => {
            if let Some(counter) = pcie.get_mut(&uuid) {
                counter.last = None;
            }
            None
        }
    };

    let gpm_supported = p.get("gpm support", || d.gpm_supported()) == Some(true);
    if !p.lost {
        let slot = gpm
            .entry(uuid.clone())
            .or_insert_with(|| GpmSlot::new(gpm_supported));
        set_gpm(&mut r, slot.advance(lib, &mut p, |s| s.take(d)));
    }

    let mig = if p.get("mig mode", || d.mig_enabled()) == Some(true) {
        read_mig(d, &mut p, lib, gpm, gpm_supported)
    } else {
        Vec::new()
    };

    if p.lost {
        return (down(Error::GPU_IS_LOST), p.sentinels);
    }
    let gpu = Gpu {
        index,
        uuid,
        model,
        pci_bus_id,
        driver_version: String::new(),
        up: true,
        readings: r,
        mig,
    };
    (gpu, p.sentinels)
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

/// NVLink bytes and memory temperature from one field-values call. NVLink
/// needs both directions, so a half-answered pair is left out.
pub(super) fn set_fields(r: &mut Readings, d: Device<'_>, p: &mut Probe) {
    let Some(values) = p.get("field values", || d.field_values(&FIELDS)) else {
        return;
    };
    let mut values = values.into_iter().map(|v| p.get("field value", || v));
    let (tx, rx, temp) = (values.next(), values.next(), values.next());
    if let (Some(Some(tx)), Some(Some(rx))) = (tx, rx) {
        r.nvlink_bytes_total = Some(TxRx {
            tx: tx * NVLINK_KIB,
            rx: rx * NVLINK_KIB,
        });
    }
    r.memory_temperature_celsius = temp.flatten();
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
/// `None`.
pub(super) fn read_mig(
    d: Device<'_>,
    p: &mut Probe,
    lib: &Arc<Library>,
    gpm: &mut HashMap<String, GpmSlot>,
    gpm_supported: bool,
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
            uuid,
        };
        if let Some(gi) = out
            .iter_mut()
            .find(|g| g.gpu_instance_id == gpu_instance_id)
        {
            gi.compute.push(compute);
            continue;
        }
        let name = p.get("mig name", || m.name()).unwrap_or_default();
        let mut readings = Readings {
            utilization_ratio: p
                .value("mig utilization", || m.utilization())
                .map(|pc| f64::from(pc) / 100.0),
            ..Readings::default()
        };
        set_memory(&mut readings, p.value("mig memory", || m.memory()));
        let slot = gpm
            .entry(compute.uuid.clone())
            .or_insert_with(|| GpmSlot::new(gpm_supported));
        set_gpm(
            &mut readings,
            slot.advance(lib, p, |s| s.take_mig(d, gpu_instance_id)),
        );
        out.push(MigInstance {
            uuid: compute.uuid.clone(),
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
