//! Signals against the real binary: SIGTERM and SIGINT stop it within a
//! second (with clients that never read: `abuse.rs`), a second signal
//! stops it at once, and SIGHUP reloads the rules and scenario, keeping the
//! old ones when the new ones are bad.

use crate::common::{Exporter, big_fleet, never_reader, temp_file};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The exporter on 64 GPUs with a client that asks for far more than
/// socket buffers hold and never reads, so a response stays in flight.
fn with_stuck_client() -> (Exporter, TcpStream) {
    let e = Exporter::start(&["--sim.scenario", &big_fleet(), "--web.write-timeout", "30s"]);
    let s = never_reader(&e);
    std::thread::sleep(Duration::from_millis(500));
    (e, s)
}

#[test]
fn term_and_int_exit_0_within_a_second() {
    for sig in ["TERM", "INT"] {
        let mut e = Exporter::start(&[]);
        assert_eq!(e.metrics(None).status, 200);
        let t = Instant::now();
        e.signal(sig);
        let status = e.wait_exit(Duration::from_secs(3)).expect("exited");
        assert_eq!(status.code(), Some(0), "{sig}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{sig}: {:?}",
            t.elapsed()
        );
        // The listener is gone.
        assert!(TcpStream::connect(e.addr).is_err());
    }
}

#[test]
fn a_second_signal_exits_at_once() {
    let (mut e, _stuck) = with_stuck_client();
    let t = Instant::now();
    e.signal("TERM");
    std::thread::sleep(Duration::from_millis(100));
    e.signal("INT");
    let status = e.wait_exit(Duration::from_secs(3)).expect("exited");
    assert!(
        t.elapsed() < Duration::from_millis(700),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(status.code(), Some(128 + 2));
}

#[test]
fn hup_reloads_rules_and_scenario_and_keeps_them_when_bad() {
    let rules = temp_file("hup-rules.json", r#"{"rules":[]}"#);
    let scenario = temp_file("hup-scenario.json", r#"{"gpus":[{},{}]}"#);
    let e = Exporter::start(&[
        "--rules.file",
        rules.to_str().unwrap(),
        "--sim.scenario",
        scenario.to_str().unwrap(),
    ]);
    assert!(!e.get("/alerts", &[]).body.contains("HotGPU"));
    assert!(!e.metrics(None).body.contains("gpu=\"2\""));

    // A new rule and a third, hot GPU.
    std::fs::write(
        &rules,
        r#"{"rules":[{"name":"HotGPU","kind":"gauge","signal":"temperature","op":">","threshold":80,"severity":"ticket"}]}"#,
    )
    .unwrap();
    std::fs::write(&scenario, r#"{"gpus":[{},{},{"temperature_celsius":90}]}"#).unwrap();
    e.signal("HUP");
    e.wait_for("/alerts", Duration::from_secs(10), |b| {
        b.contains(r#""alertname":"HotGPU","gpu":"2""#)
    });
    assert!(
        e.metrics(None)
            .body
            .contains("gpu_temperature_celsius{gpu=\"2\"")
    );

    // A bad file: logged, and the old configuration stays.
    std::fs::write(
        &rules,
        r#"{"rules":[{"name":"GPULost","severity":"urgent"}]}"#,
    )
    .unwrap();
    e.signal("HUP");
    e.wait_log("reload failed", Duration::from_secs(5));
    assert!(e.log().contains("rules[0].severity"), "{}", e.log());
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        e.get("/alerts", &[])
            .body
            .contains(r#""alertname":"HotGPU""#)
    );
    assert_eq!(e.get("/healthz", &[]).status, 200);
}

/// 100 SIGHUPs 10 ms apart at 64 simulated GPUs: reloads start at most
/// once a second, each replaying the history once, so `/readyz` stays
/// 200 and the readings never age past the stall limit (4 s at 1 s).
#[test]
fn a_burst_of_sighups_reloads_once_a_second_and_never_stalls() {
    let fleet = big_fleet();
    let e = Exporter::start(&["--sim.scenario", &fleet]);
    let started = Instant::now();
    let mut worst_age: f64 = 0.0;
    for i in 0..100 {
        e.signal("HUP");
        std::thread::sleep(Duration::from_millis(10));
        let ready = e.get("/readyz", &[]);
        assert_eq!(ready.status, 200, "SIGHUP {i}: {}", ready.body);
        if i % 10 == 0 {
            let body = e.metrics(None).body;
            let age = crate::common::value(&body, "gpu_exporter_snapshot_age_seconds ");
            worst_age = worst_age.max(age.expect("an age"));
        }
    }
    let burst = started.elapsed().as_secs_f64();
    // The last pending reload runs a second after the one before it.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(e.get("/readyz", &[]).status, 200);
    let reloads = e.log().matches("SIGHUP: reloading").count();
    println!("100 SIGHUPs in {burst:.1} s: {reloads} reloads, oldest readings {worst_age} s");
    assert!(
        reloads >= 1 && reloads as f64 <= burst + 2.0,
        "{reloads} reloads in {burst:.1} s"
    );
    assert!(worst_age < 4.0, "readings {worst_age} s old");
}
