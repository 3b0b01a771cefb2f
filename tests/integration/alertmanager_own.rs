//! The exporter sends its own alerts to a real Alertmanager (the shipped
//! configuration, on loopback): the labels Prometheus would give them,
//! the shipped inhibitions as `/alerts` marks them, a SIGKILL that lets
//! them expire at their `endsAt` without un-muting anything, a SIGTERM
//! that resolves nothing, Alertmanagers that are down, slow or failing
//! without a collection or a scrape noticing, and Prometheus sending the
//! same alerts beside it. Intervals are shortened by flags, every wait
//! bounded.

use crate::alertmanager::{Alertmanager, AmAlert, find, label};
use crate::common::{Exporter, eventually, have, run, temp_file, value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// The game day's memory incidents (`scenarios/gameday.json`), held from
/// the start: GPU 0 has a pending remap and the reset it asks for after
/// Xid 63, GPU 1 failed a remap (Xid 64) and asks for a drain, GPU 2 has a
/// pending page retirement after Xid 63, GPU 3 only logs Xid 48.
const GAMEDAY: &str = r#"{"gpus":[
  {"xid":63,"xid_every":"2s","health":{"row_remap_pending":true,"recovery_action":1}},
  {"xid":64,"xid_every":"2s","health":{"row_remap_failed":true,"recovery_action":2}},
  {"xid":63,"xid_every":"2s","health":{"retired_pages_pending":true}},
  {"xid":48,"xid_every":"2s"}
]}"#;

fn tools() -> bool {
    have("prometheus-alertmanager", &["--version"])
}

/// Each alert in Alertmanager by (alertname, gpu or model_name).
fn by_name(alerts: &[AmAlert]) -> BTreeMap<(String, String), &AmAlert> {
    let who = |a: &AmAlert| {
        let gpu = a.labels.get("gpu").map(|g| format!("gpu{g}"));
        gpu.unwrap_or_else(|| label(a, "model_name").to_string())
    };
    let all = alerts
        .iter()
        .map(|a| ((label(a, "alertname").to_string(), who(a)), a));
    all.collect()
}

/// The exporter's own firing alerts on `/alerts`, by the same key: their
/// labels and whom they are muted by.
fn own(e: &Exporter) -> BTreeMap<(String, String), (BTreeSet<String>, String)> {
    let body = e.get("/alerts", &[]).body;
    let names = crate::prometheus::label_names(&body);
    let muted = muted_by(&body);
    let all = names.into_iter().map(|(k, v)| {
        let m = muted.get(&k).cloned().unwrap_or_default();
        (k, (v, m))
    });
    all.collect()
}

/// `mutedBy` of each firing alert of an `/alerts` body.
fn muted_by(body: &str) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for alert in body.split(r#"{"labels":{"#).skip(1) {
        let get = |k: &str| {
            let at = alert.find(&format!("\"{k}\":\""))? + k.len() + 4;
            Some(alert[at..at + alert[at..].find('"')?].to_string())
        };
        let who = get("gpu").map(|g| format!("gpu{g}"));
        let key = (get("alertname").unwrap(), who.unwrap_or_default());
        out.insert(key, get("mutedBy").unwrap_or_default());
    }
    out
}

/// SIGTERM: exit 0 within the second docs/flags.md promises.
pub(crate) fn stops_within_a_second(e: &mut Exporter) {
    e.signal("TERM");
    let stopped = Instant::now();
    let status = e.wait_exit(Duration::from_secs(1));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(stopped.elapsed() < Duration::from_secs(1));
}

/// The default fleet's alerts reach Alertmanager within one evaluation
/// and one send, labelled as Prometheus would label them; a SIGTERM then
/// exits within the second and resolves none of them.
#[test]
fn the_default_fleet_pages_through_alertmanager_and_a_stop_resolves_nothing() {
    if !tools() {
        return;
    }
    let mut am = Alertmanager::shipped();
    let url = format!("http://{}", am.addr);
    let mut e = Exporter::start(&[
        "--alertmanager.url",
        &url,
        "--alertmanager.label",
        "cluster=lab",
        "--alertmanager.instance",
        "node-a:9400",
    ]);
    let started = Instant::now();
    let alerts = eventually(Duration::from_secs(10), || {
        let alerts = am.alerts();
        let all = [
            ("GPUThrottling", "1"),
            ("GPUXidErrors", "2"),
            ("KVFragmentationRisk", "3"),
        ];
        match all.iter().all(|(n, g)| find(&alerts, n, g).is_some()) {
            true => Ok(alerts),
            false => Err(format!("Alertmanager holds {alerts:#?}")),
        }
    });
    // One evaluation (1s) and one send, with room for a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for a in &alerts {
        assert_ne!(
            label(a, "gpu"),
            "0",
            "nothing for the healthy GPU 0: {a:#?}"
        );
        assert_eq!(label(a, "instance"), "node-a:9400", "{a:#?}");
        assert_eq!(label(a, "job"), "gpu-exporter", "{a:#?}");
        assert_eq!(label(a, "cluster"), "lab", "{a:#?}");
        assert_ne!(label(a, "severity"), "", "{a:#?}");
        assert_eq!(a.status.state, "active", "{a:#?}");
        let name = label(a, "alertname");
        let runbook = a
            .annotations
            .get("runbook_url")
            .cloned()
            .unwrap_or_default();
        assert!(
            runbook.starts_with("http://node-a:9400/docs/runbooks/"),
            "{runbook}"
        );
        if a.labels.contains_key("gpu") {
            assert!(a.labels["uuid"].starts_with("GPU-"), "{name}: {a:#?}");
        }
    }
    // Each generatorURL is the status page at the alert's own row.
    let page = e.get("/", &[]).body;
    let mut ids = BTreeSet::new();
    for a in &alerts {
        let id = (a.generator_url.strip_prefix("http://node-a:9400/#"))
            .unwrap_or_else(|| panic!("{a:#?}"));
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "needs no escaping: {id}"
        );
        let row = format!("<tr class=\"alert firing\" id=\"{id}\">");
        assert_eq!(page.matches(&row).count(), 1, "{id}: {page}");
        let name = label(a, "alertname");
        assert!(page[page.find(&row).unwrap()..].contains(&format!("<b>{name}</b>")));
        assert!(ids.insert(id.to_string()), "two alerts at {id}");
    }
    // One list: the labels /alerts shows, and the scrape's, external too.
    let ours = own(&e);
    let theirs = by_name(&alerts);
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>()
    );
    for (k, (names, _)) in &ours {
        let mut sent: BTreeSet<String> = theirs[k].labels.keys().cloned().collect();
        for extra in ["job", "instance", "cluster"] {
            assert!(sent.remove(extra), "{k:?} has no {extra}");
        }
        assert_eq!(&sent, names, "{k:?}");
    }
    let metrics = e.metrics(None).body;
    let sent = format!("gpu_exporter_alertmanager_notifications_total{{url=\"{url}\"}}");
    assert!(
        value(&metrics, &sent).is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    assert!(
        e.log().contains(&format!("alertmanager {url}: up")),
        "{}",
        e.log()
    );

    // SIGTERM: out within the second; every alert still active, none
    // resolved (an exporter that restarts must not page twice).
    let ends: BTreeMap<String, String> = alerts
        .iter()
        .map(|a| (a.fingerprint.clone(), a.ends_at.clone()))
        .collect();
    stops_within_a_second(&mut e);
    std::thread::sleep(Duration::from_millis(500));
    let after = am.alerts();
    assert_eq!(after.len(), alerts.len(), "{after:#?}");
    for a in &after {
        assert_eq!(a.status.state, "active", "resolved by a stop: {a:#?}");
        assert!(a.ends_at >= ends[&a.fingerprint], "{a:#?}");
    }
}

/// The game day's inhibitions, in Alertmanager's `inhibitedBy` exactly as
/// `/alerts` marks them "muted by". Then SIGKILL: every alert stays until
/// its `endsAt` (4 s on: a 1 s resend and evaluation), then resolves, and
/// no muted alert is ever un-muted on the way.
#[test]
fn gameday_inhibitions_match_and_a_killed_exporter_expires_without_unmuting() {
    if !tools() {
        return;
    }
    let mut am = Alertmanager::shipped();
    let url = format!("http://{}", am.addr);
    let flags = [
        "--alertmanager.url",
        &url,
        "--alertmanager.resend-interval",
        "1s",
    ];
    let e = Exporter::on_scenario("am-own-gameday.json", GAMEDAY, &flags);
    let want = [
        ("GPUXidEvents", "gpu0", "GPURowRemapPending"),
        ("GPUXidErrors", "gpu1", "GPURowRemapFailure"),
        ("GPURecoveryRebootOrDrain", "gpu1", "GPUXidErrors"),
        ("GPUXidEvents", "gpu2", "GPURetiredPagesPending"),
        ("GPUXidErrors", "gpu3", ""),
    ];
    let ours = own(&e);
    for (name, who, by) in want {
        let k = (name.to_string(), who.to_string());
        assert_eq!(
            ours.get(&k).map(|o| o.1.as_str()),
            Some(by),
            "{k:?}: {ours:#?}"
        );
    }
    let alerts = eventually(Duration::from_secs(15), || {
        let alerts = am.alerts();
        let theirs = by_name(&alerts);
        match ours.keys().all(|k| theirs.contains_key(k)) {
            true => Ok(alerts),
            false => Err(format!("Alertmanager holds {alerts:#?}")),
        }
    });
    let theirs = by_name(&alerts);
    let name_of: BTreeMap<&str, &str> = alerts
        .iter()
        .map(|a| (a.fingerprint.as_str(), label(a, "alertname")))
        .collect();
    assert_eq!(theirs.len(), ours.len(), "{alerts:#?}");
    for (k, (_, by)) in &ours {
        let a = theirs[k];
        let names: Vec<&str> = a
            .status
            .inhibited_by
            .iter()
            .map(|f| name_of[f.as_str()])
            .collect();
        let want: Vec<&str> = [by.as_str()]
            .into_iter()
            .filter(|b| !b.is_empty())
            .collect();
        assert_eq!(names, want, "{k:?}: {a:#?}");
    }

    e.signal("KILL");
    let killed = Instant::now();
    let muted: BTreeSet<(String, String)> = (ours.iter())
        .filter(|(_, (_, by))| !by.is_empty())
        .map(|(k, _)| k.clone())
        .collect();
    let mut seen_after = 0;
    loop {
        let alerts = am.alerts();
        if alerts.is_empty() {
            break;
        }
        for (k, a) in by_name(&alerts) {
            if muted.contains(&k) {
                assert_eq!(
                    a.status.state, "suppressed",
                    "un-muted after the kill: {a:#?}"
                );
            }
        }
        seen_after += 1;
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "still there: {alerts:#?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // They outlived the exporter (its last endsAt was up to 4 s ahead) and
    // then resolved by themselves.
    assert!(
        killed.elapsed() >= Duration::from_secs(2),
        "{:?}",
        killed.elapsed()
    );
    assert!(seen_after >= 5, "{seen_after}");
}

/// A socket that accepts and answers each request `after`, with
/// `status`, until the test ends; what it was sent goes to `heard`.
struct Fake(std::net::SocketAddr);

type Heard = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

fn fake(status: u16, after: Duration) -> Fake {
    fake_heard(status, after, Heard::default())
}

fn fake_heard(status: u16, after: Duration, heard: Heard) -> Fake {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let heard = heard.clone();
            std::thread::spawn(move || {
                let mut s = s;
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                heard.lock().unwrap().push(request(&mut s));
                std::thread::sleep(after);
                let _ = write!(
                    s,
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
            });
        }
    });
    Fake(addr)
}

/// One whole request: its head and its Content-Length of body.
fn request(s: &mut std::net::TcpStream) -> String {
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= len {
                return text;
            }
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return text,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// The credentials of a file reach Alertmanager in the header, bearer or
/// basic, and the body is the alerts as a JSON array, each with an endsAt.
#[test]
fn credentials_from_files_reach_alertmanager() {
    for (flag, file, header) in [
        (
            "--alertmanager.bearer-token-file",
            "s3cret\n",
            "Authorization: Bearer s3cret\r\n",
        ),
        (
            "--alertmanager.basic-auth-file",
            "Aladdin:open sesame\n",
            "Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n",
        ),
    ] {
        let heard = Heard::default();
        let am = fake_heard(200, Duration::ZERO, heard.clone());
        let path = temp_file(&format!("am-auth{}", flag.len()), file);
        let url = format!("http://{}/prefix", am.0);
        let e = Exporter::start(&["--alertmanager.url", &url, flag, path.to_str().unwrap()]);
        let req = eventually(Duration::from_secs(10), || {
            let all = heard.lock().unwrap().clone();
            all.into_iter()
                .next()
                .ok_or_else(|| "nothing heard".to_string())
        });
        assert!(
            req.starts_with("POST /prefix/api/v2/alerts HTTP/1.1\r\n"),
            "{req}"
        );
        assert!(req.contains(header), "{req}");
        let body = req.split_once("\r\n\r\n").unwrap().1;
        assert!(body.starts_with(r#"[{"labels":{"alertname":"#), "{body}");
        assert!(body.ends_with("\"}]"), "{body}");
        assert_eq!(
            body.matches(r#""endsAt":"#).count(),
            body.matches(r#""labels":"#).count()
        );
        drop(e);
    }
}

/// Alertmanagers down (nothing listens), slow (answers after 10 s) and
/// failing (500): collections and scrapes go on as before, each failure
/// is counted by its reason, and the queue stays within its capacity.
#[test]
fn dead_slow_and_failing_alertmanagers_touch_no_collection_or_scrape() {
    let down = crate::deploy::free_addr();
    let slow = fake(200, Duration::from_secs(10));
    let failing = fake(500, Duration::ZERO);
    let urls = [
        format!("http://{down}"),
        format!("http://{}", slow.0),
        format!("http://{}", failing.0),
    ];
    let mut e = sending_fast(&urls, &["--alertmanager.queue-capacity", "4"]);
    let metrics = scrapes_unaffected(&e);
    let failed = |u: &str, reason: &str| failed(&metrics, u, reason);
    assert!(failed(&urls[0], "connect") >= 1.0, "{metrics}");
    assert!(failed(&urls[1], "timeout") >= 1.0, "{metrics}");
    assert!(failed(&urls[2], "status") >= 1.0, "{metrics}");
    let queue = value(&metrics, "gpu_exporter_alertmanager_queue_length").unwrap();
    assert!(queue <= 4.0, "{queue}");
    // Five firing alerts a send, four places: the oldest dropped.
    assert!(value(&metrics, "gpu_exporter_alertmanager_dropped_total").unwrap() >= 1.0);
    for u in &urls {
        let ok = format!("gpu_exporter_alertmanager_notifications_total{{url=\"{u}\"}}");
        assert_eq!(value(&metrics, &ok), Some(0.0), "{metrics}");
        e.wait_log(&format!("alertmanager {u}: down"), Duration::from_secs(5));
    }
    // One line per change of state, not one per failed post.
    let downs = e
        .log()
        .matches(&format!("alertmanager {}: down", urls[0]))
        .count();
    assert_eq!(downs, 1, "{}", e.log());
    // A post held by the slow one does not hold a stop past the second.
    stops_within_a_second(&mut e);
}

/// The exporter sending to each of `urls`, resending and timing out
/// after 1s, collecting every 500ms, with `more` flags.
pub(crate) fn sending_fast(urls: &[String], more: &[&str]) -> Exporter {
    let mut args = vec![
        "--alertmanager.resend-interval",
        "1s",
        "--alertmanager.timeout",
        "1s",
        "--collect.interval",
        "500ms",
    ];
    args.extend(more);
    for u in urls {
        args.extend(["--alertmanager.url", u.as_str()]);
    }
    Exporter::start(&args)
}

/// Six seconds of scrapes of `e` (collecting every 500ms), each timed,
/// each snapshot young: the last scrape's metrics.
pub(crate) fn scrapes_unaffected(e: &Exporter) -> String {
    let mut worst = Duration::ZERO;
    let started = Instant::now();
    let mut metrics = String::new();
    while started.elapsed() < Duration::from_secs(6) {
        let t = Instant::now();
        metrics = e.metrics(None).body;
        worst = worst.max(t.elapsed());
        let age = value(&metrics, "gpu_exporter_snapshot_age_seconds").unwrap();
        assert!(age < 2.0, "a collection waited: age {age}");
        assert_eq!(value(&metrics, "gpu_exporter_collect_success"), Some(1.0));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        worst < Duration::from_millis(900),
        "a scrape took {worst:?}"
    );
    metrics
}

/// Posts to `url` that failed for `reason`, as `metrics` counts them.
pub(crate) fn failed(metrics: &str, url: &str, reason: &str) -> f64 {
    let series = format!(
        "gpu_exporter_alertmanager_notifications_failed_total{{url=\"{url}\",reason=\"{reason}\"}}"
    );
    value(metrics, &series).unwrap_or(0.0)
}

/// The exporter and a real Prometheus (the printed rules, `for` shortened
/// to 3s through the rules file, `cluster` an external label on both) send
/// the same alerts to one Alertmanager: it holds each once.
#[test]
fn the_exporter_and_prometheus_sending_both_show_each_alert_once() {
    if !tools() || !have("prometheus", &["--version"]) {
        return;
    }
    let mut am = Alertmanager::shipped();
    let rules = temp_file(
        "am-both-rules.json",
        r#"{ "rules": [{ "name": "GPUThrottling", "for": "3s" },
                      { "name": "KVFragmentationRisk", "for": "3s" }] }"#,
    );
    let rules = rules.to_str().unwrap();
    let printed = run(&["--print-rules", "--rules.file", rules]);
    assert_eq!(printed.status.code(), Some(0));
    let printed = temp_file(
        "am-both-rules.yml",
        &String::from_utf8_lossy(&printed.stdout),
    );
    // Prometheus names the target by the address it scrapes: so does the
    // exporter, told by the flag.
    let url = format!("http://{}", am.addr);
    let at = crate::deploy::free_addr().to_string();
    let _e = Exporter::start(&[
        "--web.listen-address",
        &at,
        "--rules.file",
        rules,
        "--alertmanager.url",
        &url,
        "--alertmanager.label",
        "cluster=lab",
        "--alertmanager.instance",
        &at,
    ]);
    let _prom = am.prometheus(
        "both",
        &printed,
        std::slice::from_ref(&at),
        "  external_labels: {cluster: lab}\n",
    );
    // Prometheus' own alerts say so in their generatorURL; once both that
    // it fires on the default fleet have come from Prometheus too, there
    // is still one of each. (GPUXidErrors and the burns are the
    // exporter's alone: Prometheus has not the replayed history.)
    let want = [("GPUThrottling", "1"), ("KVFragmentationRisk", "3")];
    let alerts = eventually(Duration::from_secs(60), || {
        let alerts = am.alerts();
        let from_prometheus = |n: &str, g: &str| {
            find(&alerts, n, g).is_some_and(|a| a.generator_url.contains("/graph?"))
        };
        match want.iter().all(|(n, g)| from_prometheus(n, g)) {
            true => Ok(alerts),
            false => Err(format!("Alertmanager holds {alerts:#?}")),
        }
    });
    for (n, g) in want {
        let all: Vec<&AmAlert> = (alerts.iter())
            .filter(|a| label(a, "alertname") == n && label(a, "gpu") == g)
            .collect();
        assert_eq!(all.len(), 1, "{n} gpu {g}: {all:#?}");
        assert_eq!(label(all[0], "cluster"), "lab");
    }
    let keys = by_name(&alerts);
    assert_eq!(keys.len(), alerts.len(), "two of one alert: {alerts:#?}");
}

/// Each bad `--alertmanager.*` value: one line naming the flag, exit 2.
#[test]
fn bad_alertmanager_flags_exit_2() {
    use crate::cli::bad;
    let url = "--alertmanager.url";
    // Without the alertmanager-tls feature https:// is refused outright;
    // with it, it needs the CA file (alertmanager_tls.rs).
    let https = match cfg!(feature = "alertmanager-tls") {
        true => "needs --alertmanager.ca-file",
        false => "needs a build with the alertmanager-tls feature",
    };
    bad(&[url, "https://127.0.0.1:9093"], https);
    if !cfg!(feature = "alertmanager-tls") {
        let ca = ["--alertmanager.ca-file", "/etc/ssl/ca.pem"];
        bad(&ca, "built without the alertmanager-tls feature");
    }
    bad(&[url, "127.0.0.1:9093"], url);
    bad(&[url, "http://u:p@127.0.0.1:9093"], url);
    bad(&[url, "http://a:1", url, "http://a:1"], "given twice");
    let label = "--alertmanager.label";
    bad(&[label, "cluster"], label);
    bad(&[label, "instance=x"], "sets itself");
    bad(&[label, "__x=y"], label);
    bad(
        &["--alertmanager.resend-interval", "0s"],
        "--alertmanager.resend-interval",
    );
    bad(
        &["--alertmanager.queue-capacity", "0"],
        "--alertmanager.queue-capacity",
    );
    let token = "--alertmanager.bearer-token-file";
    let empty = temp_file("am-empty-token", "\n");
    let empty = empty.to_str().unwrap();
    // Read at start, after the listeners are bound: any free port.
    let listen = ["--web.listen-address", "127.0.0.1:0"];
    bad(
        &[
            &listen[..],
            &[url, "http://a:1", token, "/nonexistent/token"],
        ]
        .concat(),
        token,
    );
    bad(
        &[&listen[..], &[url, "http://a:1", token, empty]].concat(),
        token,
    );
}
