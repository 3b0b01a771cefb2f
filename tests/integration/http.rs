use crate::common::{Exporter, closed_after, read_response, send, temp_file};
use std::io::{Read, Write};
use std::time::Duration;

#[test]
fn routes() {
    let e = Exporter::start(&[]);
    let r = e.get("/", &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("Content-Type").unwrap().starts_with("text/html"));
    assert!(r.body.contains("href=\"/metrics\""));
    let r = e.get("/healthz", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
    let r = e.get("/readyz", &[]);
    assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
    assert_eq!(e.get("/nope", &[]).status, 404);
    assert_eq!(e.get("/metrics/", &[]).status, 404);
    let r = e.get("/metrics?debug=1&x", &[]);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("gpu_up{"));
}

#[test]
fn methods() {
    let e = Exporter::start(&[]);
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let mut s = e.connect();
        send(&mut s, method, "/metrics", &[("Content-Length", "0")]);
        let r = read_response(&mut s, true);
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("Allow"), Some("GET, HEAD"));
    }
    // HEAD: the same Content-Length as GET, and no body.
    let get = e.get("/healthz", &[]);
    let mut s = e.connect();
    send(&mut s, "HEAD", "/healthz", &[]);
    let head = read_response(&mut s, false);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("Content-Length"), get.header("Content-Length"));
    // The next bytes on the connection are the next response, not a body.
    send(&mut s, "GET", "/healthz", &[]);
    assert_eq!(read_response(&mut s, true).body, "ok\n");
}

#[test]
fn keep_alive_and_pipelining() {
    let e = Exporter::start(&[]);
    let mut s = e.connect();
    for _ in 0..3 {
        send(&mut s, "GET", "/metrics", &[]);
        let r = read_response(&mut s, true);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Connection"), None);
        assert_eq!(
            r.body.len(),
            r.header("Content-Length")
                .unwrap()
                .parse::<usize>()
                .unwrap()
        );
    }
    // Three requests in one write get three responses, in order.
    s.write_all(
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\nHEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    assert_eq!(read_response(&mut s, true).status, 200);
    assert_eq!(read_response(&mut s, true).status, 404);
    let head = read_response(&mut s, false);
    assert_eq!(head.status, 200);
    assert!(
        head.header("Content-Length")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            > 1000
    );
}

#[test]
fn connection_close_and_http10() {
    let e = Exporter::start(&[]);
    assert_eq!(
        closed_after(&e, b"GET /healthz HTTP/1.0\r\n\r\n"),
        (200, true)
    );
    assert_eq!(
        closed_after(
            &e,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ),
        (200, true)
    );
    // HTTP/1.0 with keep-alive stays open and says so.
    let mut s = e.connect();
    s.write_all(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, true);
    assert_eq!(r.header("Connection"), Some("keep-alive"));
    s.write_all(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s, true).status, 200);
}

#[test]
fn malformed_requests_get_400_and_close() {
    let e = Exporter::start(&[]);
    for req in [
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
        b"\x00\x00\x00\x00garbage\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET / HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 1\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\r\n folded\r\n\r\n",
    ] {
        // Exactly one response, then the close: no phantom second answer.
        assert_eq!(
            closed_after(&e, req),
            (400, true),
            "{}",
            String::from_utf8_lossy(req)
        );
    }
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9000));
    assert_eq!(closed_after(&e, long.as_bytes()), (414, true));
    let many = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", "X: y\r\n".repeat(65));
    assert_eq!(closed_after(&e, many.as_bytes()), (431, true));
}

/// A client still sending a request line far past the head limit reads
/// its 414: the server answers, stops sending and reads on (bounded)
/// before it closes, so no reset destroys the answer on its way.
#[test]
fn a_414_reaches_a_client_still_sending() {
    let e = Exporter::start(&[]);
    for _ in 0..5 {
        let mut s = e.connect();
        let mut w = s.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = w.write_all(b"GET /");
            let chunk = vec![b'a'; 64 * 1024];
            // 1 MiB, or until the server closes.
            for _ in 0..16 {
                if w.write_all(&chunk).is_err() {
                    break;
                }
            }
        });
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        writer.join().unwrap();
        assert!(
            got.starts_with(b"HTTP/1.1 414 URI Too Long"),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
    }
}

#[test]
fn telemetry_path_flag() {
    let e = Exporter::start(&["--web.telemetry-path", "/gpu/metrics"]);
    assert_eq!(e.get("/gpu/metrics", &[]).status, 200);
    assert_eq!(e.get("/metrics", &[]).status, 404);
    assert!(e.get("/", &[]).body.contains("href=\"/gpu/metrics\""));
}

#[test]
fn runbooks_are_served_where_the_relative_links_point() {
    let e = Exporter::start(&[]);
    // Alerts (and their links) show once the replayed history settles.
    let page = e.wait_for("/", Duration::from_secs(60), |b| b.contains("runbooks/"));
    let link = page
        .split("href=\"")
        .find_map(|s| s.split('"').next().filter(|l| l.contains("runbooks/")))
        .unwrap();
    let r = e.get(&format!("/{}", link.trim_start_matches('/')), &[]);
    assert_eq!(r.status, 200, "{link}");
    // Plain text, which a browser shows rather than downloads.
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert!(r.body.contains("Detect") && r.body.contains("Mitigate"));
    assert_eq!(e.get("/docs/runbooks/Nope.md", &[]).status, 404);
    assert_eq!(e.get("/docs/runbooks/../README.md", &[]).status, 404);
}

/// The status page runs no script and sniffs nothing; a web config's
/// headers of the same names win over ours, sent once.
#[test]
fn the_status_page_carries_its_policy_and_the_web_config_wins() {
    let e = Exporter::start(&[]);
    let page = e.get("/", &[]);
    assert_eq!(page.header("X-Content-Type-Options"), Some("nosniff"));
    let csp = page.header("Content-Security-Policy").unwrap_or_default();
    assert!(
        csp.starts_with("default-src 'none'; style-src 'sha256-") && !csp.contains("script"),
        "{csp}"
    );
    // A scrape's head stays as it was.
    let m = e.metrics(None);
    assert_eq!(m.header("Content-Security-Policy"), None);
    assert_eq!(m.header("X-Content-Type-Options"), None);
    drop(e);
    let config = crate::common::temp_file(
        "web-headers.yml",
        "http_server_config:\n  headers:\n    Content-Security-Policy: \"default-src 'self'\"\n",
    );
    let e = Exporter::start(&["--web.config.file", config.to_str().unwrap()]);
    let page = e.get("/", &[]);
    assert_eq!(
        page.header("Content-Security-Policy"),
        Some("default-src 'self'")
    );
    let policies = page
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("Content-Security-Policy"))
        .count();
    assert_eq!(policies, 1, "{:?}", page.headers);
    assert_eq!(page.header("X-Content-Type-Options"), Some("nosniff"));
}

#[test]
fn failure_reasons_show_no_paths_to_strangers() {
    // A library that is no library: the reason names its path.
    let lib = temp_file("not-a-library.so", "garbage");
    let lib = lib.to_str().unwrap();
    let e = Exporter::start(&["--source", "nvml", "--nvml.library", lib, "--xid.kmsg", ""]);
    let r = e.get("/readyz", &[]);
    assert_eq!(r.status, 503);
    assert!(r.body.contains("[path]"), "{}", r.body);
    let page = e.get("/", &[]).body;
    assert!(page.contains("last collection failed: [path]"), "{page}");
    for shown in [&r.body, &page] {
        assert!(!shown.contains(lib) && !shown.contains("/tmp"), "{shown}");
    }
    e.wait_log(&format!("{lib}: cannot load NVML"), Duration::from_secs(5));
}

/// A gzipped scrape is one gzip member: the snapshot's families (cached
/// once per snapshot) and the exporter's own, rendered per scrape, read
/// whole by a reader that stops after the first member (curl's and
/// browsers' do), its CRC-32 and length checked by that reader.
#[test]
fn a_gzipped_scrape_reads_whole_with_a_single_member_reader() {
    use std::io::Read;
    let e = Exporter::start(&[]);
    e.wait_first_collection();
    let families = |body: &str| -> Vec<String> {
        body.lines()
            .filter(|l| l.starts_with("# TYPE "))
            .map(str::to_string)
            .collect()
    };
    for accept in [None, Some("application/openmetrics-text;version=1.0.0")] {
        let plain = e.metrics(accept).body;
        // The first renders the families, the next take them from the cache.
        let mut ages = Vec::new();
        for _ in 0..3 {
            let mut s = e.connect();
            let mut headers = vec![("Accept-Encoding", "gzip")];
            headers.extend(accept.map(|a| ("Accept", a)));
            send(&mut s, "GET", "/metrics", &headers);
            let mut raw = Vec::new();
            let head = crate::response::read_response_into(&mut s, &mut raw, false);
            let head_text = std::str::from_utf8(&raw[..head]).unwrap();
            assert!(head_text.contains("Content-Encoding: gzip"), "{head_text}");
            let mut body = String::new();
            flate2::read::GzDecoder::new(&raw[head..])
                .read_to_string(&mut body)
                .unwrap();
            assert_eq!(families(&body), families(&plain), "{accept:?}");
            assert_eq!(body.ends_with("# EOF\n"), accept.is_some());
            assert!(body.contains("gpu_up{"));
            ages.push(crate::common::value(&body, "gpu_exporter_snapshot_age_seconds").unwrap());
            if accept.is_none() {
                crate::common::check_metrics(&body);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Rendered per scrape, never served from the cache: the age moves.
        assert!(ages.windows(2).any(|w| w[0] != w[1]), "{ages:?}");
    }
}
