//! The wiring: check the configuration, start the collector thread, serve
//! until a signal says stop.

mod load;
mod signals;

use crate::alerts::{self, promql};
use crate::base::time::unix_now;
use crate::collector::{Collector, Latest, Published};
use crate::config::{Config, ConfigError, SourceKind};
use crate::http::{self, Server};
use crate::snapshot::Snapshot;
use crate::{select, table};
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Why the exporter stopped short.
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

/// Runs the exporter; `Ok` holds the exit code (0, or 128 + the signal
/// that cut a graceful stop short).
///
/// Serving starts before the first collection: the listener, `/healthz`
/// and the metrics answer at once, whatever the source does, and the
/// collector thread loads the source, replays the simulator's history and
/// collects behind them (`--once` does all that first, then prints).
pub fn run(config: Config) -> Result<u8, Error> {
    // Everything that can be wrong with the configuration fails here,
    // before anything starts.
    let rules = load::rules(&config)?;
    if config.print_rules {
        print!("{}", promql::rule_file(&rules, &config.runbook_base));
        return Ok(0);
    }
    let scenario = load::scenario(&config)?;
    let listener = if config.once {
        None
    } else {
        Some(bind(config.listen)?)
    };
    let plan = select::plan(&config, scenario)?;
    for r in &rules {
        let off: Vec<&str> = r
            .needs()
            .iter()
            .filter(|&c| !config.collectors.has(c))
            .map(|c| c.name())
            .collect();
        if !off.is_empty() {
            log::warn!(
                "rule {} is inactive: collector {} is off",
                r.name,
                off.join(", ")
            );
        }
    }
    let evaluator = alerts::Evaluator::new(rules);
    let collectors = config.collectors;
    let pod_labels = config.kubernetes.pod_labels;

    let Some(listener) = listener else {
        let t0 = unix_now();
        let source = plan.build(t0);
        let mut collector = Collector::new(source, evaluator, config.interval, config.max_stale)
            .with_collectors(collectors)
            .with_pod_labels(pod_labels);
        let first = collector.first(t0);
        log_history(collector.evaluator());
        print!("{}", table::render(&first, collector.evaluator()));
        return Ok(0);
    };
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let listener = async_io::Async::new(listener).map_err(|e| Error::Runtime(e.to_string()))?;
    let signals = signals::handle()?;

    let latest = Arc::new(Latest::new(Published {
        snapshot: Snapshot::starting(plan.kind()),
        alerts: Vec::new(),
    }));
    let for_collector = latest.clone();
    let (reloads, reload_rx) = mpsc::channel();
    // Whether the simulator serves: known once the collector has built the
    // source (`auto` decides there), and read by SIGHUP.
    let simulated = Arc::new(AtomicBool::new(false));
    let sim_flag = simulated.clone();
    let (interval, max_stale) = (config.interval, config.max_stale);
    std::thread::Builder::new()
        .name("collector".into())
        .spawn(move || {
            let source = plan.build(unix_now());
            let sim = source.kind() == SourceKind::Sim;
            sim_flag.store(sim, Ordering::Relaxed);
            let collector = Collector::new(source, evaluator, interval, max_stale)
                .with_collectors(collectors)
                .with_pod_labels(pod_labels);
            collector.run(for_collector, reload_rx, |first, evaluator| {
                log_history(evaluator);
                if sim {
                    print!("{}", table::render(first, evaluator));
                }
            })
        })
        .map_err(|e| Error::Runtime(format!("cannot start the collector: {e}")))?;
    log::info!(
        "serving GPU metrics on {}",
        url(addr, &config.telemetry_path)
    );

    let ctx = http::Context {
        latest,
        telemetry_path: config.telemetry_path.clone(),
        runbook_base: config.runbook_base.clone(),
        max_age: config.interval * 3 + Duration::from_secs(1),
        http: Default::default(),
    };
    let server = Rc::new(Server::new(ctx, config.limits.clone()));
    let hups = load::reloader(config, simulated, reloads)
        .map_err(|e| Error::Runtime(format!("cannot start the reload thread: {e}")))?;
    Ok(signals::serve_until_stopped(
        signals,
        listener,
        server,
        move || {
            let _ = hups.send(());
        },
    ))
}

fn log_history(evaluator: &alerts::Evaluator) {
    log::info!(
        "alerts: {} rules; their history holds {} bytes",
        evaluator.rules().len(),
        evaluator.history_bytes()
    );
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
