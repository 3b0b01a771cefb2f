//! Ceilings on the release binary (`CARGO_BIN_EXE_*` is the debug build,
//! so these build and use the release one): its size, its peak memory
//! under load, and what an idle keep-alive connection costs.

use crate::common::{Exporter, temp_file};
use crate::image::release_binary;
use crate::response::read_response_into;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;

/// The default build's ceiling. It was 1 MiB before the hardware-health
/// collectors; the web-security issue owns the ceilings now: 1.85 MiB for
/// the default build (with TLS), so that the scratch image stays at most
/// 5 MiB, and 1 MiB for a build without default features.
const MAX_BINARY_BYTES: u64 = MIB * 185 / 100;

#[test]
fn the_release_binary_is_within_its_ceiling() {
    let size = std::fs::metadata(release_binary()).unwrap().len();
    println!("release binary: {size} bytes");
    assert!(size <= MAX_BINARY_BYTES, "{size} bytes");
}

fn eight_gpus() -> String {
    let gpus = ["{}"; 8].join(",");
    let path = temp_file("ceiling-8.json", &format!(r#"{{"gpus":[{gpus}]}}"#));
    path.to_str().unwrap().to_string()
}

/// Scrapes `/metrics` on a keep-alive connection until `left` runs out.
fn scraper(addr: String, left: Arc<AtomicUsize>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::with_capacity(1 << 17);
        let mut done = 0;
        while left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
        {
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            read_response_into(&mut s, &mut buf, false);
            done += 1;
        }
        done
    })
}

/// Runs `n` scrapes over 64 concurrent keep-alive connections.
pub fn load(e: &Exporter, n: usize) {
    let left = Arc::new(AtomicUsize::new(n));
    let threads: Vec<_> = (0..64)
        .map(|_| scraper(e.addr.to_string(), left.clone()))
        .collect();
    let done: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(done, n);
}

#[test]
fn peak_memory_stays_under_4_mib_and_flat_under_load() {
    let fleet = eight_gpus();
    let e = Exporter::start_binary(release_binary(), &["--sim.scenario", &fleet]);
    let started = Instant::now();
    load(&e, 10_000);
    let rss_first = e.status_kib("VmRSS");
    load(&e, 80_000);
    let rss_before_last = e.status_kib("VmRSS");
    load(&e, 10_000);
    let rss_last = e.status_kib("VmRSS");
    let hwm = e.status_kib("VmHWM");
    println!(
        "100,000 scrapes over 64 connections in {:?}: VmHWM {hwm} KiB, VmRSS {rss_first} KiB after the first 10,000, {rss_last} KiB after the last",
        started.elapsed()
    );
    assert!(hwm * 1024 <= 4 * MIB, "VmHWM {hwm} KiB");
    // Flat: a leak of anything per scrape would show in megabytes over
    // 100,000 scrapes of 50 KB. What remains is the allocator settling over
    // its first seconds (under 150 KiB, then level: benches/README.md).
    assert!(
        rss_last <= rss_first + 256,
        "RSS grew from {rss_first} to {rss_last} KiB"
    );
    assert!(
        rss_last <= rss_before_last + 64,
        "RSS grew from {rss_before_last} to {rss_last} KiB"
    );
}

#[test]
fn an_idle_keep_alive_connection_costs_about_2_kib() {
    let fleet = eight_gpus();
    let e = Exporter::start_binary(release_binary(), &["--sim.scenario", &fleet]);
    // Warm the buffer pools with one scrape first.
    assert_eq!(e.metrics(None).status, 200);
    let before = e.status_kib("VmRSS");
    let idle: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut s = e.connect();
            s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n").unwrap();
            let mut buf = [0u8; 256];
            let n = s.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let after = e.status_kib("VmRSS");
    let per = (after.saturating_sub(before)) as f64 * 1024.0 / idle.len() as f64;
    println!(
        "an idle keep-alive connection: {per:.0} bytes of RSS ({before} -> {after} KiB for 500)"
    );
    assert!(per <= 2560.0, "{per} bytes per idle connection");
    assert_eq!(e.metrics(None).status, 200);
}
