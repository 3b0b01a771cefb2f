//! The real binary on each real source: NVML through the fake
//! libnvidia-ml and the real dlopen path, nvidia-smi through a fake
//! script, Xid from a kernel log, and `auto` choosing between them.

#[path = "../support/fake_nvml.rs"]
pub mod fake_nvml;

use crate::common::{Exporter, check_metrics, run, value};
use fake_nvml::Fixture;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub fn gpu(i: u32, extra: &str) -> String {
    format!(
        r#"{{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-0000000{i}-aaaa-bbbb-cccc-dddddddddddd","bus_id":"00000000:{:02X}:00.0",
        "temperature":{},"sm_clock_mhz":1980,"memory_clock_mhz":2619,"sm_clock_max_mhz":1980,
        "clocks_event_reasons":4,"power_mw":350000,"power_limit_mw":700000,"energy_mj":123456,
        "memory":{{"total":85520809984,"reserved":536870912,"free":40000000000,"used":44983939072}},
        "ecc_corrected":0,"ecc_uncorrected":0,"pcie_tx_kbps":1000,"pcie_rx_kbps":2000,"pcie_replay":0{extra}}}"#,
        0x18 + i,
        50 + i
    )
}

pub fn fleet(gpus: &[String]) -> String {
    format!(
        r#"{{"driver_version":"550.54.15","gpus":[{}]}}"#,
        gpus.join(",")
    )
}

pub fn nvml_args(f: &Fixture) -> Vec<String> {
    let lib = f.lib.to_str().unwrap().to_string();
    [
        "--source",
        "nvml",
        "--nvml.library",
        &lib,
        "--xid.kmsg",
        "",
        "--collect.interval",
        "200ms",
    ]
    .map(String::from)
    .to_vec()
}

pub fn start(args: &[String]) -> Exporter {
    Exporter::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn nvml_fleet_through_the_binary() {
    let gpus: Vec<String> = (0..4)
        .map(|i| gpu(i, if i == 2 { r#","xids":[79,79]"# } else { "" }))
        .collect();
    let f = Fixture::new("bin-fleet", &fleet(&gpus));
    let e = start(&nvml_args(&f));
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(
            b,
            "gpu_xid_errors_total{gpu=\"2\",uuid=\"GPU-00000002-aaaa-bbbb-cccc-dddddddddddd\",xid=\"79\"}",
        ) == Some(2.0)
    });
    for i in 0..4 {
        let t = value(&body, &format!("gpu_temperature_celsius{{gpu=\"{i}\""));
        assert_eq!(t, Some(50.0 + i as f64), "gpu {i}");
    }
    assert!(body.contains("gpu_exporter_source_info{source=\"nvml\"} 1"));
    assert!(body.contains("driver_version=\"550.54.15\""));
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(1.0));
    assert_eq!(
        value(
            &body,
            "gpu_clocks_event_active{gpu=\"0\",uuid=\"GPU-00000000-aaaa-bbbb-cccc-dddddddddddd\",reason=\"sw_power_cap\"}"
        ),
        Some(1.0)
    );
    // Not supported by the scenario: absent, never a sentinel.
    assert!(!body.contains("gpu_utilization_ratio{"));
    check_metrics(&body);
}

/// A reading with every face from its one declaration: the maximum
/// memory clock through the fake library and the real dlopen path, the
/// simulator's, and dcgm-exporter's DCGM_FI_DEV_MAX_MEM_CLOCK in MHz. A
/// GPU that answers NOT_SUPPORTED or NVML's all-ones sentinel has no
/// series in either, never a 0.
#[test]
fn the_maximum_memory_clock_on_every_face() {
    let field = "DCGM_FI_DEV_MAX_MEM_CLOCK";
    let file = crate::common::temp_file(
        "max-mem-clock.csv",
        &format!("{field}, gauge, Maximum memory clock (in MHz).\n"),
    );
    let dcgm = [
        "--collector.dcgm",
        "--compat.dcgm-no-hostname",
        "--compat.dcgm-counters",
        file.to_str().unwrap(),
    ]
    .map(String::from);
    let gpus = [
        gpu(0, r#","memory_clock_max_mhz":2619"#),
        gpu(1, ""),
        gpu(2, r#","memory_clock_max_mhz":4294967295"#),
    ];
    let f = Fixture::new("mem-clock-max", &fleet(&gpus));
    let mut args = nvml_args(&f);
    args.extend(dcgm.clone());
    let e = start(&args);
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, &format!("{field}{{gpu=\"0\",")).is_some()
    });
    let native = |i: u32| format!("gpu_memory_clock_max_hertz{{gpu=\"{i}\",");
    let theirs = |i: u32| format!("{field}{{gpu=\"{i}\",");
    assert_eq!(value(&body, &native(0)), Some(2.619e9));
    assert_eq!(value(&body, &theirs(0)), Some(2619.0));
    for i in [1, 2] {
        assert!(!body.contains(&native(i)), "gpu {i}:\n{body}");
        assert!(!body.contains(&theirs(i)), "gpu {i}:\n{body}");
    }
    assert!(body.contains("# TYPE gpu_memory_clock_max_hertz gauge"));
    // promtool's lint refuses dcgm-exporter's camelCase labels: ours only.
    let ours: String = body
        .lines()
        .filter(|l| !l.contains("DCGM_"))
        .map(|l| format!("{l}\n"))
        .collect();
    check_metrics(&ours);
    drop(e);
    // The simulator's: HBM at its one clock, every GPU.
    let sim = start(
        &[
            ["--source".to_string(), "sim".to_string()].as_slice(),
            &dcgm,
        ]
        .concat(),
    );
    let body = sim.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, &theirs(0)).is_some()
    });
    for i in 0..4 {
        let max = value(&body, &native(i)).unwrap_or_else(|| panic!("gpu {i}:\n{body}"));
        let now = value(&body, &format!("gpu_memory_clock_hertz{{gpu=\"{i}\","));
        assert!(max > 0.0 && now <= Some(max), "gpu {i}: {now:?} of {max}");
        assert_eq!(
            value(&body, &theirs(i)),
            Some((max / 1e6).round()),
            "gpu {i}"
        );
    }
}

#[test]
fn a_driver_that_is_not_loaded_never_stops_the_server() {
    let f = Fixture::new("bin-noinit", r#"{"init_error":9,"gpus":[]}"#);
    let e = start(&nvml_args(&f));
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(0.0));
    assert_eq!(e.get("/healthz", &[]).status, 200);
    let r = e.get("/readyz", &[]);
    assert_eq!(r.status, 503);
    assert!(r.body.contains("DRIVER_NOT_LOADED"), "{}", r.body);
    // The driver arrives: the retry with backoff picks it up.
    f.set_scenario(&fleet(&[gpu(0, "")]));
    let body = e.wait_for("/metrics", Duration::from_secs(15), |b| {
        value(b, "gpu_exporter_collect_success") == Some(1.0)
    });
    assert_eq!(value(&body, "gpu_up{gpu=\"0\""), Some(1.0));
}

#[test]
fn a_hung_or_lost_gpu_leaves_metrics_answering() {
    // GPU 0 hangs 4 s in every power call; GPU 1 is lost after 3.
    let hang = r#","slow":{"call":"nvmlDeviceGetPowerUsage","ms":4000}"#;
    let gpus = [gpu(0, hang), gpu(1, r#","lost_after_collections":3"#)];
    let f = Fixture::new("bin-hang", &fleet(&gpus));
    let e = start(&nvml_args(&f));
    // A read hangs in NVML: scrapes answer at once anyway.
    let t = Instant::now();
    let body = e.metrics(None).body;
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(body.contains("gpu_exporter_snapshot_age_seconds"));
    // GPU 1 is lost; GPU 0 keeps reporting, its readings once its first
    // read ends (its identity before).
    let body = e.wait_for("/metrics", Duration::from_secs(15), |b| {
        value(b, "gpu_up{gpu=\"1\"") == Some(0.0)
            && value(b, "gpu_up{gpu=\"0\"") == Some(1.0)
            && b.contains("gpu_temperature_celsius{gpu=\"0\"")
    });
    assert_eq!(value(&body, "gpu_up{gpu=\"0\""), Some(1.0));
    assert!(body.contains("gpu_temperature_celsius{gpu=\"0\""));
    assert!(!body.contains("gpu_temperature_celsius{gpu=\"1\""));
}

/// A GPU whose very first read hangs is served from the start, under the
/// identity its reader told first, late and counted; its ticket opens.
#[test]
fn a_gpu_whose_first_read_hangs_is_served_late_with_its_identity() {
    let hang = r#","slow":{"call":"nvmlDeviceGetPowerUsage","ms":30000}"#;
    let f = Fixture::new("bin-first-hang", &fleet(&[gpu(0, ""), gpu(1, hang)]));
    let e = start(&nvml_args(&f));
    let up1 = "gpu_up{gpu=\"1\",uuid=\"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd\"}";
    let late = "gpu_exporter_gpu_reads_late_total{gpu=\"1\",uuid=\"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd\"}";
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, up1) == Some(1.0) && value(b, late).is_some_and(|n| n >= 1.0)
    });
    assert_eq!(value(&body, "gpu_exporter_gpus"), Some(2.0), "{body}");
    assert!(
        body.contains("gpu_info{gpu=\"1\",uuid=\"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd\",model=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:19:00.0\""),
        "{body}"
    );
    // No reading of it yet: none is made up.
    assert!(!body.contains("gpu_power_usage_watts{gpu=\"1\""), "{body}");
    assert_eq!(value(&body, "gpu_power_usage_watts{gpu=\"0\""), Some(350.0));
    let alerts = e.wait_for("/alerts", Duration::from_secs(20), |b| {
        crate::prometheus::firing(b)
            .iter()
            .any(|(rule, who)| rule == "GPUReadsLate" && who == "gpu1")
    });
    assert!(
        !crate::prometheus::firing(&alerts)
            .iter()
            .any(|(rule, who)| rule == "GPUReadsLate" && who == "gpu0"),
        "{alerts}"
    );
}

#[test]
fn one_slow_gpu_ages_its_own_readings_and_readiness_holds() {
    // Every power call on GPU 1 takes 2 s, past the stall limit (three
    // 200 ms intervals and a second): the collection must not wait for it.
    let slow = r#","slow":{"call":"nvmlDeviceGetPowerUsage","ms":2000}"#;
    let f = Fixture::new("bin-slow", &fleet(&[gpu(0, ""), gpu(1, slow)]));
    let e = start(&nvml_args(&f));
    let late = |b: &str| value(b, "gpu_exporter_gpu_reads_late_total{gpu=\"1\"");
    let body = e.wait_for("/metrics", Duration::from_secs(20), |b| {
        late(b).is_some_and(|n| n >= 3.0) && b.contains("gpu_power_usage_watts{gpu=\"1\"")
    });
    // Served from its last read; GPU 0 was never late.
    assert_eq!(value(&body, "gpu_power_usage_watts{gpu=\"1\""), Some(350.0));
    assert!(!body.contains("gpu_exporter_gpu_reads_late_total{gpu=\"0\""));
    // Readiness holds and nothing stalls while GPU 1 stays slow (bounded:
    // 4 s, each check 10 ms apart at least).
    let until = Instant::now() + Duration::from_secs(4);
    let mut checks = 0;
    while Instant::now() < until {
        assert_eq!(e.get("/readyz", &[]).status, 200, "after {checks} checks");
        let b = e.metrics(None).body;
        assert_eq!(value(&b, "gpu_exporter_collect_stalled"), Some(0.0), "{b}");
        assert_eq!(value(&b, "gpu_up{gpu=\"1\""), Some(1.0));
        checks += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(checks >= 10, "{checks}");
    // Still counted: it stayed slow.
    assert!(late(&e.metrics(None).body) > late(&body), "{body}");
    let log = e.log();
    let line = "GPU 1: a read took longer than 200ms";
    assert_eq!(log.matches(line).count(), 1, "{log}");
    // Late again within 15m: a ticket about GPU 1 alone.
    let tickets = |b: &str| {
        let f = crate::prometheus::firing(b);
        f.into_iter()
            .filter(|(rule, _)| rule == "GPUReadsLate")
            .map(|(_, who)| who)
            .collect::<Vec<_>>()
    };
    let alerts = e.wait_for("/alerts", Duration::from_secs(20), |b| {
        !tickets(b).is_empty()
    });
    assert_eq!(tickets(&alerts), ["gpu1"], "{alerts}");
}

#[test]
fn an_explicit_library_that_does_not_exist_is_bad_configuration() {
    let out = run(&[
        "--source",
        "nvml",
        "--nvml.library",
        "/nonexistent/libnvidia-ml.so.1",
        "--once",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("--nvml.library") && err.contains("/nonexistent/libnvidia-ml.so.1"),
        "{err}"
    );
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("gpu-exporter: error"))
            .count(),
        1,
        "{err}"
    );
}

const HELP: &str = r#"List of valid properties to query for the switch "--query-gpu":

"index"
Zero based index of the GPU.

"uuid"
UUID.

"pci.bus_id"
Bus id.

"temperature.gpu"
Core GPU temperature.
"#;

/// A fake nvidia-smi printing `csv` for queries, in a directory of its own;
/// it exits with the number in `rc` next to it, 0 without one. Its queries
/// print whatever `out.csv` next to it holds at the time.
pub fn fake_smi(name: &str, csv: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("smi-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("help.txt"), HELP).unwrap();
    std::fs::write(dir.join("out.csv"), csv).unwrap();
    let script = dir.join("nvidia-smi");
    let body = format!(
        "#!/bin/sh\ncase \"$1\" in --help-query-gpu) cat '{0}/help.txt' ;; *) cat '{0}/out.csv' ;; esac\n\
         [ -f '{0}/rc' ] && exit \"$(cat '{0}/rc')\"\nexit 0\n",
        dir.display()
    );
    // Written under another name and renamed, so no writer holds it open
    // when it runs (ETXTBSY).
    std::fs::write(dir.join("tmp"), body).unwrap();
    std::fs::set_permissions(dir.join("tmp"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(dir.join("tmp"), &script).unwrap();
    script
}

#[test]
fn auto_picks_nvidia_smi_and_xid_comes_from_the_kernel_log() {
    let smi = fake_smi(
        "auto",
        "index, uuid, pci.bus_id, temperature.gpu\n0, GPU-aaaa, 00000000:9B:00.0, 44\n1, GPU-bbbb, 00000000:9C:00.0, 45\n",
    );
    let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("smi-auto/dmesg.txt");
    // Xids from before the exporter started: seen, never counted as new.
    std::fs::write(
        &log,
        "[ 10.1] NVRM: Xid (PCI:0000:9b:00): 48, pid=1234, name=python, Ch 00000008\n",
    )
    .unwrap();
    // No NVML on this machine: auto falls through to nvidia-smi.
    let e = Exporter::start(&[
        "--source",
        "auto",
        "--smi.path",
        smi.to_str().unwrap(),
        "--nvml.library",
        "libnvidia-ml-not-here.so.1",
        "--xid.kmsg",
        log.to_str().unwrap(),
    ]);
    e.wait_log(
        "1 Xid from before the exporter started",
        Duration::from_secs(10),
    );
    // Appended after start (stamped after it, as the kernel stamps them):
    // counted.
    {
        use std::io::Write;
        let t = crate::common::uptime() + 100.0;
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        write!(
            f,
            "[{:.1}] NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n\
             [{:.1}] NVRM: Xid (PCI:0000:9b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n\
             [{:.1}] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up\n",
            t,
            t + 0.1,
            t + 0.2
        )
        .unwrap();
    }
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(
            b,
            "gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-aaaa\",xid=\"79\"}",
        ) == Some(2.0)
    });
    assert!(
        body.contains("gpu_exporter_source_info{source=\"smi\"} 1"),
        "{body}"
    );
    assert_eq!(
        value(
            &body,
            "gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-aaaa\",xid=\"48\"}"
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &body,
            "gpu_temperature_celsius{gpu=\"1\",uuid=\"GPU-bbbb\"}"
        ),
        Some(45.0)
    );
    assert_eq!(
        value(
            &body,
            "gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-aaaa\",xid=\"79\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &body,
            "gpu_xid_errors_total{gpu=\"1\",uuid=\"GPU-bbbb\",xid=\"79\"}"
        ),
        Some(0.0)
    );
    assert!(!body.contains("xid=\"20034\""));
}

#[test]
fn auto_with_nothing_falls_back_to_the_simulator_loudly() {
    let empty = crate::common::no_host();
    let out = std::process::Command::new(crate::common::BIN)
        .args([
            "--once",
            "--source",
            "auto",
            "--smi.path",
            "/nonexistent/nvidia-smi",
            "--nvml.library",
            "libnvidia-ml-not-here.so.1",
            // A made-up host with no trace of NVIDIA, whatever this one has.
            "--path.sysfs",
            empty.to_str().unwrap(),
            "--path.devfs",
            empty.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("SIMULATED"), "{err}");
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("GPUThrottling(gpu1)")
    );
}

/// A GPU on the PCI bus with no driver bound, no NVML and no nvidia-smi: a
/// GPU node whose driver is not loaded. `auto` serves NVML, not ready,
/// never the simulator.
#[test]
fn auto_on_a_host_with_an_unbound_nvidia_gpu_never_simulates() {
    let sysfs = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sysfs-unbound-gpu");
    let f = sysfs.join("bus/pci/devices/0000:9b:00.0");
    std::fs::create_dir_all(&f).unwrap();
    std::fs::write(f.join("vendor"), "0x10de\n").unwrap();
    std::fs::write(f.join("class"), "0x030200\n").unwrap();
    let e = Exporter::start(&[
        "--source",
        "auto",
        "--smi.path",
        "/nonexistent/nvidia-smi",
        "--nvml.library",
        "libnvidia-ml-not-here.so.1",
        "--xid.kmsg",
        "",
        "--path.sysfs",
        sysfs.to_str().unwrap(),
        // No device nodes: the PCI function alone is the trace, whatever
        // this host's /dev holds.
        "--path.devfs",
        sysfs.join("no-dev").to_str().unwrap(),
    ]);
    e.wait_log("NVIDIA PCI function 0000:9b:00.0", Duration::from_secs(10));
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, "gpu_exporter_collect_success") == Some(0.0)
    });
    assert!(
        body.contains("gpu_exporter_source_info{source=\"nvml\"} 1"),
        "{body}"
    );
    assert!(!body.contains("gpu_up{"), "{body}");
    assert_eq!(e.get("/readyz", &[]).status, 503);
    assert!(!e.log().contains("SIMULATED"), "{}", e.log());
}

#[test]
fn workload_allocator_stats_join_the_nvml_readings() {
    let f = Fixture::new("bin-workload", &fleet(&[gpu(0, ""), gpu(1, "")]));
    let dir = f.dir.join("stats");
    std::fs::create_dir_all(&dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for (pid, allocated) in [(1, 20_000_000_000u64), (2, 5_000_000_000)] {
        let doc = format!(
            r#"{{"gpu_uuid":"GPU-00000000-aaaa-bbbb-cccc-dddddddddddd","pid":{pid},"timestamp":{now},
            "reserved_bytes":30000000000,"allocated_bytes":{allocated},"largest_free_bytes":1000000000}}"#
        );
        std::fs::write(dir.join(format!("{pid}.json")), doc).unwrap();
    }
    let mut args = nvml_args(&f);
    args.extend(["--workload.stats-dir".into(), dir.to_str().unwrap().into()]);
    let e = start(&args);
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        b.contains("gpu_allocator_allocated_bytes{")
    });
    let g0 = "{gpu=\"0\",uuid=\"GPU-00000000-aaaa-bbbb-cccc-dddddddddddd\"}";
    // Two processes on GPU 0: summed.
    assert_eq!(
        value(&body, &format!("gpu_allocator_allocated_bytes{g0}")),
        Some(25e9)
    );
    assert_eq!(
        value(&body, &format!("gpu_allocator_reserved_bytes{g0}")),
        Some(60e9)
    );
    // GPU 1 has no workload file: nothing made up.
    assert!(!body.contains("gpu_allocator_allocated_bytes{gpu=\"1\""));
    let out = run(&[
        "--source",
        "nvml",
        "--nvml.library",
        f.lib.to_str().unwrap(),
        "--workload.stats-dir",
        "/nonexistent/stats",
        "--once",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--workload.stats-dir"));
}

#[test]
fn mig_instances_get_their_own_series() {
    let mig = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-mig-parent","bus_id":"00000000:18:00.0","temperature":50,
        "memory":{"total":85520809984,"reserved":536870912,"free":1000,"used":2000},
        "mig":[
          {"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-aaaa","gpu_instance_id":1,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960}},
          {"name":"NVIDIA H100 80GB HBM3 MIG 4g.40gb","uuid":"MIG-bbbb","gpu_instance_id":2,
           "memory":{"total":42949672960,"reserved":0,"free":42000000000,"used":949672960}}
        ]}"#;
    let f = Fixture::new("bin-mig", &fleet(&[mig.to_string()]));
    let e = start(&nvml_args(&f));
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        b.contains("mig_instance=\"2\"")
    });
    // The parent's uuid, so it joins gpu_info; the instance's memory in
    // families of its own.
    let used = |id: u32, profile: &str| {
        value(
            &body,
            &format!(
                "gpu_mig_memory_used_bytes{{gpu=\"0\",uuid=\"GPU-mig-parent\",mig_instance=\"{id}\",mig_profile=\"{profile}\"}}"
            ),
        )
    };
    assert_eq!(used(1, "3g.40gb"), Some(2949672960.0));
    assert_eq!(used(2, "4g.40gb"), Some(949672960.0));
    assert!(body.contains(
        "gpu_mig_info{gpu=\"0\",uuid=\"GPU-mig-parent\",mig_instance=\"1\",mig_profile=\"3g.40gb\",mig_compute_instance=\"0\",mig_uuid=\"MIG-aaaa\"} 1"
    ), "{body}");
    assert_eq!(
        value(
            &body,
            "gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-mig-parent\"}"
        ),
        Some(2000.0)
    );
    // What NVML refuses on MIG devices is left out, never zero-filled.
    assert!(
        !body
            .lines()
            .any(|l| l.starts_with("gpu_temperature_celsius") && l.contains("mig_instance"))
    );
    // `sum by (gpu)` of every memory family counts each byte once: the
    // GPU's own families hold the whole GPU, its instances' their own.
    for (family, want) in [
        ("gpu_memory_total_bytes", 85520809984.0),
        ("gpu_memory_used_bytes", 2000.0),
        ("gpu_mig_memory_total_bytes", 2.0 * 42949672960.0),
    ] {
        assert_eq!(
            sum_by_gpu(&body, family),
            [("0".to_string(), want)].into(),
            "{family}"
        );
    }
    // Every MIG series joins gpu_info on uuid.
    let infos: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("gpu_info{"))
        .filter_map(|l| label(l, "uuid"))
        .collect();
    let mig: Vec<&str> = body
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains("mig_instance="))
        .collect();
    assert!(mig.len() > 4, "{body}");
    for l in mig {
        assert!(infos.contains(&label(l, "uuid").unwrap()), "{l}");
    }
    check_metrics(&body);
}

/// Two compute instances in one GPU instance: `gpu_mig_info` has a row
/// for each, and a process series names its compute instance, so every
/// process joins exactly one MIG device (its `mig_uuid`).
#[test]
fn two_compute_instances_of_one_gpu_instance_join_their_processes() {
    let mig = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-ci-parent","bus_id":"00000000:18:00.0",
        "memory":{"total":85520809984,"reserved":536870912,"free":1000,"used":2000},
        "mig":[
          {"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-ci0","gpu_instance_id":2,"compute_instance_id":0,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960},
           "processes":[{"pid":5120,"used_bytes":2097152}]},
          {"name":"NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb","uuid":"MIG-ci1","gpu_instance_id":2,"compute_instance_id":1,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960},
           "processes":[{"pid":5121,"used_bytes":3145728},{"pid":5120,"used_bytes":4194304}]}
        ]}"#;
    let f = Fixture::new("bin-mig-ci", &fleet(&[mig.to_string()]));
    let mut args = nvml_args(&f);
    args.push("--collector.processes".into());
    let e = start(&args);
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        b.contains("gpu_process_memory_used_bytes{")
    });
    let samples = |family: &str| -> Vec<&str> {
        body.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .collect()
    };
    // One row per compute instance: (mig_instance, compute instance) -> mig_uuid.
    let devices: Vec<(&str, &str, &str)> = samples("gpu_mig_info")
        .into_iter()
        .map(|l| {
            let get = |n| label(l, n).unwrap_or_else(|| panic!("{n} in {l}"));
            (
                get("mig_instance"),
                get("mig_compute_instance"),
                get("mig_uuid"),
            )
        })
        .collect();
    assert_eq!(
        devices,
        [("2", "0", "MIG-ci0"), ("2", "1", "MIG-ci1")],
        "{body}"
    );
    // Each process series joins one device, and no two series share labels.
    let processes = samples("gpu_process_memory_used_bytes");
    let mut joined: Vec<(&str, &str, f64)> = processes
        .iter()
        .map(|l| {
            let key = (
                label(l, "mig_instance").unwrap(),
                label(l, "mig_compute_instance").unwrap(),
            );
            let device = devices
                .iter()
                .filter(|d| (d.0, d.1) == key)
                .map(|d| d.2)
                .collect::<Vec<_>>();
            assert_eq!(device.len(), 1, "{l}");
            let used: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
            (label(l, "pid").unwrap(), device[0], used)
        })
        .collect();
    joined.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    assert_eq!(
        joined,
        [
            ("5120", "MIG-ci0", 2097152.0),
            ("5120", "MIG-ci1", 4194304.0),
            ("5121", "MIG-ci1", 3145728.0)
        ]
    );
    check_metrics(&body);
    // And the join docs/sources.md gives, in a real Prometheus.
    if !crate::common::have("prometheus", &["--version"]) {
        return;
    }
    use crate::deploy::{Prometheus, urlencode};
    let mut prom = Prometheus::start(e.addr);
    let join = "gpu_process_memory_used_bytes * on (uuid, mig_instance, mig_compute_instance) group_left (mig_uuid) gpu_mig_info";
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/sources.md"))
            .unwrap();
    let page = page.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(page.contains(join), "docs/sources.md gives {join}");
    let got = crate::common::eventually(Duration::from_secs(45), || {
        match prom.get(&format!("/api/v1/query?query={}", urlencode(join))) {
            Some((200, body)) if crate::prometheus::series(&body).len() == 3 => {
                Ok(crate::prometheus::series(&body))
            }
            other => Err(format!("{other:?}")),
        }
    });
    let mut seen: Vec<(String, f64)> = got
        .iter()
        .map(|(labels, v)| {
            let uuid = labels
                .split(r#""mig_uuid":""#)
                .nth(1)
                .and_then(|s| s.split('"').next());
            (uuid.unwrap_or_else(|| panic!("{labels}")).to_string(), *v)
        })
        .collect();
    seen.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(
        seen,
        [
            ("MIG-ci0".to_string(), 2097152.0),
            ("MIG-ci1".to_string(), 3145728.0),
            ("MIG-ci1".to_string(), 4194304.0)
        ]
    );
}

/// A label's value in a sample line.
pub fn label<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// `sum by (gpu) (family)` over an exposition.
pub fn sum_by_gpu(body: &str, family: &str) -> std::collections::BTreeMap<String, f64> {
    let mut sums = std::collections::BTreeMap::new();
    for l in body
        .lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
    {
        let v: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
        *sums
            .entry(label(l, "gpu").unwrap().to_string())
            .or_insert(0.0) += v;
    }
    sums
}
