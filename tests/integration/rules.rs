use crate::common::{Exporter, have, run, temp_file};
use std::path::Path;

const RULE_FILE: &str = "deploy/prometheus/gpu-exporter-rules.yml";

fn printed() -> String {
    let out = run(&["--print-rules"]);
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8(out.stdout).unwrap()
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

/// Each printed alert's block: its name and the text up to the next.
fn alert_blocks(rules: &str) -> Vec<(&str, &str)> {
    rules
        .split("      - alert: ")
        .skip(1)
        .map(|b| b.split_once('\n').unwrap())
        .collect()
}

/// The value of annotation `key` in an alert's block, unquoted.
fn annotation<'a>(block: &'a str, key: &str) -> Option<&'a str> {
    block
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: '")))
        .map(|v| v.trim_end_matches('\''))
}

fn check_runbook(name: &str, file: &str) {
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

/// A per-node alert links to the runbook on the exporter it is about; a
/// fleet alert (no instance) says so and, like ExporterDown (whose
/// exporter cannot serve it) and the verdicts on the engines' series
/// (whose instance is an engine), links only through
/// --alerts.runbook-base-url.
#[test]
fn every_rule_has_a_runbook() {
    let rules = printed();
    let blocks = alert_blocks(&rules);
    assert!(blocks.len() >= 10);
    let fleet = ["ExporterAbsent", "DriverVersionSkew"];
    let engines = [
        "TTFTBudgetBurn",
        "TTFTBudgetBurnSlow",
        "EngineAvailabilityBurn",
        "EngineAvailabilityBurnSlow",
    ];
    for name in engines {
        let scopes: Vec<&str> = (blocks.iter())
            .filter(|(n, _)| *n == name)
            .map(|(_, b)| {
                b.lines()
                    .find(|l| l.trim().starts_with("scope:"))
                    .unwrap()
                    .trim()
            })
            .collect();
        assert_eq!(scopes, ["scope: node", "scope: fleet"], "{name}");
    }
    for &(name, block) in &blocks {
        let scope = annotation(block, "scope");
        assert_eq!(scope.is_some(), fleet.contains(&name), "{name}: {scope:?}");
        if let Some(s) = scope {
            assert!(
                s.starts_with("fleet: this alert has no instance label"),
                "{s}"
            );
        }
        match annotation(block, "runbook_url") {
            Some(url) => {
                assert!(
                    !fleet.contains(&name) && !engines.contains(&name) && name != "ExporterDown",
                    "{name}: {url}"
                );
                let file = url
                    .strip_prefix("http://{{ $labels.instance }}/")
                    .unwrap_or_else(|| panic!("{name}: {url} is not the exporter's own copy"));
                check_runbook(name, file);
            }
            None => {
                let named = annotation(block, "runbook")
                    .unwrap_or_else(|| panic!("{name}: neither runbook_url nor runbook"));
                let file = named.split_once(':').unwrap().0;
                check_runbook(name, &format!("docs/runbooks/{file}"));
            }
        }
    }
    // With a stable host, every alert links through it, fleet ones too.
    let out = run(&[
        "--print-rules",
        "--alerts.runbook-base-url",
        "https://runbooks.example/gpu/",
    ]);
    let stable = String::from_utf8(out.stdout).unwrap();
    for (name, block) in alert_blocks(&stable) {
        let url = annotation(block, "runbook_url").unwrap_or_else(|| panic!("{name}"));
        assert!(
            url.starts_with("https://runbooks.example/gpu/"),
            "{name}: {url}"
        );
    }
    assert!(
        stable.contains("runbook_url: 'https://runbooks.example/gpu/ExporterAbsent.md'")
            || stable.contains("runbook_url: 'https://runbooks.example/gpu/ExporterDown.md'")
    );
    // A new rule that names no runbook links to the generic page.
    let custom = crate::common::temp_file(
        "custom-runbook.json",
        r#"{"rules":[{"name":"HotGPU","kind":"gauge","signal":"temperature","op":">","threshold":85,"severity":"ticket"}]}"#,
    );
    let out = run(&["--print-rules", "--rules.file", custom.to_str().unwrap()]);
    let with_custom = String::from_utf8(out.stdout).unwrap();
    let (_, hot) = alert_blocks(&with_custom)
        .into_iter()
        .find(|(n, _)| *n == "HotGPU")
        .unwrap();
    let url = annotation(hot, "runbook_url").unwrap();
    assert_eq!(
        url,
        "http://{{ $labels.instance }}/docs/runbooks/CustomRule.md"
    );
    check_runbook("HotGPU", "docs/runbooks/CustomRule.md");
}

/// The printed file says which --collect.max-stale its pages' hold follows.
#[test]
fn printed_rules_state_their_max_stale() {
    assert!(printed().contains("# Printed with --collect.max-stale 1m:"));
    let out = run(&["--print-rules", "--collect.max-stale", "5m"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("# Printed with --collect.max-stale 5m:"),
        "{text}"
    );
    // A page's hold follows it: max-stale plus ExporterAbsent's `for` (2m)
    // (GPULost's is longer: it outlasts what it mutes), a gauge's through
    // the gap only.
    let (_, page) = alert_blocks(&text)
        .into_iter()
        .find(|(n, _)| *n == "GPURecoveryRebootOrDrain")
        .unwrap();
    assert!(
        page.contains("last_over_time(gpu_recovery_action[7m]) > 1 unless"),
        "{page}"
    );
    assert!(!page.contains("keep_firing_for"), "{page}");
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

/// `--engine.config`'s per-model settings in the printed rules, run by
/// promtool on vLLM's own series: v (the defaults: 0.3 s judged at 0.25,
/// 99.9%) 3% slow pages at 30x; org/a, judged at its own 500ms (the 0.5
/// bound), has no slow request; b, 99% its own objective, burns only 3x.
/// At the defaults both would page as v does.
#[test]
fn per_model_slo_settings_reach_the_printed_rules() {
    if !have("promtool", &["--version"]) {
        return;
    }
    let config = temp_file(
        "slo-engines.json",
        r#"{"models": [{"name": "org/a", "ttft_threshold": "500ms"},
                       {"name": "b", "objective": 0.99}]}"#,
    );
    let out = run(&["--print-rules", "--engine.config", config.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::common::output_text(&out)
    );
    let rules = temp_file("slo-rules.yml", &String::from_utf8(out.stdout).unwrap());
    let mut series = String::new();
    for m in ["v", "org/a", "b"] {
        for (suffix, values) in [
            ("count{", "0+100x60"),
            ("bucket{le=\"0.25\",", "0+97x60"),
            ("bucket{le=\"0.5\",", "0+100x60"),
        ] {
            series += &format!(
                "      - series: 'vllm:time_to_first_token_seconds_{suffix}model_name=\"{m}\",instance=\"node-a:9400\"}}'\n        values: '{values}'\n"
            );
        }
    }
    let test = format!(
        "rule_files:\n  - {}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    \
         promql_expr_test:\n      - expr: 'round(model_name:llm_ttft_slo_errors:ratio_rate5m, 0.001)'\n        eval_time: 10m\n        exp_samples:\n          \
         - labels: '{{model_name=\"v\"}}'\n            value: 0.03\n          \
         - labels: '{{model_name=\"b\"}}'\n            value: 0.03\n          \
         - labels: '{{model_name=\"org/a\"}}'\n            value: 0\n    \
         alert_rule_test:\n      - eval_time: 10m\n        alertname: TTFTBudgetBurn\n        exp_alerts:\n          \
         - exp_labels: {{severity: page, scope: node, model_name: v, instance: node-a:9400}}\n            exp_annotations:\n              \
         summary: v is burning its TTFT error budget fast (30.0x)\n              \
         runbook: 'TTFTBudgetBurn.md: every gpu-exporter serves it at /docs/runbooks/TTFTBudgetBurn.md; --alerts.runbook-base-url makes this a link that needs no exporter up'\n          \
         - exp_labels: {{severity: page, scope: fleet, model_name: v}}\n            exp_annotations:\n              \
         summary: v is burning its TTFT error budget fast (30.0x)\n              \
         runbook: 'TTFTBudgetBurn.md: every gpu-exporter serves it at /docs/runbooks/TTFTBudgetBurn.md; --alerts.runbook-base-url makes this a link that needs no exporter up'\n",
        rules.display()
    );
    promtool("test", &temp_file("slo-rules.test.yml", &test));
}

/// A gauge held through a gap resolves on a clearing sample of the same
/// GPU under another index, as a restarted exporter may number it: GPU-b,
/// lost as GPU 1 when scraping stops, comes back up as GPU 2. Replayed by
/// promtool only: in one exporter process a GPU keeps its index.
#[test]
fn a_held_gpu_alert_resolves_when_the_gpu_returns_under_another_index() {
    if !have("promtool", &["--version"]) {
        return;
    }
    let rules = temp_file(
        "reindex-rules.yml",
        &String::from_utf8(run(&["--print-rules"]).stdout).unwrap(),
    );
    let lost = |gpu: &str| {
        format!(
            "          - exp_labels: {{severity: page, gpu: \"{gpu}\", uuid: GPU-b, instance: \"node-a:9400\"}}\n            \
             exp_annotations:\n              summary: GPU {gpu} stopped answering\n              workloads: ''\n              \
             runbook_url: http://node-a:9400/docs/runbooks/GPULost.md\n"
        )
    };
    let test = format!(
        "rule_files:\n  - {}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n      \
         - series: 'gpu_up{{gpu=\"1\",uuid=\"GPU-b\",instance=\"node-a:9400\"}}'\n        values: '0 0 0 stale'\n      \
         - series: 'gpu_up{{gpu=\"2\",uuid=\"GPU-b\",instance=\"node-a:9400\"}}'\n        values: '_ _ _ _ _ 1 1'\n    \
         alert_rule_test:\n      - eval_time: 4m\n        alertname: GPULost\n        exp_alerts:\n{}      \
         - eval_time: 5m\n        alertname: GPULost\n        exp_alerts: []\n",
        rules.display(),
        lost("1")
    );
    promtool("test", &temp_file("reindex-rules.test.yml", &test));
}

/// `promtool <what> rules FILE`, which must succeed.
fn promtool(what: &str, file: &Path) {
    let out = std::process::Command::new("promtool")
        .args([what, "rules"])
        .arg(file)
        .output()
        .unwrap();
    let text = crate::common::output_text(&out);
    assert!(out.status.success() && text.contains("SUCCESS"), "{text}");
}

/// Every signal, in every kind of rule it suits, prints an expression
/// promtool parses: a range function over a signal that sums several
/// engines' counters reaches each counter, not the sum.
#[test]
fn every_signal_prints_promql_that_promtool_parses() {
    use alerts::rules::Signal;
    if !have("promtool", &["--version"]) {
        return;
    }
    let mut rules = Vec::new();
    for (i, s) in Signal::all().enumerate() {
        let kinds: &[&str] = match s.is_counter() {
            true => &["increase", "rate"],
            false => &["gauge", "deriv"],
        };
        for k in kinds {
            let window = match *k {
                "gauge" => String::new(),
                _ => r#","window":"5m""#.into(),
            };
            rules.push(format!(
                r#"{{"name":"R{i}{k}","kind":"{k}","signal":"{}"{window},"op":">","threshold":1,"severity":"ticket"}}"#,
                s.name()
            ));
        }
    }
    let file = temp_file(
        "every-signal.json",
        &format!(r#"{{"rules":[{}]}}"#, rules.join(",")),
    );
    let out = run(&["--print-rules", "--rules.file", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    promtool(
        "check",
        &temp_file("every-signal.yml", &String::from_utf8_lossy(&out.stdout)),
    );
}
