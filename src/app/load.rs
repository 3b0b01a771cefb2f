//! The files the flags name, read at start and again on SIGHUP.

use crate::alerts::{self, Rule};
use crate::base::time::unix_now;
use crate::collector::Reload;
use crate::config::{Config, ConfigError};
use crate::source::Source;
use crate::source::sim::{Scenario, Sim};
use std::sync::mpsc;

/// `--sim.scenario`, or the built-in fleet.
pub fn scenario(config: &Config) -> Result<Scenario, ConfigError> {
    let Some(path) = &config.scenario else {
        return Ok(Scenario::default_fleet());
    };
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("--sim.scenario: cannot read {shown}: {e}")))?;
    Scenario::parse(&text).map_err(|e| ConfigError(format!("--sim.scenario {shown}: {e}")))
}

/// The default rules with `--rules.file` merged in, pages made to
/// survive failures (`rules::cover_failures`).
pub fn rules(config: &Config) -> Result<Vec<Rule>, ConfigError> {
    let rules = match &config.rules_file {
        None => alerts::rules::defaults(),
        Some(path) => {
            let shown = path.display();
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError(format!("--rules.file: cannot read {shown}: {e}")))?;
            alerts::file::load(&text)
                .map_err(|e| ConfigError(format!("--rules.file {shown}: {e}")))?
        }
    };
    Ok(alerts::rules::cover_failures(rules, config.max_stale))
}

/// SIGHUP: re-reads the rules file and, for the simulator, the scenario,
/// and hands them to the collector. A bad file keeps the old ones.
pub fn reload(config: &Config, simulated: bool, to: &mpsc::Sender<Reload>) {
    let read = || -> Result<Reload, ConfigError> {
        let rules = rules(config)?;
        let source = if simulated {
            Some(Box::new(Sim::new(scenario(config)?, unix_now())) as Box<dyn Source>)
        } else {
            None
        };
        Ok(Reload { rules, source })
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
