//! What the exporter answers over HTTP, as the server's [`http::Handler`]:
//! the metrics (the snapshot's families rendered once and shared by
//! every scrape of it), the probes, the status page, `/alerts` and the
//! runbooks.

mod alerts_api;
pub mod cache;
pub mod query;
mod redact;
mod router;
mod runbooks;
pub mod status;

pub use router::{Context, Routes};
