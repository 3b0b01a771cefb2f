//! One read of an engine's metrics: HTTP/1.1 GET over a blocking socket,
//! every step within one deadline, the body streamed into the text reader
//! and never held, no redirect followed. The Alertmanager notifier posts
//! through the same exchange ([`send`]), over TLS to an https:// one
//! (`https.rs`, with the `alertmanager-tls` feature) under the same deadline.

use super::options::Endpoint;
use super::text::{Parsed, Reader, Wanted};
use super::transport::{Conn, left, lift};
pub use super::transport::{Failure, PostFailure, Transport};
use model::EngineError;
use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The most body bytes read from one answer.
pub const MAX_BODY: u64 = 8 * 1024 * 1024;
/// The most body bytes one round reads across all its endpoints: each
/// endpoint's share is this over their number, at most [`MAX_BODY`] (8 MiB
/// each up to 4 endpoints, 2 MiB each at 16). A share, not a pool: an
/// endpoint that streams without end spends its own, never another's.
pub const ROUND_BYTES: u64 = 32 * 1024 * 1024;

/// An endpoint's share of [`ROUND_BYTES`] in a round of `endpoints`.
pub fn share(endpoints: usize) -> u64 {
    (ROUND_BYTES / endpoints.max(1) as u64).min(MAX_BODY)
}
/// The most head bytes.
const MAX_HEAD: usize = 16 * 1024;

/// An https:// peer: the TLS client configuration and the name its
/// certificate must hold.
#[cfg(feature = "https")]
pub use super::https::Peer;
/// No TLS in this build: no peer is ever made.
#[cfg(not(feature = "https"))]
pub enum Peer {}

/// Reads `ep` once, keeping what `wanted` asks for, within `timeout`, of
/// at most `cap` body bytes (its [`share`]).
pub fn fetch(
    ep: &Endpoint,
    wanted: &Wanted,
    timeout: Duration,
    cap: u64,
) -> Result<Parsed, Failure> {
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: gpu-exporter/{}\r\nAccept: text/plain;version=0.0.4\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n",
        ep.path,
        ep.authority,
        env!("CARGO_PKG_VERSION")
    );
    let conn = open(&ep.authority, Instant::now() + timeout)?;
    let (mut conn, framing, buf, start, filled) =
        exchange::<EngineError, _>(conn, request.as_bytes())?;
    if let Framing::Length(n) = framing
        && n > cap
    {
        return Err(over(cap, &format!("a Content-Length of {n}")));
    }
    let mut reader = Reader::new(wanted);
    let mut body = Body {
        framing,
        read: 0,
        cap,
        chunk: Chunk::Size(Vec::new()),
    };
    body.feed(&buf[start..filled], &mut reader)?;
    let mut buf = buf;
    while !body.done() {
        let n = Transport::<EngineError>::read(&mut conn, &mut buf, "the body")?;
        if n == 0 {
            return match body.framing {
                Framing::Close => Ok(reader.finish()),
                _ => Err(parse("closed before the body's end")),
            };
        }
        body.feed(&buf[..n], &mut reader)?;
    }
    Ok(reader.finish())
}

/// A whole answer's head.
type Answered<T> = (T, Framing, Vec<u8>, usize, usize);

/// Sends `request` (a whole HTTP/1.1 request, `Connection: close`) to
/// `authority`, over TLS to `tls`'s name where given, and reads the
/// answer's head, connect, handshake, write and read all within
/// `deadline`. Anything but a 200 is a [`EngineError::Status`] failure;
/// no redirect is followed. The Alertmanager notifier's POST.
pub fn send(
    authority: &str,
    tls: Option<&Peer>,
    request: &[u8],
    deadline: Instant,
) -> Result<(), PostFailure> {
    let conn = open(authority, deadline).map_err(lift)?;
    match tls {
        None => exchange(conn, request).map(drop),
        #[cfg(feature = "https")]
        Some(peer) => exchange(peer.handshake(conn)?, request).map(drop),
        #[cfg(not(feature = "https"))]
        Some(peer) => match *peer {},
    }
}

/// Writes `request` on `conn` and reads the answer's head: the
/// connection, the body's framing, and the buffer with the body's first
/// bytes from `start` to `filled`. The engine reader's GET and the
/// notifier's POST.
fn exchange<R: From<EngineError>, T: Transport<R>>(
    mut conn: T,
    request: &[u8],
) -> Result<Answered<T>, (R, String)> {
    conn.write_all(request)?;
    let mut buf = vec![0; MAX_HEAD];
    let mut filled = 0;
    let (framing, start) = loop {
        match head(&buf[..filled]).map_err(lift)? {
            Some(Head::Final(framing, start)) => break (framing, start),
            // What came after an interim head is read as a head again.
            Some(Head::Interim(n)) => {
                buf.copy_within(n..filled, 0);
                filled -= n;
                continue;
            }
            None if filled == MAX_HEAD => return Err(lift(parse("a head over 16 KiB"))),
            None => {}
        }
        let n = conn.read(&mut buf[filled..], "the head")?;
        if n == 0 {
            return Err(lift(parse("closed before a whole head")));
        }
        filled += n;
    };
    Ok((conn, framing, buf, start, filled))
}

fn parse(why: &str) -> Failure {
    (EngineError::Parse, why.to_string())
}

fn connect(authority: &str, deadline: Instant) -> Result<TcpStream, Failure> {
    let addrs = resolve(authority, deadline, &|a| {
        a.to_socket_addrs().map(Vec::from_iter)
    })?;
    let mut last = (EngineError::Connect, format!("{authority}: no address"));
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, left(deadline)?) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == ErrorKind::TimedOut => {
                return Err((EngineError::Timeout, format!("connecting to {addr}")));
            }
            Err(e) => last = (EngineError::Connect, format!("{addr}: {e}")),
        }
    }
    Err(last)
}

/// Connects to `authority` within `deadline`.
fn open(authority: &str, deadline: Instant) -> Result<Conn, Failure> {
    let stream = connect(authority, deadline)?;
    Ok(Conn { stream, deadline })
}

type Resolver = dyn Fn(&str) -> std::io::Result<Vec<std::net::SocketAddr>> + Sync;

/// `authority`'s addresses within the deadline: an address as it is, a
/// name through `resolver` on a thread of its own, given up on (`timeout`)
/// at the deadline; a resolver that hangs holds only that thread, until
/// the system's resolver gives up.
fn resolve(
    authority: &str,
    deadline: Instant,
    resolver: &'static Resolver,
) -> Result<Vec<std::net::SocketAddr>, Failure> {
    if let Ok(addr) = authority.parse() {
        return Ok(vec![addr]);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let name = authority.to_string();
    std::thread::Builder::new()
        .name("engine-resolve".into())
        .spawn(move || {
            let _ = tx.send(resolver(&name));
        })
        .map_err(|e| (EngineError::Connect, format!("{authority}: {e}")))?;
    match rx.recv_timeout(left(deadline)?) {
        Ok(Ok(addrs)) => Ok(addrs),
        Ok(Err(e)) => Err((EngineError::Connect, format!("{authority}: {e}"))),
        Err(_) => Err((EngineError::Timeout, format!("resolving {authority}"))),
    }
}

/// How the body ends.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Framing {
    Length(u64),
    Chunked,
    Close,
}

/// A whole head.
enum Head {
    /// An interim answer (`100 Continue`, `103 Early Hints`) of this many
    /// bytes: the answer follows it, on the same connection.
    Interim(usize),
    /// The answer: its body's framing and where the body starts.
    Final(Framing, usize),
}

/// The head, once whole.
fn head(buf: &[u8]) -> Result<Option<Head>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut headers);
    let start = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(parse(&format!("not an HTTP/1.x answer: {e}"))),
    };
    let code = r.code.unwrap_or(0);
    // 101 switches protocols, which no GET here asks for.
    if (100..200).contains(&code) && code != 101 {
        return Ok(Some(Head::Interim(start)));
    }
    if code != 200 {
        let location = r
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("location"));
        let why = match location {
            Some(_) => format!("answered {code}, a redirect (none is followed)"),
            None => format!("answered {code}"),
        };
        return Err((EngineError::Status, why));
    }
    let mut framing = Framing::Close;
    for h in r.headers.iter() {
        let value = std::str::from_utf8(h.value).unwrap_or("").trim();
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if !value.eq_ignore_ascii_case("chunked") {
                return Err(parse(&format!("transfer-encoding {value:?}")));
            }
            framing = Framing::Chunked;
        } else if h.name.eq_ignore_ascii_case("content-length") && framing != Framing::Chunked {
            let n: u64 = value
                .parse()
                .map_err(|_| parse(&format!("content-length {value:?}")))?;
            if n > MAX_BODY {
                return Err((
                    EngineError::TooLarge,
                    format!("a Content-Length of {n}, over the {MAX_BODY}-byte cap"),
                ));
            }
            framing = Framing::Length(n);
        } else if h.name.eq_ignore_ascii_case("content-encoding")
            && !value.eq_ignore_ascii_case("identity")
        {
            return Err(parse(&format!(
                "content-encoding {value:?}, asked for identity"
            )));
        }
    }
    Ok(Some(Head::Final(framing, start)))
}

/// A body over `cap` bytes (`what`), said with where the cap comes from.
fn over(cap: u64, what: &str) -> Failure {
    let why = match cap < MAX_BODY {
        true => format!(
            "{what}: over the {cap}-byte share of the round's {ROUND_BYTES} bytes across endpoints"
        ),
        false => format!("{what}: over the {MAX_BODY}-byte cap"),
    };
    (EngineError::TooLarge, why)
}

/// Where a chunked body is.
enum Chunk {
    /// Reading a size line (bounded).
    Size(Vec<u8>),
    /// Within a chunk: bytes left of it.
    Data(u64),
    /// The CRLF after a chunk's data: bytes left of it.
    DataEnd(u8),
    /// Trailer lines after the last chunk: bytes of the current line.
    Trailer(usize),
    Done,
}

struct Body {
    framing: Framing,
    /// Body bytes handed to the reader.
    read: u64,
    /// The most it may take: the endpoint's share of the round.
    cap: u64,
    chunk: Chunk,
}

impl Body {
    fn done(&self) -> bool {
        match self.framing {
            Framing::Length(n) => self.read >= n,
            Framing::Chunked => matches!(self.chunk, Chunk::Done),
            Framing::Close => false,
        }
    }

    fn feed(&mut self, mut bytes: &[u8], reader: &mut Reader) -> Result<(), Failure> {
        match self.framing {
            Framing::Length(n) => {
                let take = bytes.len().min((n - self.read) as usize);
                self.data(&bytes[..take], reader)
            }
            Framing::Close => self.data(bytes, reader),
            Framing::Chunked => {
                while !bytes.is_empty() && !self.done() {
                    bytes = self.chunked(bytes, reader)?;
                }
                Ok(())
            }
        }
    }

    fn data(&mut self, bytes: &[u8], reader: &mut Reader) -> Result<(), Failure> {
        self.read += bytes.len() as u64;
        if self.read > self.cap {
            return Err(over(self.cap, "a body cut off"));
        }
        reader.feed(bytes);
        Ok(())
    }

    /// Takes what it can of `bytes` in the current chunk state.
    fn chunked<'b>(&mut self, bytes: &'b [u8], reader: &mut Reader) -> Result<&'b [u8], Failure> {
        match &mut self.chunk {
            Chunk::Size(line) => {
                let end = bytes.iter().position(|&b| b == b'\n');
                let (piece, rest) = match end {
                    Some(i) => (&bytes[..i], &bytes[i + 1..]),
                    None => (bytes, &[][..]),
                };
                if line.len() + piece.len() > 1024 {
                    return Err(parse("a chunk size line over 1 KiB"));
                }
                line.extend_from_slice(piece);
                if end.is_some() {
                    let text = std::str::from_utf8(line).unwrap_or("");
                    let hex = text.split(';').next().unwrap_or("").trim();
                    let size = u64::from_str_radix(hex, 16)
                        .map_err(|_| parse(&format!("chunk size {hex:?}")))?;
                    self.chunk = match size {
                        0 => Chunk::Trailer(0),
                        n => Chunk::Data(n),
                    };
                }
                Ok(rest)
            }
            Chunk::Data(left) => {
                let take = bytes.len().min(*left as usize);
                *left -= take as u64;
                if *left == 0 {
                    self.chunk = Chunk::DataEnd(2);
                }
                self.data(&bytes[..take], reader)?;
                Ok(&bytes[take..])
            }
            Chunk::DataEnd(left) => {
                // CRLF, or a bare LF as lenient readers take.
                let b = bytes[0];
                match (b, *left) {
                    (b'\r', 2) => *left = 1,
                    (b'\n', _) => self.chunk = Chunk::Size(Vec::new()),
                    _ => return Err(parse("no CRLF after a chunk")),
                }
                Ok(&bytes[1..])
            }
            Chunk::Trailer(len) => {
                let b = bytes[0];
                match b {
                    b'\n' if *len == 0 => self.chunk = Chunk::Done,
                    b'\n' => *len = 0,
                    b'\r' => {}
                    _ if *len >= 1024 => return Err(parse("a trailer line over 1 KiB")),
                    _ => *len += 1,
                }
                Ok(&bytes[1..])
            }
            Chunk::Done => Ok(&[]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engines::options::parse_endpoint;
    use crate::engines::profile::wanted;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread;

    /// Name resolution is inside `--engine.timeout`: a resolver that
    /// hangs is given up on at the deadline (`timeout`), a failing one is
    /// `connect`, and a name resolves through the system's resolver.
    #[test]
    fn resolving_a_name_ends_at_the_deadline() {
        let ms = Duration::from_millis;
        let hangs: &'static Resolver = &|_| {
            thread::sleep(Duration::from_secs(3));
            Ok(Vec::new())
        };
        let started = Instant::now();
        let err = resolve("engine.example:8000", started + ms(300), hangs).unwrap_err();
        assert_eq!(err.0, EngineError::Timeout, "{err:?}");
        let took = started.elapsed();
        assert!(took >= ms(300) && took < ms(1500), "{took:?}");
        let fails: &'static Resolver = &|_| Err(std::io::Error::other("no such host"));
        let err = resolve("nowhere:1", Instant::now() + ms(500), fails).unwrap_err();
        assert_eq!(err.0, EngineError::Connect, "{err:?}");
        let system: &'static Resolver = &|a| a.to_socket_addrs().map(Vec::from_iter);
        let addrs = resolve(
            "localhost:9",
            Instant::now() + Duration::from_secs(5),
            system,
        );
        assert!(addrs.unwrap().iter().all(|a| a.ip().is_loopback()));
        // An address is taken as it is.
        let addrs = resolve("127.0.0.1:9", Instant::now(), hangs).unwrap();
        assert_eq!(addrs, ["127.0.0.1:9".parse().unwrap()]);
    }

    /// A server on loopback that answers one connection with `answer`
    /// (written in pieces of `piece` bytes), then holds it open for
    /// `hold` before closing.
    fn serve(answer: Vec<u8>, piece: usize, hold: Duration) -> Endpoint {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("vllm=http://{}/metrics", l.local_addr().unwrap());
        thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = [0; 4096];
            let _ = s.read(&mut req);
            for p in answer.chunks(piece.max(1)) {
                if s.write_all(p).is_err() {
                    return;
                }
            }
            thread::sleep(hold);
        });
        parse_endpoint(&url).unwrap()
    }

    const BODY: &str = "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 3\n";

    fn get(answer: &str, piece: usize) -> Result<Parsed, Failure> {
        let ep = serve(answer.as_bytes().to_vec(), piece, Duration::ZERO);
        fetch(&ep, &wanted(None), Duration::from_secs(5), MAX_BODY)
    }

    fn kept(r: Result<Parsed, Failure>) -> usize {
        r.unwrap().samples.len()
    }

    #[test]
    fn reads_each_framing_in_any_pieces() {
        let len = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{BODY}trailing junk",
            BODY.len()
        );
        let chunked = format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\n{}\r\n{:x}\r\n{}\r\n0\r\nX-T: 1\r\n\r\n",
            &BODY[..5],
            BODY.len() - 5,
            &BODY[5..]
        );
        let close = format!("HTTP/1.0 200 OK\r\n\r\n{BODY}");
        // Interim answers before the answer are skipped, never its status.
        let interim = format!(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n{len}"
        );
        for piece in [1, 3, 4096] {
            assert_eq!(kept(get(&interim, piece)), 1, "interim, {piece}");
            assert_eq!(kept(get(&len, piece)), 1, "length, {piece}");
            assert_eq!(kept(get(&chunked, piece)), 1, "chunked, {piece}");
            assert_eq!(kept(get(&close, piece)), 1, "close, {piece}");
        }
    }

    fn failure(r: Result<Parsed, Failure>) -> (EngineError, String) {
        r.map(|_| ()).unwrap_err()
    }

    #[test]
    fn refusals_say_why() {
        for (answer, reason, says) in [
            (
                "HTTP/1.1 302 Found\r\nLocation: /x\r\n\r\n",
                EngineError::Status,
                "none is followed",
            ),
            (
                "HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n",
                EngineError::Status,
                "answered 503",
            ),
            (
                "SSH-2.0-OpenSSH\r\n\r\n",
                EngineError::Parse,
                "not an HTTP/1.x answer",
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 9999999999\r\n\r\n",
                EngineError::TooLarge,
                "Content-Length of 9999999999",
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n",
                EngineError::Parse,
                "gzip",
            ),
            (
                "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nshort",
                EngineError::Parse,
                "before the body's end",
            ),
            (
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                EngineError::Parse,
                "chunk size",
            ),
            ("HTTP/1.1 200", EngineError::Parse, "before a whole head"),
            (
                "HTTP/1.1 100 Continue\r\n\r\n",
                EngineError::Parse,
                "before a whole head",
            ),
            (
                "HTTP/1.1 101 Switching Protocols\r\n\r\n",
                EngineError::Status,
                "answered 101",
            ),
        ] {
            let (r, why) = failure(get(answer, 4096));
            assert_eq!(r, reason, "{answer:?}: {why}");
            assert!(why.contains(says), "{answer:?}: {why}");
        }
    }

    #[test]
    fn a_body_past_the_cap_is_cut_off_while_read() {
        let mut answer = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        let line = b"# padding padding padding padding padding padding padding padding\n";
        while (answer.len() as u64) < MAX_BODY + 65536 {
            answer.extend_from_slice(line);
        }
        let ep = serve(answer, 65536, Duration::ZERO);
        let (r, _) = failure(fetch(&ep, &wanted(None), Duration::from_secs(20), MAX_BODY));
        assert_eq!(r, EngineError::TooLarge);
    }

    /// Sixteen endpoints read at most 32 MiB a round in all: 2 MiB each,
    /// by length or cut off while read, said as the round's share; up to
    /// four, each its 8 MiB.
    #[test]
    fn an_endpoint_reads_at_most_its_share_of_the_round() {
        assert_eq!(share(1), MAX_BODY);
        assert_eq!(share(4), MAX_BODY);
        assert_eq!(share(16), 2 * 1024 * 1024);
        assert_eq!(share(16) * 16, ROUND_BYTES);
        let cap = share(16);
        let mut body = Vec::new();
        let line = b"# padding padding padding padding padding padding padding padding\n";
        while (body.len() as u64) <= cap {
            body.extend_from_slice(line);
        }
        let heads = [
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()),
            "HTTP/1.1 200 OK\r\n\r\n".to_string(),
        ];
        for head in heads {
            let answer = [head.as_bytes(), &body].concat();
            let ep = serve(answer, 65536, Duration::ZERO);
            let (r, why) = failure(fetch(&ep, &wanted(None), Duration::from_secs(20), cap));
            assert_eq!(r, EngineError::TooLarge, "{head}");
            assert!(
                why.contains("over the 2097152-byte share of the round's 33554432 bytes"),
                "{why}"
            );
        }
        // The same body within a larger share is read.
        let answer = [b"HTTP/1.1 200 OK\r\n\r\n".as_slice(), &body].concat();
        let ep = serve(answer, 65536, Duration::ZERO);
        assert!(fetch(&ep, &wanted(None), Duration::from_secs(20), share(8)).is_ok());
    }

    #[test]
    fn a_silent_engine_is_a_timeout() {
        let ep = serve(
            b"HTTP/1.1 200 OK\r\n".to_vec(),
            4096,
            Duration::from_secs(3),
        );
        let (r, why) = failure(fetch(
            &ep,
            &wanted(None),
            Duration::from_millis(300),
            MAX_BODY,
        ));
        assert_eq!(r, EngineError::Timeout, "{why}");
    }

    #[test]
    fn nobody_listening_is_connect() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ep = parse_endpoint(&format!("http://127.0.0.1:{port}/metrics")).unwrap();
        let (r, _) = failure(fetch(&ep, &wanted(None), Duration::from_secs(1), MAX_BODY));
        assert_eq!(r, EngineError::Connect);
    }
}
