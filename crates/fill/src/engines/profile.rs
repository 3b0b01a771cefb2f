//! How an engine is told from its metric names, and the served models a
//! body gives, by each engine's profile (`model::profile`).

use super::text::{Parsed, Part, Wanted};
use model::profile::{Profile, Role, all};
use model::{Engine, Histogram, Outcomes};
use std::collections::BTreeMap;

/// Name prefixes that tell an engine, and those of engines with no TTFT.
const PREFIXES: [(&str, Option<Engine>); 6] = [
    ("vllm:", Some(Engine::Vllm)),
    ("sglang:", Some(Engine::Sglang)),
    ("trtllm_", Some(Engine::Trtllm)),
    ("nv_inference_", Some(Engine::Triton)),
    ("tgi_", None),
    ("llamacpp:", None),
];

/// The families to keep from an endpoint's body: its engine's, or every
/// engine's while it is not known.
pub fn wanted(engine: Option<Engine>) -> Wanted {
    let mut histograms: Vec<String> = Vec::new();
    for p in all()
        .iter()
        .filter(|p| engine.is_none_or(|e| e == p.engine))
    {
        for name in p.ttft {
            if !histograms.iter().any(|h| h == name) {
                histograms.push(name.to_string());
            }
        }
    }
    let mut counters: Vec<String> = Vec::new();
    for o in all()
        .iter()
        .filter(|p| engine.is_none_or(|e| e == p.engine))
        .flat_map(|p| p.outcomes)
    {
        if !counters.iter().any(|c| c == o.counter) {
            counters.push(o.counter.to_string());
        }
    }
    let mut model_labels: Vec<String> = Vec::new();
    for p in all()
        .iter()
        .filter(|p| engine.is_none_or(|e| e == p.engine))
    {
        if !model_labels.iter().any(|l| l == p.model_label) {
            model_labels.push(p.model_label.to_string());
        }
    }
    Wanted {
        histograms,
        counters,
        prefixes: PREFIXES.iter().map(|(p, _)| p.to_string()).collect(),
        model_labels,
    }
}

/// The engine a body's names tell, or why they tell none.
pub fn detect(parsed: &Parsed, wanted: &Wanted) -> Result<Engine, String> {
    let seen: Vec<(&str, Option<Engine>)> = PREFIXES
        .iter()
        .zip(&parsed.prefixes_seen)
        .filter(|&(_, &s)| s)
        .map(|(&p, _)| p)
        .collect();
    let unprefixed = wanted
        .histograms
        .iter()
        .position(|h| h == "time_to_first_token_seconds")
        .is_some_and(|i| {
            parsed
                .samples
                .iter()
                .any(|s| s.family == i && s.part != Part::Counter)
        });
    match (&seen[..], unprefixed) {
        ([(_, Some(e))], _) => Ok(*e),
        ([(p, None)], _) => Err(format!(
            "its names ({p}…) are of an engine without a TTFT histogram (TGI, llama.cpp): the TTFT SLO is not available for it"
        )),
        ([], true) => Err(
            "its names are unprefixed, as both NIM's and early trtllm-serve's are: name the engine, nim=URL or trtllm=URL".into(),
        ),
        ([], false) => Err("no metric names of vLLM, SGLang, TensorRT-LLM, NIM or Triton".into()),
        (many, _) => {
            let p: Vec<&str> = many.iter().map(|(p, _)| *p).collect();
            Err(format!(
                "names of several engines ({}): name the engine, ENGINE=URL",
                p.join(", ")
            ))
        }
    }
}

/// The most models one endpoint may serve; the rest (by name) are left out.
pub const MAX_MODELS: usize = 32;

/// One model's TTFT histogram from a body, in seconds, summed over its
/// series (vLLM's data-parallel `engine`, SGLang's `is_streaming`, Triton's
/// `version`), or why it cannot be.
pub type Read = Result<Histogram, String>;

/// Each model's TTFT histogram in `parsed`, by model name, at most
/// [`MAX_MODELS`]; and how many models were past the cap.
pub fn models(parsed: &Parsed, wanted: &Wanted, p: &Profile) -> (BTreeMap<String, Read>, usize) {
    let Some(family) = p.ttft.iter().find_map(|name| {
        let i = wanted.histograms.iter().position(|h| h == name)?;
        parsed
            .samples
            .iter()
            .any(|s| s.family == i && s.part != Part::Counter)
            .then_some(i)
    }) else {
        return (BTreeMap::new(), 0);
    };
    // Each series' buckets and sum, by model and then its other labels.
    let mut series: BTreeMap<String, BTreeMap<Vec<(String, String)>, Series>> = BTreeMap::new();
    for s in parsed
        .samples
        .iter()
        .filter(|s| s.family == family && s.part != Part::Counter)
    {
        let Some(model) = s.labels.iter().find(|(k, _)| k == p.model_label) else {
            continue;
        };
        let mut rest = s.labels.clone();
        rest.retain(|(k, _)| k != p.model_label);
        rest.sort();
        let one = series
            .entry(model.1.clone())
            .or_default()
            .entry(rest)
            .or_default();
        match s.part {
            Part::Bucket(le) => one.buckets.push((le / p.per_second, s.value)),
            Part::Sum => one.sum = s.value / p.per_second,
            Part::Count => one.count = Some(s.value),
            Part::Counter => {}
        }
    }
    let past = series.len().saturating_sub(MAX_MODELS);
    let out = series
        .into_iter()
        .take(MAX_MODELS)
        .map(|(name, all)| (name, sum(all.into_values())))
        .collect();
    (out, past)
}

#[derive(Default)]
struct Series {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    /// Its `_count`, only checked: the `+Inf` bucket is the count read.
    count: Option<f64>,
}

/// One histogram of series that share their bounds.
fn sum(all: impl Iterator<Item = Series>) -> Read {
    let mut total = Histogram::default();
    // A count or sum no engine can have (negative, NaN, infinite): what a
    // broken exporter or a mangled body says, never a verdict.
    let count = |v: f64| v.is_finite() && v >= 0.0;
    for (i, mut s) in all.enumerate() {
        if !s.buckets.iter().all(|b| count(b.1))
            || !count(s.sum)
            || s.count.is_some_and(|c| !count(c))
        {
            return Err("a series has a negative, NaN or infinite count or sum".into());
        }
        s.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        if s.buckets
            .windows(2)
            .any(|w| w[0].0 == w[1].0 || w[0].1 > w[1].1)
        {
            return Err("a series repeats a bucket or its counts fall".into());
        }
        if s.buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
            return Err("a series has no +Inf bucket".into());
        }
        if i == 0 {
            total.buckets = s.buckets;
        } else if total.buckets.len() != s.buckets.len()
            || total
                .buckets
                .iter()
                .zip(&s.buckets)
                .any(|(a, b)| a.0 != b.0)
        {
            return Err("its series have different buckets".into());
        } else {
            for (a, b) in total.buckets.iter_mut().zip(&s.buckets) {
                a.1 += b.1;
            }
        }
        total.sum += s.sum;
    }
    Ok(total)
}

/// One model's request counters summed by [`Role`], series by series.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    served: f64,
    failed: f64,
    answered: f64,
    /// Whether a failure series and a total (served or answered) were read.
    failures: bool,
    totals: bool,
    /// Whether the total is a counter of its own ([`Role::Answered`]).
    answers: bool,
    /// A count no engine can have (negative, NaN, infinite) was read.
    broken: bool,
}

impl Tally {
    /// Adds one sample of `counter` with `labels`, as `p` counts it.
    pub fn add(&mut self, p: &Profile, counter: &str, labels: &[(String, String)], v: f64) {
        for o in p
            .outcomes
            .iter()
            .filter(|o| o.counter == counter && o.keep.keeps(labels))
        {
            self.broken |= !(v.is_finite() && v >= 0.0);
            match o.role {
                Role::Served => self.served += v,
                Role::Failed => self.failed += v,
                Role::Answered => {
                    self.answered += v;
                    self.answers = true;
                }
            }
            match o.role {
                Role::Failed => self.failures = true,
                _ => self.totals = true,
            }
        }
    }

    /// The outcomes, where both a failure counter and a total were read.
    pub fn outcomes(&self) -> Option<Outcomes> {
        (self.failures && self.totals && !self.broken).then_some(Outcomes {
            // SGLang's total counts its aborts already.
            answered: match self.answers {
                true => self.answered,
                false => self.served + self.failed,
            },
            failed: self.failed,
        })
    }
}

/// Each model's request outcomes in `parsed`, by model name.
pub fn outcomes(parsed: &Parsed, wanted: &Wanted, p: &Profile) -> BTreeMap<String, Tally> {
    let mut out: BTreeMap<String, Tally> = BTreeMap::new();
    for s in parsed.samples.iter().filter(|s| s.part == Part::Counter) {
        let Some((_, model)) = s.labels.iter().find(|(k, _)| k == p.model_label) else {
            continue;
        };
        let counter = &wanted.counters[s.family];
        if p.outcomes.iter().any(|o| o.counter == counter) {
            out.entry(model.clone())
                .or_default()
                .add(p, counter, &s.labels, s.value);
        }
    }
    out
}

/// The bound a request is judged good at for `threshold` seconds: the
/// threshold itself when it is a bound, else the nearest bound below it
/// (stricter: a request between the two counts as slow), else none. With
/// the second and third, a line that says so.
pub fn judged_at(h: &Histogram, threshold: f64) -> (Option<f64>, Option<String>) {
    let bounds = || h.buckets.iter().map(|b| b.0).filter(|b| b.is_finite());
    if bounds().any(|b| same(b, threshold)) {
        return (bounds().find(|&b| same(b, threshold)), None);
    }
    let below = bounds().rfind(|&b| b < threshold);
    let above = bounds().find(|&b| b > threshold);
    let near = match (below, above) {
        (Some(b), Some(a)) => format!("{} and {}", secs(b), secs(a)),
        (Some(b), None) => secs(b),
        (None, Some(a)) => secs(a),
        (None, None) => "none".into(),
    };
    let what = match below {
        Some(b) => format!("judged at {} instead, stricter", secs(b)),
        None => "no bound at or below it, so no TTFT verdict".into(),
    };
    let line = format!(
        "no bucket bound at the {} TTFT threshold (nearest: {near}); {what}",
        secs(threshold)
    );
    (below, Some(line))
}

/// Equal but for the rounding of a unit conversion.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

fn secs(s: f64) -> String {
    format!("{}s", (s * 1e6).round() / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::text::parse;
    use model::profile::profile;

    fn read(engine: Engine, body: &str) -> BTreeMap<String, Read> {
        let w = wanted(None);
        let parsed = parse(body.as_bytes(), &w);
        assert_eq!(detect(&parsed, &w), Ok(engine));
        let (m, past) = models(&parsed, &w, profile(engine));
        assert_eq!(past, 0);
        m
    }

    const VLLM: &str = "\
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.25\",model_name=\"m\"} 3.0
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.5\",model_name=\"m\"} 4.0
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 5.0
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"m\"} 2.5
vllm:time_to_first_token_seconds_bucket{engine=\"1\",le=\"0.25\",model_name=\"m\"} 1.0
vllm:time_to_first_token_seconds_bucket{engine=\"1\",le=\"0.5\",model_name=\"m\"} 1.0
vllm:time_to_first_token_seconds_bucket{engine=\"1\",le=\"+Inf\",model_name=\"m\"} 2.0
vllm:time_to_first_token_seconds_sum{engine=\"1\",model_name=\"m\"} 1.5
vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"m\"} 7.0
";

    #[test]
    fn vllm_sums_its_data_parallel_engines_per_model() {
        let m = read(Engine::Vllm, VLLM);
        let h = m["m"].as_ref().unwrap();
        assert_eq!(h.buckets, [(0.25, 4.0), (0.5, 5.0), (f64::INFINITY, 7.0)]);
        assert_eq!(h.sum, 4.0);
        let (at, line) = judged_at(h, 0.3);
        assert_eq!(at, Some(0.25));
        assert_eq!(
            line.unwrap(),
            "no bucket bound at the 0.3s TTFT threshold (nearest: 0.25s and 0.5s); judged at 0.25s instead, stricter"
        );
        assert_eq!(judged_at(h, 0.5), (Some(0.5), None));
        let (at, line) = judged_at(h, 0.1);
        assert_eq!(at, None);
        assert!(
            line.unwrap()
                .ends_with("no bound at or below it, so no TTFT verdict")
        );
    }

    #[test]
    fn outcomes_count_engine_errors_not_client_aborts() {
        let tally = |engine: Engine, body: &str| {
            let w = wanted(Some(engine));
            let t = outcomes(&parse(body.as_bytes(), &w), &w, profile(engine));
            t.get("m").and_then(Tally::outcomes)
        };
        let vllm = "vllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 90\n\
                    vllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 5\n\
                    vllm:request_success_total{finished_reason=\"abort\",model_name=\"m\"} 400\n";
        // Before 0.14 there is no `error` reason: no verdict.
        assert_eq!(tally(Engine::Vllm, vllm), None);
        let vllm = format!(
            "{vllm}vllm:request_success_total{{finished_reason=\"error\",model_name=\"m\"}} 5\n"
        );
        let o = |answered, failed| Some(Outcomes { answered, failed });
        assert_eq!(tally(Engine::Vllm, &vllm), o(100.0, 5.0));
        let sglang = "sglang:num_requests_total{model_name=\"m\",is_streaming=\"true\"} 60\n\
                      sglang:num_requests_total{model_name=\"m\",is_streaming=\"false\"} 40\n\
                      sglang:num_aborted_requests_total{model_name=\"m\"} 2\n";
        assert_eq!(tally(Engine::Sglang, sglang), o(100.0, 2.0));
        let triton = "nv_inference_request_success{model=\"m\",version=\"1\"} 97\n\
                      nv_inference_request_failure{model=\"m\",version=\"1\",reason=\"CANCELED\"} 50\n\
                      nv_inference_request_failure{model=\"m\",version=\"1\",reason=\"BACKEND\"} 3\n";
        assert_eq!(tally(Engine::Triton, triton), o(100.0, 3.0));
        let trtllm = "trtllm_request_success_total{model_name=\"m\",finished_reason=\"stop\"} 98\n\
                      trtllm_request_error_total{model_name=\"m\",http_code=\"400\"} 9\n\
                      trtllm_request_error_total{model_name=\"m\",http_code=\"503\"} 2\n";
        assert_eq!(tally(Engine::Trtllm, trtllm), o(100.0, 2.0));
        let broken = triton.replace("} 3", "} NaN");
        assert_eq!(tally(Engine::Triton, &broken), None);
    }

    #[test]
    fn triton_counts_milliseconds_under_model() {
        let body = "\
nv_inference_request_success{model=\"t\",version=\"1\"} 3
nv_inference_first_response_histogram_ms_bucket{model=\"t\",version=\"1\",le=\"100\"} 1
nv_inference_first_response_histogram_ms_bucket{model=\"t\",version=\"1\",le=\"300\"} 2
nv_inference_first_response_histogram_ms_bucket{model=\"t\",version=\"1\",le=\"+Inf\"} 3
nv_inference_first_response_histogram_ms_sum{model=\"t\",version=\"1\"} 700
";
        let m = read(Engine::Triton, body);
        let h = m["t"].as_ref().unwrap();
        assert_eq!(h.buckets[..2], [(0.1, 1.0), (0.3, 2.0)]);
        assert_eq!(h.sum, 0.7);
        assert_eq!(judged_at(h, 0.3), (Some(0.3), None));
    }

    #[test]
    fn series_that_disagree_are_no_model() {
        let body = VLLM.replace("engine=\"1\",le=\"0.5\"", "engine=\"1\",le=\"0.4\"");
        assert_eq!(
            read(Engine::Vllm, &body)["m"],
            Err("its series have different buckets".into())
        );
        let body = VLLM.replace("le=\"+Inf\"", "le=\"9\"");
        assert_eq!(
            read(Engine::Vllm, &body)["m"],
            Err("a series has no +Inf bucket".into())
        );
        // Counts out of range: NaN passes every comparison of the order
        // check, so it is refused on its own.
        let bad = "a series has a negative, NaN or infinite count or sum";
        for (from, to) in [
            ("model_name=\"m\"} 3.0", "model_name=\"m\"} NaN"),
            ("model_name=\"m\"} 3.0", "model_name=\"m\"} -3.0"),
            ("model_name=\"m\"} 2.5", "model_name=\"m\"} +Inf"),
            ("model_name=\"m\"} 1.5", "model_name=\"m\"} -1.5"),
        ] {
            let body = VLLM.replacen(from, to, 1);
            assert_ne!(body, VLLM);
            assert_eq!(read(Engine::Vllm, &body)["m"], Err(bad.into()), "{to}");
        }
    }

    #[test]
    fn engines_are_told_by_their_names_or_not_at_all() {
        let w = wanted(None);
        let says = |body: &str| detect(&parse(body.as_bytes(), &w), &w).unwrap_err();
        assert!(
            says("time_to_first_token_seconds_count{model_name=\"m\"} 1\n")
                .contains("nim=URL or trtllm=URL")
        );
        assert!(says("tgi_request_success 4\n").contains("TTFT SLO is not available"));
        assert!(says("llamacpp:requests_processing 1\n").contains("TGI, llama.cpp"));
        assert!(says("vllm:x 1\nsglang:y 2\n").contains("several engines (vllm:, sglang:)"));
        assert!(says("{\"iter\": 3}\n").contains("no metric names"));
        let sglang = "sglang:num_requests_total{model_name=\"m\"} 1\n";
        assert_eq!(
            detect(&parse(sglang.as_bytes(), &w), &w),
            Ok(Engine::Sglang)
        );
    }

    #[test]
    fn an_early_trtllm_serve_is_read_by_its_unprefixed_names() {
        let w = wanted(Some(Engine::Trtllm));
        let body = "time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 2\n";
        let (m, _) = models(&parse(body.as_bytes(), &w), &w, profile(Engine::Trtllm));
        assert_eq!(m["m"].as_ref().unwrap().count(), 2.0);
    }

    /// A `_count` of NaN, -5 or +Inf makes no model, as a bucket or
    /// `_sum` of them does: the model is left out with the reason.
    #[test]
    fn a_count_no_engine_can_have_makes_no_model() {
        let w = wanted(Some(Engine::Vllm));
        let body = |count: &str| {
            let name = "vllm:time_to_first_token_seconds";
            format!(
                "{name}_bucket{{model_name=\"m\",le=\"0.25\"}} 9\n\
                 {name}_bucket{{model_name=\"m\",le=\"+Inf\"}} 10\n\
                 {name}_sum{{model_name=\"m\"}} 1\n\
                 {name}_count{{model_name=\"m\"}} {count}\n"
            )
        };
        let read = |count: &str| {
            let (m, _) = models(
                &parse(body(count).as_bytes(), &w),
                &w,
                profile(Engine::Vllm),
            );
            m["m"].clone()
        };
        assert_eq!(read("10").map(|h| h.count()), Ok(10.0));
        for bad in ["NaN", "-5", "+Inf"] {
            let why = read(bad).unwrap_err();
            assert!(why.contains("NaN or infinite count"), "{bad}: {why}");
        }
    }

    #[test]
    fn models_past_the_cap_are_counted_not_kept() {
        let body: String = (0..MAX_MODELS + 3)
            .map(|i| format!("vllm:time_to_first_token_seconds_bucket{{model_name=\"m{i:02}\",le=\"+Inf\"}} 1\n"))
            .collect();
        let w = wanted(Some(Engine::Vllm));
        let (m, past) = models(&parse(body.as_bytes(), &w), &w, profile(Engine::Vllm));
        assert_eq!((m.len(), past), (MAX_MODELS, 3));
        assert!(m.contains_key("m00") && !m.contains_key("m34"));
    }
}
