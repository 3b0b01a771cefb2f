//! Start-up: the simulator's three days replayed through the evaluator, as
//! the binary does before `/readyz` turns 200, for 100 and 1,000 rules on
//! 64 GPUs and 2 models. The replay must be linear in rules × GPUs:
//! t(1,000) / t(100) at most 12, and 1,000 rules within 10 s on a 2-core
//! machine (the target). `cargo bench --bench startup`; exits 1 when the
//! ratio is over 12.
//!
//! The rules are what a large rules file holds: every kind, over many
//! distinct windows (60 of them), thresholds and `for`s, so that neither
//! the expression cache nor a few shared windows make it cheap.

use alerts::file::load;
use model::Bounds;
use poller::Poller;
use poller::judge::settled;
use sources::sim::{Scenario, Sim};
use std::time::{Duration, Instant};

const T0: f64 = 1.8e9;

/// `n` rules of every kind, as a rules file replacing the defaults.
fn rules(n: usize) -> String {
    let rule = |i: usize| {
        let minutes = 1 + i % 60;
        match i % 6 {
            0 => format!(
                r#"{{"name":"Hot{i}","kind":"gauge","signal":"temperature","op":">","threshold":{},"for":"{}m","severity":"ticket"}}"#,
                60 + i % 40,
                i % 10
            ),
            1 => format!(
                r#"{{"name":"Xid{i}","kind":"increase","signal":"critical_xid","window":"{minutes}m","threshold":{},"severity":"page"}}"#,
                i % 3
            ),
            2 => format!(
                r#"{{"name":"Link{i}","kind":"rate","signal":"nvlink_errors","window":"{minutes}m","threshold":1,"severity":"ticket"}}"#
            ),
            3 => format!(
                r#"{{"name":"Leak{i}","kind":"deriv","signal":"allocator_allocated","window":"{}m","threshold":17476,"for":"30m","severity":"ticket"}}"#,
                30 + minutes
            ),
            4 => format!(
                r#"{{"name":"Burn{i}","kind":"burn_rate","objective":0.999,"windows":[{{"long":"{}h","short":"{minutes}m","factor":{}}}],"for":"2m","severity":"page"}}"#,
                1 + i % 72,
                1 + i % 15
            ),
            _ => format!(
                r#"{{"name":"Frag{i}","kind":"gauge","signal":"largest_free_ratio","op":"<","threshold":0.0{},"for":"5m","severity":"ticket"}}"#,
                1 + i % 9
            ),
        }
    };
    let all: Vec<String> = (0..n).map(rule).collect();
    format!(r#"{{"replace":true,"rules":[{}]}}"#, all.join(","))
}

/// Seconds to replay three days and judge the first collection.
fn replay(n: usize) -> f64 {
    let gpus = vec![r#"{"xid":79,"xid_every":"600s"}"#; 64].join(",");
    let scenario = Scenario::parse(&format!(
        r#"{{"gpus":[{gpus}],"models":[{{"name":"a","slow_fraction":0.03}},{{"name":"b"}}]}}"#
    ))
    .unwrap();
    let rules = load(&rules(n)).unwrap();
    assert_eq!(rules.len(), n);
    let started = Instant::now();
    let mut c = Poller::new(Box::new(Sim::new(scenario, T0)), Duration::from_secs(1));
    let bounds = Bounds::new(Duration::from_secs(1), Duration::from_secs(60));
    let (p, e) = settled(&mut c, rules, bounds, T0);
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{n:>5} rules, 64 GPUs: {secs:6.2} s, {} alerts active, history {} KiB",
        p.alerts.len(),
        e.history_bytes() / 1024
    );
    secs
}

fn main() {
    // The best of three: the machine is shared.
    let best = |n| (0..3).map(|_| replay(n)).fold(f64::INFINITY, f64::min);
    let small = best(100);
    let large = best(1000);
    let ratio = large / small;
    println!(
        "t(1000) / t(100) = {large:.2} / {small:.2} = {ratio:.1} (at most 12); \
         1,000 rules {} the 10 s target",
        if large <= 10.0 { "within" } else { "OVER" }
    );
    if ratio > 12.0 {
        std::process::exit(1);
    }
}
