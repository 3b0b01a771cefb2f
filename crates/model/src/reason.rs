//! The fixed `reason` label values of the exporter's own counters: each an
//! enum that spells its own label, and [`Tally`], a count per value.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A closed set of label values, in output order.
pub trait Reason: Copy + 'static {
    const ALL: &'static [Self];
    fn label(self) -> &'static str;
    /// Where its count lives in a [`Tally`].
    fn index(self) -> usize;
}

macro_rules! reasons {
    ($(#[$doc:meta])* $name:ident { $($value:ident => $label:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name { $($value),+ }

        impl Reason for $name {
            const ALL: &'static [$name] = &[$($name::$value),+];
            fn label(self) -> &'static str {
                match self { $($name::$value => $label),+ }
            }
            fn index(self) -> usize {
                self as usize
            }
        }
    };
}

reasons! {
    /// Why a connection was closed to make room
    /// (`gpu_exporter_http_connections_evicted_total`).
    Evicted {
        Idle => "idle",
        IncompleteHead => "incomplete_head",
        StalledWrite => "stalled_write",
        Handshake => "tls_handshake",
    }
}

reasons! {
    /// Why a TLS handshake did not complete
    /// (`gpu_exporter_tls_handshake_errors_total`).
    HandshakeError {
        Timeout => "timeout",
        Failed => "failed",
        Closed => "closed",
    }
}

/// The HTTP server's own counts, read at once: the server keeps them, a
/// scrape renders them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ServerStats {
    /// Connections open now.
    pub open: u64,
    /// Connections closed to make room, by why.
    pub evicted: Tally<Evicted>,
    /// Seconds the accept loop waited at the connection cap, in all.
    pub accept_paused_seconds: f64,
    /// TLS handshakes that failed, by why.
    pub tls_handshake_errors: Tally<HandshakeError>,
    /// Responses sent gzipped.
    pub gzipped: u64,
}

/// The most values any reason has.
const MAX: usize = 4;

/// A count per value of `R`.
#[derive(Debug)]
pub struct Tally<R> {
    counts: [u64; MAX],
    reason: std::marker::PhantomData<R>,
}

impl<R> Clone for Tally<R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R> Copy for Tally<R> {}
impl<R> PartialEq for Tally<R> {
    fn eq(&self, other: &Self) -> bool {
        self.counts == other.counts
    }
}
impl<R> Default for Tally<R> {
    fn default() -> Self {
        Tally {
            counts: [0; MAX],
            reason: std::marker::PhantomData,
        }
    }
}

impl<R: Reason> Tally<R> {
    pub fn add(&mut self, r: R, n: u64) {
        self.counts[r.index()] += n;
    }

    pub fn get(&self, r: R) -> u64 {
        self.counts[r.index()]
    }

    /// Each value with its count, in output order.
    pub fn each(&self) -> impl Iterator<Item = (R, u64)> + '_ {
        R::ALL.iter().map(|&r| (r, self.get(r)))
    }
}

/// [`Tally`] for counts shared across threads.
#[derive(Debug)]
pub struct AtomicTally<R> {
    counts: [AtomicU64; MAX],
    reason: std::marker::PhantomData<R>,
}

impl<R> Default for AtomicTally<R> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R> AtomicTally<R> {
    pub const fn new() -> Self {
        AtomicTally {
            counts: [const { AtomicU64::new(0) }; MAX],
            reason: std::marker::PhantomData,
        }
    }
}

impl<R: Reason> AtomicTally<R> {
    pub fn add(&self, r: R) {
        self.counts[r.index()].fetch_add(1, Relaxed);
    }

    pub fn get(&self) -> Tally<R> {
        let mut t = Tally::default();
        for &r in R::ALL {
            t.add(r, self.counts[r.index()].load(Relaxed));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_fits_a_tally_and_counts_apart() {
        assert!(Evicted::ALL.len() <= MAX && HandshakeError::ALL.len() <= MAX);
        let shared = AtomicTally::<Evicted>::default();
        shared.add(Evicted::StalledWrite);
        shared.add(Evicted::StalledWrite);
        shared.add(Evicted::Idle);
        let labels: Vec<_> = shared.get().each().map(|(r, n)| (r.label(), n)).collect();
        assert_eq!(
            labels,
            [
                ("idle", 1),
                ("incomplete_head", 0),
                ("stalled_write", 2),
                ("tls_handshake", 0)
            ]
        );
        let t = Tally::<HandshakeError>::default();
        assert_eq!(
            t.each().map(|(r, _)| r.label()).collect::<Vec<_>>(),
            ["timeout", "failed", "closed"]
        );
    }
}
