use crate::common::{Exporter, check_metrics, have, pipe};

const OM: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The `Accept` headers Prometheus 2.42, 2.49–2.5x and 3.x send.
const PROMETHEUS_ACCEPTS: [&str; 3] = [
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
];

#[test]
fn seed_golden_lines() {
    let e = Exporter::start(&[]);
    let r = e.metrics(None);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some(TEXT));
    let body = &r.body;
    for line in [
        "# TYPE gpu_temperature_celsius gauge",
        "gpu_temperature_celsius{gpu=\"0\",uuid=\"GPU-5a1e0000-0000-4000-8000-000000000000\"} 71",
        "# TYPE gpu_xid_errors_total counter",
        "gpu_memory_largest_free_bytes{gpu=\"3\",uuid=\"GPU-5a1e0000-0000-4000-8000-000000000003\"} 1073741824",
        "gpu_clocks_event_active{gpu=\"1\",uuid=\"GPU-5a1e0000-0000-4000-8000-000000000001\",reason=\"hw_thermal_slowdown\"} 1",
        "gpu_exporter_source_info{source=\"sim\"} 1",
        "gpu_exporter_collect_success 1",
    ] {
        assert!(body.lines().any(|l| l == line), "missing {line:?}");
    }
    // gpu2's Xid 48 (double-bit ECC) counter is rising; the others have none.
    let xid48 = |gpu: &str| {
        body.lines()
            .find(|l| {
                l.starts_with("gpu_xid_errors_total{")
                    && l.contains(&format!("gpu=\"{gpu}\""))
                    && l.contains("xid=\"48\"")
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap()
    };
    assert!(xid48("2") >= 6.0);
    assert_eq!(xid48("0"), 0.0);
    // No sentinel numbers.
    for l in body.lines().filter(|l| !l.starts_with('#')) {
        let v = l.rsplit(' ').next().unwrap();
        assert!(
            v != "4294967295" && v != "-1" && v != "18446744073709551615",
            "{l}"
        );
    }
}

/// Every family has one HELP and one TYPE, before its samples, and its
/// samples form one contiguous group.
fn check_layout(body: &str, om: bool) {
    let mut seen: Vec<String> = Vec::new();
    let mut current = String::new();
    for l in body.lines() {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_string();
            assert!(!seen.contains(&name), "family {name} appears twice");
            seen.push(name.clone());
            current = name;
        } else if l.starts_with("# TYPE ") || l.starts_with("# UNIT ") {
            assert_eq!(l.split(' ').nth(2).unwrap(), current, "{l}");
        } else if l == "# EOF" {
            assert!(om);
        } else {
            let name = l.split(['{', ' ']).next().unwrap();
            let family_of = |n: &str| {
                if om {
                    n.strip_suffix("_total")
                        .or(n.strip_suffix("_info"))
                        .unwrap_or(n)
                        .to_string()
                } else {
                    n.to_string()
                }
            };
            let histogram = ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name.strip_suffix(s) == Some(current.as_str()));
            assert!(
                family_of(name) == current || histogram,
                "{name} outside {current}"
            );
        }
    }
    assert!(seen.len() > 30, "{} families", seen.len());
}

#[test]
fn both_formats_are_well_formed() {
    let e = Exporter::start(&[]);
    let text = e.metrics(None).body;
    check_layout(&text, false);
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"));

    let r = e.metrics(Some(PROMETHEUS_ACCEPTS[0]));
    assert_eq!(r.header("Content-Type"), Some(OM));
    check_layout(&r.body, true);
    assert!(r.body.ends_with("# EOF\n"));
    assert!(r.body.contains("# TYPE gpu_xid_errors counter\n"));
    assert!(r.body.contains("# UNIT gpu_temperature_celsius celsius\n"));
    assert!(r.body.contains("# TYPE gpu info\n"));
    assert!(r.body.contains("\ngpu_energy_joules_total{"));
}

#[test]
fn prometheus_accept_headers_get_openmetrics() {
    let e = Exporter::start(&[]);
    for accept in PROMETHEUS_ACCEPTS {
        assert_eq!(
            e.metrics(Some(accept)).header("Content-Type"),
            Some(OM),
            "{accept}"
        );
    }
    for accept in ["text/plain", "*/*", "application/json", "nonsense;;q=x"] {
        assert_eq!(
            e.metrics(Some(accept)).header("Content-Type"),
            Some(TEXT),
            "{accept}"
        );
    }
}

#[test]
fn promtool_finds_no_problem() {
    if !have("promtool", &["--version"]) {
        return;
    }
    let e = Exporter::start(&[]);
    check_metrics(&e.metrics(None).body);
}

const OM_PARSE: &str = "
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(sys.stdin.read()))
print(len(families), sum(len(f.samples) for f in families))
";

#[test]
fn openmetrics_passes_the_reference_parser() {
    if !have(
        "python3",
        &["-c", "import prometheus_client.openmetrics.parser"],
    ) {
        return;
    }
    let e = Exporter::start(&[]);
    let body = e.metrics(Some(PROMETHEUS_ACCEPTS[2])).body;
    let out = pipe("python3", &["-c", OM_PARSE], &body);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "parser: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let samples = body.lines().filter(|l| !l.starts_with('#')).count();
    assert_eq!(
        stdout.split_whitespace().nth(1),
        Some(samples.to_string().as_str())
    );
}
