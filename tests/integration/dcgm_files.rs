//! dcgm-exporter's own counters files (tests/fixtures/dcgm, see SOURCES.md)
//! through the binary over the simulated fleet: each starts, every field
//! we cannot serve is one log line, and every family served has the name
//! the file gives and the file's type.

use crate::common::{Exporter, temp_file};
use std::time::Duration;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dcgm/");

/// The exporter serving only the dcgm collector over `file`.
fn start(file: &str) -> Exporter {
    Exporter::start(&[
        "--collector.disable-defaults",
        "--collector.dcgm",
        "--compat.dcgm-counters",
        file,
    ])
}

/// `body`'s `# TYPE` lines of dcgm families, as (name, type).
fn families(body: &str) -> Vec<(String, String)> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter(|l| l.starts_with("DCGM_") || l.starts_with("dcgm_"))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            (name.to_string(), kind.to_string())
        })
        .collect()
}

/// Starts on `file`, checks its families and left-out log lines, and
/// gives the body.
fn serves(file: &str, want: &[(&str, &str)], left_out: &[&str]) -> String {
    let e = start(file);
    for name in left_out {
        e.wait_log(
            &format!("dcgm: {name} is left out: "),
            Duration::from_secs(5),
        );
    }
    let body = e.metrics(None).body;
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect();
    assert_eq!(families(&body), want, "{file}");
    // Each family has a sample on every GPU of the fleet, whole numbers
    // where DCGM's field is one.
    for (name, _) in &want {
        let samples = body
            .lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .count();
        assert_eq!(samples, 4, "{name} in {file}");
    }
    let left = e.log().matches(" is left out: ").count();
    assert_eq!(left, left_out.len(), "{}", e.log());
    body
}

const G: &str = "gauge";
const C: &str = "counter";

/// The families of dcp-metrics-included.csv as shipped: the first 17 are
/// the default file's; the profiling fields come from the simulator's GPM.
const DCP: [(&str, &str); 22] = [
    ("DCGM_FI_DEV_SM_CLOCK", G),
    ("DCGM_FI_DEV_MEM_CLOCK", G),
    ("DCGM_FI_DEV_MEMORY_TEMP", G),
    ("DCGM_FI_DEV_GPU_TEMP", G),
    ("DCGM_FI_DEV_POWER_USAGE", G),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", C),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", C),
    ("DCGM_FI_DEV_GPU_UTIL", G),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", G),
    ("DCGM_FI_DEV_ENC_UTIL", G),
    ("DCGM_FI_DEV_DEC_UTIL", G),
    ("DCGM_FI_DEV_XID_ERRORS", G),
    ("DCGM_FI_DEV_FB_FREE", G),
    ("DCGM_FI_DEV_FB_USED", G),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", C),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", C),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", G),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", G),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", G),
    ("DCGM_FI_PROF_DRAM_ACTIVE", G),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", G),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", G),
];

#[test]
fn dcgm_exporters_default_counters_file() {
    serves(
        &format!("{DIR}default-counters.csv"),
        &DCP[..17],
        &[
            "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
            "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        ],
    );
}

#[test]
fn dcgm_exporters_dcp_metrics_file() {
    let body = serves(
        &format!("{DIR}dcp-metrics-included.csv"),
        &DCP,
        &[
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
            "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        ],
    );
    let temp = body
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{"))
        .unwrap();
    assert!(temp.contains(",DCGM_FI_DRIVER_VERSION=\""), "{temp}");
    // The simulated H100's GPM in DCGM's units: ratios, whole bytes per
    // second (its PCIe TX rate, scenarios/default.json, and 0.8 of it).
    let first = |family: &str| {
        crate::common::value(&body, &format!("{family}{{gpu=\"0\","))
            .unwrap_or_else(|| panic!("{family}"))
    };
    for family in ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE"] {
        assert!((0.0..=1.0).contains(&first(family)), "{family}");
    }
    let (tx, rx) = (
        first("DCGM_FI_PROF_PCIE_TX_BYTES"),
        first("DCGM_FI_PROF_PCIE_RX_BYTES"),
    );
    assert!(
        tx > 1e6 && tx.fract() == 0.0 && rx == (tx * 0.8).round(),
        "{tx} {rx}"
    );
}

/// dcp-metrics-included.csv with every field line uncommented, written
/// to a temporary file `name`.
pub fn dcp_every_line_on(name: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(format!("{DIR}dcp-metrics-included.csv")).unwrap();
    let on: String = text
        .lines()
        .map(|l| {
            l.strip_prefix("# ")
                .filter(|l| l.starts_with("DCGM_"))
                .unwrap_or(l)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    temp_file(name, &on)
}

/// Every line of dcp-metrics-included.csv uncommented: its 9 `label`
/// fields, its ECC, retired-page, NVLink and violation counters. Labels
/// we have are served as labels; the others, and fields we do not read,
/// are one log line each.
#[test]
fn dcgm_exporters_dcp_metrics_file_with_every_line_on() {
    let file = dcp_every_line_on("dcp-every-line.csv");
    let e = start(file.to_str().unwrap());
    for name in [
        "DCGM_FI_NVML_VERSION",
        "DCGM_FI_DEV_BRAND",
        "DCGM_FI_DEV_SERIAL",
        "DCGM_FI_DEV_OEM_INFOROM_VER",
        "DCGM_FI_DEV_ECC_INFOROM_VER",
        "DCGM_FI_DEV_POWER_INFOROM_VER",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0",
        "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
    ] {
        e.wait_log(
            &format!("dcgm: {name} is left out: "),
            Duration::from_secs(5),
        );
    }
    // Listed as a counter near the top and as a gauge further down: the
    // first line counts.
    e.wait_log(
        "dcgm: DCGM_FI_PROF_PCIE_TX_BYTES is listed again",
        Duration::from_secs(5),
    );
    let body = e.metrics(None).body;
    let got = families(&body);
    for (name, kind) in [
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", C),
        ("DCGM_FI_DEV_POWER_VIOLATION", C),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", G),
        ("DCGM_FI_PROF_SM_ACTIVE", G),
        ("DCGM_FI_PROF_SM_OCCUPANCY", G),
        ("DCGM_FI_PROF_PIPE_FP64_ACTIVE", G),
        ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", G),
        ("DCGM_FI_PROF_PIPE_FP16_ACTIVE", G),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", C),
        ("DCGM_FI_PROF_PCIE_RX_BYTES", C),
    ] {
        assert!(
            got.iter().any(|f| f == &(name.into(), kind.into())),
            "{name}: {got:?}"
        );
        let samples = body.lines().filter(|l| l.starts_with(&format!("{name}{{")));
        assert_eq!(samples.count(), 4, "{name}");
    }
    let temp = body
        .lines()
        .find(|l| l.starts_with("DCGM_FI_DEV_GPU_TEMP{"))
        .unwrap();
    for label in [
        "DCGM_FI_DRIVER_VERSION",
        "DCGM_FI_DEV_VBIOS_VERSION",
        "DCGM_FI_DEV_INFOROM_IMAGE_VER",
    ] {
        assert!(temp.contains(&format!(",{label}=\"")), "{label}: {temp}");
    }
    assert!(!temp.contains("DCGM_FI_DEV_SERIAL"), "{temp}");
}

/// The 1.x file: go-dcgm's legacy names, served under the names it
/// gives; the PCIe bytes it lists twice are one warning each.
#[test]
fn dcgm_exporters_1x_compatibility_file() {
    let file = format!("{DIR}1.x-compatibility-metrics.csv");
    serves(
        &file,
        &[
            ("dcgm_sm_clock", G),
            ("dcgm_memory_clock", G),
            ("dcgm_memory_temp", G),
            ("dcgm_gpu_temp", G),
            ("dcgm_power_usage", G),
            ("dcgm_total_energy_consumption", C),
            ("dcgm_fi_prof_pcie_tx_bytes", C),
            ("dcgm_fi_prof_pcie_rx_bytes", C),
            ("dcgm_pcie_replay_counter", C),
            ("dcgm_gpu_utilization", G),
            ("dcgm_mem_copy_utilization", G),
            ("dcgm_enc_utilization", G),
            ("dcgm_dec_utilization", G),
            ("dcgm_xid_errors", G),
            ("dcgm_fb_free", G),
            ("dcgm_fb_used", G),
            ("dcgm_fi_prof_gr_engine_active", G),
            ("dcgm_fi_prof_pipe_tensor_active", G),
            ("dcgm_fi_prof_dram_active", G),
        ],
        &["dcgm_nvlink_bandwidth_total"],
    );
    let e = start(&file);
    for name in ["dcgm_fi_prof_pcie_tx_bytes", "dcgm_fi_prof_pcie_rx_bytes"] {
        e.wait_log(
            &format!("dcgm: {name} is listed again"),
            Duration::from_secs(5),
        );
        assert_eq!(e.log().matches(&format!("{name} is listed")).count(), 1);
    }
}

/// A file that serves nothing starts, with a warning, not in silence.
#[test]
fn an_empty_counters_file_is_a_warning() {
    let file = temp_file("dcgm-empty.csv", "# nothing on\n");
    let e = start(file.to_str().unwrap());
    e.wait_log(
        "serves no field: the dcgm collector has nothing to show",
        Duration::from_secs(5),
    );
    assert!(families(&e.metrics(None).body).is_empty());
}

/// The real DCGM names that used to stop the exporter, one file: it
/// starts; those a reading of ours gives are served in DCGM's unit, under
/// the name the file gives (the deprecated CLOCK_THROTTLE_REASONS too);
/// the rest are one log line each.
#[test]
fn real_dcgm_names_that_used_to_exit_are_served_or_logged() {
    let served = [
        (
            "DCGM_FI_DEV_FB_TOTAL",
            "gpu_memory_total_bytes",
            1.0 / 1048576.0,
        ),
        ("DCGM_FI_DEV_PSTATE", "gpu_performance_state", 1.0),
        ("DCGM_FI_DEV_PCIE_LINK_GEN", "gpu_pcie_link_generation", 1.0),
        ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gpu_pcie_link_width", 1.0),
        (
            "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
            "gpu_power_limit_watts",
            1.0,
        ),
        (
            "DCGM_FI_DEV_MEM_MAX_OP_TEMP",
            "gpu_memory_temperature_max_celsius",
            1.0,
        ),
    ];
    let logged = [
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "DCGM_FI_PROF_NVOFA1_ACTIVE",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0",
        "DCGM_EXP_P2P_STATUS",
    ];
    // The simulated H100's GPM gives them: ratios, and bytes per second.
    let prof = [
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "DCGM_FI_PROF_PIPE_INT_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE",
        "DCGM_FI_PROF_NVDEC0_ACTIVE",
        "DCGM_FI_PROF_NVJPG6_ACTIVE",
        "DCGM_FI_PROF_NVOFA0_ACTIVE",
    ];
    let text: String = served
        .iter()
        .map(|s| s.0)
        .chain([
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
            "DCGM_FI_DEV_FAN_SPEED",
        ])
        .chain(prof)
        .chain(logged)
        .map(|n| format!("{n}, gauge, h\n"))
        .collect();
    let file = temp_file("dcgm-real-names.csv", &text);
    let e = Exporter::start(&[
        "--collector.dcgm",
        "--compat.dcgm-counters",
        file.to_str().unwrap(),
    ]);
    for name in logged {
        e.wait_log(
            &format!("dcgm: {name} is left out: "),
            Duration::from_secs(5),
        );
    }
    let body = e.metrics(None).body;
    let first = |family: &str| {
        crate::common::value(&body, &format!("{family}{{gpu=\"0\","))
            .unwrap_or_else(|| panic!("{family} for gpu 0"))
    };
    // Whole numbers all (the simulated power limit is whole watts), MiB
    // cut down.
    for (dcgm, native, scale) in served {
        let want = (first(native) * scale).floor();
        assert_eq!(first(dcgm), want, "{dcgm} vs {native}");
    }
    let mask = first("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS");
    assert_eq!(mask, mask.trunc(), "a bitmask is an integer");
    for family in prof {
        let v = first(family);
        match family.ends_with("_BYTES") {
            true => assert!(v > 0.0 && v.fract() == 0.0, "{family} {v}"),
            false => assert!((0.0..=1.0).contains(&v), "{family} {v}"),
        }
    }
}
