//! The seed lab's `== scrape + alert evaluation ==` table, from a published
//! snapshot and its evaluator.

use crate::alerts::{Evaluator, Signal, State};
use crate::collector::Published;
use std::fmt::Write;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

pub fn render(p: &Published, evaluator: &Evaluator) -> String {
    let mut out = String::from("== scrape + alert evaluation ==\n");
    let firing = |gpu: u32| -> Vec<&str> {
        p.alerts
            .iter()
            .filter(|a| a.gpu == gpu && a.state == State::Firing)
            .map(|a| a.rule.name.as_str())
            .collect()
    };
    let mut healthy = Vec::new();
    for g in &p.snapshot.gpus {
        let r = &g.readings;
        let show = |v: Option<f64>, scale: f64, unit: &str| {
            v.map_or("-".to_string(), |v| {
                format!("{}{unit}", (v / scale).round())
            })
        };
        let throttled = match r.throttled() {
            Some(true) => "YES",
            Some(false) => "no",
            None => "-",
        };
        let xid_rate = evaluator.increase(Signal::CriticalXid, &g.uuid, p.snapshot.at, 300.0);
        let alerts = firing(g.index);
        let verdict = if alerts.is_empty() {
            healthy.push(g.index);
            if g.up {
                "OK".to_string()
            } else {
                "LOST".to_string()
            }
        } else {
            format!("-> {}", alerts.join(", "))
        };
        let _ = writeln!(
            out,
            "gpu {}: temp={} clocks={} throttled={throttled:<3} xid_rate={:<2} largest_free={:<7}{verdict}",
            g.index,
            show(r.temperature_celsius, 1.0, "C"),
            show(r.sm_clock_hertz, 1e6, "MHz"),
            show(xid_rate, 1.0, ""),
            show(r.largest_free_bytes, GIB, "GB"),
        );
    }
    let fired: Vec<String> = p
        .alerts
        .iter()
        .filter(|a| a.state == State::Firing)
        .map(|a| format!("{}(gpu{})", a.rule.name, a.gpu))
        .collect();
    let fired = if fired.is_empty() {
        "none".to_string()
    } else {
        fired.join(", ")
    };
    let _ = writeln!(out, "\nalerts fired: {fired}");
    let names: Vec<String> = healthy.iter().map(|i| format!("gpu{i}")).collect();
    match names.len() {
        0 => out.push_str("no GPU is healthy.\n"),
        _ => {
            let _ = writeln!(out, "healthy {} fired nothing.", names.join(", "));
        }
    }
    out
}
