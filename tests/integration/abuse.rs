//! Adversarial clients against the real binary: slowloris, idle floods,
//! clients that never read, half-closed and reset connections, pipelined
//! bursts, connection churn past the cap, strict request lines and Host,
//! SIGTERM with blocked writers and reloads from a FIFO. Every loop is
//! bounded in count and time, and everything is on loopback.

use crate::common::{
    BIN, Exporter, big_fleet, closed_after, exchange, never_reader, probe, read_response, send,
    temp_file, value,
};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const STALLED: &str = "gpu_exporter_http_connections_evicted_total{reason=\"stalled_write\"}";
const HEADS: &str = "gpu_exporter_http_connections_evicted_total{reason=\"incomplete_head\"}";

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
fn the_cap_full_of_slowloris_still_serves_a_fast_client() {
    let e = Exporter::start(&["--web.max-connections", "20", "--web.header-timeout", "60s"]);
    let mut slow: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut s = e.connect();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            // One after another, so that which is oldest is plain (the
            // server dates a head from when it reads its first bytes).
            std::thread::sleep(Duration::from_millis(10));
            s
        })
        .collect();
    // Let the server read the partial heads.
    std::thread::sleep(Duration::from_secs(1));
    // A client that sends its whole head at once takes the place of the
    // oldest incomplete one, and is served on and on.
    let mut fast = e.connect();
    for _ in 0..5 {
        send(&mut fast, "GET", "/healthz", &[]);
        assert_eq!(read_response(&mut fast, true).status, 200);
    }
    send(&mut fast, "GET", "/metrics", &[]);
    let body = read_response(&mut fast, true).body;
    assert_eq!(value(&body, HEADS), Some(1.0), "{body}");
    assert_eq!(
        value(&body, "gpu_exporter_http_connections_open"),
        Some(20.0)
    );
    // Exactly one was evicted, the oldest, and it heard why: its 503 was
    // written before the fast client was admitted. The others still wait
    // for their heads.
    let evicted: Vec<usize> = slow
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.set_nonblocking(true).unwrap();
            let peeked = s.peek(&mut [0u8; 1]);
            s.set_nonblocking(false).unwrap();
            matches!(peeked, Ok(n) if n > 0)
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(evicted, [0], "evicted, oldest first");
    let r = read_response(&mut slow[0], true);
    assert_eq!((r.status, r.header("Retry-After")), (503, Some("1")));
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(closed_within(&mut slow[0], Duration::from_secs(3)));
}

#[test]
fn a_cap_full_of_silent_connections_wakes_accept_when_one_becomes_evictable() {
    // A header timeout far past the read timeout: nothing closes on its
    // own while the test runs, so only the silent connections' becoming
    // evictable (after a second) can let the newcomer in.
    let e = Exporter::start(&["--web.max-connections", "20", "--web.header-timeout", "60s"]);
    let mut silent: Vec<TcpStream> = (0..20).map(|_| e.connect()).collect();
    // Accepted, but not a second old yet: nothing is evictable.
    let mut fresh = e.connect();
    send(&mut fresh, "GET", "/metrics", &[]);
    // read_response fails after connect()'s 10 s read timeout.
    let body = read_response(&mut fresh, true).body;
    assert_eq!(value(&body, HEADS), Some(1.0), "{body}");
    // The oldest silent one made room, and heard why.
    let r = read_response(&mut silent[0], true);
    assert_eq!((r.status, r.header("Retry-After")), (503, Some("1")));
}

#[test]
fn a_kept_alive_scraper_outlives_a_burst_of_silent_connections() {
    let e = Exporter::start(&["--web.max-connections", "20", "--web.header-timeout", "60s"]);
    // A scraper's kept-alive connection, idle after its first scrape and
    // older than any of the burst.
    let mut scraper = e.connect();
    send(&mut scraper, "GET", "/healthz", &[]);
    assert_eq!(read_response(&mut scraper, true).status, 200);
    let mut silent: Vec<TcpStream> = (0..19).map(|_| e.connect()).collect();
    std::thread::sleep(Duration::from_millis(1200));
    // The cap is full: a newcomer takes a silent one's place, the oldest.
    let mut fresh = e.connect();
    send(&mut fresh, "GET", "/healthz", &[]);
    assert_eq!(read_response(&mut fresh, true).status, 200);
    let r = read_response(&mut silent[0], true);
    assert_eq!((r.status, r.header("Retry-After")), (503, Some("1")));
    // The scraper's connection is still open and answers.
    send(&mut scraper, "GET", "/healthz", &[]);
    assert_eq!(read_response(&mut scraper, true).status, 200);
}

#[test]
fn a_full_house_of_answering_connections_queues_newcomers() {
    let fleet = big_fleet();
    let e = Exporter::start(&[
        "--sim.scenario",
        &fleet,
        "--web.max-connections",
        "4",
        "--web.max-requests",
        "8",
        "--web.write-timeout",
        "60s",
        // No new snapshot while they wait: it would close those that
        // stopped reading (the next test).
        "--collect.interval",
        "1h",
    ]);
    let mut stuck: Vec<TcpStream> = (0..4).map(|_| never_reader(&e)).collect();
    std::thread::sleep(Duration::from_millis(500));
    // Every connection is answering: none may be evicted. The newcomer
    // waits in the kernel's queue, neither answered nor closed.
    let mut s = e.connect();
    send(&mut s, "GET", "/healthz", &[]);
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let waited = s.peek(&mut [0u8; 1]);
    assert!(
        waited.as_ref().is_err_and(|e| matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )),
        "{waited:?}"
    );
    // A client that never read leaves: the newcomer takes its place.
    drop(stuck.pop());
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let r = read_response(&mut s, true);
    assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
    e.wait_log("accepting paused", Duration::from_secs(5));
    send(&mut s, "GET", "/metrics", &[]);
    let body = read_response(&mut s, true).body;
    let paused = value(&body, "gpu_exporter_http_accept_paused_seconds_total");
    assert!(paused.is_some_and(|p| p > 0.0), "{body}");
    assert_eq!(value(&body, STALLED), Some(0.0));
}

#[test]
fn clients_that_stopped_reading_pin_no_old_snapshot() {
    let fleet = big_fleet();
    let e = Exporter::start(&["--sim.scenario", &fleet, "--web.write-timeout", "60s"]);
    // Write-blocked on the body they share, with slots to spare.
    // (With no new snapshot they stay: the test before.)
    let stuck: Vec<TcpStream> = (0..4).map(|_| never_reader(&e)).collect();
    // A scrape of a newer snapshot closes them before it renders: they
    // have not read for a second, and hold an older one's families.
    e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, STALLED).is_some_and(|n| n >= 4.0)
    });
    for mut s in stuck {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = vec![0u8; 1 << 20];
        let end = loop {
            match s.read(&mut sink) {
                Ok(0) => break None,
                Ok(_) => {}
                Err(e) => break Some(e.kind()),
            }
        };
        // Closed (or reset over the bytes it never read), not still open.
        use std::io::ErrorKind::{TimedOut, WouldBlock};
        assert!(!matches!(end, Some(TimedOut | WouldBlock)), "{end:?}");
    }
}

#[test]
fn write_blocked_responses_never_keep_a_scrape_out() {
    let fleet = big_fleet();
    let e = Exporter::start(&[
        "--sim.scenario",
        &fleet,
        "--web.write-timeout",
        "3s",
        "--web.max-requests",
        "2",
    ]);
    let baseline = e.open_fds();
    let before = e.fd_targets();
    // Twice as many write-blocked responses as there are slots.
    let stuck: Vec<TcpStream> = (0..4).map(|_| never_reader(&e)).collect();
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..3 {
        let r = e.get("/healthz", &[]);
        assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
        scrape_ok(&e);
    }
    // The slots the blocked responses held beyond the two were taken back.
    e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, STALLED).is_some_and(|n| n >= 2.0)
    });
    // The write timeout closes the rest (checked on the server's side:
    // reading here would unblock its writes).
    let deadline = Instant::now() + Duration::from_secs(10);
    while e.open_fds() > baseline {
        assert!(
            Instant::now() < deadline,
            "stuck clients stayed open: {:?}, before {before:?}",
            e.fd_targets()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(stuck);
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

#[test]
fn churn_at_four_times_the_cap_keeps_the_socket_bound_and_answers_all() {
    const CAP: usize = 16;
    const CLIENTS: usize = 4 * CAP;
    const EACH: usize = 25;
    // No collections during the churn: they open /proc files.
    let e = Exporter::start(&["--web.max-connections", "16", "--collect.interval", "1h"]);
    scrape_ok(&e);
    std::thread::sleep(Duration::from_millis(300));
    let baseline = e.open_fds();
    let done = AtomicBool::new(false);
    let (peak, ok, refused) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(e.open_fds(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| {
                scope.spawn(|| {
                    for _ in 0..EACH {
                        // A new connection each time; a silent close fails
                        // read_response ("closed before a response").
                        let mut s = e.connect();
                        send(&mut s, "GET", "/metrics", &[]);
                        let r = read_response(&mut s, true);
                        match r.status {
                            200 => assert!(r.body.contains("gpu_up{")),
                            503 => assert_eq!(r.header("Retry-After"), Some("1")),
                            other => panic!("status {other}: {}", r.body),
                        }
                        let n = if r.status == 200 { &ok } else { &refused };
                        n.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for c in clients {
            c.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
    });
    let (ok, refused) = (ok.into_inner(), refused.into_inner());
    let peak = peak.into_inner();
    println!("{ok} answered, {refused} refused; fds peaked at {peak}, {baseline} idle");
    assert_eq!(ok + refused, CLIENTS * EACH);
    // The cap, and the one connection the accept loop holds while it
    // makes room.
    assert!(
        peak <= baseline + CAP + 1,
        "fds peaked at {peak}, {baseline} idle"
    );
    assert!(peak > baseline, "the sampler saw no connection");
}

#[test]
fn request_lines_and_hosts_are_held_to_http_1_1() {
    let e = Exporter::start(&[]);
    let addr = e.addr.to_string();
    // Absolute-form: routed by its path, its authority standing for Host.
    let absolute = format!("GET http://{addr}/metrics HTTP/1.1\r\n\r\n");
    let (r, closed) = exchange(&e, absolute.as_bytes());
    assert_eq!((r.status, closed), (200, false));
    assert!(r.body.contains("gpu_up{"));
    let other = b"GET https://elsewhere.example/healthz?x HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(closed_after(&e, other), (200, false));
    // HTTP/1.x, x > 1, is HTTP/1.1: kept alive, answered as 1.1.
    let (r, closed) = exchange(&e, b"GET /healthz HTTP/1.2\r\nHost: x\r\n\r\n");
    assert_eq!((r.status, r.body.as_str(), closed), (200, "ok\n", false));
    assert_eq!(
        closed_after(&e, b"GET /healthz HTTP/1.0\r\n\r\n"),
        (200, true)
    );
    for bad in [
        &b"GET /healthz HTTP/1.1\r\n\r\n"[..],
        b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: user@a\r\n\r\n",
        b"GET http://user@a/healthz HTTP/1.1\r\n\r\n",
        b"GET ftp://a/healthz HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET * HTTP/1.1\r\nHost: a\r\n\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET /healthz HTTP/2.0\r\nHost: a\r\n\r\n",
    ] {
        let shown = String::from_utf8_lossy(bad);
        assert_eq!(closed_after(&e, bad), (400, true), "{shown}");
    }
    for other in [
        &b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"[..],
        b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
    ] {
        let (r, closed) = exchange(&e, other);
        assert_eq!((r.status, closed), (405, true));
        assert_eq!(r.header("Allow"), Some("GET, HEAD"));
    }
    scrape_ok(&e);
}

/// A stop waits for clients that read, not for those that stopped: 200
/// clients that pipeline and never read are closed at once (their writes
/// have been blocked for longer than the stop's patience), so the exit
/// comes before the grace period runs out, which it would otherwise use
/// whole (and the log would say so).
#[test]
fn sigterm_with_pipelining_never_readers_exits_before_the_grace() {
    let fleet = big_fleet();
    let mut e = Exporter::start(&["--sim.scenario", &fleet, "--web.write-timeout", "30s"]);
    let _stuck: Vec<TcpStream> = (0..200).map(|_| never_reader(&e)).collect();
    // Their writes block; a scrape still gets through them.
    std::thread::sleep(Duration::from_millis(500));
    scrape_ok(&e);
    let t = Instant::now();
    e.signal("TERM");
    let status = e.wait_exit(Duration::from_secs(3)).expect("exited");
    let took = t.elapsed();
    assert_eq!(status.code(), Some(0));
    let log = e.log();
    assert!(!log.contains("still in flight"), "{log}");
    assert!(took < Duration::from_millis(800), "{took:?}");
}

/// A client that pipelines and never reads gets only what fits the
/// exporter's bound on what a client may leave unread (256 KiB), not
/// what the kernel's buffers would take: 50 gzipped 64-GPU scrapes
/// (each one counted as it is rendered) all went into the kernel before,
/// where now a few do. Once it reads, the rest follow, in order.
#[test]
fn a_never_reader_gets_no_next_response_before_it_reads() {
    const ASKED: usize = 50;
    const GZIPPED: &str = "gpu_exporter_http_gzipped_responses_total";
    let fleet = big_fleet();
    // No new snapshot while it waits: that would close it (see above).
    let args = ["--sim.scenario", &fleet, "--collect.interval", "1h"];
    let e = Exporter::start(&[&args[..], &["--web.write-timeout", "60s"]].concat());
    let mut s = e.connect();
    let ask = "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n";
    s.write_all(ask.repeat(ASKED).as_bytes()).unwrap();
    let mut raw = Vec::new();
    // How many it answered without being read, once it stops answering.
    let (mut seen, mut since, started) = (0.0, Instant::now(), Instant::now());
    let rendered = loop {
        let n = value(&e.metrics(None).body, GZIPPED).unwrap();
        if n != seen {
            (seen, since) = (n, Instant::now());
        } else if since.elapsed() > Duration::from_secs(1) {
            break n as usize;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{n} and counting"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let head = crate::response::read_response_into(&mut s, &mut raw, false);
    let body = raw.len() - head;
    // The bound and what the client's receive buffer holds, and the
    // response that passed the bound.
    let held = rustix::net::sockopt::socket_recv_buffer_size(&s).unwrap();
    let most = (256 * 1024 + held) / body + 2;
    println!("{rendered} of {ASKED} answered unread ({body}-byte bodies), at most {most}");
    assert!(
        rendered >= 1 && rendered <= most,
        "{rendered} answered unread"
    );
    assert!(
        most < ASKED / 2,
        "{body}-byte bodies: the bound says little"
    );
    for _ in 1..ASKED {
        let head = crate::response::read_response_into(&mut s, &mut raw, false);
        assert!(raw.starts_with(b"HTTP/1.1 200 OK"), "{:?}", &raw[..head]);
    }
    assert_eq!(value(&e.metrics(None).body, GZIPPED), Some(ASKED as f64));
}

/// The probe listener has connections of its own: a metrics port whose
/// every connection is answering a client that does not read (none can be
/// evicted) leaves `/healthz` answered at once, where a shared cap would
/// hold it for the write timeout.
#[test]
fn probes_never_queue_behind_the_metrics_ports_cap() {
    let fleet = big_fleet();
    let e = Exporter::start(&[
        "--sim.scenario",
        &fleet,
        "--web.max-connections",
        "8",
        "--web.write-timeout",
        "60s",
        "--web.probe-address",
        "127.0.0.1:0",
    ]);
    let _stuck: Vec<TcpStream> = (0..8).map(|_| never_reader(&e)).collect();
    std::thread::sleep(Duration::from_millis(500));
    // The metrics port is full: a newcomer waits there.
    let mut waiting = e.connect();
    send(&mut waiting, "GET", "/healthz", &[]);
    waiting
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    assert!(
        waiting.read(&mut [0u8; 1]).is_err(),
        "the metrics port is full"
    );
    for _ in 0..20 {
        assert_eq!(probe(&e, "/healthz").map(|p| p.0), Some(200), "{}", e.log());
    }
}

/// Replaces `path` with a FIFO that nothing ever writes.
fn fifo(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    let mode = rustix::fs::Mode::from_raw_mode(0o600);
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, mode, 0).unwrap();
}

#[test]
fn reloads_refuse_a_fifo_and_a_huge_file_without_stopping_anything() {
    let rules = temp_file("reload-rules.json", r#"{"rules":[]}"#);
    let mut e = Exporter::start(&["--rules.file", rules.to_str().unwrap()]);
    // A FIFO with no writer: reading it would wait forever.
    fifo(&rules);
    e.signal("HUP");
    e.wait_log(
        "a FIFO, not a regular file; refused unread",
        Duration::from_secs(10),
    );
    assert_eq!(e.get("/healthz", &[]).status, 200);
    scrape_ok(&e);
    // Over the 1 MiB limit: refused too, the old rules kept.
    std::fs::remove_file(&rules).unwrap();
    std::fs::write(&rules, format!("{{\"rules\":[]{}}}", " ".repeat(2 << 20))).unwrap();
    e.signal("HUP");
    e.wait_log("over the limit of 1048576", Duration::from_secs(10));
    scrape_ok(&e);
    let t = Instant::now();
    e.signal("TERM");
    let status = e.wait_exit(Duration::from_secs(3)).expect("exited");
    assert_eq!(status.code(), Some(0), "{:?}", t.elapsed());
    // At start, either is a bad flag: exit code 2, one line.
    let startup = rules.with_file_name("startup-fifo.json");
    fifo(&startup);
    let out = Command::new(BIN)
        .args(["--source", "sim", "--once", "--rules.file"])
        .arg(&startup)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--rules.file") && err.contains("a FIFO"),
        "{err}"
    );
}
