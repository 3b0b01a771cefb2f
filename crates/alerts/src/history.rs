//! The samples range functions read: one [`Track`] per signal and subject,
//! kept in tiers by window length, each a ring of blocks of consecutive
//! samples.
//!
//! - **Tier 0**, windows up to 15m: every sample. A block is a run of equal
//!   values (a change point starts the next), so a counter that rarely
//!   changes (Xid, ECC, remaps) costs a block per change, one that changes
//!   every collection a block per sample. Exact.
//! - **Tiers 1 and 2**, windows up to 6h and beyond: a block spans at most
//!   60 s (300 s) of samples, but a run of equal values stays one block
//!   however long, and ends at the first change (while the ring has room
//!   for it: at most one block per span as many blocks as end by time), as
//!   it does at a counter reset. Every block keeps its first
//!   and last sample exactly, its sample count, and for gauges the
//!   least-squares sums of its samples. A window whose start falls inside
//!   a block that changed value reads that block's samples as evenly spaced
//!   on the line between its first and last: the only approximation, so a
//!   verdict can move by at most one block span, and steps (Xid) are exact.
//!
//! The newest sample always ends the last block, so a new error is seen at
//! once whatever the window. Windows are closed on the left, `[t - w, t]`,
//! as Prometheus 2 selects them (3.0 leaves the start out).

use std::collections::VecDeque;
use std::time::Duration;

/// History tiers: (longest window, block span in seconds; 0 for every
/// sample).
pub const TIERS: [(Duration, f64); 3] = [
    (Duration::from_secs(15 * 60), 0.0),
    (Duration::from_secs(6 * 3600), 60.0),
    (Duration::MAX, 300.0),
];

/// The tier a window reads.
pub fn tier(window: Duration) -> usize {
    TIERS
        .iter()
        .position(|&(limit, _)| window <= limit)
        .unwrap_or(TIERS.len() - 1)
}

/// Consecutive samples, kept as their first and last.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Block {
    t0: f64,
    t1: f64,
    /// Samples the track saw before this block: counts over a window in O(1).
    before: u64,
    n: u32,
    /// Counters: the running total with resets folded in (each drop counts
    /// the new value, as `increase()` does). Gauges: the value.
    a0: f64,
    a1: f64,
    /// Counters: the raw value minus `a0` at the first sample.
    off: f64,
}

impl Block {
    fn constant(&self) -> bool {
        self.a0 == self.a1
    }

    /// The estimated time and value of the block's sample `j`: evenly
    /// spaced, on the line between the first and the last.
    fn sample(&self, j: u32) -> (f64, f64) {
        if j == 0 || self.n < 2 {
            return (self.t0, self.a0);
        }
        let f = f64::from(j) / f64::from(self.n - 1);
        (
            self.t0 + (self.t1 - self.t0) * f,
            self.a0 + (self.a1 - self.a0) * f,
        )
    }

    /// The count and least-squares sums, relative to sample `j`, of the
    /// samples `j..` as [`Block::sample`] places them: evenly spaced on a
    /// line, in closed form (a constant run may hold thousands).
    fn tail_sums(&self, j: u32) -> (f64, Sums) {
        let m = f64::from(self.n - j);
        if self.n < 2 {
            return (m, Sums::default());
        }
        let steps = f64::from(self.n - 1);
        let (d, s) = ((self.t1 - self.t0) / steps, (self.a1 - self.a0) / steps);
        // Over q = 0..m: Σq and Σq².
        let q1 = m * (m - 1.0) / 2.0;
        let q2 = (m - 1.0) * m * (2.0 * m - 1.0) / 6.0;
        let sums = Sums {
            x: d * q1,
            y: s * q1,
            xx: d * d * q2,
            xy: d * s * q2,
        };
        (m, sums)
    }

    /// The first sample at or after `start` (the block must end there).
    fn first_from(&self, start: f64) -> u32 {
        if self.t0 >= start || self.n < 2 {
            return 0;
        }
        let d = (self.t1 - self.t0) / f64::from(self.n - 1);
        let j = ((start - self.t0) / d).ceil();
        (j.max(1.0) as u32).min(self.n - 1)
    }
}

/// Least-squares sums of a block's samples, relative to its first.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sums {
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

/// One tier's blocks.
#[derive(Debug)]
struct Ring {
    blocks: VecDeque<Block>,
    /// For gauges, in step with `blocks`; empty for counters.
    sums: VecDeque<Sums>,
    /// How far back its longest window reaches.
    span: f64,
    spacing: f64,
    /// Blocks it may hold before runs stop ending at changes. Blocks that
    /// end by time span at least `spacing` each, so a ring holds at most
    /// `cap` plus `span / spacing` of them.
    cap: usize,
}

impl Ring {
    fn new(span: f64, spacing: f64) -> Ring {
        let cap = if spacing > 0.0 {
            (span / spacing).ceil() as usize + 2
        } else {
            usize::MAX
        };
        Ring {
            blocks: VecDeque::new(),
            sums: VecDeque::new(),
            span,
            spacing,
            cap,
        }
    }

    fn push(&mut self, t: f64, a: f64, off: f64, reset: bool, before: u64, gauge: bool) {
        let room = self.blocks.len() < self.cap;
        let extend = match self.blocks.back() {
            None => false,
            Some(b) if a == b.a1 && b.constant() => true,
            Some(_) if self.spacing == 0.0 => false,
            Some(b) if (reset || (b.constant() && b.n >= 2)) && room => false,
            Some(b) => t - b.t0 <= self.spacing,
        };
        if extend {
            if let Some(b) = self.blocks.back_mut() {
                if gauge && let Some(s) = self.sums.back_mut() {
                    let (x, y) = (t - b.t0, a - b.a0);
                    s.x += x;
                    s.y += y;
                    s.xx += x * x;
                    s.xy += x * y;
                }
                b.t1 = t;
                b.a1 = a;
                b.n += 1;
            }
            return;
        }
        self.blocks.push_back(Block {
            t0: t,
            t1: t,
            before,
            n: 1,
            a0: a,
            a1: a,
            off,
        });
        if gauge {
            self.sums.push_back(Sums::default());
        }
    }

    /// Drops blocks whose every sample is older than the longest window.
    fn trim(&mut self, t: f64) {
        while self.blocks.front().is_some_and(|b| b.t1 < t - self.span) {
            self.blocks.pop_front();
            self.sums.pop_front();
        }
    }

    /// The window `[start, ..]`'s first sample: its block, its index in
    /// the block, its time and value.
    fn first(&self, start: f64) -> Option<(usize, u32, f64, f64)> {
        let i = self.blocks.partition_point(|b| b.t1 < start);
        let b = self.blocks.get(i)?;
        let j = b.first_from(start);
        let (t, a) = b.sample(j);
        Some((i, j, t, a))
    }

    fn bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.sums.capacity() * std::mem::size_of::<Sums>()
    }
}

/// One signal's history for one subject.
#[derive(Debug)]
pub struct Track {
    counter: bool,
    rings: Vec<(usize, Ring)>,
    /// The last raw value and the running total (counters).
    last: Option<(f64, f64)>,
    last_t: f64,
    seen: u64,
}

/// How far back each tier must reach for a signal (0: unused).
pub type Spans = [f64; TIERS.len()];

impl Track {
    pub fn new(counter: bool, spans: &Spans) -> Track {
        let rings = spans
            .iter()
            .zip(TIERS)
            .enumerate()
            .filter(|(_, (span, _))| **span > 0.0)
            .map(|(i, (&span, (_, spacing)))| (i, Ring::new(span, spacing)))
            .collect();
        Track {
            counter,
            rings,
            last: None,
            last_t: f64::NEG_INFINITY,
            seen: 0,
        }
    }

    /// Adds the sample `v` at `t`; one not after the last is dropped, as
    /// Prometheus drops out-of-order samples.
    pub fn push(&mut self, t: f64, v: f64) {
        if self.last_t >= t {
            return;
        }
        self.last_t = t;
        let (a, reset) = match self.last {
            Some((raw, total)) if self.counter => {
                let reset = v < raw;
                (total + if reset { v } else { v - raw }, reset)
            }
            _ => (v, false),
        };
        let off = if self.counter { v - a } else { 0.0 };
        for (_, ring) in &mut self.rings {
            ring.push(t, a, off, reset, self.seen, !self.counter);
        }
        self.last = Some((v, a));
        self.seen += 1;
    }

    /// Drops what no window reaches at `t`; false once nothing is left.
    pub fn trim(&mut self, t: f64) -> bool {
        for (_, ring) in &mut self.rings {
            ring.trim(t);
        }
        self.rings.iter().any(|(_, r)| !r.blocks.is_empty())
    }

    fn ring(&self, window: Duration) -> Option<&Ring> {
        let k = tier(window);
        self.rings.iter().find(|(i, _)| *i == k).map(|(_, r)| r)
    }

    /// Prometheus' `increase()` over `[t - window, t]`: the deltas summed
    /// across resets, extrapolated to the window's edges.
    pub fn increase(&self, t: f64, window: Duration) -> Option<f64> {
        let ring = self.ring(window)?;
        let start = t - window.as_secs_f64();
        let (i, j, t_first, a_first) = ring.first(start)?;
        let b = ring.blocks[i];
        let last = ring.blocks.back()?;
        let n = (last.before + u64::from(last.n)) - (b.before + u64::from(j));
        if n < 2 || t_first > t {
            return None;
        }
        let raw_first = a_first + b.off;
        Some(extrapolate(
            last.a1 - a_first,
            raw_first,
            (t_first, last.t1),
            n,
            (start, t),
        ))
    }

    /// Prometheus' `deriv()`: the least-squares slope per second over
    /// `[t - window, t]`.
    pub fn deriv(&self, t: f64, window: Duration) -> Option<f64> {
        let ring = self.ring(window)?;
        let (i, j, t_ref, a_ref) = ring.first(t - window.as_secs_f64())?;
        let (mut n, mut s) = (0.0, Sums::default());
        let mut add = |m: f64, x0: f64, y0: f64, b: Sums| {
            // The block's sums moved from its own origin to the window's.
            s.x += b.x + m * x0;
            s.y += b.y + m * y0;
            s.xx += b.xx + 2.0 * x0 * b.x + m * x0 * x0;
            s.xy += b.xy + y0 * b.x + x0 * b.y + m * x0 * y0;
            n += m;
        };
        for (k, b) in ring.blocks.iter().enumerate().skip(i) {
            if k == i && j > 0 {
                // The samples j.. of a block the window starts inside.
                let (m, sums) = b.tail_sums(j);
                let (t_j, a_j) = b.sample(j);
                add(m, t_j - t_ref, a_j - a_ref, sums);
                continue;
            }
            let sums = ring.sums.get(k).copied().unwrap_or_default();
            add(f64::from(b.n), b.t0 - t_ref, b.a0 - a_ref, sums);
        }
        if n < 2.0 {
            return None;
        }
        let var = s.xx - s.x * s.x / n;
        if s.y == 0.0 && s.xy == 0.0 {
            return Some(0.0);
        }
        (var > 0.0).then(|| (s.xy - s.x * s.y / n) / var)
    }

    /// Bytes its blocks hold.
    pub fn bytes(&self) -> usize {
        self.rings.iter().map(|(_, r)| r.bytes()).sum()
    }

    /// Blocks held, over all tiers.
    pub fn blocks(&self) -> usize {
        self.rings.iter().map(|(_, r)| r.blocks.len()).sum()
    }
}

/// Prometheus' `extrapolatedRate` for a counter, as `increase()`: `delta`
/// over the samples from `first` to `last` (`n` of them, the first with
/// the raw value `raw_first`), extrapolated towards the window's edges:
/// not below zero, and no further than half a sample interval past the data.
pub fn extrapolate(
    delta: f64,
    raw_first: f64,
    (first, last): (f64, f64),
    n: u64,
    (start, end): (f64, f64),
) -> f64 {
    let sampled = last - first;
    let avg = sampled / (n - 1) as f64;
    let mut to_start = first - start;
    let to_end = end - last;
    if delta > 0.0 && raw_first >= 0.0 {
        to_start = to_start.min(sampled * (raw_first / delta));
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
    delta * span / sampled
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn counter(spans: Spans, points: impl IntoIterator<Item = (f64, f64)>) -> Track {
        let mut t = Track::new(true, &spans);
        for (ts, v) in points {
            t.push(ts, v);
        }
        t
    }

    #[test]
    fn increase_matches_prometheus() {
        // 0..=10 once a minute: [0, 600] holds all eleven samples.
        let t = counter(
            [600.0, 0.0, 0.0],
            (0..=10).map(|i| (i as f64 * 60.0, i as f64)),
        );
        let v = t.increase(600.0, 10 * MIN).unwrap();
        assert!((v - 10.0).abs() < 1e-9, "{v}");
        // A reset counts the post-reset value, never a negative delta.
        let r = counter(
            [40.0, 0.0, 0.0],
            [(10.0, 5.0), (20.0, 7.0), (30.0, 1.0), (40.0, 3.0)],
        );
        let v = r.increase(40.0, Duration::from_secs(40)).unwrap();
        // deltas 2 + 1 + 2 = 5 over 30s, extrapolated by 10s at the start
        // (under 1.1 × 10s), but no further than the zero point (5/5 × 30 = 30).
        assert!((v - 5.0 * 40.0 / 30.0).abs() < 1e-9, "{v}");
        let one = counter([10.0, 0.0, 0.0], [(5.0, 1.0)]);
        assert_eq!(one.increase(10.0, Duration::from_secs(10)), None);
        let flat = counter([60.0, 0.0, 0.0], [(1.0, 3.0), (2.0, 3.0)]);
        assert_eq!(flat.increase(2.0, MIN), Some(0.0));
    }

    #[test]
    fn deriv_is_the_slope() {
        let mut t = Track::new(false, &[600.0, 3600.0, 0.0]);
        for i in 0..360 {
            t.push(i as f64 * 10.0, 100.0 + 3.0 * i as f64 * 10.0);
        }
        for w in [10 * MIN, 60 * MIN, 59 * MIN + Duration::from_secs(55)] {
            let d = t.deriv(3590.0, w).unwrap();
            assert!((d - 3.0).abs() < 1e-9, "{w:?}: {d}");
        }
        let mut flat = Track::new(false, &[600.0, 0.0, 0.0]);
        flat.push(1.0, 5.0);
        assert_eq!(flat.deriv(1.0, MIN), None);
        flat.push(2.0, 5.0);
        assert_eq!(flat.deriv(2.0, MIN), Some(0.0));
    }

    #[test]
    fn steps_stay_exact_in_coarse_tiers() {
        // An Xid counter over a day at 1s: a step at 10:00:00.5 must leave
        // a 6h window exactly 6h later, not at a block's edge.
        let mut t = Track::new(true, &[0.0, 21_600.0, 0.0]);
        let step = 36_000.5;
        let mut left = None;
        for i in 0..86_400 {
            let ts = i as f64;
            t.push(ts, if ts >= step { 1.0 } else { 0.0 });
            t.trim(ts);
            let inc = t.increase(ts, 360 * MIN).unwrap_or(0.0);
            if ts > step && inc == 0.0 && left.is_none() {
                left = Some(ts);
            }
        }
        // The last 0 is at 36000; [t - 6h, t] leaves it out from 57601.
        assert_eq!(left, Some(36_000.0 + 21_600.0 + 1.0));
        assert!(t.blocks() <= 3, "{}", t.blocks());
    }

    #[test]
    fn blocks_are_bounded_by_the_spans_not_uptime() {
        // A counter that changes every sample, for three days at 1s.
        let mut t = Track::new(true, &[300.0, 21_600.0, 259_200.0]);
        let mut most = 0;
        for i in 0..(3 * 86_400 + 3600) {
            let ts = i as f64;
            t.push(ts, ts * 2.5);
            t.trim(ts);
            most = most.max(t.blocks());
        }
        // 301 samples, 361 one-minute blocks, 865 five-minute blocks, and
        // each ring's cap beyond that.
        assert!(most <= 301 + 2 * 360 + 4 + 2 * 864 + 4, "{most}");
        assert!(t.bytes() < 128 * 1024, "{}", t.bytes());
    }
}
