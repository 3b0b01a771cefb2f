//! The poller thread: read the source, stamp the snapshot, publish it
//! and hand it to the alert evaluator's thread (`judge`). Scrapes only
//! ever read what was last published; the poller never evaluates, so a
//! hung source stops collections and nothing else.

pub mod judge;
pub mod process;

use alerts::eval::FINE_LIMIT;
use alerts::{Alert, Rule};
use base::quiet::{Repeating, Verdict};
use base::time::unix_now;
use fill::engines::reader::{Memory, models_of};
use fill::engines::{Reader, profile, text};
use model::Engine;
use model::dcgm::Dcgm;
use model::{Collector, Collectors};
use model::{
    Kubernetes, MAX_PROCESSES, Model, Objectives, Snapshot, TTFT_SLO_SECONDS, XidWindow,
    bound_processes,
};
use sources::Source;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How far the evaluator's replay of the source's past has come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
    /// The replay at start (readiness waits for it), not a reload's.
    pub first: bool,
}

/// What consumers read: the newest snapshot, and the alerts the evaluator
/// last published.
pub struct Published {
    pub snapshot: Arc<Snapshot>,
    pub alerts: Arc<Vec<Alert>>,
    /// Set while the evaluator replays history: the alerts are not settled.
    pub replay: Option<Progress>,
    /// The served models' requests over the burn rules' short window, as
    /// the evaluator last took them.
    pub recent: Arc<Recent>,
}

/// Each served model's TTFT requests over the first TTFT burn-rate rule's
/// first short window (5m by default), the increases its page is judged
/// by: what is good now, where an engine's counters say only what has
/// been good since it started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recent {
    /// The window, spelled as in the rules (`5m`); empty without a TTFT
    /// burn-rate rule, and then no model is listed.
    pub window: String,
    pub models: Vec<RecentModel>,
}

/// One model's requests over [`Recent::window`], summed over its
/// replicas' increases; listed only where both are known.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecentModel {
    pub name: String,
    pub requests: f64,
    /// Of them, those whose first token came within its judged bound.
    pub good: f64,
}

impl Recent {
    /// The good share of `model`'s requests over the window; `None`
    /// where it has no good count or answered nothing in it.
    pub fn good_share(&self, model: &str) -> Option<f64> {
        let m = self.models.iter().find(|m| m.name == model)?;
        (m.requests > 0.0).then(|| m.good / m.requests)
    }
}

/// The one cell shared between the poller, the evaluator and the server.
pub struct Latest(Mutex<Arc<Published>>);

impl Latest {
    pub fn new(p: Published) -> Latest {
        Latest(Mutex::new(Arc::new(p)))
    }

    pub fn get(&self) -> Arc<Published> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&Published) -> Published) {
        let mut cell = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *cell = Arc::new(f(&cell));
    }

    /// A new snapshot; the alerts stay until the evaluator has judged it.
    pub fn set_snapshot(&self, snapshot: Arc<Snapshot>) {
        self.update(|p| Published {
            snapshot,
            alerts: p.alerts.clone(),
            replay: p.replay,
            recent: p.recent.clone(),
        });
    }

    /// New alerts, the models' recent requests they were judged by, and
    /// how far a replay has come.
    pub fn set_alerts(&self, alerts: Vec<Alert>, recent: Recent, replay: Option<Progress>) {
        self.update(|p| Published {
            snapshot: p.snapshot.clone(),
            alerts: Arc::new(alerts),
            replay,
            recent: Arc::new(recent),
        });
    }
}

/// What SIGHUP hands the poller: new rules, and for the simulator a new
/// source built from the re-read scenario.
pub struct Reload {
    pub rules: Vec<Rule>,
    pub source: Option<Box<dyn Source>>,
}

/// The source's models ([`Source::models_text`], a vLLM's body), read by
/// the engine reader's path: parsed, judged at the SLO's threshold, with
/// their outcomes; `endpoint` none, so they keep `llm_ttft_seconds` for
/// the demo. Listed by name, as an engine's are.
pub fn source_models(source: &dyn Source, said: &mut Memory) -> Vec<Model> {
    let body = source.models_text();
    if body.is_empty() {
        return Vec::new();
    }
    let want = profile::wanted(Some(Engine::Vllm));
    let parsed = text::parse(body.as_bytes(), &want);
    let slo = |_: &str| TTFT_SLO_SECONDS;
    let url = "the simulator";
    models_of(&parsed, &want, Engine::Vllm, url, said, &slo, None)
}

/// What reading the source's models has said.
fn said() -> Memory {
    Memory::new(Some(Engine::Vllm))
}

/// The source's own past, for the evaluator to replay: a copy of the
/// source at its origin and the times to read it at.
pub struct Replay {
    pub source: Box<dyn Source>,
    pub steps: Vec<f64>,
    pub collectors: Collectors,
    /// The collectors whose readings are kept.
    pub reads: Collectors,
    /// Boxed: a `Work` stays small.
    said: Box<Memory>,
}

impl Replay {
    /// The copy's reading at step `i`, as a snapshot.
    pub fn snapshot(&mut self, i: usize) -> Snapshot {
        let at = self.steps[i];
        let mut s = Snapshot::empty(self.source.kind());
        s.at = at;
        s.collectors = self.collectors;
        s.reads = self.reads;
        match self.source.collect(at) {
            Ok(mut gpus) => {
                retain(&mut gpus, self.reads);
                s.gpus = gpus;
                s.error = None;
                if self.collectors.has(Collector::Models) {
                    s.models = source_models(&*self.source, &mut self.said);
                }
            }
            Err(e) => s.error = Some(e.0),
        }
        s
    }
}

/// What the evaluator's thread is handed, in order.
pub enum Work {
    /// Start over with these rules, replaying the source's past first.
    Start {
        rules: Vec<Rule>,
        replay: Option<Replay>,
        first: bool,
    },
    /// A live collection.
    Collected(Arc<Snapshot>),
}

/// Live collections queued for the evaluator beyond this many (while it
/// replays) are dropped, as a scrape missed.
pub const QUEUE: usize = 64;

/// The times a replay reads the source at, ending just before `t0`: one a
/// minute (the coarse tiers' block span) up to the last [`FINE_LIMIT`],
/// then one per interval.
pub fn replay_steps(t0: f64, span: f64, interval: Duration) -> Vec<f64> {
    let fine = FINE_LIMIT.as_secs_f64().min(span);
    let step = interval.as_secs_f64();
    let coarse = step.max(60.0);
    let mut steps = Vec::new();
    let mut t = t0 - span;
    while t < t0 - fine {
        steps.push(t);
        t += coarse;
    }
    let fine_steps = (fine / step).ceil() as u64;
    steps.extend((1..=fine_steps).rev().map(|i| t0 - i as f64 * step));
    steps
}

/// Leaves out the readings of collectors that are off, and keeps the
/// processes collector's bound.
fn retain(gpus: &mut [model::Gpu], on: Collectors) {
    for g in gpus {
        g.readings.retain(on);
        bound_processes(&mut g.readings.processes, MAX_PROCESSES);
        for m in &mut g.mig {
            m.readings.retain(on);
            bound_processes(&mut m.readings.processes, MAX_PROCESSES);
        }
    }
}

pub struct Poller {
    source: Box<dyn Source>,
    interval: Duration,
    /// The last good collection as published (shared with it, not a
    /// copy), served while collections fail; the HTTP side withholds it
    /// once it is older than `--collect.max-stale`.
    last_good: Option<Arc<Snapshot>>,
    /// Failed collections, logged quietly.
    failing: Repeating,
    /// The collectors the flags turned on; the readings of the others are
    /// left out, whatever the source read.
    collectors: Collectors,
    /// The collectors whose readings are kept: those on and those the
    /// dcgm collector's fields show.
    reads: Collectors,
    /// The dcgm collector's fields.
    dcgm: Option<Arc<Dcgm>>,
    /// Xid over dcgm's window, where its fields ask for the count.
    xid_window: Option<XidWindow>,
    /// `--kubernetes.pod-labels`.
    pod_labels: bool,
    /// The engine reader, where `--engine.endpoint` names any.
    engines: Option<Reader>,
    said: Memory,
    /// The objectives of the rules last handed over, served beside the
    /// models.
    objectives: Arc<Objectives>,
}

impl Poller {
    pub fn new(source: Box<dyn Source>, interval: Duration) -> Poller {
        Poller {
            source,
            interval,
            last_good: None,
            failing: Repeating::new(),
            collectors: Collectors::DEFAULT,
            reads: Collectors::DEFAULT,
            dcgm: None,
            xid_window: None,
            pod_labels: false,
            engines: None,
            said: said(),
            objectives: Default::default(),
        }
    }

    /// Runs only `collectors` (the default: [`Collectors::DEFAULT`]).
    pub fn with_collectors(mut self, collectors: Collectors) -> Poller {
        self.collectors = collectors;
        self.reads = collectors;
        self
    }

    /// The dcgm collector's fields, and the readings they show kept
    /// (call after [`Poller::with_collectors`]).
    pub fn with_dcgm(mut self, dcgm: Option<Arc<Dcgm>>) -> Poller {
        if let Some(d) = &dcgm {
            self.reads = self.collectors.or(d.needs());
        }
        self.xid_window = dcgm
            .as_deref()
            .filter(|d| d.counts_xid())
            .map(|d| XidWindow::new(d.xid_window_ms as f64 / 1000.0));
        self.dcgm = dcgm;
        self
    }

    /// Also keeps the readings of `reads` (the alert rules' collectors,
    /// `Config::reads`), unserved (call after [`Poller::with_dcgm`]).
    pub fn with_reads(mut self, reads: Collectors) -> Poller {
        self.reads = self.reads.or(reads);
        self
    }

    /// Puts each GPU's pods on its series (`--kubernetes.pod-labels`).
    pub fn with_pod_labels(mut self, on: bool) -> Poller {
        self.pod_labels = on;
        self
    }

    /// Lays the engines' models and states over each collection.
    pub fn with_engines(mut self, engines: Option<Reader>) -> Poller {
        self.engines = engines;
        self
    }

    /// Pod attribution as the source's fillers last saw the kubelet.
    fn kubernetes(&self) -> Kubernetes {
        Kubernetes {
            kubelet: self.source.kubelet(),
            pod_labels: self.pod_labels,
        }
    }

    /// The source's past up to `t0` for the evaluator to replay, if it has
    /// one; the source itself moves its clock through the same steps, so
    /// that its first live reading follows the replayed ones.
    pub fn history(&mut self, t0: f64) -> Option<Replay> {
        let span = self.source.history_seconds();
        let copy = self.source.replay_copy().filter(|_| span > 0.0)?;
        let steps = replay_steps(t0, span, self.interval);
        for &t in &steps {
            self.source.skip_to(t);
        }
        Some(Replay {
            source: copy,
            steps,
            collectors: self.collectors,
            reads: self.reads,
            said: Box::new(said()),
        })
    }

    /// One live collection at Unix time `at`, with the engines as their
    /// reader last saw them, whatever the GPUs did.
    pub fn collect_at(&mut self, at: f64) -> Snapshot {
        let mut s = self.collect_gpus(at);
        s.objectives = self.objectives.clone();
        if let Some(w) = &self.engines {
            let (endpoints, mut models) = w.read();
            if s.collectors.has(Collector::Models) {
                s.models.append(&mut models);
            }
            s.engines = endpoints;
        }
        s
    }

    /// [`Poller::collect_at`], to publish: a good collection is kept,
    /// shared, to serve while the next ones fail. Collecting costs no copy
    /// of the fleet; a failed collection copies the last good one.
    fn collect_shared(&mut self, at: f64) -> Arc<Snapshot> {
        let s = Arc::new(self.collect_at(at));
        if s.error.is_none() {
            self.last_good = Some(s.clone());
        }
        s
    }

    fn collect_gpus(&mut self, at: f64) -> Snapshot {
        let started = Instant::now();
        let result = self.source.collect(at);
        let collect_duration = started.elapsed();
        let process = process::read_stats();
        let now = Instant::now();
        match result {
            Ok(mut gpus) => {
                let on = self.collectors;
                retain(&mut gpus, self.reads);
                if let Some(w) = &mut self.xid_window {
                    w.observe(at, &mut gpus);
                }
                let s = Snapshot {
                    gpus,
                    models: if on.has(Collector::Models) {
                        source_models(&*self.source, &mut self.said)
                    } else {
                        Vec::new()
                    },
                    source: self.source.kind(),
                    at,
                    published: now,
                    finished: now,
                    collect_duration,
                    error: None,
                    process,
                    collectors: on,
                    reads: self.reads,
                    timings: self.source.timings(),
                    rejected: self.source.rejected(),
                    kubernetes: self.kubernetes(),
                    dcgm: self.dcgm.clone(),
                    engines: Vec::new(),
                    objectives: Default::default(),
                };
                if self.failing.recover() {
                    log::info!("collection recovered");
                }
                s
            }
            Err(e) => {
                match self.failing.fail_at(&e.0, now) {
                    Verdict::New => log::warn!("collection failed: {e}"),
                    Verdict::Again(n) => {
                        log::warn!("collection still failing ({n} times since the last line): {e}")
                    }
                    Verdict::Quiet => {}
                }
                // The last good readings, with their age; whether they are
                // still served is the HTTP side's call (`Snapshot::freshness`).
                let mut s = match &self.last_good {
                    Some(good) => Snapshot::clone(good),
                    None => Snapshot::empty(self.source.kind()),
                };
                // As the source gave it: `collect_at` adds the engines'
                // models again.
                s.models.retain(|m| m.endpoint.is_none());
                s.at = at;
                s.finished = now;
                s.collect_duration = collect_duration;
                s.error = Some(e.0);
                s.process = process;
                s.collectors = self.collectors;
                s.reads = self.reads;
                s.kubernetes = self.kubernetes();
                s.dcgm = self.dcgm.clone();
                s
            }
        }
    }

    fn start(&mut self, rules: Vec<Rule>, first: bool, latest: &Latest, work: &SyncSender<Work>) {
        self.objectives = Arc::new(alerts::adjust::objectives(&rules));
        let replay = self.history(unix_now());
        if let Some(r) = &replay {
            // Replaying from now on, before any collection is published:
            // else /readyz would say ready between the first collection
            // and the evaluator's first word on the replay.
            let total = r.steps.len() as u64;
            let p = Progress {
                done: 0,
                total,
                first,
            };
            latest.set_alerts(Vec::new(), Recent::default(), Some(p));
        }
        let _ = work.send(Work::Start {
            rules,
            replay,
            first,
        });
    }

    fn reload(&mut self, r: Reload, latest: &Latest, work: &SyncSender<Work>) {
        // A new source (the simulator's scenario) starts afresh; a real
        // one keeps its fleet memory, lost GPUs and their counts with it.
        if let Some(source) = r.source {
            self.source = source;
            self.last_good = None;
        }
        let n = r.rules.len();
        self.start(r.rules, false, latest, work);
        log::info!("reloaded: {n} rules");
    }

    /// Hands the evaluator `rules` and the source's past, then collects
    /// every interval until the process ends, publishing each collection
    /// and handing it to the evaluator. A slow collection delays the next
    /// one rather than overlapping it.
    pub fn run(
        mut self,
        rules: Vec<Rule>,
        latest: Arc<Latest>,
        reloads: Receiver<Reload>,
        work: SyncSender<Work>,
    ) {
        self.start(rules, true, &latest, &work);
        let mut next = Instant::now();
        loop {
            // Only the newest reload counts: each replays the source's past.
            if let Some(r) = reloads.try_iter().last() {
                self.reload(r, &latest, &work);
            }
            let s = self.collect_shared(unix_now());
            latest.set_snapshot(s.clone());
            match work.try_send(Work::Collected(s)) {
                Ok(()) | Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => return,
            }
            next += self.interval;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulators_models_are_read_as_a_vllms() {
        use model::TTFT_BUCKETS;
        use sources::sim::{EPOCH, Scenario, Sim};
        let t0 = EPOCH + 1e7;
        let s = r#"{"gpus":[{}],"models":[{"name":"z \\\"q\"","requests_per_second":41},
            {"name":"a","slow_fraction":0.5}]}"#;
        let mut sim = Sim::new(Scenario::parse(s).unwrap(), t0);
        sim.collect(t0).unwrap();
        let models = source_models(&sim, &mut said());
        let names: Vec<_> = models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "z \\\"q\""], "by name, as an engine's");
        let (m, h) = (&models[1], &models[1].ttft_seconds);
        let le: Vec<_> = h.buckets.iter().map(|b| b.0).collect();
        assert_eq!(le, TTFT_BUCKETS);
        assert_eq!(h.count(), (41.0 * 1e7_f64).floor());
        assert_eq!(
            (m.good_within, m.endpoint, m.stale),
            (Some(0.3), None, false)
        );
        let o = m.outcomes.unwrap();
        assert_eq!((o.answered, o.failed), (h.count(), 0.0));
    }
    use model::Gpu;
    use model::SourceKind;
    use sources::SourceError;
    use sources::sim::{Scenario, Sim};
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::mpsc;

    /// One GPU, whose temperature is the collection's time, or an error
    /// while `failing` is set.
    struct Flaky(Arc<AtomicBool>);

    impl Source for Flaky {
        fn kind(&self) -> SourceKind {
            SourceKind::Nvml
        }
        fn collect(&mut self, at: f64) -> Result<Vec<Gpu>, SourceError> {
            if self.0.load(Relaxed) {
                return Err(SourceError("driver gone".into()));
            }
            let mut g = Gpu::default();
            g.readings.temperature_celsius = Some(at);
            Ok(vec![g])
        }
    }

    /// A good collection is published and kept as one allocation; while
    /// collections fail, its readings are served with the failure's error.
    #[test]
    fn the_last_good_collection_is_shared_not_copied() {
        let failing = Arc::new(AtomicBool::new(false));
        let mut p = Poller::new(Box::new(Flaky(failing.clone())), Duration::from_secs(1));
        let temperature = |s: &Snapshot| s.gpus[0].readings.temperature_celsius;
        let good = p.collect_shared(10.0);
        assert!(Arc::ptr_eq(p.last_good.as_ref().unwrap(), &good));
        failing.store(true, Relaxed);
        let failed = p.collect_shared(11.0);
        assert_eq!(failed.error.as_deref(), Some("driver gone"));
        assert_eq!((temperature(&failed), failed.at), (Some(10.0), 11.0));
        assert!(Arc::ptr_eq(p.last_good.as_ref().unwrap(), &good));
        failing.store(false, Relaxed);
        let again = p.collect_shared(12.0);
        assert_eq!(
            (temperature(&again), again.error.as_deref()),
            (Some(12.0), None)
        );
        assert!(Arc::ptr_eq(p.last_good.as_ref().unwrap(), &again));
        drop(again);
        assert_eq!(Arc::strong_count(p.last_good.as_ref().unwrap()), 1);
    }

    /// Readiness waits for the replay at start: it is marked before the
    /// first collection is published, not when the evaluator gets to it
    /// (here it never does), so `/readyz` never says ready, then not.
    #[test]
    fn the_replay_at_start_is_published_before_the_first_collection() {
        let scenario = Scenario::parse(r#"{"gpus":[{}]}"#).unwrap();
        let sim = Sim::new(scenario, unix_now());
        let latest = Arc::new(Latest::new(Published {
            snapshot: Arc::new(Snapshot::starting(SourceKind::Sim)),
            alerts: Default::default(),
            replay: None,
            recent: Default::default(),
        }));
        let (_reload, reloads) = mpsc::channel();
        let (work, work_rx) = mpsc::sync_channel(QUEUE);
        let shared = latest.clone();
        let poller = Poller::new(Box::new(sim), Duration::from_millis(50));
        let thread = std::thread::spawn(move || poller.run(Vec::new(), shared, reloads, work));
        let started = Instant::now();
        while latest.get().snapshot.is_starting() {
            assert!(started.elapsed() < Duration::from_secs(30), "no collection");
            std::thread::sleep(Duration::from_millis(5));
        }
        let replay = latest.get().replay.expect("the replay is marked");
        assert!(
            replay.first && replay.done == 0 && replay.total > 0,
            "{replay:?}"
        );
        assert!(matches!(
            work_rx.recv(),
            Ok(Work::Start { first: true, .. })
        ));
        // The evaluator gone, the poller ends.
        drop(work_rx);
        thread.join().unwrap();
    }
}
