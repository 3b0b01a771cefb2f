//! Differential test: a real Prometheus server scrapes the exporter and
//! evaluates the printed rules; the alerts it fires must be the ones the
//! exporter fires itself. Durations are shortened only through the rules
//! file, and the Xid rate only through the scenario: no verdict is faked.

use crate::common::{Exporter, have, run, temp_file};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The healthy model never misses: with seconds of data, Prometheus sees a
/// single slow request in a tiny window as a burn (the exporter, with its
/// replayed three days, does not), so "healthy" here means no slow request.
const SCENARIO: &str = r#"{
  "gpus": [
    { "temperature_celsius": 71, "largest_free_gib": 18 },
    { "temperature_celsius": 88, "sm_clock_mhz": 1100, "clock_events": ["sw_thermal_slowdown", "hw_thermal_slowdown"] },
    { "temperature_celsius": 70, "xid": 79, "xid_every": "2s" },
    { "temperature_celsius": 69, "largest_free_gib": 1 }
  ],
  "models": [
    { "name": "llama-3.1-70b-instruct", "requests_per_second": 40, "slow_fraction": 0.03 },
    { "name": "mistral-7b-instruct", "requests_per_second": 60, "slow_fraction": 0 }
  ]
}"#;

const SHORT_RULES: &str = r#"{ "rules": [
  { "name": "GPUThrottling", "for": "3s" },
  { "name": "KVFragmentationRisk", "for": "3s" },
  { "name": "GPULost", "for": "3s" },
  { "name": "ExporterCollectFailing", "for": "3s" },
  { "name": "GPUMemoryLeak", "for": "3s" },
  { "name": "DriverVersionSkew", "for": "3s" },
  { "name": "TTFTBudgetBurn", "for": "3s" },
  { "name": "TTFTBudgetBurnSlow", "for": "3s" }
] }"#;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    // Go answers in the request's HTTP version.
    head.starts_with("HTTP/1.0 200").then(|| body.to_string())
}

/// Firing alerts in a Prometheus-shaped `/api/v1/alerts` body, as
/// (alertname, gpu or model_name).
fn firing(body: &str) -> BTreeSet<(String, String)> {
    body.split(r#"{"labels":{"#)
        .skip(1)
        .filter(|alert| alert.contains(r#""state":"firing""#))
        .map(|alert| {
            let labels = &alert[..alert.find('}').unwrap()];
            let get = |k: &str| {
                labels
                    .split(r#"",""#)
                    .map(|kv| kv.trim_matches('"'))
                    .find_map(|kv| kv.strip_prefix(&format!("{k}\":\"")))
                    .map(String::from)
            };
            let who = get("gpu")
                .map(|g| format!("gpu{g}"))
                .or_else(|| get("model_name"))
                .unwrap_or_default();
            (get("alertname").unwrap(), who)
        })
        .collect()
}

#[test]
fn prometheus_and_the_exporter_fire_the_same_alerts() {
    if !have("prometheus", &["--version"]) {
        return;
    }
    let scenario = temp_file("diff-scenario.json", SCENARIO);
    let rules_json = temp_file("diff-rules.json", SHORT_RULES);
    let (scenario, rules_json) = (scenario.to_str().unwrap(), rules_json.to_str().unwrap());
    let printed = run(&["--print-rules", "--rules.file", rules_json]);
    assert_eq!(printed.status.code(), Some(0));
    let rule_file = temp_file(
        "diff-rules.yml",
        &String::from_utf8(printed.stdout).unwrap(),
    );

    let e = Exporter::start(&["--sim.scenario", scenario, "--rules.file", rules_json]);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let prom = format!("127.0.0.1:{port}");
    let config = temp_file(
        "diff-prometheus.yml",
        &format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: ['{}']\n\
             scrape_configs:\n  - job_name: gpu\n    static_configs: [{{targets: ['{}']}}]\n",
            rule_file.display(),
            e.addr
        ),
    );
    let tsdb = std::env::temp_dir().join(format!("gpu-exporter-tsdb-{}", std::process::id()));
    let _server = Server(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address={prom}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus"),
    );

    let want: BTreeSet<(String, String)> = [
        ("GPUThrottling", "gpu1"),
        ("GPUXidErrors", "gpu2"),
        ("KVFragmentationRisk", "gpu3"),
        ("TTFTBudgetBurn", "llama-3.1-70b-instruct"),
        ("TTFTBudgetBurnSlow", "llama-3.1-70b-instruct"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let ours = firing(&e.get("/alerts", &[]).body);
    assert_eq!(ours, want, "the exporter's own verdicts");

    let deadline = Instant::now() + Duration::from_secs(45);
    let mut theirs = BTreeSet::new();
    while Instant::now() < deadline {
        if let Some(body) = http_get(&prom, "/api/v1/alerts") {
            theirs = firing(&body);
            if theirs == want {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(theirs, want, "Prometheus' verdicts");
    // Held, not a passing moment: a few evaluations on, both still agree
    // (allowing a scrape that a loaded machine delays).
    std::thread::sleep(Duration::from_secs(2));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (p, ours) = (
            http_get(&prom, "/api/v1/alerts").map(|b| firing(&b)),
            firing(&e.get("/alerts", &[]).body),
        );
        if p.as_ref() == Some(&want) && ours == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus {p:?} vs exporter {ours:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = std::fs::remove_dir_all(&tsdb);
}

#[test]
fn firing_reads_both_shapes() {
    let prom = r#"{"status":"success","data":{"alerts":[{"labels":{"alertname":"GPULost","gpu":"3","instance":"x","severity":"page"},"annotations":{},"state":"firing","activeAt":"t","value":"1e+00"},{"labels":{"alertname":"Slow","model_name":"m"},"state":"pending"}]}}"#;
    let want: BTreeSet<_> = [("GPULost".to_string(), "gpu3".to_string())].into();
    assert_eq!(firing(prom), want);
}
