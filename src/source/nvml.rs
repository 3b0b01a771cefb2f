//! The NVML source: the real fleet, read through `libnvidia-ml.so.1`
//! loaded at run time (see `nvml/ffi.rs`, the only unsafe code).
//!
//! The source never gives up: when the library will not load or NVML will
//! not initialise (no driver yet, driver being upgraded), `collect` fails
//! with the reason and tries again later, waiting `retry_first` and then
//! twice as long each time up to `retry_max`.
//!
//! Readings are converted to base units. A reading NVML does not support,
//! or a symbol the driver lacks, leaves the field `None`. A GPU that
//! answers GPU_IS_LOST is reported `up = false` with empty readings, under
//! the identity it had when last seen, while the rest keep reporting.
//!
//! PCIe: NVML only gives a throughput rate (KB/s over a ~20 ms sample,
//! taken as 1024 bytes per KB). The source integrates it into
//! `pcie_bytes_total` with the trapezoid rule between collections, so the
//! counter starts at 0 and is an estimate whose accuracy depends on how
//! representative each sample is.
//!
//! Xid: a thread per NVML session registers XidCriticalError events and
//! counts them by GPU UUID; counts survive re-initialisation. GPUs that
//! cannot deliver events leave `xid_errors` `None` for another reader.
//!
//! GPM (Hopper and later): SM active, SM occupancy and DRAM active are
//! computed between this collection's sample and the previous one, for
//! GPUs and MIG instances alike; the first collection has none.
//!
//! Clock-event durations: `nvmlDeviceGetViolationStatus` (cumulative ns)
//! for the three policies with a counterpart in our reasons: power →
//! `sw_power_cap`, thermal → `sw_thermal_slowdown`, sync boost →
//! `sync_boost`. The other reasons stay `None`.
//!
//! NVLink bytes (payload, all links, from NVML's KiB counters) and HBM
//! temperature come from one `nvmlDeviceGetFieldValues` call per GPU; a
//! field NVML refuses, e.g. on a GPU without NVLink, stays `None`.
//!
//! None of these three is read on MIG instances.

mod ffi;

use super::{Source, SourceError};
use crate::base::time::unix_now;
use crate::base::units::{KIB, MHZ};
use crate::config::SourceKind;
use crate::snapshot::{CLOCK_EVENT_REASONS, Gpu, MigInstance, Readings, TxRx, xid_errors};
use ffi::{
    CLOCK_MEM, CLOCK_SM, Device, EVENT_XID_CRITICAL_ERROR, Error, EventSet, FI_DEV_MEMORY_TEMP,
    FI_DEV_NVLINK_THROUGHPUT_DATA_RX, FI_DEV_NVLINK_THROUGHPUT_DATA_TX, GPM_DRAM_BW_UTIL,
    GPM_SM_OCCUPANCY, GPM_SM_UTIL, GpmSample, Library, PERF_POLICY_POWER, PERF_POLICY_SYNC_BOOST,
    PERF_POLICY_THERMAL, SCOPE_ALL_LINKS,
};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What is loaded when no path is given; the driver installs it.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// Bytes per NVML PCIe throughput "KB".
const PCIE_KB: f64 = KIB;

/// Bytes per KiB of NVML's NVLink throughput fields.
const NVLINK_KIB: f64 = KIB;

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
const VIOLATIONS: [(u32, &str); 3] = [
    (PERF_POLICY_POWER, "sw_power_cap"),
    (PERF_POLICY_THERMAL, "sw_thermal_slowdown"),
    (PERF_POLICY_SYNC_BOOST, "sync_boost"),
];

/// What one `nvmlDeviceGetFieldValues` call per GPU asks for, in this
/// order: NVLink TX and RX over all links, then memory temperature.
const FIELDS: [(u32, u32); 3] = [
    (FI_DEV_NVLINK_THROUGHPUT_DATA_TX, SCOPE_ALL_LINKS),
    (FI_DEV_NVLINK_THROUGHPUT_DATA_RX, SCOPE_ALL_LINKS),
    (FI_DEV_MEMORY_TEMP, 0),
];

/// The longest wait between retries, whatever the options say.
const MAX_RETRY: Duration = Duration::from_secs(24 * 3600);

/// GPM wants its two samples at least this far apart.
const GPM_MIN_INTERVAL: Duration = Duration::from_millis(100);
/// SM active, SM occupancy, DRAM active, in [`Readings`] order.
const GPM_METRICS: [u32; 3] = [GPM_SM_UTIL, GPM_SM_OCCUPANCY, GPM_DRAM_BW_UTIL];

#[derive(Clone, Debug)]
pub struct Options {
    /// The wait before retrying a failed load or init; it doubles after
    /// each failure, up to `retry_max`.
    pub retry_first: Duration,
    pub retry_max: Duration,
    /// How long each wait for Xid events lasts; also how long a retired
    /// Xid thread may take to notice and let its NVML session go.
    pub event_wait: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            retry_first: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            event_wait: Duration::from_millis(1000),
        }
    }
}

pub struct Nvml {
    library: PathBuf,
    options: Options,
    state: State,
    /// Identity by index, to label a GPU once it is lost.
    identities: HashMap<u32, Identity>,
    /// PCIe byte counters by UUID.
    pcie: HashMap<String, PcieCounter>,
    /// Xid counts by UUID, written by the Xid thread.
    xids: Arc<Mutex<HashMap<String, XidCounts>>>,
}

enum State {
    Up(Session),
    Down {
        reason: String,
        next_try: Instant,
        /// The wait that led to `next_try`; `None` before any failure.
        delay: Option<Duration>,
    },
}

struct Session {
    lib: Arc<Library>,
    driver_version: String,
    /// Set up by the first collection of the session.
    xid: Option<XidWatch>,
    /// GPM samples by GPU or MIG UUID.
    gpm: HashMap<String, GpmSlot>,
}

enum GpmSlot {
    Unsupported,
    Sampling {
        /// The previous sample and when it was taken.
        last: Option<(Instant, GpmSample)>,
        /// A buffer to reuse for the next sample.
        spare: Option<GpmSample>,
    },
}

impl GpmSlot {
    fn new(supported: bool) -> GpmSlot {
        if supported {
            GpmSlot::Sampling {
                last: None,
                spare: None,
            }
        } else {
            GpmSlot::Unsupported
        }
    }

    /// Takes a sample with `take` and returns the GPM metrics since the
    /// previous one, as ratios.
    fn advance(
        &mut self,
        lib: &Arc<Library>,
        p: &mut Probe,
        take: impl FnOnce(&mut GpmSample) -> Result<(), Error>,
    ) -> [Option<f64>; 3] {
        let mut out = [None; 3];
        let GpmSlot::Sampling { last, spare } = self else {
            return out;
        };
        if last
            .as_ref()
            .is_some_and(|(t, _)| t.elapsed() < GPM_MIN_INTERVAL)
        {
            return out;
        }
        let sample = match spare.take() {
            Some(s) => Some(s),
            None => p.get("gpm sample alloc", || GpmSample::alloc(lib.clone())),
        };
        let Some(mut sample) = sample else {
            return out;
        };
        if p.get("gpm sample", || take(&mut sample)).is_none() {
            *spare = Some(sample);
            *last = None;
            return out;
        }
        let taken = Instant::now();
        if let Some((_, earlier)) = last.take() {
            let values = p.get("gpm metrics", || {
                sample.metrics_since(&earlier, &GPM_METRICS)
            });
            for (o, v) in out.iter_mut().zip(values.into_iter().flatten()) {
                *o = v.ok().map(|percent| percent / 100.0);
            }
            *spare = Some(earlier);
        }
        *last = Some((taken, sample));
        out
    }
}

fn set_gpm(r: &mut Readings, [sm_active, sm_occupancy, dram_active]: [Option<f64>; 3]) {
    r.sm_active_ratio = sm_active;
    r.sm_occupancy_ratio = sm_occupancy;
    r.dram_active_ratio = dram_active;
}

/// The GPUs the session's Xid thread watches. Dropping it stops the
/// thread, which then frees the event set and lets go of the library.
struct XidWatch {
    watched: HashSet<String>,
    stop: Arc<AtomicBool>,
}

impl Drop for XidWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[derive(Clone, Debug, Default)]
struct Identity {
    uuid: String,
    model: String,
    pci_bus_id: String,
}

#[derive(Debug, Default)]
struct XidCounts {
    counts: BTreeMap<u32, u64>,
    last_seconds: Option<f64>,
}

#[derive(Debug, Default)]
struct PcieCounter {
    total: TxRx,
    /// The previous sample, bytes/s, and when it was taken.
    last: Option<(Instant, TxRx)>,
}

impl PcieCounter {
    fn advance(&mut self, now: Instant, rate: TxRx) -> TxRx {
        if let Some((then, prev)) = self.last {
            let dt = now.saturating_duration_since(then).as_secs_f64();
            self.total.tx += (prev.tx + rate.tx) / 2.0 * dt;
            self.total.rx += (prev.rx + rate.rx) / 2.0 * dt;
        }
        self.last = Some((now, rate));
        self.total
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Nvml {
    /// [`Nvml::open_with`] with the default options.
    pub fn open(library: Option<&Path>) -> Result<Nvml, String> {
        Nvml::open_with(library, Options::default())
    }

    /// A source reading NVML from `library`, or [`DEFAULT_LIBRARY`]. A bare
    /// file name is searched for as the dynamic loader does; a path must
    /// exist, else this is a configuration error. A library that exists
    /// but will not load or initialise is not: the source is returned and
    /// its collections fail, retrying, until it does.
    pub fn open_with(library: Option<&Path>, options: Options) -> Result<Nvml, String> {
        let library = match library {
            None => PathBuf::from(DEFAULT_LIBRARY),
            Some(p) => {
                let bare_name = p.components().count() == 1 && !p.as_os_str().is_empty();
                if !bare_name && let Err(e) = std::fs::metadata(p) {
                    return Err(format!("NVML library {}: {e}", p.display()));
                }
                p.to_path_buf()
            }
        };
        let mut nvml = Nvml {
            library,
            options,
            state: State::Down {
                reason: "not connected yet".into(),
                next_try: Instant::now(),
                delay: None,
            },
            identities: HashMap::new(),
            pcie: HashMap::new(),
            xids: Arc::new(Mutex::new(HashMap::new())),
        };
        // A failure here is reported by collect, which also retries.
        let _ = nvml.connect();
        Ok(nvml)
    }

    /// Whether NVML loaded and initialised (so far).
    pub fn connected(&self) -> bool {
        matches!(self.state, State::Up(_))
    }

    /// Loads and initialises NVML, or records why not and when to retry.
    fn connect(&mut self) -> Result<(), SourceError> {
        match Library::open(&self.library) {
            Ok(lib) => {
                let driver_version = lib.driver_version().unwrap_or_else(|e| {
                    log::warn!("source nvml: no driver version: {e}");
                    String::new()
                });
                log::info!(
                    "source nvml: {} loaded, driver {driver_version}",
                    self.library.display()
                );
                self.state = State::Up(Session {
                    lib: Arc::new(lib),
                    driver_version,
                    xid: None,
                    gpm: HashMap::new(),
                });
                Ok(())
            }
            Err(e) => Err(self.go_down(format!("{}: {e}", self.library.display()))),
        }
    }

    /// Drops any session and schedules the next attempt.
    fn go_down(&mut self, reason: String) -> SourceError {
        let delay = match &self.state {
            State::Down {
                delay: Some(delay), ..
            } => delay.saturating_mul(2),
            _ => self.options.retry_first,
        };
        // Capped at a day too, so that adding it to now cannot overflow.
        let delay = delay.min(self.options.retry_max).min(MAX_RETRY);
        log::warn!("source nvml: {reason}; retrying in {delay:?}");
        let error = SourceError(format!("{reason}; retrying in {delay:?}"));
        self.state = State::Down {
            reason,
            next_try: Instant::now() + delay,
            delay: Some(delay),
        };
        error
    }
}

impl Source for Nvml {
    fn kind(&self) -> SourceKind {
        SourceKind::Nvml
    }

    fn collect(&mut self, _at: f64) -> Result<Vec<Gpu>, SourceError> {
        if let State::Down {
            reason, next_try, ..
        } = &self.state
        {
            let now = Instant::now();
            if now < *next_try {
                let wait = next_try.saturating_duration_since(now);
                return Err(SourceError(format!(
                    "{reason}; retrying in {:.1}s",
                    wait.as_secs_f64()
                )));
            }
            self.connect()?;
        }
        let State::Up(session) = &mut self.state else {
            return Err(SourceError("NVML is not connected".into()));
        };
        let lib = session.lib.clone();
        let count = match lib.device_count() {
            Ok(n) => n,
            Err(e) => {
                drop(lib);
                return Err(self.go_down(format!("nvmlDeviceGetCount_v2: {e}")));
            }
        };
        let devices: Vec<_> = (0..count).map(|i| (i, lib.device(i))).collect();
        if session.xid.is_none() {
            session.xid = Some(watch_xids(&lib, &devices, &self.xids, &self.options));
        }
        let mut gpus = Vec::with_capacity(devices.len());
        for (index, device) in devices {
            let mut gpu = read_gpu(index, device, &lib, &mut self.pcie, &mut session.gpm);
            if gpu.up {
                self.identities.insert(
                    index,
                    Identity {
                        uuid: gpu.uuid.clone(),
                        model: gpu.model.clone(),
                        pci_bus_id: gpu.pci_bus_id.clone(),
                    },
                );
                let watched = session
                    .xid
                    .as_ref()
                    .is_some_and(|w| w.watched.contains(&gpu.uuid));
                if watched {
                    let (counts, last) = xid_readings(&lock(&self.xids), &gpu.uuid);
                    gpu.readings.xid_errors = Some(counts);
                    gpu.readings.xid_last_timestamp_seconds = last;
                }
            } else if let Some(id) = self.identities.get(&index) {
                gpu.uuid = id.uuid.clone();
                gpu.model = id.model.clone();
                gpu.pci_bus_id = id.pci_bus_id.clone();
            }
            gpu.driver_version = session.driver_version.clone();
            gpus.push(gpu);
        }
        Ok(gpus)
    }
}

/// A GPU's Xid readings: its counts as `xid_errors` holds them, and when
/// the last one came.
fn xid_readings(xids: &HashMap<String, XidCounts>, uuid: &str) -> (Vec<(u32, u64)>, Option<f64>) {
    let seen = xids.get(uuid);
    let counts = seen
        .into_iter()
        .flat_map(|s| &s.counts)
        .map(|(&c, &n)| (c, n));
    (xid_errors(counts), seen.and_then(|s| s.last_seconds))
}

/// Calls NVML for one GPU, remembering whether it answered GPU_IS_LOST
/// (after which nothing more is asked of it).
#[derive(Default)]
struct Probe {
    lost: bool,
}

impl Probe {
    fn get<T>(&mut self, what: &str, call: impl FnOnce() -> Result<T, Error>) -> Option<T> {
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
}

fn mhz(v: u32) -> f64 {
    f64::from(v) * MHZ
}

fn milli(v: f64) -> f64 {
    v / 1000.0
}

fn read_gpu(
    index: u32,
    device: Result<Device<'_>, Error>,
    lib: &Arc<Library>,
    pcie: &mut HashMap<String, PcieCounter>,
    gpm: &mut HashMap<String, GpmSlot>,
) -> Gpu {
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
    let mut p = Probe::default();
    let uuid = p.get("uuid", || d.uuid()).unwrap_or_default();
    let model = p.get("name", || d.name()).unwrap_or_default();
    let pci_bus_id = p.get("pci info", || d.pci_bus_id()).unwrap_or_default();

    let mut r = Readings {
        temperature_celsius: p.get("temperature", || d.temperature()).map(f64::from),
        sm_clock_hertz: p.get("sm clock", || d.clock(CLOCK_SM)).map(mhz),
        sm_clock_max_hertz: p.get("max sm clock", || d.max_clock(CLOCK_SM)).map(mhz),
        memory_clock_hertz: p.get("memory clock", || d.clock(CLOCK_MEM)).map(mhz),
        clocks_event_mask: p.get("clock event reasons", || d.clocks_event_reasons()),
        power_usage_watts: p
            .get("power", || d.power_usage())
            .map(|mw| milli(mw.into())),
        power_limit_watts: p
            .get("power limit", || d.power_limit())
            .map(|mw| milli(mw.into())),
        energy_joules_total: p
            .get("energy", || d.total_energy())
            .map(|mj| milli(mj as f64)),
        utilization_ratio: p
            .get("utilization", || d.utilization())
            .map(|pc| f64::from(pc) / 100.0),
        ecc_corrected_total: p
            .get("ecc corrected", || d.ecc_volatile_total(false))
            .map(|n| n as f64),
        ecc_uncorrected_total: p
            .get("ecc uncorrected", || d.ecc_volatile_total(true))
            .map(|n| n as f64),
        pcie_replay_errors_total: p
            .get("pcie replay", || d.pcie_replay_counter())
            .map(f64::from),
        ..Readings::default()
    };
    set_memory(&mut r, p.get("memory", || d.memory()));
    set_violations(&mut r, d, &mut p);
    set_fields(&mut r, d, &mut p);

    let tx = p.get("pcie tx", || d.pcie_throughput(false));
    let rx = p.get("pcie rx", || d.pcie_throughput(true));
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
        return down(Error::GPU_IS_LOST);
    }
    Gpu {
        index,
        uuid,
        model,
        pci_bus_id,
        driver_version: String::new(),
        up: true,
        readings: r,
        mig,
    }
}

/// Clock-event seconds for the reasons in [`VIOLATIONS`]; each policy
/// NVML refuses leaves its reason `None`.
fn set_violations(r: &mut Readings, d: Device<'_>, p: &mut Probe) {
    for (policy, reason) in VIOLATIONS {
        let Some(i) = CLOCK_EVENT_REASONS.iter().position(|&n| n == reason) else {
            continue;
        };
        r.clocks_event_seconds_total[i] = p
            .get("violation status", || d.violation_ns(policy))
            .map(|ns| ns as f64 / 1e9);
    }
}

/// NVLink bytes and memory temperature from one field-values call. NVLink
/// needs both directions, so a half-answered pair is left out.
fn set_fields(r: &mut Readings, d: Device<'_>, p: &mut Probe) {
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

fn set_memory(r: &mut Readings, m: Option<ffi::Memory>) {
    if let Some(m) = m {
        r.memory_total_bytes = Some(m.total as f64);
        r.memory_reserved_bytes = m.reserved.map(|v| v as f64);
        r.memory_free_bytes = Some(m.free as f64);
        r.memory_used_bytes = Some(m.used as f64);
    }
}

/// The MIG devices of a GPU in MIG mode. NVML refuses most readings on
/// them; those stay `None`.
fn read_mig(
    d: Device<'_>,
    p: &mut Probe,
    lib: &Arc<Library>,
    gpm: &mut HashMap<String, GpmSlot>,
    gpm_supported: bool,
) -> Vec<MigInstance> {
    let slots = p
        .get("max mig devices", || d.max_mig_devices())
        .unwrap_or(0);
    let mut out = Vec::new();
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
        let name = p.get("mig name", || m.name()).unwrap_or_default();
        let mut readings = Readings {
            utilization_ratio: p
                .get("mig utilization", || m.utilization())
                .map(|pc| f64::from(pc) / 100.0),
            ..Readings::default()
        };
        set_memory(&mut readings, p.get("mig memory", || m.memory()));
        let slot = gpm
            .entry(uuid.clone())
            .or_insert_with(|| GpmSlot::new(gpm_supported));
        set_gpm(
            &mut readings,
            slot.advance(lib, p, |s| s.take_mig(d, gpu_instance_id)),
        );
        out.push(MigInstance {
            uuid,
            gpu_instance_id,
            profile: mig_profile(&name),
            readings,
        });
    }
    out
}

/// The profile a MIG device name ends in: `NVIDIA H100 80GB HBM3 MIG
/// 3g.40gb` → `3g.40gb`; empty when the name has no MIG suffix.
fn mig_profile(name: &str) -> String {
    name.rsplit_once("MIG ")
        .map(|(_, p)| p.trim().to_string())
        .unwrap_or_default()
}

/// Registers every readable GPU for Xid events and starts the thread that
/// counts them. GPUs that cannot deliver them are left out of `watched`.
fn watch_xids(
    lib: &Arc<Library>,
    devices: &[(u32, Result<Device<'_>, Error>)],
    xids: &Arc<Mutex<HashMap<String, XidCounts>>>,
    options: &Options,
) -> XidWatch {
    let stop = Arc::new(AtomicBool::new(false));
    let mut watch = XidWatch {
        watched: HashSet::new(),
        stop: stop.clone(),
    };
    let set = match EventSet::create(lib.clone()) {
        Ok(set) => set,
        Err(e) => {
            log::info!("source nvml: no Xid events ({e}); Xid counts come from elsewhere");
            return watch;
        }
    };
    let mut by_device = HashMap::new();
    for (index, device) in devices {
        let Ok(d) = device else { continue };
        let supported = d.supported_event_types().unwrap_or(0);
        if supported & EVENT_XID_CRITICAL_ERROR == 0 {
            continue;
        }
        let (Ok(uuid), Ok(())) = (d.uuid(), set.register(*d, EVENT_XID_CRITICAL_ERROR)) else {
            log::debug!("source nvml: GPU {index}: cannot register for Xid events");
            continue;
        };
        watch.watched.insert(uuid.clone());
        by_device.insert(d.id(), uuid);
    }
    if by_device.is_empty() {
        return watch;
    }
    let xids = xids.clone();
    let wait = options.event_wait;
    let spawned = std::thread::Builder::new()
        .name("nvml-xid".into())
        .spawn(move || count_xids(set, by_device, xids, stop, wait));
    if let Err(e) = spawned {
        log::warn!("source nvml: cannot start the Xid thread: {e}");
        watch.watched.clear();
    }
    watch
}

/// The Xid thread: waits for events until told to stop.
fn count_xids(
    set: EventSet,
    devices: HashMap<usize, String>,
    xids: Arc<Mutex<HashMap<String, XidCounts>>>,
    stop: Arc<AtomicBool>,
    wait: Duration,
) {
    let ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX).max(1);
    while !stop.load(Ordering::Relaxed) {
        match set.wait(ms) {
            Ok(ev) if ev.event_type & EVENT_XID_CRITICAL_ERROR != 0 => {
                let (Some(uuid), Ok(code)) = (devices.get(&ev.device), u32::try_from(ev.data))
                else {
                    continue;
                };
                let mut xids = lock(&xids);
                let entry = xids.entry(uuid.clone()).or_default();
                *entry.counts.entry(code).or_insert(0) += 1;
                entry.last_seconds = Some(unix_now());
            }
            Ok(_) | Err(Error::TIMEOUT) => {}
            Err(e) => {
                // Do not spin on a set that keeps failing.
                log::debug!("source nvml: waiting for Xid events: {e}");
                std::thread::sleep(wait);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::CRITICAL_XIDS;

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

    #[test]
    fn xid_readings_list_critical_codes_and_seen_ones() {
        let mut xids = HashMap::new();
        let mut seen = XidCounts::default();
        seen.counts.insert(13, 2);
        seen.counts.insert(79, 1);
        seen.last_seconds = Some(5.0);
        xids.insert("GPU-a".to_string(), seen);
        let (counts, last) = xid_readings(&xids, "GPU-a");
        assert_eq!(last, Some(5.0));
        assert_eq!(counts.len(), CRITICAL_XIDS.len() + 1);
        assert!(counts.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(
            counts.contains(&(13, 2)) && counts.contains(&(79, 1)) && counts.contains(&(48, 0))
        );
        let (counts, last) = xid_readings(&xids, "GPU-b");
        assert_eq!(last, None);
        assert!(
            counts
                .iter()
                .all(|&(c, n)| n == 0 && CRITICAL_XIDS.contains(&c))
        );
    }
}
