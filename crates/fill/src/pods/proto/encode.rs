//! The pod-resources messages written, for tests, fixtures and fuzz
//! seeds: not in a normal build. The wire format's writers are
//! [`wire::protobuf::encode`]'s.

use super::*;
use wire::protobuf::encode::{bytes, packed, string, uint};

fn topology(out: &mut Vec<u8>, field: u32, t: &Option<TopologyInfo>) {
    if let Some(t) = t {
        let mut b = Vec::new();
        for &n in &t.numa_nodes {
            let mut node = Vec::new();
            if n != 0 {
                uint(&mut node, 1, n as u64);
            }
            bytes(&mut b, 1, &node);
        }
        bytes(out, field, &b);
    }
}

fn memory(out: &mut Vec<u8>, field: u32, m: &ContainerMemory) {
    let mut b = Vec::new();
    string(&mut b, 1, &m.memory_type);
    if m.size != 0 {
        uint(&mut b, 2, m.size);
    }
    topology(&mut b, 3, &m.topology);
    bytes(out, field, &b);
}

pub fn pod(p: &PodResources) -> Vec<u8> {
    let mut b = Vec::new();
    string(&mut b, 1, &p.name);
    string(&mut b, 2, &p.namespace);
    for c in &p.containers {
        let mut cb = Vec::new();
        string(&mut cb, 1, &c.name);
        for d in &c.devices {
            let mut db = Vec::new();
            string(&mut db, 1, &d.resource_name);
            for id in &d.device_ids {
                bytes(&mut db, 2, id.as_bytes());
            }
            topology(&mut db, 3, &d.topology);
            bytes(&mut cb, 2, &db);
        }
        packed(&mut cb, 3, &c.cpu_ids);
        for m in &c.memory {
            memory(&mut cb, 4, m);
        }
        for dr in &c.dynamic_resources {
            let mut drb = Vec::new();
            string(&mut drb, 2, &dr.claim_name);
            string(&mut drb, 3, &dr.claim_namespace);
            for cr in &dr.claim_resources {
                let mut crb = Vec::new();
                for cdi in &cr.cdi_devices {
                    let mut x = Vec::new();
                    string(&mut x, 1, cdi);
                    bytes(&mut crb, 1, &x);
                }
                string(&mut crb, 2, &cr.driver_name);
                string(&mut crb, 3, &cr.pool_name);
                string(&mut crb, 4, &cr.device_name);
                if let Some(s) = &cr.share_id {
                    bytes(&mut crb, 5, s.as_bytes());
                }
                bytes(&mut drb, 4, &crb);
            }
            bytes(&mut cb, 5, &drb);
        }
        bytes(&mut b, 3, &cb);
    }
    packed(&mut b, 4, &p.cpu_ids);
    for m in &p.memory {
        memory(&mut b, 5, m);
    }
    b
}

/// A `ListPodResourcesResponse` of these pods.
pub fn list(pods: &[PodResources]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in pods {
        bytes(&mut out, 1, &pod(p));
    }
    out
}
