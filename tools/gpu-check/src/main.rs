//! `gpu-check`: the exporter against a host's real driver, in one command
//! (`tools/gpu-check.sh` builds and runs it). It starts the exporter twice,
//! on NVML and on nvidia-smi, and reports:
//!
//! - every GPU nvidia-smi lists is served, with its UUID, bus id, name and
//!   memory total;
//! - every GPU is up and no reading was refused by its range rule;
//! - the NVML and nvidia-smi sources agree on what both read, within the
//!   tolerances below;
//! - GPM (profiling) readings, MIG instances and Xid event registration,
//!   as found;
//! - per GPU, the profiling fields served (DCGM's `DCGM_FI_PROF_*`, every
//!   one asked for, and our GPM families), each inside its range; a GPU
//!   whose compute capability has GPM (9.0, Hopper, and later) but serves
//!   none fails;
//! - collection time per GPU, and the exporter's VmHWM and RssAnon with the
//!   driver loaded.
//!
//! It only reads: the exporter reads NVML and runs `nvidia-smi
//! --query-gpu`; nothing changes a GPU's state. It needs the repository,
//! Rust and the driver, nothing else, and gives up on any step after a
//! bounded wait. Exit status: 0 when nothing failed, 1 when something did,
//! 2 for a bad command line.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use model::dcgm::prof;

const USAGE: &str = "usage: gpu-check EXPORTER [--nvml.library PATH] [--smi.path PATH] [--path.sysfs|procfs|devfs PATH]";

/// How far the two sources may differ on one reading: they sample at
/// different instants.
const TEMPERATURE_C: f64 = 3.0;
const POWER_SHARE: f64 = 0.10;
const POWER_W: f64 = 15.0;
const MEMORY_USED_SHARE_OF_TOTAL: f64 = 0.02;

/// What nvidia-smi is asked for; the exporter's families to compare with.
const QUERY: &str =
    "index,uuid,pci.bus_id,name,memory.total,temperature.gpu,power.draw,memory.used";

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(exporter) = args.next().map(PathBuf::from) else {
        fail_usage("no exporter given");
    };
    let (mut nvml, mut smi) = (None, String::from("nvidia-smi"));
    // The host's roots, for both runs of the exporter (the tests give a
    // made-up host, so that a GPU of the machine they run on stays out).
    let mut host = Vec::new();
    while let Some(a) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| fail_usage(&format!("{a} needs a value")));
        match a.as_str() {
            "--nvml.library" => nvml = Some(value),
            "--smi.path" => smi = value,
            "--path.sysfs" | "--path.procfs" | "--path.devfs" => host.extend([a, value]),
            _ => fail_usage(&format!("unknown argument {a}")),
        }
    }
    let mut report = Report::default();
    check(&mut report, &exporter, nvml.as_deref(), &smi, &host);
    println!(
        "gpu-check: {} ok, {} warnings, {} failed",
        report.ok, report.warned, report.failed
    );
    std::process::exit(i32::from(report.failed > 0));
}

fn fail_usage(why: &str) -> ! {
    eprintln!("gpu-check: {why}\n{USAGE}");
    std::process::exit(2);
}

#[derive(Default)]
struct Report {
    ok: usize,
    warned: usize,
    failed: usize,
}

impl Report {
    fn ok(&mut self, what: String) {
        self.ok += 1;
        println!("ok    {what}");
    }
    fn warn(&mut self, what: String) {
        self.warned += 1;
        println!("warn  {what}");
    }
    fn fail(&mut self, what: String) {
        self.failed += 1;
        println!("FAIL  {what}");
    }
    fn hold(&mut self, held: bool, what: String) {
        if held { self.ok(what) } else { self.fail(what) }
    }
}

fn check(r: &mut Report, exporter: &Path, nvml: Option<&str>, smi: &str, host: &[String]) {
    let listed = match smi_gpus(smi) {
        Ok(l) => l,
        Err(e) => return r.fail(format!("nvidia-smi: {e}")),
    };
    r.ok(format!("nvidia-smi lists {} GPUs", listed.len()));
    // Every profiling field asked for, through the dcgm collector.
    let counters = std::env::temp_dir().join(format!("gpu-check-{}-prof.csv", std::process::id()));
    let fields: String = prof::PROF
        .iter()
        .map(|p| format!("{}, gauge, profiling field.\n", p.field))
        .collect();
    if let Err(e) = std::fs::write(&counters, fields) {
        return r.fail(format!("{}: {e}", counters.display()));
    }
    let counters_s = counters.to_string_lossy().into_owned();
    let mut args = vec!["--source", "nvml", "--compat.dcgm-counters", &counters_s];
    if let Some(lib) = nvml {
        args.extend(["--nvml.library", lib]);
    }
    let a = Running::start(exporter, &args, host, "nvml");
    let _ = std::fs::remove_file(&counters);
    let a = match a {
        Ok(a) => a,
        Err(e) => return r.fail(format!("the exporter on NVML: {e}")),
    };
    let smi_args = ["--source", "smi", "--smi.path", smi];
    let b = match Running::start(exporter, &smi_args, host, "smi") {
        Ok(b) => b,
        Err(e) => return r.fail(format!("the exporter on nvidia-smi: {e}")),
    };
    // GPM and the rates need a second sample, a collection later.
    std::thread::sleep(Duration::from_secs(3));
    let (Ok(on_nvml), Ok(on_smi)) = (a.scrape(), b.scrape()) else {
        return r.fail("a scrape failed".into());
    };
    identity(r, &listed, &on_nvml);
    health(r, &on_nvml);
    agreement(r, &on_nvml, &on_smi);
    found(r, &on_nvml, &a.log());
    profiling(r, &on_nvml, &compute_capabilities(smi));
    footprint(r, &a, &on_nvml);
}

/// Every GPU nvidia-smi lists, served by NVML as nvidia-smi names it.
fn identity(r: &mut Report, listed: &[HashMap<String, String>], m: &Metrics) {
    let served = m.value("gpu_exporter_gpus", &[]).unwrap_or(0.0) as usize;
    r.hold(
        served == listed.len(),
        format!(
            "the exporter serves {served} GPUs, nvidia-smi lists {}",
            listed.len()
        ),
    );
    for g in listed {
        let uuid = &g["uuid"];
        let Some(info) = m.find("gpu_info", &[("uuid", uuid)]) else {
            r.fail(format!("{uuid}: not served"));
            continue;
        };
        let bus = info.label("pci_bus_id").to_ascii_uppercase();
        let name = info.label("model");
        let same = bus == g["pci.bus_id"].to_ascii_uppercase() && name == g["name"];
        r.hold(same, format!("{uuid}: bus id {bus}, name {name}"));
        let total = m.value("gpu_memory_total_bytes", &[("uuid", uuid)]);
        let smi_total = g["memory.total"]
            .parse::<f64>()
            .ok()
            .map(|mib| mib * 1048576.0);
        r.hold(
            total.is_some() && total == smi_total,
            format!("{uuid}: memory total {total:?} bytes, nvidia-smi {smi_total:?}"),
        );
    }
}

/// Every GPU up, no reading refused by its range rule.
fn health(r: &mut Report, m: &Metrics) {
    for s in m.all("gpu_up") {
        let uuid = s.label("uuid");
        r.hold(s.value == 1.0, format!("{uuid}: gpu_up {}", s.value));
    }
    let rejected: Vec<_> = m
        .all("gpu_exporter_readings_rejected_total")
        .filter(|s| s.value > 0.0)
        .map(|s| format!("{} {}", s.label("reading"), s.value))
        .collect();
    r.hold(
        rejected.is_empty(),
        format!("readings outside their range rules: {rejected:?}"),
    );
}

/// The two sources on what both read.
fn agreement(r: &mut Report, nvml: &Metrics, smi: &Metrics) {
    for s in nvml.all("gpu_info") {
        let uuid = s.label("uuid");
        let key = [("uuid", uuid)];
        let both = |family| Some((nvml.value(family, &key)?, smi.value(family, &key)?));
        let total = nvml.value("gpu_memory_total_bytes", &key).unwrap_or(0.0);
        let checks = [
            ("gpu_temperature_celsius", TEMPERATURE_C),
            ("gpu_power_usage_watts", 0.0),
            ("gpu_memory_used_bytes", total * MEMORY_USED_SHARE_OF_TOTAL),
        ];
        for (family, within) in checks {
            let Some((a, b)) = both(family) else {
                r.warn(format!("{uuid}: {family} not read by both sources"));
                continue;
            };
            let within = match within {
                0.0 => (a.abs() * POWER_SHARE).max(POWER_W),
                w => w,
            };
            r.hold(
                (a - b).abs() <= within,
                format!("{uuid}: {family} NVML {a}, nvidia-smi {b} (within {within})"),
            );
        }
    }
}

/// GPM, MIG and Xid events: reported as found.
fn found(r: &mut Report, m: &Metrics, log: &str) {
    let gpus = m.all("gpu_info").count();
    let gpm = m.all("gpu_sm_active_ratio").count();
    r.ok(format!(
        "GPM readings (gpu_sm_active_ratio) on {gpm} of {gpus} GPUs"
    ));
    let mig_on = m.all("gpu_mig_mode").filter(|s| s.value == 1.0).count();
    let instances = m.all("gpu_mig_info").count();
    let line = format!("MIG on {mig_on} GPUs, {instances} instances served");
    if mig_on > 0 && instances == 0 {
        r.warn(line);
    } else {
        r.ok(line);
    }
    match log.lines().find(|l| l.contains("no Xid events")) {
        Some(l) => r.warn(format!(
            "Xid events: {}",
            l.rsplit("msg=").next().unwrap_or(l)
        )),
        None => r.ok("Xid events registered".into()),
    }
}

/// Our own GPM families, ratios all.
const GPM_FAMILIES: [&str; 4] = [
    "gpu_sm_active_ratio",
    "gpu_sm_occupancy_ratio",
    "gpu_dram_active_ratio",
    "gpu_pipe_active_ratio",
];

/// Per GPU, the profiling fields served, each within its range: ratios in
/// 0..=1, rates at least 0. A GPU with GPM by its compute capability
/// (`caps`, by UUID) that serves none fails.
fn profiling(r: &mut Report, m: &Metrics, caps: &HashMap<String, f64>) {
    for gpu in m.all("gpu_info") {
        let uuid = gpu.label("uuid");
        let (mut served, mut outside) = (Vec::new(), Vec::new());
        let dcgm = prof::PROF.iter().map(|p| {
            let ratio = p.scale == prof::Scale::Percent;
            (p.field, m.find(p.field, &[("UUID", uuid)]), ratio)
        });
        let ours = GPM_FAMILIES.map(|f| (f, m.find(f, &[("uuid", uuid)]), true));
        for (name, sample, ratio) in dcgm.chain(ours) {
            let Some(s) = sample else { continue };
            served.push(name.trim_start_matches("DCGM_FI_PROF_"));
            let inside = match ratio {
                true => (0.0..=1.0).contains(&s.value),
                false => s.value >= 0.0 && s.value.is_finite(),
            };
            if !inside {
                outside.push(format!("{name} {}", s.value));
            }
        }
        let gpm = caps.get(uuid).map(|&c| (c, c >= 9.0));
        let expected = match gpm {
            Some((c, true)) => format!("compute capability {c:.1}: GPM"),
            Some((c, false)) => format!("compute capability {c:.1}: no GPM before 9.0"),
            None => "GPM support unknown".into(),
        };
        let line = match served.len() {
            0 => format!("{uuid}: no profiling field served ({expected})"),
            n => format!(
                "{uuid}: {n} profiling fields served ({expected}): {}",
                served.join(" ")
            ),
        };
        match (gpm, served.is_empty(), outside.is_empty()) {
            (_, _, false) => r.fail(format!("{line}; outside their range: {outside:?}")),
            (Some((_, true)), true, _) => r.fail(line),
            _ => r.ok(line),
        }
    }
}

/// Collection time per GPU, and memory with the driver loaded.
fn footprint(r: &mut Report, a: &Running, m: &Metrics) {
    let gpus = m.value("gpu_exporter_gpus", &[]).unwrap_or(0.0).max(1.0);
    if let Some(d) = m.value("gpu_exporter_collect_duration_seconds", &[]) {
        r.ok(format!("collection {:.2} ms per GPU", d * 1000.0 / gpus));
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", a.child.id()));
    let field = |name: &str| {
        status.as_ref().ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(name))
                .map(|l| l[name.len()..].trim().to_string())
        })
    };
    match (field("VmHWM:"), field("RssAnon:")) {
        (Some(hwm), Some(anon)) => r.ok(format!("memory: VmHWM {hwm}, RssAnon {anon}")),
        _ => r.warn("memory: /proc/PID/status unreadable".into()),
    }
}

/// Each GPU's compute capability by UUID, as nvidia-smi gives it (none
/// from one too old to know `compute_cap`).
fn compute_capabilities(smi: &str) -> HashMap<String, f64> {
    let gpus = smi_query(smi, "uuid,compute_cap").unwrap_or_default();
    gpus.iter()
        .filter_map(|g| Some((g.get("uuid")?.clone(), g.get("compute_cap")?.parse().ok()?)))
        .collect()
}

/// nvidia-smi's GPUs, each as its column names to values.
fn smi_gpus(smi: &str) -> Result<Vec<HashMap<String, String>>, String> {
    let gpus = smi_query(smi, QUERY)?;
    match gpus
        .iter()
        .all(|g| g.contains_key("uuid") && g.contains_key("memory.total"))
    {
        true => Ok(gpus),
        false => Err(format!("unexpected columns in {gpus:?}")),
    }
}

/// nvidia-smi's answer to `--query-gpu=QUERY`, each GPU as its column
/// names to values.
fn smi_query(smi: &str, query: &str) -> Result<Vec<HashMap<String, String>>, String> {
    let query = format!("--query-gpu={query}");
    let out = run(
        smi,
        &[&query, "--format=csv,nounits"],
        Duration::from_secs(30),
    )?;
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .ok_or("no output")?
        .split(',')
        .map(|h| h.trim().split(' ').next().unwrap_or("").to_string())
        .collect();
    let gpus = lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(|v| v.trim().to_string()))
                .collect::<HashMap<_, _>>()
        })
        .collect();
    Ok(gpus)
}

/// `program args`'s standard output, or why not, killed after `limit`.
fn run(program: &str, args: &[&str], limit: Duration) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let until = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut out = String::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = o.read_to_string(&mut out);
                }
                return match status.success() {
                    true => Ok(out),
                    false => Err(format!("{program} exited with {status}")),
                };
            }
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{program} took longer than {limit:?}"));
            }
        }
    }
}

/// The exporter, serving on a loopback port of the kernel's choice.
struct Running {
    child: Child,
    addr: String,
    log: PathBuf,
}

impl Running {
    fn start(
        exporter: &Path,
        args: &[&str],
        host: &[String],
        name: &str,
    ) -> Result<Running, String> {
        let log = std::env::temp_dir().join(format!("gpu-check-{}-{name}.log", std::process::id()));
        let file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = Command::new(exporter)
            .args(args)
            .args(host)
            .args(["--web.listen-address", "127.0.0.1:0"])
            .args(["--collect.interval", "1s"])
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", exporter.display()))?;
        let mut running = Running {
            child,
            addr: String::new(),
            log,
        };
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until {
            if let Ok(Some(status)) = running.child.try_wait() {
                return Err(format!("exited with {status}: {}", running.log()));
            }
            if running.addr.is_empty()
                && let Some(rest) = running.log().split("serving GPU metrics on http://").nth(1)
            {
                running.addr = rest.split('/').next().unwrap_or("").to_string();
            }
            if !running.addr.is_empty()
                && get(&running.addr, "/readyz").is_ok_and(|(s, _)| s == 200)
            {
                return Ok(running);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(format!("not ready within a minute: {}", running.log()))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn scrape(&self) -> Result<Metrics, String> {
        match get(&self.addr, "/metrics")? {
            (200, body) => Ok(Metrics::parse(&body)),
            (status, _) => Err(format!("/metrics answered {status}")),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// GET `path` from `addr`: (status, body).
fn get(addr: &str, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).map_err(|e| e.to_string())?;
    let (head, body) = raw.split_once("\r\n\r\n").ok_or("no response head")?;
    let status = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .ok_or("bad status")?;
    Ok((status, body.to_string()))
}

/// One sample of a text-format scrape.
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

impl Sample {
    fn label(&self, name: &str) -> &str {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

struct Metrics(Vec<Sample>);

impl Metrics {
    /// The text format's samples; label values unescaped only as far as
    /// these checks need (no value they compare holds a quote).
    fn parse(body: &str) -> Metrics {
        let samples = body
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (name, labels) = match series.split_once('{') {
                    Some((n, rest)) => (n, rest.trim_end_matches('}')),
                    None => (series, ""),
                };
                let labels = labels
                    .split("\",")
                    .filter_map(|kv| {
                        let (k, v) = kv.split_once("=\"")?;
                        Some((k.to_string(), v.trim_end_matches('"').to_string()))
                    })
                    .collect();
                Some(Sample {
                    name: name.to_string(),
                    labels,
                    value: value.parse().ok()?,
                })
            })
            .collect();
        Metrics(samples)
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.0.iter().filter(move |s| s.name == name)
    }

    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<&Sample> {
        self.0
            .iter()
            .find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == *v))
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.find(name, labels).map(|s| s.value)
    }
}
