//! A fake `libnvidia-ml.so.1`: the subset of the NVML C ABI the exporter
//! uses, driven by a JSON scenario, so the NVML source's real dlopen path
//! can be tested on machines without a GPU.
//!
//! The scenario is read at `nvmlInit*` (so a test can change it between
//! retries) from `$FAKE_NVML_SCENARIO`, or else from `scenario.json` in
//! the directory this library was loaded from. The second form lets tests
//! running in parallel threads each load their own copy of the library
//! with their own scenario, without touching the process environment.
//!
//! Scenario shape (every reading is optional; an absent one answers
//! NOT_SUPPORTED, so "not supported" needs no extra syntax):
//!
//! ```json
//! { "init_error": 9, "driver_version": "550.90.07",
//!   "hang": { "call": "nvmlDeviceGetPowerUsage", "ms": 1500 },
//!   "fail": { "call": "nvmlDeviceGetFanSpeed_v2", "code": 999 },
//!   "count_error": { "after_collections": 2, "code": 999 },
//!   "gpus": [ { "name": "...", "uuid": "GPU-...", "bus_id": "00000000:3B:00.0",
//!     "temperature": 40, "sm_clock_mhz": 1980, "memory_clock_mhz": 2619,
//!     "sm_clock_max_mhz": 1980, "memory_clock_max_mhz": 2619, "clocks_event_reasons": 4,
//!     "power_mw": 350000, "power_limit_mw": 700000, "energy_mj": 123456,
//!     "utilization": { "gpu": 87, "memory": 40 },
//!     "memory": { "total": 1, "reserved": 1, "free": 1, "used": 1 },
//!     "ecc_corrected": 1, "ecc_uncorrected": 0,
//!     "pcie_tx_kbps": 1000, "pcie_rx_kbps": 2000, "pcie_replay": 0,
//!     "violation_ns": { "power": 1, "thermal": 1, "sync_boost": 1 },
//!     "nvlink_kib": { "tx": 1, "rx": 1 }, "memory_temperature": 55,
//!     "memory_temperature_max": 95, "recovery_action": 0, "fans": [38, 120],
//!     "remapped_rows": { "correctable": 0, "uncorrectable": 1, "pending": true, "failure": false },
//!     "retired_pages": { "single_bit": 2, "double_bit": 1, "pending": false },
//!     "ecc_corrected_lifetime": 5, "ecc_uncorrected_lifetime": 1,
//!     "pcie_link": { "generation": 4, "generation_max": 5, "gpu_generation_max": 5,
//!                    "width": 8, "width_max": 16 },
//!     "nvlink": { "links": 18, "down": [3], "errors": [[1, 2, 3, 4]], "nvlink5": false },
//!     "media": { "encoder": 72, "decoder": 0, "jpeg": 0, "ofa": 0 },
//!     "pstate": 0, "persistence": true, "compute_mode": 0,
//!     "vbios": "96.00.A5.00.01", "inforom": "G520.0200.00.05",
//!     "lost_after_collections": 1, "lost_after_ms": 5000,
//!     "mig": [ { "name": "... MIG 3g.40gb", "uuid": "MIG-...", "gpu_instance_id": 1,
//!                "memory": { ... }, "gpm": { ... } } ],
//!     "gpm": { "sm_active": 50.0, "sm_occupancy": 25.0, "dram_active": 40.0,
//!              "tensor": 30.0, "fp64": 0.0, "fp32": 5.0, "fp16": 2.0,
//!              "pcie_tx_mibps": 100.0, "pcie_rx_mibps": 50.0,
//!              "fields": { "DCGM_FI_PROF_NVLINK_TX_BYTES": 100.0 } },
//!     "events": true, "xids": [79, 48] } ] }
//! ```
//!
//! A "collection" is one `nvmlDeviceGetCount_v2` call. A lost GPU answers
//! GPU_IS_LOST to every call on it. `hang` sleeps the first call of that
//! name once. `xids` are queued when the GPU registers for Xid events and
//! handed out one per `nvmlEventSetWait_v2`. GPM metrics (percentages,
//! MiB/s) come from the scenario of the device both samples were taken
//! of; `fields` gives any other metric by the DCGM profiling field the
//! exporter's table (`crates/model/src/dcgm/prof.rs`) maps to it.
//! `violation_ns` answers nvmlDeviceGetViolationStatus per policy (power,
//! thermal, sync boost; every other policy, or one left out, is
//! NOT_SUPPORTED). nvmlDeviceGetFieldValues answers the NVLink data
//! throughput fields (138/139, all links only) from `nvlink_kib` and the
//! memory temperature field (82) from `memory_temperature`, the NVLink
//! error totals (38, 45, 52, 59), or with `nvlink5` the NVLink 5 counts
//! (208, 215, all links only), and the link count (91) from `nvlink`, and
//! the recovery action (230) from `recovery_action`; anything else gets a
//! per-field NOT_SUPPORTED. The old-driver build also lacks
//! nvmlDeviceGetRemappedRows, the fan calls, the JPEG and OFA utilization
//! calls and nvmlDeviceGetGpuMaxPcieLinkGeneration.
//!
//! A GPU's `"slow": { "call": "nvmlDeviceGetPowerUsage", "ms": 6000 }`
//! sleeps every call of that name on it (and its MIG devices), as a GPU
//! whose getter is slow while the others answer.
//!
//! Failure scripts (issue 11): `"init_hang_ms": 5000` makes the first
//! `nvmlInit*` of the process sleep that long before answering, as a
//! driver that hangs at boot; a GPU's `"reset_after_collections": n`
//! makes its counters (energy, ECC, PCIe replay, violation time) read 0
//! after n collections, as after a GPU reset; its
//! `"energy_mj_per_collection": n` adds n to `energy_mj` at every
//! collection, as a counter climbing at any rate; its
//! `"xids_after_collections": n` holds its `xids` back until then (an Xid
//! just before a loss). A MIG entry's
//! `"compute_instance_id"` (default 0) is its compute instance: entries
//! sharing a `gpu_instance_id` are compute instances of one GPU instance.
//!
//! Processes (issue 15): a GPU's or MIG entry's `"processes": [{"pid":
//! 4242, "used_bytes": 1073741824, "graphics": false, "compute": true}]`
//! answer nvmlDeviceGet{Compute,Graphics}RunningProcesses_v3 (a process
//! without `used_bytes` reports NVML_VALUE_NOT_AVAILABLE); a buffer too
//! small gets INSUFFICIENT_SIZE and the count, as the real library does.
//!
//! This is test support: every pointer argument is trusted to be what
//! nvml.h says it is (null ones are refused).

#![allow(non_snake_case)] // NVML's C names
#![allow(clippy::missing_safety_doc)]
// the contract is nvml.h's
// The old-driver build leaves out symbols, and with them some helpers' users.
#![cfg_attr(feature = "old-driver", allow(dead_code))]

use nanoserde::DeJson;
use std::collections::{HashMap, VecDeque};
use std::ffi::{CStr, OsStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

type Ret = c_uint;
type Device = *mut c_void;
type EventSet = *mut c_void;

const SUCCESS: Ret = 0;
const UNINITIALIZED: Ret = 1;
const INVALID_ARGUMENT: Ret = 2;
const NOT_SUPPORTED: Ret = 3;
const NOT_FOUND: Ret = 6;
const INSUFFICIENT_SIZE: Ret = 7;
const TIMEOUT: Ret = 10;
const GPU_IS_LOST: Ret = 15;
const ARGUMENT_VERSION_MISMATCH: Ret = 25;
const UNKNOWN: Ret = 999;

const XID_CRITICAL_ERROR: u64 = 0x8;
/// How many MIG slots a GPU reports; the scenario's instances fill the
/// first ones and the rest answer NOT_FOUND, as empty slots do.
const MIG_SLOTS: usize = 7;

#[allow(clippy::question_mark)] // in nanoserde's derived code
mod scenario {
    use nanoserde::DeJson;

    #[derive(DeJson, Clone)]
    pub struct Scenario {
        pub init_error: Option<u32>,
        pub driver_version: Option<String>,
        pub hang: Option<Hang>,
        /// Every call of this name fails with this code.
        pub fail: Option<Fail>,
        /// nvmlDeviceGetCount_v2 fails with `code` once more than
        /// `after_collections` collections happened since init, as when
        /// the driver goes away under a running exporter.
        pub count_error: Option<CountError>,
        pub gpus: Vec<Gpu>,
        /// The first init of the process sleeps this long.
        pub init_hang_ms: Option<u64>,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct CountError {
        pub after_collections: u64,
        pub code: u32,
    }

    #[derive(DeJson, Clone)]
    pub struct Fail {
        pub call: String,
        pub code: u32,
    }

    #[derive(DeJson, Clone)]
    pub struct Hang {
        pub call: String,
        pub ms: u64,
    }

    #[derive(DeJson, Clone, Default)]
    pub struct Gpu {
        pub name: Option<String>,
        pub uuid: Option<String>,
        pub bus_id: Option<String>,
        pub temperature: Option<u32>,
        pub sm_clock_mhz: Option<u32>,
        pub memory_clock_mhz: Option<u32>,
        pub sm_clock_max_mhz: Option<u32>,
        pub memory_clock_max_mhz: Option<u32>,
        pub clocks_event_reasons: Option<u64>,
        pub power_mw: Option<u32>,
        pub power_limit_mw: Option<u32>,
        pub energy_mj: Option<u64>,
        /// Added to `energy_mj` at every collection: a counter that climbs.
        pub energy_mj_per_collection: Option<u64>,
        pub utilization: Option<Utilization>,
        pub memory: Option<Memory>,
        pub ecc_corrected: Option<u64>,
        pub ecc_uncorrected: Option<u64>,
        pub pcie_tx_kbps: Option<u32>,
        pub pcie_rx_kbps: Option<u32>,
        pub pcie_replay: Option<u32>,
        pub lost_after_collections: Option<u64>,
        pub lost_after_ms: Option<u64>,
        /// Every call of this name on this GPU sleeps this long.
        pub slow: Option<Hang>,
        pub mig: Option<Vec<Mig>>,
        pub events: Option<bool>,
        pub xids: Option<Vec<u64>>,
        pub gpm: Option<Gpm>,
        pub violation_ns: Option<Violations>,
        pub nvlink_kib: Option<TxRx>,
        pub memory_temperature: Option<u32>,
        /// Counters read 0 after this many collections.
        pub reset_after_collections: Option<u64>,
        /// Its `xids` are handed out only after this many collections.
        pub xids_after_collections: Option<u64>,
        pub memory_temperature_max: Option<u32>,
        pub remapped_rows: Option<Remapped>,
        pub retired_pages: Option<Retired>,
        pub ecc_corrected_lifetime: Option<u64>,
        pub ecc_uncorrected_lifetime: Option<u64>,
        pub pcie_link: Option<PcieLink>,
        pub nvlink: Option<Nvlink>,
        pub recovery_action: Option<u32>,
        pub fans: Option<Vec<u32>>,
        pub media: Option<Media>,
        pub pstate: Option<u32>,
        pub persistence: Option<bool>,
        pub compute_mode: Option<u32>,
        pub vbios: Option<String>,
        pub inforom: Option<String>,
        pub processes: Option<Vec<Process>>,
        /// The device minor number; its index where left out.
        pub minor: Option<u32>,
    }

    /// A process on a GPU or MIG device; without `used_bytes`, NVML's
    /// "not available" value. `graphics` lists it as a graphics process,
    /// `compute` (default true) as a compute one.
    #[derive(DeJson, Clone, Copy)]
    pub struct Process {
        pub pid: u32,
        pub used_bytes: Option<u64>,
        pub graphics: Option<bool>,
        pub compute: Option<bool>,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct Remapped {
        pub correctable: u32,
        pub uncorrectable: u32,
        pub pending: bool,
        pub failure: bool,
        /// The raw words to answer instead of the flags (a broken driver's
        /// 0xFFFFFFFF).
        pub raw_pending: Option<u32>,
        pub raw_failure: Option<u32>,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct Retired {
        pub single_bit: u32,
        pub double_bit: u32,
        pub pending: bool,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct PcieLink {
        pub generation: u32,
        /// Of the GPU and the slot; absent: only the GPU's maximum.
        pub generation_max: Option<u32>,
        pub gpu_generation_max: u32,
        pub width: u32,
        pub width_max: u32,
    }

    /// `errors` per link: CRC flit, CRC data, replay, recovery. `nvlink5`
    /// answers the NVLink 5 counts instead of the error totals.
    #[derive(DeJson, Clone)]
    pub struct Nvlink {
        pub links: u32,
        pub down: Option<Vec<u32>>,
        pub errors: Option<Vec<Vec<u64>>>,
        pub nvlink5: Option<bool>,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct Media {
        pub encoder: u32,
        pub decoder: u32,
        pub jpeg: Option<u32>,
        pub ofa: Option<u32>,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct Violations {
        pub power: Option<u64>,
        pub thermal: Option<u64>,
        pub sync_boost: Option<u64>,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct TxRx {
        pub tx: u64,
        pub rx: u64,
    }

    #[derive(DeJson, Clone)]
    pub struct Gpm {
        /// Any GPM metric by the DCGM profiling field it gives
        /// (`crates/model/src/dcgm/prof.rs`), in GPM's unit (percent, MiB/s).
        pub fields: Option<std::collections::HashMap<String, f64>>,
        pub sm_active: f64,
        pub sm_occupancy: f64,
        pub dram_active: f64,
        pub tensor: Option<f64>,
        pub fp64: Option<f64>,
        pub fp32: Option<f64>,
        pub fp16: Option<f64>,
        pub pcie_tx_mibps: Option<f64>,
        pub pcie_rx_mibps: Option<f64>,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct Utilization {
        pub gpu: u32,
        pub memory: u32,
    }

    #[derive(DeJson, Clone, Copy)]
    pub struct Memory {
        pub total: u64,
        pub reserved: u64,
        pub free: u64,
        pub used: u64,
    }

    #[derive(DeJson, Clone)]
    pub struct Mig {
        pub name: String,
        pub uuid: String,
        pub gpu_instance_id: u32,
        pub compute_instance_id: Option<u32>,
        pub memory: Option<Memory>,
        pub gpm: Option<Gpm>,
        pub processes: Option<Vec<Process>>,
    }
}
use scenario::{Gpu, Mig, Process, Scenario};

// The C structs below mirror those of crates/sources/src/nvml/ffi.rs on purpose:
// each side is written from nvml.h on its own, so a mistake in either
// shows as a disagreement in the tests.
#[repr(C)]
pub struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

#[repr(C)]
pub struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

#[repr(C)]
pub struct MemoryV1 {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

#[repr(C)]
pub struct MemoryV2 {
    version: c_uint,
    total: c_ulonglong,
    reserved: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}
const MEMORY_V2: c_uint = 0x0200_0028;

#[repr(C)]
pub struct EventData {
    device: Device,
    event_type: c_ulonglong,
    event_data: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

#[repr(C)]
pub struct GpmSupport {
    version: c_uint,
    is_supported_device: c_uint,
}

#[repr(C)]
pub struct GpmMetric {
    metric_id: c_uint,
    nvml_return: Ret,
    value: f64,
    short_name: *mut c_char,
    long_name: *mut c_char,
    unit: *mut c_char,
}

/// nvmlGpmMetricsGet_t up to its `metrics` array, which holds
/// `num_metrics` entries.
#[repr(C)]
pub struct GpmMetricsGet {
    version: c_uint,
    num_metrics: c_uint,
    sample1: *mut c_void,
    sample2: *mut c_void,
    metrics: [GpmMetric; 0],
}

#[repr(C)]
pub struct ViolationTime {
    reference_time: c_ulonglong,
    violation_time: c_ulonglong,
}

#[repr(C)]
pub struct FieldValue {
    field_id: c_uint,
    scope_id: c_uint,
    timestamp: i64,
    latency_usec: i64,
    value_type: c_uint,
    nvml_return: Ret,
    /// The nvmlValue_t union's 8 bytes.
    value: [u8; 8],
}

const FI_DEV_MEMORY_TEMP: c_uint = 82;
const FI_DEV_NVLINK_THROUGHPUT_DATA_TX: c_uint = 138;
const FI_DEV_NVLINK_THROUGHPUT_DATA_RX: c_uint = 139;
const VALUE_TYPE_UNSIGNED_INT: c_uint = 1;
const VALUE_TYPE_UNSIGNED_LONG_LONG: c_uint = 3;

const _: () = assert!(size_of::<ViolationTime>() == 16);
const _: () = assert!(size_of::<FieldValue>() == 40);
const _: () = assert!(std::mem::offset_of!(FieldValue, value) == 32);
const _: () = assert!(size_of::<GpmMetric>() == 40);
const _: () = assert!(std::mem::offset_of!(GpmMetricsGet, metrics) == 24);
const _: () = assert!(size_of::<PciInfo>() == 68);
const _: () = assert!(size_of::<MemoryV2>() == 0x28);
const _: () = assert!(size_of::<EventData>() == 32);

struct Fake {
    scenario: Scenario,
    refs: u32,
    started: Instant,
    collections: u64,
    hang_done: bool,
    sets: HashMap<usize, VecDeque<(usize, u64)>>,
    next_set: usize,
    /// GPM sample buffers: what each was last taken of (GPU, MIG slot).
    samples: HashMap<usize, Option<(usize, Option<usize>)>>,
    next_sample: usize,
}

impl Fake {
    fn lost(&self, gpu: usize) -> bool {
        let Some(g) = self.scenario.gpus.get(gpu) else {
            return false;
        };
        g.lost_after_collections
            .is_some_and(|n| self.collections > n)
            || g.lost_after_ms
                .is_some_and(|ms| self.started.elapsed() >= Duration::from_millis(ms))
    }
}

static STATE: Mutex<Option<Fake>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<Fake>> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

#[repr(C)]
struct DlInfo {
    fname: *const c_char,
    fbase: *mut c_void,
    sname: *const c_char,
    saddr: *mut c_void,
}

unsafe extern "C" {
    fn dladdr(addr: *const c_void, info: *mut DlInfo) -> c_int;
}

/// Where this library was loaded from.
fn own_path() -> Option<PathBuf> {
    let mut info = DlInfo {
        fname: std::ptr::null(),
        fbase: std::ptr::null_mut(),
        sname: std::ptr::null(),
        saddr: std::ptr::null_mut(),
    };
    // SAFETY: the address is a function in this object; info is writable.
    let found = unsafe { dladdr(own_path as *const c_void, &mut info) };
    if found == 0 || info.fname.is_null() {
        return None;
    }
    // SAFETY: dladdr returned a NUL-terminated name that lives as long as
    // the object is loaded; it is copied at once.
    let name = unsafe { CStr::from_ptr(info.fname) };
    Some(PathBuf::from(OsStr::from_bytes(name.to_bytes())))
}

fn load_scenario() -> Result<Scenario, String> {
    let path = match std::env::var_os("FAKE_NVML_SCENARIO") {
        Some(p) => PathBuf::from(p),
        None => own_path()
            .and_then(|p| p.parent().map(|d| d.join("scenario.json")))
            .ok_or("cannot find where this library was loaded from")?,
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Scenario::deserialize_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn init() -> Ret {
    hang_first_init();
    let mut state = lock();
    if let Some(f) = state.as_mut() {
        f.refs += 1;
        return SUCCESS;
    }
    let scenario = match load_scenario() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fake-nvml: {e}");
            return UNKNOWN;
        }
    };
    if let Some(code) = scenario.init_error {
        return code;
    }
    *state = Some(Fake {
        scenario,
        refs: 1,
        started: Instant::now(),
        collections: 0,
        hang_done: false,
        sets: HashMap::new(),
        next_set: 1,
        samples: HashMap::new(),
        next_sample: 1,
    });
    SUCCESS
}

/// Sleeps once if the scenario scripts a hang in `call`. The lock is not
/// held while sleeping, so other threads (the Xid waiter) carry on.
fn maybe_hang(call: &str) {
    let ms = {
        let mut state = lock();
        let Some(f) = state.as_mut() else { return };
        match &f.scenario.hang {
            Some(h) if h.call == call && !f.hang_done => {
                f.hang_done = true;
                h.ms
            }
            _ => return,
        }
    };
    std::thread::sleep(Duration::from_millis(ms));
}

fn gpu_handle(gpu: usize) -> Device {
    std::ptr::without_provenance_mut((gpu + 1) << 16)
}

fn mig_handle(gpu: usize, mig: usize) -> Device {
    std::ptr::without_provenance_mut(((gpu + 1) << 16) | (mig + 1))
}

enum Target<'a> {
    Gpu(&'a Gpu),
    Mig(&'a Mig),
}

impl<'a> Target<'a> {
    /// Readings NVML refuses on MIG devices.
    fn gpu(&self) -> Result<&'a Gpu, Ret> {
        match self {
            Target::Gpu(g) => Ok(g),
            Target::Mig(_) => Err(NOT_SUPPORTED),
        }
    }
}

/// Sleeps on every call of this name if the scenario makes it slow on
/// this device's GPU; unlocked too.
fn maybe_slow(call: &str, dev: Device) {
    let ms = {
        let state = lock();
        let gpu = (dev.addr() >> 16).checked_sub(1);
        let slow = state
            .as_ref()
            .zip(gpu)
            .and_then(|(f, g)| f.scenario.gpus.get(g)?.slow.as_ref());
        match slow {
            Some(h) if h.call == call => h.ms,
            _ => return,
        }
    };
    std::thread::sleep(Duration::from_millis(ms));
}

/// Runs `f` on the GPU or MIG device behind `dev`, after the checks every
/// device call shares: initialised, a known handle, not lost.
fn on_device(call: &str, dev: Device, f: impl FnOnce(usize, Target) -> Result<(), Ret>) -> Ret {
    maybe_hang(call);
    maybe_slow(call, dev);
    let state = lock();
    let Some(fake) = state.as_ref() else {
        return UNINITIALIZED;
    };
    if let Some(fail) = fake.scenario.fail.as_ref().filter(|f| f.call == call) {
        return fail.code;
    }
    let a = dev.addr();
    let Some(gi) = (a >> 16).checked_sub(1) else {
        return INVALID_ARGUMENT;
    };
    let Some(gpu) = fake.scenario.gpus.get(gi) else {
        return INVALID_ARGUMENT;
    };
    if fake.lost(gi) {
        return GPU_IS_LOST;
    }
    let reset_copy;
    let gpu = if fake.reset(gi) {
        reset_copy = gpu.with_counters_reset();
        &reset_copy
    } else {
        gpu
    };
    let grown;
    let gpu = match gpu.energy_mj_per_collection {
        Some(n) => {
            grown = Gpu {
                energy_mj: gpu.energy_mj.map(|e| e + n * fake.collections),
                ..gpu.clone()
            };
            &grown
        }
        None => gpu,
    };
    let target = match (a & 0xffff).checked_sub(1) {
        None => Target::Gpu(gpu),
        Some(mi) => match gpu.mig.as_ref().and_then(|m| m.get(mi)) {
            Some(m) => Target::Mig(m),
            None => return INVALID_ARGUMENT,
        },
    };
    match f(gi, target) {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

fn supported<T>(v: Option<T>) -> Result<T, Ret> {
    v.ok_or(NOT_SUPPORTED)
}

/// Writes `v` through an NVML out-pointer.
unsafe fn put<T>(p: *mut T, v: T) -> Result<(), Ret> {
    if p.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    // SAFETY: the caller passes an out-pointer valid for one T (nvml.h).
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `s` and a NUL into a caller's buffer of `len` bytes.
unsafe fn put_str(buf: *mut c_char, len: c_uint, s: &str) -> Result<(), Ret> {
    if buf.is_null() {
        return Err(INVALID_ARGUMENT);
    }
    if s.len() + 1 > len as usize {
        return Err(INSUFFICIENT_SIZE);
    }
    // SAFETY: buf holds len bytes, and s plus its NUL fits in them.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
        buf.add(s.len()).write(0);
    }
    Ok(())
}

fn c_array<const N: usize>(s: &str) -> [c_char; N] {
    let mut a = [0 as c_char; N];
    for (d, b) in a.iter_mut().zip(s.bytes().take(N - 1)) {
        *d = b as c_char;
    }
    a
}

fn default_uuid(gi: usize) -> String {
    format!("GPU-fake0000-0000-0000-0000-{gi:012}")
}

fn default_bus_id(gi: usize) -> String {
    format!("00000000:{:02X}:00.0", 0x10 + gi)
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> Ret {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> Ret {
    init()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> Ret {
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    f.refs -= 1;
    if f.refs == 0 {
        *state = None;
    }
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: c_uint) -> Ret {
    let state = lock();
    let Some(f) = state.as_ref() else {
        return UNINITIALIZED;
    };
    let v = f.scenario.driver_version.as_deref().unwrap_or("550.90.07");
    // SAFETY: buf holds len bytes (nvml.h).
    match unsafe { put_str(buf, len, v) } {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> Ret {
    maybe_hang("nvmlDeviceGetCount_v2");
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    f.collections += 1;
    if let Some(e) = f.scenario.count_error
        && f.collections > e.after_collections
    {
        return e.code;
    }
    let n = f.scenario.gpus.len() as c_uint;
    // SAFETY: an out-pointer (nvml.h).
    match unsafe { put(count, n) } {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, dev: *mut Device) -> Ret {
    let state = lock();
    let Some(f) = state.as_ref() else {
        return UNINITIALIZED;
    };
    let gi = index as usize;
    if gi >= f.scenario.gpus.len() {
        return INVALID_ARGUMENT;
    }
    if f.lost(gi) {
        return GPU_IS_LOST;
    }
    // SAFETY: an out-pointer (nvml.h).
    match unsafe { put(dev, gpu_handle(gi)) } {
        Ok(()) => SUCCESS,
        Err(e) => e,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(dev: Device, buf: *mut c_char, len: c_uint) -> Ret {
    on_device("nvmlDeviceGetName", dev, |_, t| {
        let name = match t {
            Target::Gpu(g) => g.name.as_deref().unwrap_or("NVIDIA H100 80GB HBM3"),
            Target::Mig(m) => &m.name,
        };
        // SAFETY: buf holds len bytes (nvml.h).
        unsafe { put_str(buf, len, name) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(dev: Device, buf: *mut c_char, len: c_uint) -> Ret {
    on_device("nvmlDeviceGetUUID", dev, |gi, t| {
        let uuid = match t {
            Target::Gpu(g) => g.uuid.clone().unwrap_or_else(|| default_uuid(gi)),
            Target::Mig(m) => m.uuid.clone(),
        };
        // SAFETY: buf holds len bytes (nvml.h).
        unsafe { put_str(buf, len, &uuid) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(dev: Device, pci: *mut PciInfo) -> Ret {
    on_device("nvmlDeviceGetPciInfo_v3", dev, |gi, t| {
        let g = t.gpu()?;
        let bus_id = g.bus_id.clone().unwrap_or_else(|| default_bus_id(gi));
        let info = PciInfo {
            bus_id_legacy: c_array(bus_id.get(4..).unwrap_or("")),
            domain: 0,
            bus: 0x10 + gi as c_uint,
            device: 0,
            pci_device_id: 0x2330_10de,
            pci_sub_system_id: 0x16c1_10de,
            bus_id: c_array(&bus_id),
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(pci, info) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    dev: Device,
    sensor: c_uint,
    c: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetTemperature", dev, |_, t| {
        if sensor != 0 {
            return Err(INVALID_ARGUMENT);
        }
        let v = supported(t.gpu()?.temperature)?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(c, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    dev: Device,
    kind: c_uint,
    mhz: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetClockInfo", dev, |_, t| {
        let g = t.gpu()?;
        let v = match kind {
            0 | 1 => g.sm_clock_mhz,
            2 => g.memory_clock_mhz,
            _ => None,
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mhz, supported(v)?) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    dev: Device,
    kind: c_uint,
    mhz: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetMaxClockInfo", dev, |_, t| {
        let g = t.gpu()?;
        let v = match kind {
            0 | 1 => g.sm_clock_max_mhz,
            2 => g.memory_clock_max_mhz,
            _ => None,
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mhz, supported(v)?) }
    })
}

fn clocks_event_reasons(call: &str, dev: Device, mask: *mut c_ulonglong) -> Ret {
    on_device(call, dev, |_, t| {
        let v = supported(t.gpu()?.clocks_event_reasons)?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mask, v) }
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    dev: Device,
    mask: *mut c_ulonglong,
) -> Ret {
    clocks_event_reasons("nvmlDeviceGetCurrentClocksEventReasons", dev, mask)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    dev: Device,
    mask: *mut c_ulonglong,
) -> Ret {
    clocks_event_reasons("nvmlDeviceGetCurrentClocksThrottleReasons", dev, mask)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(dev: Device, mw: *mut c_uint) -> Ret {
    on_device("nvmlDeviceGetPowerUsage", dev, |_, t| {
        let v = supported(t.gpu()?.power_mw)?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mw, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(dev: Device, mw: *mut c_uint) -> Ret {
    on_device("nvmlDeviceGetEnforcedPowerLimit", dev, |_, t| {
        let v = supported(t.gpu()?.power_limit_mw)?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mw, v) }
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    dev: Device,
    mj: *mut c_ulonglong,
) -> Ret {
    on_device("nvmlDeviceGetTotalEnergyConsumption", dev, |_, t| {
        let v = supported(t.gpu()?.energy_mj)?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mj, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(dev: Device, u: *mut Utilization) -> Ret {
    on_device("nvmlDeviceGetUtilizationRates", dev, |_, t| {
        let g = t.gpu()?;
        // NVML does not report utilisation for a GPU in MIG mode.
        if g.mig.is_some() {
            return Err(NOT_SUPPORTED);
        }
        let v = supported(g.utilization)?;
        let out = Utilization {
            gpu: v.gpu,
            memory: v.memory,
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(u, out) }
    })
}

fn memory_of(t: &Target) -> Result<scenario::Memory, Ret> {
    supported(match t {
        Target::Gpu(g) => g.memory,
        Target::Mig(m) => m.memory,
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(dev: Device, mem: *mut MemoryV2) -> Ret {
    on_device("nvmlDeviceGetMemoryInfo_v2", dev, |_, t| {
        if mem.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: mem points at the caller's struct, version set (nvml.h).
        if unsafe { (*mem).version } != MEMORY_V2 {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let m = memory_of(&t)?;
        let out = MemoryV2 {
            version: MEMORY_V2,
            total: m.total,
            reserved: m.reserved,
            free: m.free,
            used: m.used,
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mem, out) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(dev: Device, mem: *mut MemoryV1) -> Ret {
    on_device("nvmlDeviceGetMemoryInfo", dev, |_, t| {
        let m = memory_of(&t)?;
        let out = MemoryV1 {
            total: m.total,
            // v1 counts reserved memory as used.
            free: m.free,
            used: m.used + m.reserved,
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mem, out) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    dev: Device,
    error_type: c_uint,
    counter_type: c_uint,
    n: *mut c_ulonglong,
) -> Ret {
    on_device("nvmlDeviceGetTotalEccErrors", dev, |_, t| {
        let g = t.gpu()?;
        let v = match (error_type, counter_type) {
            (0, 0) => g.ecc_corrected,
            (1, 0) => g.ecc_uncorrected,
            (0, 1) => g.ecc_corrected_lifetime,
            (1, 1) => g.ecc_uncorrected_lifetime,
            _ => return Err(INVALID_ARGUMENT),
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(n, supported(v)?) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    dev: Device,
    counter: c_uint,
    kbps: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetPcieThroughput", dev, |_, t| {
        let g = t.gpu()?;
        let v = match counter {
            0 => g.pcie_tx_kbps,
            1 => g.pcie_rx_kbps,
            _ => return Err(INVALID_ARGUMENT),
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(kbps, supported(v)?) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPcieReplayCounter(dev: Device, n: *mut c_uint) -> Ret {
    on_device("nvmlDeviceGetPcieReplayCounter", dev, |_, t| {
        let v = supported(t.gpu()?.pcie_replay)?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(n, v) }
    })
}

/// Answers a device call that writes one unsigned int.
fn uint_of(
    call: &str,
    dev: Device,
    out: *mut c_uint,
    read: impl FnOnce(&Gpu) -> Option<u32>,
) -> Ret {
    on_device(call, dev, |_, t| {
        let v = supported(read(t.gpu()?))?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(out, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetTemperatureThreshold(
    dev: Device,
    kind: c_uint,
    c: *mut c_uint,
) -> Ret {
    // Only NVML_TEMPERATURE_THRESHOLD_MEM_MAX is modelled.
    uint_of("nvmlDeviceGetTemperatureThreshold", dev, c, |g| {
        (kind == 2).then_some(g.memory_temperature_max).flatten()
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRemappedRows(
    dev: Device,
    corr: *mut c_uint,
    unc: *mut c_uint,
    pending: *mut c_uint,
    failure: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetRemappedRows", dev, |_, t| {
        let r = supported(t.gpu()?.remapped_rows)?;
        // SAFETY: out-pointers (nvml.h).
        unsafe {
            put(corr, r.correctable)?;
            put(unc, r.uncorrectable)?;
            put(pending, r.raw_pending.unwrap_or(c_uint::from(r.pending)))?;
            put(failure, r.raw_failure.unwrap_or(c_uint::from(r.failure)))
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPages_v2(
    dev: Device,
    cause: c_uint,
    count: *mut c_uint,
    addresses: *mut c_ulonglong,
    _timestamps: *mut c_ulonglong,
) -> Ret {
    on_device("nvmlDeviceGetRetiredPages_v2", dev, |_, t| {
        let r = supported(t.gpu()?.retired_pages)?;
        let n = match cause {
            0 => r.single_bit,
            1 => r.double_bit,
            _ => return Err(INVALID_ARGUMENT),
        };
        if count.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: count points at the caller's buffer size (nvml.h).
        let room = unsafe { *count };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(count, n)? };
        // The addresses themselves are not modelled: only the count.
        if n > room || (n > 0 && addresses.is_null()) {
            return Err(INSUFFICIENT_SIZE);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetRetiredPagesPendingStatus(
    dev: Device,
    p: *mut c_uint,
) -> Ret {
    uint_of("nvmlDeviceGetRetiredPagesPendingStatus", dev, p, |g| {
        g.retired_pages.map(|r| c_uint::from(r.pending))
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkGeneration(dev: Device, v: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetCurrPcieLinkGeneration", dev, v, |g| {
        g.pcie_link.map(|l| l.generation)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkGeneration(dev: Device, v: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetMaxPcieLinkGeneration", dev, v, |g| {
        g.pcie_link.and_then(|l| l.generation_max)
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuMaxPcieLinkGeneration(dev: Device, v: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetGpuMaxPcieLinkGeneration", dev, v, |g| {
        g.pcie_link.map(|l| l.gpu_generation_max)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCurrPcieLinkWidth(dev: Device, v: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetCurrPcieLinkWidth", dev, v, |g| {
        g.pcie_link.map(|l| l.width)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxPcieLinkWidth(dev: Device, v: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetMaxPcieLinkWidth", dev, v, |g| {
        g.pcie_link.map(|l| l.width_max)
    })
}

/// Link `link` of the GPU's NVLinks, or the error a bad index gets.
fn nvlink_of(g: &Gpu, link: c_uint) -> Result<&scenario::Nvlink, Ret> {
    let n = supported(g.nvlink.as_ref())?;
    if link >= n.links {
        return Err(INVALID_ARGUMENT);
    }
    Ok(n)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    dev: Device,
    link: c_uint,
    up: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetNvLinkState", dev, |_, t| {
        let n = nvlink_of(t.gpu()?, link)?;
        let down = n.down.iter().flatten().any(|&l| l == link);
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(up, c_uint::from(!down)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkErrorCounter(
    dev: Device,
    link: c_uint,
    counter: c_uint,
    v: *mut c_ulonglong,
) -> Ret {
    on_device("nvmlDeviceGetNvLinkErrorCounter", dev, |_, t| {
        let n = nvlink_of(t.gpu()?, link)?;
        // DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA to the
        // scenario's order (CRC flit, CRC data, replay, recovery).
        let k = match counter {
            0 => 2,
            1 => 3,
            2 => 0,
            3 => 1,
            _ => return Err(INVALID_ARGUMENT),
        };
        let errors = supported(n.errors.as_ref())?;
        let count = errors.get(link as usize).and_then(|l| l.get(k)).copied();
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(v, count.unwrap_or(0)) }
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNumFans(dev: Device, n: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetNumFans", dev, n, |g| {
        g.fans.as_ref().map(|f| f.len() as c_uint)
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFanSpeed_v2(
    dev: Device,
    fan: c_uint,
    pc: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetFanSpeed_v2", dev, |_, t| {
        let fans = supported(t.gpu()?.fans.as_ref())?;
        let v = *fans.get(fan as usize).ok_or(INVALID_ARGUMENT)?;
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(pc, v) }
    })
}

/// A media engine's utilization and a sampling period.
fn media_of(
    call: &str,
    dev: Device,
    util: *mut c_uint,
    period: *mut c_uint,
    read: impl FnOnce(scenario::Media) -> Option<u32>,
) -> Ret {
    on_device(call, dev, |_, t| {
        let v = supported(t.gpu()?.media.and_then(read))?;
        // SAFETY: out-pointers (nvml.h).
        unsafe {
            put(util, v)?;
            put(period, 167_000)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEncoderUtilization(
    dev: Device,
    util: *mut c_uint,
    period: *mut c_uint,
) -> Ret {
    media_of("nvmlDeviceGetEncoderUtilization", dev, util, period, |m| {
        Some(m.encoder)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDecoderUtilization(
    dev: Device,
    util: *mut c_uint,
    period: *mut c_uint,
) -> Ret {
    media_of("nvmlDeviceGetDecoderUtilization", dev, util, period, |m| {
        Some(m.decoder)
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetJpgUtilization(
    dev: Device,
    util: *mut c_uint,
    period: *mut c_uint,
) -> Ret {
    media_of("nvmlDeviceGetJpgUtilization", dev, util, period, |m| m.jpeg)
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetOfaUtilization(
    dev: Device,
    util: *mut c_uint,
    period: *mut c_uint,
) -> Ret {
    media_of("nvmlDeviceGetOfaUtilization", dev, util, period, |m| m.ofa)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPerformanceState(dev: Device, p: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetPerformanceState", dev, p, |g| g.pstate)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPersistenceMode(dev: Device, p: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetPersistenceMode", dev, p, |g| {
        g.persistence.map(c_uint::from)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeMode(dev: Device, p: *mut c_uint) -> Ret {
    uint_of("nvmlDeviceGetComputeMode", dev, p, |g| g.compute_mode)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetVbiosVersion(
    dev: Device,
    buf: *mut c_char,
    len: c_uint,
) -> Ret {
    on_device("nvmlDeviceGetVbiosVersion", dev, |_, t| {
        let v = supported(t.gpu()?.vbios.as_deref())?;
        // SAFETY: buf holds len bytes (nvml.h).
        unsafe { put_str(buf, len, v) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetInforomImageVersion(
    dev: Device,
    buf: *mut c_char,
    len: c_uint,
) -> Ret {
    on_device("nvmlDeviceGetInforomImageVersion", dev, |_, t| {
        let v = supported(t.gpu()?.inforom.as_deref())?;
        // SAFETY: buf holds len bytes (nvml.h).
        unsafe { put_str(buf, len, v) }
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    dev: Device,
    policy: c_uint,
    out: *mut ViolationTime,
) -> Ret {
    on_device("nvmlDeviceGetViolationStatus", dev, |_, t| {
        let v = t.gpu()?.violation_ns;
        let ns = match policy {
            0 => v.and_then(|v| v.power),
            1 => v.and_then(|v| v.thermal),
            2 => v.and_then(|v| v.sync_boost),
            3..=5 | 10 | 11 => None,
            _ => return Err(INVALID_ARGUMENT),
        };
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let out_v = ViolationTime {
            reference_time: now_us,
            violation_time: supported(ns)?,
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(out, out_v) }
    })
}

/// A GPU's NVLink errors of kind `k` (CRC flit, CRC data, replay,
/// recovery), summed over links, when the GPU is of NVLink generation
/// `nvlink5` (or not).
fn nvlink_sum(g: &Gpu, k: usize, nvlink5: bool) -> Result<u64, Ret> {
    let n = supported(g.nvlink.as_ref())?;
    if n.nvlink5.unwrap_or(false) != nvlink5 {
        return Err(NOT_SUPPORTED);
    }
    Ok(n.errors
        .iter()
        .flatten()
        .map(|l| l.get(k).copied().unwrap_or(0))
        .sum())
}

/// One field's outcome: its value type and raw union bytes.
fn field_value(g: &Gpu, field_id: c_uint, scope_id: c_uint) -> Result<(c_uint, [u8; 8]), Ret> {
    let ull = |v: u64| (VALUE_TYPE_UNSIGNED_LONG_LONG, v.to_ne_bytes());
    let uint = |v: u32| {
        let mut b = [0; 8];
        b[..4].copy_from_slice(&v.to_ne_bytes());
        (VALUE_TYPE_UNSIGNED_INT, b)
    };
    match field_id {
        FI_DEV_MEMORY_TEMP => Ok(uint(supported(g.memory_temperature)?)),
        // NVLink error totals (CRC flit, CRC data, replay, recovery).
        38 => Ok(ull(nvlink_sum(g, 0, false)?)),
        45 => Ok(ull(nvlink_sum(g, 1, false)?)),
        52 => Ok(ull(nvlink_sum(g, 2, false)?)),
        59 => Ok(ull(nvlink_sum(g, 3, false)?)),
        // NVLink 5: received errors and link recoveries, all links.
        208 if scope_id == u32::MAX => Ok(ull(nvlink_sum(g, 1, true)?)),
        215 if scope_id == u32::MAX => Ok(ull(nvlink_sum(g, 3, true)?)),
        // NVLINK_LINK_COUNT.
        91 => Ok(uint(supported(g.nvlink.as_ref())?.links)),
        // GET_GPU_RECOVERY_ACTION.
        230 => Ok(uint(supported(g.recovery_action)?)),
        // Only the all-links sum is modelled.
        FI_DEV_NVLINK_THROUGHPUT_DATA_TX if scope_id == u32::MAX => {
            Ok(ull(supported(g.nvlink_kib)?.tx))
        }
        FI_DEV_NVLINK_THROUGHPUT_DATA_RX if scope_id == u32::MAX => {
            Ok(ull(supported(g.nvlink_kib)?.rx))
        }
        _ => Err(NOT_SUPPORTED),
    }
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    dev: Device,
    count: c_int,
    values: *mut FieldValue,
) -> Ret {
    on_device("nvmlDeviceGetFieldValues", dev, |_, t| {
        let g = t.gpu()?;
        let n = usize::try_from(count).map_err(|_| INVALID_ARGUMENT)?;
        if values.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        for i in 0..n {
            // SAFETY: the caller's array holds `count` entries (nvml.h).
            let v = unsafe { &mut *values.add(i) };
            v.timestamp = 0;
            v.latency_usec = 0;
            match field_value(g, v.field_id, v.scope_id) {
                Ok((value_type, value)) => {
                    v.value_type = value_type;
                    v.value = value;
                    v.nvml_return = SUCCESS;
                }
                Err(e) => v.nvml_return = e,
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    dev: Device,
    current: *mut c_uint,
    pending: *mut c_uint,
) -> Ret {
    on_device("nvmlDeviceGetMigMode", dev, |_, t| {
        let g = t.gpu()?;
        let mode = if g.mig.is_some() { 1 } else { 0 };
        // SAFETY: out-pointers (nvml.h).
        unsafe {
            put(current, mode)?;
            put(pending, mode)
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(dev: Device, n: *mut c_uint) -> Ret {
    on_device("nvmlDeviceGetMaxMigDeviceCount", dev, |_, t| {
        let g = t.gpu()?;
        let slots = if g.mig.is_some() {
            MIG_SLOTS as c_uint
        } else {
            0
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(n, slots) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    dev: Device,
    index: c_uint,
    mig: *mut Device,
) -> Ret {
    on_device("nvmlDeviceGetMigDeviceHandleByIndex", dev, |gi, t| {
        let instances = supported(t.gpu()?.mig.as_ref())?;
        let i = index as usize;
        if i >= MIG_SLOTS {
            return Err(INVALID_ARGUMENT);
        }
        if i >= instances.len() {
            return Err(NOT_FOUND);
        }
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(mig, mig_handle(gi, i)) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(dev: Device, id: *mut c_uint) -> Ret {
    on_device("nvmlDeviceGetGpuInstanceId", dev, |_, t| match t {
        Target::Gpu(_) => Err(INVALID_ARGUMENT),
        // SAFETY: an out-pointer (nvml.h).
        Target::Mig(m) => unsafe { put(id, m.gpu_instance_id) },
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig: Device,
    dev: *mut Device,
) -> Ret {
    on_device(
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        mig,
        |gi, t| match t {
            Target::Gpu(_) => Err(INVALID_ARGUMENT),
            // SAFETY: an out-pointer (nvml.h).
            Target::Mig(_) => unsafe { put(dev, gpu_handle(gi)) },
        },
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut EventSet) -> Ret {
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    let id = f.next_set;
    // SAFETY: an out-pointer (nvml.h).
    if let Err(e) = unsafe { put(set, std::ptr::without_provenance_mut(id)) } {
        return e;
    }
    f.next_set += 1;
    f.sets.insert(id, VecDeque::new());
    SUCCESS
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    dev: Device,
    types: *mut c_ulonglong,
) -> Ret {
    on_device("nvmlDeviceGetSupportedEventTypes", dev, |_, t| {
        if t.gpu()?.events == Some(false) {
            return Err(NOT_SUPPORTED);
        }
        // Single/double-bit ECC, PState, Xid, clock change.
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(types, 0x1 | 0x2 | 0x4 | XID_CRITICAL_ERROR | 0x10) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceRegisterEvents(dev: Device, types: c_ulonglong, set: EventSet) -> Ret {
    let mut queued = Vec::new();
    let r = on_device("nvmlDeviceRegisterEvents", dev, |gi, t| {
        let g = t.gpu()?;
        if g.events == Some(false) {
            return Err(NOT_SUPPORTED);
        }
        if types & XID_CRITICAL_ERROR != 0 {
            queued.extend(g.xids.iter().flatten().map(|&x| (gi, x)));
        }
        Ok(())
    });
    if r != SUCCESS {
        return r;
    }
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    match f.sets.get_mut(&set.addr()) {
        Some(q) => {
            q.extend(queued);
            SUCCESS
        }
        None => INVALID_ARGUMENT,
    }
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: EventSet,
    data: *mut EventData,
    timeout_ms: c_uint,
) -> Ret {
    {
        let mut state = lock();
        let Some(f) = state.as_mut() else {
            return UNINITIALIZED;
        };
        let due: Vec<bool> = (0..f.scenario.gpus.len())
            .map(|gi| f.xids_due(gi))
            .collect();
        let Some(q) = f.sets.get_mut(&set.addr()) else {
            return INVALID_ARGUMENT;
        };
        let next = q.iter().position(|&(gi, _)| due.get(gi) == Some(&true));
        if let Some((gi, xid)) = next.and_then(|i| q.remove(i)) {
            let event = EventData {
                device: gpu_handle(gi),
                event_type: XID_CRITICAL_ERROR,
                event_data: xid,
                gpu_instance_id: 0xFFFF_FFFF,
                compute_instance_id: 0xFFFF_FFFF,
            };
            // SAFETY: an out-pointer (nvml.h).
            return match unsafe { put(data, event) } {
                Ok(()) => SUCCESS,
                Err(e) => e,
            };
        }
    }
    std::thread::sleep(Duration::from_millis(timeout_ms.into()));
    TIMEOUT
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: EventSet) -> Ret {
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    match f.sets.remove(&set.addr()) {
        Some(_) => SUCCESS,
        None => INVALID_ARGUMENT,
    }
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(dev: Device, support: *mut GpmSupport) -> Ret {
    on_device("nvmlGpmQueryDeviceSupport", dev, |_, t| {
        if support.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: support points at the caller's struct (nvml.h).
        if unsafe { (*support).version } != 1 {
            return Err(ARGUMENT_VERSION_MISMATCH);
        }
        let g = t.gpu()?;
        let any_mig = g.mig.iter().flatten().any(|m| m.gpm.is_some());
        let out = GpmSupport {
            version: 1,
            is_supported_device: c_uint::from(g.gpm.is_some() || any_mig),
        };
        // SAFETY: an out-pointer (nvml.h).
        unsafe { put(support, out) }
    })
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(sample: *mut *mut c_void) -> Ret {
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    let id = f.next_sample;
    // SAFETY: an out-pointer (nvml.h).
    if let Err(e) = unsafe { put(sample, std::ptr::without_provenance_mut(id)) } {
        return e;
    }
    f.next_sample += 1;
    f.samples.insert(id, None);
    SUCCESS
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleFree(sample: *mut c_void) -> Ret {
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    match f.samples.remove(&sample.addr()) {
        Some(_) => SUCCESS,
        None => INVALID_ARGUMENT,
    }
}

/// Records that `sample` now holds a sample of `of`.
fn record_sample(sample: *mut c_void, of: (usize, Option<usize>)) -> Ret {
    let mut state = lock();
    let Some(f) = state.as_mut() else {
        return UNINITIALIZED;
    };
    match f.samples.get_mut(&sample.addr()) {
        Some(slot) => {
            *slot = Some(of);
            SUCCESS
        }
        None => INVALID_ARGUMENT,
    }
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmSampleGet(dev: Device, sample: *mut c_void) -> Ret {
    let mut of = None;
    let r = on_device("nvmlGpmSampleGet", dev, |gi, t| {
        supported(t.gpu()?.gpm.as_ref())?;
        of = Some((gi, None));
        Ok(())
    });
    match of {
        Some(of) if r == SUCCESS => record_sample(sample, of),
        _ => r,
    }
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub extern "C" fn nvmlGpmMigSampleGet(
    dev: Device,
    gpu_instance_id: c_uint,
    sample: *mut c_void,
) -> Ret {
    let mut of = None;
    let r = on_device("nvmlGpmMigSampleGet", dev, |gi, t| {
        let instances = supported(t.gpu()?.mig.as_ref())?;
        let (mi, m) = instances
            .iter()
            .enumerate()
            .find(|(_, m)| m.gpu_instance_id == gpu_instance_id)
            .ok_or(NOT_FOUND)?;
        supported(m.gpm.as_ref())?;
        of = Some((gi, Some(mi)));
        Ok(())
    });
    match of {
        Some(of) if r == SUCCESS => record_sample(sample, of),
        _ => r,
    }
}

#[cfg(not(feature = "old-driver"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpmMetricsGet(query: *mut GpmMetricsGet) -> Ret {
    if query.is_null() {
        return INVALID_ARGUMENT;
    }
    let state = lock();
    let Some(f) = state.as_ref() else {
        return UNINITIALIZED;
    };
    // SAFETY: query points at the caller's struct (nvml.h).
    let (version, n, s1, s2) = unsafe {
        let q = &*query;
        (q.version, q.num_metrics, q.sample1, q.sample2)
    };
    if version != 1 {
        return ARGUMENT_VERSION_MISMATCH;
    }
    let (Some(Some(a)), Some(Some(b))) = (f.samples.get(&s1.addr()), f.samples.get(&s2.addr()))
    else {
        return INVALID_ARGUMENT;
    };
    if a != b || s1 == s2 {
        return INVALID_ARGUMENT;
    }
    let (gi, mi) = *a;
    if f.lost(gi) {
        return GPU_IS_LOST;
    }
    let Some(g) = f.scenario.gpus.get(gi) else {
        return INVALID_ARGUMENT;
    };
    let gpm = match mi {
        None => g.gpm.as_ref(),
        Some(mi) => g.mig.as_ref().and_then(|m| m.get(mi)?.gpm.as_ref()),
    };
    let Some(gpm) = gpm else {
        return NOT_SUPPORTED;
    };
    for i in 0..n as usize {
        // SAFETY: the caller's array holds num_metrics entries (nvml.h).
        let m = unsafe {
            &mut *std::ptr::addr_of_mut!((*query).metrics)
                .cast::<GpmMetric>()
                .add(i)
        };
        let value = match m.metric_id {
            2 => Some(gpm.sm_active),
            3 => Some(gpm.sm_occupancy),
            10 => Some(gpm.dram_active),
            5 => gpm.tensor,
            11 => gpm.fp64,
            12 => gpm.fp32,
            13 => gpm.fp16,
            20 => gpm.pcie_tx_mibps,
            21 => gpm.pcie_rx_mibps,
            _ => None,
        };
        let value = value.or_else(|| by_field(gpm, m.metric_id));
        m.nvml_return = if value.is_some() {
            SUCCESS
        } else {
            NOT_SUPPORTED
        };
        m.value = value.unwrap_or(0.0);
    }
    SUCCESS
}

use model::dcgm::prof;

/// GPM metric `id` from the scenario's `fields`, by the profiling field
/// the exporter's table says it gives.
fn by_field(gpm: &scenario::Gpm, id: c_uint) -> Option<f64> {
    let row = prof::PROF.iter().find(|p| p.gpm == id)?;
    gpm.fields.as_ref()?.get(row.field).copied()
}

// ---- Failure scripts (issue 11): a hung first init, counters that reset,
// MIG compute instances.

/// Sleeps once per process, before the first init answers, if the
/// scenario says `init_hang_ms`.
fn hang_first_init() {
    use std::sync::atomic::{AtomicBool, Ordering};
    static HUNG: AtomicBool = AtomicBool::new(false);
    if HUNG.swap(true, Ordering::SeqCst) {
        return;
    }
    if let Ok(Scenario {
        init_hang_ms: Some(ms),
        ..
    }) = load_scenario()
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

impl Fake {
    /// Whether GPU `gi`'s Xid events may be handed out yet.
    fn xids_due(&self, gi: usize) -> bool {
        self.scenario
            .gpus
            .get(gi)
            .and_then(|g| g.xids_after_collections)
            .is_none_or(|n| self.collections > n)
    }

    /// Whether GPU `gi`'s counters have been reset.
    fn reset(&self, gi: usize) -> bool {
        self.scenario
            .gpus
            .get(gi)
            .and_then(|g| g.reset_after_collections)
            .is_some_and(|n| self.collections > n)
    }
}

impl Gpu {
    /// This GPU after a reset: every counter back at 0.
    fn with_counters_reset(&self) -> Gpu {
        let zero = |v: Option<u64>| v.map(|_| 0);
        Gpu {
            energy_mj: zero(self.energy_mj),
            ecc_corrected: zero(self.ecc_corrected),
            ecc_uncorrected: zero(self.ecc_uncorrected),
            pcie_replay: self.pcie_replay.map(|_| 0),
            violation_ns: self.violation_ns.map(|v| scenario::Violations {
                power: zero(v.power),
                thermal: zero(v.thermal),
                sync_boost: zero(v.sync_boost),
            }),
            ..self.clone()
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(dev: Device, id: *mut c_uint) -> Ret {
    on_device("nvmlDeviceGetComputeInstanceId", dev, |_, t| match t {
        Target::Gpu(_) => Err(INVALID_ARGUMENT),
        // SAFETY: an out-pointer (nvml.h).
        Target::Mig(m) => unsafe { put(id, m.compute_instance_id.unwrap_or(0)) },
    })
}

/// `nvmlProcessInfo_t` as the `_v3` process calls fill it (NVML 12).
#[repr(C)]
pub struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}
const _: () = assert!(size_of::<ProcessInfo>() == 24);

/// NVML_VALUE_NOT_AVAILABLE for an unsigned long long.
const VALUE_NOT_AVAILABLE: c_ulonglong = c_ulonglong::MAX;

fn running_processes(
    call: &str,
    dev: Device,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
    graphics: bool,
) -> Ret {
    on_device(call, dev, |_, t| {
        let (list, gi, ci) = match t {
            Target::Gpu(g) => (g.processes.as_deref(), !0, !0),
            Target::Mig(m) => (
                m.processes.as_deref(),
                m.gpu_instance_id,
                m.compute_instance_id.unwrap_or(0),
            ),
        };
        let wanted = |p: &&Process| match graphics {
            true => p.graphics.unwrap_or(false),
            false => p.compute.unwrap_or(true),
        };
        let list: Vec<&Process> = list.unwrap_or_default().iter().filter(wanted).collect();
        if count.is_null() {
            return Err(INVALID_ARGUMENT);
        }
        // SAFETY: count is the caller's in/out count (nvml.h).
        let room = unsafe { *count } as usize;
        // SAFETY: as above.
        unsafe { put(count, list.len() as c_uint)? };
        if room < list.len() {
            return Err(INSUFFICIENT_SIZE);
        }
        for (i, p) in list.iter().enumerate() {
            let info = ProcessInfo {
                pid: p.pid,
                used_gpu_memory: p.used_bytes.unwrap_or(VALUE_NOT_AVAILABLE),
                gpu_instance_id: gi,
                compute_instance_id: ci,
            };
            // SAFETY: infos holds `room` entries (nvml.h); i < room.
            unsafe { put(infos.add(i), info)? };
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    dev: Device,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    running_processes(
        "nvmlDeviceGetComputeRunningProcesses_v3",
        dev,
        count,
        infos,
        false,
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    dev: Device,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> Ret {
    running_processes(
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        dev,
        count,
        infos,
        true,
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(dev: Device, minor: *mut c_uint) -> Ret {
    on_device("nvmlDeviceGetMinorNumber", dev, |gi, t| match t {
        Target::Gpu(g) => {
            let m = g.minor.unwrap_or(gi as u32);
            // SAFETY: an out-pointer (nvml.h).
            unsafe { put(minor, m) }
        }
        Target::Mig(_) => Err(NOT_SUPPORTED),
    })
}
