//! One TLS connection, through rustls' unbuffered API and without any I/O
//! of its own: `conn.rs` reads ciphertext into [`Tls::room`], and this
//! turns it into a handshake's replies, request bytes, or nothing yet; a
//! response is sealed whole into a buffer, which the server then writes
//! as it does a plain one (`Server::write_some`), so slots, evictions and
//! the write timeout work the same over TLS.
//!
//! Buffers: the ciphertext buffer (one record, 16.6 KiB) is lent by the
//! server's pool and handed back whenever it holds nothing, so an idle
//! keep-alive TLS connection holds only rustls' own state. What rustls
//! allocates itself: it copies each received application-data record into
//! a new `Vec`, and builds each sent record in one (rustls 0.23; in-place
//! decryption is a TODO there), so a request costs a few allocations
//! over TLS (`tests/alloc_server.rs` holds the bound).

use rustls::server::{ServerConfig, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use std::sync::Arc;

/// Largest plaintext sealed into one record.
const CHUNK: usize = 16 * 1024;
/// A TLS record on the wire: header, 16 KiB plaintext, and room for the
/// AEAD tag, TLS 1.3's inner content type and (TLS 1.2) explicit nonce.
pub const RECORD: usize = 5 + CHUNK + 256;
/// What sealing adds to a record at most (header, nonce, tag, type).
const OVERHEAD: usize = 64;

/// Why a TLS connection ended badly: its handshake failed, or a record
/// did.
#[derive(Debug)]
pub enum TlsError {
    Tls(rustls::Error),
    /// A record larger than TLS allows.
    Oversized,
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::Tls(e) => write!(f, "{e}"),
            TlsError::Oversized => f.write_str("a TLS record too large"),
        }
    }
}

/// Where a handshake stands after the bytes read so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Handshake {
    /// More bytes from the client are needed.
    More,
    /// Done: requests may come.
    Done,
}

/// What reading request bytes gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// This many plaintext bytes, at least one.
    Bytes(usize),
    /// More ciphertext is needed.
    More,
    /// The client closed (close_notify).
    Closed,
}

pub struct Tls {
    conn: UnbufferedServerConnection,
    /// Ciphertext read, its first `len` bytes; empty while lent back.
    incoming: Vec<u8>,
    len: usize,
    /// Plaintext decrypted that did not fit the caller's buffer.
    plain: Vec<u8>,
    plain_at: usize,
}

impl Tls {
    pub fn new(config: Arc<ServerConfig>) -> Result<Tls, TlsError> {
        Ok(Tls {
            conn: UnbufferedServerConnection::new(config).map_err(TlsError::Tls)?,
            incoming: Vec::new(),
            len: 0,
            plain: Vec::new(),
            plain_at: 0,
        })
    }

    /// Where to read ciphertext into; `lend` supplies a buffer when this
    /// connection has none. Empty when a whole record is buffered and
    /// still incomplete: a record larger than TLS allows.
    pub fn room(&mut self, lend: impl FnOnce() -> Vec<u8>) -> &mut [u8] {
        if self.incoming.is_empty() {
            self.incoming = lend();
            self.incoming.resize(RECORD, 0);
        }
        &mut self.incoming[self.len..]
    }

    /// `n` bytes were read into [`Tls::room`].
    pub fn filled(&mut self, n: usize) {
        self.len += n;
    }

    /// Whether bytes wait here, ciphertext or plaintext: then the
    /// connection must not wait on its socket before using them.
    pub fn buffered(&self) -> bool {
        self.len > 0 || self.plain_at < self.plain.len()
    }

    /// The ciphertext buffer, when it holds nothing, for the pool.
    pub fn release(&mut self) -> Option<Vec<u8>> {
        (self.len == 0 && !self.incoming.is_empty()).then(|| std::mem::take(&mut self.incoming))
    }

    /// Runs rustls over what was read, appending what it wants sent to
    /// `out`, until it needs more bytes, or has handshaken (`handshake`)
    /// or has request bytes (then copied into `buf`).
    fn turn(
        &mut self,
        out: &mut Vec<u8>,
        mut buf: Option<&mut [u8]>,
    ) -> Result<Option<Read>, TlsError> {
        // Each turn consumes input or ends; bounded by the buffer's bytes.
        loop {
            let UnbufferedStatus { mut discard, state } = self
                .conn
                .process_tls_records(&mut self.incoming[..self.len]);
            let state = match state {
                Ok(state) => state,
                Err(e) => {
                    self.alert(out);
                    return Err(TlsError::Tls(e));
                }
            };
            let result = match state {
                ConnectionState::EncodeTlsData(mut e) => {
                    encode(out, |room| e.encode(room))?;
                    None
                }
                ConnectionState::TransmitTlsData(t) => {
                    // The caller sends `out` before using what this returns.
                    t.done();
                    None
                }
                ConnectionState::ReadTraffic(mut r) => {
                    let mut n = 0;
                    while let Some(record) = r.next_record() {
                        let record = record.map_err(TlsError::Tls)?;
                        discard += record.discard;
                        let payload = record.payload;
                        let fits = match buf.as_deref_mut() {
                            Some(b) if self.plain.is_empty() => {
                                let fits = payload.len().min(b.len() - n);
                                b[n..n + fits].copy_from_slice(&payload[..fits]);
                                n += fits;
                                fits
                            }
                            _ => 0,
                        };
                        self.plain.extend_from_slice(&payload[fits..]);
                    }
                    Some(match (n, &buf) {
                        (0, Some(_)) if self.plain.is_empty() => Read::More,
                        (0, Some(_)) => Read::Bytes(self.take_plain(buf.as_deref_mut())),
                        (n, Some(_)) => Read::Bytes(n),
                        // Pipelined bytes during the handshake's end: kept.
                        (_, None) => Read::Bytes(0),
                    })
                }
                ConnectionState::WriteTraffic(_) => Some(Read::More),
                ConnectionState::BlockedHandshake => Some(Read::More),
                ConnectionState::PeerClosed | ConnectionState::Closed => Some(Read::Closed),
                // Early data is never accepted (max_early_data_size is 0).
                _ => {
                    return Err(TlsError::Tls(rustls::Error::General(
                        "unexpected TLS state".into(),
                    )));
                }
            };
            if discard > 0 {
                self.incoming.copy_within(discard..self.len, 0);
                self.len -= discard;
            }
            if let Some(r) = result {
                return Ok(Some(r));
            }
        }
    }

    /// Plaintext kept from an earlier record, into `buf`.
    fn take_plain(&mut self, buf: Option<&mut [u8]>) -> usize {
        let Some(buf) = buf else { return 0 };
        let rest = &self.plain[self.plain_at..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.plain_at += n;
        if self.plain_at == self.plain.len() {
            self.plain.clear();
            self.plain_at = 0;
        }
        n
    }

    /// Processes the handshake bytes read so far; what to send back is
    /// appended to `out` (send it, even with an error: it holds the alert
    /// that tells the client why).
    pub fn handshake(&mut self, out: &mut Vec<u8>) -> Result<Handshake, TlsError> {
        match self.turn(out, None)? {
            // A client may send its Finished and close_notify at once
            // (`openssl s_client` on TLS 1.3 does): a handshake done, then
            // a close, which the next read sees. No failure.
            Some(Read::Closed) if !self.conn.is_handshaking() => Ok(Handshake::Done),
            Some(Read::Closed) => Err(TlsError::Tls(rustls::Error::HandshakeNotComplete)),
            _ if self.conn.is_handshaking() && self.full() => Err(TlsError::Oversized),
            _ if self.conn.is_handshaking() => Ok(Handshake::More),
            _ => Ok(Handshake::Done),
        }
    }

    /// Whether the ciphertext buffer is full: with rustls still wanting
    /// more, a record larger than TLS allows.
    fn full(&self) -> bool {
        self.len == self.incoming.len() && !self.incoming.is_empty()
    }

    /// Request bytes into `buf`, from what was read; anything rustls wants
    /// sent meanwhile (a key update's answer, say) is appended to `out`.
    pub fn read(&mut self, buf: &mut [u8], out: &mut Vec<u8>) -> Result<Read, TlsError> {
        if self.plain_at < self.plain.len() {
            return Ok(Read::Bytes(self.take_plain(Some(buf))));
        }
        match self.turn(out, Some(buf))?.unwrap_or(Read::More) {
            Read::More if self.full() => Err(TlsError::Oversized),
            r => Ok(r),
        }
    }

    /// Seals `plain`'s parts, joined in order, into records appended to
    /// `out`: one record per 16 KiB.
    pub fn seal(&mut self, plain: [&[u8]; 3], out: &mut Vec<u8>) -> Result<(), TlsError> {
        let len: usize = plain.iter().map(|p| p.len()).sum();
        out.reserve(len + len.div_ceil(CHUNK) * OVERHEAD);
        each_chunk(plain, |chunk| self.seal_one(chunk, out))
    }

    /// Seals one record's worth.
    fn seal_one(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), TlsError> {
        // Bounded: each pass encodes something rustls asked for, or
        // this chunk.
        loop {
            let UnbufferedStatus { discard, state } = self
                .conn
                .process_tls_records(&mut self.incoming[..self.len]);
            let sealed = match state.map_err(TlsError::Tls)? {
                ConnectionState::WriteTraffic(mut w) => {
                    encode(out, |room| {
                        w.encrypt(chunk, room).map_err(|e| match e {
                            rustls::unbuffered::EncryptError::InsufficientSize(s) => {
                                EncodeError::InsufficientSize(s)
                            }
                            _ => EncodeError::AlreadyEncoded,
                        })
                    })?;
                    true
                }
                ConnectionState::EncodeTlsData(mut e) => {
                    encode(out, |room| e.encode(room))?;
                    false
                }
                ConnectionState::TransmitTlsData(t) => {
                    t.done();
                    false
                }
                ConnectionState::ReadTraffic(mut r) => {
                    // Pipelined requests: kept for the next read.
                    while let Some(record) = r.next_record() {
                        let record = record.map_err(TlsError::Tls)?;
                        self.plain.extend_from_slice(record.payload);
                    }
                    false
                }
                _ => {
                    return Err(TlsError::Tls(rustls::Error::General(
                        "the connection is closed".into(),
                    )));
                }
            };
            if discard > 0 {
                self.incoming.copy_within(discard..self.len, 0);
                self.len -= discard;
            }
            if sealed {
                break;
            }
        }
        Ok(())
    }

    /// A close_notify appended to `out`, when the connection can still
    /// send one.
    pub fn close(&mut self, out: &mut Vec<u8>) {
        let UnbufferedStatus { state, .. } = self
            .conn
            .process_tls_records(&mut self.incoming[..self.len]);
        if let Ok(ConnectionState::WriteTraffic(mut w)) = state {
            let _ = encode(out, |room| {
                w.queue_close_notify(room)
                    .map_err(|_| EncodeError::AlreadyEncoded)
            });
        }
    }

    /// After a fatal error rustls has queued its alert (protocol_version,
    /// bad_certificate, ...): encodes it into `out`, so the client learns
    /// why.
    fn alert(&mut self, out: &mut Vec<u8>) {
        for _ in 0..4 {
            let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut []);
            match state {
                Ok(ConnectionState::EncodeTlsData(mut e)) => {
                    if encode(out, |room| e.encode(room)).is_err() {
                        break;
                    }
                }
                _ => break,
            }
        }
    }
}

/// Calls `f` on each [`CHUNK`] of `parts` joined, in order: a chunk that
/// lies within one part as it lies, one across parts gathered first.
fn each_chunk<E>(parts: [&[u8]; 3], mut f: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
    let mut scratch = [0u8; CHUNK];
    let mut filled = 0;
    for mut p in parts {
        while !p.is_empty() {
            if filled == 0 && p.len() >= CHUNK {
                f(&p[..CHUNK])?;
                p = &p[CHUNK..];
                continue;
            }
            let n = (CHUNK - filled).min(p.len());
            scratch[filled..filled + n].copy_from_slice(&p[..n]);
            (filled, p) = (filled + n, &p[n..]);
            if filled == CHUNK {
                f(&scratch)?;
                filled = 0;
            }
        }
    }
    match filled {
        0 => Ok(()),
        n => f(&scratch[..n]),
    }
}

/// Runs `f` on room at the end of `out` and keeps what it wrote there,
/// growing the room once if `f` asks for more.
fn encode(
    out: &mut Vec<u8>,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, EncodeError>,
) -> Result<(), TlsError> {
    let start = out.len();
    let mut want = RECORD;
    for _ in 0..2 {
        out.resize(start + want, 0);
        match f(&mut out[start..]) {
            Ok(n) => {
                out.truncate(start + n);
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(s)) => want = s.required_size,
            Err(EncodeError::AlreadyEncoded) => break,
        }
    }
    out.truncate(start);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_sealed_in_whole_chunks_across_their_seams() {
        let joined: Vec<u8> = (0..3 * CHUNK + 100).map(|i| (i % 251) as u8).collect();
        for (a, b) in [
            (0, 0),
            (150, 150),
            (150, 2 * CHUNK + 7),
            (CHUNK, 2 * CHUNK),
            (5, 6),
        ] {
            let parts = [&joined[..a], &joined[a..b], &joined[b..]];
            let mut chunks: Vec<Vec<u8>> = Vec::new();
            each_chunk(parts, |c| {
                chunks.push(c.to_vec());
                Ok::<(), ()>(())
            })
            .unwrap();
            // As many records as the whole needs, every one full but the last.
            assert_eq!(chunks.len(), joined.len().div_ceil(CHUNK), "{a}..{b}");
            assert!(chunks[..chunks.len() - 1].iter().all(|c| c.len() == CHUNK));
            assert_eq!(chunks.concat(), joined, "{a}..{b}");
        }
        let mut calls = 0;
        each_chunk([&[], &[], &[]], |_| {
            calls += 1;
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(calls, 0);
    }
}
