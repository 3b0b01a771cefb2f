//! What each engine calls its TTFT histogram, in which unit and under
//! which model label, and which request counters decide availability
//! (facts from `ENGINES.md`): the names the engine reader reads and the
//! printed rules query.

use crate::Engine;

/// One engine's TTFT facts.
pub struct Profile {
    pub engine: Engine,
    /// The TTFT histogram's names, the first one present read.
    pub ttft: &'static [&'static str],
    /// Its units in a second (Triton counts milliseconds): divided, not
    /// multiplied, so that 300 ms is the same f64 as 0.3 s.
    pub per_second: f64,
    /// The label that names the model.
    pub model_label: &'static str,
    /// How an operator adds a bucket bound at the threshold.
    pub add_bound: &'static str,
    /// The TTFT histogram's default bounds, in its unit (ENGINES.md), of
    /// each release whose defaults are known: the printed rules judge a
    /// model no exporter reads at the nearest of them below the threshold.
    pub defaults: &'static [&'static [f64]],
    /// The request counters that decide availability; none where the
    /// engine counts no failure.
    pub outcomes: &'static [Outcome],
    /// Why a model has no availability verdict when no failure counter
    /// of it is read.
    pub no_failures: &'static str,
}

/// What a request counter's series count toward availability.
///
/// The rule: a request the engine failed (an engine error, a 5xx, a
/// rejection) counts against availability; one the client gave up on (an
/// abort, a cancel) counts neither way and leaves the total; the rest
/// were served. Per engine (ENGINES.md):
/// - vLLM: `request_success_total` by `finished_reason`: `error` failed,
///   `abort` left out, the rest served. `error` exists from 0.14 (all
///   reasons pre-created): an older vLLM gets no verdict.
/// - SGLang: `num_aborted_requests_total` of `num_requests_total` failed.
///   No label parts a client's abort from the engine's own (its errors,
///   validation and out-of-memory included, are aborts), so every abort
///   counts against availability: the strict reading.
/// - trtllm-serve: `request_error_total` with a 5xx `http_code` failed
///   (a 4xx is the client's), `request_success_total` but `abort` served.
///   The unprefixed early releases have no error counter: no verdict.
/// - NIM: `request_failure_total` failed, `request_success_total` served
///   (closed source: its failures are not parted by cause).
/// - Triton: `nv_inference_request_failure` but `reason="CANCELED"` (the
///   client's) failed, REJECTED, BACKEND and OTHER (and a failure of a
///   build before `reason`) included; `nv_inference_request_success` served.
pub struct Outcome {
    pub counter: &'static str,
    pub role: Role,
    pub keep: Keep,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Requests served.
    Served,
    /// Requests failed.
    Failed,
    /// Requests served and failed together (SGLang's total).
    Answered,
}

/// Which series of a counter count.
#[derive(Clone, Copy, Debug)]
pub enum Keep {
    All,
    /// Those with the label at this value.
    Is(&'static str, &'static str),
    /// Those without the label at any of these values.
    Not(&'static str, &'static [&'static str]),
    /// Those with the label at a 5xx status code.
    ServerError(&'static str),
}

impl Keep {
    pub fn keeps(self, labels: &[(String, String)]) -> bool {
        let get = |l: &str| labels.iter().find(|(k, _)| k == l).map(|(_, v)| v.as_str());
        match self {
            Keep::All => true,
            Keep::Is(l, v) => get(l) == Some(v),
            Keep::Not(l, vs) => get(l).is_none_or(|v| !vs.contains(&v)),
            Keep::ServerError(l) => get(l).is_some_and(|v| v.len() == 3 && v.starts_with('5')),
        }
    }

    /// As a PromQL label matcher, without braces; empty for all.
    pub fn matcher(self) -> String {
        match self {
            Keep::All => String::new(),
            Keep::Is(l, v) => format!("{l}=\"{v}\""),
            Keep::Not(l, vs) => format!("{l}!~\"{}\"", vs.join("|")),
            Keep::ServerError(l) => format!("{l}=~\"5..\""),
        }
    }
}

const VLLM_TTFT: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const SGLANG_TTFT: [f64; 18] = [
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0,
];
/// SGLang 0.3.6 and 0.4.0.
const SGLANG_036_TTFT: [f64; 20] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    15.0, 20.0, 25.0, 30.0,
];
/// SGLang 0.4.3.
const SGLANG_043_TTFT: [f64; 14] = [
    0.1, 0.25, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 120.0, 160.0,
];

/// Every engine's profile.
pub fn all() -> &'static [Profile] {
    &PROFILES
}

pub fn profile(engine: Engine) -> &'static Profile {
    PROFILES
        .iter()
        .find(|p| p.engine == engine)
        .expect("every engine has a profile")
}

static PROFILES: [Profile; 5] = [
    Profile {
        engine: Engine::Vllm,
        ttft: &["vllm:time_to_first_token_seconds"],
        per_second: 1.0,
        model_label: "model_name",
        add_bound: "vLLM >= 0.32: --custom-histogram-buckets '{\"time_to_first_token\":[...]}'",
        defaults: &[&VLLM_TTFT],
        outcomes: &[
            Outcome {
                counter: "vllm:request_success_total",
                role: Role::Failed,
                keep: Keep::Is("finished_reason", "error"),
            },
            Outcome {
                counter: "vllm:request_success_total",
                role: Role::Served,
                keep: Keep::Not("finished_reason", &["abort", "error"]),
            },
        ],
        no_failures: "no finished_reason=\"error\" series (vLLM before 0.14 counts no engine error), so no availability verdict",
    },
    Profile {
        engine: Engine::Sglang,
        ttft: &["sglang:time_to_first_token_seconds"],
        per_second: 1.0,
        model_label: "model_name",
        add_bound: "SGLang >= 0.4.9: --bucket-time-to-first-token",
        defaults: &[&SGLANG_TTFT, &SGLANG_043_TTFT, &SGLANG_036_TTFT],
        outcomes: &[
            Outcome {
                counter: "sglang:num_aborted_requests_total",
                role: Role::Failed,
                keep: Keep::All,
            },
            Outcome {
                counter: "sglang:num_requests_total",
                role: Role::Answered,
                keep: Keep::All,
            },
        ],
        no_failures: "no sglang:num_aborted_requests_total, so no availability verdict",
    },
    Profile {
        engine: Engine::Trtllm,
        ttft: &[
            "trtllm_time_to_first_token_seconds",
            "time_to_first_token_seconds",
        ],
        per_second: 1.0,
        model_label: "model_name",
        add_bound: "trtllm-serve: the LLM-API option prometheus_metrics_config.time_to_first_token_buckets",
        defaults: &[&VLLM_TTFT],
        outcomes: &[
            Outcome {
                counter: "trtllm_request_error_total",
                role: Role::Failed,
                keep: Keep::ServerError("http_code"),
            },
            Outcome {
                counter: "trtllm_request_success_total",
                role: Role::Served,
                keep: Keep::Not("finished_reason", &["abort"]),
            },
        ],
        no_failures: "no 5xx in trtllm_request_error_total yet (early unprefixed releases count no error), so no availability verdict",
    },
    Profile {
        engine: Engine::Nim,
        ttft: &["time_to_first_token_seconds"],
        per_second: 1.0,
        model_label: "model_name",
        add_bound: "NIM documents no way to change its buckets",
        // Its capture shows the first 16; the bounds around 0.3 s agree.
        defaults: &[&VLLM_TTFT],
        outcomes: &[
            Outcome {
                counter: "request_failure_total",
                role: Role::Failed,
                keep: Keep::All,
            },
            Outcome {
                counter: "request_success_total",
                role: Role::Served,
                keep: Keep::All,
            },
        ],
        no_failures: "no request_failure_total, so no availability verdict",
    },
    Profile {
        engine: Engine::Triton,
        ttft: &["nv_inference_first_response_histogram_ms"],
        per_second: 1000.0,
        model_label: "model",
        add_bound: "Triton: model_metrics.metric_control[].histogram_options.buckets in the model's config.pbtxt",
        defaults: &[&[100.0, 500.0, 2000.0, 5000.0]],
        outcomes: &[
            Outcome {
                counter: "nv_inference_request_failure",
                role: Role::Failed,
                keep: Keep::Not("reason", &["CANCELED"]),
            },
            Outcome {
                counter: "nv_inference_request_success",
                role: Role::Served,
                keep: Keep::All,
            },
        ],
        no_failures: "no nv_inference_request_failure, so no availability verdict",
    },
];
