//! Scrape cost, measured side by side in one run:
//! - render time per scrape into a reused buffer, for 1, 8 and 64 GPUs;
//! - gzip: render plus compressing per scrape against render alone, and
//!   the cached design's per-scrape part (a copy of the families
//!   compressed once per snapshot plus a member of the values computed at
//!   render time), in process;
//! - end-to-end scrape latency over loopback through the real binary,
//!   next to a minimal blocking server sending the same bytes (the floor)
//!   and a minimal one on the exporter's runtime, async-io (the async-io
//!   floor: the runtime's share of the gap), and gzipped scrapes next to
//!   plain ones.
//!
//! `cargo bench --bench scrape` (`-- end-to-end` for that part alone).
//! Absolute times drift between machines; read the ratios.

// A test tells its scenario whole: clippy's bound on a function's
// length (the workspace's lints) is for the code that ships.
#![allow(clippy::too_many_lines)]
use exposition::{Format, Scrape};
use gpu_exporter_floor::Floor;
use http::gzip::Compressor;
use model::Collectors;
use model::Freshness;
use routes::cache::{Cache, Families};
use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/support/response.rs"]
mod response;
use response::read_response_into;

#[path = "../tests/support/fleet.rs"]
mod fleet;
use fleet::snapshot;

fn bench_render() {
    println!("render into a reused buffer (median of 5 runs)");
    for gpus in [1, 8, 64] {
        let s = snapshot(gpus);
        for format in [Format::Text, Format::OpenMetrics] {
            let mut buf = Vec::new();
            let now = Instant::now();
            Scrape {
                snapshot: &s,
                fresh: Default::default(),
                http: None,
                format,
                only: Collectors::ALL,
                now,
            }
            .render(&mut buf);
            let iters = 20_000 / gpus as u32 + 100;
            let mut runs: Vec<Duration> = (0..5)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..iters {
                        buf.clear();
                        Scrape {
                            snapshot: std::hint::black_box(&s),
                            fresh: Default::default(),
                            http: None,
                            format,
                            only: Collectors::ALL,
                            now,
                        }
                        .render(&mut buf);
                    }
                    t.elapsed() / iters
                })
                .collect();
            runs.sort();
            println!(
                "  {gpus:>2} GPUs {format:<12?} {:>9.2?}  {:>6} bytes",
                runs[2],
                buf.len()
            );
        }
    }
}

/// The median of 5 runs of `iters` calls of `f`, per call.
fn median(iters: u32, mut f: impl FnMut()) -> Duration {
    let mut runs: Vec<Duration> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed() / iters
        })
        .collect();
    runs.sort();
    runs[2]
}

fn bench_gzip() {
    println!("\ngzip per scrape, in process (median of 5 runs)");
    for gpus in [8, 64] {
        let s = snapshot(gpus);
        let now = Instant::now();
        let iters = 4_000 / gpus as u32 + 20;
        let (mut buf, mut gz) = (Vec::new(), Compressor::default());
        let mut cache = Cache::default();
        // Text 0.0.4 of every family into `buf`.
        let text = |buf: &mut Vec<u8>| {
            buf.clear();
            let fresh = Default::default();
            Scrape {
                snapshot: black_box(&s),
                fresh,
                http: None,
                format: Format::Text,
                only: Collectors::ALL,
                now,
            }
            .render(buf);
        };
        let plain = median(iters, || text(&mut buf));
        let body = buf.len();
        let gzipped = median(iters, || {
            text(&mut buf);
            gz.compress(&mut buf, 0);
        });
        let compressed = buf.len();
        // What the server does (`Cache::scrape`): the families
        // deflated once per snapshot, the exporter's own families rendered
        // and deflated per scrape into the same gzip member.
        let shared = std::sync::Arc::new(snapshot(gpus));
        let key = || Families::new(&shared, Freshness::default(), Format::Text, Collectors::ALL);
        let mut out = Vec::new();
        let per_scrape_cached = median(iters, || {
            out.clear();
            cache.scrape(
                &mut gz,
                key(),
                &mut out,
                |o| Scrape::of(&shared).render_shared(o),
                |o| {
                    Scrape {
                        now,
                        ..Scrape::of(&shared)
                    }
                    .render_live(o)
                },
            );
        });
        println!(
            "  {gpus:>2} GPUs: render {plain:>8.1?} | render + gzip {gzipped:>8.1?} ({:.2}x) | \
             cached families + the rest per scrape {per_scrape_cached:>8.1?} ({:.2}x) | \
             {body} -> {compressed} bytes ({:.1}x smaller; cached {} bytes)",
            gzipped.as_secs_f64() / plain.as_secs_f64(),
            per_scrape_cached.as_secs_f64() / plain.as_secs_f64(),
            body as f64 / compressed as f64,
            out.len(),
        );
    }
}

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Scrapes `/metrics` `n` times over a keep-alive connection; returns the
/// latencies.
fn scrape(s: &mut TcpStream, n: usize) -> Vec<Duration> {
    scrape_with(s, n, "")
}

/// [`scrape`] with header lines `headers`.
fn scrape_with(s: &mut TcpStream, n: usize, headers: &str) -> Vec<Duration> {
    let request = format!("GET /metrics HTTP/1.1\r\nHost: b\r\n{headers}\r\n");
    let mut buf = Vec::with_capacity(1 << 20);
    (0..n)
        .map(|_| {
            let t = Instant::now();
            s.write_all(request.as_bytes()).unwrap();
            read_response_into(s, &mut buf, false);
            t.elapsed()
        })
        .collect()
}

/// A floor in a process of its own, as the exporter is: this bench
/// again, `--serve KIND FILE`, answering with FILE's bytes. Between two
/// processes every wake-up switches address spaces, which a floor on a
/// thread of the bench never pays.
fn floor_process(
    kind: &str,
    response: &[u8],
    dir: &std::path::Path,
) -> (std::process::Child, String) {
    let file = dir.join(format!("response-{kind}"));
    std::fs::write(&file, response).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--serve", kind])
        .arg(&file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().to_string())
}

/// `--serve KIND FILE`: the floor of [`floor_process`], until its one
/// connection ends.
fn serve(kind: &str, file: &str) {
    let floor = Floor::parse(kind).expect("blocking, async or spawned");
    let (addr, thread) = floor.serve(std::fs::read(file).unwrap());
    println!("{addr}");
    let _ = thread.join();
}

fn bench_end_to_end() {
    let n = 3000;
    println!("\nend to end over loopback, {n} scrapes on one keep-alive connection");
    for gpus in [8, 64] {
        let dir = std::env::temp_dir().join(format!("gpu-exporter-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{gpus}.json"));
        std::fs::write(&path, fleet::json(gpus)).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_gpu-exporter"))
            .args(["--web.listen-address", "127.0.0.1:0", "--sim.scenario"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let addr = BufReader::new(child.stderr.take().unwrap())
            .lines()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split("serving GPU metrics on http://")
                    .nth(1)
                    .map(|u| u.split('/').next().unwrap().to_string())
            })
            .unwrap();
        // The floor serves one real response, byte for byte: one with the
        // GPUs in it, once the first collection is (64 take a while).
        let started = Instant::now();
        let response = loop {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut response = Vec::new();
            s.read_to_end(&mut response).unwrap();
            let response = String::from_utf8(response).unwrap();
            if response.contains("gpu_up{") {
                break response.replace("Connection: close\r\n", "");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no GPUs served"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let floor = Floor::Blocking.serve(response.clone().into_bytes()).0;
        let async_floor = Floor::AsyncIo.serve(response.clone().into_bytes()).0;
        let task_floor = Floor::Spawned.serve(response.clone().into_bytes()).0;
        let (mut own, own_floor) = floor_process("blocking", response.as_bytes(), &dir);
        let (mut own_async, own_async_floor) = floor_process("async", response.as_bytes(), &dir);
        let (mut a, mut b) = (connect(&addr), connect(&floor));
        let (mut c, mut z) = (connect(&async_floor), connect(&addr));
        let mut e = connect(&task_floor);
        let (mut f, mut g) = (connect(&own_floor), connect(&own_async_floor));
        const GZIP: &str = "Accept-Encoding: gzip\r\n";
        scrape(&mut a, 200);
        scrape(&mut b, 200);
        scrape(&mut c, 200);
        scrape(&mut e, 200);
        scrape(&mut f, 200);
        scrape(&mut g, 200);
        scrape_with(&mut z, 200, GZIP);
        // Alternate in tenths, so drift on a shared machine hits all alike.
        let (mut ours, mut base, mut runtime, mut gz) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut task, mut apart, mut async_apart) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..10 {
            ours.extend(scrape(&mut a, n / 10));
            base.extend(scrape(&mut b, n / 10));
            runtime.extend(scrape(&mut c, n / 10));
            task.extend(scrape(&mut e, n / 10));
            apart.extend(scrape(&mut f, n / 10));
            async_apart.extend(scrape(&mut g, n / 10));
            gz.extend(scrape_with(&mut z, n / 10, GZIP));
        }
        let all = [&mut ours, &mut base, &mut runtime, &mut task, &mut gz];
        for v in all.into_iter().chain([&mut apart, &mut async_apart]) {
            v.sort();
        }
        let p = |v: &[Duration], q: f64| v[((v.len() - 1) as f64 * q) as usize];
        let ratio =
            |x: &[Duration], y: &[Duration]| p(x, 0.5).as_secs_f64() / p(y, 0.5).as_secs_f64();
        println!(
            "  {gpus:>2} GPUs ({} bytes): exporter p50 {:>8.1?} p99 {:>8.1?} | floor p50 {:>8.1?} p99 {:>8.1?} | async-io floor p50 {:>8.1?} p99 {:>8.1?}",
            response.len(),
            p(&ours, 0.5),
            p(&ours, 0.99),
            p(&base, 0.5),
            p(&base, 0.99),
            p(&runtime, 0.5),
            p(&runtime, 0.99),
        );
        println!(
            "  {gpus:>2} GPUs p50 ratios: exporter / floor {:.2} | async-io floor / floor {:.2} | exporter / async-io floor {:.2}",
            ratio(&ours, &base),
            ratio(&runtime, &base),
            ratio(&ours, &runtime),
        );
        println!(
            "  {gpus:>2} GPUs as a LocalExecutor task: p50 {:>8.1?} p99 {:>8.1?} | / async-io floor {:.2} | exporter / it {:.2}",
            p(&task, 0.5),
            p(&task, 0.99),
            ratio(&task, &runtime),
            ratio(&ours, &task),
        );
        println!(
            "  {gpus:>2} GPUs floors in a process of their own: blocking p50 {:>8.1?} | async-io p50 {:>8.1?} | exporter / blocking {:.2} | exporter / async-io {:.2} | async-io / blocking {:.2}",
            p(&apart, 0.5),
            p(&async_apart, 0.5),
            ratio(&ours, &apart),
            ratio(&ours, &async_apart),
            ratio(&async_apart, &apart),
        );
        println!(
            "  {gpus:>2} GPUs gzipped: p50 {:>8.1?} p99 {:>8.1?} | p50 gzip / plain {:.2}",
            p(&gz, 0.5),
            p(&gz, 0.99),
            p(&gz, 0.5).as_secs_f64() / p(&ours, 0.5).as_secs_f64()
        );
        for c in [&mut child, &mut own, &mut own_async] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, kind, file] = &args[..]
        && flag == "--serve"
    {
        return serve(kind, file);
    }
    // `cargo test --benches` runs this once as a smoke test.
    // `--bench end-to-end` (the executable run by hand) runs that part
    // alone, for several interleaved runs (benches/README.md).
    if args.iter().any(|a| a == "--bench") {
        if !args.iter().any(|a| a == "end-to-end") {
            bench_render();
            bench_gzip();
        }
        bench_end_to_end();
    }
}
