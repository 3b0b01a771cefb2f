use crate::common::{Exporter, temp_file};
use std::time::{Duration, Instant};

fn value(body: &str, prefix: &str) -> f64 {
    body.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix}"))
}

#[test]
fn a_hung_collection_never_blocks_a_scrape() {
    let p = temp_file(
        "hang.json",
        r#"{"gpus":[{},{}],"incidents":[{"at":"1s","hang":"6s"},{"at":"1s","gpu":1,"lost":true}]}"#,
    );
    let e = Exporter::start(&[
        "--collect.interval",
        "200ms",
        "--sim.scenario",
        p.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(3500));
    // The collector is stuck in the hang: scrapes still answer at once,
    // with the readings growing stale.
    let t = Instant::now();
    let body = e.metrics(None).body;
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(value(&body, "gpu_exporter_snapshot_age_seconds") >= 2.0);
    assert_eq!(e.get("/readyz", &[]).status, 503);
    assert_eq!(e.get("/healthz", &[]).status, 200);
    // After the hang, the lost GPU reads 0 and the other keeps reporting.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let body = e.metrics(None).body;
        if value(&body, "gpu_exporter_snapshot_age_seconds") < 1.0 {
            assert_eq!(value(&body, "gpu_up{gpu=\"1\""), 0.0);
            assert_eq!(value(&body, "gpu_up{gpu=\"0\""), 1.0);
            assert!(body.contains("gpu_temperature_celsius{gpu=\"0\""));
            assert!(!body.contains("gpu_temperature_celsius{gpu=\"1\""));
            break;
        }
        assert!(Instant::now() < deadline, "collection never resumed");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(e.get("/readyz", &[]).status, 200);
}

#[test]
fn a_failing_collection_reports_and_recovers() {
    let p = temp_file(
        "fail.json",
        r#"{"gpus":[{}],"incidents":[{"at":"1s","fail":"2s"}]}"#,
    );
    let e = Exporter::start(&[
        "--collect.interval",
        "100ms",
        "--sim.scenario",
        p.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(1600));
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), 0.0);
    // The last good readings are still served, marked by their age.
    assert_eq!(value(&body, "gpu_up{"), 1.0);
    let r = e.get("/readyz", &[]);
    assert_eq!(r.status, 503);
    assert!(
        r.body.contains("simulated collection failure"),
        "{}",
        r.body
    );
    std::thread::sleep(Duration::from_millis(2500));
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), 1.0);
    assert_eq!(e.get("/readyz", &[]).status, 200);
}

#[test]
fn stale_readings_are_dropped_past_the_limit() {
    let p = temp_file(
        "stale.json",
        r#"{"gpus":[{}],"incidents":[{"at":"1s","fail":"4s"}]}"#,
    );
    let e = Exporter::start(&[
        "--collect.interval",
        "200ms",
        "--collect.max-stale",
        "1s",
        "--sim.scenario",
        p.to_str().unwrap(),
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), 0.0);
    assert!(body.contains("gpu_up{"), "still within the limit");
    std::thread::sleep(Duration::from_millis(1500));
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), 0.0);
    assert!(!body.contains("gpu_up{"), "past the limit the readings go");
    assert!(value(&body, "gpu_exporter_snapshot_age_seconds") > 1.0);
    std::thread::sleep(Duration::from_millis(3000));
    assert!(
        e.metrics(None).body.contains("gpu_up{"),
        "back after recovery"
    );
}
