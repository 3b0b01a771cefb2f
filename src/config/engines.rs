//! The inference engines to read on the node (`--engine.*`): each
//! endpoint's URL and, where the operator names it, its engine.

use std::fmt;
use std::time::Duration;

/// An engine whose `/metrics` we can read for the TTFT SLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// vLLM (`vllm:` names).
    Vllm,
    /// SGLang (`sglang:` names).
    Sglang,
    /// TensorRT-LLM's `trtllm-serve` (`trtllm_` names, or unprefixed ones
    /// in its first releases).
    Trtllm,
    /// NVIDIA NIM for LLMs (unprefixed names).
    Nim,
    /// Triton Inference Server (`nv_inference_`, milliseconds).
    Triton,
}

impl Engine {
    /// Every engine, in `--help` order.
    pub const ALL: [Engine; 5] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Trtllm,
        Engine::Nim,
        Engine::Triton,
    ];

    /// The name flags and the `engine` label use.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Trtllm => "trtllm",
            Engine::Nim => "nim",
            Engine::Triton => "triton",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// `--engine.interval`: time between reads of every endpoint.
    pub interval: Duration,
    /// `--engine.timeout`: one read, connecting included.
    pub timeout: Duration,
    /// `--engine.ttft-threshold`: a request is good when its first token
    /// came within this many seconds.
    pub ttft_threshold: f64,
}

impl Default for Engines {
    fn default() -> Engines {
        Engines {
            endpoints: Vec::new(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            ttft_threshold: 0.3,
        }
    }
}

/// Parses one `--engine.endpoint` value.
pub fn parse_endpoint(v: &str) -> Result<Endpoint, String> {
    let (engine, url) = match v.split_once('=') {
        Some((name, url)) if !name.contains('/') => {
            let e = Engine::ALL.into_iter().find(|e| e.name() == name);
            let names: Vec<_> = Engine::ALL.iter().map(|e| e.name()).collect();
            let e = e.ok_or_else(|| {
                format!(
                    "{name:?} is no engine we read (one of {})",
                    names.join(", ")
                )
            })?;
            (Some(e), url)
        }
        _ => (None, v),
    };
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
