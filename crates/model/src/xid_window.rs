//! Xid counted over a sliding window, for dcgm-exporter's
//! `DCGM_EXP_XID_ERRORS_COUNT`: how many Xid of each code a GPU had in the
//! last `-x` milliseconds, so that it falls back on its own. Sources count
//! Xid since start (`Readings::xid_errors`); the window is the growth of
//! those counts between collections, each stamped with the collection
//! that saw it, so it is as fine as the collection interval.

use super::Gpu;

/// Each GPU's counts as last seen and its Xid in the window, by UUID.
#[derive(Debug)]
pub struct XidWindow {
    seconds: f64,
    gpus: Vec<Seen>,
}

#[derive(Debug)]
struct Seen {
    uuid: String,
    counts: Vec<(u32, u64)>,
    /// When, which code, how many: oldest first.
    recent: Vec<(f64, u32, u64)>,
}

impl XidWindow {
    pub fn new(seconds: f64) -> XidWindow {
        XidWindow {
            seconds,
            gpus: Vec::new(),
        }
    }

    /// Sets each GPU's `xid_window` from its counts at `at` (Unix
    /// seconds). A GPU's first counts are where its window starts: Xid
    /// counted before it (the simulator's past) are not in it. A GPU no
    /// longer listed is kept (a node has few), so one back from a reset
    /// goes on where it was.
    pub fn observe(&mut self, at: f64, gpus: &mut [Gpu]) {
        for g in gpus.iter_mut() {
            let r = &mut g.readings;
            let Some(counts) = &r.xid_errors else {
                r.xid_window = None;
                continue;
            };
            let i = match self.gpus.iter().position(|s| s.uuid == g.uuid) {
                Some(i) => i,
                None => {
                    self.gpus.push(Seen {
                        uuid: g.uuid.clone(),
                        counts: counts.clone(),
                        recent: Vec::new(),
                    });
                    self.gpus.len() - 1
                }
            };
            let seen = &mut self.gpus[i];
            for &(code, n) in counts {
                let before = seen.counts.iter().find(|c| c.0 == code).map_or(0, |c| c.1);
                // A count that went down started again: all of it is new.
                let new = if n < before { n } else { n - before };
                if new > 0 {
                    seen.recent.push((at, code, new));
                }
            }
            seen.counts.clone_from(counts);
            seen.recent.retain(|e| at - e.0 < self.seconds);
            // By code, in order.
            let mut window: Vec<(u32, u64)> = Vec::new();
            for &(_, code, n) in &seen.recent {
                match window.binary_search_by_key(&code, |c| c.0) {
                    Ok(i) => window[i].1 += n,
                    Err(i) => window.insert(i, (code, n)),
                }
            }
            r.xid_window = Some(window);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xid_errors;

    fn gpu(uuid: &str, counts: &[(u32, u64)]) -> Gpu {
        let mut g = Gpu {
            uuid: uuid.into(),
            ..Gpu::default()
        };
        g.readings.xid_errors = Some(xid_errors(counts.iter().copied()));
        g
    }

    #[test]
    fn counts_fall_back_after_the_window() {
        let mut w = XidWindow::new(10.0);
        let at = |w: &mut XidWindow, t: f64, counts: &[(u32, u64)]| {
            let mut gpus = [gpu("a", counts), gpu("b", &[]), Gpu::default()];
            gpus[2].uuid = "c".into();
            w.observe(t, &mut gpus);
            assert_eq!(gpus[1].readings.xid_window, Some(vec![]));
            assert_eq!(gpus[2].readings.xid_window, None, "no Xid source");
            gpus[0].readings.xid_window.clone().unwrap()
        };
        // The first counts are the window's start, not Xid in it.
        assert_eq!(at(&mut w, 100.0, &[(13, 4)]), []);
        assert_eq!(at(&mut w, 101.0, &[(13, 4), (79, 1)]), [(79, 1)]);
        assert_eq!(at(&mut w, 105.0, &[(13, 4), (79, 3)]), [(79, 3)]);
        assert_eq!(at(&mut w, 106.0, &[(13, 5), (79, 3)]), [(13, 1), (79, 3)]);
        assert_eq!(at(&mut w, 110.9, &[(13, 5), (79, 3)]), [(13, 1), (79, 3)]);
        // The first 79 is 10s old: out.
        assert_eq!(at(&mut w, 111.0, &[(13, 5), (79, 3)]), [(13, 1), (79, 2)]);
        assert_eq!(at(&mut w, 116.0, &[(13, 5), (79, 3)]), []);
        // A source that starts counting again (a restart): all new.
        assert_eq!(at(&mut w, 117.0, &[(79, 1)]), [(79, 1)]);
        // A GPU gone and back goes on where it was.
        w.observe(118.0, &mut [gpu("b", &[])]);
        assert_eq!(at(&mut w, 119.0, &[(79, 2)]), [(79, 2)]);
        assert_eq!(w.gpus.len(), 2);
    }
}
