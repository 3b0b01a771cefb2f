//! The wiring: check the configuration, start the collector thread, serve
//! until a signal says stop.

mod load;
mod signals;

use crate::alerts::{self, promql};
use crate::base::time::unix_now;
use crate::collector::{Collector, Latest};
use crate::config::{Config, ConfigError, SourceKind};
use crate::http::{self, Server};
use crate::{select, table};
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
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

    let t0 = unix_now();
    let source = select::source(&config, scenario, t0)?;
    let simulated = source.kind() == SourceKind::Sim;
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
    let mut collector = Collector::new(source, evaluator, config.interval, config.max_stale)
        .with_collectors(config.collectors)
        .with_pod_labels(config.kubernetes.pod_labels);
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
    let signals = signals::handle()?;
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
    let server = Rc::new(Server::new(ctx, config.limits.clone()));
    let reload = || load::reload(&config, simulated, &reloads);
    Ok(signals::serve_until_stopped(
        signals, listener, server, reload,
    ))
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
