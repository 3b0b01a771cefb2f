//! What the web config turns on, as the HTTP thread sees it: TLS for new
//! connections, basic auth and the rate limit for every request, and the
//! headers every response carries. The watcher thread loads a changed
//! file and [`Shared::publish`]es it; the HTTP thread picks it up at its
//! next connection or request, without a lock while nothing changed.
//! Connections open before a change keep their TLS session; their next
//! request meets the new users.
//!
//! Built without the `tls` feature there is nothing to turn on: every
//! request is allowed and connections are plain.

use crate::message::Access;
use std::sync::Arc;

#[cfg(feature = "tls")]
pub use webconfig::Loaded;

/// Nothing to turn on: a build without the `tls` feature.
#[cfg(not(feature = "tls"))]
pub struct Loaded;

/// A request's way through the guard.
pub enum Gate {
    Decided(Access),
    /// bcrypt runs on its thread: await [`Gate::finish`].
    #[cfg(feature = "tls")]
    Wait(Arc<Loaded>, webconfig::auth::Pending),
}

impl Gate {
    /// The verdict, when no bcrypt is needed for it.
    pub fn decided(&self) -> Option<Access> {
        match self {
            Gate::Decided(a) => Some(*a),
            #[cfg(feature = "tls")]
            Gate::Wait(..) => None,
        }
    }

    /// The verdict once bcrypt has run.
    pub async fn finish(self) -> Access {
        match self {
            Gate::Decided(a) => a,
            #[cfg(feature = "tls")]
            Gate::Wait(loaded, pending) => match &loaded.auth {
                Some(auth) => access(auth.finish(pending).await),
                None => Access::Allowed,
            },
        }
    }
}

#[cfg(feature = "tls")]
fn access(v: webconfig::auth::Verdict) -> Access {
    use webconfig::auth::Verdict;
    match v {
        Verdict::Allowed => Access::Allowed,
        Verdict::Denied => Access::Denied,
        Verdict::Busy => Access::Busy,
    }
}

/// The configuration the watcher publishes and the HTTP thread reads.
#[derive(Default)]
pub struct Shared {
    #[cfg(feature = "tls")]
    generation: std::sync::atomic::AtomicU64,
    #[cfg(feature = "tls")]
    current: std::sync::Mutex<Option<Arc<Loaded>>>,
}

impl Shared {
    /// Serves `loaded` from the next connection or request on.
    #[cfg(feature = "tls")]
    pub fn publish(&self, loaded: Loaded) {
        use std::sync::atomic::Ordering::Release;
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(loaded));
        self.generation.fetch_add(1, Release);
    }
}

/// The HTTP thread's side.
pub struct Guard {
    shared: Arc<Shared>,
    /// `--web.open-probes`: `/healthz` and `/readyz` need no auth.
    open_probes: bool,
    #[cfg(feature = "tls")]
    seen: std::cell::Cell<u64>,
    #[cfg(feature = "tls")]
    current: std::cell::RefCell<Option<Arc<Loaded>>>,
}

impl Guard {
    pub fn new(shared: Arc<Shared>, open_probes: bool) -> Guard {
        Guard {
            shared,
            open_probes,
            #[cfg(feature = "tls")]
            seen: std::cell::Cell::new(u64::MAX),
            #[cfg(feature = "tls")]
            current: Default::default(),
        }
    }

    /// The configuration now: a lock and a copy of the `Arc` only when the
    /// watcher published a new one.
    pub fn current(&self) -> Option<Arc<Loaded>> {
        #[cfg(feature = "tls")]
        {
            use std::sync::atomic::Ordering::Acquire;
            let generation = self.shared.generation.load(Acquire);
            if generation != self.seen.get() {
                let now = self
                    .shared
                    .current
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                *self.current.borrow_mut() = now.clone();
                self.seen.set(generation);
            }
            self.current.borrow().clone()
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = &self.shared;
            None
        }
    }

    /// Whether a request with `authorization` may be answered: the rate
    /// limit first, as exporter-toolkit does, then basic auth, from the
    /// cache where it can (no allocation) or with bcrypt on its thread.
    /// A request on the probe listener, or for a `probe` path under
    /// `--web.open-probes`, passes both.
    #[cfg_attr(not(feature = "tls"), allow(unused_variables))]
    pub fn check(
        &self,
        loaded: Option<&Arc<Loaded>>,
        probe: bool,
        authorization: Option<&[u8]>,
        peer: std::net::IpAddr,
        probe_listener: bool,
    ) -> Gate {
        #[cfg(feature = "tls")]
        if let Some(l) = loaded {
            // The probe listener answers nothing else (404s need no auth).
            let open = self.open_probes && probe;
            if probe_listener || open {
                return Gate::Decided(Access::Allowed);
            }
            if l.rate.as_ref().is_some_and(|r| !r.allow()) {
                return Gate::Decided(Access::Busy);
            }
            if let Some(auth) = &l.auth {
                use webconfig::auth::Step;
                return match auth.step(authorization, peer) {
                    Step::Done(v) => Gate::Decided(access(v)),
                    Step::Wait(p) => Gate::Wait(l.clone(), p),
                };
            }
        }
        let _ = self.open_probes;
        Gate::Decided(Access::Allowed)
    }
}

/// A TLS server configuration; none without the `tls` feature.
#[cfg(feature = "tls")]
pub type TlsConfig = Arc<rustls::ServerConfig>;
#[cfg(not(feature = "tls"))]
pub type TlsConfig = std::convert::Infallible;

/// What new connections handshake with: `None` is plain HTTP.
pub fn tls(loaded: Option<&Arc<Loaded>>) -> Option<TlsConfig> {
    #[cfg(feature = "tls")]
    return loaded.and_then(|l| l.tls.clone());
    #[cfg(not(feature = "tls"))]
    {
        let _ = loaded;
        None
    }
}

/// Header lines `loaded` adds to every response.
pub fn headers(loaded: Option<&Arc<Loaded>>) -> &str {
    #[cfg(feature = "tls")]
    if let Some(l) = loaded {
        return &l.headers;
    }
    let _ = loaded;
    ""
}
