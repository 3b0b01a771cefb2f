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

use crate::snapshot::{Readings, TxRx};
use base::quiet::Noted;

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
}

impl Counters {
    /// Makes the counters of `r` monotonic; for a GPU that is not `up`,
    /// fills in the last values of those the source no longer gives.
    pub(super) fn settle(&mut self, r: &mut Readings, up: bool, who: &str) {
        let mut one =
            |family: &'static str, sub: u32, v: Option<f64>| self.one((family, sub), v, up, who);
        r.ecc_corrected_total = one("gpu_ecc_corrected_errors_total", 0, r.ecc_corrected_total);
        r.ecc_uncorrected_total = one(
            "gpu_ecc_uncorrected_errors_total",
            0,
            r.ecc_uncorrected_total,
        );
        r.energy_joules_total = one("gpu_energy_joules_total", 0, r.energy_joules_total);
        r.pcie_replay_errors_total = one(
            "gpu_pcie_replay_errors_total",
            0,
            r.pcie_replay_errors_total,
        );
        for (family, pair) in [
            ("gpu_pcie_bytes_total", &mut r.pcie_bytes_total),
            ("gpu_nvlink_bytes_total", &mut r.nvlink_bytes_total),
        ] {
            let tx = one(family, 0, pair.map(|p| p.tx));
            let rx = one(family, 1, pair.map(|p| p.rx));
            *pair = tx.zip(rx).map(|(tx, rx)| TxRx { tx, rx });
        }
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
        c.settle(&mut r, up, "GPU-a");
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

    #[test]
    fn xid_codes_and_pairs_are_counters_of_their_own() {
        let mut c = Counters::default();
        let mut r = Readings {
            xid_errors: Some(vec![(48, 0), (79, 2)]),
            pcie_bytes_total: Some(TxRx { tx: 10.0, rx: 20.0 }),
            ..Readings::default()
        };
        c.settle(&mut r, true, "GPU-a");
        // The source restarts its counts (a fresh session): still rising.
        let mut r = Readings {
            xid_errors: Some(vec![(13, 1), (79, 1)]),
            pcie_bytes_total: Some(TxRx { tx: 5.0, rx: 25.0 }),
            ..Readings::default()
        };
        c.settle(&mut r, true, "GPU-a");
        assert_eq!(r.xid_errors, Some(vec![(13, 1), (79, 3)]));
        assert_eq!(r.pcie_bytes_total, Some(TxRx { tx: 15.0, rx: 25.0 }));
        // Lost: every code served so far stays, the new count included.
        let mut r = Readings {
            xid_errors: Some(vec![(79, 2)]),
            ..Readings::default()
        };
        c.settle(&mut r, false, "GPU-a");
        assert_eq!(r.xid_errors, Some(vec![(13, 1), (48, 0), (79, 4)]));
        assert_eq!(r.pcie_bytes_total, Some(TxRx { tx: 15.0, rx: 25.0 }));
        let mut r = Readings::default();
        c.settle(&mut r, false, "GPU-a");
        assert_eq!(r.xid_errors, Some(vec![(13, 1), (48, 0), (79, 4)]));
    }
}
