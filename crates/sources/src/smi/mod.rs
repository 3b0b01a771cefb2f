//! The nvidia-smi source: runs `nvidia-smi --query-gpu=... --format=csv,nounits`
//! with a hard timeout and reads its CSV (see [`csv`]). For hosts where
//! NVML cannot be loaded but the tool runs.
//!
//! What nvidia-smi cannot tell (Xid, GPM ratios, allocator figures, energy,
//! PCIe/NVLink bytes) stays `None`.
//!
//! A failed run is quoted by nvidia-smi's own message. A run that exits
//! non-zero but prints rows or names unreachable GPUs still yields them:
//! one GPU's trouble is not the node's.

pub mod apps;
pub mod cell;
pub mod csv;
pub mod health;

use super::{Source, SourceError};
use base::quiet::{Noted, Repeating};
use csv::{failure_message, parse, supported_fields, unreachable};
use model::Gpu;
use model::{Collector, Collectors, SourceKind};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Most bytes read from one nvidia-smi run; a full query is ~10 KiB a GPU.
const OUTPUT_LIMIT: u64 = 16 << 20;

/// The nvidia-smi source. Each collection runs one nvidia-smi with a hard
/// timeout; the first also asks `--help-query-gpu` which fields to query.
pub struct Smi {
    path: PathBuf,
    timeout: Duration,
    /// What [`supported_fields`] chose; asked again after a query fails on
    /// an invalid field (a driver upgrade).
    fields: Option<Vec<&'static str>>,
    /// A timed-out nvidia-smi that SIGKILL has not ended yet (a process
    /// blocked in the driver dies only when the driver lets go). No new one
    /// starts until it is gone, so hung runs never pile up.
    stuck: Option<Child>,
    /// Called on each command before it starts (to tie the child's life to
    /// the exporter's).
    spawn_hook: Option<fn(&mut Command)>,
    /// Unreachable GPUs already logged, by bus id and reason.
    unreachable: Noted<(String, String)>,
    /// Only these collectors' fields are queried.
    collectors: Collectors,
    /// `--query-compute-apps` failing (the processes collector).
    apps_failing: Repeating,
}

/// A finished run: its exit status and its output.
struct Ran {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

impl Smi {
    pub fn new(path: PathBuf, timeout: Duration) -> Smi {
        Smi {
            path,
            timeout,
            fields: None,
            stuck: None,
            spawn_hook: None,
            unreachable: Noted::default(),
            collectors: Collectors::DEFAULT,
            apps_failing: Repeating::new(),
        }
    }

    /// Calls `hook` on every nvidia-smi command before it starts.
    pub fn with_spawn_hook(mut self, hook: fn(&mut Command)) -> Smi {
        self.spawn_hook = Some(hook);
        self
    }

    /// Queries only the fields of `collectors`.
    pub fn collectors(mut self, collectors: Collectors) -> Smi {
        self.collectors = collectors;
        self
    }

    /// Runs nvidia-smi with `args`; its stdout on success, else nvidia-smi's
    /// own message.
    fn run(&mut self, args: &[&str]) -> Result<String, SourceError> {
        let ran = self.run_any(args)?;
        if ran.status.success() {
            return Ok(ran.stdout);
        }
        Err(failed(&ran))
    }

    /// Runs nvidia-smi with `args` to its end, whatever its exit status.
    fn run_any(&mut self, args: &[&str]) -> Result<Ran, SourceError> {
        let err = |m: String| SourceError(format!("smi: {m}"));
        if let Some(old) = &mut self.stuck {
            match old.try_wait() {
                Ok(None) => {
                    return Err(err(format!(
                        "nvidia-smi (pid {}) killed after timing out has not exited yet; not starting another",
                        old.id()
                    )));
                }
                Ok(Some(_)) | Err(_) => self.stuck = None,
            }
        }
        let mut cmd = Command::new(&self.path);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(hook) = self.spawn_hook {
            hook(&mut cmd);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| err(format!("cannot run {}: {e}", self.path.display())))?;
        let deadline = Instant::now() + self.timeout;
        // Readers drain the pipes so a big output cannot block the child.
        // They are never joined: a grandchild may hold a pipe open past the
        // deadline, and waiting on it would defeat the timeout.
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    self.kill(child);
                    return Err(err(format!(
                        "nvidia-smi did not finish within {:?}; killed it",
                        self.timeout
                    )));
                }
                Err(e) => {
                    self.kill(child);
                    return Err(err(format!("waiting for nvidia-smi: {e}")));
                }
            }
        };
        // The child has exited, so its pipes are closing: a short grace past
        // the deadline only covers a run that ended right at it.
        let left = || {
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(500))
        };
        let out = stdout.recv_timeout(left()).unwrap_or_default();
        let errout = stderr.recv_timeout(left()).unwrap_or_default();
        let stdout = String::from_utf8(out)
            .map_err(|_| err("nvidia-smi printed something that is not UTF-8".into()))?;
        Ok(Ran {
            status,
            stdout,
            stderr: String::from_utf8_lossy(&errout).into_owned(),
        })
    }

    /// SIGKILL, then reap for up to a second; one that outlives that is kept
    /// in `stuck`.
    fn kill(&mut self, mut child: Child) {
        let _ = child.kill();
        for _ in 0..100 {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        log::warn!(
            "smi: nvidia-smi (pid {}) survived SIGKILL for 1s",
            child.id()
        );
        self.stuck = Some(child);
    }
}

/// A failed run, in nvidia-smi's own words.
fn failed(ran: &Ran) -> SourceError {
    SourceError(format!(
        "smi: nvidia-smi failed ({}): {}",
        ran.status,
        failure_message(&ran.stderr, &ran.stdout)
    ))
}

/// Reads a pipe to its end (at most [`OUTPUT_LIMIT`]) on a thread.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(pipe) = pipe {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.take(OUTPUT_LIMIT).read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
    }
    rx
}

impl Source for Smi {
    fn kind(&self) -> SourceKind {
        SourceKind::Smi
    }

    fn collect(&mut self, _at: f64) -> Result<Vec<Gpu>, SourceError> {
        let fields = match self.fields.clone() {
            Some(f) => f,
            None => {
                let help = self.run(&["--help-query-gpu"])?;
                let on = self.collectors;
                let mut f = supported_fields(&help);
                f.retain(|field| health::collector_of(field).is_none_or(|c| on.has(c)));
                if f.is_empty() {
                    return Err(SourceError(
                        "smi: nvidia-smi --help-query-gpu lists none of the fields we read".into(),
                    ));
                }
                self.fields = Some(f.clone());
                f
            }
        };
        let query = format!("--query-gpu={}", fields.join(","));
        let ran = self.run_any(&[&query, "--format=csv,nounits"])?;
        let parsed = parse(&ran.stdout, &fields);
        if !ran.status.success() {
            let e = failed(&ran);
            if e.0.contains("not a valid field") {
                self.fields = None;
            }
            // Rows, GPUs named unreachable or "No devices were found" are
            // still the fleet.
            if parsed.is_err() {
                return Err(e);
            }
        }
        for line in ran.stdout.lines() {
            if let Some((bus, why)) = unreachable(line)
                && self.unreachable.first((bus.clone(), why.clone()))
            {
                log::warn!("smi: nvidia-smi cannot reach GPU {bus}: {why}");
            }
        }
        let mut gpus = parsed.map_err(|e| SourceError(format!("smi: {e}")))?;
        if self.collectors.has(Collector::Processes) {
            // A second run; its failure costs the processes only.
            let apps = self
                .run(&[apps::QUERY, "--format=csv,nounits"])
                .and_then(|out| apps::parse(&out).map_err(|e| SourceError(format!("smi: {e}"))));
            match apps {
                Ok(apps) => {
                    self.apps_failing.ok("smi: --query-compute-apps");
                    apps::attach(apps, &mut gpus);
                }
                Err(e) => self.apps_failing.fail("smi: --query-compute-apps", &e.0),
            }
        }
        Ok(gpus)
    }
}

#[cfg(test)]
mod tests {
    use super::csv::tests::HELP_OLD;
    use super::*;

    /// A fresh directory for fake nvidia-smi scripts.
    fn temp_dir(what: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "gpu-exporter-smi-{what}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn script(dir: &std::path::Path, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("nvidia-smi");
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    // One test for every run of a fake nvidia-smi: spawning while another
    // test thread still has a freshly written script open fails with
    // ETXTBSY, so these stay on one thread.
    #[test]
    fn runner_with_fake_nvidia_smi() {
        let dir = temp_dir("runner");
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/nvidia-smi/querygpu_rtx2080super_465.27_throttle-naming.csv"
        );
        let help = dir.join("help.txt");
        std::fs::write(&help, HELP_OLD).unwrap();
        let args = dir.join("args");
        let good = script(
            &dir,
            &format!(
                "echo \"$@\" >> '{args}'\ncase \"$1\" in\n\
                 --help-query-gpu) cat '{help}' ;;\n\
                 --query-gpu=*) cat '{fixture}' ;;\n\
                 *) echo \"unexpected $1\" >&2; exit 2 ;;\nesac\n",
                args = args.display(),
                help = help.display(),
            ),
        );
        let mut smi = Smi::new(good, Duration::from_secs(5));
        assert_eq!(smi.kind(), SourceKind::Smi);
        let gpus = smi.collect(0.0).unwrap();
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].readings.temperature_celsius, Some(32.0));
        assert_eq!(gpus[0].readings.clocks_event_mask, Some(0x1));
        smi.collect(0.0).unwrap();
        // Help asked once; the query uses the old spelling this driver knows.
        let calls = std::fs::read_to_string(&args).unwrap();
        assert_eq!(
            calls,
            "--help-query-gpu\n\
             --query-gpu=index,clocks_throttle_reasons.active,clocks_throttle_reasons.sw_thermal_slowdown,memory.total --format=csv,nounits\n\
             --query-gpu=index,clocks_throttle_reasons.active,clocks_throttle_reasons.sw_thermal_slowdown,memory.total --format=csv,nounits\n"
        );

        // Hangs on the query: killed at the timeout, and the next
        // collection starts a new run rather than waiting on the old one.
        let hang = script(
            &dir,
            &format!(
                "case \"$1\" in --help-query-gpu) cat '{}' ;; *) sleep 30 ;; esac\n",
                help.display()
            ),
        );
        let mut smi = Smi::new(hang, Duration::from_secs(1));
        for _ in 0..2 {
            let start = Instant::now();
            let e = smi.collect(0.0).unwrap_err();
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:?}",
                start.elapsed()
            );
            assert!(e.0.contains("did not finish within 1s"), "{e}");
            assert!(smi.stuck.is_none());
        }

        // A failing nvidia-smi: its message, one line.
        let fail = script(
            &dir,
            "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n",
        );
        let e = Smi::new(fail, Duration::from_secs(5))
            .collect(0.0)
            .unwrap_err();
        assert!(e.0.contains("could not communicate"), "{e}");
        assert!(e.0.contains("exit status: 9"), "{e}");

        let e = Smi::new(dir.join("missing"), Duration::from_secs(5))
            .collect(0.0)
            .unwrap_err();
        assert!(e.0.contains("cannot run"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
