//! The inference engines read on the node, as their reader last saw them.

use std::fmt;

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

/// Why a read of an engine endpoint failed
/// (`gpu_exporter_engine_errors_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// No connection: refused, unreachable, the name unresolved.
    Connect,
    /// Connecting, the head or the body took longer than `--engine.timeout`.
    Timeout,
    /// An answer other than 200, a redirect included (none is followed).
    Status,
    /// A body over the cap: refused by its length, or cut off while read.
    TooLarge,
    /// Not an HTTP/1.x answer, or a body that is no Prometheus text.
    Parse,
    /// Metric names of no engine we read, or of two we cannot tell apart.
    UnknownEngine,
}

impl EngineError {
    pub const ALL: [EngineError; 6] = [
        EngineError::Connect,
        EngineError::Timeout,
        EngineError::Status,
        EngineError::TooLarge,
        EngineError::Parse,
        EngineError::UnknownEngine,
    ];

    /// Its `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            EngineError::Connect => "connect",
            EngineError::Timeout => "timeout",
            EngineError::Status => "status",
            EngineError::TooLarge => "too_large",
            EngineError::Parse => "parse",
            EngineError::UnknownEngine => "unknown_engine",
        }
    }
}

/// Why a model an engine gave is not served
/// (`gpu_exporter_engine_models_rejected_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Its name breaks `config::engines::model_name_ok` (over 128 bytes,
    /// a control character): a tenant's, served nowhere.
    Name,
    /// A count or sum no engine can have (negative, NaN, infinite).
    Counts,
}

impl Rejection {
    pub const ALL: [Rejection; 2] = [Rejection::Name, Rejection::Counts];

    /// Its `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Rejection::Name => "name",
            Rejection::Counts => "counts",
        }
    }
}

/// One engine endpoint, as its last read left it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineEndpoint {
    /// The URL, its `endpoint` label.
    pub url: String,
    /// The engine named or told from its names; `None` until known.
    pub engine: Option<Engine>,
    /// Whether the last read gave the engine's models.
    pub up: bool,
    /// Unix time of the last good read.
    pub last_success: Option<f64>,
    /// Seconds the last read took, failed or not.
    pub duration: Option<f64>,
    /// Why its last read failed, and the line that said so; `None` while
    /// up or before its first read.
    pub reason: Option<EngineError>,
    pub why: Option<String>,
    /// Failed reads since start, by [`EngineError`] (its discriminant).
    pub errors: [u64; EngineError::ALL.len()],
    /// Models left out of its reads since start, a model each read, by
    /// [`Rejection`] (its discriminant).
    pub rejected: [u64; Rejection::ALL.len()],
    /// The bound each model of its last good read is judged at
    /// (`gpu_exporter_engine_model_slo_info`), its own replica's where
    /// another endpoint serves the model too.
    pub bounds: Vec<Bound>,
}

/// The TTFT bound a model is judged at, as its engine spells the bucket.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bound {
    pub model: String,
    /// The `le` of the bucket judged, exactly as the engine wrote it
    /// (Triton's `100`, prometheus_client's `100.0`, in the engine's
    /// unit); `None`: no bound at or below the threshold, no verdict.
    pub le: Option<String>,
}

/// The objectives the burn rules judge the models at, as loaded (the rules
/// file, `--engine.config`), for dashboards to divide by each model's own
/// (`gpu_exporter_engine_model_objective_ratio`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Objectives {
    /// The first TTFT burn-rate rule's; `None` without one.
    pub ttft: Option<f64>,
    /// The models with a TTFT objective of their own, with it.
    pub own: Vec<(String, f64)>,
    /// The first availability burn rule's; `None` without one.
    pub availability: Option<f64>,
}

impl Objectives {
    /// The TTFT objective `model` is judged at: its own, else the rule's.
    pub fn ttft_of(&self, model: &str) -> Option<f64> {
        let own = self.own.iter().find(|o| o.0 == model);
        own.map(|o| o.1).or(self.ttft)
    }
}

/// One model's requests by outcome, as its engine counts them (counters):
/// those that count toward availability and, of them, those that failed
/// it. A client's abort is in neither (see `fill::engines::profile`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Outcomes {
    /// Requests judged: served and failed.
    pub answered: f64,
    /// Requests the engine failed.
    pub failed: f64,
}
