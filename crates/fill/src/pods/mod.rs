//! Kubernetes pods from the kubelet's pod-resources API (v1 `List`): the
//! call over [`wire`]'s HTTP/2 and gRPC, a streaming decoder for
//! the response that keeps only pods holding NVIDIA devices, and the pure
//! matching of their device ids to GPUs.
//!
//! ```text
//! kubelet.sock -> wire::h2 (frames, hpack, flow control) -> wire::grpc
//!              -> proto::ListDecoder (one pod buffered) -> attribution rows
//! ```
//!
//! Blocking and std-only: a refresher thread of its own lists the pods
//! every `--kubernetes.refresh-interval`, each call bounded by a deadline,
//! and the filler lays the last good listing over each collection.

pub mod attribution;
pub mod error;
pub mod kubelet;
pub mod proto;
mod refresh;

pub use kubelet::DEFAULT_SOCKET;
pub use refresh::{KubeletPods, Options};
