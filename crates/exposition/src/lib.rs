//! Renders a snapshot as Prometheus text 0.0.4 or OpenMetrics 1.0.0 into a
//! caller's buffer. Once the buffer has grown to fit, a render allocates
//! nothing: numbers are spelled on the stack, labels escaped in place.
#![forbid(unsafe_code)]

pub mod alertmanager_stats;
mod attribution;
mod dcgm;
mod engines;
mod format;
mod line;
mod live;
mod writer;

pub use format::Format;
pub use live::Steady;
pub use model::reason::{Evicted, HandshakeError, ServerStats, Tally};

use attribution::copies;
use base::numbers::write_f64;
use catalogue::{
    BUILD_INFO, COLLECT_DURATION, COLLECT_STALLED, COLLECT_SUCCESS, COLLECTOR_DURATION,
    COLLECTOR_SUCCESS, Extra, GPU_INFO, GPU_READS_LATE, GPU_UP, GPUS, MIG_INFO, PROCESS,
    READINGS_HIDDEN, READINGS_REJECTED, SOURCE_INFO, Series, TTFT,
};
use line::Line;
use model::catalogue;
use model::readings;
use model::{Collector, Collectors};
use model::{Freshness, Gpu, Model, Snapshot};
use std::cell::Cell;
use std::time::Instant;
use writer::{CACHED_TARGETS, Target, Writer, each_target};

/// Targets up to which a render's label-set cache is the small one.
const SMALL_CACHE: usize = 64;

/// The HTTP server's own counts at a scrape: they live on the HTTP
/// thread, not in the snapshot.
#[derive(Clone, Copy, Default)]
pub struct HttpStats {
    /// The server's.
    pub server: ServerStats,
    /// Page requests refused over the pages' byte budget.
    pub pages_refused: u64,
    /// The Alertmanager notifier's counts, where it runs.
    pub alertmanager: Option<&'static alertmanager_stats::Stats>,
}

/// What one render needs: the snapshot and how fresh it is, the HTTP
/// server's own counts (none outside a server), the format, and the
/// collectors a scrape asked for (`collect[]` and `exclude[]`;
/// [`Collectors::ALL`] for every one).
#[derive(Clone, Copy)]
pub struct Scrape<'a> {
    pub snapshot: &'a Snapshot,
    pub fresh: Freshness,
    pub http: Option<&'a HttpStats>,
    pub format: Format,
    pub only: Collectors,
    /// When it is served: the snapshot's age is measured to it.
    pub now: Instant,
}

impl<'a> Scrape<'a> {
    /// Every collector of a fresh `snapshot`, as text 0.0.4, now, outside
    /// a server; the fields say otherwise.
    pub fn of(snapshot: &'a Snapshot) -> Scrape<'a> {
        Scrape {
            snapshot,
            fresh: Freshness::default(),
            http: None,
            format: Format::Text,
            only: Collectors::ALL,
            now: Instant::now(),
        }
    }

    /// In `format`.
    pub fn format(self, format: Format) -> Scrape<'a> {
        Scrape { format, ..self }
    }

    /// Writes the scrape to `out`, after whatever `out` holds: the
    /// families of the asked collectors that ran, then the exporter's own,
    /// which are always written; while `fresh` says the readings are
    /// withheld, only they are.
    pub fn render(&self, out: &mut Vec<u8>) {
        self.render_shared(out);
        self.render_live(out);
    }

    /// What every scrape of one snapshot, freshness, format and set of
    /// collectors writes alike, so that a server renders it once and
    /// shares it: the snapshot's families, then the exporter's own that
    /// depend on the snapshot and its freshness alone.
    /// [`Scrape::render_live`] writes the rest.
    pub fn render_shared(&self, out: &mut Vec<u8>) {
        self.render_families(out);
        self.render_own(out);
    }

    /// [`Scrape::render`] into a new String, for tests.
    pub fn text(&self) -> String {
        let mut out = Vec::new();
        self.render(&mut out);
        String::from_utf8(out).expect("renders are UTF-8")
    }
}

fn writer<'a>(
    out: &'a mut Vec<u8>,
    format: Format,
    cached: &'a mut [(usize, usize)],
) -> Writer<'a> {
    Writer {
        out,
        om: format == Format::OpenMetrics,
        cached,
    }
}

impl Scrape<'_> {
    /// The first part of [`Scrape::render`]: every family that depends on the
    /// snapshot alone (the GPUs', MIG instances', attribution, models'), so
    /// that a gzipped scrape can compress it once per snapshot. With the
    /// readings withheld, only the engines' models (see
    /// [`Snapshot::served_models`]).
    pub fn render_families(&self, out: &mut Vec<u8>) {
        let Scrape {
            snapshot,
            format,
            only,
            ..
        } = *self;
        let on = snapshot.collectors.and(only);
        let gpus = match self.fresh.hidden {
            true => &[][..],
            false => &snapshot.gpus[..],
        };
        // Zeroed per render: a small fleet's 1 KB, not the 9 KB of the
        // largest (3% of an 8-GPU render's instructions, counted).
        let (mut small, mut large);
        let targets: usize = gpus.iter().map(|g| 1 + g.mig.len()).sum();
        let cache: &mut [(usize, usize)] = if targets <= SMALL_CACHE {
            small = [(0, 0); SMALL_CACHE];
            &mut small
        } else {
            large = [(0, 0); CACHED_TARGETS];
            &mut large
        };
        let mut w = writer(out, format, cache);
        let (_, models) = snapshot.served_models(self.fresh);
        let pod_labels = snapshot.kubernetes.pod_labels;
        let mut line = Line::new();

        if !gpus.is_empty() && on.has(Collector::Info) {
            identity(&mut w, gpus, pod_labels);
        }
        for r in readings::all() {
            let fam = &r.family;
            if !fam.collector.is_some_and(|c| on.has(c)) {
                continue;
            }
            // A MIG instance's memory has families of its own.
            let only = r.mig.as_ref().map(|_| true);
            family_series(
                &mut w,
                gpus,
                fam,
                r.read.series,
                only,
                pod_labels,
                &mut line,
            );
        }
        for r in readings::all() {
            if let Some(fam) = r
                .mig
                .as_ref()
                .filter(|f| f.collector.is_some_and(|c| on.has(c)))
            {
                family_series(
                    &mut w,
                    gpus,
                    fam,
                    r.read.series,
                    Some(false),
                    pod_labels,
                    &mut line,
                );
            }
        }
        if gpus.iter().any(|g| !g.mig.is_empty()) && on.has(Collector::Info) {
            mig_info(&mut w, gpus);
        }

        attribution::render(&mut w, snapshot, gpus, on);

        if !models.is_empty() && on.has(Collector::Models) {
            ttft(&mut w, models);
        }
        engines::objectives(&mut w, &snapshot.objectives, models);
        // The engine reader's state changes with the snapshot alone.
        engines::own(&mut w, snapshot);
        // A writer of its own: its label sets are not the native ones.
        if let (Some(d), true) = (&snapshot.dcgm, on.has(Collector::Dcgm)) {
            cache.fill((0, 0));
            dcgm::render(&mut writer(out, format, cache), d, gpus, pod_labels);
        }
    }

    /// The exporter's own families that depend on the snapshot and its
    /// freshness alone: what it is, how the collection went, what the
    /// kubelet client and the process counted at it.
    fn render_own(&self, out: &mut Vec<u8>) {
        let Scrape {
            snapshot,
            fresh,
            format,
            only,
            ..
        } = *self;
        let mut w = writer(out, format, &mut []);
        let on = snapshot.collectors.and(only);
        let gpus = match fresh.hidden {
            true => &[][..],
            false => &snapshot.gpus[..],
        };
        w.head(&BUILD_INFO);
        w.name(&BUILD_INFO);
        w.open_label("version", env!("CARGO_PKG_VERSION"));
        w.value(1.0);
        // Until the first collection the source may not be chosen yet (auto).
        if !snapshot.is_starting() {
            w.head(&SOURCE_INFO);
            w.name(&SOURCE_INFO);
            w.open_label("source", snapshot.source.as_str());
            w.value(1.0);
            w.scalar(&GPUS, gpus.len() as f64);
        }
        let success = snapshot.success() && !fresh.stalled;
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        w.scalar(&COLLECT_DURATION, snapshot.collect_duration.as_secs_f64());
        w.scalar(&COLLECT_SUCCESS, flag(success));
        w.scalar(&COLLECT_STALLED, flag(fresh.stalled));
        w.scalar(&READINGS_HIDDEN, flag(fresh.hidden));
        rejected(&mut w, &snapshot.rejected);
        reads_late(&mut w, gpus);
        let timed = |c: Collector| snapshot.timings.seconds[c as usize];
        if on.iter().any(|c| timed(c).is_some()) {
            w.head(&COLLECTOR_DURATION);
            for c in on.iter() {
                if let Some(s) = timed(c) {
                    w.name(&COLLECTOR_DURATION);
                    w.open_label("collector", c.name());
                    w.value(s);
                }
            }
        }
        if !on.is_empty() {
            w.head(&COLLECTOR_SUCCESS);
            for c in on.iter() {
                let ok = success && !snapshot.timings.failed.has(c);
                w.name(&COLLECTOR_SUCCESS);
                w.open_label("collector", c.name());
                w.value(if ok { 1.0 } else { 0.0 });
            }
        }
        attribution::own(&mut w, snapshot);
        for (fam, read) in &PROCESS {
            if let Some(v) = read(&snapshot.process) {
                w.scalar(fam, v);
            }
        }
    }

    /// The rest of [`Scrape::render`], written for each scrape: what
    /// changes between scrapes of one snapshot (its age, the HTTP server's
    /// counts, the Alertmanager notifier's), then OpenMetrics' `# EOF`.
    /// Says where, from where it began, what changes on every scrape
    /// begins, and which text precedes that.
    pub fn render_live(&self, out: &mut Vec<u8>) -> Steady {
        let Scrape {
            snapshot,
            http,
            format,
            now,
            ..
        } = *self;
        // In whole milliseconds, rounded half up.
        let age = now.saturating_duration_since(snapshot.published);
        let ms = age.as_secs().saturating_mul(1000);
        let ms = ms.saturating_add(u64::from((age.subsec_nanos() + 500_000) / 1_000_000));
        let steady = live::render(out, format, ms, http);
        if let Some(a) = http.and_then(|h| h.alertmanager) {
            alertmanager(&mut writer(out, format, &mut []), a);
        }
        if format == Format::OpenMetrics {
            out.extend_from_slice(b"# EOF\n");
        }
        steady
    }
}

/// The Alertmanager notifier's counts, where it runs.
fn alertmanager(w: &mut Writer, stats: &alertmanager_stats::Stats) {
    use catalogue::{
        ALERTMANAGER_DROPPED, ALERTMANAGER_FAILED, ALERTMANAGER_LATENCY, ALERTMANAGER_QUEUE,
        ALERTMANAGER_SENT,
    };
    w.head(&ALERTMANAGER_SENT);
    for u in stats.each() {
        w.name(&ALERTMANAGER_SENT);
        w.open_label("url", u.url);
        w.value(u.sent as f64);
    }
    w.head(&ALERTMANAGER_FAILED);
    for u in stats.each() {
        for (k, reason) in alertmanager_stats::REASONS.iter().enumerate() {
            w.name(&ALERTMANAGER_FAILED);
            w.open_label("url", u.url);
            w.label("reason", reason);
            w.value(u.failed[k] as f64);
        }
    }
    w.scalar(&ALERTMANAGER_DROPPED, stats.dropped_total() as f64);
    w.scalar(&ALERTMANAGER_QUEUE, stats.queue_length() as f64);
    w.head(&ALERTMANAGER_LATENCY);
    for u in stats.each() {
        w.name(&ALERTMANAGER_LATENCY);
        w.open_label("url", u.url);
        w.value(u.latency_seconds);
    }
}

/// `gpu_exporter_readings_rejected_total`, once there is a rejection.
fn rejected(w: &mut Writer, counts: &[(&'static str, u64)]) {
    if counts.is_empty() {
        return;
    }
    w.head(&READINGS_REJECTED);
    for (reading, n) in counts {
        w.name(&READINGS_REJECTED);
        w.open_label("reading", reading);
        w.value(*n as f64);
    }
}

/// `gpu_exporter_gpu_reads_late_total`, for the GPUs that were late.
fn reads_late(w: &mut Writer, gpus: &[Gpu]) {
    let mut late = gpus.iter().filter(|g| g.reads_late > 0).peekable();
    if late.peek().is_none() {
        return;
    }
    w.head(&GPU_READS_LATE);
    for g in late {
        w.name(&GPU_READS_LATE);
        w.gpu_labels(g.index, &g.uuid);
        w.value(g.reads_late as f64);
    }
}

/// `gpu_info` and `gpu_up`, a series per GPU (and per pod using it).
fn identity(w: &mut Writer, gpus: &[Gpu], pod_labels: bool) {
    let gpu_targets = |f: &mut dyn FnMut(Target)| {
        each_target(gpus, |t, _| {
            if t.mig.is_none() {
                f(t)
            }
        })
    };
    w.head(&GPU_INFO);
    gpu_targets(&mut |t| {
        for pod in copies(&t.gpu.readings, pod_labels) {
            w.name(&GPU_INFO);
            w.target(t);
            w.pod(pod);
            let g = t.gpu;
            for (k, v) in [
                ("model", &g.model),
                ("pci_bus_id", &g.pci_bus_id),
                ("driver_version", &g.driver_version),
            ] {
                w.label(k, v);
            }
            for (k, v) in [
                ("vbios_version", &g.vbios_version),
                ("inforom_version", &g.inforom_version),
            ] {
                if !v.is_empty() {
                    w.label(k, v);
                }
            }
            w.value(1.0);
        }
    });
    w.head(&GPU_UP);
    gpu_targets(&mut |t| {
        for pod in copies(&t.gpu.readings, pod_labels) {
            w.name(&GPU_UP);
            w.target(t);
            w.pod(pod);
            w.value(if t.gpu.up { 1.0 } else { 0.0 });
        }
    });
}

/// `gpu_mig_info`, a series per compute instance.
fn mig_info(w: &mut Writer, gpus: &[Gpu]) {
    w.head(&MIG_INFO);
    each_target(gpus, |t, _| {
        let Some(m) = t.mig else { return };
        for ci in &m.compute {
            w.name(&MIG_INFO);
            w.target(t);
            if let Some(id) = ci.id {
                w.num_label("mig_compute_instance", id);
            }
            w.label("mig_uuid", &ci.uuid);
            w.value(1.0);
        }
    });
}

/// The models' TTFT histograms.
/// The simulator's models: an engine's are not served again, Prometheus
/// scrapes the engine itself.
fn ttft(w: &mut Writer, models: &[Model]) {
    let mut models = models.iter().filter(|m| m.endpoint.is_none()).peekable();
    if models.peek().is_none() {
        return;
    }
    w.head(&TTFT);
    for m in models {
        let h = &m.ttft_seconds;
        for &(le, n) in &h.buckets {
            w.put(TTFT.name);
            w.put("_bucket");
            w.open_label("model_name", &m.name);
            w.out.extend_from_slice(b",le=\"");
            write_f64(w.out, le);
            w.out.push(b'"');
            w.value(n);
        }
        for (suffix, v) in [("_sum", h.sum), ("_count", h.count())] {
            w.put(TTFT.name);
            w.put(suffix);
            w.open_label("model_name", &m.name);
            w.value(v);
        }
    }
}

/// The series of one family: of every target, or with `only`, of the
/// GPUs (`Some(true)`) or the MIG instances (`Some(false)`). The head goes
/// before the first sample; a family without any (every reading absent)
/// is left out whole.
fn family_series(
    w: &mut Writer,
    gpus: &[Gpu],
    fam: &catalogue::Family,
    series: Series,
    only: Option<bool>,
    pod_labels: bool,
    line: &mut Line,
) {
    let mut headed = false;
    // The target being written: the sink below is built once per family,
    // not once per target (a tenth of an 8x7 MIG render, counted).
    let Some(first) = gpus.first() else {
        return line.flush(w.out);
    };
    let now = Cell::new((
        Target {
            n: 0,
            gpu: first,
            mig: None,
        },
        &first.readings,
    ));
    let mut sink = |extra, v| {
        let (t, r) = now.get();
        if !headed {
            w.line_head(line, fam);
            headed = true;
        }
        // Pod copies are rare: without them a sample is one line on the
        // stack, kept apart from the general path so that the compiler
        // does not set that path up for every sample (about a fifth of a
        // render's instructions, counted).
        if (pod_labels && !r.pods.is_empty()) || !w.line(line, fam, t, extra, v) {
            samples(w, line, fam, t, r, pod_labels, extra, v);
        }
    };
    each_target(gpus, |t, r| {
        if only.is_none_or(|gpu| gpu == t.mig.is_none()) {
            now.set((t, r));
            series(r, &mut sink);
        }
    });
    line.flush(w.out);
}

/// One sample of `fam` for target `t`, a copy per pod where pod labels
/// are on, each written to the output itself.
#[inline(never)]
#[allow(
    clippy::too_many_arguments,
    reason = "family_series' state, passed down"
)]
fn samples(
    w: &mut Writer,
    line: &mut Line,
    fam: &catalogue::Family,
    t: Target,
    r: &model::Readings,
    pod_labels: bool,
    extra: Extra,
    v: f64,
) {
    line.flush(w.out);
    for pod in copies(r, pod_labels) {
        w.name(fam);
        w.target(t);
        w.pod(pod);
        match extra {
            Extra::None => {}
            Extra::Label(text) => w.put(text),
            Extra::Num(k, n) => w.num_label(k, n),
            Extra::NumLabel(k, n, text) => {
                w.num_label(k, n);
                w.put(text);
            }
        }
        w.value(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::SourceKind;
    use std::time::Duration;

    /// The families a `# TYPE` line opens in `text`, in order.
    fn families(text: &str) -> Vec<String> {
        let types = text.lines().filter_map(|l| l.strip_prefix("# TYPE "));
        types.map(|t| t.split(' ').next().unwrap().into()).collect()
    }

    fn written(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).expect("renders are UTF-8")
    }

    /// What a server renders once per snapshot and shares depends on
    /// nothing that changes between scrapes of it; what it writes per
    /// scrape is only what does.
    #[test]
    fn the_shared_part_holds_nothing_that_changes_between_scrapes() {
        let mut s = Snapshot::empty(SourceKind::Sim);
        s.error = None;
        s.process.resident_memory_bytes = Some(4e6);
        s.process.cpu_seconds_total = Some(1.5);
        let quiet = HttpStats::default();
        let mut busy = HttpStats {
            server: ServerStats {
                open: 3,
                gzipped: 7,
                accept_paused_seconds: 0.5,
                ..quiet.server
            },
            pages_refused: 1,
            ..quiet
        };
        busy.server.evicted.add(Evicted::Idle, 2);
        busy.server
            .tls_handshake_errors
            .add(HandshakeError::Failed, 1);
        for format in [Format::Text, Format::OpenMetrics] {
            let at = |later: u64, http| Scrape {
                now: s.published + Duration::from_secs(later),
                http: Some(http),
                ..Scrape::of(&s).format(format)
            };
            let (a, b) = (at(0, &quiet), at(5, &busy));
            let shared = written(|o| a.render_shared(o));
            assert_eq!(shared, written(|o| b.render_shared(o)), "{format:?}");
            let live = written(|o| {
                a.render_live(o);
            });
            let later = written(|o| {
                b.render_live(o);
            });
            assert_ne!(live, later);
            // A whole scrape is the two parts, each family in one of them.
            assert_eq!(written(|o| b.render(o)), format!("{shared}{later}"));
            let (kept, each) = (families(&shared), families(&later));
            assert!(kept.iter().any(|f| f.starts_with("process_")), "{kept:?}");
            assert!(kept.iter().all(|f| !each.contains(f)), "{kept:?} {each:?}");
            for f in &each {
                let live = f.starts_with("gpu_exporter_http_")
                    || f.starts_with("gpu_exporter_tls_")
                    || f == "gpu_exporter_snapshot_age_seconds";
                assert!(live, "{f} is written per scrape");
            }
            assert_eq!(later.ends_with("# EOF\n"), format == Format::OpenMetrics);
        }
    }
}
