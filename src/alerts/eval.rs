//! Evaluates rules against each snapshot the way Prometheus does: counter
//! increases with reset handling and extrapolation, least-squares slopes,
//! multi-window burn rates, and the inactive → pending → firing → resolved
//! machine with `for` and `keep_firing_for`.
//!
//! History is bounded by the rules' windows, never by uptime, in three
//! tiers (see [`TIERS`]): windows up to 15m read every collection, up to 6h
//! one checkpoint a minute, longer ones (1d, 3d) one every five minutes.

use super::rules::{Expr, Rule, Signal, Subject};
use crate::snapshot::Snapshot;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// History tiers: windows up to the limit read samples spaced this many
/// seconds apart (0: every collection).
pub const TIERS: [(Duration, f64); 3] = [
    (Duration::from_secs(15 * 60), 0.0),
    (Duration::from_secs(6 * 3600), 60.0),
    (Duration::MAX, 300.0),
];

/// Windows up to this long read every collection.
pub const FINE_LIMIT: Duration = TIERS[0].0;

fn tier(window: Duration) -> usize {
    TIERS
        .iter()
        .position(|&(limit, _)| window <= limit)
        .unwrap_or(TIERS.len() - 1)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Pending,
    Firing,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Firing => "firing",
        }
    }
}

/// An active (pending or firing) alert.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    pub rule: Arc<Rule>,
    pub subject: Subject,
    pub state: State,
    /// Unix time the condition first held.
    pub active_at: f64,
    pub value: f64,
    /// When the condition stopped holding while `keep_firing_for` keeps it.
    keep_since: Option<f64>,
}

/// A state change, for the log: `from`/`to` are `inactive`, `pending`,
/// `firing` or `resolved`.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub rule: String,
    pub subject: Subject,
    pub from: &'static str,
    pub to: &'static str,
    pub value: f64,
}

type Samples = VecDeque<(f64, f64)>;

/// One signal's history for one subject, per tier; a tier keeps the
/// first sample of each of its spacing's periods.
#[derive(Default)]
struct Track([Samples; TIERS.len()]);

/// How far back each tier of a signal's history must reach (0: unused).
type Spans = [f64; TIERS.len()];

pub struct Evaluator {
    rules: Vec<Arc<Rule>>,
    spans: HashMap<Signal, Spans>,
    tracks: HashMap<(Signal, Subject), Track>,
    /// Active alerts keyed by (rule index, subject).
    active: HashMap<(usize, Subject), Alert>,
}

impl Evaluator {
    pub fn new(rules: Vec<Rule>) -> Evaluator {
        let mut spans: HashMap<Signal, Spans> = HashMap::new();
        for (signal, w) in rules.iter().flat_map(|r| r.expr.windows()) {
            let span = &mut spans.entry(signal).or_default()[tier(w)];
            *span = span.max(w.as_secs_f64());
        }
        Evaluator {
            rules: rules.into_iter().map(Arc::new).collect(),
            spans,
            tracks: HashMap::new(),
            active: HashMap::new(),
        }
    }

    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }

    /// Bytes the sample history holds now; bounded by the rules' windows
    /// and the fleet size, never by uptime.
    pub fn history_bytes(&self) -> usize {
        let per = std::mem::size_of::<(f64, f64)>();
        self.tracks
            .values()
            .flat_map(|t| &t.0)
            .map(|s| s.capacity() * per)
            .sum()
    }

    fn record(&mut self, snap: &Snapshot) {
        let t = snap.at;
        let mut values = Vec::new();
        for (&signal, spans) in &self.spans {
            values.clear();
            signal.read(snap, &mut values);
            for (subject, v) in values.drain(..) {
                let track = self.tracks.entry((signal, subject)).or_default();
                for ((samples, &span), &(_, spacing)) in track.0.iter_mut().zip(spans).zip(&TIERS) {
                    let period = |ts: f64| {
                        if spacing > 0.0 {
                            (ts / spacing).floor()
                        } else {
                            ts
                        }
                    };
                    if span > 0.0 && samples.back().is_none_or(|&(ts, _)| period(t) > period(ts)) {
                        samples.push_back((t, v));
                    }
                }
            }
        }
        // Trim each tier to its span (windows are left-open, as in
        // Prometheus), and forget subjects with no sample left.
        let spans = &self.spans;
        self.tracks.retain(|(signal, _), track| {
            for (samples, &span) in track.0.iter_mut().zip(&spans[signal]) {
                while samples.front().is_some_and(|&(ts, _)| ts <= t - span) {
                    samples.pop_front();
                }
            }
            track.0.iter().any(|s| !s.is_empty())
        });
    }

    fn samples(&self, signal: Signal, subject: &Subject, window: Duration) -> Option<&Samples> {
        let track = self.tracks.get(&(signal, subject.clone()))?;
        Some(&track.0[tier(window)])
    }

    /// `increase()` of a counter signal over `window` ending at `t`.
    pub fn increase(
        &self,
        signal: Signal,
        subject: &Subject,
        t: f64,
        window: Duration,
    ) -> Option<f64> {
        increase(
            self.samples(signal, subject, window)?,
            t,
            window.as_secs_f64(),
        )
    }

    /// The TTFT error ratio over `window` divided by the error budget.
    pub fn burn_rate(
        &self,
        model: &Subject,
        t: f64,
        window: Duration,
        objective: f64,
    ) -> Option<f64> {
        let total = self.increase(Signal::Requests, model, t, window)?;
        let good = self.increase(Signal::GoodRequests, model, t, window)?;
        (total > 0.0).then(|| (1.0 - good / total) / (1.0 - objective))
    }

    /// Each subject's value for `rule` and whether its condition holds.
    fn values(&self, rule: &Rule, snap: &Snapshot) -> Vec<(Subject, f64, bool)> {
        let t = snap.at;
        let mut subjects = Vec::new();
        let compare = |(s, v): (Subject, f64)| {
            let holds = rule.cmp.holds(v, rule.threshold);
            (s, v, holds)
        };
        match &rule.expr {
            Expr::Gauge(signal) => {
                signal.read(snap, &mut subjects);
                subjects.into_iter().map(compare).collect()
            }
            &Expr::Increase(signal, w) | &Expr::Rate(signal, w) | &Expr::Deriv(signal, w) => {
                signal.read(snap, &mut subjects);
                let secs = w.as_secs_f64();
                subjects
                    .into_iter()
                    .filter_map(|(s, _)| {
                        let samples = self.samples(signal, &s, w)?;
                        let v = match rule.expr {
                            Expr::Increase(..) => increase(samples, t, secs),
                            Expr::Rate(..) => increase(samples, t, secs).map(|v| v / secs),
                            _ => deriv(samples, t, secs),
                        }?;
                        Some(compare((s, v)))
                    })
                    .collect()
            }
            Expr::BurnRate { objective, windows } => {
                Signal::Requests.read(snap, &mut subjects);
                subjects
                    .into_iter()
                    .filter_map(|(s, _)| {
                        let burns: Vec<(f64, bool)> = windows
                            .iter()
                            .filter_map(|b| {
                                let long = self.burn_rate(&s, t, b.long, *objective)?;
                                let short = self.burn_rate(&s, t, b.short, *objective)?;
                                Some((long, long > b.factor && short > b.factor))
                            })
                            .collect();
                        let holding = burns.iter().find(|b| b.1);
                        let value = holding
                            .or_else(|| burns.iter().max_by(|a, b| a.0.total_cmp(&b.0)))?
                            .0;
                        Some((s, value, holding.is_some()))
                    })
                    .collect()
            }
            Expr::DriverVersionSkew => Vec::new(),
        }
    }

    /// Folds one snapshot in and returns the state changes it caused.
    pub fn eval(&mut self, snap: &Snapshot) -> Vec<Transition> {
        self.record(snap);
        let t = snap.at;
        let mut changes = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            let values = self.values(rule, snap);
            let mut change = |subject: &Subject, from, to, value| {
                changes.push(Transition {
                    rule: rule.name.clone(),
                    subject: subject.clone(),
                    from,
                    to,
                    value,
                })
            };
            for (subject, v, _) in values.iter().filter(|x| x.2) {
                match self.active.get_mut(&(i, subject.clone())) {
                    Some(a) => {
                        a.value = *v;
                        a.keep_since = None;
                        if a.state == State::Pending && t - a.active_at >= rule.for_.as_secs_f64() {
                            a.state = State::Firing;
                            change(subject, "pending", "firing", *v);
                        }
                    }
                    None => {
                        let state = if rule.for_.is_zero() {
                            State::Firing
                        } else {
                            State::Pending
                        };
                        change(subject, "inactive", state.as_str(), *v);
                        let alert = Alert {
                            rule: rule.clone(),
                            subject: subject.clone(),
                            state,
                            active_at: t,
                            value: *v,
                            keep_since: None,
                        };
                        self.active.insert((i, subject.clone()), alert);
                    }
                }
            }
            // Active alerts whose condition no longer holds, or whose
            // series is gone, end unless keep_firing_for holds them.
            self.active.retain(|(r, subject), a| {
                if *r != i || values.iter().any(|x| x.2 && &x.0 == subject) {
                    return true;
                }
                let since = *a.keep_since.get_or_insert(t);
                let keep =
                    a.state == State::Firing && t - since < rule.keep_firing_for.as_secs_f64();
                if !keep {
                    let value = values
                        .iter()
                        .find(|x| &x.0 == subject)
                        .map_or(a.value, |x| x.1);
                    let to = if a.state == State::Firing {
                        "resolved"
                    } else {
                        "inactive"
                    };
                    change(subject, a.state.as_str(), to, value);
                }
                keep
            });
        }
        changes
    }

    /// Pending and firing alerts, ordered by rule then subject.
    pub fn alerts(&self) -> Vec<Alert> {
        let mut v: Vec<(usize, Alert)> = self
            .active
            .iter()
            .map(|((i, _), a)| (*i, a.clone()))
            .collect();
        v.sort_by(|(i, a), (j, b)| (i, &a.subject).cmp(&(j, &b.subject)));
        v.into_iter().map(|(_, a)| a).collect()
    }
}

fn in_window(samples: &Samples, t: f64, window: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
    let start = t - window;
    samples
        .iter()
        .copied()
        .filter(move |&(ts, _)| ts > start && ts <= t)
}

/// Prometheus' `extrapolatedRate` for counters, as `increase()`: sums the
/// deltas across resets, then extrapolates to the window's edges (but not
/// below zero, and not further than half a sample interval past the data).
pub fn increase(samples: &Samples, t: f64, window: f64) -> Option<f64> {
    let start = t - window;
    let mut it = in_window(samples, t, window);
    let (t_first, v_first) = it.next()?;
    let (mut n, mut prev, mut t_last, mut delta) = (1u32, v_first, t_first, 0.0);
    for (ts, v) in it {
        delta += if v < prev { v } else { v - prev };
        prev = v;
        t_last = ts;
        n += 1;
    }
    if n < 2 {
        return None;
    }
    let sampled = t_last - t_first;
    let avg = sampled / (n - 1) as f64;
    let mut to_start = t_first - start;
    let to_end = t - t_last;
    if delta > 0.0 && v_first >= 0.0 {
        to_start = to_start.min(sampled * (v_first / delta));
    }
    let threshold = avg * 1.1;
    let mut span = sampled;
    span += if to_start < threshold {
        to_start
    } else {
        avg / 2.0
    };
    span += if to_end < threshold {
        to_end
    } else {
        avg / 2.0
    };
    Some(delta * span / sampled)
}

/// Prometheus' `deriv()`: the least-squares slope per second.
pub fn deriv(samples: &Samples, t: f64, window: f64) -> Option<f64> {
    let mut it = in_window(samples, t, window).peekable();
    let t0 = it.peek()?.0;
    let (mut n, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (ts, v) in it {
        let x = ts - t0;
        n += 1.0;
        sx += x;
        sy += v;
        sxx += x * x;
        sxy += x * v;
    }
    let var = n * sxx - sx * sx;
    (n >= 2.0 && var > 0.0).then(|| (n * sxy - sx * sy) / var)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::rules::{Cmp, Severity};
    use crate::snapshot::{Gpu, Readings};
    use std::time::Instant;

    fn track(points: &[(f64, f64)]) -> Samples {
        points.iter().copied().collect()
    }

    #[test]
    fn increase_matches_prometheus() {
        // 0..=10 once a minute; the window (0, 600] leaves out the first
        // sample, so 9 over 540s extrapolates to the left edge: 10.
        let t: Samples = (0..=10).map(|i| (i as f64 * 60.0, i as f64)).collect();
        let v = increase(&t, 600.0, 600.0).unwrap();
        assert!((v - 10.0).abs() < 1e-9, "{v}");
        // A reset counts the post-reset value, never a negative delta.
        let r = track(&[(10.0, 5.0), (20.0, 7.0), (30.0, 1.0), (40.0, 3.0)]);
        let v = increase(&r, 40.0, 40.0).unwrap();
        // deltas 2 + 1 + 2 = 5 over 30s, extrapolated by 10s at the start
        // (under 1.1 × 10s): 5 × 40 / 30.
        assert!((v - 5.0 * 40.0 / 30.0).abs() < 1e-9, "{v}");
        assert_eq!(increase(&track(&[(5.0, 1.0)]), 10.0, 10.0), None);
        assert_eq!(
            increase(&track(&[(1.0, 3.0), (2.0, 3.0)]), 2.0, 60.0),
            Some(0.0)
        );
    }

    #[test]
    fn deriv_is_the_slope() {
        let t: Samples = (0..60)
            .map(|i| (i as f64 * 10.0, 100.0 + 3.0 * i as f64 * 10.0))
            .collect();
        assert!((deriv(&t, 590.0, 600.0).unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(deriv(&track(&[(1.0, 1.0)]), 1.0, 60.0), None);
    }

    fn snap(at: f64, masks: &[Option<f64>]) -> Snapshot {
        let mut s = Snapshot::empty(crate::config::SourceKind::Sim);
        s.at = at;
        s.published = Instant::now();
        s.error = None;
        s.gpus = masks
            .iter()
            .enumerate()
            .map(|(i, &t)| Gpu {
                index: i as u32,
                uuid: format!("GPU-{i}"),
                up: true,
                readings: Readings {
                    clocks_event_mask: t.map(|t| t as u64),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        s
    }

    fn throttle_rule(for_: u64, keep: u64) -> Rule {
        Rule {
            name: "T".into(),
            expr: Expr::Gauge(Signal::Throttled),
            cmp: Cmp::Above,
            threshold: 0.0,
            for_: Duration::from_secs(for_),
            keep_firing_for: Duration::from_secs(keep),
            severity: Severity::Ticket,
            summary: String::new(),
            runbook: "T".into(),
        }
    }

    fn states(e: &Evaluator) -> Vec<(Option<u32>, State)> {
        e.alerts()
            .iter()
            .map(|a| match a.subject {
                Subject::Gpu { index, .. } => (Some(index), a.state),
                _ => (None, a.state),
            })
            .collect()
    }

    #[test]
    fn for_and_keep_firing_for() {
        let hot = Some(0x40 as f64);
        let cool = Some(0.0);
        let mut e = Evaluator::new(vec![throttle_rule(30, 20)]);
        // One bad sample below `for` stays pending, then goes inactive.
        let ch = e.eval(&snap(0.0, &[hot, cool]));
        assert_eq!(ch[0].to, "pending");
        assert_eq!(states(&e), [(Some(0), State::Pending)]);
        let ch = e.eval(&snap(10.0, &[cool, cool]));
        assert_eq!((ch[0].from, ch[0].to), ("pending", "inactive"));
        assert!(e.alerts().is_empty());
        // Held for 30s, it fires.
        for t in [20.0, 35.0] {
            e.eval(&snap(t, &[hot, cool]));
        }
        assert_eq!(states(&e), [(Some(0), State::Pending)]);
        let ch = e.eval(&snap(50.0, &[hot, cool]));
        assert_eq!((ch[0].from, ch[0].to), ("pending", "firing"));
        assert_eq!(e.alerts()[0].active_at, 20.0);
        // keep_firing_for holds it 20s after it clears, then it resolves.
        assert!(e.eval(&snap(60.0, &[cool, cool])).is_empty());
        assert!(e.eval(&snap(79.0, &[cool, cool])).is_empty());
        assert_eq!(states(&e), [(Some(0), State::Firing)]);
        let ch = e.eval(&snap(80.0, &[cool, cool])).pop().unwrap();
        assert_eq!((ch.from, ch.to), ("firing", "resolved"));
        assert!(e.alerts().is_empty());
    }

    #[test]
    fn missing_readings_and_vanished_gpus_end_alerts() {
        let mut e = Evaluator::new(vec![throttle_rule(0, 0)]);
        e.eval(&snap(0.0, &[Some(8.0), Some(8.0)]));
        assert_eq!(
            states(&e),
            [(Some(0), State::Firing), (Some(1), State::Firing)]
        );
        let ch = e.eval(&snap(1.0, &[None]));
        assert_eq!(ch.len(), 2);
        assert!(e.alerts().is_empty());
    }

    #[test]
    fn history_is_bounded() {
        let rule = Rule {
            expr: Expr::Increase(Signal::CriticalXid, Duration::from_secs(300)),
            ..throttle_rule(0, 0)
        };
        let mut e = Evaluator::new(vec![rule]);
        let mut s = snap(0.0, &[Some(0.0)]);
        s.gpus[0].readings.xid_errors = Some(vec![(79, 0)]);
        let mut sizes = Vec::new();
        for i in 0..3000 {
            s.at = i as f64;
            e.eval(&s);
            sizes.push(e.history_bytes());
        }
        assert!(
            sizes[2999] <= sizes[1000],
            "{} > {}",
            sizes[2999],
            sizes[1000]
        );
        assert!(sizes[2999] < 16 * 1024, "{}", sizes[2999]);
    }
}
