//! Values no GPU can have, through the binary: from the fake NVML and
//! from an nvidia-smi capture, each is left out, logged, counted in
//! `gpu_exporter_readings_rejected_total`, and fires nothing, while the
//! same states read for real on a neighbour GPU do fire.

use crate::common::{Exporter, eventually, temp_file, value};
use crate::prometheus::firing;
use crate::sources::fake_nvml::Fixture;
use crate::sources::{fake_smi, fleet, gpu, nvml_args, start};
use std::collections::BTreeSet;
use std::time::Duration;

const ALL_ONES: u32 = u32::MAX;

/// The sentinels independent doubles found passing (issue 23) on GPU 0,
/// and GPU 1 with the real states they would mimic.
fn fleet_with_sentinels() -> String {
    let sentinels = format!(
        r#","clocks_event_reasons":{clocks},"recovery_action":99,
        "remapped_rows":{{"correctable":{ALL_ONES},"uncorrectable":0,"pending":false,"failure":false,"raw_failure":{ALL_ONES}}},
        "pcie_link":{{"generation":{ALL_ONES},"gpu_generation_max":{ALL_ONES},"width":{ALL_ONES},"width_max":0}},
        "nvlink":{{"links":{ALL_ONES}}},
        "processes":[{{"pid":4242,"used_bytes":18000000000000000000}}]"#,
        clocks = u64::MAX,
    );
    let real = r#","clocks_event_reasons":32,"recovery_action":2,
        "remapped_rows":{"correctable":3,"uncorrectable":1,"pending":false,"failure":true},
        "pcie_link":{"generation":5,"gpu_generation_max":5,"width":16,"width_max":16},
        "nvlink":{"links":18},
        "processes":[{"pid":4243,"used_bytes":1000000000}]"#;
    // The sentinel GPU's fixture line replaces the base's mask of 4.
    let g0 = gpu(0, &sentinels).replace(r#""clocks_event_reasons":4,"#, "");
    let g1 = gpu(1, real).replace(r#""clocks_event_reasons":4,"#, "");
    fleet(&[g0, g1])
}

/// GPUThrottling's `for` cut short, so a real throttle fires in the test.
fn short_rules() -> String {
    let path = temp_file(
        "ranges-rules.json",
        r#"{ "rules": [ { "name": "GPUThrottling", "for": "1s" } ] }"#,
    );
    path.to_str().unwrap().to_string()
}

/// `reading` was left out at least once, and counted.
fn assert_rejected(body: &str, reading: &str) {
    let counted = value(
        body,
        &format!("gpu_exporter_readings_rejected_total{{reading=\"{reading}\"}}"),
    );
    assert!(counted.is_some_and(|n| n >= 1.0), "{reading}: {counted:?}");
}

fn alerts_on(e: &Exporter, gpu: &str) -> BTreeSet<String> {
    firing(&e.get("/alerts", &[]).body)
        .into_iter()
        .filter(|(_, who)| who == &format!("gpu{gpu}"))
        .map(|(a, _)| a)
        .collect()
}

#[test]
fn sentinels_from_nvml_are_left_out_counted_and_fire_nothing() {
    let f = Fixture::new("bin-sentinels", &fleet_with_sentinels());
    let mut args = nvml_args(&f);
    args.extend([
        "--rules.file".into(),
        short_rules(),
        "--collector.processes".into(),
    ]);
    let e = start(&args);
    let expected = [
        "GPURowRemapFailure",
        "GPURecoveryRebootOrDrain",
        "GPUThrottling",
    ];
    // The real states fire on GPU 1: the rules could fire on GPU 0.
    eventually(Duration::from_secs(30), || {
        let on1 = alerts_on(&e, "1");
        match expected.iter().all(|a| on1.contains(*a)) {
            true => Ok(()),
            false => Err(format!("{on1:?}")),
        }
    });
    assert_eq!(alerts_on(&e, "0"), BTreeSet::new());
    let body = e.metrics(None).body;
    // Each family, and what its sentinel series has besides the GPU.
    for (family, with) in [
        ("gpu_remapped_rows_total", "cause=\"correctable\""),
        ("gpu_row_remap_failed", ""),
        ("gpu_pcie_link_width", ""),
        ("gpu_pcie_link_generation", ""),
        ("gpu_nvlink_links", ""),
        ("gpu_recovery_action", ""),
        ("gpu_clocks_event_active", ""),
        ("gpu_process_memory_used_bytes", ""),
    ] {
        let on = |gpu: &str| -> Vec<&str> {
            body.lines()
                .filter(|l| l.starts_with(&format!("{family}{{gpu=\"{gpu}\"")) && l.contains(with))
                .collect()
        };
        assert_eq!(on("0"), Vec::<&str>::new(), "{family}");
        assert!(!on("1").is_empty(), "{family} on GPU 1:\n{body}");
    }
    for reading in [
        "gpu_remapped_rows",
        "gpu_pcie_link_width",
        "gpu_pcie_link_generation",
        "gpu_nvlink_links",
        "gpu_recovery_action",
        "gpu_clocks_event_active",
        "gpu_process_memory_used_bytes",
    ] {
        assert_rejected(&body, reading);
    }
    // Logged once per GPU and family, not once per collection.
    let log = e.log();
    assert_eq!(
        log.matches("GPU-00000000-aaaa-bbbb-cccc-dddddddddddd: gpu_recovery_action reads 99")
            .count(),
        1,
        "{log}"
    );
}

/// Zeros where a GPU has a maximum, limit or total, and an energy counter
/// climbing at 25 MW, as an absurd NVML gives them: none is served, each
/// is counted, while a neighbour's real 500 W climb is served.
#[test]
fn zeros_and_impossible_rates_from_nvml_are_left_out_and_counted() {
    let absurd = gpu(
        0,
        r#","energy_mj_per_collection":5000000000,"power_limit_mw":0,"sm_clock_max_mhz":0"#,
    )
    .replace(r#""power_limit_mw":700000,"#, "")
    .replace(r#""sm_clock_max_mhz":1980,"#, "")
    .replace(
        r#""memory":{"total":85520809984,"#,
        r#""memory":{"total":0,"#,
    );
    let real = gpu(1, r#","energy_mj_per_collection":100000"#);
    let f = Fixture::new("bin-absurd", &fleet(&[absurd, real]));
    let e = start(&nvml_args(&f));
    let energy = |b: &str, g: u32| {
        value(
            b,
            &format!(
                "gpu_energy_joules_total{{gpu=\"{g}\",uuid=\"GPU-0000000{g}-aaaa-bbbb-cccc-dddddddddddd\"}}"
            ),
        )
    };
    // The first reading is where a counter starts; it climbs from there.
    let first = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        energy(b, 0).is_some() && energy(b, 1).is_some()
    });
    let body = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        energy(b, 1).is_some_and(|j| j >= energy(&first, 1).unwrap() + 500.0)
    });
    assert_eq!(energy(&body, 0), energy(&first, 0), "{body}");
    for family in [
        "gpu_sm_clock_max_hertz",
        "gpu_power_limit_watts",
        "gpu_memory_total_bytes",
    ] {
        assert!(
            !body.contains(&format!("{family}{{gpu=\"0\"")),
            "{family}:\n{body}"
        );
        assert!(
            body.contains(&format!("{family}{{gpu=\"1\"")),
            "{family}:\n{body}"
        );
    }
    for reading in [
        "gpu_sm_clock_max_hertz",
        "gpu_power_limit_watts",
        "gpu_memory_total_bytes",
        "gpu_energy_joules",
    ] {
        assert_rejected(&body, reading);
    }
    let log = e.log();
    assert_eq!(
        log.matches("gpu_energy_joules_total rose by").count(),
        1,
        "{log}"
    );
}

/// An H100 capture whose `memory.used` reads 95 TiB of its 80 GB.
#[test]
fn memory_past_the_total_from_nvidia_smi_is_left_out_and_counted() {
    let capture = include_str!("../fixtures/nvidia-smi/querygpu_h100-80gb-hbm3_590.48.01_idle.csv");
    let mut lines = capture.lines();
    let header = lines.next().unwrap();
    let column = header
        .split(", ")
        .position(|h| h == "memory.used [MiB]")
        .expect("memory.used in the capture");
    let row: Vec<String> = lines
        .next()
        .unwrap()
        .split(", ")
        .map(String::from)
        .collect();
    let mut bad = row.clone();
    bad[column] = format!("{} MiB", 95u64 << 20);
    let csv = format!("{header}\n{}\n", bad.join(", "));
    let smi = fake_smi("ranges-95tib", &csv);
    let e = Exporter::start(&[
        "--source",
        "smi",
        "--smi.path",
        smi.to_str().unwrap(),
        "--xid.kmsg",
        "",
    ]);
    let body = e.wait_for("/metrics", Duration::from_secs(20), |b| {
        b.contains("gpu_exporter_readings_rejected_total{reading=\"gpu_memory_used_bytes\"}")
    });
    assert!(!body.contains("gpu_memory_used_bytes{"), "{body}");
    assert!(body.contains("gpu_memory_total_bytes{"), "{body}");
    assert!(
        e.log().contains("gpu_memory_used_bytes reads"),
        "{}",
        e.log()
    );
}

#[test]
fn readings_outside_their_range_are_left_out_and_logged_once() {
    // A temperature of all ones (NVML's "not available") and a utilization
    // above 100 %.
    let g = gpu(0, r#","utilization":{"gpu":250,"memory":1}"#)
        .replace(r#""temperature":50"#, r#""temperature":4294967295"#);
    let f = Fixture::new("bin-range", &fleet(&[g]));
    let e = start(&nvml_args(&f));
    std::thread::sleep(Duration::from_millis(800));
    let body = e.metrics(None).body;
    assert!(!body.contains("gpu_temperature_celsius{"), "{body}");
    assert!(!body.contains("gpu_utilization_ratio{"), "{body}");
    assert_eq!(value(&body, "gpu_sm_clock_hertz{gpu=\"0\""), Some(1.98e9));
    let log = e.log();
    assert_eq!(
        log.matches("temperature answers NVML's").count(),
        1,
        "{log}"
    );
    assert_eq!(
        log.matches("gpu_utilization_ratio reads 2.5, outside 0..=1")
            .count(),
        1,
        "{log}"
    );
}
