//! Pod attribution through the binary: the exporter on the fake NVML
//! (`fake-nvml/`) lists pods from the fake kubelet, a real gRPC server
//! (`tests/fake_kubelet/`), and serves `gpu_pod_info`: every device-id
//! form, DRA, an answer over gRPC's 4 MiB, and a kubelet that is missing,
//! hangs, answers garbage, closes mid-stream or restarts, while scrapes
//! keep answering from the last good listing.

use crate::common::{Exporter, check_metrics, value};
use crate::fake_kubelet::{Fake, SocketDir, pod, pods_json, python_ready, serial};
use crate::sources::fake_nvml::Fixture;
use crate::sources::{fleet, gpu, nvml_args, start};
use std::time::Duration;

const G0: &str = "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd";
const G1: &str = "GPU-00000001-aaaa-bbbb-cccc-dddddddddddd";
const G2: &str = "GPU-00000002-aaaa-bbbb-cccc-dddddddddddd";
const M1A: &str = "MIG-2f0c4a6e-0001-5a5a-8b8b-0123456789ab";
const M1B: &str = "MIG-7d3e9b1c-0002-5a5a-8b8b-0123456789ab";
const LONG: Duration = Duration::from_secs(90);

/// GPU 0 and 2 whole, GPU 1 in MIG mode with GPU instances 1 and 2.
fn nvml() -> Fixture {
    let mig = format!(
        r#","mig":[
        {{"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"{M1A}","gpu_instance_id":1}},
        {{"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"{M1B}","gpu_instance_id":2}}]"#
    );
    let gpus = [gpu(0, ""), gpu(1, &mig), gpu(2, "")];
    Fixture::new(&format!("kubelet-{}", std::process::id()), &fleet(&gpus))
}

/// The exporter on `fixture`, listing pods from `socket` every 200ms.
fn exporter(fixture: &Fixture, socket: &std::path::Path, extra: &[&str]) -> Exporter {
    let mut args = nvml_args(fixture);
    args.extend(
        [
            "--kubernetes.pod-resources-socket",
            socket.to_str().unwrap(),
            "--kubernetes.refresh-interval",
            "200ms",
        ]
        .map(String::from),
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    start(&args)
}

/// The `gpu_pod_info` lines of a scrape.
fn pod_lines(body: &str) -> Vec<&str> {
    body.lines()
        .filter(|l| l.starts_with("gpu_pod_info{"))
        .collect()
}

fn errors(body: &str, reason: &str) -> f64 {
    let name = format!("gpu_exporter_kubelet_errors_total{{reason=\"{reason}\"}}");
    value(body, &name).unwrap_or(0.0)
}

#[test]
fn every_device_form_gives_its_gpu_pod_info() {
    if !python_ready() {
        return;
    }
    let _one = serial();
    let dra = r#"{"name": "dra-pod", "namespace": "ml", "containers": [{"name": "c",
        "dynamicResources": [{"claimName": "gpu-claim", "claimNamespace": "ml",
        "claimResources": [{"cdiDevices": [{"name": "k8s.gpu.nvidia.com/device=gpu-0"}],
            "driverName": "gpu.nvidia.com", "poolName": "node-a", "deviceName": "gpu-0"}]}]}]}"#;
    let pods = pods_json(&[
        pod("ml", "train", "trainer", "nvidia.com/gpu", &[G0]),
        pod("ml", "mixed", "c", "nvidia.com/mig-3g.40gb", &[M1A]),
        pod("ml", "single", "c", "nvidia.com/gpu", &[M1B]),
        pod("a", "a", "c", "nvidia.com/gpu", &[&format!("{G2}::0")]),
        pod(
            "b",
            "b",
            "c",
            "nvidia.com/gpu.shared",
            &[&format!("{G2}::1")],
        ),
        pod("ns", "idx", "c", "nvidia.com/gpu", &["0"]),
        pod("ns", "gke", "c", "nvidia.com/gpu", &["nvidia2/vgpu1"]),
        pod("default", "web", "nginx", "example.com/nic", &["0"]),
        dra.to_string(),
    ]);
    let dir = SocketDir::new("forms");
    let _kubelet = Fake::start_in(&dir.0, "serve", &pods, &[]);
    let f = nvml();
    let e = exporter(&f, &dir.socket(), &[]);
    let body = e.wait_for("/metrics", LONG, |b| pod_lines(b).len() == 7);
    let mig = |gi: u32, ns: &str, p: &str| {
        format!(
            "gpu_pod_info{{gpu=\"1\",uuid=\"{G1}\",mig_instance=\"{gi}\",mig_profile=\"3g.40gb\",namespace=\"{ns}\",pod=\"{p}\",container=\"c\"}} 1"
        )
    };
    let whole = |g: u32, uuid: &str, ns: &str, p: &str, c: &str| {
        format!(
            "gpu_pod_info{{gpu=\"{g}\",uuid=\"{uuid}\",namespace=\"{ns}\",pod=\"{p}\",container=\"{c}\"}} 1"
        )
    };
    assert_eq!(
        pod_lines(&body),
        [
            whole(0, G0, "ml", "train", "trainer"),
            whole(0, G0, "ns", "idx", "c"),
            mig(1, "ml", "mixed"),
            mig(2, "ml", "single"),
            whole(2, G2, "a", "a", "c"),
            whole(2, G2, "b", "b", "c"),
            whole(2, G2, "ns", "gke", "c"),
        ],
        "{body}"
    );
    assert!(body.contains(
        "\ngpu_pod_dra_info{namespace=\"ml\",pod=\"dra-pod\",container=\"c\",claim_namespace=\"ml\",claim=\"gpu-claim\",driver=\"gpu.nvidia.com\",pool=\"node-a\",device=\"gpu-0\"} 1\n"
    ));
    assert!(value(&body, "gpu_exporter_kubelet_last_success_timestamp_seconds").is_some());
    for reason in ["connect", "timeout", "closed", "protocol", "decode"] {
        assert_eq!(errors(&body, reason), 0.0, "{reason}");
    }
    check_metrics(&body);
    e.wait_log("kubelet pod-resources:", LONG);

    // With --kubernetes.pod-labels every GPU series comes once per pod:
    // GPU 2's three times, GPU 1's (in MIG mode, its pods on instances)
    // once, bare.
    let e = exporter(&f, &dir.socket(), &["--kubernetes.pod-labels"]);
    let body = e.wait_for("/metrics", LONG, |b| pod_lines(b).len() == 7);
    let temps: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("gpu_temperature_celsius{"))
        .collect();
    assert_eq!(temps.len(), 6, "{temps:?}");
    assert!(temps[0].contains(",namespace=\"ml\",pod=\"train\",container=\"trainer\"}"));
    assert_eq!(
        temps[2],
        format!("gpu_temperature_celsius{{gpu=\"1\",uuid=\"{G1}\"}} 51")
    );
    check_metrics(&body);
}

#[test]
fn an_answer_over_four_mib_streams_in_bounded_memory() {
    if !python_ready() {
        return;
    }
    let _one = serial();
    // 16 MiB of CPU pods around one GPU pod: four times gRPC's default
    // limit, streamed through a 32 KiB buffer and one pod at a time.
    let pods = pods_json(&[pod("ml", "needle", "c", "nvidia.com/gpu", &[G2])]);
    let dir = SocketDir::new("big");
    let filler = (16 << 20).to_string();
    let _kubelet = Fake::start_in(&dir.0, "serve", &pods, &["--filler-bytes", &filler]);
    let f = nvml();
    let e = exporter(&f, &dir.socket(), &[]);
    let body = e.wait_for("/metrics", LONG, |b| pod_lines(b).len() == 1);
    assert!(pod_lines(&body)[0].contains("pod=\"needle\""));
    // Several listings of it, then the peak: the exporter's own
    // budget, whatever the answer's size (the fake NVML included).
    e.wait_for("/metrics", LONG, |b| {
        value(b, "gpu_exporter_kubelet_last_success_timestamp_seconds").is_some()
    });
    std::thread::sleep(Duration::from_secs(2));
    let peak = e.status_kib("VmHWM");
    eprintln!("peak RSS after 16 MiB pod-resources answers: {peak} KiB");
    assert!(peak < 16 * 1024, "peak RSS {peak} KiB after 16 MiB answers");
}

#[test]
fn a_misbehaving_kubelet_leaves_the_pods_stale_and_scrapes_answer() {
    if !python_ready() {
        return;
    }
    let _one = serial();
    let pods = pods_json(&[pod("ml", "train", "c", "nvidia.com/gpu", &[G0])]);
    let dir = SocketDir::new("misbehave");
    let f = nvml();
    // No kubelet yet: said once, retried, nothing served.
    let e = exporter(&f, &dir.socket(), &[]);
    e.wait_log("kubelet pod-resources: no socket at", LONG);
    let body = e.wait_for("/metrics", LONG, |b| errors(b, "connect") >= 1.0);
    assert!(pod_lines(&body).is_empty());
    assert_eq!(value(&body, "gpu_exporter_collect_success"), Some(1.0));

    // It comes: its pods are served.
    let serving = Fake::start_in(&dir.0, "serve", &pods, &[]);
    e.wait_for("/metrics", LONG, |b| pod_lines(b).len() == 1);
    drop(serving);

    // Each misbehaviour: counted by its reason, while the last good pods
    // stay served and every scrape answers with a fresh snapshot. A
    // serving kubelet in between resets the backoff.
    let stall = (2 << 20).to_string();
    let cases: [(&str, &[&str], &[&str]); 4] = [
        ("hang", &[], &["timeout", "grpc"]),
        ("garbage", &["--garbage", "hpack"], &["protocol", "closed"]),
        ("garbage", &["--garbage", "http1"], &["protocol", "closed"]),
        (
            "close-mid",
            &["--filler-bytes", &stall, "--close-after", "300000"],
            &["closed"],
        ),
    ];
    for (mode, extra, reasons) in cases {
        let before = e.metrics(None).body;
        let count = |b: &str| reasons.iter().map(|r| errors(b, r)).sum::<f64>();
        let bad = Fake::start_in(&dir.0, mode, &pods, extra);
        let body = e.wait_for("/metrics", LONG, |b| count(b) > count(&before));
        assert_eq!(pod_lines(&body).len(), 1, "{mode}: the last good pods");
        let age = value(&body, "gpu_exporter_snapshot_age_seconds").unwrap();
        assert!(age < 5.0, "{mode}: snapshot age {age}");
        drop(bad);
        let good = Fake::start_in(&dir.0, "serve", &pods, &[]);
        let at = value(&body, "gpu_exporter_kubelet_last_success_timestamp_seconds").unwrap();
        e.wait_for("/metrics", LONG, |b| {
            value(b, "gpu_exporter_kubelet_last_success_timestamp_seconds").unwrap() > at
        });
        drop(good);
    }

    // A restart with the call in flight: the call fails, the next ones
    // find the kubelet back, with other pods.
    let moved = pods_json(&[pod("ml", "train", "c", "nvidia.com/gpu", &[G2])]);
    let _restarting = Fake::start_in(&dir.0, "restart", &moved, &["--restart-delay", "0.5"]);
    let body = e.wait_for("/metrics", LONG, |b| {
        pod_lines(b).first().is_some_and(|l| l.contains(G2))
    });
    assert_eq!(pod_lines(&body).len(), 1);
    check_metrics(&body);
    // Quiet logs: one line a change of state, never one a retry.
    let log = e.log();
    let warnings = log.matches("kubelet pod-resources:").count();
    assert!(warnings < 40, "{warnings} kubelet lines:\n{log}");
}
