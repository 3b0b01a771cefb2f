//! The inference engines to read on the node (`--engine.*`): each
//! endpoint's URL and, where the operator names it, its engine, and the
//! SLO settings, from the flags and the `--engine.config` file.

use super::MAX_NAME;
use super::values::timeout;
use base::json::{self, Value};
use base::time::parse_duration;
use model::Engine;
use std::path::PathBuf;
use std::time::Duration;

/// One `--engine.endpoint`: `[ENGINE=]http://HOST:PORT/PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The URL as given, the `endpoint` label.
    pub url: String,
    /// `HOST:PORT`, to connect to and for the `Host` header.
    pub authority: String,
    /// The path with its query, from `/`.
    pub path: String,
    /// The engine named; `None`: told from the metric names.
    pub engine: Option<Engine>,
}

/// The most endpoints one exporter reads.
pub const MAX_ENDPOINTS: usize = 16;

/// `--engine.*`.
#[derive(Clone, Debug, PartialEq)]
pub struct Engines {
    /// `--engine.endpoint`, in the order given.
    pub endpoints: Vec<Endpoint>,
    /// `--engine.interval`, or the file's `interval`: time between the
    /// starts of two rounds of reads.
    pub interval: Duration,
    /// `--engine.timeout`, or the file's `timeout`: one read, connecting
    /// included.
    pub timeout: Duration,
    /// `--engine.ttft-threshold`, or the file's `ttft_threshold`: a
    /// request is good when its first token came within this many seconds.
    pub ttft_threshold: f64,
    /// `--engine.config`: more endpoints and the SLO settings, read at
    /// start and again on SIGHUP.
    pub file: Option<PathBuf>,
    /// The file's per-model settings, each model once.
    pub models: Vec<ModelSlo>,
}

/// One model's SLO settings from `--engine.config`; each replaces the
/// default for that model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSlo {
    /// The model, as its engine labels it (`model_name`, Triton's `model`).
    pub name: String,
    /// Its TTFT threshold in seconds; `None`: [`Engines::ttft_threshold`].
    pub ttft_threshold: Option<f64>,
    /// Its objective (0.99: 99% good); `None`: the burn rules' own.
    pub objective: Option<f64>,
}

impl Engines {
    /// The TTFT threshold `model` is judged at, in seconds.
    pub fn threshold(&self, model: &str) -> f64 {
        let own = self.models.iter().find(|m| m.name == model);
        own.and_then(|m| m.ttft_threshold)
            .unwrap_or(self.ttft_threshold)
    }

    /// The models with a threshold of their own, with it.
    pub fn thresholds(&self) -> Vec<(String, f64)> {
        let own = self.models.iter();
        own.filter_map(|m| Some((m.name.clone(), m.ttft_threshold?)))
            .collect()
    }

    /// The models with an objective of their own, with it.
    pub fn objectives(&self) -> Vec<(String, f64)> {
        let own = self.models.iter();
        own.filter_map(|m| Some((m.name.clone(), m.objective?)))
            .collect()
    }
}

impl Default for Engines {
    fn default() -> Engines {
        Engines {
            endpoints: Vec::new(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            ttft_threshold: 0.3,
            file: None,
            models: Vec::new(),
        }
    }
}

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
pub fn with_file(flags: &Engines, text: &str) -> Result<Engines, String> {
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
fn add_endpoint(e: &mut Engines, v: Value, at: &str) -> Result<(), String> {
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

/// What [`model_name_ok`] holds a name to, as lines say it.
pub fn name_rule() -> String {
    format!("must be 1 to {MAX_NAME} bytes without control characters")
}

/// Whether `name` may name a model ([`name_rule`]). One rule for the
/// names of `--engine.config` and those an engine's `/metrics` gives (a
/// tenant chooses its `--served-model-name`): a name is served on
/// `/metrics`, the status page and `/alerts`, so it stays short and
/// printable.
pub fn model_name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME && !name.chars().any(char::is_control)
}

/// The engine a flag or file names.
fn engine_named(name: &str) -> Result<Engine, String> {
    // `vLLM=URL` as the engines spell themselves.
    let e = (Engine::ALL.into_iter()).find(|e| e.name().eq_ignore_ascii_case(name));
    e.ok_or_else(|| {
        let names: Vec<_> = Engine::ALL.iter().map(|e| e.name()).collect();
        format!(
            "{name:?} is no engine we read (one of {})",
            names.join(", ")
        )
    })
}

/// Parses one `--engine.endpoint` value.
pub fn parse_endpoint(v: &str) -> Result<Endpoint, String> {
    match v.split_once('=') {
        Some((name, url)) if !name.contains('/') => endpoint(Some(engine_named(name)?), url),
        _ => endpoint(None, v),
    }
}

/// An endpoint's URL, checked, with the engine named, if one is.
pub(crate) fn endpoint(engine: Option<Engine>, url: &str) -> Result<Endpoint, String> {
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(format!(
            "{url:?}: only http:// URLs (an engine on the node, read over loopback or the pod network)"
        ));
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    if authority.contains('@') {
        return Err(format!("{url:?}: credentials in the URL are not taken"));
    }
    if path.contains('#') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "{url:?}: the path may hold no fragment, space or control byte"
        ));
    }
    let port_ok = authority.rsplit_once(':').is_some_and(|(host, port)| {
        let bracketed = host.starts_with('[') && host.ends_with(']');
        !host.is_empty()
            && (bracketed || !host.contains(':'))
            && port.parse::<u16>().is_ok_and(|p| p > 0)
    });
    if !port_ok {
        return Err(format!("{url:?}: give the host and a port, HOST:PORT"));
    }
    Ok(Endpoint {
        url: url.to_string(),
        authority: authority.to_string(),
        path: path.to_string(),
        engine,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One rule for a configured name and an engine's: 1 to 128 bytes,
    /// no control character; the file's line shows a long name cut short.
    #[test]
    fn a_model_name_is_1_to_128_bytes_without_control_characters() {
        let long = "é".repeat(64);
        assert!(model_name_ok(&long) && model_name_ok("a") && model_name_ok("org/m:8b"));
        for bad in [
            "",
            &format!("{long}x"),
            "a\0b",
            "a\u{1b}[m",
            "a\u{7f}",
            "a\rb",
        ] {
            assert!(!model_name_ok(bad), "{bad:?}");
        }
        let file = format!(r#"{{"models": [{{"name": "{}"}}]}}"#, "x".repeat(10_000));
        let err = with_file(&Engines::default(), &file).unwrap_err();
        assert!(err.starts_with("models[0].name: \"xxx"), "{err}");
        assert!(err.ends_with(&name_rule()) && err.len() < 200, "{err}");
    }

    #[test]
    fn endpoints_parse_with_and_without_their_engine() {
        let e = parse_endpoint("http://127.0.0.1:8000/metrics").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.path.as_str()),
            ("127.0.0.1:8000", "/metrics")
        );
        assert_eq!(e.engine, None);
        let e = parse_endpoint("trtllm=http://[::1]:8000/prometheus/metrics").unwrap();
        assert_eq!(e.engine, Some(Engine::Trtllm));
        assert_eq!(e.authority, "[::1]:8000");
        assert_eq!(e.url, "http://[::1]:8000/prometheus/metrics");
        assert_eq!(parse_endpoint("http://h:9").unwrap().path, "/metrics");
        let e = parse_endpoint("http://h:1/m?a=b=c").unwrap();
        assert_eq!((e.engine, e.path.as_str()), (None, "/m?a=b=c"));
        // Named as the engines spell themselves: any case.
        for (named, engine) in [
            ("vLLM", Engine::Vllm),
            ("SGLang", Engine::Sglang),
            ("NIM", Engine::Nim),
            ("TRTLLM", Engine::Trtllm),
        ] {
            let e = parse_endpoint(&format!("{named}=http://h:1/metrics")).unwrap();
            assert_eq!(e.engine, Some(engine), "{named}");
        }
        let err = parse_endpoint("vllmx=http://h:1/metrics").unwrap_err();
        assert!(err.contains("no engine we read"), "{err}");
    }

    #[test]
    fn the_file_adds_endpoints_and_sets_the_slo() {
        let flags = Engines {
            endpoints: vec![parse_endpoint("http://h:1/metrics").unwrap()],
            ..Engines::default()
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
        let flags = Engines {
            endpoints: vec![parse_endpoint("http://h:1/metrics").unwrap()],
            ..Engines::default()
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

    #[test]
    fn bad_endpoints_say_what_is_wrong() {
        for (v, says) in [
            ("tgi=http://h:1/metrics", "no engine we read"),
            ("https://h:1/metrics", "only http://"),
            ("h:1/metrics", "only http://"),
            ("http://h/metrics", "HOST:PORT"),
            ("http://h:0/metrics", "HOST:PORT"),
            ("http://:80/metrics", "HOST:PORT"),
            ("http://h:99999/metrics", "HOST:PORT"),
            ("http://u:p@h:1/metrics", "credentials"),
            ("http://h:1/a b", "no fragment"),
            ("http://h:1/a#b", "no fragment"),
        ] {
            let e = parse_endpoint(v).unwrap_err();
            assert!(e.contains(says), "{v}: {e}");
        }
    }
}
