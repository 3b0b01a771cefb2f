//! Builds the fake libnvidia-ml (fake-nvml/) and lays out a copy of it
//! per test, next to its scenario. Shared by the NVML test binaries.
#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds workspace member `package` (with `features`) into a target
/// directory of its own under the test's temporary directory, named `dir`
/// (so the build never waits on the lock `cargo test` holds), and returns
/// that directory's `debug/`.
pub fn build_member(package: &str, features: &[&str], dir: &str) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--offline",
            "--quiet",
            "-p",
            package,
            "--target-dir",
        ])
        .arg(&target);
    if !features.is_empty() {
        cmd.args(["--features", &features.join(",")]);
    }
    let out = cmd.output().expect("cannot run cargo");
    assert!(
        out.status.success(),
        "building {package} ({dir}) failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug")
}

/// Builds fake-nvml and returns the library's path.
pub fn build_fake(old_driver: bool) -> PathBuf {
    let (variant, features): (_, &[&str]) = match old_driver {
        true => ("old-driver", &["old-driver"]),
        false => ("current", &[]),
    };
    let lib = build_member("fake-nvml", features, &format!("fake-nvml-{variant}"))
        .join("libnvidia_ml.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

pub fn fake_library(old_driver: bool) -> &'static Path {
    static CURRENT: OnceLock<PathBuf> = OnceLock::new();
    static OLD: OnceLock<PathBuf> = OnceLock::new();
    let cell = if old_driver { &OLD } else { &CURRENT };
    cell.get_or_init(|| build_fake(old_driver))
}

/// A directory holding a copy of the fake and its scenario.
pub struct Fixture {
    pub dir: PathBuf,
    pub lib: PathBuf,
}

impl Fixture {
    pub fn new(name: &str, scenario: &str) -> Fixture {
        Fixture::build(name, scenario, false)
    }

    pub fn build(name: &str, scenario: &str, old_driver: bool) -> Fixture {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("nvml-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libnvidia-ml.so.1");
        std::fs::copy(fake_library(old_driver), &lib).unwrap();
        let f = Fixture { dir, lib };
        f.set_scenario(scenario);
        f
    }

    pub fn set_scenario(&self, scenario: &str) {
        std::fs::write(self.dir.join("scenario.json"), scenario).unwrap();
    }
}
