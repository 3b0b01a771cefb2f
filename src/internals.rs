//! The crate's internals, for its own tests, benches and fuzz targets
//! only: built with the `internals` feature, which the crate enables for
//! itself as a dev-dependency and `fuzz/` enables. Not an API.

/// Fillers.
pub mod fill {
    pub use fill::*;
}
/// Which source serves.
pub mod pipeline {
    pub use crate::pipeline::*;
}
/// The process's own stats.
pub mod process {
    pub use crate::process::*;
}
/// The poller thread.
pub mod poller {
    pub use crate::poller::*;
}
/// The alert evaluator's thread.
pub mod judge {
    pub use crate::judge::*;
}
/// HTTP.
pub mod http {
    pub use crate::http::*;
}
