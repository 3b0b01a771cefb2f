use crate::common::{Exporter, have, run};
use std::path::Path;

const RULE_FILE: &str = "deploy/prometheus/gpu-exporter-rules.yml";

fn printed() -> String {
    let out = run(&["--print-rules"]);
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8(out.stdout).unwrap()
}

fn alert_names(rules: &str) -> Vec<&str> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect()
}

#[test]
fn committed_rule_file_matches_print_rules() {
    let root = env!("CARGO_MANIFEST_DIR");
    let committed = std::fs::read_to_string(Path::new(root).join(RULE_FILE)).unwrap();
    assert!(
        committed == printed(),
        "{RULE_FILE} is stale: regenerate it with `cargo run -- --print-rules > {RULE_FILE}`"
    );
}

#[test]
fn promtool_checks_the_rules() {
    if !have("promtool", &["--version"]) {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(RULE_FILE);
    let out = std::process::Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_rule_has_a_runbook() {
    let rules = printed();
    let names = alert_names(&rules);
    let urls: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: '"))
        .map(|u| u.trim_end_matches('\''))
        .collect();
    assert!(names.len() >= 10);
    assert_eq!(names.len(), urls.len(), "every alert has a runbook_url");
    for (name, url) in names.iter().zip(&urls) {
        // Absolute, the exporter's own copy on the scraped instance.
        let file = url
            .strip_prefix("http://{{ $labels.instance }}/")
            .unwrap_or_else(|| panic!("{name}: {url} is not the exporter's own copy"));
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{name} has no runbook at {}", path.display()));
        for section in [
            "Detect",
            "During a collection failure",
            "Mitigate",
            "Resolve",
        ] {
            assert!(text.contains(section), "{name}'s runbook lacks {section}");
        }
    }
    let out = run(&[
        "--print-rules",
        "--alerts.runbook-base-url",
        "https://runbooks.example/gpu/",
    ]);
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("runbook_url: 'https://runbooks.example/gpu/GPULost.md'")
    );
}

#[test]
fn alerts_endpoint_has_prometheus_shape() {
    let e = Exporter::start(&[]);
    let r = e.get("/alerts", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let body = r.body;
    assert!(
        body.starts_with(r#"{"status":"success","data":{"alerts":["#),
        "{body}"
    );
    for (name, gpu, severity) in [
        ("GPUThrottling", 1, "ticket"),
        ("GPUXidErrors", 2, "page"),
        ("KVFragmentationRisk", 3, "ticket"),
    ] {
        let labels = format!(
            r#"{{"labels":{{"alertname":"{name}","gpu":"{gpu}","uuid":"GPU-5a1e0000-0000-4000-8000-00000000000{gpu}","severity":"{severity}"}}"#
        );
        let at = body
            .find(&labels)
            .unwrap_or_else(|| panic!("no {name} in {body}"));
        let alert = &body[at..];
        let alert = &alert[..alert.find(r#""value":"#).unwrap()];
        assert!(alert.contains(r#""state":"firing""#), "{alert}");
        // On /alerts the links stay relative to the exporter.
        assert!(
            alert.contains(&format!(r#""runbook_url":"docs/runbooks/{name}.md""#)),
            "{alert}"
        );
        assert!(
            alert.contains(&format!(r#""summary":"GPU {gpu} "#)),
            "{alert}"
        );
        assert!(alert.contains(r#""activeAt":"20"#), "{alert}");
    }
    for name in ["TTFTBudgetBurn", "TTFTBudgetBurnSlow"] {
        let labels = format!(
            r#"{{"labels":{{"alertname":"{name}","model_name":"llama-3.1-70b-instruct","severity":"#
        );
        assert!(body.contains(&labels), "no {name} in {body}");
    }
    assert!(!body.contains("mistral"), "{body}");
    assert_eq!(body.matches("\"alertname\"").count(), 5, "{body}");
    if have("python3", &["--version"]) {
        let out = crate::common::pipe(
            "python3",
            &[
                "-c",
                "import json,sys; d=json.load(sys.stdin); print(len(d['data']['alerts']))",
            ],
            &body,
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "5");
    }
}

#[test]
fn promtool_unit_tests_pass() {
    if !have("promtool", &["--version"]) {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(root.join("tests/promtool/rules.test.yml"))
        .output()
        .unwrap();
    let text = crate::common::output_text(&out);
    assert!(out.status.success() && text.contains("SUCCESS"), "{text}");
}

/// An alert's transition is logged once, live, naming who uses the GPU as
/// its `workloads` annotation does.
#[test]
fn alert_log_lines_name_the_workloads() {
    use crate::common::temp_file;
    use std::time::Duration;
    let scenario = r#"{"gpus":[
        {"pods":[{"namespace":"ml","pod":"train-0","container":"trainer"}], "jobs":["4711"]}],
      "incidents":[{"at":"1s","gpu":0,"clock_events":["hw_thermal_slowdown"]}]}"#;
    let rules = temp_file(
        "log-rules.json",
        r#"{ "rules": [ { "name": "GPUThrottling", "for": "1s" } ] }"#,
    );
    let e = Exporter::on_scenario(
        "log-scenario.json",
        scenario,
        &["--rules.file", rules.to_str().unwrap()],
    );
    e.wait_log("alert GPUThrottling{", Duration::from_secs(30));
    e.wait_log("-> firing", Duration::from_secs(30));
    let log = e.log();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("alert GPUThrottling{"))
        .collect();
    assert!(lines.len() >= 2, "{log}");
    for l in lines {
        assert!(
            l.ends_with(r#" workloads="pod ml/train-0 (trainer) job 4711""#),
            "{l}"
        );
    }
}
