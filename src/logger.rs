//! A small stderr logger on the `log` facade, in the spirit of ripgrep's.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;

struct Logger;

static LOGGER: Logger = Logger;

/// Logs to stderr from now on, at `level` and above.
pub fn init(level: LevelFilter) {
    // Setting it twice (tests) is harmless: the first logger stays.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let level = match r.level() {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
            Level::Trace => "trace",
        };
        // One write per line, so concurrent lines never interleave.
        let line = format!("level={level} msg={}\n", r.args());
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {}
}
