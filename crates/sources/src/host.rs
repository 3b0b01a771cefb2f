//! Traces of NVIDIA on the host, for `--source auto`: a node that has any
//! is a GPU node, whatever its driver says, and never serves the
//! simulator. The traces are device nodes (`/dev/nvidia*`) and NVIDIA
//! display or 3D PCI functions in sysfs that no other driver holds
//! (`vfio-pci` passes a GPU through to a VM; that GPU is not this host's).
//! The same functions, looked at again while serving ([`PciBus`]), name
//! the GPUs a real source should list.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// PCI vendor id of NVIDIA.
const NVIDIA: &str = "0x10de";
/// PCI classes of a GPU: VGA-compatible (0x0300) and 3D controller (0x0302).
const GPU_CLASSES: [&str; 2] = ["0x0300", "0x0302"];

/// The first trace of NVIDIA on a host whose sysfs is at `sysfs` and whose
/// device nodes are in `dev`, said in a few words; `None` for a host with
/// none.
pub fn nvidia_trace(sysfs: &Path, dev: &Path) -> Option<String> {
    device_node(dev).or_else(|| gpu_function(sysfs))
}

fn device_node(dev: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dev)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("nvidia"))
        .collect();
    names.sort();
    let first = names.first()?;
    Some(format!("device node {}", dev.join(first).display()))
}

fn gpu_function(sysfs: &Path) -> Option<String> {
    let first = gpu_functions(sysfs).into_iter().next()?;
    Some(format!("NVIDIA PCI function {first}"))
}

/// The host's NVIDIA GPUs on the PCI bus, by the kernel's address
/// (`0000:9b:00.0`), sorted: display and 3D functions unbound or bound to
/// nvidia, not those another driver holds.
pub fn gpu_functions(sysfs: &Path) -> Vec<String> {
    let devices = sysfs.join("bus/pci/devices");
    let Ok(entries) = std::fs::read_dir(&devices) else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .take(MAX_PCI_FUNCTIONS)
        .filter_map(|e| {
            let e = e.ok()?;
            let read = |f: &str| std::fs::read_to_string(e.path().join(f)).ok();
            let vendor = read("vendor")?;
            let class = read("class")?;
            let is_gpu =
                vendor.trim() == NVIDIA && GPU_CLASSES.iter().any(|c| class.trim().starts_with(c));
            // Unbound (no driver loaded, the case that matters) or nvidia's.
            let driver = std::fs::read_link(e.path().join("driver")).ok();
            let ours = driver
                .as_ref()
                .and_then(|d| d.file_name()?.to_str())
                .is_none_or(|d| d.starts_with("nvidia"));
            (is_gpu && ours).then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect();
    found.sort();
    found
}

/// The GPUs the driver shows this process, by the kernel's address, from
/// `driver/nvidia/gpus/<address>/`: the NVIDIA container toolkit mounts
/// only a container's own GPUs there, while sysfs shows every GPU of the
/// host. `None` where the driver has no such directory (not loaded).
fn driver_gpus(procfs: &Path) -> Option<Vec<String>> {
    let dir = std::fs::read_dir(procfs.join("driver/nvidia/gpus")).ok()?;
    Some(
        dir.take(MAX_PCI_FUNCTIONS)
            .filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_ascii_lowercase()))
            .collect(),
    )
}

/// PCI functions looked at: a large server has a few hundred.
const MAX_PCI_FUNCTIONS: usize = 4096;

/// The GPUs on the bus, looked at again every [`PciBus::EVERY`], not on
/// every collection: a GPU that falls off stays on the bus, and the
/// source names that one lost already.
pub struct PciBus {
    sysfs: PathBuf,
    procfs: PathBuf,
    functions: Vec<String>,
    next: Option<Instant>,
}

impl PciBus {
    const EVERY: Duration = Duration::from_secs(30);

    pub fn new(sysfs: PathBuf, procfs: PathBuf) -> PciBus {
        PciBus {
            sysfs,
            procfs,
            functions: Vec::new(),
            next: None,
        }
    }

    pub fn functions(&mut self) -> &[String] {
        let now = Instant::now();
        if self.next.is_none_or(|next| now >= next) {
            self.functions = gpu_functions(&self.sysfs);
            if let Some(given) = driver_gpus(&self.procfs) {
                self.functions.retain(|f| given.contains(f));
            }
            self.next = Some(now + Self::EVERY);
        }
        &self.functions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A made-up sysfs with one PCI function per `(address, vendor, class,
    /// driver)`.
    fn sysfs(tag: &str, functions: &[(&str, &str, &str, Option<&str>)]) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("gpu-exporter-sysfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (addr, vendor, class, driver) in functions {
            let d = root.join("bus/pci/devices").join(addr);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(d.join("class"), format!("{class}\n")).unwrap();
            if let Some(drv) = driver {
                let target = root.join("bus/pci/drivers").join(drv);
                std::fs::create_dir_all(&target).unwrap();
                std::os::unix::fs::symlink(&target, d.join("driver")).unwrap();
            }
        }
        root
    }

    #[test]
    fn a_gpu_function_without_a_driver_or_with_nvidias_is_a_trace() {
        let empty = std::env::temp_dir();
        let none = sysfs(
            "none",
            &[
                ("0000:00:02.0", "0x8086", "0x030000", Some("i915")),
                // Passed through to a VM: not this host's.
                ("0000:3b:00.0", NVIDIA, "0x030200", Some("vfio-pci")),
                // NVIDIA's audio function of a GPU: not a GPU.
                ("0000:3b:00.1", NVIDIA, "0x040300", None),
            ],
        );
        assert_eq!(gpu_function(&none), None);
        let unbound = sysfs("unbound", &[("0000:9b:00.0", NVIDIA, "0x030200", None)]);
        assert_eq!(
            nvidia_trace(&unbound, &empty.join("no-such-dev")).as_deref(),
            Some("NVIDIA PCI function 0000:9b:00.0")
        );
        let bound = sysfs(
            "bound",
            &[("0000:18:00.0", NVIDIA, "0x030000", Some("nvidia"))],
        );
        assert!(gpu_function(&bound).is_some());
        for d in [none, unbound, bound] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn a_device_node_is_a_trace() {
        let dev = std::env::temp_dir().join(format!("gpu-exporter-dev-{}", std::process::id()));
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("null"), "").unwrap();
        assert_eq!(device_node(&dev), None);
        std::fs::write(dev.join("nvidiactl"), "").unwrap();
        assert_eq!(
            device_node(&dev),
            Some(format!("device node {}", dev.join("nvidiactl").display()))
        );
        std::fs::remove_dir_all(dev).unwrap();
    }
}
