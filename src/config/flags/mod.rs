//! The one table of flags: each flag's name, the name of its value, its
//! default, its help, and how it sets the configuration. `--help` is
//! written from the table and [`parse_args`] reads flags by it; a test
//! holds the flag table of docs/flags.md to `--help` and back.

mod alertmanager;
pub mod dcgm_exporter;
mod engines;
mod flag;

pub use flag::Flag;

use super::values::{
    count, parse_listen, parse_source, runbook_base, telemetry_path, timeout, unix_time,
};
use super::{Command, Config, ConfigError};
use base::time::parse_duration;
use flag::{Action, set, switch};
use model::{Collector, Collectors, UnknownCollector};
use std::ffi::OsString;
use std::time::Duration;

/// The shortest `--collect.interval`: every collection is evaluated, and
/// the shortest windows read every sample.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The longest name a flag or file may give (rule, model, job).
pub use model::MAX_NAME;

/// The flags before the engines' ([`engines::FLAGS`]).
const BEFORE_ENGINES: &[Flag] = &[
    set(
        "--web.listen-address",
        "ADDR",
        ":9400",
        "where to serve, given once per address: :PORT means every interface, IPv6 and IPv4 (0.0.0.0 on a host without IPv6); the listeners share one connection cap",
        |c, v| {
            c.listen.push(parse_listen(v)?);
            Ok(())
        },
    ),
    switch(
        "--web.systemd-socket",
        "serve on the sockets systemd passes (socket activation, LISTEN_FDS) instead of --web.listen-address",
        Action::Switch(|c| c.systemd_socket = true),
    ),
    set(
        "--web.telemetry-path",
        "PATH",
        "/metrics",
        "path of the metrics: a plain absolute path (letters, digits and -._~!$&'()*+,;=:@%/, not starting //), since it reaches the status page and the log",
        |c, v| {
            c.telemetry_path = telemetry_path(v)?;
            Ok(())
        },
    ),
    set(
        "--web.max-requests",
        "N",
        "40",
        "responses in flight (rendered, not yet written) at once; at the limit, the one whose client has gone longest without reading is closed (see HTTP)",
        |c, v| {
            c.limits.max_requests = count(v)?;
            Ok(())
        },
    ),
    set(
        "--web.max-connections",
        "N",
        "512",
        "open connections; at the cap the oldest idle or incomplete one makes room for a new one, and with none the new one waits in the kernel's queue (see HTTP)",
        |c, v| {
            c.limits.max_connections = count(v)?;
            Ok(())
        },
    ),
    set(
        "--web.header-timeout",
        "DUR",
        "10s",
        "time from a connection's opening or a request's first byte to its whole head (slowloris)",
        |c, v| {
            c.limits.header_timeout = timeout(v)?;
            Ok(())
        },
    ),
    set(
        "--web.idle-timeout",
        "DUR",
        "90s",
        "time a keep-alive connection may wait between requests",
        |c, v| {
            c.limits.idle_timeout = timeout(v)?;
            Ok(())
        },
    ),
    set(
        "--web.write-timeout",
        "DUR",
        "10s",
        "time to write one response (clients that never read)",
        |c, v| {
            c.limits.write_timeout = timeout(v)?;
            Ok(())
        },
    ),
    set(
        "--web.config.file",
        "FILE",
        "",
        "TLS, mutual TLS, basic auth, response headers and a rate limit from a web config file in exporter-toolkit's format (YAML), the one node_exporter reads; re-read when it or a file it names changes (see Security). Refused (exit code 2) by a build without the tls feature",
        |c, v| {
            if !cfg!(feature = "tls") {
                return Err(
                    "this build has no TLS or basic auth (built without the tls feature)".into(),
                );
            }
            c.web_config = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--web.bcrypt-max-cost",
        "N",
        "17",
        "the highest bcrypt cost a web config user may have, 4 to 31: 17 is the most htpasswd makes; each step doubles the time a wrong password holds the bcrypt thread (see Security)",
        |c, v| match v.parse::<u32>() {
            Ok(n @ 4..=31) => {
                c.bcrypt_max_cost = n;
                Ok(())
            }
            _ => Err(format!("{v:?} is not a bcrypt cost (4 to 31)")),
        },
    ),
    set(
        "--web.probe-address",
        "ADDR",
        "",
        "also serve /healthz and /readyz, and nothing else, in plain HTTP without auth on this address: kubelet probes cannot present a client certificate",
        |c, v| {
            c.probe_address = Some(parse_listen(v)?);
            Ok(())
        },
    ),
    set(
        "--source",
        "NAME",
        "auto",
        "auto, nvml, smi or sim (see Sources)",
        |c, v| {
            c.source = parse_source(v)?;
            Ok(())
        },
    ),
    set(
        "--nvml.library",
        "PATH",
        "",
        "the NVML library to load; a path that does not exist is exit code 2",
        |c, v| {
            c.nvml_library = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--smi.path",
        "PATH",
        "nvidia-smi",
        "the nvidia-smi to run",
        |c, v| {
            c.smi_path = v.into();
            Ok(())
        },
    ),
    set(
        "--path.sysfs",
        "PATH",
        "/sys",
        "where sysfs is mounted: --source auto looks there for NVIDIA PCI functions (an unbound one is a GPU whose driver is not loaded), and a GPU there that the source does not list is served lost",
        |c, v| {
            c.sysfs = v.into();
            Ok(())
        },
    ),
    set(
        "--path.devfs",
        "PATH",
        "/dev",
        "where the device nodes are: --source auto takes an nvidia* node there for a GPU node whose driver is broken, which never serves the simulator",
        |c, v| {
            c.devfs = v.into();
            Ok(())
        },
    ),
    set(
        "--path.procfs",
        "PATH",
        "/proc",
        "where procfs is mounted: a GPU on the PCI bus counts only if driver/nvidia/gpus lists it, where that exists (a container sees only its own GPUs there)",
        |c, v| {
            c.procfs = v.into();
            Ok(())
        },
    ),
    set(
        "--smi.timeout",
        "DUR",
        "5s",
        "a hung nvidia-smi is killed after this long",
        |c, v| {
            c.smi_timeout = timeout(v)?;
            Ok(())
        },
    ),
    set(
        "--xid.kmsg",
        "PATH",
        "",
        "kernel log to read Xid from where the source cannot (default /dev/kmsg when readable): /dev/kmsg or a text file (kern.log, saved dmesg), followed; a FIFO, socket, other device or directory is exit code 2; empty turns it off",
        |c, v| {
            c.xid_kmsg = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--workload.stats-dir",
        "DIR",
        "",
        "read workload allocator stats (see below); a missing directory is exit code 2",
        |c, v| {
            c.workload_dir = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--workload.max-age",
        "DUR",
        "30s",
        "stats files older than this are ignored",
        |c, v| {
            c.workload_max_age = parse_duration(v)?;
            Ok(())
        },
    ),
    set(
        "--kubernetes.pod-resources-socket",
        "PATH",
        "",
        if cfg!(feature = "kubernetes") {
            "the kubelet's pod-resources socket, for gpu_pod_info (default /var/lib/kubelet/pod-resources/kubelet.sock, watched for until it exists); an empty PATH turns it off"
        } else {
            "not built in: this build has no kubernetes feature; only an empty PATH is taken"
        },
        |c, v| {
            if !v.is_empty() && !cfg!(feature = "kubernetes") {
                return Err(NOT_BUILT_IN.into());
            }
            c.kubernetes.socket = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--kubernetes.refresh-interval",
        "DUR",
        "5s",
        "time between listings of the kubelet's pods; each listing may take as long, at most 10s",
        |c, v| {
            c.kubernetes.interval = parse_duration(v)?;
            if c.kubernetes.interval < Duration::from_millis(100) {
                return Err(format!("{v:?} is below the 100ms minimum"));
            }
            Ok(())
        },
    ),
    switch(
        "--kubernetes.pod-labels",
        if cfg!(feature = "kubernetes") {
            "put namespace, pod and container on every GPU series, one copy per pod: breaks sum by (gpu) on shared GPUs, so off by default"
        } else {
            "not built in: this build has no kubernetes feature"
        },
        Action::Switch(|c| c.kubernetes.pod_labels = true),
    ),
    set(
        "--hpc.job-mapping-dir",
        "DIR",
        "",
        "batch job ids per GPU, in dcgm-exporter's layout, for gpu_job_info; a missing directory is exit code 2",
        |c, v| {
            c.job_dir = Some(v.into());
            Ok(())
        },
    ),
];

/// The flags after the engines'.
const AFTER_ENGINES: &[Flag] = &[
    set(
        "--sim.scenario",
        "FILE",
        "",
        "another simulated fleet than the built-in demo, JSON: a regular file of at most 1 MiB",
        |c, v| {
            c.scenario = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--sim.start",
        "TIME",
        "",
        "the simulated scenario's origin, RFC 3339 (2026-12-06T10:00:00Z) or Unix seconds, at most now and not before 2026: its incidents happen at their offsets from it, so a restart given the same TIME goes on with every counter (see Simulator); default the process start",
        |c, v| {
            c.sim_start = Some(unix_time(v)?);
            Ok(())
        },
    ),
    set(
        "--collect.interval",
        "DUR",
        "1s",
        "time between collections (500ms, 1s, 5m, 1h), at least 100ms",
        |c, v| {
            c.interval = parse_duration(v)?;
            if c.interval < MIN_INTERVAL {
                return Err(format!("{v:?} is below the 100ms minimum"));
            }
            Ok(())
        },
    ),
    set(
        "--collect.max-stale",
        "DUR",
        "1m",
        "while collections fail or stall, the last good readings are served (their age in gpu_exporter_snapshot_age_seconds) this long, then withheld (gpu_exporter_readings_hidden 1, ExporterBlind pages); every page keeps firing this long plus 2m after its condition clears (see Failures)",
        |c, v| {
            c.max_stale = parse_duration(v)?;
            Ok(())
        },
    ),
    set(
        "--log.level",
        "LEVEL",
        "info",
        "error, warn, info, debug",
        |c, v| {
            c.log_level = match v {
                "error" => log::LevelFilter::Error,
                "warn" => log::LevelFilter::Warn,
                "info" => log::LevelFilter::Info,
                "debug" => log::LevelFilter::Debug,
                _ => {
                    return Err(format!(
                        "unknown level {v:?} (expected error, warn, info or debug)"
                    ));
                }
            };
            Ok(())
        },
    ),
    set(
        "--log.format",
        "FORMAT",
        "logfmt",
        "logfmt or json (one object per line, keys ts, level and msg); every line carries ts, RFC 3339 UTC with milliseconds",
        |c, v| {
            c.log_format = base::logger::Format::parse(v)?;
            Ok(())
        },
    ),
    set(
        "--rules.file",
        "FILE",
        "",
        "alert rules merged into the defaults by name, JSON: a regular file of at most 1 MiB",
        |c, v| {
            c.rules_file = Some(v.into());
            Ok(())
        },
    ),
    set(
        "--alerts.runbook-base-url",
        "URL",
        "",
        "where every runbook link points, best a stable host (a wiki, a git web view of docs/runbooks/): the prefix of each alert's runbook_url, fleet alerts and ExporterDown included: http:// or https:// with a host, or a relative path, either with {{ $labels.NAME }} for Prometheus to expand in the printed rules; anything else (javascript:, //host/) is exit code 2. By default the exporter's own copies: http://{{ $labels.instance }}/docs/runbooks/ in the printed rules (absolute, so they open from Alertmanager and the Prometheus UI, air-gapped too; https once TLS is on), docs/runbooks/ on /alerts and the status page (relative); without it, alerts no live exporter can serve (ExporterDown, fleet alerts) name their runbook without a link. A value that names a label leaves those two on the relative default",
        |c, v| {
            c.runbook_base = Some(runbook_base(v)?);
            Ok(())
        },
    ),
    set(
        "--alerts.scrape-job",
        "JOB",
        "gpu-exporter",
        "the job Prometheus scrapes the exporters under, printed into the rules only Prometheus evaluates (up, absent, the GPU count)",
        |c, v| {
            if v.is_empty() || v.len() > MAX_NAME || v.contains(['"', '\\', '\n']) {
                return Err(format!(
                    "{v:?} must be 1 to {MAX_NAME} bytes without quotes, backslashes or newlines"
                ));
            }
            c.scrape_job = v.into();
            Ok(())
        },
    ),
    switch(
        "--collector.NAME",
        "turn collector NAME on (see Collectors: {collectors}); all but {off} are on by default",
        Action::Collector(true),
    ),
    switch(
        "--no-collector.NAME",
        "turn collector NAME off: its families are left out and its calls never made",
        Action::Collector(false),
    ),
    set(
        "--compat.dcgm-counters",
        "FILE",
        "",
        "the dcgm collector's fields, in dcgm-exporter's counters file format (its -f); default its default-counters.csv. Turns the dcgm collector on (exit code 2 beside --no-collector.dcgm). A field we cannot serve is logged and left out; a name that is no DCGM field, an unknown type or a malformed line is exit code 2",
        |c, v| {
            c.dcgm_counters = Some(v.into());
            Ok(())
        },
    ),
    switch(
        "--compat.dcgm-lowercase-hostname",
        "the dcgm collector spells its host label hostname, as dcgm-exporter's unreleased main does; every release, and the default here, prints Hostname",
        Action::Switch(|c| c.dcgm_hostname.0 = true),
    ),
    set(
        "--compat.dcgm-xid-window",
        "DUR",
        "5m",
        "the window DCGM_EXP_XID_ERRORS_COUNT counts Xid over, at least 1ms (dcgm-exporter's -x, in ms)",
        |c, v| {
            c.dcgm_xid_window = parse_duration(v)?;
            if c.dcgm_xid_window.as_millis() == 0 {
                return Err(format!("{v:?} is below the 1ms minimum"));
            }
            Ok(())
        },
    ),
    switch(
        "--compat.dcgm-old-namespace",
        "the dcgm collector spells the UUID label uuid, as dcgm-exporter 1.x did (its -o, for its 1.x-compatibility-metrics.csv)",
        Action::Switch(|c| c.dcgm_spelling.0 = true),
    ),
    switch(
        "--compat.dcgm-model-dashes",
        "the dcgm collector's modelName has a dash for each blank (dcgm-exporter's --replace-blanks-in-model-name)",
        Action::Switch(|c| c.dcgm_spelling.1 = true),
    ),
    switch(
        "--compat.dcgm-no-hostname",
        "the dcgm collector leaves out its host label (dcgm-exporter's -n, --no-hostname)",
        Action::Switch(|c| c.dcgm_hostname.1 = true),
    ),
    switch(
        "--collector.disable-defaults",
        "start from no collector, then turn on those named by --collector.NAME",
        Action::DisableDefaults,
    ),
    switch(
        "--web.open-probes",
        "leave /healthz and /readyz open without basic auth (a flag, not a web config key: the file is shared with other exporters)",
        Action::Switch(|c| c.open_probes = true),
    ),
    switch(
        "--print-rules",
        "print the rules as a Prometheus rule file and exit",
        Action::Switch(|c| c.print_rules = true),
    ),
    switch(
        "--once",
        "print the alert table and exit",
        Action::Switch(|c| c.once = true),
    ),
    switch("--version", "print the version and exit", Action::Version),
    switch("--help", "print this help and exit", Action::Help),
];

/// Every flag, in `--help` order.
pub fn flags() -> std::slice::Iter<'static, Flag> {
    FLAGS.iter()
}

const COUNT: usize =
    BEFORE_ENGINES.len() + engines::FLAGS.len() + alertmanager::FLAGS.len() + AFTER_ENGINES.len();

/// The table whole, put together at compile time: one static array, as
/// it was before the engines' flags moved out (iterating three slices
/// cost the binary 24 KB).
static FLAGS: [Flag; COUNT] = {
    let parts = [
        BEFORE_ENGINES,
        engines::FLAGS,
        alertmanager::FLAGS,
        AFTER_ENGINES,
    ];
    let mut all = [BEFORE_ENGINES[0]; COUNT];
    let (mut p, mut n) = (0, 0);
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            all[n] = parts[p][i];
            (i, n) = (i + 1, n + 1);
        }
        p += 1;
    }
    all
};

/// What the kubernetes flags say in a build without the feature.
pub const NOT_BUILT_IN: &str = "not built in: this build has no kubernetes feature";

/// `--help`: every flag of [`flags`] with its help, wrapped.
pub fn usage() -> String {
    let mut out = format!(
        "gpu-exporter: a tiny Prometheus exporter for NVIDIA GPU fleets\n\n\
         USAGE: gpu-exporter [FLAGS]\n       \
         gpu-exporter {} [DCGM-EXPORTER FLAGS] [FLAGS]\n\n\
         The second reads dcgm-exporter's flags and environment: {} --help.\n\n",
        dcgm_exporter::MODE,
        dcgm_exporter::MODE
    );
    let spelled = |f: &Flag| format!("{} {}", f.name, f.value);
    let column = flags().map(|f| spelled(f).len()).max().unwrap_or(0) + 4;
    for f in flags() {
        let mut help = f.help();
        if !f.default.is_empty() {
            help.push_str(&format!(" (default {})", f.default));
        }
        wrap(&mut out, &spelled(f), &help, column);
    }
    out
}

/// One flag of a `--help`: its name in the first `column`, its help
/// wrapped at 100 columns beside it.
fn wrap(out: &mut String, spelled: &str, help: &str, column: usize) {
    const WIDTH: usize = 100;
    let mut line = format!("  {:<width$}", spelled, width = column - 2);
    for word in help.split(' ') {
        if line.len() + 1 + word.len() > WIDTH && line.len() > column {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(column);
        } else if line.len() > column {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

/// The command line as the binary was started: under the name
/// `dcgm-exporter` (`argv0`), or with [`dcgm_exporter::MODE`] first,
/// dcgm-exporter's flags and environment (`env`); else ours, with one
/// warning where dcgm-exporter's variables are set but not read.
pub fn parse_command_line(
    argv0: &std::ffi::OsStr,
    args: Vec<OsString>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Command, ConfigError> {
    let first_is_mode = args.first().is_some_and(|a| a == dcgm_exporter::MODE);
    if first_is_mode || dcgm_exporter::named(argv0) {
        let skip = usize::from(first_is_mode);
        return dcgm_exporter::parse(args.into_iter().skip(skip).collect(), env);
    }
    let mut command = parse_args(args)?;
    if let Command::Run(c) = &mut command {
        c.notes.extend(dcgm_exporter::unread(env));
    }
    Ok(command)
}

/// The flag table of docs/flags.md: each flag of [`flags`] but `--help` and
/// `--version`, with its default and its help.
#[cfg(test)]
fn readme_table() -> String {
    let mut t = String::from("| flag | default | meaning |\n|---|---|---|\n");
    for f in flags().filter(|f| !matches!(f.action, Action::Help | Action::Version)) {
        let spelled = format!("{} {}", f.name, f.value);
        let default = match f.default {
            "" => String::new(),
            d => format!("`{d}`"),
        };
        t += &format!("| `{}` | {default} | {} |\n", spelled.trim_end(), f.help());
    }
    t
}

/// Reads the flags (`--flag value` or `--flag=value`) into a [`Command`].
pub fn parse_args<I>(args: I) -> Result<Command, ConfigError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    use lexopt::prelude::*;
    let bad = |m: String| ConfigError(m);
    // The listen addresses given replace the default one.
    let mut c = Config {
        listen: Vec::new(),
        ..Config::default()
    };
    // Collector flags: the last word on each wins, whatever the order
    // relative to --collector.disable-defaults.
    let mut chosen: [Option<bool>; Collector::COUNT] = [None; Collector::COUNT];
    let mut base = Collectors::DEFAULT;
    let mut p = lexopt::Parser::from_args(args);
    while let Some(arg) = p.next().map_err(|e| bad(e.to_string()))? {
        let name = match &arg {
            Short('h') => "--help".to_string(),
            Long(f) => format!("--{f}"),
            Short(f) => format!("-{f}"),
            Value(v) => {
                return Err(bad(format!(
                    "unexpected argument {:?}",
                    v.to_string_lossy()
                )));
            }
        };
        let flag = flags().find(|f| f.name == name).or_else(|| {
            flags().find(|f| {
                f.name
                    .strip_suffix("NAME")
                    .is_some_and(|p| name.starts_with(p))
            })
        });
        let Some(flag) = flag else {
            if name == dcgm_exporter::MODE {
                return Err(bad(format!("{name} must be the first argument")));
            }
            return Err(bad(format!("unknown flag {name} (see --help)")));
        };
        match flag.action {
            Action::Help => return Ok(Command::Help),
            Action::Version => return Ok(Command::Version),
            Action::Switch(f) => f(&mut c),
            Action::DisableDefaults => base = Collectors::NONE,
            Action::Collector(on) => {
                let which = name.rsplit_once('.').map_or("", |(_, n)| n);
                let collector = Collector::from_name(which)
                    .ok_or_else(|| bad(format!("{name}: {}", UnknownCollector(which))))?;
                chosen[collector as usize] = Some(on);
            }
            Action::Set(f) => {
                let value = p
                    .value()
                    .map_err(|_| bad(format!("{name}: missing value")))?
                    .into_string()
                    .map_err(|v| bad(format!("{name}: value is not UTF-8: {v:?}")))?;
                f(&mut c, &value).map_err(|e| bad(format!("{name}: {e}")))?;
            }
        }
    }
    dcgm_counters_turn_dcgm_on(&c, &mut chosen)?;
    c.off = (Collector::ALL.into_iter().zip(chosen))
        .filter(|(_, on)| *on == Some(false))
        .fold(Collectors::NONE, |s, (c, _)| s.with(c));
    c.collectors =
        Collector::ALL
            .into_iter()
            .zip(chosen)
            .fold(base, |set, (collector, on)| match on {
                Some(true) => set.with(collector),
                Some(false) => set.without(collector),
                None => set,
            });
    if c.listen.is_empty() {
        c.listen = Config::default().listen;
    }
    if c.collectors.has(Collector::Dcgm) {
        c.dcgm = Some(std::sync::Arc::new(load_dcgm(&c)?));
    }
    Ok(Command::Run(Box::new(c)))
}

/// `--compat.dcgm-counters` asks for dcgm's names: it turns the dcgm
/// collector on, and cannot sit beside `--no-collector.dcgm`.
fn dcgm_counters_turn_dcgm_on(
    c: &Config,
    chosen: &mut [Option<bool>; Collector::COUNT],
) -> Result<(), ConfigError> {
    if c.dcgm_counters.is_none() {
        return Ok(());
    }
    let on = &mut chosen[Collector::Dcgm as usize];
    if *on == Some(false) {
        return Err(ConfigError(
            "--compat.dcgm-counters asks for the dcgm collector, which --no-collector.dcgm turns off"
                .into(),
        ));
    }
    *on = Some(true);
    Ok(())
}

/// The dcgm collector's counters file, its host name and label spelling.
fn load_dcgm(c: &Config) -> Result<super::dcgm::Dcgm, ConfigError> {
    let flag = "--compat.dcgm-counters";
    let mut d = match &c.dcgm_counters {
        None => super::dcgm::parse(super::dcgm::DEFAULT_COUNTERS, "default-counters.csv")
            .map_err(ConfigError)?,
        Some(path) => {
            let text = base::file::read_config(path, 1024 * 1024)
                .map_err(|e| ConfigError(format!("{flag} {}: {e}", path.display())))?;
            super::dcgm::parse(&text, &format!("{flag} {}", path.display())).map_err(ConfigError)?
        }
    };
    let (lowercase, none) = c.dcgm_hostname;
    d.lowercase_hostname = lowercase;
    d.hostname = (!none).then(host_name);
    d.xid_window_ms = c.dcgm_xid_window.as_millis() as u64;
    (d.old_namespace, d.model_dashes) = c.dcgm_spelling;
    Ok(d)
}

/// dcgm-exporter's host name: `NODE_NAME` (a DaemonSet sets it from
/// `spec.nodeName`), else the kernel's.
pub(crate) fn host_name() -> String {
    std::env::var("NODE_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|n| n.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Listen;

    /// docs/flags.md's flag table is [`readme_table`], of the default build.
    #[test]
    #[cfg_attr(not(all(feature = "tls", feature = "kubernetes")), ignore)]
    fn readme_lists_the_flags() {
        crate::testkit::readme::holds("flags", &readme_table());
    }

    fn run(args: &[&str]) -> Result<Config, ConfigError> {
        match parse_args(args.iter().copied())? {
            Command::Run(c) => Ok(*c),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_and_flags() {
        let c = run(&[]).unwrap();
        assert_eq!(c.listen, [Listen::Any(9400)]);
        assert_eq!(c.interval, Duration::from_secs(1));
        let c = run(&[
            "--web.listen-address",
            "[::1]:0",
            "--collect.interval=250ms",
            "--once",
        ])
        .unwrap();
        assert_eq!(c.listen, [Listen::At("[::1]:0".parse().unwrap())]);
        assert_eq!(c.interval, Duration::from_millis(250));
        assert!(c.once);
        let c = run(&[
            "--web.listen-address=:9500",
            "--web.listen-address=127.0.0.1:9401",
        ])
        .unwrap();
        assert_eq!(c.listen.len(), 2);
        assert_eq!(c.listen[0], Listen::Any(9500));
        assert_eq!(c.listen[1].to_string(), "127.0.0.1:9401");
        // One moment, three spellings.
        assert_eq!(c.sim_start, None);
        for t in [
            "2026-12-06T10:00:00Z",
            "2026-12-06T11:30:00+01:30",
            "1796551200",
            "1796551200.000",
        ] {
            assert_eq!(
                run(&["--sim.start", t]).unwrap().sim_start,
                Some(1_796_551_200.0)
            );
        }
    }

    #[test]
    fn bad_flags_name_themselves() {
        for (args, want) in [
            (&["--nope"][..], "--nope"),
            (&["--collect.interval", "fast"], "--collect.interval"),
            (&["--collect.interval", "0s"], "--collect.interval"),
            (&["--source", "dcgm"], "--source"),
            (&["--web.listen-address", "nowhere"], "--web.listen-address"),
            (&["--web.listen-address", ":http"], "--web.listen-address"),
            (&["--web.listen-address", ":65536"], "--web.listen-address"),
            (&["--web.telemetry-path", "metrics"], "--web.telemetry-path"),
            (
                &["--web.telemetry-path", "/m\r\nX: y"],
                "--web.telemetry-path",
            ),
            (
                &["--web.telemetry-path", "//evil.example/m"],
                "--web.telemetry-path",
            ),
            (&["--web.telemetry-path", "/m\"><b"], "--web.telemetry-path"),
            (
                &["--alerts.runbook-base-url", "javascript:alert(1)//"],
                "--alerts.runbook-base-url",
            ),
            (&["--log.level", "loud"], "--log.level"),
            (
                &["--log.format", "text"],
                "--log.format: unknown log format",
            ),
            (&["--sim.scenario"], "--sim.scenario"),
            (&["--sim.start", "yesterday"], "--sim.start"),
            (&["--sim.start", "1e9"], "--sim.start"),
            (&["--sim.start", "-5"], "--sim.start"),
            (&["--sim.start", "2026-12-06T10:00:00"], "--sim.start"),
            (&["stray"], "stray"),
            (
                &["--collector.gpus"],
                "--collector.gpus: unknown collector \"gpus\"",
            ),
            (&["--no-collector.nvlinks"], "--no-collector.nvlinks"),
            (&["--collector."], "--collector."),
        ] {
            let e = run(args).unwrap_err();
            assert!(e.0.contains(want), "{args:?}: {e}");
            assert!(!e.0.contains('\n'), "{e}");
        }
    }

    #[test]
    fn links_from_flags_are_checked() {
        for ok in ["/metrics", "/gpu/metrics", "/a-b_c.d~e/%41:@"] {
            assert_eq!(telemetry_path(ok).unwrap(), ok);
        }
        for bad in [
            "", "metrics", "//x", "/m?x", "/m#x", "/m x", "/m\u{7f}", "/é", "/m\n",
        ] {
            assert!(telemetry_path(bad).is_err(), "{bad:?}");
        }
        for ok in [
            "docs/runbooks/",
            "/runbooks/",
            "../runbooks/",
            "",
            "https://wiki.example/gpu/",
            "HTTP://wiki.example:8080/x?page=",
            "https://wiki.example/{{ $labels.alertname }}/",
            "runbooks/{{$labels.gpu}}/",
        ] {
            assert_eq!(runbook_base(ok).unwrap(), ok, "{ok}");
        }
        for bad in [
            "javascript:alert(1)//",
            "JavaScript:x",
            "data:text/html,x",
            "//evil.example/",
            "https://",
            "https:///x",
            "ftp://h/",
            "https://h/\" onclick=\"x",
            "https://h/<b>",
            "a b/",
            "https://h/{{ .Labels.x }}/",
            "https://h/{{ $value }}/",
            "https://h/{{ $labels.x /",
            "https://h/}}",
            "x\r\ny",
        ] {
            let e = runbook_base(bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn collector_flags() {
        use model::Collector::{Fans, Gpm, NvlinkLink, Xid};
        let c = run(&[]).unwrap().collectors;
        assert_eq!(c, Collectors::DEFAULT);
        let c = run(&["--no-collector.gpm", "--collector.nvlink_link"])
            .unwrap()
            .collectors;
        assert_eq!(c, Collectors::DEFAULT.without(Gpm).with(NvlinkLink));
        // disable-defaults applies wherever it stands; the last word on a
        // collector wins.
        for args in [
            &[
                "--collector.xid",
                "--collector.disable-defaults",
                "--collector.fans",
            ][..],
            &[
                "--collector.disable-defaults",
                "--no-collector.xid",
                "--collector.xid",
                "--collector.fans",
            ],
        ] {
            let c = run(args).unwrap().collectors;
            assert_eq!(c, Collectors::NONE.with(Xid).with(Fans), "{args:?}");
        }
        // --help names every collector, and the ones off by default.
        let help = flags()
            .find(|f| f.name == "--collector.NAME")
            .unwrap()
            .help();
        assert!(help.contains(&crate::config::collector_names()), "{help}");
        let off = help.split("all but ").nth(1).unwrap();
        let off = off.split(" are on").next().unwrap();
        let named: Vec<&str> = off
            .split([',', ' '])
            .filter(|w| !w.is_empty() && *w != "and")
            .collect();
        let want: Vec<&str> = Collector::ALL
            .iter()
            .filter(|c| !c.default_on())
            .map(|c| c.name())
            .collect();
        assert_eq!(named, want, "{help}");
    }

    /// The default `--help` states is the default the exporter runs with.
    #[test]
    fn stated_defaults_are_the_defaults() {
        let defaults = run(&[]).unwrap();
        let mut stated = 0;
        for f in flags().filter(|f| !f.default.is_empty()) {
            assert_eq!(run(&[f.name, f.default]).unwrap(), defaults, "{}", f.name);
            stated += 1;
        }
        assert!(stated >= 15, "{stated}");
    }

    /// In a build without the `kubernetes` feature the flags are still
    /// there, say it, and take only "off".
    #[test]
    fn kubernetes_flags_say_whether_they_are_built_in() {
        let built = cfg!(feature = "kubernetes");
        let socket = run(&["--kubernetes.pod-resources-socket", "/run/k.sock"]);
        match socket {
            Ok(c) => {
                assert!(built);
                assert_eq!(c.kubernetes.socket, Some("/run/k.sock".into()));
            }
            Err(e) => {
                assert!(!built);
                assert!(e.0.contains("not built in"), "{e}");
            }
        }
        let off = run(&["--kubernetes.pod-resources-socket", ""]).unwrap();
        assert_eq!(off.kubernetes.socket, Some("".into()));
        assert_eq!(usage().contains("not built in"), !built);
        let c = run(&[
            "--kubernetes.refresh-interval",
            "2s",
            "--kubernetes.pod-labels",
        ])
        .unwrap();
        assert_eq!(c.kubernetes.interval, Duration::from_secs(2));
        assert!(c.kubernetes.pod_labels);
        let e = run(&["--kubernetes.refresh-interval", "10ms"]).unwrap_err();
        assert!(e.0.starts_with("--kubernetes.refresh-interval: "), "{e}");
    }

    #[test]
    fn help_lists_every_flag_once_within_100_columns() {
        let help = usage();
        for f in flags() {
            let line = format!("\n  {} ", f.name);
            assert_eq!(help.matches(&line).count(), 1, "{}", f.name);
        }
        for line in help.lines() {
            assert!(line.len() <= 100, "{line}");
        }
        assert!(matches!(parse_args(["-h"]), Ok(Command::Help)));
        assert!(matches!(
            parse_args(["--version", "--nope"]),
            Ok(Command::Version)
        ));
    }

    /// A counters file asks for dcgm's names: the collector comes on, the
    /// host label is `Hostname` as released; beside `--no-collector.dcgm`
    /// it is one line, whatever the order.
    #[test]
    fn a_counters_file_turns_the_dcgm_collector_on() {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/dcgm/default-counters.csv"
        );
        let c = run(&[
            "--collector.disable-defaults",
            "--compat.dcgm-counters",
            file,
        ])
        .unwrap();
        assert!(c.collectors.has(Collector::Dcgm));
        let d = c.dcgm.unwrap();
        assert_eq!(d.hostname_label(), "Hostname");
        assert!(d.fields.iter().any(|f| f.name == "DCGM_FI_DEV_GPU_TEMP"));
        let c = run(&["--collector.dcgm", "--compat.dcgm-lowercase-hostname"]).unwrap();
        assert_eq!(c.dcgm.unwrap().hostname_label(), "hostname");
        assert!(run(&[]).unwrap().dcgm.is_none());
        for args in [
            ["--no-collector.dcgm", "--compat.dcgm-counters", file],
            ["--compat.dcgm-counters", file, "--no-collector.dcgm"],
        ] {
            let e = run(&args).unwrap_err().0;
            assert_eq!(
                e,
                "--compat.dcgm-counters asks for the dcgm collector, which --no-collector.dcgm turns off"
            );
        }
    }
}
