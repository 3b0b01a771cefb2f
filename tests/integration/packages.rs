//! The release's .deb and .rpm (deploy/package.sh, run by deploy/release.sh
//! for amd64 and arm64), checked by dist.rs's release test with the tools
//! that judge packages: lintian and rpmlint clean (the overrides and
//! filters each say why), the .deb installed into a throwaway root with
//! dpkg (its scripts run there, chrootless) and removed, the .rpm's files
//! and scriptlets read with `rpm -qlp --scripts`, the installed unit
//! verified by systemd-analyze.

use crate::common::have;
use crate::deploy::{TempDir, text};
use std::path::Path;
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn ok(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    out
}

/// Each package of `version` in `dist`, by its file name.
pub fn check_packages(dist: &Path, version: &str) {
    let pkg = version.replace('-', "~");
    for tool in ["lintian", "rpmlint", "rpm", "dpkg"] {
        if !have(tool, &["--version"]) {
            return;
        }
    }
    for (arch, rpm_arch) in [("amd64", "x86_64"), ("arm64", "aarch64")] {
        let deb = dist.join(format!("gpu-exporter_{pkg}_{arch}.deb"));
        let rpm = dist.join(format!("gpu-exporter-{pkg}-1.{rpm_arch}.rpm"));
        // Clean: no error or warning (pedantic ones included) left.
        let out = ok(Command::new("lintian")
            .args([
                "--tag-display-limit",
                "0",
                "--pedantic",
                "--fail-on",
                "error,warning,pedantic",
            ])
            .arg(&deb));
        let found = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(found.trim().is_empty(), "{arch}: {found}");
        let out = ok(Command::new("rpmlint")
            .arg("-c")
            .arg(root().join("deploy/rpmlint.toml"))
            .arg(&rpm));
        let found = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(found.contains("0 errors, 0 warnings"), "{arch}: {found}");
        rpm_lists_its_files_and_scripts(&rpm);
    }
    deb_installs_and_removes(&dist.join(format!("gpu-exporter_{pkg}_amd64.deb")));
}

fn rpm_lists_its_files_and_scripts(rpm: &Path) {
    let out = ok(Command::new("rpm").args(["-qlp", "--scripts"]).arg(rpm));
    let listed = String::from_utf8(out.stdout).unwrap();
    for file in [
        "/usr/bin/gpu-exporter",
        "/usr/lib/systemd/system/gpu-exporter.service",
        "/usr/lib/systemd/system/gpu-exporter.socket",
        "/usr/lib/sysusers.d/gpu-exporter.conf",
        "/etc/sysconfig/gpu-exporter",
        "/etc/gpu-exporter",
        "/usr/share/licenses/gpu-exporter/LICENSE",
        "/usr/share/doc/gpu-exporter/runbooks/GPUXidErrors.md",
    ] {
        assert!(
            listed.lines().any(|l| l == file),
            "{rpm:?} has no {file}:\n{listed}"
        );
    }
    // The user before the files; the service stopped only on erase.
    assert!(listed.contains("preinstall scriptlet"), "{listed}");
    assert!(listed.contains("systemd-sysusers --replace=/usr/lib/sysusers.d/gpu-exporter.conf"));
    assert!(listed.contains("if [ $1 -eq 0 ]"), "{listed}");
    // The config is kept on upgrade: %config(noreplace).
    let out = ok(Command::new("rpm").args(["-qp", "--configfiles"]).arg(rpm));
    let config = String::from_utf8(out.stdout).unwrap();
    assert_eq!(config.trim(), "/etc/sysconfig/gpu-exporter", "{config}");
}

/// dpkg into a throwaway root: the scripts run on this host with
/// DPKG_ROOT set (`--force-script-chrootless`), so the user lands in that
/// root's /etc/passwd; removal keeps the config, purge takes it.
fn deb_installs_and_removes(deb: &Path) {
    let dir = TempDir::new("deb-root");
    let r = &dir.0;
    for d in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("var/lib/dpkg/status"), "").unwrap();
    let dpkg = |args: &[&str]| {
        ok(Command::new("dpkg")
            .arg("--root")
            .arg(r)
            // Its Depends (libc6, systemd) are this host's, not the root's.
            .args(["--force-script-chrootless", "--force-depends"])
            .args(args))
    };
    dpkg(&["-i", deb.to_str().unwrap()]);
    let passwd = std::fs::read_to_string(r.join("etc/passwd")).unwrap_or_default();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("gpu-exporter:x:") && l.ends_with(":/:/usr/sbin/nologin")),
        "{passwd}"
    );
    let defaults = std::fs::read_to_string(r.join("etc/default/gpu-exporter")).unwrap();
    assert!(
        defaults.contains("GPU_EXPORTER_ARGS=\"--source nvml\""),
        "{defaults}"
    );
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(r.join("etc/gpu-exporter"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o777, 0o700);
    unit_verifies(r);
    // Removed: only the config is left of it.
    dpkg(&["-r", "gpu-exporter"]);
    assert!(!r.join("usr/bin/gpu-exporter").exists());
    assert!(
        !r.join("usr/lib/systemd/system/gpu-exporter.service")
            .exists()
    );
    assert!(
        r.join("etc/default/gpu-exporter").exists(),
        "the config went with remove"
    );
    dpkg(&["--purge", "gpu-exporter"]);
    assert!(!r.join("etc/default/gpu-exporter").exists());
    assert!(!r.join("etc/gpu-exporter").exists());
}

/// The installed unit, its flags from the installed config file, its
/// binary the installed one: systemd-analyze takes it as it stands.
fn unit_verifies(r: &Path) {
    if !have("systemd-analyze", &["--version"]) {
        return;
    }
    let unit =
        std::fs::read_to_string(r.join("usr/lib/systemd/system/gpu-exporter.service")).unwrap();
    assert!(
        unit.contains("\nExecStart=/usr/bin/gpu-exporter $GPU_EXPORTER_ARGS\n"),
        "{unit}"
    );
    assert!(
        unit.contains("\nEnvironmentFile=-/etc/default/gpu-exporter\n"),
        "{unit}"
    );
    assert!(unit.contains("\nUser=gpu-exporter\n"), "{unit}");
    let local = unit
        .replace(
            "/usr/bin/gpu-exporter",
            r.join("usr/bin/gpu-exporter").to_str().unwrap(),
        )
        .replace(
            "/etc/default/gpu-exporter",
            r.join("etc/default/gpu-exporter").to_str().unwrap(),
        );
    let dir = TempDir::new("deb-unit");
    let (ok, out) = crate::deploy::systemd_verify(&dir.0, &local);
    assert!(ok && out.is_empty(), "{out}");
}
