//! One connection: parse requests with httparse from a fixed buffer, answer
//! each in order (keep-alive and pipelining), close on errors.
//!
//! A response is built in one buffer: the body is rendered after
//! `HEAD_ROOM` bytes, then the head is written right-aligned in front of
//! it, and the whole goes out in one write.

use super::request::{Parsed, parse};
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

pub use super::request::MAX_HEAD;
const HEAD_ROOM: usize = 256;

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
            let resp = Response {
                // OPTIONS * and CONNECT
                allow: status == Status::MethodNotAllowed,
                ..Response::text(status)
            };
            (resp, buf.len(), false, false, false)
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
