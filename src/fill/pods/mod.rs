//! Kubernetes pods from the kubelet's pod-resources API (v1 `List`), with
//! no HTTP/2, gRPC or protobuf crate: a minimal HTTP/2 client with HPACK,
//! gRPC's message framing, a streaming decoder for the response that keeps
//! only pods holding NVIDIA devices, and the pure matching of their device
//! ids to GPUs.
//!
//! ```text
//! kubelet.sock -> h2 (frames, hpack, flow control) -> grpc (5-byte framing)
//!              -> proto::ListDecoder (one pod buffered) -> attribution rows
//! ```
//!
//! Blocking and std-only: a refresher thread of its own lists the pods
//! every `--kubernetes.refresh-interval`, each call bounded by a deadline,
//! and the filler lays the last good listing over each collection.

pub mod attribution;
pub mod error;
pub mod frame;
pub mod grpc;
pub mod h2;
pub mod hpack;
pub mod huffman;
pub mod kubelet;
pub mod proto;
mod refresh;

pub use kubelet::DEFAULT_SOCKET;
pub use refresh::{KubeletPods, Options};
