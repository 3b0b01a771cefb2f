//! Sources read the fleet. Each one lives in its own file behind the small
//! [`Source`] trait; blocking calls happen here, on the poller thread,
//! never on a scrape. The fleet memory (`fleet`) stands between every
//! source and the snapshot.
//!
//! Unsafe code lives in `nvml/ffi.rs` alone, each block with its `SAFETY:`.

pub mod fleet;
pub mod host;
pub mod nvml;
pub mod sim;
pub mod smi;

use model::{Gpu, Kubelet, SourceKind, Timings};
use std::fmt;

/// Why a collection failed. The message reaches the log and `/readyz`.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceError(pub String);

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A reader of the whole fleet, called once per collection.
pub trait Source: Send {
    /// Which source this is.
    fn kind(&self) -> SourceKind;

    /// Reads the whole fleet. `at` is the Unix time of this collection;
    /// only the simulator uses it, as its clock.
    fn collect(&mut self, at: f64) -> Result<Vec<Gpu>, SourceError>;

    /// The served models' request series as of the last `collect`,
    /// spelled as vLLM (v1) serves them on its `/metrics`, for the poller
    /// to read as an engine's. Real GPU sources don't see requests; the
    /// simulator does, so the SLO rules have data.
    fn models_text(&self) -> String {
        String::new()
    }

    /// How each collector fared in the last `collect`, where the source
    /// times them.
    fn timings(&self) -> Timings {
        Timings::default()
    }

    /// Readings left out as out of range since start, by family, where
    /// the source checks them.
    fn rejected(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// The kubelet's pod-resources API as last seen, where pod
    /// attribution is on.
    fn kubelet(&self) -> Option<Kubelet> {
        None
    }

    /// Seconds of its own past the source can replay through the alert
    /// evaluator before serving. Only the simulator has a past to replay.
    fn history_seconds(&self) -> f64 {
        0.0
    }

    /// A copy of the source as it stands, for the alert evaluator to
    /// replay [`Source::history_seconds`] of its past on its own thread
    /// while this one serves; `None` for a source without a past.
    fn replay_copy(&self) -> Option<Box<dyn Source>> {
        None
    }

    /// Moves the source's clock to `at` as a collection would, reading
    /// nothing: the simulator steps through the past its replay copy reads.
    fn skip_to(&mut self, _at: f64) {}
}
