//! The shipped inhibitions in a real Alertmanager, fed by a real
//! Prometheus that scrapes the exporter and evaluates the shipped rules:
//! the alerts carry exactly the labels Prometheus gives them, so an
//! `equal:` that names a label one side lacks shows here as a page that is
//! not muted (absent on both sides compares equal, which is why `cluster`
//! is harmless). All on loopback, every wait bounded.

use crate::common::{Exporter, eventually, have};
use crate::deploy::{Prometheus, TempDir, free_addr};
use crate::prometheus::http_get;
use nanoserde::DeJson;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// GPU 0 has failed a row remap and logs Xid 48 (which pages); GPU 1 only
/// logs Xid 48. The simulator's Xid counts follow wall time, so each
/// scrape sees them grow and `increase()` holds without waiting for a
/// single event to land between two scrapes.
const SCENARIO: &str = r#"{"gpus":[
  {"xid":48,"xid_every":"2s","health":{"row_remap_failed":true}},
  {"xid":48,"xid_every":"2s"}
]}"#;

const RULES: &str = "deploy/prometheus/gpu-exporter-rules.yml";
const CONFIG: &str = "deploy/alertmanager/alertmanager.yml";

/// An Alertmanager on a free loopback port, without gossip; killed (and
/// its data removed) on drop.
pub struct Alertmanager {
    child: Child,
    pub addr: SocketAddr,
    dir: TempDir,
}

impl Alertmanager {
    pub fn start(config: &Path) -> Alertmanager {
        Alertmanager::start_with(config, &[])
    }

    /// With more flags (`--web.config.file` for TLS).
    pub fn start_with(config: &Path, args: &[String]) -> Alertmanager {
        let dir = TempDir::new("alertmanager");
        // Free now; a race for it shows as Alertmanager exiting, reported
        // on the first query.
        let addr = free_addr();
        let log = std::fs::File::create(dir.0.join("log")).unwrap();
        let child = Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.path={}", dir.0.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--cluster.listen-address=")
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn prometheus-alertmanager");
        Alertmanager { child, addr, dir }
    }

    /// The shipped configuration's, once it answers.
    pub fn shipped() -> Alertmanager {
        let mut am = Alertmanager::start(&Path::new(env!("CARGO_MANIFEST_DIR")).join(CONFIG));
        eventually(Duration::from_secs(30), || {
            am.alerts();
            http_get(&am.addr.to_string(), "/-/ready")
                .map(drop)
                .ok_or_else(|| "alertmanager is not ready".to_string())
        });
        am
    }

    /// What `/api/v2/alerts` holds now; empty while not answering.
    pub fn alerts(&mut self) -> Vec<AmAlert> {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = std::fs::read_to_string(self.dir.0.join("log")).unwrap_or_default();
            panic!("alertmanager exited ({status}):\n{log}");
        }
        let Some(body) = http_get(&self.addr.to_string(), "/api/v2/alerts") else {
            return Vec::new();
        };
        Vec::<AmAlert>::deserialize_json(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
    }

    /// The `gpu` labels of the GPUXidErrors alerts `amtool alert query`
    /// lists with `filter` (`--active` or `--inhibited`), sorted.
    fn amtool_xid_gpus(&self, filter: &str) -> Vec<String> {
        let out = Command::new("amtool")
            .arg(format!("--alertmanager.url=http://{}", self.addr))
            .args(["alert", "query", "--output=json", filter])
            .arg("alertname=GPUXidErrors")
            .output()
            .unwrap();
        let body = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "amtool: {body}{out:?}");
        let alerts =
            Vec::<AmAlert>::deserialize_json(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        let mut gpus: Vec<String> = alerts.iter().map(|a| label(a, "gpu").to_string()).collect();
        gpus.sort();
        gpus
    }
    /// A Prometheus (1s scrapes and evaluations) that scrapes `targets`
    /// under the job `gpu-exporter`, evaluates `rules` and sends to this
    /// Alertmanager; `global` is more of its `global:` block.
    pub fn prometheus(
        &self,
        tag: &str,
        rules: &Path,
        targets: &[String],
        global: &str,
    ) -> Prometheus {
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        Prometheus::with_config(
            &format!("prometheus-am-{tag}-{}", self.addr.port()),
            &format!(
                "{global}rule_files:\n  - '{}'\n\
                 scrape_configs:\n  - job_name: gpu-exporter\n    static_configs:\n      - targets: [{}]\n\
                 alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{}']\n",
                rules.display(),
                targets.join(", "),
                self.addr
            ),
        )
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(DeJson, Debug)]
pub struct AmAlert {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub fingerprint: String,
    pub status: AmStatus,
    #[nserde(rename = "endsAt")]
    pub ends_at: String,
    #[nserde(rename = "generatorURL")]
    pub generator_url: String,
}

#[derive(DeJson, Debug)]
pub struct AmStatus {
    pub state: String,
    #[nserde(rename = "inhibitedBy")]
    pub inhibited_by: Vec<String>,
}

pub fn label<'a>(a: &'a AmAlert, name: &str) -> &'a str {
    a.labels.get(name).map_or("", String::as_str)
}

pub fn find<'a>(alerts: &'a [AmAlert], name: &str, gpu: &str) -> Option<&'a AmAlert> {
    alerts
        .iter()
        .find(|a| label(a, "alertname") == name && label(a, "gpu") == gpu)
}

#[test]
fn a_remap_failure_mutes_that_gpus_xid_page_in_alertmanager() {
    if !have("prometheus", &["--version"])
        || !have("prometheus-alertmanager", &["--version"])
        || !have("amtool", &["--version"])
    {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The shipped file as it is: its webhooks point at a port nobody
    // listens on, and a failed delivery does not stop an inhibition.
    let mut am = Alertmanager::start(&root.join(CONFIG));
    let e = Exporter::on_scenario("am-inhibit.json", SCENARIO, &[]);
    // The shipped rules as they are: GPUXidErrors and GPURowRemapFailure
    // have no `for:`, so nothing needs shortening.
    let _prom = am.prometheus("inhibit", &root.join(RULES), &[e.addr.to_string()], "");

    let alerts = eventually(Duration::from_secs(90), || {
        let alerts = am.alerts();
        let all = [
            ("GPUXidErrors", "0"),
            ("GPUXidErrors", "1"),
            ("GPURowRemapFailure", "0"),
        ];
        match all.iter().all(|(n, g)| find(&alerts, n, g).is_some()) {
            true => Ok(alerts),
            false => Err(format!("Alertmanager holds {alerts:#?}")),
        }
    });
    let remap = find(&alerts, "GPURowRemapFailure", "0").unwrap();
    let muted = find(&alerts, "GPUXidErrors", "0").unwrap();
    let paged = find(&alerts, "GPUXidErrors", "1").unwrap();
    assert_eq!(
        (muted.status.state.as_str(), &muted.status.inhibited_by),
        ("suppressed", &vec![remap.fingerprint.clone()]),
        "GPU 0's Xid page, muted by its remap failure: {alerts:#?}"
    );
    for page in [remap, paged] {
        assert_eq!(
            (page.status.state.as_str(), page.status.inhibited_by.len()),
            ("active", 0),
            "{page:#?}"
        );
    }
    // The same verdicts through amtool.
    assert_eq!(am.amtool_xid_gpus("--inhibited"), ["0"]);
    assert_eq!(am.amtool_xid_gpus("--active"), ["1"]);

    for a in &alerts {
        let name = label(a, "alertname");
        // Only a fleet rule, which says so, aggregates `instance` away.
        let fleet = a
            .annotations
            .get("scope")
            .is_some_and(|s| s.starts_with("fleet:"));
        if !fleet {
            assert_ne!(label(a, "instance"), "", "{name} has no instance: {a:#?}");
        }
        if a.labels.contains_key("gpu") || a.labels.contains_key("uuid") {
            for l in ["instance", "gpu", "uuid"] {
                assert_ne!(label(a, l), "", "{name} about a GPU has no {l}: {a:#?}");
            }
        }
    }
}

/// Two nodes (two exporters on the simulator) serve `both`, burning on
/// each, and `lone`, burning on node A only, where node B serves it a
/// hundred times as fast and healthy: across the fleet `lone` is 0.5%
/// slow, 5x, under every factor. Prometheus fires `TTFTBudgetBurn` at node
/// scope for both nodes' `both` and node A's `lone`, and at fleet scope
/// for `both` only. In the shipped Alertmanager the fleet page mutes its
/// node pages; node A's `lone` pages on its own.
#[test]
fn a_fleet_burn_mutes_its_node_burns_and_a_lone_node_pages() {
    if !have("prometheus", &["--version"]) || !have("prometheus-alertmanager", &["--version"]) {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut am = Alertmanager::start(&root.join(CONFIG));
    let rules = crate::common::temp_file(
        "am-scope-rules.json",
        r#"{ "rules": [{ "name": "TTFTBudgetBurn", "for": "2s",
             "windows": [{ "long": "20s", "short": "5s", "factor": 14.4 }] }] }"#,
    );
    let rules = rules.to_str().unwrap();
    let printed = crate::common::run(&["--print-rules", "--rules.file", rules]);
    assert_eq!(printed.status.code(), Some(0));
    let printed = crate::common::temp_file(
        "am-scope-rules.yml",
        &String::from_utf8_lossy(&printed.stdout),
    );
    let node = |name: &str, lone_rps: u32, lone_slow: f64| {
        let scenario = format!(
            r#"{{"gpus":[{{}}],"models":[
              {{"name":"both","requests_per_second":100,"slow_fraction":0.5}},
              {{"name":"lone","requests_per_second":{lone_rps},"slow_fraction":{lone_slow}}}]}}"#
        );
        Exporter::on_scenario(name, &scenario, &["--rules.file", rules])
    };
    let (a, b) = (
        node("am-node-a.json", 50, 0.5),
        node("am-node-b.json", 5000, 0.0),
    );
    let _prom = am.prometheus(
        "scope",
        &printed,
        &[a.addr.to_string(), b.addr.to_string()],
        "",
    );
    let (a_at, b_at) = (a.addr.to_string(), b.addr.to_string());
    let burn = |alerts: &[AmAlert], scope: &str, model: &str, at: &str| {
        alerts
            .iter()
            .find(|x| {
                label(x, "alertname") == "TTFTBudgetBurn"
                    && label(x, "scope") == scope
                    && label(x, "model_name") == model
                    && label(x, "instance") == at
            })
            .map(|x| {
                (
                    x.status.state.clone(),
                    x.status.inhibited_by.clone(),
                    x.fingerprint.clone(),
                )
            })
    };
    let alerts = eventually(Duration::from_secs(90), || {
        let alerts = am.alerts();
        let all = [
            ("node", "both", a_at.as_str()),
            ("node", "both", b_at.as_str()),
            ("node", "lone", a_at.as_str()),
            ("fleet", "both", ""),
        ];
        match all
            .iter()
            .all(|(s, m, at)| burn(&alerts, s, m, at).is_some())
        {
            true => Ok(alerts),
            false => Err(format!("Alertmanager holds {alerts:#?}")),
        }
    });
    let fleet = burn(&alerts, "fleet", "both", "").unwrap();
    assert_eq!((fleet.0.as_str(), fleet.1.len()), ("active", 0));
    for at in [&a_at, &b_at] {
        let muted = burn(&alerts, "node", "both", at).unwrap();
        assert_eq!(
            (muted.0.as_str(), &muted.1),
            ("suppressed", &vec![fleet.2.clone()]),
            "both on {at}, muted by its fleet page: {alerts:#?}"
        );
    }
    let lone = burn(&alerts, "node", "lone", &a_at).unwrap();
    assert_eq!(
        (lone.0.as_str(), lone.1.len()),
        ("active", 0),
        "{alerts:#?}"
    );
    assert_eq!(burn(&alerts, "node", "lone", &b_at), None, "{alerts:#?}");
    assert_eq!(burn(&alerts, "fleet", "lone", ""), None, "{alerts:#?}");
}

/// What an independent check found: Prometheus sending, the exporter dies,
/// and the pending remap that mutes GPU 0's Xid 63 ticket resolved at once
/// while the ticket (a window) went on firing, un-muted. Now the source
/// holds as long as its target's window (GPUXidEvents' shortened to 15s
/// through the rules file, so GPURowRemapPending holds its last sample
/// 15s): after
/// a SIGKILL the ticket is never active in Alertmanager while it lasts.
#[test]
fn a_dead_exporter_unmutes_nothing_when_prometheus_sends() {
    if !have("prometheus", &["--version"]) || !have("prometheus-alertmanager", &["--version"]) {
        return;
    }
    let mut am = Alertmanager::shipped();
    let rules = crate::common::temp_file(
        "am-gap-rules.json",
        r#"{ "rules": [{ "name": "GPUXidEvents", "window": "15s" }] }"#,
    );
    let rules = rules.to_str().unwrap();
    let printed = crate::common::run(&["--print-rules", "--rules.file", rules]);
    let printed = String::from_utf8_lossy(&printed.stdout).to_string();
    let (_, pending) = printed.split_once("- alert: GPURowRemapPending\n").unwrap();
    assert!(
        pending.contains("last_over_time(gpu_row_remap_pending[15s]) > 0 unless"),
        "{pending}"
    );
    let printed = crate::common::temp_file("am-gap-rules.yml", &printed);
    let e = Exporter::on_scenario(
        "am-gap.json",
        r#"{"gpus":[{"xid":63,"xid_every":"1s","health":{"row_remap_pending":true}}]}"#,
        &["--rules.file", rules],
    );
    let _prom = am.prometheus("gap", &printed, &[e.addr.to_string()], "");
    eventually(Duration::from_secs(60), || {
        let alerts = am.alerts();
        match find(&alerts, "GPUXidEvents", "0") {
            Some(a) if a.status.state == "suppressed" => Ok(()),
            _ => Err(format!("Alertmanager holds {alerts:#?}")),
        }
    });
    drop(e);
    let killed = std::time::Instant::now();
    let mut muted_after = 0;
    while killed.elapsed() < Duration::from_secs(25) {
        let alerts = am.alerts();
        let Some(t) = find(&alerts, "GPUXidEvents", "0") else {
            break;
        };
        assert_eq!(t.status.state, "suppressed", "un-muted: {alerts:#?}");
        muted_after += 1;
        std::thread::sleep(Duration::from_millis(250));
    }
    // The ticket outlived the exporter, muted all along.
    assert!(muted_after >= 8, "{muted_after}");
}
