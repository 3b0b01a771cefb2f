//! The release (`deploy/release.sh VERSION`): both architectures' tarballs,
//! the SBOM and SHA256SUMS in dist/, and one OCI image index holding the
//! linux/amd64 and linux/arm64 images, pushed with `--push` to a real
//! registry (Debian's docker-registry, the CNCF distribution registry) on
//! 127.0.0.1 and read back with skopeo. Its own buildah storage, registry
//! storage and dist/, all removed at the end; the binaries are the ones
//! the image and arm64 tests build (the same target directory).

use crate::arm64::{arm64_binary, elf_machine, have_arm64};
use crate::common::{have, output_text};
use crate::image::{auditable, release_binary, release_target_dir, toolchain_path};
use nanoserde::DeJson;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const VERSION: &str = "0.1.0-test";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A registry on a free loopback port with its storage in `dir`; killed
/// on drop.
struct Registry {
    child: Child,
    addr: String,
}

impl Registry {
    fn start(dir: &Path) -> Registry {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: {addr}\n",
                dir.join("storage").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn docker-registry");
        let mut r = Registry { child, addr };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(&r.addr).is_err() {
            if let Some(status) = r.child.try_wait().unwrap() {
                panic!("docker-registry exited: {status}");
            }
            assert!(Instant::now() < deadline, "the registry never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        r
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ok(mut cmd: Command) -> Output {
    let what = format!("{cmd:?}");
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what}: {}", output_text(&out));
    out
}

#[derive(DeJson)]
struct Index {
    #[nserde(rename = "mediaType")]
    media_type: String,
    manifests: Vec<Entry>,
}

#[derive(DeJson)]
struct Entry {
    platform: Platform,
}

#[derive(DeJson)]
struct Platform {
    architecture: String,
    os: String,
}

#[derive(DeJson)]
struct Manifest {
    config: Blob,
    layers: Vec<Blob>,
}

#[derive(DeJson)]
struct Blob {
    digest: String,
    size: u64,
}

#[derive(DeJson)]
struct ImageConfig {
    architecture: String,
    os: String,
    config: RunConfig,
}

#[derive(DeJson)]
struct RunConfig {
    #[nserde(rename = "Env")]
    env: Vec<String>,
}

#[derive(DeJson)]
struct Sbom {
    #[nserde(rename = "bomFormat")]
    bom_format: String,
    components: Vec<Component>,
}

#[derive(DeJson)]
struct Component {
    name: String,
    version: String,
    purl: String,
}

#[derive(DeJson)]
struct Audit {
    packages: Vec<AuditPackage>,
}

#[derive(DeJson)]
struct AuditPackage {
    name: String,
    version: String,
}

/// The blob `digest` of a `skopeo copy ... dir:` folder.
fn blob(dir: &Path, digest: &str) -> PathBuf {
    dir.join(digest.strip_prefix("sha256:").unwrap())
}

#[test]
fn the_release_pushes_one_index_of_both_architectures_with_checksummed_artifacts() {
    if !have_arm64()
        || !have("buildah", &["--version"])
        || !have("skopeo", &["--version"])
        || !have("docker-registry", &["--version"])
        || !have("sha256sum", &["--version"])
    {
        return;
    }
    if !auditable() {
        eprintln!(
            "SKIP: the release needs cargo-auditable (cargo install --locked cargo-auditable)"
        );
        return;
    }
    // Built once per test run, shared with the image and arm64 tests: the
    // release finds both up to date.
    let amd64 = release_binary();
    let arm64 = arm64_binary();

    let dir = std::env::temp_dir().join(format!("gpu-exporter-dist-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Cleanup(dir.clone());
    let registry = Registry::start(&dir);
    let dist = dir.join("dist");
    let started = Instant::now();
    let mut cmd = Command::new("nice");
    cmd.arg("-n19")
        .arg(root().join("deploy/release.sh"))
        .args(["--push", &registry.addr, VERSION])
        .current_dir(root())
        .env("PATH", toolchain_path())
        .env("CARGO_TARGET_DIR", release_target_dir())
        .env("DIST", &dist)
        .env("CARGO_FLAGS", "--offline --quiet -j1")
        .env(
            "BUILDAH_FLAGS",
            format!(
                "--root {0}/storage --runroot {0}/run --storage-driver vfs",
                dir.join("buildah").display()
            ),
        );
    let out = ok(cmd);
    println!(
        "release.sh in {:?}:\n{}",
        started.elapsed(),
        String::from_utf8_lossy(&out.stderr)
    );

    // --- dist/: every artifact checksummed, and the checksums hold.
    let mut check = Command::new("sha256sum");
    check.args(["-c", "SHA256SUMS"]).current_dir(&dist);
    let sums = String::from_utf8(ok(check).stdout).unwrap();
    let archive = format!("gpu-exporter-{VERSION}-image.oci.tar");
    let sbom = format!("gpu-exporter-{VERSION}.cdx.json");
    let mut checked: Vec<&str> = sums
        .lines()
        .filter_map(|l| l.strip_suffix(": OK"))
        .collect();
    checked.sort();
    let mut expected = vec![
        format!("gpu-exporter-{VERSION}-linux-amd64.tar.gz"),
        format!("gpu-exporter-{VERSION}-linux-arm64.tar.gz"),
        archive.clone(),
        format!("gpu-exporter-{VERSION}-dcgm-image.oci.tar"),
        sbom.clone(),
        format!("gpu-exporter-{VERSION}.tgz"),
        "gpu-exporter_0.1.0~test_amd64.deb".into(),
        "gpu-exporter_0.1.0~test_arm64.deb".into(),
        "gpu-exporter-0.1.0~test-1.x86_64.rpm".into(),
        "gpu-exporter-0.1.0~test-1.aarch64.rpm".into(),
    ];
    expected.sort();
    assert_eq!(checked, expected, "{sums}");
    // A corrupted artifact fails the check.
    let copy = dir.join("corrupt");
    ok({
        let mut c = Command::new("cp");
        c.arg("-r").arg(&dist).arg(&copy);
        c
    });
    std::fs::write(copy.join(&sbom), "{}").unwrap();
    let bad = Command::new("sha256sum")
        .args(["-c", "--quiet", "SHA256SUMS"])
        .current_dir(&copy)
        .output()
        .unwrap();
    assert!(!bad.status.success(), "sha256sum -c passed a changed file");

    let image = format!("{}/gpu-exporter:{VERSION}", registry.addr);
    for (arch, machine, built) in [("amd64", 0x3E, amd64), ("arm64", 0xB7, arm64)] {
        let pkg = format!("gpu-exporter-{VERSION}-linux-{arch}");
        let x = dir.join("x").join(arch);
        std::fs::create_dir_all(&x).unwrap();
        ok({
            let mut c = Command::new("tar");
            c.arg("-xzf")
                .arg(dist.join(format!("{pkg}.tar.gz")))
                .arg("-C")
                .arg(&x);
            c
        });
        let tree = x.join(&pkg);
        let bin = tree.join("gpu-exporter");
        assert_eq!(elf_machine(&bin), machine, "{pkg}: the binary's machine");
        assert_eq!(
            std::fs::read(&bin).unwrap(),
            std::fs::read(built).unwrap(),
            "{pkg}"
        );
        for f in [
            "README.md",
            "docs/flags.md",
            "LICENSE",
            "deploy/release.sh",
            "deploy/container/stage.sh",
        ] {
            assert!(tree.join(f).is_file(), "{pkg} has no {f}");
        }
        let license = std::fs::read_to_string(tree.join("LICENSE")).unwrap();
        assert!(license.contains("Apache License"), "{pkg}: LICENSE");
        let daemonset =
            std::fs::read_to_string(tree.join("deploy/kubernetes/daemonset.yaml")).unwrap();
        assert!(
            daemonset.contains(&format!("image: {image}\n")),
            "{pkg}: the DaemonSet does not name {image}"
        );
        assert!(!daemonset.contains("image: gpu-exporter:"), "{pkg}");
        // The dependency list cargo auditable embedded, read back.
        // (It has no flag that succeeds: the probe reads this binary.)
        if have("rust-audit-info", &[bin.to_str().unwrap()]) {
            let mut c = Command::new("rust-audit-info");
            c.arg(&bin);
            let audit: Audit =
                DeJson::deserialize_json(&String::from_utf8(ok(c).stdout).unwrap()).unwrap();
            let names: Vec<&str> = audit.packages.iter().map(|p| p.name.as_str()).collect();
            for crate_name in ["gpu-exporter", "rustls", "ring", "smol"] {
                assert!(
                    names.contains(&crate_name),
                    "{pkg}: {crate_name} not in {names:?}"
                );
            }
            // Every crate in the binary is in the SBOM, at its version.
            let sbom: Sbom =
                DeJson::deserialize_json(&std::fs::read_to_string(dist.join(&sbom)).unwrap())
                    .unwrap();
            assert_eq!(sbom.bom_format, "CycloneDX");
            for p in audit.packages.iter().filter(|p| p.name != "gpu-exporter") {
                assert!(
                    sbom.components.iter().any(|c| c.name == p.name
                        && c.version == p.version
                        && c.purl == format!("pkg:cargo/{}@{}", p.name, p.version)),
                    "{} {} is in the binary but not in the SBOM",
                    p.name,
                    p.version
                );
            }
        }
    }

    // --- the packages: lint, install, remove.
    crate::packages::check_packages(&dist, VERSION);

    // --- the registry: the chart beside the image, pulled back.
    crate::helm::the_released_chart_round_trips(&registry.addr, &dist, VERSION);

    // --- the registry: one index, both platforms.
    let mut inspect = Command::new("skopeo");
    inspect
        .args(["inspect", "--raw", "--tls-verify=false"])
        .arg(format!("docker://{image}"));
    let raw = String::from_utf8(ok(inspect).stdout).unwrap();
    let index: Index = DeJson::deserialize_json(&raw).unwrap_or_else(|e| panic!("{e}: {raw}"));
    assert!(
        index.media_type.ends_with("image.index.v1+json")
            || index.media_type.ends_with("manifest.list.v2+json"),
        "{raw}"
    );
    let mut platforms: Vec<String> = index
        .manifests
        .iter()
        .map(|m| format!("{}/{}", m.platform.os, m.platform.architecture))
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{raw}");

    for (arch, machine, multiarch, loader) in [
        (
            "amd64",
            0x3E,
            "/usr/lib/x86_64-linux-gnu",
            "lib64/ld-linux-x86-64.so.2",
        ),
        (
            "arm64",
            0xB7,
            "/usr/lib/aarch64-linux-gnu",
            "lib/ld-linux-aarch64.so.1",
        ),
    ] {
        let pulled = dir.join("pulled").join(arch);
        std::fs::create_dir_all(pulled.parent().unwrap()).unwrap();
        let mut copy = Command::new("skopeo");
        copy.args([
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            "--override-os",
            "linux",
        ])
        .args(["--override-arch", arch])
        .arg(format!("docker://{image}"))
        .arg(format!("dir:{}", pulled.display()));
        ok(copy);
        let manifest: Manifest = DeJson::deserialize_json(
            &std::fs::read_to_string(pulled.join("manifest.json")).unwrap(),
        )
        .unwrap();
        let config: ImageConfig = DeJson::deserialize_json(
            &std::fs::read_to_string(blob(&pulled, &manifest.config.digest)).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (config.os.as_str(), config.architecture.as_str()),
            ("linux", arch)
        );
        let path = config
            .config
            .env
            .iter()
            .find_map(|e| e.strip_prefix("LD_LIBRARY_PATH="))
            .unwrap_or_else(|| panic!("{arch}: no LD_LIBRARY_PATH"));
        assert!(
            path.split(':').any(|d| d == multiarch),
            "{arch}: LD_LIBRARY_PATH={path} does not name {multiarch}"
        );
        assert_eq!(manifest.layers.len(), 1, "{arch}: one layer");
        let layer = &manifest.layers[0];
        let files = dir.join("layer").join(arch);
        std::fs::create_dir_all(&files).unwrap();
        ok({
            let mut c = Command::new("tar");
            c.arg("-xf")
                .arg(blob(&pulled, &layer.digest))
                .arg("-C")
                .arg(&files);
            c
        });
        let bin = files.join("usr/bin/gpu-exporter");
        assert_eq!(elf_machine(&bin), machine, "{arch}: the image's binary");
        assert_eq!(
            elf_machine(&files.join(loader)),
            machine,
            "{arch}: /{loader}"
        );
        let unpacked: u64 = walk(&files)
            .iter()
            .map(|f| f.metadata().unwrap().len())
            .sum();
        assert!(
            unpacked <= 6 * 1024 * 1024,
            "linux/{arch}: {unpacked} bytes is over 6 MiB"
        );
        println!(
            "linux/{arch} image: {} bytes compressed, {unpacked} bytes of files ({:.2} MiB), binary {} bytes",
            layer.size + manifest.config.size,
            unpacked as f64 / 1048576.0,
            bin.metadata().unwrap().len()
        );
    }
}

/// Every plain file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                dirs.push(e.path());
            } else if t.is_file() {
                files.push(e.path());
            }
        }
    }
    files
}

/// Removes the test's folder, buildah's storage included, at the end.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let b = self.0.join("buildah");
        let _ = Command::new("buildah")
            .arg("--root")
            .arg(b.join("storage"))
            .arg("--runroot")
            .arg(b.join("run"))
            .args(["--storage-driver", "vfs", "rmi", "--all", "--force"])
            .output();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
