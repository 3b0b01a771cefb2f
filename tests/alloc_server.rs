//! Allocations on the request path, end to end. A counting allocator
//! counts per thread, only while a thread-local guard is on:
//!
//! - our code (parse, route, render, response head) allocates nothing after
//!   warm-up, over 10,000 mixed requests;
//! - the whole process (our code plus smol's executor and async-io's
//!   reactor, on whichever thread runs it) allocates at most a small
//!   constant per request, whatever the fleet or body size, over 10,000
//!   keep-alive requests to the real server on a loopback socket;
//! - accepting a connection allocates a bounded amount;
//! - gzipped responses: our code allocates nothing after warm-up either;
//! - over TLS the whole process allocates at most 3 + 2 per TLS record of
//!   the response: rustls 0.23 copies each received record into a new
//!   `Vec` and builds each sent record in one, on top of the plain path's
//!   share.

use alerts::defaults;
use http::conn::{Answer, Policy, answer, respond};
use http::guard::Guard;
#[cfg(feature = "tls")]
use http::guard::Shared;
use http::gzip::Compressor;
use http::{Limits, Server};
use model::Bounds;
use poller::judge::settled;
use poller::{Latest, Poller, Published};
use routes::{Context, Routes};
use sources::sim::{Scenario, Sim};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

#[path = "support/counting.rs"]
mod counting;
#[cfg(feature = "tls")]
#[path = "support/pki.rs"]
mod pki;
#[path = "support/response.rs"]
mod response;
#[cfg(feature = "tls")]
#[path = "support/tls_client.rs"]
mod tls_client;
use counting::{Counting, count, count_process, exclude_this_thread};
use response::read_response_into;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// async-io's reactor is one per process and runs on whichever thread is
/// blocked: tests that serve at the same time would count each other's
/// wake-ups. They take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// `gpus` simulated GPUs with Xids, and a model.
fn scenario(gpus: usize) -> Scenario {
    let list = vec![r#"{"xid":79,"xid_every":"60s"}"#; gpus].join(",");
    Scenario::parse(&format!(r#"{{"gpus":[{list}],"models":[{{"name":"m"}}]}}"#)).unwrap()
}

fn published(gpus: usize) -> Published {
    let t0 = 1.8e9;
    let mut c = Poller::new(
        Box::new(Sim::new(scenario(gpus), t0)),
        Duration::from_secs(1),
    );
    settled(&mut c, defaults(), bounds(), t0).0
}

fn bounds() -> Bounds {
    Bounds::new(Duration::from_secs(1), Duration::from_secs(60))
}

fn context(gpus: usize) -> Context {
    answering(Arc::new(Latest::new(published(gpus))))
}

fn answering(latest: Arc<Latest>) -> Context {
    Context {
        latest,
        telemetry_path: "/metrics".into(),
        runbook_base: "docs/runbooks/".into(),
        bounds: bounds(),
        alertmanager: None,
    }
}

const OPENMETRICS: &str =
    "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3\r\n";

/// Kinds of request in [`request`]'s sequence.
const KINDS: usize = 8;

/// Request `i` of a mixed sequence: both formats, HEAD, a 404, health,
/// scrapes filtered by `collect[]` (as Prometheus' `params` encode it) and
/// `exclude[]`, and an unknown collector (400).
fn request(i: usize) -> String {
    match i % KINDS {
        0 => "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        1 => format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{OPENMETRICS}\r\n"),
        2 => "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        3 => "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        4 => "GET /readyz?x=1 HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        5 => "GET /metrics?collect%5B%5D=gpm&collect%5B%5D=xid HTTP/1.1\r\nHost: x\r\n\r\n".into(),
        6 => format!("GET /metrics?exclude[]=clocks HTTP/1.1\r\nHost: x\r\n{OPENMETRICS}\r\n"),
        _ => "GET /metrics?collect%5B%5D=gpus HTTP/1.1\r\nHost: x\r\n\r\n".into(),
    }
}

/// The demo fleet with attribution on: its pods, processes and batch
/// job, a DRA device and the kubelet's state, every GPU series once per
/// pod.
fn attributed() -> Context {
    use model::Collector::Processes;
    use model::Collectors;
    use model::{DraDevice, Kubelet};
    let t0 = 1.8e9;
    let mut c = Poller::new(
        Box::new(Sim::new(Scenario::default_fleet(), t0)),
        Duration::from_secs(1),
    )
    .with_collectors(Collectors::DEFAULT.with(Processes))
    .with_pod_labels(true);
    let mut p = settled(&mut c, defaults(), bounds(), t0).0;
    let mut s = (*p.snapshot).clone();
    s.kubernetes.kubelet = Some(Kubelet {
        last_success: Some(t0),
        dra: vec![DraDevice {
            namespace: "ml".into(),
            pod: "p".into(),
            device: "gpu-0".into(),
            ..DraDevice::default()
        }],
        ..Kubelet::default()
    });
    p.snapshot = Arc::new(s);
    Context {
        latest: Arc::new(Latest::new(p)),
        ..context(1)
    }
}

#[test]
fn our_request_path_allocates_nothing_after_warm_up() {
    let _turn = turn();
    // Rendered live (no cache), and with the families cached per snapshot
    // as the server keeps them; filtered scrapes render either way.
    let runs: [(usize, fn() -> Context); 3] =
        [(1, || context(1)), (64, || context(64)), (4, attributed)];
    for ((gpus, make), cached) in runs.iter().flat_map(|r| [(r, false), (r, true)]) {
        let requests: Vec<String> = (0..KINDS).map(request).collect();
        let mut out = Vec::new();
        let mut gzip = Compressor::default();
        let routes = match cached {
            false => Routes::uncached(make()),
            true => Routes::new(make()),
        };
        let mut go = |r: &str, out: &mut Vec<u8>| match cached {
            false => answer(r.as_bytes(), &routes, out).unwrap(),
            true => respond(
                r.as_bytes(),
                &routes,
                Policy::default(),
                Some(&mut gzip),
                out,
            )
            .unwrap(),
        };
        for r in &requests {
            go(r, &mut out);
        }
        let mut bytes = 0;
        let allocations = count(|| {
            for i in 0..10_000 {
                let a = go(&requests[i % KINDS], &mut out);
                bytes += a.parts(&out).iter().map(|p| p.len()).sum::<usize>();
            }
        });
        assert_eq!(
            allocations, 0,
            "{gpus} GPUs, cached {cached}: our code allocated"
        );
        assert!(bytes > 10_000 * 100);
    }
}

#[test]
fn gzipped_answers_allocate_nothing_after_warm_up() {
    let _turn = turn();
    for gpus in [8, 64] {
        let routes = Routes::new(context(gpus));
        let requests: Vec<String> = (0..KINDS)
            .map(|i| request(i).replace("Host: x\r\n", "Host: x\r\nAccept-Encoding: gzip\r\n"))
            .collect();
        let mut out = Vec::new();
        let mut gzip = Compressor::default();
        let mut go = |r: &str, out: &mut Vec<u8>| {
            respond(
                r.as_bytes(),
                &routes,
                Policy::default(),
                Some(&mut gzip),
                out,
            )
            .unwrap()
        };
        // Both buffers grow to the largest body: they swap roles.
        for _ in 0..3 {
            for r in &requests {
                go(r, &mut out);
            }
        }
        let mut gzipped = 0;
        let allocations = count(|| {
            for i in 0..2_000 {
                gzipped += usize::from(go(&requests[i % KINDS], &mut out).gzipped);
            }
        });
        assert_eq!(allocations, 0, "{gpus} GPUs: gzip allocated");
        assert!(gzipped >= 1_000, "{gzipped}");
    }
}

/// The body of a response in `out[range]`, gunzipped when it is.
fn body_of(out: &[u8], a: &Answer) -> Vec<u8> {
    use std::io::Read;
    let r = &a.parts(out).concat();
    let at = r.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    if !a.gzipped {
        return r[at..].to_vec();
    }
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&r[at..])
        .read_to_end(&mut plain)
        .unwrap();
    plain
}

/// The snapshot's families in a body: what comes before the exporter's own,
/// whose values (the snapshot's age) move with every scrape.
fn families(body: &[u8]) -> &[u8] {
    let own = b"# HELP gpu_exporter_build";
    let at = body.windows(own.len()).position(|w| w == own).unwrap();
    &body[..at]
}

#[test]
fn cached_families_are_a_fresh_render_and_follow_every_new_snapshot() {
    // Its allocations would count in the whole-process tests.
    let _turn = turn();
    let latest = Arc::new(Latest::new(published(8)));
    let (cached, uncached) = (
        Routes::new(answering(latest.clone())),
        Routes::uncached(answering(latest.clone())),
    );
    let t0 = 1.8e9 + 100.0;
    let mut poller = Poller::new(Box::new(Sim::new(scenario(8), t0)), Duration::from_secs(1));
    let gz = "Accept-Encoding: gzip\r\n";
    let requests = [
        "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_string(),
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{OPENMETRICS}\r\n"),
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{gz}\r\n"),
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{gz}{OPENMETRICS}\r\n"),
    ];
    let mut gzip = Compressor::default();
    let (mut out, mut fresh) = (Vec::new(), Vec::new());
    let mut before: Vec<Vec<u8>> = vec![Vec::new(); requests.len()];
    for round in 0..4 {
        if round > 0 {
            let s = poller.collect_at(t0 + f64::from(round) * 7.0);
            latest.set_snapshot(Arc::new(s));
        }
        // Twice a snapshot: the second scrape is served from the cache.
        for _ in 0..2 {
            for (i, r) in requests.iter().enumerate() {
                let a = respond(
                    r.as_bytes(),
                    &cached,
                    Policy::default(),
                    Some(&mut gzip),
                    &mut out,
                );
                let a = a.unwrap();
                assert_eq!(a.gzipped, i >= 2);
                let got = body_of(&out, &a);
                let f = answer(r.as_bytes(), &uncached, &mut fresh).unwrap();
                let want = body_of(&fresh, &f);
                assert_eq!(
                    families(&got),
                    families(&want),
                    "round {round}, request {i}"
                );
                assert!(got.len() > 10_000);
                if round > 0 {
                    // A new snapshot is never served from the old render.
                    assert_ne!(families(&got), &before[i][..], "round {round}, request {i}");
                }
            }
        }
        for (i, r) in requests.iter().enumerate() {
            let f = answer(r.as_bytes(), &uncached, &mut fresh).unwrap();
            before[i] = families(&body_of(&fresh, &f)).to_vec();
        }
    }
}

/// Serves on a thread of its own, left to end with the test process: a
/// timer to stop it by would itself be an allocation on every reactor
/// turn (see `http::deadline`).
fn serve(gpus: usize) -> String {
    serve_guarded(gpus, Guard::new(Arc::default(), false))
}

fn serve_guarded(gpus: usize, guard: Guard) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let routes = Box::new(Routes::new(context(gpus)));
        let server = Rc::new(Server::new(routes, Limits::default(), guard));
        let listener = async_io::Async::new(listener).unwrap();
        let ex = smol::LocalExecutor::new();
        smol::block_on(ex.run(http::accept::serve(&ex, listener, server, false)));
    });
    addr
}

/// Allocations the whole process (the server thread, async-io's own
/// thread, everything but this client) makes per keep-alive request, once
/// warm. Which thread runs the reactor varies, so only the process-wide
/// count is steady.
fn process_allocations(gpus: usize, n: usize) -> f64 {
    exclude_this_thread();
    let addr = serve(gpus);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = Vec::with_capacity(1 << 20);
    let mut round = |i: usize, s: &mut TcpStream| {
        s.write_all(request(i).as_bytes()).unwrap();
        read_response_into(s, &mut buf, i % KINDS == 2);
    };
    for i in 0..500 {
        round(i, &mut s);
    }
    let total = count_process(|| {
        for i in 0..n {
            round(i, &mut s);
        }
    });
    total as f64 / n as f64
}

#[test]
fn the_whole_process_allocates_a_small_constant_per_request() {
    let _turn = turn();
    let small = process_allocations(1, 10_000);
    let large = process_allocations(64, 10_000);
    println!("allocations per request, whole process: 1 GPU {small:.3}, 64 GPUs {large:.3}");
    // async-io's react() builds a waker Vec on each turn that wakes a task:
    // measured 1.03. (Its timer map would add one a turn while any
    // async-io Timer is pending; the deadlines keep none pending.)
    assert!(small <= 3.0, "{small} per request with 1 GPU");
    assert!(large <= 3.0, "{large} per request with 64 GPUs");
    // It does not grow with the fleet or the body (a few hundred KB here)
    // beyond the reactor's turns: a body that fills the socket's buffer
    // partway is written over more turns, each waking the task once more
    // (64 GPUs measured 1.03 to 1.62 on a loaded machine; 1 GPU 1.03).
    assert!(large <= small + 1.0, "{large} (64 GPUs) vs {small} (1 GPU)");
}

#[test]
fn accepting_a_connection_allocates_a_bounded_amount() {
    let _turn = turn();
    exclude_this_thread();
    let addr = serve(1);
    let mut buf = Vec::with_capacity(1 << 16);
    let mut one = || {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request(4).as_bytes()).unwrap();
        read_response_into(&mut s, &mut buf, false);
    };
    for _ in 0..50 {
        one();
    }
    let per = count_process(|| {
        for _ in 0..1000 {
            one();
        }
    }) as f64
        / 1000.0;
    println!("allocations per connection (accept, one request, close): {per:.2}");
    // Measured 5 to 8 (the task, its registration, the reactor's wakes),
    // by how the close races the next wake-up; the bound is what matters:
    // it does not grow with anything.
    assert!(per <= 12.0, "{per} per connection");
}

#[cfg(feature = "tls")]
/// Allocations per request over TLS, whole process, for `request` on a
/// kept-alive connection: and the TLS records each response took.
fn tls_allocations(dir: &std::path::Path, gpus: usize, request: &str, tls12: bool) -> (f64, usize) {
    exclude_this_thread();
    let web = pki::web_config(
        dir,
        "alloc-web.yml",
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n",
    );
    let (_watch, loaded) =
        webconfig::Watch::start(&web, gpu_exporter::config::BCRYPT_MAX_COST).unwrap();
    let shared = Arc::new(Shared::default());
    shared.publish(loaded);
    let addr = serve_guarded(gpus, Guard::new(shared, false));
    let config = tls_client::config(dir, None, tls12);
    let mut c = tls_client::Client::connect(addr.parse().unwrap(), config);
    let mut buf = Vec::with_capacity(1 << 20);
    for _ in 0..200 {
        c.exchange(request.as_bytes(), &mut buf, false);
    }
    let records = buf.len().div_ceil(16 * 1024);
    let n = 2_000;
    let total = count_process(|| {
        for _ in 0..n {
            c.exchange(request.as_bytes(), &mut buf, false);
        }
    });
    (total as f64 / n as f64, records)
}

#[cfg(feature = "tls")]
#[test]
fn over_tls_the_process_allocates_at_most_3_plus_2_per_record() {
    let Some(dir) = pki::pki() else { return };
    let _turn = turn();
    let plain = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    let gzip = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n";
    for tls12 in [false, true] {
        for (what, request) in [("plain", plain), ("gzip", gzip)] {
            let (per, records) = tls_allocations(dir, 8, request, tls12);
            let version = if tls12 { "TLS 1.2" } else { "TLS 1.3" };
            println!(
                "{version}, 8 GPUs {what}: {per:.2} allocations per request, {records} records"
            );
            assert!(
                per <= 3.0 + 2.0 * records as f64,
                "{version} {what}: {per} per request for {records} records"
            );
        }
    }
}
