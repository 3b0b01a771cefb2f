//! `nvidia-smi --query-compute-apps`: per-process GPU memory for the
//! `processes` collector, where NVML cannot be loaded. nvidia-smi names
//! each process's GPU by UUID (a MIG instance's processes by its MIG UUID
//! where the driver says so, else by the GPU's) and gives no GPU instance
//! otherwise, so on a MIG GPU they may land on the GPU rather than the
//! instance.

use super::cell::{is_missing, parse_number};
use base::units::MIB;
use model::{Gpu, GpuProcess, add_process};

/// The fields asked for, in this order.
pub const FIELDS: [&str; 3] = ["gpu_uuid", "pid", "used_gpu_memory"];

/// The query's argument.
pub const QUERY: &str = "--query-compute-apps=gpu_uuid,pid,used_gpu_memory";

/// Rows read at most: a node's processes, with room.
const MAX_ROWS: usize = 4096;

/// One row: the GPU's (or MIG device's) UUID and the process.
pub type App = (String, GpuProcess);

/// Which column holds each of [`FIELDS`], from a header line: `gpu_uuid,
/// pid, used_gpu_memory [MiB]` (`used_memory` is the same field).
fn columns(header: &[&str]) -> Option<[usize; 3]> {
    fn name(c: &str) -> &str {
        let c = c.split(" [").next().unwrap_or(c).trim();
        if c == "used_memory" {
            "used_gpu_memory"
        } else {
            c
        }
    }
    let mut at = [usize::MAX; 3];
    for (i, c) in header.iter().enumerate() {
        if let Some(f) = FIELDS.iter().position(|f| *f == name(c)) {
            at[f] = i;
        }
    }
    at.iter().all(|&i| i != usize::MAX).then_some(at)
}

/// Parses the CSV, with or without its header and units. A used memory
/// nvidia-smi cannot give (`[N/A]`, `[Not Supported]`) is `None`; a row
/// without a GPU UUID and a PID is an error, as is a header that lacks a
/// field asked for. Lines that are not rows ("No running processes
/// found") are passed over.
pub fn parse(csv: &str) -> Result<Vec<App>, String> {
    let mut at = [0, 1, 2];
    let mut out = Vec::new();
    for (n, line) in csv.lines().enumerate() {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if line.trim().is_empty() || cells.len() == 1 {
            continue;
        }
        if cells
            .iter()
            .any(|c| c.starts_with("gpu_uuid") || *c == "pid")
        {
            at = columns(&cells).ok_or_else(|| {
                format!(
                    "line {}: a header without gpu_uuid, pid and used_gpu_memory",
                    n + 1
                )
            })?;
            continue;
        }
        let cell = |i: usize| cells.get(at[i]).copied().unwrap_or("");
        let uuid = cell(0);
        let pid = cell(1).parse::<u32>().ok().filter(|&p| p > 0);
        let (false, Some(pid)) = (is_missing(uuid) || uuid.contains(' '), pid) else {
            return Err(format!("line {}: not a compute-apps row", n + 1));
        };
        if out.len() == MAX_ROWS {
            return Err(format!("more than {MAX_ROWS} processes"));
        }
        let used = parse_number(cell(2), "MiB").filter(|&m| m >= 0.0);
        out.push((
            uuid.to_string(),
            GpuProcess {
                pid: Some(pid),
                used_bytes: used.map(|m| m * MIB),
                ..GpuProcess::default()
            },
        ));
    }
    Ok(out)
}

/// Lays each process on its GPU or MIG instance by UUID; a process of a
/// GPU not in the fleet is dropped. The same PID twice on one is kept
/// once, with its larger figure.
pub fn attach(apps: Vec<App>, gpus: &mut [Gpu]) {
    for (uuid, p) in apps {
        let Some(g) = gpus.iter_mut().find(|g| g.uuid == uuid || mig_of(g, &uuid)) else {
            continue;
        };
        let list = match g
            .mig
            .iter_mut()
            .find(|m| m.compute.iter().any(|c| c.uuid == uuid))
        {
            Some(m) => &mut m.readings.processes,
            None => &mut g.readings.processes,
        };
        if let Some(pid) = p.pid {
            add_process(list, pid, None, p.used_bytes);
        }
    }
}

fn mig_of(g: &Gpu, uuid: &str) -> bool {
    g.mig
        .iter()
        .any(|m| m.compute.iter().any(|c| c.uuid == uuid))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = include_str!(
        "../../../../tests/fixtures/nvidia-smi/computeapps_h100-80gb-hbm3_590.48.01_load_3procs.csv"
    );

    #[test]
    fn a_captured_h100_with_units_and_extra_columns() {
        let apps = parse(H100).unwrap();
        let got: Vec<(u32, Option<f64>)> = apps
            .iter()
            .map(|(_, p)| (p.pid.unwrap(), p.used_bytes))
            .collect();
        assert_eq!(
            got,
            [
                (21180, Some(2296.0 * MIB)),
                (21181, Some(1272.0 * MIB)),
                (21198, Some(7484.0 * MIB))
            ]
        );
        assert!(
            apps.iter()
                .all(|(u, _)| u == "GPU-00000000-0000-0000-0000-000000000000")
        );
    }

    #[test]
    fn no_header_no_units_missing_memory_and_bad_rows() {
        let csv = "GPU-a, 7, 100\nGPU-a, 8, [N/A]\nGPU-b, 9, [Not Supported]\n";
        let apps = parse(csv).unwrap();
        assert_eq!(apps.len(), 3);
        assert_eq!(apps[0].1.used_bytes, Some(100.0 * MIB));
        assert_eq!(apps[1].1.used_bytes, None);
        assert_eq!(
            parse("gpu_uuid, pid, used_gpu_memory [MiB]\n").unwrap(),
            vec![]
        );
        assert_eq!(parse("No running processes found\n").unwrap(), vec![]);
        for bad in [
            "GPU-a, x, 1\n",
            "[N/A], 7, 1\n",
            "gpu_uuid, name\nGPU-a, vgpu\n",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
        }
        // The dcgm-exporter issue's capture asks for other fields.
        let vgpu = include_str!(
            "../../../../tests/fixtures/nvidia-smi/computeapps_vgpu_gpu-uuid-name_dcgm-exporter-94.csv"
        );
        assert!(parse(vgpu).is_err());
    }

    #[test]
    fn processes_land_on_their_gpu_or_mig_instance() {
        use model::{ComputeInstance, MigInstance};
        let mut gpus = vec![Gpu {
            index: 0,
            uuid: "GPU-a".into(),
            mig: vec![MigInstance {
                gpu_instance_id: 1,
                compute: vec![ComputeInstance {
                    id: Some(0),
                    uuid: "MIG-m".into(),
                }],
                ..MigInstance::default()
            }],
            ..Gpu::default()
        }];
        let apps = parse("GPU-a, 7, 1\nMIG-m, 8, 2\nGPU-z, 9, 3\nGPU-a, 7, 4\n").unwrap();
        attach(apps, &mut gpus);
        let pids = |v: &[GpuProcess]| v.iter().map(|p| (p.pid, p.used_bytes)).collect::<Vec<_>>();
        assert_eq!(
            pids(&gpus[0].readings.processes),
            [(Some(7), Some(4.0 * MIB))]
        );
        assert_eq!(
            pids(&gpus[0].mig[0].readings.processes),
            [(Some(8), Some(2.0 * MIB))]
        );
    }
}
