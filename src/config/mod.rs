//! Flags in, a validated [`Config`] out. Every problem is one line that
//! names the flag or file, and maps to exit code 2.

pub mod alertmanager;
pub mod engines;
mod flags;
mod values;

pub use flags::dcgm_exporter;
pub(crate) use flags::host_name;
pub use flags::{
    Flag, MAX_NAME, MIN_INTERVAL, NOT_BUILT_IN, flags, parse_args, parse_command_line, usage,
};
pub use model::{Collector, Collectors, SourceKind, UnknownCollector, collector_names, dcgm};
pub use values::Listen;

use alerts::promql::OWN_RUNBOOKS;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// A bad flag, value or file: one line, exit code 2.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Config {
    /// The collectors whose calls are made: those on, those whose
    /// readings the dcgm collector's fields show, and those the alert
    /// rules read ([`Config::rule_reads`]).
    pub fn reads(&self) -> Collectors {
        let read = self.collectors.or(self.rule_reads);
        match &self.dcgm {
            Some(d) => read.or(d.needs()),
            None => read,
        }
    }

    /// The scheme of the exporter's own URLs: `https` when the web config
    /// turns TLS on (see [`Config::tls`]).
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }
}

/// What the HTTP server allows each client, from the `--web.*` flags.
pub use http::Limits;

/// Pod attribution, from the `--kubernetes.*` flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Kubernetes {
    /// `--kubernetes.pod-resources-socket`. `None`: the default socket,
    /// when it exists (watched for until it does); `Some("")`: off.
    pub socket: Option<PathBuf>,
    /// `--kubernetes.refresh-interval`.
    pub interval: Duration,
    /// `--kubernetes.pod-labels`.
    pub pod_labels: bool,
}

impl Default for Kubernetes {
    fn default() -> Kubernetes {
        Kubernetes {
            socket: None,
            interval: Duration::from_secs(5),
            pod_labels: false,
        }
    }
}

/// Everything the flags set.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `--web.listen-address`, each one given (the default when none is).
    pub listen: Vec<Listen>,
    /// `--web.systemd-socket`: the listeners systemd passed instead.
    pub systemd_socket: bool,
    /// `--web.telemetry-path`.
    pub telemetry_path: String,
    /// The other `--web.*` flags.
    pub limits: Limits,
    /// `--source`; `None` is `auto`.
    pub source: Option<SourceKind>,
    /// `--nvml.library`; `None` is the loader's `libnvidia-ml.so.1`.
    pub nvml_library: Option<PathBuf>,
    /// `--smi.path`.
    pub smi_path: PathBuf,
    /// Where sysfs is mounted: `auto` looks for NVIDIA PCI functions there.
    pub sysfs: PathBuf,
    /// Where the device nodes are: `auto` takes `nvidia*` there as a trace
    /// of an NVIDIA host.
    pub devfs: PathBuf,
    /// Where procfs is mounted: `driver/nvidia/gpus` lists the GPUs this
    /// container (or host) was given.
    pub procfs: PathBuf,
    /// `--smi.timeout`.
    pub smi_timeout: Duration,
    /// `--xid.kmsg`. `None`: /dev/kmsg when readable; `Some("")`: off.
    pub xid_kmsg: Option<PathBuf>,
    /// `--workload.stats-dir`.
    pub workload_dir: Option<PathBuf>,
    /// `--workload.max-age`.
    pub workload_max_age: Duration,
    /// `--kubernetes.*`.
    pub kubernetes: Kubernetes,
    /// `--hpc.job-mapping-dir`.
    pub job_dir: Option<PathBuf>,
    /// `--sim.scenario`; `None` is the built-in fleet.
    pub scenario: Option<PathBuf>,
    /// `--sim.start`: the scenario's origin, Unix seconds; `None` is the
    /// process start.
    pub sim_start: Option<f64>,
    /// `--collect.interval`.
    pub interval: Duration,
    /// `--collect.max-stale`.
    pub max_stale: Duration,
    /// `--log.level`.
    pub log_level: log::LevelFilter,
    /// `--log.format`.
    pub log_format: base::logger::Format,
    /// `--once`.
    pub once: bool,
    /// `--print-rules`.
    pub print_rules: bool,
    /// `--alerts.runbook-base-url`; `None`: the exporter's own copies
    /// (see [`Config::printed_runbook_base`]).
    pub runbook_base: Option<String>,
    /// `--alerts.scrape-job`: the job Prometheus scrapes the exporters
    /// under, for the printed rules that only Prometheus evaluates.
    pub scrape_job: String,
    /// Whether the metrics are served over TLS: the web config turns it on
    /// (a certificate, key, client CA or `client_auth_type` set in
    /// `tls_server_config`). `run` sets it once it has read
    /// `--web.config.file`, before anything else reads the configuration
    /// (`--print-rules` included): the printed runbook links then say
    /// `https` (see [`Config::scheme`]).
    pub tls: bool,
    /// `--rules.file`.
    pub rules_file: Option<PathBuf>,
    /// `--collector.*`, `--no-collector.*`: which collectors run.
    pub collectors: Collectors,
    /// `--no-collector.*`: the collectors turned off by name, never read,
    /// not even for the alert rules.
    pub off: Collectors,
    /// The collectors the alert rules read but those of [`Config::off`]
    /// (set once the rules are loaded): read where not served, so that
    /// `--collector.disable-defaults --collector.dcgm` keeps its alerts.
    pub rule_reads: Collectors,
    /// `--compat.dcgm-counters`; `None`: dcgm-exporter's default fields.
    pub dcgm_counters: Option<PathBuf>,
    /// `--compat.dcgm-lowercase-hostname`, `--compat.dcgm-no-hostname`.
    pub dcgm_hostname: (bool, bool),
    /// `--compat.dcgm-old-namespace`, `--compat.dcgm-model-dashes`.
    pub dcgm_spelling: (bool, bool),
    /// `--compat.dcgm-xid-window`: what `DCGM_EXP_XID_ERRORS_COUNT` counts
    /// over (dcgm-exporter's `-x`).
    pub dcgm_xid_window: Duration,
    /// The dcgm collector's fields, read once the flags are parsed, where
    /// it is on.
    pub dcgm: Option<std::sync::Arc<dcgm::Dcgm>>,
    /// `--web.config.file`: TLS, basic auth, headers and a rate limit, in
    /// exporter-toolkit's schema.
    pub web_config: Option<PathBuf>,
    /// `--web.probe-address`: a plain-HTTP listener for `/healthz` and
    /// `/readyz` only.
    pub probe_address: Option<Listen>,
    /// `--web.open-probes`: `/healthz` and `/readyz` need no basic auth.
    pub open_probes: bool,
    /// `--engine.*`: the inference engines read for the TTFT SLO.
    pub engines: fill::engines::Options,
    /// `--engine.config`: more endpoints and the SLO settings, read at
    /// start and again on SIGHUP.
    pub engine_file: Option<std::path::PathBuf>,
    /// `--web.bcrypt-max-cost`: the highest bcrypt cost a web config's
    /// users may have.
    pub bcrypt_max_cost: u32,
    /// `--alertmanager.*`: where the exporter sends its own alerts.
    pub alertmanager: alertmanager::Alertmanager,
    /// What the command line asked for that is not done, said once at
    /// start as warnings (dcgm-exporter's flags we ignore).
    pub notes: Vec<String>,
}

/// `--web.bcrypt-max-cost`'s default. bcrypt doubles its work with each
/// step: cost 10 takes about 50-70 ms, 17 about 128 times that (6-9 s),
/// and 31, which the format and exporter-toolkit allow, about a day of the
/// one bcrypt thread per wrong password. 17 is the most `htpasswd -C`
/// makes, so no hash an operator made with it is refused.
pub const BCRYPT_MAX_COST: u32 = 17;

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: vec![Listen::Any(9400)],
            systemd_socket: false,
            telemetry_path: "/metrics".into(),
            limits: Limits::default(),
            source: None,
            nvml_library: None,
            smi_path: PathBuf::from("nvidia-smi"),
            sysfs: PathBuf::from("/sys"),
            devfs: PathBuf::from("/dev"),
            procfs: PathBuf::from("/proc"),
            smi_timeout: Duration::from_secs(5),
            xid_kmsg: None,
            workload_dir: None,
            workload_max_age: Duration::from_secs(30),
            kubernetes: Kubernetes::default(),
            job_dir: None,
            scenario: None,
            sim_start: None,
            interval: Duration::from_secs(1),
            max_stale: Duration::from_secs(60),
            log_level: log::LevelFilter::Info,
            log_format: base::logger::Format::Logfmt,
            once: false,
            print_rules: false,
            runbook_base: None,
            scrape_job: "gpu-exporter".into(),
            tls: false,
            rules_file: None,
            dcgm_counters: None,
            dcgm_hostname: (false, false),
            dcgm_spelling: (false, false),
            dcgm_xid_window: Duration::from_secs(300),
            dcgm: None,
            collectors: Collectors::DEFAULT,
            off: Collectors::NONE,
            rule_reads: Collectors::NONE,
            web_config: None,
            probe_address: None,
            open_probes: false,
            engines: fill::engines::Options::default(),
            engine_file: None,
            bcrypt_max_cost: BCRYPT_MAX_COST,
            alertmanager: Default::default(),
            notes: Vec::new(),
        }
    }
}

impl Config {
    /// The runbook links of the printed rules: absolute, so that they open
    /// from Alertmanager and the Prometheus UI. By default the exporter's
    /// own copy, `http://{{ $labels.instance }}/docs/runbooks/`, which
    /// works air-gapped; `https` once TLS is on.
    pub fn printed_runbook_base(&self) -> String {
        match &self.runbook_base {
            Some(base) => base.clone(),
            None => {
                let scheme = self.scheme();
                format!("{scheme}://{{{{ $labels.instance }}}}{OWN_RUNBOOKS}")
            }
        }
    }

    /// The runbook links on `/alerts` and the status page: relative to the
    /// exporter by default (`docs/runbooks/`), the flag's value where it
    /// names no label (a label is Prometheus' to expand).
    pub fn served_runbook_base(&self) -> String {
        match &self.runbook_base {
            Some(base) if !base.contains("{{") => base.clone(),
            _ => OWN_RUNBOOKS.trim_start_matches('/').into(),
        }
    }
}

/// What the flags ask for.
#[derive(Debug)]
pub enum Command {
    /// Run the exporter.
    Run(Box<Config>),
    /// Print `--help` and exit.
    Help,
    /// Print the version and exit.
    Version,
    /// Print this text (another `--help`) and exit.
    Print(String),
}
