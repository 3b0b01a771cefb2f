//! Sources read the fleet. Each one lives in its own file behind the small
//! [`Source`] trait; blocking calls happen here, on the collector thread,
//! never on a scrape.

pub mod kmsg;
pub mod nvml;
pub mod sim;
pub mod smi;
pub mod workload;

use crate::config::SourceKind;
use crate::snapshot::{Gpu, Model};

/// `O_NONBLOCK` on Linux (x86-64 and aarch64), for files that must never
/// block the collector: std has no constant for it.
pub(crate) const O_NONBLOCK: i32 = 0o4000;
use std::fmt;

/// Why a collection failed. The message reaches the log and `/readyz`.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceError(pub String);

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub trait Source: Send {
    /// Which source this is.
    fn kind(&self) -> SourceKind;

    /// Reads the whole fleet. `at` is the Unix time of this collection;
    /// only the simulator uses it, as its clock.
    fn collect(&mut self, at: f64) -> Result<Vec<Gpu>, SourceError>;

    /// Request metrics of the served models as of the last `collect`.
    /// Real GPU sources don't see requests; the simulator does, so the SLO
    /// rules have data.
    fn models(&self) -> Vec<Model> {
        Vec::new()
    }

    /// Seconds of its own past the source can replay through the alert
    /// evaluator before serving. Only the simulator has a past to replay.
    fn history_seconds(&self) -> f64 {
        0.0
    }
}

/// A real source plus what fills the gaps it leaves: Xid from the kernel
/// log, and allocator stats from the workloads.
pub struct Augmented {
    pub inner: Box<dyn Source>,
    pub xid: Option<kmsg::KernelLogXid>,
    pub workload: Option<workload::WorkloadStats>,
}

impl Source for Augmented {
    fn kind(&self) -> SourceKind {
        self.inner.kind()
    }

    fn collect(&mut self, at: f64) -> Result<Vec<Gpu>, SourceError> {
        let mut gpus = self.inner.collect(at)?;
        if let Some(xid) = &mut self.xid {
            xid.apply(&mut gpus);
        }
        // Real sources collect at wall-clock time, which file ages need.
        if let Some(w) = &mut self.workload {
            w.apply(at, &mut gpus);
        }
        Ok(gpus)
    }

    fn models(&self) -> Vec<Model> {
        self.inner.models()
    }

    fn history_seconds(&self) -> f64 {
        self.inner.history_seconds()
    }
}
