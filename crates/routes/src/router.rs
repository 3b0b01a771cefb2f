//! Routes a parsed request to its response body. The body goes straight
//! into the connection's reused buffer.

use crate::cache::{Cache, Families};
use crate::redact::without_paths;
use crate::{alerts_api, query, status};
use exposition::{Format, HttpStats, Scrape};
use http::message::{ALLOW, NOSNIFF, RETRY_AFTER};
use http::{Exchange, Handler, Method, Request, Response, Status};
use model::Bounds;
use model::Collectors;
use poller::{Latest, Published};
use std::cell::RefCell;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// What the routes answer from.
pub struct Context {
    pub latest: Arc<Latest>,
    pub telemetry_path: String,
    /// The runbook links' base on `/alerts` and the status page.
    pub runbook_base: String,
    /// When a collection counts as stalled and its readings as withheld.
    pub bounds: Bounds,
    /// The Alertmanager notifier's counts, where it runs.
    pub alertmanager: Option<&'static exposition::alertmanager_stats::Stats>,
}

/// The exporter's answers: the metrics, the probes, the status page,
/// `/alerts` and the runbooks.
pub struct Routes {
    pub ctx: Context,
    /// Pages refused over [`PAGE_BUDGET`].
    pages_refused: AtomicU64,
    /// The scrapes' shared parts, rendered once per snapshot; `None`:
    /// every scrape renders all of its body.
    cache: Option<RefCell<Cache>>,
}

impl Routes {
    /// Routes that render the families once per snapshot for every
    /// scrape of it.
    pub fn new(ctx: Context) -> Routes {
        Routes {
            ctx,
            pages_refused: AtomicU64::new(0),
            cache: Some(RefCell::default()),
        }
    }

    /// Routes that render every scrape whole: what the cache must equal.
    pub fn uncached(ctx: Context) -> Routes {
        Routes {
            cache: None,
            ..Routes::new(ctx)
        }
    }
}

impl Handler for Routes {
    fn respond(&self, req: &Request, ex: &mut Exchange, body: &mut Vec<u8>) -> Response {
        if ex.probes_only && !is_probe(req.path) {
            body.extend_from_slice(
                b"404 page not found: this listener serves /healthz and /readyz\n",
            );
            return Response::text(Status::NotFound);
        }
        if is_page(req.path) && ex.held() >= PAGE_BUDGET {
            self.pages_refused.fetch_add(1, Relaxed);
            return over_budget(body);
        }
        // One read of the shared cell per request: its lock is taken once.
        let published = self.ctx.latest.get();
        ex.serving(published.snapshot.finished);
        route(req, self, &published, ex, body)
    }

    fn is_probe(&self, path: &str) -> bool {
        is_probe(path)
    }
}

/// The most bytes the responses in flight may hold when a status page or
/// `/alerts` is asked for: past it, the request is answered 503 with
/// `Retry-After` and nothing is rendered. Pages are whole bodies, each
/// held until its client reads it; without a budget shared by all slots,
/// 40 clients that ask and never read hold 40 pages.
pub const PAGE_BUDGET: usize = 2 * 1024 * 1024;

/// The pages [`PAGE_BUDGET`] bounds: rendered whole for each request.
fn is_page(path: &str) -> bool {
    matches!(path, "/" | "/alerts")
}

/// The answer to a page asked for over [`PAGE_BUDGET`].
fn over_budget(body: &mut Vec<u8>) -> Response {
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
/// `body` holds and says how to head it.
fn route(
    req: &Request,
    routes: &Routes,
    published: &Published,
    ex: &mut Exchange,
    body: &mut Vec<u8>,
) -> Response {
    let ctx = &routes.ctx;
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
        p if let Some(text) = crate::runbooks::find(p) => Route::Runbook(text),
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
        Route::Metrics => metrics(req, routes, published, ex, body),
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
/// come from the cache, rendered once per snapshot and format; a filtered
/// plain scrape renders them, so that it never displaces Prometheus's.
/// A gzipped one comes gzipped from the cache; without the cache the
/// server gzips it whole.
fn metrics(
    req: &Request,
    routes: &Routes,
    published: &Published,
    ex: &mut Exchange,
    body: &mut Vec<u8>,
) -> Response {
    let ctx = &routes.ctx;
    let only = match query::collectors(req.query) {
        Ok(only) => only,
        Err(e) => {
            e.write(body);
            return Response::text(Status::BadRequest);
        }
    };
    let format = Format::for_scrape(req.accept, published.snapshot.collectors.and(only));
    let http = routes.http_stats(ex);
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
    let gzip = ex.gzip.as_deref_mut();
    let cache = routes.cache.as_ref();
    let Some(cache) = cache.filter(|_| gzip.is_some() || only == Collectors::ALL) else {
        scrape.render(body);
        return Response::ok(format.content_type());
    };
    let mut cache = cache.borrow_mut();
    let key = Families::new(s, scrape.fresh, format, only);
    let families = |out: &mut Vec<u8>| scrape.render_shared(out);
    let own = |out: &mut Vec<u8>| scrape.render_live(out);
    let (shared, gzipped) = match gzip {
        None => (cache.plain(key, body, families, own), false),
        Some(z) => (cache.scrape(z, key, body, families, own), true),
    };
    Response {
        gzipped,
        shared: Some(shared),
        ..Response::ok(format.content_type())
    }
}

impl Routes {
    /// The HTTP server's counts and the routes' own, as the metrics show them.
    fn http_stats(&self, ex: &Exchange) -> HttpStats {
        HttpStats {
            server: ex.counts().get(),
            pages_refused: self.pages_refused.load(Relaxed),
            alertmanager: self.ctx.alertmanager,
        }
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
