//! The accept loop and what every connection shares: the limits, the
//! registry of open connections, and pools of buffers, so that an idle
//! keep-alive connection holds no buffer at all.

use super::deadline::Deadlines;
use super::{Context, conn};
use crate::config::Limits;
use async_io::{Async, Timer};
use smol::LocalExecutor;
use std::cell::{Cell, RefCell};
use std::io::Write;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Slot {
    id: u64,
    stream: Rc<Async<TcpStream>>,
    /// Since when it has waited for its next request, if it has.
    idle_since: Option<Instant>,
}

/// Buffers kept for reuse beyond this many are freed, so a burst of
/// concurrent requests does not stay resident.
const POOL: usize = 16;

pub struct Server {
    pub ctx: Context,
    pub limits: Limits,
    /// The connections' header, idle and write deadlines.
    pub deadlines: Arc<Deadlines>,
    conns: RefCell<Vec<Slot>>,
    next_id: Cell<u64>,
    in_flight: Cell<usize>,
    inbufs: RefCell<Vec<Vec<u8>>>,
    outbufs: RefCell<Vec<Vec<u8>>>,
}

impl Server {
    pub fn new(ctx: Context, limits: Limits) -> Server {
        Server {
            deadlines: Deadlines::start(limits.max_connections),
            conns: RefCell::new(Vec::with_capacity(limits.max_connections)),
            ctx,
            limits,
            next_id: Cell::new(0),
            in_flight: Cell::new(0),
            inbufs: RefCell::new(Vec::with_capacity(POOL)),
            outbufs: RefCell::new(Vec::with_capacity(POOL)),
        }
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// A request head buffer, zeroed once when first made.
    pub fn take_inbuf(&self) -> Vec<u8> {
        self.inbufs
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| vec![0; conn::MAX_HEAD])
    }

    pub fn put_inbuf(&self, b: Vec<u8>) {
        let mut pool = self.inbufs.borrow_mut();
        if pool.len() < POOL {
            pool.push(b);
        }
    }

    /// A response buffer, grown by earlier responses.
    pub fn take_outbuf(&self) -> Vec<u8> {
        self.outbufs.borrow_mut().pop().unwrap_or_default()
    }

    pub fn put_outbuf(&self, b: Vec<u8>) {
        let mut pool = self.outbufs.borrow_mut();
        if pool.len() < POOL {
            pool.push(b);
        }
    }

    /// Counts a request in flight until the guard drops; `None` when
    /// `max_requests` are already in flight.
    pub fn begin_request(self: &Rc<Server>) -> Option<InFlight> {
        let n = self.in_flight.get();
        (n < self.limits.max_requests).then(|| {
            self.in_flight.set(n + 1);
            InFlight(self.clone())
        })
    }

    pub fn set_idle(&self, id: u64, idle: bool) {
        if let Some(s) = self.conns.borrow_mut().iter_mut().find(|s| s.id == id) {
            s.idle_since = idle.then(Instant::now);
        }
    }

    /// Registers a new connection, closing the oldest idle one if the cap
    /// is reached; `None` when at the cap with no idle connection.
    fn admit(&self, stream: &Rc<Async<TcpStream>>) -> Option<u64> {
        let mut conns = self.conns.borrow_mut();
        if conns.len() >= self.limits.max_connections {
            let oldest = conns
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.idle_since.map(|t| (t, i)))
                .min()?;
            let evicted = conns.swap_remove(oldest.1);
            // Its task sees end-of-stream and finishes.
            let _ = evicted.stream.get_ref().shutdown(Shutdown::Both);
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        // Idle until its first byte: silent connections are evictable.
        conns.push(Slot {
            id,
            stream: stream.clone(),
            idle_since: Some(Instant::now()),
        });
        Some(id)
    }

    pub fn forget(&self, id: u64) {
        let mut conns = self.conns.borrow_mut();
        if let Some(i) = conns.iter().position(|s| s.id == id) {
            conns.swap_remove(i);
        }
    }
}

/// A request counted in flight.
pub struct InFlight(Rc<Server>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.set(self.0.in_flight.get() - 1);
    }
}

const FULL: &[u8] =
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
Content-Length: 26\r\nConnection: close\r\n\r\ntoo many open connections\n";

pub async fn serve(ex: &LocalExecutor<'_>, listener: Async<TcpListener>, srv: Rc<Server>) {
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                // Responses go out in one write; don't let Nagle hold them.
                let _ = stream.get_ref().set_nodelay(true);
                let stream = Rc::new(stream);
                match srv.admit(&stream) {
                    Some(id) => ex.spawn(conn::serve(stream, id, srv.clone())).detach(),
                    // One non-blocking write into an empty socket buffer:
                    // it fits, and the close follows.
                    None => drop(stream.get_ref().write(FULL)),
                }
            }
            Err(e) => {
                // Out of fds, most likely: back off instead of spinning.
                log::warn!("accept failed: {e}");
                Timer::after(Duration::from_millis(100)).await;
            }
        }
    }
}
