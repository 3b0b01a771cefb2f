//! The files the flags name, read at start and again on SIGHUP, off the
//! HTTP thread: each through `base::file::read_config`, so a FIFO, socket
//! or device is refused unread and a JSON file is at most 1 MiB.

use crate::config::engines;
use crate::config::{Config, ConfigError};
use alerts::{self, Rule};
use base::file::{MAX_JSON_BYTES, read_config};
use base::time::unix_now;
use fill::engines::Options as Engines;
use fill::engines::reader::Retune;
use poller::Reload;
use sources::Source;
use sources::sim::{Scenario, Sim};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

/// The text of the JSON file `flag` names, or a one-line error naming
/// both.
fn read_json(flag: &str, path: &Path) -> Result<String, ConfigError> {
    read_config(path, MAX_JSON_BYTES)
        .map_err(|e| ConfigError(format!("{flag} {}: {e}", path.display())))
}

/// `--sim.scenario`, or the built-in fleet, from `--sim.start` if given.
pub fn scenario(config: &Config) -> Result<Scenario, ConfigError> {
    let scenario = match &config.scenario {
        None => Scenario::default_fleet(),
        Some(path) => {
            let text = read_json("--sim.scenario", path)?;
            Scenario::parse(&text)
                .map_err(|e| ConfigError(format!("--sim.scenario {}: {e}", path.display())))?
        }
    };
    match config.sim_start {
        None => Ok(scenario),
        Some(t) => scenario
            .starting_at(t, unix_now())
            .map_err(|e| ConfigError(format!("--sim.start: {e}"))),
    }
}

/// The `--engine.*` flags with `--engine.config` laid over.
pub fn engines(config: &Config) -> Result<Engines, ConfigError> {
    let flags = &config.engines;
    let Some(path) = &config.engine_file else {
        return Ok(flags.clone());
    };
    let text = read_json("--engine.config", path)?;
    engines::with_file(flags, &text)
        .map_err(|e| ConfigError(format!("--engine.config {}: {e}", path.display())))
}

/// The default rules with `--rules.file` merged in, pages made to
/// survive failures (`adjust::cover_failures`), inhibition sources made to
/// outlast what they mute (`inhibit::cover_inhibitions`), the burn rules
/// with the models' own objectives (`engines`).
pub fn rules(config: &Config, engines: &Engines) -> Result<Vec<Rule>, ConfigError> {
    let rules = match &config.rules_file {
        None => alerts::defaults(),
        Some(path) => {
            let text = read_json("--rules.file", path)?;
            alerts::file::load(&text)
                .map_err(|e| ConfigError(format!("--rules.file {}: {e}", path.display())))?
        }
    };
    let rules = alerts::adjust::cover_failures(rules, config.max_stale);
    let rules = alerts::inhibit::cover_inhibitions(rules);
    Ok(alerts::adjust::with_objectives(
        rules,
        &engines.objectives(),
    ))
}

/// SIGHUP: re-reads the rules file, `--engine.config` and, for the
/// simulator, the scenario, and hands them to the poller and the engine
/// reader. A bad file keeps the old ones, all of them.
fn reload(config: &Config, simulated: bool, to: &mpsc::Sender<Reload>, retune: Option<&Retune>) {
    let read = || -> Result<(Reload, Engines), ConfigError> {
        let engines = engines(config)?;
        let rules = rules(config, &engines)?;
        let source = if simulated {
            Some(Box::new(Sim::new(scenario(config)?, unix_now())) as Box<dyn Source>)
        } else {
            None
        };
        Ok((Reload { rules, source }, engines))
    };
    match read() {
        Ok((r, engines)) => {
            log::info!(
                "SIGHUP: reloading the rules{}{}",
                if config.engine_file.is_some() {
                    ", the engine config"
                } else {
                    ""
                },
                if simulated { " and the scenario" } else { "" }
            );
            let _ = to.send(r);
            if let Some(retune) = retune {
                retune.set(engines);
            }
        }
        Err(e) => log::error!("SIGHUP: reload failed, keeping the old configuration: {e}"),
    }
}

/// The least time between the starts of two reloads.
pub const RELOAD_SPACING: std::time::Duration = std::time::Duration::from_secs(1);

/// Starts the thread that reloads on each message; the HTTP thread only
/// sends one per SIGHUP, so a slow file never delays a scrape. Reloads
/// start at most once a [`RELOAD_SPACING`]: SIGHUPs that arrive during a
/// reload or the spacing after it make one more reload, not one each, so
/// a burst of any spacing never keeps the poller replaying the
/// simulator's history. `simulated`: whether the simulator serves, known
/// once the poller has built the source; `retune`: the engine reader's,
/// where it runs.
pub fn reloader(
    config: Config,
    simulated: Arc<AtomicBool>,
    to: mpsc::Sender<Reload>,
    retune: Option<Retune>,
) -> std::io::Result<mpsc::Sender<()>> {
    let (hups, rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("reload".into())
        .spawn(move || {
            while rx.recv().is_ok() {
                while rx.try_recv().is_ok() {}
                let started = std::time::Instant::now();
                reload(
                    &config,
                    simulated.load(Ordering::Relaxed),
                    &to,
                    retune.as_ref(),
                );
                std::thread::sleep(RELOAD_SPACING.saturating_sub(started.elapsed()));
            }
        })?;
    Ok(hups)
}

/// `--web.config.file`, read at start with every file it names: any
/// problem is one line and exit code 2.
#[cfg(feature = "tls")]
pub fn web_config(
    config: &Config,
) -> Result<Option<(webconfig::Watch, webconfig::Loaded)>, ConfigError> {
    let Some(path) = &config.web_config else {
        return Ok(None);
    };
    webconfig::Watch::start(path, config.bcrypt_max_cost)
        .map(Some)
        .map_err(|e| ConfigError(format!("--web.config.file {}: {e}", path.display())))
}

/// How often the web config's files are looked at (a `stat` each): a
/// rotated certificate is served within about this long.
#[cfg(feature = "tls")]
const WEB_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Starts the thread that re-reads the web config when it or a file it
/// names changes, or on each message (SIGHUP), and publishes what loads to
/// `shared`. A file that does not load is logged, and the old
/// configuration stays.
#[cfg(feature = "tls")]
pub fn web_watcher(
    mut watch: webconfig::Watch,
    path: std::path::PathBuf,
    shared: Arc<http::guard::Shared>,
) -> std::io::Result<mpsc::Sender<()>> {
    let (hups, rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("web-config".into())
        .spawn(move || {
            loop {
                let force = match rx.recv_timeout(WEB_POLL) {
                    Ok(()) => true,
                    Err(mpsc::RecvTimeoutError::Timeout) => false,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                };
                match watch.poll(force) {
                    Ok(None) => {}
                    Ok(Some(loaded)) => {
                        log::info!(
                            "--web.config.file {}: reloaded ({})",
                            path.display(),
                            loaded.summary()
                        );
                        shared.publish(loaded);
                    }
                    Err(e) => log::error!(
                        "--web.config.file {}: {e}; keeping the old configuration",
                        path.display()
                    ),
                }
            }
        })?;
    Ok(hups)
}
