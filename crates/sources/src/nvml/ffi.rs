//! NVML's unsafe code (the only other unsafe lines claim systemd's sockets,
//! in app/listen.rs, and ask a socket's unread bytes, in http/unread.rs):
//! NVML loaded with `dlopen` at run
//! time (never linked at build time, so the binary runs on machines
//! without a driver), each symbol resolved on its own, and safe wrappers.
//!
//! A symbol the library lacks (older drivers) is `None` in the table, and
//! calling it answers [`Error::FUNCTION_NOT_FOUND`], which the source
//! treats like NOT_SUPPORTED.
//!
//! Soundness rests on: the C signatures below matching nvml.h; a
//! [`Device`] borrowing the [`Library`] it came from, so handles never
//! outlive `nvmlShutdown`/`dlclose` nor reach another library instance;
//! and NVML being safe to call from several threads at once (nvml.h).

use std::ffi::{CStr, CString, c_char, c_int, c_longlong, c_uint, c_ulong, c_ulonglong, c_void};
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

const RTLD_NOW: c_int = 2;

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
    fn dlclose(handle: *mut c_void) -> c_int;
}

type Ret = c_uint;
type RawDevice = *mut c_void;
type RawEventSet = *mut c_void;
type RawGpmSample = *mut c_void;

/// An `nvmlReturn_t` other than SUCCESS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error(pub u32);

impl Error {
    pub const INVALID_ARGUMENT: Error = Error(2);
    pub const NOT_SUPPORTED: Error = Error(3);
    pub const INSUFFICIENT_SIZE: Error = Error(7);
    pub const TIMEOUT: Error = Error(10);
    /// Also what a symbol missing from the library answers.
    pub const FUNCTION_NOT_FOUND: Error = Error(13);
    pub const GPU_IS_LOST: Error = Error(15);
    pub const ARGUMENT_VERSION_MISMATCH: Error = Error(25);
    pub const UNKNOWN: Error = Error(999);

    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "UNINITIALIZED",
            2 => "INVALID_ARGUMENT",
            3 => "NOT_SUPPORTED",
            4 => "NO_PERMISSION",
            5 => "ALREADY_INITIALIZED",
            6 => "NOT_FOUND",
            7 => "INSUFFICIENT_SIZE",
            8 => "INSUFFICIENT_POWER",
            9 => "DRIVER_NOT_LOADED",
            10 => "TIMEOUT",
            11 => "IRQ_ISSUE",
            12 => "LIBRARY_NOT_FOUND",
            13 => "FUNCTION_NOT_FOUND",
            14 => "CORRUPTED_INFOROM",
            15 => "GPU_IS_LOST",
            16 => "RESET_REQUIRED",
            17 => "OPERATING_SYSTEM",
            18 => "LIB_RM_VERSION_MISMATCH",
            19 => "IN_USE",
            20 => "MEMORY",
            21 => "NO_DATA",
            22 => "VGPU_ECC_NOT_SUPPORTED",
            23 => "INSUFFICIENT_RESOURCES",
            24 => "FREQ_NOT_SUPPORTED",
            25 => "ARGUMENT_VERSION_MISMATCH",
            26 => "DEPRECATED",
            27 => "NOT_READY",
            _ => "UNKNOWN",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NVML_ERROR_{} ({})", self.name(), self.0)
    }
}

fn check(r: Ret) -> Result<(), Error> {
    if r == 0 { Ok(()) } else { Err(Error(r)) }
}

fn present<F>(f: Option<F>) -> Result<F, Error> {
    f.ok_or(Error::FUNCTION_NOT_FOUND)
}

/// The text up to the first NUL of a buffer NVML filled.
fn c_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

// nvml.h structs.

#[repr(C)]
struct PciInfo {
    bus_id_legacy: [u8; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [u8; 32],
}

#[repr(C)]
#[derive(Default)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

#[repr(C)]
#[derive(Default)]
struct MemoryV1 {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

#[repr(C)]
#[derive(Default)]
struct MemoryV2 {
    version: c_uint,
    total: c_ulonglong,
    reserved: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlMemory_v2`: its size with the version in the top byte.
const MEMORY_V2: c_uint = (size_of::<MemoryV2>() as c_uint) | (2 << 24);

#[repr(C)]
struct EventData {
    device: RawDevice,
    event_type: c_ulonglong,
    event_data: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

#[repr(C)]
struct GpmSupport {
    version: c_uint,
    is_supported_device: c_uint,
}
const GPM_SUPPORT_VERSION: c_uint = 1;

#[repr(C)]
#[derive(Clone, Copy)]
struct GpmMetric {
    metric_id: c_uint,
    nvml_return: Ret,
    value: f64,
    short_name: *mut c_char,
    long_name: *mut c_char,
    unit: *mut c_char,
}

/// nvml.h sizes `metrics` by NVML_GPM_METRIC_MAX, which grows between
/// releases (98, 210, 333, ...). Only `numMetrics` entries are used, but
/// the buffer is made larger than any release so far in case a driver
/// touches the whole array of its own size.
const GPM_METRIC_CAPACITY: usize = 1024;

#[repr(C)]
struct GpmMetricsGet {
    version: c_uint,
    num_metrics: c_uint,
    sample1: RawGpmSample,
    sample2: RawGpmSample,
    metrics: [GpmMetric; GPM_METRIC_CAPACITY],
}
const GPM_METRICS_GET_VERSION: c_uint = 1;

/// `nvmlViolationTime_t`: `referenceTime` is a CPU timestamp in µs,
/// `violationTime` the cumulative time in ns (nvml.h, NVIDIA/go-nvml
/// gen/nvml/nvml.h, NVML 12.2.140).
#[repr(C)]
#[derive(Default)]
struct ViolationTime {
    reference_time: c_ulonglong,
    violation_time: c_ulonglong,
}

/// `nvmlFieldValue_t` (same header): fieldId, scopeId (`unused` in older
/// headers, same place), timestamp and latencyUsec (long long), valueType,
/// the per-field nvmlReturn, then the 8-byte `nvmlValue_t` union, kept
/// here as its raw bytes and decoded by `valueType`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FieldValue {
    field_id: c_uint,
    scope_id: c_uint,
    timestamp: c_longlong,
    latency_usec: c_longlong,
    value_type: c_uint,
    nvml_return: Ret,
    value: c_ulonglong,
}

/// `nvmlProcessInfo_t` of NVML 12, which the `_v3` process calls fill:
/// pid, usedGpuMemory (NVML_VALUE_NOT_AVAILABLE where unknown), and the
/// GPU and compute instance (0xFFFFFFFF outside MIG).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

/// NVML_VALUE_NOT_AVAILABLE for an unsigned long long.
const VALUE_NOT_AVAILABLE: c_ulonglong = c_ulonglong::MAX;

/// Processes asked for at most: past this the call is refused rather
/// than the buffer grown (a GPU runs a few dozen at most).
const MAX_PROCESSES: usize = 4096;

const _: () = assert!(size_of::<ProcessInfo>() == 24);
const _: () = assert!(size_of::<ViolationTime>() == 16);
const _: () = assert!(size_of::<FieldValue>() == 40);
const _: () = assert!(std::mem::offset_of!(FieldValue, value_type) == 24);
const _: () = assert!(std::mem::offset_of!(FieldValue, value) == 32);
const _: () = assert!(size_of::<GpmMetric>() == 40);
const _: () = assert!(std::mem::offset_of!(GpmMetricsGet, metrics) == 24);
const _: () = assert!(size_of::<PciInfo>() == 68);
const _: () = assert!(MEMORY_V2 == 0x0200_0028);
const _: () = assert!(size_of::<EventData>() == 32);

/// v2 sizes for names and UUIDs; older headers used 64 and 80.
const STRING_BUFFER: usize = 96;
const DRIVER_VERSION_BUFFER: usize = 80;
const INIT_FLAG_NO_GPUS: c_uint = 1;

/// The function table: every symbol resolved on its own, `None` when the
/// library lacks it.
macro_rules! functions {
    ($($field:ident = $sym:literal fn($($arg:ty),*);)*) => {
        struct Functions {
            $($field: Option<unsafe extern "C" fn($($arg),*) -> Ret>,)*
        }

        /// Every NVML symbol the exporter resolves.
        pub const SYMBOLS: &[&str] = &[$($sym),*];

        impl Functions {
            /// The symbols the library lacks.
            fn missing(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$field.is_none() {
                    out.push($sym);
                })*
                out
            }

            /// # Safety
            /// `handle` is a live `dlopen` handle of an NVML library, and
            /// stays open while the table is used.
            unsafe fn resolve(handle: *mut c_void) -> Functions {
                Functions {
                    $($field: {
                        // SAFETY: handle is live (the caller's promise) and
                        // the name is NUL-terminated.
                        let p = unsafe { dlsym(handle, concat!($sym, "\0").as_ptr().cast()) };
                        if p.is_null() {
                            None
                        } else {
                            // SAFETY: the symbol is NVML's function of this
                            // name, whose C signature nvml.h declares as
                            // written in the table.
                            Some(unsafe {
                                std::mem::transmute::<
                                    *mut c_void,
                                    unsafe extern "C" fn($($arg),*) -> Ret,
                                >(p)
                            })
                        }
                    },)*
                }
            }
        }
    };
}

functions! {
    init_with_flags = "nvmlInitWithFlags" fn(c_uint);
    init_v2 = "nvmlInit_v2" fn();
    shutdown = "nvmlShutdown" fn();
    driver_version = "nvmlSystemGetDriverVersion" fn(*mut c_char, c_uint);
    count = "nvmlDeviceGetCount_v2" fn(*mut c_uint);
    handle_by_index = "nvmlDeviceGetHandleByIndex_v2" fn(c_uint, *mut RawDevice);
    name = "nvmlDeviceGetName" fn(RawDevice, *mut c_char, c_uint);
    uuid = "nvmlDeviceGetUUID" fn(RawDevice, *mut c_char, c_uint);
    pci_info = "nvmlDeviceGetPciInfo_v3" fn(RawDevice, *mut PciInfo);
    temperature = "nvmlDeviceGetTemperature" fn(RawDevice, c_uint, *mut c_uint);
    clock = "nvmlDeviceGetClockInfo" fn(RawDevice, c_uint, *mut c_uint);
    max_clock = "nvmlDeviceGetMaxClockInfo" fn(RawDevice, c_uint, *mut c_uint);
    event_reasons = "nvmlDeviceGetCurrentClocksEventReasons" fn(RawDevice, *mut c_ulonglong);
    throttle_reasons = "nvmlDeviceGetCurrentClocksThrottleReasons" fn(RawDevice, *mut c_ulonglong);
    power_usage = "nvmlDeviceGetPowerUsage" fn(RawDevice, *mut c_uint);
    power_limit = "nvmlDeviceGetEnforcedPowerLimit" fn(RawDevice, *mut c_uint);
    energy = "nvmlDeviceGetTotalEnergyConsumption" fn(RawDevice, *mut c_ulonglong);
    utilization = "nvmlDeviceGetUtilizationRates" fn(RawDevice, *mut Utilization);
    memory_v2 = "nvmlDeviceGetMemoryInfo_v2" fn(RawDevice, *mut MemoryV2);
    memory_v1 = "nvmlDeviceGetMemoryInfo" fn(RawDevice, *mut MemoryV1);
    ecc_total = "nvmlDeviceGetTotalEccErrors" fn(RawDevice, c_uint, c_uint, *mut c_ulonglong);
    pcie_throughput = "nvmlDeviceGetPcieThroughput" fn(RawDevice, c_uint, *mut c_uint);
    pcie_replay = "nvmlDeviceGetPcieReplayCounter" fn(RawDevice, *mut c_uint);
    mig_mode = "nvmlDeviceGetMigMode" fn(RawDevice, *mut c_uint, *mut c_uint);
    max_mig = "nvmlDeviceGetMaxMigDeviceCount" fn(RawDevice, *mut c_uint);
    mig_by_index = "nvmlDeviceGetMigDeviceHandleByIndex" fn(RawDevice, c_uint, *mut RawDevice);
    gpu_instance_id = "nvmlDeviceGetGpuInstanceId" fn(RawDevice, *mut c_uint);
    compute_instance_id = "nvmlDeviceGetComputeInstanceId" fn(RawDevice, *mut c_uint);
    event_types = "nvmlDeviceGetSupportedEventTypes" fn(RawDevice, *mut c_ulonglong);
    event_set_create = "nvmlEventSetCreate" fn(*mut RawEventSet);
    register_events = "nvmlDeviceRegisterEvents" fn(RawDevice, c_ulonglong, RawEventSet);
    event_wait = "nvmlEventSetWait_v2" fn(RawEventSet, *mut EventData, c_uint);
    event_set_free = "nvmlEventSetFree" fn(RawEventSet);
    gpm_query_support = "nvmlGpmQueryDeviceSupport" fn(RawDevice, *mut GpmSupport);
    gpm_sample_alloc = "nvmlGpmSampleAlloc" fn(*mut RawGpmSample);
    gpm_sample_free = "nvmlGpmSampleFree" fn(RawGpmSample);
    gpm_sample_get = "nvmlGpmSampleGet" fn(RawDevice, RawGpmSample);
    gpm_mig_sample_get = "nvmlGpmMigSampleGet" fn(RawDevice, c_uint, RawGpmSample);
    gpm_metrics_get = "nvmlGpmMetricsGet" fn(*mut GpmMetricsGet);
    violation_status = "nvmlDeviceGetViolationStatus" fn(RawDevice, c_uint, *mut ViolationTime);
    field_values = "nvmlDeviceGetFieldValues" fn(RawDevice, c_int, *mut FieldValue);
    temperature_threshold = "nvmlDeviceGetTemperatureThreshold" fn(RawDevice, c_uint, *mut c_uint);
    remapped_rows = "nvmlDeviceGetRemappedRows" fn(RawDevice, *mut c_uint, *mut c_uint, *mut c_uint, *mut c_uint);
    retired_pages = "nvmlDeviceGetRetiredPages_v2" fn(RawDevice, c_uint, *mut c_uint, *mut c_ulonglong, *mut c_ulonglong);
    retired_pending = "nvmlDeviceGetRetiredPagesPendingStatus" fn(RawDevice, *mut c_uint);
    pcie_gen = "nvmlDeviceGetCurrPcieLinkGeneration" fn(RawDevice, *mut c_uint);
    pcie_gen_max = "nvmlDeviceGetMaxPcieLinkGeneration" fn(RawDevice, *mut c_uint);
    pcie_gpu_gen_max = "nvmlDeviceGetGpuMaxPcieLinkGeneration" fn(RawDevice, *mut c_uint);
    pcie_width = "nvmlDeviceGetCurrPcieLinkWidth" fn(RawDevice, *mut c_uint);
    pcie_width_max = "nvmlDeviceGetMaxPcieLinkWidth" fn(RawDevice, *mut c_uint);
    nvlink_state = "nvmlDeviceGetNvLinkState" fn(RawDevice, c_uint, *mut c_uint);
    nvlink_error = "nvmlDeviceGetNvLinkErrorCounter" fn(RawDevice, c_uint, c_uint, *mut c_ulonglong);
    num_fans = "nvmlDeviceGetNumFans" fn(RawDevice, *mut c_uint);
    fan_speed = "nvmlDeviceGetFanSpeed_v2" fn(RawDevice, c_uint, *mut c_uint);
    encoder = "nvmlDeviceGetEncoderUtilization" fn(RawDevice, *mut c_uint, *mut c_uint);
    decoder = "nvmlDeviceGetDecoderUtilization" fn(RawDevice, *mut c_uint, *mut c_uint);
    jpg = "nvmlDeviceGetJpgUtilization" fn(RawDevice, *mut c_uint, *mut c_uint);
    ofa = "nvmlDeviceGetOfaUtilization" fn(RawDevice, *mut c_uint, *mut c_uint);
    pstate = "nvmlDeviceGetPerformanceState" fn(RawDevice, *mut c_uint);
    persistence = "nvmlDeviceGetPersistenceMode" fn(RawDevice, *mut c_uint);
    compute_mode = "nvmlDeviceGetComputeMode" fn(RawDevice, *mut c_uint);
    vbios = "nvmlDeviceGetVbiosVersion" fn(RawDevice, *mut c_char, c_uint);
    inforom = "nvmlDeviceGetInforomImageVersion" fn(RawDevice, *mut c_char, c_uint);
    minor_number = "nvmlDeviceGetMinorNumber" fn(RawDevice, *mut c_uint);
    compute_processes = "nvmlDeviceGetComputeRunningProcesses_v3" fn(RawDevice, *mut c_uint, *mut ProcessInfo);
    graphics_processes = "nvmlDeviceGetGraphicsRunningProcesses_v3" fn(RawDevice, *mut c_uint, *mut ProcessInfo);
}

/// A `dlopen` handle, closed on drop.
struct Handle(*mut c_void);

impl Handle {
    fn open(path: &Path) -> Result<Handle, String> {
        let name = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| format!("{}: the path contains a NUL byte", path.display()))?;
        // SAFETY: name is NUL-terminated and outlives the call. Loading
        // runs the library's initialisers, which is what loading NVML means.
        let handle = unsafe { dlopen(name.as_ptr(), RTLD_NOW) };
        if handle.is_null() {
            return Err(last_dl_error());
        }
        Ok(Handle(handle))
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and nothing resolved from it
        // is used after this (Library drops its table with it).
        unsafe { dlclose(self.0) };
    }
}

fn last_dl_error() -> String {
    // SAFETY: dlerror takes no arguments and is per-thread in glibc.
    let e = unsafe { dlerror() };
    if e.is_null() {
        return "dlopen failed".into();
    }
    // SAFETY: a non-null dlerror result is a NUL-terminated string valid
    // until the next dl* call on this thread; it is copied at once.
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// The symbols of [`SYMBOLS`] the library at `path` lacks. It is loaded
/// to look, but NVML is not initialised.
pub fn missing_symbols(path: &Path) -> Result<Vec<&'static str>, String> {
    let handle = Handle::open(path)?;
    // SAFETY: the handle is live for as long as the table, which is only
    // read for which entries are null and dropped before the handle.
    let fns = unsafe { Functions::resolve(handle.0) };
    Ok(fns.missing())
}

const PR_SET_PDEATHSIG: c_int = 1;
const SIGKILL: c_ulong = 9;
/// ESRCH: what a child reports when its parent is already gone.
const ESRCH: i32 = 3;

unsafe extern "C" {
    fn prctl(option: c_int, ...) -> c_int;
    fn getppid() -> c_int;
    #[cfg(target_env = "gnu")]
    fn mallopt(param: c_int, value: c_int) -> c_int;
}

/// Has every child `cmd` starts receive SIGKILL when the thread that
/// started it ends (the poller's, which ends only with the process), so
/// a child never outlives the exporter, even one killed with SIGKILL.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec, where
    // only async-signal-safe calls are allowed: it makes two system calls
    // (prctl, getppid) and builds an io::Error from a number, allocating
    // nothing and taking no lock.
    unsafe {
        cmd.pre_exec(move || {
            // SAFETY: prctl(PR_SET_PDEATHSIG, sig) takes the signal as an
            // unsigned long, as passed; it touches no memory of ours.
            if prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl: then no signal comes.
            // SAFETY: getppid takes no arguments and cannot fail.
            if getppid() as u32 != parent {
                return Err(std::io::Error::from_raw_os_error(ESRCH));
            }
            Ok(())
        })
    };
}

/// glibc's `mallopt` parameter for the most malloc arenas.
#[cfg(target_env = "gnu")]
const M_ARENA_MAX: c_int = -8;

/// One malloc arena for every thread (glibc; musl has one anyway). Each
/// thread that allocates otherwise gets an arena of its own, and what it
/// frees no other thread reuses: 1.3 MiB more peak RSS at 64 GPUs under a
/// flood. The threads allocate little and seldom, so they hardly contend.
/// Called before the exporter's threads start, so that they share it.
pub fn one_malloc_arena() {
    // SAFETY: mallopt takes two ints and only sets a malloc parameter,
    // under malloc's own lock.
    #[cfg(target_env = "gnu")]
    unsafe {
        mallopt(M_ARENA_MAX, 1);
    }
}

/// Why [`Library::open`] failed.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenError {
    /// `dlopen` refused, with `dlerror`'s reason.
    Load(String),
    /// `nvmlInit*` failed (or the library has neither init symbol).
    Init(Error),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Load(e) => write!(f, "cannot load NVML: {e}"),
            OpenError::Init(e) => write!(f, "NVML init failed: {e}"),
        }
    }
}

/// A loaded and initialised NVML. Dropping it calls `nvmlShutdown`, then
/// `dlclose`.
pub struct Library {
    fns: Functions,
    // Declared last so it is dropped (dlclose) after everything else.
    _handle: Handle,
}

// SAFETY: NVML functions may be called from several threads at once
// (nvml.h: "NVML is thread-safe"); the table holds only function pointers
// and the handle is used only by Drop.
unsafe impl Send for Library {}
// SAFETY: as for Send; nothing in Library is mutated after open.
unsafe impl Sync for Library {}

impl Library {
    /// Loads the library at `path` (a bare name is searched for as dlopen
    /// does) and initialises NVML, without requiring any GPU to attach.
    pub fn open(path: &Path) -> Result<Library, OpenError> {
        let handle = Handle::open(path).map_err(OpenError::Load)?;
        // SAFETY: the handle is live, and the table is owned next to it by
        // Library, which closes the handle only after dropping the table.
        let fns = unsafe { Functions::resolve(handle.0) };
        let r = match (fns.init_with_flags, fns.init_v2) {
            // SAFETY: nvmlInitWithFlags(unsigned int) per nvml.h.
            (Some(init), _) => unsafe { init(INIT_FLAG_NO_GPUS) },
            // SAFETY: nvmlInit_v2(void) per nvml.h.
            (None, Some(init)) => unsafe { init() },
            (None, None) => return Err(OpenError::Init(Error::FUNCTION_NOT_FOUND)),
        };
        check(r).map_err(OpenError::Init)?;
        Ok(Library {
            fns,
            _handle: handle,
        })
    }

    pub fn driver_version(&self) -> Result<String, Error> {
        let f = present(self.fns.driver_version)?;
        let mut buf = [0u8; DRIVER_VERSION_BUFFER];
        // SAFETY: buf is writable for the length passed.
        check(unsafe { f(buf.as_mut_ptr().cast(), buf.len() as c_uint) })?;
        Ok(c_text(&buf))
    }

    pub fn device_count(&self) -> Result<u32, Error> {
        let f = present(self.fns.count)?;
        let mut n = 0;
        // SAFETY: n is a valid out-pointer for the call.
        check(unsafe { f(&mut n) })?;
        Ok(n)
    }

    pub fn device(&self, index: u32) -> Result<Device<'_>, Error> {
        let f = present(self.fns.handle_by_index)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: raw is a valid out-pointer for the call.
        check(unsafe { f(index, &mut raw) })?;
        Ok(Device { raw, lib: self })
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        if let Some(shutdown) = self.fns.shutdown {
            // SAFETY: balances the successful init in open; no Device or
            // EventSet outlives the Library (borrow / Arc).
            unsafe { shutdown() };
        }
    }
}

/// Memory as NVML counts it, in bytes. `reserved` is `None` when only the
/// v1 call exists (it counts reserved memory as used).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Memory {
    pub total: u64,
    pub reserved: Option<u64>,
    pub free: u64,
    pub used: u64,
}

pub const CLOCK_SM: u32 = 1;
pub const CLOCK_MEM: u32 = 2;

// `nvmlPerfPolicyType_t` (nvml.h, NVIDIA/go-nvml gen/nvml/nvml.h, NVML
// 12.2.140; the same values in pynvml): each "how long did <policy>
// cause the GPU to be below application clocks". BOARD_LIMIT = 3,
// LOW_UTILIZATION = 4, RELIABILITY = 5, TOTAL_APP_CLOCKS = 10 and
// TOTAL_BASE_CLOCKS = 11 have no counterpart among our reasons.
pub const PERF_POLICY_POWER: u32 = 0;
pub const PERF_POLICY_THERMAL: u32 = 1;
pub const PERF_POLICY_SYNC_BOOST: u32 = 2;

// Field ids (same header; "each ID is only used once and is guaranteed
// never to change").
/// `NVML_FI_DEV_MEMORY_TEMP`: "Memory temperature for the device", °C.
pub const FI_DEV_MEMORY_TEMP: u32 = 82;
/// `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`: "NVLink TX Data throughput in
/// KiB", payload only (140/141 add protocol overhead). Despite the name it
/// is a running total, not a rate: nvml.h gives only the unit, but users
/// of the field take the difference of two readings.
pub const FI_DEV_NVLINK_THROUGHPUT_DATA_TX: u32 = 138;
pub const FI_DEV_NVLINK_THROUGHPUT_DATA_RX: u32 = 139;
/// The scope id that sums NVLink throughput over all links (nvml.h: "A
/// scopeId of UINT_MAX returns aggregate value summed up across all
/// links").
pub const SCOPE_ALL_LINKS: u32 = u32::MAX;
/// `NVML_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL`:
/// each error counter summed over all links (NVLink 4 and earlier).
pub const FI_DEV_NVLINK_ERROR_TOTALS: [u32; 4] = [38, 45, 52, 59];
/// `NVML_FI_DEV_NVLINK_LINK_COUNT`: the links the GPU has.
pub const FI_DEV_NVLINK_LINK_COUNT: u32 = 91;
/// NVLink 5 (Blackwell), where the totals above are unsupported, counts
/// with `NVML_FI_DEV_NVLINK_COUNT_*` over all links: received packets with
/// errors (`RCV_ERRORS`) stand in for data CRC errors and link recovery
/// events (`LINK_RECOVERY_EVENTS`) for recoveries; NVLink 5 has no flit
/// CRC or replay counter of its own, so those stay absent.
pub const FI_DEV_NVLINK_COUNT_RCV_ERRORS: u32 = 208;
pub const FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS: u32 = 215;
/// `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`: `nvmlDeviceGpuRecoveryAction_t`,
/// 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset,
/// 5 recover IMEX domain (cuda-python's nvml.h; pynvml's list says 5 is a
/// bus reset: either way it is kept as the number it is).
pub const FI_DEV_GET_GPU_RECOVERY_ACTION: u32 = 230;
/// `NVML_TEMPERATURE_THRESHOLD_MEM_MAX`.
pub const TEMPERATURE_THRESHOLD_MEM_MAX: u32 = 2;
/// `nvmlNvLinkErrorCounter_t`, in [`model::Health::nvlink_errors`]
/// order: DL_CRC_FLIT, DL_CRC_DATA, DL_REPLAY, DL_RECOVERY.
pub const NVLINK_ERROR_COUNTERS: [u32; 4] = [2, 3, 0, 1];
/// `NVML_NVLINK_MAX_LINKS` in current headers.
pub const NVLINK_MAX_LINKS: u32 = 18;

/// A field value's `nvmlValue_t` read as `valueType` says (nvml.h
/// `nvmlValueType_t`), as f64. The union's members all start at its first
/// byte, hence the native-endian prefixes.
fn decode_value(value_type: u32, raw: u64) -> Result<f64, Error> {
    let b = raw.to_ne_bytes();
    let [b0, b1, b2, b3, ..] = b;
    Ok(match value_type {
        0 => f64::from_ne_bytes(b),
        1 => f64::from(u32::from_ne_bytes([b0, b1, b2, b3])),
        // unsigned long: 64 bits on the LP64 targets this builds for.
        2 | 3 => raw as f64,
        4 => i64::from_ne_bytes(b) as f64,
        5 => f64::from(i32::from_ne_bytes([b0, b1, b2, b3])),
        6 => f64::from(u16::from_ne_bytes([b0, b1])),
        _ => return Err(Error::UNKNOWN),
    })
}

/// What `nvmlDeviceGetRemappedRows` answers: the rows remapped for
/// correctable and uncorrectable errors, and whether a remap is pending
/// and one failed, `None` for a word that is neither 0 nor 1 (a broken
/// driver's 0xFFFFFFFF is no failed remap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remapped {
    pub rows: [u32; 2],
    pub pending: Option<bool>,
    pub failed: Option<bool>,
}

/// A GPU or MIG device handle, valid while its library is.
#[derive(Clone, Copy)]
pub struct Device<'a> {
    raw: RawDevice,
    lib: &'a Library,
}

impl<'a> Device<'a> {
    /// Identifies the device in [`Event::device`].
    pub fn id(&self) -> usize {
        self.raw.addr()
    }

    fn fns(&self) -> &'a Functions {
        &self.lib.fns
    }

    fn string(
        &self,
        f: Option<unsafe extern "C" fn(RawDevice, *mut c_char, c_uint) -> Ret>,
    ) -> Result<String, Error> {
        let f = present(f)?;
        let mut buf = [0u8; STRING_BUFFER];
        // SAFETY: a live handle of this library; buf is writable for the
        // length passed.
        check(unsafe { f(self.raw, buf.as_mut_ptr().cast(), buf.len() as c_uint) })?;
        Ok(c_text(&buf))
    }

    fn u32_of(
        &self,
        f: Option<unsafe extern "C" fn(RawDevice, *mut c_uint) -> Ret>,
    ) -> Result<u32, Error> {
        let f = present(f)?;
        let mut v = 0;
        // SAFETY: a live handle of this library and a valid out-pointer.
        check(unsafe { f(self.raw, &mut v) })?;
        Ok(v)
    }

    fn u64_of(
        &self,
        f: Option<unsafe extern "C" fn(RawDevice, *mut c_ulonglong) -> Ret>,
    ) -> Result<u64, Error> {
        let f = present(f)?;
        let mut v = 0;
        // SAFETY: a live handle of this library and a valid out-pointer.
        check(unsafe { f(self.raw, &mut v) })?;
        Ok(v)
    }

    fn u32_by(
        &self,
        f: Option<unsafe extern "C" fn(RawDevice, c_uint, *mut c_uint) -> Ret>,
        arg: u32,
    ) -> Result<u32, Error> {
        let f = present(f)?;
        let mut v = 0;
        // SAFETY: a live handle of this library, an enum value nvml.h
        // defines (callers pass constants), and a valid out-pointer.
        check(unsafe { f(self.raw, arg, &mut v) })?;
        Ok(v)
    }

    pub fn name(&self) -> Result<String, Error> {
        self.string(self.fns().name)
    }

    pub fn uuid(&self) -> Result<String, Error> {
        self.string(self.fns().uuid)
    }

    /// The PCI bus id as NVML spells it, e.g. `00000000:3B:00.0`.
    pub fn pci_bus_id(&self) -> Result<String, Error> {
        let f = present(self.fns().pci_info)?;
        let mut info = PciInfo {
            bus_id_legacy: [0; 16],
            domain: 0,
            bus: 0,
            device: 0,
            pci_device_id: 0,
            pci_sub_system_id: 0,
            bus_id: [0; 32],
        };
        // SAFETY: a live handle of this library; info is the v3 struct.
        check(unsafe { f(self.raw, &mut info) })?;
        Ok(c_text(&info.bus_id))
    }

    /// The GPU die temperature, °C.
    pub fn temperature(&self) -> Result<u32, Error> {
        self.u32_by(self.fns().temperature, 0)
    }

    /// The current clock of `kind` ([`CLOCK_SM`], [`CLOCK_MEM`]), MHz.
    pub fn clock(&self, kind: u32) -> Result<u32, Error> {
        self.u32_by(self.fns().clock, kind)
    }

    pub fn max_clock(&self, kind: u32) -> Result<u32, Error> {
        self.u32_by(self.fns().max_clock, kind)
    }

    /// The clock event reasons mask, from the older "throttle reasons"
    /// call when the driver predates the rename.
    pub fn clocks_event_reasons(&self) -> Result<u64, Error> {
        match self.u64_of(self.fns().event_reasons) {
            Err(Error::FUNCTION_NOT_FOUND) => self.u64_of(self.fns().throttle_reasons),
            r => r,
        }
    }

    /// Power draw, mW.
    pub fn power_usage(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().power_usage)
    }

    /// The enforced power limit, mW.
    pub fn power_limit(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().power_limit)
    }

    /// Energy since the driver loaded, mJ.
    pub fn total_energy(&self) -> Result<u64, Error> {
        self.u64_of(self.fns().energy)
    }

    /// GPU and memory utilisation over the last sample period, %: the
    /// time a kernel ran, and the time device memory was read or written.
    pub fn utilization(&self) -> Result<(u32, u32), Error> {
        let f = present(self.fns().utilization)?;
        let mut u = Utilization::default();
        // SAFETY: a live handle of this library and a valid out-pointer.
        check(unsafe { f(self.raw, &mut u) })?;
        Ok((u.gpu, u.memory))
    }

    /// `nvmlDeviceGetMemoryInfo_v2`, or v1 on drivers without it.
    pub fn memory(&self) -> Result<Memory, Error> {
        match self.memory_v2() {
            Err(Error::FUNCTION_NOT_FOUND | Error::ARGUMENT_VERSION_MISMATCH) => {}
            r => return r,
        }
        let f = present(self.fns().memory_v1)?;
        let mut m = MemoryV1::default();
        // SAFETY: a live handle of this library and a valid out-pointer.
        check(unsafe { f(self.raw, &mut m) })?;
        Ok(Memory {
            total: m.total,
            reserved: None,
            free: m.free,
            used: m.used,
        })
    }

    fn memory_v2(&self) -> Result<Memory, Error> {
        let f = present(self.fns().memory_v2)?;
        let mut m = MemoryV2 {
            version: MEMORY_V2,
            ..MemoryV2::default()
        };
        // SAFETY: a live handle of this library; m is the v2 struct with
        // its version set, as the call requires.
        check(unsafe { f(self.raw, &mut m) })?;
        Ok(Memory {
            total: m.total,
            reserved: Some(m.reserved),
            free: m.free,
            used: m.used,
        })
    }

    /// ECC error count: volatile (since the driver loaded), or lifetime
    /// (NVML's aggregate, kept in the InfoROM).
    pub fn ecc_total(&self, uncorrected: bool, lifetime: bool) -> Result<u64, Error> {
        let f = present(self.fns().ecc_total)?;
        let mut n = 0;
        let (kind, counter) = (c_uint::from(uncorrected), c_uint::from(lifetime));
        // SAFETY: a live handle, nvml.h's error type (0 corrected,
        // 1 uncorrected) and counter type (0 volatile, 1 aggregate), an
        // out-pointer.
        check(unsafe { f(self.raw, kind, counter, &mut n) })?;
        Ok(n)
    }

    /// PCIe throughput over a ~20 ms sample, KB/s: tx, or rx if `rx`.
    pub fn pcie_throughput(&self, rx: bool) -> Result<u32, Error> {
        self.u32_by(self.fns().pcie_throughput, u32::from(rx))
    }

    pub fn pcie_replay_counter(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().pcie_replay)
    }

    /// Whether MIG mode is currently on.
    pub fn mig_enabled(&self) -> Result<bool, Error> {
        let f = present(self.fns().mig_mode)?;
        let (mut current, mut pending) = (0, 0);
        // SAFETY: a live handle of this library and valid out-pointers.
        check(unsafe { f(self.raw, &mut current, &mut pending) })?;
        Ok(current == 1)
    }

    pub fn max_mig_devices(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().max_mig)
    }

    /// The MIG device in slot `index`; NOT_FOUND for an empty slot.
    pub fn mig_device(&self, index: u32) -> Result<Device<'a>, Error> {
        let f = present(self.fns().mig_by_index)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a live handle of this library and a valid out-pointer.
        check(unsafe { f(self.raw, index, &mut raw) })?;
        Ok(Device { raw, lib: self.lib })
    }

    pub fn gpu_instance_id(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().gpu_instance_id)
    }

    /// The device minor number: `/dev/nvidia<minor>`.
    pub fn minor_number(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().minor_number)
    }

    pub fn compute_instance_id(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().compute_instance_id)
    }

    pub fn supported_event_types(&self) -> Result<u64, Error> {
        self.u64_of(self.fns().event_types)
    }

    /// Cumulative time `policy` (a `PERF_POLICY_*`) held the clocks below
    /// the application clocks, ns.
    pub fn violation_ns(&self, policy: u32) -> Result<u64, Error> {
        let f = present(self.fns().violation_status)?;
        let mut v = ViolationTime::default();
        // SAFETY: a live handle of this library, an nvmlPerfPolicyType_t
        // value (callers pass the constants above), a valid out-pointer.
        check(unsafe { f(self.raw, policy, &mut v) })?;
        Ok(v.violation_time)
    }

    /// The field values `(field id, scope id)` in one call, each with its
    /// own outcome; the call itself failing fails them all.
    pub fn field_values(&self, ids: &[(u32, u32)]) -> Result<Vec<Result<f64, Error>>, Error> {
        let f = present(self.fns().field_values)?;
        let n = c_int::try_from(ids.len()).map_err(|_| Error::INVALID_ARGUMENT)?;
        let mut values: Vec<FieldValue> = ids
            .iter()
            .map(|&(field_id, scope_id)| FieldValue {
                field_id,
                scope_id,
                ..FieldValue::default()
            })
            .collect();
        // SAFETY: a live handle of this library; values holds n structs
        // with their ids set, as the call requires.
        check(unsafe { f(self.raw, n, values.as_mut_ptr()) })?;
        Ok(values
            .iter()
            .map(|v| check(v.nvml_return).and_then(|()| decode_value(v.value_type, v.value)))
            .collect())
    }

    /// The memory temperature at which the GPU slows down, °C.
    pub fn memory_temperature_max(&self) -> Result<u32, Error> {
        self.u32_by(
            self.fns().temperature_threshold,
            TEMPERATURE_THRESHOLD_MEM_MAX,
        )
    }

    /// Rows remapped for correctable and uncorrectable errors, and
    /// whether a remap is pending and a remap failed.
    pub fn remapped_rows(&self) -> Result<Remapped, Error> {
        let f = present(self.fns().remapped_rows)?;
        let [mut c, mut u, mut pending, mut failed] = [0; 4];
        // SAFETY: a live handle of this library and four valid
        // out-pointers, as nvml.h declares them.
        check(unsafe { f(self.raw, &mut c, &mut u, &mut pending, &mut failed) })?;
        let flag = |v: c_uint| match v {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        };
        Ok(Remapped {
            rows: [c, u],
            pending: flag(pending),
            failed: flag(failed),
        })
    }

    /// Pages retired for `cause`: 0 multiple single-bit errors, 1 a
    /// double-bit error.
    pub fn retired_pages(&self, cause: u32) -> Result<u32, Error> {
        let f = present(self.fns().retired_pages)?;
        let mut count = 0;
        // SAFETY: a live handle of this library; a count of 0 asks only
        // for the count (nvml.h), so the null buffers are never written.
        let r = unsafe {
            f(
                self.raw,
                cause,
                &mut count,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        match check(r) {
            Ok(()) | Err(Error::INSUFFICIENT_SIZE) => Ok(count),
            Err(e) => Err(e),
        }
    }

    /// The compute (or `graphics`) processes on the device: host PID and
    /// memory used, `None` where the driver answers "not available".
    pub fn running_processes(&self, graphics: bool) -> Result<Vec<(u32, Option<u64>)>, Error> {
        let fns = self.fns();
        let f = present(match graphics {
            true => fns.graphics_processes,
            false => fns.compute_processes,
        })?;
        // Sized as asked, then once more for processes started between
        // the two calls.
        let mut buf = vec![ProcessInfo::default(); 32];
        for _ in 0..3 {
            let mut count = buf.len() as c_uint;
            // SAFETY: a live handle of this library, the count of entries
            // `buf` holds, and `buf` itself (nvml.h): NVML writes at most
            // `count` entries and sets `count` to how many there are.
            let r = unsafe { f(self.raw, &mut count, buf.as_mut_ptr()) };
            match check(r) {
                Ok(()) => {
                    buf.truncate((count as usize).min(buf.len()));
                    return Ok(buf
                        .iter()
                        .map(|p| {
                            let used = p.used_gpu_memory;
                            (p.pid, (used != VALUE_NOT_AVAILABLE).then_some(used))
                        })
                        .collect());
                }
                Err(Error::INSUFFICIENT_SIZE) if (count as usize) <= MAX_PROCESSES => {
                    buf.resize(count as usize + 8, ProcessInfo::default());
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::INSUFFICIENT_SIZE)
    }

    pub fn retired_pages_pending(&self) -> Result<bool, Error> {
        self.u32_of(self.fns().retired_pending).map(|v| v != 0)
    }

    /// The PCIe link: current generation, its maximum (of the GPU and the
    /// slot; of the GPU alone where the driver lacks that), current width
    /// and its maximum, each on its own.
    pub fn pcie_link(&self) -> [Result<u32, Error>; 4] {
        let gen_max = match self.u32_of(self.fns().pcie_gen_max) {
            Err(Error::FUNCTION_NOT_FOUND | Error::NOT_SUPPORTED) => {
                self.u32_of(self.fns().pcie_gpu_gen_max)
            }
            r => r,
        };
        [
            self.u32_of(self.fns().pcie_gen),
            gen_max,
            self.u32_of(self.fns().pcie_width),
            self.u32_of(self.fns().pcie_width_max),
        ]
    }

    pub fn nvlink_active(&self, link: u32) -> Result<bool, Error> {
        self.u32_by(self.fns().nvlink_state, link).map(|v| v != 0)
    }

    /// One of link `link`'s error counters (an `nvmlNvLinkErrorCounter_t`).
    pub fn nvlink_errors(&self, link: u32, counter: u32) -> Result<u64, Error> {
        let f = present(self.fns().nvlink_error)?;
        let mut v = 0;
        // SAFETY: a live handle of this library, a link and counter index
        // (NVML checks both) and a valid out-pointer.
        check(unsafe { f(self.raw, link, counter, &mut v) })?;
        Ok(v)
    }

    pub fn fan_count(&self) -> Result<u32, Error> {
        self.u32_of(self.fns().num_fans)
    }

    /// Fan `fan`'s speed, % of its rated maximum (may exceed 100).
    pub fn fan_speed(&self, fan: u32) -> Result<u32, Error> {
        self.u32_by(self.fns().fan_speed, fan)
    }

    /// Encoder, decoder, JPEG and OFA utilization, %, each on its own.
    pub fn media(&self) -> [Result<u32, Error>; 4] {
        let fns = self.fns();
        [fns.encoder, fns.decoder, fns.jpg, fns.ofa].map(|f| {
            let f = present(f)?;
            let (mut util, mut period) = (0, 0);
            // SAFETY: a live handle of this library and valid out-pointers.
            check(unsafe { f(self.raw, &mut util, &mut period) })?;
            Ok(util)
        })
    }

    /// P-state, persistence mode and compute mode, each on its own.
    pub fn state(&self) -> [Result<u32, Error>; 3] {
        let fns = self.fns();
        [fns.pstate, fns.persistence, fns.compute_mode].map(|f| self.u32_of(f))
    }

    pub fn vbios_version(&self) -> Result<String, Error> {
        self.string(self.fns().vbios)
    }

    pub fn inforom_version(&self) -> Result<String, Error> {
        self.string(self.fns().inforom)
    }

    /// Whether GPM metrics can be read (Hopper and later).
    pub fn gpm_supported(&self) -> Result<bool, Error> {
        let f = present(self.fns().gpm_query_support)?;
        let mut s = GpmSupport {
            version: GPM_SUPPORT_VERSION,
            is_supported_device: 0,
        };
        // SAFETY: a live handle of this library; s is the v1 struct with
        // its version set.
        check(unsafe { f(self.raw, &mut s) })?;
        Ok(s.is_supported_device != 0)
    }
}

pub const EVENT_XID_CRITICAL_ERROR: u64 = 0x8;

/// One event out of [`EventSet::wait`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    /// The [`Device::id`] it happened on.
    pub device: usize,
    pub event_type: u64,
    /// For Xid events, the Xid code.
    pub data: u64,
}

/// An NVML event set, freed on drop. It keeps its library alive, so it
/// can move to a thread of its own.
pub struct EventSet {
    raw: RawEventSet,
    lib: Arc<Library>,
}

// SAFETY: the set is an opaque handle NVML lets any thread use; EventSet
// owns it alone and keeps its library alive.
unsafe impl Send for EventSet {}

impl EventSet {
    /// Creates a set; FUNCTION_NOT_FOUND when the library lacks any of the
    /// event calls, so a set that exists can always be waited on.
    pub fn create(lib: Arc<Library>) -> Result<EventSet, Error> {
        let fns = &lib.fns;
        present(fns.register_events)?;
        present(fns.event_wait)?;
        present(fns.event_set_free)?;
        let f = present(fns.event_set_create)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the library is initialised.
        check(unsafe { f(&mut raw) })?;
        Ok(EventSet { raw, lib })
    }

    pub fn register(&self, device: Device<'_>, types: u64) -> Result<(), Error> {
        // A handle from another library instance means nothing here.
        if !std::ptr::eq(device.lib, &*self.lib) {
            return Err(Error::INVALID_ARGUMENT);
        }
        let f = present(self.lib.fns.register_events)?;
        // SAFETY: a live device and set, both of this library.
        check(unsafe { f(device.raw, types, self.raw) })
    }

    /// Waits up to `timeout_ms` for one event; TIMEOUT when none came.
    pub fn wait(&self, timeout_ms: u32) -> Result<Event, Error> {
        let f = present(self.lib.fns.event_wait)?;
        let mut data = EventData {
            device: std::ptr::null_mut(),
            event_type: 0,
            event_data: 0,
            gpu_instance_id: 0,
            compute_instance_id: 0,
        };
        // SAFETY: a live set of this library and a valid out-pointer.
        check(unsafe { f(self.raw, &mut data, timeout_ms) })?;
        Ok(Event {
            device: data.device.addr(),
            event_type: data.event_type,
            data: data.event_data,
        })
    }
}

impl Drop for EventSet {
    fn drop(&mut self) {
        if let Some(free) = self.lib.fns.event_set_free {
            // SAFETY: the set came from nvmlEventSetCreate of this library,
            // which is still loaded (self.lib), and is not used again.
            unsafe { free(self.raw) };
        }
    }
}

/// A GPM sample buffer, freed on drop. Metrics come from two samples of
/// the same device taken some time apart.
pub struct GpmSample {
    raw: RawGpmSample,
    lib: Arc<Library>,
}

// SAFETY: an opaque buffer handle NVML lets any thread use; GpmSample
// owns it alone and keeps its library alive.
unsafe impl Send for GpmSample {}

impl GpmSample {
    /// FUNCTION_NOT_FOUND when the library lacks any GPM call, so a
    /// sample that exists can always be taken, compared and freed.
    pub fn alloc(lib: Arc<Library>) -> Result<GpmSample, Error> {
        let fns = &lib.fns;
        present(fns.gpm_sample_free)?;
        present(fns.gpm_sample_get)?;
        present(fns.gpm_metrics_get)?;
        let f = present(fns.gpm_sample_alloc)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the library is initialised.
        check(unsafe { f(&mut raw) })?;
        Ok(GpmSample { raw, lib })
    }

    /// Takes a sample of a whole GPU.
    pub fn take(&mut self, device: Device<'_>) -> Result<(), Error> {
        if !std::ptr::eq(device.lib, &*self.lib) {
            return Err(Error::INVALID_ARGUMENT);
        }
        let f = present(self.lib.fns.gpm_sample_get)?;
        // SAFETY: a live device and sample buffer, both of this library.
        check(unsafe { f(device.raw, self.raw) })
    }

    /// Takes a sample of one GPU instance of a GPU in MIG mode.
    pub fn take_mig(&mut self, gpu: Device<'_>, gpu_instance_id: u32) -> Result<(), Error> {
        if !std::ptr::eq(gpu.lib, &*self.lib) {
            return Err(Error::INVALID_ARGUMENT);
        }
        let f = present(self.lib.fns.gpm_mig_sample_get)?;
        // SAFETY: a live device and sample buffer, both of this library.
        check(unsafe { f(gpu.raw, gpu_instance_id, self.raw) })
    }

    /// The metrics `ids` between `earlier` and this sample, each with its
    /// own outcome.
    pub fn metrics_since(
        &self,
        earlier: &GpmSample,
        ids: &[u32],
    ) -> Result<Vec<Result<f64, Error>>, Error> {
        if !std::ptr::eq(&*earlier.lib, &*self.lib) || ids.len() > GPM_METRIC_CAPACITY {
            return Err(Error::INVALID_ARGUMENT);
        }
        let f = present(self.lib.fns.gpm_metrics_get)?;
        let blank = GpmMetric {
            metric_id: 0,
            nvml_return: 0,
            value: 0.0,
            short_name: std::ptr::null_mut(),
            long_name: std::ptr::null_mut(),
            unit: std::ptr::null_mut(),
        };
        let mut query = Box::new(GpmMetricsGet {
            version: GPM_METRICS_GET_VERSION,
            num_metrics: ids.len() as c_uint,
            sample1: earlier.raw,
            sample2: self.raw,
            metrics: [blank; GPM_METRIC_CAPACITY],
        });
        for (m, &id) in query.metrics.iter_mut().zip(ids) {
            m.metric_id = id;
        }
        // SAFETY: query is the v1 struct with its version, count and two
        // live samples of this library set; the names NVML may point at
        // are not read.
        check(unsafe { f(&mut *query) })?;
        Ok(query.metrics[..ids.len()]
            .iter()
            .map(|m| check(m.nvml_return).map(|()| m.value))
            .collect())
    }
}

impl Drop for GpmSample {
    fn drop(&mut self) {
        if let Some(free) = self.lib.fns.gpm_sample_free {
            // SAFETY: the buffer came from nvmlGpmSampleAlloc of this
            // library, which is still loaded (self.lib), and is not used
            // again.
            unsafe { free(self.raw) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_values_decode_by_their_type() {
        assert_eq!(decode_value(0, 2.5f64.to_bits()), Ok(2.5));
        let ui = u64::from_ne_bytes([71, 0, 0, 0, 0xAA, 0xBB, 0xCC, 0xDD]);
        assert_eq!(decode_value(1, ui), Ok(71.0));
        assert_eq!(decode_value(3, 1 << 40), Ok((1u64 << 40) as f64));
        assert_eq!(decode_value(4, (-5i64) as u64), Ok(-5.0));
        let si = u64::from_ne_bytes([0xFE, 0xFF, 0xFF, 0xFF, 9, 9, 9, 9]);
        assert_eq!(decode_value(5, si), Ok(-2.0));
        let us = u64::from_ne_bytes([3, 1, 9, 9, 9, 9, 9, 9]);
        assert_eq!(decode_value(6, us), Ok(259.0));
        assert_eq!(decode_value(7, 0), Err(Error::UNKNOWN));
    }
}
