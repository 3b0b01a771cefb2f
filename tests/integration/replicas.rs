//! One model served by several engine endpoints (replicas): a replica's
//! restart resets its own counters, not the model's, so neither the
//! other replica's lifetime counts nor its own land in the burn windows.

use crate::common::{Exporter, value};
use crate::engines::{Double, SHORT_BURN, python_ready, started};
use std::time::{Duration, Instant};

const MODEL: &str = "replicated";

/// A vLLM double of [`MODEL`] that records 5 requests at 100 ms every
/// 100 ms, after `history` (recorded once), on `port` where given.
fn replica(history: &[&str], port: Option<&str>) -> Double {
    let mut args = vec!["--engine", "vllm", "--mode", "grow", "--model", MODEL];
    args.extend(["--observe", "100:5"]);
    if !history.is_empty() {
        args.push("--history");
        args.extend(history);
    }
    if let Some(p) = port {
        args.extend(["--port", p]);
    }
    started(&args)
}

fn burning(alerts: &str) -> Vec<String> {
    (crate::prometheus::firing(alerts).into_iter())
        .filter(|(rule, who)| rule.starts_with("TTFTBudgetBurn") && who == MODEL)
        .map(|(rule, _)| rule)
        .collect()
}

/// Replica A holds 50,000 slow requests from before the exporter came;
/// both serve every request fast now. Replica B restarts (its counters
/// back to 0): summed before the increase, the drop read as a reset of
/// the model's counters and A's 50,000 slow landed in the windows (a page
/// at ~500x); taken per replica, B's reset is its own, and nothing burns.
#[test]
fn a_replica_restart_pages_nothing_while_the_other_holds_old_slow_requests() {
    if !python_ready() {
        return;
    }
    let old = replica(&["600:50000"], None);
    let mut restarting = replica(&[], None);
    let rules = crate::common::temp_file("engine-replicas.json", SHORT_BURN);
    let e = Exporter::start(&[
        "--engine.interval",
        "200ms",
        "--engine.endpoint",
        &old.url,
        "--engine.endpoint",
        &restarting.url,
        "--rules.file",
        rules.to_str().unwrap(),
    ]);
    let up = |b: &str, url: &str| {
        let series = format!("gpu_exporter_engine_up{{endpoint=\"{url}\"");
        value(b, &series) == Some(1.0)
    };
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        up(b, &old.url) && up(b, &restarting.url)
    });
    // Past the longest window (8 s) with both read: quiet.
    std::thread::sleep(Duration::from_secs(9));
    let alerts = e.get("/alerts", &[]).body;
    assert!(burning(&alerts).is_empty(), "before the restart: {alerts}");

    let port = restarting.url.split(':').nth(2).unwrap();
    let port = port.trim_end_matches("/metrics").to_string();
    let _ = restarting.child.kill();
    let _ = restarting.child.wait();
    let restarted = replica(&[], Some(&port));
    assert_eq!(restarted.url, restarting.url);
    // Through the longest window after the restart, every evaluation.
    let since = Instant::now();
    let mut seen_up = false;
    while since.elapsed() < Duration::from_secs(10) {
        let alerts = e.get("/alerts", &[]).body;
        assert!(burning(&alerts).is_empty(), "after the restart: {alerts}");
        seen_up |= up(&e.get("/metrics", &[]).body, &restarted.url);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(seen_up, "the restarted replica was never read: {}", e.log());
}
