//! The exporter's own health while its sources misbehave: serving before
//! the first collection, quiet logs, zero GPUs, readings out of range, and
//! nvidia-smi children that never outlive it.

use crate::common::{BIN, Exporter, eventually, processes, value};
use crate::sources::fake_nvml::Fixture;
use crate::sources::{fake_smi, fleet, gpu, nvml_args, start};
use std::process::Command;
use std::time::{Duration, Instant};

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_hung_first_nvml_call_never_fails_liveness() {
    // The driver's first init hangs for 8 s, as at boot.
    let text = fleet(&[gpu(0, "")]).replacen('{', r#"{"init_hang_ms":8000,"#, 1);
    let f = Fixture::new("bin-init-hang", &text);
    let e = Exporter::serving(Command::new(BIN), &args(&nvml_args(&f)));
    // While init hangs, liveness, the metrics and the page answer.
    let t = Instant::now();
    let health = e.get("/healthz", &[]);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let ready = e.get("/readyz", &[]);
    assert_eq!(
        (ready.status, ready.body.as_str()),
        (503, "not ready: first collection in progress\n")
    );
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(0.0));
    assert!(
        !body.contains("gpu_up") && !body.contains("gpu_info"),
        "{body}"
    );
    assert!(!body.contains("gpu_exporter_source_info"), "{body}");
    assert_eq!(e.get("/", &[]).status, 200);
    // Still hanging: answered again.
    assert!(
        e.get("/readyz", &[])
            .body
            .contains("first collection in progress")
    );
    assert_eq!(e.get("/healthz", &[]).status, 200);
    // Past the stall limit (3 intervals and a second) the hung first
    // collection is a stall like any later one.
    let stalled = e.wait_for("/metrics", Duration::from_secs(7), |b| {
        value(b, "gpu_exporter_collect_stalled") == Some(1.0)
    });
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert_eq!(value(&stalled, "gpu_exporter_collect_success"), Some(0.0));
    let ready = e.get("/readyz", &[]).body;
    assert!(
        ready.starts_with("not ready: first collection stalled, "),
        "{ready}"
    );
    // The evaluator holds its rules from the start: the stall is judged
    // as Prometheus judges it, ExporterCollectFailing pending.
    let alerts = e.wait_for("/alerts", Duration::from_secs(3), |b| {
        b.contains("ExporterCollectFailing")
    });
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert!(alerts.contains("pending"), "{alerts}");
    // Then the driver answers.
    let body = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        value(b, "gpu_exporter_collect_success") == Some(1.0)
    });
    assert_eq!(value(&body, "gpu_up{gpu=\"0\""), Some(1.0));
    assert!(body.contains("gpu_exporter_source_info{source=\"nvml\"} 1"));
    assert_eq!(e.get("/readyz", &[]).status, 200);
    assert_eq!(value(&body, "gpu_exporter_collect_stalled"), Some(0.0));
}

/// While the evaluator replays 64 GPUs' three days, live collections are
/// already served: `/metrics` has them, `/readyz` waits for the replay,
/// and `/alerts` and the status page say the alerts are not settled yet.
#[test]
fn live_collections_are_served_while_the_history_replays() {
    let gpus = vec!["{}"; 64].join(",");
    let scenario = crate::common::temp_file("replay-64.json", &format!(r#"{{"gpus":[{gpus}]}}"#));
    let e = Exporter::serving(
        Command::new(BIN),
        &["--sim.scenario", scenario.to_str().unwrap()],
    );
    assert_eq!(e.get("/healthz", &[]).status, 200);
    // Caught in the act: a collection served, the replay not done.
    let metrics = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        value(b, "gpu_exporter_collect_success") == Some(1.0)
    });
    assert!(metrics.contains("gpu_up{gpu=\"63\""), "{metrics}");
    let ready = e.get("/readyz", &[]);
    assert_eq!(ready.status, 503, "the replay was over: {}", ready.body);
    assert!(
        ready
            .body
            .starts_with("not ready: alert history replaying ("),
        "{}",
        ready.body
    );
    let alerts = e.get("/alerts", &[]).body;
    assert!(
        alerts.contains(r#""warnings":["alert history is still replaying ("#),
        "{alerts}"
    );
    assert!(e.get("/", &[]).body.contains("id=\"replaying\""));
    // Then it settles.
    e.wait_first_collection();
    assert_eq!(e.get("/readyz", &[]).status, 200);
    assert!(!e.get("/alerts", &[]).body.contains("warnings"));
    assert!(!e.get("/", &[]).body.contains("id=\"replaying\""));
}

#[test]
fn the_simulator_replays_behind_a_serving_listener() {
    let e = Exporter::serving(Command::new(BIN), &[]);
    // Liveness answers at once, replay or not; readiness waits for it.
    assert_eq!(e.get("/healthz", &[]).status, 200);
    e.wait_first_collection();
    let body = e.metrics(None).body;
    assert!(body.contains("gpu_exporter_source_info{source=\"sim\"} 1"));
    assert_eq!(value(&body, "gpu_exporter_gpus"), Some(4.0));
    assert_eq!(e.get("/readyz", &[]).status, 200);
}

#[test]
fn a_failure_that_repeats_is_logged_once_until_it_changes_or_ends() {
    let f = Fixture::new("bin-quiet", r#"{"init_error":9,"gpus":[]}"#);
    let mut a = nvml_args(&f);
    a.extend(["--collect.interval".into(), "100ms".into()]);
    let e = start(&a);
    // Twenty-odd failed collections, bounded in time.
    std::thread::sleep(Duration::from_secs(3));
    let log = e.log();
    assert_eq!(log.matches("collection failed").count(), 1, "{log}");
    assert_eq!(log.matches("level=warn").count(), 1, "{log}");
    // The driver arrives: recovery, once.
    f.set_scenario(&fleet(&[gpu(0, "")]));
    e.wait_log("collection recovered", Duration::from_secs(90));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(e.log().matches("collection recovered").count(), 1);
}

#[test]
fn zero_gpus_with_a_loaded_driver_is_a_warning_not_unready() {
    let f = Fixture::new("bin-zero-warn", r#"{"gpus":[]}"#);
    let e = start(&nvml_args(&f));
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(1.0));
    assert_eq!(value(&body, "gpu_exporter_gpus"), Some(0.0));
    assert!(!body.contains("gpu_up{"));
    assert_eq!(e.get("/readyz", &[]).status, 200);
    assert!(e.get("/", &[]).body.contains("id=\"no-gpus\""));
    e.wait_log("the source reports no GPUs", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(e.log().matches("the source reports no GPUs").count(), 1);
}

/// Live children of `pid` named `comm`.
fn children(pid: u32, comm: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.ppid == pid && p.comm == comm)
        .map(|p| p.pid)
        .collect()
}

fn alive(pid: u32) -> bool {
    processes().iter().any(|p| p.pid == pid)
}

#[test]
fn nvidia_smi_never_outlives_the_exporter() {
    for signal in ["TERM", "KILL"] {
        // An nvidia-smi that hangs in its query (exec: the hung process is
        // the exporter's own child, as the real one is).
        let smi = fake_smi(&format!("orphan-{signal}"), "");
        let dir = smi.parent().unwrap();
        let body = format!(
            "#!/bin/sh\ncase \"$1\" in --help-query-gpu) cat '{0}/help.txt' ;; *) exec sleep 60 ;; esac\n",
            dir.display()
        );
        std::fs::write(dir.join("tmp"), body).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir.join("tmp"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        std::fs::rename(dir.join("tmp"), &smi).unwrap();
        let mut e = Exporter::serving(
            Command::new(BIN),
            &[
                "--source",
                "smi",
                "--smi.path",
                smi.to_str().unwrap(),
                "--smi.timeout",
                "50s",
                "--xid.kmsg",
                "",
            ],
        );
        let hung = eventually(Duration::from_secs(20), || {
            match children(e.pid(), "sleep").first() {
                Some(&pid) => Ok(pid),
                None => Err("no nvidia-smi running yet".to_string()),
            }
        });
        e.signal(signal);
        assert!(e.wait_exit(Duration::from_secs(10)).is_some(), "{signal}");
        eventually(Duration::from_secs(10), || match alive(hung) {
            false => Ok(()),
            true => Err(format!(
                "nvidia-smi {hung} outlived the exporter ({signal})"
            )),
        });
    }
}

/// The harness kills what it started when a start fails: a binary that
/// hangs before it says where it serves must not outlive the failed test.
#[test]
fn a_start_that_never_serves_leaves_no_process_behind() {
    let marker = format!("gpu-exporter-hung-start-{}", std::process::id());
    let mut cmd = Command::new("bash");
    cmd.args(["-c", &format!("exec -a {marker} sleep 120"), "--"]);
    let start = std::panic::AssertUnwindSafe(|| Exporter::serving(cmd, &[]));
    let failed = std::panic::catch_unwind(start);
    assert!(failed.is_err(), "a start that never serves fails");
    let alive = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| std::fs::read(p.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains(&marker));
    assert!(!alive, "{marker} outlived the failed start");
}
