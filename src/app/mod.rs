//! The wiring: check the configuration, start the poller thread, serve
//! until a signal says stop.

mod load;
mod signals;

use crate::alerts;
use crate::base::time::unix_now;
use crate::config::{Config, ConfigError, SourceKind};
use crate::http::{self, Server};
use crate::judge::{self, Judge};
use crate::poller::{self, Latest, Poller, Published};
use crate::promql;
use crate::snapshot::{Bounds, Snapshot};
use crate::{pipeline, table};
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

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
/// poller thread loads the source, replays the simulator's history and
/// collects behind them (`--once` does all that first, then prints).
pub fn run(config: Config) -> Result<u8, Error> {
    // Everything that can be wrong with the configuration fails here,
    // before anything starts. The web config first: whether it turns TLS
    // on is part of the configuration (`Config::tls`).
    #[cfg(feature = "tls")]
    let web = load::web_config(&config)?;
    #[cfg(feature = "tls")]
    let config = Config {
        tls: web.as_ref().is_some_and(|(_, l)| l.tls.is_some()),
        ..config
    };
    let rules = load::rules(&config)?;
    if config.print_rules {
        let printing = promql::Printing {
            runbook_base: &config.printed_runbook_base(),
            job: &config.scrape_job,
        };
        print!("{}", promql::rule_file(&rules, &printing));
        return Ok(0);
    }
    let scenario = load::scenario(&config)?;
    let (listener, probes) = if config.once {
        (None, None)
    } else {
        let probes = match config.probe_address {
            Some(a) => Some(bind("--web.probe-address", a)?),
            None => None,
        };
        (Some(bind("--web.listen-address", config.listen)?), probes)
    };
    let plan = pipeline::plan(&config, scenario)?;
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
    let collectors = config.collectors;
    let pod_labels = config.kubernetes.pod_labels;
    let bounds = Bounds::new(config.interval, config.max_stale);

    let Some(listener) = listener else {
        return Ok(once(plan, rules, &config, bounds));
    };
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Runtime(e.to_string()))?;
    let listener = async_io::Async::new(listener).map_err(|e| Error::Runtime(e.to_string()))?;
    let probes = match probes {
        Some(p) => {
            let at = p.local_addr().map_err(|e| Error::Runtime(e.to_string()))?;
            log::info!("serving probes on {}", url("http", at, "/healthz"));
            Some(async_io::Async::new(p).map_err(|e| Error::Runtime(e.to_string()))?)
        }
        None => None,
    };
    let signals = signals::handle()?;

    let latest = Arc::new(Latest::new(Published {
        snapshot: Arc::new(Snapshot::starting(plan.kind())),
        alerts: Default::default(),
        replay: None,
    }));
    let (reloads, reload_rx) = mpsc::channel();
    let (work, work_rx) = mpsc::sync_channel(poller::QUEUE);
    // Whether the simulator serves: known once the poller has built the
    // source (`auto` decides there), and read by SIGHUP.
    let simulated = Arc::new(AtomicBool::new(false));
    let sim_flag = simulated.clone();
    let alerting = Judge {
        latest: latest.clone(),
        bounds,
        tick: config.interval,
        on_ready: Some(Box::new(move |first, evaluator| {
            if sim_flag.load(Ordering::Relaxed) {
                print!("{}", table::render(first, evaluator));
            }
        })),
    };
    std::thread::Builder::new()
        .name("judge".into())
        .spawn(move || alerting.run(work_rx))
        .map_err(|e| Error::Runtime(format!("cannot start the alert evaluator: {e}")))?;
    let for_poller = latest.clone();
    let sim_flag = simulated.clone();
    let interval = config.interval;
    std::thread::Builder::new()
        .name("poller".into())
        .spawn(move || {
            let source = plan.build(unix_now());
            sim_flag.store(source.kind() == SourceKind::Sim, Ordering::Relaxed);
            Poller::new(source, interval)
                .with_collectors(collectors)
                .with_pod_labels(pod_labels)
                .run(rules, for_poller, reload_rx, work)
        })
        .map_err(|e| Error::Runtime(format!("cannot start the poller thread: {e}")))?;
    log::info!(
        "serving GPU metrics on {}",
        url(config.scheme(), addr, &config.telemetry_path)
    );
    let shared = Arc::new(http::guard::Shared::default());
    #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
    let mut web_hups: Option<mpsc::Sender<()>> = None;
    #[cfg(feature = "tls")]
    if let (Some((watch, loaded)), Some(path)) = (web, &config.web_config) {
        log::info!("--web.config.file {}: {}", path.display(), loaded.summary());
        shared.publish(loaded);
        web_hups = Some(
            load::web_watcher(watch, path.clone(), shared.clone())
                .map_err(|e| Error::Runtime(format!("cannot start the web config thread: {e}")))?,
        );
    }

    let ctx = http::Context {
        latest,
        telemetry_path: config.telemetry_path.clone(),
        runbook_base: config.served_runbook_base(),
        bounds,
        http: Default::default(),
    };
    let guard = http::guard::Guard::new(shared, config.open_probes);
    let server = Rc::new(Server::guarded(ctx, config.limits.clone(), guard));
    let hups = load::reloader(config, simulated, reloads)
        .map_err(|e| Error::Runtime(format!("cannot start the reload thread: {e}")))?;
    Ok(signals::serve_until_stopped(
        signals,
        [Some(listener), probes],
        server,
        move || {
            let _ = hups.send(());
            if let Some(h) = &web_hups {
                let _ = h.send(());
            }
        },
    ))
}

/// `--once`: the source's past replayed, one collection, the table.
fn once(plan: pipeline::Plan, rules: Vec<alerts::Rule>, config: &Config, bounds: Bounds) -> u8 {
    let t0 = unix_now();
    let mut poller = Poller::new(plan.build(t0), config.interval)
        .with_collectors(config.collectors)
        .with_pod_labels(config.kubernetes.pod_labels);
    let (p, evaluator) = judge::settled(&mut poller, rules, bounds, t0);
    log::info!(
        "alerts: {} rules; their history holds {} bytes",
        evaluator.rules().len(),
        evaluator.history_bytes()
    );
    print!("{}", table::render(&p, &evaluator));
    0
}

fn bind(flag: &str, addr: SocketAddr) -> Result<TcpListener, ConfigError> {
    TcpListener::bind(addr)
        .map_err(|e| ConfigError(format!("{flag}: cannot listen on {addr}: {e}")))
}

/// The URL to print: `localhost` for a wildcard address.
fn url(scheme: &str, addr: SocketAddr, path: &str) -> String {
    match addr {
        a if a.ip().is_unspecified() => format!("{scheme}://localhost:{}{path}", a.port()),
        SocketAddr::V6(a) => format!("{scheme}://[{}]:{}{path}", a.ip(), a.port()),
        SocketAddr::V4(a) => format!("{scheme}://{a}{path}"),
    }
}
