//! The web config against the binary, with real clients: `curl`,
//! `openssl s_client` and a real Prometheus, over TLS, with basic auth and
//! with client certificates made at test time (`tests/certs.sh`); gzip;
//! rotation without a restart; bounded handshakes; and exporter-toolkit's
//! own web config files.

use crate::common::{BIN, Exporter, eventually, have, probe, value};
use crate::pki::{odd_files, pki, web_config};
use crate::tls_client;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The test PKI, when `openssl`, `curl` and `htpasswd` are here (see
/// `have`).
fn tools() -> Option<&'static Path> {
    let ok = have("curl", &["--version"]) && have("htpasswd", &["-nbB", "u", "p"]);
    if ok { pki() } else { None }
}

const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

/// `user: hash` lines for `basic_auth_users`, made by `htpasswd -B`
/// (cost 5: fast tests; the cost is the hash's own).
pub(crate) fn users(pairs: &[(&str, &str)]) -> String {
    let mut out = String::from("basic_auth_users:\n");
    for (user, password) in pairs {
        let o = Command::new("htpasswd")
            .args(["-nbBC", "5", user, password])
            .output()
            .unwrap();
        assert!(o.status.success());
        let line = String::from_utf8(o.stdout).unwrap();
        let hash = line.trim().split_once(':').unwrap().1.to_string();
        out.push_str(&format!("  {user}: '{hash}'\n"));
    }
    out
}

/// The exporter on web config `yaml` (written beside the PKI as `name`)
/// and `args`, with a probe listener, once its first collection is in.
fn start(dir: &Path, name: &str, yaml: &str, args: &[&str]) -> Exporter {
    let path = web_config(dir, name, yaml);
    let mut all = vec![
        "--web.config.file",
        path.to_str().unwrap(),
        "--web.probe-address",
        "127.0.0.1:0",
    ];
    all.extend(args);
    let e = Exporter::serving(Command::new(BIN), &all);
    eventually(Duration::from_secs(60), || match probe(&e, "/readyz") {
        // Ready: the first collection in and the simulator's history
        // replayed (which takes a while on a loaded machine).
        Some((200, _)) => Ok(()),
        other => Err(format!("{other:?}\n{}", e.log())),
    });
    e
}

/// What curl got: status (0 when no HTTP answer came: a refused
/// handshake), head and body.
#[derive(Debug)]
struct Got {
    status: u16,
    head: String,
    body: String,
}

/// `curl` over TLS to `path`, trusting the test CA, with `args`.
fn curl(dir: &Path, e: &Exporter, path: &str, args: &[&str]) -> Got {
    let url = format!("https://{}{path}", e.addr);
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-D", "-", "--cacert"])
        .arg(dir.join("ca.crt"))
        .args(args)
        .arg(&url)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let raw = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some((head, body)) = raw.split_once("\r\n\r\n") else {
        return Got {
            status: 0,
            head: String::new(),
            body: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
    };
    Got {
        status: head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0),
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// `openssl s_client` to the exporter with `args`: whether the handshake
/// completed, and what it printed.
fn s_client(dir: &Path, e: &Exporter, args: &[&str]) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("15")
        .args(["openssl", "s_client", "-brief", "-connect"])
        .arg(e.addr.to_string())
        .arg("-CAfile")
        .arg(dir.join("ca.crt"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = crate::common::output_text(&out);
    (text.contains("CONNECTION ESTABLISHED"), text)
}

/// `--cert`/`--key` arguments for client certificate `name`.
fn cert(dir: &Path, name: &str) -> [String; 4] {
    let p = |ext: &str| dir.join(format!("{name}.{ext}")).display().to_string();
    ["--cert".into(), p("crt"), "--key".into(), p("key")]
}

fn strs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

/// `gpu_exporter_tls_handshake_errors_total{reason}` in `metrics`.
fn handshake_errors(metrics: &str, reason: &str) -> f64 {
    let prefix = format!("gpu_exporter_tls_handshake_errors_total{{reason=\"{reason}\"}}");
    value(metrics, &prefix).unwrap_or_else(|| panic!("no {prefix}"))
}

#[test]
fn tls_and_basic_auth_with_curl_and_openssl() {
    let Some(dir) = tools() else { return };
    let yaml = format!("{TLS}{}", users(&[("prom", "s3cret"), ("ops", "0ps")]));
    let e = start(dir, "web-auth.yml", &yaml, &[]);
    let auth = ["-u", "prom:s3cret"];

    // Refused: no credentials, a wrong password, an unknown user. Each is
    // 401 with the challenge; /healthz too, without --web.open-probes.
    // Each from an address of its own, within its share of bcrypts.
    for (i, user) in [None, Some("prom:wrong"), Some("nobody:s3cret")]
        .iter()
        .enumerate()
    {
        let from = format!("127.0.0.{}", i + 2);
        let mut args = vec!["--interface", &from];
        args.extend(user.iter().flat_map(|u| ["-u", u]));
        for path in ["/metrics", "/healthz", "/nope"] {
            let got = curl(dir, &e, path, &args);
            assert_eq!(got.status, 401, "{path} {args:?}: {got:?}");
            assert!(
                got.head
                    .contains("WWW-Authenticate: Basic realm=\"gpu-exporter\""),
                "{got:?}"
            );
        }
    }
    let got = curl(dir, &e, "/metrics", &auth);
    assert_eq!(got.status, 200, "{got:?}");
    assert!(got.body.contains("gpu_up{"), "{got:?}");
    assert!(got.head.contains("Vary: Accept-Encoding"), "{}", got.head);
    assert!(!got.head.contains("Content-Encoding"), "{}", got.head);
    assert_eq!(curl(dir, &e, "/metrics", &["-u", "ops:0ps"]).status, 200);

    // gzip, as curl asks for it; the HEAD of a gzipped answer carries
    // the compressed length.
    let gz = curl(dir, &e, "/metrics", &["-u", "prom:s3cret", "--compressed"]);
    assert_eq!(gz.status, 200);
    assert!(gz.head.contains("Content-Encoding: gzip"), "{}", gz.head);
    assert!(gz.body.contains("gpu_up{"));
    let runbook = "/docs/runbooks/GPULost.md";
    let get = curl(
        dir,
        &e,
        runbook,
        &[
            "-u",
            "prom:s3cret",
            "-H",
            "Accept-Encoding: gzip",
            "-o",
            "/dev/null",
        ],
    );
    let head = curl(
        dir,
        &e,
        runbook,
        &["-u", "prom:s3cret", "-H", "Accept-Encoding: gzip", "-I"],
    );
    let length = |h: &str| {
        h.lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map(str::to_string)
    };
    assert!(head.head.contains("Content-Encoding: gzip"), "{head:?}");
    assert_eq!(length(&head.head), length(&get.head), "{head:?} {get:?}");
    let plain = curl(dir, &e, runbook, &["-u", "prom:s3cret", "-I"]);
    assert!(length(&plain.head) > length(&head.head));

    // Versions: 1.3 and 1.2 connect; 1.0 and 1.1 are refused by the
    // server (OpenSSL 3 is told to offer them, SECLEVEL=0 lifting its own
    // refusal), which says so with an alert, counted as failed handshakes.
    let metrics = || curl(dir, &e, "/metrics", &auth).body;
    let failed = handshake_errors(&metrics(), "failed");
    let (ok, out) = s_client(dir, &e, &["-tls1_3"]);
    assert!(ok && out.contains("Protocol version: TLSv1.3"), "{out}");
    let (ok, out) = s_client(dir, &e, &["-tls1_2"]);
    assert!(ok && out.contains("Protocol version: TLSv1.2"), "{out}");
    for args in [
        &["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"][..],
        &["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"],
        // CBC only: no common suite.
        &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-SHA"],
        // h2 only: no common application protocol.
        &["-alpn", "h2"],
    ] {
        let (ok, out) = s_client(dir, &e, args);
        assert!(!ok, "{args:?} connected: {out}");
        assert!(
            out.contains("alert"),
            "{args:?}: not the server's refusal: {out}"
        );
        // rustls answers an old version with handshake_failure (40), as
        // docs/http-and-security.md says, not protocol_version.
        if args[0].starts_with("-tls1") && args[0] != "-tls1_2" {
            assert!(out.contains("handshake failure"), "{args:?}: {out}");
        }
    }
    let alpn = Command::new("timeout")
        .args([
            "15",
            "openssl",
            "s_client",
            "-alpn",
            "h2,http/1.1",
            "-connect",
        ])
        .arg(e.addr.to_string())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&alpn.stdout);
    assert!(out.contains("ALPN protocol: http/1.1"), "{out}");
    assert_eq!(handshake_errors(&metrics(), "failed"), failed + 4.0);

    // Pipelined requests over TLS, in one record and across several, are
    // answered in order on the kept-alive connection.
    let config = tls_client::config(dir, None, true);
    let mut c = tls_client::Client::connect(e.addr, config);
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic cHJvbTpzM2NyZXQ=\r\n\r\n")
    };
    let mut buf = Vec::new();
    for _ in 0..2 {
        c.send(format!("{}{}{}", get("/healthz"), get("/nope"), get("/readyz")).as_bytes());
        for want in ["HTTP/1.1 200", "HTTP/1.1 404", "HTTP/1.1 200"] {
            c.receive(&mut buf, false);
            assert!(
                buf.starts_with(want.as_bytes()),
                "{:?}",
                String::from_utf8_lossy(&buf)
            );
        }
    }
    for path in ["/healthz", "/readyz"] {
        c.send(get(path).as_bytes());
    }
    for _ in 0..2 {
        c.receive(&mut buf, false);
        assert!(buf.starts_with(b"HTTP/1.1 200"));
    }

    // Plain HTTP on the TLS port is a failed handshake: an alert or a
    // close, never an HTTP answer.
    let mut s = TcpStream::connect(e.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).unwrap_or(0);
    assert!(n == 0 || buf[0] == 0x15, "{:?}", &buf[..n]);
}

#[test]
fn open_probes_and_an_rsa_certificate() {
    let Some(dir) = tools() else { return };
    let yaml = format!(
        "tls_server_config:\n  cert_file: server-rsa.crt\n  key_file: server-rsa.key\n  \
         cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n{}",
        users(&[("prom", "s3cret")])
    );
    let e = start(dir, "web-open.yml", &yaml, &["--web.open-probes"]);
    assert_eq!(curl(dir, &e, "/healthz", &[]).status, 200);
    assert_eq!(curl(dir, &e, "/readyz", &[]).status, 200);
    // dcgm-exporter's chart probes /health: a probe too.
    assert_eq!(curl(dir, &e, "/health", &[]).status, 200);
    assert_eq!(probe(&e, "/health"), Some((200, "OK".to_string())));
    assert_eq!(curl(dir, &e, "/metrics", &[]).status, 401);
    assert_eq!(curl(dir, &e, "/", &[]).status, 401);
    let (ok, out) = s_client(dir, &e, &["-tls1_2"]);
    assert!(ok && out.contains("ECDHE-RSA-AES128-GCM-SHA256"), "{out}");
    // The one TLS 1.2 suite configured: others are refused.
    let (ok, out) = s_client(
        dir,
        &e,
        &["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"],
    );
    assert!(!ok, "{out}");
}

#[test]
fn client_certificates_are_verified() {
    let Some(dir) = tools() else { return };
    let yaml = format!(
        "{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  \
         client_allowed_sans: [prom.example.net]\n"
    );
    let e = start(dir, "web-mtls.yml", &yaml, &[]);
    let good = cert(dir, "client");
    let got = curl(dir, &e, "/metrics", &strs(&good));
    assert_eq!(got.status, 200, "{got:?}");
    let (ok, out) = s_client(dir, &e, &strs(&good));
    assert!(ok, "{out}");

    // Refused: no certificate, another CA's, an expired one, and one of
    // the right CA whose SANs are not allowed; over TLS 1.3 (curl) and
    // TLS 1.2 (s_client).
    let metrics = || curl(dir, &e, "/metrics", &strs(&good)).body;
    let failed = handshake_errors(&metrics(), "failed");
    assert_eq!(curl(dir, &e, "/metrics", &[]).status, 0);
    for name in ["client-wrongca", "client-expired", "client-sans"] {
        let c = cert(dir, name);
        let got = curl(dir, &e, "/metrics", &strs(&c));
        assert_eq!(got.status, 0, "{name}: {got:?}");
        let mut args = strs(&c);
        args.push("-tls1_2");
        let (ok, out) = s_client(dir, &e, &args);
        assert!(!ok, "{name} over TLS 1.2: {out}");
    }
    assert_eq!(handshake_errors(&metrics(), "failed"), failed + 7.0);

    // The probe listener: plain HTTP, the probes only, for kubelet.
    assert_eq!(probe(&e, "/healthz").map(|p| p.0), Some(200));
    assert_eq!(probe(&e, "/readyz").map(|p| p.0), Some(200));
    assert_eq!(probe(&e, "/metrics").map(|p| p.0), Some(404));
    assert_eq!(probe(&e, "/").map(|p| p.0), Some(404));
}

/// Writes `files` into a new `..<version>` directory under `dir` and
/// swaps the `..data` symlink to it, as the kubelet updates a mounted
/// secret.
fn kubelet_update(dir: &Path, version: &str, files: &[(&str, PathBuf)]) {
    let data = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&data).unwrap();
    for (name, from) in files {
        std::fs::copy(from, data.join(name)).unwrap();
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

#[test]
fn a_rotated_certificate_is_served_without_restart() {
    let Some(dir) = tools() else { return };
    let secret = dir.join("rotated-secret");
    let _ = std::fs::remove_dir_all(&secret);
    std::fs::create_dir_all(&secret).unwrap();
    let files = |name: &str| {
        [
            ("tls.crt", dir.join(format!("{name}.crt"))),
            ("tls.key", dir.join(format!("{name}.key"))),
        ]
    };
    kubelet_update(&secret, "v1", &files("server"));
    let yaml = "tls_server_config:\n  cert_file: rotated-secret/tls.crt\n  key_file: rotated-secret/tls.key\n";
    let e = start(dir, "web-rotate.yml", yaml, &[]);
    let subject = |e: &Exporter| {
        let (ok, out) = s_client(dir, e, &[]);
        assert!(ok, "{out}");
        out
    };
    assert!(subject(&e).contains("CN = server\n"));

    kubelet_update(&secret, "v2", &files("server2"));
    eventually(Duration::from_secs(20), || match subject(&e) {
        s if s.contains("CN = server2") => Ok(()),
        s => Err(format!("still {s}\n{}", e.log())),
    });
    e.wait_log("reloaded (TLS)", Duration::from_secs(5));

    // A bad new certificate: logged, and the old one stays.
    std::fs::write(dir.join("broken.crt"), "not a certificate\n").unwrap();
    kubelet_update(
        &secret,
        "v3",
        &[
            ("tls.crt", dir.join("broken.crt")),
            ("tls.key", dir.join("server2.key")),
        ],
    );
    e.wait_log("keeping the old configuration", Duration::from_secs(20));
    assert!(subject(&e).contains("CN = server2"));
    assert!(
        e.log()
            .contains("tls_server_config.cert_file: no CERTIFICATE"),
        "{}",
        e.log()
    );

    // The file itself changes: basic auth turns on without a restart.
    kubelet_update(&secret, "v4", &files("server"));
    let yaml = format!("{yaml}{}", users(&[("prom", "s3cret")]));
    std::fs::write(dir.join("web-rotate.yml"), yaml).unwrap();
    eventually(Duration::from_secs(20), || {
        match curl(dir, &e, "/metrics", &[]).status {
            401 => Ok(()),
            s => Err(format!("{s}\n{}", e.log())),
        }
    });
    assert_eq!(
        curl(dir, &e, "/metrics", &["-u", "prom:s3cret"]).status,
        200
    );
}

/// Loads the web config at `config` as the binary does at start
/// (`--print-rules` exits once it has): the exit code and stderr.
fn load(config: &Path, args: &[&str]) -> (Option<i32>, String) {
    // Under a 16 MiB data limit (prlimit, util-linux): a file read whole
    // or a YAML expansion that is not cut short aborts instead of exit 2.
    let out = Command::new("prlimit")
        .arg(format!("--data={LOAD_DATA_BYTES}"))
        .arg(BIN)
        .args(args)
        .args(["--print-rules", "--web.config.file"])
        .arg(config)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), err)
}

/// The memory a config's load may take, at start and over a reload.
const LOAD_DATA_BYTES: u64 = 16 << 20;

/// The high-water mark of a running exporter, against the same bound.
fn assert_bounded_hwm(e: &Exporter) {
    let hwm = e.status_kib("VmHWM");
    assert!(hwm <= LOAD_DATA_BYTES >> 10, "VmHWM {hwm} KiB");
}

/// A certificate, key or client CA that is a FIFO, a device, a directory
/// or 200 MB: one line and exit code 2 at start; on reload one log line,
/// the old configuration still serving, and later reloads still working;
/// none of them read into memory.
#[test]
fn odd_certificate_files_are_refused_at_start_and_on_reload() {
    let Some(dir) = tools() else { return };
    let files = odd_files(&dir.join("odd"));
    let mutual =
        format!("{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n");
    let with = |yaml: &str, role: &str, path: &Path| {
        let of = [
            ("cert_file", "server.crt"),
            ("key_file", "server.key"),
            ("client_ca_file", "ca.crt"),
        ];
        let (_, was) = of.iter().find(|(r, _)| *r == role).unwrap();
        yaml.replace(
            &format!("  {role}: {was}\n"),
            &format!("  {role}: {}\n", path.display()),
        )
    };
    for role in ["cert_file", "key_file", "client_ca_file"] {
        for (path, why) in &files {
            let config = web_config(dir, "web-odd.yml", &with(&mutual, role, path));
            let (code, err) = load(&config, &[]);
            assert_eq!(code, Some(2), "{role} {}: {err}", path.display());
            assert_eq!(err.lines().count(), 1, "{err}");
            let want = format!("tls_server_config.{role}: {}: {why}", path.display());
            assert!(err.contains(&want), "{err}\nwant {want}");
        }
    }
    // On reload: each refused with its line, the old config serving.
    let e = start(dir, "web-odd-reload.yml", TLS, &[]);
    for (path, why) in &files {
        std::fs::write(dir.join("web-odd-reload.yml"), with(TLS, "cert_file", path)).unwrap();
        let line = format!("tls_server_config.cert_file: {}: {why}", path.display());
        e.wait_log(&line, Duration::from_secs(20));
        assert_eq!(curl(dir, &e, "/healthz", &[]).status, 200, "{}", e.log());
    }
    assert_bounded_hwm(&e);
    std::fs::write(dir.join("web-odd-reload.yml"), format!("{TLS}\n")).unwrap();
    e.wait_log("reloaded (TLS)", Duration::from_secs(20));
    assert_eq!(curl(dir, &e, "/healthz", &[]).status, 200);
}

/// A 300 KB string aliased 1,000 and 5,000 times (300 MB and 1.5 GB of
/// strings): exit code 2 with one line at start, and on reload one log
/// line with the old configuration serving, in bounded memory.
#[test]
fn a_yaml_alias_bomb_by_bytes_is_refused_at_start_and_on_reload() {
    let Some(dir) = tools() else { return };
    let bomb = |n: usize| {
        format!(
            "a: &s {}\nb:\n{}",
            "x".repeat(300_000),
            "  - *s\n".repeat(n)
        )
    };
    let why = "invalid YAML: expands past 1048576 bytes of strings";
    for n in [1_000, 5_000] {
        let config = web_config(dir, "web-bomb.yml", &bomb(n));
        let (code, err) = load(&config, &[]);
        assert_eq!(code, Some(2), "{n} aliases: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(why), "{err}");
    }
    let e = start(dir, "web-bomb-reload.yml", TLS, &[]);
    for (i, n) in [1_000, 5_000].into_iter().enumerate() {
        std::fs::write(dir.join("web-bomb-reload.yml"), bomb(n)).unwrap();
        eventually(Duration::from_secs(20), || {
            let seen = e.log().matches(why).count();
            if seen > i { Ok(()) } else { Err(e.log()) }
        });
        assert_eq!(curl(dir, &e, "/healthz", &[]).status, 200, "{}", e.log());
    }
    assert_bounded_hwm(&e);
}

#[test]
fn slow_and_garbage_handshakes_are_closed_and_counted() {
    let Some(dir) = tools() else { return };
    let e = start(dir, "web-slow.yml", TLS, &["--web.header-timeout", "1s"]);
    let metrics = || curl(dir, &e, "/metrics", &[]).body;
    let before = metrics();
    // Five silent connections and one with half a ClientHello: closed by
    // the header timeout without a word.
    let mut slow: Vec<TcpStream> = (0..5)
        .map(|_| TcpStream::connect(e.addr).unwrap())
        .collect();
    let mut half = TcpStream::connect(e.addr).unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .unwrap();
    slow.push(half);
    let t0 = Instant::now();
    for s in &mut slow {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(s.read(&mut b).unwrap_or(0), 0, "closed without a word");
    }
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    // Garbage fails at once.
    let mut g = TcpStream::connect(e.addr).unwrap();
    g.write_all(&[0xde; 64]).unwrap();
    g.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = g.read(&mut [0u8; 64]);
    let after = metrics();
    let grew = |reason: &str| handshake_errors(&after, reason) - handshake_errors(&before, reason);
    assert_eq!(grew("timeout"), 6.0, "{after}");
    assert_eq!(grew("failed"), 1.0, "{after}");
}

#[test]
fn a_scrape_gets_through_a_flood_of_handshakes() {
    let Some(dir) = tools() else { return };
    // RSA: the dearest handshakes to serve.
    let yaml = "tls_server_config:\n  cert_file: server-rsa.crt\n  key_file: server-rsa.key\n";
    let e = start(dir, "web-flood.yml", yaml, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let config = tls_client::config(dir, None, false);
    let handshakes: Vec<_> = (0..8)
        .map(|_| {
            let (stop, config, addr) = (stop.clone(), config.clone(), e.addr);
            std::thread::spawn(move || {
                let mut n = 0;
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let mut c = tls_client::Client::connect(addr, config.clone());
                    c.exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &mut buf, false);
                    n += 1;
                }
                n
            })
        })
        .collect();
    // A scraper on a kept-alive connection, as Prometheus scrapes.
    let mut scraper = tls_client::Client::connect(e.addr, config.clone());
    let mut buf = Vec::new();
    for _ in 0..50 {
        let head = scraper.exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &mut buf, false);
        assert!(buf.starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..head]);
        std::thread::sleep(Duration::from_millis(20));
    }
    // A new connection's handshake gets its turn too.
    let mut late = tls_client::Client::connect(e.addr, config);
    late.exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &mut buf, false);
    assert!(buf.starts_with(b"HTTP/1.1 200"));
    stop.store(true, Ordering::Relaxed);
    let flood: usize = handshakes.into_iter().map(|t| t.join().unwrap()).sum();
    println!("{flood} handshakes beside 50 scrapes");
    assert!(flood > 8);
}

/// At the connection cap over TLS: a connection silent mid-handshake is
/// evicted as such (not counted as a handshake error), and one whose
/// handshake is done but whose request has not come gets its 503 sealed
/// into TLS, not a bare close that a client reads as an empty reply.
#[test]
fn evictions_over_tls_are_named_and_answered() {
    let Some(dir) = tools() else { return };
    let e = start(dir, "web-cap.yml", TLS, &["--web.max-connections", "2"]);
    let config = tls_client::config(dir, None, false);
    let before = curl(dir, &e, "/metrics", &[]).body;
    // The cap: one silent socket, then one handshaken that asks nothing.
    let mut silent = TcpStream::connect(e.addr).unwrap();
    let mut done = tls_client::Client::connect(e.addr, config.clone());
    done.handshake();
    // A newcomer takes the silent one's place after its second, then
    // stays kept alive; the next takes the handshaken one's.
    let mut buf = Vec::new();
    let mut kept = tls_client::Client::connect(e.addr, config.clone());
    kept.exchange(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", &mut buf, false);
    assert!(buf.starts_with(b"HTTP/1.1 200"), "{buf:?}");
    // Silent for a second, the handshaken one goes before the idle one.
    std::thread::sleep(Duration::from_millis(1100));
    let mut next = tls_client::Client::connect(e.addr, config);
    next.exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &mut buf, false);
    assert!(buf.starts_with(b"HTTP/1.1 200"));
    let after = String::from_utf8_lossy(&buf).into_owned();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        silent.read(&mut [0u8; 16]).unwrap_or(0),
        0,
        "closed without a word"
    );
    let answer = done.read_to_end();
    assert!(
        answer.starts_with(b"HTTP/1.1 503 Service Unavailable"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let evicted = |m: &str, reason: &str| {
        value(
            m,
            &format!("gpu_exporter_http_connections_evicted_total{{reason=\"{reason}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let grew = |reason: &str| evicted(&after, reason) - evicted(&before, reason);
    assert_eq!(grew("tls_handshake"), 1.0, "{after}");
    assert_eq!(grew("incomplete_head"), 1.0, "{after}");
    let timeouts = handshake_errors(&after, "timeout") - handshake_errors(&before, "timeout");
    assert_eq!(timeouts, 0.0, "an eviction is no handshake error: {after}");
}

/// Silent connections churning at the cap over TLS: every TLS scrape on a
/// new connection gets its 200 (a scrape's handshake is heard, so the
/// silent ones go first), and the silent ones are counted as evicted
/// mid-handshake or closed by their client, never as timeouts.
#[test]
fn tls_scrapes_get_through_silent_churn_at_the_cap() {
    let Some(dir) = tools() else { return };
    let e = start(dir, "web-churn.yml", TLS, &["--web.max-connections", "8"]);
    let config = tls_client::config(dir, None, false);
    let stop = Arc::new(AtomicBool::new(false));
    let addr = e.addr;
    let churn = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            // At most 20 open, each held 1.5 s: past the cap of 8, and past
            // the second that makes a silent one evictable. Bounded by the
            // flag and 60 s.
            let t0 = Instant::now();
            let mut open = std::collections::VecDeque::new();
            while !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(60) {
                if let Ok(s) = TcpStream::connect(addr) {
                    open.push_back((Instant::now(), s));
                }
                while open.len() > 20
                    || open
                        .front()
                        .is_some_and(|(t, _)| t.elapsed() > Duration::from_millis(1500))
                {
                    open.pop_front();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    let mut buf = Vec::new();
    let mut ok = 0;
    for _ in 0..6 {
        let mut c = tls_client::Client::connect(e.addr, config.clone());
        c.exchange(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &mut buf, false);
        ok += usize::from(buf.starts_with(b"HTTP/1.1 200"));
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    assert_eq!(ok, 6);
    let m = String::from_utf8_lossy(&buf).into_owned();
    let evicted = "gpu_exporter_http_connections_evicted_total{reason=\"tls_handshake\"}";
    assert!(value(&m, evicted).unwrap_or(0.0) > 0.0, "{m}");
    assert_eq!(handshake_errors(&m, "timeout"), 0.0, "{m}");
    assert!(handshake_errors(&m, "closed") > 0.0, "{m}");
}

#[test]
fn printed_rules_link_runbooks_over_https_when_tls_is_on() {
    let Some(dir) = pki() else { return };
    let path = web_config(dir, "web-print.yml", TLS);
    let print = |args: &[&str]| {
        let out = Command::new(BIN)
            .arg("--print-rules")
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", crate::common::output_text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let tls = print(&["--web.config.file", path.to_str().unwrap()]);
    assert!(
        tls.contains("runbook_url: 'https://{{ $labels.instance }}/docs/runbooks/"),
        "{tls}"
    );
    assert!(!tls.contains("runbook_url: 'http://"));
    let plain = print(&[]);
    assert!(plain.contains("runbook_url: 'http://{{ $labels.instance }}/docs/runbooks/"));
}

/// exporter-toolkit's files (tests/fixtures/exporter-toolkit, see its
/// PROVENANCE.md) and what the exporter says of each: `Ok` when it loads
/// (`--print-rules` exits 0), or the start of its one-line error after
/// `--web.config.file PATH: ` (exit code 2).
const TOOLKIT: &[(&str, Result<(), &str>)] = &[
    // exporter-toolkit accepts these, and so do we.
    ("docs_web-config.yml", Ok(())),
    ("web_config_noAuth.good.yml", Ok(())),
    ("web_config_noAuth_someCiphers.good.yml", Ok(())),
    ("web_config_noAuth_someCiphers_noOrder.good.yml", Ok(())),
    ("web_config_noAuth_noHTTP2.good.yml", Ok(())),
    ("web_config_noAuth_tlsInline.good.yml", Ok(())),
    ("web_config_headers.good.yml", Ok(())),
    ("web_config_rate_limiter_nonblocking.yaml", Ok(())),
    ("web_config_rate_limiter_headers.yaml", Ok(())),
    ("web_config_users_noTLS.good.yml", Ok(())),
    (
        "tls_config_noAuth.requireandverifyclientcert.good.yml",
        Ok(()),
    ),
    ("web_config_auth_client_san.good.yaml", Ok(())),
    // Loads; its SAN list refuses exporter-toolkit's test client at run time.
    ("web_config_auth_client_san.bad.yaml", Ok(())),
    // exporter-toolkit accepts these; refused on purpose (docs/http-and-security.md).
    (
        "web_config_noAuth.good.blocking.yml",
        Err("tls_server_config.client_auth_type: RequireAndVerifyClientCert needs client_ca_file"),
    ),
    (
        "web_config_noAuth_allCiphers.good.yml",
        Err("tls_server_config.cipher_suites[9]: TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA is refused"),
    ),
    (
        "web_config_noAuth_allCurves.good.yml",
        Err("tls_server_config.curve_preferences[2]: CurveP521 is refused"),
    ),
    (
        "web_config_noAuth_someCurves.good.yml",
        Err("tls_server_config.curve_preferences[0]: CurveP521 is refused"),
    ),
    (
        "tls_config_noAuth.requireanyclientcert.good.yml",
        Err("tls_server_config.client_auth_type: RequireAnyClientCert accepts"),
    ),
    (
        "web_config_users.good.yml",
        Err("basic_auth_users.bob: bcrypt cost 18 is above the limit of 17"),
    ),
    (
        "web_config_rate_limiter_one_second.yaml",
        Err("rate_limit.burst: 0 lets no request through"),
    ),
    // Keys of unmerged branches: unknown to the current schema, as to
    // exporter-toolkit's own UnmarshalStrict.
    (
        "web_config_tokens.good.yml",
        Err("bearer_auth_tokens: unknown key"),
    ),
    (
        "web_config_users_noTLS_excludePath.good.yml",
        Err("basic_auth_excluded_paths: unknown key"),
    ),
    (
        "docs_web-config_excluded-paths-branch.yml",
        Err("basic_auth_excluded_paths: unknown key"),
    ),
    // exporter-toolkit refuses these, and so do we, naming the key.
    (
        "web_config_junk_key.yml",
        Err("tls_server_config.cert_filse: unknown key"),
    ),
    (
        "web_config_noAuth.bad.yml",
        Err(
            "tls_server_config.client_ca_file: a client CA is set but client_auth_type is NoClientCert",
        ),
    ),
    (
        "web_config_noAuth_certPath_empty.bad.yml",
        Err("tls_server_config.cert_file: missing"),
    ),
    (
        "web_config_noAuth_cert_empty.bad.yml",
        Err("tls_server_config.cert_file: missing"),
    ),
    (
        "web_config_noAuth_keyPath_empty.bad.yml",
        Err("tls_server_config.key_file: missing"),
    ),
    (
        "web_config_noAuth_key_empty.bad.yml",
        Err("tls_server_config.key_file: missing"),
    ),
    (
        "web_config_noAuth_certPath_keyPath_empty.bad.yml",
        Err("tls_server_config.cert_file: missing"),
    ),
    (
        "web_config_noAuth_certPath_invalid.bad.yml",
        Err("tls_server_config.cert_file: "),
    ),
    (
        "web_config_noAuth_keyPath_invalid.bad.yml",
        Err("tls_server_config.cert_file: "),
    ),
    (
        "web_config_noAuth_certPath_keyPath_invalid.bad.yml",
        Err("tls_server_config.cert_file: "),
    ),
    (
        "web_config_noAuth_noHTTP2Cipher.bad.yml",
        Err("tls_server_config.cipher_suites[0]: TLS_RSA_WITH_AES_128_CBC_SHA is refused"),
    ),
    (
        "web_config_noAuth_inventedCiphers.bad.yml",
        Err("tls_server_config.cipher_suites[0]: unknown cipher suite"),
    ),
    (
        "web_config_noAuth_inventedCurves.bad.yml",
        Err("tls_server_config.curve_preferences[0]: unknown curve"),
    ),
    (
        "web_config_noAuth_wrongTLSVersion.bad.yml",
        Err("tls_server_config.min_version: unknown TLS version"),
    ),
    (
        "web_config_auth_clientCAs_invalid.bad.yml",
        Err("tls_server_config.client_ca_file: a client CA is set"),
    ),
    (
        "web_config_auth_clientCAs_nocerts.bad.yml",
        Err("tls_server_config.client_ca_file: no CERTIFICATE block"),
    ),
    (
        "web_config_auth_clientCAsText_nocerts.bad.yml",
        Err("tls_server_config.client_ca: no CERTIFICATE block"),
    ),
    (
        "web_config_auth_user_list_invalid.bad.yml",
        Err("basic_auth_users.john: not a bcrypt hash"),
    ),
    (
        "web_config_headers_content_type_options.bad.yml",
        Err("http_server_config.headers.X-Content-Type-Options: invalid value \"sniff\""),
    ),
    (
        "web_config_headers_extra_header.bad.yml",
        Err("http_server_config.headers.Content-Type: this header can not be configured"),
    ),
    (
        "web_config_headers_frame_options.bad.yml",
        Err("http_server_config.headers.X-Frame-Options: invalid value \"foo\""),
    ),
    (
        "web_config_auth_client_san_no_client_auth.bad.yaml",
        Err(
            "tls_server_config.client_allowed_sans: needs client_auth_type RequireAndVerifyClientCert",
        ),
    ),
    (
        "web_config_auth_client_san_optional_cert.bad.yaml",
        Err(
            "tls_server_config.client_allowed_sans: needs client_auth_type RequireAndVerifyClientCert",
        ),
    ),
];

#[test]
fn exporter_toolkit_web_configs_load_or_fail_with_one_line() {
    let Some(dir) = pki() else { return };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exporter-toolkit");
    let mut listed: Vec<&str> = TOOLKIT.iter().map(|(f, _)| *f).collect();
    let mut present: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".yml") || f.ends_with(".yaml"))
        .collect();
    listed.sort();
    present.sort();
    assert_eq!(listed, present, "every copied file has an expectation");
    // The files they name, made here: the toolkit's own are not copied.
    let toolkit = dir.join("toolkit");
    std::fs::create_dir_all(&toolkit).unwrap();
    for (name, of) in [
        ("server.crt", "server.crt"),
        ("server.key", "server.key"),
        ("client_selfsigned.pem", "ca.crt"),
        ("client2_selfsigned.pem", "ca.crt"),
        ("tls-ca-chain.pem", "ca.crt"),
    ] {
        std::fs::copy(dir.join(of), toolkit.join(name)).unwrap();
    }
    std::fs::write(
        toolkit.join("tls-ca-chain-invalid.pem"),
        "not a certificate\n",
    )
    .unwrap();
    for (file, want) in TOOLKIT {
        let path = toolkit.join(file);
        std::fs::copy(src.join(file), &path).unwrap();
        let (code, stderr) = load(&path, &[]);
        match want {
            Ok(()) => assert_eq!(code, Some(0), "{file}: {stderr}"),
            Err(prefix) => {
                assert_eq!(code, Some(2), "{file}: {stderr}");
                let line = format!(
                    "gpu-exporter: error: --web.config.file {}: {prefix}",
                    path.display()
                );
                assert!(stderr.starts_with(&line), "{file}:\n{stderr}\nwant {line}");
                assert_eq!(stderr.lines().count(), 1, "{file}: {stderr}");
            }
        }
    }
    // The cost-18 user loads where the flag allows it.
    let users = toolkit.join("web_config_users.good.yml");
    let (code, stderr) = load(&users, &["--web.bcrypt-max-cost", "18"]);
    assert_eq!(code, Some(0), "{stderr}");
    for bad in ["3", "32", "x"] {
        let (code, stderr) = load(&users, &["--web.bcrypt-max-cost", bad]);
        assert_eq!(code, Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("--web.bcrypt-max-cost"), "{stderr}");
    }
}

/// A real Prometheus scrapes over mutual TLS with basic auth, is sent
/// gzip (it asks on every scrape) and ingests every series.
#[test]
fn prometheus_scrapes_over_mutual_tls_with_basic_auth_and_gzip() {
    let Some(dir) = tools() else { return };
    if !have("prometheus", &["--version"]) {
        return;
    }
    let yaml = format!(
        "{TLS}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n{}",
        users(&[("prom", "s3cret")])
    );
    let e = start(dir, "web-prom.yml", &yaml, &[]);
    let tmp = crate::deploy::TempDir::new("prometheus-tls-secrets");
    let password = tmp.0.join("password");
    std::fs::write(&password, "s3cret").unwrap();
    let mut prom = crate::deploy::Prometheus::with_config(
        "prometheus-tls",
        &format!(
            "scrape_configs:\n  - job_name: gpu-tls\n    scheme: https\n    \
             tls_config: {{ca_file: '{ca}', cert_file: '{crt}', key_file: '{key}', server_name: localhost}}\n    \
             basic_auth: {{username: prom, password_file: '{pw}'}}\n    \
             static_configs: [{{targets: ['{target}']}}]\n",
            ca = dir.join("ca.crt").display(),
            crt = dir.join("client.crt").display(),
            key = dir.join("client.key").display(),
            pw = password.display(),
            target = e.addr,
        ),
    );
    let mut query = |q: &str| {
        let target = format!("/api/v1/query?query={}", crate::deploy::urlencode(q));
        prom.get(&target).map(|(_, body)| body).unwrap_or_default()
    };
    // The first sample's value: `"value":[<time>,"<value>"]`.
    let number = |body: &str| {
        let v = body.split("\"value\":[").nth(1)?.split(",\"").nth(1)?;
        v.split('"').next()?.parse::<f64>().ok()
    };
    // Up, with several scrapes in.
    eventually(Duration::from_secs(60), || {
        let body = query("sum_over_time(up{job=\"gpu-tls\"}[1m])");
        match number(&body) {
            Some(n) if n >= 3.0 => Ok(()),
            _ => Err(format!("{body}\n{}", e.log())),
        }
    });
    // Every series: as many samples as the exporter's own OpenMetrics
    // body has (the simulator's series set is steady).
    let good = cert(dir, "client");
    let mut args = strs(&good);
    args.extend([
        "-u",
        "prom:s3cret",
        "-H",
        "Accept: application/openmetrics-text;version=1.0.0",
    ]);
    let ours = curl(dir, &e, "/metrics", &args);
    let samples = ours
        .body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    let scraped = number(&query("scrape_samples_scraped{job=\"gpu-tls\"}"));
    assert_eq!(scraped, Some(samples as f64), "{}", ours.body);
    // Gzipped: the exporter counted a gzipped response per scrape, and
    // nobody else asked it for gzip.
    let gzipped = value(
        &curl(dir, &e, "/metrics", &args).body,
        "gpu_exporter_http_gzipped_responses_total",
    )
    .unwrap();
    let scrapes = number(&query("count_over_time(up{job=\"gpu-tls\"}[5m])")).unwrap();
    assert!(
        gzipped >= scrapes - 1.0 && gzipped >= 3.0,
        "{gzipped} of {scrapes}"
    );
}

/// Standard base64 of `s`, for `Authorization: Basic`.
fn base64(s: &str) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let b = [0, 1, 2].map(|i| u32::from(*chunk.get(i).unwrap_or(&0)));
        let n = b[0] << 16 | b[1] << 8 | b[2];
        for i in 0..4 {
            let c = ABC[(n >> (18 - 6 * i) & 63) as usize] as char;
            out.push(if i <= chunk.len() { c } else { '=' });
        }
    }
    out
}

#[test]
fn a_password_flood_and_a_reload_leave_other_sources_their_scrapes() {
    let Some(dir) = tools() else { return };
    let yaml = users(&[("prom", "s3cret"), ("second", "2nd")]);
    let e = start(dir, "web-guesses.yml", &yaml, &[]);
    assert_eq!(base64("prom:s3cret"), "cHJvbTpzM2NyZXQ=");
    // The scrapers come from other loopback addresses than the flood.
    let scrape = |from: &str, user: &str| {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "5",
            ])
            .args(["--interface", from, "-u", user])
            .arg(format!("http://{}/metrics", e.addr))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // One scraper authenticated (cached) before the flood.
    assert_eq!(scrape("127.0.0.3", "prom:s3cret"), "200");

    // 32 connections from 127.0.0.1 guess prom's password, for 6 s.
    let stop = Arc::new(AtomicBool::new(false));
    let addr = e.addr;
    let flood: Vec<_> = (0..32)
        .map(|c| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut busy, mut sent, mut odd) = (0u32, 0u32, Vec::new());
                let until = Instant::now() + Duration::from_secs(8);
                while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                    let guess = base64(&format!("prom:guess{c}-{sent}"));
                    let auth = format!("Basic {guess}");
                    let Ok(mut s) = TcpStream::connect(addr) else {
                        continue;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let headers = [("Authorization", auth.as_str()), ("Connection", "close")];
                    crate::common::send(&mut s, "GET", "/metrics", &headers);
                    // To the end (or the timeout): whatever came is kept.
                    let mut raw = Vec::new();
                    let _ = s.read_to_end(&mut raw);
                    busy += u32::from(raw.starts_with(b"HTTP/1.1 429 "));
                    if !raw.starts_with(b"HTTP/1.1 4") {
                        odd.push(String::from_utf8_lossy(&raw[..raw.len().min(40)]).into_owned());
                    }
                    sent += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                (busy, sent, odd)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    // A second Prometheus, new during the flood (its first request
    // needs a bcrypt), from its own address.
    let mut codes = Vec::new();
    for _ in 0..5 {
        codes.push(scrape("127.0.0.2", "second:2nd"));
        codes.push(scrape("127.0.0.3", "prom:s3cret"));
        std::thread::sleep(Duration::from_millis(200));
    }
    // A reload adds a user, mid-flood; both old scrapers and the new
    // user, from a third address, are answered.
    // The hashes are unchanged, so their cached successes are kept.
    let ops = users(&[("ops", "0ps")]);
    let ops = ops.strip_prefix("basic_auth_users:\n").unwrap();
    std::fs::write(dir.join("web-guesses.yml"), format!("{yaml}{ops}")).unwrap();
    e.wait_log("reloaded", Duration::from_secs(20));
    for _ in 0..5 {
        codes.push(scrape("127.0.0.2", "second:2nd"));
        codes.push(scrape("127.0.0.3", "prom:s3cret"));
        codes.push(scrape("127.0.0.4", "ops:0ps"));
        std::thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    let (mut busy, mut sent, mut odd) = (0, 0, Vec::new());
    for t in flood {
        let (b, s, o) = t.join().unwrap();
        (busy, sent) = (busy + b, sent + s);
        odd.extend(o);
    }
    assert!(codes.iter().all(|c| c == "200"), "{codes:?}\n{}", e.log());
    // Every guess was answered 401 or 429, none cut short.
    assert!(
        odd.is_empty(),
        "{} odd answers: {:?}",
        odd.len(),
        &odd[..odd.len().min(5)]
    );
    // The flood was refused: most of its guesses got 429, not a bcrypt.
    assert!(
        sent > 100 && busy * 10 > sent * 9,
        "{busy} of {sent} got 429"
    );
}
