//! Every [`Signal`], its name in rule files, and how the models' signals
//! are read from a snapshot. A reading's own signal has its name in its
//! declaration.

use super::rules::{Signal, Who};
use model::{Freshness, Snapshot, readings};

impl Signal {
    /// Every signal: those made here, then the readings' own.
    pub fn all() -> impl Iterator<Item = Signal> {
        let own = readings::all().filter(|r| r.signal.is_some());
        Signal::MADE.into_iter().chain(own.map(Signal::Reading))
    }

    /// The signals made here, from more than one reading as it is.
    const MADE: [Signal; 20] = [
        Signal::Throttled,
        Signal::CriticalXid,
        Signal::RecordedXid,
        Signal::LargestFreeRatio,
        Signal::Up,
        Signal::CollectSuccess,
        Signal::CollectStalled,
        Signal::ReadingsHidden,
        Signal::Requests,
        Signal::GoodRequests,
        Signal::EngineUp,
        Signal::EndpointUp,
        Signal::PcieLinkWidthRatio,
        Signal::NvlinkErrors,
        Signal::NvlinkDownWhileBusy,
        Signal::MemoryTemperatureHeadroom,
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
            Signal::LargestFreeRatio => "largest_free_ratio",
            Signal::Up => "up",
            Signal::CollectSuccess => "collect_success",
            Signal::CollectStalled => "collect_stalled",
            Signal::ReadingsHidden => "readings_hidden",
            Signal::Requests => "requests",
            Signal::GoodRequests => "good_requests",
            Signal::EngineUp => "engine_up",
            Signal::EndpointUp => "engine_endpoint_up",
            Signal::PcieLinkWidthRatio => "pcie_link_width_ratio",
            Signal::NvlinkErrors => "nvlink_errors",
            Signal::NvlinkDownWhileBusy => "nvlink_down_while_busy",
            Signal::ReadsLate => "reads_late",
            Signal::MemoryTemperatureHeadroom => "memory_temperature_headroom",
            Signal::RecoveryReset => "recovery_reset",
            Signal::AnsweredRequests => "answered_requests",
            Signal::ServedRequests => "served_requests",
            Signal::Reading(r) => r.signal.unwrap_or(r.family.name),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every signal has a name of its own; a reading's is found by its
    /// family and reads the collector its family belongs to.
    #[test]
    fn every_signal_is_named_once() {
        let mut names: Vec<&str> = Signal::all().map(Signal::name).collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all, "{names:?}");
        let own: Vec<Signal> = Signal::all()
            .filter(|s| matches!(s, Signal::Reading(_)))
            .collect();
        assert_eq!(own.len(), 9);
        for s in own {
            let Signal::Reading(r) = s else { continue };
            assert_eq!(Signal::of(&r.family), s);
            assert_eq!(
                s.needs().iter().collect::<Vec<_>>(),
                [r.family.collector.unwrap()]
            );
        }
    }
}
