//! The exporter's own alerts to https:// Alertmanagers (the `tls`
//! feature): a real Alertmanager serving TLS with a certificate of the
//! test PKI (`tests/certs.sh`) and basic auth from its web config, the
//! alerts read back over https with `curl --cacert`; a certificate from
//! another CA, a plain-HTTP Alertmanager named https:// and a listener that
//! never speaks TLS each fail with their reason and one log line, scrapes
//! going on meanwhile; a bad `--alertmanager.ca-file` is one line and exit
//! code 2. Every wait bounded.

use crate::alertmanager::{Alertmanager, AmAlert, find, label};
use crate::alertmanager_own::{failed, scrapes_unaffected, sending_fast, stops_within_a_second};
use crate::cli::bad;
use crate::common::{Exporter, eventually, have, temp_file, value};
use crate::pki::{odd_files, pki, web_config};
use nanoserde::DeJson;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The PKI, where Alertmanager, curl and htpasswd are here too.
fn tools() -> Option<&'static Path> {
    let ok = have("prometheus-alertmanager", &["--version"])
        && have("curl", &["--version"])
        && have("htpasswd", &["-nbB", "u", "p"]);
    if ok { pki() } else { None }
}

/// The shipped Alertmanager configuration, serving TLS with the PKI's
/// `server` certificate (127.0.0.1 and localhost) and asking for basic
/// auth `am:secret`, once it answers over https.
fn alertmanager_tls(dir: &Path) -> Alertmanager {
    let yaml = format!(
        "tls_server_config:\n  cert_file: {0}/server.crt\n  key_file: {0}/server.key\n{1}",
        dir.display(),
        crate::web::users(&[("am", "secret")])
    );
    let web = web_config(dir, &format!("am-web-{}.yml", std::process::id()), &yaml);
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/alertmanager/alertmanager.yml");
    let am = Alertmanager::start_with(&config, &[format!("--web.config.file={}", web.display())]);
    eventually(Duration::from_secs(30), || {
        match curl(dir, &am, "/-/ready") {
            Some(body) if body.trim() == "OK" => Ok(()),
            other => Err(format!("alertmanager is not ready over https: {other:?}")),
        }
    });
    am
}

/// `path` over https, the PKI's CA trusted, with basic auth: the body
/// of a 200.
fn curl(dir: &Path, am: &Alertmanager, path: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "5", "-u", "am:secret", "--cacert"])
        .arg(dir.join("ca.crt"))
        .arg(format!("https://{}{path}", am.addr))
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ca(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// The default fleet's alerts reach an Alertmanager that serves TLS and
/// asks for basic auth, named by its IP address and by its DNS name (two
/// URLs, both verified): read back over https, labelled as over http. An
/// exporter trusting another CA gets `tls` failures and one log line.
#[test]
fn alerts_arrive_over_https_and_another_ca_is_tls() {
    let Some(dir) = tools() else { return };
    let am = alertmanager_tls(dir);
    let port = am.addr.port();
    let urls = [
        format!("https://127.0.0.1:{port}"),
        format!("https://localhost:{port}/"),
    ];
    let auth = temp_file("am-tls-basic-auth", "am:secret\n");
    let ca_file = ca(dir, "ca.crt");
    let mut args = vec![
        "--alertmanager.ca-file",
        ca_file.to_str().unwrap(),
        "--alertmanager.basic-auth-file",
        auth.to_str().unwrap(),
        "--alertmanager.resend-interval",
        "1s",
    ];
    for u in &urls {
        args.extend(["--alertmanager.url", u.as_str()]);
    }
    let e = Exporter::start(&args);
    let alerts = eventually(Duration::from_secs(20), || {
        let body = curl(dir, &am, "/api/v2/alerts").unwrap_or_default();
        let alerts = Vec::<AmAlert>::deserialize_json(&body).unwrap_or_default();
        let all = [("GPUThrottling", "1"), ("GPUXidErrors", "2")];
        match all.iter().all(|(n, g)| find(&alerts, n, g).is_some()) {
            true => Ok(alerts),
            false => Err(format!("Alertmanager holds {body}\n{}", e.log())),
        }
    });
    for a in alerts.iter().filter(|a| a.labels.contains_key("gpu")) {
        assert_ne!(label(a, "gpu"), "0", "{a:#?}");
        assert!(label(a, "uuid").starts_with("GPU-"), "{a:#?}");
    }
    // Both URLs took posts, neither failed, each said so once.
    let metrics = eventually(Duration::from_secs(10), || {
        let m = e.metrics(None).body;
        let sent = |u: &str| {
            let series = format!("gpu_exporter_alertmanager_notifications_total{{url=\"{u}\"}}");
            value(&m, &series).unwrap_or(0.0)
        };
        match urls.iter().all(|u| sent(u) >= 2.0) {
            true => Ok(m),
            false => Err(m),
        }
    });
    for u in &urls {
        for reason in ["connect", "timeout", "status", "parse", "tls"] {
            assert_eq!(failed(&metrics, u, reason), 0.0, "{u} {reason}: {metrics}");
        }
        assert_eq!(e.log().matches(&format!("alertmanager {u}: up")).count(), 1);
    }

    // Another CA: the handshake fails, `tls`, one line however many posts.
    let other = ca(dir, "other-ca.crt");
    let wrong = Exporter::start(&[
        "--alertmanager.url",
        &urls[0],
        "--alertmanager.ca-file",
        other.to_str().unwrap(),
        "--alertmanager.basic-auth-file",
        auth.to_str().unwrap(),
        "--alertmanager.resend-interval",
        "1s",
    ]);
    eventually(Duration::from_secs(20), || {
        let m = wrong.metrics(None).body;
        match failed(&m, &urls[0], "tls") >= 3.0 {
            true => Ok(()),
            false => Err(m),
        }
    });
    let line = format!(
        "alertmanager {}: down: TLS: invalid peer certificate: UnknownIssuer",
        urls[0]
    );
    assert_eq!(wrong.log().matches(&line).count(), 1, "{}", wrong.log());
    assert_eq!(wrong.log().matches(": down").count(), 1, "{}", wrong.log());
}

/// A plain-HTTP Alertmanager named https:// fails with `tls`, a listener
/// that accepts and never speaks TLS with `timeout` at each post's
/// deadline; one log line each, collections and scrapes unaffected, and
/// a stop within the second.
#[test]
fn a_plain_alertmanager_and_a_silent_listener_fail_cleanly_over_https() {
    let Some(dir) = tools() else { return };
    let plain = Alertmanager::shipped();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    // Accepts and holds every connection, saying nothing, for the test's
    // length at most.
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(30);
        silent.set_nonblocking(true).unwrap();
        let mut held = Vec::new();
        while Instant::now() < until && held.len() < 100 {
            match silent.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    let urls = [
        format!("https://{}", plain.addr),
        format!("https://{silent_addr}"),
    ];
    let ca_file = ca(dir, "ca.crt");
    let mut e = sending_fast(
        &urls,
        &["--alertmanager.ca-file", ca_file.to_str().unwrap()],
    );
    let metrics = scrapes_unaffected(&e);
    assert!(failed(&metrics, &urls[0], "tls") >= 1.0, "{metrics}");
    assert!(failed(&metrics, &urls[1], "timeout") >= 1.0, "{metrics}");
    for (u, says) in [
        (&urls[0], "down: TLS: received corrupt message"),
        (&urls[1], "down: timed out reading the TLS handshake"),
    ] {
        let sent = format!("gpu_exporter_alertmanager_notifications_total{{url=\"{u}\"}}");
        assert_eq!(value(&metrics, &sent), Some(0.0), "{metrics}");
        let line = format!("alertmanager {u}: {says}");
        assert_eq!(e.log().matches(&line).count(), 1, "{}", e.log());
        let downs = format!("alertmanager {u}: down");
        assert_eq!(e.log().matches(&downs).count(), 1, "{}", e.log());
    }
    stops_within_a_second(&mut e);
}

/// Every bad `--alertmanager.ca-file`, and https:// without it or it
/// without https://: one line naming the flag and the file, exit 2.
#[test]
fn bad_ca_files_exit_2() {
    let Some(dir) = pki() else { return };
    let url = ["--alertmanager.url", "https://127.0.0.1:9093"];
    // Read at start, after the listeners are bound: any free port.
    let listen = ["--web.listen-address", "127.0.0.1:0"];
    let junk = temp_file(
        "am-junk-ca.pem",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let odd = odd_files(&dir.join("am-odd"));
    let mut cases: Vec<(PathBuf, &str)> = vec![
        ("/nonexistent/ca.pem".into(), "cannot open"),
        (ca(dir, "server.key"), "no CERTIFICATE block found"),
        (junk, "unusable CA certificate"),
    ];
    cases.extend(odd.iter().map(|(p, why)| (p.clone(), *why)));
    for (path, why) in &cases {
        let path = path.to_str().unwrap();
        let args = [&listen[..], &url[..], &["--alertmanager.ca-file", path]].concat();
        bad(&args, &format!("--alertmanager.ca-file {path}: {why}"));
    }
    bad(&url, "https:// needs --alertmanager.ca-file");
    let ca_file = ca(dir, "ca.crt");
    let only_ca = [
        "--alertmanager.url",
        "http://127.0.0.1:9093",
        "--alertmanager.ca-file",
        ca_file.to_str().unwrap(),
    ];
    bad(&only_ca, "none is given");
}
