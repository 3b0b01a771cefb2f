//! One connection: parse requests with httparse from a fixed buffer, answer
//! each in order (keep-alive and pipelining), close on errors. Over TLS
//! the same, with a handshake first (`handshake`) and the bytes going
//! through `tls.rs`.
//!
//! A response is built in one buffer: the body is rendered after
//! `HEAD_ROOM` bytes, gzipped in place of itself when the client asks,
//! then the head is written right-aligned in front of it. A scrape's
//! body starts with the snapshot's families, kept by the cache and
//! shared: they go out after the head, before what the buffer holds, in
//! one vectored write (sealed into TLS records first, over TLS).

use crate::guard::{self, Gate};
use crate::gzip::{Coding, Compressor, negotiate};
use crate::handler::{Exchange, Handler};
use crate::head::{Connection, HEAD_ROOM, write_head};
use crate::message::{ALLOW, Access, Method, Response, Status, refuse};
use crate::reply::{Reply, Shared};
use crate::request::{Parsed, parse};
use crate::server::{Key, Phase, Sent, Server, before};
use crate::unread;
use async_io::Async;
use smol::io::AsyncReadExt;
use std::io::Read;
use std::net::{IpAddr, TcpStream};
use std::ops::Range;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

pub use crate::request::MAX_HEAD;
/// A response built in the output buffer.
#[derive(Debug)]
pub struct Answer {
    /// Bytes of input the request took.
    pub consumed: usize,
    pub keep_alive: bool,
    /// Where the response lies in the output buffer.
    pub range: Range<usize>,
    /// Whether its body went gzipped.
    pub gzipped: bool,
    /// The start of its body, kept elsewhere: it goes out after the head,
    /// before the rest of `range`.
    pub shared: Option<Arc<Shared>>,
}

impl Answer {
    /// The response's bytes, in order, from `out` (where it was built).
    pub fn parts<'a>(&'a self, out: &'a [u8]) -> [&'a [u8]; 3] {
        let shared = self.shared.as_deref().map(|s| (HEAD_ROOM, s));
        crate::reply::parts(out, self.range.clone(), shared)
    }

    /// The response as the server sends it, built in `out`.
    pub fn reply(self, out: Vec<u8>) -> Reply {
        Reply::new(out, self.range, self.shared.map(|s| (HEAD_ROOM, s)))
    }
}

/// How to answer, beyond what the request says.
#[derive(Clone, Copy, Default)]
pub struct Policy<'a> {
    /// End the connection after the response, whatever the request asked.
    pub close: bool,
    /// What the web config's rate limit and basic auth said.
    pub access: Access,
    /// The request came in on the probe listener.
    pub probes_only: bool,
    /// Header lines the web config adds to every response.
    pub headers: &'a str,
    /// The server whose responses are in flight and whose counts the
    /// handler shows ([`Exchange`]).
    pub server: Option<&'a Server>,
}

/// The pure core of a connection: parses one request from `buf`, has
/// `handler` answer it and builds the whole response in `out`. `None`
/// until a whole request head has arrived.
pub fn answer(buf: &[u8], handler: &dyn Handler, out: &mut Vec<u8>) -> Option<Answer> {
    respond(buf, handler, Policy::default(), None, out)
}

/// [`answer`] with a policy, and gzip where the client asks and
/// `compressor` is given.
pub fn respond(
    buf: &[u8],
    handler: &dyn Handler,
    policy: Policy,
    mut compressor: Option<&mut Compressor>,
    out: &mut Vec<u8>,
) -> Option<Answer> {
    let parsed = parse(buf);
    crate::pool::room(out, HEAD_ROOM);
    let (resp, d) = match parsed {
        Parsed::Partial => return None,
        Parsed::Reject(status) => {
            out.extend_from_slice(status.line().as_bytes());
            out.push(b'\n');
            let resp = Response {
                // OPTIONS * and CONNECT
                headers: if status == Status::MethodNotAllowed {
                    ALLOW
                } else {
                    ""
                },
                ..Response::text(status)
            };
            let d = Decided {
                consumed: buf.len(),
                connection: Connection::Close,
                head_only: false,
                coding: Coding::Identity,
            };
            (resp, d)
        }
        Parsed::Request(req, f) => {
            // The client asked for gzip, and there is a compressor.
            let gzip = compressor.is_some() && negotiate(req.accept_encoding) == Coding::Gzip;
            let resp = if policy.access != Access::Allowed {
                refuse(policy.access, out)
            } else {
                let gz = compressor.as_deref_mut().filter(|_| gzip);
                let mut ex = Exchange::new(gz, policy.probes_only, policy.server);
                handler.respond(&req, &mut ex, out)
            };
            let coding = match resp.compressible && gzip {
                true => Coding::Gzip,
                false => Coding::Identity,
            };
            if let (Coding::Gzip, false, Some(c)) = (coding, resp.gzipped, compressor) {
                c.compress(out, HEAD_ROOM);
            }
            let connection = match (f.keep_alive && !policy.close, f.http10) {
                (false, _) => Connection::Close,
                (true, true) => Connection::KeepAliveHttp10,
                (true, false) => Connection::KeepAlive,
            };
            let d = Decided {
                consumed: f.consumed,
                connection,
                head_only: req.method == Method::Head,
                coding,
            };
            (resp, d)
        }
    };
    Some(d.answer(resp, policy.headers, out))
}

/// What [`respond`] decides about a request beyond its response.
struct Decided {
    /// The bytes of the buffer it took.
    consumed: usize,
    connection: Connection,
    /// HEAD: the head is sent without its body.
    head_only: bool,
    coding: Coding,
}

impl Decided {
    /// The answer, its head written before the body that `out` holds.
    fn answer(self, resp: Response, headers: &str, out: &mut [u8]) -> Answer {
        let vary = match resp.compressible {
            true => self.coding.headers(),
            false => "",
        };
        let shared_len = resp.shared.as_ref().map_or(0, |s| s.bytes.len());
        let start = write_head(out, &resp, shared_len, self.connection, [vary, headers]);
        let (end, shared) = match self.head_only {
            true => (HEAD_ROOM, None),
            false => (out.len(), resp.shared),
        };
        Answer {
            consumed: self.consumed,
            keep_alive: self.connection != Connection::Close,
            range: start..end,
            gzipped: self.coding == Coding::Gzip,
            shared,
        }
    }
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

/// The connection's transport: the socket itself, or TLS over it.
enum Wire {
    Plain,
    #[cfg(feature = "tls")]
    Tls(Box<crate::tls::Tls>),
}

/// Serves one connection until the client closes it, an error, a
/// timeout or an eviction. While no request bytes are buffered (a new
/// connection, or a kept-alive one between requests) it holds no buffer:
/// it only waits for the socket to become readable. `tls`: the TLS
/// configuration to handshake with first. `probes` is the probe listener's
/// connection: `/healthz` and `/readyz` only. `peer`: the client's
/// address, whose share of the bcrypt budget it spends.
pub async fn serve(
    stream: Rc<Async<TcpStream>>,
    key: Key,
    srv: Rc<Server>,
    tls: Option<guard::TlsConfig>,
    probes: bool,
    peer: IpAddr,
) {
    let limits = &srv.limits;
    // A new connection must send its first request within the header
    // timeout, its TLS handshake included; later ones start when their
    // first byte arrives.
    let mut head_deadline = Instant::now() + limits.header_timeout;
    let Some(mut wire) = handshake(&srv, key, &stream, tls, head_deadline).await else {
        drain(&stream);
        srv.forget(key);
        return;
    };
    let mut inbuf = Vec::new();
    let mut filled = 0;
    let mut served = false;
    'conn: loop {
        // Answer every whole request buffered, in order (pipelining).
        while filled > 0 {
            let loaded = srv.guard.current();
            let Some(g) = gate(&srv, loaded.as_ref(), &inbuf[..filled], probes, peer) else {
                break;
            };
            let access = access(&srv, key, head_deadline, g).await;
            let policy = policy(&srv, loaded.as_ref(), access, probes);
            let Some((out, a)) = respond_with(&srv, policy, &inbuf[..filled]) else {
                break;
            };
            let (keep_alive, consumed) = (a.keep_alive, a.consumed);
            let Some(reply) = seal(&srv, &mut wire, out, a) else {
                break 'conn;
            };
            let now = Instant::now();
            srv.answer(key, reply, now);
            let deadline = now + limits.write_timeout;
            let read = !served || unread::caught_up(&srv, key, &stream, deadline).await;
            if !read || !send(&srv, key, &stream, deadline).await || !keep_alive {
                break 'conn;
            }
            served = true;
            filled -= consumed;
            if filled > 0 || buffered(&wire) {
                // Pipelined: the next head moves to the front and its
                // time starts now. Without one, the wait below sets it.
                inbuf.copy_within(consumed..consumed + filled, 0);
                head_deadline = Instant::now() + limits.header_timeout;
            }
        }
        // When the idle wait ended: the next head's time starts then.
        let mut woke = None;
        if filled == 0 && !buffered(&wire) {
            if !inbuf.is_empty() {
                srv.inbufs.put(std::mem::take(&mut inbuf));
            }
            release(&srv, &mut wire);
            let now = Instant::now();
            let wait_until = match served {
                true => now + limits.idle_timeout,
                false => head_deadline,
            };
            if !wait(&srv, key, &stream, served, wait_until, now).await {
                break;
            }
            if served {
                let now = Instant::now();
                head_deadline = now + limits.header_timeout;
                woke = Some(now);
            }
        }
        make_room(&srv, &mut inbuf, filled);
        let into = &mut inbuf[filled..];
        let Some(n) = read(&srv, key, &stream, &mut wire, head_deadline, into).await else {
            break; // closed, failed, evicted, or too slow to send a head
        };
        if filled == 0 {
            srv.set_phase(key, Phase::Head, woke.unwrap_or_else(Instant::now));
        }
        filled += n;
    }
    hang_up(&srv, key, &stream, wire, inbuf);
}

/// The guard's word: decided at once, or after bcrypt, off this thread,
/// within the header timeout.
async fn access(srv: &Server, key: Key, deadline: Instant, g: Gate) -> Access {
    match g.decided() {
        Some(a) => a,
        // Boxed: bcrypt's wait is rare (a cache miss), and inline its
        // state would make every connection's task larger.
        None => before(srv, key, deadline, Box::pin(g.finish()))
            .await
            .unwrap_or(Access::Busy),
    }
}

/// Closes the connection and gives its buffers back.
fn hang_up(srv: &Server, key: Key, stream: &Async<TcpStream>, mut wire: Wire, inbuf: Vec<u8>) {
    close(srv, key, stream, &mut wire);
    drain(stream);
    if !inbuf.is_empty() {
        srv.inbufs.put(inbuf);
    }
    release(srv, &mut wire);
    srv.forget(key);
}

/// The connection's wire: TLS once `tls` is handshaken with, plain
/// without it; `None` when the handshake failed.
async fn handshake(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    tls: Option<guard::TlsConfig>,
    deadline: Instant,
) -> Option<Wire> {
    #[cfg(feature = "tls")]
    if let Some(config) = tls {
        // Boxed: inline, its state would make every connection's task
        // larger for good, for a handshake that ends before the first
        // request.
        return Box::pin(crate::handshake::run(srv, key, stream, config, deadline))
            .await
            .map(Wire::Tls);
    }
    #[cfg(not(feature = "tls"))]
    let _ = (srv, key, stream, tls, deadline);
    Some(Wire::Plain)
}

/// What the server, the guard and the listener decide about a request.
fn policy<'a>(
    srv: &'a Server,
    loaded: Option<&'a Arc<guard::Loaded>>,
    access: Access,
    probes: bool,
) -> Policy<'a> {
    Policy {
        close: srv.crowded(),
        access,
        probes_only: probes,
        headers: guard::headers(loaded),
        server: Some(srv),
    }
}

/// The response to the request at the start of `head`, in a pooled
/// buffer; `None` while the head is incomplete.
fn respond_with(srv: &Server, policy: Policy, head: &[u8]) -> Option<(Vec<u8>, Answer)> {
    let mut out = srv.outbufs.take();
    let answered = {
        let mut c = srv.compressor.borrow_mut();
        respond(head, &*srv.handler, policy, Some(&mut c), &mut out)
    };
    let Some(a) = answered else {
        srv.outbufs.put(out);
        return None;
    };
    if a.gzipped {
        srv.counts.gzipped();
    }
    Some((out, a))
}

/// Waits for the client's next bytes until `until`, idle from `now` on
/// between requests once one was `served`; false when none came in time.
async fn wait(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    served: bool,
    until: Instant,
    now: Instant,
) -> bool {
    if served {
        srv.set_phase(key, Phase::Idle, now);
    }
    let ready = before(srv, key, until, stream.readable()).await;
    matches!(ready, Some(Ok(())))
}

/// A head buffer to read into: a pooled one, or twice the size when a
/// partial head fills it, up to MAX_HEAD (a full MAX_HEAD was refused by
/// the parser).
fn make_room(srv: &Server, inbuf: &mut Vec<u8>, filled: usize) {
    if inbuf.is_empty() {
        *inbuf = srv.inbufs.take();
    } else if filled == inbuf.len() {
        inbuf.resize((inbuf.len() * 2).min(MAX_HEAD), 0);
    }
}

/// The guard's word on the whole request head at the start of `buf`;
/// `None` while the head is incomplete. A head the parser refuses needs
/// no word: it gets its 400.
fn gate(
    srv: &Server,
    loaded: Option<&Arc<guard::Loaded>>,
    buf: &[u8],
    probes: bool,
    peer: IpAddr,
) -> Option<Gate> {
    if loaded.is_none() {
        // Nothing configured; `respond` tells a whole head from a part.
        return Some(Gate::Decided(Access::Allowed));
    }
    match parse(buf) {
        Parsed::Partial => None,
        Parsed::Reject(_) => Some(Gate::Decided(Access::Allowed)),
        Parsed::Request(req, _) => {
            let probe = srv.handler.is_probe(req.path);
            Some(
                srv.guard
                    .check(loaded, probe, req.authorization, peer, probes),
            )
        }
    }
}

/// Whether request bytes wait inside the transport.
fn buffered(wire: &Wire) -> bool {
    match wire {
        Wire::Plain => false,
        #[cfg(feature = "tls")]
        Wire::Tls(t) => t.buffered(),
    }
}

/// Hands the transport's buffer back to the pool while it holds nothing.
fn release(srv: &Server, wire: &mut Wire) {
    #[cfg(feature = "tls")]
    if let Wire::Tls(t) = wire
        && let Some(b) = t.release()
    {
        srv.tlsbufs.put(b);
    }
    let _ = (srv, wire);
}

/// Reads request bytes into `buf` before `deadline`: at least one, or
/// `None` when the connection is done (closed, failed, too slow).
async fn read(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    wire: &mut Wire,
    deadline: Instant,
    buf: &mut [u8],
) -> Option<usize> {
    match wire {
        // Most often the bytes are there already (the wait saw them come):
        // read them without arming the deadline.
        Wire::Plain if let Ok(n) = stream.get_ref().read(buf) => (n > 0).then_some(n),
        Wire::Plain => match before(srv, key, deadline, (&*stream).read(buf)).await {
            Some(Ok(n)) if n > 0 => Some(n),
            _ => None,
        },
        #[cfg(feature = "tls")]
        Wire::Tls(tls) => crate::handshake::read(srv, key, stream, tls, deadline, buf).await,
    }
}

/// The response `a`, built in `out`, as the wire sends it: as it is, or
/// sealed into TLS records in another buffer, from its parts where they
/// lie (`out` going back to the pool).
fn seal(srv: &Server, wire: &mut Wire, out: Vec<u8>, a: Answer) -> Option<Reply> {
    let _ = srv;
    match wire {
        Wire::Plain => Some(a.reply(out)),
        #[cfg(feature = "tls")]
        Wire::Tls(tls) => {
            let reply = a.reply(out);
            let mut sealed = srv.outbufs.take();
            sealed.clear();
            let ok = tls.seal(reply.parts(), &mut sealed).is_ok();
            srv.outbufs.put(reply.into_buffer());
            if !ok {
                srv.outbufs.put(sealed);
                return None;
            }
            let len = sealed.len();
            Some(Reply::new(sealed, 0..len, None))
        }
    }
}

/// Ends the transport: a TLS close_notify, best effort, after the 503 an
/// eviction owes (over plain HTTP the eviction wrote it).
fn close(srv: &Server, key: Key, stream: &Async<TcpStream>, wire: &mut Wire) {
    #[cfg(feature = "tls")]
    if let Wire::Tls(tls) = wire {
        let mut out = srv.outbufs.take();
        out.clear();
        if srv.owes_full(key) {
            let _ = tls.seal([crate::room::FULL, &[], &[]], &mut out);
        }
        tls.close(&mut out);
        // The socket's buffer is empty between requests: one write fits.
        let _ = std::io::Write::write(&mut stream.get_ref(), &out);
        srv.outbufs.put(out);
    }
    let _ = (srv, key, stream, wire);
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
