//! exporter-toolkit's web config file (`--web.config.file`), in its current
//! schema (prometheus/exporter-toolkit `web/tls_config.go`, `Config`):
//!
//! ```yaml
//! tls_server_config:   { cert, cert_file, key, key_file, client_ca, client_ca_file,
//!                        client_auth_type, client_allowed_sans, min_version, max_version,
//!                        cipher_suites, prefer_server_cipher_suites, curve_preferences }
//! http_server_config:  { http2, headers: { <5 allowed names>: value } }
//! basic_auth_users:    { user: bcrypt hash }
//! rate_limit:          { interval: Go duration, burst: int }
//! ```
//!
//! Parsed with `saphyr-parser`'s event stream into a small tree, then
//! validated key by key. Every problem is one line that names the key
//! (`tls_server_config.min_version: ...`); an unknown key is refused, as
//! exporter-toolkit's `yaml.UnmarshalStrict` refuses it. Values that rustls
//! cannot honour (TLS 1.0/1.1, CBC or static-RSA suites, P-521, ML-KEM with
//! ring) and client-auth modes that accept unverified certificates are
//! refused here, before anything listens.
//!
//! Relative paths resolve against the directory of the file, as
//! exporter-toolkit's `SetDirectory` does.

use super::yaml::{Node, check_keys, get, tree};
use super::{
    CipherSuite, ClientAuth, Curve, Error, Header, MAX_HEADER_BYTES, Pem, RateLimit, TlsConfig,
    TlsVersion, User, WebConfig, bcrypt, err,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

impl WebConfig {
    /// Parses and validates the text of a web config file.
    pub fn parse(text: &str, dir: &Path) -> Result<WebConfig, Error> {
        let root = tree(text)?;
        let mut c = WebConfig::default();
        let Some(root) = root else {
            return Ok(c); // an empty file: no TLS, no auth (as exporter-toolkit)
        };
        let top = root.map("")?;
        check_keys(
            "",
            top,
            &[
                "tls_server_config",
                "http_server_config",
                "basic_auth_users",
                "rate_limit",
            ],
        )?;
        if let Some(n) = get(top, "tls_server_config") {
            c.tls = tls(n, dir, &mut c)?;
        }
        if let Some(n) = get(top, "http_server_config") {
            let m = n.map("http_server_config")?;
            check_keys("http_server_config", m, &["http2", "headers"])?;
            if let Some(v) = get(m, "http2") {
                let b = v.boolean("http_server_config.http2")?;
                c.notes.push(format!(
                    "http_server_config.http2 ({b}) is ignored: the exporter serves HTTP/1.1 only"
                ));
                c.http2 = Some(b);
            }
            if let Some(h) = get(m, "headers") {
                c.headers = headers(h)?;
            }
        }
        if let Some(n) = get(top, "basic_auth_users") {
            c.users = users(n)?;
        }
        if let Some(n) = get(top, "rate_limit") {
            c.rate_limit = rate_limit(n)?;
        }
        Ok(c)
    }
}

const TLS_KEYS: &[&str] = &[
    "cert",
    "key",
    "client_ca",
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "cipher_suites",
    "curve_preferences",
    "min_version",
    "max_version",
    "prefer_server_cipher_suites",
    "client_allowed_sans",
];

const TLS: &str = "tls_server_config";

fn tls(n: &Node, dir: &Path, c: &mut WebConfig) -> Result<Option<TlsConfig>, Error> {
    let m = n.map(TLS)?;
    check_keys(TLS, m, TLS_KEYS)?;
    let s = |name: &str| string(m, name);
    let (cert, cert_file) = (s("cert")?, s("cert_file")?);
    let (key, key_file) = (s("key")?, s("key_file")?);
    let (client_ca, client_ca_file) = (s("client_ca")?, s("client_ca_file")?);
    let auth = s("client_auth_type")?;
    // exporter-toolkit's TLSConfig.IsEnabled: TLS is on when any of these is set.
    let enabled = [
        &cert,
        &cert_file,
        &key,
        &key_file,
        &client_ca,
        &client_ca_file,
        &auth,
    ]
    .iter()
    .any(|v| v.is_some());
    if !enabled {
        if !m.is_empty() {
            c.notes.push(format!(
                "{TLS} sets no certificate, key, client CA or client_auth_type: TLS is off"
            ));
        }
        return Ok(None);
    }
    let mut given = |inline, file, inline_key, file_key| {
        pem(inline, file, [inline_key, file_key], dir, &mut c.files)
    };
    let cert = given(cert, cert_file, "cert", "cert_file")?.ok_or_else(|| {
        err(
            &format!("{TLS}.cert_file"),
            "missing: set cert_file or cert",
        )
    })?;
    let key = given(key, key_file, "key", "key_file")?
        .ok_or_else(|| err(&format!("{TLS}.key_file"), "missing: set key_file or key"))?;
    let client_ca = given(client_ca, client_ca_file, "client_ca", "client_ca_file")?;

    let client_auth = client_auth(m, auth.as_deref(), client_ca.is_some(), c)?;
    let client_allowed_sans = client_allowed_sans(m, client_auth)?;
    let min_version = version(m, "min_version", TlsVersion::Tls12)?;
    let max_version = version(m, "max_version", TlsVersion::Tls13)?;
    if min_version > max_version {
        return Err(err(
            &format!("{TLS}.min_version"),
            "is above max_version: no TLS version is left",
        ));
    }

    let cipher_suites = cipher_suites(m, min_version)?;
    let prefer_server_cipher_suites = match get(m, "prefer_server_cipher_suites") {
        Some(v) => v.boolean(&format!("{TLS}.prefer_server_cipher_suites"))?,
        None => true, // exporter-toolkit's default
    };

    let curves = curves(m)?;

    Ok(Some(TlsConfig {
        cert,
        key,
        client_ca,
        client_auth,
        client_allowed_sans,
        min_version,
        max_version,
        cipher_suites,
        prefer_server_cipher_suites,
        curves,
    }))
}

/// A PEM given inline or by a file (relative to the web config's
/// directory, and watched), not both.
fn pem(
    inline: Option<String>,
    file: Option<String>,
    [inline_key, file_key]: [&str; 2],
    dir: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<Option<Pem>, Error> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(err(
            &format!("{TLS}.{inline_key}"),
            format!("set both {inline_key} and {file_key}; give one"),
        )),
        (Some(t), None) => Ok(Some(Pem::Inline(t))),
        (None, Some(f)) => {
            let p = dir.join(f); // join keeps an absolute path as it is
            files.push(p.clone());
            Ok(Some(Pem::File(p)))
        }
        (None, None) => Ok(None),
    }
}

/// A string of `tls_server_config`, `None` when empty.
fn string(m: &[(String, Node)], name: &str) -> Result<Option<String>, Error> {
    match get(m, name) {
        Some(v) => Ok(Some(v.string(&format!("{TLS}.{name}"))?).filter(|s| !s.is_empty())),
        None => Ok(None),
    }
}

/// `client_auth_type`, held to the client CA: a CA needs verification,
/// verification needs a CA.
fn client_auth(
    m: &[(String, Node)],
    auth: Option<&str>,
    client_ca: bool,
    c: &mut WebConfig,
) -> Result<ClientAuth, Error> {
    let auth_key = format!("{TLS}.client_auth_type");
    let mut client_auth = match auth {
        None | Some("NoClientCert") => ClientAuth::None,
        Some("VerifyClientCertIfGiven") => ClientAuth::VerifyIfGiven,
        Some("RequireAndVerifyClientCert") => ClientAuth::RequireAndVerify,
        Some(v @ ("RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert")) => {
            return Err(err(
                &auth_key,
                format!(
                    "{v} accepts a client certificate without verifying it, which proves nothing \
                     (any self-signed certificate, with any SAN, passes); use \
                     RequireAndVerifyClientCert or VerifyClientCertIfGiven with client_ca_file"
                ),
            ));
        }
        Some(v) => {
            return Err(err(
                &auth_key,
                format!(
                    "unknown value {v:?} (expected NoClientCert, RequestClientCert, RequireAnyClientCert, \
                     VerifyClientCertIfGiven or RequireAndVerifyClientCert)"
                ),
            ));
        }
    };
    match (client_auth, client_ca) {
        (ClientAuth::None, true) => {
            let k = if get(m, "client_ca").is_some() {
                "client_ca"
            } else {
                "client_ca_file"
            };
            return Err(err(
                &format!("{TLS}.{k}"),
                "a client CA is set but client_auth_type is NoClientCert (set RequireAndVerifyClientCert)",
            ));
        }
        (ClientAuth::RequireAndVerify, false) => {
            return Err(err(
                &auth_key,
                "RequireAndVerifyClientCert needs client_ca_file or client_ca to verify against",
            ));
        }
        (ClientAuth::VerifyIfGiven, false) => {
            // Go verifies a given certificate against the system roots,
            // which no client certificate chains to; we ask for none.
            c.notes.push(format!(
                "{auth_key} is VerifyClientCertIfGiven without a client CA: \
                 client certificates are not requested"
            ));
            client_auth = ClientAuth::None;
        }
        _ => {}
    }
    Ok(client_auth)
}

fn client_allowed_sans(
    m: &[(String, Node)],
    client_auth: ClientAuth,
) -> Result<Vec<String>, Error> {
    let mut client_allowed_sans = Vec::new();
    if let Some(v) = get(m, "client_allowed_sans") {
        let k = format!("{TLS}.client_allowed_sans");
        for (i, item) in v.seq(&k)?.iter().enumerate() {
            client_allowed_sans.push(item.string(&format!("{k}[{i}]"))?);
        }
        // exporter-toolkit: SANs need a certificate that must be present.
        if client_auth != ClientAuth::RequireAndVerify {
            return Err(err(
                &k,
                "needs client_auth_type RequireAndVerifyClientCert (a client may otherwise \
                 send no certificate, leaving no SAN to match)",
            ));
        }
    }
    Ok(client_allowed_sans)
}

fn version(m: &[(String, Node)], name: &str, default: TlsVersion) -> Result<TlsVersion, Error> {
    let k = format!("{TLS}.{name}");
    match string(m, name)?.as_deref() {
        None => Ok(default),
        Some("TLS12") => Ok(TlsVersion::Tls12),
        Some("TLS13") => Ok(TlsVersion::Tls13),
        Some(v @ ("TLS10" | "TLS11")) => Err(err(
            &k,
            format!(
                "{v} is refused: TLS 1.0 and 1.1 are broken and rustls serves TLS12 and TLS13 only"
            ),
        )),
        Some(v) => Err(err(
            &k,
            format!("unknown TLS version {v:?} (expected TLS12 or TLS13)"),
        )),
    }
}

fn cipher_suites(m: &[(String, Node)], min_version: TlsVersion) -> Result<Vec<CipherSuite>, Error> {
    let mut cipher_suites = Vec::new();
    let mut named = 0;
    if let Some(v) = get(m, "cipher_suites") {
        let k = format!("{TLS}.cipher_suites");
        for (i, item) in v.seq(&k)?.iter().enumerate() {
            let name = item.string(&format!("{k}[{i}]"))?;
            named += 1;
            if let Some(cs) = cipher_suite(&name, &format!("{k}[{i}]"))?
                && !cipher_suites.contains(&cs)
            {
                cipher_suites.push(cs);
            }
        }
        if named > 0 && cipher_suites.is_empty() && min_version == TlsVersion::Tls12 {
            return Err(err(
                &k,
                "names only TLS 1.3 suites, leaving TLS 1.2 without any (list a TLS 1.2 suite or set min_version: TLS13)",
            ));
        }
    }
    Ok(cipher_suites)
}

fn curves(m: &[(String, Node)]) -> Result<Vec<Curve>, Error> {
    let mut curves = Vec::new();
    if let Some(v) = get(m, "curve_preferences") {
        let k = format!("{TLS}.curve_preferences");
        for (i, item) in v.seq(&k)?.iter().enumerate() {
            let ik = format!("{k}[{i}]");
            let c = match item.string(&ik)?.as_str() {
                "X25519" => Curve::X25519,
                "CurveP256" => Curve::P256,
                "CurveP384" => Curve::P384,
                "CurveP521" => {
                    return Err(err(
                        &ik,
                        "CurveP521 is refused: rustls (ring) offers X25519, CurveP256 and CurveP384",
                    ));
                }
                "X25519MLKEM768" => {
                    return Err(err(
                        &ik,
                        "X25519MLKEM768 is refused: rustls with ring has no ML-KEM (it offers X25519, CurveP256 and CurveP384)",
                    ));
                }
                other => {
                    return Err(err(
                        &ik,
                        format!("unknown curve {other:?} (expected X25519, CurveP256, CurveP384)"),
                    ));
                }
            };
            if !curves.contains(&c) {
                curves.push(c);
            }
        }
    }
    Ok(curves)
}

/// Go's cipher suite names (`tls.CipherSuites()` and
/// `tls.InsecureCipherSuites()`): `Some` for a TLS 1.2 suite rustls has,
/// `None` for a TLS 1.3 suite (always on, not configurable, as in Go).
fn cipher_suite(name: &str, key: &str) -> Result<Option<CipherSuite>, Error> {
    use CipherSuite::*;
    Ok(Some(match name {
        "TLS_AES_128_GCM_SHA256" | "TLS_AES_256_GCM_SHA384" | "TLS_CHACHA20_POLY1305_SHA256" => {
            return Ok(None);
        }
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => EcdheEcdsaAes128Gcm,
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => EcdheEcdsaAes256Gcm,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => EcdheEcdsaChacha20,
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => EcdheRsaAes128Gcm,
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => EcdheRsaAes256Gcm,
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
            EcdheRsaChacha20
        }
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"
        | "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"
        | "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"
        | "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA"
        | "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"
        | "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256"
        | "TLS_RSA_WITH_AES_128_CBC_SHA"
        | "TLS_RSA_WITH_AES_256_CBC_SHA"
        | "TLS_RSA_WITH_AES_128_CBC_SHA256"
        | "TLS_RSA_WITH_3DES_EDE_CBC_SHA"
        | "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA" => {
            return Err(err(
                key,
                format!(
                    "{name} is refused: CBC suites are not offered by rustls (use an ECDHE GCM or CHACHA20 suite)"
                ),
            ));
        }
        "TLS_RSA_WITH_AES_128_GCM_SHA256" | "TLS_RSA_WITH_AES_256_GCM_SHA384" => {
            return Err(err(
                key,
                format!(
                    "{name} is refused: static RSA key exchange has no forward secrecy and rustls does not offer it"
                ),
            ));
        }
        "TLS_RSA_WITH_RC4_128_SHA"
        | "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA"
        | "TLS_ECDHE_RSA_WITH_RC4_128_SHA" => {
            return Err(err(key, format!("{name} is refused: RC4 is broken")));
        }
        other => return Err(err(key, format!("unknown cipher suite {other:?}"))),
    }))
}

/// exporter-toolkit's `extraHTTPHeaders`: the settable names and, for two,
/// the only values.
const HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

fn headers(n: &Node) -> Result<Vec<Header>, Error> {
    const K: &str = "http_server_config.headers";
    let mut out = Vec::new();
    for (name, v) in n.map(K)? {
        let k = format!("{K}.{name}");
        let Some(&(name, allowed)) = HEADERS.iter().find(|(h, _)| h == name) else {
            return Err(err(
                &k,
                "this header can not be configured (only Strict-Transport-Security, X-Content-Type-Options, \
                 X-Frame-Options, X-XSS-Protection, Content-Security-Policy)",
            ));
        };
        let value = v.string_or_empty(&k)?;
        if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(err(&k, "a header value can not hold control characters"));
        }
        if value.is_empty() {
            continue; // "Unset if blank."
        }
        if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
            return Err(err(
                &k,
                format!("invalid value {value:?} (expected one of {allowed:?})"),
            ));
        }
        out.push(Header { name, value });
    }
    let bytes: usize = out.iter().map(|h| h.name.len() + h.value.len() + 4).sum();
    if bytes > MAX_HEADER_BYTES {
        return Err(err(
            K,
            format!("{bytes} bytes of headers; at most {MAX_HEADER_BYTES} in all"),
        ));
    }
    Ok(out)
}

fn users(n: &Node) -> Result<Vec<User>, Error> {
    const K: &str = "basic_auth_users";
    let mut out = Vec::new();
    for (name, v) in n.map(K)? {
        let k = format!("{K}.{name}");
        if name.contains(':') {
            return Err(err(
                &k,
                "a user name can not contain ':' (Basic auth splits at the first ':')",
            ));
        }
        let hash = v.string_or_empty(&k)?;
        let hash = bcrypt::Hash::parse(&hash).map_err(|e| err(&k, e.to_string()))?;
        out.push(User {
            name: name.clone(),
            hash,
        });
    }
    Ok(out)
}

/// Refuses a user whose bcrypt cost is above `max`
/// (`--web.bcrypt-max-cost`): each wrong password for it would hold the
/// one bcrypt thread that long.
pub(super) fn check_costs(users: &[User], max: u32) -> Result<(), Error> {
    let Some(u) = users.iter().find(|u| u.hash.cost() > max) else {
        return Ok(());
    };
    let cost = u.hash.cost();
    Err(err(
        &format!("basic_auth_users.{}", u.name),
        format!(
            "bcrypt cost {cost} is above the limit of {max} (--web.bcrypt-max-cost): each wrong \
             password would hold the bcrypt thread {}x as long as at cost {max}; make the hash \
             with htpasswd -B -C {max} or lower, or raise the flag",
            1u64 << (cost - max),
        ),
    ))
}

fn rate_limit(n: &Node) -> Result<Option<RateLimit>, Error> {
    const K: &str = "rate_limit";
    let m = n.map(K)?;
    check_keys(K, m, &["interval", "burst"])?;
    let interval = match get(m, "interval") {
        None => Duration::ZERO,
        Some(v) => duration(v, &format!("{K}.interval"))?,
    };
    let burst = match get(m, "burst") {
        None => 0,
        Some(v) => v.int(&format!("{K}.burst"))?,
    };
    if interval.is_zero() {
        return Ok(None); // "set to 0 to disable rate limiter"
    }
    if burst <= 0 {
        return Err(err(
            &format!("{K}.burst"),
            format!(
                "{burst} lets no request through (golang.org/x/time/rate with burst 0 refuses all); use at least 1"
            ),
        ));
    }
    let burst = u32::try_from(burst).map_err(|_| err(&format!("{K}.burst"), "too large"))?;
    Ok(Some(RateLimit { interval, burst }))
}

/// A Go `time.Duration` as go-yaml v2 reads it: a string for
/// `time.ParseDuration` ("1s", "1m30s", "1.5h", "500ms"), or an integer
/// number of nanoseconds.
fn duration(n: &Node, key: &str) -> Result<Duration, Error> {
    let Node::Scalar { value, plain } = n else {
        return Err(err(key, "expected a duration such as 1s or 500ms"));
    };
    if *plain && !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        let ns: u64 = value
            .parse()
            .map_err(|_| err(key, format!("{value} is too large")))?;
        return Ok(Duration::from_nanos(ns));
    }
    parse_go_duration(value).ok_or_else(|| {
        err(
            key,
            format!("invalid duration {value:?} (expected e.g. 1s, 500ms, 1m30s)"),
        )
    })
}

/// Go's `time.ParseDuration` for non-negative durations.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let ns_per = match &rest[..unit_len] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += value * ns_per;
        rest = &rest[unit_len..];
    }
    // Go's limit: about 290 years.
    (total <= i64::MAX as f64).then(|| Duration::from_nanos(total.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(y: &str) -> Result<WebConfig, Error> {
        WebConfig::parse(y, Path::new("/etc/x"))
    }

    fn bad(y: &str) -> String {
        let e = parse(y).expect_err(y);
        let s = e.to_string();
        assert!(!s.contains('\n'), "{s}");
        s
    }

    #[test]
    fn durations() {
        let d = |s| parse_go_duration(s);
        assert_eq!(d("1s"), Some(Duration::from_secs(1)));
        assert_eq!(d("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(d("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(d("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(d("300us"), Some(Duration::from_micros(300)));
        assert_eq!(d("2µs"), Some(Duration::from_micros(2)));
        assert_eq!(d("0"), Some(Duration::ZERO));
        for bad in ["", "1", "s", "-1s", "1x", "1.s.", ".s", "1s2"] {
            assert_eq!(d(bad), None, "{bad}");
        }
    }

    #[test]
    fn full_schema() {
        let c = parse(
            r#"
tls_server_config:
  cert_file: server.crt
  key_file: /abs/server.key
  client_ca_file: ca/ca.pem
  client_auth_type: RequireAndVerifyClientCert
  client_allowed_sans: [prom.example.net, "10.0.0.1"]
  min_version: TLS12
  max_version: TLS13
  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]
  prefer_server_cipher_suites: false
  curve_preferences: [CurveP256, X25519]
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
    Content-Security-Policy: ""
basic_auth_users:
  dave: $2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq
rate_limit:
  interval: 100ms
  burst: 5
"#,
        )
        .unwrap();
        let t = c.tls.unwrap();
        assert_eq!(t.cert, Pem::File("/etc/x/server.crt".into()));
        assert_eq!(t.key, Pem::File("/abs/server.key".into()));
        assert_eq!(t.client_ca, Some(Pem::File("/etc/x/ca/ca.pem".into())));
        assert_eq!(t.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!(t.client_allowed_sans, ["prom.example.net", "10.0.0.1"]);
        assert_eq!(
            t.cipher_suites,
            [
                CipherSuite::EcdheRsaAes256Gcm,
                CipherSuite::EcdheRsaAes128Gcm
            ]
        );
        assert!(!t.prefer_server_cipher_suites);
        assert_eq!(t.curves, [Curve::P256, Curve::X25519]);
        assert_eq!(c.http2, Some(false));
        assert_eq!(
            c.headers,
            [Header {
                name: "X-Frame-Options",
                value: "deny".into()
            }]
        );
        assert_eq!(c.users.len(), 1);
        assert_eq!(
            c.rate_limit,
            Some(RateLimit {
                interval: Duration::from_millis(100),
                burst: 5
            })
        );
        assert_eq!(c.files.len(), 3);
    }

    #[test]
    fn defaults_and_empty() {
        assert_eq!(parse("").unwrap(), WebConfig::default());
        assert_eq!(parse("# only a comment\n").unwrap(), WebConfig::default());
        assert_eq!(parse("---\n").unwrap(), WebConfig::default());
        let c = parse("tls_server_config:\n  cert: C\n  key: K\n").unwrap();
        let t = c.tls.unwrap();
        assert_eq!(
            (t.min_version, t.max_version),
            (TlsVersion::Tls12, TlsVersion::Tls13)
        );
        assert!(t.prefer_server_cipher_suites);
        assert_eq!(t.client_auth, ClientAuth::None);
        assert!(c.files.is_empty());
        // No certificate, key, CA or auth type: TLS stays off, as in Go.
        assert_eq!(
            parse("tls_server_config:\n  min_version: TLS13\n")
                .unwrap()
                .tls,
            None
        );
        assert_eq!(
            parse("rate_limit:\n  interval: 0\n  burst: 0\n")
                .unwrap()
                .rate_limit,
            None
        );
        assert_eq!(
            parse("rate_limit:\n  interval: 1000000000\n  burst: 2\n")
                .unwrap()
                .rate_limit,
            Some(RateLimit {
                interval: Duration::from_secs(1),
                burst: 2
            })
        );
        // Every client_auth_type value is known; aliases and anchors work.
        let c = parse("a: &x RequireAndVerifyClientCert\n").map(|_| ());
        assert!(c.is_err());
        let c = parse(
            "tls_server_config:\n  cert: C\n  key: K\n  client_ca: CA\n  client_auth_type: VerifyClientCertIfGiven\n",
        )
        .unwrap();
        assert_eq!(c.tls.unwrap().client_auth, ClientAuth::VerifyIfGiven);
        let c = parse("tls_server_config:\n  cert: &c C\n  key: *c\n").unwrap();
        assert_eq!(c.tls.unwrap().key, Pem::Inline("C".into()));
    }

    #[test]
    #[allow(clippy::too_many_lines)] // a test table
    fn every_bad_key_and_value_is_one_line_naming_it() {
        let tls = "tls_server_config:\n  cert_file: c\n  key_file: k\n";
        let cases: &[(&str, &str)] = &[
            ("nope: 1\n", "nope: unknown key"),
            (
                "tls_server_config:\n  cert_filse: c\n",
                "tls_server_config.cert_filse: unknown key",
            ),
            (
                "http_server_config:\n  http3: true\n",
                "http_server_config.http3: unknown key",
            ),
            (
                "rate_limit:\n  every: 1s\n",
                "rate_limit.every: unknown key",
            ),
            (
                "basic_auth_users: [a]\n",
                "basic_auth_users: expected a mapping",
            ),
            (
                "tls_server_config: x\n",
                "tls_server_config: expected a mapping",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  cert_file: d\n",
                "tls_server_config.cert_file: set twice",
            ),
            (
                "tls_server_config:\n  cert_file: \"\"\n  key_file: k\n",
                "tls_server_config.cert_file: missing",
            ),
            (
                "tls_server_config:\n  cert: \"\"\n  key_file: k\n",
                "tls_server_config.cert_file: missing",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key_file: \"\"\n",
                "tls_server_config.key_file: missing",
            ),
            (
                "tls_server_config:\n  cert_file: c\n  key: \"\"\n",
                "tls_server_config.key_file: missing",
            ),
            (
                "tls_server_config:\n  cert: c\n  cert_file: c\n  key: k\n",
                "tls_server_config.cert: set both cert and cert_file",
            ),
            (
                "tls_server_config:\n  cert_file: [a]\n  key: k\n",
                "tls_server_config.cert_file: expected a string",
            ),
            (
                &format!("{tls}  client_auth_type: x\n"),
                "tls_server_config.client_auth_type: unknown value \"x\"",
            ),
            (
                &format!("{tls}  client_auth_type: RequestClientCert\n"),
                "tls_server_config.client_auth_type: RequestClientCert accepts",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAnyClientCert\n  client_ca_file: ca\n"),
                "tls_server_config.client_auth_type: RequireAnyClientCert accepts",
            ),
            (
                &format!("{tls}  client_auth_type: RequireClientCert\n"),
                "tls_server_config.client_auth_type: RequireClientCert accepts",
            ),
            (
                &format!("{tls}  client_auth_type: RequireAndVerifyClientCert\n"),
                "tls_server_config.client_auth_type: RequireAndVerifyClientCert needs client_ca_file",
            ),
            (
                &format!("{tls}  client_ca_file: /dev/null\n"),
                "tls_server_config.client_ca_file: a client CA is set but client_auth_type is NoClientCert",
            ),
            (
                &format!("{tls}  client_ca: x\n"),
                "tls_server_config.client_ca: a client CA is set",
            ),
            (
                &format!("{tls}  client_allowed_sans: [a]\n"),
                "tls_server_config.client_allowed_sans: needs client_auth_type RequireAndVerifyClientCert",
            ),
            (
                &format!(
                    "{tls}  client_ca_file: ca\n  client_auth_type: VerifyClientCertIfGiven\n  client_allowed_sans: [a]\n"
                ),
                "tls_server_config.client_allowed_sans: needs",
            ),
            (
                &format!(
                    "{tls}  client_ca_file: ca\n  client_auth_type: RequireAndVerifyClientCert\n  client_allowed_sans: a\n"
                ),
                "tls_server_config.client_allowed_sans: expected a list",
            ),
            (
                &format!("{tls}  min_version: TLS10\n"),
                "tls_server_config.min_version: TLS10 is refused",
            ),
            (
                &format!("{tls}  min_version: TLS11\n"),
                "tls_server_config.min_version: TLS11 is refused",
            ),
            (
                &format!("{tls}  max_version: TLS11\n"),
                "tls_server_config.max_version: TLS11 is refused",
            ),
            (
                &format!("{tls}  min_version: TLS111\n"),
                "tls_server_config.min_version: unknown TLS version",
            ),
            (
                &format!("{tls}  min_version: TLS13\n  max_version: TLS12\n"),
                "tls_server_config.min_version: is above max_version",
            ),
            (
                &format!("{tls}  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n"),
                "tls_server_config.cipher_suites[0]: TLS_RSA_WITH_AES_128_CBC_SHA is refused: CBC",
            ),
            (
                &format!(
                    "{tls}  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA]\n"
                ),
                "tls_server_config.cipher_suites[1]: TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA is refused",
            ),
            (
                &format!("{tls}  cipher_suites: [TLS_RSA_WITH_AES_128_GCM_SHA256]\n"),
                "tls_server_config.cipher_suites[0]: TLS_RSA_WITH_AES_128_GCM_SHA256 is refused: static RSA",
            ),
            (
                &format!("{tls}  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n"),
                "tls_server_config.cipher_suites[0]: TLS_RSA_WITH_RC4_128_SHA is refused: RC4",
            ),
            (
                &format!("{tls}  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA2048]\n"),
                "tls_server_config.cipher_suites[0]: unknown cipher suite",
            ),
            (
                &format!("{tls}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"),
                "tls_server_config.cipher_suites: names only TLS 1.3 suites",
            ),
            (
                &format!("{tls}  prefer_server_cipher_suites: \"yes\"\n"),
                "tls_server_config.prefer_server_cipher_suites: expected true or false",
            ),
            (
                &format!("{tls}  curve_preferences: [CurveP521]\n"),
                "tls_server_config.curve_preferences[0]: CurveP521 is refused",
            ),
            (
                &format!("{tls}  curve_preferences: [X25519, X25519MLKEM768]\n"),
                "tls_server_config.curve_preferences[1]: X25519MLKEM768 is refused",
            ),
            (
                &format!("{tls}  curve_preferences: [CurveP257]\n"),
                "tls_server_config.curve_preferences[0]: unknown curve",
            ),
            (
                "http_server_config:\n  http2: maybe\n",
                "http_server_config.http2: expected true or false",
            ),
            (
                "http_server_config:\n  headers:\n    Content-Type: foo\n",
                "http_server_config.headers.Content-Type: this header can not be configured",
            ),
            (
                "http_server_config:\n  headers:\n    x-frame-options: deny\n",
                "http_server_config.headers.x-frame-options: this header can not be configured",
            ),
            (
                &format!(
                    "http_server_config:\n  headers:\n    Content-Security-Policy: {}\n",
                    "a".repeat(1000)
                ),
                "http_server_config.headers: 1027 bytes of headers; at most 1024",
            ),
            (
                "http_server_config:\n  headers:\n    X-Frame-Options: foo\n",
                "http_server_config.headers.X-Frame-Options: invalid value \"foo\"",
            ),
            (
                "http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
                "http_server_config.headers.X-Content-Type-Options: invalid value",
            ),
            (
                "http_server_config:\n  headers:\n    X-XSS-Protection: \"1\\r\\nSet-Cookie: a\"\n",
                "http_server_config.headers.X-XSS-Protection: a header value can not hold control characters",
            ),
            (
                "basic_auth_users:\n  john: doe\n",
                "basic_auth_users.john: not a bcrypt hash",
            ),
            (
                "basic_auth_users:\n  john:\n",
                "basic_auth_users.john: not a bcrypt hash",
            ),
            (
                "basic_auth_users:\n  \"a:b\": $2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n",
                "basic_auth_users.a:b: a user name can not contain ':'",
            ),
            (
                "basic_auth_users:\n  x: $2y$03$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n",
                "basic_auth_users.x: bcrypt cost",
            ),
            (
                "rate_limit:\n  interval: 1s\n  burst: 0\n",
                "rate_limit.burst: 0 lets no request through",
            ),
            (
                "rate_limit:\n  interval: 1s\n",
                "rate_limit.burst: 0 lets no request through",
            ),
            (
                "rate_limit:\n  interval: 1s\n  burst: -1\n",
                "rate_limit.burst: -1 lets no request through",
            ),
            (
                "rate_limit:\n  interval: 1s\n  burst: many\n",
                "rate_limit.burst: expected an integer",
            ),
            (
                "rate_limit:\n  interval: -1s\n  burst: 1\n",
                "rate_limit.interval: invalid duration",
            ),
            (
                "rate_limit:\n  interval: soon\n  burst: 1\n",
                "rate_limit.interval: invalid duration",
            ),
            (
                "rate_limit:\n  interval: [1s]\n  burst: 1\n",
                "rate_limit.interval: expected a duration",
            ),
            (
                "basic_auth_users:\n  alice: $2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n  \
                 bob: $2y$10$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n  \
                 'alice': $2y$04$QOYQtfR5/mKPBP/g/kOayu7oRKzQBJiqBhEB5zVbzDsMKHL99clku\n",
                "basic_auth_users.alice: set twice",
            ),
            (
                "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    \
                 X-Frame-Options: sameorigin\n",
                "http_server_config.headers.X-Frame-Options: set twice",
            ),
            ("rate_limit: {}\nrate_limit: {}\n", "rate_limit: set twice"),
            (
                "tls_server_config:\n  cipher_suites: [{a: 1, b: 2, a: 3}]\n",
                "tls_server_config.cipher_suites[0].a: set twice",
            ),
            ("a: 1\nb: 2\nb: 3\na: 4\n", "b: set twice"),
            ("a: [\n", "invalid YAML"),
            ("a: 1\n---\nb: 2\n", "invalid YAML: a second document"),
            ("- 1\n", "expected a mapping"),
            ("? [a]\n: 1\n", "invalid YAML: a list as a mapping key"),
            ("a: *nope\n", "invalid YAML"),
        ];
        for (yaml, want) in cases {
            let got = bad(yaml);
            assert!(
                got.starts_with(want),
                "{yaml:?}\n got: {got}\nwant: {want}..."
            );
        }
    }

    #[test]
    fn bcrypt_costs_above_the_limit_are_refused_naming_the_user() {
        let c = parse(
            "basic_auth_users:\n  ok: $2y$17$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n  \
             carol: $2y$31$2UXri9cIDdgeKjBo4Rlpx.U3ZLDV8X1IxKmsfOvhcM5oXQt/mLmXq\n",
        )
        .unwrap();
        let e = check_costs(&c.users, 17).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(
            e.starts_with(
                "basic_auth_users.carol: bcrypt cost 31 is above the limit of 17 \
                 (--web.bcrypt-max-cost): each wrong password would hold the bcrypt thread \
                 16384x as long as at cost 17"
            ),
            "{e}"
        );
        let e = check_costs(&c.users, 16).unwrap_err().to_string();
        assert!(e.starts_with("basic_auth_users.ok: bcrypt cost 17 is above the limit of 16"));
        assert_eq!(check_costs(&c.users, 31), Ok(()));
    }

    #[test]
    fn depth_and_alias_bombs_are_bounded() {
        let deep = format!("a: {}{}\n", "[".repeat(200), "]".repeat(200));
        assert!(bad(&deep).contains("nested deeper"));
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(bad(&bomb).contains("too many nodes"));
    }

    #[test]
    fn an_alias_bomb_by_bytes_is_refused_before_it_is_copied() {
        // 300 KB aliased 1,000 times would be 300 MB of strings.
        let mut bomb = format!("a: &s {}\nb:\n", "x".repeat(300_000));
        for _ in 0..1_000 {
            bomb.push_str("  - *s\n");
        }
        // The key a, the string, the key b, and two copies fit in 1 MiB;
        // the third copy (line 5) would not, and is refused uncopied.
        assert_eq!(
            bad(&bomb),
            "invalid YAML: expands past 1048576 bytes of strings at line 5 (aliases expanding?)"
        );
        // A string of 300 KB and one copy of it load.
        let three = format!(
            "tls_server_config:\n  cert: &s {}\n  key: *s\n",
            "x".repeat(300_000)
        );
        assert!(parse(&three).is_ok());
    }
}
