//! The kubelet client against a real gRPC server: the fake kubelet
//! (`tests/fake_kubelet/fake_kubelet.py`, Python grpcio) on a unix socket
//! in a temporary directory: every device-id form, DRA, big answers, and a
//! kubelet that errs, hangs, answers garbage, closes mid-stream, restarts
//! or is missing. The binary against the same fake is
//! `tests/integration/kubelet.rs`.
//!
//! Without python3 and grpcio these tests skip with a printed reason;
//! with CI=true they fail instead.
#![cfg(feature = "kubernetes")]

#[path = "support/fake_kubelet.rs"]
mod fake_kubelet;

use fake_kubelet::{Fake, pod, pods_json, python_ready, serial};
use fill::pods::attribution::{self, Gpu, Mig, Row};
use fill::pods::error::Error;
use fill::pods::kubelet::{Lister, Listing};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};
use wire::grpc;
use wire::h2::{Client, Limits};

const G0: &str = "GPU-8c1a3f2e-1111-2222-3333-444455556666";
const G1: &str = "GPU-0b5e7d9a-aaaa-bbbb-cccc-ddddeeeeffff";
const G2: &str = "GPU-5d4c3b2a-9999-8888-7777-666655554444";
const M1A: &str = "MIG-2f0c4a6e-0001-5a5a-8b8b-0123456789ab";
const M1B: &str = "MIG-7d3e9b1c-0002-5a5a-8b8b-0123456789ab";

/// GPU 0 and 2 whole, GPU 1 split into GPU instances 1 and 2.
fn gpus() -> Vec<Gpu> {
    vec![
        Gpu {
            index: 0,
            uuid: G0.into(),
            minor: Some(0),
            mig: vec![],
        },
        Gpu {
            index: 1,
            uuid: G1.into(),
            minor: Some(1),
            mig: vec![
                Mig {
                    uuid: M1A.into(),
                    gpu_instance_id: 1,
                    index: Some(0),
                },
                Mig {
                    uuid: M1B.into(),
                    gpu_instance_id: 2,
                    index: Some(1),
                },
            ],
        },
        Gpu {
            index: 2,
            uuid: G2.into(),
            minor: Some(2),
            mig: vec![],
        },
    ]
}

fn row(gpu: u32, uuid: &str, mig: Option<u32>, ns: &str, pod: &str, c: &str) -> Row {
    Row {
        gpu,
        uuid: uuid.into(),
        mig_instance: mig,
        namespace: ns.into(),
        pod: pod.into(),
        container: c.into(),
    }
}

fn list(fake: &Fake, timeout: Duration) -> Result<Listing, Error> {
    Lister::default().list(&fake.socket, timeout)
}

fn rows(l: &Listing) -> Vec<Row> {
    attribution::attribute(&l.pods, &gpus()).rows
}

const T: Duration = Duration::from_secs(10);

#[test]
fn whole_gpus_and_non_gpu_pods() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[
        pod("ml", "train-0", "trainer", "nvidia.com/gpu", &[G0, G2]),
        pod("default", "web", "nginx", "example.com/nic", &["0"]),
        r#"{"name": "cpu-only", "namespace": "default", "containers": [{"name": "app", "cpuIds": [1]}]}"#
            .to_string(),
    ]);
    let fake = Fake::start("serve", &pods, &[]);
    let l = list(&fake, T).unwrap();
    assert_eq!(l.stats.pods, 3);
    assert_eq!(l.stats.kept, 1);
    assert_eq!(l.pods[0].containers[0].cpu_ids, [4, 5]);
    assert_eq!(
        l.pods[0].containers[0].devices[0]
            .topology
            .as_ref()
            .unwrap()
            .numa_nodes,
        [0]
    );
    assert_eq!(
        rows(&l),
        [
            row(0, G0, None, "ml", "train-0", "trainer"),
            row(2, G2, None, "ml", "train-0", "trainer")
        ]
    );
}

#[test]
fn mig_strategies() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[
        pod("ml", "mixed", "c", "nvidia.com/mig-3g.40gb", &[M1A]),
        pod("ml", "single", "c", "nvidia.com/gpu", &[M1B]),
    ]);
    let fake = Fake::start("serve", &pods, &[]);
    let l = list(&fake, T).unwrap();
    assert_eq!(
        rows(&l),
        [
            row(1, M1A, Some(1), "ml", "mixed", "c"),
            row(1, M1B, Some(2), "ml", "single", "c")
        ]
    );
}

#[test]
fn time_sliced_gpus_list_every_pod() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let g0 = |n: u32| format!("{G0}::{n}");
    let m = |n: u32| format!("{M1A}::{n}");
    let pods = pods_json(&[
        pod("a", "a", "c", "nvidia.com/gpu", &[&g0(0)]),
        pod("b", "b", "c", "nvidia.com/gpu.shared", &[&g0(1), &g0(2)]),
        pod("c", "c", "c", "nvidia.com/mig-1g.10gb", &[&m(0)]),
        pod("d", "d", "c", "nvidia.com/mig-1g.10gb.shared", &[&m(3)]),
    ]);
    let fake = Fake::start("serve", &pods, &[]);
    let l = list(&fake, T).unwrap();
    assert_eq!(
        rows(&l),
        [
            row(0, G0, None, "a", "a", "c"),
            row(0, G0, None, "b", "b", "c"),
            row(1, M1A, Some(1), "c", "c", "c"),
            row(1, M1A, Some(1), "d", "d", "c"),
        ]
    );
}

#[test]
fn index_strategy_and_gke_forms() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[
        pod("ns", "idx", "c", "nvidia.com/gpu", &["0", "1:1"]),
        pod(
            "ns",
            "gke",
            "c",
            "nvidia.com/gpu",
            &["nvidia2", "nvidia1/gi1"],
        ),
        pod(
            "ns",
            "gke-shared",
            "c",
            "nvidia.com/gpu",
            &["nvidia2/vgpu3", "nvidia1/gi2/vgpu0"],
        ),
    ]);
    let fake = Fake::start("serve", &pods, &[]);
    let l = list(&fake, T).unwrap();
    let a = attribution::attribute(&l.pods, &gpus());
    assert!(a.unmatched.is_empty(), "{:?}", a.unmatched);
    assert_eq!(
        a.rows,
        [
            row(0, G0, None, "ns", "idx", "c"),
            row(1, M1A, Some(1), "ns", "gke", "c"),
            row(1, M1B, Some(2), "ns", "gke-shared", "c"),
            row(1, M1B, Some(2), "ns", "idx", "c"),
            row(2, G2, None, "ns", "gke", "c"),
            row(2, G2, None, "ns", "gke-shared", "c"),
        ]
    );
}

#[test]
fn dra_devices_and_pod_level_resources() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let dra = r#"{"name": "dra-pod", "namespace": "ml",
        "cpuIds": [8, 9], "memory": [{"memoryType": "memory", "size": "1073741824"}],
        "containers": [{"name": "c", "dynamicResources": [{
            "claimName": "gpu-claim", "claimNamespace": "ml",
            "claimResources": [
                {"cdiDevices": [{"name": "k8s.gpu.nvidia.com/device=gpu-0"}],
                 "driverName": "gpu.nvidia.com", "poolName": "node-a", "deviceName": "gpu-0",
                 "shareId": "3"},
                {"driverName": "net.example.com", "poolName": "node-a", "deviceName": "eth1"}
            ]}]}]}"#;
    let other = r#"{"name": "net-only", "namespace": "ml", "containers": [{"name": "c",
        "dynamicResources": [{"claimName": "n", "claimNamespace": "ml",
        "claimResources": [{"driverName": "net.example.com", "deviceName": "eth0"}]}]}]}"#;
    let fake = Fake::start("serve", &pods_json(&[dra.into(), other.into()]), &[]);
    let l = list(&fake, T).unwrap();
    assert_eq!(l.stats.pods, 2);
    assert_eq!(l.pods.len(), 1);
    let p = &l.pods[0];
    assert_eq!(p.cpu_ids, [8, 9]);
    assert_eq!(p.memory[0].size, 1 << 30);
    let cr = &p.containers[0].dynamic_resources[0].claim_resources[0];
    assert_eq!(cr.cdi_devices, ["k8s.gpu.nvidia.com/device=gpu-0"]);
    assert_eq!(cr.share_id.as_deref(), Some("3"));
    let a = attribution::attribute(&l.pods, &gpus());
    assert!(a.rows.is_empty());
    assert_eq!(a.dra.len(), 1);
    assert_eq!(
        (a.dra[0].pool.as_str(), a.dra[0].device.as_str()),
        ("node-a", "gpu-0")
    );
    assert_eq!(a.dra[0].claim_name, "gpu-claim");
}

#[test]
fn empty_node() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let fake = Fake::start("serve", "{}", &[]);
    let l = list(&fake, T).unwrap();
    assert_eq!(l.message_bytes, 0);
    assert!(l.pods.is_empty());
}

#[test]
fn response_over_four_mib() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[pod("ml", "needle", "c", "nvidia.com/gpu", &[G0])]);
    let fake = Fake::start("serve", &pods, &["--filler-bytes", &(6 << 20).to_string()]);
    let mut lister = Lister::default();
    let l = lister.list(&fake.socket, T).unwrap();
    assert!(l.message_bytes > 6 << 20, "{}", l.message_bytes);
    assert!(l.stats.pods > 50_000);
    assert_eq!(rows(&l), [row(0, G0, None, "ml", "needle", "c")]);
    assert!(lister.peak_buffer() < 2 << 20);
}

/// 63 MiB streams through; past 64 MiB is refused at the message prefix.
#[test]
fn sixty_four_mib_limit() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[pod("ml", "needle", "c", "nvidia.com/gpu", &[G2])]);
    let fake = Fake::start("serve", &pods, &["--filler-bytes", &(63 << 20).to_string()]);
    let mut lister = Lister::default();
    let start = Instant::now();
    let l = lister.list(&fake.socket, Duration::from_secs(60)).unwrap();
    eprintln!("63 MiB List took {:?}", start.elapsed());
    assert!(l.message_bytes > 62 << 20);
    assert_eq!(rows(&l), [row(2, G2, None, "ml", "needle", "c")]);
    assert!(lister.peak_buffer() < 2 << 20, "{}", lister.peak_buffer());
    drop(fake);

    let fake = Fake::start("serve", &pods, &["--filler-bytes", &(65 << 20).to_string()]);
    assert_eq!(
        list(&fake, Duration::from_secs(60)),
        Err(Error::Call(wire::Error::MessageTooLarge))
    );
}

#[test]
fn grpc_error_status() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let fake = Fake::start("error", "{}", &[]);
    assert_eq!(
        list(&fake, T),
        Err(Error::Call(wire::Error::Grpc {
            code: 14,
            message: "kubelet is busy: try later".into()
        }))
    );
    // Methods the fake does not serve answer UNIMPLEMENTED, trailers-only.
    let mut s = UnixStream::connect(&fake.socket).unwrap();
    let r = grpc::unary(
        &mut Client::new(Limits::default()),
        &mut s,
        "/v1.PodResourcesLister/GetAllocatableResources",
        &[],
        Instant::now() + T,
        1 << 20,
        &mut |_| Ok(()),
    );
    assert!(
        matches!(r, Err(wire::Error::Grpc { code: 12, .. })),
        "{r:?}"
    );
}

#[test]
fn hung_kubelet_times_out_within_the_deadline() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[pod("ml", "p", "c", "nvidia.com/gpu", &[G0])]);
    let filler = (2 << 20).to_string();
    let cases: [(&str, &[&str]); 3] = [
        // The handler never answers: grpcio ends the call itself at the
        // grpc-timeout we sent, or our deadline does.
        ("hang", &[]),
        // Never accepted: the connection waits in the listen backlog.
        ("silent", &[]),
        // The response starts, then goes quiet with the connection open.
        (
            "stall-mid",
            &["--filler-bytes", &filler, "--close-after", "300000"],
        ),
    ];
    for (mode, extra) in cases {
        let fake = Fake::start(mode, &pods, extra);
        let start = Instant::now();
        let r = list(&fake, Duration::from_millis(800));
        let took = start.elapsed();
        match (mode, &r) {
            (_, Err(Error::Call(wire::Error::Timeout))) => {}
            ("hang", Err(Error::Call(wire::Error::Grpc { code: 4, .. }))) => {}
            _ => panic!("{mode}: {r:?}"),
        }
        // How long it took is a measurement, not a verdict: printed.
        eprintln!("{mode}: {} after {took:?}", r.unwrap_err());
    }
}

#[test]
fn garbage_is_an_error_not_a_hang() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    for kind in ["random", "http1", "hpack"] {
        let fake = Fake::start("garbage", "{}", &["--garbage", kind]);
        let start = Instant::now();
        let r = list(&fake, T);
        assert!(r.is_err(), "{kind}: {r:?}");
        // An error of its own, not the deadline.
        assert_ne!(r, Err(Error::Call(wire::Error::Timeout)), "{kind}");
        eprintln!(
            "garbage ({kind}): {} after {:?}",
            r.unwrap_err(),
            start.elapsed()
        );
    }
}

#[test]
fn connection_closed_mid_stream() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[pod("ml", "needle", "c", "nvidia.com/gpu", &[G0])]);
    let fake = Fake::start(
        "close-mid",
        &pods,
        &[
            "--filler-bytes",
            &(2 << 20).to_string(),
            "--close-after",
            "300000",
        ],
    );
    assert_eq!(list(&fake, T), Err(Error::Call(wire::Error::Closed)));
}

#[test]
fn kubelet_restart_fails_the_call_then_recovers() {
    if !python_ready() {
        return;
    }
    let _g = serial();
    let pods = pods_json(&[pod("ml", "p", "c", "nvidia.com/gpu", &[G0])]);
    let fake = Fake::start("restart", &pods, &[]);
    let first = list(&fake, T);
    assert!(first.is_err(), "{first:?}");
    eprintln!("during restart: {}", first.unwrap_err());
    // Retried as the refresher would (with a short backoff here).
    let start = Instant::now();
    let l = loop {
        match list(&fake, T) {
            Ok(l) => break l,
            Err(e) if start.elapsed() < Duration::from_secs(10) => {
                eprintln!("retry: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("kubelet never came back: {e}"),
        }
    };
    assert_eq!(rows(&l), [row(0, G0, None, "ml", "p", "c")]);
}

#[test]
fn missing_socket() {
    let dir = std::env::temp_dir().join(format!("fk-missing-{}", std::process::id()));
    let r = Lister::default().list(&dir.join("kubelet.sock"), T);
    assert_eq!(r, Err(Error::Connect(std::io::ErrorKind::NotFound)));
}
