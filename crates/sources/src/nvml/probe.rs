//! Calls NVML for one GPU: whether it answered GPU_IS_LOST, which
//! collectors are on, how long each took, and which readings answered the
//! "not available" sentinel. Every reader of a GPU takes one.

use super::ffi::{self, Error};
use model::Timings;
use model::{Collector, Collectors};
use std::time::Instant;

/// Calls NVML for one GPU: remembers whether it answered GPU_IS_LOST
/// (after which nothing more is asked of it), runs each collector's calls
/// only when it is on, and times them.
pub(super) struct Probe {
    pub(super) lost: bool,
    /// The readings that answered NVML's "not available" sentinel.
    pub(super) sentinels: Vec<&'static str>,
    on: Collectors,
    /// The collector whose calls are being made.
    collector: Collector,
    pub(super) timings: Timings,
}

impl Probe {
    pub(super) fn new(on: Collectors) -> Probe {
        Probe {
            lost: false,
            sentinels: Vec::new(),
            on,
            collector: Collector::Info,
            timings: Timings::default(),
        }
    }

    pub(super) fn on(&self, c: Collector) -> bool {
        self.on.has(c)
    }

    /// [`Probe::get`] for a reading, which NVML's sentinel leaves out.
    pub(super) fn value<T: Sentinel>(
        &mut self,
        what: &'static str,
        call: impl FnOnce() -> Result<T, Error>,
    ) -> Option<T> {
        let v = self.get(what, call)?;
        self.keep(what, v.is_sentinel()).then_some(v)
    }

    /// Whether a reading is kept; a sentinel is noted instead.
    #[inline(never)]
    fn keep(&mut self, what: &'static str, sentinel: bool) -> bool {
        if sentinel {
            self.sentinels.push(what);
        }
        !sentinel
    }

    /// Counts a failed call against the current collector.
    pub(super) fn failed(&mut self, what: &str, e: Error) {
        log::debug!("source nvml: {what}: {e}");
        self.timings.failed = self.timings.failed.with(self.collector);
    }

    pub(super) fn get<T>(
        &mut self,
        what: &str,
        call: impl FnOnce() -> Result<T, Error>,
    ) -> Option<T> {
        if self.lost {
            return None;
        }
        self.check(what, call())
    }

    /// A call's outcome: its value, or `None` after noting why.
    pub(super) fn check<T>(&mut self, what: &str, r: Result<T, Error>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(Error::GPU_IS_LOST) => {
                self.lost = true;
                None
            }
            Err(Error::NOT_SUPPORTED | Error::FUNCTION_NOT_FOUND) => None,
            Err(e) => {
                self.failed(what, e);
                None
            }
        }
    }

    /// [`Probe::check`] for a call of collector `c`.
    pub(super) fn check_as<T>(
        &mut self,
        c: Collector,
        what: &str,
        r: Result<T, Error>,
    ) -> Option<T> {
        let outer = std::mem::replace(&mut self.collector, c);
        let v = self.check(what, r);
        self.collector = outer;
        v
    }

    /// Runs `f` as collector `c`'s calls when `c` is on, timing them.
    pub(super) fn section(&mut self, c: Collector, f: impl FnOnce(&mut Probe)) {
        if self.lost || !self.on(c) {
            return;
        }
        let outer = std::mem::replace(&mut self.collector, c);
        let started = Instant::now();
        f(self);
        self.timings.add(c, started.elapsed().as_secs_f64());
        self.collector = outer;
    }
}

/// NVML's NVML_VALUE_NOT_AVAILABLE: -1 in an unsigned reading, all ones.
pub(super) trait Sentinel: Copy {
    fn is_sentinel(self) -> bool;
}

impl Sentinel for u32 {
    fn is_sentinel(self) -> bool {
        self == u32::MAX
    }
}

impl Sentinel for u64 {
    fn is_sentinel(self) -> bool {
        self == u64::MAX
    }
}

/// GPU and memory utilization, one call: all ones in either is no reading.
impl Sentinel for (u32, u32) {
    fn is_sentinel(self) -> bool {
        self.0.is_sentinel() || self.1.is_sentinel()
    }
}

impl Sentinel for ffi::Memory {
    fn is_sentinel(self) -> bool {
        self.total.is_sentinel() || self.used.is_sentinel() || self.free.is_sentinel()
    }
}
