//! The client's TLS, for an https:// Alertmanager: rustls' unbuffered
//! client connection over the plain one ([`Conn`]), so every handshake
//! read, every record written and every answer read keeps the post's one
//! deadline. Whatever rustls refuses (a certificate not from the CA file or
//! not naming the host, a peer that speaks no TLS) is a
//! [`PostError::Tls`] failure with rustls' reason; running out of time is
//! still `timeout`.

use super::transport::{Conn, PostError, PostFailure, Transport};
use rustls::client::{ClientConfig, UnbufferedClientConnection};
use rustls::pki_types::ServerName;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use std::sync::Arc;

/// Largest plaintext sealed into one record.
const CHUNK: usize = 16 * 1024;
/// A record on the wire at most: header, 16 KiB, and the AEAD's overhead.
const RECORD: usize = 5 + CHUNK + 256;

/// An https:// peer: whom to trust, and the name its certificate must
/// hold (the URL's host: a DNS name, or an IP address as an IP SAN).
pub struct Peer {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl Peer {
    /// The peer at `host` (an IPv6 address without its brackets).
    pub fn new(config: Arc<ClientConfig>, host: &str) -> Result<Peer, String> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| format!("{host:?} is no DNS name or IP address"))?;
        Ok(Peer { config, name })
    }

    /// Handshakes over `conn`, within its deadline.
    pub(super) fn handshake(&self, conn: Conn) -> Result<Stream, PostFailure> {
        let tls = UnbufferedClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(failed)?;
        let mut s = Stream {
            tls,
            conn,
            incoming: vec![0; RECORD],
            len: 0,
            plain: Vec::new(),
            at: 0,
            out: Vec::new(),
        };
        loop {
            match s.turn(None)? {
                Turn::Writable => return Ok(s),
                Turn::More if s.fill("the TLS handshake")? > 0 => {}
                _ => return Err(tls_line("the peer closed during the handshake")),
            }
        }
    }
}

/// What one turn of rustls over the bytes read came to.
enum Turn {
    /// It needs more bytes from the peer.
    More,
    /// Handshaken, nothing to read: application data may be sent.
    Writable,
    /// The chunk given was sealed into `out`.
    Sealed,
    /// The peer closed (close_notify), or the connection is over.
    Closed,
}

/// A TLS connection after its handshake.
pub struct Stream {
    tls: UnbufferedClientConnection,
    conn: Conn,
    /// Ciphertext read, its first `len` bytes.
    incoming: Vec<u8>,
    len: usize,
    /// Plaintext decrypted and not yet read, from `at`.
    plain: Vec<u8>,
    at: usize,
    /// Ciphertext to send.
    out: Vec<u8>,
}

impl Stream {
    /// Runs rustls over what was read until it needs the peer or the
    /// caller: handshake messages are sent as they come, application data
    /// kept in `plain`, and `seal` (at most [`CHUNK`]), when given and
    /// the connection can, sealed into `out`.
    fn turn(&mut self, seal: Option<&[u8]>) -> Result<Turn, PostFailure> {
        // Each pass consumes input, sends, seals or returns.
        loop {
            let UnbufferedStatus { mut discard, state } =
                self.tls.process_tls_records(&mut self.incoming[..self.len]);
            let turn = match state.map_err(failed)? {
                ConnectionState::EncodeTlsData(mut e) => {
                    encode(&mut self.out, |room| match e.encode(room) {
                        Err(EncodeError::InsufficientSize(s)) => Err(Room::Grow(s.required_size)),
                        // Nothing more to encode.
                        Err(EncodeError::AlreadyEncoded) => Ok(0),
                        Ok(n) => Ok(n),
                    })?;
                    None
                }
                ConnectionState::TransmitTlsData(t) => {
                    Transport::<PostError>::write_all(&mut self.conn, &self.out)?;
                    self.out.clear();
                    t.done();
                    None
                }
                ConnectionState::BlockedHandshake => Some(Turn::More),
                ConnectionState::ReadTraffic(mut r) => {
                    while let Some(record) = r.next_record() {
                        let record = record.map_err(failed)?;
                        discard += record.discard;
                        self.plain.extend_from_slice(record.payload);
                    }
                    None
                }
                ConnectionState::WriteTraffic(mut w) => match seal {
                    None => Some(Turn::Writable),
                    Some(chunk) => {
                        encode(&mut self.out, |room| match w.encrypt(chunk, room) {
                            Err(EncryptError::InsufficientSize(s)) => {
                                Err(Room::Grow(s.required_size))
                            }
                            Err(e) => Err(Room::Fail(e.to_string())),
                            Ok(n) => Ok(n),
                        })?;
                        Some(Turn::Sealed)
                    }
                },
                ConnectionState::PeerClosed | ConnectionState::Closed => Some(Turn::Closed),
                _ => return Err(tls_line("an unexpected TLS state")),
            };
            if discard > 0 {
                self.incoming.copy_within(discard..self.len, 0);
                self.len -= discard;
            }
            if let Some(turn) = turn {
                return Ok(turn);
            }
        }
    }

    /// Reads ciphertext from the peer, within the deadline: how much, 0
    /// at its end.
    fn fill(&mut self, what: &str) -> Result<usize, PostFailure> {
        if self.len == self.incoming.len() {
            return Err(tls_line("a record larger than TLS allows"));
        }
        let n = Transport::<PostError>::read(&mut self.conn, &mut self.incoming[self.len..], what)?;
        self.len += n;
        Ok(n)
    }
}

impl Transport<PostError> for Stream {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), PostFailure> {
        for chunk in bytes.chunks(CHUNK) {
            // Bounded: each turn sends, consumes input or seals.
            while !matches!(self.turn(Some(chunk))?, Turn::Sealed) {
                if self.fill("the peer")? == 0 {
                    return Err(tls_line("the peer closed before the request was sent"));
                }
            }
        }
        let sent = Transport::<PostError>::write_all(&mut self.conn, &self.out);
        self.out.clear();
        sent
    }

    fn read(&mut self, buf: &mut [u8], what: &str) -> Result<usize, PostFailure> {
        loop {
            if self.at < self.plain.len() {
                let n = buf.len().min(self.plain.len() - self.at);
                buf[..n].copy_from_slice(&self.plain[self.at..self.at + n]);
                self.at += n;
                if self.at == self.plain.len() {
                    self.plain.clear();
                    self.at = 0;
                }
                return Ok(n);
            }
            // An answer and the close after it may come in one read.
            match self.turn(None)? {
                _ if !self.plain.is_empty() => {}
                Turn::Closed => return Ok(0),
                _ if self.fill(what)? == 0 => return Ok(0),
                _ => {}
            }
        }
    }
}

/// Why rustls wrote nothing into the room it was given.
enum Room {
    /// It needs this many bytes.
    Grow(usize),
    Fail(String),
}

/// Runs `f` on room at the end of `out` and keeps what it wrote, growing
/// the room once to the size it asks for.
fn encode(
    out: &mut Vec<u8>,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, Room>,
) -> Result<(), PostFailure> {
    let start = out.len();
    let mut want = RECORD;
    for _ in 0..2 {
        out.resize(start + want, 0);
        let r = f(&mut out[start..]);
        out.truncate(start + *r.as_ref().unwrap_or(&0));
        match r {
            Ok(_) => return Ok(()),
            Err(Room::Grow(size)) => want = size,
            Err(Room::Fail(why)) => return Err(tls_line(&why)),
        }
    }
    Err(tls_line("a record larger than its room"))
}

fn failed(e: rustls::Error) -> PostFailure {
    tls_line(&e.to_string())
}

fn tls_line(why: &str) -> PostFailure {
    (PostError::Tls, format!("TLS: {why}"))
}

#[cfg(test)]
#[path = "../../../../tests/support/pki.rs"]
mod pki;

#[cfg(test)]
mod tests {
    use super::super::client::send;
    use super::pki;
    use super::*;
    use model::EngineError;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::path::Path;
    use std::thread;
    use std::time::{Duration, Instant};

    /// A TLS server on loopback with the PKI's `server` certificate (its
    /// names 127.0.0.1 and localhost): it reads one request whole, by its
    /// Content-Length, and answers `status` in two records, then closes
    /// with close_notify. Errors (a client that gave up) end a connection.
    fn server(dir: &Path, status: u16) -> String {
        let certs = CertificateDer::pem_file_iter(dir.join("server.crt")).unwrap();
        let certs = certs.collect::<Result<Vec<_>, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let config = Arc::new(config);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        thread::spawn(move || {
            for s in l.incoming().flatten().take(8) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let conn = rustls::ServerConnection::new(config.clone()).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, s);
                let _ = answer(&mut tls, status);
            }
        });
        addr
    }

    type Server = rustls::StreamOwned<rustls::ServerConnection, std::net::TcpStream>;

    fn answer(tls: &mut Server, status: u16) -> std::io::Result<()> {
        let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
        let whole = loop {
            let n = tls.read(&mut buf)?;
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "));
                let len: usize = len.unwrap().parse().unwrap();
                if body.len() >= len {
                    break body.len() == len;
                }
            }
            if n == 0 {
                break false;
            }
        };
        let status = if whole { status } else { 400 };
        tls.write_all(format!("HTTP/1.1 {status} X\r\nContent-Len").as_bytes())?;
        tls.flush()?;
        // The answer's end and the close_notify in one write, as Go sends
        // them.
        tls.write_all(b"gth: 0\r\nConnection: close\r\n\r\n")?;
        tls.conn.send_close_notify();
        tls.flush()
    }

    fn post(addr: &str, peer: &Peer, body_len: usize, within: Duration) -> Result<(), PostFailure> {
        let body = "x".repeat(body_len);
        let request = format!(
            "POST /api/v2/alerts HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {body_len}\r\nConnection: close\r\n\r\n{body}"
        );
        send(
            addr,
            Some(peer),
            request.as_bytes(),
            Instant::now() + within,
        )
    }

    fn peer(dir: &Path, ca: &str, host: &str) -> Peer {
        let flag = "--alertmanager.ca-file";
        let config = webconfig::client_config::client_config(flag, &dir.join(ca)).unwrap();
        Peer::new(config, host).unwrap()
    }

    /// A post over TLS is answered whatever its size: one record or
    /// several (40 KB), the answer over two records and its close in the
    /// same read or not; the host named as an IP address or a DNS name.
    /// An answer other than 200 is still `status`.
    #[test]
    fn posts_over_tls_of_any_size_are_answered() {
        let Some(dir) = pki::pki() else { return };
        let secs = Duration::from_secs(10);
        let ok = server(dir, 200);
        for (host, len) in [("127.0.0.1", 10), ("localhost", 40_000), ("127.0.0.1", 0)] {
            let r = post(&ok, &peer(dir, "ca.crt", host), len, secs);
            assert_eq!(r, Ok(()), "{host}, {len} bytes");
        }
        let failing = server(dir, 500);
        let (why, line) = post(&failing, &peer(dir, "ca.crt", "localhost"), 10, secs).unwrap_err();
        assert_eq!(why, PostError::Exchange(EngineError::Status), "{line}");
    }

    /// A certificate from another CA, or one that does not name the host,
    /// is `tls`, with rustls' reason.
    #[test]
    fn an_untrusted_or_misnamed_certificate_is_tls() {
        let Some(dir) = pki::pki() else { return };
        let addr = server(dir, 200);
        for (ca, host, says) in [
            ("other-ca.crt", "127.0.0.1", "UnknownIssuer"),
            ("ca.crt", "am.example.net", "not valid for name"),
            ("ca.crt", "127.0.0.2", "not valid for name"),
        ] {
            let r = post(&addr, &peer(dir, ca, host), 10, Duration::from_secs(10));
            let (why, line) = r.unwrap_err();
            assert_eq!(why, PostError::Tls, "{ca} {host}: {line}");
            assert!(line.starts_with("TLS: ") && line.contains(says), "{line}");
        }
    }

    /// A peer that speaks no TLS: one that answers in plain HTTP, one
    /// that closes at once, one that sends a record header of a record
    /// larger than TLS allows (all `tls`), and one that accepts and never
    /// speaks (`timeout`, at the deadline).
    #[test]
    fn a_peer_without_tls_fails_and_a_silent_one_at_the_deadline() {
        let Some(dir) = pki::pki() else { return };
        let peer = peer(dir, "ca.crt", "127.0.0.1");
        let plain = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".as_slice();
        let huge = [0x16, 0x03, 0x03, 0xff, 0xff].as_slice();
        for (says, bytes) in [("corrupt", plain), ("closed", b"".as_slice()), ("", huge)] {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap().to_string();
            thread::spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                let _ = s.write_all(bytes);
                let _ = s.read(&mut [0; 4096]);
            });
            let (why, line) = post(&addr, &peer, 10, Duration::from_secs(10)).unwrap_err();
            assert_eq!(why, PostError::Tls, "{line}");
            assert!(line.contains(says), "{line}");
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        thread::spawn(move || {
            let held = l.accept();
            thread::sleep(Duration::from_secs(3));
            drop(held);
        });
        let started = Instant::now();
        let (why, line) = post(&addr, &peer, 10, Duration::from_millis(400)).unwrap_err();
        assert_eq!(why, PostError::Exchange(EngineError::Timeout), "{line}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(400) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }
}
