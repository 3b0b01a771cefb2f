//! The `dcgm` collector: the snapshot's readings under dcgm-exporter's
//! names, labels and units, for dashboards and alerts written against it.
//! Its fields come from the counters file (`config::dcgm`); each field's
//! reading and unit is in `values.rs`. Label values are escaped, where
//! dcgm-exporter prints them raw.

mod values;

use super::attribution::copies;
use super::writer::{Target, Writer, each_target, escape};
use crate::config::dcgm::{Dcgm, Field, Kind};
use crate::snapshot::Gpu;
use base::numbers::write_u64;

/// Every served field of `d` over `gpus`, a family each.
pub(super) fn render(w: &mut Writer, d: &Dcgm, gpus: &[Gpu], pod_labels: bool) {
    for f in d.fields.iter().filter(|f| f.kind != Kind::Label) {
        let mut headed = false;
        each_target(gpus, |t, r| {
            let mut sample = |w: &mut Writer, v: f64, code: Option<u32>| {
                if !std::mem::replace(&mut headed, true) {
                    head(w, &f.name, &f.help, f.kind);
                }
                for pod in copies(r, pod_labels) {
                    w.put(&f.name);
                    labels(w, d, t);
                    if let Some(p) = pod {
                        w.label("pod", &p.pod);
                        w.label("namespace", &p.namespace);
                        w.label("container", &p.container);
                    }
                    if let Some(code) = code {
                        w.num_label("err_code", code);
                        w.label("err_msg", values::xid_message(code));
                    }
                    w.value(v);
                }
            };
            match f.field {
                Field::XidCount => {
                    for &(code, n) in r.xid_errors.iter().flatten() {
                        sample(w, n as f64, Some(code));
                    }
                }
                field => {
                    if let Some(v) = values::value(field, r) {
                        sample(w, values::shaped(field, v), None);
                    }
                }
            }
        });
    }
}

/// HELP and TYPE. In OpenMetrics a counter's samples must end in
/// `_total`, which dcgm-exporter's names do not: there it is `unknown`.
fn head(w: &mut Writer, name: &str, help: &str, kind: Kind) {
    let kind = match (kind, w.om) {
        (Kind::Counter, false) => "counter",
        (Kind::Counter, true) => "unknown",
        _ => "gauge",
    };
    w.put("# HELP ");
    w.put(name);
    w.out.push(b' ');
    escape(w.out, help, w.om);
    w.put("\n# TYPE ");
    w.put(name);
    w.out.push(b' ');
    w.put(kind);
    w.out.push(b'\n');
}

/// A target's label set, written once and then copied: `gpu`, `UUID`,
/// `pci_bus_id`, `device`, `modelName`, on MIG `GPU_I_PROFILE` and
/// `GPU_I_ID`, `Hostname` (or `hostname`), then the counters file's
/// `label` fields.
fn labels(w: &mut Writer, d: &Dcgm, t: Target) {
    if let Some(&(start, end)) = w.cached.get(t.n).filter(|(s, e)| e > s) {
        w.out.extend_from_within(start..end);
        return;
    }
    let start = w.out.len();
    let g = t.gpu;
    w.out.extend_from_slice(b"{gpu=\"");
    write_u64(w.out, g.index as u64);
    w.out.push(b'"');
    w.label("UUID", &g.uuid);
    w.label("pci_bus_id", &g.pci_bus_id);
    // dcgm-exporter builds it from the index, not the device node's
    // minor number, so every source has it.
    w.out.extend_from_slice(b",device=\"nvidia");
    write_u64(w.out, g.index as u64);
    w.out.push(b'"');
    w.label("modelName", &g.model);
    if let Some(m) = t.mig {
        w.label("GPU_I_PROFILE", &m.profile);
        w.num_label("GPU_I_ID", m.gpu_instance_id);
    }
    if let Some(host) = &d.hostname {
        w.label(d.hostname_label(), host);
    }
    for f in d.fields.iter().filter(|f| f.kind == Kind::Label) {
        let value = match f.field {
            Field::DriverVersion => &g.driver_version,
            Field::DevName => &g.model,
            Field::DevUuid => &g.uuid,
            Field::PciBusId => &g.pci_bus_id,
            Field::VbiosVersion => &g.vbios_version,
            Field::InforomImage => &g.inforom_version,
            _ => continue,
        };
        w.label(&f.name, value);
    }
    if let Some(slot) = w.cached.get_mut(t.n) {
        *slot = (start, w.out.len());
    }
}
