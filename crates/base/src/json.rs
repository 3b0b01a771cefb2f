//! JSON: one strict pass that every reader runs first, the keys a struct
//! knows, and nanoserde's errors reworded.
//!
//! nanoserde skips keys it does not know, so a misspelt field would be
//! ignored without a word; and its skipping code panics or loops on some
//! malformed input (`{"x":}`, `{"x":[`). So every document is first read
//! here by [`parse`]: it must be plain JSON (no comments, no trailing
//! commas, nothing after the value, at most 32 levels deep). The files
//! nanoserde reads go through [`read`], which also refuses every key the
//! target struct does not know, by path, so nanoserde only ever sees valid
//! JSON with known keys; the workload stats reader takes the [`Value`]
//! tree itself.

use nanoserde::{DeJson, DeJsonErr, DeJsonErrReason};

/// A JSON value: strings decoded, numbers as written.
#[derive(Debug, PartialEq)]
pub enum Value<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// The number's text, a slice of the document (see [`position_of`]).
    Number(&'a str),
    /// A string, escapes decoded (a lone surrogate as U+FFFD).
    String(String),
    /// An array.
    Array(Vec<Value<'a>>),
    /// An object's members in document order; a repeated key stays.
    Object(Vec<(String, Value<'a>)>),
}

/// Why a document is not plain JSON.
#[derive(Debug, PartialEq)]
pub struct Invalid {
    /// Byte offset of the problem.
    pub at: usize,
    /// The keys of the members being read there, outermost first.
    pub keys: Vec<String>,
    /// The problem is a `/`: a comment, which JSON does not have.
    pub comment: bool,
}

/// Deeper than this is no file of ours; stop rather than recurse on.
const MAX_DEPTH: usize = 32;

/// Reads a whole document strictly.
pub fn parse(json: &str) -> Result<Value<'_>, Invalid> {
    let mut w = Walk {
        json,
        s: json.as_bytes(),
        i: 0,
        keys: Vec::new(),
    };
    match w.value(0) {
        Some(v)
            if {
                w.skip_ws();
                w.i == w.s.len()
            } =>
        {
            Ok(v)
        }
        _ => Err(Invalid {
            at: w.i.min(json.len()),
            comment: w.s.get(w.i) == Some(&b'/'),
            keys: w.keys,
        }),
    }
}

/// `line L column C` of byte offset `at` (columns count bytes, from 1).
pub fn position(json: &str, at: usize) -> String {
    let before = &json.as_bytes()[..at.min(json.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    format!("line {line} column {column}")
}

/// [`position`] of `part`, a slice of `json` such as a [`Value::Number`].
pub fn position_of(json: &str, part: &str) -> String {
    position(
        json,
        (part.as_ptr() as usize).saturating_sub(json.as_ptr() as usize),
    )
}

/// A key as errors show it: as it is when plainly a name, else quoted and
/// cut short, so a file cannot put control characters into the log.
pub fn shown(key: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_.-".contains(c);
    if key.len() <= 64 && !key.is_empty() && key.chars().all(plain) {
        key.to_string()
    } else {
        let cut: String = key.chars().take(64).collect();
        format!("{cut:?}")
    }
}

/// Reads `json` into `T` after the strict pass, refusing any key `T` does
/// not know; the error names the first problem (the key by path, with its
/// array indexes: `gpus[1].tempreature`), or its line and column.
pub fn read<T: DeJson + Shape>(json: &str) -> Result<T, String> {
    let value = parse(json).map_err(|e| format!("{}: not valid JSON", position(json, e.at)))?;
    if let Some(path) = unknown(&value, Fields(T::field), &mut String::new()) {
        return Err(format!("{path}: unknown field"));
    }
    T::deserialize_json(json).map_err(|e| error(&e))
}

/// The first key, in document order, that `fields` does not know.
fn unknown(value: &Value, fields: Fields, path: &mut String) -> Option<String> {
    let len = path.len();
    match value {
        Value::Object(members) => {
            for (key, value) in members {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&shown(key));
                let found = match (fields.0)(key) {
                    None => Some(path.clone()),
                    Some(inner) => unknown(value, inner, path),
                };
                if found.is_some() {
                    return found;
                }
                path.truncate(len);
            }
        }
        // An array holds what its field holds.
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push_str(&format!("[{i}]"));
                if let Some(found) = unknown(item, fields, path) {
                    return Some(found);
                }
                path.truncate(len);
            }
        }
        _ => {}
    }
    None
}

/// nanoserde's messages, reworded to name the field first.
pub fn error(e: &DeJsonErr) -> String {
    let at = format!("line {} column {}", e.line + 1, e.col + 1);
    match &e.msg {
        DeJsonErrReason::MissingKey(k) => format!("{k}: missing (at {at})"),
        DeJsonErrReason::UnexpectedKey(k) => format!("{k}: unexpected key (at {at})"),
        DeJsonErrReason::WrongType(t) | DeJsonErrReason::CannotParse(t) => {
            format!("{at}: wrong type or unreadable value {}", t.trim())
        }
        other => format!("{at}: {other:?}"),
    }
}

/// The keys an object read into a type may hold: a struct's fields, each
/// with what it holds in turn; none for anything else. Declared with
/// [`json_struct!`], never by hand.
pub trait Shape {
    /// What the value under `key` may hold, or `None` when `key` is not a
    /// field.
    fn field(key: &str) -> Option<Fields> {
        let _ = key;
        None
    }
}

/// A type's [`Shape::field`] as a value, to follow a path of keys.
#[derive(Clone, Copy)]
pub struct Fields(pub fn(&str) -> Option<Fields>);

impl Shape for String {}
impl Shape for f64 {}
impl Shape for u32 {}
impl Shape for u64 {}
impl Shape for bool {}

/// Declares a struct nanoserde reads from JSON, and its [`Shape`] from the
/// same field list: the one place a file's keys are written. A field's
/// type is a name, `Option<_>`, `Vec<_>` or `Option<Vec<_>>` of one, and
/// its key is its name unless `#[nserde(rename = "...")]` says otherwise.
/// The caller depends on nanoserde, whose derive it expands to.
#[macro_export]
macro_rules! json_struct {
    ($(#[$($meta:tt)*])* pub struct $name:ident { $($body:tt)* }) => {
        $(#[$($meta)*])*
        #[derive(nanoserde::DeJson)]
        pub struct $name { $($body)* }

        impl $crate::json::Shape for $name {
            fn field(key: &str) -> Option<$crate::json::Fields> {
                $crate::json::json_struct!(@fields key; $($body)*);
                None
            }
        }
    };
    (@fields $k:ident;) => {};
    (@fields $k:ident; #[nserde(rename = $key:literal)] pub $field:ident: $($rest:tt)*) => {
        $crate::json::json_struct!(@type $k; $key; $($rest)*);
    };
    (@fields $k:ident; #[$attr:meta] $($rest:tt)*) => {
        $crate::json::json_struct!(@fields $k; $($rest)*);
    };
    (@fields $k:ident; pub $field:ident: $($rest:tt)*) => {
        $crate::json::json_struct!(@type $k; stringify!($field); $($rest)*);
    };
    (@type $k:ident; $key:expr; $t:ident, $($rest:tt)*) => {
        $crate::json::json_struct!(@found $k; $key; $t; $($rest)*);
    };
    (@type $k:ident; $key:expr; Option<$t:ident>, $($rest:tt)*) => {
        $crate::json::json_struct!(@found $k; $key; $t; $($rest)*);
    };
    (@type $k:ident; $key:expr; Vec<$t:ident>, $($rest:tt)*) => {
        $crate::json::json_struct!(@found $k; $key; $t; $($rest)*);
    };
    (@type $k:ident; $key:expr; Option<Vec<$t:ident>>, $($rest:tt)*) => {
        $crate::json::json_struct!(@found $k; $key; $t; $($rest)*);
    };
    (@found $k:ident; $key:expr; $t:ident; $($rest:tt)*) => {
        if $k == $key {
            return Some($crate::json::Fields(
                <$t as $crate::json::Shape>::field,
            ));
        }
        $crate::json::json_struct!(@fields $k; $($rest)*);
    };
}
pub use crate::json_struct;

struct Walk<'a> {
    json: &'a str,
    s: &'a [u8],
    i: usize,
    /// Keys of the members being read, outermost first.
    keys: Vec<String>,
}

impl<'a> Walk<'a> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|b| b" \t\r\n".contains(b)) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek()? == b).then(|| self.i += 1)
    }

    /// Four hex digits after the `u` at `i`, which then points at the last.
    fn hex4(&mut self) -> Option<u32> {
        let hex = self.s.get(self.i + 1..self.i + 5)?;
        hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
        let unit = u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
        self.i += 4;
        Some(unit)
    }

    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out = String::new();
        // The start of the run of plain characters being read.
        let mut run = self.i;
        loop {
            match *self.s.get(self.i)? {
                b'"' => break,
                b'\\' => {
                    out.push_str(self.json.get(run..self.i)?);
                    self.i += 1;
                    let c = match *self.s.get(self.i)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let unit = self.hex4()?;
                            let low = (0xd800..0xdc00).contains(&unit)
                                && self.s.get(self.i + 1..self.i + 3) == Some(b"\\u");
                            let pair = if low {
                                let at = self.i;
                                self.i += 2;
                                match self.hex4() {
                                    Some(l) if (0xdc00..0xe000).contains(&l) => {
                                        Some(0x10000 + ((unit - 0xd800) << 10) + (l - 0xdc00))
                                    }
                                    // Not a pair: read the next escape on its own.
                                    _ => {
                                        self.i = at;
                                        None
                                    }
                                }
                            } else {
                                None
                            };
                            char::from_u32(pair.unwrap_or(unit)).unwrap_or('\u{fffd}')
                        }
                        _ => return None,
                    };
                    out.push(c);
                    run = self.i + 1;
                }
                c if c < 0x20 => return None,
                _ => {}
            }
            self.i += 1;
        }
        out.push_str(self.json.get(run..self.i)?);
        self.i += 1;
        Some(out)
    }

    fn number(&mut self) -> Option<&'a str> {
        let start = self.i;
        let digits = |w: &mut Self| {
            let start = w.i;
            while w.s.get(w.i).is_some_and(u8::is_ascii_digit) {
                w.i += 1;
            }
            (w.i > start).then_some(())
        };
        if self.s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match self.s.get(self.i)? {
            b'0' => self.i += 1,
            _ => digits(self)?,
        }
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            digits(self)?;
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            digits(self)?;
        }
        self.json.get(start..self.i)
    }

    fn value(&mut self, depth: usize) -> Option<Value<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => {
                self.i += 1;
                let mut members = Vec::new();
                if self.eat(b'}').is_some() {
                    return Some(Value::Object(members));
                }
                loop {
                    let key = self.string()?;
                    self.eat(b':')?;
                    self.keys.push(key);
                    let value = self.value(depth + 1)?;
                    let key = self.keys.pop().unwrap_or_default();
                    members.push((key, value));
                    match self.peek()? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(Value::Object(members));
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                if self.eat(b']').is_some() {
                    return Some(Value::Array(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(Value::Array(items));
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(Value::String),
            b't' | b'f' | b'n' => {
                let (word, value) = [
                    ("true", Value::Bool(true)),
                    ("false", Value::Bool(false)),
                    ("null", Value::Null),
                ]
                .into_iter()
                .find(|(w, _)| self.s[self.i..].starts_with(w.as_bytes()))?;
                self.i += word.len();
                Some(value)
            }
            _ => self.number().map(Value::Number),
        }
    }
}

/// Writes `s` as a JSON string: quoted, with `"`, `\` and control
/// characters escaped.
pub fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    for c in s.chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
#[allow(clippy::question_mark)] // in nanoserde's derived code
mod tests {
    use super::*;

    json_struct! {
        pub struct Doc {
            pub gpus: Option<Vec<Gpu>>,
            #[nserde(rename = "for")]
            pub for_: Option<String>,
            pub n: Option<f64>,
        }
    }

    json_struct! {
        pub struct Gpu {
            pub temperature: Option<f64>,
            pub clock_events: Option<Vec<String>>,
        }
    }

    fn check(json: &str) -> Result<(), String> {
        read::<Doc>(json).map(drop)
    }

    #[test]
    fn known_keys_pass() {
        let ok = r#" {"gpus": [{"temperature": -1.5e3, "clock_events": ["a\"b", "\u00e9"]}, {}], "n": null, "for": "x"} "#;
        assert_eq!(check(ok), Ok(()));
        assert_eq!(check("{}"), Ok(()));
        let doc = read::<Doc>(ok).unwrap();
        assert_eq!((doc.for_.as_deref(), doc.n), (Some("x"), None));
        let gpu = &doc.gpus.unwrap()[0];
        assert_eq!(gpu.temperature, Some(-1500.0));
        assert_eq!(gpu.clock_events.as_deref().unwrap(), ["a\"b", "é"]);
    }

    #[test]
    fn unknown_keys_are_named() {
        assert_eq!(
            check(r#"{"gpus":[{},{"tempreature":1}]}"#),
            Err("gpus[1].tempreature: unknown field".into())
        );
        assert_eq!(
            check(r#"{"gpus":[],"x":{"y":1}}"#),
            Err("x: unknown field".into())
        );
        // A field's name, not its Rust spelling; under a scalar, nothing.
        assert_eq!(check(r#"{"for_":"x"}"#), Err("for_: unknown field".into()));
        assert_eq!(
            check(r#"{"n":[{"a":1}]}"#),
            Err("n[0].a: unknown field".into())
        );
        // Odd keys are quoted, never written raw into a message.
        assert_eq!(
            check("{\"a\\nb\":1}"),
            Err("\"a\\nb\": unknown field".into())
        );
    }

    #[test]
    fn anything_but_plain_json_is_refused() {
        for bad in [
            "",
            "{",
            "{\"n\"",
            "{\"n\":}",
            "{\"n\":[",
            "{\"n\":1,}",
            "[1,]",
            "{\"n\":1} x",
            "{/**/}",
            "{\"n\":01}",
            "{\"n\":1.}",
            "{\"n\":.5}",
            "{\"n\":tru}",
            "{\"n\":\"\\q\"}",
            "{\"n\":\"a\nb\"}",
            "{'n':1}",
            "\u{0}",
            "{\"n\":NaN}",
            "{\"n\":+1}",
            "{\"n\":\"\\u12\"}",
        ] {
            let e = check(bad).unwrap_err();
            assert!(e.contains("not valid JSON"), "{bad:?}: {e}");
        }
        assert_eq!(
            check("{\n  \"n\": }"),
            Err("line 2 column 8: not valid JSON".into())
        );
        let deep = "[".repeat(10_000);
        assert!(check(&deep).is_err());
    }

    #[test]
    fn the_tree_and_where_it_broke() {
        let v = parse(r#"{"a": [1, -2.5e3, "x\u00e9\ud83d\ude00\ud800", true, null], "a": {}}"#);
        assert_eq!(
            v,
            Ok(Value::Object(vec![
                (
                    "a".into(),
                    Value::Array(vec![
                        Value::Number("1"),
                        Value::Number("-2.5e3"),
                        Value::String("xé😀\u{fffd}".into()),
                        Value::Bool(true),
                        Value::Null,
                    ])
                ),
                ("a".into(), Value::Object(Vec::new())),
            ]))
        );
        let e = parse("{\"a\": {\"b\": -}}").unwrap_err();
        assert_eq!(
            (e.at, e.keys, e.comment),
            (13, vec!["a".into(), "b".into()], false)
        );
        let e = parse("{\"a\": 1} // note").unwrap_err();
        assert_eq!(
            (position("{\"a\": 1} // note", e.at), e.comment),
            ("line 1 column 10".into(), true)
        );
        let json = "{\n \"n\": 12}";
        let Ok(Value::Object(m)) = parse(json) else {
            panic!()
        };
        let Value::Number(n) = &m[0].1 else { panic!() };
        assert_eq!(position_of(json, n), "line 2 column 7");
    }
}
