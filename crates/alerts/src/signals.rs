//! Every [`Signal`], its name in rule files, and how the models' signals
//! are read from a snapshot.

use super::rules::{Signal, Who};
use model::{Freshness, Snapshot};

impl Signal {
    pub const ALL: [Signal; 29] = [
        Signal::Throttled,
        Signal::CriticalXid,
        Signal::RecordedXid,
        Signal::EccUncorrected,
        Signal::LargestFreeRatio,
        Signal::Up,
        Signal::AllocatorAllocated,
        Signal::Temperature,
        Signal::CollectSuccess,
        Signal::CollectStalled,
        Signal::ReadingsHidden,
        Signal::Requests,
        Signal::GoodRequests,
        Signal::EngineUp,
        Signal::EndpointUp,
        Signal::RowRemapFailed,
        Signal::RowRemapPending,
        Signal::RetiredPagesPending,
        Signal::PcieLinkWidthRatio,
        Signal::NvlinkErrors,
        Signal::NvlinkDownWhileBusy,
        Signal::PcieReplays,
        Signal::MemoryTemperature,
        Signal::MemoryTemperatureHeadroom,
        Signal::RecoveryAction,
        Signal::RecoveryReset,
        Signal::AnsweredRequests,
        Signal::ServedRequests,
        Signal::ReadsLate,
    ];

    /// Its name in rule files.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Throttled => "throttled",
            Signal::CriticalXid => "critical_xid",
            Signal::RecordedXid => "recorded_xid",
            Signal::EccUncorrected => "ecc_uncorrected",
            Signal::LargestFreeRatio => "largest_free_ratio",
            Signal::Up => "up",
            Signal::AllocatorAllocated => "allocator_allocated",
            Signal::Temperature => "temperature",
            Signal::CollectSuccess => "collect_success",
            Signal::CollectStalled => "collect_stalled",
            Signal::ReadingsHidden => "readings_hidden",
            Signal::Requests => "requests",
            Signal::GoodRequests => "good_requests",
            Signal::EngineUp => "engine_up",
            Signal::EndpointUp => "engine_endpoint_up",
            Signal::RowRemapFailed => "row_remap_failed",
            Signal::RowRemapPending => "row_remap_pending",
            Signal::RetiredPagesPending => "retired_pages_pending",
            Signal::PcieLinkWidthRatio => "pcie_link_width_ratio",
            Signal::NvlinkErrors => "nvlink_errors",
            Signal::NvlinkDownWhileBusy => "nvlink_down_while_busy",
            Signal::PcieReplays => "pcie_replays",
            Signal::ReadsLate => "reads_late",
            Signal::MemoryTemperature => "memory_temperature",
            Signal::MemoryTemperatureHeadroom => "memory_temperature_headroom",
            Signal::RecoveryAction => "recovery_action",
            Signal::RecoveryReset => "recovery_reset",
            Signal::AnsweredRequests => "answered_requests",
            Signal::ServedRequests => "served_requests",
        }
    }
}

impl Signal {
    /// [`Signal::each`] for the models' signals: engine up by model, the
    /// counters by replica (see `snapshot::Replica`), so that the
    /// evaluator takes each replica's increase apart and sums after.
    pub(super) fn each_model(self, snap: &Snapshot, fresh: Freshness, f: &mut dyn FnMut(Who, f64)) {
        let (from, models) = snap.served_models(fresh);
        for (i, m) in (from..).zip(models) {
            if self == Signal::EngineUp {
                if m.endpoint.is_some() {
                    f(Who::Model(i), if m.stale { 0.0 } else { 1.0 });
                }
                continue;
            }
            // A held replica's counts are no new samples. One without
            // failure counts leaves the model without an availability
            // verdict, as its sums have none.
            let lacks = m.outcomes.is_none()
                && matches!(self, Signal::AnsweredRequests | Signal::ServedRequests);
            m.shares(&mut |r| {
                let v = match self {
                    _ if r.stale || lacks => None,
                    Signal::Requests => Some(r.requests),
                    Signal::AnsweredRequests => r.outcomes.map(|o| o.answered),
                    Signal::ServedRequests => r.outcomes.map(|o| o.answered - o.failed),
                    _ => r.good,
                };
                if let Some(v) = v {
                    f(Who::Replica(i, r.endpoint), v);
                }
            });
        }
    }
}
