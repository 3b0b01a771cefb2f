//! One connection: parse requests with httparse from a fixed buffer, answer
//! each in order (keep-alive and pipelining), close on errors.
//!
//! A response is built in one buffer: the body is rendered after
//! `HEAD_ROOM` bytes, then the head is written right-aligned in front of
//! it, and the whole goes out in one write.

use super::router::{self, Context, Method, Request, Response, Status};
use super::server::Server;
use async_io::Async;
use smol::future::FutureExt;
use smol::io::{AsyncReadExt, AsyncWriteExt};
use std::io::{Cursor, Write};
use std::net::TcpStream;
use std::ops::Range;
use std::rc::Rc;
use std::time::Instant;

/// The most a request head may take.
pub const MAX_HEAD: usize = 8 * 1024;
pub const MAX_HEADERS: usize = 64;
const HEAD_ROOM: usize = 256;

/// What the parser made of the buffered bytes.
enum Parsed<'a> {
    Request(Request<'a>, Framing),
    Partial,
    /// Answer with this status and close.
    Reject(Status),
}

/// How a request sits on the connection.
#[derive(Debug, PartialEq)]
struct Framing {
    /// Bytes the request head took.
    consumed: usize,
    keep_alive: bool,
    http10: bool,
}

fn parse(buf: &[u8]) -> Parsed<'_> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Request::new(&mut headers);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Parsed::Partial,
        // A full buffer without a whole request line is a long URI.
        Ok(httparse::Status::Partial) if !buf.contains(&b'\n') => {
            return Parsed::Reject(Status::UriTooLong);
        }
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Reject(Status::HeadersTooLarge);
        }
        Err(_) => return Parsed::Reject(Status::BadRequest),
    };
    let (Some(method), Some(target), Some(version)) = (r.method, r.path, r.version) else {
        return Parsed::Reject(Status::BadRequest);
    };
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => Method::Other,
    };
    let mut accept = None;
    let (mut close, mut keep_alive, mut lengths) = (false, false, 0);
    for h in r.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("accept") {
            accept = Some(h.value);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            // No route takes a body; a non-empty one would desync us.
            lengths += 1;
            if h.value.trim_ascii() != b"0" || lengths > 1 {
                return Parsed::Reject(Status::BadRequest);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Reject(Status::BadRequest);
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let keep = if version == 1 {
        !close
    } else {
        keep_alive && !close
    };
    let framing = Framing {
        consumed: n,
        keep_alive: keep,
        http10: version == 0,
    };
    Parsed::Request(
        Request {
            method,
            path,
            query,
            accept,
        },
        framing,
    )
}

/// A response built in the output buffer.
#[derive(Debug, PartialEq)]
pub struct Answer {
    /// Bytes of input the request took.
    pub consumed: usize,
    pub keep_alive: bool,
    /// Where the response lies in the output buffer.
    pub range: Range<usize>,
}

/// The pure core of a connection: parses one request from `buf`, routes
/// it and builds the whole response in `out`. `None` until a whole request
/// head has arrived.
pub fn answer(buf: &[u8], ctx: &Context, out: &mut Vec<u8>) -> Option<Answer> {
    respond(buf, out, |req, out| router::route(req, ctx, out))
}

fn respond(
    buf: &[u8],
    out: &mut Vec<u8>,
    route: impl FnOnce(&Request, &mut Vec<u8>) -> Response,
) -> Option<Answer> {
    let parsed = parse(buf);
    out.clear();
    out.resize(HEAD_ROOM, 0);
    let (resp, consumed, keep, head_only, http10) = match parsed {
        Parsed::Partial => return None,
        Parsed::Reject(status) => {
            out.extend_from_slice(status.line().as_bytes());
            out.push(b'\n');
            (Response::text(status), buf.len(), false, false, false)
        }
        Parsed::Request(req, f) => {
            let resp = route(&req, out);
            (
                resp,
                f.consumed,
                f.keep_alive,
                req.method == Method::Head,
                f.http10,
            )
        }
    };
    let start = write_head(out, &resp, keep, http10);
    let end = if head_only { HEAD_ROOM } else { out.len() };
    Some(Answer {
        consumed,
        keep_alive: keep,
        range: start..end,
    })
}

/// Races `fut` against connection `id`'s deadline; `None` when the
/// deadline came first.
async fn before<T>(
    srv: &Server,
    id: u64,
    deadline: Instant,
    fut: impl Future<Output = T>,
) -> Option<T> {
    async { Some(fut.await) }
        .or(async {
            srv.deadlines.sleep(id, deadline).await;
            None
        })
        .await
}

/// Serves one connection until the client closes it, an error or a
/// timeout. Between requests it holds no buffer: the head buffer goes back
/// to the pool and it only waits for the socket to become readable.
pub async fn serve(stream: Rc<Async<TcpStream>>, id: u64, srv: Rc<Server>) {
    let mut inbuf = srv.take_inbuf();
    let mut filled = 0;
    let limits = &srv.limits;
    // A new connection must send its first request within the header
    // timeout; later ones start when their first byte arrives.
    let mut head_deadline = Instant::now() + limits.header_timeout;
    loop {
        if filled > 0 {
            let mut out = srv.take_outbuf();
            let request = srv.begin_request();
            let answered = match &request {
                Some(_) => answer(&inbuf[..filled], &srv.ctx, &mut out),
                None => respond(&inbuf[..filled], &mut out, |_, out| {
                    out.extend_from_slice(b"too many requests in flight\n");
                    Response::text(Status::Unavailable)
                }),
            };
            if let Some(a) = answered {
                let deadline = Instant::now() + limits.write_timeout;
                let sent = before(&srv, id, deadline, (&*stream).write_all(&out[a.range])).await;
                drop(request);
                srv.put_outbuf(out);
                if !matches!(sent, Some(Ok(()))) || !a.keep_alive {
                    break;
                }
                inbuf.copy_within(a.consumed..filled, 0);
                filled -= a.consumed;
                if filled > 0 {
                    // Pipelined: the next request is already here.
                    head_deadline = Instant::now() + limits.header_timeout;
                    continue;
                }
                srv.put_inbuf(std::mem::take(&mut inbuf));
                srv.set_idle(id, true);
                let idle = Instant::now() + limits.idle_timeout;
                let ready = before(&srv, id, idle, stream.readable()).await;
                if !matches!(ready, Some(Ok(()))) {
                    break;
                }
                inbuf = srv.take_inbuf();
                head_deadline = Instant::now() + limits.header_timeout;
            } else {
                srv.put_outbuf(out);
            }
        }
        if filled == inbuf.len() {
            // A partial head fills the buffer: make room, up to MAX_HEAD
            // (a full MAX_HEAD was refused by the parser above).
            inbuf.resize((inbuf.len() * 2).min(MAX_HEAD), 0);
        }
        match before(
            &srv,
            id,
            head_deadline,
            (&*stream).read(&mut inbuf[filled..]),
        )
        .await
        {
            Some(Ok(n)) if n > 0 => {
                if filled == 0 {
                    srv.set_idle(id, false);
                }
                filled += n;
            }
            // Closed, failed, or too slow to send a head (slowloris).
            _ => break,
        }
    }
    if !inbuf.is_empty() {
        srv.put_inbuf(inbuf);
    }
    srv.forget(id);
}

/// Writes the status line and headers just before the body and returns
/// where the response starts.
fn write_head(out: &mut [u8], resp: &Response, keep: bool, http10: bool) -> usize {
    let body_len = out.len() - HEAD_ROOM;
    let mut head = [0u8; HEAD_ROOM];
    let mut c = Cursor::new(&mut head[..]);
    let connection = match (keep, http10) {
        (false, _) => "Connection: close\r\n",
        (true, true) => "Connection: keep-alive\r\n",
        (true, false) => "",
    };
    let allow = if resp.allow {
        "Allow: GET, HEAD\r\n"
    } else {
        ""
    };
    // Fits: the longest status, content type and headers are under 256 bytes.
    let _ = write!(
        c,
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {body_len}\r\n{allow}{connection}\r\n",
        resp.status.line(),
        resp.content_type,
    );
    let len = c.position() as usize;
    let start = HEAD_ROOM - len;
    out[start..HEAD_ROOM].copy_from_slice(&head[..len]);
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(req: &[u8]) -> Option<Status> {
        match parse(req) {
            Parsed::Reject(s) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn rejects() {
        assert_eq!(
            status(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            Some(Status::BadRequest)
        );
        assert_eq!(status(b"\x00\x01garbage\r\n\r\n"), Some(Status::BadRequest));
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
            Some(Status::BadRequest)
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"),
            Some(Status::BadRequest)
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Some(Status::BadRequest)
        );
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n"),
            Some(Status::BadRequest)
        );
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(65));
        assert_eq!(status(many.as_bytes()), Some(Status::HeadersTooLarge));
        let long = format!("GET /{} HTTP/1.1", "a".repeat(MAX_HEAD));
        assert_eq!(
            status(&long.as_bytes()[..MAX_HEAD]),
            Some(Status::UriTooLong)
        );
        let big = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(MAX_HEAD));
        assert_eq!(
            status(&big.as_bytes()[..MAX_HEAD]),
            Some(Status::HeadersTooLarge)
        );
    }

    #[test]
    fn accepts() {
        let Parsed::Request(r, f) = parse(
            b"GET /metrics?x=1 HTTP/1.0\r\nAccept: text/plain\r\nConnection: Keep-Alive\r\n\r\nGET",
        ) else {
            panic!()
        };
        assert_eq!((r.path, r.method), ("/metrics", Method::Get));
        assert_eq!(
            f,
            Framing {
                consumed: 73,
                keep_alive: true,
                http10: true
            }
        );
        assert_eq!(r.accept, Some(&b"text/plain"[..]));
        assert!(matches!(
            parse(b"GET / HTTP/1.1\r\nHost: x\r\n"),
            Parsed::Partial
        ));
        let Parsed::Request(_, f) = parse(b"HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n") else {
            panic!()
        };
        assert!(!f.keep_alive && !f.http10);
    }
}
