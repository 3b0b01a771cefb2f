//! Model names a tenant chooses (vLLM's `--served-model-name`), bounded
//! like those of `--engine.config`: 1 to 128 bytes without control
//! characters, or the model is not served anywhere, and the drop counted.

use crate::common::{Exporter, value};
use crate::engines::{SHORT_BURN, python_ready, started};
use std::time::Duration;

/// A vLLM double serving `model` beside 32 models with 10 KB names
/// holding NUL, ESC, DEL and CR, each failing and slow every 100 ms.
fn hostile_double(model: &str) -> crate::engines::Double {
    tenants("vllm-custom", model, "--hostile", "32")
}

/// A double of `engine` serving `model` beside the models a tenant named
/// (`names`: `--hostile` or `--long`, `n` of them), each failing and slow
/// every 100 ms.
fn tenants(engine: &str, model: &str, names: &str, n: &str) -> crate::engines::Double {
    started(&[
        "--engine",
        engine,
        "--mode",
        "grow",
        "--model",
        model,
        "--observe",
        "100:5",
        "--outcomes",
        "stop:5",
        names,
        n,
    ])
}

/// A vLLM double serving `fine` beside 32 models with 10 KB names holding
/// NUL, ESC, DEL and CR, each failing and slow every 100 ms: served, they
/// would burn both budgets. None is served on `/metrics`, the status page
/// or `/alerts`; each read counts 32 drops; each name is said once.
#[test]
fn a_hostile_engines_names_are_served_nowhere_and_counted() {
    if !python_ready() {
        return;
    }
    let hostile = hostile_double("fine");
    let rules = crate::common::temp_file("engine-names.json", SHORT_BURN);
    let e = Exporter::start(&[
        "--engine.interval",
        "200ms",
        "--engine.endpoint",
        &hostile.url,
        "--rules.file",
        rules.to_str().unwrap(),
    ]);
    let rejected = |b: &str| {
        let series = format!(
            "gpu_exporter_engine_models_rejected_total{{endpoint=\"{}\",reason=\"name\"",
            hostile.url
        );
        value(b, &series).unwrap_or(0.0)
    };
    // Three reads or more, each whole (the endpoint is up: the names, not
    // the body, were refused), with `fine` served.
    let metrics = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        let up = format!("gpu_exporter_engine_up{{endpoint=\"{}\"", hostile.url);
        let fine = format!(
            "gpu_exporter_engine_model_up{{endpoint=\"{}\",model_name=\"fine\"",
            hostile.url
        );
        value(b, &up) == Some(1.0) && value(b, &fine) == Some(1.0) && rejected(b) >= 96.0
    });
    assert_eq!(rejected(&metrics) % 32.0, 0.0, "{}", rejected(&metrics));
    // Past the burn windows, so that a served hostile model would page.
    std::thread::sleep(Duration::from_secs(9));
    for path in ["/metrics", "/", "/alerts"] {
        let body = e.get(path, &[]).body;
        assert!(!body.contains("hostile"), "{path} serves a hostile name");
        assert!(!body.contains("xxxxxxxxxx"), "{path} serves a hostile name");
        let control = body.bytes().find(|&b| matches!(b, 0 | 0x1b | 0x7f | b'\r'));
        assert_eq!(control, None, "{path} serves a control byte");
        assert!(body.len() < 256 * 1024, "{path}: {} bytes", body.len());
    }
    let page = e.get("/", &[]).body;
    assert!(page.contains("<td>fine</td>"), "{page}");
    let log = e.log();
    let said = log
        .lines()
        .filter(|l| l.contains("not served: a name must be 1 to 128 bytes"));
    assert_eq!(said.count(), 32, "{log}");
    assert!(log.contains("(10257 bytes)"), "{log}");
}

/// Two hostile engines (32 models each with 10 KB names holding control
/// bytes) beside a good one, while 40 clients ask for the status page
/// hundreds of times each and never read: the names are refused before
/// they are kept, so no page holds them and the exporter's peak RSS stays
/// under 16 MiB; every name served is at most 128 bytes without a control
/// character, and the drops are counted.
#[test]
fn hostile_names_and_never_reading_clients_leave_the_peak_bounded() {
    if !python_ready() {
        return;
    }
    let doubles = [hostile_double("fine"), hostile_double("also-fine")];
    let mut args = vec!["--engine.interval", "500ms"];
    for d in &doubles {
        args.extend(["--engine.endpoint", d.url.as_str()]);
    }
    let e = Exporter::start(&args);
    let rejected = |b: &str, url: &str| {
        let series = format!(
            "gpu_exporter_engine_models_rejected_total{{endpoint=\"{url}\",reason=\"name\""
        );
        value(b, &series).unwrap_or(0.0)
    };
    e.wait_for("/metrics", Duration::from_secs(30), |b| {
        doubles.iter().all(|d| rejected(b, &d.url) >= 64.0)
    });
    let stuck = never_reading(&e, 40);
    // Several reads of the engines while they hold their slots.
    std::thread::sleep(Duration::from_secs(3));
    let metrics = e.get("/metrics", &[]).body;
    for d in &doubles {
        assert!(rejected(&metrics, &d.url) >= 96.0, "{metrics}");
    }
    for line in metrics.lines().filter(|l| l.contains("model_name=\"")) {
        let name = line.split("model_name=\"").nth(1).unwrap();
        let name = &name[..name.find('"').unwrap()];
        assert!(
            name.len() <= 128 && !name.chars().any(char::is_control),
            "{line}"
        );
    }
    let hwm = e.status_kib("VmHWM");
    println!("2 hostile engines, 40 never-reading clients of /: VmHWM {hwm} KiB");
    assert!(hwm <= 16 * 1024, "VmHWM {hwm} KiB");
    drop(stuck);
}

/// Six engines of 32 models with 128-byte names (served: the longest
/// kept) make a status page of tens of KB; 40 clients that ask for it and
/// never read would hold 40. The responses in flight hold at most the
/// pages' 2 MiB budget: past it, a page is answered 503 with Retry-After
/// and counted, not rendered; the peak RSS stays under 16 MiB; once the
/// clients go, the page is served again.
#[test]
fn pages_past_their_byte_budget_are_503_while_clients_never_read() {
    if !python_ready() {
        return;
    }
    let doubles: Vec<_> = (0..6)
        .map(|i| tenants("vllm", &format!("m{i}"), "--long", "31"))
        .collect();
    let mut args = vec!["--engine.interval", "500ms"];
    for d in &doubles {
        args.extend(["--engine.endpoint", d.url.as_str()]);
    }
    let e = Exporter::start(&args);
    let long = "l".repeat(121);
    let page = e.wait_for("/", Duration::from_secs(30), |p| {
        p.matches(&long).count() >= 6 * 31
    });
    let budget = 2 * 1024 * 1024;
    let fit = budget / page.len() + 1;
    assert!(
        fit < 40,
        "a page of {} bytes: 40 fit the budget",
        page.len()
    );
    let refused = |e: &Exporter| {
        value(
            &e.get("/metrics", &[]).body,
            "gpu_exporter_http_pages_refused_total",
        )
    };
    assert_eq!(refused(&e), Some(0.0));
    let stuck = never_reading(&e, 40);
    std::thread::sleep(Duration::from_secs(3));
    let over = e.get("/", &[]);
    assert_eq!(over.status, 503, "{}", over.body);
    assert_eq!(over.header("Retry-After"), Some("1"));
    assert!(
        over.body.contains("over their memory budget"),
        "{}",
        over.body
    );
    let n = refused(&e).unwrap();
    // Each client's first page was rendered, or refused past the budget
    // (its next requests wait behind an answer it never reads).
    assert!(n >= (40 - fit) as f64, "{n} refused; {fit} pages fit");
    let hwm = e.status_kib("VmHWM");
    println!(
        "6 engines of 32 long names, 40 never-reading clients of /: {n} pages refused, VmHWM {hwm} KiB"
    );
    assert!(hwm <= 16 * 1024, "VmHWM {hwm} KiB");
    drop(stuck);
    e.wait_for("/", Duration::from_secs(10), |p| {
        p.matches(&long).count() >= 6 * 31
    });
}

/// `n` clients, each asking for the status page 300 times pipelined,
/// none reading.
fn never_reading(e: &Exporter, n: usize) -> Vec<std::net::TcpStream> {
    use std::io::Write;
    (0..n)
        .map(|_| {
            let mut s = e.connect();
            let _ = s.write_all("GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(300).as_bytes());
            s
        })
        .collect()
}
