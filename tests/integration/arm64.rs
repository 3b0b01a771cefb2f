//! The 64-bit Arm build (aarch64-unknown-linux-gnu), cross-linked by
//! Debian's gcc-aarch64-linux-gnu (.cargo/config.toml) and run here under
//! qemu-user with the cross sysroot (libc6-dev-arm64-cross) as its root:
//! the shipped build against the aarch64 fake NVML, against Debian's real
//! arm64 libnvidia-ml1 without a driver (`.ci/nvidia-real.sh --arch arm64`
//! unpacks it into target/nvidia-real-arm64), and on the arm64 image's own
//! loader and glibc (the stage `deploy/container/stage.sh --arch arm64`
//! lays out). The unit tests run under qemu from `.ci/run` (`cargo test
//! --target aarch64-unknown-linux-gnu --lib`).

use crate::common::{Exporter, check_metrics, have, value};
use crate::nvidia_real::as_nobody;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub const AARCH64: &str = "aarch64-unknown-linux-gnu";
/// The cross sysroot: the arm64 glibc the loader and the libraries come
/// from, for qemu's -L and for the image.
pub const SYSROOT: &str = "/usr/aarch64-linux-gnu";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Whether the aarch64 target, the cross gcc, its sysroot and qemu are
/// here. Missing locally: skip with a reason. Missing in CI: fail.
pub fn have_arm64() -> bool {
    static CELL: OnceLock<bool> = OnceLock::new();
    *CELL.get_or_init(|| {
        if !crate::image::have_target(AARCH64) {
            return false;
        }
        if !have("aarch64-linux-gnu-gcc", &["--version"]) || !have("qemu-aarch64", &["--version"]) {
            return false;
        }
        let libc = Path::new(SYSROOT).join("lib/libc.so.6");
        if !libc.exists() {
            assert!(
                !in_ci(),
                "{} is required in CI (libc6-dev-arm64-cross)",
                libc.display()
            );
            eprintln!(
                "SKIP: no {} (apt-get install libc6-dev-arm64-cross)",
                libc.display()
            );
            return false;
        }
        true
    })
}

/// The shipped aarch64 binary, built once per test run by
/// `deploy/build.sh --target aarch64-unknown-linux-gnu` into the target
/// directory the release test builds in, so that it is built once.
pub fn arm64_binary() -> &'static Path {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| crate::image::shipped(&["--target", AARCH64]))
}

/// The fake libnvidia-ml cross-built for aarch64, once per test run.
fn arm64_fake_nvml() -> &'static Path {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| {
        let target = tmp().join("fake-nvml-aarch64");
        let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(root())
            .args(["build", "--offline", "--quiet", "-p", "fake-nvml"])
            .args(["--target", AARCH64, "--target-dir"])
            .arg(&target)
            .output()
            .expect("run cargo");
        assert!(
            out.status.success(),
            "building fake-nvml for {AARCH64}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        target.join(AARCH64).join("debug/libnvidia_ml.so")
    })
}

/// The ELF header's e_machine of `file`: 0x3E x86-64, 0xB7 AArch64.
pub fn elf_machine(file: &Path) -> u16 {
    let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert_eq!(&bytes[..4], b"\x7fELF", "{} is not ELF", file.display());
    u16::from_le_bytes([bytes[18], bytes[19]])
}

/// `qemu-aarch64 -L ROOT BIN`: ROOT is where the loader and the
/// libraries are looked up first, and the guest's library path names
/// ROOT's directories (guest paths, which -L resolves in ROOT first): on
/// a host with multiarch arm64 libraries, the loader would otherwise find
/// the host's libc in its default directory /lib/aarch64-linux-gnu and
/// pair ROOT's loader with it, which spins (.ci/nvidia-host.sh).
fn qemu(root: &Path, bin: &Path) -> Command {
    let mut cmd = Command::new("qemu-aarch64");
    guest(&mut cmd, root, bin);
    cmd
}

const GUEST_LIBRARY_PATH: &str =
    "LD_LIBRARY_PATH=/lib:/lib/aarch64-linux-gnu:/usr/lib/aarch64-linux-gnu";

fn guest(cmd: &mut Command, root: &Path, bin: &Path) {
    cmd.arg("-L")
        .arg(root)
        .args(["-E", GUEST_LIBRARY_PATH])
        .arg(bin);
}

/// The same as nobody where we are root (the real NVML's init as root
/// would create /dev/nvidiactl); None, after printing why, without setpriv.
fn qemu_as_nobody(root: &Path, bin: &Path) -> Option<Command> {
    let mut cmd = as_nobody(Path::new("qemu-aarch64"))?;
    guest(&mut cmd, root, bin);
    Some(cmd)
}

#[test]
fn the_arm64_binary_is_aarch64_and_serves_the_fake_nvml_fleet() {
    if !have_arm64() {
        return;
    }
    let bin = arm64_binary();
    assert_eq!(elf_machine(bin), 0xB7, "{} is not AArch64", bin.display());
    let fake = arm64_fake_nvml();
    assert_eq!(elf_machine(fake), 0xB7, "{} is not AArch64", fake.display());

    let dir = tmp().join("nvml-arm64-fleet");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libnvidia-ml.so.1");
    std::fs::copy(fake, &lib).unwrap();
    let gpus: Vec<String> = (0..2).map(|i| crate::sources::gpu(i, "")).collect();
    std::fs::write(dir.join("scenario.json"), crate::sources::fleet(&gpus)).unwrap();
    let e = Exporter::serving(
        qemu(Path::new(SYSROOT), bin),
        &[
            "--source",
            "nvml",
            "--nvml.library",
            lib.to_str().unwrap(),
            "--xid.kmsg",
            "",
            "--collect.interval",
            "200ms",
        ],
    );
    let body = e.wait_for("/metrics", Duration::from_secs(60), |b| {
        value(b, "gpu_exporter_collect_success") == Some(1.0)
    });
    assert!(body.contains("driver_version=\"550.54.15\""), "{body}");
    for i in 0..2 {
        assert_eq!(value(&body, &format!("gpu_up{{gpu=\"{i}\"")), Some(1.0));
        assert_eq!(
            value(&body, &format!("gpu_temperature_celsius{{gpu=\"{i}\"")),
            Some(50.0 + f64::from(i)),
            "{body}"
        );
    }
    assert!(!body.contains("gpu_up{gpu=\"2\""));
    check_metrics(&body);
    assert_eq!(e.get("/readyz", &[]).status, 200);
}

/// Debian's arm64 libnvidia-ml1, unpacked (never installed), or None after
/// printing why (a failure in CI).
fn real_arm64() -> Option<PathBuf> {
    let lib = root().join(
        "target/nvidia-real-arm64/usr/lib/aarch64-linux-gnu/nvidia/current/libnvidia-ml.so.1",
    );
    if lib.exists() {
        return Some(lib);
    }
    assert!(
        !in_ci(),
        "the real arm64 libnvidia-ml is required in CI (.ci/run runs .ci/nvidia-real.sh --arch arm64)"
    );
    eprintln!(
        "SKIP: no {} (run .ci/nvidia-real.sh --arch arm64)",
        lib.display()
    );
    None
}

#[test]
fn the_arm64_binary_on_the_real_arm64_library_reports_the_driver_missing_and_keeps_serving() {
    if !have_arm64() {
        return;
    }
    let Some(lib) = real_arm64() else { return };
    assert_eq!(elf_machine(&lib), 0xB7, "{} is not AArch64", lib.display());
    let Some(cmd) = qemu_as_nobody(Path::new(SYSROOT), arm64_binary()) else {
        return;
    };
    let e = Exporter::serving(
        cmd,
        &[
            "--source",
            "nvml",
            "--nvml.library",
            lib.to_str().unwrap(),
            "--xid.kmsg",
            "",
        ],
    );
    let ready = e.wait_for("/readyz", Duration::from_secs(60), |b| {
        b.contains("NVML init failed")
    });
    // It loaded (no dlopen error: the library is aarch64 and so is the
    // exporter) and NVML said why.
    assert!(
        ready.contains("NVML init failed: NVML_ERROR_DRIVER_NOT_LOADED (9)"),
        "{ready}"
    );
    assert!(!ready.contains("cannot load NVML"), "{ready}");
    // A retry or two later it is still serving, and still not ready.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(e.get("/readyz", &[]).status, 503);
    assert_eq!(e.get("/healthz", &[]).status, 200);
    let m = e.metrics(None);
    assert_eq!(m.status, 200);
    assert_eq!(value(&m.body, "gpu_exporter_collect_success"), Some(0.0));
    assert!(!m.body.contains("gpu_up{"));
}

#[test]
fn the_arm64_stage_runs_on_its_own_loader_and_glibc() {
    if !have_arm64() {
        return;
    }
    let stage = tmp().join("image-stage-arm64");
    let out = Command::new(root().join("deploy/container/stage.sh"))
        .args(["--arch", "arm64"])
        .arg(&stage)
        .env("GPU_EXPORTER_BIN", arm64_binary())
        .output()
        .expect("run stage.sh");
    assert!(
        out.status.success(),
        "stage.sh --arch arm64: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "lib/ld-linux-aarch64.so.1",
        "lib/aarch64-linux-gnu/libc.so.6",
        "usr/bin/gpu-exporter",
    ] {
        assert_eq!(elf_machine(&stage.join(f)), 0xB7, "/{f}");
    }
    assert!(!stage.join("lib64").exists(), "an x86-64 loader directory");
    assert_eq!(
        std::fs::read_to_string(stage.join("etc/ld.so.conf")).unwrap(),
        "/usr/lib/aarch64-linux-gnu\n/usr/lib64\n"
    );
    // The stage as the root: qemu finds the loader and the libraries there
    // (the host has no arm64 ones of its own outside the sysroot).
    let e = Exporter::serving(
        qemu(&stage, &stage.join("usr/bin/gpu-exporter")),
        &["--xid.kmsg", ""],
    );
    let body = e.wait_for("/metrics", Duration::from_secs(60), |b| {
        b.contains("gpu_up{")
    });
    assert!(body.contains("gpu_exporter_source_info{source=\"sim\"} 1"));
}
