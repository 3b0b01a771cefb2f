//! Deflate candidates side by side on the exporter's own `/metrics` bodies
//! (the simulator's 8 and 64 GPUs, text 0.0.4, rendered here): gzip bytes
//! out and µs per body, each with its state and output buffer reused (the
//! exporter's shape), median of 200 runs after 5 warm-ups. The exporter's
//! own release profile (opt-level "s", LTO). Run from the repository root:
//!
//!   cargo run --release --manifest-path benches/deflate/Cargo.toml
//!
//! The exporter uses miniz_oxide at level 1 (`src/http/gzip.rs`);
//! docs/maintainers.md (Dependencies) and benches/README.md have the
//! figures and why.

use exposition::{Format, Scrape};
use model::{Collectors, Snapshot, SourceKind};
use sources::Source;
use sources::sim::{Scenario, Sim};
use std::hint::black_box;
use std::time::Instant;

const RUNS: usize = 200;

fn body(gpus: usize) -> Vec<u8> {
    let list = vec!["{}"; gpus].join(",");
    let scenario = Scenario::parse(&format!(r#"{{"gpus":[{list}]}}"#)).unwrap();
    let mut sim = Sim::new(scenario, 1.8e9);
    let mut s = Snapshot::empty(SourceKind::Sim);
    s.gpus = sim.collect(1.8e9).unwrap();
    s.error = None;
    let mut out = Vec::new();
    Scrape {
        snapshot: &s,
        fresh: Default::default(),
        http: None,
        format: Format::Text,
        only: Collectors::DEFAULT,
        now: Instant::now(),
    }
    .render(&mut out);
    out
}

fn median_us(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let mut out = 0;
    for _ in 0..5 {
        out = f();
    }
    let mut t: Vec<f64> = (0..RUNS)
        .map(|_| {
            let s = Instant::now();
            out = black_box(f());
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[RUNS / 2], out)
}

struct Miniz {
    c: Box<miniz_oxide::deflate::core::CompressorOxide>,
    out: Vec<u8>,
}

impl Miniz {
    fn new(level: u8) -> Miniz {
        let flags =
            miniz_oxide::deflate::core::create_comp_flags_from_zip_params(level as i32, -15, 0);
        Miniz {
            c: Box::new(miniz_oxide::deflate::core::CompressorOxide::new(flags)),
            out: Vec::new(),
        }
    }

    fn gzip(&mut self, input: &[u8]) -> usize {
        use miniz_oxide::deflate::core::{TDEFLFlush, TDEFLStatus, compress};
        self.c.reset();
        self.out.clear();
        self.out
            .extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
        let mut pos = 0;
        loop {
            let start = self.out.len();
            if self.out.capacity() - start < 4096 {
                self.out.reserve(input.len() / 4 + 4096);
            }
            let cap = self.out.capacity();
            self.out.resize(cap, 0);
            let (status, used, written) = compress(
                &mut self.c,
                &input[pos..],
                &mut self.out[start..],
                TDEFLFlush::Finish,
            );
            pos += used;
            self.out.truncate(start + written);
            if status != TDEFLStatus::Okay {
                break;
            }
        }
        let mut h = crc32fast::Hasher::new();
        h.update(input);
        self.out.extend_from_slice(&h.finalize().to_le_bytes());
        self.out
            .extend_from_slice(&(input.len() as u32).to_le_bytes());
        self.out.len()
    }
}

struct ZlibRs {
    d: zlib_rs::Deflate,
    out: Vec<u8>,
}

impl ZlibRs {
    fn new(level: i32) -> ZlibRs {
        // window_bits 15 + 16: a gzip wrapper with CRC-32 (zlib's convention).
        ZlibRs {
            d: zlib_rs::Deflate::new(level, true, 31),
            out: Vec::new(),
        }
    }

    fn gzip(&mut self, input: &[u8]) -> usize {
        self.d.reset();
        self.out.clear();
        let mut pos = 0;
        loop {
            if self.out.capacity() - self.out.len() < 4096 {
                self.out.reserve(input.len() / 4 + 4096);
            }
            let start = self.out.len();
            let cap = self.out.capacity();
            self.out.resize(cap, 0);
            let (before_in, before_out) = (self.d.total_in(), self.d.total_out());
            let st = self
                .d
                .compress(
                    &input[pos..],
                    &mut self.out[start..],
                    zlib_rs::DeflateFlush::Finish,
                )
                .unwrap();
            pos += (self.d.total_in() - before_in) as usize;
            self.out
                .truncate(start + (self.d.total_out() - before_out) as usize);
            if st == zlib_rs::Status::StreamEnd {
                break;
            }
        }
        self.out.len()
    }
}

struct Libdeflate {
    c: libdeflater::Compressor,
    out: Vec<u8>,
}

impl Libdeflate {
    fn new(level: i32) -> Libdeflate {
        Libdeflate {
            c: libdeflater::Compressor::new(libdeflater::CompressionLvl::new(level).unwrap()),
            out: Vec::new(),
        }
    }

    fn gzip(&mut self, input: &[u8]) -> usize {
        let bound = self.c.gzip_compress_bound(input.len());
        if self.out.len() < bound {
            self.out.resize(bound, 0);
        }
        self.c.gzip_compress(input, &mut self.out).unwrap()
    }
}

fn main() {
    println!(
        "{:<24} {:>8} {:>8} {:>7} {:>8}",
        "candidate", "body", "gzip", "ratio", "µs"
    );
    for gpus in [8, 64] {
        let body = body(gpus);
        let row = |label: &str, f: &mut dyn FnMut() -> usize| {
            let (us, n) = median_us(f);
            println!(
                "{:<24} {:>8} {:>8} {:>6.1}x {:>8.1}",
                format!("{gpus} GPUs {label}"),
                body.len(),
                n,
                body.len() as f64 / n as f64,
                us
            );
        };
        for level in [1u8, 6] {
            let mut m = Miniz::new(level);
            row(&format!("miniz_oxide L{level}"), &mut || m.gzip(&body));
        }
        for level in [1, 6] {
            let mut z = ZlibRs::new(level);
            row(&format!("zlib-rs L{level}"), &mut || z.gzip(&body));
        }
        for level in [1, 6] {
            let mut l = Libdeflate::new(level);
            row(&format!("libdeflate L{level}"), &mut || l.gzip(&body));
        }
        let mut copy = Vec::new();
        row("memcpy (floor)", &mut || {
            copy.clear();
            copy.extend_from_slice(&body);
            copy.len()
        });
    }
}
