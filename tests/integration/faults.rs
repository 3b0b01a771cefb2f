use crate::common::{Exporter, value};
use std::time::{Duration, Instant};

/// The exporter on `scenario`, collecting every `interval`, after `args`.
fn collecting(name: &str, scenario: &str, interval: &str, args: &[&str]) -> Exporter {
    let mut all = vec!["--collect.interval", interval];
    all.extend(args);
    Exporter::on_scenario(name, scenario, &all)
}

fn sample(body: &str, prefix: &str) -> f64 {
    value(body, prefix).unwrap_or_else(|| panic!("no {prefix}"))
}

#[test]
fn a_hung_collection_never_blocks_a_scrape() {
    let e = collecting(
        "hang.json",
        r#"{"gpus":[{},{}],"incidents":[{"at":"1s","hang":"6s"},{"at":"1s","gpu":1,"lost":true}]}"#,
        "200ms",
        &[],
    );
    // The simulator's clock starts with its first collection, after the
    // server: wait for the hang rather than guess when it begins.
    e.wait_for("/metrics", Duration::from_secs(15), |b| {
        value(b, "gpu_exporter_snapshot_age_seconds").is_some_and(|age| age >= 2.0)
    });
    // The poller is stuck in the hang: scrapes still answer at once,
    // with the readings growing stale.
    let t = Instant::now();
    let body = e.metrics(None).body;
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(sample(&body, "gpu_exporter_snapshot_age_seconds") >= 2.0);
    assert_eq!(e.get("/readyz", &[]).status, 503);
    assert_eq!(e.get("/healthz", &[]).status, 200);
    // After the hang, the lost GPU reads 0 and the other keeps reporting.
    let body = e.wait_for("/metrics", Duration::from_secs(15), |b| {
        sample(b, "gpu_exporter_snapshot_age_seconds") < 1.0
    });
    assert_eq!(sample(&body, "gpu_up{gpu=\"1\""), 0.0);
    assert_eq!(sample(&body, "gpu_up{gpu=\"0\""), 1.0);
    assert!(body.contains("gpu_temperature_celsius{gpu=\"0\""));
    assert!(!body.contains("gpu_temperature_celsius{gpu=\"1\""));
    assert_eq!(e.get("/readyz", &[]).status, 200);
}

#[test]
fn a_failing_collection_reports_and_recovers() {
    let e = collecting(
        "fail.json",
        r#"{"gpus":[{}],"incidents":[{"at":"1s","fail":"2s"}]}"#,
        "100ms",
        &[],
    );
    let body = e.wait_for("/metrics", Duration::from_secs(15), |b| {
        value(b, "gpu_exporter_collect_success") == Some(0.0)
    });
    // The last good readings are still served, marked by their age.
    assert_eq!(sample(&body, "gpu_up{"), 1.0);
    let r = e.get("/readyz", &[]);
    assert_eq!(r.status, 503);
    assert!(
        r.body.contains("simulated collection failure"),
        "{}",
        r.body
    );
    e.wait_for("/metrics", Duration::from_secs(15), |b| {
        value(b, "gpu_exporter_collect_success") == Some(1.0)
    });
    assert_eq!(e.get("/readyz", &[]).status, 200);
}

#[test]
fn stale_readings_are_dropped_past_the_limit() {
    let e = collecting(
        "stale.json",
        r#"{"gpus":[{}],"incidents":[{"at":"1s","fail":"6s"}]}"#,
        "200ms",
        &["--collect.max-stale", "2s"],
    );
    let body = e.wait_for("/metrics", Duration::from_secs(15), |b| {
        value(b, "gpu_exporter_collect_success") == Some(0.0)
    });
    assert!(body.contains("gpu_up{"), "still within the limit");
    let body = e.wait_for("/metrics", Duration::from_secs(15), |b| {
        !b.contains("gpu_up{")
    });
    // The readings went because they aged past the limit, while the
    // collections still failed.
    assert_eq!(sample(&body, "gpu_exporter_collect_success"), 0.0);
    assert!(sample(&body, "gpu_exporter_snapshot_age_seconds") > 1.0);
    e.wait_for("/metrics", Duration::from_secs(15), |b| {
        b.contains("gpu_up{")
    });
}
