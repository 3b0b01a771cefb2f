//! What an exchange runs over: a plain connection ([`Conn`]) or, for an
//! https:// Alertmanager, TLS over one (`https.rs`), each step within the
//! exchange's one deadline; and why an exchange failed.

use model::EngineError;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why a read failed, and the line that says so.
pub type Failure = (EngineError, String);

/// Why a post failed: as a read fails, or in TLS (the certificate not
/// trusted or not naming the host, a peer that speaks no TLS).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PostError {
    Exchange(EngineError),
    #[cfg_attr(not(feature = "https"), allow(dead_code))]
    Tls,
}

impl PostError {
    /// Its `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            PostError::Exchange(e) => e.label(),
            PostError::Tls => "tls",
        }
    }
}

impl From<EngineError> for PostError {
    fn from(e: EngineError) -> PostError {
        PostError::Exchange(e)
    }
}

/// Why a post failed, and the line that says so.
pub type PostFailure = (PostError, String);

/// A failure as another reason type takes it.
pub(super) fn lift<R: From<EngineError>>((e, line): Failure) -> (R, String) {
    (e.into(), line)
}

/// A connection an exchange runs over, each step within its deadline:
/// plain ([`Conn`]) or TLS.
pub trait Transport<R> {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), (R, String)>;
    /// One read of at most `buf`'s length; 0 at the end.
    fn read(&mut self, buf: &mut [u8], what: &str) -> Result<usize, (R, String)>;
}

/// A plain connection and the deadline of every step on it.
pub struct Conn {
    pub(super) stream: TcpStream,
    pub(super) deadline: Instant,
}

impl<R: From<EngineError>> Transport<R> for Conn {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), (R, String)> {
        (self.stream)
            .set_write_timeout(Some(left(self.deadline).map_err(lift)?))
            .and_then(|()| self.stream.write_all(bytes))
            .map_err(|e| lift(io_failure(e, "sending the request")))
    }

    /// One read, within what is left of the deadline.
    fn read(&mut self, buf: &mut [u8], what: &str) -> Result<usize, (R, String)> {
        (self.stream)
            .set_read_timeout(Some(left(self.deadline).map_err(lift)?))
            .map_err(|e| lift(io_failure(e, "reading")))?;
        loop {
            match self.stream.read(buf) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                r => return r.map_err(|e| lift(io_failure(e, &format!("reading {what}")))),
            }
        }
    }
}

pub(super) fn left(deadline: Instant) -> Result<Duration, Failure> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err((EngineError::Timeout, "out of time".into())),
    }
}

pub(super) fn io_failure(e: std::io::Error, doing: &str) -> Failure {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => {
            (EngineError::Timeout, format!("timed out {doing}"))
        }
        _ => (EngineError::Parse, format!("{doing}: {e}")),
    }
}
