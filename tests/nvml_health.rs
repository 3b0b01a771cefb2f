//! The hardware-health readings and the collectors of the NVML source,
//! against the fake libnvidia-ml through the real dlopen path (see
//! `tests/nvml.rs` for how the fake is laid out per test).

use model::{Collector, Collectors};
use model::{Gpu, Health, MAX_FANS, NvlinkLink, TxRx};
use sources::Source;
use sources::nvml::{Nvml, Options};
use std::time::{Duration, Instant};

#[path = "support/fake_nvml.rs"]
mod fake_nvml;
use fake_nvml::Fixture;

fn open(f: &Fixture, collectors: Collectors) -> Nvml {
    let options = Options {
        event_wait: Duration::from_millis(50),
        collectors,
        ..Options::default()
    };
    Nvml::open_with(Some(&f.lib), options).expect("the fake library exists")
}

fn collect(nvml: &mut Nvml) -> Vec<Gpu> {
    nvml.collect(0.0).expect("collect")
}

/// An H100 with every health reading; NVLink 4 with link 3 down.
const HOPPER: &str = r#"{"uuid":"GPU-hopper","temperature":50,"memory_temperature":60,
  "memory_temperature_max":95,"recovery_action":2,"vbios":"96.00.A5.00.01","inforom":"G520.0200.00.05",
  "remapped_rows":{"correctable":3,"uncorrectable":1,"pending":true,"failure":false},
  "ecc_corrected":4,"ecc_uncorrected":0,"ecc_corrected_lifetime":40,"ecc_uncorrected_lifetime":1,
  "pcie_link":{"generation":4,"generation_max":5,"gpu_generation_max":5,"width":8,"width_max":16},
  "nvlink":{"links":4,"down":[3],"errors":[[1,2,3,4],[10,20,30,40]]},
  "media":{"encoder":72,"decoder":5,"jpeg":1,"ofa":2},
  "pstate":2,"persistence":true,"compute_mode":3,
  "gpm":{"sm_active":50.0,"sm_occupancy":25.0,"dram_active":40.0,"tensor":30.0,"fp64":1.0,
         "fp32":5.0,"fp16":2.5,"pcie_tx_mibps":100.0,"pcie_rx_mibps":50.0},
  "pcie_tx_kbps":1,"pcie_rx_kbps":1}"#;

/// A V100: retired pages instead of remapped rows, no recovery action
/// (per-field NOT_SUPPORTED in the same call as the memory temperature),
/// two fans, one beyond its rated speed.
const VOLTA: &str = r#"{"uuid":"GPU-volta","memory_temperature":70,
  "retired_pages":{"single_bit":2,"double_bit":1,"pending":true},
  "fans":[38,120],"pstate":32,"media":{"encoder":0,"decoder":0}}"#;

/// A Blackwell: NVLink 5's counts instead of the totals.
const BLACKWELL: &str = r#"{"uuid":"GPU-blackwell",
  "nvlink":{"links":2,"nvlink5":true,"errors":[[7,8,9,10],[1,1,1,1]]}}"#;

fn fleet(gpus: &[&str]) -> String {
    format!(r#"{{"gpus":[{}]}}"#, gpus.join(","))
}

#[test]
fn health_readings_come_out_in_base_units() {
    let f = Fixture::new("health", &fleet(&[HOPPER, VOLTA, BLACKWELL]));
    let mut nvml = open(&f, Collectors::DEFAULT);
    let first = collect(&mut nvml);
    std::thread::sleep(Duration::from_millis(150));
    let gpus = collect(&mut nvml);

    let g = &gpus[0];
    assert_eq!(g.vbios_version, "96.00.A5.00.01");
    assert_eq!(g.inforom_version, "G520.0200.00.05");
    let r = &g.readings;
    assert_eq!(r.memory_temperature_celsius, Some(60.0));
    let want = Health {
        remapped_rows: [Some(3.0), Some(1.0)],
        row_remap_pending: Some(true),
        row_remap_failed: Some(false),
        ecc_corrected_lifetime: Some(40.0),
        ecc_uncorrected_lifetime: Some(1.0),
        pcie_link_generation: Some(4.0),
        pcie_link_generation_max: Some(5.0),
        pcie_link_width: Some(8.0),
        pcie_link_width_max: Some(16.0),
        nvlink_errors: [Some(11.0), Some(22.0), Some(33.0), Some(44.0)],
        nvlink_links: Some(4.0),
        nvlink_links_active: Some(3.0),
        recovery_action: Some(2.0),
        media_ratios: [Some(0.72), Some(0.05), Some(0.01), Some(0.02)],
        pipe_active_ratios: [Some(0.30), Some(0.01), Some(0.05), Some(0.025)],
        performance_state: Some(2.0),
        persistence_mode: Some(true),
        compute_mode: Some(3.0),
        mig_mode: Some(false),
        memory_temperature_max_celsius: Some(95.0),
        ..Health::default()
    };
    assert_eq!(r.health, want);
    assert_eq!(r.ecc_corrected_total, Some(4.0));
    // The first collection has no GPM interval: NVML's sampled throughput
    // starts the counter; the second adds GPM's traffic over its interval,
    // exactly 100 and 50 MiB/s (not the 1 KB/s the sample says).
    assert_eq!(first[0].readings.pcie_bytes_total, Some(TxRx::default()));
    let bytes = r.pcie_bytes_total.expect("pcie bytes");
    assert!((bytes.tx / bytes.rx - 2.0).abs() < 1e-9, "{bytes:?}");
    let seconds = bytes.tx / (100.0 * 1024.0 * 1024.0);
    assert!((0.15..5.0).contains(&seconds), "{seconds}");

    let v = &gpus[1].readings;
    assert_eq!(v.memory_temperature_celsius, Some(70.0));
    let mut fans = [None; MAX_FANS];
    fans[..2].copy_from_slice(&[Some(0.38), Some(1.2)]);
    let want = Health {
        retired_pages: [Some(2.0), Some(1.0)],
        retired_pages_pending: Some(true),
        fan_speed_ratios: fans,
        media_ratios: [Some(0.0), Some(0.0), None, None],
        // P-state 32 is NVML's "unknown": no reading.
        mig_mode: Some(false),
        ..Health::default()
    };
    assert_eq!(v.health, want);

    let b = &gpus[2].readings.health;
    assert_eq!(b.nvlink_errors, [None, Some(9.0), None, Some(11.0)]);
    assert_eq!(
        (b.nvlink_links, b.nvlink_links_active),
        (Some(2.0), Some(2.0))
    );
    // Per-link series are opt-in.
    assert!(b.nvlink_per_link.is_empty());
    // NOT_SUPPORTED is no failure.
    assert_eq!(nvml.timings().failed, Collectors::NONE);
}

/// A remap flag word that is neither 0 nor 1 (a broken driver's
/// 0xFFFFFFFF) is no reading, never a failed remap that pages.
#[test]
fn remap_flags_out_of_range_are_no_reading() {
    let broken = HOPPER.replace(
        r#""pending":true,"failure":false}"#,
        r#""pending":true,"failure":false,"raw_pending":1,"raw_failure":4294967295}"#,
    );
    assert_ne!(broken, HOPPER);
    let f = Fixture::new("health-remap-sentinel", &fleet(&[&broken]));
    let mut nvml = open(&f, Collectors::DEFAULT);
    let h = &collect(&mut nvml)[0].readings.health;
    assert_eq!(h.remapped_rows, [Some(3.0), Some(1.0)]);
    assert_eq!(
        (h.row_remap_pending, h.row_remap_failed),
        (Some(true), None)
    );
}

#[test]
fn an_old_driver_reports_what_its_symbols_allow() {
    let f = Fixture::build("health-old-driver", &fleet(&[HOPPER, VOLTA]), true);
    let mut nvml = open(&f, Collectors::DEFAULT);
    let gpus = collect(&mut nvml);
    // Without nvmlDeviceGetRemappedRows the source asks for retired
    // pages, which an H100 has none of; no field values, no fan calls, no
    // JPEG or OFA; the rest as before.
    let h = &gpus[0].readings.health;
    assert_eq!(h.remapped_rows, [None; 2]);
    assert_eq!(h.recovery_action, None);
    assert_eq!(h.nvlink_links, None);
    assert_eq!(h.media_ratios, [Some(0.72), Some(0.05), None, None]);
    assert_eq!(h.pcie_link_width, Some(8.0));
    assert_eq!(h.memory_temperature_max_celsius, Some(95.0));
    let v = &gpus[1].readings.health;
    assert_eq!(v.retired_pages, [Some(2.0), Some(1.0)]);
    assert_eq!(v.fan_speed_ratios, [None; MAX_FANS]);
}

#[test]
fn per_link_nvlink_series_when_turned_on() {
    let f = Fixture::new("health-links", &fleet(&[HOPPER]));
    let mut nvml = open(&f, Collectors::DEFAULT.with(Collector::NvlinkLink));
    let h = &collect(&mut nvml)[0].readings.health;
    let link = |link, active, e: [f64; 4]| NvlinkLink {
        link,
        active: Some(active),
        errors: e.map(Some),
    };
    assert_eq!(
        h.nvlink_per_link,
        [
            link(0, true, [1.0, 2.0, 3.0, 4.0]),
            link(1, true, [10.0, 20.0, 30.0, 40.0]),
            link(2, true, [0.0; 4]),
            link(3, false, [0.0; 4]),
        ]
    );
}

#[test]
fn a_disabled_collector_makes_no_calls() {
    // The power call would hang for 3 s, and every fan call fails.
    let text = fleet(&[HOPPER, VOLTA]).replacen(
        '{',
        r#"{"hang":{"call":"nvmlDeviceGetPowerUsage","ms":3000},
            "fail":{"call":"nvmlDeviceGetFanSpeed_v2","code":999},"#,
        1,
    );
    let f = Fixture::new("health-collectors", &text);
    let on = Collectors::DEFAULT
        .without(Collector::Power)
        .without(Collector::Nvlink)
        .without(Collector::Recovery);
    let mut nvml = open(&f, on);
    let started = Instant::now();
    let gpus = collect(&mut nvml);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let r = &gpus[0].readings;
    assert_eq!(r.power_usage_watts, None);
    assert_eq!(r.health.nvlink_links, None);
    assert_eq!(r.health.recovery_action, None);
    // The field-values call still serves the memory temperature.
    assert_eq!(r.memory_temperature_celsius, Some(60.0));
    assert_eq!(r.health.remapped_rows, [Some(3.0), Some(1.0)]);
    // Each collector that ran is timed; the fan calls failed.
    let t = nvml.timings();
    assert_eq!(t.failed, Collectors::NONE.with(Collector::Fans));
    for c in Collector::ALL {
        let timed = t.seconds[c as usize].is_some();
        let ran =
            on.has(c) && !matches!(c, Collector::Xid | Collector::Allocator | Collector::Models);
        assert_eq!(timed, ran, "{}", c.name());
    }
}
