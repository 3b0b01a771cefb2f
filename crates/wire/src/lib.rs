//! Protocol libraries, written by hand: HTTP/2 (RFC 9113) for one unary
//! call per connection over any blocking stream ([`h2`], its frames in
//! [`h2::frame`]), HPACK (RFC 7541, [`hpack`]) with its Huffman code
//! ([`huffman`]), gRPC's length-prefixed message framing ([`grpc`]), and
//! protobuf's wire format read ([`protobuf`]); why a call failed is
//! [`Error`].
//!
//! By hand because the crates that do this bring an async runtime and
//! dozens of crates for one small call every few seconds, and decode a
//! whole message into memory where ours streams it (docs/maintainers.md,
//! Dependencies, says more). They know nothing of the kubelet: what
//! its messages mean is `fill::pods`'. Blocking, std-only, and importing
//! only `base`.

pub mod error;
pub mod grpc;
pub mod h2;
pub mod hpack;
pub mod huffman;
pub mod protobuf;

pub use error::Error;
