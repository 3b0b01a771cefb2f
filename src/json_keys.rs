//! A strict pass over a JSON document before nanoserde reads it.
//!
//! nanoserde skips keys it does not know, so a misspelt field would be
//! ignored without a word; and its skipping code panics or loops on some
//! malformed input (`{"x":}`, `{"x":[`). So every document is first walked
//! here: it must be plain JSON (no comments, no trailing commas, nothing
//! after the value), and every object key must be one the reader knows.
//! nanoserde then only ever sees valid JSON with known keys.

/// Checks `json` is valid JSON whose keys (by path, with `[]` for any
/// array index) are all in `allowed`; the error names the first problem.
pub fn check(json: &str, allowed: &[&str]) -> Result<(), String> {
    let mut w = Walk {
        s: json.as_bytes(),
        i: 0,
        keys: Vec::new(),
    };
    let valid = w.value(String::new(), 0).is_some() && {
        w.skip_ws();
        w.i == w.s.len()
    };
    if !valid {
        let before = &json.as_bytes()[..w.i.min(json.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        return Err(format!("line {line} column {column}: not valid JSON"));
    }
    match w
        .keys
        .into_iter()
        .find(|k| !allowed.contains(&pattern(k).as_str()))
    {
        Some(k) => Err(format!("{k}: unknown field")),
        None => Ok(()),
    }
}

/// `gpus[2].xid` as `gpus[].xid`.
fn pattern(key: &str) -> String {
    let mut p = String::with_capacity(key.len());
    let mut in_index = false;
    for c in key.chars() {
        in_index = match c {
            '[' => true,
            ']' => false,
            _ => in_index,
        };
        if !(in_index && c.is_ascii_digit()) {
            p.push(c);
        }
    }
    p
}

struct Walk<'a> {
    s: &'a [u8],
    i: usize,
    keys: Vec<String>,
}

/// Deeper than this is no file of ours; stop rather than recurse on.
const MAX_DEPTH: usize = 32;

impl Walk<'_> {
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

    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let start = self.i;
        loop {
            match *self.s.get(self.i)? {
                b'"' => break,
                b'\\' => {
                    self.i += 1;
                    match *self.s.get(self.i)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.s.get(self.i + 1..self.i + 5)?;
                            hex.iter().all(u8::is_ascii_hexdigit).then_some(())?;
                            self.i += 4;
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                _ => {}
            }
            self.i += 1;
        }
        let text = std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .to_string();
        self.i += 1;
        Some(text)
    }

    fn number(&mut self) -> Option<()> {
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
        Some(())
    }

    fn value(&mut self, path: String, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => {
                self.i += 1;
                if self.eat(b'}').is_some() {
                    return Some(());
                }
                loop {
                    let key = self.string()?;
                    let key = if path.is_empty() {
                        key
                    } else {
                        format!("{path}.{key}")
                    };
                    self.keys.push(key.clone());
                    self.eat(b':')?;
                    self.value(key, depth + 1)?;
                    match self.peek()? {
                        b',' => self.i += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                if self.eat(b']').is_some() {
                    return Some(());
                }
                for n in 0.. {
                    self.value(format!("{path}[{n}]"), depth + 1)?;
                    match self.peek()? {
                        b',' => self.i += 1,
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        _ => return None,
                    }
                }
                None
            }
            b'"' => self.string().map(drop),
            b't' | b'f' | b'n' => {
                let word = ["true", "false", "null"]
                    .into_iter()
                    .find(|w| self.s[self.i..].starts_with(w.as_bytes()))?;
                self.i += word.len();
                Some(())
            }
            _ => self.number(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &["gpus", "gpus[].temperature", "gpus[].clock_events", "n"];

    #[test]
    fn known_keys_pass() {
        let ok = r#" {"gpus": [{"temperature": -1.5e3, "clock_events": ["a\"b", "\u00e9"]}, {}], "n": null} "#;
        assert_eq!(check(ok, KEYS), Ok(()));
        assert_eq!(check("{}", KEYS), Ok(()));
    }

    #[test]
    fn unknown_keys_are_named() {
        assert_eq!(
            check(r#"{"gpus":[{},{"tempreature":1}]}"#, KEYS),
            Err("gpus[1].tempreature: unknown field".into())
        );
        assert_eq!(
            check(r#"{"gpus":[],"x":{"y":1}}"#, KEYS),
            Err("x: unknown field".into())
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
        ] {
            let e = check(bad, KEYS).unwrap_err();
            assert!(e.contains("not valid JSON"), "{bad:?}: {e}");
        }
        assert_eq!(
            check("{\n  \"n\": }", KEYS),
            Err("line 2 column 8: not valid JSON".into())
        );
        let deep = "[".repeat(10_000);
        assert!(check(&deep, KEYS).is_err());
    }
}
