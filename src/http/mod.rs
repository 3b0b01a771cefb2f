//! HTTP/1.1 over httparse: the accept loop, one task per connection, and
//! the routes. No framework.

pub mod accept;
pub mod alerts_api;
pub mod cache;
pub mod conn;
pub mod deadline;
pub mod guard;
pub mod gzip;
#[cfg(feature = "tls")]
pub mod handshake;
pub mod head;
pub mod message;
pub mod pool;
pub mod query;
pub mod redact;
pub mod reply;
pub mod request;
pub mod room;
pub mod router;
pub mod runbooks;
pub mod server;
pub mod status;
#[cfg(feature = "tls")]
pub mod tls;
pub mod unread;

pub use router::Context;
pub use server::Server;
