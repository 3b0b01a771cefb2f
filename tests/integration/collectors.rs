//! Collectors through the binary: `--collector.*` flags at start, and
//! `collect[]`/`exclude[]` at scrape time; health families from an
//! nvidia-smi full-field capture.

use crate::common::{Exporter, check_metrics, run, value};
use crate::sources::fake_smi;

/// The families (names before `{` or a space) of a metrics body.
fn families(body: &str) -> Vec<String> {
    let mut names: Vec<String> = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect();
    names.dedup();
    names
}

#[test]
fn an_unknown_collector_is_exit_code_2() {
    for flag in ["--collector.gpus", "--no-collector.nvlinks"] {
        let out = run(&[flag]);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(flag) && err.contains("unknown collector"),
            "{err}"
        );
    }
}

#[test]
fn flags_turn_collectors_off_and_say_which_rules_go_quiet() {
    let e = Exporter::start(&[
        "--no-collector.temperature",
        "--no-collector.nvlink",
        "--no-collector.clocks",
    ]);
    e.wait_log(
        "rule GPUThrottling is inactive: collector clocks is off",
        std::time::Duration::from_secs(5),
    );
    let body = e.metrics(None).body;
    let names = families(&body);
    for gone in [
        "gpu_clocks_event_active",
        "gpu_temperature_celsius",
        "gpu_memory_temperature_celsius",
        "gpu_nvlink_bytes_total",
        "gpu_nvlink_links",
    ] {
        assert!(!names.iter().any(|n| n == gone), "{gone}");
    }
    assert!(names.iter().any(|n| n == "gpu_power_usage_watts"));
    assert!(!body.contains("collector=\"temperature\""));
    check_metrics(&body);

    let e = Exporter::start(&["--collector.disable-defaults", "--collector.temperature"]);
    let names = families(&e.metrics(None).body);
    let gpu: Vec<&String> = names
        .iter()
        .filter(|n| n.starts_with("gpu_") && !n.starts_with("gpu_exporter"))
        .collect();
    assert_eq!(
        gpu,
        [
            "gpu_temperature_celsius",
            "gpu_memory_temperature_celsius",
            "gpu_memory_temperature_max_celsius"
        ]
    );
}

#[test]
fn collect_and_exclude_filter_a_scrape() {
    let e = Exporter::start(&[]);
    let r = e.get(
        "/metrics?collect%5B%5D=fans&collect%5B%5D=recovery&collect%5B%5D=state",
        &[],
    );
    assert_eq!(r.status, 200);
    let gpu: Vec<String> = families(&r.body)
        .into_iter()
        .filter(|n| n.starts_with("gpu_") && !n.starts_with("gpu_exporter"))
        .collect();
    assert_eq!(
        gpu,
        [
            "gpu_recovery_action",
            "gpu_performance_state",
            "gpu_persistence_mode",
            "gpu_compute_mode",
            "gpu_mig_mode"
        ]
    );
    assert_eq!(value(&r.body, "gpu_exporter_collect_success"), Some(1.0));
    check_metrics(&r.body);

    let r = e.get("/metrics?exclude[]=clocks&exclude[]=xid", &[]);
    assert_eq!(r.status, 200);
    assert!(
        !r.body.contains("\ngpu_clocks_event_active{")
            && !r.body.contains("\ngpu_xid_errors_total{")
    );
    assert!(r.body.contains("gpu_temperature_celsius{"));

    let r = e.get("/metrics?collect[]=gpus", &[]);
    assert_eq!(r.status, 400);
    assert_eq!(r.body.lines().count(), 1, "{}", r.body);
    assert!(
        r.body.starts_with("collect[]: unknown collector \"gpus\""),
        "{}",
        r.body
    );
    // Other paths ignore query strings, as before.
    assert_eq!(e.get("/healthz?collect[]=gpus", &[]).status, 200);
}

#[test]
fn nvidia_smi_captures_give_health_families() {
    let csv = include_str!("../fixtures/nvidia-smi/querygpu_rtx4080super_595.71.05_load.csv");
    let smi = fake_smi("health-rtx4080", csv);
    let e = Exporter::start(&[
        "--source",
        "smi",
        "--smi.path",
        smi.to_str().unwrap(),
        "--xid.kmsg",
        "",
    ]);
    let body = e.wait_for("/metrics", std::time::Duration::from_secs(10), |b| {
        b.contains("gpu_fan_speed_ratio")
    });
    let v = |s: &str| value(&body, s);
    assert_eq!(v("gpu_fan_speed_ratio{gpu=\"0\""), Some(0.0));
    assert_eq!(v("gpu_pcie_link_width{gpu=\"0\""), Some(16.0));
    assert_eq!(v("gpu_pcie_link_generation_max{gpu=\"0\""), Some(4.0));
    assert_eq!(v("gpu_recovery_action{gpu=\"0\""), Some(0.0));
    assert_eq!(v("gpu_performance_state{gpu=\"0\""), Some(2.0));
    assert!(body.contains("engine=\"encoder\"} 0.72"), "{body}");
    assert!(body.contains("vbios_version=\"95.03.44.00.B2\""));
    // [N/A] on this card: absent, never 0.
    assert!(!body.contains("gpu_remapped_rows_total") && !body.contains("gpu_row_remap_pending"));
    check_metrics(&body);
}

#[test]
fn the_fake_nvml_gives_every_health_family_and_promtool_is_clean() {
    use crate::sources::fake_nvml::Fixture;
    let gpu = r#"{"uuid":"GPU-health","temperature":50,"memory_temperature":60,
      "memory_temperature_max":95,"recovery_action":1,"vbios":"96.00.A5.00.01","inforom":"G520.0200.00.05",
      "remapped_rows":{"correctable":3,"uncorrectable":1,"pending":true,"failure":false},
      "ecc_corrected":4,"ecc_uncorrected":0,"ecc_corrected_lifetime":40,"ecc_uncorrected_lifetime":1,
      "pcie_link":{"generation":4,"generation_max":5,"gpu_generation_max":5,"width":8,"width_max":16},
      "nvlink":{"links":4,"down":[3],"errors":[[1,2,3,4],[10,20,30,40]]},"nvlink_kib":{"tx":1,"rx":2},
      "media":{"encoder":72,"decoder":5,"jpeg":1,"ofa":2},"fans":[38,120],
      "pstate":2,"persistence":true,"compute_mode":3,
      "gpm":{"sm_active":50.0,"sm_occupancy":25.0,"dram_active":40.0,"tensor":30.0,"fp64":1.0,
             "fp32":5.0,"fp16":2.5,"pcie_tx_mibps":100.0,"pcie_rx_mibps":50.0}}"#;
    let volta =
        r#"{"uuid":"GPU-volta","retired_pages":{"single_bit":2,"double_bit":1,"pending":true}}"#;
    let f = Fixture::new("bin-health", &format!(r#"{{"gpus":[{gpu},{volta}]}}"#));
    let e = Exporter::start(&[
        "--source",
        "nvml",
        "--nvml.library",
        f.lib.to_str().unwrap(),
        "--xid.kmsg",
        "",
        "--collect.interval",
        "200ms",
        "--collector.nvlink_link",
    ]);
    let body = e.wait_for("/metrics", std::time::Duration::from_secs(10), |b| {
        b.contains("gpu_pipe_active_ratio{")
    });
    for family in [
        "gpu_memory_temperature_max_celsius",
        "gpu_remapped_rows_total",
        "gpu_row_remap_pending",
        "gpu_row_remap_failed",
        "gpu_retired_pages_total",
        "gpu_retired_pages_pending",
        "gpu_ecc_corrected_errors_lifetime_total",
        "gpu_pcie_link_width_max",
        "gpu_nvlink_errors_total",
        "gpu_nvlink_links_active",
        "gpu_nvlink_link_active",
        "gpu_nvlink_link_errors_total",
        "gpu_recovery_action",
        "gpu_fan_speed_ratio",
        "gpu_media_utilization_ratio",
        "gpu_pipe_active_ratio",
        "gpu_performance_state",
        "gpu_persistence_mode",
        "gpu_compute_mode",
        "gpu_mig_mode",
        "gpu_exporter_collector_duration_seconds",
    ] {
        assert!(families(&body).iter().any(|n| n == family), "{family}");
    }
    assert!(body.contains("inforom_version=\"G520.0200.00.05\""));
    assert_eq!(
        value(
            &body,
            "gpu_fan_speed_ratio{gpu=\"0\",uuid=\"GPU-health\",fan=\"1\"}"
        ),
        Some(1.2)
    );
    assert_eq!(
        value(&body, "gpu_exporter_collector_success{collector=\"fans\"}"),
        Some(1.0)
    );
    check_metrics(&body);
}
