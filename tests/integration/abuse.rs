//! Adversarial clients against the real binary: slowloris, idle floods,
//! clients that never read, half-closed and reset connections, pipelined
//! bursts and connection churn. Every loop is bounded in count and time.

use crate::common::{Exporter, read_response, send, temp_file};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

fn scrape_ok(e: &Exporter) {
    let t = Instant::now();
    let r = e.metrics(None);
    assert_eq!(r.status, 200);
    assert!(r.body.contains("gpu_up{"));
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "scrape took {:?}",
        t.elapsed()
    );
}

/// Whether the server has closed `s` (EOF or reset), waiting at most `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 65536];
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                return false;
            }
            Err(_) => return true,
        }
    }
    false
}

#[test]
fn slowloris_is_cut_off_while_scrapes_go_on() {
    let e = Exporter::start(&["--web.header-timeout", "2s"]);
    let mut slow: Vec<TcpStream> = (0..50).map(|_| e.connect()).collect();
    for s in &mut slow {
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
    }
    // One more header line a second: never a whole head.
    let start = Instant::now();
    for i in 0..3 {
        for s in &mut slow {
            let _ = s.write_all(format!("X-Slow-{i}: y\r\n").as_bytes());
        }
        scrape_ok(&e);
        std::thread::sleep(Duration::from_millis(700));
    }
    for s in &mut slow {
        assert!(
            closed_within(s, Duration::from_secs(3)),
            "a slow connection stayed open"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(8));
    scrape_ok(&e);
}

#[test]
fn idle_connections_never_lock_out_a_scrape() {
    let e = Exporter::start(&[]);
    let idle: Vec<TcpStream> = (0..500).map(|_| e.connect()).collect();
    scrape_ok(&e);
    drop(idle);

    // At a small cap, a new connection closes the oldest idle one.
    let e = Exporter::start(&["--web.max-connections", "20"]);
    let mut kept: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = e.connect();
            send(&mut s, "GET", "/healthz", &[]);
            assert_eq!(read_response(&mut s, true).status, 200);
            s
        })
        .collect();
    // Five new connections, held open: each makes room by closing one.
    let _new: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut s = e.connect();
            send(&mut s, "GET", "/metrics", &[]);
            assert_eq!(read_response(&mut s, true).status, 200);
            s
        })
        .collect();
    let closed = kept
        .iter_mut()
        .filter_map(|s| closed_within(s, Duration::from_millis(200)).then_some(()))
        .count();
    assert_eq!(closed, 5, "the five oldest idle connections made room");
}

#[test]
fn a_full_house_of_busy_connections_gets_503() {
    let e = Exporter::start(&["--web.max-connections", "4", "--web.header-timeout", "5s"]);
    // Four connections mid-request: busy, not idle.
    let busy: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = e.connect();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut s = e.connect();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    assert!(text.ends_with("too many open connections\n"), "{text}");
    drop(busy);
    std::thread::sleep(Duration::from_millis(300));
    scrape_ok(&e);
}

/// A scenario of 64 GPUs: a few hundred KB per scrape, to fill socket
/// buffers quickly.
fn big_fleet() -> String {
    let gpus = vec!["{}"; 64].join(",");
    let path = temp_file("big.json", &format!(r#"{{"gpus":[{gpus}]}}"#));
    path.to_str().unwrap().to_string()
}

#[test]
fn clients_that_never_read_are_dropped_and_cap_in_flight_requests() {
    let fleet = big_fleet();
    let e = Exporter::start(&[
        "--sim.scenario",
        &fleet,
        "--web.write-timeout",
        "2s",
        "--web.max-requests",
        "2",
    ]);
    let baseline = e.open_fds();
    let before = e.fd_targets();
    let burst = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(600);
    let stuck: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = e.connect();
            s.write_all(burst.as_bytes()).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Two responses are stuck being written: a third request gets 503 at
    // once.
    let r = e.get("/healthz", &[]);
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.body, "too many requests in flight\n");
    assert!(e.open_fds() >= baseline + 2);
    // The write timeout closes the clients that never read (checked on the
    // server's side: reading here would unblock its writes).
    let deadline = Instant::now() + Duration::from_secs(8);
    while e.open_fds() > baseline {
        assert!(
            Instant::now() < deadline,
            "stuck clients stayed open: {:?}, before {before:?}",
            e.fd_targets()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(stuck);
    assert_eq!(e.get("/healthz", &[]).status, 200);
    scrape_ok(&e);
}

#[test]
fn half_closed_and_reset_connections() {
    let e = Exporter::start(&[]);
    // Half-closed: the request arrives, then the client's end of stream;
    // the answer still comes, then the close.
    let mut s = e.connect();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(
        text.starts_with("HTTP/1.1 200 OK") && text.ends_with("ok\n"),
        "{text}"
    );
    // Reset mid-request and mid-response: the server shrugs.
    for _ in 0..20 {
        let mut s = e.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n")
            .unwrap();
        drop(s);
        let mut s = e.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut first = [0u8; 16];
        s.read_exact(&mut first).unwrap();
        drop(s);
    }
    scrape_ok(&e);
}

#[test]
fn a_pipelined_burst_is_answered_in_order() {
    let e = Exporter::start(&[]);
    let mut s = e.connect();
    let mut burst = String::new();
    for i in 0..100 {
        burst.push_str(match i % 3 {
            0 => "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            1 => "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
            _ => "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        });
    }
    s.write_all(burst.as_bytes()).unwrap();
    for i in 0..100 {
        let r = read_response(&mut s, i % 3 != 2);
        assert_eq!(r.status, [200, 404, 200][i % 3], "response {i}");
    }
    // Nothing more: no phantom response.
    assert!(!closed_within(&mut s, Duration::from_millis(300)));
}

#[test]
fn ten_thousand_connections_leak_no_descriptor() {
    let e = Exporter::start(&[]);
    scrape_ok(&e);
    let before = e.open_fds();
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..10_000 {
        let mut s = e.connect();
        if i % 2 == 0 {
            send(&mut s, "GET", "/healthz", &[("Connection", "close")]);
            assert_eq!(read_response(&mut s, true).status, 200);
        }
        assert!(Instant::now() < deadline, "churn took over a minute at {i}");
    }
    // Closed sockets are reaped as their tasks notice; give them a moment.
    let settle = Instant::now() + Duration::from_secs(5);
    while e.open_fds() > before && Instant::now() < settle {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        e.open_fds() <= before,
        "fds grew from {before} to {}",
        e.open_fds()
    );
}
