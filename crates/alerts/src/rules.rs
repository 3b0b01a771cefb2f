//! The rule data. A rule reads one [`Signal`] per subject (a GPU, a served
//! model, or the exporter itself) through an [`Expr`], and compares it.

use base::time::format_duration;
use model::readings::{self, Family, Kind, Reading};
use model::{Collector, Collectors};
use model::{Freshness, Gpu, PAGE_XIDS, Readings, Snapshot, TICKET_XIDS};
use std::time::Duration;

/// Who an alert is about; its labels.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subject {
    Exporter,
    Gpu {
        index: u32,
        uuid: String,
    },
    Model(String),
    /// An engine endpoint that does not answer: its URL, its engine where
    /// known (else empty), and the reason of its last read, which is no
    /// label and not part of its identity (the evaluator keys endpoints
    /// without it), so a reason that changes keeps the alert and its
    /// `for`; the summary names it ([`super::summary::REASON`]).
    Endpoint {
        url: String,
        engine: String,
        reason: &'static str,
    },
}

impl Subject {
    pub fn of_gpu(g: &Gpu) -> Subject {
        Subject::Gpu {
            index: g.index,
            uuid: g.uuid.clone(),
        }
    }

    /// The labels an alert about this subject carries, after `alertname`.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut l = Vec::new();
        self.each_label(&mut |k, v| l.push((k, v.to_string())));
        l
    }

    /// The same labels, each handed to `f` (the status page renders
    /// without allocating).
    pub fn each_label(&self, f: &mut dyn FnMut(&'static str, &dyn std::fmt::Display)) {
        match self {
            Subject::Exporter => {}
            Subject::Gpu { index, uuid } => {
                f("gpu", index);
                f("uuid", uuid);
            }
            Subject::Model(name) => f("model_name", name),
            Subject::Endpoint { url, engine, .. } => {
                f("endpoint", url);
                if !engine.is_empty() {
                    f("engine", engine);
                }
            }
        }
    }
}

/// A number per subject that a rule can read from a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// 1 while hw slowdown, sw/hw thermal slowdown or power brake is active.
    Throttled,
    /// The sum of the Xid counters that page: the GPU needs a reset or
    /// a replacement now ([`PAGE_XIDS`], a counter).
    CriticalXid,
    /// The sum of the Xid counters of recorded or corrected events, worth
    /// a ticket ([`TICKET_XIDS`], a counter).
    RecordedXid,
    /// Largest free block over total memory, on a GPU with workload
    /// allocator stats whose pools hold more free memory than that block
    /// (fragmented, not merely full), while any memory is in use.
    LargestFreeRatio,
    /// 1 while the GPU answers.
    Up,
    /// 1 when the last collection succeeded and none is stalled (the
    /// exporter's own).
    CollectSuccess,
    /// 1 while a collection has run past its bound (the exporter's own).
    CollectStalled,
    /// 1 while collections fail or stall and the GPUs' last readings,
    /// older than `--collect.max-stale`, are no longer served.
    ReadingsHidden,
    /// Requests served, per model (a counter: the TTFT histogram's count).
    Requests,
    /// Requests whose first token came within the SLO (a counter).
    GoodRequests,
    /// 1 while the engine serving a model answers its reads, 0 while the
    /// model's counts are held from its last good read.
    EngineUp,
    /// 0 for an engine endpoint whose last read failed, by its reason
    /// (`gpu_exporter_engine_up` with `gpu_exporter_engine_down`'s
    /// reason); no value for one up or not read yet.
    EndpointUp,
    /// Requests served or failed by the engine, per model (a counter; a
    /// client's abort is neither).
    AnsweredRequests,
    /// Of those, the requests served (a counter).
    ServedRequests,
    /// PCIe link width over its maximum.
    PcieLinkWidthRatio,
    /// NVLink errors of every kind, summed (a counter).
    NvlinkErrors,
    /// NVLinks down, on a busy GPU only: SM active above [`BUSY_SM_ACTIVE`]
    /// or a workload reporting allocator memory on it.
    NvlinkDownWhileBusy,
    /// NVML reads that ran past a collection's deadline, so the GPU was
    /// served from its last read (a counter; the exporter's own).
    ReadsLate,
    /// Degrees between the memory's slowdown temperature and its own.
    MemoryTemperatureHeadroom,
    /// 1 while the recovery action is a GPU reset.
    RecoveryReset,
    /// A reading as it is, where its declaration names it a signal
    /// (`Reading::signal`): a gauge, or a counter where its family is one.
    Reading(&'static Reading),
}

/// SM active above this makes a GPU busy for [`Signal::NvlinkDownWhileBusy`].
pub const BUSY_SM_ACTIVE: f64 = 0.1;

impl Signal {
    /// The signal of the reading `family` shows, whose declaration names
    /// it one (the built-in rules' are held by a test).
    pub fn of(family: &Family) -> Signal {
        let reading = readings::of(family).filter(|r| r.signal.is_some());
        Signal::Reading(reading.expect("a reading declared with a signal"))
    }

    pub fn is_counter(self) -> bool {
        match self {
            Signal::Reading(r) => r.family.kind == Kind::Counter,
            _ => matches!(
                self,
                Signal::CriticalXid
                    | Signal::RecordedXid
                    | Signal::Requests
                    | Signal::GoodRequests
                    | Signal::AnsweredRequests
                    | Signal::ServedRequests
                    | Signal::NvlinkErrors
                    | Signal::ReadsLate
            ),
        }
    }

    /// The collectors whose readings it reads.
    pub fn needs(self) -> Collectors {
        use Collector::*;
        let one = |c| Collectors::NONE.with(c);
        match self {
            Signal::Throttled => one(Clocks),
            Signal::CriticalXid | Signal::RecordedXid => one(Xid),
            Signal::LargestFreeRatio => one(Allocator).with(Memory),
            Signal::Up => one(Info),
            Signal::MemoryTemperatureHeadroom => one(Temperature),
            Signal::CollectSuccess
            | Signal::CollectStalled
            | Signal::ReadingsHidden
            | Signal::ReadsLate => Collectors::NONE,
            Signal::Requests | Signal::GoodRequests | Signal::EngineUp => one(Models),
            Signal::EndpointUp => one(Models),
            Signal::AnsweredRequests | Signal::ServedRequests => one(Models),
            Signal::PcieLinkWidthRatio => one(Pcie),
            Signal::NvlinkErrors | Signal::NvlinkDownWhileBusy => one(Nvlink),
            Signal::RecoveryReset => one(Recovery),
            Signal::Reading(r) => r.family.collector.map_or(Collectors::NONE, one),
        }
    }

    /// One GPU's value of a GPU signal.
    fn of_gpu(self, up: bool, r: &Readings) -> Option<f64> {
        let h = &r.health;
        let flag = |b: Option<bool>| b.map(|b| if b { 1.0 } else { 0.0 });
        match self {
            Signal::Throttled => flag(r.throttled()),
            Signal::CriticalXid => r.xid_total(&PAGE_XIDS),
            Signal::RecordedXid => r.xid_total(&TICKET_XIDS),
            Signal::LargestFreeRatio => {
                let (free, total, used) = (
                    r.largest_free_bytes?,
                    r.memory_total_bytes?,
                    r.memory_used_bytes?,
                );
                let pooled = r.allocator_reserved_bytes? - r.allocator_allocated_bytes?;
                (total > 0.0 && used > 0.0 && pooled > free).then(|| free / total)
            }
            Signal::Up => flag(Some(up)),
            Signal::PcieLinkWidthRatio => Some(h.pcie_link_width? / h.pcie_link_width_max?),
            Signal::NvlinkErrors => {
                let mut it = h.nvlink_errors.iter().flatten().peekable();
                it.peek()?;
                Some(it.sum())
            }
            Signal::NvlinkDownWhileBusy => {
                let busy = r.sm_active_ratio.is_some_and(|a| a > BUSY_SM_ACTIVE)
                    || r.allocator_reserved_bytes.is_some_and(|b| b > 0.0);
                busy.then_some(h.nvlink_links? - h.nvlink_links_active?)
            }
            Signal::MemoryTemperatureHeadroom => {
                Some(h.memory_temperature_max_celsius? - r.memory_temperature_celsius?)
            }
            Signal::Reading(reading) => reading.value(r),
            Signal::RecoveryReset => h.recovery_action.map(|a| if a == 1.0 { 1.0 } else { 0.0 }),
            Signal::CollectSuccess
            | Signal::CollectStalled
            | Signal::ReadingsHidden
            | Signal::ReadsLate
            | Signal::Requests
            | Signal::GoodRequests
            | Signal::EngineUp
            | Signal::EndpointUp
            | Signal::AnsweredRequests
            | Signal::ServedRequests => None,
        }
    }

    /// Each subject's value in `snap` as served while `fresh` holds,
    /// handed to `f` with who it is about; a subject that lacks the
    /// reading is left out, as its series would be.
    pub fn each(self, snap: &Snapshot, fresh: Freshness, f: &mut dyn FnMut(Who, f64)) {
        // A collector that is off leaves the rule without data, as its
        // series would be absent from Prometheus.
        if self.needs().iter().any(|c| !snap.reads.has(c)) {
            return;
        }
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        match self {
            Signal::CollectSuccess => f(Who::Exporter, flag(snap.success() && !fresh.stalled)),
            Signal::CollectStalled => f(Who::Exporter, flag(fresh.stalled)),
            Signal::ReadingsHidden => f(Who::Exporter, flag(fresh.hidden)),
            // Served whether or not the readings are: the exporter's own,
            // and only for the GPUs that were late, as its series is.
            Signal::ReadsLate => {
                for (i, g) in snap.gpus.iter().enumerate() {
                    if g.reads_late > 0 {
                        f(Who::Gpu(i), g.reads_late as f64);
                    }
                }
            }
            Signal::Requests
            | Signal::GoodRequests
            | Signal::EngineUp
            | Signal::AnsweredRequests
            | Signal::ServedRequests => self.each_model(snap, fresh, f),
            Signal::EndpointUp => {
                for (i, e) in snap.engines.iter().enumerate() {
                    if !e.up && e.reason.is_some() {
                        f(Who::Endpoint(i), 0.0);
                    }
                }
            }
            _ if fresh.hidden => {}
            _ => {
                for (i, g) in snap.gpus.iter().enumerate() {
                    if let Some(v) = self.of_gpu(g.up, &g.readings) {
                        f(Who::Gpu(i), v);
                    }
                }
            }
        }
    }
}

/// Whom a value in a snapshot is about: its position there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    Exporter,
    Gpu(usize),
    Model(usize),
    /// A model's counter as one endpoint serving it counts it (by its
    /// place in `Snapshot::engines`; `None`: the simulator's model): the
    /// model's value is the sum of its replicas'.
    Replica(usize, Option<usize>),
    /// An engine endpoint, by its place in `Snapshot::engines`.
    Endpoint(usize),
}

/// One pair of a multi-window burn-rate alert: both windows must burn the
/// error budget faster than `factor`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurnWindow {
    pub long: Duration,
    pub short: Duration,
    pub factor: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The signal's current value.
    Gauge(Signal),
    /// Prometheus' `increase()` of a counter signal over the window.
    Increase(Signal, Duration),
    /// Prometheus' `rate()`: the increase per second.
    Rate(Signal, Duration),
    /// Prometheus' `deriv()`: a gauge's least-squares slope per second.
    Deriv(Signal, Duration),
    /// The TTFT SLO's error budget burning: fires when any pair holds.
    /// The value compared is the burn rate (error ratio over budget);
    /// the threshold is unused.
    BurnRate {
        objective: f64,
        windows: Vec<BurnWindow>,
    },
    /// The engines' availability SLO burning, as [`Expr::BurnRate`] but
    /// over the requests the engine failed of those it answered.
    AvailabilityBurn {
        objective: f64,
        windows: Vec<BurnWindow>,
    },
    /// Across the fleet, more than one driver version. Only Prometheus
    /// sees the fleet, so only the printed rule file evaluates it.
    DriverVersionSkew,
    /// Prometheus cannot scrape the exporter (`up == 0`): only Prometheus
    /// can see that, like the two below.
    ExporterDown,
    /// No target of the scrape job at all (`absent(up{job=...})`): every
    /// exporter dropped out of discovery.
    JobAbsent,
    /// An exporter serves fewer GPUs than it did at most over the last day.
    GpuCountDropped,
}

impl Expr {
    /// Every (signal, window) the evaluator must keep history for.
    pub fn windows(&self) -> Vec<(Signal, Duration)> {
        match self {
            Expr::Increase(s, w) | Expr::Rate(s, w) | Expr::Deriv(s, w) => vec![(*s, *w)],
            Expr::BurnRate { windows, .. } | Expr::AvailabilityBurn { windows, .. } => {
                let (total, good) = self.burn_signals();
                windows
                    .iter()
                    .flat_map(|b| [b.long, b.short])
                    .flat_map(|w| [(total, w), (good, w)])
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Its name as a rule file's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Expr::Gauge(_) => "gauge",
            Expr::Increase(..) => "increase",
            Expr::Rate(..) => "rate",
            Expr::Deriv(..) => "deriv",
            Expr::BurnRate { .. } => "burn_rate",
            Expr::AvailabilityBurn { .. } => "availability_burn",
            Expr::DriverVersionSkew => "driver_version_skew",
            Expr::ExporterDown => "exporter_down",
            Expr::JobAbsent => "job_absent",
            Expr::GpuCountDropped => "gpu_count_dropped",
        }
    }

    /// A burn rate's total and good requests.
    pub fn burn_signals(&self) -> (Signal, Signal) {
        match self {
            Expr::AvailabilityBurn { .. } => (Signal::AnsweredRequests, Signal::ServedRequests),
            _ => (Signal::Requests, Signal::GoodRequests),
        }
    }

    /// Whether it reads one signal, and which.
    pub fn signal(&self) -> Option<Signal> {
        match *self {
            Expr::Gauge(s) | Expr::Increase(s, _) | Expr::Rate(s, _) | Expr::Deriv(s, _) => Some(s),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Above,
    Below,
}

impl Cmp {
    pub fn holds(self, v: f64, threshold: f64) -> bool {
        match self {
            Cmp::Above => v > threshold,
            Cmp::Below => v < threshold,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Cmp::Above => ">",
            Cmp::Below => "<",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Page,
    Ticket,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Page => "page",
            Severity::Ticket => "ticket",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub name: String,
    pub expr: Expr,
    pub cmp: Cmp,
    pub threshold: f64,
    pub for_: Duration,
    pub keep_firing_for: Duration,
    /// How long a gauge's alert holds while its series are missing (a
    /// scrape gap, readings no longer served), counted from the last
    /// reading: the printed rule reads the last sample within it
    /// (`last_over_time`). Unlike `keep_firing_for`, a reading that clears
    /// the condition resolves it at once, so a GPU that recovers is quiet.
    pub gap_hold: Duration,
    pub severity: Severity,
    /// As written: a Prometheus template whose `{for}`, `{keep_firing_for}`
    /// and `{window}` the exporter spells out itself (see [`Rule::spell`]).
    pub summary_template: String,
    /// The template with the rule's durations spelled in: what the printed
    /// rules carry. `{{ $labels.<name> }}`, `{{ $value }}` and
    /// `{{ printf "%.1f" $value }}` are expanded in `/alerts` too.
    pub summary: String,
    /// The runbook's file name without `.md`; the rule's name by default.
    pub runbook: String,
    /// A burn-rate rule's models with an objective of their own
    /// (`--engine.config`), each replacing the rule's for that model.
    pub objectives: Vec<(String, f64)>,
}

impl Rule {
    /// A rule without `keep_firing_for`, with its own runbook.
    pub fn new(
        name: &str,
        expr: Expr,
        cmp: Cmp,
        threshold: f64,
        for_: Duration,
        severity: Severity,
        summary: &str,
    ) -> Rule {
        Rule {
            name: name.into(),
            expr,
            cmp,
            threshold,
            for_,
            keep_firing_for: Duration::ZERO,
            gap_hold: Duration::ZERO,
            severity,
            summary_template: summary.into(),
            summary: String::new(),
            runbook: name.into(),
            objectives: Vec::new(),
        }
        .spell()
    }

    /// The summary again from its template, after a duration changed.
    pub fn spell(mut self) -> Rule {
        let window = self.expr.windows().first().map(|w| w.1);
        let mut text = self.summary_template.clone();
        for (key, d) in [
            ("{for}", Some(self.for_)),
            ("{keep_firing_for}", Some(self.keep_firing_for)),
            ("{window}", window),
        ] {
            if let Some(d) = d {
                text = text.replace(key, &format_duration(d));
            }
        }
        self.summary = text;
        self
    }

    /// The collectors whose readings the rule reads.
    pub fn needs(&self) -> Collectors {
        match &self.expr {
            Expr::Gauge(s) | Expr::Increase(s, _) | Expr::Rate(s, _) | Expr::Deriv(s, _) => {
                s.needs()
            }
            Expr::BurnRate { .. } | Expr::AvailabilityBurn { .. } => Signal::Requests.needs(),
            Expr::DriverVersionSkew | Expr::GpuCountDropped => Signal::Up.needs(),
            Expr::ExporterDown | Expr::JobAbsent => Collectors::NONE,
        }
    }

    /// Whether its alerts are about GPUs (labelled `gpu` and `uuid`):
    /// those name who uses the GPU in a `workloads` annotation.
    pub fn about_gpus(&self) -> bool {
        self.expr.signal().is_some_and(|s| {
            !matches!(
                s,
                Signal::CollectSuccess
                    | Signal::CollectStalled
                    | Signal::ReadingsHidden
                    | Signal::Requests
                    | Signal::GoodRequests
                    | Signal::EngineUp
                    | Signal::EndpointUp
                    | Signal::AnsweredRequests
                    | Signal::ServedRequests
            )
        })
    }

    /// Whether the exporter evaluates it itself; the others need what only
    /// Prometheus sees (the fleet, the scrapes).
    pub fn in_process(&self) -> bool {
        !matches!(
            self.expr,
            Expr::DriverVersionSkew | Expr::ExporterDown | Expr::JobAbsent | Expr::GpuCountDropped
        )
    }

    /// Whether it is about the exporter itself: its collections, its
    /// scrapes.
    pub fn about_exporter(&self) -> bool {
        matches!(self.expr, Expr::ExporterDown | Expr::JobAbsent)
            || matches!(
                self.expr.signal(),
                Some(Signal::CollectSuccess | Signal::CollectStalled | Signal::ReadingsHidden)
            )
    }

    /// Whether its alerts are about the fleet, not one node: its expression
    /// aggregates `instance` away (driver versions across the job, a job
    /// without targets).
    pub fn fleet(&self) -> bool {
        matches!(self.expr, Expr::DriverVersionSkew | Expr::JobAbsent)
    }

    /// Whether it judges models over the engines' own series, which
    /// Prometheus scrapes from the engines: printed per engine instance,
    /// as the exporter judges, and per model across the fleet.
    pub fn over_engines(&self) -> bool {
        matches!(
            self.expr,
            Expr::BurnRate { .. } | Expr::AvailabilityBurn { .. }
        )
    }

    /// Whether the exporter it is about can serve its runbook: not for a
    /// fleet alert (no instance to link through), one over the engines'
    /// series (whose `instance` is an engine), nor one that fires because
    /// that exporter cannot be scraped.
    pub fn runbook_on_instance(&self) -> bool {
        !self.fleet() && !self.over_engines() && !matches!(self.expr, Expr::ExporterDown)
    }

    /// The runbook for this rule: `<runbook>.md` under `base`.
    pub fn runbook_url(&self, base: &str) -> String {
        format!("{base}{}.md", self.runbook)
    }
}

pub(crate) const MIN: Duration = Duration::from_secs(60);
pub(crate) const HOUR: Duration = Duration::from_secs(3600);

/// The TTFT SLO: 99.9% of requests get their first token within 0.3 s.
pub const TTFT_OBJECTIVE: f64 = 0.999;
