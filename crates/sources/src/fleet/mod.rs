//! Fleet memory: what the exporter remembers of the GPUs it has seen, one
//! step between every source and the snapshot, whatever the source.
//!
//! - **Identity.** A GPU is known by its UUID (by its bus id, or failing
//!   that its index, where the source gives no UUID). It keeps the `gpu`
//!   index it was first seen with, so a survivor keeps its label when
//!   nvidia-smi renumbers after a loss.
//! - **Lost GPUs.** A GPU seen before and missing now (gone from the
//!   source's list, or reported lost by UUID or bus id) is served with
//!   `up == false`, its identity and its counters, until the exporter
//!   restarts. A GPU lost before it was ever read has no identity to serve:
//!   it is left out and logged once, unless the source still names it (a
//!   UUID answered before the loss) or it is on the PCI bus
//!   ([`Fleet::on_bus`]), which names it by its bus id.
//! - **Counters** never go backwards (see [`counters`]).
//! - **Ranges.** Readings outside their family's physical range are left
//!   out (see [`range`]).
//!
//! [`Fleet::identify`] runs on the source's list before the fillers (the
//! kernel-log Xid reader needs a lost GPU's bus id), [`Fleet::settle`]
//! after them.

mod counters;
pub mod range;

use base::pci::normalize_bus_id;
use base::quiet::{Noted, Repeating};
use counters::Counters;
use model::Gpu;

/// A GPU the fleet has seen up at least once.
#[derive(Debug)]
struct Known {
    /// The `gpu` label: the index it was first seen with.
    index: u32,
    /// The index the source gave it last, to know a UUID-less GPU again.
    source_index: u32,
    uuid: String,
    model: String,
    pci_bus_id: String,
    /// `pci_bus_id` normalised, to match nvidia-smi's and the kernel's forms.
    bus: Option<String>,
    driver_version: String,
    vbios_version: String,
    inforom_version: String,
    counters: Counters,
}

impl Known {
    /// `g`, first seen up, as `gpu="index"`.
    fn new(index: u32, g: &Gpu, bus: Option<String>) -> Known {
        Known {
            index,
            source_index: g.index,
            uuid: g.uuid.clone(),
            model: g.model.clone(),
            pci_bus_id: g.pci_bus_id.clone(),
            bus,
            driver_version: g.driver_version.clone(),
            vbios_version: g.vbios_version.clone(),
            inforom_version: g.inforom_version.clone(),
            counters: Counters::default(),
        }
    }

    /// What `g`, up again, says of itself; an empty field keeps the old.
    fn refresh(&mut self, g: &Gpu, bus: Option<String>) {
        self.source_index = g.index;
        update(&mut self.model, &g.model);
        update(&mut self.driver_version, &g.driver_version);
        update(&mut self.vbios_version, &g.vbios_version);
        update(&mut self.inforom_version, &g.inforom_version);
        if bus.is_some() {
            update(&mut self.pci_bus_id, &g.pci_bus_id);
            self.bus = bus;
        }
        update(&mut self.uuid, &g.uuid);
    }

    fn matches(&self, g: &Gpu, bus: Option<&str>) -> bool {
        // A GPU known only from the PCI bus has no UUID yet: its bus id
        // names it when the source first lists it.
        if !g.uuid.is_empty() && !self.uuid.is_empty() {
            return self.uuid.eq_ignore_ascii_case(&g.uuid);
        }
        if let Some(bus) = bus {
            return self.bus.as_deref() == Some(bus);
        }
        self.uuid.is_empty() && self.bus.is_none() && self.source_index == g.index
    }

    /// The name logs use.
    fn who(&self) -> String {
        match (&self.uuid, &self.bus) {
            (u, _) if !u.is_empty() => u.clone(),
            (_, Some(b)) => b.clone(),
            _ => format!("index {}", self.source_index),
        }
    }
}

/// The most GPUs the fleet memory serves, lost ones included, and MIG GPU
/// (and compute) instances per GPU: NVIDIA's largest nodes have 16 GPUs,
/// and a GPU at most 7 instances. Beyond them a GPU or instance is left
/// out and logged once: the rules' replay and evaluation are linear in
/// subjects, and series in GPUs.
pub const MAX_GPUS: usize = 64;
pub const MAX_MIG: usize = 7;

#[derive(Debug, Default)]
pub struct Fleet {
    known: Vec<Known>,
    /// GPUs and MIG instances past the limits, by name: noted once.
    over: Noted<String>,
    /// Lost GPUs never seen up, by how the source named them: noted once.
    anonymous: Noted<String>,
    ranges: Noted<(String, &'static str)>,
    rejected: range::Rejected,
    /// "The source reports no GPUs", while it lasts.
    zero: Repeating,
}

impl Fleet {
    pub fn new() -> Fleet {
        Fleet::default()
    }

    /// Gives each GPU of a collection its remembered identity and `gpu`
    /// index, adds the known GPUs the source no longer lists as lost, and
    /// drops lost GPUs never seen up. Sorted by index.
    pub fn identify(&mut self, gpus: &mut Vec<Gpu>) {
        if gpus.is_empty() && self.known.is_empty() {
            self.zero.fail(
                "fleet",
                "the source reports no GPUs (is the driver loaded without any GPU, or are none visible to this container?)",
            );
        } else {
            self.zero.ok("fleet");
        }
        self.bound_mig(gpus);
        let mut seen = vec![false; self.known.len()];
        let mut out = Vec::with_capacity(gpus.len().max(self.known.len()));
        for mut g in gpus.drain(..) {
            let bus = (!g.pci_bus_id.is_empty())
                .then(|| normalize_bus_id(&g.pci_bus_id))
                .flatten();
            let found = self
                .known
                .iter()
                .position(|k| k.matches(&g, bus.as_deref()));
            match found {
                Some(i) => {
                    if seen[i] && !g.up {
                        continue; // named twice: once is enough
                    }
                    seen[i] = true;
                    let k = &mut self.known[i];
                    if g.up {
                        k.refresh(&g, bus);
                    }
                    remember(&mut g, k);
                    out.push(g);
                }
                // A lost GPU the source still names (it answered its UUID
                // before it fell off) has an identity too.
                None if (g.up || !g.uuid.is_empty()) && self.known.len() >= MAX_GPUS => {
                    if self.over.first(g.uuid.clone()) {
                        log::warn!(
                            "fleet: GPU {} left out: {MAX_GPUS} GPUs are served at most",
                            g.uuid
                        );
                    }
                }
                None if g.up || !g.uuid.is_empty() => {
                    let index = self.free_index(g.index);
                    if index != g.index {
                        log::warn!(
                            "fleet: a new GPU {} at index {} takes gpu=\"{index}\": a lost GPU holds that index",
                            g.uuid,
                            g.index
                        );
                    }
                    self.known.push(Known::new(index, &g, bus));
                    seen.push(true);
                    g.index = index;
                    out.push(g);
                }
                None => {
                    let name = match (&g.uuid, &bus) {
                        (u, _) if !u.is_empty() => u.clone(),
                        (_, Some(b)) => b.clone(),
                        _ => format!("at index {}", g.index),
                    };
                    if self.anonymous.first(name.clone()) {
                        log::warn!(
                            "fleet: GPU {name} is lost and was never read, so it has no identity to serve; left out"
                        );
                    }
                }
            }
        }
        for (k, _) in self.known.iter().zip(seen).filter(|(_, s)| !s) {
            let mut g = Gpu::default();
            remember(&mut g, k);
            out.push(g);
        }
        sort_by_index(&mut out);
        *gpus = out;
    }

    /// After [`Fleet::identify`]: an NVIDIA GPU on the PCI bus (`functions`,
    /// the kernel's addresses) that the source does not list and the fleet
    /// does not know is remembered by its bus id alone and served lost from
    /// now on: a GPU that fell off before the exporter started, or whose
    /// driver failed to take it, is no longer simply absent. Skipped while
    /// a GPU the source lists has no bus id to compare.
    pub fn on_bus(&mut self, functions: &[String], gpus: &mut Vec<Gpu>) {
        if gpus
            .iter()
            .any(|g| g.up && normalize_bus_id(&g.pci_bus_id).is_none())
        {
            return;
        }
        let mut added = false;
        for f in functions {
            let Some(bus) = normalize_bus_id(f) else {
                continue;
            };
            if self.known.len() >= MAX_GPUS
                || self.known.iter().any(|k| k.bus.as_deref() == Some(&bus))
            {
                continue;
            }
            let index = self.next_index();
            log::warn!(
                "fleet: NVIDIA GPU {bus} is on the PCI bus but the source does not list it (fallen off, or its driver failed to take it): served as lost, gpu=\"{index}\""
            );
            let mut g = Gpu {
                pci_bus_id: bus.clone(),
                ..Gpu::default()
            };
            self.known.push(Known::new(index, &g, Some(bus)));
            remember(&mut g, &self.known[self.known.len() - 1]);
            gpus.push(g);
            added = true;
        }
        if added {
            sort_by_index(gpus);
        }
    }

    /// At most [`MAX_MIG`] MIG instances per GPU, and compute instances
    /// per MIG instance.
    fn bound_mig(&mut self, gpus: &mut [Gpu]) {
        for g in gpus.iter_mut() {
            if g.mig.len() > MAX_MIG && self.over.first(format!("{} mig", g.uuid)) {
                log::warn!(
                    "fleet: GPU {} has {} MIG instances; the first {MAX_MIG} are served",
                    g.uuid,
                    g.mig.len()
                );
            }
            g.mig.truncate(MAX_MIG);
            for m in &mut g.mig {
                m.compute.truncate(MAX_MIG);
            }
        }
    }

    /// After the fillers: leaves out readings outside their ranges and
    /// makes every counter monotonic, filling a lost GPU's in; `at` is
    /// when the source read them.
    pub fn settle(&mut self, gpus: &mut [Gpu], at: f64) {
        for g in gpus.iter_mut() {
            let Some(k) = self
                .known
                .iter_mut()
                .find(|k| k.index == g.index && k.uuid == g.uuid)
            else {
                continue;
            };
            let who = k.who();
            range::check(&mut g.readings, &who, &mut self.ranges, &mut self.rejected);
            for m in &mut g.mig {
                range::check(
                    &mut m.readings,
                    &m.uuid,
                    &mut self.ranges,
                    &mut self.rejected,
                );
            }
            k.counters
                .settle(&mut g.readings, g.up, &who, at, &mut self.rejected);
        }
    }

    /// Readings left out of range since start, by family.
    pub fn rejected(&self) -> Vec<(&'static str, u64)> {
        self.rejected.iter().map(|(k, v)| (*k, *v)).collect()
    }

    /// `wanted` if no known GPU holds it, else the first index after every
    /// known one.
    fn free_index(&self, wanted: u32) -> u32 {
        if self.known.iter().all(|k| k.index != wanted) {
            return wanted;
        }
        self.next_index()
    }

    /// The index after every known GPU's.
    fn next_index(&self) -> u32 {
        self.known.iter().map(|k| k.index + 1).max().unwrap_or(0)
    }
}

/// Sorts by `gpu` index: an insertion sort, as the list is short and all
/// but the lost GPUs come sorted (and it keeps the binary small).
fn sort_by_index(gpus: &mut [Gpu]) {
    for i in 1..gpus.len() {
        let mut j = i;
        while j > 0 && gpus[j - 1].index > gpus[j].index {
            gpus.swap(j - 1, j);
            j -= 1;
        }
    }
}

fn update(old: &mut String, new: &str) {
    if !new.is_empty() && old != new {
        *old = new.to_string();
    }
}

/// Gives `g` the identity `k` remembers; a GPU not up gets every field, an
/// up one its first index.
fn remember(g: &mut Gpu, k: &Known) {
    g.index = k.index;
    if g.up {
        return;
    }
    g.uuid.clone_from(&k.uuid);
    g.model.clone_from(&k.model);
    g.pci_bus_id.clone_from(&k.pci_bus_id);
    g.driver_version.clone_from(&k.driver_version);
    g.vbios_version.clone_from(&k.vbios_version);
    g.inforom_version.clone_from(&k.inforom_version);
    g.mig.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::Readings;

    fn gpu(index: u32, uuid: &str, bus: &str) -> Gpu {
        Gpu {
            index,
            uuid: uuid.into(),
            model: "NVIDIA H100 80GB HBM3".into(),
            pci_bus_id: bus.into(),
            driver_version: "550.54.15".into(),
            up: true,
            readings: Readings {
                temperature_celsius: Some(40.0),
                energy_joules_total: Some(100.0),
                xid_errors: Some(vec![(79, 1)]),
                ..Readings::default()
            },
            ..Gpu::default()
        }
    }

    fn run(f: &mut Fleet, mut gpus: Vec<Gpu>) -> Vec<Gpu> {
        f.identify(&mut gpus);
        f.settle(&mut gpus, 0.0);
        gpus
    }

    /// A GPU only the PCI bus shows is lost by its bus id, and is the same
    /// GPU, at the same index, once the source lists it.
    #[test]
    fn a_gpu_only_the_bus_shows_is_lost_until_the_source_lists_it() {
        let mut f = Fleet::new();
        let bus = ["0000:18:00.0".to_string(), "0000:9b:00.0".to_string()];
        let mut out = vec![gpu(0, "GPU-a", "00000000:18:00.0")];
        f.identify(&mut out);
        f.on_bus(&bus, &mut out);
        assert_eq!(summary(&out), [(0, "GPU-a", true), (1, "", false)]);
        assert_eq!(out[1].pci_bus_id, "00000000:9B:00.0");
        // Served lost on the next collections without another look.
        let out = run(&mut f, vec![gpu(0, "GPU-a", "00000000:18:00.0")]);
        assert_eq!(summary(&out), [(0, "GPU-a", true), (1, "", false)]);
        // Its driver takes it: the same gpu index, now with its UUID.
        let mut out = vec![
            gpu(0, "GPU-a", "00000000:18:00.0"),
            gpu(1, "GPU-b", "00000000:9B:00.0"),
        ];
        f.identify(&mut out);
        f.on_bus(&bus, &mut out);
        assert_eq!(summary(&out), [(0, "GPU-a", true), (1, "GPU-b", true)]);
        // A listed GPU without a bus id: no comparison is possible.
        let mut f = Fleet::new();
        let mut out = vec![gpu(0, "GPU-a", "")];
        f.identify(&mut out);
        f.on_bus(&bus, &mut out);
        assert_eq!(summary(&out), [(0, "GPU-a", true)]);
    }

    fn summary(gpus: &[Gpu]) -> Vec<(u32, &str, bool)> {
        gpus.iter()
            .map(|g| (g.index, g.uuid.as_str(), g.up))
            .collect()
    }

    #[test]
    fn gpus_and_mig_instances_past_the_limits_are_left_out() {
        use model::MigInstance;
        let mut f = Fleet::new();
        let mut many: Vec<Gpu> = (0..70).map(|i| gpu(i, &format!("GPU-{i}"), "")).collect();
        many[0].mig = vec![MigInstance::default(); 9];
        let out = run(&mut f, many);
        assert_eq!(out.len(), MAX_GPUS);
        assert_eq!(out[0].mig.len(), MAX_MIG);
        assert_eq!(out.last().unwrap().uuid, "GPU-63");
    }

    #[test]
    fn a_gpu_missing_from_the_list_is_lost_with_its_identity_and_counters() {
        let mut f = Fleet::new();
        let all = vec![
            gpu(0, "GPU-a", "00000000:18:00.0"),
            gpu(1, "GPU-b", "00000000:19:00.0"),
            gpu(2, "GPU-c", "00000000:1A:00.0"),
        ];
        run(&mut f, all);
        // nvidia-smi renumbers: b is gone, c is now index 1.
        let out = run(
            &mut f,
            vec![
                gpu(0, "GPU-a", "00000000:18:00.0"),
                gpu(1, "GPU-c", "00000000:1A:00.0"),
            ],
        );
        assert_eq!(
            summary(&out),
            [(0, "GPU-a", true), (1, "GPU-b", false), (2, "GPU-c", true)]
        );
        let b = &out[1];
        assert_eq!(b.pci_bus_id, "00000000:19:00.0");
        assert_eq!(b.model, "NVIDIA H100 80GB HBM3");
        assert_eq!(b.driver_version, "550.54.15");
        assert_eq!(b.readings.temperature_celsius, None);
        assert_eq!(b.readings.energy_joules_total, Some(100.0));
        assert_eq!(b.readings.xid_errors, Some(vec![(79, 1)]));
    }

    #[test]
    fn a_gpu_named_lost_by_bus_id_or_uuid_keeps_its_identity() {
        let mut f = Fleet::new();
        run(
            &mut f,
            vec![
                gpu(0, "GPU-a", "00000000:0B:00.0"),
                gpu(1, "GPU-b", "00000000:0C:00.0"),
            ],
        );
        // nvidia-smi: "Unable to determine the device handle for GPU 0000:0B:00.0".
        let unreachable = Gpu {
            index: 7,
            pci_bus_id: "0000:0B:00.0".into(),
            ..Gpu::default()
        };
        // NVML: GPU_IS_LOST on a GPU whose UUID the source still knows.
        let mut lost_b = Gpu {
            index: 1,
            uuid: "GPU-b".into(),
            ..Gpu::default()
        };
        lost_b.readings.xid_errors = Some(vec![(79, 2)]);
        let out = run(&mut f, vec![unreachable, lost_b]);
        assert_eq!(summary(&out), [(0, "GPU-a", false), (1, "GPU-b", false)]);
        assert_eq!(out[0].pci_bus_id, "00000000:0B:00.0");
        assert_eq!(out[1].readings.xid_errors, Some(vec![(79, 2)]));
        assert_eq!(f.known.len(), 2);
    }

    #[test]
    fn a_gpu_lost_before_it_was_read_is_left_out() {
        let mut f = Fleet::new();
        let lost = Gpu {
            index: 3,
            ..Gpu::default()
        };
        let out = run(&mut f, vec![gpu(0, "GPU-a", "00000000:18:00.0"), lost]);
        assert_eq!(summary(&out), [(0, "GPU-a", true)]);
        assert!(
            out.iter()
                .all(|g| !g.uuid.is_empty() && !g.model.is_empty())
        );
    }

    #[test]
    fn gpus_without_uuids_are_known_by_bus_id_or_index() {
        let mut f = Fleet::new();
        let mut a = gpu(0, "", "");
        let mut b = gpu(1, "", "00000000:19:00.0");
        run(&mut f, vec![a.clone(), b.clone()]);
        a.readings.energy_joules_total = Some(5.0);
        b.index = 0;
        let out = run(&mut f, vec![a, b]);
        assert_eq!(summary(&out), [(0, "", true), (1, "", true)]);
        assert_eq!(out[0].readings.energy_joules_total, Some(105.0));
    }

    #[test]
    fn a_new_gpu_never_takes_a_lost_gpus_index() {
        let mut f = Fleet::new();
        run(&mut f, vec![gpu(0, "GPU-a", ""), gpu(1, "GPU-b", "")]);
        let out = run(&mut f, vec![gpu(0, "GPU-a", ""), gpu(1, "GPU-new", "")]);
        assert_eq!(
            summary(&out),
            [
                (0, "GPU-a", true),
                (1, "GPU-b", false),
                (2, "GPU-new", true)
            ]
        );
    }
}
