//! The crate's internals, for its own tests, benches and fuzz targets
//! only: built with the `internals` feature, which the crate enables for
//! itself as a dev-dependency and `fuzz/` enables. Not an API.

/// HTTP.
pub mod http {
    pub use crate::http::*;
}
