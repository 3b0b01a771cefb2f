//! Routes a parsed request to its response body. The body goes straight
//! into the connection's reused buffer.

use super::cache::{Cache, Families};
use super::message::{ALLOW, Method, NOSNIFF, RETRY_AFTER, Request, Response, Status};
use super::redact::without_paths;
use super::{alerts_api, query, status};
use exposition::reason::AtomicTally;
use exposition::{Evicted, Format, HandshakeError, HttpStats, Scrape};
use model::Bounds;
use model::Collectors;
use poller::{Latest, Published};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// What every connection shares.
pub struct Context {
    pub latest: Arc<Latest>,
    pub telemetry_path: String,
    /// The runbook links' base on `/alerts` and the status page.
    pub runbook_base: String,
    /// When a collection counts as stalled and its readings as withheld.
    pub bounds: Bounds,
    /// The server's own counts, kept by `server.rs`, shown in the metrics.
    pub http: Counts,
}

/// The HTTP server's own counts. Atomics, though one thread keeps them,
/// so that a `Context` can be shared (the fuzz targets keep one in a
/// static).
#[derive(Default)]
pub struct Counts {
    open: AtomicU64,
    evicted: AtomicTally<Evicted>,
    paused_nanos: AtomicU64,
    handshake_errors: AtomicTally<HandshakeError>,
    gzipped: AtomicU64,
    pages_refused: AtomicU64,
    /// The Alertmanager notifier's, where it runs.
    pub alertmanager: Option<&'static exposition::alertmanager_stats::Stats>,
}

impl Counts {
    pub fn get(&self) -> HttpStats {
        HttpStats {
            open: self.open.load(Relaxed),
            evicted: self.evicted.get(),
            accept_paused_seconds: self.paused_nanos.load(Relaxed) as f64 / 1e9,
            tls_handshake_errors: self.handshake_errors.get(),
            gzipped: self.gzipped.load(Relaxed),
            pages_refused: self.pages_refused.load(Relaxed),
            alertmanager: self.alertmanager,
        }
    }

    pub fn set_open(&self, n: usize) {
        self.open.store(n as u64, Relaxed);
    }

    pub fn evicted(&self, reason: Evicted) {
        self.evicted.add(reason);
    }

    #[cfg(feature = "tls")]
    pub fn handshake_error(&self, reason: HandshakeError) {
        self.handshake_errors.add(reason);
    }

    /// One more response sent gzipped.
    pub fn gzipped(&self) {
        self.gzipped.fetch_add(1, Relaxed);
    }

    /// One more page refused over [`PAGE_BUDGET`].
    pub fn page_refused(&self) {
        self.pages_refused.fetch_add(1, Relaxed);
    }

    pub fn paused(&self, d: Duration) {
        self.paused_nanos.fetch_add(d.as_nanos() as u64, Relaxed);
    }
}

/// The most bytes the responses in flight may hold when a status page or
/// `/alerts` is asked for: past it, the request is answered 503 with
/// `Retry-After` and nothing is rendered. Pages are whole bodies, each
/// held until its client reads it; without a budget shared by all slots,
/// 40 clients that ask and never read hold 40 pages.
pub const PAGE_BUDGET: usize = 2 * 1024 * 1024;

/// The pages [`PAGE_BUDGET`] bounds: rendered whole for each request.
pub fn is_page(path: &str) -> bool {
    matches!(path, "/" | "/alerts")
}

/// The answer to a page asked for over [`PAGE_BUDGET`].
pub fn over_budget(body: &mut Vec<u8>) -> Response {
    body.extend_from_slice(b"503 pages over their memory budget: try again in a second\n");
    Response {
        headers: RETRY_AFTER,
        ..Response::text(Status::Unavailable)
    }
}

/// `/healthz`, `/readyz` and dcgm-exporter's `/health`, which
/// `--web.open-probes` leaves without auth and the probe listener serves.
pub fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/health")
}

/// Writes the body for `req`, answered from `published`, after what
/// `body` holds and says how to head it. With `cache`, a scrape's shared
/// part comes from the render (or deflate) kept in it; with `gzip` too
/// (the client asked for it), a scrape comes gzipped.
pub fn route(
    req: &Request,
    ctx: &Context,
    published: &Published,
    cache: Option<&mut Cache>,
    gzip: bool,
    body: &mut Vec<u8>,
) -> Response {
    enum Route {
        Metrics,
        Landing,
        Healthz,
        Health,
        Readyz,
        Alerts,
        Runbook(&'static str),
    }
    let route = match req.path {
        p if p == ctx.telemetry_path => Route::Metrics,
        "/" => Route::Landing,
        "/healthz" => Route::Healthz,
        "/health" => Route::Health,
        "/readyz" => Route::Readyz,
        "/alerts" => Route::Alerts,
        p if let Some(text) = super::runbooks::find(p) => Route::Runbook(text),
        _ => {
            body.extend_from_slice(b"404 page not found\n");
            return Response::text(Status::NotFound);
        }
    };
    if req.method == Method::Other {
        body.extend_from_slice(b"method not allowed: use GET or HEAD\n");
        return Response {
            headers: ALLOW,
            ..Response::text(Status::MethodNotAllowed)
        };
    }
    match route {
        Route::Metrics => metrics(req, ctx, published, cache, gzip, body),
        Route::Alerts => {
            alerts_api::write_json(published, &ctx.runbook_base, body);
            Response::ok("application/json")
        }
        // Plain text, which a browser shows, where Markdown's type makes
        // it a download.
        Route::Runbook(text) => {
            body.extend_from_slice(text.as_bytes());
            Response {
                headers: NOSNIFF,
                ..Response::ok("text/plain; charset=utf-8")
            }
        }
        Route::Healthz => {
            body.extend_from_slice(b"ok\n");
            Response::text(Status::Ok)
        }
        // dcgm-exporter's liveness answer, for its chart's and the GPU
        // Operator's probes: 200 and "OK", no newline.
        Route::Health => {
            body.extend_from_slice(b"OK");
            Response::text(Status::Ok)
        }
        Route::Readyz => readyz(ctx, published, body),
        Route::Landing => {
            status::render(
                published,
                &ctx.telemetry_path,
                &ctx.runbook_base,
                ctx.bounds,
                Instant::now(),
                body,
            );
            Response {
                headers: status::HEADERS,
                ..Response::ok("text/html; charset=utf-8")
            }
        }
    }
}

/// The metrics path: the snapshot rendered, filtered by `collect[]` and
/// `exclude[]`, gzipped when asked for. The families of a whole scrape
/// come from `cache`, rendered once per snapshot and format; a filtered
/// plain scrape renders them, so that it never displaces Prometheus's.
fn metrics(
    req: &Request,
    ctx: &Context,
    published: &Published,
    cache: Option<&mut Cache>,
    gzip: bool,
    body: &mut Vec<u8>,
) -> Response {
    let only = match query::collectors(req.query) {
        Ok(only) => only,
        Err(e) => {
            e.write(body);
            return Response::text(Status::BadRequest);
        }
    };
    let format = Format::for_scrape(req.accept, published.snapshot.collectors.and(only));
    let http = ctx.http.get();
    let now = Instant::now();
    let s = &published.snapshot;
    let scrape = Scrape {
        snapshot: s,
        fresh: s.freshness(now, ctx.bounds),
        http: Some(&http),
        format,
        only,
        now,
    };
    let cache = cache.filter(|_| gzip || only == Collectors::ALL);
    let Some(cache) = cache else {
        scrape.render(body);
        return Response::ok(format.content_type());
    };
    let key = Families::new(s, scrape.fresh, format, only);
    let families = |out: &mut Vec<u8>| scrape.render_shared(out);
    let own = |out: &mut Vec<u8>| scrape.render_live(out);
    let (shared, gzipped) = match gzip {
        false => (cache.plain(key, body, families, own), false),
        true => (cache.scrape(key, body, families, own), true),
    };
    Response {
        gzipped,
        shared: Some(shared),
        ..Response::ok(format.content_type())
    }
}

/// `/readyz`: ready once the first collection is in, the alert history
/// replayed, and collections neither failing nor stalled.
fn readyz(ctx: &Context, published: &Published, body: &mut Vec<u8>) -> Response {
    let s = &published.snapshot;
    let now = Instant::now();
    let status = match (&s.error, published.replay) {
        (Some(_), _) if s.is_starting() => {
            match s.freshness(now, ctx.bounds).stalled {
                true => {
                    let _ = writeln!(
                        body,
                        "not ready: first collection stalled, {:.1}s since start (limit {:.1}s)",
                        now.saturating_duration_since(s.finished).as_secs_f64(),
                        ctx.bounds.stall_after.as_secs_f64()
                    );
                }
                false => {
                    let _ = writeln!(body, "not ready: {}", model::STARTING);
                }
            }
            Status::Unavailable
        }
        (_, Some(p)) if p.first => {
            let _ = writeln!(
                body,
                "not ready: alert history replaying ({} of {} steps)",
                p.done, p.total
            );
            Status::Unavailable
        }
        (Some(e), _) => {
            body.extend_from_slice(b"not ready: last collection failed: ");
            without_paths(e, |s| body.extend_from_slice(s.as_bytes()));
            body.push(b'\n');
            Status::Unavailable
        }
        (None, _) if s.freshness(now, ctx.bounds).stalled => {
            let _ = writeln!(
                body,
                "not ready: collection stalled, readings are {:.1}s old (limit {:.1}s)",
                now.saturating_duration_since(s.published).as_secs_f64(),
                ctx.bounds.stall_after.as_secs_f64()
            );
            Status::Unavailable
        }
        (None, _) => {
            body.extend_from_slice(b"ok\n");
            Status::Ok
        }
    };
    Response::text(status)
}
