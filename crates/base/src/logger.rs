//! A small stderr logger on the `log` facade, in the spirit of ripgrep's.
//!
//! Every line starts with its time, `ts=` RFC 3339 UTC with milliseconds,
//! then `level=` and `msg=`: logfmt, the default of `--log.format`. With
//! `--log.format json` each line is one JSON object with the keys `ts`,
//! `level` and `msg`, as node_exporter writes them. Messages are free text
//! (the `log` facade carries no fields), so `msg` holds all of it.

use log::{Level, LevelFilter, Log, Metadata, Record};
use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// How lines are written: `--log.format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// `ts=… level=… msg=…`.
    #[default]
    Logfmt,
    /// One JSON object per line.
    Json,
}

impl Format {
    /// The value of `--log.format`; the error names the values it takes.
    pub fn parse(v: &str) -> Result<Format, String> {
        match v {
            "logfmt" => Ok(Format::Logfmt),
            "json" => Ok(Format::Json),
            _ => Err(format!(
                "unknown log format {v:?} (expected logfmt or json)"
            )),
        }
    }
}

struct Logger;

static LOGGER: Logger = Logger;
static JSON: AtomicBool = AtomicBool::new(false);
/// The time of a line as `ts` spells it; given by the caller, as the
/// ground floor imports nothing of the crate (`base::time::now_rfc3339`).
static CLOCK: OnceLock<fn() -> String> = OnceLock::new();

/// Logs to stderr from now on, at `level` and above, in `format`, each
/// line stamped by `clock`.
pub fn init(level: LevelFilter, format: Format, clock: fn() -> String) {
    JSON.store(format == Format::Json, Ordering::Relaxed);
    let _ = CLOCK.set(clock);
    // Setting it twice (tests) is harmless: the first logger stays.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

fn level_name(l: Level) -> &'static str {
    match l {
        Level::Error => "error",
        Level::Warn => "warn",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    }
}

/// One line, its newline included: stamped `ts`, in `format`.
pub fn line(format: Format, ts: &str, level: Level, msg: &str) -> String {
    let level = level_name(level);
    match format {
        Format::Logfmt => format!("ts={ts} level={level} msg={msg}\n"),
        Format::Json => {
            let mut out = format!("{{\"ts\":\"{ts}\",\"level\":\"{level}\",\"msg\":\"");
            json_escape(&mut out, msg);
            out.push_str("\"}\n");
            out
        }
    }
}

/// `s` inside a JSON string: quotes, backslashes and control characters
/// escaped, so a message can never end its object or its line.
fn json_escape(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
}

impl Log for Logger {
    fn enabled(&self, m: &Metadata) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let format = match JSON.load(Ordering::Relaxed) {
            true => Format::Json,
            false => Format::Logfmt,
        };
        let ts = CLOCK.get().map_or_else(String::new, |clock| clock());
        let line = line(format, &ts, r.level(), &r.args().to_string());
        // One write per line, so concurrent lines never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logfmt_lines_start_with_their_time() {
        let ts = "2026-12-02T08:35:01.123Z";
        let l = line(Format::Logfmt, ts, Level::Info, "a b=c");
        assert_eq!(l, "ts=2026-12-02T08:35:01.123Z level=info msg=a b=c\n");
    }

    #[test]
    fn json_lines_are_one_object_each() {
        let msg = "alert X{gpu=\"0\"} firing -> resolved value=1\n\tnext\\ \u{1}";
        let l = line(Format::Json, "2026-12-02T08:35:01.500Z", Level::Error, msg);
        assert_eq!(l.matches('\n').count(), 1, "{l}");
        assert!(l.ends_with("}\n"), "{l}");
        #[derive(nanoserde::DeJson)]
        struct L {
            ts: String,
            level: String,
            msg: String,
        }
        let parsed: L = nanoserde::DeJson::deserialize_json(l.trim_end()).unwrap();
        assert_eq!(parsed.ts, "2026-12-02T08:35:01.500Z");
        assert_eq!(parsed.level, "error");
        assert_eq!(parsed.msg, msg);
    }

    #[test]
    fn only_the_two_formats() {
        assert_eq!(Format::parse("logfmt"), Ok(Format::Logfmt));
        assert_eq!(Format::parse("json"), Ok(Format::Json));
        for bad in ["", "JSON", "text", "logfmt "] {
            let e = Format::parse(bad).unwrap_err();
            assert!(e.contains("logfmt or json") && !e.contains('\n'), "{e}");
        }
    }
}
