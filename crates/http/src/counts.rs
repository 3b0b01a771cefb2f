//! The server's own counts, which the handler shows in the metrics.

use model::reason::{AtomicTally, ServerStats};
pub use model::reason::{Evicted, HandshakeError};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Kept by the server as it goes. Atomics, though one thread keeps them,
/// so that one with nothing counted can be a `static`.
#[derive(Default)]
pub struct Counts {
    open: AtomicU64,
    evicted: AtomicTally<Evicted>,
    paused_nanos: AtomicU64,
    handshake_errors: AtomicTally<HandshakeError>,
    gzipped: AtomicU64,
}

impl Counts {
    pub const fn new() -> Counts {
        Counts {
            open: AtomicU64::new(0),
            evicted: AtomicTally::new(),
            paused_nanos: AtomicU64::new(0),
            handshake_errors: AtomicTally::new(),
            gzipped: AtomicU64::new(0),
        }
    }

    pub fn get(&self) -> ServerStats {
        ServerStats {
            open: self.open.load(Relaxed),
            evicted: self.evicted.get(),
            accept_paused_seconds: self.paused_nanos.load(Relaxed) as f64 / 1e9,
            tls_handshake_errors: self.handshake_errors.get(),
            gzipped: self.gzipped.load(Relaxed),
        }
    }

    pub(crate) fn set_open(&self, n: usize) {
        self.open.store(n as u64, Relaxed);
    }

    pub(crate) fn evicted(&self, reason: Evicted) {
        self.evicted.add(reason);
    }

    #[cfg(feature = "tls")]
    pub(crate) fn handshake_error(&self, reason: HandshakeError) {
        self.handshake_errors.add(reason);
    }

    /// One more response sent gzipped.
    pub(crate) fn gzipped(&self) {
        self.gzipped.fetch_add(1, Relaxed);
    }

    pub(crate) fn paused(&self, d: Duration) {
        self.paused_nanos.fetch_add(d.as_nanos() as u64, Relaxed);
    }
}
