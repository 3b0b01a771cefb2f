//! Differential test: a real Prometheus server scrapes the exporter and
//! evaluates the printed rules; the alerts it fires must be the ones the
//! exporter fires itself. Durations are shortened only through the rules
//! file, and the Xid rate only through the scenario: no verdict is faked.

use crate::common::{Exporter, have, run, temp_file, value};
use crate::deploy::{Prometheus, TempDir, urlencode};
use crate::sources::fake_smi;
use nanoserde::DeJson;
use std::collections::{BTreeMap, BTreeSet};
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
    { "temperature_celsius": 88, "sm_clock_mhz": 1100, "clock_events": ["sw_thermal_slowdown", "hw_thermal_slowdown"],
      "pods": [{ "namespace": "research", "pod": "notebook-alice", "container": "jupyter" },
               { "namespace": "research", "pod": "notebook-bob", "container": "jupyter" }],
      "jobs": ["4711"] },
    { "temperature_celsius": 70, "xid": 79, "xid_every": "2s" },
    { "temperature_celsius": 69, "largest_free_gib": 1 }
  ],
  "models": [
    { "name": "llama-3.1-70b-instruct", "requests_per_second": 40, "slow_fraction": 0.03 },
    { "name": "mistral-7b-instruct", "requests_per_second": 60, "slow_fraction": 0 }
  ]
}"#;

/// Durations scaled to seconds, burn-rate windows included: the printed
/// rules must record every window the rules read (a rule over a window
/// without its record never fires in Prometheus).
const SHORT_RULES: &str = r#"{ "rules": [
  { "name": "GPUThrottling", "for": "3s" },
  { "name": "KVFragmentationRisk", "for": "3s" },
  { "name": "GPULost", "for": "3s" },
  { "name": "ExporterCollectFailing", "for": "3s" },
  { "name": "GPUMemoryLeak", "for": "3s" },
  { "name": "DriverVersionSkew", "for": "3s" },
  { "name": "TTFTBudgetBurn", "for": "3s",
    "windows": [{ "long": "20s", "short": "5s", "factor": 14.4 }, { "long": "30s", "short": "10s", "factor": 6 }] },
  { "name": "TTFTBudgetBurnSlow", "for": "4s",
    "windows": [{ "long": "40s", "short": "15s", "factor": 1 }] }
] }"#;

pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn http_get(addr: &str, path: &str) -> Option<String> {
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
/// (alertname, gpu or model_name), at node scope: what one exporter sees.
pub fn firing(body: &str) -> BTreeSet<(String, String)> {
    firing_at(body, false)
}

/// The same for the fleet-scope alerts (`scope="fleet"`) alone, or for
/// all the others.
pub fn firing_at(body: &str, fleet: bool) -> BTreeSet<(String, String)> {
    body.split(r#"{"labels":{"#)
        .skip(1)
        .filter(|alert| alert.contains(r#""state":"firing""#))
        .filter(|alert| {
            let labels = &alert[..alert.find('}').unwrap()];
            labels.contains(r#""scope":"fleet""#) == fleet
        })
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
    let printed = String::from_utf8(printed.stdout).unwrap();
    for w in ["5s", "10s", "15s", "20s", "30s", "40s"] {
        assert!(
            printed.contains(&format!(
                "record: model_name:llm_ttft_slo_errors:ratio_rate{w}\n"
            )),
            "no record for {w}"
        );
    }
    let rule_file = temp_file("diff-rules.yml", &printed);

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
             scrape_configs:\n  - job_name: gpu-exporter\n    static_configs: [{{targets: ['{}']}}]\n",
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
    // One list, two evaluators: each alert carries the same label names
    // on both sides, `scope` on the burns included, but the scrape's
    // `job` and `instance` (which the exporter adds when it sends).
    let theirs = http_get(&prom, "/api/v1/alerts").map(|b| label_names(&b));
    let ours = label_names(&e.get("/alerts", &[]).body);
    assert_eq!(theirs.as_ref(), Some(&ours), "label names per alert");
    assert!(
        ours.iter()
            .any(|(k, v)| k.0 == "TTFTBudgetBurn" && v.contains("scope")),
        "{ours:?}"
    );
    // Who uses the throttled GPU, by the same template: Prometheus runs
    // its queries, the exporter reads its snapshot.
    let want =
        "pod research/notebook-alice (jupyter) pod research/notebook-bob (jupyter) job 4711 ";
    let ours = workloads(&e.get("/alerts", &[]).body, "GPUThrottling");
    assert_eq!(ours.as_deref(), Some(want), "the exporter's workloads");
    let theirs = http_get(&prom, "/api/v1/alerts").and_then(|b| workloads(&b, "GPUThrottling"));
    assert_eq!(theirs.as_deref(), Some(want), "Prometheus' workloads");
    let _ = std::fs::remove_dir_all(&tsdb);
}

#[derive(DeJson)]
struct ApiAlerts {
    data: ApiData,
}

#[derive(DeJson)]
struct ApiData {
    alerts: Vec<ApiAlert>,
}

#[derive(DeJson)]
struct ApiAlert {
    labels: BTreeMap<String, String>,
    state: String,
}

/// Each firing node-scope alert of a Prometheus-shaped `/api/v1/alerts`
/// body, by (alertname, gpu or model_name): its label names but `job` and
/// `instance`.
pub fn label_names(body: &str) -> BTreeMap<(String, String), BTreeSet<String>> {
    let all = ApiAlerts::deserialize_json(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let all = all.data.alerts.into_iter();
    all.filter(|a| a.state == "firing")
        .filter(|a| a.labels.get("scope").is_none_or(|s| s != "fleet"))
        .map(|a| {
            let get = |k: &str| a.labels.get(k).cloned().unwrap_or_default();
            let who = a.labels.get("gpu").map(|g| format!("gpu{g}"));
            let key = (get("alertname"), who.unwrap_or_else(|| get("model_name")));
            let names = a
                .labels
                .into_keys()
                .filter(|k| k != "job" && k != "instance");
            (key, names.collect())
        })
        .collect()
}

/// The `workloads` annotation of the firing `alert` in a Prometheus-shaped
/// `/api/v1/alerts` body.
fn workloads(body: &str, alert: &str) -> Option<String> {
    let one = body
        .split(r#"{"labels":{"#)
        .find(|a| a.contains(&format!(r#""alertname":"{alert}""#)))?;
    let value = one.split(r#""workloads":""#).nth(1)?;
    Some(value[..value.find('"')?].to_string())
}

#[test]
fn firing_reads_both_shapes() {
    let prom = r#"{"status":"success","data":{"alerts":[{"labels":{"alertname":"GPULost","gpu":"3","instance":"x","severity":"page"},"annotations":{},"state":"firing","activeAt":"t","value":"1e+00"},{"labels":{"alertname":"Slow","model_name":"m"},"state":"pending"}]}}"#;
    let want: BTreeSet<_> = [("GPULost".to_string(), "gpu3".to_string())].into();
    assert_eq!(firing(prom), want);
}

/// An instant query's result, as Prometheus' JSON body.
fn query(prom: &mut Prometheus, q: &str) -> String {
    prom.get(&format!("/api/v1/query?query={}", urlencode(q)))
        .map(|(_, body)| body)
        .unwrap_or_default()
}

/// The value of an instant query's first sample, once there is one.
fn first_value(body: &str) -> Option<f64> {
    let (_, rest) = body.split_once("\"value\":[")?;
    rest.split('"').nth(1)?.parse().ok()
}

/// Waits (bounded) until Prometheus has scraped GPU 0 `n` times.
fn scraped(prom: &mut Prometheus, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = query(prom, "count_over_time(gpu_up{gpu=\"0\"}[10m])");
        if first_value(&body).is_some_and(|c| c >= n) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped {n} times: {body}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Xids counted before a restart and Xids in a rotated, truncated or
/// rewritten kernel log are no new Xids: a real Prometheus scraping the
/// exporter through all of it sees no increase and fires nothing.
#[test]
fn restarts_and_log_rotation_fire_nothing_new_in_prometheus() {
    if !have("prometheus", &["--version"]) {
        return;
    }
    let dir = TempDir::new("rotate");
    let log = dir.0.join("dmesg.log");
    let old: String = (1..=3)
        .map(|i| format!("[  10{i}.000000] NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"))
        .collect();
    std::fs::write(&log, &old).unwrap();
    let smi = fake_smi(
        "rotate",
        "index, uuid, pci.bus_id, temperature.gpu\n0, GPU-a, 00000000:9B:00.0, 40\n1, GPU-b, 00000000:9C:00.0, 41\n",
    );
    // One address across the restart, as Prometheus knows it.
    let listen = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let listen_s = listen.to_string();
    let (smi_s, log_s) = (smi.to_str().unwrap(), log.to_str().unwrap());
    let exporter = || {
        Exporter::start(&[
            "--source",
            "smi",
            "--smi.path",
            smi_s,
            "--xid.kmsg",
            log_s,
            "--web.listen-address",
            &listen_s,
        ])
    };
    let e = exporter();
    // The committed rule file: what --print-rules prints by default.
    let mut prom = Prometheus::start(listen);
    scraped(&mut prom, 3.0);
    // A new Xid after start, not critical: counted, pages nothing.
    let append = |text: &str| {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    let new = format!(
        "[{:.6}] NVRM: Xid (PCI:0000:9b:00): 13, pid=1, name=x, Graphics Exception\n",
        crate::common::uptime() + 200.0
    );
    append(&new);
    e.wait_for("/metrics", Duration::from_secs(10), |b| {
        b.contains("gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-a\",xid=\"13\"} 1")
    });
    scraped(&mut prom, 6.0);

    // A restart: everything in the log is from before it.
    drop(e);
    let e = exporter();
    scraped(&mut prom, 10.0);
    // `dmesg > file`: the same file rewritten with all of it again.
    std::fs::write(&log, format!("{old}{new}")).unwrap();
    scraped(&mut prom, 13.0);
    // logrotate's copytruncate, the old lines written back.
    std::fs::write(&log, "").unwrap();
    scraped(&mut prom, 15.0);
    append(&old);
    scraped(&mut prom, 18.0);
    // Rotation to a new file holding the old lines.
    std::fs::rename(&log, dir.0.join("dmesg.log.1")).unwrap();
    std::fs::write(&log, &old).unwrap();
    scraped(&mut prom, 22.0);

    let body = e.metrics(None).body;
    assert!(
        body.contains("gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-a\",xid=\"79\"} 0"),
        "{body}"
    );
    // Nothing new, by Prometheus' own reading.
    let increase = query(
        &mut prom,
        "sum(increase(gpu_xid_errors_total{xid=\"79\"}[10m]))",
    );
    assert_eq!(first_value(&increase), Some(0.0), "{increase}");
    let alerts = query(
        &mut prom,
        "count_over_time(ALERTS{alertname=\"GPUXidErrors\"}[10m])",
    );
    assert!(alerts.contains("\"result\":[]"), "{alerts}");
    assert!(
        !firing(&e.get("/alerts", &[]).body)
            .iter()
            .any(|(a, _)| a == "GPUXidErrors")
    );
}

/// A simulated fleet where every kind of counter moves, each below its
/// alert's threshold: PCIe replays (60 in 10m against 80), NVLink errors
/// (0.5/s summed against 1/s), Xid, throttle seconds and a model's TTFT.
const MOVING_COUNTERS: &str = r#"{
  "gpus": [
    { "clock_events": ["sw_thermal_slowdown"], "xid": 48, "xid_every": "2s",
      "health": { "pcie_replays_per_second": 0.1, "nvlink_errors_per_second": 0.5 } },
    {}
  ],
  "models": [{ "name": "m", "requests_per_second": 40, "slow_fraction": 0.01 }]
}"#;

/// The simulator's counter families Prometheus has stored: every GPU
/// one and the TTFT histogram's (the exporter's own restart with it),
/// `must` among them.
fn sim_counters(prom: &mut Prometheus, must: &[&str]) -> Vec<String> {
    let (_, body) = prom
        .get("/api/v1/label/__name__/values")
        .expect("Prometheus answers");
    let families: Vec<String> = body
        .split('"')
        .filter(|n| {
            (n.starts_with("gpu_") && n.ends_with("_total") && !n.starts_with("gpu_exporter_"))
                || n.starts_with("llm_ttft_seconds_")
        })
        .map(String::from)
        .collect();
    for f in must {
        assert!(families.iter().any(|n| n == f), "{f} not in {families:?}");
    }
    families
}

/// A real NVML counter lives in the driver: a killed and restarted
/// exporter goes on from it. So does the simulator's, whose counters are a
/// function of wall time: a real Prometheus scraping one address across a
/// restart sees no counter go back and fires no rate alert.
#[test]
fn a_restarted_simulator_sends_no_counter_backwards() {
    if !have("prometheus", &["--version"]) {
        return;
    }
    let scenario = temp_file("moving-counters.json", MOVING_COUNTERS);
    let listen = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let listen_s = listen.to_string();
    let args = [
        "--sim.scenario",
        scenario.to_str().unwrap(),
        "--web.listen-address",
        &listen_s,
    ];
    let e = Exporter::start(&args);
    let mut prom = Prometheus::start(listen);
    scraped(&mut prom, 6.0);
    drop(e);
    let _restarted = Exporter::start(&args);
    scraped(&mut prom, 12.0);

    let families = sim_counters(
        &mut prom,
        &[
            "gpu_energy_joules_total",
            "gpu_pcie_replay_errors_total",
            "gpu_nvlink_errors_total",
            "gpu_xid_errors_total",
            "gpu_clocks_event_seconds_total",
            "llm_ttft_seconds_bucket",
        ],
    );
    let moved = query(
        &mut prom,
        "increase(gpu_pcie_replay_errors_total{gpu=\"0\"}[10m]) > 0",
    );
    assert!(first_value(&moved).is_some(), "{moved}");
    let backwards = backwards(&mut prom, &families);
    assert!(backwards.is_empty(), "went back: {backwards:?}");
    let alerts = query(
        &mut prom,
        "count_over_time(ALERTS{alertname=~\"GPUPCIeReplayErrors|GPUNVLinkErrors\"}[10m])",
    );
    assert!(alerts.contains("\"result\":[]"), "{alerts}");
}

/// Those of `families` with a counter reset in the last 10 minutes, by
/// Prometheus' `resets()`.
fn backwards(prom: &mut Prometheus, families: &[String]) -> Vec<String> {
    families
        .iter()
        .filter(|f| {
            let resets = query(prom, &format!("sum(resets({f}[10m]))"));
            first_value(&resets) != Some(0.0)
        })
        .cloned()
        .collect()
}

/// The active alerts (pending or firing) of an `/alerts` body, as
/// (alertname, gpu or model) to their `activeAt` in Unix seconds.
fn active_since(body: &str) -> BTreeMap<(String, String), f64> {
    let names = body.split(r#"{"labels":{"#).skip(1).map(|a| {
        let name = a
            .split(r#""alertname":""#)
            .nth(1)
            .and_then(|n| n.split('"').next());
        let gpu = a
            .split(r#""gpu":""#)
            .nth(1)
            .and_then(|n| n.split('"').next());
        let since = a
            .split(r#""activeAt":""#)
            .nth(1)
            .and_then(|n| n.split('"').next());
        let since = since.and_then(base::time::parse_iso_time);
        let who = gpu.map(|g| format!("gpu{g}")).unwrap_or_default();
        ((name.unwrap().to_string(), who), since.unwrap())
    });
    names.collect()
}

/// The game day's incidents on a pinned origin (`--sim.start`). Killed
/// after them and restarted on the same start and address, the exporter
/// goes on with every counter, the incidents' too: a real Prometheus sees
/// no reset, and the exporter's alerts are the ones it had, active since
/// the same moments (to the collection interval: the replay's steps and
/// the live collections fall at different fractions of a second). Started
/// once more without the start, the incidents begin again and counters go
/// back, which is what the flag is for.
#[test]
fn a_restarted_gameday_on_the_same_start_resets_no_counter() {
    if !have("prometheus", &["--version"]) {
        return;
    }
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/gameday.json");
    let listen = crate::deploy::free_addr();
    let listen_s = listen.to_string();
    // GPU 4's Xid 64 comes 210 s in: after this start, live; the next
    // incident (GPU 5's, 240 s in) comes well after the restart.
    let origin = base::time::unix_now() - 195.0;
    let start = format!("{origin:.3}");
    let args = |pinned: bool| {
        let mut a = vec![
            "--sim.scenario",
            scenario,
            "--web.listen-address",
            &listen_s,
        ];
        a.extend(
            pinned
                .then_some(["--sim.start", &start])
                .into_iter()
                .flatten(),
        );
        a
    };
    let e = Exporter::start(&args(true));
    let mut prom = Prometheus::start(listen);
    let xid64 = ("GPUXidErrors".to_string(), "gpu4".to_string());
    let settled = |b: &str| !b.contains("\"warnings\"");
    let before = e.wait_for("/alerts", Duration::from_secs(60), |b| {
        settled(b) && active_since(b).contains_key(&xid64)
    });
    scraped(&mut prom, 4.0);
    drop(e);
    let e = Exporter::start(&args(true));
    let after = e.wait_for("/alerts", Duration::from_secs(60), settled);
    scraped(&mut prom, 10.0);

    // The seven families whose incident series went back without a start.
    let families = sim_counters(
        &mut prom,
        &[
            "gpu_xid_errors_total",
            "gpu_pcie_replay_errors_total",
            "gpu_clocks_event_seconds_total",
            "gpu_remapped_rows_total",
            "gpu_retired_pages_total",
            "gpu_ecc_uncorrected_errors_lifetime_total",
            "gpu_nvlink_errors_total",
        ],
    );
    let xid79 = query(&mut prom, "gpu_xid_errors_total{gpu=\"2\",xid=\"79\"}");
    assert_eq!(first_value(&xid79), Some(1.0), "{xid79}");
    let back = backwards(&mut prom, &families);
    assert!(back.is_empty(), "went back across the restart: {back:?}");

    let (before, after) = (active_since(&before), active_since(&after));
    assert!(
        before.contains_key(&("GPUXidErrors".into(), "gpu2".into())),
        "{before:?}"
    );
    for (alert, since) in &before {
        // Replayed, an alert is active from the first step at or after its
        // incident, within an interval of it; live, the first process saw
        // it at a collection at or after that, late by a loaded machine's
        // lag at most. Never later after the restart: nothing fires anew.
        let again = after.get(alert).copied().unwrap_or(f64::NAN);
        let moved = again - since;
        assert!(
            (-5.0..=1.05).contains(&moved),
            "{alert:?}: {since} then {again}"
        );
    }
    for (alert, since) in after.iter().filter(|(a, _)| !before.contains_key(*a)) {
        assert!(*since >= origin + 240.0, "{alert:?} anew at {since}");
    }

    // Without the start, the restart's incidents are yet to come.
    drop(e);
    let _fresh = Exporter::start(&args(false));
    scraped(&mut prom, 14.0);
    let back = backwards(&mut prom, &families);
    assert!(
        back.iter().any(|f| f == "gpu_remapped_rows_total"),
        "{back:?}"
    );
}

/// The join of pods to GPU readings, read from docs/attribution.md.
fn readme_join() -> String {
    let page = include_str!("../../docs/attribution.md");
    let after = page
        .split("**Joining.**")
        .nth(1)
        .expect("docs/attribution.md: a **Joining.** paragraph");
    let block = after
        .split("```promql\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("docs/attribution.md: the join in a promql block");
    block.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Each series of a Prometheus instant-query answer as (its labels as
/// `k="v"` text, its value).
pub fn series(body: &str) -> Vec<(String, f64)> {
    body.split(r#"{"metric":{"#)
        .skip(1)
        .map(|s| {
            let labels = s[..s.find('}').unwrap()].to_string();
            let value = s
                .split(r#""value":["#)
                .nth(1)
                .and_then(|v| v.split('"').nth(1))
                .and_then(|v| v.parse().ok())
                .unwrap();
            (labels, value)
        })
        .collect()
}

#[test]
fn the_readme_join_holds_on_time_sliced_gpus() {
    if !have("prometheus", &["--version"]) {
        return;
    }
    use crate::deploy::{Prometheus, urlencode};
    // GPU 0 time-sliced by two pods, GPU 1 held by one, GPU 2 by none.
    let scenario = r#"{"gpus":[
        {"memory_used_gib": 30, "pods": [
            {"namespace": "research", "pod": "notebook-alice", "container": "jupyter"},
            {"namespace": "research", "pod": "notebook-bob", "container": "jupyter"}]},
        {"memory_used_gib": 50, "pods": [{"namespace": "ml", "pod": "train", "container": "main"}]},
        {"memory_used_gib": 10}
    ]}"#;
    let e = Exporter::on_scenario("join-scenario.json", scenario, &[]);
    let mut prom = Prometheus::start(e.addr);
    let join = readme_join();
    let deadline = Instant::now() + Duration::from_secs(45);
    let query =
        |prom: &mut Prometheus, q: &str| prom.get(&format!("/api/v1/query?query={}", urlencode(q)));
    let got = loop {
        match query(&mut prom, &join) {
            Some((200, body)) if series(&body).len() == 3 => break series(&body),
            other => {
                assert!(Instant::now() < deadline, "{join}: {other:?}");
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    };
    let gib = 1024.0 * 1024.0 * 1024.0;
    let mut seen: Vec<(&str, f64)> = got
        .iter()
        .map(|(labels, v)| {
            assert!(labels.contains(r#""uuid":"GPU-"#), "{labels}");
            let pod = ["notebook-alice", "notebook-bob", "train"]
                .into_iter()
                .find(|p| labels.contains(&format!(r#""pod":"{p}""#)))
                .unwrap_or_else(|| panic!("{labels}"));
            (pod, v / gib)
        })
        .collect();
    seen.sort_by(|a, b| a.0.cmp(b.0));
    // Each pod gets its GPU's reading; both sharing pods get GPU 0's.
    assert_eq!(
        seen,
        [
            ("notebook-alice", 30.0),
            ("notebook-bob", 30.0),
            ("train", 50.0)
        ]
    );
    // The usual join, the other way round, breaks on the shared GPU.
    let naive =
        "gpu_memory_used_bytes * on (instance, gpu, uuid) group_left (namespace, pod) gpu_pod_info";
    let (status, body) = query(&mut prom, naive).unwrap();
    assert_eq!(status, 422, "{body}");
    assert!(body.contains("many-to-many matching not allowed"), "{body}");
}

/// Failure is loud, in both evaluators. One exporter, one Prometheus, and
/// the scenario's script: GPU 1 falls off the bus at 1s (a page), every
/// collection hangs from 10s to 35s, every one fails from 45s, and then the
/// exporter is killed. Durations are scaled through the rules file and
/// `--collect.max-stale 4s`; what each side fires is read while the fault
/// lasts.
#[test]
fn hangs_failures_and_a_dead_exporter_are_loud_in_both_evaluators() {
    if !have("prometheus", &["--version"]) {
        return;
    }
    let scenario = temp_file(
        "loud-scenario.json",
        r#"{"gpus":[{},{}],"incidents":[
          {"at":"1s","gpu":1,"lost":true},
          {"at":"10s","hang":"25s"},
          {"at":"45s","fail":"300s"}]}"#,
    );
    let rules = temp_file(
        "loud-rules.json",
        r#"{"rules":[{"name":"GPULost","for":"2s"},{"name":"ExporterCollectFailing","for":"2s"},
          {"name":"ExporterDown","for":"2s"}]}"#,
    );
    let (scenario, rules) = (scenario.to_str().unwrap(), rules.to_str().unwrap());
    let args = [
        "--rules.file",
        rules,
        "--collect.max-stale",
        "4s",
        "--collect.interval",
        "500ms",
    ];
    let mut print = vec!["--print-rules"];
    print.extend(args);
    let printed = run(&print);
    assert_eq!(printed.status.code(), Some(0));
    let printed = String::from_utf8(printed.stdout).unwrap();
    // Pages keep firing --collect.max-stale plus the failure pages'
    // longest `for` (ExporterAbsent's 2m) after their series go.
    assert!(printed.contains("keep_firing_for: 124s"), "{printed}");
    let rule_file = temp_file("loud-rules.yml", &printed);
    let mut serve = vec!["--sim.scenario", scenario];
    serve.extend(args);
    let started = Instant::now();
    let e = Exporter::start(&serve);
    let mut prom = Prometheus::start_with(e.addr, &rule_file);
    let ours = || firing(&e.get("/alerts", &[]).body);
    let theirs = |prom: &mut Prometheus| {
        prom.get("/api/v1/alerts")
            .map(|(_, body)| firing(&body))
            .unwrap_or_default()
    };
    let want = |names: &[&str]| -> BTreeSet<(String, String)> {
        names
            .iter()
            .map(|n| {
                let who = if *n == "GPULost" { "gpu1" } else { "" };
                (n.to_string(), who.to_string())
            })
            .collect()
    };
    // Waits until both sides fire `names`, before `by` seconds into the
    // run (when the fault would be over), then checks `during` on the
    // metrics: the fault still lasts, or it ended only just now (a page
    // holds through the gap its fault made in its series, so on a loaded
    // machine Prometheus may show it firing a moment after).
    let both = |prom: &mut Prometheus, names: &[&str], by: f64, during: &dyn Fn(&str) -> bool| {
        let want = want(names);
        loop {
            let (o, t) = (ours(), theirs(prom));
            if want.is_subset(&o) && want.is_subset(&t) {
                let body = e.metrics(None).body;
                let in_time = started.elapsed().as_secs_f64() < by;
                assert!(during(&body) || in_time, "the fault was over: {body}");
                return;
            }
            assert!(
                started.elapsed().as_secs_f64() < by,
                "{names:?} by {by}s: exporter {o:?}, Prometheus {t:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    };
    let stalled = |b: &str| value(b, "gpu_exporter_collect_stalled") == Some(1.0);
    let failing = |b: &str| {
        value(b, "gpu_exporter_collect_success") == Some(0.0)
            && value(b, "gpu_exporter_readings_hidden") == Some(1.0)
            && !b.contains("gpu_up{")
    };
    // The lost GPU pages.
    both(&mut prom, &["GPULost"], 10.0, &|_| true);
    // During the hang: the stall alert fires in both, while the poller
    // is stuck; past max-stale the readings go, ExporterBlind pages, and
    // GPULost keeps firing without its series.
    both(
        &mut prom,
        &["ExporterCollectFailing", "ExporterBlind", "GPULost"],
        34.0,
        &stalled,
    );
    // A failing collection: the same, after the hang is over.
    e.wait_for("/metrics", Duration::from_secs(60), |b| {
        value(b, "gpu_exporter_collect_stalled") == Some(0.0)
            && value(b, "gpu_exporter_collect_success") == Some(0.0)
    });
    both(
        &mut prom,
        &["ExporterCollectFailing", "ExporterBlind", "GPULost"],
        120.0,
        &failing,
    );
    // The exporter dies: only Prometheus can see it, and the page it had
    // keeps firing until ExporterDown has taken over.
    drop(e);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let t = theirs(&mut prom);
        if t.contains(&("ExporterDown".to_string(), String::new())) {
            assert!(
                t.contains(&("GPULost".to_string(), "gpu1".to_string())),
                "{t:?}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no ExporterDown: {t:?}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
