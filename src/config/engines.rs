//! The inference engines to read on the node (`--engine.*`): each
//! endpoint's URL and, where the operator names it, its engine, and the
//! SLO settings, from the flags and the `--engine.config` file.

use super::values::timeout;
use base::json::{self, Value};
use base::time::parse_duration;
use fill::engines::options::{
    MAX_ENDPOINTS, ModelSlo, Options, endpoint, engine_named, model_name_ok, name_rule,
};
use std::time::Duration;

/// The most models one `--engine.config` names.
pub const MAX_MODELS: usize = 64;

/// The least `--engine.interval`, and the file's `interval`.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// An interval between rounds of reads: a duration of at least
/// [`MIN_INTERVAL`].
pub fn interval(v: &str) -> Result<Duration, String> {
    match parse_duration(v)? {
        d if d < MIN_INTERVAL => Err(format!("{v:?} is below the 100ms minimum")),
        d => Ok(d),
    }
}

/// `flags` with the `--engine.config` file's `text` laid over: its
/// endpoints after the flags' (together at most [`MAX_ENDPOINTS`], none
/// twice), its `ttft_threshold`, `interval` and `timeout` for the flags',
/// its models' settings. The
/// error names the field, as the rules file's do. Read from the strict
/// pass's tree, every key known: a derived reader would cost the binary
/// about 12 KB.
pub fn with_file(flags: &Options, text: &str) -> Result<Options, String> {
    let doc =
        json::parse(text).map_err(|e| format!("{}: not valid JSON", json::position(text, e.at)))?;
    let mut e = flags.clone();
    let mut models = Vec::new();
    let known = [
        "endpoints",
        "ttft_threshold",
        "interval",
        "timeout",
        "models",
    ];
    for (key, v) in object(doc, "", &known)? {
        let duration = |v: Value, read: fn(&str) -> Result<Duration, String>| {
            read(&string(v, &key)?).map_err(|m| format!("{key}: {m}"))
        };
        match key.as_str() {
            "endpoints" => {
                for (i, v) in array(v, &key)?.into_iter().enumerate() {
                    add_endpoint(&mut e, v, &format!("endpoints[{i}]"))?;
                }
            }
            "ttft_threshold" => e.ttft_threshold = duration(v, timeout)?.as_secs_f64(),
            "interval" => e.interval = duration(v, interval)?,
            "timeout" => e.timeout = duration(v, timeout)?,
            _ => models = array(v, &key)?,
        }
    }
    if models.len() > MAX_MODELS {
        return Err(format!(
            "models: {} models; at most {MAX_MODELS}",
            models.len()
        ));
    }
    e.models = Vec::with_capacity(models.len());
    for (i, v) in models.into_iter().enumerate() {
        let slo = model(v, &format!("models[{i}]"), &e.models)?;
        e.models.push(slo);
    }
    Ok(e)
}

/// `at.key`, or `key` at the top.
fn field(at: &str, key: &str) -> String {
    match at {
        "" => key.to_string(),
        _ => format!("{at}.{key}"),
    }
}

/// The members of the object `v`, each key one of `known`, and once.
fn object<'a>(v: Value<'a>, at: &str, known: &[&str]) -> Result<Vec<(String, Value<'a>)>, String> {
    let Value::Object(members) = v else {
        let what = if at.is_empty() { "the file" } else { at };
        return Err(format!("{what}: expected an object"));
    };
    for (i, (k, _)) in members.iter().enumerate() {
        if !known.contains(&k.as_str()) {
            return Err(format!("{}: unknown field", field(at, &json::shown(k))));
        }
        if members[..i].iter().any(|(o, _)| o == k) {
            return Err(format!("{}: given twice", field(at, k)));
        }
    }
    Ok(members)
}

fn array<'a>(v: Value<'a>, at: &str) -> Result<Vec<Value<'a>>, String> {
    match v {
        Value::Array(items) => Ok(items),
        _ => Err(format!("{at}: expected an array")),
    }
}

fn string(v: Value, at: &str) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(format!("{at}: expected a string")),
    }
}

/// One endpoint of the file, added to `e`'s.
fn add_endpoint(e: &mut Options, v: Value, at: &str) -> Result<(), String> {
    let (mut url, mut engine) = (None, None);
    for (key, v) in object(v, at, &["url", "engine"])? {
        let at = field(at, &key);
        let s = string(v, &at)?;
        match key.as_str() {
            "url" => url = Some(s),
            _ => engine = Some(engine_named(&s).map_err(|m| format!("{at}: {m}"))?),
        }
    }
    let at = field(at, "url");
    let url = url.ok_or_else(|| format!("{at}: missing"))?;
    let ep = endpoint(engine, &url).map_err(|m| format!("{at}: {m}"))?;
    if e.endpoints.iter().any(|o| o.url == ep.url) {
        return Err(format!("{at}: {:?} is given twice", ep.url));
    }
    if e.endpoints.len() == MAX_ENDPOINTS {
        return Err(format!(
            "endpoints: more than {MAX_ENDPOINTS} with --engine.endpoint's"
        ));
    }
    e.endpoints.push(ep);
    Ok(())
}

/// A threshold: a duration above 0, in seconds.
fn seconds(v: &str) -> Result<f64, String> {
    Ok(timeout(v)?.as_secs_f64())
}

/// One model's settings, checked against those before it.
fn model(v: Value, at: &str, before: &[ModelSlo]) -> Result<ModelSlo, String> {
    let mut m = ModelSlo {
        name: String::new(),
        ttft_threshold: None,
        objective: None,
    };
    let mut named = false;
    for (key, v) in object(v, at, &["name", "ttft_threshold", "objective"])? {
        let at = field(at, &key);
        match (key.as_str(), v) {
            ("objective", Value::Number(n)) => {
                let o: f64 = n.parse().unwrap_or(f64::NAN);
                if !(o > 0.0 && o < 1.0) {
                    return Err(format!("{at}: {n} is not between 0 and 1 (0.999 is 99.9%)"));
                }
                m.objective = Some(o);
            }
            ("objective", _) => return Err(format!("{at}: expected a number")),
            ("name", v) => (m.name, named) = (string(v, &at)?, true),
            (_, v) => {
                let s = string(v, &at)?;
                m.ttft_threshold = Some(seconds(&s).map_err(|e| format!("{at}: {e}"))?);
            }
        }
    }
    let at = field(at, "name");
    let name = &m.name;
    if !named {
        return Err(format!("{at}: missing"));
    }
    if !model_name_ok(name) {
        return Err(format!("{at}: {} {}", json::shown(name), name_rule()));
    }
    if before.iter().any(|o| o.name == *name) {
        return Err(format!("{at}: {name:?} is given twice"));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fill::engines::options::parse_endpoint;
    use model::Engine;

    /// The file's line shows a long model name cut short.
    #[test]
    fn a_long_model_name_is_cut_short() {
        let file = format!(r#"{{"models": [{{"name": "{}"}}]}}"#, "x".repeat(10_000));
        let err = with_file(&Options::default(), &file).unwrap_err();
        assert!(err.starts_with("models[0].name: \"xxx"), "{err}");
        assert!(err.ends_with(&name_rule()) && err.len() < 200, "{err}");
    }

    #[test]
    fn the_file_adds_endpoints_and_sets_the_slo() {
        let flags = Options {
            endpoints: vec![parse_endpoint("http://h:1/metrics").unwrap()],
            ..Options::default()
        };
        let json = r#"{"endpoints": [{"url": "http://h:2/v1/metrics", "engine": "nim"},
            {"url": "http://h:3/metrics"}], "ttft_threshold": "250ms",
            "interval": "30s", "timeout": "100ms", "models": [{"name": "a/X", "ttft_threshold": "500ms", "objective": 0.99},
            {"name": "Y", "objective": 0.9}]}"#;
        let e = with_file(&flags, json).unwrap();
        let urls: Vec<_> = e
            .endpoints
            .iter()
            .map(|e| (e.url.as_str(), e.engine))
            .collect();
        assert_eq!(
            urls,
            [
                ("http://h:1/metrics", None),
                ("http://h:2/v1/metrics", Some(Engine::Nim)),
                ("http://h:3/metrics", None)
            ]
        );
        assert_eq!(e.ttft_threshold, 0.25);
        assert_eq!(
            (e.interval, e.timeout),
            (Duration::from_secs(30), Duration::from_millis(100))
        );
        // The least interval is taken, as the flag takes it.
        let least = with_file(&flags, r#"{"interval": "100ms"}"#).unwrap();
        assert_eq!(least.interval, MIN_INTERVAL);
        assert_eq!(
            (e.threshold("a/X"), e.threshold("Y"), e.threshold("Z")),
            (0.5, 0.25, 0.25)
        );
        assert_eq!(e.thresholds(), [("a/X".to_string(), 0.5)]);
        assert_eq!(
            e.objectives(),
            [("a/X".to_string(), 0.99), ("Y".to_string(), 0.9)]
        );
        // An empty file changes nothing.
        assert_eq!(with_file(&flags, "{}").unwrap(), flags);
    }

    #[allow(clippy::too_many_lines)] // a test, one scenario told whole
    #[test]
    fn a_bad_file_says_which_field_and_why() {
        let flags = Options {
            endpoints: vec![parse_endpoint("http://h:1/metrics").unwrap()],
            ..Options::default()
        };
        let many: Vec<String> = (2..=17)
            .map(|p| format!(r#"{{"url": "http://h:{p}/metrics"}}"#))
            .collect();
        let many = format!(r#"{{"endpoints": [{}]}}"#, many.join(","));
        let models: Vec<String> = (0..=MAX_MODELS)
            .map(|i| format!(r#"{{"name": "m{i}"}}"#))
            .collect();
        let models = format!(r#"{{"models": [{}]}}"#, models.join(","));
        for (json, says) in [
            (r#"{"endpoint": []}"#, "endpoint: unknown field"),
            (
                r#"{"models": [{"name": "X", "slo": 1}]}"#,
                "models[0].slo: unknown field",
            ),
            (
                r#"{"endpoints": [{"url": "https://h:2/m"}]}"#,
                "endpoints[0].url: \"https://h:2/m\": only http://",
            ),
            (
                r#"{"endpoints": [{"url": "http://h:2"}, {"url": "http://h:1/metrics"}]}"#,
                "endpoints[1].url: \"http://h:1/metrics\" is given twice",
            ),
            (
                r#"{"endpoints": [{"url": "http://h:2", "engine": "tgi"}]}"#,
                "endpoints[0].engine: \"tgi\" is no engine",
            ),
            (&many, "endpoints: more than 16"),
            (r#"{"ttft_threshold": "fast"}"#, "ttft_threshold: "),
            (
                r#"{"ttft_threshold": "0s"}"#,
                "ttft_threshold: must be above 0",
            ),
            (
                r#"{"models": [{"name": "X", "ttft_threshold": "1 s"}]}"#,
                "models[0].ttft_threshold: ",
            ),
            (
                r#"{"models": [{"name": "X", "objective": 1}]}"#,
                "models[0].objective: 1 is not between 0 and 1",
            ),
            (
                r#"{"models": [{"name": "X", "objective": 0}]}"#,
                "models[0].objective: 0 is not",
            ),
            (
                r#"{"models": [{"name": "X", "objective": -0.5}]}"#,
                "models[0].objective",
            ),
            (
                r#"{"models": [{"name": "X"}, {"name": "X"}]}"#,
                "models[1].name: \"X\" is given twice",
            ),
            (r#"{"models": [{"name": ""}]}"#, "models[0].name"),
            (r#"{"models": [{"name": "a\nb"}]}"#, "models[0].name"),
            (r#"{"models": [{"objective": 0.9}]}"#, "name: missing"),
            (&models, "models: 65 models; at most 64"),
            ("[", "not valid JSON"),
            (
                r#"{"ttft_threshold": 5}"#,
                "ttft_threshold: expected a string",
            ),
            (
                r#"{"models": [{"name": "X", "objective": "high"}]}"#,
                "models[0].objective: expected a number",
            ),
            (r#"{"models": {}}"#, "models: expected an array"),
            (
                r#"{"endpoints": [{"engine": "vllm"}]}"#,
                "endpoints[0].url: missing",
            ),
            (r#"{"models": [], "models": []}"#, "models: given twice"),
            ("[]", "the file: expected an object"),
            (r#"{"endpoints": [1]}"#, "endpoints[0]: expected an object"),
            (
                r#"{"interval": "99ms"}"#,
                "interval: \"99ms\" is below the 100ms minimum",
            ),
            (r#"{"interval": "0s"}"#, "interval: \"0s\" is below"),
            (
                r#"{"interval": "soon"}"#,
                "interval: \"soon\" is not a duration",
            ),
            (r#"{"interval": "5"}"#, "interval: \"5\" has no unit"),
            (
                r#"{"interval": "400d"}"#,
                "interval: \"400d\" is longer than a year",
            ),
            (r#"{"interval": 5}"#, "interval: expected a string"),
            (r#"{"timeout": "0ms"}"#, "timeout: must be above 0"),
            (r#"{"timeout": "2 s"}"#, "timeout: \"2 s\" has no unit"),
            (r#"{"timeout": null}"#, "timeout: expected a string"),
            (
                r#"{"timeout": "1s", "timeout": "2s"}"#,
                "timeout: given twice",
            ),
        ] {
            let e = with_file(&flags, json).unwrap_err();
            assert!(e.contains(says), "{json}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
