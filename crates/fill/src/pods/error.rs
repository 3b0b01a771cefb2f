//! The one error type of a `List` call: reaching the kubelet's socket, or
//! the call over the wire (HTTP/2, gRPC, protobuf: [`wire::Error`]), and
//! each one's reason among the kubelet's error counters. Every variant is
//! one log line; none carries an unbounded string.

use model::KUBELET_ERRORS;
use std::{fmt, io};
use wire::protobuf::ProtoError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The socket could not be reached: missing, refused, not a socket.
    Connect(io::ErrorKind),
    /// The call on the connected socket failed.
    Call(wire::Error),
}

impl Error {
    /// Its reason among [`KUBELET_ERRORS`], for
    /// `gpu_exporter_kubelet_errors_total{reason}`.
    pub fn reason(&self) -> usize {
        use wire::Error as W;
        let name = match self {
            Error::Connect(_) => "connect",
            Error::Call(e) => match e {
                W::Timeout => "timeout",
                W::Io(_) | W::Closed | W::GoAway { .. } | W::Reset { .. } => "closed",
                W::Grpc { .. } => "grpc",
                W::MessageTooLarge => "too_large",
                W::Proto(_) => "decode",
                W::Protocol(_)
                | W::FrameSize(_)
                | W::FlowControl
                | W::Hpack(_)
                | W::HttpStatus(_)
                | W::NotGrpc
                | W::NoGrpcStatus
                | W::Compressed
                | W::Framing(_) => "protocol",
            },
        };
        KUBELET_ERRORS.iter().position(|r| *r == name).unwrap_or(0)
    }
}

impl From<wire::Error> for Error {
    fn from(e: wire::Error) -> Self {
        Error::Call(e)
    }
}

impl From<ProtoError> for Error {
    fn from(e: ProtoError) -> Self {
        Error::Call(e.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect(k) => write!(f, "cannot connect to the kubelet socket: {k}"),
            Error::Call(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Error {}
