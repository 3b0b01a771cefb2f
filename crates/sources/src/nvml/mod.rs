//! The NVML source: the real fleet, read through `libnvidia-ml.so.1`
//! loaded at run time (see `nvml/ffi.rs`, all of its unsafe code).
//!
//! The source never gives up: when the library will not load or NVML will
//! not initialise (no driver yet, driver being upgraded), `collect` fails
//! with the reason and tries again later, waiting `retry_first` and then
//! twice as long each time up to `retry_max`.
//!
//! The library is unloaded after a failed init and loaded afresh for the
//! next try: NVML's init touches its 12.7 MB writable segment even when it
//! fails, and only unloading gives that memory back between retries (a
//! reload costs about 6 ms more per retry than keeping the library).
//!
//! Readings are converted to base units. A reading NVML does not support,
//! or a symbol the driver lacks, leaves the field `None`; so does NVML's
//! "not available" sentinel (all ones), logged once per GPU and reading. A
//! GPU that answers GPU_IS_LOST is reported `up = false` under the UUID it
//! had at that index, with the Xid counts its events brought, while the
//! rest keep reporting; the fleet memory gives it the rest of its identity.
//!
//! PCIe: NVML only gives a throughput rate (KB/s over a ~20 ms sample,
//! taken as 1024 bytes per KB). The source integrates it into
//! `pcie_bytes_total` with the trapezoid rule between collections, so the
//! counter starts at 0 and is an estimate whose accuracy depends on how
//! representative each sample is.
//!
//! Xid: a thread per NVML session registers XidCriticalError events and
//! counts them by GPU UUID; counts survive re-initialisation. GPUs that
//! cannot deliver events leave `xid_errors` `None` for another reader. A
//! GPU that counted Xids and is missing from a collection (lost, or gone
//! from the enumeration) is still reported, lost, with its counts, so the
//! Xid that came with the loss is served.
//!
//! GPM (Hopper and later): SM active, SM occupancy, DRAM active, the
//! pipes and the dcgm collector's profiling fields (those its counters
//! file lists, `Options::prof`) are computed between this collection's
//! sample and the previous one, for GPUs and MIG instances alike; the
//! first collection has none. A listed field a GPU does not give (no GPM,
//! or a metric it lacks) is logged once per GPU and field and has no
//! series there, as dcgm-exporter skips a profiling field not enabled.
//!
//! Clock-event durations: `nvmlDeviceGetViolationStatus` (cumulative ns)
//! for the three policies with a counterpart in our reasons: power →
//! `sw_power_cap`, thermal → `sw_thermal_slowdown`, sync boost →
//! `sync_boost`. The other reasons stay `None`.
//!
//! NVLink bytes (payload, all links, from NVML's KiB counters), HBM
//! temperature, NVLink errors and links, and the recovery action come from
//! one `nvmlDeviceGetFieldValues` call per GPU; a field NVML refuses, e.g.
//! on a GPU without NVLink, stays `None`.
//!
//! Each GPU is read on a thread of its own (`readers.rs`), and a
//! collection waits for them at most `Options::deadline`: a GPU whose read
//! is still out then is served with its last finished read and counted in
//! `reads_late`, its readings withheld once that read is older than
//! `Options::max_late`. One slow GPU ages its own readings, not the
//! collection's.
//!
//! Collectors: each one's calls are made only when it is on (`Options`),
//! and timed; a failed call (NOT_SUPPORTED aside) marks its collector
//! failed. Where GPM gives PCIe traffic, the PCIe counter adds it instead
//! of integrating the throughput sample.
//!
//! None of the field values, the violation counters or the hardware
//! health is read on MIG instances.

#[allow(unsafe_code)] // the one exception: see ffi.rs
mod ffi;
mod gpm;
mod health;
mod probe;
mod processes;
mod read;
mod readers;
mod xid;

use super::{Source, SourceError};
use base::quiet::Noted;
use ffi::{Library, OpenError};
pub use ffi::{SYMBOLS, missing_symbols};
use model::dcgm::Dcgm;
use model::dcgm::prof::GpmIds;
use model::{Collector, Collectors, SourceKind};
use model::{Gpu, Readings, Timings};
use read::Ask;
use readers::{Read, Readers};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xid::{XidCounts, XidWatch, lock, watch_xids, xid_readings};

/// What is loaded when no path is given; the driver installs it.
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// The longest wait between retries, whatever the options say.
const MAX_RETRY: Duration = Duration::from_secs(24 * 3600);

#[derive(Clone, Debug)]
pub struct Options {
    /// The wait before retrying a failed load or init; it doubles after
    /// each failure, up to `retry_max`.
    pub retry_first: Duration,
    pub retry_max: Duration,
    /// How long each wait for Xid events lasts; also how long a retired
    /// Xid thread may take to notice and let its NVML session go.
    pub event_wait: Duration,
    /// The collectors whose calls are made; the others' never are.
    pub collectors: Collectors,
    /// How long a collection waits for the GPUs' reads.
    pub deadline: Duration,
    /// How old a late GPU's last read may be and still be served.
    pub max_late: Duration,
    /// The dcgm collector's fields, for the GPM metrics of its profiling
    /// fields ([`Dcgm::prof`]).
    pub dcgm: Option<Arc<Dcgm>>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            retry_first: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            event_wait: Duration::from_millis(1000),
            collectors: Collectors::DEFAULT,
            deadline: Duration::from_secs(1),
            max_late: Duration::from_secs(60),
            dcgm: None,
        }
    }
}

pub struct Nvml {
    library: PathBuf,
    options: Options,
    state: State,
    /// The UUID last read at each index, to name a GPU once it is lost.
    uuids: HashMap<u32, String>,
    /// (GPU, reading) pairs that answered NVML's "not available" sentinel.
    sentinels: Noted<(String, &'static str)>,
    /// (GPU index, GPM metric) pairs of the profiling fields it does not
    /// give.
    refused: Noted<(u32, u32)>,
    /// A thread per GPU index, reading it.
    readers: Readers,
    /// Late collections by GPU index.
    late: HashMap<u32, u64>,
    /// Xid counts by UUID, written by the Xid thread.
    xids: Arc<Mutex<HashMap<String, XidCounts>>>,
    /// How each collector fared in the last collection.
    timings: Timings,
    /// Whether the library ever loaded, initialised or not.
    found: bool,
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
}

impl Nvml {
    /// [`Nvml::open_with`] with the default options.
    pub fn open(library: Option<&Path>) -> Result<Nvml, String> {
        Nvml::open_with(library, Options::default())
    }

    /// A source reading NVML from `library`, or [`DEFAULT_LIBRARY`]: see
    /// [`check_library`]. A library that exists but will not load or
    /// initialise is no configuration error: the source is returned and
    /// its collections fail, retrying, until it does.
    pub fn open_with(library: Option<&Path>, options: Options) -> Result<Nvml, String> {
        Ok(Nvml::new(check_library(library)?, options))
    }

    /// A source reading NVML from a library [`check_library`] accepted;
    /// tries to load it at once.
    pub fn new(library: PathBuf, options: Options) -> Nvml {
        let mut nvml = Nvml {
            library,
            options,
            state: State::Down {
                reason: "not connected yet".into(),
                next_try: Instant::now(),
                delay: None,
            },
            uuids: HashMap::new(),
            sentinels: Noted::default(),
            refused: Noted::default(),
            readers: Readers::default(),
            late: HashMap::new(),
            xids: Arc::new(Mutex::new(HashMap::new())),
            timings: Timings::default(),
            found: false,
        };
        // A failure here is reported by collect, which also retries.
        let _ = nvml.connect();
        nvml
    }

    /// Whether NVML loaded and initialised (so far).
    pub fn connected(&self) -> bool {
        matches!(self.state, State::Up(_))
    }

    /// Whether the library loaded, even if NVML would not initialise (a
    /// driver not loaded): a trace of NVIDIA on the host.
    pub fn found(&self) -> bool {
        self.found
    }

    /// Loads and initialises NVML, or records why not and when to retry.
    fn connect(&mut self) -> Result<(), SourceError> {
        let opened = Library::open(&self.library);
        self.found |= !matches!(opened, Err(OpenError::Load(_)));
        match opened {
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
        // The poller logs the failure, quietly; the wait is detail.
        log::debug!("source nvml: {reason}; retrying in {delay:?}");
        let error = SourceError(self.retrying(&reason));
        self.readers.forget();
        self.state = State::Down {
            reason,
            next_try: Instant::now() + delay,
            delay: Some(delay),
        };
        error
    }
}

impl Nvml {
    /// The error while NVML is down: the same words until the reason
    /// changes, so that the log stays quiet.
    fn retrying(&self, reason: &str) -> String {
        format!(
            "{reason}; retrying with backoff up to {:?}",
            self.options.retry_max.min(MAX_RETRY)
        )
    }
}

/// Attaches the Xid counts of `gpu` (by UUID) when its events are watched
/// or it counted some before.
fn attach_xids(xids: &Mutex<HashMap<String, XidCounts>>, gpu: &mut Gpu, watched: bool) {
    let xids = lock(xids);
    if watched || xids.contains_key(&gpu.uuid) {
        xid_readings(&xids, &gpu.uuid, &mut gpu.readings);
    }
}

/// The library to load: `library`, or [`DEFAULT_LIBRARY`]. A bare file
/// name is searched for as the dynamic loader does; a path must exist, else
/// this is a configuration error. Nothing is loaded.
pub fn check_library(library: Option<&Path>) -> Result<PathBuf, String> {
    match library {
        None => Ok(PathBuf::from(DEFAULT_LIBRARY)),
        Some(p) => {
            let bare_name = p.components().count() == 1 && !p.as_os_str().is_empty();
            if !bare_name && let Err(e) = std::fs::metadata(p) {
                return Err(format!("NVML library {}: {e}", p.display()));
            }
            Ok(p.to_path_buf())
        }
    }
}

/// One malloc arena for every thread: see `ffi::one_malloc_arena`.
pub fn one_malloc_arena() {
    ffi::one_malloc_arena();
}

/// Makes a child started by `cmd` die with the exporter (SIGKILL when the
/// thread that started it ends), so an nvidia-smi never outlives it.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    ffi::die_with_parent(cmd);
}

impl Nvml {
    /// GPUs that counted Xids and are not enumerated now: lost, with
    /// their counts (the fleet memory knows them by UUID).
    fn add_gone(&self, gpus: &mut Vec<Gpu>) {
        let gone: Vec<(u32, String)> = self
            .uuids
            .iter()
            .filter(|(_, u)| !gpus.iter().any(|g| &g.uuid == *u))
            .filter(|(_, u)| lock(&self.xids).contains_key(*u))
            .map(|(&i, u)| (i, u.clone()))
            .collect();
        for (index, uuid) in gone {
            let mut gpu = Gpu {
                index,
                uuid,
                ..Gpu::default()
            };
            attach_xids(&self.xids, &mut gpu, false);
            gpus.push(gpu);
        }
    }
}

impl Nvml {
    /// The GPU at `index` as this collection serves it: a fresh read, its
    /// timings and sentinels taken in; or, late, its last read (readings
    /// withheld once older than `max_late`) or before any its identity,
    /// counted; `None` for a GPU late that could not even be named.
    fn settle(&mut self, index: u32, fresh: Option<Read>) -> Option<Gpu> {
        let count = self.late.entry(index).or_default();
        let read = match fresh {
            Some(read) => read,
            None => {
                *count += 1;
                if *count == 1 {
                    log::warn!(
                        "source nvml: GPU {index}: a read took longer than {:?}; it is served from its last read while one is out, counted in gpu_exporter_gpu_reads_late_total (logged once per GPU)",
                        self.options.deadline
                    );
                }
                let (at, mut gpu) = self.readers.last(index).cloned()?;
                if at.elapsed() > self.options.max_late {
                    gpu.readings = Readings::default();
                    gpu.mig
                        .iter_mut()
                        .for_each(|m| m.readings = Readings::default());
                }
                gpu.reads_late = *count;
                return Some(gpu);
            }
        };
        let mut gpu = read.gpu;
        gpu.reads_late = *count;
        self.timings.merge(&read.timings);
        for what in read.sentinels {
            if self.sentinels.first((gpu.uuid.clone(), what)) {
                log::warn!(
                    "source nvml: GPU {}: {what} answers NVML's \"not available\" (all ones); left out (logged once per GPU and reading)",
                    gpu.uuid
                );
            }
        }
        self.note_refused(&gpu, read.refused);
        Some(gpu)
    }

    /// Logs each profiling field GPU `gpu` does not give, once per GPU and
    /// field, as dcgm-exporter logs a field not enabled.
    fn note_refused(&mut self, gpu: &Gpu, refused: GpmIds) {
        let Some(d) = &self.options.dcgm else { return };
        for (id, name) in d.prof() {
            if refused.has(id) && self.refused.first((gpu.index, id)) {
                log::warn!(
                    "source nvml: GPU {} ({}): GPM does not give {name} (no GPM before Hopper, or a metric this GPU lacks): no series for it, as dcgm-exporter skips a profiling field not enabled (logged once per GPU and field)",
                    gpu.index,
                    gpu.uuid
                );
            }
        }
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
            if Instant::now() < *next_try {
                return Err(SourceError(self.retrying(reason)));
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
        let on = self.options.collectors;
        if session.xid.is_none() && on.has(Collector::Xid) {
            let devices: Vec<_> = (0..count).map(|i| (i, lib.device(i))).collect();
            session.xid = Some(watch_xids(&lib, &devices, &self.xids, &self.options));
        }
        // Taken out of the session: settling the reads needs all of self.
        let watched = session.xid.as_ref().map(|w| w.watched.clone());
        let watched = |uuid: &str| watched.as_ref().is_some_and(|w| w.contains(uuid));
        let driver_version = session.driver_version.clone();
        let deadline = Instant::now() + self.options.deadline;
        self.timings = Timings::default();
        let mut gpus = Vec::with_capacity(count as usize);
        let prof = self.options.dcgm.iter().flat_map(|d| d.prof());
        let prof = prof.fold(GpmIds::NONE, |s, p| s.with(p.0));
        let ask = Ask { on, prof };
        for (index, outcome) in (0..).zip(self.readers.read(count, &lib, ask, deadline)) {
            let Some(mut gpu) = self.settle(index, outcome) else {
                continue;
            };
            if !gpu.uuid.is_empty() {
                self.uuids.insert(index, gpu.uuid.clone());
            } else if let Some(uuid) = self.uuids.get(&index) {
                gpu.uuid.clone_from(uuid);
            }
            if !gpu.uuid.is_empty() {
                let watched = watched(&gpu.uuid);
                attach_xids(&self.xids, &mut gpu, watched);
            }
            gpu.driver_version.clone_from(&driver_version);
            gpus.push(gpu);
        }
        self.add_gone(&mut gpus);
        Ok(gpus)
    }

    fn timings(&self) -> Timings {
        self.timings
    }
}
