//! nanoserde skips keys it does not know, so a misspelt field would be
//! ignored without a word. This walks a JSON document's object keys so a
//! reader can reject the ones it does not know, by name.

/// Every object key with its path (`gpus[2].xid_every`), in document
/// order. Structure errors are left to the real
/// parser: the walk stops at the first thing it does not understand.
fn keys(json: &str) -> Vec<String> {
    let mut w = Walk {
        s: json.as_bytes(),
        i: 0,
        out: Vec::new(),
    };
    w.value(String::new(), 0);
    w.out
}

/// The first key of `json` whose path is not in `allowed` (written with
/// bare `[]` for any index), as an error that names it.
pub fn reject_unknown(json: &str, allowed: &[&str]) -> Result<(), String> {
    let pattern = |k: &str| {
        let mut p = String::with_capacity(k.len());
        let mut in_index = false;
        for c in k.chars() {
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
    };
    match keys(json)
        .into_iter()
        .find(|k| !allowed.contains(&pattern(k).as_str()))
    {
        Some(k) => Err(format!("{k}: unknown field")),
        None => Ok(()),
    }
}

struct Walk<'a> {
    s: &'a [u8],
    i: usize,
    out: Vec<String>,
}

/// Deeper than this is no file of ours; stop rather than recurse on.
const MAX_DEPTH: usize = 32;

impl Walk<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.i).copied()
    }

    fn string(&mut self) -> Option<String> {
        self.i += 1; // the opening quote
        let start = self.i;
        while let Some(&c) = self.s.get(self.i) {
            match c {
                b'\\' => self.i += 2,
                b'"' => {
                    let text = String::from_utf8_lossy(self.s.get(start..self.i)?).into_owned();
                    self.i += 1;
                    return Some(text);
                }
                _ => self.i += 1,
            }
        }
        None
    }

    fn value(&mut self, path: String, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => {
                self.i += 1;
                loop {
                    match self.peek()? {
                        b'}' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => self.i += 1,
                        b'"' => {
                            let key = self.string()?;
                            let key = if path.is_empty() {
                                key
                            } else {
                                format!("{path}.{key}")
                            };
                            self.out.push(key.clone());
                            (self.peek()? == b':').then_some(())?;
                            self.i += 1;
                            self.value(key, depth + 1)?;
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut n = 0;
                loop {
                    match self.peek()? {
                        b']' => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' => self.i += 1,
                        _ => {
                            self.value(format!("{path}[{n}]"), depth + 1)?;
                            n += 1;
                        }
                    }
                }
            }
            b'"' => self.string().map(drop),
            _ => {
                // A number or literal: up to the next delimiter.
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|c| !b",]} \t\r\n".contains(c))
                {
                    self.i += 1;
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let k = keys(r#"{"a": 1, "b": [{"c": "x\"}", "d": [1, {"e": null}]}], "f": {"g": true}}"#);
        assert_eq!(k, ["a", "b", "b[0].c", "b[0].d", "b[0].d[1].e", "f", "f.g"]);
        assert_eq!(
            reject_unknown(
                r#"{"gpus":[{},{"tempreature":1}]}"#,
                &["gpus", "gpus[].temperature"]
            ),
            Err("gpus[1].tempreature: unknown field".into())
        );
        assert!(
            reject_unknown(
                r#"{"gpus":[{"temperature":1}]}"#,
                &["gpus", "gpus[].temperature"]
            )
            .is_ok()
        );
        // Broken input stops the walk; the real parser reports it.
        for bad in [
            "",
            "{",
            "{\"a\"",
            "[[[[",
            "{\"a\":}",
            "\u{0}",
            &"[".repeat(10_000),
        ] {
            let _ = keys(bad);
        }
    }
}
