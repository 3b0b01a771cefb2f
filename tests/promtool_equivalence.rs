//! The promtool unit tests of the generated rules
//! (`tests/promtool/rules.test.yml`), replayed through the exporter's own
//! evaluator: the same input series, the same evaluation times, the same
//! expected alerts and summaries. One file of cases, two evaluators, equal
//! verdicts.
//!
//! The parser reads the subset of YAML that file uses, one construct per
//! line; anything else is an error, so the file cannot drift out of what
//! this test understands.

// A test tells its scenario whole: clippy's bound on a function's
// length (the workspace's lints) is for the code that ships.
#![allow(clippy::too_many_lines)]
use alerts::{Evaluator, State, Subject, WORKLOADS, expand};
use alerts::{adjust::cover_failures, defaults, inhibit::cover_inhibitions};
use fill::engines::profile;
use model::SourceKind;
use model::{
    Freshness, Gpu, GpuProcess, Health, Histogram, Model, Pod, Readings, Snapshot, clock_event_bit,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

struct Series {
    name: String,
    labels: BTreeMap<String, String>,
    values: Vec<Option<f64>>,
}

#[derive(Default)]
struct Check {
    at: u64,
    alertname: String,
    /// (who, summary, workloads): who is `gpu<N>`, a model name, or
    /// `exporter`; workloads is the annotation of alerts about a GPU.
    expected: BTreeSet<(String, String, Option<String>)>,
}

#[derive(Default)]
struct Group {
    interval: u64,
    series: Vec<Series>,
    checks: Vec<Check>,
}

/// A Prometheus duration of days, hours and minutes (`2d4h40m`), in
/// seconds.
fn seconds(s: &str) -> u64 {
    let (mut total, mut n) = (0, 0);
    for c in s.chars() {
        match c {
            '0'..='9' => n = n * 10 + u64::from(c as u8 - b'0'),
            'd' | 'h' | 'm' => {
                total += n * [86_400, 3600, 60]["dhm".find(c).unwrap()];
                n = 0;
            }
            _ => panic!("a duration in days, hours and minutes: {s}"),
        }
    }
    assert_eq!(n, 0, "a duration ends in its unit: {s}");
    total
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches('\'').trim_matches('"')
}

/// `a+bxn`, `axn`, `_`, `stale` and plain numbers, as promtool expands
/// them. `_` (no sample) would keep an instant vector's last value for 5m,
/// which the exporter has no use for: the file uses `stale`, a series gone.
fn expand_values(text: &str) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    for token in text.split_whitespace() {
        if token == "_" || token == "stale" {
            out.push(None);
        } else if let Some((start, n)) = token.split_once('x') {
            let n: usize = n.parse().unwrap();
            let (a, b) = match start[1..].find(['+', '-']) {
                Some(i) => {
                    let (a, b) = start.split_at(i + 1);
                    (a.parse::<f64>().unwrap(), b.parse::<f64>().unwrap())
                }
                None => (start.parse::<f64>().unwrap(), 0.0),
            };
            out.extend((0..=n).map(|i| Some(a + b * i as f64)));
        } else {
            out.push(Some(token.parse().unwrap()));
        }
    }
    out
}

fn parse_selector(s: &str) -> (String, BTreeMap<String, String>) {
    let Some((name, rest)) = s.split_once('{') else {
        return (s.to_string(), BTreeMap::new());
    };
    let labels = rest
        .trim_end_matches('}')
        .split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), unquote(v).to_string())
        })
        .collect();
    (name.to_string(), labels)
}

/// `{severity: page, gpu: "1", uuid: GPU-1}` to who the alert is about;
/// none for an alert across the fleet, which the exporter does not judge.
fn who(labels: &str) -> Option<String> {
    let map: BTreeMap<&str, &str> = labels
        .trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .filter_map(|kv| kv.split_once(':'))
        .map(|(k, v)| (k.trim(), unquote(v)))
        .collect();
    if map.get("scope") == Some(&"fleet") {
        return None;
    }
    Some(match (map.get("gpu"), map.get("model_name")) {
        (Some(g), _) => format!("gpu{g}"),
        (_, Some(m)) => m.to_string(),
        _ => "exporter".into(),
    })
}

fn parse(text: &str) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    let mut pending_who: Option<Option<String>> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let group = groups.last_mut();
        let fail = || panic!("rules.test.yml line {}: not understood: {raw}", n + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(i) = line.strip_prefix("- interval:") {
            groups.push(Group {
                interval: seconds(i.trim()),
                ..Group::default()
            });
        } else if let Some(s) = line.strip_prefix("- series:") {
            let (name, labels) = parse_selector(unquote(s));
            group.unwrap().series.push(Series {
                name,
                labels,
                values: Vec::new(),
            });
        } else if let Some(v) = line.strip_prefix("values:") {
            group.unwrap().series.last_mut().unwrap().values = expand_values(unquote(v));
        } else if let Some(t) = line.strip_prefix("- eval_time:") {
            group.unwrap().checks.push(Check {
                at: seconds(t.trim()),
                ..Check::default()
            });
        } else if let Some(a) = line.strip_prefix("alertname:") {
            group.unwrap().checks.last_mut().unwrap().alertname = a.trim().to_string();
        } else if let Some(l) = line.strip_prefix("- exp_labels:") {
            pending_who = Some(who(l.trim()));
        } else if let Some(s) = line.strip_prefix("summary:") {
            let check = group.unwrap().checks.last_mut().unwrap();
            if let Some(who) = pending_who.take().unwrap() {
                check.expected.insert((who, unquote(s).to_string(), None));
            }
        } else if let Some(w) = line.strip_prefix("workloads:") {
            // Right after its alert's summary.
            let check = group.unwrap().checks.last_mut().unwrap();
            let last = check.expected.iter().find(|e| e.2.is_none()).cloned();
            let (who, summary, _) = last.unwrap_or_else(fail);
            check.expected.remove(&(who.clone(), summary.clone(), None));
            check
                .expected
                .insert((who, summary, Some(unquote(w).to_string())));
        } else if [
            "rule_files:",
            "evaluation_interval:",
            "tests:",
            "input_series:",
            "alert_rule_test:",
            "exp_alerts:",
            "exp_annotations:",
            "runbook_url:",
            "runbook:",
            "scope:",
            "- ../",
        ]
        .iter()
        .any(|p| line.starts_with(p))
        {
            // Structure, or what the evaluator has no say in.
        } else {
            fail();
        }
    }
    groups
}

/// The snapshot the input series describe at step `k`, and how it is
/// served (stalled, readings withheld).
fn snapshot(series: &[Series], k: usize, at: f64) -> (Snapshot, Freshness) {
    let mut fresh = Freshness::default();
    let mut s = Snapshot::empty(SourceKind::Sim);
    s.at = at;
    s.published = Instant::now();
    s.error = None;
    let mut gpus: BTreeMap<u32, Gpu> = BTreeMap::new();
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    let mut tallies: BTreeMap<String, profile::Tally> = BTreeMap::new();
    for x in series {
        let Some(v) = x.values.get(k).copied().flatten() else {
            continue;
        };
        let label = |k: &str| x.labels.get(k).cloned().unwrap_or_default();
        // What only Prometheus sees, for the rules only it evaluates.
        if ["gpu_info", "up", "gpu_exporter_gpus"].contains(&x.name.as_str()) {
            continue;
        }
        if x.name == "gpu_exporter_collect_stalled" {
            fresh.stalled = v == 1.0;
            continue;
        }
        if x.name == "gpu_exporter_readings_hidden" {
            fresh.hidden = v == 1.0;
            continue;
        }
        if attribution(&mut gpus, x, v) {
            continue;
        }
        if x.name == "gpu_exporter_collect_success" {
            s.error = (v != 1.0).then(|| "failing".into());
            continue;
        }
        if let Some(model) = x.labels.get("model_name").or(x.labels.get("model")) {
            let m = models.entry(model.clone()).or_insert_with(|| Model {
                name: model.clone(),
                ttft_seconds: Histogram::default(),
                good_within: Some(0.3),
                endpoint: None,
                stale: false,
                outcomes: None,
                replicas: Vec::new(),
            });
            if x.name == "gpu_exporter_engine_model_up" {
                m.endpoint = Some(0);
                m.stale = v == 0.0;
                continue;
            }
            // An engine's request counter, counted as its reader counts it.
            if let Some(p) = model::profile::all()
                .iter()
                .find(|p| p.outcomes.iter().any(|o| o.counter == x.name))
            {
                let labels: Vec<(String, String)> = x
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let t = tallies.entry(model.clone()).or_default();
                t.add(p, &x.name, &labels, v);
                m.endpoint = Some(0);
                continue;
            }
            // The simulator's histogram, or an engine's by its profile.
            let (base, part) = x.name.rsplit_once('_').expect("a histogram part");
            let per_second = match base {
                "llm_ttft_seconds" => 1.0,
                _ => {
                    let p = model::profile::all()
                        .iter()
                        .find(|p| p.ttft.contains(&base));
                    m.endpoint = Some(0);
                    p.unwrap_or_else(|| panic!("no mapping for {}", x.name))
                        .per_second
                }
            };
            let bound = match part {
                "count" => f64::INFINITY,
                "bucket" => label("le").parse::<f64>().unwrap() / per_second,
                _ => panic!("no mapping for {}", x.name),
            };
            m.ttft_seconds.buckets.push((bound, v));
            m.ttft_seconds.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            continue;
        }
        let g = gpu(&mut gpus, x);
        let r: &mut Readings = &mut g.readings;
        match x.name.as_str() {
            "gpu_clocks_event_active" => {
                let bit = clock_event_bit(&label("reason")).unwrap();
                let mask = r.clocks_event_mask.get_or_insert(0);
                if v == 1.0 {
                    *mask |= bit;
                }
            }
            "gpu_xid_errors_total" => {
                let xids = r.xid_errors.get_or_insert_with(Vec::new);
                xids.push((label("xid").parse().unwrap(), v as u64));
                xids.sort_unstable();
            }
            "gpu_ecc_uncorrected_errors_total" => r.ecc_uncorrected_total = Some(v),
            "gpu_memory_largest_free_bytes" => r.largest_free_bytes = Some(v),
            "gpu_memory_total_bytes" => r.memory_total_bytes = Some(v),
            "gpu_memory_used_bytes" => r.memory_used_bytes = Some(v),
            "gpu_allocator_allocated_bytes" => r.allocator_allocated_bytes = Some(v),
            "gpu_allocator_reserved_bytes" => r.allocator_reserved_bytes = Some(v),
            "gpu_sm_active_ratio" => r.sm_active_ratio = Some(v),
            "gpu_pcie_replay_errors_total" => r.pcie_replay_errors_total = Some(v),
            "gpu_memory_temperature_celsius" => r.memory_temperature_celsius = Some(v),
            "gpu_up" => g.up = v == 1.0,
            "gpu_exporter_gpu_reads_late_total" => g.reads_late = v as u64,
            name => health(&mut r.health, name, &label("error"), v),
        }
    }
    s.gpus = gpus.into_values().collect();
    // An engine's model is judged as the reader judges it.
    for m in models.values_mut().filter(|m| m.endpoint.is_some()) {
        m.outcomes = tallies.get(&m.name).and_then(profile::Tally::outcomes);
        m.good_within = profile::judged_at(&m.ttft_seconds, 0.3).0;
    }
    s.models = models.into_values().collect();
    (s, fresh)
}

/// The GPU a series is about, added on its first series.
fn gpu<'g>(gpus: &'g mut BTreeMap<u32, Gpu>, x: &Series) -> &'g mut Gpu {
    let label = |k: &str| x.labels.get(k).cloned().unwrap_or_default();
    let index: u32 = label("gpu").parse().unwrap();
    gpus.entry(index).or_insert_with(|| Gpu {
        index,
        uuid: label("uuid"),
        up: true,
        ..Gpu::default()
    })
}

/// The attribution series, onto the GPU's pods, jobs and processes;
/// false for any other series.
fn attribution(gpus: &mut BTreeMap<u32, Gpu>, x: &Series, v: f64) -> bool {
    let label = |k: &str| x.labels.get(k).cloned().unwrap_or_default();
    if !matches!(
        x.name.as_str(),
        "gpu_pod_info" | "gpu_job_info" | "gpu_process_memory_used_bytes"
    ) {
        return false;
    }
    let r = &mut gpu(gpus, x).readings;
    match x.name.as_str() {
        "gpu_pod_info" => r.pods.push(Pod {
            namespace: label("namespace"),
            pod: label("pod"),
            container: label("container"),
        }),
        "gpu_job_info" => r.jobs.push(label("hpc_job")),
        _ => r.processes.push(GpuProcess {
            pid: label("pid").parse().ok(),
            used_bytes: Some(v),
            ..GpuProcess::default()
        }),
    }
    true
}

/// The hardware-health series, onto [`Health`].
fn health(h: &mut Health, name: &str, error: &str, v: f64) {
    let on = Some(v == 1.0);
    match name {
        "gpu_row_remap_failed" => h.row_remap_failed = on,
        "gpu_row_remap_pending" => h.row_remap_pending = on,
        "gpu_retired_pages_pending" => h.retired_pages_pending = on,
        "gpu_pcie_link_width" => h.pcie_link_width = Some(v),
        "gpu_pcie_link_width_max" => h.pcie_link_width_max = Some(v),
        "gpu_pcie_link_generation" => h.pcie_link_generation = Some(v),
        "gpu_pcie_link_generation_max" => h.pcie_link_generation_max = Some(v),
        "gpu_nvlink_links" => h.nvlink_links = Some(v),
        "gpu_nvlink_links_active" => h.nvlink_links_active = Some(v),
        "gpu_nvlink_errors_total" => {
            let i = ["crc_flit", "crc_data", "replay", "recovery"]
                .iter()
                .position(|e| *e == error)
                .expect("an NVLink error label");
            h.nvlink_errors[i] = Some(v);
        }
        "gpu_memory_temperature_max_celsius" => h.memory_temperature_max_celsius = Some(v),
        "gpu_recovery_action" => h.recovery_action = Some(v),
        other => panic!("no mapping for {other}"),
    }
}

#[test]
fn the_exporter_reaches_promtools_verdicts() {
    let text = include_str!("promtool/rules.test.yml");
    let groups = parse(text);
    // The rules as the exporter runs them by default: pages covering
    // --collect.max-stale's default minute, inhibition sources outlasting
    // what they mute.
    let rules = cover_inhibitions(cover_failures(defaults(), Duration::from_secs(60)));
    assert!(groups.len() >= 18, "{} groups", groups.len());
    let mut checked = 0;
    let mut nodes_apart = 0;
    for (g, group) in groups.iter().enumerate() {
        // One exporter sees one node's models: a case of a model on
        // several is Prometheus'.
        let instances: BTreeSet<&String> = (group.series.iter())
            .filter(|x| x.labels.contains_key("model_name"))
            .filter_map(|x| x.labels.get("instance"))
            .collect();
        if instances.len() > 1 {
            nodes_apart += 1;
            continue;
        }
        let mut e = Evaluator::new(rules.clone());
        let last = group.checks.iter().map(|c| c.at).max().unwrap();
        let mut step = 0;
        while step * group.interval <= last {
            let at = (step * group.interval) as f64;
            let (snap, fresh) = snapshot(&group.series, step as usize, at);
            e.eval_at(&snap, at, fresh);
            // DriverVersionSkew needs the whole fleet, and ExporterDown,
            // ExporterAbsent and GPUCountDropped Prometheus' own scrapes:
            // only Prometheus evaluates them (docs/alerts.md), so only promtool
            // checks them.
            let in_process = |name: &str| rules.iter().any(|r| r.name == name && r.in_process());
            let due = |c: &&Check| c.at == step * group.interval && in_process(&c.alertname);
            for check in group.checks.iter().filter(due) {
                let got: BTreeSet<(String, String, Option<String>)> = e
                    .alerts()
                    .iter()
                    .filter(|a| a.state == State::Firing && a.rule.name == check.alertname)
                    .map(|a| {
                        let who = match &a.subject {
                            Subject::Gpu { index, .. } => format!("gpu{index}"),
                            Subject::Model(m) => m.clone(),
                            Subject::Exporter => "exporter".into(),
                            Subject::Endpoint { url, .. } => url.clone(),
                        };
                        let gpus = &snap.gpus;
                        let workloads = matches!(a.subject, Subject::Gpu { .. })
                            .then(|| expand(WORKLOADS, &a.subject, a.value, gpus));
                        (
                            who,
                            expand(&a.rule.summary, &a.subject, a.value, gpus),
                            workloads,
                        )
                    })
                    .collect();
                assert_eq!(
                    got, check.expected,
                    "group {g}, {} at {}s",
                    check.alertname, check.at
                );
                checked += 1;
            }
            step += 1;
        }
    }
    println!("{checked} checks; {nodes_apart} cases over several nodes left to promtool");
    assert_eq!(nodes_apart, 1);
    assert!(checked >= 40, "{checked} checks");
}

#[test]
fn values_expand_like_promtool() {
    assert_eq!(expand_values("0+2x3"), [0.0, 2.0, 4.0, 6.0].map(Some));
    assert_eq!(
        expand_values("5x2 _ 1"),
        [Some(5.0), Some(5.0), Some(5.0), None, Some(1.0)]
    );
    assert_eq!(expand_values("10-1x2"), [10.0, 9.0, 8.0].map(Some));
    assert_eq!(
        who(r#"{severity: page, gpu: "1", uuid: GPU-1}"#).unwrap(),
        "gpu1"
    );
    assert_eq!(who("{severity: ticket}").unwrap(), "exporter");
    assert_eq!(who("{severity: page, scope: fleet, model_name: m}"), None);
    assert_eq!(seconds("2d4h40m"), 2 * 86_400 + 4 * 3600 + 40 * 60);
}
