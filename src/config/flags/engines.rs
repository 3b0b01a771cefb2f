//! The `--engine.*` flags: the inference engines read for the TTFT SLO.

use super::flag::{Flag, set};
use crate::config::engines;
use crate::config::values::timeout;
use fill::engines::options;

/// The engine flags, in `--help` order.
pub(super) const FLAGS: &[Flag] = &[
    set(
        "--engine.endpoint",
        "[ENGINE=]URL",
        "",
        "an inference engine's metrics to judge the TTFT SLO by, e.g. http://127.0.0.1:8000/metrics; repeat for more (at most 16). The engine (vllm, sglang, trtllm, nim, triton) is told from its metric names unless named",
        |c, v| {
            let e = options::parse_endpoint(v)?;
            let all = &mut c.engines.endpoints;
            if all.iter().any(|o| o.url == e.url) {
                return Err(format!("{:?} is given twice", e.url));
            }
            if all.len() == options::MAX_ENDPOINTS {
                return Err(format!("more than {} endpoints", options::MAX_ENDPOINTS));
            }
            all.push(e);
            Ok(())
        },
    ),
    set(
        "--engine.config",
        "FILE",
        "",
        "more endpoints, the read interval and timeout and the TTFT SLO's settings, per model too, JSON: a regular file of at most 1 MiB, its endpoints read beside the flags' and its threshold, interval and timeout over the flags'; re-read on SIGHUP, a bad file keeping the old (see Serving SLOs from your engines)",
        |c, v| {
            c.engine_file = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--engine.interval",
        "DUR",
        "5s",
        "time between the starts of two reads of the engine endpoints, at least 100ms; --engine.config's interval replaces it, on SIGHUP too",
        |c, v| {
            c.engines.interval = engines::interval(v)?;
            Ok(())
        },
    ),
    set(
        "--engine.timeout",
        "DUR",
        "2s",
        "time one read of an engine may take, connecting included; --engine.config's timeout replaces it, on SIGHUP too",
        |c, v| {
            c.engines.timeout = timeout(v)?;
            Ok(())
        },
    ),
    set(
        "--engine.ttft-threshold",
        "DUR",
        "300ms",
        "the TTFT SLO's threshold: a request is good when its first token came within it. Judged at the engine's bucket bound at or below it, said at start when they differ",
        |c, v| {
            let d = timeout(v)?;
            c.engines.ttft_threshold = d.as_secs_f64();
            Ok(())
        },
    ),
];
