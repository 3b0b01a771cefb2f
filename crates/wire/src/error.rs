//! Why a call over the wire failed, from the byte stream to the protobuf.
//! Every variant is one log line; none carries an unbounded string. What
//! a caller adds (reaching its socket, its own counters) is the caller's.

use crate::h2::frame::FrameError;
use crate::hpack::HpackError;
use crate::protobuf::ProtoError;
use std::{fmt, io};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    Io(io::ErrorKind),
    /// The call's deadline passed.
    Timeout,
    /// The peer closed the connection before the call completed.
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
    /// The message is larger than the caller's limit.
    MessageTooLarge,
    /// A compressed message, though we offered no grpc-accept-encoding.
    Compressed,
    /// The gRPC length-prefixed framing is broken.
    Framing(&'static str),
    /// The message, decoded as it streams, is not valid protobuf.
    Proto(ProtoError),
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
