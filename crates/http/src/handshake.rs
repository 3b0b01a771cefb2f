//! A TLS connection's I/O: the handshake, bounded, and reading records.
//!
//! **The handshake** runs inside the header timeout (from accept to a
//! whole request head) and is counted when it fails or times out
//! (`gpu_exporter_tls_handshake_errors_total`). A connection waiting for
//! its client's bytes holds nothing but its socket. Its CPU is bounded:
//! the crypto of at most [`HANDSHAKES`](crate::server::HANDSHAKES) handshakes runs per turn of the
//! HTTP thread. A handshake takes a permit, then yields once before its
//! crypto, so that every task already waiting to run (a scrape on a kept-
//! alive connection among them) runs before it; the others wait for a
//! permit, in order, outside the run queue. So a flood of handshakes
//! delays a scrape by at most a few handshakes' crypto (an ECDSA P-256
//! handshake takes ~0.3 ms, an RSA-2048 one ~1.5 ms), and a new
//! connection's handshake waits its turn behind at most the connection
//! cap's worth, within its header timeout.

use crate::counts::HandshakeError;
use crate::server::{Key, Server, before};
use crate::tls::{Handshake, Read, Tls, TlsError};
use async_io::Async;
use smol::io::AsyncWriteExt;
use std::io::Read as _;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

/// Writes `out` (a handshake flight, an alert) before `deadline`.
async fn send(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    deadline: Instant,
    out: &[u8],
) -> bool {
    out.is_empty()
        || matches!(
            before(srv, key, deadline, (&*stream).write_all(out)).await,
            Some(Ok(()))
        )
}

/// The handshake, done by `deadline`; the connection, or `None` (counted
/// and logged at debug level) when it failed or timed out.
pub async fn run(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    config: Arc<rustls::ServerConfig>,
    deadline: Instant,
) -> Option<Box<Tls>> {
    let mut tls = match Tls::new(config) {
        Ok(t) => Box::new(t),
        Err(e) => {
            failed(srv, &e);
            return None;
        }
    };
    let mut out = srv.outbufs.take();
    let done = handshake(srv, key, stream, &mut tls, deadline, &mut out).await;
    srv.outbufs.put(out);
    match done {
        Ok(Ended::Done) => Some(tls),
        Ok(ended) => {
            // An eviction is counted as one, not as a handshake error.
            if !srv.evicted(key) {
                srv.counts.handshake_error(match ended {
                    Ended::Closed => HandshakeError::Closed,
                    _ => HandshakeError::Timeout,
                });
            }
            if let Some(b) = tls.release() {
                srv.tlsbufs.put(b);
            }
            None
        }
        Err(e) => {
            failed(srv, &e);
            None
        }
    }
}

fn failed(srv: &Server, e: &TlsError) {
    srv.counts.handshake_error(HandshakeError::Failed);
    log::debug!("TLS handshake failed: {e}");
}

/// How a handshake that did not fail ended.
enum Ended {
    Done,
    /// The deadline came first.
    Timeout,
    /// The client closed, or the socket failed.
    Closed,
}

async fn handshake(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    tls: &mut Tls,
    deadline: Instant,
    out: &mut Vec<u8>,
) -> Result<Ended, TlsError> {
    // Each turn reads at least one byte of a handshake a few KB long, or
    // ends it; the deadline ends a client that sends nothing.
    loop {
        match before(srv, key, deadline, stream.readable()).await {
            Some(Ok(())) => {}
            Some(Err(_)) => return Ok(Ended::Closed),
            None => return Ok(Ended::Timeout),
        }
        let Some(_permit) = before(srv, key, deadline, srv.handshakes.acquire()).await else {
            return Ok(Ended::Timeout);
        };
        // Whatever was already waiting to run goes first.
        smol::future::yield_now().await;
        let room = tls.room(|| srv.tlsbufs.take());
        let n = match stream.get_ref().read(room) {
            Ok(0) => return Ok(Ended::Closed),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return Ok(Ended::Closed),
        };
        tls.filled(n);
        out.clear();
        let step = tls.handshake(out);
        srv.heard(key, matches!(step, Ok(Handshake::Done)));
        // A flight, or the alert that says why not.
        let sent = send(srv, key, stream, deadline, out).await;
        match step? {
            Handshake::Done if sent => return Ok(Ended::Done),
            Handshake::More if sent => {}
            // The flight could not go out in time, or the socket failed.
            _ if Instant::now() >= deadline => return Ok(Ended::Timeout),
            _ => return Ok(Ended::Closed),
        }
    }
}

/// Request bytes into `buf` before `deadline`: at least one, or `None`
/// when the connection is done (closed, failed, too slow).
pub async fn read(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    tls: &mut Tls,
    deadline: Instant,
    buf: &mut [u8],
) -> Option<usize> {
    let mut out = Vec::new();
    // Each turn decrypts what was read or reads more; the deadline ends a
    // client that sends nothing.
    loop {
        let got = tls.read(buf, &mut out);
        if !out.is_empty() {
            // A key update's answer, an alert: sent before going on.
            let sent = send(srv, key, stream, deadline, &out).await;
            out.clear();
            if !sent {
                return None;
            }
        }
        match got {
            Ok(Read::Bytes(n)) if n > 0 => return Some(n),
            Ok(Read::More | Read::Bytes(_)) => {}
            Ok(Read::Closed) => return None,
            Err(e) => {
                log::debug!("TLS connection failed: {e}");
                return None;
            }
        }
        let room = tls.room(|| srv.tlsbufs.take());
        if room.is_empty() {
            return None;
        }
        match before(
            srv,
            key,
            deadline,
            smol::io::AsyncReadExt::read(&mut &*stream, room),
        )
        .await
        {
            Some(Ok(n)) if n > 0 => tls.filled(n),
            _ => return None,
        }
    }
}
