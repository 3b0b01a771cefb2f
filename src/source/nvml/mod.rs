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
//! NVLink bytes (payload, all links, from NVML's KiB counters), HBM
//! temperature, NVLink errors and links, and the recovery action come from
//! one `nvmlDeviceGetFieldValues` call per GPU; a field NVML refuses, e.g.
//! on a GPU without NVLink, stays `None`.
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
mod read;
mod xid;

use super::{Source, SourceError};
use crate::config::Collector;
use crate::config::{Collectors, SourceKind};
use crate::snapshot::{Gpu, Timings};
use ffi::Library;
use gpm::GpmSlot;
use read::{PcieCounter, read_gpu};
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
}

impl Default for Options {
    fn default() -> Options {
        Options {
            retry_first: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            event_wait: Duration::from_millis(1000),
            collectors: Collectors::DEFAULT,
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
    /// How each collector fared in the last collection.
    timings: Timings,
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

#[derive(Clone, Debug, Default)]
struct Identity {
    uuid: String,
    model: String,
    pci_bus_id: String,
}

impl Nvml {
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
            timings: Timings::default(),
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
        let on = self.options.collectors;
        if session.xid.is_none() && on.has(Collector::Xid) {
            session.xid = Some(watch_xids(&lib, &devices, &self.xids, &self.options));
        }
        self.timings = Timings::default();
        let mut gpus = Vec::with_capacity(devices.len());
        for (index, device) in devices {
            let mut gpu = read_gpu(
                index,
                device,
                &lib,
                on,
                &mut self.pcie,
                &mut session.gpm,
                &mut self.timings,
            );
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

    fn timings(&self) -> Timings {
        self.timings
    }
}
