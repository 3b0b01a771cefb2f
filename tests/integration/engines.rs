//! The engine reader against doubles of the engines built with PyPI
//! prometheus_client (`tests/engines/double.py`, from ENGINES.md's facts):
//! each engine told by its names and judged at its own bucket bound, and
//! engines that hang, answer garbage or 50 MB never delaying a scrape.

use crate::common::{Exporter, check_metrics, have, value};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One double; killed on drop.
pub struct Double {
    pub child: Child,
    pub url: String,
}

impl Drop for Double {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn python_ready() -> bool {
    have("python3", &["-c", "import prometheus_client"])
}

/// 97 requests at 100 ms, 2 at 270 ms, 1 at 600 ms: exact counts.
const TRAFFIC: [&str; 3] = ["100:97", "270:2", "600:1"];

/// A double started with `args` (`--lifetime 120` first), once it listens.
pub fn started(args: &[&str]) -> Double {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engines/double.py");
    let child = Command::new("python3")
        .arg(script)
        .args(["--lifetime", "120"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the engine double");
    ported(child)
}

/// A double of `engine` serving one model, named after the engine.
fn double(engine: &str, mode: &str) -> Double {
    let mut args = vec!["--engine", engine, "--mode", mode, "--model", engine];
    args.push("--observe");
    args.extend(TRAFFIC);
    started(&args)
}

fn endpoint_value(body: &str, family: &str, url: &str, more: &str) -> Option<f64> {
    value(body, &format!("{family}{{endpoint=\"{url}\"{more}"))
}

#[test]
fn each_engine_is_told_by_its_names_and_judged_at_its_own_bound() {
    if !python_ready() {
        return;
    }
    // (double, named, engine label, bound judged at, share good)
    let cases = [
        ("vllm", false, "vllm", 0.25, "97%"),
        ("vllm-v0", false, "vllm", 0.25, "97%"),
        ("vllm-custom", false, "vllm", 0.3, "99%"),
        ("sglang", false, "sglang", 0.2, "97%"),
        ("trtllm", false, "trtllm", 0.25, "97%"),
        ("nim", true, "nim", 0.25, "97%"),
        ("triton", false, "triton", 0.1, "97%"),
    ];
    let doubles: Vec<Double> = cases.iter().map(|c| double(c.0, "steady")).collect();
    let unnamed_nim = double("nim", "steady");
    // A second replica of the first model on the node: one model, summed.
    let replica = double("vllm", "steady");
    let mut args = vec!["--engine.interval".to_string(), "200ms".into()];
    for (d, c) in doubles.iter().zip(&cases) {
        args.push("--engine.endpoint".into());
        args.push(match c.1 {
            true => format!("{}={}", c.2, d.url),
            false => d.url.clone(),
        });
    }
    for d in [&unnamed_nim, &replica] {
        args.extend(["--engine.endpoint".into(), d.url.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = Exporter::start(&args);
    let body = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        b.matches("gpu_exporter_engine_up{").count() == cases.len() + 2
            && doubles.iter().zip(&cases).all(|(d, c)| {
                endpoint_value(
                    b,
                    "gpu_exporter_engine_up",
                    &d.url,
                    &format!(",engine=\"{}\"", c.2),
                ) == Some(1.0)
            })
    });
    check_metrics(&body);
    for (d, c) in doubles.iter().zip(&cases) {
        let at = endpoint_value(
            &body,
            "gpu_exporter_engine_ttft_good_within_seconds",
            &d.url,
            &format!(",model_name=\"{}\"", c.0),
        );
        assert_eq!(at, Some(c.3), "{}: {body}", c.0);
    }
    let nim = &unnamed_nim.url;
    assert_eq!(
        endpoint_value(&body, "gpu_exporter_engine_up", nim, "}"),
        Some(0.0)
    );
    let unknown = endpoint_value(
        &body,
        "gpu_exporter_engine_errors_total",
        nim,
        ",reason=\"unknown_engine\"",
    );
    assert!(unknown.is_some_and(|n| n >= 1.0), "{body}");
    // The engines' own series are not served again.
    assert!(!body.contains("llm_ttft_seconds_bucket{model_name=\"vllm"));

    let log = e.log();
    assert!(log.contains(&format!(
        "vllm at {}: model \"vllm\": no bucket bound at the 0.3s TTFT threshold (nearest: 0.25s and 0.5s); judged at 0.25s instead, stricter; to add one: vLLM >= 0.32: --custom-histogram-buckets",
        doubles[0].url
    )), "{log}");
    assert!(log.contains("--bucket-time-to-first-token"), "{log}");
    assert!(
        log.contains(&format!(
            "engine at {nim}: down (unknown_engine: its names are unprefixed"
        )),
        "{log}"
    );
    assert_eq!(
        log.matches(&format!("vllm at {}: up", doubles[0].url))
            .count(),
        1,
        "{log}"
    );

    // The status page judges each model from the engine's counts.
    let page = e.get("/", &[]).body;
    for (i, (d, c)) in doubles.iter().zip(&cases).enumerate() {
        let row = page
            .lines()
            .find(|l| l.contains(&format!("<td>{}</td><td>{} at {}", c.0, c.2, d.url)))
            .unwrap_or_else(|| panic!("no row for {}: {page}", c.0));
        // The first model has a replica on the node: summed.
        let requests = if i == 0 { 200 } else { 100 };
        assert!(
            row.contains(&format!("<td class=\"n\">{requests}</td>")),
            "{row}"
        );
        assert!(
            row.contains(&format!("<td class=\"n\">{}</td>", c.4)),
            "{row}"
        );
    }
}

#[test]
fn engines_that_hang_answer_garbage_or_50_mb_never_delay_a_scrape() {
    if !python_ready() {
        return;
    }
    let hang = double("vllm", "hang");
    let garbage = double("vllm", "garbage");
    let huge = double("vllm", "huge");
    let e = Exporter::start(&[
        "--engine.interval",
        "200ms",
        "--engine.timeout",
        "1s",
        "--engine.endpoint",
        &hang.url,
        "--engine.endpoint",
        &garbage.url,
        "--engine.endpoint",
        &huge.url,
    ]);
    let reason = |b: &str, url: &str, r: &str| {
        endpoint_value(
            b,
            "gpu_exporter_engine_errors_total",
            url,
            &format!(",reason=\"{r}\""),
        )
        .unwrap_or(0.0)
    };
    let body = e.wait_for("/metrics", Duration::from_secs(60), |b| {
        reason(b, &hang.url, "timeout") >= 3.0
            && reason(b, &garbage.url, "parse") >= 3.0
            && reason(b, &huge.url, "too_large") >= 3.0
    });
    // Collections went on while the engines were read: never stalled.
    assert_eq!(
        value(&body, "gpu_exporter_collect_stalled "),
        Some(0.0),
        "{body}"
    );
    assert_eq!(value(&body, "gpu_exporter_collect_success "), Some(1.0));
    for d in [&hang, &garbage, &huge] {
        assert_eq!(
            endpoint_value(&body, "gpu_exporter_engine_up", &d.url, "}"),
            Some(0.0)
        );
        let took = endpoint_value(
            &body,
            "gpu_exporter_engine_read_duration_seconds",
            &d.url,
            "}",
        );
        assert!(took.is_some_and(|t| t <= 1.5), "{took:?}");
    }
    // 50 MB bodies were streamed and cut off at 8 MiB, never held.
    let hwm = e.status_kib("VmHWM");
    println!("three 50 MB engine answers: exporter VmHWM {hwm} KiB");
    assert!(hwm <= 8 * 1024, "VmHWM {hwm} KiB");
    let log = e.log();
    assert_eq!(
        log.matches(&format!("engine at {}: down (timeout", hang.url))
            .count(),
        1,
        "{log}"
    );
    assert_eq!(
        log.matches(&format!("engine at {}: down (too_large", huge.url))
            .count(),
        1,
        "{log}"
    );
}

#[test]
fn bad_engine_flags_are_one_line_and_exit_2() {
    let file = |name: &str, json: &str| {
        let path = crate::common::temp_file(name, json);
        path.to_str().unwrap().to_string()
    };
    let unknown = file("engines-unknown.json", r#"{"endpoint": []}"#);
    let twice = file(
        "engines-twice.json",
        r#"{"endpoints": [{"url": "http://a:1/m"}]}"#,
    );
    let objective = file(
        "engines-objective.json",
        r#"{"models": [{"name": "m", "objective": 1.5}]}"#,
    );
    let interval = file("engines-interval.json", r#"{"interval": "99ms"}"#);
    let timeout = file("engines-timeout.json", r#"{"timeout": "0s"}"#);
    for (args, says) in [
        (
            &["--engine.config", &interval][..],
            "engines-interval.json: interval: \"99ms\" is below the 100ms minimum",
        ),
        (
            &["--engine.config", &timeout][..],
            "engines-timeout.json: timeout: must be above 0",
        ),
        (
            &["--engine.interval", "50ms"][..],
            "below the 100ms minimum",
        ),
        (
            &["--engine.endpoint", "tgi=http://127.0.0.1:1/metrics"][..],
            "no engine we read",
        ),
        (
            &["--engine.endpoint", "https://127.0.0.1:1/metrics"][..],
            "only http://",
        ),
        (
            &[
                "--engine.endpoint",
                "http://a:1/m",
                "--engine.endpoint",
                "http://a:1/m",
            ][..],
            "given twice",
        ),
        (&["--engine.ttft-threshold", "0s"][..], "above 0"),
        (
            &["--engine.config", "/nonexistent/engines.json"][..],
            "--engine.config /nonexistent/engines.json: ",
        ),
        (
            &["--engine.config", &unknown][..],
            "engines-unknown.json: endpoint: unknown field",
        ),
        (
            &[
                "--engine.endpoint",
                "http://a:1/m",
                "--engine.config",
                &twice,
            ][..],
            "engines-twice.json: endpoints[0].url: \"http://a:1/m\" is given twice",
        ),
        (
            &["--engine.config", &objective][..],
            "engines-objective.json: models[0].objective: 1.5 is not between 0 and 1",
        ),
        (
            &["--print-rules", "--engine.config", &objective][..],
            "models[0].objective",
        ),
    ] {
        let out = crate::common::run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The seed table `--once` prints reads each model's objective from
/// `--engine.config`, as its alerts do: the simulator's llama, 3% slow, at
/// 30x of a 99.9% budget, is at 3x of its own 99%, and its page is gone.
#[test]
fn the_seed_table_burns_each_models_own_objective() {
    let config = crate::common::temp_file(
        "engines-objective-table.json",
        r#"{"models": [{"name": "llama-3.1-70b-instruct", "objective": 0.99}]}"#,
    );
    let config = config.to_str().unwrap();
    let out = crate::common::run(&["--source", "sim", "--once", "--engine.config", config]);
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8_lossy(&out.stdout);
    for line in [
        "== SLO: each model's objective of requests get their first token within 300ms ==",
        "model llama-3.1-70b-instruct (99%): burn 5m=3.0x 1h=3.0x 6h=3.0x 3d=3.0x ",
        "model mistral-7b-instruct (99.9%): burn 5m=0.2x ",
    ] {
        assert!(table.contains(line), "{line}: {table}");
    }
    assert!(!table.contains("TTFTBudgetBurn [page]"), "{table}");
}

/// Burn-rate windows scaled to seconds, as the Prometheus tests scale them.
pub const SHORT_BURN: &str = r#"{ "rules": [
  { "name": "EngineDown", "for": "1s" },
  { "name": "TTFTBudgetBurn", "for": "1s",
    "windows": [{ "long": "6s", "short": "2s", "factor": 14.4 }] },
  { "name": "TTFTBudgetBurnSlow", "for": "1s",
    "windows": [{ "long": "8s", "short": "3s", "factor": 1 }] }
] }"#;

#[test]
fn a_burning_engine_model_pages_and_a_healthy_one_stays_quiet_and_a_dead_engine_holds_it() {
    if !python_ready() {
        return;
    }
    // Every request at 600 ms: slow at any bound; at 100 ms: good at 0.2 s.
    let mut burning = growing("vllm", "burning", &["600:5"]);
    let healthy = growing("sglang", "healthy", &["100:5"]);
    let rules = crate::common::temp_file("engine-burn.json", SHORT_BURN);
    let e = Exporter::start(&[
        "--engine.interval",
        "200ms",
        "--engine.endpoint",
        &burning.url,
        "--engine.endpoint",
        &healthy.url,
        "--rules.file",
        rules.to_str().unwrap(),
    ]);
    let want = |b: &str| {
        let f = crate::prometheus::firing(b);
        f.contains(&("TTFTBudgetBurn".into(), "burning".into()))
            && f.contains(&("TTFTBudgetBurnSlow".into(), "burning".into()))
    };
    let alerts = e.wait_for("/alerts", Duration::from_secs(40), want);
    let f = crate::prometheus::firing(&alerts);
    assert!(
        !f.iter().any(|(_, who)| who == "healthy"),
        "the healthy model fired: {f:?}"
    );
    let page = e.get("/", &[]).body;
    assert!(page.contains("<td>healthy</td><td>sglang at "), "{page}");

    // The burning engine dies: EngineDown fires, and the page holds past
    // every window instead of resolving for want of data.
    let _ = burning.child.kill();
    let _ = burning.child.wait();
    let down =
        |b: &str| crate::prometheus::firing(b).contains(&("EngineDown".into(), "burning".into()));
    e.wait_for("/alerts", Duration::from_secs(20), down);
    std::thread::sleep(Duration::from_secs(9));
    let f = crate::prometheus::firing(&e.get("/alerts", &[]).body);
    for alert in ["EngineDown", "TTFTBudgetBurn", "TTFTBudgetBurnSlow"] {
        assert!(
            f.contains(&(alert.into(), "burning".into())),
            "{alert}: {f:?}"
        );
    }
    assert!(!f.iter().any(|(_, who)| who == "healthy"), "{f:?}");
    let metrics = e.get("/metrics", &[]).body;
    let held = endpoint_value(
        &metrics,
        "gpu_exporter_engine_model_up",
        &burning.url,
        ",model_name=\"burning\"",
    );
    assert_eq!(held, Some(0.0), "{metrics}");
}

#[test]
fn a_blind_gpu_source_hides_the_gpus_not_the_engines_burn() {
    if !python_ready() {
        return;
    }
    // NVML fails every collection after the first: past a 1 s max-stale
    // the GPUs' readings are withheld. Only then does the engine start,
    // and burn: its page must come all the same.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let text = crate::sources::fleet(&[crate::sources::gpu(0, "")]).replacen(
        '{',
        r#"{"count_error":{"after_collections":1,"code":999},"#,
        1,
    );
    let f = crate::sources::fake_nvml::Fixture::new("bin-blind-engines", &text);
    let rules = crate::common::temp_file("engine-burn-blind.json", SHORT_BURN);
    let mut args = crate::sources::nvml_args(&f);
    args.extend(
        [
            "--collect.max-stale",
            "1s",
            "--engine.interval",
            "200ms",
            "--engine.endpoint",
            &url,
            "--rules.file",
            rules.to_str().unwrap(),
        ]
        .map(String::from),
    );
    let e = crate::sources::start(&args);
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, "gpu_up{gpu=\"0\"") == Some(1.0)
    });
    // The second collection fails; NVML then never initialises again.
    f.set_scenario(r#"{"init_error":9,"gpus":[]}"#);
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, "gpu_exporter_readings_hidden") == Some(1.0)
    });
    let burns = |b: &str| {
        crate::prometheus::firing(b).contains(&("TTFTBudgetBurn".into(), "burning".into()))
    };
    assert!(!burns(&e.get("/alerts", &[]).body));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engines/double.py");
    let child = Command::new("python3")
        .arg(script)
        .args(["--engine", "vllm", "--mode", "grow", "--model", "burning"])
        .args(["--lifetime", "120", "--port", &port.to_string()])
        .args(["--observe", "600:5"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the engine double");
    let _double = ported(child);
    e.wait_for("/alerts", Duration::from_secs(40), burns);
    let metrics = e.get("/metrics", &[]).body;
    assert_eq!(value(&metrics, "gpu_exporter_readings_hidden"), Some(1.0));
    assert!(!metrics.contains("gpu_temperature_celsius"), "{metrics}");
    let page = e.get("/", &[]).body;
    assert!(page.contains("<td>burning</td><td>vllm at "), "{page}");
}

/// A double of `engine` serving `model`, recording the `observe` mix
/// again every 100 ms.
fn growing(engine: &str, model: &str, observe: &[&str]) -> Double {
    let mut args = vec!["--engine", engine, "--mode", "grow", "--model", model];
    args.push("--observe");
    args.extend(observe);
    started(&args)
}

fn ported(mut child: Child) -> Double {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .strip_prefix("PORT ")
        .unwrap_or_else(|| panic!("double said {line:?}"))
        .trim()
        .to_string();
    Double {
        child,
        url: format!("http://127.0.0.1:{port}/metrics"),
    }
}

/// A real Prometheus scraping the same doubles and the exporter, with the
/// printed rules, agrees with the exporter's own verdicts on the engines'
/// models, model by model and at both scopes, each judged at the bound the
/// exporter serves (`gpu_exporter_engine_model_slo_info`). Each model's own
/// SLO settings (`--engine.config`): strict (0.5% over 0.25 s, 5x at
/// 99.9%) burns at its own 99.99% (50x); slowish (3% over 0.25 s, 30x
/// there) is quiet at its own 500 ms bound. Engines whose buckets differ:
/// an old SGLang (0.25 and 0.5) and a Triton model with its own buckets
/// (250 ms) each 3% slow (30x, the slow pair); a vLLM with a 0.3 bound,
/// 10% between 0.25 and 0.3 s, quiet at 0.3. Quiet models beside: one
/// served by an old SGLang and a vLLM, one by a vLLM and a Triton with no
/// bound at or below 300 ms (500, 1000): no fleet page from either, as
/// neither judges the requests of a series without the bound.
#[test]
fn prometheus_on_the_engines_own_series_agrees_with_the_exporter() {
    if !python_ready() || !have("prometheus", &["--version"]) {
        return;
    }
    let fine = ["100:97", "270:3"];
    let fast = ["100:10"];
    let doubles = [
        growing("vllm", "burning", &["600:5"]),
        growing("sglang", "strict", &["100:199", "600:1"]),
        growing("trtllm", "slowish", &fine),
        ending("vllm", "failing", &["stop:99", "error:1"]),
        growing("sglang-old", "old", &fine),
        growing("sglang-old", "shared", &fast),
        growing("vllm", "shared", &fast),
        growing("vllm-custom", "custom", &["100:90", "270:10"]),
        growing("vllm", "quiet", &fast),
        started(&[
            "--engine",
            "triton",
            "--mode",
            "grow",
            "--observe",
            "100:97",
            "270:3",
            "--triton-models",
            "triton=50,250,1000",
            "quiet=500,1000",
        ]),
    ];
    let names = [
        "burning", "strict", "slowish", "failing", "old", "shared", "custom", "quiet", "triton",
    ];
    let rules = crate::common::temp_file("engine-diff.json", DIFF_RULES);
    let rules = rules.to_str().unwrap();
    let own = crate::common::temp_file(
        "engine-diff-slo.json",
        r#"{"models": [{"name": "strict", "objective": 0.9999},
                       {"name": "slowish", "ttft_threshold": "500ms"}]}"#,
    );
    let own = own.to_str().unwrap();
    let printed = crate::common::run(&[
        "--print-rules",
        "--rules.file",
        rules,
        "--engine.config",
        own,
    ]);
    assert_eq!(printed.status.code(), Some(0));
    let printed =
        crate::common::temp_file("engine-diff.yml", &String::from_utf8_lossy(&printed.stdout));
    let mut args = vec!["--engine.interval", "1s", "--rules.file", rules];
    args.extend(["--engine.config", own]);
    for d in &doubles {
        args.extend(["--engine.endpoint", d.url.as_str()]);
    }
    let e = Exporter::start(&args);
    let bounds = [
        ("old", "sglang", r#",bucket="0.25""#),
        ("strict", "sglang", r#",bucket="0.2""#),
        ("custom", "vllm", r#",bucket="0.3""#),
        ("slowish", "trtllm", r#",bucket="0.5""#),
        ("triton", "triton", r#",bucket="250""#),
        ("quiet", "triton", ""),
        ("quiet", "vllm", r#",bucket="0.25""#),
    ];
    crate::common::eventually(Duration::from_secs(20), || {
        let metrics = e.get("/metrics", &[]).body;
        crate::common::check_metrics(&metrics);
        let info = |model: &str, engine: &str, le: &str| {
            let tail = format!(",engine=\"{engine}\",model_name=\"{model}\"{le}}} 1");
            (metrics.lines()).any(|l| {
                l.starts_with("gpu_exporter_engine_model_slo_info{endpoint=") && l.ends_with(&tail)
            })
        };
        match bounds.iter().find(|(m, en, le)| !info(m, en, le)) {
            None => Ok(()),
            Some(b) => Err(format!("{b:?}: {metrics}")),
        }
    });
    let target = |url: &str| format!("'{}'", &url["http://".len()..url.len() - "/metrics".len()]);
    let targets: Vec<String> = doubles.iter().map(|d| target(&d.url)).collect();
    let mut prom = crate::deploy::Prometheus::with_config(
        "engine-diff",
        &format!(
            "rule_files: ['{}']\nscrape_configs:\n  - job_name: engines\n    static_configs: [{{targets: [{}]}}]\n  - job_name: gpu\n    static_configs: [{{targets: ['{}']}}]\n",
            printed.display(),
            targets.join(", "),
            e.addr,
        ),
    );
    // The engines' models only: the simulator serves its own too.
    let engines_only = |f: BTreeSet<(String, String)>| -> BTreeSet<(String, String)> {
        f.into_iter()
            .filter(|(_, who)| names.contains(&who.as_str()))
            .collect()
    };
    let want: BTreeSet<(String, String)> = [
        ("TTFTBudgetBurn", "burning"),
        ("TTFTBudgetBurnSlow", "burning"),
        ("TTFTBudgetBurn", "strict"),
        ("TTFTBudgetBurnSlow", "strict"),
        ("EngineAvailabilityBurn", "failing"),
        ("TTFTBudgetBurnSlow", "old"),
        ("TTFTBudgetBurnSlow", "triton"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let both = crate::common::eventually(Duration::from_secs(60), || {
        let ours = engines_only(crate::prometheus::firing(&e.get("/alerts", &[]).body));
        let body = prom
            .get("/api/v1/alerts")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let theirs = engines_only(crate::prometheus::firing(&body));
        let fleet = engines_only(crate::prometheus::firing_at(&body, true));
        match (ours == want, theirs == want, fleet == want) {
            (true, true, true) => Ok((ours, theirs)),
            _ => Err(format!(
                "exporter {ours:?}, Prometheus {theirs:?} and across the fleet {fleet:?}"
            )),
        }
    });
    assert_eq!(both.0, both.1);
    // The quiet ones stay quiet a while longer, at both scopes.
    std::thread::sleep(Duration::from_secs(4));
    let body = prom
        .get("/api/v1/alerts")
        .map(|(_, b)| b)
        .unwrap_or_default();
    assert_eq!(engines_only(crate::prometheus::firing(&body)), want);
    assert_eq!(
        engines_only(crate::prometheus::firing_at(&body, true)),
        want
    );
}

/// Endpoints that never answer raise EngineEndpointDown, a ticket with
/// the reason in its summary (no label: a reason that changes keeps the
/// alert), in process and in a real Prometheus on the printed rules alike
/// (the same labels, the same reason): a closed port
/// (`connect`) and a NIM given without `nim=` (`unknown_engine`). The
/// status page lists both with the reader's line.
#[test]
fn endpoints_that_never_answer_raise_a_ticket_in_process_and_in_prometheus() {
    if !python_ready() || !have("prometheus", &["--version"]) {
        return;
    }
    // A port that was free a moment ago, closed again: refused.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}/metrics", free.local_addr().unwrap());
    drop(free);
    let nim = started(&["--engine", "nim", "--model", "n", "--observe", "100:5"]);
    let rules = crate::common::temp_file(
        "endpoint-down.json",
        r#"{ "rules": [{ "name": "EngineEndpointDown", "for": "2s" }] }"#,
    );
    let rules = rules.to_str().unwrap();
    let printed = crate::common::run(&["--print-rules", "--rules.file", rules]);
    assert_eq!(printed.status.code(), Some(0));
    let printed = crate::common::temp_file(
        "endpoint-down.yml",
        &String::from_utf8_lossy(&printed.stdout),
    );
    let e = Exporter::start(&[
        "--engine.interval",
        "500ms",
        "--rules.file",
        rules,
        "--engine.endpoint",
        &closed,
        "--engine.endpoint",
        &nim.url,
    ]);
    let mut prom = crate::deploy::Prometheus::with_config(
        "endpoint-down",
        &format!(
            "rule_files: ['{}']\nscrape_configs:\n  - job_name: gpu\n    static_configs: [{{targets: ['{}']}}]\n",
            printed.display(),
            e.addr
        ),
    );
    let want: BTreeSet<(String, String, String)> = [
        (closed.as_str(), "", "connect"),
        (nim.url.as_str(), "", "unknown_engine"),
    ]
    .iter()
    .map(|(u, en, r)| (u.to_string(), en.to_string(), r.to_string()))
    .collect();
    crate::common::eventually(Duration::from_secs(60), || {
        let ours = endpoint_tickets(&e.get("/alerts", &[]).body);
        let body = prom
            .get("/api/v1/alerts")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let theirs = endpoint_tickets(&body);
        match (ours == want, theirs == want) {
            (true, true) => Ok(()),
            _ => Err(format!("exporter {ours:?}, Prometheus {theirs:?}")),
        }
    });
    let alerts = e.get("/alerts", &[]).body;
    assert!(alerts.contains(r#""severity":"ticket""#), "{alerts}");
    assert!(alerts.contains(": connect"), "{alerts}");
    let page = e.get("/", &[]).body;
    let table = &page[page.find("id=\"endpoints\"").expect("an endpoints table")..];
    assert!(table.contains("down: connect"), "{table}");
    assert!(table.contains("down: unknown_engine"), "{table}");
    assert!(
        table.contains("name the engine, nim=URL or trtllm=URL"),
        "{table}"
    );
}

/// The firing EngineEndpointDown alerts of an alerts body (ours or
/// Prometheus'): endpoint, engine (empty where unknown), and the reason
/// that ends its summary; a `reason` label fails the test.
fn endpoint_tickets(body: &str) -> BTreeSet<(String, String, String)> {
    body.split(r#"{"labels":{"#)
        .skip(1)
        .filter(|a| a.contains(r#""state":"firing""#))
        .filter_map(|a| {
            let labels = &a[..a.find('}')?];
            let get = |k: &str| {
                let at = labels.find(&format!("\"{k}\":\""))? + k.len() + 4;
                Some(labels[at..at + labels[at..].find('"')?].to_string())
            };
            if get("alertname")? != "EngineEndpointDown" {
                return None;
            }
            assert_eq!(get("reason"), None, "no reason label: {a}");
            let engine = get("engine").unwrap_or_default();
            let summary = &a[a.find(r#""summary":""#)? + 11..];
            let summary = &summary[..summary.find('"')?];
            let reason = summary.rsplit(": ").next()?.to_string();
            Some((get("endpoint")?, engine, reason))
        })
        .collect()
}

/// Windows in seconds; a 30x TTFT burn would hold the slow pair's factor
/// of 20 but not the fast pair's 40, strict's 50x holds both; failing (1%
/// engine errors, a 10x availability burn) the fast pair's 9.5 but not the
/// slow pair's 20.
const DIFF_RULES: &str = r#"{ "rules": [
  { "name": "EngineAvailabilityBurn", "for": "2s",
    "windows": [{ "long": "12s", "short": "4s", "factor": 9.5 }] },
  { "name": "EngineAvailabilityBurnSlow", "for": "2s",
    "windows": [{ "long": "16s", "short": "6s", "factor": 20 }] },
  { "name": "TTFTBudgetBurn", "for": "2s",
    "windows": [{ "long": "12s", "short": "4s", "factor": 40 }] },
  { "name": "TTFTBudgetBurnSlow", "for": "2s",
    "windows": [{ "long": "16s", "short": "6s", "factor": 20 }] }
] }"#;

/// `--engine.config` on SIGHUP: an endpoint in both files keeps its state
/// (its engine told once, its up and down said once, its error count
/// going on), one gone drops out, a new one starts, a model's new
/// threshold takes effect; a bad file keeps all of it.
#[test]
fn sighup_rereads_the_engine_config_keeping_each_kept_endpoints_state() {
    if !python_ready() {
        return;
    }
    let (a, b, d) = (
        double("vllm", "steady"),
        double("triton", "steady"),
        double("sglang", "steady"),
    );
    // Nothing listens on port 1: connect errors, counted.
    let c = "http://127.0.0.1:1/metrics";
    let endpoints = |urls: &[&str]| -> String {
        let e: Vec<String> = urls
            .iter()
            .map(|u| format!(r#"{{"url": "{u}"}}"#))
            .collect();
        e.join(", ")
    };
    let config = crate::common::temp_file(
        "engines-hup.json",
        &format!(r#"{{"endpoints": [{}]}}"#, endpoints(&[&a.url, &b.url, c])),
    );
    let e = Exporter::start(&[
        "--engine.interval",
        "100ms",
        "--engine.config",
        config.to_str().unwrap(),
    ]);
    let up = |b: &str, url: &str| endpoint_value(b, "gpu_exporter_engine_up", url, ",engine=");
    let errors = |b: &str| {
        endpoint_value(
            b,
            "gpu_exporter_engine_errors_total",
            c,
            ",reason=\"connect\"",
        )
        .unwrap_or(0.0)
    };
    let good_within = |b: &str, url: &str, model: &str| {
        let more = format!(",model_name=\"{model}\"");
        endpoint_value(
            b,
            "gpu_exporter_engine_ttft_good_within_seconds",
            url,
            &more,
        )
    };
    let before = e.wait_for("/metrics", Duration::from_secs(30), |m| {
        up(m, &a.url) == Some(1.0) && up(m, &b.url) == Some(1.0) && errors(m) >= 10.0
    });
    assert_eq!(good_within(&before, &a.url, "vllm"), Some(0.25));

    // C first now, A's model at its own 500ms, B gone, D new.
    std::fs::write(
        &config,
        format!(
            r#"{{"endpoints": [{}], "models": [{{"name": "vllm", "ttft_threshold": "500ms"}}]}}"#,
            endpoints(&[c, &a.url, &d.url])
        ),
    )
    .unwrap();
    let counted = errors(&e.get("/metrics", &[]).body);
    e.signal("HUP");
    let after = e.wait_for("/metrics", Duration::from_secs(30), |m| {
        up(m, &d.url) == Some(1.0)
            && !m.contains(&b.url)
            && good_within(m, &a.url, "vllm") == Some(0.5)
    });
    check_metrics(&after);
    assert!(
        errors(&after) >= counted,
        "C's errors went back: {counted} then {after}"
    );
    assert_eq!(up(&after, &a.url), Some(1.0));
    let log = e.log();
    for said in [
        format!("engine at {}: told vllm by its metric names", a.url),
        format!("vllm at {}: up", a.url),
        format!("engine at {c}: down (connect"),
    ] {
        assert_eq!(log.matches(&said).count(), 1, "{said}: {log}");
    }
    assert!(
        log.contains(&format!("{} is no longer read", b.url)),
        "{log}"
    );
    assert!(
        log.contains(&format!("reading {} from now on", d.url)),
        "{log}"
    );

    // A bad file: one line, and the old endpoints and settings stay.
    std::fs::write(&config, r#"{"endpoints": [{"url": "http://h"}]}"#).unwrap();
    e.signal("HUP");
    e.wait_log("reload failed", Duration::from_secs(10));
    let log = e.log();
    let line = log.lines().find(|l| l.contains("reload failed")).unwrap();
    assert!(
        line.contains("--engine.config ")
            && line.contains("endpoints[0].url: \"http://h\": give the host and a port"),
        "{line}"
    );
    let kept = e.metrics(None).body;
    assert_eq!(up(&kept, &d.url), Some(1.0), "{kept}");
    assert_eq!(good_within(&kept, &a.url, "vllm"), Some(0.5));
    assert_eq!(e.get("/healthz", &[]).status, 200);
}

/// `--engine.config`'s `interval` and `timeout`, over the flags' (100ms
/// each), on SIGHUP: at the file's 30s no second read comes in 3 s; at
/// 200ms after SIGHUP several a second, the 30 s wait cut short. A double
/// answering each read after 1 s is up at the file's 5s timeout, and at
/// its 300ms down with `timeout`, each read given up well before the
/// answer; a bad interval on SIGHUP keeps the 200ms.
#[test]
fn sighup_retunes_the_engine_read_interval_and_timeout() {
    if !python_ready() {
        return;
    }
    let log = crate::common::temp_file("engine-reads.log", "");
    let reads = || std::fs::read_to_string(&log).unwrap().lines().count();
    let counted = ["--reads", log.to_str().unwrap()];
    let quick = started(&[&["--engine", "vllm", "--model", "quick"][..], &counted].concat());
    let slow = started(&["--engine", "sglang", "--model", "slow", "--delay", "1"]);
    let settings = |interval: &str, timeout: &str| {
        format!(
            r#"{{"endpoints": [{{"url": "{}"}}, {{"url": "{}"}}], "interval": "{interval}", "timeout": "{timeout}"}}"#,
            quick.url, slow.url
        )
    };
    let config = crate::common::temp_file("engines-retune.json", &settings("30s", "5s"));
    let e = Exporter::start(&[
        "--engine.interval",
        "100ms",
        "--engine.timeout",
        "100ms",
        "--engine.config",
        config.to_str().unwrap(),
    ]);
    let up = |b: &str, url: &str| endpoint_value(b, "gpu_exporter_engine_up", url, ",engine=");
    let timeouts = |b: &str| {
        let reason = ",reason=\"timeout\"";
        endpoint_value(b, "gpu_exporter_engine_errors_total", &slow.url, reason).unwrap_or(0.0)
    };
    let first = e.wait_for("/metrics", Duration::from_secs(20), |m| {
        up(m, &quick.url) == Some(1.0) && up(m, &slow.url) == Some(1.0)
    });
    assert_eq!(timeouts(&first), 0.0, "{first}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(reads(), 1, "a second read within 3 s at the file's 30s");

    std::fs::write(&config, settings("200ms", "300ms")).unwrap();
    e.signal("HUP");
    let after = e.wait_for("/metrics", Duration::from_secs(10), |m| {
        timeouts(m) >= 3.0 && up(m, &slow.url) == Some(0.0)
    });
    assert!(reads() >= 4, "{} reads", reads());
    assert_eq!(up(&after, &quick.url), Some(1.0));
    let took = endpoint_value(
        &after,
        "gpu_exporter_engine_read_duration_seconds",
        &slow.url,
        "}",
    );
    assert!(took.is_some_and(|t| (0.3..0.9).contains(&t)), "{took:?}");
    let said = format!("sglang at {}: down (timeout", slow.url);
    assert_eq!(e.log().matches(&said).count(), 1, "{}", e.log());

    // A bad interval: one line, and the 200ms stays.
    std::fs::write(&config, settings("50ms", "300ms")).unwrap();
    e.signal("HUP");
    e.wait_log("reload failed", Duration::from_secs(10));
    let log = e.log();
    let line = log.lines().find(|l| l.contains("reload failed")).unwrap();
    assert!(
        line.contains("engines-retune.json: interval: \"50ms\" is below the 100ms minimum"),
        "{line}"
    );
    let before = reads();
    std::thread::sleep(Duration::from_secs(2));
    assert!(reads() >= before + 3, "{before} then {} reads", reads());
}

/// Availability windows in seconds; 1% of requests failed is a 10x burn
/// at 99.9%: over the fast pair's 9.5, under the slow pair's 10.5.
const AVAILABILITY_RULES: &str = r#"{ "rules": [
  { "name": "EngineAvailabilityBurn", "for": "1s",
    "windows": [{ "long": "6s", "short": "2s", "factor": 9.5 }] },
  { "name": "EngineAvailabilityBurnSlow", "for": "1s",
    "windows": [{ "long": "6s", "short": "2s", "factor": 10.5 }] }
] }"#;

/// A growing double that also counts requests by how they ended.
fn ending(engine: &str, model: &str, outcomes: &[&str]) -> Double {
    let mut args = vec!["--engine", engine, "--mode", "grow", "--model", model];
    args.extend(["--observe", "100:5", "--outcomes"]);
    args.extend(outcomes);
    started(&args)
}

#[test]
fn engine_errors_burn_the_availability_budget_and_client_aborts_do_not() {
    if !python_ready() {
        return;
    }
    let doubles = [
        // 1% engine errors: 10x.
        ending("vllm", "failing", &["stop:99", "error:1"]),
        // Half the requests aborted by their clients, none failed.
        ending("vllm", "aborting", &["stop:50", "abort:50"]),
        // A v0-era vLLM counts no `error`: no availability verdict.
        ending("vllm-v0", "unjudged", &["stop:90", "abort:10"]),
        // SGLang's aborts are its failures (no label parts the client's):
        // 2% is 20x.
        ending("sglang", "sglang-aborting", &["stop:98", "abort:2"]),
        // trtllm-serve: a 4xx is the client's, a 5xx the engine's: 1%.
        ending(
            "trtllm",
            "trtllm-failing",
            &["stop:99", "client_error:30", "error:1"],
        ),
        // NIM's failures: 3%.
        ending("nim", "nim-failing", &["stop:97", "error:3"]),
        // Outcomes counted, no TTFT series: judged by the counters alone.
        started(&[
            "--engine",
            "vllm",
            "--mode",
            "grow",
            "--model",
            "untimed-failing",
            "--no-ttft",
            "--outcomes",
            "stop:99",
            "error:1",
        ]),
    ];
    let rules = crate::common::temp_file("engine-availability.json", AVAILABILITY_RULES);
    let mut args = vec!["--engine.interval", "200ms", "--rules.file"];
    args.push(rules.to_str().unwrap());
    let named: Vec<String> = doubles
        .iter()
        .enumerate()
        .map(|(i, d)| match i {
            5 => format!("nim={}", d.url),
            _ => d.url.clone(),
        })
        .collect();
    for n in &named {
        args.extend(["--engine.endpoint", n.as_str()]);
    }
    let e = Exporter::start(&args);
    let want: BTreeSet<(String, String)> = [
        ("EngineAvailabilityBurn", "failing"),
        ("EngineAvailabilityBurn", "sglang-aborting"),
        ("EngineAvailabilityBurnSlow", "sglang-aborting"),
        ("EngineAvailabilityBurn", "trtllm-failing"),
        ("EngineAvailabilityBurn", "nim-failing"),
        ("EngineAvailabilityBurnSlow", "nim-failing"),
        ("EngineAvailabilityBurn", "untimed-failing"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let availability = |b: &str| -> BTreeSet<(String, String)> {
        crate::prometheus::firing(b)
            .into_iter()
            .filter(|(a, _)| a.starts_with("EngineAvailability"))
            .collect()
    };
    e.wait_for("/alerts", Duration::from_secs(40), |b| {
        availability(b) == want
    });
    // Held for a while: the verdicts are steady, not a passing state.
    std::thread::sleep(Duration::from_secs(3));
    let alerts = e.get("/alerts", &[]).body;
    assert_eq!(availability(&alerts), want);
    // The untimed model: served and up, no TTFT bound and no TTFT verdict.
    let untimed = crate::prometheus::firing(&alerts);
    let untimed: Vec<_> = (untimed.iter())
        .filter(|(a, who)| who == "untimed-failing" && !a.starts_with("EngineAvailability"))
        .collect();
    assert!(untimed.is_empty(), "{untimed:?}");
    let metrics = e.get("/metrics", &[]).body;
    let url = &doubles[6].url;
    let more = ",model_name=\"untimed-failing\"";
    assert_eq!(
        endpoint_value(&metrics, "gpu_exporter_engine_model_up", url, more),
        Some(1.0)
    );
    let bound = "gpu_exporter_engine_ttft_good_within_seconds";
    assert_eq!(endpoint_value(&metrics, bound, url, more), None);
    let said = "model \"untimed-failing\": no TTFT series; judged for availability alone";
    assert_eq!(e.log().matches(said).count(), 1, "{}", e.log());
}

/// The endpoints of a round are read at once: four engines that hang
/// (each read given up at the 1 s timeout) hold a round to about 1 s, not
/// 4 s, so the answering engine beside them is read every second or so.
#[test]
fn hung_engines_do_not_hold_back_the_others_reads() {
    if !python_ready() {
        return;
    }
    let hung: Vec<Double> = (0..4).map(|_| double("vllm", "hang")).collect();
    let good = double("sglang", "steady");
    let mut args = vec!["--engine.interval", "100ms", "--engine.timeout", "1s"];
    for d in &hung {
        args.extend(["--engine.endpoint", d.url.as_str()]);
    }
    args.extend(["--engine.endpoint", good.url.as_str()]);
    let e = Exporter::start(&args);
    let success = |b: &str| {
        endpoint_value(
            b,
            "gpu_exporter_engine_last_success_timestamp_seconds",
            &good.url,
            "}",
        )
    };
    e.wait_for("/metrics", Duration::from_secs(20), |b| {
        success(b).is_some()
    });
    // Over 8 s one after another would read it at most 3 times (a round
    // of 4 s); at once, about 8. Polled every 100 ms.
    let mut seen = BTreeSet::new();
    let end = std::time::Instant::now() + Duration::from_secs(8);
    while std::time::Instant::now() < end {
        if let Some(t) = success(&e.get("/metrics", &[]).body) {
            seen.insert(t.to_bits());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(seen.len() >= 5, "{} reads in 8 s", seen.len());
    let metrics = e.get("/metrics", &[]).body;
    for d in &hung {
        let timeouts = endpoint_value(
            &metrics,
            "gpu_exporter_engine_errors_total",
            &d.url,
            ",reason=\"timeout\"}",
        );
        assert!(
            timeouts.is_some_and(|n| n >= 5.0),
            "{timeouts:?}: {metrics}"
        );
    }
}

/// The figure docs/engines.md states: 16 endpoints, the most one exporter
/// reads, each streaming 50 MB of valid text at every read (cut off at its
/// 2 MiB share of the round's 32 MiB, `too_large`, said so on the status
/// page's endpoints table), read every 500 ms at once for 6 s. The peak
/// RSS stays bounded; the CPU the reads took is printed, for the docs (a
/// timing, so not asserted).
#[test]
fn sixteen_streaming_endpoints_bound_the_peak() {
    if !python_ready() {
        return;
    }
    let doubles: Vec<Double> = (0..16).map(|_| double("vllm", "huge")).collect();
    let mut args = vec!["--engine.interval", "500ms", "--engine.timeout", "2s"];
    for d in &doubles {
        args.extend(["--engine.endpoint", d.url.as_str()]);
    }
    let e = Exporter::start(&args);
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", e.pid())).unwrap();
        let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        // utime and stime, in clock ticks (100 a second on Linux).
        (f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()) as f64 / 100.0
    };
    let (before, t) = (cpu(), std::time::Instant::now());
    std::thread::sleep(Duration::from_secs(6));
    let (spent, took) = (cpu() - before, t.elapsed().as_secs_f64());
    let body = e.get("/metrics", &[]).body;
    let cut = |d: &Double| {
        endpoint_value(
            &body,
            "gpu_exporter_engine_errors_total",
            &d.url,
            ",reason=\"too_large\"",
        )
    };
    let reads: f64 = doubles.iter().map(|d| cut(d).unwrap_or(0.0)).sum();
    assert!(reads >= 16.0, "{body}");
    let hwm = e.status_kib("VmHWM");
    println!(
        "16 endpoints streaming: VmHWM {hwm} KiB, {spent:.2} s of CPU in {took:.1} s ({:.2} of a core), {reads} reads cut at their 2 MiB share",
        spent / took
    );
    let page = e.get("/", &[]).body;
    let share = "over the 2097152-byte share of the round&#39;s 33554432 bytes across endpoints";
    assert_eq!(page.matches(share).count(), 16, "{page}");
    assert!(hwm <= 16 * 1024, "VmHWM {hwm} KiB");
}
