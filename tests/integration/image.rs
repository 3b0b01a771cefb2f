//! The container images: `Dockerfile.scratch` (and the static
//! `Dockerfile.static`) built with buildah from the folder
//! `deploy/container/stage.sh` stages out of a release build, run with
//! buildah's chroot isolation on the host network (buildah needs no
//! container engine) and scraped from here over 127.0.0.1. Each test has a
//! buildah storage of its own, removed at its end.

use crate::common::{Response, eventually, have, processes, read_response, send, value, watch_log};
use crate::sources::fake_nvml::Fixture;
use nanoserde::DeJson;
use std::collections::BTreeMap;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

const MAX_IMAGE_BYTES: u64 = 6 * 1024 * 1024;
/// Where the NVIDIA container toolkit mounts the driver: the host's
/// directory under CDI (Debian and Ubuntu hosts), /usr/lib64 in legacy mode
/// for an image without /etc/debian_version.
const MULTIARCH: &str = "/usr/lib/x86_64-linux-gnu";
const LIB64: &str = "/usr/lib64";
/// The same directory on an arm64 host: one Dockerfile serves both.
pub(crate) const MULTIARCH_ARM64: &str = "/usr/lib/aarch64-linux-gnu";

pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// SIGKILL to a whole process group: `buildah run` does not pass SIGTERM
/// on, and the exporter runs two processes below it, in its group.
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// Live (not zombie) processes in process group `pgid`, with their
/// command names.
fn group_members(pgid: u32) -> Vec<(u32, String)> {
    processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid)
        .map(|p| (p.pid, p.comm))
        .collect()
}

/// Runs `cmd` in a process group of its own, for at most `limit`.
pub(crate) fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            kill_group(child.id());
            let _ = child.wait();
            panic!("{what} took more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The release binary (the one the production image carries), built once
/// per test run the way it ships (`deploy/build.sh`, as `deploy/release.sh`
/// builds it); the size and memory tests use it too.
pub fn release_binary() -> &'static Path {
    Variant::Scratch.binary()
}

/// The shipped build without default features (no TLS), built once per
/// test run, for its size.
pub fn release_binary_without_tls() -> &'static Path {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| shipped(&["--no-default-features"]))
}

/// `deploy/build.sh` with `args`, into a target directory of its own
/// (`cargo test` holds the lock on the usual one), niced and on one job:
/// it runs beside timing-sensitive tests (the Prometheus comparison), and
/// LTO with one codegen unit is serial at its end anyway. Every build
/// shares the standard library it rebuilds, and the release test
/// (dist.rs) builds in the same directory, so it finds these built.
/// With `cargo auditable` where it is installed, as the release builds.
pub(crate) fn shipped(args: &[&str]) -> PathBuf {
    // Builds with other features write the same path: build and copy the
    // result out one at a time, so each variant keeps its own binary.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let target = release_target_dir();
    let mut cmd = Command::new("nice");
    cmd.arg("-n19")
        .arg(root().join("deploy/build.sh"))
        .args(["--offline", "--quiet", "-j1"])
        .args(auditable().then_some("--auditable"))
        .args(args)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(root());
    // The toolchain that runs the tests builds the binary too.
    cmd.env("PATH", toolchain_path());
    let out = output_within(cmd, Duration::from_secs(1800));
    assert!(
        out.status.success(),
        "deploy/build.sh {args:?}: {}",
        text(&out)
    );
    let bin = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(bin.is_file(), "{}", bin.display());
    // Under the same file name, in a folder of the variant's own.
    let variant: String = (["shipped"].iter().chain(args).copied())
        .flat_map(|a| a.chars().chain(['_']))
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let kept = target.join("variants").join(variant).join("gpu-exporter");
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::copy(&bin, &kept).unwrap();
    kept
}

/// Where every shipped build of a test run goes (see [`shipped`]).
pub(crate) fn release_target_dir() -> PathBuf {
    tmp().join("image-release")
}

/// The PATH that puts the toolchain running the tests first.
pub(crate) fn toolchain_path() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths: Vec<PathBuf> = std::env::var_os("CARGO")
        .map(|cargo| Path::new(&cargo).parent().unwrap().to_path_buf())
        .into_iter()
        .collect();
    paths.extend(std::env::split_paths(&path));
    std::env::join_paths(paths).unwrap()
}

/// Whether `cargo auditable` runs. Missing locally: the shipped builds
/// are plain `cargo build`, said once. Missing in CI: fail.
pub(crate) fn auditable() -> bool {
    static CELL: OnceLock<bool> = OnceLock::new();
    *CELL.get_or_init(|| {
        let ok = Command::new("cargo")
            .args(["auditable", "--version"])
            .env("PATH", toolchain_path())
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "cargo-auditable is required in CI (.ci/run installs it)"
            );
            eprintln!(
                "NOTE: cargo-auditable is not installed: the shipped builds here are plain cargo build"
            );
        }
        ok
    })
}

/// The two images: the production one and the static simulator-only one.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Scratch,
    Static,
}

const MUSL: &str = "x86_64-unknown-linux-musl";

impl Variant {
    fn dockerfile(self) -> PathBuf {
        root().join(match self {
            Variant::Scratch => "Dockerfile.scratch",
            Variant::Static => "Dockerfile.static",
        })
    }

    /// The binary the image carries, built once per test run: the shipped
    /// build, or the plain musl one for the simulator image.
    fn binary(self) -> &'static Path {
        static CELLS: [OnceLock<PathBuf>; 2] = [OnceLock::new(), OnceLock::new()];
        CELLS[self as usize].get_or_init(|| {
            if self == Variant::Scratch {
                return shipped(&[]);
            }
            let target = release_target_dir();
            let mut cmd = Command::new("nice");
            cmd.arg("-n19")
                .arg(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
                .current_dir(root())
                .args(["build", "--release", "--offline", "--quiet", "-j1"])
                // As stage.sh builds it: no TLS in a demo.
                .arg("--no-default-features")
                .args(["--bin", "gpu-exporter", "--target-dir"])
                .arg(&target)
                .args(["--target", MUSL]);
            let out = output_within(cmd, Duration::from_secs(1200));
            assert!(out.status.success(), "release build: {}", text(&out));
            target.join(MUSL).join("release/gpu-exporter")
        })
    }

    /// The image's files, staged once per test run by the documented script.
    fn stage(self) -> &'static Path {
        static CELLS: [OnceLock<PathBuf>; 2] = [OnceLock::new(), OnceLock::new()];
        CELLS[self as usize].get_or_init(|| {
            let mut cmd = Command::new(root().join("deploy/container/stage.sh"));
            let dir = match self {
                Variant::Scratch => tmp().join("image-stage"),
                Variant::Static => {
                    cmd.arg("--static");
                    tmp().join("image-stage-static")
                }
            };
            cmd.arg(&dir).env("GPU_EXPORTER_BIN", self.binary());
            let out = output_within(cmd, Duration::from_secs(60));
            assert!(out.status.success(), "stage.sh: {}", text(&out));
            dir
        })
    }

    /// The files under the stage, which is the image's one layer. Each must
    /// be a plain file or directory that only root could write.
    fn files(self) -> Vec<String> {
        use std::os::unix::fs::PermissionsExt;
        let stage = self.stage();
        let mut files = Vec::new();
        let mut dirs = vec![stage.to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let meta = std::fs::symlink_metadata(entry.path()).unwrap();
                let rel = entry
                    .path()
                    .strip_prefix(stage)
                    .unwrap()
                    .display()
                    .to_string();
                assert_eq!(meta.permissions().mode() & 0o022, 0, "/{rel} is writable");
                if meta.is_dir() {
                    dirs.push(entry.path());
                } else {
                    assert!(meta.is_file(), "/{rel} is not a plain file");
                    files.push(format!("/{rel}"));
                }
            }
        }
        files.sort();
        files
    }
}

/// Whether the rustup `target` is installed. Missing locally: skip with
/// a reason. Missing in CI: fail.
pub fn have_target(target: &str) -> bool {
    let sysroot = Command::new("rustc")
        .current_dir(root())
        .args(["--print", "sysroot"])
        .output()
        .expect("run rustc");
    let sysroot = String::from_utf8(sysroot.stdout).unwrap();
    let ok = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(target)
        .is_dir();
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the {target} target is required in CI (rust-toolchain.toml names it)"
        );
        eprintln!("SKIP: the {target} target is not installed (rustup target add {target})");
    }
    ok
}

/// The size of an image: its layers, uncompressed.
fn image_bytes(b: &Buildah, image: &str) -> u64 {
    let manifest: Manifest = DeJson::deserialize_json(&b.inspect(image, "{{.Manifest}}")).unwrap();
    manifest.layers.iter().map(|l| l.size).sum()
}

/// A buildah storage of its own under a fresh directory. On drop every
/// container and image in it is removed, then the directory.
struct Buildah {
    dir: PathBuf,
}

impl Buildah {
    /// None, after printing why, where buildah is missing (a failure in CI).
    fn new(tag: &str) -> Option<Buildah> {
        if !have("buildah", &["--version"]) {
            return None;
        }
        let dir =
            std::env::temp_dir().join(format!("gpu-exporter-image-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Some(Buildah { dir })
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("buildah");
        cmd.arg("--root")
            .arg(self.dir.join("storage"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs"]);
        cmd
    }

    /// Runs a buildah subcommand that must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let mut cmd = self.command();
        cmd.args(args);
        let out = output_within(cmd, Duration::from_secs(120));
        assert!(out.status.success(), "buildah {args:?}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// Builds the variant's Dockerfile from its stage; the image id.
    fn build(&self, variant: Variant) -> String {
        self.build_target(variant, None)
    }

    /// [`Buildah::build`] of one `--target` of the Dockerfile.
    fn build_target(&self, variant: Variant, target: Option<&str>) -> String {
        let dockerfile = variant.dockerfile();
        let context = variant.stage();
        let mut args = vec!["bud", "--isolation", "chroot", "--quiet"];
        if let Some(t) = target {
            args.extend(["--target", t]);
        }
        args.extend([
            "-f",
            dockerfile.to_str().unwrap(),
            "-t",
            "gpu-exporter:test",
            context.to_str().unwrap(),
        ]);
        self.ok(&args)
            .lines()
            .last()
            .expect("bud printed the image id")
            .to_string()
    }

    fn inspect(&self, image: &str, format: &str) -> String {
        self.ok(&["inspect", "--type", "image", "--format", format, image])
    }

    /// The image's OCI configuration.
    fn config(&self, image: &str) -> Config {
        let raw = self.inspect(image, "{{.Config}}");
        let outer: OciImage =
            DeJson::deserialize_json(&raw).unwrap_or_else(|e| panic!("{e}: {raw}"));
        outer.config
    }

    /// A container of `image` running its entrypoint with `args` appended,
    /// on a free loopback port, with each `(host file, container path)` of
    /// `mounts` bind-mounted read-only. Started again, once, where the OCI
    /// runtime failed to seal its own copy (`sealing memfd copy: Device or
    /// resource busy`, a race in the runtime with another starting beside
    /// it, before our binary runs at all).
    fn start(&self, image: &str, mounts: &[(&Path, &str)], args: &[&str]) -> Running {
        let mut all = vec!["--web.listen-address", "127.0.0.1:0", "--xid.kmsg", ""];
        all.extend(args);
        self.start_as(image, mounts, &[], &all)
    }

    /// [`Buildah::start`] with exactly `args` after the entrypoint and
    /// `env` set, as the GPU Operator starts a container.
    fn start_as(
        &self,
        image: &str,
        mounts: &[(&Path, &str)],
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Running {
        match self.try_start(image, mounts, env, args) {
            Ok(running) => running,
            Err(log) if log.contains("sealing memfd copy") => {
                eprintln!("the OCI runtime failed to start the container; again:\n{log}");
                let again = self.try_start(image, mounts, env, args);
                again.unwrap_or_else(|log| {
                    panic!("the container never said where it serves:\n{log}")
                })
            }
            Err(log) => panic!("the container never said where it serves:\n{log}"),
        }
    }

    /// [`Buildah::start`] once: the log of a container that never said
    /// where it serves.
    fn try_start(
        &self,
        image: &str,
        mounts: &[(&Path, &str)],
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Result<Running, String> {
        let entrypoint = self.config(image).entrypoint;
        let container = self.ok(&["from", image]);
        let mut cmd = self.command();
        cmd.args(["run", "--isolation", "chroot", "--network", "host"]);
        for (host, path) in mounts {
            cmd.arg("-v").arg(format!("{}:{path}:ro", host.display()));
        }
        for (k, v) in env {
            cmd.arg("--env").arg(format!("{k}={v}"));
        }
        cmd.arg(&container)
            .arg("--")
            .args(&entrypoint)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = Group(cmd.spawn().expect("spawn buildah run"));
        // Keep the log for failure messages; the serving line names the port.
        let (log, rx) = watch_log(child.0.stderr.take().unwrap());
        let Ok(hostport) = rx.recv_timeout(Duration::from_secs(60)) else {
            return Err(log.lock().unwrap().clone());
        };
        Ok(Running {
            child,
            addr: hostport.parse().unwrap(),
            log,
        })
    }
}

impl Drop for Buildah {
    fn drop(&mut self) {
        let _ = output_within(
            {
                let mut c = self.command();
                c.args(["rm", "--all"]);
                c
            },
            Duration::from_secs(60),
        );
        let _ = output_within(
            {
                let mut c = self.command();
                c.args(["rmi", "--all", "--force"]);
                c
            },
            Duration::from_secs(60),
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `buildah run` and everything below it, in a process group of its own;
/// killed on drop, waiting (bounded) until no member is left.
struct Group(Child);

impl Drop for Group {
    fn drop(&mut self) {
        let pgid = self.0.id();
        kill_group(pgid);
        let _ = self.0.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !group_members(pgid).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

struct Running {
    child: Group,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Running {
    fn get(&self, path: &str) -> Response {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        send(&mut s, "GET", path, &[]);
        read_response(&mut s, true)
    }

    /// Polls `path` until `done` holds, for at most `limit`.
    fn wait_for(&self, path: &str, limit: Duration, done: impl Fn(&Response) -> bool) -> Response {
        eventually(limit, || {
            let r = self.get(path);
            match done(&r) {
                true => Ok(r),
                false => Err(format!(
                    "{path}: last answer {} {}\nlog:\n{}",
                    r.status,
                    r.body,
                    self.log.lock().unwrap()
                )),
            }
        })
    }

    /// The uid line of /proc/PID/status of the exporter process.
    fn exporter_uids(&self) -> String {
        let members = group_members(self.child.0.id());
        let (pid, _) = members
            .iter()
            .find(|(_, comm)| comm == "gpu-exporter")
            .unwrap_or_else(|| panic!("no gpu-exporter among {members:?}"));
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[derive(DeJson)]
struct OciImage {
    config: Config,
}

#[derive(DeJson)]
struct Config {
    #[nserde(rename = "User")]
    user: String,
    #[nserde(rename = "Entrypoint")]
    entrypoint: Vec<String>,
    #[nserde(rename = "Env")]
    env: Vec<String>,
    #[nserde(rename = "ExposedPorts")]
    exposed_ports: BTreeMap<String, Empty>,
}

#[derive(DeJson)]
struct Empty {}

#[derive(DeJson)]
struct Manifest {
    layers: Vec<Layer>,
}

#[derive(DeJson)]
struct Layer {
    size: u64,
}

#[test]
fn the_image_is_small_runs_as_nobody_and_pins_nvml() {
    let Some(b) = Buildah::new("config") else {
        return;
    };
    let image = b.build(Variant::Scratch);

    let size = image_bytes(&b, &image);
    eprintln!(
        "image size: {size} bytes ({:.2} MiB)",
        size as f64 / 1048576.0
    );
    assert!(size <= MAX_IMAGE_BYTES, "{size} bytes is over 6 MiB");

    let config = b.config(&image);
    assert_eq!(config.user, "65534:65534");
    assert!(
        config
            .entrypoint
            .windows(2)
            .any(|w| w == ["--source", "nvml"]),
        "{:?}",
        config.entrypoint
    );
    assert_eq!(
        config.exposed_ports.keys().collect::<Vec<_>>(),
        ["9400/tcp"]
    );
    let path = config
        .env
        .iter()
        .find_map(|e| e.strip_prefix("LD_LIBRARY_PATH="))
        .unwrap_or_else(|| panic!("no LD_LIBRARY_PATH in {:?}", config.env));
    assert_eq!(
        path.split(':').collect::<Vec<_>>(),
        [MULTIARCH, MULTIARCH_ARM64, LIB64]
    );

    // The layer is the stage: exactly the binary, the loader and the glibc
    // libraries, and nothing anyone but root could write. libgcc_s is
    // there because the standard library as the toolchain ships it links
    // the unwinder (the binary names it), not for NVML, which does not.
    // And dcgm-exporter's counters files where its chart and the GPU
    // Operator look, with their notice.
    let mut expected = vec![
        "/etc/dcgm-exporter/1.x-compatibility-metrics.csv",
        "/etc/dcgm-exporter/LICENSE",
        "/etc/dcgm-exporter/NOTICE",
        "/etc/dcgm-exporter/dcp-metrics-included.csv",
        "/etc/dcgm-exporter/default-counters.csv",
        "/etc/ld.so.conf",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libgcc_s.so.1",
        "/lib/x86_64-linux-gnu/libdl.so.2",
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/x86_64-linux-gnu/libpthread.so.0",
        "/lib/x86_64-linux-gnu/librt.so.1",
        "/lib64/ld-linux-x86-64.so.2",
        "/usr/bin/gpu-exporter",
    ];
    expected.sort();
    assert_eq!(Variant::Scratch.files(), expected);
    for f in ["default-counters.csv", "dcp-metrics-included.csv"] {
        let staged = Variant::Scratch.stage().join("etc/dcgm-exporter").join(f);
        let fixture = root().join("tests/fixtures/dcgm").join(f);
        assert_eq!(
            std::fs::read(staged).unwrap(),
            std::fs::read(fixture).unwrap()
        );
    }
}

#[test]
fn the_image_serves_the_simulator_to_the_host_as_nobody() {
    let Some(b) = Buildah::new("sim") else {
        return;
    };
    let image = b.build(Variant::Scratch);
    // A later --source wins over the entrypoint's.
    let r = b.start(&image, &[], &["--source", "sim"]);
    let body = r.wait_for("/metrics", Duration::from_secs(20), |m| {
        m.status == 200 && m.body.contains("gpu_up{")
    });
    assert!(
        body.body
            .contains("gpu_exporter_source_info{source=\"sim\"} 1")
    );
    assert_eq!(value(&body.body, "gpu_up{gpu=\"0\""), Some(1.0));
    assert_eq!(r.get("/healthz").status, 200);
    assert_eq!(r.exporter_uids(), "65534 65534 65534 65534");
}

/// The fake libnvidia-ml and its scenario mounted in `dir`, as the NVIDIA
/// toolkit mounts the real one; the entrypoint as it is.
fn serves_the_fake_fleet_from(tag: &str, dir: &str) {
    let Some(b) = Buildah::new(tag) else {
        return;
    };
    let image = b.build(Variant::Scratch);
    let f = two_gpus(tag);
    let lib = format!("{dir}/libnvidia-ml.so.1");
    let scenario = format!("{dir}/scenario.json");
    let r = b.start(
        &image,
        &[(&f.lib, &lib), (&f.dir.join("scenario.json"), &scenario)],
        &["--collect.interval", "200ms"],
    );
    let m = r.wait_for("/metrics", Duration::from_secs(20), |m| {
        value(&m.body, "gpu_exporter_collect_success") == Some(1.0)
    });
    let body = &m.body;
    assert!(body.contains("gpu_exporter_source_info{source=\"nvml\"} 1"));
    assert!(body.contains("driver_version=\"550.54.15\""), "{body}");
    for i in 0..2 {
        assert_eq!(
            value(body, &format!("gpu_up{{gpu=\"{i}\"")),
            Some(1.0),
            "{body}"
        );
        assert_eq!(
            value(body, &format!("gpu_temperature_celsius{{gpu=\"{i}\"")),
            Some(60.0 + i as f64)
        );
    }
    assert!(!body.contains("gpu_up{gpu=\"2\""));
    assert_eq!(r.get("/readyz").status, 200);
}

/// The fake libnvidia-ml with two H100s at 60 and 61 °C.
fn two_gpus(tag: &str) -> Fixture {
    let gpu = |i: u32| {
        format!(
            r#"{{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd","bus_id":"00000000:{:02X}:00.0","temperature":{},"sm_clock_mhz":1980,"sm_clock_max_mhz":1980}}"#,
            0x18 + i,
            60 + i
        )
    };
    Fixture::new(
        &format!("image-{tag}"),
        &format!(
            r#"{{"driver_version":"550.54.15","gpus":[{},{}]}}"#,
            gpu(0),
            gpu(1)
        ),
    )
}

/// The dcgm target started as the GPU Operator starts it: its entrypoint
/// and the Operator's variables alone, the counters file the image's own.
/// It serves what the default target serves with our flags spelled out,
/// and /health answers the Operator's probes.
#[test]
fn the_dcgm_image_starts_as_the_gpu_operator_starts_it() {
    let Some(b) = Buildah::new("dcgm") else {
        return;
    };
    let dcgm = b.build_target(Variant::Scratch, Some("dcgm"));
    let ours = b.build(Variant::Scratch);
    let entrypoint = b.config(&dcgm).entrypoint;
    assert_eq!(
        entrypoint[1], "--compat.dcgm-exporter-cli",
        "{entrypoint:?}"
    );
    let f = two_gpus("dcgm");
    let lib = format!("{MULTIARCH}/libnvidia-ml.so.1");
    let scenario = format!("{MULTIARCH}/scenario.json");
    let mounts = [
        (&*f.lib, lib.as_str()),
        (&*f.dir.join("scenario.json"), scenario.as_str()),
    ];
    let dcp = "/etc/dcgm-exporter/dcp-metrics-included.csv";
    let env = [
        ("DCGM_EXPORTER_LISTEN", "127.0.0.1:0"),
        ("DCGM_EXPORTER_KUBERNETES", "true"),
        ("DCGM_EXPORTER_COLLECTORS", dcp),
        ("DCGM_EXPORTER_INTERVAL", "200"),
        ("NODE_NAME", "gpu-node-1"),
    ];
    let served = |r: &Running| {
        let m = r.wait_for("/metrics", Duration::from_secs(20), |m| {
            m.body.contains("DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"")
        });
        let names: Vec<String> = (m.body.lines())
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(String::from)
            .collect();
        (names, m.body)
    };
    let r = b.start_as(&dcgm, &mounts, &env, &[]);
    let (theirs, body) = served(&r);
    assert_eq!(r.get("/health").status, 200);
    assert!(body.contains("Hostname=\"gpu-node-1\""), "{body}");
    assert_eq!(
        value(&body, "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\""),
        Some(61.0),
        "{body}"
    );
    drop(r);
    let r = b.start_as(
        &ours,
        &mounts,
        &[("NODE_NAME", "gpu-node-1")],
        &[
            "--web.listen-address=127.0.0.1:0",
            "--collector.disable-defaults",
            "--collector.dcgm",
            "--compat.dcgm-counters",
            dcp,
            "--kubernetes.pod-labels",
            "--collect.interval=200ms",
        ],
    );
    let (same, _) = served(&r);
    assert_eq!(theirs, same);
    // What the fake library gives (temperature, clocks), under dcgm's
    // names only.
    for family in ["DCGM_FI_DEV_SM_CLOCK gauge", "DCGM_FI_DEV_GPU_TEMP gauge"] {
        assert!(theirs.iter().any(|t| t == family), "{theirs:?}");
    }
    assert!(
        !theirs.iter().any(|t| t.starts_with("gpu_up ")),
        "{theirs:?}"
    );
}

#[test]
fn the_image_finds_the_driver_in_the_multiarch_directory() {
    serves_the_fake_fleet_from("multiarch", MULTIARCH);
}

#[test]
fn the_image_finds_the_driver_in_usr_lib64() {
    serves_the_fake_fleet_from("lib64", LIB64);
}

#[test]
fn the_image_without_a_driver_keeps_serving() {
    let Some(b) = Buildah::new("nodriver") else {
        return;
    };
    let image = b.build(Variant::Scratch);
    let r = b.start(&image, &[], &["--collect.interval", "200ms"]);
    let ready = r.wait_for("/readyz", Duration::from_secs(20), |m| {
        m.body.contains("libnvidia-ml.so.1")
    });
    assert_eq!(ready.status, 503, "{}", ready.body);
    // Several failed loads later (retries start at 1 s), it is still up.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        group_members(r.child.0.id())
            .iter()
            .any(|(_, c)| c == "gpu-exporter"),
        "the exporter exited:\n{}",
        r.log.lock().unwrap()
    );
    let m = r.get("/metrics");
    assert_eq!(value(&m.body, "gpu_exporter_collect_success"), Some(0.0));
    assert!(!m.body.contains("gpu_up{"));
    assert_eq!(r.get("/healthz").status, 200);
    assert_eq!(r.get("/readyz").status, 503);
}

#[test]
fn the_static_image_serves_the_simulator_and_cannot_load_nvml() {
    if !have_target(MUSL) {
        return;
    }
    let Some(b) = Buildah::new("static") else {
        return;
    };
    let image = b.build(Variant::Static);
    let size = image_bytes(&b, &image);
    eprintln!(
        "static image size: {size} bytes ({:.2} MiB)",
        size as f64 / 1048576.0
    );
    assert!(size <= MAX_IMAGE_BYTES, "{size} bytes is over 6 MiB");
    assert_eq!(Variant::Static.files(), ["/usr/bin/gpu-exporter"]);
    assert_eq!(b.config(&image).user, "65534:65534");

    let r = b.start(&image, &[], &[]);
    let m = r.wait_for("/metrics", Duration::from_secs(20), |m| {
        m.body.contains("gpu_up{")
    });
    assert!(
        m.body
            .contains("gpu_exporter_source_info{source=\"sim\"} 1")
    );
    assert_eq!(r.exporter_uids(), "65534 65534 65534 65534");
    drop(r);

    // The fake library where the toolkit would put the real one: a static
    // binary cannot dlopen it, and says so.
    let f = Fixture::new("image-static", r#"{"gpus":[]}"#);
    let lib = format!("{MULTIARCH}/libnvidia-ml.so.1");
    let r = b.start(&image, &[(&f.lib, &lib)], &["--source", "nvml"]);
    let ready = r.wait_for("/readyz", Duration::from_secs(20), |m| {
        m.body.contains("Dynamic loading not supported")
    });
    assert_eq!(ready.status, 503);
    let m = r.get("/metrics");
    assert_eq!(value(&m.body, "gpu_exporter_collect_success"), Some(0.0));
}

#[test]
fn the_image_loads_the_real_library_and_reports_the_driver_missing() {
    let Some(real) = crate::nvidia_real::real() else {
        return;
    };
    let Some(b) = Buildah::new("real-nvml") else {
        return;
    };
    let image = b.build(Variant::Scratch);
    // Where the toolkit would mount the driver's own file; the packaged
    // name is a link to it.
    let lib = std::fs::canonicalize(&real.lib).unwrap();
    let target = format!("{MULTIARCH}/libnvidia-ml.so.1");
    let r = b.start(&image, &[(&lib, &target)], &["--collect.interval", "200ms"]);
    let ready = r.wait_for("/readyz", Duration::from_secs(30), |m| {
        m.body.contains("NVML init failed")
    });
    // Its NEEDED libraries (libpthread, libm, libdl, libc, librt) are in the
    // image: it loads, and NVML says the driver is missing.
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(
        ready
            .body
            .contains("NVML init failed: NVML_ERROR_DRIVER_NOT_LOADED (9)"),
        "{}",
        ready.body
    );
    assert!(!ready.body.contains("cannot load NVML"), "{}", ready.body);
    let m = r.get("/metrics");
    assert_eq!(value(&m.body, "gpu_exporter_collect_success"), Some(0.0));
    assert_eq!(r.get("/healthz").status, 200);
    assert_eq!(r.exporter_uids(), "65534 65534 65534 65534");
}
