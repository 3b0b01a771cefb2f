//! Counters that never go backwards within the process.
//!
//! A GPU's counters come from the source as it reads them. When one reads
//! lower than the last time (NVML's own counter restarted: a GPU reset, a
//! driver reload), the last value becomes an offset added to every later
//! reading, logged once per GPU and family, so the served counter goes on
//! from where it was. What that hides: the reset itself (Prometheus never
//! sees one), and events between the last reading before the reset and the
//! reset, when the restarted counter has already climbed past the old
//! value by the next reading (its excess is then counted, the lower part
//! not). A lost GPU keeps serving its last values.
//!
//! A counter that physics bounds (energy, bytes moved) and that rises
//! faster than any GPU can (a sentinel, a torn read, a rate integrated
//! from a garbage sample) has that rise held back: the served counter
//! stays where it was and goes on from there, and the rise is counted in
//! `gpu_exporter_readings_rejected_total`.

use super::range::Rejected;
use base::quiet::Noted;
use model::readings::POWER_WATTS;
use model::{Readings, TxRx};

/// The most PCIe moves per second in one direction: PCIe 6.0 at 32 lanes
/// (about 242 GB/s), with room.
const PCIE_BYTES_PER_SECOND: f64 = 256e9;
/// The most NVLink moves per second in one direction, all links: NVLink
/// 5's 900 GB/s, with room.
const NVLINK_BYTES_PER_SECOND: f64 = 2e12;

/// A counter by family and, for the labelled ones, the label as a number
/// (Xid code, direction 0 tx / 1 rx, clock-event reason).
type Key = (&'static str, u32);

#[derive(Clone, Copy, Debug)]
struct Mono {
    /// The source's last reading.
    raw: f64,
    /// What earlier resets took away, added back.
    offset: f64,
}

/// The counters of one GPU: a few dozen at most, so a list.
#[derive(Debug, Default)]
pub(super) struct Counters {
    by: Vec<(Key, Mono)>,
    resets: Noted<&'static str>,
    implausible: Noted<&'static str>,
    /// When the source last gave readings, for the bounded counters' rates.
    read_at: Option<f64>,
}

impl Counters {
    /// Makes the counters of `r`, read at `at`, monotonic, holding back
    /// rises no GPU can make (counted in `rejected`); for a GPU that is not
    /// `up`, fills in the last values of those the source no longer gives.
    pub(super) fn settle(
        &mut self,
        r: &mut Readings,
        up: bool,
        who: &str,
        at: f64,
        rejected: &mut Rejected,
    ) {
        let dt = self.read_at.map(|t| at - t).filter(|dt| *dt > 0.0);
        if up {
            self.read_at = Some(at);
        }
        // Twice the limit: power may pass it briefly, never on average.
        let watts = r.power_limit_watts.map_or(POWER_WATTS.max, |w| 2.0 * w);
        let mut bounded = |family: &'static str, sub: u32, v: Option<f64>, per_second: f64| {
            let most = dt.map(|dt| per_second * dt);
            self.bounded((family, sub), v, up, who, most, rejected)
        };
        r.energy_joules_total = bounded("gpu_energy_joules_total", 0, r.energy_joules_total, watts);
        for (family, pair, per_second) in [
            (
                "gpu_pcie_bytes_total",
                &mut r.pcie_bytes_total,
                PCIE_BYTES_PER_SECOND,
            ),
            (
                "gpu_nvlink_bytes_total",
                &mut r.nvlink_bytes_total,
                NVLINK_BYTES_PER_SECOND,
            ),
        ] {
            let tx = bounded(family, 0, pair.map(|p| p.tx), per_second);
            let rx = bounded(family, 1, pair.map(|p| p.rx), per_second);
            *pair = tx.zip(rx).map(|(tx, rx)| TxRx { tx, rx });
        }
        let mut one =
            |family: &'static str, sub: u32, v: Option<f64>| self.one((family, sub), v, up, who);
        r.ecc_corrected_total = one("gpu_ecc_corrected_errors_total", 0, r.ecc_corrected_total);
        r.ecc_uncorrected_total = one(
            "gpu_ecc_uncorrected_errors_total",
            0,
            r.ecc_uncorrected_total,
        );
        r.pcie_replay_errors_total = one(
            "gpu_pcie_replay_errors_total",
            0,
            r.pcie_replay_errors_total,
        );
        for (i, v) in r.clocks_event_seconds_total.iter_mut().enumerate() {
            *v = one("gpu_clocks_event_seconds_total", i as u32, *v);
        }
        let h = &mut r.health;
        h.ecc_corrected_lifetime = one(
            "gpu_ecc_corrected_errors_lifetime_total",
            0,
            h.ecc_corrected_lifetime,
        );
        h.ecc_uncorrected_lifetime = one(
            "gpu_ecc_uncorrected_errors_lifetime_total",
            0,
            h.ecc_uncorrected_lifetime,
        );
        for (family, values) in [
            ("gpu_remapped_rows_total", &mut h.remapped_rows[..]),
            ("gpu_retired_pages_total", &mut h.retired_pages[..]),
            ("gpu_nvlink_errors_total", &mut h.nvlink_errors[..]),
        ] {
            for (i, v) in values.iter_mut().enumerate() {
                *v = one(family, i as u32, *v);
            }
        }
        self.xids(r, up, who);
    }

    /// Xid counts by code: each code a counter of its own. A lost GPU keeps
    /// every code it has served.
    fn xids(&mut self, r: &mut Readings, up: bool, who: &str) {
        const XID: &str = "gpu_xid_errors_total";
        let mut out: Vec<(u32, u64)> = Vec::new();
        if let Some(seen) = r.xid_errors.take() {
            for (code, n) in seen {
                if let Some(v) = self.one((XID, code), Some(n as f64), up, who) {
                    out.push((code, v as u64));
                }
            }
        } else if up {
            return;
        }
        if !up {
            for &((family, code), m) in &self.by {
                if family == XID && !out.iter().any(|&(c, _)| c == code) {
                    out.push((code, (m.raw + m.offset) as u64));
                }
            }
            if out.is_empty() {
                return;
            }
            out.sort_unstable();
        }
        r.xid_errors = Some(out);
    }

    /// [`Counters::one`], first holding back a rise past `most`: the
    /// served counter stays where it was and goes on from the new reading.
    fn bounded(
        &mut self,
        key: Key,
        v: Option<f64>,
        up: bool,
        who: &str,
        most: Option<f64>,
        rejected: &mut Rejected,
    ) -> Option<f64> {
        if let (Some(v), Some(most)) = (v, most)
            && let Some((_, m)) = self.by.iter_mut().find(|(k, _)| *k == key)
            && v - m.raw > most
        {
            // Counted by family, as range checks count theirs.
            *rejected
                .entry(key.0.trim_end_matches("_total"))
                .or_default() += 1;
            if self.implausible.first(key.0) {
                log::warn!(
                    "GPU {who}: {} rose by {} since the last reading, more than the GPU can ({most}); \
                     held back (logged once per GPU and family)",
                    key.0,
                    v - m.raw
                );
            }
            m.offset -= v - m.raw;
        }
        self.one(key, v, up, who)
    }

    fn one(&mut self, key: Key, v: Option<f64>, up: bool, who: &str) -> Option<f64> {
        let found = self.by.iter_mut().find(|(k, _)| *k == key).map(|(_, m)| m);
        match (v, found) {
            (Some(v), None) => {
                let m = Mono {
                    raw: v,
                    offset: 0.0,
                };
                self.by.push((key, m));
                Some(v)
            }
            (Some(v), Some(m)) => {
                if v < m.raw {
                    if self.resets.first(key.0) {
                        log::warn!(
                            "GPU {who}: {} went back from {} to {v} (a GPU reset or driver reload?); \
                             carrying {} on so the counter never decreases (logged once per GPU and family)",
                            key.0,
                            m.raw,
                            m.raw + m.offset
                        );
                    }
                    m.offset += m.raw;
                }
                m.raw = v;
                Some(v + m.offset)
            }
            (None, Some(m)) if !up => Some(m.raw + m.offset),
            (None, _) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn energy(c: &mut Counters, v: Option<f64>, up: bool) -> Option<f64> {
        let mut r = Readings {
            energy_joules_total: v,
            ..Readings::default()
        };
        c.settle(&mut r, up, "GPU-a", 0.0, &mut Rejected::new());
        r.energy_joules_total
    }

    #[test]
    fn a_counter_that_restarts_carries_an_offset() {
        let mut c = Counters::default();
        let served: Vec<_> = [100.0, 150.0, 10.0, 40.0, 5.0, 5.0]
            .iter()
            .map(|&v| energy(&mut c, Some(v), true).unwrap())
            .collect();
        assert_eq!(served, [100.0, 150.0, 160.0, 190.0, 195.0, 195.0]);
        // Not read now: left out while up, the last value once lost.
        assert_eq!(energy(&mut c, None, true), None);
        assert_eq!(energy(&mut c, None, false), Some(195.0));
        assert_eq!(energy(&mut Counters::default(), None, false), None);
    }

    /// 4.29 MW and 50 kW of energy, or PCIe bytes past any link, are
    /// held back and counted; a real rise, and a reset, are not.
    #[test]
    fn a_rise_no_gpu_can_make_is_held_back_and_counted() {
        let mut c = Counters::default();
        let mut rejected = Rejected::new();
        let mut at = |t: f64, joules: f64, limit: Option<f64>, pcie: f64| {
            let mut r = Readings {
                energy_joules_total: Some(joules),
                power_limit_watts: limit,
                pcie_bytes_total: Some(TxRx { tx: pcie, rx: 0.0 }),
                ..Readings::default()
            };
            c.settle(&mut r, true, "GPU-a", t, &mut rejected);
            (
                r.energy_joules_total.unwrap(),
                r.pcie_bytes_total.unwrap().tx,
            )
        };
        assert_eq!(at(0.0, 1000.0, Some(700.0), 0.0), (1000.0, 0.0));
        // 700 W for 10 s, and 10 GB/s: real.
        assert_eq!(at(10.0, 8000.0, Some(700.0), 1e11), (8000.0, 1e11));
        // 4.29 MW for 1 s: held back; the counter goes on from there.
        assert_eq!(at(11.0, 4_298_000.0, Some(700.0), 1e11), (8000.0, 1e11));
        assert_eq!(at(12.0, 4_298_500.0, Some(700.0), 1e11), (8500.0, 1e11));
        // 50 kW without a limit to go by: past the absolute bound.
        assert_eq!(at(13.0, 4_348_500.0, None, 1e11), (8500.0, 1e11));
        // A terabyte in a second over PCIe.
        assert_eq!(at(14.0, 4_348_600.0, None, 1.1e12), (8600.0, 1e11));
        // A reset is no rise.
        assert_eq!(at(15.0, 10.0, Some(700.0), 1.1e12), (8610.0, 1e11));
        assert_eq!(rejected["gpu_energy_joules"], 2);
        assert_eq!(rejected["gpu_pcie_bytes"], 1);
    }

    #[test]
    fn xid_codes_and_pairs_are_counters_of_their_own() {
        let mut c = Counters::default();
        let mut r = Readings {
            xid_errors: Some(vec![(48, 0), (79, 2)]),
            pcie_bytes_total: Some(TxRx { tx: 10.0, rx: 20.0 }),
            ..Readings::default()
        };
        c.settle(&mut r, true, "GPU-a", 0.0, &mut Rejected::new());
        // The source restarts its counts (a fresh session): still rising.
        let mut r = Readings {
            xid_errors: Some(vec![(13, 1), (79, 1)]),
            pcie_bytes_total: Some(TxRx { tx: 5.0, rx: 25.0 }),
            ..Readings::default()
        };
        c.settle(&mut r, true, "GPU-a", 0.0, &mut Rejected::new());
        assert_eq!(r.xid_errors, Some(vec![(13, 1), (79, 3)]));
        assert_eq!(r.pcie_bytes_total, Some(TxRx { tx: 15.0, rx: 25.0 }));
        // Lost: every code served so far stays, the new count included.
        let mut r = Readings {
            xid_errors: Some(vec![(79, 2)]),
            ..Readings::default()
        };
        c.settle(&mut r, false, "GPU-a", 0.0, &mut Rejected::new());
        assert_eq!(r.xid_errors, Some(vec![(13, 1), (48, 0), (79, 4)]));
        assert_eq!(r.pcie_bytes_total, Some(TxRx { tx: 15.0, rx: 25.0 }));
        let mut r = Readings::default();
        c.settle(&mut r, false, "GPU-a", 0.0, &mut Rejected::new());
        assert_eq!(r.xid_errors, Some(vec![(13, 1), (48, 0), (79, 4)]));
    }
}
