//! HTTP/1.1 over httparse, no framework: the accept loop, one task per
//! connection (keep-alive, pipelining), TLS on rustls' unbuffered API,
//! gzip, and the caps and deadlines that keep the server up under floods
//! and clients that never read. What a request is answered with is the
//! [`Handler`]'s: the server asks it for a body and heads, sends and
//! bounds what it gets.

pub mod accept;
pub mod conn;
mod counts;
mod deadline;
pub mod guard;
pub mod gzip;
mod handler;
#[cfg(feature = "tls")]
mod handshake;
mod head;
pub mod message;
mod pool;
pub mod reply;
mod request;
mod room;
mod server;
#[cfg(feature = "tls")]
mod tls;
mod unread;

pub use counts::Counts;
pub use handler::{Exchange, Handler};
pub use message::{Method, Request, Response, Status};
pub use server::Server;

use std::time::Duration;

/// The server's bounds, from the `--web.*` flags.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Requests being answered at once; more get 503 at once.
    pub max_requests: usize,
    /// Open connections; at the cap the oldest idle one is closed to admit
    /// a new one, and without an idle one the new one gets 503.
    pub max_connections: usize,
    /// From a connection's first byte (or its opening) to a whole head.
    pub header_timeout: Duration,
    /// Between requests on a keep-alive connection.
    pub idle_timeout: Duration,
    /// For one response to be written.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_requests: 40,
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(90),
            write_timeout: Duration::from_secs(10),
        }
    }
}
