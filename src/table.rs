//! The seed lab's `== scrape + alert evaluation ==` table, from a published
//! snapshot and its evaluator, with the SLO verdicts in their own section.

use alerts::rules::TTFT_OBJECTIVE;
use alerts::{Alert, Evaluator, Signal, State, Subject};
use base::units::GIB;
use model::Model;
use poller::Published;
use std::fmt::Write;
use std::time::Duration;

const WINDOWS: [(&str, u64); 4] = [("5m", 300), ("1h", 3600), ("6h", 21_600), ("3d", 259_200)];

fn firing<'a>(p: &'a Published, subject: &'a Subject) -> impl Iterator<Item = &'a Alert> {
    p.alerts
        .iter()
        .filter(move |a| &a.subject == subject && a.state == State::Firing)
}

pub fn render(p: &Published, evaluator: &Evaluator) -> String {
    let mut out = String::from("== scrape + alert evaluation ==\n");
    let healthy = gpu_lines(&mut out, p, evaluator);
    let fired: Vec<String> = p
        .alerts
        .iter()
        .filter(|a| a.state == State::Firing)
        .filter_map(|a| match &a.subject {
            Subject::Gpu { index, .. } => Some(format!("{}(gpu{index})", a.rule.name)),
            Subject::Exporter => Some(format!("{}(exporter)", a.rule.name)),
            Subject::Model(_) | Subject::Endpoint { .. } => None,
        })
        .collect();
    let fired = if fired.is_empty() {
        "none".to_string()
    } else {
        fired.join(", ")
    };
    let _ = writeln!(out, "\nalerts fired: {fired}");
    if p.snapshot.gpus.is_empty() {
        out.push_str("no GPUs in the fleet.\n");
    } else if healthy.is_empty() {
        out.push_str("no GPU is healthy.\n");
    } else {
        let _ = writeln!(out, "healthy {} fired nothing.", healthy.join(", "));
    }

    if !p.snapshot.models.is_empty() {
        slo_lines(&mut out, p, evaluator);
    }
    out
}

/// A line per GPU: readings, its paging Xid in the last 5 minutes (what
/// GPUXidErrors reads: the increase of the `PAGE_XIDS` counters), its
/// verdict. Returns the healthy ones.
fn gpu_lines(out: &mut String, p: &Published, evaluator: &Evaluator) -> Vec<String> {
    let at = p.snapshot.at;
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
        let subject = Subject::Gpu {
            index: g.index,
            uuid: g.uuid.clone(),
        };
        let xid_5m =
            evaluator.increase(Signal::CriticalXid, &subject, at, Duration::from_secs(300));
        let alerts: Vec<&str> = firing(p, &subject).map(|a| a.rule.name.as_str()).collect();
        let verdict = if alerts.is_empty() {
            healthy.push(format!("gpu{}", g.index));
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
            "gpu {}: temp={} clocks={} throttled={throttled:<3} xid_5m={:<2} largest_free={:<7}{verdict}",
            g.index,
            show(r.temperature_celsius, 1.0, "C"),
            show(r.sm_clock_hertz, 1e6, "MHz"),
            show(xid_5m, 1.0, ""),
            show(r.largest_free_bytes, GIB, "GB"),
        );
    }
    healthy
}

/// The SLO section's head, with the objective and the bound the models
/// are judged at where they share one: an engine's bound may be below the
/// threshold (its buckets), and a model may have its own threshold and
/// objective (`--engine.config`). `objectives`: each model's, in order.
fn slo_header(models: &[Model], objectives: &[f64]) -> String {
    let mut bounds = models.iter().map(|m| m.good_within);
    let first = bounds.next().flatten();
    let within = match first {
        Some(b) if bounds.all(|o| o == first) => format!("{}ms", (b * 1000.0).round()),
        _ => "each model's bound".to_string(),
    };
    let share = match shared(objectives) {
        Some(o) => format!("{}%", percent(o)),
        None => "each model's objective".to_string(),
    };
    format!("\n== SLO: {share} of requests get their first token within {within} ==\n")
}

/// The objective every model has, if they share one.
fn shared(objectives: &[f64]) -> Option<f64> {
    let first = *objectives.first()?;
    objectives.iter().all(|&o| o == first).then_some(first)
}

/// An objective as a percentage, without float noise: 0.999 is 99.9.
fn percent(objective: f64) -> f64 {
    (objective * 1e8).round() / 1e6
}

/// A line per served model: its burn rates, each of its own objective's
/// budget (the evaluator's, `Evaluator::ttft_objective`), said on the
/// line where the models' differ, and its firing alerts.
fn slo_lines(out: &mut String, p: &Published, evaluator: &Evaluator) {
    let at = p.snapshot.at;
    let models = &p.snapshot.models;
    let objectives: Vec<f64> = (models.iter())
        .map(|m| {
            let subject = Subject::Model(m.name.clone());
            evaluator.ttft_objective(&subject).unwrap_or(TTFT_OBJECTIVE)
        })
        .collect();
    out.push_str(&slo_header(models, &objectives));
    let differ = shared(&objectives).is_none();
    for (m, &objective) in models.iter().zip(&objectives) {
        let subject = Subject::Model(m.name.clone());
        let burns: Vec<String> = WINDOWS
            .iter()
            .map(|&(name, secs)| {
                let b = evaluator.burn_rate(&subject, at, Duration::from_secs(secs), objective);
                format!("{name}={}", b.map_or("-".into(), |b| format!("{b:.1}x")))
            })
            .collect();
        let alerts: Vec<String> = firing(p, &subject)
            .map(|a| format!("{} [{}]", a.rule.name, a.rule.severity.as_str()))
            .collect();
        let verdict = if alerts.is_empty() {
            "OK".to_string()
        } else {
            format!("-> {}", alerts.join(", "))
        };
        let own = match differ {
            true => format!(" ({}%)", percent(objective)),
            false => String::new(),
        };
        let _ = writeln!(
            out,
            "model {}{own}: burn {}  {verdict}",
            m.name,
            burns.join(" ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alerts::defaults;
    use fill::engines::reader::Memory;
    use model::Bounds;
    use model::Collectors;
    use poller::Poller;
    use sources::sim::{EPOCH, Scenario, Sim};
    use std::sync::Arc;

    /// The table as `--once` prints it at `t0`: the past replayed, then
    /// one collection judged.
    fn seed_table(t0: f64) -> String {
        seed_table_with(t0, defaults())
    }

    /// The table as [`seed_table`], judged by `rules`.
    fn seed_table_with(t0: f64, rules: Vec<alerts::Rule>) -> String {
        let sim = Sim::new(Scenario::default_fleet(), t0);
        let mut poller =
            Poller::new(Box::new(sim), Duration::from_secs(1)).with_collectors(Collectors::DEFAULT);
        let mut evaluator = Evaluator::new(rules);
        let mut past = poller.history(t0).expect("the simulator has a past");
        for i in 0..past.steps.len() {
            evaluator.eval(&past.snapshot(i));
        }
        let s = poller.collect_at(t0);
        let bounds = Bounds::new(Duration::from_secs(1), Duration::from_secs(60));
        evaluator.eval_at(&s, s.at, s.freshness(s.finished, bounds));
        let p = Published {
            snapshot: Arc::new(s),
            alerts: Arc::new(evaluator.alerts()),
            replay: None,
            recent: Default::default(),
        };
        render(&p, &evaluator)
    }

    /// The simulator counts from its epoch, so its periodic Xid (every
    /// 150 s) falls anywhere between two collections: the table is the
    /// same whenever it is printed, years apart or a fraction of a second.
    #[test]
    fn the_seed_table_is_the_same_at_any_time() {
        let grid = EPOCH + 200_000.0 * 150.0;
        let first = seed_table(grid);
        assert!(
            first.contains("gpu 2: temp=70C clocks=1410MHz throttled=no  xid_5m=2 "),
            "{first}"
        );
        for t0 in [
            grid + 0.4,
            grid + 37.5,
            grid + 75.0,
            grid + 149.9,
            grid + 3.15e7,
        ] {
            assert_eq!(seed_table(t0), first, "at {t0}");
        }
    }

    #[test]
    fn the_slo_head_names_the_bound_the_models_share() {
        let t0 = EPOCH + 200_000.0 * 150.0;
        let mut models = poller::source_models(
            &Sim::new(Scenario::default_fleet(), t0),
            &mut Memory::new(None),
        );
        assert!(models.len() > 1);
        let head = |m: &[Model]| slo_header(m, &vec![TTFT_OBJECTIVE; m.len()]);
        assert!(
            head(&models).contains("within 300ms =="),
            "{}",
            head(&models)
        );
        models[1].good_within = Some(0.25);
        assert!(head(&models).contains("within each model's bound =="));
        models.truncate(1);
        models[0].good_within = None;
        assert!(head(&models).contains("within each model's bound =="));
        assert_eq!(
            slo_header(&models, &[0.99]),
            "\n== SLO: 99% of requests get their first token within each model's bound ==\n"
        );
        let two = [models[0].clone(), models[0].clone()];
        assert!(slo_header(&two, &[0.999, 0.995]).contains("== SLO: each model's objective of"));
        assert_eq!(percent(0.9999), 99.99);
    }

    /// The burn column is of each model's own objective's budget, the one
    /// the evaluator judges it by (`--engine.config`'s `objective`), and
    /// the head says when the models' differ: the simulator's llama, 3%
    /// slow, burns a 99.9% budget 30 times over, a 99% one 3 times.
    #[test]
    fn the_burn_column_is_of_each_models_own_objective() {
        use alerts::adjust::with_objectives;
        let t0 = EPOCH + 200_000.0 * 150.0;
        let llama = "llama-3.1-70b-instruct";
        let line = |table: &str| {
            let at = table.find(&format!("model {llama}")).expect("llama's line");
            table[at..].lines().next().unwrap().to_string()
        };
        let default = seed_table(t0);
        assert!(
            default.contains("== SLO: 99.9% of requests get their first token within 300ms =="),
            "{default}"
        );
        assert!(line(&default).contains(": burn 5m=30.0x 1h=30.0x 6h=30.0x 3d=30.0x "));

        let own = seed_table_with(t0, with_objectives(defaults(), &[(llama.into(), 0.99)]));
        assert!(
            own.contains(
                "== SLO: each model's objective of requests get their first token within 300ms =="
            ),
            "{own}"
        );
        assert!(
            line(&own).starts_with(&format!(
                "model {llama} (99%): burn 5m=3.0x 1h=3.0x 6h=3.0x 3d=3.0x "
            )),
            "{own}"
        );
        assert!(
            own.contains("model mistral-7b-instruct (99.9%): burn 5m=0.2x "),
            "{own}"
        );

        // Every model at 99%: one objective, said in the head.
        let objectives: Vec<(String, f64)> = ["llama-3.1-70b-instruct", "mistral-7b-instruct"]
            .map(|m| (m.to_string(), 0.99))
            .to_vec();
        let all = seed_table_with(t0, with_objectives(defaults(), &objectives));
        assert!(all.contains("== SLO: 99% of requests get"), "{all}");
        assert!(
            line(&all).starts_with(&format!("model {llama}: burn 5m=3.0x ")),
            "{all}"
        );
    }
}
