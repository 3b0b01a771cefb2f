//! The engine reader's options: the endpoints, each with its URL and,
//! where the operator names it, its engine, and the SLO settings. The
//! binary's configuration fills them from `--engine.*` and the
//! `--engine.config` file; the name rule is shared with what an engine's
//! own `/metrics` may name.

use model::{Engine, MAX_NAME};
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

/// What the engine reader reads and how: the `--engine.*` flags with
/// `--engine.config`'s settings laid over.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
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
    /// The file's per-model settings, each model once.
    pub models: Vec<ModelSlo>,
}

/// One model's SLO settings from `--engine.config`; each replaces the
/// default for that model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSlo {
    /// The model, as its engine labels it (`model_name`, Triton's `model`).
    pub name: String,
    /// Its TTFT threshold in seconds; `None`: [`Options::ttft_threshold`].
    pub ttft_threshold: Option<f64>,
    /// Its objective (0.99: 99% good); `None`: the burn rules' own.
    pub objective: Option<f64>,
}

impl Options {
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

impl Default for Options {
    fn default() -> Options {
        Options {
            endpoints: Vec::new(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            ttft_threshold: 0.3,
            models: Vec::new(),
        }
    }
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
pub fn engine_named(name: &str) -> Result<Engine, String> {
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
pub fn endpoint(engine: Option<Engine>, url: &str) -> Result<Endpoint, String> {
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
    /// no control character.
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
