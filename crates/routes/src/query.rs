//! The metrics path's query string, node_exporter's way: `collect[]=NAME`
//! (repeatable) keeps only the collectors named, `exclude[]=NAME` drops
//! some; both may be percent-encoded, as Prometheus' `params` send them
//! (`collect%5B%5D=gpm`). Other parameters are ignored. Read in place,
//! without allocating.

use model::{Collector, Collectors, UnknownCollector};

/// Longest collector name, with room to spare.
const NAME_MAX: usize = 16;

/// `collect[]` or `exclude[]` named no collector: the 400's one line.
#[derive(Debug, PartialEq)]
pub struct BadQuery<'a> {
    pub key: &'static str,
    /// The value as sent, before decoding.
    pub value: &'a str,
}

/// The collectors a scrape asks for: those `collect[]` names (all when it
/// names none), less those `exclude[]` names.
pub fn collectors(query: &str) -> Result<Collectors, BadQuery<'_>> {
    if query.is_empty() {
        // A scraper's: no splitting (a hundred instructions) for nothing.
        return Ok(Collectors::ALL);
    }
    let (mut only, mut except) = (Collectors::NONE, Collectors::NONE);
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, set) = if decodes_to(key, b"collect[]") {
            ("collect[]", &mut only)
        } else if decodes_to(key, b"exclude[]") {
            ("exclude[]", &mut except)
        } else {
            continue;
        };
        let mut buf = [0u8; NAME_MAX];
        let c = decode(value, &mut buf)
            .and_then(|name| std::str::from_utf8(name).ok())
            .and_then(Collector::from_name)
            .ok_or(BadQuery { key, value })?;
        *set = set.with(c);
    }
    let only = if only.is_empty() {
        Collectors::ALL
    } else {
        only
    };
    Ok(except.iter().fold(only, Collectors::without))
}

impl BadQuery<'_> {
    /// The message, written into `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = writeln!(out, "{}: {}", self.key, UnknownCollector(self.value));
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `s` percent-decoded into `buf`; `None` if it does not fit or holds a
/// bad escape.
fn decode<'b>(s: &str, buf: &'b mut [u8; NAME_MAX]) -> Option<&'b [u8]> {
    let (b, mut i, mut n) = (s.as_bytes(), 0, 0);
    while i < b.len() {
        let byte = match b[i] {
            b'%' => {
                let v = hex(*b.get(i + 1)?)? << 4 | hex(*b.get(i + 2)?)?;
                i += 2;
                v
            }
            other => other,
        };
        *buf.get_mut(n)? = byte;
        n += 1;
        i += 1;
    }
    Some(&buf[..n])
}

fn decodes_to(s: &str, want: &[u8]) -> bool {
    let mut buf = [0u8; NAME_MAX];
    decode(s, &mut buf) == Some(want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Collector::{Fans, Gpm, Xid};

    #[test]
    fn collect_and_exclude() {
        let ok = |q| collectors(q).unwrap();
        assert_eq!(ok(""), Collectors::ALL);
        assert_eq!(ok("x=1&collect"), Collectors::ALL);
        assert_eq!(
            ok("collect[]=gpm&collect%5B%5D=xid&collect%5b%5d=f%61ns"),
            Collectors::NONE.with(Gpm).with(Xid).with(Fans)
        );
        assert_eq!(ok("exclude[]=gpm"), Collectors::ALL.without(Gpm));
        assert_eq!(ok("collect[]=gpm&exclude%5B%5D=gpm"), Collectors::NONE);
        for (q, key, value) in [
            ("collect[]=gpus", "collect[]", "gpus"),
            ("collect[]=", "collect[]", ""),
            ("exclude%5B%5D=%zz", "exclude[]", "%zz"),
            (
                "collect[]=averyveryverylongname",
                "collect[]",
                "averyveryverylongname",
            ),
            ("collect[]=gpm%", "collect[]", "gpm%"),
        ] {
            assert_eq!(collectors(q), Err(BadQuery { key, value }), "{q}");
        }
        let mut out = Vec::new();
        collectors("collect[]=gpus").unwrap_err().write(&mut out);
        let line = String::from_utf8(out).unwrap();
        assert!(
            line.starts_with("collect[]: unknown collector \"gpus\""),
            "{line}"
        );
        assert_eq!(line.matches('\n').count(), 1);
    }
}
