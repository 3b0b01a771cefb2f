//! gpu-exporter: source → snapshot → exposition / alerts → http.
//!
//! A collector thread reads the source and publishes complete snapshots;
//! the HTTP side (one smol executor on the main thread) only ever renders
//! the newest one, so a slow source never delays a scrape.

pub mod alerts;
pub mod base;
pub mod collector;
pub mod config;
pub mod exposition;
pub mod http;
pub mod logger;
pub mod process;
pub mod snapshot;
pub mod source;
pub mod table;

use async_io::Timer;
use async_signal::{Signal, Signals};
use base::time::unix_now;
use collector::{Collector, Latest};
use config::{Config, ConfigError, SourceKind};
use smol::future::FutureExt;
use smol::stream::StreamExt;
use source::kmsg::KernelLogXid;
use source::sim::{Scenario, Sim};
use source::smi::Smi;
use source::workload::WorkloadStats;
use source::{Augmented, Source};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

#[derive(Debug)]
pub enum Error {
    /// Bad flags, files or addresses: exit code 2.
    Config(ConfigError),
    /// Anything else that stops the exporter: exit code 1.
    Runtime(String),
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::Config(e)
    }
}

fn load_scenario(config: &Config) -> Result<Scenario, ConfigError> {
    let Some(path) = &config.scenario else {
        return Ok(Scenario::default_fleet());
    };
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("--sim.scenario: cannot read {shown}: {e}")))?;
    Scenario::parse(&text).map_err(|e| ConfigError(format!("--sim.scenario {shown}: {e}")))
}

/// SIGHUP: re-reads the rules file and, for the simulator, the scenario,
/// and hands them to the collector. A bad file keeps the old ones.
fn reload(config: &Config, simulated: bool, to: &mpsc::Sender<collector::Reload>) {
    let read = || -> Result<collector::Reload, ConfigError> {
        let rules = load_rules(config)?;
        let source = if simulated {
            Some(Box::new(Sim::new(load_scenario(config)?, unix_now())) as Box<dyn Source>)
        } else {
            None
        };
        Ok(collector::Reload { rules, source })
    };
    match read() {
        Ok(r) => {
            log::info!(
                "SIGHUP: reloading the rules{}",
                if simulated { " and the scenario" } else { "" }
            );
            let _ = to.send(r);
        }
        Err(e) => log::error!("SIGHUP: reload failed, keeping the old configuration: {e}"),
    }
}

/// The source the flags ask for; `auto` takes NVML if it loads, else
/// nvidia-smi if it is there, else the simulator, loudly.
fn build_source(
    config: &Config,
    scenario: Scenario,
    t0: f64,
) -> Result<Box<dyn Source>, ConfigError> {
    let nvml = || {
        source::nvml::Nvml::open(config.nvml_library.as_deref())
            .map_err(|e| ConfigError(format!("--nvml.library: {e}")))
    };
    let smi = || Smi::new(config.smi_path.clone(), config.smi_timeout);
    let inner: Box<dyn Source> = match config.source {
        Some(SourceKind::Sim) => Box::new(Sim::new(scenario, t0)),
        Some(SourceKind::Nvml) => Box::new(nvml()?),
        Some(SourceKind::Smi) => Box::new(smi()),
        None => {
            let n = nvml()?;
            if n.connected() {
                Box::new(n)
            } else if find_program(&config.smi_path).is_some() {
                log::info!(
                    "source auto: NVML did not load; using {}",
                    config.smi_path.display()
                );
                Box::new(smi())
            } else {
                log::warn!("source auto: neither NVML nor nvidia-smi is here");
                Box::new(Sim::new(scenario, t0))
            }
        }
    };
    if inner.kind() == SourceKind::Sim {
        log::warn!("source sim: serving a SIMULATED fleet, not real GPUs");
        return Ok(inner);
    }
    let xid = match &config.xid_kmsg {
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) => {
            std::fs::File::open(p).map_err(|e| {
                ConfigError(format!("--xid.kmsg: cannot read {}: {e}", p.display()))
            })?;
            Some(KernelLogXid::new(p))
        }
        None => match std::fs::File::open("/dev/kmsg") {
            Ok(_) => Some(KernelLogXid::new("/dev/kmsg")),
            Err(e) => {
                log::info!("xid: not reading /dev/kmsg ({e}); it needs CAP_SYSLOG");
                None
            }
        },
    };
    let workload = match &config.workload_dir {
        Some(dir) if !dir.is_dir() => {
            return Err(ConfigError(format!(
                "--workload.stats-dir: {} is not a directory",
                dir.display()
            )));
        }
        Some(dir) => Some(WorkloadStats::new(dir.clone(), config.workload_max_age)),
        None => None,
    };
    Ok(Box::new(Augmented {
        inner,
        xid,
        workload,
    }))
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

fn load_rules(config: &Config) -> Result<Vec<alerts::Rule>, ConfigError> {
    let Some(path) = &config.rules_file else {
        return Ok(alerts::rules::defaults());
    };
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("--rules.file: cannot read {shown}: {e}")))?;
    alerts::file::load(&text).map_err(|e| ConfigError(format!("--rules.file {shown}: {e}")))
}

fn bind(addr: SocketAddr) -> Result<TcpListener, ConfigError> {
    TcpListener::bind(addr).map_err(|e| {
        ConfigError(format!(
            "--web.listen-address: cannot listen on {addr}: {e}"
        ))
    })
}

/// The URL to print: `localhost` for a wildcard address.
fn url(addr: SocketAddr, path: &str) -> String {
    match addr {
        a if a.ip().is_unspecified() => format!("http://localhost:{}{path}", a.port()),
        SocketAddr::V6(a) => format!("http://[{}]:{}{path}", a.ip(), a.port()),
        SocketAddr::V4(a) => format!("http://{a}{path}"),
    }
}

/// Runs the exporter; `Ok` holds the exit code (0, or 128 + the signal
/// that cut a graceful stop short).
pub fn run(config: Config) -> Result<u8, Error> {
    // Everything that can be wrong with the configuration fails here,
    // before anything starts.
    let rules = load_rules(&config)?;
    if config.print_rules {
        print!(
            "{}",
            alerts::promql::rule_file(&rules, &config.runbook_base)
        );
        return Ok(0);
    }
    let scenario = load_scenario(&config)?;
    let listener = if config.once {
        None
    } else {
        Some(bind(config.listen)?)
    };

    let t0 = unix_now();
    let source = build_source(&config, scenario, t0)?;
    let simulated = source.kind() == SourceKind::Sim;
    let evaluator = alerts::Evaluator::new(rules);
    let mut collector = Collector::new(source, evaluator, config.interval, config.max_stale);
    collector.replay(t0);
    let first = collector.collect_at(t0, false);
    log::info!(
        "alerts: {} rules; their history holds {} bytes",
        collector.evaluator().rules().len(),
        collector.evaluator().history_bytes()
    );
    let table = table::render(&first, collector.evaluator());

    let Some(listener) = listener else {
        print!("{table}");
        return Ok(0);
    };
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let listener = async_io::Async::new(listener).map_err(|e| Error::Runtime(e.to_string()))?;
    // Signals are handled from before the exporter says it is serving, so
    // whoever waits for that line can signal it at once.
    let mut signals = Signals::new([Signal::Term, Signal::Int, Signal::Hup])
        .map_err(|e| Error::Runtime(format!("cannot handle signals: {e}")))?;
    log::info!(
        "serving GPU metrics on {}",
        url(addr, &config.telemetry_path)
    );
    if simulated {
        print!("{table}");
    }

    let latest = Arc::new(Latest::new(first));
    let for_collector = latest.clone();
    let (reloads, reload_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("collector".into())
        .spawn(move || collector.run(for_collector, reload_rx))
        .map_err(|e| Error::Runtime(format!("cannot start the collector: {e}")))?;

    let ctx = http::Context {
        latest,
        telemetry_path: config.telemetry_path.clone(),
        runbook_base: config.runbook_base.clone(),
        max_age: config.interval * 3 + Duration::from_secs(1),
    };
    let server = Rc::new(http::Server::new(ctx, config.limits.clone()));
    let ex = smol::LocalExecutor::new();
    let code = smol::block_on(ex.run(async {
        // Serve until SIGTERM or SIGINT; SIGHUP reloads on the way.
        let stop = async {
            loop {
                match signals.next().await {
                    Some(Ok(Signal::Hup)) => reload(&config, simulated, &reloads),
                    Some(Ok(sig)) => return sig,
                    Some(Err(_)) | None => return Signal::Term,
                }
            }
        };
        let serving = async {
            http::server::serve(&ex, listener, server.clone()).await;
            Signal::Term
        };
        let sig = serving.or(stop).await;
        // The listener is closed now. Finish what is in flight, but exit
        // within a second whatever the clients do; a second signal exits
        // at once.
        log::info!("{sig:?}: finishing in-flight responses (at most 1s)");
        let drained = async {
            while server.in_flight() > 0 {
                Timer::after(Duration::from_millis(5)).await;
            }
            0
        };
        let deadline = async {
            Timer::after(Duration::from_secs(1)).await;
            log::warn!("responses still in flight after 1s; exiting anyway");
            0
        };
        let again = async {
            loop {
                if let Some(Ok(s)) = signals.next().await
                    && s != Signal::Hup
                {
                    log::warn!("{s:?} again: exiting at once");
                    return 128 + s as u8;
                }
            }
        };
        drained.or(again).or(deadline).await
    }));
    Ok(code)
}
