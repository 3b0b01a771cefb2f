//! The wiring: check the configuration, start the poller thread, serve
//! until a signal says stop.

mod listen;
mod load;
mod unix_signals;

use crate::config::{self, Config, ConfigError};
use crate::notify;
use crate::{pipeline, table};
use alerts::promql;
use base::time::unix_now;
use fill::engines::Reader;
use fill::engines::client::Peer;
use fill::engines::reader::Retune;
use http::Server;
use model::{Bounds, Snapshot};
use model::{Collectors, SourceKind};
use poller::judge::{self, Judge};
use poller::{self, Latest, Poller, Published};
use routes::{Context, Routes};
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
    // Before any thread of ours starts: they share one malloc arena.
    sources::nvml::one_malloc_arena();
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
    config::alertmanager::check(&config.alertmanager).map_err(ConfigError)?;
    let engines = load::engines(&config)?;
    let rules = load::rules(&config, &engines)?;
    let config = reading_rules(config, &rules);
    if config.print_rules {
        let printing = promql::Printing {
            runbook_base: &config.printed_runbook_base(),
            stable_runbooks: config.runbook_base.is_some(),
            max_stale: config.max_stale,
            job: &config.scrape_job,
            ttft_threshold: engines.ttft_threshold,
            thresholds: &engines.thresholds(),
        };
        print!("{}", promql::rule_file(&rules, &printing));
        return Ok(0);
    }
    let scenario = load::scenario(&config)?;
    let (listeners, probes) = bind_all(&config)?;
    let notify = notify_plan(&config, &listeners)?;
    let plan = pipeline::plan(&config, scenario)?;
    warn_inactive(&rules, &config);
    dcgm_left_out(&config);
    let bounds = Bounds::new(config.interval, config.max_stale);

    if config.once {
        return Ok(once(plan, rules, &config, bounds));
    }
    let (listeners, probes) = watched(listeners, probes, &config)?;
    let signals = unix_signals::handle()?;

    let latest = Arc::new(Latest::new(Published {
        // The flags' collectors from the start: a drop-in's first scrape
        // is text 0.0.4 like the rest (`Format::for_scrape`).
        snapshot: Arc::new(Snapshot {
            collectors: config.collectors,
            ..Snapshot::starting(plan.kind())
        }),
        alerts: Default::default(),
        replay: None,
        recent: Default::default(),
    }));
    let (reloads, reload_rx) = mpsc::channel();
    let (work, work_rx) = mpsc::sync_channel(poller::QUEUE);
    // Whether the simulator serves: known once the poller has built the
    // source (`auto` decides there), and read by SIGHUP.
    let simulated = Arc::new(AtomicBool::new(false));
    start_judge(&latest, bounds, &config, &rules, &simulated, work_rx)?;
    let threads = Threads {
        latest: latest.clone(),
        simulated: simulated.clone(),
        reloads: reload_rx,
        work,
    };
    let retune = start_poller(plan, &config, rules, threads, engines)?;
    let (notifier, am_stats) = start_notifier(notify, &latest)?;
    let shared = Arc::new(http::guard::Shared::default());
    #[cfg(feature = "tls")]
    let web_hups = start_web_watcher(web, &config, &shared)?;
    #[cfg(not(feature = "tls"))]
    let web_hups: Option<mpsc::Sender<()>> = None;

    let server = server(&config, latest, bounds, shared, am_stats);
    let hups = load::reloader(config, simulated, reloads, retune)
        .map_err(|e| Error::Runtime(format!("cannot start the reload thread: {e}")))?;
    let code = unix_signals::serve_until_stopped(signals, listeners, probes, server, move || {
        let _ = hups.send(());
        if let Some(h) = &web_hups {
            let _ = h.send(());
        }
    });
    if let Some(n) = notifier {
        n.stop(unix_signals::FLUSH);
    }
    Ok(code)
}

/// What the Alertmanager notifier sends, where `--alertmanager.url` asks
/// for it: the credentials read now, the instance as Prometheus would
/// name this target.
fn notify_plan(config: &Config, listeners: &[TcpListener]) -> Result<Option<notify::Plan>, Error> {
    let options = &config.alertmanager;
    if options.targets.is_empty() || config.once {
        return Ok(None);
    }
    let authorization = match &options.auth {
        None => None,
        Some(a) => Some(a.header().map_err(ConfigError)?),
    };
    let instance = options.instance.clone().unwrap_or_else(|| {
        let port = listeners.first().and_then(|l| l.local_addr().ok());
        format!(
            "{}:{}",
            config::host_name(),
            port.map_or(9400, |a| a.port())
        )
    });
    let runbook_base = match &config.runbook_base {
        Some(base) => base.replace("{{ $labels.instance }}", &instance),
        None => format!(
            "{}://{instance}{}",
            config.scheme(),
            alerts::promql::OWN_RUNBOOKS
        ),
    };
    Ok(Some(notify::Plan {
        peers: peers(options)?,
        options: options.clone(),
        authorization,
        tick: config.interval,
        job: config.scrape_job.clone(),
        instance,
        runbook_base,
    }))
}

/// Each Alertmanager's TLS peer, `None` for http://, the CA file read now:
/// a bad one is one line naming it.
fn peers(options: &config::alertmanager::Alertmanager) -> Result<Vec<Option<Peer>>, ConfigError> {
    #[cfg(feature = "alertmanager-tls")]
    if let Some(ca) = &options.ca_file {
        let flag = "--alertmanager.ca-file";
        let config = webconfig::client_config::client_config(flag, ca)
            .map_err(|e| ConfigError(e.to_string()))?;
        let peer = |t: &config::alertmanager::Target| {
            let peer = Peer::new(config.clone(), t.host());
            peer.map_err(|e| ConfigError(format!("--alertmanager.url {:?}: {e}", t.url)))
        };
        return (options.targets.iter())
            .map(|t| t.tls.then(|| peer(t)).transpose())
            .collect();
    }
    Ok(options.targets.iter().map(|_| None).collect())
}

/// The notifier's threads and the counts the metrics show.
fn start_notifier(
    plan: Option<notify::Plan>,
    latest: &Arc<Latest>,
) -> Result<(Option<notify::Notifier>, Option<&'static notify::Stats>), Error> {
    let Some(plan) = plan else {
        return Ok((None, None));
    };
    let urls: Vec<String> = plan.options.targets.iter().map(|t| t.url.clone()).collect();
    let stats = notify::Stats::leak(&urls);
    let n = notify::Notifier::start(plan, latest.clone(), stats)
        .map_err(|e| Error::Runtime(format!("cannot start the Alertmanager notifier: {e}")))?;
    Ok((n, Some(stats)))
}

/// The listeners, bound before anything starts; none for `--once`.
fn bind_all(config: &Config) -> Result<(Vec<TcpListener>, Option<TcpListener>), Error> {
    if config.once {
        return Ok((Vec::new(), None));
    }
    let probes = match config.probe_address {
        Some(a) => Some(listen::bind("--web.probe-address", a)?),
        None => None,
    };
    let listeners = match config.systemd_socket {
        true => listen::systemd()?,
        false => (config.listen.iter())
            .map(|&a| listen::bind("--web.listen-address", a))
            .collect::<Result<_, _>>()?,
    };
    Ok((listeners, probes))
}

/// What the poller's thread shares with the others.
struct Threads {
    latest: Arc<Latest>,
    /// Whether the simulator serves, set once the poller built the source.
    simulated: Arc<AtomicBool>,
    reloads: mpsc::Receiver<poller::Reload>,
    work: mpsc::SyncSender<poller::Work>,
}

/// The poller's thread: it builds the source (`auto` decides there), then
/// collects, with the engine reader's models (`engines`), whose handle
/// for SIGHUP it returns.
fn start_poller(
    plan: pipeline::Plan,
    config: &Config,
    rules: Vec<alerts::Rule>,
    t: Threads,
    engines: fill::engines::Options,
) -> Result<Option<Retune>, Error> {
    let (interval, collectors) = (config.interval, config.collectors);
    let (pod_labels, reads) = (config.kubernetes.pod_labels, config.reads());
    let dcgm = config.dcgm.clone();
    let engines = Reader::start(engines, config.engine_file.is_some())
        .map_err(|e| Error::Runtime(format!("cannot start the engine reader thread: {e}")))?;
    let retune = engines.as_ref().map(Reader::retune);
    std::thread::Builder::new()
        .name("poller".into())
        .spawn(move || {
            let source = plan.build(unix_now());
            t.simulated
                .store(source.kind() == SourceKind::Sim, Ordering::Relaxed);
            Poller::new(source, interval)
                .with_collectors(collectors)
                .with_dcgm(dcgm)
                .with_reads(reads)
                .with_pod_labels(pod_labels)
                .with_engines(engines)
                .run(rules, t.latest, t.reloads, t.work)
        })
        .map(|_| retune)
        .map_err(|e| Error::Runtime(format!("cannot start the poller thread: {e}")))
}

/// The HTTP server, serving what the poller publishes.
fn server(
    config: &Config,
    latest: Arc<Latest>,
    bounds: Bounds,
    shared: Arc<http::guard::Shared>,
    alertmanager: Option<&'static notify::Stats>,
) -> Rc<Server> {
    let ctx = Context {
        latest,
        telemetry_path: config.telemetry_path.clone(),
        runbook_base: config.served_runbook_base(),
        bounds,
        alertmanager,
    };
    let guard = http::guard::Guard::new(shared, config.open_probes);
    let routes = Box::new(Routes::new(ctx));
    Rc::new(Server::new(routes, config.limits.clone(), guard))
}

/// The dcgm collector's fields it cannot serve, said once with why, and
/// what its counters file got wrong without stopping us.
fn dcgm_left_out(config: &Config) {
    for d in config.dcgm.iter() {
        for (name, why) in &d.left_out {
            log::info!("dcgm: {name} is left out: {why}");
        }
        for warning in &d.warnings {
            log::warn!("dcgm: {warning}");
        }
    }
}

/// The configuration with the rules' collectors read where they are not
/// served, unless a flag turned one off by name; and its notes said.
fn reading_rules(config: Config, rules: &[alerts::Rule]) -> Config {
    for note in &config.notes {
        log::warn!("{note}");
    }
    Config {
        rule_reads: (rules.iter())
            .fold(Collectors::NONE, |s, r| s.or(r.needs()))
            .and(config.off.complement()),
        ..config
    }
}

/// Rules that read a collector turned off by name never fire: say so
/// once.
fn warn_inactive(rules: &[alerts::Rule], config: &Config) {
    for r in rules {
        let off: Vec<&str> = r
            .needs()
            .iter()
            .filter(|&c| !config.reads().has(c))
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
}

type Listener = async_io::Async<TcpListener>;

/// The listeners, watched by the HTTP thread's reactor, each logged with
/// the address it is bound to.
fn watched(
    listeners: Vec<TcpListener>,
    probes: Option<TcpListener>,
    config: &Config,
) -> Result<(Vec<Listener>, Option<Listener>), Error> {
    let watch = |l: TcpListener, scheme: &str, path: &str, what: &str| {
        let at = l.local_addr().map_err(|e| Error::Runtime(e.to_string()))?;
        log::info!("serving {what} on {}", url(scheme, at, path));
        async_io::Async::new(l).map_err(|e| Error::Runtime(e.to_string()))
    };
    // The probes first: whoever waits for the metrics line finds both.
    let probes = match probes {
        Some(p) => Some(watch(p, "http", "/healthz", "probes")?),
        None => None,
    };
    let (scheme, path) = (config.scheme(), config.telemetry_path.as_str());
    let listeners = (listeners.into_iter())
        .map(|l| watch(l, scheme, path, "GPU metrics"))
        .collect::<Result<_, _>>()?;
    Ok((listeners, probes))
}

/// The alert evaluator's thread; once the first collection is judged, the
/// simulator prints its table.
fn start_judge(
    latest: &Arc<Latest>,
    bounds: Bounds,
    config: &Config,
    rules: &[alerts::Rule],
    simulated: &Arc<AtomicBool>,
    work_rx: mpsc::Receiver<poller::Work>,
) -> Result<(), Error> {
    let sim_flag = simulated.clone();
    let rules = rules.to_vec();
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
        .spawn(move || alerting.run(rules, work_rx))
        .map(drop)
        .map_err(|e| Error::Runtime(format!("cannot start the alert evaluator: {e}")))
}

/// The web config, published, and the thread that reloads it on SIGHUP
/// or when its files change.
#[cfg(feature = "tls")]
fn start_web_watcher(
    web: Option<(webconfig::Watch, webconfig::Loaded)>,
    config: &Config,
    shared: &Arc<http::guard::Shared>,
) -> Result<Option<mpsc::Sender<()>>, Error> {
    let (Some((watch, loaded)), Some(path)) = (web, &config.web_config) else {
        return Ok(None);
    };
    log::info!("--web.config.file {}: {}", path.display(), loaded.summary());
    shared.publish(loaded);
    load::web_watcher(watch, path.clone(), shared.clone())
        .map(Some)
        .map_err(|e| Error::Runtime(format!("cannot start the web config thread: {e}")))
}

/// `--once`: the source's past replayed, one collection, the table.
fn once(plan: pipeline::Plan, rules: Vec<alerts::Rule>, config: &Config, bounds: Bounds) -> u8 {
    let t0 = unix_now();
    let mut poller = Poller::new(plan.build(t0), config.interval)
        .with_collectors(config.collectors)
        .with_dcgm(config.dcgm.clone())
        .with_reads(config.reads())
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

/// The URL to print, with the address as bound (`[::]` is every
/// interface, IPv6 and IPv4).
fn url(scheme: &str, addr: SocketAddr, path: &str) -> String {
    match addr {
        SocketAddr::V6(a) => format!("{scheme}://[{}]:{}{path}", a.ip(), a.port()),
        SocketAddr::V4(a) => format!("{scheme}://{a}{path}"),
    }
}

/// Logs to stderr from now on as `--log.level` and `--log.format` say,
/// each line stamped with the time now.
pub fn init_logger(level: log::LevelFilter, format: base::logger::Format) {
    base::logger::init(level, format, base::time::now_rfc3339);
}
