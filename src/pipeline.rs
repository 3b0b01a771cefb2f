//! Which source serves, and what fills the gaps it leaves.
//!
//! `--source auto` takes NVML if it loads, else nvidia-smi if it is there;
//! else NVML all the same, not ready, on a host with any trace of NVIDIA
//! (the library, a device node, a GPU on the PCI bus: a driver that is not
//! loaded); the simulator, loudly, only on a host with none. A real source gets the fillers the flags
//! allow: Xid from the kernel log, and workload allocator stats. Every
//! source's fleet passes through the fleet memory ([`Fleet`]).
//!
//! [`plan`] checks the flags without loading or running anything, so a bad
//! one fails before serving starts; [`Plan::build`] then loads NVML or
//! probes for nvidia-smi, which may block, on the poller thread.

use crate::config::{Config, ConfigError};
use fill::Filler;
use fill::cgroup::ProcessCgroups;
use fill::jobs::JobMapping;
use fill::kmsg::{KernelLogXid, check_path};
use fill::workload::WorkloadStats;
use model::{Collector, SourceKind};
use model::{Gpu, Kubelet, Timings};
use sources::fleet::Fleet;
use sources::host::{self, PciBus};
use sources::nvml::{self, Nvml};
use sources::sim::{Scenario, Sim};
use sources::smi::Smi;
use sources::{Source, SourceError};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A checked configuration of the source, to build where blocking is fine.
pub struct Plan {
    config: Config,
    scenario: Scenario,
    /// The library to load, checked.
    library: PathBuf,
    fillers: Vec<Owned>,
}

/// Checks what the flags ask of the source, loading and running nothing.
/// `scenario` is the simulator's, should it serve.
pub fn plan(config: &Config, scenario: Scenario) -> Result<Plan, ConfigError> {
    let library = if config.source == Some(SourceKind::Sim) {
        PathBuf::new()
    } else {
        nvml::check_library(config.nvml_library.as_deref())
            .map_err(|e| ConfigError(format!("--nvml.library: {e}")))?
    };
    let fillers = if config.source == Some(SourceKind::Sim) {
        Vec::new()
    } else {
        fillers(config)?
    };
    Ok(Plan {
        config: config.clone(),
        scenario,
        library,
        fillers,
    })
}

impl Plan {
    /// The source as the flags name it; under `auto`, NVML, which it tries
    /// first.
    pub fn kind(&self) -> SourceKind {
        self.config.source.unwrap_or(SourceKind::Nvml)
    }

    /// The source with its fillers and the fleet memory. Loads NVML (for
    /// `nvml` and `auto`), which may block; `t0` is the simulator's origin.
    pub fn build(self, t0: f64) -> Box<dyn Source> {
        let config = &self.config;
        let smi = || {
            Smi::new(config.smi_path.clone(), config.smi_timeout)
                .collectors(config.reads())
                .with_spawn_hook(nvml::die_with_parent)
        };
        let nvml = || {
            let options = nvml::Options {
                collectors: config.reads(),
                deadline: config.interval,
                max_late: config.max_stale,
                dcgm: config.dcgm.clone(),
                ..nvml::Options::default()
            };
            Nvml::new(self.library.clone(), options)
        };
        let inner: Box<dyn Source> = match config.source {
            Some(SourceKind::Sim) => Box::new(Sim::new(self.scenario, t0)),
            Some(SourceKind::Nvml) => Box::new(nvml()),
            Some(SourceKind::Smi) => Box::new(smi()),
            None => {
                let n = nvml();
                if n.connected() {
                    Box::new(n)
                } else if find_program(&config.smi_path).is_some() {
                    log::info!(
                        "source auto: NVML did not load; using {}",
                        config.smi_path.display()
                    );
                    Box::new(smi())
                } else if let Some(trace) = n
                    .found()
                    .then(|| "the NVML library".to_string())
                    .or_else(|| host::nvidia_trace(&config.sysfs, &config.devfs))
                {
                    // A GPU node whose driver is broken: never invented GPUs.
                    log::warn!(
                        "source auto: NVML cannot initialise and there is no nvidia-smi, but this is an NVIDIA host ({trace}): serving NVML, not ready, until it can"
                    );
                    Box::new(n)
                } else {
                    log::warn!(
                        "source auto: no NVML, nvidia-smi, NVIDIA device node or GPU on the PCI bus"
                    );
                    Box::new(Sim::new(self.scenario, t0))
                }
            }
        };
        let (fillers, bus) = if inner.kind() == SourceKind::Sim {
            log::warn!("source sim: serving a SIMULATED fleet, not real GPUs");
            (Vec::new(), None)
        } else {
            (
                self.fillers,
                Some(PciBus::new(config.sysfs.clone(), config.procfs.clone())),
            )
        };
        Box::new(Pipeline {
            inner,
            fleet: Fleet::new(),
            fillers,
            bus,
            timings: Timings::default(),
        })
    }
}

/// A filler and the collector its readings belong to.
/// A filler and the collector its readings belong to, if any (pods and
/// jobs belong to none: their flags turn them on).
type Owned = (Option<Collector>, Box<dyn Filler>);

/// The fillers the flags ask for, in the order they fill. A filler whose
/// collector is off is never built.
fn fillers(config: &Config) -> Result<Vec<Owned>, ConfigError> {
    let mut fillers: Vec<Owned> = Vec::new();
    let on = |c| config.reads().has(c);
    match &config.xid_kmsg {
        _ if !on(Collector::Xid) => {}
        Some(p) if p.as_os_str().is_empty() => {}
        Some(p) => {
            check_path(p).map_err(|e| ConfigError(format!("--xid.kmsg: {e}")))?;
            fillers.push((Some(Collector::Xid), Box::new(KernelLogXid::new(p))));
        }
        None => match check_path(Path::new("/dev/kmsg")) {
            Ok(()) => fillers.push((
                Some(Collector::Xid),
                Box::new(KernelLogXid::new("/dev/kmsg")),
            )),
            Err(e) => log::info!("xid: not reading the kernel log ({e}); it needs CAP_SYSLOG"),
        },
    }
    match &config.workload_dir {
        Some(dir) if !dir.is_dir() => {
            return Err(ConfigError(format!(
                "--workload.stats-dir: {} is not a directory",
                dir.display()
            )));
        }
        Some(dir) if !on(Collector::Allocator) => {
            log::warn!(
                "--workload.stats-dir {}: not read, the allocator collector is off",
                dir.display()
            );
        }
        Some(dir) => fillers.push((
            Some(Collector::Allocator),
            Box::new(WorkloadStats::new(dir.clone(), config.workload_max_age)),
        )),
        None => {}
    }
    if on(Collector::Processes)
        && let Some(cgroups) = ProcessCgroups::new()
    {
        fillers.push((Some(Collector::Processes), Box::new(cgroups)));
    }
    if let Some(pods) = kubelet(config)? {
        fillers.push((None, pods));
    }
    match &config.job_dir {
        Some(dir) if !dir.is_dir() => {
            return Err(ConfigError(format!(
                "--hpc.job-mapping-dir: {} is not a directory",
                dir.display()
            )));
        }
        Some(dir) => fillers.push((None, Box::new(JobMapping::new(dir.clone())))),
        None => {}
    }
    Ok(fillers)
}

/// The kubelet's pods, where the flags and the build allow.
#[cfg(feature = "kubernetes")]
fn kubelet(config: &Config) -> Result<Option<Box<dyn Filler>>, ConfigError> {
    use fill::pods::{DEFAULT_SOCKET, KubeletPods, Options};
    use std::time::Duration;
    let k = &config.kubernetes;
    let (socket, explicit) = match &k.socket {
        Some(p) if p.as_os_str().is_empty() => return Ok(None),
        Some(p) => (p.clone(), true),
        None => (PathBuf::from(DEFAULT_SOCKET), false),
    };
    let options = Options {
        socket,
        explicit,
        interval: k.interval,
        timeout: k.interval.min(Duration::from_secs(10)),
    };
    let pods = KubeletPods::start(options)
        .map_err(|e| ConfigError(format!("--kubernetes.pod-resources-socket: {e}")))?;
    Ok(Some(Box::new(pods)))
}

/// This build has no kubelet client: only the flags' names are left, and
/// asking for pod labels is an error like a non-empty socket.
#[cfg(not(feature = "kubernetes"))]
fn kubelet(config: &Config) -> Result<Option<Box<dyn Filler>>, ConfigError> {
    if config.kubernetes.pod_labels {
        return Err(ConfigError(format!(
            "--kubernetes.pod-labels: {}",
            crate::config::NOT_BUILT_IN
        )));
    }
    Ok(None)
}

/// Where `program` would run from: itself if it names a path, else the
/// first match on PATH.
fn find_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A source, the fleet memory, and the fillers: source, then
/// [`Fleet::identify`], the fillers, [`Fleet::settle`].
struct Pipeline {
    inner: Box<dyn Source>,
    fleet: Fleet,
    fillers: Vec<Owned>,
    /// The GPUs on the PCI bus, for a real source: those it does not list
    /// are served lost.
    bus: Option<PciBus>,
    /// The source's timings of the last collection, with the fillers'.
    timings: Timings,
}

impl Source for Pipeline {
    fn kind(&self) -> SourceKind {
        self.inner.kind()
    }

    fn collect(&mut self, at: f64) -> Result<Vec<Gpu>, SourceError> {
        let mut gpus = self.inner.collect(at)?;
        self.timings = self.inner.timings();
        self.fleet.identify(&mut gpus);
        if let Some(bus) = &mut self.bus {
            self.fleet.on_bus(bus.functions(), &mut gpus);
        }
        // Real sources collect at wall-clock time, which file ages need.
        for (c, f) in &mut self.fillers {
            let started = Instant::now();
            f.fill(at, &mut gpus);
            if let Some(c) = c {
                self.timings.add(*c, started.elapsed().as_secs_f64());
            }
        }
        self.fleet.settle(&mut gpus, at);
        Ok(gpus)
    }

    fn timings(&self) -> Timings {
        self.timings
    }

    fn rejected(&self) -> Vec<(&'static str, u64)> {
        self.fleet.rejected()
    }

    fn models_text(&self) -> String {
        self.inner.models_text()
    }

    fn kubelet(&self) -> Option<Kubelet> {
        self.fillers.iter().find_map(|(_, f)| f.kubelet())
    }

    fn history_seconds(&self) -> f64 {
        self.inner.history_seconds()
    }

    /// The source's copy in a pipeline of its own: a fleet memory that
    /// will see what this one saw, and no fillers (only the simulator has
    /// a past, and it has none).
    fn replay_copy(&self) -> Option<Box<dyn Source>> {
        let inner = self.inner.replay_copy()?;
        Some(Box::new(Pipeline {
            inner,
            fleet: Fleet::new(),
            fillers: Vec::new(),
            bus: None,
            timings: Timings::default(),
        }))
    }

    fn skip_to(&mut self, at: f64) {
        self.inner.skip_to(at);
    }
}
