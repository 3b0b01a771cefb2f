//! `--alertmanager.*`: where the exporter sends its own alerts, and what
//! it adds to them. Checked when the flags are read; every problem is one
//! line.

use super::flags::MAX_NAME;
use fill::engines::options::endpoint;
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
    /// `https://`: over TLS, the certificate checked against
    /// `--alertmanager.ca-file` and the host.
    pub tls: bool,
}

impl Target {
    /// The host its certificate must name: the authority less its port
    /// (and an IPv6 address's brackets).
    pub fn host(&self) -> &str {
        let host = self.authority.rsplit_once(':').map_or("", |(h, _)| h);
        host.trim_start_matches('[').trim_end_matches(']')
    }
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
    /// `--alertmanager.bearer-token-file` or `--alertmanager.basic-auth-file`,
    /// read at start.
    pub auth: Option<Auth>,
    /// `--alertmanager.ca-file`: the CA certificates an https://
    /// Alertmanager's certificate must chain to, read at start.
    pub ca_file: Option<PathBuf>,
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
            auth: None,
            ca_file: None,
        }
    }
}

/// How the exporter authenticates to Alertmanager: a file each, so that no
/// secret is on the command line.
#[derive(Clone, Debug, PartialEq)]
pub enum Auth {
    /// A bearer token, the file's contents.
    Bearer(PathBuf),
    /// `USER:PASSWORD` on the file's one line.
    Basic(PathBuf),
}

impl Auth {
    /// Its flag.
    pub fn flag(&self) -> &'static str {
        match self {
            Auth::Bearer(_) => "--alertmanager.bearer-token-file",
            Auth::Basic(_) => "--alertmanager.basic-auth-file",
        }
    }

    /// The `Authorization` header line (CRLF included), from the file as
    /// it is now; a bad file is one line naming the flag.
    pub fn header(&self) -> Result<String, String> {
        let (Auth::Bearer(path) | Auth::Basic(path)) = self;
        let fail = |why: &str| format!("{} {}: {why}", self.flag(), path.display());
        let text = base::file::read_config(path, 64 * 1024).map_err(|e| fail(&e.to_string()))?;
        let secret = text.trim();
        if secret.is_empty() || secret.bytes().any(|b| b < b' ' || b == 0x7f) {
            return Err(fail("empty, or a control character in it"));
        }
        match self {
            Auth::Bearer(_) => Ok(format!("Authorization: Bearer {secret}\r\n")),
            Auth::Basic(_) if !secret.contains(':') => Err(fail("not USER:PASSWORD")),
            Auth::Basic(_) => Ok(format!("Authorization: Basic {}\r\n", base64(secret))),
        }
    }
}

/// Standard padded base64 (RFC 4648).
fn base64(s: &str) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            match i <= chunk.len() {
                true => out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char),
                false => out.push('='),
            }
        }
    }
    out
}

/// `--alertmanager.url`: `http[s]://HOST:PORT[/prefix]`.
pub fn target(v: &str) -> Result<Target, String> {
    let https = v.strip_prefix("https://");
    if https.is_some() && !cfg!(feature = "alertmanager-tls") {
        return Err(format!(
            "{v:?}: https:// needs a build with the alertmanager-tls feature; reach Alertmanager over http:// on loopback or the node's network, or through a local TLS proxy"
        ));
    }
    // No path: the root, not the engines' /metrics.
    let rooted = match https.or(v.strip_prefix("http://")) {
        Some(rest) if !rest.contains('/') => format!("http://{rest}/"),
        Some(rest) => format!("http://{rest}"),
        None => v.to_string(),
    };
    let e = endpoint(None, &rooted)?;
    if e.path.contains('?') {
        return Err(format!("{v:?}: a URL with a query is not taken"));
    }
    Ok(Target {
        url: v.to_string(),
        authority: e.authority,
        path: format!("{}/api/v2/alerts", e.path.trim_end_matches('/')),
        tls: https.is_some(),
    })
}

/// The flags together: an https:// Alertmanager needs the CA file, and
/// the CA file an https:// Alertmanager.
pub fn check(a: &Alertmanager) -> Result<(), String> {
    let https = a.targets.iter().find(|t| t.tls);
    match (https, &a.ca_file) {
        (Some(t), None) => Err(format!(
            "--alertmanager.url {:?}: https:// needs --alertmanager.ca-file, the CA certificates its certificate is signed by",
            t.url
        )),
        (None, Some(_)) => Err(
            "--alertmanager.ca-file is for an https:// --alertmanager.url; none is given".into(),
        ),
        _ => Ok(()),
    }
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
        assert_eq!((t.path.as_str(), t.tls), ("/am/api/v2/alerts", false));
        // https:// where TLS is built in, its host the name to verify.
        for (url, host, path) in [
            ("https://am.example:9093", "am.example", "/api/v2/alerts"),
            (
                "https://127.0.0.1:9093/am",
                "127.0.0.1",
                "/am/api/v2/alerts",
            ),
            ("https://[::1]:9093/", "::1", "/api/v2/alerts"),
        ] {
            match target(url) {
                Ok(t) if cfg!(feature = "alertmanager-tls") => {
                    assert_eq!((t.host(), t.path.as_str(), t.tls), (host, path, true));
                    assert_eq!(t.url, url);
                }
                Err(e) if !cfg!(feature = "alertmanager-tls") => {
                    assert!(e.contains("alertmanager-tls feature"), "{e}")
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        for bad in [
            "https://am",
            "https://u:p@am:9093",
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
        // RFC 4648's vectors, and RFC 7617's example.
        for (plain, coded) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v")] {
            assert_eq!(base64(plain), coded);
        }
        assert_eq!(
            base64("Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert!(instance("a b").is_err());
    }

    /// An https:// URL and the CA file come together.
    #[test]
    fn https_and_the_ca_file_come_together() {
        let plain = target("http://am:9093").unwrap();
        let https = Target {
            tls: true,
            ..plain.clone()
        };
        let with = |targets: Vec<Target>, ca: Option<&str>| Alertmanager {
            targets,
            ca_file: ca.map(PathBuf::from),
            ..Alertmanager::default()
        };
        assert!(check(&with(vec![plain.clone()], None)).is_ok());
        assert!(check(&with(vec![plain.clone(), https.clone()], Some("ca.pem"))).is_ok());
        let e = check(&with(vec![plain.clone(), https], None)).unwrap_err();
        assert!(e.contains("needs --alertmanager.ca-file"), "{e}");
        let e = check(&with(vec![plain], Some("ca.pem"))).unwrap_err();
        assert!(e.contains("none is given"), "{e}");
    }
}
