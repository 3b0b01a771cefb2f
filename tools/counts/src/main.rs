//! `gpu-exporter-counts`: runs, on each line read from stdin
//! `PIECE FLEET N`, that piece of work N times and answers `done BYTES` (the bytes it last rendered; 0
//! for work that renders nothing), so that
//! `benches/counts.py --render` can count, with callgrind's instrumentation
//! switched on around one line, what N of them cost. The fixtures are
//! built on a fleet's first line and reused, as the exporter reuses its
//! buffers: a first, uncounted line warms them.
//!
//! PIECE is `text` or `openmetrics` (our render of a snapshot of FLEET,
//! one of 1, 8, 64, 8x7mig), `prometheus-client` (that crate encoding the
//! same families and series), `alerts` (one evaluation round of the
//! default rules over a settled history; FLEET is `default`) or `collect`
//! (one collection of FLEET simulated GPUs). Each is a function of its own,
//! never inlined, for callgrind's `--toggle-collect` in a build with
//! symbols.

use alerts::Evaluator;
use exposition::{Format, Scrape};
use model::{Collectors, Snapshot};
use prometheus_client::registry::Registry;
use sources::Source;
use sources::sim::Sim;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Instant;

/// Alert rounds prepared: more than any run of counts.py asks for.
const ROUNDS: usize = 400;

#[inline(never)]
fn render(s: &Snapshot, format: Format, buf: &mut Vec<u8>, now: Instant) {
    buf.clear();
    Scrape {
        snapshot: s,
        fresh: Default::default(),
        http: None,
        format,
        only: Collectors::ALL,
        now,
    }
    .render(buf);
}

#[inline(never)]
fn encode(reg: &Registry, out: &mut String) {
    out.clear();
    prometheus_client::encoding::text::encode(out, reg).expect("a String takes any text");
}

#[inline(never)]
fn evaluate(e: &mut Evaluator, s: &Snapshot) {
    std::hint::black_box(e.eval(s));
}

#[inline(never)]
fn collect(sim: &mut Sim, at: f64) {
    std::hint::black_box(sim.collect(at).expect("the simulator collects"));
}

/// A fleet's fixtures, built on its first line.
enum Work {
    Render(Box<(Snapshot, Registry)>),
    Alerts(Box<Evaluator>, std::vec::IntoIter<Snapshot>),
    Collect(Sim, f64),
}

impl Work {
    fn new(piece: &str, fleet: &str) -> Result<Work, String> {
        let bad = || format!("no fleet {fleet:?} for {piece}");
        Ok(match piece {
            "text" | "openmetrics" | "prometheus-client" => {
                let s = gpu_exporter_counts::snapshot(fleet).ok_or_else(bad)?;
                let reg = gpu_exporter_counts::registry(&s);
                Work::Render(Box::new((s, reg)))
            }
            "alerts" if fleet == "default" => {
                let (e, next) = gpu_exporter_counts::settled(ROUNDS);
                Work::Alerts(Box::new(e), next.into_iter())
            }
            "collect" => {
                let gpus = fleet.parse().ok().filter(|&n| n > 0).ok_or_else(bad)?;
                let scenario = gpu_exporter_counts::fleet::scenario(gpus);
                Work::Collect(Sim::new(scenario, gpu_exporter_counts::fleet::T0), 0.0)
            }
            _ => return Err(bad()),
        })
    }
}

/// Runs one line's work.
fn run(work: &mut Work, piece: &str, n: usize, buf: &mut Vec<u8>, text: &mut String) {
    let now = Instant::now();
    for _ in 0..n {
        match (&mut *work, piece) {
            (Work::Render(w), "text") => render(&w.0, Format::Text, buf, now),
            (Work::Render(w), "openmetrics") => render(&w.0, Format::OpenMetrics, buf, now),
            (Work::Render(w), _) => encode(&w.1, text),
            (Work::Alerts(e, next), _) => match next.next() {
                Some(s) => evaluate(e, &s),
                None => fail(&format!("more than {ROUNDS} alert rounds asked for")),
            },
            (Work::Collect(sim, at), _) => {
                *at += 1.0;
                collect(sim, gpu_exporter_counts::fleet::T0 + *at);
            }
        }
    }
}

fn fail(why: &str) -> ! {
    eprintln!("gpu-exporter-counts: {why}");
    std::process::exit(2);
}

fn main() {
    let mut fixtures: HashMap<(String, String), Work> = HashMap::new();
    let (mut buf, mut text) = (Vec::new(), String::new());
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap_or_else(|e| fail(&format!("reading stdin: {e}")));
        let [piece, fleet, n] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            fail(&format!("a line is PIECE FLEET N, not {line:?}"));
        };
        let n: usize = n
            .parse()
            .unwrap_or_else(|_| fail(&format!("N is a count, not {n:?}")));
        let key = (piece.to_owned(), fleet.to_owned());
        let work = match fixtures.entry(key) {
            std::collections::hash_map::Entry::Occupied(w) => w.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Work::new(piece, fleet).unwrap_or_else(|e| fail(&e)))
            }
        };
        run(work, piece, n, &mut buf, &mut text);
        // The bytes of what was last rendered, for the table.
        let bytes = match piece {
            "text" | "openmetrics" => buf.len(),
            "prometheus-client" => text.len(),
            _ => 0,
        };
        if writeln!(out, "done {bytes}")
            .and_then(|()| out.flush())
            .is_err()
        {
            return;
        }
    }
}
