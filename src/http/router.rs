//! Routes a parsed request to its response body. The body goes straight
//! into the connection's reused buffer.

use super::{alerts, query, status};
use crate::collector::Latest;
use crate::exposition::{self, Format};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What every connection shares.
pub struct Context {
    pub latest: Arc<Latest>,
    pub telemetry_path: String,
    pub runbook_base: String,
    /// A snapshot older than this is stale for `/readyz`.
    pub max_age: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Other,
}

pub struct Request<'a> {
    pub method: Method,
    /// The path without its query string.
    pub path: &'a str,
    /// What follows the `?`, if anything; only the metrics path reads it.
    pub query: &'a str,
    pub accept: Option<&'a [u8]>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    UriTooLong,
    HeadersTooLarge,
    Unavailable,
}

impl Status {
    pub fn line(self) -> &'static str {
        match self {
            Status::Ok => "200 OK",
            Status::BadRequest => "400 Bad Request",
            Status::NotFound => "404 Not Found",
            Status::MethodNotAllowed => "405 Method Not Allowed",
            Status::UriTooLong => "414 URI Too Long",
            Status::HeadersTooLarge => "431 Request Header Fields Too Large",
            Status::Unavailable => "503 Service Unavailable",
        }
    }
}

pub struct Response {
    pub status: Status,
    pub content_type: &'static str,
    /// Send `Allow: GET, HEAD` (with 405).
    pub allow: bool,
}

const TEXT: &str = "text/plain; charset=utf-8";

impl Response {
    pub fn text(status: Status) -> Response {
        Response {
            status,
            content_type: TEXT,
            allow: false,
        }
    }
}

/// Writes the body for `req` after what `body` holds and says how to head it.
pub fn route(req: &Request, ctx: &Context, body: &mut Vec<u8>) -> Response {
    enum Route {
        Metrics,
        Landing,
        Healthz,
        Readyz,
        Alerts,
        Runbook(&'static str),
    }
    let route = match req.path {
        p if p == ctx.telemetry_path => Route::Metrics,
        "/" => Route::Landing,
        "/healthz" => Route::Healthz,
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
            allow: true,
            ..Response::text(Status::MethodNotAllowed)
        };
    }
    match route {
        Route::Metrics => {
            let only = match query::collectors(req.query) {
                Ok(only) => only,
                Err(e) => {
                    e.write(body);
                    return Response::text(Status::BadRequest);
                }
            };
            let format = Format::negotiate(req.accept);
            let published = ctx.latest.get();
            exposition::render(&published.snapshot, format, only, Instant::now(), body);
            Response {
                status: Status::Ok,
                content_type: format.content_type(),
                allow: false,
            }
        }
        Route::Alerts => {
            let published = ctx.latest.get();
            alerts::write_json(
                &published.alerts,
                &published.snapshot.gpus,
                &ctx.runbook_base,
                body,
            );
            Response {
                status: Status::Ok,
                content_type: "application/json",
                allow: false,
            }
        }
        Route::Runbook(text) => {
            body.extend_from_slice(text.as_bytes());
            Response {
                status: Status::Ok,
                content_type: "text/markdown; charset=utf-8",
                allow: false,
            }
        }
        Route::Healthz => {
            body.extend_from_slice(b"ok\n");
            Response::text(Status::Ok)
        }
        Route::Readyz => {
            let published = ctx.latest.get();
            let s = &published.snapshot;
            let age = Instant::now().saturating_duration_since(s.published);
            let status = match &s.error {
                Some(_) if s.is_starting() => {
                    let _ = writeln!(body, "not ready: {}", crate::snapshot::STARTING);
                    Status::Unavailable
                }
                Some(e) => {
                    let _ = writeln!(body, "not ready: last collection failed: {e}");
                    Status::Unavailable
                }
                None if age > ctx.max_age => {
                    let _ = writeln!(
                        body,
                        "not ready: readings are {:.1}s old (limit {:.1}s)",
                        age.as_secs_f64(),
                        ctx.max_age.as_secs_f64()
                    );
                    Status::Unavailable
                }
                None => {
                    body.extend_from_slice(b"ok\n");
                    Status::Ok
                }
            };
            Response::text(status)
        }
        Route::Landing => {
            let published = ctx.latest.get();
            status::render(
                &published,
                &ctx.telemetry_path,
                &ctx.runbook_base,
                Instant::now(),
                body,
            );
            Response {
                status: Status::Ok,
                content_type: "text/html; charset=utf-8",
                allow: false,
            }
        }
    }
}
