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
    flowing(&["100:5"], history, port)
}

/// A vLLM double of [`MODEL`] that records the `observe` mix every
/// 100 ms, after `history` (recorded once), on `port` where given.
fn flowing(observe: &[&str], history: &[&str], port: Option<&str>) -> Double {
    let mut args = vec!["--engine", "vllm", "--mode", "grow", "--model", MODEL];
    args.push("--observe");
    args.extend(observe);
    if !history.is_empty() {
        args.push("--history");
        args.extend(history);
    }
    if let Some(p) = port {
        args.extend(["--port", p]);
    }
    started(&args)
}

/// Kills `d` and starts it again on its port, its counters from 0,
/// recording the `observe` mix.
fn restart(d: &mut Double, observe: &[&str]) -> Double {
    let port = d.url.split(':').nth(2).unwrap();
    let port = port.trim_end_matches("/metrics").to_string();
    let _ = d.child.kill();
    let _ = d.child.wait();
    let restarted = flowing(observe, &[], Some(&port));
    assert_eq!(restarted.url, d.url);
    restarted
}

/// The exporter reading `replicas` every 200 ms with the short burn
/// windows, once it has read each.
fn watching(replicas: &[&Double]) -> Exporter {
    let urls: Vec<&str> = replicas.iter().map(|d| d.url.as_str()).collect();
    let e = reading(&urls);
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        urls.iter().all(|url| up(b, url))
    });
    e
}

/// The exporter reading `urls` every 200 ms with the short burn windows.
fn reading(urls: &[&str]) -> Exporter {
    let rules = crate::common::temp_file("engine-replicas.json", SHORT_BURN);
    let mut args = vec!["--engine.interval", "200ms"];
    for url in urls {
        args.extend(["--engine.endpoint", url]);
    }
    args.extend(["--rules.file", rules.to_str().unwrap()]);
    Exporter::start(&args)
}

fn up(metrics: &str, url: &str) -> bool {
    value(
        metrics,
        &format!("gpu_exporter_engine_up{{endpoint=\"{url}\""),
    ) == Some(1.0)
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
    let e = watching(&[&old, &restarting]);
    // Past the longest window (8 s) with both read: quiet.
    std::thread::sleep(Duration::from_secs(9));
    let alerts = e.get("/alerts", &[]).body;
    assert!(burning(&alerts).is_empty(), "before the restart: {alerts}");

    let restarted = restart(&mut restarting, &["100:5"]);
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

/// Replica A holds 1M good requests; replica B restarts and serves half
/// its requests slow from then. Summed before the increase, the reset
/// counted A's 1M good in the windows and hid the burn until it left the
/// 6 s window; taken per replica, the page comes within the short window
/// and `for` (2 s and 1 s) of B's first reads.
#[test]
fn a_burn_on_a_restarted_replica_pages_at_once_beside_old_good_requests() {
    if !python_ready() {
        return;
    }
    let old = replica(&["100:1000000"], None);
    let mut restarting = replica(&[], None);
    let e = watching(&[&old, &restarting]);
    std::thread::sleep(Duration::from_secs(7));
    let alerts = e.get("/alerts", &[]).body;
    assert!(burning(&alerts).is_empty(), "before the restart: {alerts}");

    let restarted = restart(&mut restarting, &["100:5", "600:5"]);
    e.wait_for("/metrics", Duration::from_secs(10), |b| {
        up(b, &restarted.url)
    });
    let since = Instant::now();
    let fast = |b: &str| burning(b).contains(&"TTFTBudgetBurn".to_string());
    e.wait_for("/alerts", Duration::from_secs(20), fast);
    let took = since.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "paged {took:?} after the restart"
    );
}

/// Replica B comes up after the exporter, holding 50,000 slow requests
/// (of 550,000) from before; both serve every request fast now. Summed
/// before the increase, B's lifetime counts landed in the windows at once
/// (a 9% error ratio); as a new series, only its increases from its first
/// read count.
#[test]
fn a_replica_coming_up_after_the_exporter_changes_nothing_but_its_share() {
    if !python_ready() {
        return;
    }
    let first = replica(&[], None);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port()
        .to_string();
    let late_url = format!("http://127.0.0.1:{port}/metrics");
    let e = reading(&[&first.url, &late_url]);
    e.wait_for("/metrics", Duration::from_secs(20), |b| up(b, &first.url));
    std::thread::sleep(Duration::from_secs(3));
    // Mostly good before: a new series with few good requests but many
    // slow ones is extrapolated towards its zero points unevenly in its
    // first windows, by Prometheus as by the exporter (see the docs).
    let late = replica(&["600:50000", "100:500000"], Some(&port));
    e.wait_for("/metrics", Duration::from_secs(10), |b| up(b, &late.url));
    let since = Instant::now();
    while since.elapsed() < Duration::from_secs(10) {
        let alerts = e.get("/alerts", &[]).body;
        assert!(burning(&alerts).is_empty(), "after it came: {alerts}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A model whose engine holds 50,000 slow requests from before and serves
/// every request fast now: the status page's share in time is over the
/// burn rules' short window (2 s here), 100%, as the evaluator sees it;
/// the engine's lifetime share, under 2%, is labelled as such.
#[test]
fn the_status_page_says_the_share_in_time_over_the_short_window() {
    if !python_ready() {
        return;
    }
    let d = replica(&["600:50000"], None);
    let e = watching(&[&d]);
    let row = |page: &str| {
        let at = page.find(&format!("<tr><td>{MODEL}</td>"))?;
        Some(page[at..at + page[at..].find("</tr>")?].to_string())
    };
    // Each row's cells: model, engine, requests, last 2s, lifetime, ...
    let cells = |row: &str| -> Vec<String> {
        (row.split("<td").skip(1))
            .map(|c| c[c.find('>').unwrap() + 1..c.find("</td>").unwrap()].to_string())
            .collect()
    };
    let page = e.wait_for("/", Duration::from_secs(20), |p| {
        row(p).is_some_and(|r| cells(&r)[3] == "100%")
    });
    assert!(
        page.contains(
            "<th>first token in time, last 2s</th><th>first token in time, lifetime</th>"
        ),
        "{page}"
    );
    let c = cells(&row(&page).unwrap());
    let lifetime: f64 = c[4].trim_end_matches('%').parse().unwrap();
    assert!(lifetime < 2.0, "lifetime share {lifetime}%: {c:?}");
    let requests: f64 = c[2].parse().unwrap();
    assert!(requests >= 50_000.0, "{c:?}");
}
