//! Inference engines on the node (vLLM, SGLang, TensorRT-LLM, NIM,
//! Triton): their own `/metrics`, read for the serving SLO. The reader's
//! thread (`reader.rs`) reads each endpoint with the client (`client.rs`),
//! keeps the families its engine's profile names (`profile.rs`) with the
//! bounded text reader (`text.rs`), and publishes each model's TTFT. The
//! client also posts the Alertmanager notifier's alerts, over TLS
//! (`https.rs`) to an https:// one, over the transport of `transport.rs`.

pub mod client;
#[cfg(feature = "https")]
mod https;
pub mod options;
pub mod profile;
pub mod reader;
pub mod text;
pub mod transport;

pub use options::Options;
pub use reader::Reader;
