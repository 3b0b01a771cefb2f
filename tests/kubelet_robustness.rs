//! Random and mangled input through every decoder of the kubelet client,
//! bounded in iterations: no panic, and the invariants of the fuzz
//! targets' bodies (`fuzz/checks.rs`) hold.
#![cfg(feature = "kubernetes")]

#[allow(dead_code)]
#[path = "../fuzz/checks.rs"]
mod checks;

use checks::kubelet as fuzz;
use fill::pods::kubelet::Lister;
use fill::pods::proto::{
    self, ClaimResource, ContainerDevices, ContainerResources, DynamicResource, PodResources,
};
use wire::h2::script;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// Flips, inserts, deletes or truncates a few bytes of `v`.
    fn mangle(&mut self, v: &[u8]) -> Vec<u8> {
        let mut v = v.to_vec();
        for _ in 0..1 + self.below(4) {
            let at = self.below(v.len());
            match self.below(4) {
                0 if !v.is_empty() => v[at] ^= 1 << self.below(8),
                1 => v.insert(at.min(v.len()), self.next() as u8),
                2 if !v.is_empty() => {
                    v.remove(at);
                }
                _ => v.truncate(at),
            }
        }
        v
    }
}

fn sample_pods() -> Vec<PodResources> {
    let gpu = |name: &str, ids: &[&str]| PodResources {
        name: name.into(),
        namespace: "ns".into(),
        cpu_ids: vec![1, 2],
        containers: vec![ContainerResources {
            name: "c".into(),
            devices: vec![ContainerDevices {
                resource_name: "nvidia.com/gpu".into(),
                device_ids: ids.iter().map(|s| s.to_string()).collect(),
                topology: None,
            }],
            dynamic_resources: vec![DynamicResource {
                claim_name: "claim".into(),
                claim_namespace: "ns".into(),
                claim_resources: vec![ClaimResource {
                    cdi_devices: vec!["k8s.gpu.nvidia.com/device=gpu-0".into()],
                    driver_name: "gpu.nvidia.com".into(),
                    pool_name: "node".into(),
                    device_name: "gpu-0".into(),
                    share_id: None,
                }],
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    vec![
        gpu("a", &["GPU-1", "GPU-2::3"]),
        PodResources {
            name: "cpu".into(),
            namespace: "default".into(),
            ..Default::default()
        },
        gpu("b", &["MIG-1", "nvidia0/gi1/vgpu2"]),
    ]
}

const ITERATIONS: usize = 3000;

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..ITERATIONS {
        let b = rng.bytes(300);
        fuzz::check_huffman(&b);
        fuzz::check_hpack(&b);
        fuzz::check_proto(&b);
        fuzz::check_client(&b);
        fuzz::check_device_id(&b);
    }
}

#[test]
fn mangled_protobuf() {
    let list = proto::encode::list(&sample_pods());
    // Every prefix, then random damage.
    for cut in 0..=list.len() {
        fuzz::check_proto(&list[..cut]);
    }
    let mut rng = Rng(7);
    for _ in 0..ITERATIONS {
        fuzz::check_proto(&rng.mangle(&list));
    }
}

#[test]
fn mangled_header_blocks() {
    let block = script::block(&[
        (":status", "200"),
        ("content-type", "application/grpc"),
        ("grpc-status", "0"),
        ("grpc-message", "a%20b"),
    ]);
    let mut input = vec![block.len() as u8];
    input.extend_from_slice(&block);
    input.extend_from_slice(&block);
    let mut rng = Rng(11);
    for _ in 0..ITERATIONS {
        fuzz::check_hpack(&rng.mangle(&input));
    }
}

#[test]
fn mangled_responses() {
    let response = script::ok_response(&proto::encode::list(&sample_pods()));
    // Sanity: the unmangled response lists both GPU pods.
    let mut io = script::Replay::new(&response, 100);
    let listing = Lister::default()
        .list_on(
            &mut io,
            std::time::Instant::now() + std::time::Duration::from_secs(5),
        )
        .unwrap();
    assert_eq!(listing.pods.len(), 2);
    for cut in (0..response.len()).step_by(3) {
        fuzz::check_client(&response[..cut]);
    }
    let mut rng = Rng(13);
    for _ in 0..ITERATIONS {
        fuzz::check_client(&rng.mangle(&response));
    }
}
