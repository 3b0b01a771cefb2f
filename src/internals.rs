//! The crate's internals, for its own tests, benches and fuzz targets
//! only: built with the `internals` feature, which the crate enables for
//! itself as a dev-dependency and `fuzz/` enables. Not an API.

/// Which source serves.
pub mod pipeline {
    pub use crate::pipeline::*;
}
/// HTTP.
pub mod http {
    pub use crate::http::*;
}
