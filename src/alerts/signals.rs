//! Every [`Signal`] and its name in rule files.

use super::rules::Signal;

impl Signal {
    pub const ALL: [Signal; 28] = [
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
