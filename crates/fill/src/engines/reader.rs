//! The engine reader: a thread of its own (`engine-read`) reads every
//! endpoint once per `--engine.interval` (all of a round at once, each on a
//! scoped thread), each read within
//! `--engine.timeout`, and publishes each endpoint's state and models. The
//! poller takes the last published; no collection and no scrape ever
//! waits on an engine.

use super::client::{Failure, fetch, share};
use super::options::{Endpoint, Options, name_rule};
use super::profile::{self, detect, judged_at, wanted};
use super::text::{Parsed, Wanted};
use base::time::unix_now;
use model::Engine;
use model::{Bound, EngineEndpoint, EngineError, Model, Outcomes, Rejection};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Shared {
    endpoints: Vec<EngineEndpoint>,
    /// The models of every endpoint that is up, in endpoint order.
    models: Vec<Model>,
    /// New endpoints and settings (SIGHUP), taken at the next round.
    next: Option<Options>,
    /// How many times `next` was set: a wait between rounds wakes at a
    /// change, to time the next round by the new interval.
    retunes: u64,
    stop: bool,
}

type Cell = Arc<(Mutex<Shared>, Condvar)>;

fn lock(cell: &Cell) -> MutexGuard<'_, Shared> {
    cell.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The reader's handle; its thread stops when it drops.
pub struct Reader {
    cell: Cell,
}

impl Reader {
    /// Starts the thread; `None` without endpoints unless a reload may
    /// add some (`reloadable`: a file names them).
    pub fn start(options: Options, reloadable: bool) -> std::io::Result<Option<Reader>> {
        if options.endpoints.is_empty() && !reloadable {
            return Ok(None);
        }
        let cell: Cell = Arc::default();
        lock(&cell).endpoints = options.endpoints.iter().map(fresh).collect();
        let theirs = cell.clone();
        std::thread::Builder::new()
            .name("engine-read".into())
            .spawn(move || run(options, &theirs))?;
        Ok(Some(Reader { cell }))
    }

    /// A handle that hands the thread new endpoints and settings.
    pub fn retune(&self) -> Retune {
        Retune(self.cell.clone())
    }

    /// Each endpoint's state and the models of those up, as last read.
    pub fn read(&self) -> (Vec<EngineEndpoint>, Vec<Model>) {
        let s = lock(&self.cell);
        (s.endpoints.clone(), s.models.clone())
    }
}

/// Hands the engine reader new endpoints and settings (SIGHUP): they take
/// effect at its next round, which starts the new interval after the last
/// one started (at once where that is past): a shorter interval is not
/// held back by the old one's wait. An endpoint in both keeps its state
/// (up, error counts, the models last read); one gone drops out, a new
/// one starts fresh.
#[derive(Clone)]
pub struct Retune(Cell);

impl Retune {
    /// Sets what the next round reads.
    pub fn set(&self, options: Options) {
        let mut s = lock(&self.0);
        s.next = Some(options);
        s.retunes += 1;
        self.0.1.notify_all();
    }
}

/// An endpoint's state before its first read.
fn fresh(e: &Endpoint) -> EngineEndpoint {
    EngineEndpoint {
        url: e.url.clone(),
        engine: e.engine,
        ..EngineEndpoint::default()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        lock(&self.cell).stop = true;
        self.cell.1.notify_all();
    }
}

/// What one endpoint's reads remember between rounds (what was said).
#[derive(Clone)]
pub struct Memory {
    engine: Option<Engine>,
    /// The last state said: `None` up, else the failure's reason.
    said: Option<Option<EngineError>>,
    /// Models whose judging bound was said, with it.
    judged: HashSet<(String, Option<u64>)>,
    /// Models with a problem said, with it.
    bad: HashSet<(String, String)>,
    past_cap: usize,
    /// The models of the last good read, held while the engine is down.
    last: Vec<Model>,
    /// Models left out since start, by [`Rejection`].
    rejected: [u64; Rejection::ALL.len()],
    /// Hashes of the names refused and said (a tenant's names may be
    /// 10 KB each, and new every read): at most [`MAX_SAID_NAMES`].
    names_said: HashSet<u64>,
    /// The bound each timed model of the last read is judged at.
    bounds: Vec<Bound>,
}

/// Refused names said one by one per endpoint; past them, only counted.
const MAX_SAID_NAMES: usize = 64;

impl Memory {
    /// Before the first read, of `engine` where it is named.
    pub fn new(engine: Option<Engine>) -> Memory {
        Memory {
            engine,
            said: None,
            judged: HashSet::new(),
            bad: HashSet::new(),
            past_cap: 0,
            last: Vec::new(),
            rejected: [0; Rejection::ALL.len()],
            names_said: HashSet::new(),
            bounds: Vec::new(),
        }
    }
}

/// Takes `next` for `options`: each endpoint in both (the same URL and
/// engine named) keeps its memory and state, at its new place.
fn retune(options: &mut Options, memory: &mut Vec<Memory>, next: Options, s: &mut Shared) {
    let mut old: Vec<_> = (options.endpoints.drain(..))
        .zip(memory.drain(..).zip(s.endpoints.drain(..)))
        .collect();
    for (i, e) in next.endpoints.iter().enumerate() {
        let (mut mem, state) = match old.iter().position(|(o, _)| o == e) {
            Some(k) => old.swap_remove(k).1,
            None => {
                log::info!("--engine.config: reading {} from now on", e.url);
                (Memory::new(e.engine), fresh(e))
            }
        };
        for m in &mut mem.last {
            m.endpoint = Some(i);
        }
        memory.push(mem);
        s.endpoints.push(state);
    }
    for (e, _) in old {
        log::info!("--engine.config: {} is no longer read", e.url);
    }
    *options = next;
}

fn run(mut options: Options, cell: &Cell) {
    let mut memory: Vec<Memory> = options
        .endpoints
        .iter()
        .map(|e| Memory::new(e.engine))
        .collect();
    loop {
        let round = Instant::now();
        let next = lock(cell).next.take();
        if let Some(next) = next {
            retune(&mut options, &mut memory, next, &mut lock(cell));
        }
        let options = &options;
        let states = lock(cell).endpoints.clone();
        let states = read_round(options, &mut memory, states);
        let mut models = Vec::new();
        for (ep, mem) in options.endpoints.iter().zip(&memory) {
            for m in &mem.last {
                add(&mut models, m.clone(), &ep.url);
            }
        }
        let mut s = lock(cell);
        if s.stop {
            return;
        }
        s.endpoints = states;
        s.models = models;
        if pause(cell, s, round, options.interval) {
            return;
        }
    }
}

/// Waits until the round that started at `round` is an `interval` old,
/// or the interval of settings handed over since, whichever is the
/// latest: each handover wakes it. Whether the reader is to stop.
fn pause(cell: &Cell, mut s: MutexGuard<'_, Shared>, round: Instant, interval: Duration) -> bool {
    // Each turn ends at the interval's end, a stop or a handover; those
    // come at most once a `RELOAD_SPACING` (the reload thread's).
    loop {
        let interval = s.next.as_ref().map_or(interval, |n| n.interval);
        let wait = interval.saturating_sub(round.elapsed());
        if s.stop || wait.is_zero() {
            return s.stop;
        }
        let seen = s.retunes;
        s = (cell.1)
            .wait_timeout_while(s, wait, |s| !s.stop && s.retunes == seen)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Reads every endpoint once, each on a scoped thread of its own, so that a
/// round takes the longest read, not their sum: one hung engine delays no
/// other's. An endpoint whose thread cannot start is read here after the
/// others. Returns each endpoint's state after the round, published with
/// the round's models: an endpoint is never served up before its models.
fn read_round(
    options: &Options,
    memory: &mut [Memory],
    mut states: Vec<EngineEndpoint>,
) -> Vec<EngineEndpoint> {
    let eps = &options.endpoints;
    let cap = share(eps.len());
    let inline = std::thread::scope(|s| {
        let mut handles = Vec::new();
        let mut inline = Vec::new();
        let each = eps.iter().zip(memory.iter_mut()).zip(states.iter_mut());
        for (i, ((ep, mem), state)) in each.enumerate() {
            let one = move || read_into(ep, mem, state, (options, cap), i);
            let thread = std::thread::Builder::new().name("engine-read".into());
            match (eps.len() > 1).then(|| thread.spawn_scoped(s, one)) {
                Some(Ok(h)) => handles.push(h),
                _ => inline.push(i),
            }
        }
        for h in handles {
            let _ = h.join();
        }
        inline
    });
    for i in inline {
        read_into(&eps[i], &mut memory[i], &mut states[i], (options, cap), i);
    }
    states
}

/// Reads endpoint `i` into its memory and `state`, of at most `cap` body
/// bytes (its share of the round).
fn read_into(
    ep: &Endpoint,
    mem: &mut Memory,
    state: &mut EngineEndpoint,
    (options, cap): (&Options, u64),
    i: usize,
) {
    let started = Instant::now();
    let outcome = read_one(ep, mem, (options, cap), i);
    state.duration = Some(started.elapsed().as_secs_f64());
    state.engine = mem.engine;
    state.rejected = mem.rejected;
    say(ep, mem, &outcome);
    match outcome {
        Ok(m) => {
            state.up = true;
            state.reason = None;
            state.why = None;
            state.last_success = Some(unix_now());
            mem.last = m;
            state.bounds.clone_from(&mem.bounds);
        }
        Err((reason, why)) => {
            state.up = false;
            state.reason = Some(reason);
            state.why = Some(why);
            state.errors[reason as usize] += 1;
            for m in &mut mem.last {
                m.stale = true;
            }
        }
    }
}

/// Adds `m` to the node's models: one model served by two endpoints (two
/// replicas on the node) is one subject, its counts summed, where their
/// buckets agree; else the first endpoint's stays, said at debug level
/// (every round would say it again). Each replica's own counts stay
/// beside the sums, for the evaluator to take its increases by.
fn add(models: &mut Vec<Model>, m: Model, url: &str) {
    let Some(same) = models.iter_mut().find(|o| o.name == m.name) else {
        models.push(m);
        return;
    };
    let (a, b) = (&mut same.ttft_seconds, &m.ttft_seconds);
    if a.buckets.len() != b.buckets.len()
        || a.buckets.iter().zip(&b.buckets).any(|(x, y)| x.0 != y.0)
        || same.good_within != m.good_within
    {
        log::debug!(
            "model {:?} at {url}: other buckets than another endpoint's; left out",
            m.name
        );
        return;
    }
    if same.replicas.is_empty() {
        let own = same.own_share();
        same.replicas.push(own);
    }
    same.replicas.push(m.own_share());
    let a = &mut same.ttft_seconds;
    for (x, y) in a.buckets.iter_mut().zip(&m.ttft_seconds.buckets) {
        x.1 += y.1;
    }
    a.sum += m.ttft_seconds.sum;
    // A replica without failure counts leaves the sum without a verdict.
    same.outcomes = match (same.outcomes, m.outcomes) {
        (Some(x), Some(y)) => Some(Outcomes {
            answered: x.answered + y.answered,
            failed: x.failed + y.failed,
        }),
        _ => None,
    };
    // Down while any replica is (EngineDown); its burn verdicts are held
    // only while every one is (`Model::held`): the others' still count.
    same.stale |= m.stale;
}

/// One line per change of an endpoint's state: up, or down for a reason.
fn say(ep: &Endpoint, mem: &mut Memory, outcome: &Result<Vec<Model>, Failure>) {
    let now = outcome.as_ref().err().map(|(r, _)| *r);
    if mem.said == Some(now) {
        return;
    }
    let engine = mem.engine.map_or("engine", Engine::name);
    match outcome {
        Ok(m) => log::info!("{engine} at {}: up, {} models", ep.url, m.len()),
        Err((r, why)) => log::warn!("{engine} at {}: down ({}: {why})", ep.url, r.label()),
    }
    mem.said = Some(now);
}

/// Reads one endpoint: its engine (told once), and its models.
fn read_one(
    ep: &Endpoint,
    mem: &mut Memory,
    (options, cap): (&Options, u64),
    index: usize,
) -> Result<Vec<Model>, Failure> {
    let want = wanted(mem.engine);
    let parsed = fetch(ep, &want, options.timeout, cap)?;
    let hint = match parsed.first {
        // An opening brace or bracket: JSON.
        Some(0x7b | 0x5b) => {
            "; a JSON body: trtllm-serve's /metrics is JSON, its Prometheus text is at /prometheus/metrics"
        }
        _ => "",
    };
    if parsed.lines > 0 && parsed.malformed == parsed.lines {
        return Err((
            EngineError::Parse,
            format!("no Prometheus text in {} lines{hint}", parsed.lines),
        ));
    }
    let engine = match mem.engine {
        Some(e) => e,
        None => {
            let e = detect(&parsed, &want)
                .map_err(|why| (EngineError::UnknownEngine, format!("{why}{hint}")))?;
            log::info!("engine at {}: told {e} by its metric names", ep.url);
            mem.engine = Some(e);
            e
        }
    };
    let threshold = |name: &str| options.threshold(name);
    Ok(models_of(
        &parsed,
        &want,
        engine,
        &ep.url,
        mem,
        &threshold,
        Some(index),
    ))
}

/// The models of a body from `url` of `engine`: each model's TTFT judged
/// at its bound for `threshold`, with its outcomes, at most
/// [`profile::MAX_MODELS`]; what is wrong said once. The reader's path for
/// every endpoint's body, and the simulator's for the one it spells.
pub fn models_of(
    parsed: &Parsed,
    want: &Wanted,
    engine: Engine,
    url: &str,
    mem: &mut Memory,
    threshold: &dyn Fn(&str) -> f64,
    endpoint: Option<usize>,
) -> Vec<Model> {
    let p = model::profile::profile(engine);
    refuse(parsed, engine, url, mem);
    let (read, past) = profile::models(parsed, want, p);
    let tallies = profile::outcomes(parsed, want, p);
    let (counted, past) = counted_only(&read, &tallies, past);
    past_cap(past, engine, url, mem);
    if read.is_empty() && mem.bad.insert((String::new(), String::new())) {
        let hint = match engine {
            Engine::Triton => ": start Triton with --metrics-config histogram_latencies=true",
            _ => " yet",
        };
        log::warn!("{engine} at {url}: no TTFT histogram{hint}");
    }
    let mut models = Vec::new();
    mem.bounds.clear();
    for (name, h) in read {
        let h = match h {
            Ok(h) => h,
            Err(why) => {
                mem.rejected[Rejection::Counts as usize] += 1;
                if mem.bad.insert((name.clone(), why.clone())) {
                    log::warn!("{engine} at {url}: model {name:?} left out: {why}");
                }
                continue;
            }
        };
        let (at, line) = judged_at(&h, threshold(&name));
        if let Some(line) = line
            && mem.judged.insert((name.clone(), at.map(f64::to_bits)))
        {
            log::warn!(
                "{engine} at {url}: model {name:?}: {line}; to add one: {}",
                p.add_bound
            );
        }
        mem.bounds.push(Bound {
            model: name.clone(),
            // The body's own spelling of the bound, in its unit.
            le: at.and_then(|a| parsed.spelling(a, p.per_second).map(str::to_string)),
        });
        let outcomes = tallies.get(&name).and_then(profile::Tally::outcomes);
        if outcomes.is_none() && mem.bad.insert((name.clone(), p.no_failures.into())) {
            log::info!("{engine} at {url}: model {name:?}: {}", p.no_failures);
        }
        models.push(Model {
            name,
            ttft_seconds: h,
            good_within: at,
            endpoint,
            stale: false,
            outcomes,
            replicas: Vec::new(),
        });
    }
    for (name, outcomes) in counted {
        if mem.bad.insert((name.clone(), "no TTFT series".into())) {
            log::info!(
                "{engine} at {url}: model {name:?}: no TTFT series; judged for availability alone"
            );
        }
        models.push(Model {
            name,
            ttft_seconds: Default::default(),
            good_within: None,
            endpoint,
            stale: false,
            outcomes: Some(outcomes),
            replicas: Vec::new(),
        });
    }
    models
}

/// Says how many models are past the cap, where that changed.
fn past_cap(past: usize, engine: Engine, url: &str, mem: &mut Memory) {
    if past != mem.past_cap {
        if past > 0 {
            log::warn!(
                "{engine} at {url}: {past} models past the {} cap are left out",
                profile::MAX_MODELS
            );
        }
        mem.past_cap = past;
    }
}

/// Counts the models of `parsed` whose names may not be served (the
/// reader refused their samples), and says each name once (cut short and
/// escaped: a line holds no control character), up to [`MAX_SAID_NAMES`].
fn refuse(parsed: &Parsed, engine: Engine, url: &str, mem: &mut Memory) {
    mem.rejected[Rejection::Name as usize] += parsed.refused.len() as u64;
    for (hash, shown, len) in &parsed.refused_shown {
        if mem.names_said.len() < MAX_SAID_NAMES && mem.names_said.insert(*hash) {
            log::warn!(
                "{engine} at {url}: model {shown} ({len} bytes) not served: a name {}",
                name_rule()
            );
        }
    }
}

/// The models `tallies` has outcomes for but `read` no TTFT series of,
/// in name order: each is judged for availability alone (no requests
/// timed, no bound: no TTFT verdict), as the printed rules judge it from
/// the engine's counters. At most [`profile::MAX_MODELS`] with `read`'s;
/// `past`, the models past that cap, with those left out here. Where
/// `read` is past the cap already, none is taken (some of the tallied may
/// be of the TTFT models past it) and `past` stays.
fn counted_only(
    read: &BTreeMap<String, profile::Read>,
    tallies: &BTreeMap<String, profile::Tally>,
    past: usize,
) -> (Vec<(String, Outcomes)>, usize) {
    if past > 0 {
        return (Vec::new(), past);
    }
    let only = (tallies.iter())
        .filter(|(name, _)| !read.contains_key(*name))
        .filter_map(|(name, t)| Some((name.clone(), t.outcomes()?)));
    let mut taken: Vec<_> = only.collect();
    let room = profile::MAX_MODELS.saturating_sub(read.len());
    let left = taken.len().saturating_sub(room);
    taken.truncate(room);
    (taken, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pause` on its own thread from `round`, at `interval`, with
    /// `hand` handed over after `after`: whether it said stop, and when
    /// it ended, from `round`.
    fn paused(interval: Duration, after: Duration, hand: Option<Options>) -> (bool, Duration) {
        let cell: Cell = Arc::default();
        let round = Instant::now();
        let theirs = cell.clone();
        let waiting = std::thread::spawn(move || {
            (
                pause(&theirs, lock(&theirs), round, interval),
                round.elapsed(),
            )
        });
        std::thread::sleep(after);
        match hand {
            Some(e) => Retune(cell.clone()).set(e),
            None => {
                lock(&cell).stop = true;
                cell.1.notify_all();
            }
        }
        waiting.join().unwrap()
    }

    fn every(ms: u64) -> Option<Options> {
        Some(Options {
            interval: Duration::from_millis(ms),
            ..Options::default()
        })
    }

    /// A vLLM body through the reader's path (`text::parse`, `models_of`).
    fn judged(body: &str, mem: &mut Memory) -> Vec<Model> {
        let want = wanted(Some(Engine::Vllm));
        let parsed = super::super::text::parse(body.as_bytes(), &want);
        let url = "http://h:1/metrics";
        models_of(&parsed, &want, Engine::Vllm, url, mem, &|_| 0.3, Some(0))
    }

    /// vLLM's outcome counters for `model`: `stop` served, `error` failed.
    fn counted(model: &str, stop: u32, error: Option<u32>) -> String {
        let line = |r: &str, n: u32| {
            format!(
                "vllm:request_success_total{{finished_reason=\"{r}\",model_name=\"{model}\"}} {n}\n"
            )
        };
        line("stop", stop) + &error.map_or(String::new(), |n| line("error", n))
    }

    /// A TTFT histogram for `model`: 9 of 10 within 0.25 s.
    fn timed(model: &str) -> String {
        let name = "vllm:time_to_first_token_seconds";
        format!(
            "{name}_bucket{{le=\"0.25\",model_name=\"{model}\"}} 9\n\
             {name}_bucket{{le=\"+Inf\",model_name=\"{model}\"}} 10\n\
             {name}_sum{{model_name=\"{model}\"}} 1\n{name}_count{{model_name=\"{model}\"}} 10\n"
        )
    }

    /// A model the engine counts outcomes for, with no TTFT series, is
    /// judged for availability from the counters alone: it has its
    /// outcomes, no bound and no requests timed, so no TTFT verdict. One
    /// without a failure counter has no verdict at all, as before.
    #[test]
    fn a_model_counted_but_not_timed_is_judged_for_availability_alone() {
        let head = "# TYPE vllm:time_to_first_token_seconds histogram\n\
                    # TYPE vllm:request_success_total counter\n";
        let body = [
            head.to_string(),
            timed("timed"),
            counted("timed", 10, Some(0)),
            counted("counted", 99, Some(1)),
            counted("unfailed", 5, None),
        ]
        .concat();
        let mut mem = Memory::new(Some(Engine::Vllm));
        let models = judged(&body, &mut mem);
        let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["timed", "counted"]);
        let (t, c) = (&models[0], &models[1]);
        assert_eq!((t.good_within, t.good()), (Some(0.25), Some(9.0)));
        assert_eq!(
            c.outcomes,
            Some(Outcomes {
                answered: 100.0,
                failed: 1.0
            })
        );
        assert_eq!((c.good_within, c.good()), (None, None));
        assert_eq!(c.ttft_seconds.count(), 0.0);
        assert_eq!((c.endpoint, c.stale), (Some(0), false));

        // No TTFT series at all: still judged for availability.
        let models = judged(
            &(head.to_string() + &counted("counted", 99, Some(1))),
            &mut mem,
        );
        assert_eq!(models.len(), 1);
        assert!(models[0].outcomes.is_some());

        // The cap counts them: 32 timed models leave no room, said as past.
        let mut body = head.to_string();
        for i in 0..profile::MAX_MODELS {
            body += &timed(&format!("m{i:02}"));
        }
        body += &counted("counted", 99, Some(1));
        let mut mem = Memory::new(Some(Engine::Vllm));
        let models = judged(&body, &mut mem);
        assert_eq!(models.len(), profile::MAX_MODELS);
        assert!(models.iter().all(|m| m.name != "counted"));
        assert_eq!(mem.past_cap, 1);
    }

    /// A tenant's names over 128 bytes or with a control byte are not
    /// served, whatever else the model has; they take no place under the
    /// cap, are counted each read, and said once each.
    #[test]
    fn names_a_tenant_chooses_are_bounded_like_configured_ones() {
        let head = "# TYPE vllm:time_to_first_token_seconds histogram\n\
                    # TYPE vllm:request_success_total counter\n";
        let mut body = head.to_string();
        let mut hostile = Vec::new();
        for i in 0..profile::MAX_MODELS {
            let name = match i % 4 {
                0 => format!("{i:02}{}", "x".repeat(10 * 1024)),
                1 => format!("{i:02}nul\0byte"),
                2 => format!("{i:02}esc\u{1b}[31m"),
                _ => format!("{i:02}del\u{7f}cr\r"),
            };
            body += &timed(&name);
            body += &counted(&name, 10, Some(1));
            hostile.push(name);
        }
        let edge = "e".repeat(128);
        body += &timed(&edge);
        body += &timed("ok");
        let mut mem = Memory::new(Some(Engine::Vllm));
        for read in 1..=3u64 {
            let models = judged(&body, &mut mem);
            let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
            assert_eq!(names, [edge.as_str(), "ok"]);
            assert_eq!(mem.rejected, [read * 32, 0]);
        }
        assert_eq!(mem.past_cap, 0);
        assert_eq!(mem.names_said.len(), 32);
        // A name a byte longer is one more refused.
        let models = judged(&(head.to_string() + &timed(&"e".repeat(129))), &mut mem);
        assert!(models.is_empty());
        assert_eq!(mem.rejected, [97, 0]);
        // New names every read are counted, but said at most 64 times.
        for i in 0..100 {
            judged(&(head.to_string() + &timed(&format!("{i}\u{7}"))), &mut mem);
        }
        assert_eq!(mem.names_said.len(), MAX_SAID_NAMES);
        assert_eq!(mem.rejected, [197, 0]);
    }

    /// Each timed model's judged bound is kept as the body spells it, in
    /// the engine's unit (prometheus-cpp's `250`, prometheus_client's
    /// `100.0`), for Prometheus to join on; a model with no bound at or
    /// below the threshold has none, and a counted-only model no entry.
    #[test]
    fn each_models_bound_is_spelled_as_its_engine_spells_it() {
        let name = "nv_inference_first_response_histogram_ms";
        let mut body = String::new();
        for (m, bounds) in [("a", &["50", "250", "1000"][..]), ("b", &["500", "1000"])] {
            for b in bounds.iter().chain(&["+Inf"]) {
                body += &format!("{name}_bucket{{model=\"{m}\",version=\"1\",le=\"{b}\"}} 1\n");
            }
            body += &format!("{name}_count{{model=\"{m}\",version=\"1\"}} 1\n");
        }
        body += "nv_inference_request_success{model=\"c\",version=\"1\"} 1\n";
        body += "nv_inference_request_failure{model=\"c\",version=\"1\",reason=\"OTHER\"} 1\n";
        let want = wanted(Some(Engine::Triton));
        let parsed = super::super::text::parse(body.as_bytes(), &want);
        let mut mem = Memory::new(Some(Engine::Triton));
        let url = "http://h:8002/metrics";
        let models = models_of(
            &parsed,
            &want,
            Engine::Triton,
            url,
            &mut mem,
            &|_| 0.3,
            Some(0),
        );
        assert_eq!(models.len(), 3);
        let got: Vec<(&str, Option<&str>)> = (mem.bounds.iter())
            .map(|b| (b.model.as_str(), b.le.as_deref()))
            .collect();
        assert_eq!(got, [("a", Some("250")), ("b", None)]);

        let v = "vllm:time_to_first_token_seconds_bucket{model_name=\"v\",";
        let body = format!(
            "{v}le=\"0.1\"}} 1\n{v}le=\"100.0\"}} 1\n{v}le=\"+Inf\"}} 1\n\
             vllm:time_to_first_token_seconds_count{{model_name=\"v\"}} 1\n"
        );
        let mut mem = Memory::new(Some(Engine::Vllm));
        let want = wanted(Some(Engine::Vllm));
        let parsed = super::super::text::parse(body.as_bytes(), &want);
        models_of(
            &parsed,
            &want,
            Engine::Vllm,
            url,
            &mut mem,
            &|_| 100.0,
            Some(0),
        );
        assert_eq!(mem.bounds[0].le.as_deref(), Some("100.0"));
    }

    /// An endpoint on loopback that answers one read with `answer`.
    fn answering(answer: String) -> Endpoint {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/metrics", l.local_addr().unwrap());
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let _ = s.read(&mut [0; 4096]);
            let _ = s.write_all(answer.as_bytes());
        });
        crate::engines::options::parse_endpoint(&url).unwrap()
    }

    /// trtllm-serve's `/metrics` is JSON: the line says where its
    /// Prometheus text is, named or not; a body of other text does not.
    #[test]
    fn a_json_body_points_at_trtllm_serves_prometheus_text() {
        let cases = [
            (None, "[{\"gpuMemUsage\": 1, \"iter\": 2}]"),
            (Some(Engine::Trtllm), "\n {\n\"iter\": 2\n}\n"),
            (None, "<html>not text</html>\n"),
        ];
        for (engine, body) in cases {
            let len = body.len();
            let ep = answering(format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n{body}"
            ));
            let mut mem = Memory::new(engine);
            let (_, why) = read_one(&ep, &mut mem, (&Options::default(), share(1)), 0).unwrap_err();
            let json = body.trim_start().starts_with(['{', '[']);
            assert_eq!(
                why.contains("its Prometheus text is at /prometheus/metrics"),
                json,
                "{why}"
            );
        }
    }

    #[test]
    fn a_handover_times_the_next_round_by_its_own_interval() {
        let ms = Duration::from_millis;
        // 30 s cut short: 100ms is past at the handover, so at once.
        let (stop, took) = paused(Duration::from_secs(30), ms(200), every(100));
        assert!(!stop && took >= ms(200) && took < ms(2000), "{took:?}");
        // 30 s cut to 600ms from the round's start, not the handover's.
        let (stop, took) = paused(Duration::from_secs(30), ms(200), every(600));
        assert!(!stop && took >= ms(600) && took < ms(2000), "{took:?}");
        // The same interval again: no round early.
        let (stop, took) = paused(ms(700), ms(100), every(700));
        assert!(!stop && took >= ms(700) && took < ms(2000), "{took:?}");
        // A longer one: the wait goes on to it.
        let (stop, took) = paused(ms(300), ms(50), every(900));
        assert!(!stop && took >= ms(900) && took < ms(3000), "{took:?}");
        // A stop ends it at once.
        let (stop, took) = paused(Duration::from_secs(30), ms(100), None);
        assert!(stop && took < ms(2000), "{took:?}");
    }
}
