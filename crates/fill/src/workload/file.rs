//! One stats file: its text read within bounds, then checked field by
//! field (see the module above for the schema). The error names the field,
//! or the line and column for broken JSON, and is one line.

use super::MAX_FILE_BYTES;
use base::json;
use std::collections::HashMap;
use std::fs;
use std::io::Read;

/// Byte counts stay exact as `f64` up to here; no GPU holds 8 PiB.
const MAX_BYTES: u64 = 1 << 53;
const MAX_UUID_LEN: usize = 128;

/// One process's allocator on one GPU, as its file states it.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub gpu_uuid: String,
    pub pid: Option<u32>,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub largest_free_bytes: u64,
    /// Unix seconds; `None` means the file's mtime.
    pub timestamp: Option<f64>,
}

/// A file's stats, its text bounded even if it grows after the stat.
pub(super) fn read(file: fs::File, len: u64) -> Result<Stats, String> {
    let too_big = |n: u64| format!("{n} bytes; a stats file is at most {MAX_FILE_BYTES}");
    if len > MAX_FILE_BYTES {
        return Err(too_big(len));
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("unreadable: {e}"))?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(text.len() as u64));
    }
    parse(&text)
}

/// A scalar member of a stats file.
enum Value {
    Str(String),
    Unsigned(u64),
    Negative(i64),
    Float(f64),
    Bool,
    Null,
}

/// Reads one stats file's text. The error names the field (or the line and
/// column, for broken JSON). Never panics, whatever the input.
pub fn parse(text: &str) -> Result<Stats, String> {
    let doc = json::parse(text).map_err(|e| {
        let at = json::position(text, e.at);
        match e.keys.first() {
            _ if e.comment => format!("{at}: comments are not JSON"),
            Some(key) => format!("{}: {at}: not valid JSON", json::shown(key)),
            None => format!("{at}: not valid JSON"),
        }
    })?;
    let json::Value::Object(members) = doc else {
        let start = text.len() - text.trim_start_matches([' ', '\t', '\r', '\n']).len();
        return Err(format!(
            "{}: a stats file is one JSON object",
            json::position(text, start)
        ));
    };
    let mut fields: HashMap<String, Value> = HashMap::new();
    for (raw, value) in members {
        let key = json::shown(&raw);
        let value = match value {
            json::Value::String(s) => Value::Str(s),
            json::Value::Number(n) => number(text, n).map_err(|e| format!("{key}: {e}"))?,
            json::Value::Bool(_) => Value::Bool,
            json::Value::Null => Value::Null,
            json::Value::Object(_) | json::Value::Array(_) => {
                return Err(format!("{key}: nested values are not part of the schema"));
            }
        };
        if fields.insert(raw, value).is_some() {
            return Err(format!("{key}: appears twice"));
        }
    }
    stats(&mut fields)
}

/// A number as written: a whole one as an integer when it fits one.
fn number(text: &str, n: &str) -> Result<Value, String> {
    let out_of_range = |_| format!("{}: {n} is out of range", json::position_of(text, n));
    if n.contains(['.', 'e', 'E']) {
        // The strict pass let only JSON's number syntax through.
        Ok(Value::Float(n.parse().unwrap_or(f64::NAN)))
    } else if n.starts_with('-') {
        n.parse().map(Value::Negative).map_err(out_of_range)
    } else {
        n.parse().map(Value::Unsigned).map_err(out_of_range)
    }
}

fn stats(f: &mut HashMap<String, Value>) -> Result<Stats, String> {
    let gpu_uuid = match f.remove("gpu_uuid") {
        Some(Value::Str(u)) if !u.trim().is_empty() && u.len() <= MAX_UUID_LEN => u.trim().into(),
        Some(Value::Str(_)) => {
            return Err(format!(
                "gpu_uuid: empty or over {MAX_UUID_LEN} bytes; expected a UUID such as GPU-…"
            ));
        }
        None | Some(Value::Null) => return Err("gpu_uuid: missing".into()),
        Some(_) => return Err("gpu_uuid: expected a string".into()),
    };
    let reserved_bytes = bytes(f, "reserved_bytes")?;
    let allocated_bytes = bytes(f, "allocated_bytes")?;
    let largest_free_bytes = bytes(f, "largest_free_bytes")?;
    if allocated_bytes > reserved_bytes {
        return Err(format!(
            "allocated_bytes: {allocated_bytes} is more than reserved_bytes {reserved_bytes}"
        ));
    }
    if largest_free_bytes > reserved_bytes {
        return Err(format!(
            "largest_free_bytes: {largest_free_bytes} is more than reserved_bytes {reserved_bytes}"
        ));
    }
    let pid = match f.remove("pid") {
        None | Some(Value::Null) => None,
        Some(Value::Unsigned(n)) => {
            Some(u32::try_from(n).map_err(|_| format!("pid: {n} is not a process id"))?)
        }
        Some(_) => return Err("pid: expected a process id (a whole number)".into()),
    };
    let timestamp = match f.remove("timestamp") {
        None | Some(Value::Null) => None,
        Some(Value::Unsigned(n)) if n > 0 => Some(n as f64),
        Some(Value::Float(x)) if x.is_finite() && x > 0.0 => Some(x),
        Some(_) => return Err("timestamp: expected Unix seconds, a positive number".into()),
    };
    Ok(Stats {
        gpu_uuid,
        pid,
        reserved_bytes,
        allocated_bytes,
        largest_free_bytes,
        timestamp,
    })
}

fn bytes(f: &mut HashMap<String, Value>, key: &str) -> Result<u64, String> {
    let n = match f.remove(key) {
        None | Some(Value::Null) => return Err(format!("{key}: missing")),
        Some(Value::Unsigned(n)) => n,
        // `-0` reads as a negative integer; it is 0.
        Some(Value::Negative(0)) => 0,
        Some(Value::Negative(n)) => return Err(format!("{key}: {n} is negative")),
        Some(Value::Float(x)) if x < 0.0 => return Err(format!("{key}: {x} is negative")),
        Some(Value::Float(x)) if x.is_finite() && x.fract() == 0.0 && x <= MAX_BYTES as f64 => {
            x as u64
        }
        Some(Value::Float(x)) => return Err(format!("{key}: {x} is not a whole number of bytes")),
        Some(Value::Str(_) | Value::Bool) => {
            return Err(format!("{key}: expected a number of bytes"));
        }
    };
    if n > MAX_BYTES {
        return Err(format!("{key}: {n} is over 2^53"));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{GPU0, doc};
    use super::*;

    #[test]
    fn parse_reads_the_schema() {
        let s = parse(
            r#"{"gpu_uuid": " GPU-abc ", "pid": 42, "reserved_bytes": 100,
                "allocated_bytes": 60, "largest_free_bytes": 3e1,
                "timestamp": 1764500000.5, "rank": 3, "host": "n1", "x": null}"#,
        )
        .unwrap();
        assert_eq!(
            s,
            Stats {
                gpu_uuid: "GPU-abc".into(),
                pid: Some(42),
                reserved_bytes: 100,
                allocated_bytes: 60,
                largest_free_bytes: 30,
                timestamp: Some(1764500000.5),
            }
        );
        let s = parse(
            r#"{"gpu_uuid":"u","reserved_bytes":9007199254740992,"allocated_bytes":-0,
                "largest_free_bytes":0,"pid":null}"#,
        )
        .unwrap();
        assert_eq!(
            (s.pid, s.timestamp, s.allocated_bytes, s.reserved_bytes),
            (None, None, 0, 1 << 53)
        );
    }

    #[allow(clippy::too_many_lines)] // a test, one scenario told whole
    #[test]
    fn parse_errors_name_the_field() {
        // A valid file with `key` set to `value` (added if new, left out if
        // empty).
        let with = |key: &str, value: &str| {
            let mut fields = vec![
                ("gpu_uuid", r#""u""#),
                ("reserved_bytes", "10"),
                ("allocated_bytes", "5"),
                ("largest_free_bytes", "5"),
            ];
            match fields.iter_mut().find(|(k, _)| *k == key) {
                Some(f) => f.1 = value,
                None => fields.push((key, value)),
            }
            let body: Vec<String> = fields
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| format!("{k:?}: {v}"))
                .collect();
            format!("{{{}}}", body.join(", "))
        };
        assert!(parse(&with("pid", "1")).is_ok());
        let cases = [
            ("gpu_uuid", "", "gpu_uuid: missing"),
            ("gpu_uuid", "7", "gpu_uuid: expected a string"),
            ("gpu_uuid", r#"" ""#, "gpu_uuid: empty"),
            ("reserved_bytes", "", "reserved_bytes: missing"),
            ("reserved_bytes", "null", "reserved_bytes: missing"),
            (
                "reserved_bytes",
                r#""10""#,
                "reserved_bytes: expected a number",
            ),
            (
                "reserved_bytes",
                "true",
                "reserved_bytes: expected a number",
            ),
            ("allocated_bytes", "-5", "allocated_bytes: -5 is negative"),
            (
                "largest_free_bytes",
                "-1.5",
                "largest_free_bytes: -1.5 is negative",
            ),
            (
                "reserved_bytes",
                "10.5",
                "reserved_bytes: 10.5 is not a whole",
            ),
            (
                "reserved_bytes",
                "1e400",
                "reserved_bytes: inf is not a whole",
            ),
            (
                "reserved_bytes",
                "9007199254740993",
                "reserved_bytes: 9007199254740993 is over",
            ),
            (
                "reserved_bytes",
                "99999999999999999999",
                "reserved_bytes: line 1",
            ),
            (
                "allocated_bytes",
                "11",
                "allocated_bytes: 11 is more than reserved_bytes 10",
            ),
            ("largest_free_bytes", "11", "largest_free_bytes: 11 is more"),
            ("pid", "-1", "pid: expected"),
            ("pid", "4294967296", "pid: 4294967296"),
            ("timestamp", r#""now""#, "timestamp: expected"),
            ("timestamp", "0", "timestamp: expected"),
            ("extra", r#"{"a": 1}"#, "extra: nested"),
            ("extra", "[1]", "extra: nested"),
            ("extra", "}", "extra: "),
            ("extra", "-", "extra: "),
        ];
        for (key, value, want) in cases {
            let json = with(key, value);
            let e = parse(&json).unwrap_err();
            assert!(
                e.starts_with(want),
                "{json}: {e:?} should start with {want:?}"
            );
        }
        let twice = with("pid", "1").replace("\"pid\"", "\"reserved_bytes\"");
        assert!(
            parse(&twice)
                .unwrap_err()
                .starts_with("reserved_bytes: appears twice")
        );
    }

    #[test]
    fn parse_never_panics_on_garbage() {
        let nested = "[".repeat(100_000);
        let comments = "/**/".repeat(16_000);
        let ok = doc(GPU0, 10, 5, 5, 1.0);
        let garbage = [
            "",
            " ",
            "\0",
            "null",
            "[]",
            "1",
            "\"gpu_uuid\"",
            "{",
            "{\"",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":}",
            "{\"a\":[",
            "{\"a\":{",
            "{\"a\":1,,}",
            "{,}",
            "{\"a\":-}",
            "{\"a\":1e}",
            "{\"a\":1.2.3}",
            "{\"a\":nul}",
            "{\"a\":\"\\u12\"}",
            "{\"a\":\"\\ud800\"}",
            "{\"a\":\"\\",
            "{}}",
            "{} {}",
            "\u{feff}{}",
            &nested,
            &comments,
            "{\"a\":1}//",
            "{\"a\":1/*",
        ];
        for g in garbage {
            assert!(parse(g).is_err(), "{g:?} parsed");
        }
        assert!(parse(&comments).unwrap_err().contains("comments"));
        let e = parse("{\"a\\nb\\u001b\": {}}").unwrap_err();
        assert!(e.starts_with(r#""a\nb\u{1b}": nested"#), "{e}");
        let long = format!("{{\"{}\": []}}", "k".repeat(100));
        assert!(
            parse(&long)
                .unwrap_err()
                .starts_with(&format!("{:?}:", "k".repeat(64)))
        );
        // Mutations of a valid file, and random JSON-ish text: whatever
        // parses must still satisfy the checks.
        let alphabet: Vec<char> = "{}[]\":,.-+eE0123456789 \\/ntrufalsu_gpid\u{e9}\0"
            .chars()
            .collect();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let base: Vec<char> = ok.chars().collect();
        for round in 0..20_000 {
            let text: String = if round % 2 == 0 {
                let mut t = base.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() as usize) % t.len();
                    t[at] = alphabet[(next() as usize) % alphabet.len()];
                }
                t.into_iter().collect()
            } else {
                (0..next() % 48)
                    .map(|_| alphabet[(next() as usize) % alphabet.len()])
                    .collect()
            };
            if let Ok(s) = parse(&text) {
                assert!(s.allocated_bytes <= s.reserved_bytes, "{text:?}");
                assert!(s.largest_free_bytes <= s.reserved_bytes, "{text:?}");
            }
        }
    }
}
