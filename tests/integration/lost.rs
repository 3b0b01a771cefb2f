//! Lost GPUs and their counters, through the binary, under NVML (the fake
//! libnvidia-ml) and nvidia-smi (a fake script): the Xid that comes with
//! a loss is served and pages, a GPU that vanishes is `gpu_up 0` with its
//! identity, counters never go back.

use crate::common::{Exporter, temp_file, value};
use crate::prometheus::firing;
use crate::sources::fake_nvml::Fixture;
use crate::sources::{fake_smi, fleet, gpu, nvml_args, start};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const UUID1: &str = "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd";

/// Rules with GPULost's `for` cut short: no verdict is faked, only waited
/// for less.
fn short_rules() -> String {
    let path = temp_file(
        "lost-rules.json",
        r#"{ "rules": [ { "name": "GPULost", "for": "1s" } ] }"#,
    );
    path.to_str().unwrap().to_string()
}

fn firing_for(e: &Exporter, alert: &str, gpu: &str) -> bool {
    firing(&e.get("/alerts", &[]).body).contains(&(alert.to_string(), format!("gpu{gpu}")))
}

#[test]
fn the_xid_79_that_comes_with_a_loss_is_served_and_pages() {
    // Xid 79 arrives after the second collection, the GPU is lost at the
    // fourth: as a GPU falling off the bus does.
    let gpus = [
        gpu(0, ""),
        gpu(
            1,
            r#","xids":[79],"xids_after_collections":2,"lost_after_collections":3"#,
        ),
    ];
    let f = Fixture::new("bin-xid-loss", &fleet(&gpus));
    let e = start(&nvml_args(&f));
    let xid79 = format!("gpu_xid_errors_total{{gpu=\"1\",uuid=\"{UUID1}\",xid=\"79\"}}");
    let body = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        value(b, &format!("gpu_up{{gpu=\"1\",uuid=\"{UUID1}\"}}")) == Some(0.0)
            && value(b, &xid79).is_some_and(|n| n >= 1.0)
    });
    // Lost, with its identity and counters; its gauges are gone.
    assert!(
        body.contains(&format!(
            "gpu_info{{gpu=\"1\",uuid=\"{UUID1}\",model=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:19:00.0\",driver_version=\"550.54.15\"}} 1"
        )),
        "{body}"
    );
    assert!(!body.contains("gpu_temperature_celsius{gpu=\"1\""));
    assert_eq!(
        value(
            &body,
            &format!("gpu_energy_joules_total{{gpu=\"1\",uuid=\"{UUID1}\"}}")
        ),
        Some(123.456)
    );
    assert_eq!(value(&body, "gpu_up{gpu=\"0\""), Some(1.0));
    // And it pages, for that GPU.
    crate::common::eventually(Duration::from_secs(20), || {
        match firing_for(&e, "GPUXidErrors", "1") {
            true => Ok(()),
            false => Err(e.get("/alerts", &[]).body),
        }
    });
    assert!(!firing_for(&e, "GPUXidErrors", "0"));
    // A SIGHUP keeps the lost GPU and its Xid 79.
    e.signal("HUP");
    e.wait_log("reloaded: ", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(600));
    let body = e.metrics(None).body;
    assert_eq!(
        value(&body, &format!("gpu_up{{gpu=\"1\",uuid=\"{UUID1}\"}}")),
        Some(0.0),
        "{body}"
    );
    assert!(value(&body, &xid79).is_some_and(|n| n >= 1.0), "{body}");
    assert!(!e.log().contains("never read"), "{}", e.log());
}

/// NVML gets no events from a GPU that fell off the bus, but the driver
/// still logs its Xid: the kernel log's count reaches the lost GPU.
#[test]
fn an_xid_logged_after_a_loss_counts_for_the_lost_gpu() {
    let gpus = [gpu(0, ""), gpu(1, r#","lost_after_collections":2"#)];
    let f = Fixture::new("bin-loss-kmsg", &fleet(&gpus));
    let log = temp_file("loss-kmsg.log", "");
    let mut args = nvml_args(&f);
    let at = args.iter().position(|a| a == "--xid.kmsg").unwrap();
    args[at + 1] = log.to_str().unwrap().to_string();
    let e = start(&args);
    let up1 = format!("gpu_up{{gpu=\"1\",uuid=\"{UUID1}\"}}");
    let xid79 = format!("gpu_xid_errors_total{{gpu=\"1\",uuid=\"{UUID1}\",xid=\"79\"}}");
    let body = e.wait_for("/metrics", Duration::from_secs(30), |b| {
        value(b, &up1) == Some(0.0)
    });
    assert_eq!(value(&body, &xid79), Some(0.0), "NVML's zero count: {body}");
    // Stamped now to the microsecond: a whole second could fall before
    // the exporter's start, and only Xid after it count.
    let stamp = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S,%6N+00:00"])
        .output()
        .unwrap();
    let stamp = String::from_utf8(stamp.stdout).unwrap();
    crate::kernel_log::append(
        &log,
        &format!(
            "kern  :warn  : {} NVRM: Xid (PCI:0000:19:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
            stamp.trim()
        ),
    );
    let body = e.wait_for("/metrics", Duration::from_secs(20), |b| {
        value(b, &xid79) == Some(1.0)
    });
    // The other GPU's counts are its own.
    assert_eq!(
        value(
            &body,
            "gpu_xid_errors_total{gpu=\"0\",uuid=\"GPU-00000000-aaaa-bbbb-cccc-dddddddddddd\",xid=\"79\"}"
        ),
        Some(0.0),
        "{body}"
    );
}

#[test]
fn counters_never_go_back_when_nvml_resets_them() {
    let gpus = [gpu(0, r#","reset_after_collections":2"#)];
    let f = Fixture::new("bin-reset", &fleet(&gpus));
    let e = start(&nvml_args(&f));
    let energy = "gpu_energy_joules_total{gpu=\"0\"";
    assert_eq!(value(&e.metrics(None).body, energy), Some(123.456));
    e.wait_log("went back from 123.456 to 0", Duration::from_secs(20));
    // Bounded: a few collections after the reset, still where it was.
    for _ in 0..5 {
        assert_eq!(value(&e.metrics(None).body, energy), Some(123.456));
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        e.log().matches("gpu_energy_joules_total went back").count(),
        1
    );
}

#[test]
fn a_gpu_lost_before_it_was_read_gets_no_empty_labels() {
    let gpus = [gpu(0, ""), gpu(1, r#","lost_after_collections":0"#)];
    let f = Fixture::new("bin-lost-early", &fleet(&gpus));
    let e = start(&nvml_args(&f));
    e.wait_log("is lost and was never read", Duration::from_secs(20));
    let body = e.metrics(None).body;
    assert!(!body.contains("uuid=\"\""), "{body}");
    assert!(!body.contains("model=\"\""), "{body}");
    assert!(!body.contains("gpu=\"1\""), "{body}");
    assert_eq!(value(&body, "gpu_up{gpu=\"0\""), Some(1.0));
}

#[test]
fn a_gpu_lost_during_its_first_read_is_served_lost_under_the_uuid_it_gave() {
    // GPU 1 answers its UUID, then falls off the bus during a 1.5 s call.
    let falls = r#","slow":{"call":"nvmlDeviceGetPowerUsage","ms":1500},"lost_after_ms":500"#;
    let f = Fixture::new("bin-lost-in-read", &fleet(&[gpu(0, ""), gpu(1, falls)]));
    let e = start(&nvml_args(&f));
    let up1 = format!("gpu_up{{gpu=\"1\",uuid=\"{UUID1}\"}}");
    let body = e.wait_for("/metrics", Duration::from_secs(15), |b| {
        value(b, &up1) == Some(0.0)
    });
    assert_eq!(value(&body, "gpu_up{gpu=\"0\""), Some(1.0));
    assert!(
        !body.contains("gpu_temperature_celsius{gpu=\"1\""),
        "{body}"
    );
    assert!(!e.log().contains("never read"), "{}", e.log());
}

const SMI_HEADER: &str = "index, uuid, pci.bus_id, temperature.gpu\n";

fn rows(rows: &[(u32, &str, u32, u32)]) -> String {
    let mut csv = SMI_HEADER.to_string();
    for (i, uuid, bus, temp) in rows {
        csv.push_str(&format!("{i}, {uuid}, 00000000:{bus:02X}:00.0, {temp}\n"));
    }
    csv
}

/// Replaces what the fake nvidia-smi prints, atomically.
fn set_output(smi: &Path, csv: &str) {
    let dir = smi.parent().unwrap();
    std::fs::write(dir.join("out.tmp"), csv).unwrap();
    std::fs::rename(dir.join("out.tmp"), dir.join("out.csv")).unwrap();
}

fn smi_exporter(smi: &Path, extra: &[&str]) -> Exporter {
    let rules = short_rules();
    let mut args = vec![
        "--source",
        "smi",
        "--smi.path",
        smi.to_str().unwrap(),
        "--xid.kmsg",
        "",
        "--collect.interval",
        "200ms",
        "--rules.file",
        &rules,
    ];
    args.extend(extra);
    Exporter::start(&args)
}

#[test]
fn under_smi_a_gpu_that_vanishes_is_lost_and_pages_and_survivors_keep_their_index() {
    let all = [
        (0, "GPU-a", 0x18, 40),
        (1, "GPU-b", 0x19, 41),
        (2, "GPU-c", 0x1A, 42),
    ];
    let smi = fake_smi("vanish", &rows(&all));
    let e = smi_exporter(&smi, &[]);
    assert_eq!(
        value(&e.metrics(None).body, "gpu_up{gpu=\"1\",uuid=\"GPU-b\"}"),
        Some(1.0)
    );
    // GPU-b is gone and nvidia-smi renumbers GPU-c to 1.
    set_output(
        &smi,
        &rows(&[(0, "GPU-a", 0x18, 40), (1, "GPU-c", 0x1A, 43)]),
    );
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, "gpu_temperature_celsius{gpu=\"2\",uuid=\"GPU-c\"}") == Some(43.0)
    });
    assert_eq!(value(&body, "gpu_up{gpu=\"1\",uuid=\"GPU-b\"}"), Some(0.0));
    assert!(
        body.contains(
            "gpu_info{gpu=\"1\",uuid=\"GPU-b\",model=\"\",pci_bus_id=\"00000000:19:00.0\""
        ),
        "{body}"
    );
    assert_eq!(value(&body, "gpu_up{gpu=\"2\",uuid=\"GPU-c\"}"), Some(1.0));
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(1.0));
    assert_eq!(value(&body, "gpu_exporter_gpus"), Some(3.0));
    crate::common::eventually(Duration::from_secs(20), || {
        match firing_for(&e, "GPULost", "1") {
            true => Ok(()),
            false => Err(e.get("/alerts", &[]).body),
        }
    });
    // A SIGHUP (the rules reloaded) keeps it lost, and paging.
    e.signal("HUP");
    e.wait_log("reloaded: ", Duration::from_secs(10));
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, "gpu_temperature_celsius{gpu=\"2\",uuid=\"GPU-c\"}") == Some(43.0)
    });
    assert_eq!(value(&body, "gpu_up{gpu=\"1\",uuid=\"GPU-b\"}"), Some(0.0));
    assert_eq!(value(&body, "gpu_exporter_gpus"), Some(3.0));
    crate::common::eventually(Duration::from_secs(20), || {
        match firing_for(&e, "GPULost", "1") {
            true => Ok(()),
            false => Err(e.get("/alerts", &[]).body),
        }
    });
    // GPU-b comes back: GPULost resolves at the evaluation that reads it
    // up, though it holds 65m through a gap in its readings.
    set_output(&smi, &rows(&all));
    e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, "gpu_up{gpu=\"1\",uuid=\"GPU-b\"}") == Some(1.0)
    });
    crate::common::eventually(Duration::from_secs(5), || {
        let resolved = e
            .log()
            .lines()
            .any(|l| l.contains("alert GPULost{gpu=\"1\"") && l.contains("firing -> resolved"));
        match resolved && !firing_for(&e, "GPULost", "1") {
            true => Ok(()),
            false => Err(format!("{}\n{}", e.get("/alerts", &[]).body, e.log())),
        }
    });
}

#[test]
fn under_smi_an_unreachable_gpu_is_that_gpu_not_the_node() {
    let smi = fake_smi(
        "unreachable",
        &rows(&[
            (0, "GPU-a", 0x0A, 40),
            (1, "GPU-b", 0x0B, 41),
            (2, "GPU-c", 0x0C, 42),
        ]),
    );
    let e = smi_exporter(&smi, &[]);
    // nvidia-smi can no longer reach GPU-b, and says so by bus id (the
    // real line), exiting non-zero; the others still answer.
    let unreachable = crate::common::fixture(
        "nvidia-smi/devhandle_unknown-error_old-format_xxd3vin-workspace-19.txt",
    );
    set_output(
        &smi,
        &format!(
            "{SMI_HEADER}0, GPU-a, 00000000:0A:00.0, 40\n{unreachable}1, GPU-c, 00000000:0C:00.0, 42\n"
        ),
    );
    std::fs::write(smi.parent().unwrap().join("rc"), "15").unwrap();
    let body = e.wait_for("/metrics", Duration::from_secs(10), |b| {
        value(b, "gpu_up{gpu=\"1\",uuid=\"GPU-b\"}") == Some(0.0)
    });
    assert_eq!(value(&body, "gpu_up{gpu=\"0\",uuid=\"GPU-a\"}"), Some(1.0));
    assert_eq!(value(&body, "gpu_up{gpu=\"2\",uuid=\"GPU-c\"}"), Some(1.0));
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(1.0));
    e.wait_log(
        "nvidia-smi cannot reach GPU 00000000:0B:00.0: Unknown Error",
        Duration::from_secs(5),
    );
}

#[test]
fn under_smi_a_failure_is_quoted_in_nvidia_smis_own_words() {
    let smi = fake_smi("nodriver", &rows(&[(0, "GPU-a", 0x0A, 40)]));
    let e = smi_exporter(&smi, &[]);
    // The real driver goes away: nvidia-smi prints its message on stdout
    // and exits 9.
    let nodriver = crate::common::fixture("nvidia-smi/nodriver_535.309.01_query-gpu_exit9.stdout");
    set_output(&smi, &nodriver);
    std::fs::write(smi.parent().unwrap().join("rc"), "9").unwrap();
    let r = e.wait_for("/readyz", Duration::from_secs(10), |b| b.contains("failed"));
    assert!(
        r.contains(
            "nvidia-smi failed (exit status: 9): NVIDIA-SMI has failed because it couldn't \
             communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is \
             installed and running.\n"
        ),
        "{r}"
    );
    // Never a CSV header in the message.
    assert!(!r.contains("index, uuid"));
}

/// A made-up sysfs (and procfs) tree: one PCI function per `(address,
/// vendor, class, driver)`, and `driver/nvidia/gpus/<address>` for each of
/// `given` when it is `Some`.
fn pci_tree(
    tag: &str,
    functions: &[(&str, &str, &str, Option<&str>)],
    given: Option<&[&str]>,
) -> (String, String) {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pci-{tag}"));
    let _ = std::fs::remove_dir_all(&root);
    let (sysfs, procfs) = (root.join("sys"), root.join("proc"));
    for (address, vendor, class, driver) in functions {
        let f = sysfs.join("bus/pci/devices").join(address);
        std::fs::create_dir_all(&f).unwrap();
        std::fs::write(f.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(f.join("class"), format!("{class}\n")).unwrap();
        if let Some(d) = driver {
            let target = sysfs.join("bus/pci/drivers").join(d);
            std::fs::create_dir_all(&target).unwrap();
            std::os::unix::fs::symlink(&target, f.join("driver")).unwrap();
        }
    }
    std::fs::create_dir_all(&procfs).unwrap();
    for address in given.unwrap_or_default() {
        std::fs::create_dir_all(procfs.join("driver/nvidia/gpus").join(address)).unwrap();
    }
    let s = |p: &Path| p.to_str().unwrap().to_string();
    (s(&sysfs), s(&procfs))
}

/// A GPU on the PCI bus that NVML does not list (fallen off before the
/// exporter started, or its driver failed to take it) is served lost by
/// its bus id and pages; one passed through to a VM (vfio-pci) or another
/// vendor's is not ours; in a container, only the GPUs the driver's proc
/// directory lists count.
#[test]
fn a_gpu_on_the_bus_that_nvml_does_not_list_is_served_lost() {
    let functions = [
        ("0000:18:00.0", "0x10de", "0x030200", Some("nvidia")),
        ("0000:19:00.0", "0x10de", "0x030200", Some("nvidia")),
        ("0000:9b:00.0", "0x10de", "0x030200", Some("nvidia")),
        ("0000:9c:00.0", "0x10de", "0x030200", Some("vfio-pci")),
        ("0000:03:00.0", "0x8086", "0x030000", Some("i915")),
    ];
    let f = Fixture::new("bin-on-bus", &fleet(&[gpu(0, ""), gpu(1, "")]));
    let with = |sysfs: &str, procfs: &str| {
        let rules = temp_file(
            "on-bus-rules.json",
            r#"{ "rules": [ { "name": "GPULost", "for": "1s" } ] }"#,
        );
        let mut args = nvml_args(&f);
        args.extend(
            [
                "--path.sysfs",
                sysfs,
                "--path.procfs",
                procfs,
                "--rules.file",
                rules.to_str().unwrap(),
            ]
            .map(String::from),
        );
        start(&args)
    };
    // The host: the driver lists all three of its GPUs, NVML only two.
    let (sysfs, procfs) = pci_tree(
        "host",
        &functions,
        Some(&["0000:18:00.0", "0000:19:00.0", "0000:9b:00.0"]),
    );
    let e = with(&sysfs, &procfs);
    let body = e.wait_for("/metrics", Duration::from_secs(20), |b| {
        b.contains("gpu_up{gpu=\"2\"")
    });
    assert_eq!(
        value(&body, "gpu_up{gpu=\"2\",uuid=\"\"}"),
        Some(0.0),
        "{body}"
    );
    assert!(
        body.contains("gpu_info{gpu=\"2\",uuid=\"\",model=\"\",pci_bus_id=\"00000000:9B:00.0\""),
        "{body}"
    );
    assert_eq!(value(&body, "gpu_up{gpu=\"0\""), Some(1.0));
    assert_eq!(value(&body, "gpu_up{gpu=\"1\""), Some(1.0));
    assert!(
        !body.contains("gpu_up{gpu=\"3\""),
        "the VM's GPU is not ours: {body}"
    );
    assert_eq!(value(&body, "gpu_exporter_gpus"), Some(3.0));
    e.wait_log(
        "NVIDIA GPU 00000000:9B:00.0 is on the PCI bus but the source does not list it",
        Duration::from_secs(5),
    );
    crate::common::eventually(Duration::from_secs(20), || {
        match firing_for(&e, "GPULost", "2") {
            true => Ok(()),
            false => Err(e.get("/alerts", &[]).body),
        }
    });
    drop(e);
    // A container given two GPUs sees the host's sysfs, but its proc
    // directory lists only its own: nothing is lost.
    let (sysfs, procfs) = pci_tree(
        "container",
        &functions,
        Some(&["0000:18:00.0", "0000:19:00.0"]),
    );
    let e = with(&sysfs, &procfs);
    std::thread::sleep(Duration::from_millis(800));
    let body = e.metrics(None).body;
    assert_eq!(value(&body, "gpu_exporter_gpus"), Some(2.0), "{body}");
    assert!(!body.contains("gpu_up{gpu=\"2\""), "{body}");
}
