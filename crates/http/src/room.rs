//! The connection caps, one per listener, the accept loop's waiting for
//! room at them (until a connection closes or becomes evictable), and
//! what happened there, logged at most once a minute.

use crate::Limits;
use crate::counts::Evicted;
use model::reason::{Reason, Tally};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// The listener a connection came in on: each has its own cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Everything (`--web.listen-address`).
    Main = 0,
    /// `/healthz` and `/readyz` only (`--web.probe-address`).
    Probes = 1,
}

/// The probe listener's cap: a kubelet probes a few times a period.
pub const PROBE_CONNECTIONS: usize = 16;

impl Lane {
    /// How many connections the lane admits: the probe listener's cap is
    /// its own, so slow or silent metrics clients never queue a probe.
    pub fn cap(self, limits: &Limits) -> usize {
        match self {
            Lane::Main => limits.max_connections,
            Lane::Probes => PROBE_CONNECTIONS,
        }
    }
}

/// A connection waiting at the cap, or evicted while its head was
/// incomplete, gets this and is closed.
pub const FULL: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
Content-Length: 26\r\nRetry-After: 1\r\nConnection: close\r\n\r\ntoo many open connections\n";

/// What an eviction can tell a connection's client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A plain 503, written at once.
    Plain,
    /// Nothing: TLS, handshake not done.
    Handshaking,
    /// A 503 its task seals into TLS before it closes.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    Tls,
}

/// What happened at the caps since the last log line.
#[derive(Default)]
pub struct CapLog {
    next: Option<Instant>,
    evicted: Tally<Evicted>,
    paused: Duration,
}

impl CapLog {
    /// A connection was evicted for `reason`.
    pub fn evicted(&mut self, reason: Evicted, limits: &Limits) {
        self.evicted.add(reason, 1);
        self.log(limits);
    }

    /// The accept loop waited `d` at the cap.
    pub fn paused(&mut self, d: Duration, limits: &Limits) {
        self.paused += d;
        self.log(limits);
    }

    /// Logs what happened at the caps, at most once a minute.
    fn log(&mut self, limits: &Limits) {
        let now = Instant::now();
        if self.next.is_some_and(|next| now < next) {
            return;
        }
        let mut evicted = String::new();
        for (reason, n) in self.evicted.each() {
            let sep = if evicted.is_empty() { "" } else { ", " };
            evicted += &format!("{sep}{n} {}", reason.label());
        }
        log::warn!(
            "http: limits reached (--web.max-connections {}, --web.max-requests {}) since \
             the last such line: evicted {evicted}; accepting paused {:.1}s (logged at most \
             once a minute)",
            limits.max_connections,
            limits.max_requests,
            self.paused.as_secs_f64(),
        );
        *self = CapLog {
            next: Some(now + Duration::from_secs(60)),
            ..CapLog::default()
        };
    }
}

/// The accept loop, waiting for room.
#[derive(Default)]
pub struct Room(Cell<Option<Waker>>);

impl Room {
    /// Something may have made room: a connection closed or became
    /// evictable.
    pub fn wake(&self) {
        if let Some(w) = self.0.take() {
            w.wake();
        }
    }

    /// Ready at the next [`Room::wake`], or spuriously: callers check
    /// again.
    pub fn changed(&self) -> Changed<'_> {
        Changed {
            room: self,
            armed: false,
        }
    }
}

pub struct Changed<'a> {
    room: &'a Room,
    armed: bool,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if self.armed {
            return Poll::Ready(());
        }
        self.room.0.set(Some(cx.waker().clone()));
        self.armed = true;
        Poll::Pending
    }
}
