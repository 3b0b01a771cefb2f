//! A flag of the table: its name, value, default and help, and what it
//! does to the configuration.

use crate::config::Config;
use model::Collector;

/// One flag.
#[derive(Clone, Copy)]
pub struct Flag {
    /// `--web.listen-address`.
    pub name: &'static str,
    /// What its value is called in `--help`; empty for a switch.
    pub value: &'static str,
    /// The default as the flag's value would spell it; empty when there is
    /// none to spell (the help then says what happens without the flag).
    pub default: &'static str,
    /// What it does, for `--help`; `{collectors}` and `{off}` stand for
    /// every collector's name and those off by default, from their table.
    pub help: &'static str,
    pub(super) action: Action,
}

/// What a flag does when given.
#[derive(Clone, Copy)]
pub(super) enum Action {
    /// Takes a value; the error is about the value, without the flag.
    Set(fn(&mut Config, &str) -> Result<(), String>),
    Switch(fn(&mut Config)),
    /// A pattern flag, `--collector.NAME` (true) or `--no-collector.NAME`.
    Collector(bool),
    DisableDefaults,
    Help,
    Version,
}

impl Flag {
    /// [`Flag::help`], the collector lists filled in.
    pub fn help(&self) -> String {
        let off: Vec<&str> = Collector::ALL
            .iter()
            .filter(|c| !c.default_on())
            .map(|c| c.name())
            .collect();
        self.help
            .replace("{collectors}", &model::collector_names())
            .replace("{off}", &words(&off))
    }
}

/// `a`, `a and b`, `a, b and c`.
fn words(w: &[&str]) -> String {
    match w.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

pub(super) const fn set(
    name: &'static str,
    value: &'static str,
    default: &'static str,
    help: &'static str,
    f: fn(&mut Config, &str) -> Result<(), String>,
) -> Flag {
    Flag {
        name,
        value,
        default,
        help,
        action: Action::Set(f),
    }
}

pub(super) const fn switch(name: &'static str, help: &'static str, action: Action) -> Flag {
    Flag {
        name,
        value: "",
        default: "",
        help,
        action,
    }
}
