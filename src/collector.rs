//! The collector thread: read the source, stamp the snapshot, evaluate the
//! alerts, publish. Scrapes only ever read what was last published.

use crate::alerts::eval::FINE_LIMIT;
use crate::alerts::{Alert, Evaluator, Transition};
use crate::process;
use crate::snapshot::Snapshot;
use crate::source::Source;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

pub struct Collector {
    source: Box<dyn Source>,
    evaluator: Evaluator,
    interval: Duration,
    /// The last good fleet, served (with its age) while collections fail.
    last_good: Option<Snapshot>,
}

impl Collector {
    pub fn new(source: Box<dyn Source>, evaluator: Evaluator, interval: Duration) -> Collector {
        Collector {
            source,
            evaluator,
            interval,
            last_good: None,
        }
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

    /// One collection at Unix time `at`.
    pub fn collect_at(&mut self, at: f64, replaying: bool) -> Published {
        let started = Instant::now();
        let result = self.source.collect(at);
        let collect_duration = started.elapsed();
        let snapshot = match result {
            Ok(gpus) => {
                let s = Snapshot {
                    gpus,
                    models: self.source.models(),
                    source: self.source.name(),
                    at,
                    published: Instant::now(),
                    collect_duration,
                    error: None,
                    process: if replaying {
                        Default::default()
                    } else {
                        process::read_stats()
                    },
                };
                if !replaying {
                    self.last_good = Some(s.clone());
                }
                s
            }
            Err(e) => {
                if !replaying {
                    log::warn!("collection failed: {e}");
                }
                let mut s = self
                    .last_good
                    .clone()
                    .unwrap_or_else(|| Snapshot::empty(self.source.name()));
                s.at = at;
                s.collect_duration = collect_duration;
                s.error = Some(e.0);
                s.process = process::read_stats();
                s
            }
        };
        let changes = self.evaluator.eval(&snapshot);
        log_transitions(&changes, replaying);
        Published {
            alerts: self.evaluator.alerts(),
            snapshot,
        }
    }

    /// Collects every interval until the process ends. A slow collection
    /// delays the next one rather than overlapping it.
    pub fn run(mut self, latest: Arc<Latest>) {
        let mut next = Instant::now();
        loop {
            next += self.interval;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
            let p = self.collect_at(unix_now(), false);
            latest.set(p);
        }
    }
}

fn log_transitions(changes: &[Transition], replaying: bool) {
    for c in changes {
        let labels: Vec<String> = c
            .subject
            .labels()
            .iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect();
        let msg = format_args!(
            "alert {}{{{}}} {} -> {} value={}",
            c.rule,
            labels.join(","),
            c.from,
            c.to,
            c.value
        );
        if replaying {
            log::debug!("{msg} (replayed history)");
        } else {
            log::info!("{msg}");
        }
    }
}
