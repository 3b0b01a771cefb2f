//! The dcgm collector's profiling fields (`DCGM_FI_PROF_*`) from NVML's
//! GPM, through the binary on the fake NVML (the real dlopen path): each
//! in dcgm-exporter's unit (GPM's percent as a ratio, its MiB/s as bytes
//! per second), on whole GPUs and MIG instances; a GPU without GPM, or a
//! metric a GPU lacks, is one log line and no series.

use crate::common::{Exporter, temp_file, value};
use crate::sources::{fake_nvml::Fixture, fleet, gpu, nvml_args, start};
use std::time::Duration;

const MIB: f64 = 1024.0 * 1024.0;

/// What the fake's GPM answers on GPU 0 (GPM's units), the field it gives
/// and what dcgm-exporter serves for it.
const GIVEN: [(&str, f64, f64); 21] = [
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 60.0, 0.6),
    ("DCGM_FI_PROF_SM_ACTIVE", 50.0, 0.5),
    ("DCGM_FI_PROF_SM_OCCUPANCY", 25.0, 0.25),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 30.0, 0.3),
    ("DCGM_FI_PROF_DRAM_ACTIVE", 40.0, 0.4),
    ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", 10.0, 0.1),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", 5.0, 0.05),
    ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", 2.0, 0.02),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", 100.0, 104_857_600.0),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", 50.0, 52_428_800.0),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", 300.0, 300.0 * MIB),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", 200.5, 200.5 * MIB),
    ("DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", 4.0, 0.04),
    ("DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", 20.0, 0.2),
    ("DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", 8.0, 0.08),
    ("DCGM_FI_PROF_PIPE_INT_ACTIVE", 12.0, 0.12),
    ("DCGM_FI_PROF_NVDEC0_ACTIVE", 50.0, 0.5),
    ("DCGM_FI_PROF_NVJPG3_ACTIVE", 25.0, 0.25),
    ("DCGM_FI_PROF_NVOFA0_ACTIVE", 75.0, 0.75),
    ("DCGM_FI_PROF_NVLINK_L0_TX_BYTES", 10.0, 10.0 * MIB),
    ("DCGM_FI_PROF_NVLINK_L17_RX_BYTES", 20.0, 20.0 * MIB),
];

/// Listed in the file, not given by GPU 0's GPM.
const LACKING: [&str; 2] = [
    "DCGM_FI_PROF_NVDEC7_ACTIVE",
    "DCGM_FI_PROF_NVLINK_L17_TX_BYTES",
];

/// The fake's `gpm` object: the pipes and PCIe under the keys the gpm
/// collector's tests use, everything else by its DCGM field.
fn gpm(given: &[(&str, f64, f64)]) -> String {
    // GIVEN's second to tenth have keys of their own.
    let fields: Vec<String> = given
        .iter()
        .enumerate()
        .filter(|(i, _)| !(1..10).contains(i))
        .map(|(_, g)| g)
        .map(|(name, v, _)| format!("\"{name}\":{v}"))
        .collect();
    format!(
        r#""gpm":{{"sm_active":50.0,"sm_occupancy":25.0,"dram_active":40.0,"tensor":30.0,"fp64":10.0,"fp32":5.0,"fp16":2.0,"pcie_tx_mibps":100.0,"pcie_rx_mibps":50.0,"fields":{{{}}}}}"#,
        fields.join(",")
    )
}

fn counters(names: impl Iterator<Item = &'static str>) -> String {
    names.map(|n| format!("{n}, gauge, {n} help.\n")).collect()
}

fn exporter(name: &str, scenario: &str, file: &str, extra: &[&str]) -> (Fixture, Exporter) {
    let f = Fixture::new(name, scenario);
    let mut args = nvml_args(&f);
    args.extend(["--collector.dcgm", "--compat.dcgm-counters", file].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    let e = start(&args);
    (f, e)
}

#[test]
fn gpm_gives_the_profiling_fields_in_dcgm_units() {
    let uuid1 = "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd";
    let gpus = [gpu(0, &format!(",{}", gpm(&GIVEN))), gpu(1, "")];
    let names = GIVEN.iter().map(|g| g.0).chain(LACKING);
    let file = temp_file("dcgm-prof.csv", &counters(names));
    let (_f, e) = exporter("dcgm-prof", &fleet(&gpus), file.to_str().unwrap(), &[]);
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        b.contains("\nDCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",")
    });
    let labels = "{gpu=\"0\",UUID=\"GPU-00000000-aaaa-bbbb-cccc-dddddddddddd\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"";
    for (name, _, want) in GIVEN {
        assert!(body.contains(&format!("\n# TYPE {name} gauge\n")), "{name}");
        let series: Vec<&str> = body
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .collect();
        // GPU 1 has no GPM: GPU 0's series alone.
        assert_eq!(series.len(), 1, "{name}: {series:?}");
        assert!(
            series[0].starts_with(&format!("{name}{labels}")),
            "{}",
            series[0]
        );
        assert_eq!(
            value(&body, &format!("{name}{{gpu=\"0\"")),
            Some(want),
            "{name}"
        );
    }
    // 100 MiB/s is 104857600 bytes per second, printed whole.
    assert!(body.contains("\"} 104857600\n"), "PCIe TX");
    for name in LACKING {
        assert!(!body.contains(&format!("\n{name}{{")), "{name}");
    }
    // The rates feed our own counter still: PCIe bytes from GPM's traffic.
    e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, "gpu_pcie_bytes_total{gpu=\"0\"").is_some_and(|v| v > 0.0)
    });
    // Each field a GPU does not give is one line, once, however many
    // collections pass: all of them on GPU 1, two on GPU 0.
    let gpu0 = "GPU 0 (GPU-00000000-aaaa-bbbb-cccc-dddddddddddd): GPM does not give";
    let gpu1 = format!("GPU 1 ({uuid1}): GPM does not give");
    e.wait_log(
        &format!("{gpu0} DCGM_FI_PROF_NVLINK_L17_TX_BYTES ("),
        Duration::from_secs(5),
    );
    std::thread::sleep(Duration::from_millis(600));
    let log = e.log();
    let lines = |who: &str| -> Vec<String> {
        log.lines()
            .filter_map(|l| l.split_once(&format!("{who} "))?.1.split(' ').next())
            .map(String::from)
            .collect()
    };
    assert_eq!(lines(gpu0), LACKING, "{log}");
    let all: Vec<&str> = GIVEN.iter().map(|g| g.0).chain(LACKING).collect();
    assert_eq!(lines(&gpu1), all, "{log}");
}

/// A MIG instance's GPM sample (`nvmlGpmMigSampleGet`): its profiling
/// fields carry its `GPU_I_PROFILE` and `GPU_I_ID`, with its own values.
#[test]
fn mig_instances_have_their_own_profiling_fields() {
    let mig = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-mig-parent","bus_id":"00000000:18:00.0","temperature":50,
        "memory":{"total":85520809984,"reserved":536870912,"free":1000,"used":2000},
        "mig":[
          {"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-aaaa","gpu_instance_id":1,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960},
           "gpm":{"sm_active":75.0,"sm_occupancy":30.0,"dram_active":12.5,
                  "fields":{"DCGM_FI_PROF_GR_ENGINE_ACTIVE":80.0,"DCGM_FI_PROF_PCIE_TX_BYTES":2.0}}},
          {"name":"NVIDIA H100 80GB HBM3 MIG 4g.40gb","uuid":"MIG-bbbb","gpu_instance_id":2,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":1000}}
        ]}"#;
    let names = [
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
    ];
    let file = temp_file("dcgm-prof-mig.csv", &counters(names.into_iter()));
    let scenario = fleet(&[mig.to_string()]);
    let (_f, e) = exporter(
        "dcgm-prof-mig",
        &scenario,
        file.to_str().unwrap(),
        &["--compat.dcgm-no-hostname"],
    );
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        b.contains("\nDCGM_FI_PROF_SM_ACTIVE{")
    });
    let at = "{gpu=\"0\",UUID=\"GPU-mig-parent\",pci_bus_id=\"00000000:18:00.0\",device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"1\"}";
    for (name, want) in [
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.8"),
        ("DCGM_FI_PROF_SM_ACTIVE", "0.75"),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "2097152"),
    ] {
        let series: Vec<&str> = body
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .collect();
        // Instance 2 has no GPM sample; the parent is its instances.
        assert_eq!(series, [format!("{name}{at} {want}")], "{name}");
    }
}

/// dcgm-exporter's `dcp-metrics-included.csv` with every line on, on the
/// fake NVML: it starts, and GPM serves its profiling fields (the PCIe
/// bytes as the counters its first lines make them).
#[test]
fn the_dcp_file_with_every_line_on_serves_gpm() {
    let file = crate::dcgm_files::dcp_every_line_on("dcp-every-line-nvml.csv");
    let gpus = [gpu(0, &format!(",{}", gpm(&GIVEN)))];
    let (_f, e) = exporter("dcgm-prof-dcp", &fleet(&gpus), file.to_str().unwrap(), &[]);
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        b.contains("\nDCGM_FI_PROF_PIPE_FP16_ACTIVE{")
    });
    for (name, kind) in [
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_SM_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_SM_OCCUPANCY", "gauge"),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge"),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "counter"),
        ("DCGM_FI_PROF_PCIE_RX_BYTES", "counter"),
    ] {
        assert!(
            body.contains(&format!("\n# TYPE {name} {kind}\n")),
            "{name}"
        );
        let want = GIVEN.iter().find(|g| g.0 == name).unwrap().2;
        assert_eq!(
            value(&body, &format!("{name}{{gpu=\"0\"")),
            Some(want),
            "{name}"
        );
    }
}
