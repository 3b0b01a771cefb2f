//! `tools/gpu-check.sh`'s checker (tools/gpu-check/) against the fake
//! library and a fake nvidia-smi, so that the check meant for a real GPU
//! host cannot rot: a host where both agree passes, and one where
//! nvidia-smi disagrees with NVML fails, naming what differs; so does a
//! GPU whose compute capability has GPM but serves no profiling field, or
//! serves one outside its range.

use crate::common::BIN;
use crate::sources::fake_nvml::{Fixture, build_member};
use crate::sources::fake_smi;
use std::process::Command;

const GPU: &str = r#"{"uuid":"GPU-check-%","name":"NVIDIA H100 80GB HBM3","bus_id":"00000000:1%:00.0",
  "temperature":5%,"power_mw":30%000,"power_limit_mw":700000,
  "memory":{"total":85899345920,"reserved":0,"free":85899345920,"used":0},
  "gpm":{"sm_active":50.0,"sm_occupancy":25.0,"dram_active":40.0,"tensor":30.0,"fp64":1.0,
         "fp32":5.0,"fp16":2.5,"pcie_tx_mibps":100.0,"pcie_rx_mibps":50.0}}"#;

const HELP: &str = "\"index\"\n\"uuid\"\n\"name\"\n\"pci.bus_id\"\n\"temperature.gpu\"\n\
\"power.draw\"\n\"memory.total\"\n\"memory.used\"\n";

/// gpu-check's report and exit code, on two fake GPUs (GPU 1's JSON as
/// `gpu1` makes it) and nvidia-smi's `memory_total_mib` for them; both of
/// compute capability 9.0 (Hopper: GPM).
fn check(
    name: &str,
    memory_total_mib: u64,
    gpu1: impl Fn(String) -> String,
) -> (Option<i32>, String) {
    let gpus: Vec<_> = (0..2).map(|i| GPU.replace('%', &i.to_string())).collect();
    let gpus = [gpus[0].clone(), gpu1(gpus[1].clone())];
    let f = Fixture::new(name, &format!(r#"{{"gpus":[{}]}}"#, gpus.join(",")));
    let mut csv = String::from(
        "index, uuid, name, pci.bus_id, temperature.gpu, power.draw, memory.total, memory.used, compute_cap\n",
    );
    for i in 0..2 {
        csv += &format!(
            "{i}, GPU-check-{i}, NVIDIA H100 80GB HBM3, 00000000:1{i}:00.0, 5{i}, 30{i}.00, {memory_total_mib}, 0, 9.0\n"
        );
    }
    let smi = fake_smi(name, &csv);
    std::fs::write(smi.with_file_name("help.txt"), HELP).unwrap();
    let checker = build_member("gpu-check", &[], "gpu-check").join("gpu-check");
    // A made-up host: a GPU of this machine's is no fake GPU's.
    let host = crate::common::no_host().to_str().unwrap();
    let out = Command::new(checker)
        .args([BIN, "--nvml.library", f.lib.to_str().unwrap()])
        .args(["--smi.path", smi.to_str().unwrap()])
        .args([
            "--path.sysfs",
            host,
            "--path.procfs",
            host,
            "--path.devfs",
            host,
        ])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{report}");
    (out.status.code(), report)
}

#[test]
fn a_host_where_nvml_and_nvidia_smi_agree_passes() {
    let (code, report) = check("gpu-check-agree", 81920, |g| g);
    assert_eq!(code, Some(0), "{report}");
    for line in [
        "ok    nvidia-smi lists 2 GPUs",
        "ok    the exporter serves 2 GPUs, nvidia-smi lists 2",
        "ok    GPU-check-1: bus id 00000000:11:00.0, name NVIDIA H100 80GB HBM3",
        "ok    GPU-check-0: memory total Some(85899345920.0) bytes, nvidia-smi Some(85899345920.0)",
        "ok    GPM readings (gpu_sm_active_ratio) on 2 of 2 GPUs",
        // The fake's GPM gives the SMs, DRAM, the pipes and PCIe.
        "ok    GPU-check-1: 13 profiling fields served (compute capability 9.0: GPM): SM_ACTIVE SM_OCCUPANCY PIPE_TENSOR_ACTIVE DRAM_ACTIVE PIPE_FP64_ACTIVE PIPE_FP32_ACTIVE PIPE_FP16_ACTIVE PCIE_TX_BYTES PCIE_RX_BYTES gpu_sm_active_ratio gpu_sm_occupancy_ratio gpu_dram_active_ratio gpu_pipe_active_ratio\n",
        "gpu-check: ",
    ] {
        assert!(report.contains(line), "{line}\n{report}");
    }
    assert!(
        report.contains("gpu_temperature_celsius NVML 51, nvidia-smi 51"),
        "{report}"
    );
    assert!(report.contains("memory: VmHWM "), "{report}");
    assert!(!report.contains("FAIL"), "{report}");
}

#[test]
fn a_host_where_nvidia_smi_disagrees_fails_naming_it() {
    let (code, report) = check("gpu-check-disagree", 40960, |g| g);
    assert_eq!(code, Some(1), "{report}");
    let failed: Vec<_> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        failed.len() == 2 && failed.iter().all(|l| l.contains("memory total")),
        "{report}"
    );
}

#[test]
fn a_gpu_with_gpm_serving_no_profiling_field_or_one_out_of_range_fails() {
    // GPU 1 has GPM by its compute capability, but NVML gives it none.
    let (code, report) = check("gpu-check-no-gpm", 81920, |g| {
        g[..g.find(",\n  \"gpm\"").unwrap()].to_string() + "}"
    });
    assert_eq!(code, Some(1), "{report}");
    let failed: Vec<_> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert_eq!(
        failed,
        ["FAIL  GPU-check-1: no profiling field served (compute capability 9.0: GPM)"],
        "{report}"
    );
    // GPU 1's SMs busy 150% of the time: the exporter leaves the field out
    // and counts it, and the check fails on the count.
    let (code, report) = check("gpu-check-gpm-range", 81920, |g| {
        g.replace("\"sm_active\":50.0", "\"sm_active\":150.0")
    });
    assert_eq!(code, Some(1), "{report}");
    let failed: Vec<_> = report.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        failed
            .iter()
            .any(|l| l.contains("readings outside their range rules: [\"DCGM_FI_PROF ")),
        "{report}"
    );
    assert!(!report.contains("DCGM_FI_PROF_SM_ACTIVE 1.5"), "{report}");
}
