//! The `dcgm` collector: the snapshot's readings under dcgm-exporter's
//! names, labels and units, for dashboards and alerts written against it.
//! Its fields come from the counters file (`config::dcgm`); each field's
//! reading and unit is in `values.rs`. Label values are escaped, where
//! dcgm-exporter prints them raw.

mod values;

use super::attribution::copies;
use super::writer::{Target, Writer, each_target, escape};
use base::numbers::write_u64;
use model::dcgm::{Dcgm, Field, Kind, Mig, Wanted};
use model::{Gpu, Readings};

/// The labels dcgm-exporter adds to its Xid series, after the counters
/// file's label fields (Go prints its label map sorted by name).
#[derive(Clone, Copy)]
enum Extra {
    None,
    /// `err_code` and `err_msg`, on `DCGM_FI_DEV_XID_ERRORS`.
    Code(u32),
    /// `window_size_in_ms` and, but on a GPU's zero series, `xid`, on
    /// `DCGM_EXP_XID_ERRORS_COUNT`.
    Window(u64, Option<u32>),
}

/// Every served field of `d` over `gpus`, a family each.
pub(super) fn render(w: &mut Writer, d: &Dcgm, gpus: &[Gpu], pod_labels: bool) {
    for f in d.fields.iter().filter(|f| f.kind != Kind::Label) {
        let mut fam = Family {
            d,
            f,
            pod_labels,
            headed: false,
        };
        each_entity(gpus, |t, own, gpu| {
            // A GPU instance has its own memory, profiling and pods; the
            // device-wide fields are its GPU's, as DCGM gives them; the
            // whole-GPU utilizations it has not.
            let r = match (t.mig, instance_field(f.field)) {
                (None, _) | (Some(_), Some(true)) => own,
                (Some(_), Some(false)) => gpu,
                (Some(_), None) => return,
            };
            sample_field(&mut fam, w, t, r, own)
        });
    }
}

/// Whether a MIG instance's series of `f` shows its own reading (`true`),
/// its GPU's (`false`), or none.
fn instance_field(f: Field) -> Option<bool> {
    use Field::*;
    match f {
        Reading(r) => match r.dcgm.map(|f| f.mig) {
            Some(Mig::Own) => Some(true),
            Some(Mig::None) => None,
            _ => Some(false),
        },
        Prof(_) => Some(true),
        EncUtil | DecUtil => None,
        _ => Some(false),
    }
}

/// dcgm-exporter's entities with its default `-d f`: each GPU, but a GPU
/// with MIG instances is its instances alone, so that a sum counts each
/// byte once. `f` gets the target, its readings and its GPU's; targets are
/// numbered as [`each_target`] numbers them.
fn each_entity<'a>(gpus: &'a [Gpu], mut f: impl FnMut(Target<'a>, &'a Readings, &'a Readings)) {
    each_target(gpus, |t, r| {
        if t.mig.is_some() || t.gpu.mig.is_empty() {
            f(t, r, &t.gpu.readings);
        }
    });
}

/// The samples of one field for target `t` from readings `r`; pods are
/// `own`'s.
fn sample_field(fam: &mut Family, w: &mut Writer, t: Target, r: &Readings, own: &Readings) {
    let d = fam.d;
    match (fam.f.field, &r.xid_window) {
        // Xid of each code in the window; a GPU with none has one
        // series at 0 without `xid`, as dcgm-exporter prints it.
        (Field::XidCount, Some(window)) if window.is_empty() => {
            fam.sample(w, t, own, 0.0, Extra::Window(d.xid_window_ms, None));
        }
        (Field::XidCount, window) => {
            for &(code, n) in window.iter().flatten() {
                let extra = Extra::Window(d.xid_window_ms, Some(code));
                fam.sample(w, t, own, n as f64, extra);
            }
        }
        (field, _) => {
            if let Some(v) = values::value(field, r) {
                let extra = match field {
                    Field::XidErrors => Extra::Code(v as u32),
                    _ => Extra::None,
                };
                fam.sample(w, t, own, values::shaped(field, v), extra);
            }
        }
    }
}

/// One served field's family, headed at its first sample.
struct Family<'a> {
    d: &'a Dcgm,
    f: &'a Wanted,
    pod_labels: bool,
    headed: bool,
}

impl Family<'_> {
    /// A sample of `t` (a copy per pod with pod labels on). Kept out of
    /// line: its three callers would each carry a copy.
    #[inline(never)]
    fn sample(&mut self, w: &mut Writer, t: Target, r: &Readings, v: f64, extra: Extra) {
        let f = self.f;
        if !std::mem::replace(&mut self.headed, true) {
            head(w, &f.name, &f.help, f.kind);
        }
        for pod in copies(r, self.pod_labels) {
            w.put(&f.name);
            labels(w, self.d, t);
            match extra {
                Extra::None => {}
                Extra::Code(code) => {
                    num_label(w, "err_code", code.into());
                    label(w, "err_msg", values::xid_message(code));
                }
                Extra::Window(ms, xid) => {
                    num_label(w, "window_size_in_ms", ms);
                    if let Some(xid) = xid {
                        num_label(w, "xid", xid.into());
                    }
                }
            }
            if let Some(p) = pod {
                label(w, "pod", &p.pod);
                label(w, "namespace", &p.namespace);
                label(w, "container", &p.container);
            }
            value(w, v);
        }
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
    label(w, d.uuid_label(), &g.uuid);
    label(w, "pci_bus_id", &g.pci_bus_id);
    // dcgm-exporter builds it from the index, not the device node's
    // minor number, so every source has it.
    w.out.extend_from_slice(b",device=\"nvidia");
    write_u64(w.out, g.index as u64);
    w.out.push(b'"');
    match d.model_dashes {
        true => label(w, "modelName", &g.model.replace(' ', "-")),
        false => label(w, "modelName", &g.model),
    }
    if let Some(m) = t.mig {
        label(w, "GPU_I_PROFILE", &m.profile);
        num_label(w, "GPU_I_ID", m.gpu_instance_id.into());
    }
    if let Some(host) = &d.hostname {
        label(w, d.hostname_label(), host);
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
        label(w, &f.name, value);
    }
    if let Some(slot) = w.cached.get_mut(t.n) {
        *slot = (start, w.out.len());
    }
}

// The writer's label and value, out of line here: the native families'
// hot path inlines them, and a copy at each call below would cost the
// build held to its size more than a call costs a scrape.
#[inline(never)]
fn label(w: &mut Writer, k: &str, v: &str) {
    w.label(k, v);
}

#[inline(never)]
fn num_label(w: &mut Writer, k: &str, n: u64) {
    w.num_label(k, n);
}

#[inline(never)]
fn value(w: &mut Writer, v: f64) {
    w.value(v);
}
