//! The flags' values: parsed and checked, each problem one line without
//! the flag's name (the flag table adds it).

use super::SourceKind;
use base::time::{parse_duration, parse_iso_time};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// A limit of at least one, at most a million.
pub(super) fn count(v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|n| (1..=1_000_000).contains(n))
        .ok_or_else(|| format!("{v:?} is not a number from 1 to 1000000"))
}

/// A duration above 0.
pub(super) fn timeout(v: &str) -> Result<Duration, String> {
    match parse_duration(v)? {
        d if d.is_zero() => Err("must be above 0".into()),
        d => Ok(d),
    }
}

/// A moment: RFC 3339 (`2026-12-06T10:00:00Z`) or Unix seconds
/// (`1796551200`, a fraction allowed), as Unix seconds.
pub(super) fn unix_time(v: &str) -> Result<f64, String> {
    let mut parts = v.split('.');
    let whole = parts.next().unwrap_or_default();
    let plain = |d: &str| !d.is_empty() && d.len() <= 12 && d.bytes().all(|b| b.is_ascii_digit());
    let unix = plain(whole) && parts.next().is_none_or(plain) && parts.next().is_none();
    let t = if unix {
        v.parse().ok()
    } else {
        parse_iso_time(v)
    };
    t.ok_or_else(|| {
        format!("{v:?} is not a time: RFC 3339 like 2026-12-06T10:00:00Z, or Unix seconds")
    })
}

/// A path's characters (RFC 3986 `pchar` and `/`): no space, control
/// character, quote, `<`, `>`, `?` or `#`, nothing that is not ASCII.
pub(super) fn path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@%".contains(&b)
}

/// `--web.telemetry-path`: a plain absolute path, at most 256 bytes. It
/// reaches the status page's links and the log, so no `//` start (a link
/// to another host), no `?`, `#`, space, quote or control character.
pub(super) fn telemetry_path(v: &str) -> Result<String, String> {
    let plain = v.starts_with('/') && !v.starts_with("//") && v.bytes().all(path_char);
    if !plain || v.len() > 256 {
        return Err(format!(
            "{v:?} must be a plain absolute path like /metrics: a / first (not //), \
             at most 256 letters, digits and -._~!$&'()*+,;=:@%/"
        ));
    }
    Ok(v.into())
}

/// `--alerts.runbook-base-url`: it becomes links on the status page and
/// in `/alerts`, so only `http://` or `https://` with a host, or a
/// relative path (a leading `//` is another host, so it counts as
/// absolute; a `javascript:` or any other scheme is refused). Either may
/// hold `{{ $labels.NAME }}`, which Prometheus expands in the printed
/// rules.
pub(super) fn runbook_base(v: &str) -> Result<String, String> {
    let bad = |why: &str| {
        Err(format!(
            "{v:?} {why}: use http(s)://HOST/..., a relative path, and {{{{ $labels.NAME }}}}"
        ))
    };
    // The text without its templates, each checked on the way.
    let mut rest = v;
    let mut plain = String::with_capacity(v.len());
    while let Some(i) = rest.find("{{") {
        plain.push_str(&rest[..i]);
        let Some(end) = rest[i..].find("}}") else {
            return bad("has an unclosed {{");
        };
        let inner = rest[i + 2..i + end].trim_matches(' ');
        let name = inner.strip_prefix("$labels.").unwrap_or_default();
        let ident = name
            .bytes()
            .enumerate()
            .all(|(k, b)| b == b'_' || b.is_ascii_alphabetic() || (k > 0 && b.is_ascii_digit()));
        if name.is_empty() || !ident {
            return bad("has a template other than {{ $labels.NAME }}");
        }
        // A label value may be anything: stand in a safe character.
        plain.push('x');
        rest = &rest[i + end + 2..];
    }
    plain.push_str(rest);
    if plain.contains("}}")
        || !plain
            .bytes()
            .all(|b| path_char(b) || b == b'?' || b == b'#')
    {
        return bad("holds a character a link cannot");
    }
    let lower = plain.to_ascii_lowercase();
    let after_scheme = ["http://", "https://"]
        .iter()
        .find_map(|s| lower.strip_prefix(s));
    match after_scheme {
        Some(host) if host.is_empty() || host.starts_with(['/', '?', '#']) => bad("has no host"),
        Some(_) => Ok(v.into()),
        None if plain.starts_with("//") => bad("is another host without a scheme"),
        // A ':' before any '/', '?' or '#' is a scheme (javascript:, data:).
        None if plain
            .split(['/', '?', '#'])
            .next()
            .is_some_and(|s| s.contains(':')) =>
        {
            bad("has a scheme other than http or https")
        }
        None => Ok(v.into()),
    }
}

/// `auto` is `None`.
pub(super) fn parse_source(s: &str) -> Result<Option<SourceKind>, String> {
    match s {
        "auto" => Ok(None),
        "nvml" => Ok(Some(SourceKind::Nvml)),
        "smi" => Ok(Some(SourceKind::Smi)),
        "sim" => Ok(Some(SourceKind::Sim)),
        _ => Err(format!(
            "unknown source {s:?} (expected auto, nvml, smi or sim)"
        )),
    }
}

/// Where a listener binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// `:PORT`: every interface, IPv6 and IPv4 on one dual-stack `[::]`
    /// socket, or `0.0.0.0` on a host without IPv6, as node_exporter does.
    Any(u16),
    /// `HOST:PORT`, resolved once, at start.
    At(SocketAddr),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Listen::Any(port) => write!(f, ":{port}"),
            Listen::At(a) => write!(f, "{a}"),
        }
    }
}

pub(super) fn parse_listen(s: &str) -> Result<Listen, String> {
    if let Some(port) = s.strip_prefix(':') {
        return port
            .parse()
            .map(Listen::Any)
            .map_err(|_| format!("{s:?} is not :PORT"));
    }
    if let Ok(a) = s.parse() {
        return Ok(Listen::At(a));
    }
    // Host names resolve once, at start ("localhost:9400").
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(Listen::At)
        .ok_or_else(|| format!("{s:?} is not HOST:PORT"))
}
