//! The refresher and the filler. A thread of its own (`kubelet-refresh`)
//! lists the kubelet's pods every refresh interval, each call bounded by a
//! timeout, and publishes the last good listing; the filler, on the
//! poller thread, matches that listing to each collection's GPUs. A
//! scrape never waits for the kubelet: it renders what the poller
//! published, and a kubelet that hangs, restarts or answers garbage only
//! leaves the listing stale (its age in
//! `gpu_exporter_kubelet_last_success_timestamp_seconds`).

use super::attribution::{self, Attribution, Unmatched};
use super::error::Error;
use super::kubelet::{Lister, retry_delay};
use super::proto::PodResources;
use crate::Filler;
use base::quiet::{Repeating, Verdict};
use model::{DraDevice, Gpu, Kubelet, Pod};
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest wait between tries while the kubelet fails.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What the flags say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The kubelet's pod-resources socket.
    pub socket: PathBuf,
    /// Whether a flag named the socket: then it is expected, and its
    /// absence is worth more than a debug line.
    pub explicit: bool,
    /// Time between listings.
    pub interval: Duration,
    /// Time one listing may take, connecting included.
    pub timeout: Duration,
}

/// What the thread publishes.
#[derive(Debug, Default)]
struct Shared {
    /// The last good listing; empty before the first.
    pods: Arc<Vec<PodResources>>,
    /// Bumped on every good listing, so the filler matches anew.
    generation: u64,
    kubelet: Kubelet,
    /// Whether the socket has ever existed: until it does, attribution on
    /// the default path stays silent (a node without Kubernetes).
    seen: bool,
    stop: bool,
}

type Cell = Arc<(Mutex<Shared>, Condvar)>;

fn lock(cell: &Cell) -> MutexGuard<'_, Shared> {
    cell.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// The filler; it owns the refresher thread, which stops when it drops.
pub struct KubeletPods {
    cell: Cell,
    explicit: bool,
    /// The listing and fleet the last match was made for.
    generation: u64,
    fleet: Vec<attribution::Gpu>,
    matched: Attribution,
    dra: Vec<DraDevice>,
    kubelet: Option<Kubelet>,
}

impl KubeletPods {
    /// Starts the refresher thread.
    pub fn start(options: Options) -> std::io::Result<KubeletPods> {
        let cell: Cell = Arc::default();
        let explicit = options.explicit;
        let theirs = cell.clone();
        std::thread::Builder::new()
            .name("kubelet-refresh".into())
            .spawn(move || refresh(options, &theirs))?;
        Ok(KubeletPods {
            cell,
            explicit,
            generation: 0,
            fleet: Vec::new(),
            matched: Attribution::default(),
            dra: Vec::new(),
            kubelet: None,
        })
    }
}

impl Drop for KubeletPods {
    fn drop(&mut self) {
        lock(&self.cell).stop = true;
        self.cell.1.notify_all();
    }
}

/// The fleet as attribution sees it: indexes, UUIDs, and every MIG
/// device (a compute instance, with a MIG UUID of its own) with its GPU
/// instance, numbered in NVML's enumeration order.
fn fleet(gpus: &[Gpu]) -> Vec<attribution::Gpu> {
    gpus.iter()
        .map(|g| {
            let devices = g.mig.iter().flat_map(|m| {
                let uuids: Vec<&str> = match m.compute.is_empty() {
                    true => vec![m.uuid.as_str()],
                    false => m.compute.iter().map(|c| c.uuid.as_str()).collect(),
                };
                uuids.into_iter().map(|u| (u, m.gpu_instance_id))
            });
            attribution::Gpu {
                index: g.index,
                uuid: g.uuid.clone(),
                minor: g.minor,
                mig: devices
                    .enumerate()
                    .map(|(j, (uuid, gi))| attribution::Mig {
                        uuid: uuid.to_string(),
                        gpu_instance_id: gi,
                        index: u32::try_from(j).ok(),
                    })
                    .collect(),
            }
        })
        .collect()
}

impl Filler for KubeletPods {
    fn fill(&mut self, _now: f64, gpus: &mut [Gpu]) {
        let (pods, generation, seen) = {
            let shared = lock(&self.cell);
            let seen = shared.seen || self.explicit;
            self.kubelet = seen.then(|| shared.kubelet.clone());
            (shared.pods.clone(), shared.generation, seen)
        };
        if !seen {
            return;
        }
        let fleet = fleet(gpus);
        if generation != self.generation || fleet != self.fleet {
            let matched = attribution::attribute(&pods, &fleet);
            log_unmatched(&self.matched.unmatched, &matched.unmatched);
            self.dra = matched.dra.iter().map(dra_device).collect();
            self.matched = matched;
            self.generation = generation;
            self.fleet = fleet;
        }
        for row in &self.matched.rows {
            let Some(gpu) = gpus.iter_mut().find(|g| g.index == row.gpu) else {
                continue;
            };
            let readings = match row.mig_instance {
                None => &mut gpu.readings,
                Some(gi) => match gpu.mig.iter_mut().find(|m| m.gpu_instance_id == gi) {
                    Some(m) => &mut m.readings,
                    None => continue,
                },
            };
            // Rows come sorted and deduplicated: the pods stay so.
            readings.pods.push(Pod {
                namespace: row.namespace.clone(),
                pod: row.pod.clone(),
                container: row.container.clone(),
            });
        }
    }

    fn kubelet(&self) -> Option<Kubelet> {
        let mut k = self.kubelet.clone()?;
        k.dra = self.dra.clone();
        Some(k)
    }
}

fn dra_device(r: &attribution::DraRow) -> DraDevice {
    DraDevice {
        namespace: r.namespace.clone(),
        pod: r.pod.clone(),
        container: r.container.clone(),
        claim_namespace: r.claim_namespace.clone(),
        claim: r.claim_name.clone(),
        driver: r.driver.clone(),
        pool: r.pool.clone(),
        device: r.device.clone(),
    }
}

/// Device ids that match no GPU are logged when the set of them changes:
/// how many, and the first three.
fn log_unmatched(before: &[Unmatched], now: &[Unmatched]) {
    if before == now || now.is_empty() {
        return;
    }
    let first: Vec<String> = now
        .iter()
        .take(3)
        .map(|u| {
            format!(
                "{}/{} {} {}={}",
                u.namespace, u.pod, u.container, u.resource, u.device_id
            )
        })
        .collect();
    log::warn!(
        "kubelet: {} GPU device id(s) match no GPU here: {}{}",
        now.len(),
        first.join(", "),
        if now.len() > 3 { ", …" } else { "" }
    );
}

/// One listing, published; the GPU pods kept, or the line that says why not.
fn list_once(
    lister: &mut Lister,
    options: &Options,
    cell: &Cell,
    stats_logged: &mut (u64, u64),
) -> Result<u64, String> {
    if options.socket.exists() {
        lock(cell).seen = true;
        let r = lister.list(&options.socket, options.timeout);
        let mut shared = lock(cell);
        match r {
            Ok(listing) => {
                let s = listing.stats;
                shared.kubelet.skipped[0] += s.oversize;
                shared.kubelet.skipped[1] += s.over_budget;
                shared.kubelet.last_success = Some(base::time::unix_now());
                shared.generation += 1;
                shared.pods = Arc::new(listing.pods);
                if (s.oversize, s.over_budget) != *stats_logged && s.oversize + s.over_budget > 0 {
                    log::warn!(
                        "kubelet: {} pod(s) over 1 MiB skipped, {} past the 2 MiB budget dropped",
                        s.oversize,
                        s.over_budget
                    );
                }
                *stats_logged = (s.oversize, s.over_budget);
                Ok(s.kept)
            }
            Err(e) => {
                shared.kubelet.errors[e.reason()] += 1;
                Err(e.to_string())
            }
        }
    } else {
        // Counted once it is expected: named by the flag, or seen.
        let mut shared = lock(cell);
        if options.explicit || shared.seen {
            shared.kubelet.errors[Error::Connect(ErrorKind::NotFound).reason()] += 1;
        }
        Err(format!("no socket at {}", options.socket.display()))
    }
}

/// The refresher thread: lists, publishes, waits, until the filler drops.
fn refresh(options: Options, cell: &Cell) {
    let mut lister = Lister::default();
    let mut failures = 0u32;
    let mut quiet = Repeating::new();
    let mut stats_logged = (0, 0);
    let socket = options.socket.display().to_string();
    loop {
        let outcome = list_once(&mut lister, &options, cell, &mut stats_logged);
        match outcome {
            Ok(kept) => {
                failures = 0;
                if quiet.recover() {
                    log::info!("kubelet pod-resources: recovered ({kept} GPU pods)");
                } else if lock(cell).generation == 1 {
                    log::info!("kubelet pod-resources: {socket}: {kept} GPU pods");
                }
            }
            Err(message) => {
                failures = failures.saturating_add(1);
                let waiting = !lock(cell).seen && !options.explicit;
                match quiet.fail_at(&message, Instant::now()) {
                    // The default socket on a node without a kubelet.
                    Verdict::New | Verdict::Again(_) if waiting => {
                        log::debug!("kubelet pod-resources: {message}; watching for it")
                    }
                    Verdict::New => log::warn!("kubelet pod-resources: {message}; retrying"),
                    Verdict::Again(n) => log::warn!(
                        "kubelet pod-resources: {message} (still; {n} times in the last minute or more)"
                    ),
                    Verdict::Quiet => {}
                }
            }
        }
        let wait = match failures {
            0 => options.interval,
            n => retry_delay(options.interval, n - 1, MAX_BACKOFF),
        };
        let shared = lock(cell);
        let (shared, _) = cell
            .1
            .wait_timeout_while(shared, wait, |s| !s.stop)
            .unwrap_or_else(|e| e.into_inner());
        if shared.stop {
            return;
        }
    }
}
