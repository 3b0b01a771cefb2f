//! Which pod holds which GPU: pure functions from the kept pods and the
//! exporter's GPUs to the rows of `gpu_pod_info`.
//!
//! The kubelet reports what the device plugin advertised, so the device
//! ids take each plugin's forms (NOTES.md lists them with their sources):
//!
//! | form | from | joins on |
//! |---|---|---|
//! | `GPU-<uuid>` | NVIDIA plugin, `nvidia.com/gpu` | GPU UUID |
//! | `MIG-<uuid>` | NVIDIA plugin, MIG strategies | MIG UUID |
//! | `MIG-GPU-<uuid>/<gi>/<ci>` | NVIDIA plugin on drivers before R470 | GPU UUID + GPU instance |
//! | `…::<n>` | NVIDIA plugin time-slicing replicas | what precedes `::` |
//! | `<i>`, `<i>:<j>` | index-style ids | NVML index, MIG position |
//! | `nvidia<n>`, `nvidia<n>/gi<g>` | GKE plugin | device minor, GPU instance |
//! | `…/vgpu<k>` | GKE GPU sharing | what precedes `/vgpu` |
//!
//! Only resources named `nvidia.com/…` are matched, so another vendor's
//! device `0` is never taken for GPU 0. The UUID forms are unambiguous and
//! match under any such name (the NVIDIA plugin can rename resources);
//! the index and `nvidia<n>` forms match only under the GPU resource names
//! (`nvidia.com/gpu`, `nvidia.com/gpu.shared`, `nvidia.com/mig-…`), since
//! NVIDIA's network plugins also publish `nvidia.com/…` resources with
//! ids of their own. DRA devices carry a driver, a pool
//! and a device name but no UUID; they are reported by name in their own
//! rows ([`DraRow`]), never guessed onto a GPU.

use crate::pods::proto::{NVIDIA_DRA_DRIVER, NVIDIA_RESOURCE_PREFIX, PodResources};

/// A GPU as the exporter knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gpu {
    /// The NVML index (the `gpu` label).
    pub index: u32,
    pub uuid: String,
    /// The device minor number (`/dev/nvidia<minor>`), which GKE's ids
    /// use. When no GPU has one, the index stands in for it.
    pub minor: Option<u32>,
    pub mig: Vec<Mig>,
}

/// A MIG instance of a GPU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mig {
    pub uuid: String,
    /// The GPU instance id (the `mig_instance` label).
    pub gpu_instance_id: u32,
    /// Its position among the GPU's MIG devices as NVML enumerates them
    /// (`nvmlDeviceGetMigDeviceHandleByIndex`), for `<i>:<j>` ids.
    pub index: Option<u32>,
}

/// One `gpu_pod_info` series. For a MIG instance, `uuid` is the MIG
/// UUID the device plugin named; the series carries its GPU's UUID and
/// `mig_instance`, as the exporter's other MIG series do.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Row {
    pub gpu: u32,
    pub uuid: String,
    pub mig_instance: Option<u32>,
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

/// A container's DRA device of NVIDIA's GPU driver, by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DraRow {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub claim_namespace: String,
    pub claim_name: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    pub share_id: Option<String>,
}

/// A GPU device id that matched no GPU (worth a log line: a plugin form
/// we do not know, or a GPU the exporter does not see). Ids that are not
/// GPU ids (a number under a network resource) are not listed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unmatched {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub resource: String,
    pub device_id: String,
}

/// Everything attribution produced, each list sorted and without
/// duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attribution {
    pub rows: Vec<Row>,
    pub dra: Vec<DraRow>,
    pub unmatched: Vec<Unmatched>,
}

/// A device id, parsed. Replica suffixes (`::n`, `/vgpu<k>`) are gone:
/// every replica of a device is the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceRef<'a> {
    GpuUuid(&'a str),
    MigUuid(&'a str),
    LegacyMig { gpu_uuid: &'a str, gi: u32 },
    Index(u32),
    MigIndex { gpu: u32, mig: u32 },
    Minor(u32),
    MinorGi { minor: u32, gi: u32 },
    Unknown,
}

/// Digits only: `str::parse` would also take a leading `+`.
fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub fn parse_device_id(id: &str) -> DeviceRef<'_> {
    // Time-slicing replicas: `<id>::<n>`.
    let id = id.split_once("::").map_or(id, |(base, _)| base);
    // GKE sharing: `<id>/vgpu<k>`.
    let id = match id.rsplit_once("/vgpu") {
        Some((base, k)) if number(k).is_some() => base,
        _ => id,
    };
    if let Some(rest) = id.strip_prefix("MIG-GPU-") {
        // MIG-GPU-<gpu uuid>/<gi>/<ci>: the GPU uuid is "GPU-" + rest.
        let mut parts = rest.split('/');
        if let (Some(u), Some(gi), Some(ci), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
            && let (Some(gi), Some(_)) = (number(gi), number(ci))
        {
            let gpu_uuid = &id[4..4 + 4 + u.len()];
            return DeviceRef::LegacyMig { gpu_uuid, gi };
        }
        return DeviceRef::Unknown;
    }
    if id.starts_with("GPU-") {
        return DeviceRef::GpuUuid(id);
    }
    if id.starts_with("MIG-") {
        return DeviceRef::MigUuid(id);
    }
    if let Some(rest) = id.strip_prefix("nvidia") {
        return match rest.split_once("/gi") {
            None => number(rest).map_or(DeviceRef::Unknown, DeviceRef::Minor),
            Some((minor, gi)) => match (number(minor), number(gi)) {
                (Some(minor), Some(gi)) => DeviceRef::MinorGi { minor, gi },
                _ => DeviceRef::Unknown,
            },
        };
    }
    match id.split_once(':') {
        None => number(id).map_or(DeviceRef::Unknown, DeviceRef::Index),
        Some((g, m)) => match (number(g), number(m)) {
            (Some(gpu), Some(mig)) => DeviceRef::MigIndex { gpu, mig },
            _ => DeviceRef::Unknown,
        },
    }
}

/// Whether a resource name is one of the GPU names of NVIDIA's and GKE's
/// device plugins, under which bare index ids may be trusted.
pub fn gpu_resource(name: &str) -> bool {
    match name.strip_prefix(NVIDIA_RESOURCE_PREFIX) {
        Some(rest) => rest == "gpu" || rest == "gpu.shared" || rest.starts_with("mig-"),
        None => false,
    }
}

impl DeviceRef<'_> {
    /// Whether the id names its device on its own (a UUID form), rather
    /// than by a number that only a GPU resource name makes a GPU's.
    pub fn is_uuid(&self) -> bool {
        matches!(
            self,
            DeviceRef::GpuUuid(_) | DeviceRef::MigUuid(_) | DeviceRef::LegacyMig { .. }
        )
    }
}

/// A matched device: (gpu index, uuid, mig_instance).
type Target<'g> = (u32, &'g str, Option<u32>);

fn by_minor(gpus: &[Gpu], n: u32) -> Option<&Gpu> {
    if gpus.iter().any(|g| g.minor.is_some()) {
        gpus.iter().find(|g| g.minor == Some(n))
    } else {
        gpus.iter().find(|g| g.index == n)
    }
}

fn instance(g: &Gpu, gi: u32) -> Option<Target<'_>> {
    let m = g.mig.iter().find(|m| m.gpu_instance_id == gi)?;
    Some((g.index, &m.uuid, Some(gi)))
}

/// The GPU or MIG instance a device id names, if the exporter has it.
pub fn resolve<'g>(id: DeviceRef<'_>, gpus: &'g [Gpu]) -> Option<Target<'g>> {
    let whole = |g: &'g Gpu| (g.index, g.uuid.as_str(), None);
    match id {
        DeviceRef::GpuUuid(u) => gpus
            .iter()
            .find(|g| g.uuid.eq_ignore_ascii_case(u))
            .map(whole),
        DeviceRef::MigUuid(u) => gpus.iter().find_map(|g| {
            let m = g.mig.iter().find(|m| m.uuid.eq_ignore_ascii_case(u))?;
            Some((g.index, m.uuid.as_str(), Some(m.gpu_instance_id)))
        }),
        DeviceRef::LegacyMig { gpu_uuid, gi } => gpus
            .iter()
            .find(|g| g.uuid.eq_ignore_ascii_case(gpu_uuid))
            .and_then(|g| instance(g, gi)),
        DeviceRef::Index(i) => gpus.iter().find(|g| g.index == i).map(whole),
        DeviceRef::MigIndex { gpu, mig } => gpus.iter().find(|g| g.index == gpu).and_then(|g| {
            let m = g.mig.iter().find(|m| m.index == Some(mig))?;
            Some((g.index, m.uuid.as_str(), Some(m.gpu_instance_id)))
        }),
        DeviceRef::Minor(n) => by_minor(gpus, n).map(whole),
        DeviceRef::MinorGi { minor, gi } => by_minor(gpus, minor).and_then(|g| instance(g, gi)),
        DeviceRef::Unknown => None,
    }
}

/// Matches every NVIDIA device of every container to the GPUs. Several
/// pods on one GPU (time-slicing, sharing) each get their row; a device
/// listed twice for a container (two replicas) gives one.
pub fn attribute(pods: &[PodResources], gpus: &[Gpu]) -> Attribution {
    let mut out = Attribution::default();
    for pod in pods {
        for c in &pod.containers {
            for d in &c.devices {
                if !d.resource_name.starts_with(NVIDIA_RESOURCE_PREFIX) {
                    continue;
                }
                let by_number = gpu_resource(&d.resource_name);
                for id in &d.device_ids {
                    let parsed = parse_device_id(id);
                    if !parsed.is_uuid() && !by_number {
                        // Not a GPU id: some other nvidia.com/ device.
                        continue;
                    }
                    match resolve(parsed, gpus) {
                        Some((gpu, uuid, mig_instance)) => out.rows.push(Row {
                            gpu,
                            uuid: uuid.to_string(),
                            mig_instance,
                            namespace: pod.namespace.clone(),
                            pod: pod.name.clone(),
                            container: c.name.clone(),
                        }),
                        None => out.unmatched.push(Unmatched {
                            namespace: pod.namespace.clone(),
                            pod: pod.name.clone(),
                            container: c.name.clone(),
                            resource: d.resource_name.clone(),
                            device_id: id.clone(),
                        }),
                    }
                }
            }
            for dr in &c.dynamic_resources {
                for cr in &dr.claim_resources {
                    if cr.driver_name != NVIDIA_DRA_DRIVER {
                        continue;
                    }
                    out.dra.push(DraRow {
                        namespace: pod.namespace.clone(),
                        pod: pod.name.clone(),
                        container: c.name.clone(),
                        claim_namespace: dr.claim_namespace.clone(),
                        claim_name: dr.claim_name.clone(),
                        driver: cr.driver_name.clone(),
                        pool: cr.pool_name.clone(),
                        device: cr.device_name.clone(),
                        share_id: cr.share_id.clone(),
                    });
                }
            }
        }
    }
    out.rows.sort_unstable();
    out.rows.dedup();
    out.dra.sort_unstable();
    out.dra.dedup();
    out.unmatched.sort_unstable();
    out.unmatched.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::proto::{
        ClaimResource, ContainerDevices, ContainerResources, DynamicResource,
    };

    const G0: &str = "GPU-8c1a3f2e-1111-2222-3333-444455556666";
    const G1: &str = "GPU-0b5e7d9a-aaaa-bbbb-cccc-ddddeeeeffff";
    const M1A: &str = "MIG-2f0c4a6e-0001-5a5a-8b8b-0123456789ab";
    const M1B: &str = "MIG-7d3e9b1c-0002-5a5a-8b8b-0123456789ab";

    /// GPU 0 whole; GPU 1 (minor 3) split into GPU instances 1 and 2.
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
                minor: Some(3),
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
        ]
    }

    fn pod(ns: &str, name: &str, containers: &[(&str, &str, &[&str])]) -> PodResources {
        PodResources {
            name: name.into(),
            namespace: ns.into(),
            containers: containers
                .iter()
                .map(|(c, res, ids)| ContainerResources {
                    name: c.to_string(),
                    devices: vec![ContainerDevices {
                        resource_name: res.to_string(),
                        device_ids: ids.iter().map(|s| s.to_string()).collect(),
                        topology: None,
                    }],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn row(gpu: u32, uuid: &str, mig: Option<u32>, pod: &str, c: &str) -> Row {
        Row {
            gpu,
            uuid: uuid.into(),
            mig_instance: mig,
            namespace: "ns".into(),
            pod: pod.into(),
            container: c.into(),
        }
    }

    #[test]
    fn parse_forms() {
        use DeviceRef::*;
        let cases: &[(&str, DeviceRef)] = &[
            (G0, GpuUuid(G0)),
            ("GPU-abc::3", GpuUuid("GPU-abc")),
            (M1A, MigUuid(M1A)),
            ("MIG-abc::12", MigUuid("MIG-abc")),
            (
                "MIG-GPU-abc/7/0",
                LegacyMig {
                    gpu_uuid: "GPU-abc",
                    gi: 7,
                },
            ),
            ("MIG-GPU-abc/7", Unknown),
            ("0", Index(0)),
            ("17", Index(17)),
            ("+1", Unknown),
            ("1:0", MigIndex { gpu: 1, mig: 0 }),
            ("1:", Unknown),
            ("nvidia0", Minor(0)),
            ("nvidia3/gi2", MinorGi { minor: 3, gi: 2 }),
            ("nvidia0/vgpu5", Minor(0)),
            ("nvidia3/gi2/vgpu0", MinorGi { minor: 3, gi: 2 }),
            ("nvidia", Unknown),
            ("nvidiactl", Unknown),
            ("nvidia0/gix", Unknown),
            ("", Unknown),
            ("::", Unknown),
            ("gpu-0", Unknown),
            ("99999999999", Unknown),
        ];
        for (s, want) in cases {
            assert_eq!(parse_device_id(s), *want, "{s:?}");
        }
    }

    #[test]
    fn whole_gpus_by_uuid_and_several_pods_sharing() {
        let pods = [
            pod("ns", "a", &[("main", "nvidia.com/gpu", &[G0])]),
            // Time-slicing: two replicas of GPU 0 in pod b, one in c.
            pod(
                "ns",
                "b",
                &[(
                    "main",
                    "nvidia.com/gpu",
                    &[&format!("{G0}::0"), &format!("{G0}::4")],
                )],
            ),
            pod(
                "ns",
                "c",
                &[("side", "nvidia.com/gpu.shared", &[&format!("{G0}::1")])],
            ),
        ];
        let a = attribute(&pods, &gpus());
        assert_eq!(
            a.rows,
            [
                row(0, G0, None, "a", "main"),
                row(0, G0, None, "b", "main"),
                row(0, G0, None, "c", "side")
            ]
        );
        assert!(a.unmatched.is_empty());
    }

    #[test]
    fn mig_by_uuid_legacy_index_and_gke() {
        let legacy = format!("MIG-{G1}/2/0");
        let pods = [
            pod("ns", "mixed", &[("c", "nvidia.com/mig-3g.40gb", &[M1A])]),
            pod(
                "ns",
                "single",
                &[("c", "nvidia.com/gpu", &[&format!("{M1B}::2")])],
            ),
            pod(
                "ns",
                "legacy",
                &[("c", "nvidia.com/mig-1g.10gb", &[&legacy])],
            ),
            pod("ns", "index", &[("c", "nvidia.com/gpu", &["1:1", "0"])]),
            pod(
                "ns",
                "gke",
                &[("c", "nvidia.com/gpu", &["nvidia3/gi1/vgpu2", "nvidia0"])],
            ),
        ];
        let a = attribute(&pods, &gpus());
        assert_eq!(
            a.rows,
            [
                row(0, G0, None, "gke", "c"),
                row(0, G0, None, "index", "c"),
                row(1, M1A, Some(1), "gke", "c"),
                row(1, M1A, Some(1), "mixed", "c"),
                row(1, M1B, Some(2), "index", "c"),
                row(1, M1B, Some(2), "legacy", "c"),
                row(1, M1B, Some(2), "single", "c"),
            ]
        );
    }

    #[test]
    fn minor_falls_back_to_index_when_unknown() {
        let mut g = gpus();
        for x in &mut g {
            x.minor = None;
        }
        let pods = [pod("ns", "p", &[("c", "nvidia.com/gpu", &["nvidia1/gi2"])])];
        assert_eq!(attribute(&pods, &g).rows, [row(1, M1B, Some(2), "p", "c")]);
        // With minors known, nvidia1 is no GPU here.
        let a = attribute(&pods, &gpus());
        assert!(a.rows.is_empty());
        assert_eq!(a.unmatched[0].device_id, "nvidia1/gi2");
    }

    #[test]
    fn other_vendors_and_unknown_ids() {
        let pods = [pod(
            "ns",
            "p",
            &[
                ("amd", "amd.com/gpu", &["0"]),
                ("nic", "example.com/sriov", &[G0]),
                ("odd", "nvidia.com/gpu", &["GPU-not-here", "weird"]),
                // NVIDIA's network plugins: numbers that are not GPUs.
                ("rdma", "nvidia.com/rdma_shared_device_a", &["0"]),
                ("sriov", "nvidia.com/hostdev", &["0000:3b:00.2", "nvidia0"]),
            ],
        )];
        let a = attribute(&pods, &gpus());
        assert!(a.rows.is_empty());
        let ids: Vec<_> = a.unmatched.iter().map(|u| u.device_id.as_str()).collect();
        assert_eq!(ids, ["GPU-not-here", "weird"]);
        // A renamed GPU resource still matches by UUID.
        let renamed = [pod("ns", "r", &[("c", "nvidia.com/a100", &[G0, "0"])])];
        let a = attribute(&renamed, &gpus());
        assert_eq!(a.rows, [row(0, G0, None, "r", "c")]);
        assert!(a.unmatched.is_empty());
        assert!(gpu_resource("nvidia.com/mig-1g.10gb.shared"));
        assert!(!gpu_resource("nvidia.com/gpux"));
    }

    #[test]
    fn dra_devices_are_reported_by_name() {
        let mut p = pod("ns", "dra", &[]);
        let claim = |driver: &str, device: &str| ClaimResource {
            cdi_devices: vec![format!("k8s.{driver}/device={device}")],
            driver_name: driver.into(),
            pool_name: "node-a".into(),
            device_name: device.into(),
            share_id: None,
        };
        p.containers.push(ContainerResources {
            name: "c".into(),
            dynamic_resources: vec![DynamicResource {
                claim_name: "train".into(),
                claim_namespace: "ns".into(),
                claim_resources: vec![
                    claim("gpu.nvidia.com", "gpu-0"),
                    claim("net.example.com", "eth1"),
                ],
            }],
            ..Default::default()
        });
        let a = attribute(&[p], &gpus());
        assert!(a.rows.is_empty());
        assert_eq!(
            a.dra,
            [DraRow {
                namespace: "ns".into(),
                pod: "dra".into(),
                container: "c".into(),
                claim_namespace: "ns".into(),
                claim_name: "train".into(),
                driver: "gpu.nvidia.com".into(),
                pool: "node-a".into(),
                device: "gpu-0".into(),
                share_id: None,
            }]
        );
    }

    #[test]
    fn uuids_match_regardless_of_case() {
        let pods = [pod(
            "ns",
            "p",
            &[("c", "nvidia.com/gpu", &[&G0.to_uppercase()])],
        )];
        assert_eq!(attribute(&pods, &gpus()).rows.len(), 1);
    }
}
