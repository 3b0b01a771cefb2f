//! Hardware health from NVML: row remapping (Ampere and later) or retired
//! pages (before), the PCIe link, fans, media engines, modes, and the
//! NVLink links and errors, each under its collector.

use super::ffi::{
    Device, FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, FI_DEV_NVLINK_COUNT_RCV_ERRORS,
    FI_DEV_NVLINK_ERROR_TOTALS, FI_DEV_NVLINK_LINK_COUNT, NVLINK_ERROR_COUNTERS, NVLINK_MAX_LINKS,
    SCOPE_ALL_LINKS,
};
use super::probe::Probe;
use model::Collector::{Fans, Media, Nvlink, NvlinkLink, Pcie, Remap, State};
use model::{Health, MAX_FANS, NvlinkLink as Link};

/// The NVLink error fields of the field-values call, with their scope:
/// the totals of NVLink 4 and earlier (each a field of its own), then
/// NVLink 5's counts, summed over links by [`SCOPE_ALL_LINKS`] (see `ffi`).
pub(super) const NVLINK_FIELDS: [(u32, u32); 6] = [
    (FI_DEV_NVLINK_ERROR_TOTALS[0], 0),
    (FI_DEV_NVLINK_ERROR_TOTALS[1], 0),
    (FI_DEV_NVLINK_ERROR_TOTALS[2], 0),
    (FI_DEV_NVLINK_ERROR_TOTALS[3], 0),
    (FI_DEV_NVLINK_COUNT_RCV_ERRORS, SCOPE_ALL_LINKS),
    (FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, SCOPE_ALL_LINKS),
];

/// Field `id`'s value among those a field-values call answered.
pub(super) fn field(got: &[(u32, f64)], id: u32) -> Option<f64> {
    got.iter().find(|(f, _)| *f == id).map(|&(_, v)| v)
}

fn percent(v: u32) -> f64 {
    f64::from(v) / 100.0
}

/// Remap, the PCIe link, fans, media engines and modes.
pub(super) fn read(h: &mut Health, d: Device<'_>, p: &mut Probe) {
    p.section(Remap, |p| {
        match p.get("remapped rows", || d.remapped_rows()) {
            Some(r) => {
                h.remapped_rows = r.rows.map(|n| Some(f64::from(n)));
                h.row_remap_pending = r.pending;
                h.row_remap_failed = r.failed;
            }
            // Before Ampere, pages are retired instead.
            None => {
                for (cause, n) in h.retired_pages.iter_mut().enumerate() {
                    *n = p
                        .get("retired pages", || d.retired_pages(cause as u32))
                        .map(f64::from);
                }
                h.retired_pages_pending =
                    p.get("retired pages pending", || d.retired_pages_pending());
            }
        }
    });
    p.section(Pcie, |p| {
        let [g, g_max, w, w_max] = d
            .pcie_link()
            .map(|r| p.check("pcie link", r).map(f64::from));
        h.pcie_link_generation = g;
        h.pcie_link_generation_max = g_max;
        h.pcie_link_width = w;
        h.pcie_link_width_max = w_max;
    });
    p.section(Fans, |p| {
        let n = p.get("fans", || d.fan_count()).unwrap_or(0);
        for fan in 0..n.min(MAX_FANS as u32) {
            h.fan_speed_ratios[fan as usize] = p.get("fan speed", || d.fan_speed(fan)).map(percent);
        }
    });
    p.section(Media, |p| {
        let media = d
            .media()
            .map(|r| p.check("media utilization", r).map(percent));
        h.media_ratios = media;
    });
    p.section(State, |p| {
        let [pstate, persistence, compute] = d.state().map(|r| p.check("state", r));
        // NVML_PSTATE_UNKNOWN (32) is no P-state.
        h.performance_state = pstate.filter(|&s| s <= 15).map(f64::from);
        h.persistence_mode = persistence.map(|m| m != 0);
        h.compute_mode = compute.map(f64::from);
    });
}

/// NVLink from the field values in `got`: error totals (or NVLink 5's
/// counts), links and, per link, their state; the link states and the
/// per-link counters are calls of their own.
pub(super) fn nvlink(h: &mut Health, d: Device<'_>, p: &mut Probe, got: &[(u32, f64)]) {
    let field = |id| field(got, id);
    let links = field(FI_DEV_NVLINK_LINK_COUNT);
    if p.on(Nvlink) {
        h.nvlink_links = links;
        let totals = FI_DEV_NVLINK_ERROR_TOTALS.map(field);
        h.nvlink_errors = if totals.iter().any(Option::is_some) {
            totals
        } else {
            [
                None,
                field(FI_DEV_NVLINK_COUNT_RCV_ERRORS),
                None,
                field(FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS),
            ]
        };
    }
    let n = links.map_or(0, |n| (n as u32).min(NVLINK_MAX_LINKS));
    if n == 0 {
        return;
    }
    p.section(Nvlink, |p| {
        let states = (0..n).filter_map(|l| p.get("nvlink state", || d.nvlink_active(l)));
        let (mut seen, mut active) = (false, 0.0);
        for up in states {
            seen = true;
            active += if up { 1.0 } else { 0.0 };
        }
        h.nvlink_links_active = seen.then_some(active);
    });
    p.section(NvlinkLink, |p| {
        for link in 0..n {
            let active = p.get("nvlink state", || d.nvlink_active(link));
            let errors = NVLINK_ERROR_COUNTERS.map(|c| {
                p.get("nvlink errors", || d.nvlink_errors(link, c))
                    .map(|v| v as f64)
            });
            if active.is_some() || errors.iter().any(Option::is_some) {
                h.nvlink_per_link.push(Link {
                    link,
                    active,
                    errors,
                });
            }
        }
    });
}
