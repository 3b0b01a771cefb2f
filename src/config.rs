//! Flags in, a validated [`Config`] out. Every problem is one line that
//! names the flag or file, and maps to exit code 2.

use std::ffi::OsString;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use crate::base::time::parse_duration;

pub const USAGE: &str = "\
gpu-exporter: a tiny Prometheus exporter for NVIDIA GPU fleets

USAGE: gpu-exporter [FLAGS]

  --web.listen-address ADDR   where to serve (default :9400; e.g. 127.0.0.1:9400, [::1]:0)
  --web.telemetry-path PATH   path of the metrics (default /metrics)
  --web.max-requests N        requests answered at once; more get 503 (default 40)
  --web.max-connections N     open connections; at the cap the oldest idle one is closed,
                              or the new one gets 503 (default 512)
  --web.header-timeout DUR    time to send a request head (default 10s)
  --web.idle-timeout DUR      time a keep-alive connection may wait between requests (default 90s)
  --web.write-timeout DUR     time to write one response (default 10s)
  --source NAME               where readings come from: auto, nvml, smi or sim (default auto:
                              NVML if it loads, else nvidia-smi if present, else the simulator)
  --nvml.library PATH         the NVML library to load (default libnvidia-ml.so.1 via the loader)
  --smi.path PATH             the nvidia-smi to run (default nvidia-smi on PATH)
  --smi.timeout DUR           kill a hung nvidia-smi after this long (default 5s)
  --xid.kmsg PATH             kernel log to read Xid from when the source cannot (default /dev/kmsg
                              when readable, which needs CAP_SYSLOG; an empty PATH turns it off)
  --workload.stats-dir DIR    read workload allocator stats from JSON files here (see README)
  --workload.max-age DUR      ignore stats files older than this (default 30s)
  --sim.scenario FILE         simulated fleet and incidents, JSON (default: the built-in 4-GPU demo)
  --collect.interval DUR      time between collections (default 1s; e.g. 500ms, 1s, 5m, 1h)
  --collect.max-stale DUR     while collections fail, serve the last good readings this long,
                              then none (default 1m)
  --log.level LEVEL           error, warn, info or debug (default info)
  --rules.file FILE           alert rules to merge into the defaults by name, JSON
  --alerts.runbook-base-url U prefix of each alert's runbook_url (default docs/runbooks/)
  --print-rules               print the alert rules as a Prometheus rule file and exit
  --once                      print the alert table from the simulator's replayed history and exit
  --version                   print the version and exit
  --help                      print this help and exit
";

/// A bad flag, value or file: one line, exit code 2.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! bad {
    ($($arg:tt)*) => { ConfigError(format!($($arg)*)) };
}

/// Where readings come from: the `source` label of
/// `gpu_exporter_source_info`, and what `--source` names (with `auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// NVML, loaded at run time.
    Nvml,
    /// nvidia-smi, run each collection.
    Smi,
    /// The simulated fleet.
    Sim,
}

impl SourceKind {
    /// The name flags and labels use.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Nvml => "nvml",
            SourceKind::Smi => "smi",
            SourceKind::Sim => "sim",
        }
    }

    /// `auto` is `None`.
    fn parse(s: &str) -> Result<Option<SourceKind>, ConfigError> {
        match s {
            "auto" => Ok(None),
            "nvml" => Ok(Some(SourceKind::Nvml)),
            "smi" => Ok(Some(SourceKind::Smi)),
            "sim" => Ok(Some(SourceKind::Sim)),
            _ => Err(bad!(
                "--source: unknown source {s:?} (expected auto, nvml, smi or sim)"
            )),
        }
    }
}

/// What the HTTP server allows each client, from the `--web.*` flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Requests being answered at once; more get 503 at once.
    pub max_requests: usize,
    /// Open connections; at the cap the oldest idle one is closed to admit
    /// a new one, and without an idle one the new one gets 503.
    pub max_connections: usize,
    /// From a connection's first byte (or its opening) to a whole head.
    pub header_timeout: Duration,
    /// Between requests on a keep-alive connection.
    pub idle_timeout: Duration,
    /// For one response to be written.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_requests: 40,
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            write_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub telemetry_path: String,
    pub limits: Limits,
    /// `None` is `auto`.
    pub source: Option<SourceKind>,
    pub nvml_library: Option<PathBuf>,
    pub smi_path: PathBuf,
    pub smi_timeout: Duration,
    /// `None`: /dev/kmsg when readable; `Some("")`: off.
    pub xid_kmsg: Option<PathBuf>,
    pub workload_dir: Option<PathBuf>,
    pub workload_max_age: Duration,
    pub scenario: Option<PathBuf>,
    pub interval: Duration,
    pub max_stale: Duration,
    pub log_level: log::LevelFilter,
    pub once: bool,
    pub print_rules: bool,
    pub runbook_base: String,
    pub rules_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], 9400)),
            telemetry_path: "/metrics".into(),
            limits: Limits::default(),
            source: None,
            nvml_library: None,
            smi_path: PathBuf::from("nvidia-smi"),
            smi_timeout: Duration::from_secs(5),
            xid_kmsg: None,
            workload_dir: None,
            workload_max_age: Duration::from_secs(30),
            scenario: None,
            interval: Duration::from_secs(1),
            max_stale: Duration::from_secs(60),
            log_level: log::LevelFilter::Info,
            once: false,
            print_rules: false,
            runbook_base: "docs/runbooks/".into(),
            rules_file: None,
        }
    }
}

#[derive(Debug)]
pub enum Command {
    Run(Box<Config>),
    Help,
    Version,
}

pub fn parse_args<I>(args: I) -> Result<Command, ConfigError>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    use lexopt::prelude::*;
    let mut c = Config::default();
    let mut p = lexopt::Parser::from_args(args);
    loop {
        let arg = p.next().map_err(|e| bad!("{e}"))?;
        let Some(arg) = arg else { break };
        let flag = match &arg {
            Long(f) => format!("--{f}"),
            Short(f) => format!("-{f}"),
            Value(v) => return Err(bad!("unexpected argument {:?}", v.to_string_lossy())),
        };
        let mut value = || -> Result<String, ConfigError> {
            // `--flag=value` and `--flag value` both arrive here.
            let v = p.value().map_err(|_| bad!("{flag}: missing value"))?;
            v.into_string()
                .map_err(|v| bad!("{flag}: value is not UTF-8: {v:?}"))
        };
        match flag.as_str() {
            "--help" | "-h" => return Ok(Command::Help),
            "--version" => return Ok(Command::Version),
            "--once" => c.once = true,
            "--print-rules" => c.print_rules = true,
            "--rules.file" => c.rules_file = Some(PathBuf::from(value()?)),
            "--alerts.runbook-base-url" => c.runbook_base = value()?,
            "--web.listen-address" => c.listen = parse_listen(&value()?)?,
            "--web.telemetry-path" => {
                let v = value()?;
                if !v.starts_with('/') || v.len() > 256 || v.contains(['?', '#', ' ']) {
                    return Err(bad!(
                        "--web.telemetry-path: {v:?} must start with / and hold no '?', '#' or space"
                    ));
                }
                c.telemetry_path = v;
            }
            "--web.max-requests" => c.limits.max_requests = count(&flag, &value()?)?,
            "--web.max-connections" => c.limits.max_connections = count(&flag, &value()?)?,
            "--web.header-timeout" => c.limits.header_timeout = timeout(&flag, &value()?)?,
            "--web.idle-timeout" => c.limits.idle_timeout = timeout(&flag, &value()?)?,
            "--web.write-timeout" => c.limits.write_timeout = timeout(&flag, &value()?)?,
            "--source" => c.source = SourceKind::parse(&value()?)?,
            "--sim.scenario" => c.scenario = Some(PathBuf::from(value()?)),
            "--nvml.library" => c.nvml_library = Some(PathBuf::from(value()?)),
            "--smi.path" => c.smi_path = PathBuf::from(value()?),
            "--smi.timeout" => {
                c.smi_timeout =
                    parse_duration(&value()?).map_err(|e| bad!("--smi.timeout: {e}"))?;
                if c.smi_timeout.is_zero() {
                    return Err(bad!("--smi.timeout: must be above 0"));
                }
            }
            "--xid.kmsg" => c.xid_kmsg = Some(PathBuf::from(value()?)),
            "--workload.stats-dir" => c.workload_dir = Some(PathBuf::from(value()?)),
            "--workload.max-age" => {
                c.workload_max_age =
                    parse_duration(&value()?).map_err(|e| bad!("--workload.max-age: {e}"))?;
            }
            "--collect.interval" => {
                let v = value()?;
                c.interval = parse_duration(&v).map_err(|e| bad!("--collect.interval: {e}"))?;
                if c.interval < Duration::from_millis(10) {
                    return Err(bad!("--collect.interval: {v:?} is below the 10ms minimum"));
                }
            }
            "--collect.max-stale" => {
                c.max_stale =
                    parse_duration(&value()?).map_err(|e| bad!("--collect.max-stale: {e}"))?;
            }
            "--log.level" => {
                let v = value()?;
                c.log_level = match v.as_str() {
                    "error" => log::LevelFilter::Error,
                    "warn" => log::LevelFilter::Warn,
                    "info" => log::LevelFilter::Info,
                    "debug" => log::LevelFilter::Debug,
                    _ => {
                        return Err(bad!(
                            "--log.level: unknown level {v:?} (expected error, warn, info or debug)"
                        ));
                    }
                };
            }
            _ => return Err(bad!("unknown flag {flag} (see --help)")),
        }
    }
    Ok(Command::Run(Box::new(c)))
}

/// A limit of at least one, at most a million.
fn count(flag: &str, v: &str) -> Result<usize, ConfigError> {
    v.parse()
        .ok()
        .filter(|n| (1..=1_000_000).contains(n))
        .ok_or_else(|| bad!("{flag}: {v:?} is not a number from 1 to 1000000"))
}

fn timeout(flag: &str, v: &str) -> Result<Duration, ConfigError> {
    match parse_duration(v) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(bad!("{flag}: must be above 0")),
        Err(e) => Err(bad!("{flag}: {e}")),
    }
}

/// `:9400` listens on every IPv4 interface, as node_exporter does.
fn parse_listen(s: &str) -> Result<SocketAddr, ConfigError> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    if let Ok(a) = full.parse() {
        return Ok(a);
    }
    // Host names resolve once, at start ("localhost:9400").
    full.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| bad!("--web.listen-address: {s:?} is not HOST:PORT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, ConfigError> {
        match parse_args(args.iter().copied())? {
            Command::Run(c) => Ok(*c),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_and_flags() {
        let c = run(&[]).unwrap();
        assert_eq!(c.listen.to_string(), "0.0.0.0:9400");
        assert_eq!(c.interval, Duration::from_secs(1));
        let c = run(&[
            "--web.listen-address",
            "[::1]:0",
            "--collect.interval=250ms",
            "--once",
        ])
        .unwrap();
        assert_eq!(c.listen.to_string(), "[::1]:0");
        assert_eq!(c.interval, Duration::from_millis(250));
        assert!(c.once);
    }

    #[test]
    fn bad_flags_name_themselves() {
        for (args, want) in [
            (&["--nope"][..], "--nope"),
            (&["--collect.interval", "fast"], "--collect.interval"),
            (&["--collect.interval", "0s"], "--collect.interval"),
            (&["--source", "dcgm"], "--source"),
            (&["--web.listen-address", "nowhere"], "--web.listen-address"),
            (&["--web.telemetry-path", "metrics"], "--web.telemetry-path"),
            (&["--log.level", "loud"], "--log.level"),
            (&["--sim.scenario"], "--sim.scenario"),
            (&["stray"], "stray"),
        ] {
            let e = run(args).unwrap_err();
            assert!(e.0.contains(want), "{args:?}: {e}");
            assert!(!e.0.contains('\n'), "{e}");
        }
    }
}
