//! The collector thread: read the source, stamp the snapshot, evaluate the
//! alerts, publish. Scrapes only ever read what was last published.

use crate::alerts::eval::FINE_LIMIT;
use crate::alerts::{Alert, Evaluator, Rule, Subject, Transition, WORKLOADS, expand};
use crate::base::quiet::{Repeating, Verdict};
use crate::base::time::unix_now;
use crate::config::{Collector as Named, Collectors};
use crate::process;
use crate::snapshot::{Gpu, Kubernetes, MAX_PROCESSES, Snapshot, bound_processes};
use crate::source::Source;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What consumers read: one snapshot and the alerts evaluated from it.
pub struct Published {
    pub snapshot: Snapshot,
    pub alerts: Vec<Alert>,
}

/// The one cell shared between the collector and the server.
pub struct Latest(Mutex<Arc<Published>>);

impl Latest {
    pub fn new(p: Published) -> Latest {
        Latest(Mutex::new(Arc::new(p)))
    }

    pub fn get(&self) -> Arc<Published> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, p: Published) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(p);
    }
}

/// What SIGHUP hands the collector: new rules, and for the simulator a new
/// source built from the re-read scenario.
pub struct Reload {
    pub rules: Vec<Rule>,
    pub source: Option<Box<dyn Source>>,
}

pub struct Collector {
    source: Box<dyn Source>,
    evaluator: Evaluator,
    interval: Duration,
    /// How long the last good readings are served while collections fail.
    max_stale: Duration,
    /// The last good fleet, served (with its age) while collections fail.
    last_good: Option<Snapshot>,
    /// Failed collections, logged quietly.
    failing: Repeating,
    /// The collectors the flags turned on; the readings of the others are
    /// left out, whatever the source read.
    collectors: Collectors,
    /// `--kubernetes.pod-labels`.
    pod_labels: bool,
}

impl Collector {
    pub fn new(
        source: Box<dyn Source>,
        evaluator: Evaluator,
        interval: Duration,
        max_stale: Duration,
    ) -> Collector {
        Collector {
            source,
            evaluator,
            interval,
            max_stale,
            last_good: None,
            failing: Repeating::new(),
            collectors: Collectors::DEFAULT,
            pod_labels: false,
        }
    }

    /// Runs only `collectors` (the default: [`Collectors::DEFAULT`]).
    pub fn with_collectors(mut self, collectors: Collectors) -> Collector {
        self.collectors = collectors;
        self
    }

    /// Puts each GPU's pods on its series (`--kubernetes.pod-labels`).
    pub fn with_pod_labels(mut self, on: bool) -> Collector {
        self.pod_labels = on;
        self
    }

    pub fn evaluator(&self) -> &Evaluator {
        &self.evaluator
    }

    /// Runs the source's own past through the evaluator, ending just
    /// before `t0`, so alerts have settled: one collection a minute (the
    /// long windows' checkpoint rate) up to the last [`FINE_LIMIT`], then
    /// one per interval.
    pub fn replay(&mut self, t0: f64) {
        let span = self.source.history_seconds();
        let fine = FINE_LIMIT.as_secs_f64().min(span);
        let step = self.interval.as_secs_f64();
        let coarse = step.max(60.0);
        let mut t = t0 - span;
        while t < t0 - fine {
            self.collect_at(t, true);
            t += coarse;
        }
        let steps = (fine / step).ceil() as u64;
        for i in (1..=steps).rev() {
            self.collect_at(t0 - i as f64 * step, true);
        }
    }

    /// The first collection: the source's past replayed (see
    /// [`Collector::replay`]), then a collection at `t0`.
    pub fn first(&mut self, t0: f64) -> Published {
        self.replay(t0);
        self.collect_at(t0, false)
    }

    /// One collection at Unix time `at`. The replay skips what only the
    /// live exporter needs: process stats, the last good copy, the alert list.
    pub fn collect_at(&mut self, at: f64, replaying: bool) -> Published {
        let started = Instant::now();
        let result = self.source.collect(at);
        let collect_duration = started.elapsed();
        let process = if replaying {
            Default::default()
        } else {
            process::read_stats()
        };
        let snapshot = match result {
            Ok(mut gpus) => {
                let on = self.collectors;
                for g in &mut gpus {
                    g.readings.retain(on);
                    bound_processes(&mut g.readings.processes, MAX_PROCESSES);
                    for m in &mut g.mig {
                        m.readings.retain(on);
                        bound_processes(&mut m.readings.processes, MAX_PROCESSES);
                    }
                }
                let s = Snapshot {
                    gpus,
                    models: if on.has(Named::Models) {
                        self.source.models()
                    } else {
                        Vec::new()
                    },
                    source: self.source.kind(),
                    at,
                    published: Instant::now(),
                    collect_duration,
                    error: None,
                    process,
                    collectors: on,
                    timings: self.source.timings(),
                    kubernetes: Kubernetes {
                        kubelet: self.source.kubelet(),
                        pod_labels: self.pod_labels,
                    },
                };
                if !replaying {
                    self.last_good = Some(s.clone());
                    if self.failing.recover() {
                        log::info!("collection recovered");
                    }
                }
                s
            }
            Err(e) => {
                if !replaying {
                    match self.failing.fail_at(&e.0, Instant::now()) {
                        Verdict::New => log::warn!("collection failed: {e}"),
                        Verdict::Again(n) => log::warn!(
                            "collection still failing ({n} times since the last line): {e}"
                        ),
                        Verdict::Quiet => {}
                    }
                }
                // The last good readings, marked by their age, until they
                // are too old to pass for current; then none.
                let mut s = match &self.last_good {
                    Some(good) if good.published.elapsed() <= self.max_stale => good.clone(),
                    _ => Snapshot::empty(self.source.kind()),
                };
                if let Some(good) = &self.last_good {
                    s.published = good.published;
                }
                s.at = at;
                s.collect_duration = collect_duration;
                s.error = Some(e.0);
                s.process = process;
                s.collectors = self.collectors;
                s.kubernetes = Kubernetes {
                    kubelet: self.source.kubelet(),
                    pod_labels: self.pod_labels,
                };
                s
            }
        };
        let changes = self.evaluator.eval(&snapshot);
        log_transitions(&changes, &snapshot.gpus, replaying);
        let alerts = if replaying {
            Vec::new()
        } else {
            self.evaluator.alerts()
        };
        Published { alerts, snapshot }
    }

    fn reload(&mut self, r: Reload) {
        self.evaluator = Evaluator::new(r.rules);
        let now = unix_now();
        match r.source {
            Some(source) => {
                self.source = source;
                self.last_good = None;
            }
            // Lost GPUs are forgotten.
            None => self.source.forget(),
        }
        self.replay(now);
        log::info!("reloaded: {} rules", self.evaluator.rules().len());
    }

    /// Makes the first collection (see [`Collector::first`]), hands it to
    /// `on_first` and publishes it, then collects every interval until the
    /// process ends. A slow collection delays the next one rather than
    /// overlapping it.
    pub fn run(
        mut self,
        latest: Arc<Latest>,
        reloads: Receiver<Reload>,
        on_first: impl FnOnce(&Published, &Evaluator),
    ) {
        let first = self.first(unix_now());
        on_first(&first, &self.evaluator);
        latest.set(first);
        let mut next = Instant::now();
        loop {
            next += self.interval;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
            while let Ok(r) = reloads.try_recv() {
                self.reload(r);
            }
            let p = self.collect_at(unix_now(), false);
            latest.set(p);
        }
    }
}

/// One line per transition; an alert about a GPU names who uses it, as
/// its `workloads` annotation does.
fn log_transitions(changes: &[Transition], gpus: &[Gpu], replaying: bool) {
    for c in changes {
        let who = match c.subject {
            Subject::Gpu { .. } if !replaying => expand(WORKLOADS, &c.subject, c.value, gpus),
            _ => String::new(),
        };
        let who = who.trim_end();
        let labels: Vec<String> = c
            .subject
            .labels()
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        let msg = format_args!(
            "alert {}{{{}}} {} -> {} value={}{}{who}{}",
            c.rule,
            labels.join(","),
            c.from,
            c.to,
            c.value,
            if who.is_empty() { "" } else { " workloads=\"" },
            if who.is_empty() { "" } else { "\"" },
        );
        if replaying {
            log::debug!("{msg} (replayed history)");
        } else {
            log::info!("{msg}");
        }
    }
}
