//! The kubelet's pod-resources v1 messages, and a streaming decoder for
//! `ListPodResourcesResponse` that keeps only pods holding NVIDIA devices.
//!
//! The messages follow k8s.io/kubelet/pkg/apis/podresources/v1/api.proto
//! (field numbers in the comments), read with [`wire::protobuf`].
//! Unknown fields of every wire type, groups included, are skipped; a
//! known field with an unexpected wire type is treated as unknown, as
//! protobuf's own parsers do.
//!
//! [`ListDecoder`] is a push parser fed the message as DATA arrives. The
//! response is a sequence of `pod_resources` entries (field 1); each entry
//! is buffered alone (at most [`Limits::max_pod_bytes`]), scanned without
//! allocating for an NVIDIA device, and decoded only when it has one. So
//! memory follows the largest pod and the GPU pods, never the response:
//! a 64 MiB answer of CPU pods costs one pod's buffer.

use wire::protobuf::{Budget, Fields, ProtoError, Value, int64s};

pub mod encode;
mod list;

pub use list::decode_list;
pub use list::{Limits, ListDecoder, Stats};

/// Resource names of NVIDIA's device plugins (`nvidia.com/gpu`,
/// `nvidia.com/gpu.shared`, `nvidia.com/mig-3g.40gb`, ...).
pub const NVIDIA_RESOURCE_PREFIX: &str = "nvidia.com/";
/// The DRA driver name of NVIDIA's GPU driver (k8s-dra-driver-gpu).
pub const NVIDIA_DRA_DRIVER: &str = "gpu.nvidia.com";

/// `PodResources`: name = 1, namespace = 2, containers = 3, cpu_ids = 4,
/// memory = 5 (the last two pod-level, from KEP-2837).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodResources {
    pub name: String,
    pub namespace: String,
    pub containers: Vec<ContainerResources>,
    pub cpu_ids: Vec<i64>,
    pub memory: Vec<ContainerMemory>,
}

/// `ContainerResources`: name = 1, devices = 2, cpu_ids = 3, memory = 4,
/// dynamic_resources = 5.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerResources {
    pub name: String,
    pub devices: Vec<ContainerDevices>,
    pub cpu_ids: Vec<i64>,
    pub memory: Vec<ContainerMemory>,
    pub dynamic_resources: Vec<DynamicResource>,
}

/// `ContainerDevices`: resource_name = 1, device_ids = 2, topology = 3.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerDevices {
    pub resource_name: String,
    pub device_ids: Vec<String>,
    pub topology: Option<TopologyInfo>,
}

/// `ContainerMemory`: memory_type = 1, size = 2, topology = 3.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerMemory {
    pub memory_type: String,
    pub size: u64,
    pub topology: Option<TopologyInfo>,
}

/// `TopologyInfo`: nodes = 1, each a `NUMANode` with ID = 1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopologyInfo {
    pub numa_nodes: Vec<i64>,
}

/// `DynamicResource`: claim_name = 2, claim_namespace = 3,
/// claim_resources = 4 (class_name = 1 was removed in 1.31).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamicResource {
    pub claim_name: String,
    pub claim_namespace: String,
    pub claim_resources: Vec<ClaimResource>,
}

/// `ClaimResource`: cdi_devices = 1, driver_name = 2, pool_name = 3,
/// device_name = 4, optional share_id = 5.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimResource {
    /// `CDIDevice.name` (field 1) of each CDI device.
    pub cdi_devices: Vec<String>,
    pub driver_name: String,
    pub pool_name: String,
    pub device_name: String,
    pub share_id: Option<String>,
}

fn topology(b: &[u8], budget: &mut Budget) -> Result<TopologyInfo, ProtoError> {
    let mut t = TopologyInfo::default();
    for f in Fields::new(b) {
        if let (1, Value::Len(node)) = f? {
            let mut id = 0;
            for f in Fields::new(node) {
                if let (1, Value::Varint(v)) = f? {
                    id = v as i64;
                }
            }
            budget.charge(0)?;
            t.numa_nodes.push(id);
        }
    }
    Ok(t)
}

fn memory(b: &[u8], budget: &mut Budget) -> Result<ContainerMemory, ProtoError> {
    let mut m = ContainerMemory::default();
    for f in Fields::new(b) {
        match f? {
            (1, Value::Len(s)) => m.memory_type = budget.string(s)?,
            (2, Value::Varint(v)) => m.size = v,
            (3, Value::Len(t)) => m.topology = Some(topology(t, budget)?),
            _ => {}
        }
    }
    Ok(m)
}

fn devices(b: &[u8], budget: &mut Budget) -> Result<ContainerDevices, ProtoError> {
    let mut d = ContainerDevices::default();
    for f in Fields::new(b) {
        match f? {
            (1, Value::Len(s)) => d.resource_name = budget.string(s)?,
            (2, Value::Len(s)) => d.device_ids.push(budget.string(s)?),
            (3, Value::Len(t)) => d.topology = Some(topology(t, budget)?),
            _ => {}
        }
    }
    Ok(d)
}

fn claim_resource(b: &[u8], budget: &mut Budget) -> Result<ClaimResource, ProtoError> {
    let mut c = ClaimResource::default();
    for f in Fields::new(b) {
        match f? {
            (1, Value::Len(cdi)) => {
                let mut name = String::new();
                for f in Fields::new(cdi) {
                    if let (1, Value::Len(s)) = f? {
                        name = budget.string(s)?;
                    }
                }
                c.cdi_devices.push(name);
            }
            (2, Value::Len(s)) => c.driver_name = budget.string(s)?,
            (3, Value::Len(s)) => c.pool_name = budget.string(s)?,
            (4, Value::Len(s)) => c.device_name = budget.string(s)?,
            (5, Value::Len(s)) => c.share_id = Some(budget.string(s)?),
            _ => {}
        }
    }
    Ok(c)
}

fn dynamic_resource(b: &[u8], budget: &mut Budget) -> Result<DynamicResource, ProtoError> {
    let mut d = DynamicResource::default();
    for f in Fields::new(b) {
        match f? {
            (2, Value::Len(s)) => d.claim_name = budget.string(s)?,
            (3, Value::Len(s)) => d.claim_namespace = budget.string(s)?,
            (4, Value::Len(c)) => d.claim_resources.push(claim_resource(c, budget)?),
            _ => {}
        }
    }
    Ok(d)
}

fn container(b: &[u8], budget: &mut Budget) -> Result<ContainerResources, ProtoError> {
    let mut c = ContainerResources::default();
    for f in Fields::new(b) {
        match f? {
            (1, Value::Len(s)) => c.name = budget.string(s)?,
            (2, Value::Len(d)) => c.devices.push(devices(d, budget)?),
            (3, v) => int64s(v, &mut c.cpu_ids, budget)?,
            (4, Value::Len(m)) => c.memory.push(memory(m, budget)?),
            (5, Value::Len(d)) => c.dynamic_resources.push(dynamic_resource(d, budget)?),
            _ => {}
        }
    }
    Ok(c)
}

fn pod(b: &[u8], budget: &mut Budget) -> Result<PodResources, ProtoError> {
    let mut p = PodResources::default();
    for f in Fields::new(b) {
        match f? {
            (1, Value::Len(s)) => p.name = budget.string(s)?,
            (2, Value::Len(s)) => p.namespace = budget.string(s)?,
            (3, Value::Len(c)) => p.containers.push(container(c, budget)?),
            (4, v) => int64s(v, &mut p.cpu_ids, budget)?,
            (5, Value::Len(m)) => p.memory.push(memory(m, budget)?),
            _ => {}
        }
    }
    Ok(p)
}

/// Decodes one `PodResources` message held in memory. Its decoded form
/// may take at most `budget` bytes (as [`ProtoError::OverBudget`] counts).
pub fn decode_pod(bytes: &[u8], budget: usize) -> Result<PodResources, ProtoError> {
    pod(bytes, &mut Budget::new(budget))
}

/// Whether an encoded `PodResources` holds an NVIDIA device: a
/// `nvidia.com/` resource with a device id, or a DRA claim resource of
/// the `gpu.nvidia.com` driver. Allocates nothing.
pub fn holds_nvidia(pod: &[u8]) -> Result<bool, ProtoError> {
    for f in Fields::new(pod) {
        if let (3, Value::Len(c)) = f? {
            for f in Fields::new(c) {
                let found = match f? {
                    (2, Value::Len(d)) => nvidia_device(d)?,
                    (5, Value::Len(dr)) => nvidia_claim(dr)?,
                    _ => false,
                };
                if found {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// A `ContainerDevices` of an NVIDIA resource with at least one id.
fn nvidia_device(d: &[u8]) -> Result<bool, ProtoError> {
    let (mut nvidia, mut ids) = (false, false);
    for f in Fields::new(d) {
        match f? {
            (1, Value::Len(n)) => nvidia = n.starts_with(NVIDIA_RESOURCE_PREFIX.as_bytes()),
            (2, Value::Len(_)) => ids = true,
            _ => {}
        }
    }
    Ok(nvidia && ids)
}

/// A `DynamicResource` with a claim resource of NVIDIA's GPU driver.
fn nvidia_claim(dr: &[u8]) -> Result<bool, ProtoError> {
    for f in Fields::new(dr) {
        if let (4, Value::Len(cr)) = f? {
            for f in Fields::new(cr) {
                if let (2, Value::Len(drv)) = f?
                    && drv == NVIDIA_DRA_DRIVER.as_bytes()
                {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::encode as enc;
    use super::*;
    use wire::protobuf::encode::{bytes, uint, varint};

    fn gpu_pod(name: &str, resource: &str, ids: &[&str]) -> PodResources {
        PodResources {
            name: name.into(),
            namespace: "ml".into(),
            containers: vec![ContainerResources {
                name: "main".into(),
                devices: vec![ContainerDevices {
                    resource_name: resource.into(),
                    device_ids: ids.iter().map(|s| s.to_string()).collect(),
                    topology: Some(TopologyInfo {
                        numa_nodes: vec![0],
                    }),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn cpu_pod(i: usize) -> PodResources {
        PodResources {
            name: format!("web-{i}"),
            namespace: "default".into(),
            containers: vec![ContainerResources {
                name: "nginx".into(),
                cpu_ids: vec![2, 3],
                devices: vec![ContainerDevices {
                    resource_name: "example.com/nic".into(),
                    device_ids: vec!["0".into()],
                    topology: None,
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn full_pod() -> PodResources {
        PodResources {
            name: "everything".into(),
            namespace: "ns".into(),
            cpu_ids: vec![0, 1, 63],
            memory: vec![ContainerMemory {
                memory_type: "memory".into(),
                size: 1 << 30,
                topology: Some(TopologyInfo {
                    numa_nodes: vec![0, 1],
                }),
            }],
            containers: vec![ContainerResources {
                name: "c".into(),
                devices: vec![ContainerDevices {
                    resource_name: "nvidia.com/gpu".into(),
                    device_ids: vec!["GPU-a".into(), "GPU-b".into()],
                    topology: Some(TopologyInfo {
                        numa_nodes: vec![1],
                    }),
                }],
                cpu_ids: vec![4, 5],
                memory: vec![ContainerMemory {
                    memory_type: "hugepages-2Mi".into(),
                    size: 4 << 20,
                    topology: None,
                }],
                dynamic_resources: vec![DynamicResource {
                    claim_name: "gpu-claim".into(),
                    claim_namespace: "ns".into(),
                    claim_resources: vec![ClaimResource {
                        cdi_devices: vec!["k8s.gpu.nvidia.com/device=gpu-0".into()],
                        driver_name: "gpu.nvidia.com".into(),
                        pool_name: "node-1".into(),
                        device_name: "gpu-0".into(),
                        share_id: Some("7".into()),
                    }],
                }],
            }],
        }
    }

    #[test]
    fn every_field_round_trips() {
        let p = full_pod();
        let b = enc::pod(&p);
        assert_eq!(decode_pod(&b, 1 << 20).unwrap(), p);
        assert!(holds_nvidia(&b).unwrap());
    }

    #[test]
    fn unpacked_repeated_ints_are_accepted() {
        let mut b = Vec::new();
        uint(&mut b, 4, 7);
        uint(&mut b, 4, 9);
        assert_eq!(decode_pod(&b, 1 << 20).unwrap().cpu_ids, [7, 9]);
    }

    #[test]
    fn unknown_fields_of_every_wire_type_are_skipped() {
        let p = gpu_pod("p", "nvidia.com/gpu", &["GPU-x"]);
        let mut b = Vec::new();
        uint(&mut b, 99, 12345); // varint, 2-byte tag
        uint(&mut b, 15, u64::MAX); // 10-byte varint
        varint(&mut b, 14 << 3 | 1); // fixed64
        b.extend_from_slice(&[1; 8]);
        varint(&mut b, 13 << 3 | 5); // fixed32
        b.extend_from_slice(&[1; 4]);
        bytes(&mut b, 12, b"unknown bytes");
        varint(&mut b, 11 << 3 | 3); // group with nested content
        uint(&mut b, 1, 5);
        varint(&mut b, 10 << 3 | 3);
        bytes(&mut b, 1, b"inner");
        varint(&mut b, 10 << 3 | 4);
        varint(&mut b, 11 << 3 | 4);
        // A known field with the wrong wire type is unknown too.
        uint(&mut b, 1, 3);
        b.extend_from_slice(&enc::pod(&p));
        assert_eq!(decode_pod(&b, 1 << 20).unwrap(), p);
        // The same junk around the top-level entries, and a group whose
        // field 1 must not be taken for a pod.
        let mut list = Vec::new();
        varint(&mut list, 1 << 3 | 3);
        bytes(&mut list, 1, &enc::pod(&p));
        varint(&mut list, 1 << 3 | 4);
        uint(&mut list, 2, 1);
        bytes(&mut list, 1, &b);
        bytes(&mut list, 7, b"trailing");
        let (pods, stats) = decode_list(&list, Limits::default()).unwrap();
        assert_eq!(pods, [p]);
        assert_eq!(stats.pods, 1);
    }

    #[test]
    fn malformed_input_errors() {
        assert_eq!(decode_pod(&[0x08], 100), Err(ProtoError::Truncated));
        assert_eq!(decode_pod(&[0x00, 0x01], 100), Err(ProtoError::BadTag));
        assert_eq!(decode_pod(&[0x0e], 100), Err(ProtoError::BadWireType));
        assert_eq!(decode_pod(&[0x0c], 100), Err(ProtoError::UnmatchedEndGroup));
        assert_eq!(decode_pod(&[0x0b], 100), Err(ProtoError::Truncated));
        assert_eq!(
            decode_pod(&[0x0a, 0x05, 1], 100),
            Err(ProtoError::Truncated)
        );
        let eleven = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ];
        assert_eq!(decode_pod(&eleven, 100), Err(ProtoError::BadVarint));
        let deep: Vec<u8> = std::iter::repeat_n(0x0b, 100).collect();
        assert_eq!(decode_pod(&deep, 100), Err(ProtoError::TooDeep));
        for bad in [&[0x0e][..], &[0x0c], &[0x00], &[0x0a, 0x02, 0x0a]] {
            assert!(decode_list(bad, Limits::default()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_nvidia_pods_are_kept() {
        let mut dra_other = full_pod();
        dra_other.containers[0].devices.clear();
        dra_other.containers[0].dynamic_resources[0].claim_resources[0].driver_name =
            "gpu.example.com".into();
        let mut dra_nvidia = dra_other.clone();
        dra_nvidia.name = "dra".into();
        dra_nvidia.containers[0].dynamic_resources[0].claim_resources[0].driver_name =
            "gpu.nvidia.com".into();
        let pods = vec![
            cpu_pod(1),
            gpu_pod("whole", "nvidia.com/gpu", &["GPU-1"]),
            gpu_pod("mig", "nvidia.com/mig-3g.40gb", &["MIG-1"]),
            gpu_pod("no-ids", "nvidia.com/gpu", &[]),
            gpu_pod("lookalike", "nvidia.comx/gpu", &["GPU-1"]),
            gpu_pod("amd", "amd.com/gpu", &["0"]),
            dra_other,
            dra_nvidia,
            PodResources::default(),
        ];
        let (kept, stats) = decode_list(&enc::list(&pods), Limits::default()).unwrap();
        let names: Vec<_> = kept.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["whole", "mig", "dra"]);
        assert_eq!(
            stats,
            Stats {
                pods: 9,
                kept: 3,
                oversize: 0,
                over_budget: 0
            }
        );
    }

    #[test]
    fn any_split_gives_the_same_result() {
        let pods = vec![
            full_pod(),
            cpu_pod(1),
            gpu_pod("g", "nvidia.com/gpu", &["GPU-1::3"]),
        ];
        let bytes = enc::list(&pods);
        let whole = decode_list(&bytes, Limits::default()).unwrap();
        for cut in 0..=bytes.len() {
            let mut d = ListDecoder::new(Limits::default());
            d.feed(&bytes[..cut]).unwrap();
            d.feed(&bytes[cut..]).unwrap();
            assert_eq!(d.finish().unwrap(), whole, "cut at {cut}");
        }
        let mut d = ListDecoder::new(Limits::default());
        for b in &bytes {
            d.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(d.finish().unwrap(), whole);
        // Cut short, it is truncated, then ready for the next response.
        for cut in 1..bytes.len() {
            let mut d = ListDecoder::new(Limits::default());
            if d.feed(&bytes[..cut]).is_ok() {
                // A cut on an entry boundary is a valid shorter list.
                let _ = d.finish();
            }
            d.feed(&bytes).unwrap();
            assert_eq!(d.finish().unwrap(), whole);
        }
    }

    #[test]
    fn oversize_pods_are_skipped_and_counted() {
        let mut big = gpu_pod("big", "nvidia.com/gpu", &["GPU-1"]);
        big.containers[0].cpu_ids = (0..2000).collect();
        let small = gpu_pod("small", "nvidia.com/gpu", &["GPU-2"]);
        let bytes = enc::list(&[big, small.clone()]);
        let limits = Limits {
            max_pod_bytes: 1000,
            ..Limits::default()
        };
        let mut d = ListDecoder::new(limits);
        d.feed(&bytes).unwrap();
        assert!(d.peak_buffer() <= 1000);
        let (kept, stats) = d.finish().unwrap();
        assert_eq!(kept, [small]);
        assert_eq!(stats.oversize, 1);
    }

    #[test]
    fn kept_pods_are_bounded_by_the_budget() {
        let pods: Vec<_> = (0..100)
            .map(|i| gpu_pod(&format!("p{i}"), "nvidia.com/gpu", &["GPU-1"]))
            .collect();
        let limits = Limits {
            max_kept_bytes: 5000,
            ..Limits::default()
        };
        let (kept, stats) = decode_list(&enc::list(&pods), limits).unwrap();
        assert!(!kept.is_empty() && kept.len() < 100);
        assert_eq!(stats.kept as usize, kept.len());
        assert_eq!(stats.kept + stats.over_budget, 100);
        // Many tiny elements are charged their overhead.
        let mut swarm = gpu_pod("swarm", "nvidia.com/gpu", &["GPU-1"]);
        swarm.containers[0].devices[0].device_ids = vec![String::new(); 10_000];
        assert_eq!(
            decode_pod(&enc::pod(&swarm), 100_000),
            Err(ProtoError::OverBudget)
        );
    }

    /// ~64 MiB of mostly CPU pods, fed in DATA-sized pieces: the decoder
    /// holds one pod at a time.
    #[test]
    fn sixty_four_mib_streams_through_a_small_buffer() {
        let filler = enc::pod(&cpu_pod(0));
        let mut entry = Vec::new();
        bytes(&mut entry, 1, &filler);
        let gpu = enc::list(&[gpu_pod("needle", "nvidia.com/gpu", &["GPU-9"])]);
        let count = (63 << 20) / entry.len();
        let mut d = ListDecoder::new(Limits::default());
        let mut total = 0usize;
        // A piece at a time, as DATA frames would deliver it.
        let mut piece = Vec::with_capacity(16 << 10);
        for i in 0..count {
            if i == count / 2 {
                piece.extend_from_slice(&gpu);
            }
            piece.extend_from_slice(&entry);
            if piece.len() >= 16 << 10 {
                total += piece.len();
                d.feed(&piece).unwrap();
                piece.clear();
            }
        }
        total += piece.len();
        d.feed(&piece).unwrap();
        assert!(total > 63 << 20);
        assert!(d.peak_buffer() < 2 << 20, "peak {}", d.peak_buffer());
        assert!(d.peak_buffer() <= 1024, "peak {}", d.peak_buffer());
        let (kept, stats) = d.finish().unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].name, "needle");
        assert_eq!(stats.pods as usize, count + 1);
    }
}
