//! One connection: parse requests with httparse from a fixed buffer, answer
//! each in order (keep-alive and pipelining), close on errors.
//!
//! A response is built in one buffer: the body is rendered after
//! `HEAD_ROOM` bytes, then the head is written right-aligned in front of
//! it, and the whole goes out in one write.

use super::request::{Parsed, parse};
use super::router::{self, Context, Method, Response, Status};
use super::server::{Key, Phase, Sent, Server};
use async_io::Async;
use smol::future::FutureExt;
use smol::io::AsyncReadExt;
use std::io::{Cursor, Read, Write};
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
#[cfg(any(test, feature = "internals"))]
pub fn answer(buf: &[u8], ctx: &Context, out: &mut Vec<u8>) -> Option<Answer> {
    respond(buf, ctx, false, out)
}

/// [`answer`]; `close` ends the connection after the response whatever
/// the request asked.
fn respond(buf: &[u8], ctx: &Context, close: bool, out: &mut Vec<u8>) -> Option<Answer> {
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
            let resp = router::route(&req, ctx, out);
            (
                resp,
                f.consumed,
                f.keep_alive && !close,
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
    key: Key,
    deadline: Instant,
    fut: impl Future<Output = T>,
) -> Option<T> {
    async { Some(fut.await) }
        .or(async {
            srv.deadlines.sleep(key.id, deadline).await;
            None
        })
        .await
}

/// Sends connection `key`'s response (which the server holds) before
/// `deadline`; false when it failed, timed out or was evicted.
async fn send(srv: &Server, key: Key, stream: &Async<TcpStream>, deadline: Instant) -> bool {
    loop {
        match srv.write_some(key) {
            Sent::All => return true,
            Sent::Some => {}
            Sent::Blocked => {
                let ready = before(srv, key, deadline, stream.writable()).await;
                if !matches!(ready, Some(Ok(()))) {
                    return false;
                }
            }
            Sent::Failed => return false,
        }
    }
}

/// Serves one connection until the client closes it, an error, a
/// timeout or an eviction. While no request bytes are buffered (a new
/// connection, or a kept-alive one between requests) it holds no buffer:
/// it only waits for the socket to become readable.
pub async fn serve(stream: Rc<Async<TcpStream>>, key: Key, srv: Rc<Server>) {
    let mut inbuf = Vec::new();
    let mut filled = 0;
    let mut served = false;
    let limits = &srv.limits;
    // A new connection must send its first request within the header
    // timeout; later ones start when their first byte arrives.
    let mut head_deadline = Instant::now() + limits.header_timeout;
    'conn: loop {
        // Answer every whole request buffered, in order (pipelining).
        while filled > 0 {
            let mut out = srv.take_outbuf();
            let Some(a) = respond(&inbuf[..filled], &srv.ctx, srv.crowded(), &mut out) else {
                srv.put_outbuf(out);
                break;
            };
            srv.answer(key, out, a.range);
            let deadline = Instant::now() + limits.write_timeout;
            if !send(&srv, key, &stream, deadline).await || !a.keep_alive {
                break 'conn;
            }
            served = true;
            inbuf.copy_within(a.consumed..filled, 0);
            filled -= a.consumed;
            head_deadline = Instant::now() + limits.header_timeout;
        }
        if filled == 0 {
            if !inbuf.is_empty() {
                srv.put_inbuf(std::mem::take(&mut inbuf));
            }
            let wait_until = if served {
                srv.set_phase(key, Phase::Idle);
                Instant::now() + limits.idle_timeout
            } else {
                head_deadline
            };
            let ready = before(&srv, key, wait_until, stream.readable()).await;
            if !matches!(ready, Some(Ok(()))) {
                break;
            }
            if served {
                head_deadline = Instant::now() + limits.header_timeout;
            }
            inbuf = srv.take_inbuf();
        } else if filled == inbuf.len() {
            // A partial head fills the buffer: make room, up to MAX_HEAD
            // (a full MAX_HEAD was refused by the parser above).
            inbuf.resize((inbuf.len() * 2).min(MAX_HEAD), 0);
        }
        match before(
            &srv,
            key,
            head_deadline,
            (&*stream).read(&mut inbuf[filled..]),
        )
        .await
        {
            Some(Ok(n)) if n > 0 => {
                if filled == 0 {
                    srv.set_phase(key, Phase::Head);
                }
                filled += n;
            }
            // Closed, failed, evicted, or too slow to send a head.
            _ => break,
        }
    }
    drain(&stream);
    if !inbuf.is_empty() {
        srv.put_inbuf(inbuf);
    }
    srv.forget(key);
}

/// Reads a little of what the client sent and was not read: closing over
/// unread bytes resets the connection, which can destroy the response on
/// its way to the client.
fn drain(stream: &Async<TcpStream>) {
    let mut sink = [0u8; 512];
    for _ in 0..16 {
        if !matches!(stream.get_ref().read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
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
