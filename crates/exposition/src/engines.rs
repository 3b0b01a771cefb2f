//! The engine reader's own families, from the snapshot's endpoints.

use super::writer::Writer;
use model::catalogue::Family;
use model::catalogue::engines::{
    ENGINE_DOWN, ENGINE_ERRORS, ENGINE_GOOD_WITHIN, ENGINE_LAST_SUCCESS, ENGINE_MODEL_OBJECTIVE,
    ENGINE_MODEL_SLO, ENGINE_MODEL_UP, ENGINE_MODELS_REJECTED, ENGINE_READ_DURATION, ENGINE_UP,
};
use model::{EngineEndpoint, EngineError, Model, Objectives, Rejection, Snapshot};

pub(super) fn own(w: &mut Writer, snapshot: &Snapshot) {
    let engines = &snapshot.engines;
    if engines.is_empty() {
        return;
    }
    w.head(&ENGINE_UP);
    for e in engines {
        w.name(&ENGINE_UP);
        w.open_label("endpoint", &e.url);
        if let Some(engine) = e.engine {
            w.label("engine", engine.name());
        }
        w.value(if e.up { 1.0 } else { 0.0 });
    }
    let mut headed = false;
    for e in engines {
        let Some(reason) = e.reason.filter(|_| !e.up) else {
            continue;
        };
        if !std::mem::replace(&mut headed, true) {
            w.head(&ENGINE_DOWN);
        }
        w.name(&ENGINE_DOWN);
        w.open_label("endpoint", &e.url);
        w.label("reason", reason.label());
        w.value(1.0);
    }
    type Value = fn(&model::EngineEndpoint) -> Option<f64>;
    let each: [(_, Value); 2] = [
        (&ENGINE_LAST_SUCCESS, |e| e.last_success),
        (&ENGINE_READ_DURATION, |e| e.duration),
    ];
    for (fam, value) in each {
        let mut headed = false;
        for e in engines {
            if let Some(v) = value(e) {
                if !std::mem::replace(&mut headed, true) {
                    w.head(fam);
                }
                w.name(fam);
                w.open_label("endpoint", &e.url);
                w.value(v);
            }
        }
    }
    let errors = EngineError::ALL.map(EngineError::label);
    by_reason(w, engines, &ENGINE_ERRORS, &errors, |e| &e.errors);
    let rejected = Rejection::ALL.map(Rejection::label);
    by_reason(w, engines, &ENGINE_MODELS_REJECTED, &rejected, |e| {
        &e.rejected
    });
    bounds(w, engines);
    let url = |i: usize| engines.get(i).map_or("", |e| e.url.as_str());
    let models = || {
        snapshot
            .models
            .iter()
            .filter_map(|m| Some((url(m.endpoint?), m)))
    };
    if models().next().is_some() {
        w.head(&ENGINE_MODEL_UP);
    }
    for (endpoint, m) in models() {
        w.name(&ENGINE_MODEL_UP);
        w.open_label("endpoint", endpoint);
        w.label("model_name", &m.name);
        w.value(if m.stale { 0.0 } else { 1.0 });
    }
    let mut headed = false;
    for (endpoint, m) in models() {
        let Some(at) = m.good_within else {
            continue;
        };
        if !std::mem::replace(&mut headed, true) {
            w.head(&ENGINE_GOOD_WITHIN);
        }
        w.name(&ENGINE_GOOD_WITHIN);
        w.open_label("endpoint", endpoint);
        w.label("model_name", &m.name);
        w.value(at);
    }
}

/// Each served model's objectives, the simulator's included: one series
/// a model and SLO, whatever endpoints serve it.
pub(super) fn objectives(w: &mut Writer, o: &Objectives, models: &[Model]) {
    let mut headed = false;
    for m in models {
        let each = [
            ("ttft", o.ttft_of(&m.name)),
            ("availability", o.availability),
        ];
        for (slo, v) in each {
            let Some(v) = v else { continue };
            if !std::mem::replace(&mut headed, true) {
                w.head(&ENGINE_MODEL_OBJECTIVE);
            }
            w.name(&ENGINE_MODEL_OBJECTIVE);
            w.open_label("model_name", &m.name);
            w.label("slo", slo);
            w.value(v);
        }
    }
}

/// Each endpoint's models' judged bounds, as its engine spells them.
fn bounds(w: &mut Writer, engines: &[EngineEndpoint]) {
    let mut headed = false;
    for e in engines {
        let Some(engine) = e.engine else { continue };
        for b in &e.bounds {
            if !std::mem::replace(&mut headed, true) {
                w.head(&ENGINE_MODEL_SLO);
            }
            w.name(&ENGINE_MODEL_SLO);
            w.open_label("endpoint", &e.url);
            w.label("engine", engine.name());
            w.label("model_name", &b.model);
            if let Some(le) = &b.le {
                w.label("bucket", le);
            }
            w.value(1.0);
        }
    }
}

/// A counter family by endpoint and `reason`: each endpoint's `counts`,
/// one a reason, in `reasons`' order.
fn by_reason(
    w: &mut Writer,
    engines: &[EngineEndpoint],
    fam: &Family,
    reasons: &[&str],
    counts: fn(&EngineEndpoint) -> &[u64],
) {
    w.head(fam);
    for e in engines {
        for (reason, &n) in reasons.iter().zip(counts(e)) {
            w.name(fam);
            w.open_label("endpoint", &e.url);
            w.label("reason", reason);
            w.value(n as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Scrape;
    use model::SourceKind;
    use model::{Model, Objectives, Snapshot};

    /// A model with an objective of its own (`--engine.config`) is served
    /// it for TTFT; the other the rule's; both the availability rule's.
    #[test]
    fn each_model_is_served_its_own_objective_or_the_rules() {
        let mut s = Snapshot::empty(SourceKind::Sim);
        s.error = None;
        s.objectives = Objectives {
            ttft: Some(0.999),
            own: vec![("a".into(), 0.99)],
            availability: Some(0.999),
        }
        .into();
        let model = |name: &str| Model {
            name: name.into(),
            ..Default::default()
        };
        s.models = vec![model("a"), model("b")];
        let text = Scrape::of(&s).text();
        let fam = "gpu_exporter_engine_model_objective_ratio";
        for (model, slo, v) in [
            ("a", "ttft", "0.99"),
            ("a", "availability", "0.999"),
            ("b", "ttft", "0.999"),
            ("b", "availability", "0.999"),
        ] {
            let line = format!("{fam}{{model_name=\"{model}\",slo=\"{slo}\"}} {v}\n");
            assert!(text.contains(&line), "{line}{text}");
        }
        assert_eq!(text.matches(&format!("# TYPE {fam} gauge")).count(), 1);
    }
}
