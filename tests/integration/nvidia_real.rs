//! The real NVIDIA pieces on a machine without a GPU: Debian's
//! `libnvidia-ml.so.1` and `nvidia-smi` (non-free, fetched and unpacked,
//! never installed, by `.ci/nvidia-real.sh` into `target/nvidia-real`).
//! Without a driver they load and answer NVML_ERROR_DRIVER_NOT_LOADED and
//! exit code 9, which is what these tests hold the exporter to; and the
//! library's real cost in memory is what the shipped limits are held to.
//!
//! NVML's init run as root creates `/dev/nvidiactl` (mknod), so every
//! process that initialises it runs as nobody (65534) through `setpriv`.

use crate::common::{BIN, Exporter, have, temp_file, value};
use crate::image::release_binary;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Shipped memory limits must hold the measured peak this many times: the
/// rest is for what NVML allocates per GPU with a driver, which no machine
/// here can measure.
pub const MARGIN: f64 = 3.0;

pub struct Real {
    pub lib: PathBuf,
    pub smi: PathBuf,
}

impl Real {
    /// The directory nvidia-smi needs on LD_LIBRARY_PATH.
    pub fn lib_dir(&self) -> &Path {
        self.lib.parent().unwrap()
    }
}

/// The unpacked packages, or None after printing why (a failure in CI).
pub fn real() -> Option<Real> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nvidia-real");
    let real = Real {
        lib: dir.join("usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1"),
        smi: dir.join("usr/lib/nvidia/current/nvidia-smi"),
    };
    if real.lib.exists() && real.smi.exists() {
        return Some(real);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "the real libnvidia-ml and nvidia-smi are required in CI (.ci/run runs .ci/nvidia-real.sh)"
    );
    eprintln!("SKIP: no real NVIDIA library in target/nvidia-real (run .ci/nvidia-real.sh)");
    None
}

fn root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .is_some_and(|u| u.split_whitespace().next() == Some("0"))
    })
}

/// A command running `program` as nobody when we are root (plain
/// otherwise); None, after printing why, when setpriv is missing.
pub fn as_nobody(program: &Path) -> Option<Command> {
    if !root() {
        return Some(Command::new(program));
    }
    if !have("setpriv", &["--version"]) {
        return None;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(program);
    Some(cmd)
}

/// Device nodes NVML's init would create; none may be left behind.
fn nodes() -> Vec<PathBuf> {
    ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn every_nvml_symbol_the_exporter_resolves_is_in_the_real_library() {
    use sources::nvml::{SYMBOLS, missing_symbols};
    let Some(r) = real() else { return };
    // Loaded, not initialised: nothing runs as root that makes a node.
    assert_eq!(missing_symbols(&r.lib), Ok(vec![]));
    println!("{} NVML symbols, all in {}", SYMBOLS.len(), r.lib.display());
}

#[test]
fn nvml_on_the_real_library_keeps_serving_with_the_drivers_reason() {
    let Some(r) = real() else { return };
    let Some(cmd) = as_nobody(Path::new(BIN)) else {
        return;
    };
    let before = nodes();
    let lib = r.lib.to_str().unwrap();
    let e = Exporter::serving(
        cmd,
        &["--source", "nvml", "--nvml.library", lib, "--xid.kmsg", ""],
    );
    let ready = e.wait_for("/readyz", Duration::from_secs(20), |b| {
        b.contains("NVML init failed")
    });
    // It loaded (no dlopen error) and NVML said why.
    assert!(
        ready.contains("NVML init failed: NVML_ERROR_DRIVER_NOT_LOADED (9)"),
        "{ready}"
    );
    assert!(!ready.contains("cannot load NVML"), "{ready}");
    assert_eq!(e.get("/readyz", &[]).status, 503);
    assert_eq!(e.get("/healthz", &[]).status, 200);
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(0.0));
    assert!(!body.contains("gpu_up{"));
    // Between retries the library is unloaded: its 12.7 MB of writable
    // memory is given back (a retry maps it for milliseconds).
    crate::common::eventually(Duration::from_secs(10), || {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", e.pid())).unwrap();
        match maps.contains("libnvidia-ml") {
            false => Ok(()),
            true => Err("libnvidia-ml still mapped".to_string()),
        }
    });
    assert_eq!(nodes(), before, "NVML left a device node behind");
}

/// `auto` on a host with the real library and no driver (a kernel upgrade
/// that broke the module): NVML, not ready, with the driver's reason;
/// never the simulator's invented GPUs.
#[test]
fn auto_with_the_real_library_and_no_driver_serves_nvml_not_ready() {
    let Some(r) = real() else { return };
    let Some(mut cmd) = as_nobody(Path::new(BIN)) else {
        return;
    };
    cmd.env("LD_LIBRARY_PATH", r.lib_dir());
    let no_sysfs = std::env::temp_dir().join("gpu-exporter-no-sysfs");
    let e = Exporter::serving(
        cmd,
        &[
            "--source",
            "auto",
            "--smi.path",
            "/nonexistent/nvidia-smi",
            "--xid.kmsg",
            "",
            "--path.sysfs",
            no_sysfs.to_str().unwrap(),
        ],
    );
    let ready = e.wait_for("/readyz", Duration::from_secs(20), |b| {
        b.contains("NVML init failed")
    });
    assert!(ready.contains("NVML_ERROR_DRIVER_NOT_LOADED"), "{ready}");
    assert_eq!(e.get("/readyz", &[]).status, 503);
    let body = e.metrics(None).body;
    assert!(
        body.contains("gpu_exporter_source_info{source=\"nvml\"} 1"),
        "{body}"
    );
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(0.0));
    assert!(!body.contains("gpu_up{"), "{body}");
    assert!(!e.log().contains("SIMULATED"), "{}", e.log());
}

#[test]
fn smi_on_the_real_nvidia_smi_keeps_serving_with_its_own_message() {
    let Some(r) = real() else { return };
    let Some(mut cmd) = as_nobody(Path::new(BIN)) else {
        return;
    };
    let before = nodes();
    cmd.env("LD_LIBRARY_PATH", r.lib_dir());
    let e = Exporter::serving(
        cmd,
        &[
            "--source",
            "smi",
            "--smi.path",
            r.smi.to_str().unwrap(),
            "--xid.kmsg",
            "",
        ],
    );
    let ready = e.wait_for("/readyz", Duration::from_secs(20), |b| {
        b.contains("nvidia-smi failed")
    });
    assert!(
        ready.contains(
            "nvidia-smi failed (exit status: 9): NVIDIA-SMI has failed because it couldn't \
             communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is \
             installed and running.\n"
        ),
        "{ready}"
    );
    assert_eq!(e.get("/healthz", &[]).status, 200);
    assert_eq!(
        value(&e.metrics(None).body, "gpu_exporter_collect_success"),
        Some(0.0)
    );
    assert_eq!(nodes(), before, "nvidia-smi left a device node behind");
}

/// A shared object that, preloaded into the exporter, loads the real
/// library and initialises NVML as far as a machine without a GPU lets it,
/// and keeps it loaded: the state of a node where NVML is up.
const KEEP_C: &str = r#"
#include <dlfcn.h>
#include <stdlib.h>
__attribute__((constructor)) static void keep(void) {
    const char *path = getenv("NVML_KEEP");
    if (!path) return;
    void *lib = dlopen(path, RTLD_NOW);
    if (!lib) return;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "nvmlInitWithFlags");
    if (init) init(0);
}
"#;

/// A memory limit in bytes from `Mi`/`M` spellings.
fn bytes(limit: &str) -> f64 {
    let limit = limit.trim().trim_matches('"');
    if let Some(n) = limit.strip_suffix("Mi") {
        return n.parse::<f64>().unwrap() * 1024.0 * 1024.0;
    }
    if let Some(n) = limit.strip_suffix('M') {
        return n.parse::<f64>().unwrap() * 1024.0 * 1024.0;
    }
    panic!("unknown memory limit {limit}")
}

/// Every memory limit the deploy files ship, with where it is.
pub fn shipped_limits() -> Vec<(String, f64)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let mut out = Vec::new();
    for file in [
        "kubernetes/daemonset.yaml",
        "kubernetes/sidecar-example.yaml",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        // `memory:` right under a `limits:` (the model server's limits
        // hold only its GPU).
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            if pair[0] == "limits:"
                && let Some(v) = pair[1].strip_prefix("memory:")
            {
                out.push((format!("{file} limits.memory"), bytes(v)));
            }
        }
    }
    let unit = std::fs::read_to_string(root.join("systemd/gpu-exporter.service")).unwrap();
    for v in unit.lines().filter_map(|l| l.strip_prefix("MemoryMax=")) {
        out.push(("systemd/gpu-exporter.service MemoryMax".into(), bytes(v)));
    }
    assert_eq!(out.len(), 3, "{out:?}");
    out
}

/// Resident KiB of the mappings of `pid` whose path contains `name`, and
/// of the nameless mapping right after them (the part of its .bss beyond
/// the file).
fn rss_of(pid: u32, name: &str) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
    let mut total = 0;
    let mut inside = false;
    let mut end_of_lib = None;
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        if let Some((start, end)) = first.split_once('-')
            && !first.ends_with(':')
        {
            let path = words.nth(4);
            let named = path.is_some_and(|p| p.contains(name));
            inside = named || (path.is_none() && end_of_lib.as_deref() == Some(start));
            end_of_lib = named.then(|| end.to_string());
        } else if inside && let Some(kb) = line.strip_prefix("Rss:") {
            total += kb
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap();
        }
    }
    total
}

#[test]
fn the_shipped_memory_limits_hold_the_real_library_with_margin() {
    let Some(r) = real() else { return };
    if !have("cc", &["--version"]) {
        return;
    }
    let Some(mut cmd) = as_nobody(Path::new("env")) else {
        return;
    };
    let before = nodes();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nvml-keep");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("keep.c");
    std::fs::write(&src, KEEP_C).unwrap();
    let so = dir.join("keep.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&so)
        .arg(&src)
        .arg("-ldl")
        .status()
        .unwrap();
    assert!(built.success(), "cc keep.c");

    // The release exporter on eight simulated GPUs, the real library
    // loaded and initialised in it, under a full scrape load.
    let fleet = temp_file(
        "nvml-real-8.json",
        &format!(r#"{{"gpus":[{}]}}"#, ["{}"; 8].join(",")),
    );
    cmd.arg(format!("LD_PRELOAD={}", so.display()))
        .arg(format!("NVML_KEEP={}", r.lib.display()))
        .arg(release_binary());
    let e = Exporter::serving(cmd, &["--sim.scenario", fleet.to_str().unwrap()]);
    e.wait_first_collection();
    let lib = rss_of(e.pid(), "libnvidia-ml");
    assert!(lib > 10 * 1024, "the library is not initialised: {lib} KiB");
    crate::release::load(&e, 20_000);
    let hwm = e.status_kib("VmHWM");
    let rss = e.status_kib("VmRSS");
    let lib = rss_of(e.pid(), "libnvidia-ml");
    let deps: u64 = ["/libm.so", "/librt.so", "/libdl.so", "/libpthread.so"]
        .iter()
        .map(|n| rss_of(e.pid(), n))
        .sum();
    let own = rss.saturating_sub(lib + deps);
    println!(
        "real libnvidia-ml loaded and initialised, 20,000 scrapes of 8 GPUs: peak {hwm} KiB \
         (now {rss} KiB: library {lib} KiB, its libm/librt/libdl/libpthread {deps} KiB, \
         the exporter's own {own} KiB)"
    );
    drop(e);
    assert_eq!(nodes(), before, "NVML left a device node behind");
    let peak = hwm as f64 * 1024.0;
    for (what, limit) in shipped_limits() {
        assert!(
            limit >= peak * MARGIN,
            "{what}: {limit} bytes is under the measured peak {peak} bytes x {MARGIN}"
        );
    }
}

/// The non-free source `.ci/nvidia-real.sh` adds mirrors each Debian
/// archive once, though a machine names it in `sources.list` and in a
/// `.sources` file (apt warns of a source configured twice, and refuses
/// two Signed-By values for one); run again, it writes nothing new.
#[test]
fn the_non_free_source_names_each_archive_once() {
    let etc = std::env::temp_dir().join(format!("gpu-exporter-apt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&etc);
    std::fs::create_dir_all(etc.join("sources.list.d")).unwrap();
    std::fs::write(
        etc.join("sources.list"),
        "deb http://deb.debian.org/debian bookworm main\n\
         deb http://deb.debian.org/debian-security bookworm-security main\n",
    )
    .unwrap();
    std::fs::write(
        etc.join("sources.list.d/debian.sources"),
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n\
         Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/nvidia-real.sh");
    let run = || {
        let out = Command::new("bash")
            .arg(&script)
            .args(["--source-only", etc.join("dest").to_str().unwrap()])
            .env("APT_ETC", &etc)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(etc.join("sources.list.d/gpu-exporter-non-free.sources")).unwrap()
    };
    let written = run();
    let archives: Vec<String> = written
        .split("\n\n")
        .map(|stanza| {
            stanza
                .lines()
                .filter(|l| l.starts_with("URIs:") || l.starts_with("Suites:"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|a| !a.is_empty())
        .collect();
    assert_eq!(
        archives,
        [
            "URIs: http://deb.debian.org/debian Suites: bookworm",
            "URIs: http://deb.debian.org/debian-security Suites: bookworm-security"
        ],
        "{written}"
    );
    assert_eq!(written.matches("Components: non-free").count(), 2);
    assert_eq!(run(), written);
    let _ = std::fs::remove_dir_all(&etc);
}
