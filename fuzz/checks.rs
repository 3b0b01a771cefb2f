//! The fuzz targets' bodies: one `check_*` function per target, each
//! asserting invariants rather than only "no crash".
//!
//! Shared by the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`) and by the
//! corpus replay test of the main crate (`tests/fuzz_corpus.rs`), which
//! both take this file in with `#[path = ...] mod checks;`, so stable CI
//! runs exactly the code the fuzzer runs.

use alerts::promql;
use exposition::{Format, Scrape};
use fill::engines::reader::Memory;
use fill::engines::text as engine_text;
use fill::kmsg::counter::XidCounter;
use fill::kmsg::line as kmsg;
use fill::workload;
use fill::{cgroup, jobs};
use http::conn::{self, MAX_HEAD};
use model::dcgm::{self, DEFAULT_COUNTERS, FIELDS};
use model::{Bounds, Kubernetes, Snapshot};
use model::{Collector, Collectors};
use poller::{Latest, Poller, Published, source_models};
use routes::{Context, Routes};
use sources::Source;
use sources::sim::{Scenario, Sim};
use sources::smi::apps as smi_apps;
use sources::smi::csv as smi;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// The simulator's clock origin for every check: fixed, so runs repeat.
const T0: f64 = 1_800_000_000.0;

/// A target's body: panics when an invariant does not hold.
pub type Check = fn(&[u8]);

/// Every target by its directory name under `fuzz/corpus/`.
pub const TARGETS: &[(&str, Check)] = &[
    ("http_request", check_http_request),
    ("accept", check_accept),
    ("scenario_json", check_scenario_json),
    ("rules_json", check_rules_json),
    ("smi_csv", check_smi_csv),
    ("kmsg_xid", check_kmsg_xid),
    ("workload_json", check_workload_json),
    ("smi_apps", check_smi_apps),
    ("cgroup", check_cgroup),
    ("job_file", check_job_file),
    ("engine_text", check_engine_text),
    ("dcgm_counters", check_dcgm_counters),
    #[cfg(feature = "kubernetes")]
    ("huffman", kubelet::check_huffman),
    #[cfg(feature = "kubernetes")]
    ("hpack", kubelet::check_hpack),
    #[cfg(feature = "kubernetes")]
    ("pod_resources", kubelet::check_proto),
    #[cfg(feature = "kubernetes")]
    ("kubelet_client", kubelet::check_client),
    #[cfg(feature = "kubernetes")]
    ("device_id", kubelet::check_device_id),
];

/// The targets of the kubelet client, built with the `kubernetes` feature
/// only: their corpora stay in place without it.
pub const KUBELET_TARGETS: &[&str] = &[
    "huffman",
    "hpack",
    "pod_resources",
    "kubelet_client",
    "device_id",
];

thread_local! {
    /// What every request is answered from: the default fleet, collected
    /// once, and rendered whole for each request.
    static ROUTES: Routes = Routes::uncached(context());
}

fn context() -> Context {
    let source = Box::new(Sim::new(Scenario::default_fleet(), T0));
    let mut evaluator = alerts::Evaluator::new(alerts::defaults());
    let mut collector = Poller::new(source, Duration::from_secs(5));
    let first = collector.collect_at(T0);
    evaluator.eval(&first);
    Context {
        latest: Arc::new(Latest::new(Published {
            snapshot: Arc::new(first),
            alerts: Arc::new(evaluator.alerts()),
            replay: None,
            recent: Default::default(),
        })),
        telemetry_path: "/metrics".into(),
        runbook_base: "https://runbooks.example/".into(),
        bounds: Bounds::new(Duration::from_secs(5), Duration::from_secs(60)),
        alertmanager: None,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// `http_request`: the request parser and router, fed the way a
/// connection feeds them (at most `MAX_HEAD` bytes, pipelined requests
/// answered in turn while the connection is kept alive).
pub fn check_http_request(data: &[u8]) {
    ROUTES.with(|routes| answer_all(data, routes));
}

fn answer_all(data: &[u8], routes: &Routes) {
    let mut buf = &data[..data.len().min(MAX_HEAD)];
    let mut out = Vec::new();
    while !buf.is_empty() {
        let Some(a) = conn::answer(buf, routes, &mut out) else {
            return;
        };
        assert!(a.consumed > 0, "consumed nothing of {buf:?}");
        assert!(
            a.consumed <= buf.len(),
            "consumed {} of {}",
            a.consumed,
            buf.len()
        );
        assert!(
            a.range.start <= a.range.end && a.range.end <= out.len(),
            "range {:?} outside {} bytes",
            a.range,
            out.len()
        );
        let resp = &out[a.range.clone()];
        assert!(resp.starts_with(b"HTTP/1.1 "), "response {resp:?}");
        let head_len = find(resp, b"\r\n\r\n").expect("a response head ends with a blank line") + 4;
        let (head, body) = resp.split_at(head_len);
        let head = std::str::from_utf8(head).expect("an ASCII response head");
        let lengths: Vec<&str> = head
            .split("\r\n")
            .filter_map(|l| l.strip_prefix("Content-Length: "))
            .collect();
        assert_eq!(lengths.len(), 1, "Content-Length headers in {head:?}");
        let length: usize = lengths[0].parse().expect("a numeric Content-Length");
        let head_request = buf.trim_ascii_start().starts_with(b"HEAD ");
        if body.is_empty() && length > 0 {
            assert!(
                head_request,
                "an empty body for {length} bytes, not HEAD: {head:?}"
            );
        } else {
            assert_eq!(body.len(), length, "Content-Length in {head:?}");
        }
        assert_eq!(
            head.contains("\r\nConnection: close\r\n"),
            !a.keep_alive,
            "Connection header vs keep-alive in {head:?}"
        );
        if !a.keep_alive {
            return;
        }
        buf = &buf[a.consumed..];
    }
}

/// `accept`: content negotiation. OpenMetrics only when asked for by name.
pub fn check_accept(data: &[u8]) {
    let format = Format::negotiate(Some(data));
    if format == Format::OpenMetrics {
        assert!(
            contains_ignore_case(data, b"application/openmetrics-text"),
            "OpenMetrics for {data:?}"
        );
    }
    assert_eq!(Format::negotiate(Some(data)), format, "deterministic");
}

/// Checks a render of `snapshot` in both formats.
fn check_render(snapshot: &Snapshot) {
    let mut out = Vec::new();
    for format in [Format::Text, Format::OpenMetrics] {
        out.clear();
        Scrape::of(snapshot).format(format).render(&mut out);
        let text = std::str::from_utf8(&out).expect("exposition is UTF-8");
        assert!(text.ends_with('\n'), "{format:?} ends without a newline");
        check_dcgm_lines(text);
        assert_eq!(
            text.ends_with("# EOF\n"),
            format == Format::OpenMetrics,
            "{format:?}: # EOF"
        );
    }
}

/// The default fleet collected once, every field any counters file can
/// ask for kept (a file of every field we serve), pods on its GPUs.
fn dcgm_fleet() -> &'static Snapshot {
    static SNAPSHOT: OnceLock<Snapshot> = OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        let every: String = FIELDS
            .iter()
            .map(|f| match f.1.is_label() {
                true => format!("{}, label, h\n", f.0),
                false => format!("{}, gauge, h\n", f.0),
            })
            .collect();
        let d = dcgm::parse(&every, "every").unwrap();
        let source = Box::new(Sim::new(Scenario::default_fleet(), T0));
        Poller::new(source, Duration::from_secs(5))
            .with_dcgm(Some(Arc::new(d)))
            .collect_at(T0)
    })
}

/// `dcgm_counters`: a counters file (`--compat.dcgm-counters`); a valid
/// one is rendered over the default fleet, with and without pod labels,
/// its hostname a value that needs escaping.
pub fn check_dcgm_counters(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut d = match dcgm::parse(text, "f") {
        Ok(d) => d,
        Err(e) => {
            assert!(e.starts_with("f:") && !e.contains('\n'), "{e:?}");
            return;
        }
    };
    let served = |name: &str| d.fields.iter().any(|f| f.name == name);
    for (name, _) in &d.left_out {
        assert!(!served(name), "{name} both served and left out");
    }
    d.hostname = Some(format!("node\"\\\n{}", data.len()));
    d.lowercase_hostname = data.len().is_multiple_of(3);
    let mut snapshot = dcgm_fleet().clone();
    snapshot.collectors = Collectors::NONE.with(Collector::Dcgm);
    snapshot.kubernetes.pod_labels = data.len() % 2 == 1;
    snapshot.dcgm = Some(Arc::new(d.clone()));
    check_render(&snapshot);
    let mut out = Vec::new();
    Scrape::of(&snapshot).render(&mut out);
    let text = String::from_utf8(out).unwrap();
    // Every GPU of the fleet reads its temperature; the host label is
    // escaped, under the spelling asked for.
    if d.fields.iter().any(|f| f.name == "DCGM_FI_DEV_GPU_TEMP") {
        let host = d.hostname_label();
        let want = format!(",{host}=\"node\\\"\\\\\\n{}\"", data.len());
        let temps: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{"))
            .collect();
        assert!(temps.len() >= 4, "{text}");
        assert!(
            temps.iter().all(|l| l.contains(&want)),
            "{want} in {temps:?}"
        );
    }
    for line in text.lines().filter(|l| l.starts_with("DCGM_")) {
        let name = &line[..line.find('{').unwrap()];
        assert!(served(name), "{name} is not in the file");
        for f in d.fields.iter().filter(|f| f.kind == dcgm::Kind::Label) {
            assert!(line.contains(&format!(",{}=\"", f.name)), "{line}");
        }
    }
}

/// Every `DCGM_` sample of an exposition is one well-formed line: a label
/// set of distinct names with escaped values, then a number; and no
/// family is typed twice.
fn check_dcgm_lines(text: &str) {
    let mut typed = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap();
            assert!(typed.insert(name.to_string()), "{name} typed twice");
        }
        let Some(set) = line.strip_prefix("DCGM_").and_then(|l| l.split_once('{')) else {
            continue;
        };
        let (mut rest, mut names) = (set.1, Vec::new());
        loop {
            let (name, after) = rest.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
            assert!(
                name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{name:?} in {line}"
            );
            assert!(!names.contains(&name), "{name} twice in {line}");
            names.push(name);
            let mut bytes = after.char_indices();
            let end = loop {
                match bytes.next() {
                    Some((_, '\\')) => {
                        let e = bytes.next().map(|(_, c)| c);
                        assert!(matches!(e, Some('\\' | '"' | 'n')), "{line}");
                    }
                    Some((i, '"')) => break i,
                    Some(_) => {}
                    None => panic!("unterminated value in {line}"),
                }
            };
            rest = &after[end + 1..];
            match rest.as_bytes().first() {
                Some(b',') => rest = &rest[1..],
                Some(b'}') => break,
                _ => panic!("{line}"),
            }
        }
        let value = rest[1..]
            .strip_prefix(' ')
            .unwrap_or_else(|| panic!("{line}"));
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

/// `scenario_json`: a scenario file; a valid one is simulated once and
/// rendered.
pub fn check_scenario_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(scenario) = Scenario::parse(text) else {
        return;
    };
    // A `hang` incident sleeps for real (up to a year): collect before
    // serving starts, where no incident has happened yet, when there is
    // one; otherwise an hour in, after any incident at under an hour.
    let at = if format!("{scenario:?}").contains("Hang(") {
        T0 - 1.0
    } else {
        T0 + 3600.0
    };
    let mut sim = Sim::new(scenario, T0);
    let snapshot = match sim.collect(at) {
        Ok(gpus) => Snapshot {
            gpus,
            models: source_models(&sim, &mut Memory::new(None)),
            source: sim.kind(),
            at,
            published: Instant::now(),
            finished: Instant::now(),
            collect_duration: Duration::ZERO,
            error: None,
            process: Default::default(),
            timings: Default::default(),
            rejected: Vec::new(),
            collectors: Collectors::DEFAULT.with(Collector::Dcgm),
            reads: Collectors::DEFAULT.with(Collector::Dcgm),
            // Every other input renders each GPU series once per pod.
            kubernetes: Kubernetes {
                kubelet: None,
                pod_labels: data.len() % 2 == 1,
            },
            // dcgm-exporter's default fields beside ours.
            dcgm: Some(Arc::new(dcgm::parse(DEFAULT_COUNTERS, "default").unwrap())),
            engines: Vec::new(),
            objectives: Default::default(),
        },
        Err(e) => Snapshot {
            error: Some(e.0),
            ..Snapshot::empty(sim.kind())
        },
    };
    check_render(&snapshot);
}

/// `rules_json`: a rules file merged into the defaults; a valid one is
/// written out as a Prometheus rule file.
pub fn check_rules_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rules) = alerts::file::load(text) else {
        return;
    };
    let printing = promql::Printing {
        runbook_base: "x/",
        stable_runbooks: false,
        max_stale: std::time::Duration::from_secs(60),
        job: "gpu-exporter",
        ttft_threshold: 0.3,
        thresholds: &[],
    };
    let yaml = promql::rule_file(&rules, &printing);
    assert!(yaml.starts_with("# Generated"), "{yaml:?}");
}

/// `workload_json`: one workload allocator stats file; a valid one holds
/// whole byte counts within the reserved pool.
pub fn check_workload_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match workload::file::parse(text) {
        Ok(s) => {
            assert!(s.allocated_bytes <= s.reserved_bytes, "{s:?}");
            assert!(s.largest_free_bytes <= s.reserved_bytes, "{s:?}");
            assert!(!s.gpu_uuid.is_empty(), "{s:?}");
        }
        Err(e) => assert!(!e.contains('\n'), "an error of more than one line: {e:?}"),
    }
}

/// A parsed fleet: GPUs in strictly increasing index order.
fn check_smi(text: &str, fields: &[&str]) {
    match smi::parse(text, fields) {
        Ok(gpus) => {
            assert!(!gpus.is_empty(), "Ok without GPUs");
            assert!(
                gpus.windows(2).all(|w| w[0].index < w[1].index),
                "GPU indexes not strictly increasing"
            );
        }
        Err(e) => assert!(!e.contains('\n'), "an error of more than one line: {e:?}"),
    }
}

/// `smi_csv`: nvidia-smi `--query-gpu` CSV, with the full field list and
/// with a short one.
pub fn check_smi_csv(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check_smi(text, &smi::fields().collect::<Vec<_>>());
    check_smi(text, &["index", "temperature.gpu", "power.draw"]);
}

/// A bus id as `normalize_bus_id` returns it: `DDDDDDDD:BB:DD.F`, upper
/// case, and normalising it again changes nothing.
fn check_bus_id(id: &str) {
    let b = id.as_bytes();
    let hex = |r: std::ops::Range<usize>| {
        b[r].iter()
            .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(c))
    };
    assert!(
        b.len() == 16
            && b[8] == b':'
            && b[11] == b':'
            && b[14] == b'.'
            && hex(0..8)
            && hex(9..11)
            && hex(12..14)
            && hex(15..16),
        "bus id {id:?}"
    );
    assert_eq!(
        kmsg::normalize_bus_id(id).as_deref(),
        Some(id),
        "not idempotent"
    );
}

/// `kmsg_xid`: kernel log lines through the line splitter, the Xid and bus
/// id parsers and the counter.
pub fn check_kmsg_xid(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut counter = XidCounter::new();
    counter.set_boot_time(T0);
    let mut counted = 0u64;
    for line in text.split('\n') {
        let split = kmsg::split_line(line);
        let (start, end) = (line.as_ptr() as usize, line.as_ptr() as usize + line.len());
        let m = split.message.as_ptr() as usize;
        assert!(
            start <= m && m + split.message.len() <= end,
            "message is not part of the line"
        );
        if let Some(x) = kmsg::parse_xid(split.message) {
            check_bus_id(&x.bus_id);
        }
        if let Some(id) = kmsg::normalize_bus_id(line) {
            check_bus_id(&id);
        }
        if let Some(x) = counter.feed_line(line) {
            check_bus_id(&x.bus_id);
            assert!(
                counter
                    .counts(&x.bus_id)
                    .iter()
                    .any(|&(c, n)| c == x.code && n > 0)
            );
            counted += 1;
        }
    }
    assert_eq!(counter.total(), counted, "total vs Xid counted");
    let per_bus: u64 = counter
        .bus_ids()
        .iter()
        .flat_map(|b| counter.counts(b))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(per_bus, counted, "per-GPU counts vs total");
}

/// `smi_apps`: nvidia-smi `--query-compute-apps` CSV: every row a
/// process with a PID, its memory absent or a whole number of MiB.
pub fn check_smi_apps(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match smi_apps::parse(text) {
        Ok(apps) => {
            for (uuid, p) in &apps {
                assert!(
                    !uuid.is_empty() && p.pid.is_some_and(|p| p > 0),
                    "{uuid} {p:?}"
                );
                assert!(p.used_bytes.is_none_or(|b| b >= 0.0), "{p:?}");
            }
        }
        Err(e) => assert!(!e.contains('\n'), "an error of more than one line: {e:?}"),
    }
}

/// `cgroup`: `/proc/<pid>/cgroup` text; an id found is 64 lower-case hex
/// digits, a pod UID the 8-4-4-4-12 form.
pub fn check_cgroup(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (container, pod) = cgroup::parse(&text);
    assert!(
        container.is_empty()
            || (container.len() == 64
                && container
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))),
        "container id {container:?}"
    );
    let lens: Vec<usize> = pod.split('-').map(str::len).collect();
    assert!(
        pod.is_empty() || lens == [8, 4, 4, 4, 12],
        "pod uid {pod:?}"
    );
    let _ = cgroup::host_pids(&text);
}

/// `job_file`: a job mapping file's text and, from its first line, a
/// file name. Jobs are bounded, non-empty and single-line.
pub fn check_job_file(data: &[u8]) {
    if let Ok(ids) = jobs::parse(data) {
        assert!(ids.len() <= jobs::MAX_JOBS, "{} jobs", ids.len());
        for id in &ids {
            assert!(
                !id.is_empty() && id.len() <= jobs::MAX_JOB_ID && !id.contains('\n'),
                "job id {id:?}"
            );
        }
    }
    let name = String::from_utf8_lossy(data);
    let name = name.lines().next().unwrap_or("");
    if let Some((gpu, gi)) = jobs::target(name) {
        let spelled = match gi {
            Some(gi) => format!("{gpu}.{gi}"),
            None => gpu.to_string(),
        };
        assert_eq!(jobs::target(&spelled), Some((gpu, gi)), "name {name:?}");
    }
}

/// The kubelet client's decoders (the `kubernetes` feature).
#[cfg(feature = "kubernetes")]
pub mod kubelet {
    use fill::pods::attribution;
    use fill::pods::kubelet::Lister;
    use fill::pods::proto::{self, Limits, ListDecoder};
    use std::time::{Duration, Instant};
    use wire::h2::script::Replay;
    use wire::{h2, hpack, huffman};

    /// `huffman`: whatever decodes re-encodes to a string that decodes
    /// the same, and no longer than the input.
    pub fn check_huffman(data: &[u8]) {
        let mut out = Vec::new();
        if huffman::decode(data, &mut out, 1 << 16).is_ok() {
            let mut again = Vec::new();
            huffman::encode(&out, &mut again);
            let mut back = Vec::new();
            huffman::decode(&again, &mut back, 1 << 16).expect("re-encoded string decodes");
            assert_eq!(back, out);
            assert!(again.len() <= data.len(), "canonical encoding is shortest");
        }
    }

    /// `hpack`: the first byte splits the input into two header blocks on
    /// one connection; the dynamic table never passes its size, nor a
    /// decoded list the header-list limit.
    pub fn check_hpack(data: &[u8]) {
        let Some((&split, rest)) = data.split_first() else {
            return;
        };
        let (a, b) = rest.split_at((split as usize).min(rest.len()));
        let mut d = hpack::Decoder::new(4096, 16 << 10);
        for block in [a, b] {
            let mut total = 0usize;
            let r = d.decode(block, &mut |n, v| total += n.len() + v.len() + 32);
            assert!(d.table_size() <= 4096);
            if r.is_ok() {
                assert!(total <= 16 << 10);
            }
        }
    }

    /// `pod_resources`: the push parser gives the same answer whatever
    /// the pieces, and never buffers more than one pod.
    pub fn check_proto(data: &[u8]) {
        let limits = Limits {
            max_pod_bytes: 4096,
            max_kept_bytes: 1 << 16,
        };
        let whole = proto::decode_list(data, limits);
        let step = data.first().map_or(1, |b| usize::from(b % 13) + 1);
        let mut d = ListDecoder::new(limits);
        let mut pieces = Ok(());
        for chunk in data.chunks(step) {
            pieces = d.feed(chunk);
            if pieces.is_err() {
                break;
            }
        }
        assert!(d.peak_buffer() <= 4096);
        let pieces = pieces.and_then(|()| d.finish());
        assert_eq!(whole, pieces);
        let _ = proto::decode_pod(data, 1 << 16);
        let _ = proto::holds_nvidia(data);
    }

    /// `kubelet_client`: the whole client against a server that sends
    /// `data`: an answer or a one-line error, never a panic, and never
    /// more than one pod buffered.
    pub fn check_client(data: &[u8]) {
        let chunk = data.first().map_or(1, |b| usize::from(*b) + 1);
        let mut io = Replay::new(data, chunk);
        let mut lister = Lister::new(
            h2::Limits::default(),
            Limits {
                max_pod_bytes: 4096,
                max_kept_bytes: 1 << 16,
            },
        );
        if let Err(e) = lister.list_on(&mut io, Instant::now() + Duration::from_secs(10)) {
            assert!(!e.to_string().contains('\n'), "{e}");
        }
        assert!(lister.peak_buffer() <= 4096);
    }

    /// `device_id`: any string parses, and resolving it against a small
    /// fleet never panics.
    pub fn check_device_id(data: &[u8]) {
        let s = String::from_utf8_lossy(data);
        let gpus = [attribution::Gpu {
            index: 0,
            uuid: "GPU-0".into(),
            minor: Some(0),
            mig: vec![attribution::Mig {
                uuid: "MIG-0".into(),
                gpu_instance_id: 1,
                index: Some(0),
            }],
        }];
        for line in s.lines() {
            let _ = attribution::resolve(attribution::parse_device_id(line), &gpus);
        }
    }
}

/// An engine's `/metrics` body through the bounded text reader, whole and
/// in two pieces split where the first byte says: the same answer either
/// way, within the caps, no `le` left on a bucket and no NaN bound.
pub fn check_engine_text(data: &[u8]) {
    let wanted = engine_text::Wanted {
        histograms: vec!["vllm:time_to_first_token_seconds".into(), "h".into()],
        counters: vec!["vllm:request_success_total".into(), "c_total".into()],
        prefixes: vec!["vllm:".into()],
        model_labels: vec!["model_name".into()],
    };
    let whole = engine_text::parse(data, &wanted);
    let at = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let mut reader = engine_text::Reader::new(&wanted);
    reader.feed(&data[..at]);
    reader.feed(&data[at..]);
    let pieces = reader.finish();
    // NaN values compare unequal: compare their rendering instead.
    assert_eq!(format!("{whole:?}"), format!("{pieces:?}"), "split at {at}");
    assert!(whole.samples.len() <= engine_text::MAX_SERIES);
    assert!(whole.malformed <= whole.lines);
    for s in &whole.samples {
        assert!(s.labels.len() <= engine_text::MAX_LABELS);
        if let engine_text::Part::Bucket(le) = s.part {
            assert!(!le.is_nan() && s.labels.iter().all(|(k, _)| k != "le"));
        }
    }
}
