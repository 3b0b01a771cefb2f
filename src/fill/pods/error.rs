//! The one error type of a `List` call, from the socket to the protobuf.
//! Every variant is one log line; none carries an unbounded string.

use crate::fill::pods::frame::FrameError;
use crate::fill::pods::hpack::HpackError;
use crate::fill::pods::proto::ProtoError;
use crate::snapshot::KUBELET_ERRORS;
use std::{fmt, io};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The socket could not be reached: missing, refused, not a socket.
    Connect(io::ErrorKind),
    Io(io::ErrorKind),
    /// The call's deadline passed.
    Timeout,
    /// The kubelet closed the connection before the call completed.
    Closed,
    /// The peer broke HTTP/2 (we answer with GOAWAY PROTOCOL_ERROR).
    Protocol(&'static str),
    FrameSize(&'static str),
    FlowControl,
    Hpack(HpackError),
    /// GOAWAY before our stream was processed; a later call may succeed.
    GoAway {
        code: u32,
    },
    /// RST_STREAM on our stream.
    Reset {
        code: u32,
    },
    /// A response status other than 200.
    HttpStatus(u16),
    /// The response's content-type is not application/grpc.
    NotGrpc,
    /// A gRPC status other than OK; the message is cut to 256 bytes.
    Grpc {
        code: u32,
        message: String,
    },
    /// The stream ended without a grpc-status.
    NoGrpcStatus,
    /// The message is larger than our limit (64 MiB by default).
    MessageTooLarge,
    /// A compressed message, though we offered no grpc-accept-encoding.
    Compressed,
    /// The gRPC length-prefixed framing is broken.
    Framing(&'static str),
    Proto(ProtoError),
}

impl Error {
    /// Its reason among [`KUBELET_ERRORS`], for
    /// `gpu_exporter_kubelet_errors_total{reason}`.
    pub fn reason(&self) -> usize {
        let name = match self {
            Error::Connect(_) => "connect",
            Error::Timeout => "timeout",
            Error::Io(_) | Error::Closed | Error::GoAway { .. } | Error::Reset { .. } => "closed",
            Error::Grpc { .. } => "grpc",
            Error::MessageTooLarge => "too_large",
            Error::Proto(_) => "decode",
            Error::Protocol(_)
            | Error::FrameSize(_)
            | Error::FlowControl
            | Error::Hpack(_)
            | Error::HttpStatus(_)
            | Error::NotGrpc
            | Error::NoGrpcStatus
            | Error::Compressed
            | Error::Framing(_) => "protocol",
        };
        KUBELET_ERRORS.iter().position(|r| *r == name).unwrap_or(0)
    }
}

impl From<FrameError> for Error {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Protocol(m) => Error::Protocol(m),
            FrameError::Size(m) => Error::FrameSize(m),
        }
    }
}

impl From<HpackError> for Error {
    fn from(e: HpackError) -> Self {
        Error::Hpack(e)
    }
}

impl From<ProtoError> for Error {
    fn from(e: ProtoError) -> Self {
        Error::Proto(e)
    }
}

/// The names of gRPC status codes, for log lines.
pub fn grpc_code_name(code: u32) -> &'static str {
    const NAMES: [&str; 17] = [
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    ];
    NAMES.get(code as usize).copied().unwrap_or("?")
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Connect(k) => write!(f, "cannot connect to the kubelet socket: {k}"),
            Error::Io(k) => write!(f, "i/o error: {k}"),
            Error::Timeout => f.write_str("deadline exceeded"),
            Error::Closed => f.write_str("connection closed before the response completed"),
            Error::Protocol(m) => write!(f, "http/2 protocol error: {m}"),
            Error::FrameSize(m) => write!(f, "http/2 frame size error: {m}"),
            Error::FlowControl => f.write_str("http/2 flow control error"),
            Error::Hpack(e) => write!(f, "http/2 compression error: {e}"),
            Error::GoAway { code } => write!(f, "server sent GOAWAY (code {code:#x})"),
            Error::Reset { code } => write!(f, "server reset the stream (code {code:#x})"),
            Error::HttpStatus(s) => write!(f, "http status {s}"),
            Error::NotGrpc => f.write_str("response is not application/grpc"),
            Error::Grpc { code, message } => {
                write!(f, "grpc status {code} ({})", grpc_code_name(*code))?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            Error::NoGrpcStatus => f.write_str("response ended without grpc-status"),
            Error::MessageTooLarge => f.write_str("grpc message over the size limit"),
            Error::Compressed => f.write_str("compressed grpc message was not negotiated"),
            Error::Framing(m) => write!(f, "grpc framing error: {m}"),
            Error::Proto(e) => write!(f, "protobuf error: {e}"),
        }
    }
}

impl std::error::Error for Error {}
