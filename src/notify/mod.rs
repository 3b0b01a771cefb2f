//! The exporter sends its own alerts to Alertmanager (`POST
//! /api/v2/alerts`), as Prometheus would from the printed rules: on its
//! own two threads, so that a slow or dead Alertmanager never delays a
//! collection, a scrape or an evaluation. `am-feed` reads the evaluator's
//! published alerts once per evaluation and queues what is due: a firing
//! alert when it starts and then every `--alertmanager.resend-interval`,
//! its `endsAt` 4 times the larger of that and the evaluation interval
//! ahead (so a dead exporter's alerts resolve by themselves); a resolved
//! one with `endsAt` at the resolve time, resent for [`RESOLVED_RETENTION`].
//! `am-send` posts the queue (bounded, the oldest dropped and counted) to
//! every Alertmanager, each post within one deadline through the engine
//! reader's HTTP/1.1 client, over TLS to an https:// one. A stop sends
//! what is queued within its budget and never resolves an alert that still
//! fires.

mod payload;

pub use exposition::alertmanager_stats::Stats;
pub use payload::Context;

use crate::config::alertmanager::{Alertmanager, Target};
use alerts::{Alert, State};
use base::time::unix_now;
use fill::engines::client;
use poller::Latest;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, mpsc};
use std::time::{Duration, Instant};

/// How long a resolved alert is sent again: Prometheus' resolved
/// retention.
pub const RESOLVED_RETENTION: Duration = Duration::from_secs(15 * 60);
/// The most alerts in one post (Prometheus' `maxBatchSize` is 256).
const MAX_BATCH: usize = 64;

/// What both threads share.
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    stats: &'static Stats,
}

#[derive(Default)]
struct Queue {
    /// Each alert's JSON, `endsAt` included.
    alerts: VecDeque<String>,
    /// Set by a stop: send what is queued by then, queue nothing more.
    stop: Option<Instant>,
}

fn lock(s: &Shared) -> MutexGuard<'_, Queue> {
    s.queue.lock().unwrap_or_else(|e| e.into_inner())
}

/// The notifier's handle: [`Notifier::stop`] flushes it.
pub struct Notifier {
    shared: Arc<Shared>,
    sent: mpsc::Receiver<()>,
}

/// How the alerts are sent: from the flags.
pub struct Plan {
    pub options: Alertmanager,
    /// `Authorization` header line, from the bearer token file.
    pub authorization: Option<String>,
    /// Each target's TLS peer, in their order: `None` for http://.
    pub peers: Vec<Option<client::Peer>>,
    /// The evaluation interval (`--collect.interval`).
    pub tick: Duration,
    pub job: String,
    pub instance: String,
    pub runbook_base: String,
}

impl Notifier {
    /// Starts both threads; `None` without `--alertmanager.url`. Its
    /// counts are `stats`, which the metrics read.
    pub fn start(
        plan: Plan,
        latest: Arc<Latest>,
        stats: &'static Stats,
    ) -> std::io::Result<Option<Notifier>> {
        if plan.options.targets.is_empty() {
            return Ok(None);
        }
        let shared = Arc::new(Shared {
            queue: Mutex::default(),
            wake: Condvar::new(),
            stats,
        });
        let plan = Arc::new(plan);
        let (feeder, sender) = (shared.clone(), shared.clone());
        let p = plan.clone();
        std::thread::Builder::new()
            .name("am-feed".into())
            .spawn(move || feed(&p, &latest, &feeder))?;
        let (done, sent) = mpsc::channel();
        std::thread::Builder::new()
            .name("am-send".into())
            .spawn(move || {
                send_all(&plan, &sender);
                let _ = done.send(());
            })?;
        Ok(Some(Notifier { shared, sent }))
    }

    /// SIGTERM: queues nothing more (no resolve for an alert that still
    /// fires: it ends at its `endsAt` if the exporter does not come back),
    /// sends what is queued, and returns within `budget`.
    pub fn stop(self, budget: Duration) {
        let until = Instant::now() + budget;
        lock(&self.shared).stop = Some(until);
        self.shared.wake.notify_all();
        if self.sent.recv_timeout(budget).is_err() {
            log::warn!(
                "alertmanager: {} alerts unsent after {}ms; exiting anyway",
                lock(&self.shared).alerts.len(),
                budget.as_millis()
            );
        }
    }
}

/// One alert as last sent.
struct Sent {
    /// Its JSON less `endsAt`.
    body: String,
    last: f64,
    /// When it resolved; `None` while it fires.
    resolved: Option<f64>,
}

/// What was sent, by each alert's labels, and when the next is due.
struct Book {
    sent: HashMap<String, Sent>,
    /// `--alertmanager.resend-interval`, in seconds.
    resend: f64,
    /// How far ahead a firing alert's `endsAt` is.
    valid: f64,
}

impl Book {
    fn new(resend: Duration, tick: Duration) -> Book {
        let resend = resend.as_secs_f64();
        Book {
            sent: HashMap::new(),
            resend,
            valid: 4.0 * resend.max(tick.as_secs_f64()),
        }
    }

    /// The alerts due at `now`, each whole, given those firing by their
    /// labels and how to write one's body.
    fn due<A>(
        &mut self,
        firing: &HashMap<String, A>,
        body: impl Fn(&str, &A) -> String,
        now: f64,
    ) -> Vec<String> {
        let resend = self.resend;
        // One due, all sent: every firing alert then ends at the same
        // `endsAt`, so that when the exporter dies no source of an
        // inhibition expires before what it mutes.
        let any = firing.keys().any(|l| {
            (self.sent.get(l)).is_none_or(|s| s.resolved.is_some() || now - s.last >= resend)
        });
        let mut due = Vec::new();
        for (labels, a) in firing.iter().filter(|_| any) {
            let body = body(labels, a);
            due.push(payload::ended(&body, now + self.valid));
            let s = Sent {
                body,
                last: now,
                resolved: None,
            };
            self.sent.insert(labels.clone(), s);
        }
        self.sent.retain(|labels, s| {
            if s.resolved.is_none() && !firing.contains_key(labels) {
                s.resolved = Some(now);
                s.last = f64::NEG_INFINITY;
            }
            let Some(at) = s.resolved else { return true };
            if now - s.last >= resend {
                s.last = now;
                due.push(payload::ended(&s.body, at));
            }
            now - at < RESOLVED_RETENTION.as_secs_f64()
        });
        due
    }
}

/// `am-feed`: once per evaluation, what is due goes to the queue.
fn feed(plan: &Plan, latest: &Latest, shared: &Shared) {
    let cx = Context {
        job: &plan.job,
        instance: &plan.instance,
        external: &plan.options.labels,
        runbook_base: &plan.runbook_base,
    };
    let mut book = Book::new(plan.options.resend, plan.tick);
    let mut next = Instant::now();
    loop {
        {
            let q = lock(shared);
            let wait = next.saturating_duration_since(Instant::now());
            let (q, _) = (shared.wake)
                .wait_timeout_while(q, wait, |q| q.stop.is_none())
                .unwrap_or_else(|e| e.into_inner());
            if q.stop.is_some() {
                return;
            }
        }
        next += plan.tick;
        let p = latest.get();
        // The history replaying: the alerts are not settled yet.
        if p.replay.is_some() {
            continue;
        }
        let firing: HashMap<String, &Alert> = (p.alerts.iter())
            .filter(|a| a.state == State::Firing)
            .map(|a| (payload::labels(a, &cx), a))
            .collect();
        let body = |labels: &str, a: &&Alert| payload::body(a, labels, &p.snapshot.gpus, &cx);
        let due = book.due(&firing, body, unix_now());
        if !due.is_empty() {
            enqueue(shared, due, plan.options.capacity);
        }
    }
}

/// Adds `due` to the queue, dropping the oldest past `capacity`.
fn enqueue(shared: &Shared, due: Vec<String>, capacity: usize) {
    let mut q = lock(shared);
    q.alerts.extend(due);
    let over = q.alerts.len().saturating_sub(capacity);
    q.alerts.drain(..over);
    shared.stats.dropped(over);
    shared.stats.queued(q.alerts.len());
    drop(q);
    shared.wake.notify_all();
}

/// `am-send`: posts what is queued, a batch at a time, until a stop's
/// queue is empty or its budget spent.
fn send_all(plan: &Plan, shared: &Shared) {
    let mut up: Vec<Option<bool>> = vec![None; plan.options.targets.len()];
    loop {
        let (batch, stop) = {
            let q = lock(shared);
            let (mut q, _) = (shared.wake)
                .wait_timeout_while(q, Duration::from_secs(3600), |q| {
                    q.alerts.is_empty() && q.stop.is_none()
                })
                .unwrap_or_else(|e| e.into_inner());
            let n = q.alerts.len().min(MAX_BATCH);
            let batch: Vec<String> = q.alerts.drain(..n).collect();
            shared.stats.queued(q.alerts.len());
            (batch, q.stop)
        };
        if batch.is_empty() {
            if stop.is_some() {
                return;
            }
            continue;
        }
        let deadline = match stop {
            Some(until) if until <= Instant::now() => return,
            Some(until) => until.min(Instant::now() + plan.options.timeout),
            None => Instant::now() + plan.options.timeout,
        };
        post(plan, shared.stats, &batch, deadline, &mut up);
    }
}

/// One batch to every Alertmanager at once, each on a scoped thread, so
/// that a slow one delays no other.
fn post(plan: &Plan, stats: &Stats, batch: &[String], deadline: Instant, up: &mut [Option<bool>]) {
    let body = format!("[{}]", batch.join(","));
    let targets = &plan.options.targets;
    let results: Vec<Result<Duration, client::PostFailure>> = std::thread::scope(|s| {
        let handles: Vec<_> = (targets.iter().zip(&plan.peers))
            .map(|(t, tls)| {
                let (auth, body) = (plan.authorization.as_deref(), &body);
                s.spawn(move || one(t, tls.as_ref(), auth, body, deadline))
            })
            .collect();
        (handles.into_iter())
            .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
            .collect()
    });
    for (i, r) in results.into_iter().enumerate() {
        let url = &targets[i].url;
        let now_up = r.is_ok();
        match &r {
            Ok(took) => stats.sent(i, *took),
            Err((why, _)) => stats.failed(i, why.label()),
        }
        if up[i] != Some(now_up) {
            match r {
                Ok(_) => log::info!("alertmanager {url}: up, {} alerts sent", batch.len()),
                Err((_, line)) => log::warn!("alertmanager {url}: down: {line}"),
            }
            up[i] = Some(now_up);
        }
    }
}

fn panicked() -> client::PostFailure {
    let parse = model::EngineError::Parse;
    (parse.into(), "the post panicked".into())
}

/// One post, within `deadline`: how long it took.
fn one(
    t: &Target,
    tls: Option<&client::Peer>,
    authorization: Option<&str>,
    body: &str,
    deadline: Instant,
) -> Result<Duration, client::PostFailure> {
    let started = Instant::now();
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: gpu-exporter/{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{body}",
        t.path,
        t.authority,
        env!("CARGO_PKG_VERSION"),
        body.len(),
        authorization.unwrap_or("")
    );
    client::send(&t.authority, tls, request.as_bytes(), deadline)?;
    Ok(started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each alert due, as (its labels, its endsAt in seconds from 0).
    fn due(book: &mut Book, firing: &[&str], now: f64) -> Vec<(String, String)> {
        let firing: HashMap<String, ()> = firing.iter().map(|l| (l.to_string(), ())).collect();
        let body = |l: &str, _: &()| format!("{{\"labels\":\"{l}\"");
        let mut out: Vec<(String, String)> = (book.due(&firing, body, now).iter())
            .map(|j| {
                let l = j.split('"').nth(3).unwrap().to_string();
                let ends = j.split("\"endsAt\":\"").nth(1).unwrap();
                (l, ends.trim_end_matches("\"}").to_string())
            })
            .collect();
        out.sort();
        out
    }

    fn at(secs: u64) -> String {
        base::time::rfc3339(secs as f64)
    }

    /// Firing alerts are sent at once and every resend interval, ending 4
    /// resend intervals on; one due sends all; a resolved one is sent with
    /// endsAt at its resolve time, again every resend interval, for 15
    /// minutes, then forgotten.
    #[test]
    fn firing_resent_resolved_kept_for_fifteen_minutes() {
        let mut book = Book::new(Duration::from_secs(60), Duration::from_secs(1));
        let two = |a: &str, b: &str, t: u64| vec![(a.into(), at(t)), (b.into(), at(t))];
        assert_eq!(due(&mut book, &["a"], 0.0), [("a".into(), at(240))]);
        assert_eq!(due(&mut book, &["a"], 30.0), []);
        // A new alert: both sent, one endsAt.
        assert_eq!(due(&mut book, &["a", "b"], 40.0), two("a", "b", 280));
        assert_eq!(due(&mut book, &["a", "b"], 99.0), []);
        assert_eq!(due(&mut book, &["a", "b"], 100.0), two("a", "b", 340));
        // b resolves: sent at once with endsAt now, then each minute.
        assert_eq!(due(&mut book, &["a"], 110.0), [("b".into(), at(110))]);
        assert_eq!(due(&mut book, &["a"], 150.0), []);
        assert_eq!(
            due(&mut book, &["a"], 170.0),
            two("a", "b", 410)
                .into_iter()
                .map(|(l, e)| match l.as_str() {
                    "b" => (l, at(110)),
                    _ => (l, e),
                })
                .collect::<Vec<_>>()
        );
        // Fifteen minutes after resolving, b is no more.
        let mut last = Vec::new();
        for t in (230..=110 + 900 + 60).step_by(60) {
            last = due(&mut book, &["a"], t as f64);
        }
        assert_eq!(last, [("a".into(), at(1070 + 240))]);
        assert!(!book.sent.contains_key("b"));
        // Nothing fires: a resolves, once now.
        assert_eq!(due(&mut book, &[], 1100.0), [("a".into(), at(1100))]);
    }
}
