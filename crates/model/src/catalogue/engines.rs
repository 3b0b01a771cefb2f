//! The engine reader's own families: one series set per
//! `--engine.endpoint`. The engines' own series are not served again:
//! Prometheus scrapes the engines itself.

use super::{Family, Kind, family};
use Kind::{Counter, Gauge, Info};

pub static ENGINE_UP: Family = family(
    "gpu_exporter_engine_up",
    Gauge,
    "1 if the last read of the engine endpoint gave its models; engine names the engine once known.",
);
pub static ENGINE_DOWN: Family = family(
    "gpu_exporter_engine_down",
    Gauge,
    "1 while the engine endpoint's last read failed, reason why (as gpu_exporter_engine_errors_total's). Absent while it is up and before its first read.",
);
pub static ENGINE_LAST_SUCCESS: Family = family(
    "gpu_exporter_engine_last_success_timestamp_seconds",
    Gauge,
    "When the engine endpoint was last read whole; its models are from then.",
);
pub static ENGINE_READ_DURATION: Family = family(
    "gpu_exporter_engine_read_duration_seconds",
    Gauge,
    "How long the last read of the engine endpoint took, failed or not, at most --engine.timeout.",
);
pub static ENGINE_ERRORS: Family = family(
    "gpu_exporter_engine_errors",
    Counter,
    "Failed reads of the engine endpoint, by reason: connect, timeout, status (redirects are not followed), too_large (over its share of the round's 32 MiB: 8 MiB up to 4 endpoints, 2 MiB at 16), parse, unknown_engine.",
);
pub static ENGINE_MODELS_REJECTED: Family = family(
    "gpu_exporter_engine_models_rejected",
    Counter,
    "Models the engine endpoint gave that are not served, one a read, by reason: name (over 128 bytes or a control character), counts (negative, NaN or infinite).",
);
pub static ENGINE_MODEL_UP: Family = family(
    "gpu_exporter_engine_model_up",
    Gauge,
    "1 while the engine serving the model answers; 0 while its counts are held from the last good read, its TTFT verdicts neither resolved nor new (EngineDown).",
);
pub static ENGINE_GOOD_WITHIN: Family = family(
    "gpu_exporter_engine_ttft_good_within_seconds",
    Gauge,
    "The engine's TTFT bucket bound the SLO judges a request good at: --engine.ttft-threshold, or the nearest bound below it. Absent where the engine has no bound at or below it.",
);
/// The bound Prometheus' printed rules judge a model's TTFT at: joined on
/// `model_name` and `bucket` (as `le`) with the engine's own buckets, so both judge the
/// same bucket, or neither the model.
pub static ENGINE_MODEL_SLO: Family = family(
    "gpu_exporter_engine_model_slo",
    Info,
    "The TTFT bucket a model of the engine endpoint is judged at: bucket its le as the engine spells it, in its unit (Triton ms), model_name its model (Triton's model label); no bucket where the engine has no bound at or below the threshold. Always 1.",
);
/// Each served model's objectives, for dashboards to divide its burn by
/// its own budget rather than a hard-coded 0.001.
pub static ENGINE_MODEL_OBJECTIVE: Family = family(
    "gpu_exporter_engine_model_objective_ratio",
    Gauge,
    "The objective the burn rules judge the model at, by slo: ttft (first token within its judged bound; --engine.config's own, else TTFTBudgetBurn's) and availability (not failed by its engine; EngineAvailabilityBurn's). 0.999 is 99.9%.",
);
