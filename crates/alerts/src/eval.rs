//! Evaluates rules against each snapshot the way Prometheus does: counter
//! increases with reset handling and extrapolation, least-squares slopes,
//! multi-window burn rates, and the inactive → pending → firing → resolved
//! machine with `for` and `keep_firing_for`.
//!
//! Range functions read each subject's history ([`super::history`]), not
//! the snapshot: a series that vanished (a lost GPU's readings, a model no
//! longer served) still counts while its samples are in the window, as in
//! Prometheus. History is bounded by the rules' windows, never by uptime.
//!
//! One evaluation costs the same for every rule and subject: a snapshot's
//! readings and each distinct range expression are computed once, and
//! every rule keeps its alerts in a slot per subject. So the start-up
//! replay is linear in rules × subjects.

use super::alert::{Alert, State};
use super::history::{Spans, TIERS, Track, tier};
use super::inhibit;
use super::rules::{Expr, Rule, Signal, Subject, Who};
use model::{Freshness, Snapshot};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Windows up to this long read every sample.
pub const FINE_LIMIT: Duration = TIERS[0].0;

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

/// One rule's alert about one subject.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Slot {
    state: State,
    active_at: f64,
    /// When it last became firing (`active_at` while pending).
    fired_at: f64,
    value: f64,
    /// When the condition stopped holding while `keep_firing_for` keeps it.
    keep_since: Option<f64>,
    /// When the subject last had a reading: `gap_hold` counts from it.
    seen: f64,
}

impl Slot {
    /// An alert that became `state` at `t` with `value`.
    fn new(state: State, t: f64, value: f64) -> Slot {
        Slot {
            state,
            active_at: t,
            fired_at: t,
            value,
            keep_since: None,
            seen: t,
        }
    }
}

/// Subjects by a dense id, so that rules keep a slot per subject and
/// values are looked up by index.
#[derive(Default)]
struct Subjects {
    list: Vec<Subject>,
    ids: HashMap<Subject, u32>,
    /// The ids of the last snapshot's GPUs and models, by position: an
    /// unchanged fleet needs no lookup.
    gpus: Vec<u32>,
    models: Vec<u32>,
    /// The subject of each series, by series id: a signal's history is
    /// kept per series, a subject's own or a model's replica's, and a
    /// range function's value is the sum of its series' (as Prometheus'
    /// `sum(increase())`), so a replica's counter reset is its own.
    owner: Vec<u32>,
    /// Each subject's own series, by subject id (`NONE` until it has one).
    own: Vec<u32>,
    /// Replicas' series, by subject id, then their endpoint's URL: stable
    /// across reloads, which move an endpoint's place.
    replicas: HashMap<u32, Vec<(String, u32)>>,
}

const NONE: u32 = u32::MAX;

/// Adds a series' `v` to its subject's sum, NaN until a series has one.
fn add_to(sum: &mut f64, v: f64) {
    *sum = if sum.is_nan() { v } else { *sum + v };
}

impl Subjects {
    fn id(&mut self, s: Subject) -> u32 {
        if let Some(&id) = self.ids.get(&s) {
            return id;
        }
        let id = self.list.len() as u32;
        self.list.push(s.clone());
        self.ids.insert(s, id);
        id
    }

    fn refresh(&mut self, snap: &Snapshot) {
        let same_gpus = self.gpus.len() == snap.gpus.len()
            && self.gpus.iter().zip(&snap.gpus).all(|(&id, g)| {
                matches!(&self.list[id as usize],
                    Subject::Gpu { index, uuid } if *index == g.index && *uuid == g.uuid)
            });
        if !same_gpus {
            self.gpus = snap
                .gpus
                .iter()
                .map(|g| self.id(Subject::of_gpu(g)))
                .collect::<Vec<_>>();
        }
        let same_models = self.models.len() == snap.models.len()
            && self.models.iter().zip(&snap.models).all(|(&id, m)| {
                matches!(&self.list[id as usize], Subject::Model(name) if *name == m.name)
            });
        if !same_models {
            self.models = snap
                .models
                .iter()
                .map(|m| self.id(Subject::Model(m.name.clone())))
                .collect::<Vec<_>>();
        }
    }

    /// The subject `who` is, and the series its value in `snap` is of.
    fn of(&mut self, who: Who, snap: &Snapshot) -> (u32, u32) {
        let (id, endpoint) = match who {
            Who::Exporter => (self.id(Subject::Exporter), None),
            Who::Gpu(i) => (self.gpus[i], None),
            Who::Model(i) => (self.models[i], None),
            Who::Replica(i, e) => (self.models[i], e.and_then(|e| snap.engines.get(e))),
            // Keyed without its reason, the latest of which it then shows.
            Who::Endpoint(i) => {
                let e = &snap.engines[i];
                let url = e.url.clone();
                let engine: String = e.engine.map_or("", |e| e.name()).into();
                let reason = e.reason.map_or("", |r| r.label());
                let key = Subject::Endpoint {
                    url,
                    engine,
                    reason: "",
                };
                let id = self.id(key);
                if let Subject::Endpoint { reason: r, .. } = &mut self.list[id as usize] {
                    *r = reason;
                }
                (id, None)
            }
        };
        let next = self.owner.len() as u32;
        let series = match endpoint {
            None => {
                if self.own.len() <= id as usize {
                    self.own.resize(id as usize + 1, NONE);
                }
                let own = &mut self.own[id as usize];
                *own = if *own == NONE { next } else { *own };
                *own
            }
            Some(e) => {
                let of = self.replicas.entry(id).or_default();
                match of.iter().find(|(url, _)| *url == e.url) {
                    Some(&(_, series)) => series,
                    None => {
                        of.push((e.url.clone(), next));
                        next
                    }
                }
            }
        };
        if series == next {
            self.owner.push(id);
        }
        (id, series)
    }
}

/// A range expression's values, computed once an evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Range {
    Increase(Signal, Duration),
    Deriv(Signal, Duration),
}

/// Values by subject id; NaN where a subject has none.
type Dense = Vec<f64>;

pub struct Evaluator {
    rules: Vec<Arc<Rule>>,
    /// Every signal a rule reads; those with windows keep history.
    signals: Vec<(Signal, Spans)>,
    subjects: Subjects,
    /// By entry of `signals`, then series id.
    tracks: Vec<Vec<Option<Track>>>,
    /// By rule, then subject id.
    slots: Vec<Vec<Option<Slot>>>,
    /// This evaluation's readings, by entry of `signals`.
    current: Vec<Dense>,
    ranges: HashMap<Range, Dense>,
    /// Scratch: one rule's (value, holds) by subject.
    scratch: Vec<Option<(f64, bool)>>,
    at: f64,
}

impl Evaluator {
    pub fn new(rules: Vec<Rule>) -> Evaluator {
        let mut signals: Vec<(Signal, Spans)> = Vec::new();
        let mut add = |s: Signal, w: Option<Duration>| {
            let i = match signals.iter().position(|x| x.0 == s) {
                Some(i) => i,
                None => {
                    signals.push((s, [0.0; TIERS.len()]));
                    signals.len() - 1
                }
            };
            if let Some(w) = w {
                let span = &mut signals[i].1[tier(w)];
                *span = span.max(w.as_secs_f64());
            }
        };
        for r in &rules {
            if let Expr::Gauge(s) = r.expr {
                add(s, None);
            }
            for (s, w) in r.expr.windows() {
                add(s, Some(w));
            }
        }
        let n = signals.len();
        Evaluator {
            slots: vec![Vec::new(); rules.len()],
            rules: rules.into_iter().map(Arc::new).collect(),
            signals,
            subjects: Subjects::default(),
            tracks: (0..n).map(|_| Vec::new()).collect(),
            current: vec![Vec::new(); n],
            ranges: HashMap::new(),
            scratch: Vec::new(),
            at: f64::NEG_INFINITY,
        }
    }

    pub fn rules(&self) -> &[Arc<Rule>] {
        &self.rules
    }

    /// Bytes the sample history holds now; bounded by the rules' windows
    /// and the fleet size, never by uptime.
    pub fn history_bytes(&self) -> usize {
        self.tracks
            .iter()
            .flatten()
            .flatten()
            .map(Track::bytes)
            .sum()
    }

    fn signal_index(&self, s: Signal) -> Option<usize> {
        self.signals.iter().position(|x| x.0 == s)
    }

    /// Reads the snapshot as served while `fresh` holds, and adds its
    /// samples at `t` to the history.
    fn record(&mut self, snap: &Snapshot, t: f64, fresh: Freshness) {
        self.subjects.refresh(snap);
        let n = self.subjects.list.len();
        for (k, &(signal, spans)) in self.signals.iter().enumerate() {
            let cur = &mut self.current[k];
            cur.clear();
            cur.resize(n, f64::NAN);
            let subjects = &mut self.subjects;
            let mut got = Vec::new();
            signal.each(snap, fresh, &mut |who, v| {
                got.push((subjects.of(who, snap), v))
            });
            // The exporter's id may be new.
            cur.resize(self.subjects.list.len(), f64::NAN);
            let tracks = &mut self.tracks[k];
            let keep = spans.iter().any(|&s| s > 0.0);
            for ((id, series), v) in got {
                // A model's replicas sum to its value.
                add_to(&mut cur[id as usize], v);
                if keep {
                    let series = series as usize;
                    if tracks.len() <= series {
                        tracks.resize_with(series + 1, || None);
                    }
                    tracks[series]
                        .get_or_insert_with(|| Track::new(signal.is_counter(), &spans))
                        .push(t, v);
                }
            }
            // What no window reaches any more goes, and with it a subject
            // whose last sample aged out.
            for slot in tracks.iter_mut() {
                if slot.as_mut().is_some_and(|tr| !tr.trim(t)) {
                    *slot = None;
                }
            }
        }
        self.ranges.clear();
    }

    /// A range expression's values this evaluation, by subject id: the
    /// sum of its series' values, where any has one.
    fn range(&mut self, r: Range) -> &Dense {
        let (signal, w) = match r {
            Range::Increase(s, w) | Range::Deriv(s, w) => (s, w),
        };
        let k = self.signal_index(signal);
        let (at, n) = (self.at, self.subjects.list.len());
        let tracks = k.map(|k| &self.tracks[k]);
        let owner = &self.subjects.owner;
        self.ranges.entry(r).or_insert_with(|| {
            let mut out = vec![f64::NAN; n];
            for (series, track) in tracks.into_iter().flatten().enumerate() {
                let Some(track) = track else { continue };
                let v = match r {
                    Range::Increase(..) => track.increase(at, w),
                    Range::Deriv(..) => track.deriv(at, w),
                };
                if let Some(v) = v {
                    add_to(&mut out[owner[series] as usize], v);
                }
            }
            out
        })
    }

    /// Fills `scratch` with each subject's value for `rule` and whether
    /// its condition holds.
    fn values(&mut self, i: usize) {
        let rule = self.rules[i].clone();
        let n = self.subjects.list.len();
        let mut out = std::mem::take(&mut self.scratch);
        out.clear();
        out.resize(n, None);
        let compare = |v: f64| (!v.is_nan()).then(|| (v, rule.cmp.holds(v, rule.threshold)));
        match &rule.expr {
            Expr::Gauge(s) => {
                if let Some(k) = self.signal_index(*s) {
                    for (o, &v) in out.iter_mut().zip(&self.current[k]) {
                        *o = compare(v);
                    }
                }
            }
            &Expr::Increase(s, w) | &Expr::Rate(s, w) | &Expr::Deriv(s, w) => {
                let (range, scale) = match rule.expr {
                    Expr::Increase(..) => (Range::Increase(s, w), 1.0),
                    Expr::Rate(..) => (Range::Increase(s, w), w.as_secs_f64()),
                    _ => (Range::Deriv(s, w), 1.0),
                };
                for (o, &v) in out.iter_mut().zip(self.range(range)) {
                    *o = compare(v / scale);
                }
            }
            Expr::BurnRate { objective, windows }
            | Expr::AvailabilityBurn { objective, windows } => {
                let (total, good) = rule.expr.burn_signals();
                let budgets: Vec<f64> = (self.subjects.list.iter())
                    .map(|s| 1.0 - objective_for(&rule, *objective, s))
                    .collect();
                let mut best: Vec<(f64, bool)> = vec![(f64::NAN, false); n];
                for b in windows {
                    let burn = |me: &mut Self, w| {
                        let total = me.range(Range::Increase(total, w)).clone();
                        let good = me.range(Range::Increase(good, w));
                        total
                            .iter()
                            .zip(good)
                            .zip(&budgets)
                            .map(|((&t, &g), budget)| {
                                if t > 0.0 {
                                    (1.0 - g / t) / budget
                                } else {
                                    f64::NAN
                                }
                            })
                            .collect::<Vec<f64>>()
                    };
                    let long = burn(self, b.long);
                    let short = burn(self, b.short);
                    for ((best, &l), &s) in best.iter_mut().zip(&long).zip(&short) {
                        if l.is_nan() || s.is_nan() {
                            continue;
                        }
                        let holds = l > b.factor && s > b.factor;
                        // The first pair that holds gives the value; else
                        // the highest long-window burn.
                        if !best.1 && (holds || best.0.is_nan() || l > best.0) {
                            *best = (l, holds);
                        }
                    }
                }
                for (o, b) in out.iter_mut().zip(best) {
                    *o = (!b.0.is_nan()).then_some(b);
                }
            }
            _ => {}
        }
        self.scratch = out;
    }

    /// Per subject, whether it is a model held from its engine's last good
    /// read.
    fn held(&self, snap: &Snapshot) -> Vec<bool> {
        let list = &self.subjects.list;
        list.iter()
            .map(|s| match s {
                Subject::Model(name) => snap.models.iter().any(|m| m.held() && &m.name == name),
                _ => false,
            })
            .collect()
    }

    /// Folds one snapshot in at its own time and returns the state changes
    /// it caused.
    pub fn eval(&mut self, snap: &Snapshot) -> Vec<Transition> {
        self.eval_at(snap, snap.at, Freshness::default())
    }

    /// Folds `snap` in as served at Unix time `at` while `fresh` holds (a
    /// stalled collection is evaluated again every tick, as Prometheus
    /// scrapes it again). Time never goes back: an `at` before the last
    /// evaluation's is taken as that.
    pub fn eval_at(&mut self, snap: &Snapshot, at: f64, fresh: Freshness) -> Vec<Transition> {
        let t = at.max(self.at);
        self.at = t;
        self.record(snap, t, fresh);
        let n = self.subjects.list.len();
        let held = self.held(snap);
        let mut changes = Vec::new();
        for i in 0..self.rules.len() {
            if !self.rules[i].in_process() {
                continue;
            }
            self.values(i);
            let rule = &self.rules[i];
            let slots = &mut self.slots[i];
            slots.resize(n, None);
            let for_ = rule.for_.as_secs_f64();
            let keep = rule.keep_firing_for.as_secs_f64();
            let gap = rule.gap_hold.as_secs_f64();
            let burn = matches!(rule.expr, Expr::BurnRate { .. });
            for (id, (slot, value)) in slots.iter_mut().zip(&self.scratch).enumerate() {
                // A model's burn verdict holds, neither resolved nor new,
                // while its engine is down (EngineDown says why).
                if burn && held[id] {
                    continue;
                }
                let mut change = |from, to, value| {
                    changes.push(Transition {
                        rule: rule.name.clone(),
                        subject: self.subjects.list[id].clone(),
                        from,
                        to,
                        value,
                    })
                };
                // A gauge's alert holds through a gap in its readings, as
                // the printed rule's last_over_time does; a reading that
                // clears it resolves it at once.
                let value = match (slot.as_mut(), *value) {
                    (Some(a), None) if t - a.seen < gap => Some((a.value, true)),
                    (Some(a), v @ Some(_)) => {
                        a.seen = t;
                        v
                    }
                    (_, v) => v,
                };
                match (slot.as_mut(), value) {
                    (None, None | Some((_, false))) => {}
                    (None, Some((v, true))) => {
                        let state = if rule.for_.is_zero() {
                            State::Firing
                        } else {
                            State::Pending
                        };
                        change("inactive", state.as_str(), v);
                        *slot = Some(Slot::new(state, t, v));
                    }
                    (Some(a), Some((v, true))) => {
                        a.value = v;
                        a.keep_since = None;
                        if a.state == State::Pending && t - a.active_at >= for_ {
                            a.state = State::Firing;
                            a.fired_at = t;
                            change("pending", "firing", v);
                        }
                    }
                    // The condition no longer holds, or the series is
                    // gone: the alert ends unless keep_firing_for holds it.
                    (Some(a), other) => {
                        let since = *a.keep_since.get_or_insert(t);
                        if a.state == State::Firing && t - since < keep {
                            continue;
                        }
                        let to = match a.state {
                            State::Firing => "resolved",
                            State::Pending => "inactive",
                        };
                        change(a.state.as_str(), to, other.map_or(a.value, |x| x.0));
                        *slot = None;
                    }
                }
            }
        }
        changes
    }

    /// Pending and firing alerts, ordered by rule then subject, each marked
    /// with the firing alert that would mute it in Alertmanager.
    pub fn alerts(&self) -> Vec<Alert> {
        let mut v: Vec<(usize, Alert)> = Vec::new();
        for (i, slots) in self.slots.iter().enumerate() {
            for (id, slot) in slots.iter().enumerate() {
                if let Some(s) = slot {
                    let alert = Alert {
                        rule: self.rules[i].clone(),
                        subject: self.subjects.list[id].clone(),
                        state: s.state,
                        active_at: s.active_at,
                        fired_at: s.fired_at,
                        value: s.value,
                        muted_by: None,
                    };
                    v.push((i, alert));
                }
            }
        }
        v.sort_by(|(i, a), (j, b)| (i, &a.subject).cmp(&(j, &b.subject)));
        let mut alerts: Vec<Alert> = v.into_iter().map(|(_, a)| a).collect();
        inhibit::mark(&mut alerts);
        alerts
    }

    /// `increase()` of a counter signal over `window` ending at `t`,
    /// summed over the subject's series.
    pub fn increase(
        &self,
        signal: Signal,
        subject: &Subject,
        t: f64,
        window: Duration,
    ) -> Option<f64> {
        let k = self.signal_index(signal)?;
        let id = *self.subjects.ids.get(subject)?;
        let owned = (self.subjects.owner.iter().zip(&self.tracks[k]))
            .filter(|(o, _)| **o == id)
            .filter_map(|(_, track)| track.as_ref()?.increase(t, window));
        owned.reduce(|a, b| a + b)
    }

    /// The TTFT objective `model` is judged at by the first TTFT
    /// burn-rate rule: its own (`--engine.config`) where it has one, else
    /// the rule's; `None` without such a rule.
    pub fn ttft_objective(&self, model: &Subject) -> Option<f64> {
        self.rules.iter().find_map(|r| match &r.expr {
            Expr::BurnRate { objective, .. } => Some(objective_for(r, *objective, model)),
            _ => None,
        })
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
}

/// The objective `subject` is judged at by the burn-rate `rule` whose
/// own is `objective`: a model's own (`Rule::objectives`) replaces it.
fn objective_for(rule: &Rule, objective: f64, subject: &Subject) -> f64 {
    let own = match subject {
        Subject::Model(name) => rule.objectives.iter().find(|o| o.0 == *name),
        _ => None,
    };
    own.map_or(objective, |o| o.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{BurnWindow, Cmp, Severity};
    use model::{Gpu, Readings};
    use std::time::Instant;

    fn snap(at: f64, masks: &[Option<f64>]) -> Snapshot {
        let mut s = Snapshot::empty(model::SourceKind::Sim);
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
            keep_firing_for: Duration::from_secs(keep),
            ..Rule::new(
                "T",
                Expr::Gauge(Signal::Throttled),
                Cmp::Above,
                0.0,
                Duration::from_secs(for_),
                Severity::Ticket,
                "",
            )
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
        assert_eq!(e.alerts()[0].fired_at, 20.0);
        let ch = e.eval(&snap(50.0, &[hot, cool]));
        assert_eq!((ch[0].from, ch[0].to), ("pending", "firing"));
        // Active since the condition first held, firing since this
        // evaluation: Alertmanager's startsAt, as Prometheus' FiredAt.
        assert_eq!(
            (e.alerts()[0].active_at, e.alerts()[0].fired_at),
            (20.0, 50.0)
        );
        // keep_firing_for holds it 20s after it clears, then it resolves.
        assert!(e.eval(&snap(60.0, &[cool, cool])).is_empty());
        assert!(e.eval(&snap(79.0, &[cool, cool])).is_empty());
        assert_eq!(states(&e), [(Some(0), State::Firing)]);
        let ch = e.eval(&snap(80.0, &[cool, cool])).pop().unwrap();
        assert_eq!((ch.from, ch.to), ("firing", "resolved"));
        // The resolve line shows the value at resolve, not the fired one.
        assert_eq!(ch.value, 0.0);
        assert!(e.alerts().is_empty());
    }

    /// `gap_hold`: a gauge's alert holds through missing readings, for
    /// that long after the last, pending ones go on to fire; a reading
    /// that clears it resolves it at once.
    #[test]
    fn gap_hold_holds_through_a_gap_but_not_past_a_recovery() {
        let (hot, cool) = (Some(64.0), Some(0.0));
        let rule = Rule {
            gap_hold: Duration::from_secs(20),
            ..throttle_rule(10, 0)
        };
        let mut e = Evaluator::new(vec![rule]);
        e.eval(&snap(0.0, &[hot]));
        // Pending when the readings stop, it fires through the gap.
        let ch = e.eval(&snap(10.0, &[None]));
        assert_eq!((ch[0].from, ch[0].to), ("pending", "firing"));
        assert!(e.eval(&snap(19.0, &[None])).is_empty());
        let ch = e.eval(&snap(20.0, &[None]));
        assert_eq!((ch[0].from, ch[0].to), ("firing", "resolved"));
        // Back and hot, then back and cool: resolved at that reading.
        e.eval(&snap(30.0, &[hot]));
        e.eval(&snap(40.0, &[hot]));
        assert!(e.eval(&snap(45.0, &[None])).is_empty());
        assert_eq!(states(&e), [(Some(0), State::Firing)]);
        let ch = e.eval(&snap(50.0, &[cool]));
        assert_eq!((ch[0].from, ch[0].to), ("firing", "resolved"));
        assert!(e.alerts().is_empty());
    }

    #[test]
    fn missing_readings_and_vanished_gpus_end_gauge_alerts() {
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

    fn xid_rule() -> Rule {
        Rule::new(
            "X",
            Expr::Increase(Signal::CriticalXid, Duration::from_secs(300)),
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Page,
            "",
        )
    }

    #[test]
    fn a_vanished_series_counts_until_its_samples_age_out() {
        // GPU 1 logs an Xid, then drops out of the snapshot at 100s: its
        // samples stay in the 5m window, as Prometheus keeps them.
        let mut e = Evaluator::new(vec![xid_rule()]);
        let mut last_firing = 0.0;
        for i in 0..80 {
            let t = i as f64 * 10.0;
            let mut s = snap(t, if t < 100.0 { &[None, None] } else { &[None] });
            for g in &mut s.gpus {
                let n = u64::from(g.index == 1 && t >= 50.0);
                g.readings.xid_errors = Some(vec![(79, n)]);
            }
            e.eval(&s);
            if e.alerts().iter().any(|a| a.subject != Subject::Exporter) {
                last_firing = t;
            }
        }
        // The last 0 (at 40s) leaves [t - 300, t] at 350s; the samples of
        // the vanished series still count until then.
        assert_eq!(last_firing, 340.0);
    }

    #[test]
    fn history_is_bounded() {
        let mut e = Evaluator::new(vec![xid_rule()]);
        let mut s = snap(0.0, &[Some(0.0)]);
        let mut sizes = Vec::new();
        for i in 0..3000 {
            s.at = i as f64;
            // An Xid every sample: the worst case, a block each.
            s.gpus[0].readings.xid_errors = Some(vec![(79, i)]);
            e.eval(&s);
            sizes.push(e.history_bytes());
        }
        assert!(
            sizes[2999] <= sizes[1000],
            "{} > {}",
            sizes[2999],
            sizes[1000]
        );
        assert!(sizes[2999] < 32 * 1024, "{}", sizes[2999]);
    }

    /// A model of `requests` and `good` counts, held (`stale`) or not.
    fn model_snap(at: f64, requests: f64, good: f64, stale: bool) -> Snapshot {
        let mut s = snap(at, &[]);
        s.models = vec![model::Model {
            name: "m".into(),
            ttft_seconds: model::Histogram {
                buckets: vec![(0.25, good), (f64::INFINITY, requests)],
                sum: 0.0,
            },
            good_within: Some(0.25),
            endpoint: Some(0),
            stale,
            outcomes: None,
            replicas: Vec::new(),
        }];
        s
    }

    /// A page at 14.4x a 99.9% budget over 20 s and 5 s.
    fn burn_rule() -> Rule {
        Rule::new(
            "B",
            Expr::BurnRate {
                objective: 0.999,
                windows: vec![BurnWindow {
                    long: Duration::from_secs(20),
                    short: Duration::from_secs(5),
                    factor: 14.4,
                }],
            },
            Cmp::Above,
            0.0,
            Duration::ZERO,
            Severity::Page,
            "",
        )
    }

    #[test]
    fn a_held_model_keeps_its_burn_verdict_and_says_its_engine_is_down() {
        let burn = burn_rule();
        let down = Rule::new(
            "D",
            Expr::Gauge(Signal::EngineUp),
            Cmp::Below,
            1.0,
            Duration::ZERO,
            Severity::Ticket,
            "",
        );
        let mut e = Evaluator::new(vec![burn, down]);
        let names = |e: &Evaluator| -> Vec<String> {
            e.alerts().iter().map(|a| a.rule.name.clone()).collect()
        };
        // Every request slow: the budget burns and B fires.
        for t in 0..10 {
            e.eval(&model_snap(t as f64, 10.0 * t as f64, 0.0, false));
        }
        assert_eq!(names(&e), ["B"]);
        // The engine is down for far longer than the windows: B holds, D fires.
        for t in 10..100 {
            e.eval(&model_snap(t as f64, 90.0, 0.0, true));
        }
        assert_eq!(names(&e), ["B", "D"]);
        // Back, and healthy: D resolves at once, B once the windows say
        // so (as in Prometheus, a window of one sample has no rate).
        let mut t = 100;
        e.eval(&model_snap(t as f64, 90.0, 0.0, false));
        assert!(!names(&e).contains(&"D".to_string()));
        while t < 140 {
            t += 1;
            let n = 90.0 + 10.0 * (t - 100) as f64;
            e.eval(&model_snap(t as f64, n, n - 90.0, false));
        }
        assert!(e.alerts().is_empty(), "{:?}", names(&e));

        // A model first seen held never fires: no verdict is invented.
        let mut e = Evaluator::new(e.rules().iter().map(|r| (**r).clone()).collect());
        for t in 0..30 {
            e.eval(&model_snap(t as f64, 10.0 * t as f64, 0.0, true));
        }
        assert_eq!(names(&e), ["D"]);
    }

    /// A model's own objective replaces the rule's for it alone: 2% slow
    /// burns a 99.9% budget 20 times over, a 99% one only twice.
    #[test]
    fn a_models_own_objective_replaces_the_rules() {
        let burn = Rule {
            objectives: vec![("n".into(), 0.99)],
            ..burn_rule()
        };
        let mut e = Evaluator::new(vec![burn]);
        for t in 0..30 {
            let mut s = model_snap(t as f64, 100.0 * t as f64, 98.0 * t as f64, false);
            let mut n = s.models[0].clone();
            n.name = "n".into();
            s.models.push(n);
            e.eval(&s);
        }
        let firing: Vec<(Subject, f64)> = (e.alerts().into_iter())
            .map(|a| (a.subject, (a.value * 1e6).round() / 1e6))
            .collect();
        assert_eq!(firing, [(Subject::Model("m".into()), 20.0)]);
        // What the seed table reads: the same objective for each.
        let of = |m: &str| e.ttft_objective(&Subject::Model(m.into()));
        assert_eq!((of("m"), of("n")), (Some(0.999), Some(0.99)));
        assert_eq!(
            Evaluator::new(Vec::new()).ttft_objective(&Subject::Exporter),
            None
        );
    }

    /// An endpoint whose reads fail for one reason, then another, keeps
    /// its alert and its `for`; the alert shows the latest reason, as no
    /// label (Prometheus' copy queries it in the summary).
    #[test]
    fn an_endpoint_whose_reason_changes_keeps_its_alert() {
        use model::{EngineEndpoint, EngineError};
        let rule = crate::defaults()
            .into_iter()
            .find(|r| r.name == "EngineEndpointDown");
        let mut e = Evaluator::new(vec![rule.unwrap()]);
        let down = |at: f64, reason| {
            let mut s = snap(at, &[]);
            s.engines = vec![EngineEndpoint {
                url: "http://engine:8000/metrics".into(),
                reason: Some(reason),
                ..Default::default()
            }];
            s
        };
        e.eval(&down(0.0, EngineError::Connect));
        e.eval(&down(200.0, EngineError::Timeout));
        let ch = e.eval(&down(300.0, EngineError::Timeout));
        assert_eq!((ch[0].from, ch[0].to), ("pending", "firing"));
        let a = &e.alerts()[0];
        assert_eq!((a.active_at, a.fired_at), (0.0, 300.0));
        assert!(matches!(
            a.subject,
            Subject::Endpoint {
                reason: "timeout",
                ..
            }
        ));
        assert!(a.labels().iter().all(|(k, _)| *k != "reason"));
        let summary = crate::expand(&a.rule.summary, &a.subject, a.value, &[]);
        assert!(summary.ends_with("for 5m: timeout"), "{summary}");
    }

    /// Model `m` served by endpoints `replica-0` and `replica-1`, each
    /// with its (requests, good) counts where it serves it. `apart`: with
    /// each replica's counts; else summed alone, as before replicas were
    /// kept (the control that shows what each test guards).
    fn replicated(at: f64, shares: &[Option<(f64, f64)>], apart: bool) -> Snapshot {
        let mut s = model_snap(at, 0.0, 0.0, false);
        let url = |i: usize| format!("http://replica-{i}/metrics");
        s.engines = (0..shares.len())
            .map(|i| model::EngineEndpoint {
                url: url(i),
                up: true,
                ..Default::default()
            })
            .collect();
        let m = &mut s.models[0];
        for (i, &(requests, good)) in shares
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((i, c.as_ref()?)))
        {
            m.ttft_seconds.buckets[0].1 += good;
            m.ttft_seconds.buckets[1].1 += requests;
            m.replicas.push(model::Replica {
                endpoint: Some(i),
                requests,
                good: Some(good),
                ..Default::default()
            });
        }
        if !apart || m.replicas.len() < 2 {
            m.endpoint = m.replicas.first().and_then(|r| r.endpoint);
            m.replicas.clear();
        }
        s
    }

    /// The first second in 0..90 at which [`burn_rule`] fires, a sample a
    /// second of `counts(t)`.
    fn fires_at(apart: bool, counts: impl Fn(f64) -> Vec<Option<(f64, f64)>>) -> Option<f64> {
        let mut e = Evaluator::new(vec![burn_rule()]);
        (0..90).map(f64::from).find(|&t| {
            e.eval(&replicated(t, &counts(t), apart));
            !e.alerts().is_empty()
        })
    }

    /// 10,000 requests a second, 1 of them slow (0.01%: a tenth of the
    /// budget), from `since`: (requests, good) at `t`. Begun before the
    /// first sample, so that no window extrapolates one counter to its
    /// zero and not the other, as Prometheus does.
    fn quiet(t: f64, since: f64) -> (f64, f64) {
        let n = (t - since).max(0.0);
        (10_000.0 * n, 9_999.0 * n)
    }

    /// Replica 0 holds 50,000 slow requests from before; both run at
    /// 0.01% slow; replica 1 restarts at 30 s (its counters back to 0).
    /// Taken per replica, nothing burns; summed first, the drop is read
    /// as the model's reset and the 50,000 land in the windows.
    #[test]
    fn a_replica_restart_lands_no_old_slow_requests_in_the_windows() {
        let counts = |t: f64| {
            let (r, g) = quiet(t, -10.0);
            let restarted = if t < 30.0 {
                quiet(t, -10.0)
            } else {
                quiet(t, 29.5)
            };
            vec![Some((r + 50_000.0, g)), Some(restarted)]
        };
        assert_eq!(fires_at(true, counts), None);
        assert_eq!(fires_at(false, counts), Some(30.0));
    }

    /// Replica 0 holds 1M good requests; replica 1 restarts at 30 s and
    /// serves half its requests slow from then. Taken per replica, the burn
    /// pages in the first evaluations after the restart; summed first, the
    /// reset counts the 1M good in the windows and hides it.
    #[test]
    fn a_burn_on_a_restarted_replica_is_seen_at_once() {
        let counts = |t: f64| {
            let other = (1e6 + 100.0 * t, 1e6 + 100.0 * t);
            let restarted = if t < 30.0 {
                (100.0 * t, 100.0 * t)
            } else {
                let n = t - 29.0;
                (100.0 * n, 50.0 * n)
            };
            vec![Some(other), Some(restarted)]
        };
        let at = fires_at(true, counts).unwrap();
        assert!((30.0..=32.0).contains(&at), "{at}");
        let summed = fires_at(false, counts);
        assert!(summed.is_none_or(|t| t > 40.0), "{summed:?}");
    }

    /// Replica 1 comes up at 30 s holding 50,000 slow requests from
    /// before the exporter watched it: only its increases count from its
    /// first sample, as a new series' do in Prometheus.
    #[test]
    fn a_replica_appearing_changes_nothing_but_its_share() {
        let counts = |t: f64| {
            let (r, g) = quiet(t, -10.0);
            let late = (t >= 30.0).then_some((r + 50_000.0, g));
            vec![Some(quiet(t, -10.0)), late]
        };
        assert_eq!(fires_at(true, counts), None);
        assert_eq!(fires_at(false, counts), Some(30.0));
    }
}
