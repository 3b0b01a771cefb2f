//! The judge: the alert evaluator's thread. It replays the source's past (the
//! simulator's three days) while the poller already serves live
//! collections, then evaluates each collection as it comes; while none
//! comes (a hung collection), it evaluates the stall itself every interval,
//! from the newest snapshot and the same [`Freshness`] the HTTP side
//! serves, so the stall alert fires during the hang. It publishes the
//! alerts next to the snapshot.

use crate::{Latest, Poller, Progress, Published, Recent, RecentModel, Replay, Work};
use alerts::rules::Expr;
use alerts::{Evaluator, Rule, Signal, Subject, Transition, WORKLOADS, expand};
use base::time::format_duration;
use base::time::unix_now;
use model::{Bounds, Freshness, Gpu, Snapshot};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Replay progress is published this often, in steps.
const PROGRESS_EVERY: usize = 256;

/// Called once, when the first replay is done and the first live
/// collection evaluated: the seed table, the history's size.
pub type OnReady = Box<dyn FnOnce(&Published, &Evaluator) + Send>;

pub struct Judge {
    pub latest: Arc<Latest>,
    pub bounds: Bounds,
    /// How often a stall is evaluated: the collection interval.
    pub tick: Duration,
    pub on_ready: Option<OnReady>,
}

/// Runs `replay` through `evaluator`, calling `progress(done, total)` now
/// and then.
pub fn replay(evaluator: &mut Evaluator, mut replay: Replay, mut progress: impl FnMut(u64, u64)) {
    let total = replay.steps.len();
    for i in 0..total {
        if i % PROGRESS_EVERY == 0 {
            progress(i as u64, total as u64);
        }
        let s = replay.snapshot(i);
        log_transitions(&evaluator.eval(&s), &s.gpus, true);
    }
}

/// A new evaluator of `rules` that has replayed the poller's past (the
/// simulator's), and the collection at `t0` it then judged: what `--once`
/// prints, and where tests start from.
pub fn settled(
    poller: &mut Poller,
    rules: Vec<Rule>,
    bounds: Bounds,
    t0: f64,
) -> (Published, Evaluator) {
    let mut evaluator = Evaluator::new(rules);
    if let Some(past) = poller.history(t0) {
        replay(&mut evaluator, past, |_, _| {});
    }
    let s = poller.collect_at(t0);
    log_transitions(
        &evaluator.eval_at(&s, s.at, s.freshness(s.finished, bounds)),
        &s.gpus,
        false,
    );
    let p = Published {
        recent: Arc::new(recent(&evaluator, &s, s.at)),
        snapshot: Arc::new(s),
        alerts: Arc::new(evaluator.alerts()),
        replay: None,
    };
    (p, evaluator)
}

impl Judge {
    fn publish(&self, evaluator: &Evaluator, recent: Recent, replay: Option<Progress>) {
        self.latest.set_alerts(evaluator.alerts(), recent, replay);
    }

    /// Evaluates what `work` hands over until the poller is gone. `rules`
    /// hold from the first instant, so a source whose first load hangs
    /// (NVML's init) is judged stalled like any later collection.
    pub fn run(mut self, rules: Vec<Rule>, work: Receiver<Work>) {
        let mut evaluator = Evaluator::new(rules);
        let mut last = Instant::now();
        loop {
            match work.recv_timeout(self.tick) {
                Ok(Work::Start {
                    rules,
                    replay: past,
                    first,
                }) => {
                    evaluator = Evaluator::new(rules);
                    if let Some(past) = past {
                        let progress = |done, total| {
                            let p = Progress { done, total, first };
                            self.latest
                                .set_alerts(Vec::new(), Recent::default(), Some(p));
                        };
                        replay(&mut evaluator, past, progress);
                    }
                    self.publish(&evaluator, Recent::default(), None);
                }
                Ok(Work::Collected(s)) => {
                    // Judged as it stood when it was made: a collection
                    // queued behind a replay is no stall.
                    let fresh = s.freshness(s.finished, self.bounds);
                    self.judge(&mut evaluator, &s, s.at, fresh);
                    last = Instant::now();
                    if let Some(f) = self.on_ready.take() {
                        log::info!(
                            "alerts: {} rules; their history holds {} bytes",
                            evaluator.rules().len(),
                            evaluator.history_bytes()
                        );
                        f(&self.latest.get(), &evaluator);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    // No collection for a tick: judge the newest snapshot
                    // as it stands now, stalled or not.
                    let p = self.latest.get();
                    let fresh = p.snapshot.freshness(Instant::now(), self.bounds);
                    if fresh.stalled && last.elapsed() >= self.tick {
                        self.judge(&mut evaluator, &p.snapshot, unix_now(), fresh);
                        last = Instant::now();
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn judge(&self, evaluator: &mut Evaluator, s: &Snapshot, at: f64, fresh: Freshness) {
        log_transitions(&evaluator.eval_at(s, at, fresh), &s.gpus, false);
        self.publish(evaluator, recent(evaluator, s, at), None);
    }
}

/// `s`'s models' requests over the first TTFT burn-rate rule's first short
/// window ending at `at`: the evaluator's own increases, taken per replica
/// and summed, as its pages take them.
pub fn recent(evaluator: &Evaluator, s: &Snapshot, at: f64) -> Recent {
    let short = evaluator.rules().iter().find_map(|r| match &r.expr {
        Expr::BurnRate { windows, .. } => Some(windows.first()?.short),
        _ => None,
    });
    let Some(w) = short else {
        return Recent::default();
    };
    let models = (s.models.iter())
        .filter_map(|m| {
            let subject = Subject::Model(m.name.clone());
            let requests = evaluator.increase(Signal::Requests, &subject, at, w)?;
            let good = evaluator.increase(Signal::GoodRequests, &subject, at, w)?;
            let name = m.name.clone();
            Some(RecentModel {
                name,
                requests,
                good,
            })
        })
        .collect();
    Recent {
        window: format_duration(w),
        models,
    }
}

/// Logs each state change once; a replay's at debug level. An alert about
/// a GPU names who uses it, as its `workloads` annotation does.
pub fn log_transitions(changes: &[Transition], gpus: &[Gpu], replaying: bool) {
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
