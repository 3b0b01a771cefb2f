//! Evaluates rules against each snapshot the way Prometheus does: counter
//! increases with reset handling and extrapolation, and the
//! inactive → pending → firing → resolved machine with `for` and
//! `keep_firing_for`.

use super::rules::{Expr, Rule, Signal};
use crate::snapshot::Snapshot;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

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

/// An active (pending or firing) alert for one GPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    pub rule: Arc<Rule>,
    pub gpu: u32,
    pub uuid: String,
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
    pub gpu: u32,
    pub uuid: String,
    pub from: &'static str,
    pub to: &'static str,
    pub value: f64,
}

/// Samples of one counter signal on one GPU, oldest first.
type Track = VecDeque<(f64, f64)>;

pub struct Evaluator {
    rules: Vec<Arc<Rule>>,
    /// Counter history per (signal, GPU UUID), trimmed to the longest
    /// window that reads it.
    tracks: HashMap<(Signal, String), Track>,
    windows: Vec<(Signal, f64)>,
    /// Active alerts keyed by (rule index, GPU UUID).
    active: HashMap<(usize, String), Alert>,
}

impl Evaluator {
    pub fn new(rules: Vec<Rule>) -> Evaluator {
        let mut windows: Vec<(Signal, f64)> = Vec::new();
        for r in &rules {
            if let Expr::Increase(s, w) = r.expr {
                match windows.iter_mut().find(|(x, _)| *x == s) {
                    Some((_, max)) => *max = max.max(w.as_secs_f64()),
                    None => windows.push((s, w.as_secs_f64())),
                }
            }
        }
        Evaluator {
            rules: rules.into_iter().map(Arc::new).collect(),
            tracks: HashMap::new(),
            windows,
            active: HashMap::new(),
        }
    }

    /// Folds one snapshot in and returns the state changes it caused.
    pub fn eval(&mut self, snap: &Snapshot) -> Vec<Transition> {
        let t = snap.at;
        for g in &snap.gpus {
            for &(signal, window) in &self.windows {
                let track = self.tracks.entry((signal, g.uuid.clone())).or_default();
                if let Some(v) = signal.read(g) {
                    track.push_back((t, v));
                }
                while track.front().is_some_and(|&(ts, _)| ts <= t - window) {
                    track.pop_front();
                }
            }
        }
        let present = |uuid: &str| snap.gpus.iter().any(|g| g.uuid == uuid);
        self.tracks.retain(|(_, uuid), _| present(uuid));

        let mut changes = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            for g in &snap.gpus {
                let value = match rule.expr {
                    Expr::Gauge(s) => s.read(g),
                    Expr::Increase(s, w) => self
                        .tracks
                        .get(&(s, g.uuid.clone()))
                        .and_then(|track| increase(track, t, w.as_secs_f64())),
                };
                let holds = value.filter(|&v| rule.cmp.holds(v, rule.threshold));
                let key = (i, g.uuid.clone());
                let mut change = |from, to, value| {
                    changes.push(Transition {
                        rule: rule.name.clone(),
                        gpu: g.index,
                        uuid: g.uuid.clone(),
                        from,
                        to,
                        value,
                    })
                };
                match (holds, self.active.get_mut(&key)) {
                    (Some(v), Some(a)) => {
                        a.value = v;
                        a.keep_since = None;
                        if a.state == State::Pending && t - a.active_at >= rule.for_.as_secs_f64() {
                            a.state = State::Firing;
                            change("pending", "firing", v);
                        }
                    }
                    (Some(v), None) => {
                        let state = if rule.for_.is_zero() {
                            State::Firing
                        } else {
                            State::Pending
                        };
                        change("inactive", state.as_str(), v);
                        self.active.insert(
                            key,
                            Alert {
                                rule: rule.clone(),
                                gpu: g.index,
                                uuid: g.uuid.clone(),
                                state,
                                active_at: t,
                                value: v,
                                keep_since: None,
                            },
                        );
                    }
                    (None, Some(a)) => {
                        let since = *a.keep_since.get_or_insert(t);
                        let keep = a.state == State::Firing
                            && t - since < rule.keep_firing_for.as_secs_f64();
                        if !keep {
                            let to = if a.state == State::Firing {
                                "resolved"
                            } else {
                                "inactive"
                            };
                            change(a.state.as_str(), to, value.unwrap_or(a.value));
                            self.active.remove(&key);
                        }
                    }
                    (None, None) => {}
                }
            }
        }
        // A GPU gone from the snapshot has no series left: its alerts end.
        self.active.retain(|(_, uuid), a| {
            let keep = present(uuid);
            if !keep {
                let to = if a.state == State::Firing {
                    "resolved"
                } else {
                    "inactive"
                };
                changes.push(Transition {
                    rule: a.rule.name.clone(),
                    gpu: a.gpu,
                    uuid: uuid.clone(),
                    from: a.state.as_str(),
                    to,
                    value: a.value,
                });
            }
            keep
        });
        changes
    }

    /// Pending and firing alerts, ordered by rule then GPU.
    pub fn alerts(&self) -> Vec<Alert> {
        let mut v: Vec<(usize, Alert)> = self
            .active
            .iter()
            .map(|((i, _), a)| (*i, a.clone()))
            .collect();
        v.sort_by_key(|(i, a)| (*i, a.gpu));
        v.into_iter().map(|(_, a)| a).collect()
    }

    /// `increase()` of a tracked counter signal over `window` seconds
    /// ending at `t`, or `None` without two samples.
    pub fn increase(&self, signal: Signal, uuid: &str, t: f64, window: f64) -> Option<f64> {
        let track = self.tracks.get(&(signal, uuid.to_string()))?;
        increase(track, t, window)
    }
}

/// Prometheus' `extrapolatedRate` for counters, as `increase()`: sums the
/// deltas across resets, then extrapolates to the window's edges (but not
/// below zero, and not further than half a sample interval past the data).
pub fn increase(samples: &Track, t: f64, window: f64) -> Option<f64> {
    let start = t - window;
    let mut it = samples.iter().filter(|&&(ts, _)| ts > start && ts <= t);
    let &(t_first, v_first) = it.next()?;
    let (mut n, mut prev, mut t_last, mut delta) = (1u32, v_first, t_first, 0.0);
    for &(ts, v) in it {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::rules::{Cmp, Severity};
    use crate::snapshot::{Gpu, Readings};
    use std::time::{Duration, Instant};

    fn track(points: &[(f64, f64)]) -> Track {
        points.iter().copied().collect()
    }

    #[test]
    fn increase_matches_prometheus() {
        // 0..=10 once a minute; the window (0, 600] leaves out the first
        // sample, so 9 over 540s extrapolates to the left edge: 10.
        let t: Track = (0..=10).map(|i| (i as f64 * 60.0, i as f64)).collect();
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

    fn snap(at: f64, temps: &[Option<f64>]) -> Snapshot {
        let mut s = Snapshot::empty("sim");
        s.at = at;
        s.published = Instant::now();
        s.error = None;
        s.gpus = temps
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
        }
    }

    fn states(e: &Evaluator) -> Vec<(u32, State)> {
        e.alerts().iter().map(|a| (a.gpu, a.state)).collect()
    }

    #[test]
    fn for_and_keep_firing_for() {
        let hot = Some(0x40 as f64);
        let cool = Some(0.0);
        let mut e = Evaluator::new(vec![throttle_rule(30, 20)]);
        // One bad sample below `for` stays pending, then goes inactive.
        let ch = e.eval(&snap(0.0, &[hot, cool]));
        assert_eq!(ch[0].to, "pending");
        assert_eq!(states(&e), [(0, State::Pending)]);
        let ch = e.eval(&snap(10.0, &[cool, cool]));
        assert_eq!((ch[0].from, ch[0].to), ("pending", "inactive"));
        assert!(e.alerts().is_empty());
        // Held for 30s, it fires.
        for t in [20.0, 35.0] {
            e.eval(&snap(t, &[hot, cool]));
        }
        assert_eq!(states(&e), [(0, State::Pending)]);
        let ch = e.eval(&snap(50.0, &[hot, cool]));
        assert_eq!((ch[0].from, ch[0].to), ("pending", "firing"));
        assert_eq!(e.alerts()[0].active_at, 20.0);
        // keep_firing_for holds it 20s after it clears, then it resolves.
        assert!(e.eval(&snap(60.0, &[cool, cool])).is_empty());
        assert!(e.eval(&snap(79.0, &[cool, cool])).is_empty());
        assert_eq!(states(&e), [(0, State::Firing)]);
        let ch = e.eval(&snap(80.0, &[cool, cool]));
        assert_eq!((ch[0].from, ch[0].to), ("firing", "resolved"));
        assert!(e.alerts().is_empty());
    }

    #[test]
    fn missing_readings_and_vanished_gpus_end_alerts() {
        let mut e = Evaluator::new(vec![throttle_rule(0, 0)]);
        e.eval(&snap(0.0, &[Some(8.0), Some(8.0)]));
        assert_eq!(states(&e), [(0, State::Firing), (1, State::Firing)]);
        let ch = e.eval(&snap(1.0, &[None]));
        assert_eq!(ch.len(), 2);
        assert!(e.alerts().is_empty());
    }
}
