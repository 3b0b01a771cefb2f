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
//! Blocking and std-only: it runs on the collector side, in a thread whose
//! calls are bounded by a deadline.

pub mod attribution;
pub mod error;
pub mod frame;
pub mod grpc;
pub mod h2;
pub mod hpack;
pub mod huffman;
pub mod kubelet;
pub mod proto;
