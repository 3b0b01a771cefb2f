//! The HTTP messages the transport and the routes share: a parsed
//! request, a response's status and head, and whether a request may have
//! its answer. The connection code takes them from here, not from the
//! routes.

use crate::reply::Shared;
use std::sync::Arc;

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
    /// `Accept-Encoding`: gzip or not.
    pub accept_encoding: Option<&'a [u8]>,
    /// `Authorization`, for basic auth.
    pub authorization: Option<&'a [u8]>,
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
    Unauthorized,
    TooManyRequests,
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
            Status::Unauthorized => "401 Unauthorized",
            Status::TooManyRequests => "429 Too Many Requests",
        }
    }
}

pub struct Response {
    pub status: Status,
    pub content_type: &'static str,
    /// Header lines of its own: `Allow` with 405, `WWW-Authenticate` with
    /// 401, `Retry-After` with 429.
    pub headers: &'static str,
    /// Whether its body may go gzipped: the metrics, the status page,
    /// `/alerts` and the runbooks, as the client's `Accept-Encoding` says.
    pub compressible: bool,
    /// Whether its body is gzipped already (a scrape, from the cached
    /// families).
    pub gzipped: bool,
    /// The start of its body, shared by every scrape of the snapshot: it
    /// goes out before what the body buffer holds.
    pub shared: Option<Arc<Shared>>,
}

const TEXT: &str = "text/plain; charset=utf-8";
pub const ALLOW: &str = "Allow: GET, HEAD\r\n";
pub const WWW_AUTHENTICATE: &str =
    "WWW-Authenticate: Basic realm=\"gpu-exporter\", charset=\"UTF-8\"\r\n";
pub const RETRY_AFTER: &str = "Retry-After: 1\r\n";
pub const NOSNIFF: &str = "X-Content-Type-Options: nosniff\r\n";

impl Response {
    pub fn text(status: Status) -> Response {
        Response {
            status,
            content_type: TEXT,
            headers: "",
            compressible: false,
            gzipped: false,
            shared: None,
        }
    }

    /// A 200 with `content_type` whose body may go gzipped.
    pub fn ok(content_type: &'static str) -> Response {
        Response {
            content_type,
            compressible: true,
            ..Response::text(Status::Ok)
        }
    }
}

/// Whether a request may have its answer, when the web config asks for
/// basic auth or a rate limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub enum Access {
    #[default]
    Allowed,
    /// 401 with `WWW-Authenticate`: no or wrong credentials.
    Denied,
    /// 429 with `Retry-After`: over `rate_limit`, or bcrypt is saturated
    /// (a flood of wrong passwords), never a stalled scrape.
    Busy,
}

/// The answer to a request refused by [`Access`].
pub fn refuse(access: Access, body: &mut Vec<u8>) -> Response {
    match access {
        Access::Denied => {
            body.extend_from_slice(b"401 unauthorized\n");
            Response {
                headers: WWW_AUTHENTICATE,
                ..Response::text(Status::Unauthorized)
            }
        }
        _ => {
            body.extend_from_slice(b"429 too many requests: try again in a second\n");
            Response {
                headers: RETRY_AFTER,
                ..Response::text(Status::TooManyRequests)
            }
        }
    }
}
