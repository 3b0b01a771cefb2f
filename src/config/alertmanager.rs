//! `--alertmanager.*`: where the exporter sends its own alerts, and what
//! it adds to them. Checked when the flags are read; every problem is one
//! line.

use super::engines::endpoint;
use super::flags::MAX_NAME;
use std::path::PathBuf;
use std::time::Duration;

/// The most Alertmanagers (`--alertmanager.url`).
pub const MAX_TARGETS: usize = 8;
/// The most external labels (`--alertmanager.label`).
pub const MAX_LABELS: usize = 16;

/// The labels the exporter sets itself, which an external label may not
/// replace (Prometheus' external labels never override an alert's).
pub const OWN_LABELS: [&str; 8] = [
    "alertname",
    "severity",
    "job",
    "instance",
    "gpu",
    "uuid",
    "scope",
    "model_name",
];

/// One Alertmanager: where to connect and the path alerts are posted to.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// As given: the `url` label of the notifier's metrics.
    pub url: String,
    /// `HOST:PORT`, connected to.
    pub authority: String,
    /// `<prefix>/api/v2/alerts`.
    pub path: String,
}

/// The `--alertmanager.*` flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Alertmanager {
    /// `--alertmanager.url`: none, and nothing is sent.
    pub targets: Vec<Target>,
    /// `--alertmanager.label`: external labels, in the order given.
    pub labels: Vec<(String, String)>,
    /// `--alertmanager.resend-interval`.
    pub resend: Duration,
    /// `--alertmanager.timeout`: one deadline per post.
    pub timeout: Duration,
    /// `--alertmanager.instance`; by default the host name and the first
    /// listener's port.
    pub instance: Option<String>,
    /// `--alertmanager.queue-capacity`: alerts waiting to be sent.
    pub capacity: usize,
    /// `--alertmanager.bearer-token-file`, read at start.
    pub bearer_token_file: Option<PathBuf>,
}

impl Default for Alertmanager {
    fn default() -> Alertmanager {
        Alertmanager {
            targets: Vec::new(),
            labels: Vec::new(),
            resend: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
            instance: None,
            capacity: 1000,
            bearer_token_file: None,
        }
    }
}

/// `--alertmanager.url`: `http://HOST:PORT[/prefix]`.
pub fn target(v: &str) -> Result<Target, String> {
    if v.starts_with("https://") {
        return Err(format!(
            "{v:?}: https:// is not supported; reach Alertmanager over http:// on loopback or the node's network, or through a local TLS proxy"
        ));
    }
    // No path: the root, not the engines' /metrics.
    let rooted = match v.strip_prefix("http://") {
        Some(rest) if !rest.contains('/') => format!("{v}/"),
        _ => v.to_string(),
    };
    let e = endpoint(None, &rooted)?;
    if e.path.contains('?') {
        return Err(format!("{v:?}: a URL with a query is not taken"));
    }
    Ok(Target {
        url: v.to_string(),
        authority: e.authority,
        path: format!("{}/api/v2/alerts", e.path.trim_end_matches('/')),
    })
}

/// `--alertmanager.label NAME=VALUE`.
pub fn label(v: &str) -> Result<(String, String), String> {
    let Some((name, value)) = v.split_once('=') else {
        return Err(format!("{v:?} is not NAME=VALUE"));
    };
    let mut chars = name.chars();
    let first = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') || name.starts_with("__") {
        return Err(format!(
            "{name:?} is no label name ([a-zA-Z_][a-zA-Z0-9_]*, not __)"
        ));
    }
    if OWN_LABELS.contains(&name) {
        return Err(format!("{name:?} is a label the exporter sets itself"));
    }
    if value.is_empty() || value.len() > MAX_NAME || value.chars().any(char::is_control) {
        return Err(format!(
            "{name:?}'s value must be 1 to {MAX_NAME} bytes without control characters"
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// `--alertmanager.instance`: what Prometheus would call this target.
pub fn instance(v: &str) -> Result<String, String> {
    match v.is_empty() || v.len() > MAX_NAME || v.bytes().any(|b| b <= b' ' || b == b'"') {
        true => Err(format!(
            "{v:?} must be 1 to {MAX_NAME} bytes without spaces or quotes"
        )),
        false => Ok(v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_labels_and_instances() {
        let t = target("http://127.0.0.1:9093").unwrap();
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("127.0.0.1:9093", "/api/v2/alerts")
        );
        let t = target("http://am:9093/am/").unwrap();
        assert_eq!(t.path, "/am/api/v2/alerts");
        for bad in [
            "https://am:9093",
            "am:9093",
            "http://am",
            "http://u:p@am:9093",
            "http://am:9093/x?y=1",
        ] {
            assert!(target(bad).is_err(), "{bad}");
        }
        assert_eq!(label("cluster=eu-1"), Ok(("cluster".into(), "eu-1".into())));
        for bad in [
            "cluster",
            "1a=b",
            "__x=y",
            "instance=x",
            "severity=x",
            "a=",
            "a=b\nc",
        ] {
            assert!(label(bad).is_err(), "{bad}");
        }
        assert!(instance("node-a:9400").is_ok());
        assert!(instance("a b").is_err());
    }
}
