//! The Alertmanager notifier's counts (`src/notify/`), read by the
//! metrics: atomics, one set per
//! Alertmanager, made once at start and kept for the process's life.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// The reasons a post fails, as `reason` labels: the engine reader's
/// client's (any other counts as `parse`), and `tls` for an https://
/// Alertmanager's handshake or records.
pub const REASONS: [&str; 5] = ["connect", "timeout", "status", "parse", "tls"];

pub struct Stats {
    urls: Vec<Url>,
    dropped: AtomicU64,
    queue: AtomicU64,
}

struct Url {
    url: String,
    sent: AtomicU64,
    failed: [AtomicU64; REASONS.len()],
    latency_nanos: AtomicU64,
}

/// One Alertmanager's counts, as read.
pub struct UrlCounts<'a> {
    pub url: &'a str,
    pub sent: u64,
    /// By [`REASONS`].
    pub failed: [u64; REASONS.len()],
    /// Seconds the last successful post took.
    pub latency_seconds: f64,
}

impl Stats {
    /// Counts for `urls`, kept for the process's life: the metrics read
    /// them from the HTTP thread.
    pub fn leak(urls: &[String]) -> &'static Stats {
        let urls = (urls.iter())
            .map(|u| Url {
                url: u.clone(),
                sent: AtomicU64::new(0),
                failed: Default::default(),
                latency_nanos: AtomicU64::new(0),
            })
            .collect();
        Box::leak(Box::new(Stats {
            urls,
            dropped: AtomicU64::new(0),
            queue: AtomicU64::new(0),
        }))
    }

    pub fn sent(&self, i: usize, took: Duration) {
        self.urls[i].sent.fetch_add(1, Relaxed);
        (self.urls[i].latency_nanos).store(took.as_nanos() as u64, Relaxed);
    }

    pub fn failed(&self, i: usize, why: &str) {
        let k = REASONS.iter().position(|r| *r == why).unwrap_or(3);
        self.urls[i].failed[k].fetch_add(1, Relaxed);
    }

    pub fn dropped(&self, n: usize) {
        self.dropped.fetch_add(n as u64, Relaxed);
    }

    pub fn queued(&self, n: usize) {
        self.queue.store(n as u64, Relaxed);
    }

    pub fn each(&self) -> impl Iterator<Item = UrlCounts<'_>> {
        self.urls.iter().map(|u| UrlCounts {
            url: &u.url,
            sent: u.sent.load(Relaxed),
            failed: std::array::from_fn(|k| u.failed[k].load(Relaxed)),
            latency_seconds: u.latency_nanos.load(Relaxed) as f64 / 1e9,
        })
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    pub fn queue_length(&self) -> u64 {
        self.queue.load(Relaxed)
    }
}
