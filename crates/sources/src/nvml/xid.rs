//! Xid events: a thread per NVML session registers XidCriticalError
//! events and counts them by GPU UUID; counts survive re-initialisation.
//! GPUs that cannot deliver events leave `xid_errors` `None` for another
//! reader.

use super::Options;
use super::ffi::{Device, EVENT_XID_CRITICAL_ERROR, Error, EventSet, Library};
use base::time::unix_now;
use model::{Readings, last_code, xid_errors};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The GPUs the session's Xid thread watches. Dropping it stops the
/// thread, which then frees the event set and lets go of the library.
pub(super) struct XidWatch {
    pub(super) watched: HashSet<String>,
    stop: Arc<AtomicBool>,
}

impl Drop for XidWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
pub(super) struct XidCounts {
    pub(super) counts: BTreeMap<u32, u64>,
    pub(super) last_seconds: Option<f64>,
    pub(super) last_code: Option<u32>,
}

/// Sets a GPU's Xid readings: its counts as `xid_errors` holds them, when
/// the last one came and its code (0 before any).
pub(super) fn xid_readings(xids: &HashMap<String, XidCounts>, uuid: &str, r: &mut Readings) {
    let seen = xids.get(uuid);
    let counts = seen
        .into_iter()
        .flat_map(|s| &s.counts)
        .map(|(&c, &n)| (c, n));
    r.xid_errors = Some(xid_errors(counts));
    r.xid_last_timestamp_seconds = seen.and_then(|s| s.last_seconds);
    r.xid_last_code = Some(last_code(seen.and_then(|s| s.last_code)));
}

/// Registers every readable GPU for Xid events and starts the thread that
/// counts them. GPUs that cannot deliver them are left out of `watched`.
pub(super) fn watch_xids(
    lib: &Arc<Library>,
    devices: &[(u32, Result<Device<'_>, Error>)],
    xids: &Arc<Mutex<HashMap<String, XidCounts>>>,
    options: &Options,
) -> XidWatch {
    let stop = Arc::new(AtomicBool::new(false));
    let mut watch = XidWatch {
        watched: HashSet::new(),
        stop: stop.clone(),
    };
    let set = match EventSet::create(lib.clone()) {
        Ok(set) => set,
        Err(e) => {
            log::info!("source nvml: no Xid events ({e}); Xid counts come from elsewhere");
            return watch;
        }
    };
    let mut by_device = HashMap::new();
    for (index, device) in devices {
        let Ok(d) = device else { continue };
        let supported = d.supported_event_types().unwrap_or(0);
        if supported & EVENT_XID_CRITICAL_ERROR == 0 {
            continue;
        }
        let (Ok(uuid), Ok(())) = (d.uuid(), set.register(*d, EVENT_XID_CRITICAL_ERROR)) else {
            log::debug!("source nvml: GPU {index}: cannot register for Xid events");
            continue;
        };
        watch.watched.insert(uuid.clone());
        by_device.insert(d.id(), uuid);
    }
    if by_device.is_empty() {
        return watch;
    }
    let xids = xids.clone();
    let wait = options.event_wait;
    let spawned = std::thread::Builder::new()
        .name("nvml-xid".into())
        .spawn(move || count_xids(set, by_device, xids, stop, wait));
    if let Err(e) = spawned {
        log::warn!("source nvml: cannot start the Xid thread: {e}");
        watch.watched.clear();
    }
    watch
}

/// The Xid thread: waits for events until told to stop.
pub(super) fn count_xids(
    set: EventSet,
    devices: HashMap<usize, String>,
    xids: Arc<Mutex<HashMap<String, XidCounts>>>,
    stop: Arc<AtomicBool>,
    wait: Duration,
) {
    let ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX).max(1);
    while !stop.load(Ordering::Relaxed) {
        match set.wait(ms) {
            Ok(ev) if ev.event_type & EVENT_XID_CRITICAL_ERROR != 0 => {
                let (Some(uuid), Ok(code)) = (devices.get(&ev.device), u32::try_from(ev.data))
                else {
                    continue;
                };
                let mut xids = lock(&xids);
                let entry = xids.entry(uuid.clone()).or_default();
                *entry.counts.entry(code).or_insert(0) += 1;
                entry.last_seconds = Some(unix_now());
                entry.last_code = Some(code);
            }
            Ok(_) | Err(Error::TIMEOUT) => {}
            Err(e) => {
                // Do not spin on a set that keeps failing.
                log::debug!("source nvml: waiting for Xid events: {e}");
                std::thread::sleep(wait);
            }
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::CRITICAL_XIDS;

    #[test]
    fn xid_readings_list_critical_codes_and_seen_ones() {
        let mut xids = HashMap::new();
        let mut seen = XidCounts::default();
        seen.counts.insert(13, 2);
        seen.counts.insert(79, 1);
        seen.last_seconds = Some(5.0);
        seen.last_code = Some(79);
        xids.insert("GPU-a".to_string(), seen);
        let mut r = Readings::default();
        xid_readings(&xids, "GPU-a", &mut r);
        assert_eq!(
            (r.xid_last_timestamp_seconds, r.xid_last_code),
            (Some(5.0), Some(79.0))
        );
        let counts = r.xid_errors.unwrap();
        assert_eq!(counts.len(), CRITICAL_XIDS.len() + 1);
        assert!(counts.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(
            counts.contains(&(13, 2)) && counts.contains(&(79, 1)) && counts.contains(&(48, 0))
        );
        let mut r = Readings::default();
        xid_readings(&xids, "GPU-b", &mut r);
        assert_eq!(
            (r.xid_last_timestamp_seconds, r.xid_last_code),
            (None, Some(0.0))
        );
        assert!(
            r.xid_errors
                .unwrap()
                .iter()
                .all(|&(c, n)| n == 0 && CRITICAL_XIDS.contains(&c))
        );
    }
}
