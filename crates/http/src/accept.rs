//! The accept loop: it admits connections up to the cap, makes room or
//! waits at it (the policies are in `server.rs`), and gives each admitted
//! connection its own task.

use crate::conn;
use crate::guard;
use crate::room::Lane;
use crate::server::Server;
use async_io::{Async, Timer};
use smol::LocalExecutor;
use smol::future::FutureExt;
use std::net::TcpListener;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The kernel's queue of connections not yet accepted, as deep as the
/// kernel allows (`net.core.somaxconn` caps it): at the cap, newcomers wait
/// there. std's 128 overflows under a flood, and an overflowing queue drops
/// connection attempts, which clients retry only a second later.
const BACKLOG: i32 = 4096;

/// Whether connections wait in the listener's queue (a poll that does not
/// wait).
fn waiting(listener: &Async<TcpListener>) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(listener.get_ref(), PollFlags::IN)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0)
}

/// Accepts connections on `listener` until the executor is dropped.
/// `probes`: the probe listener, which serves `/healthz` and `/readyz`
/// only, in plain HTTP; the other serves everything, over TLS when the
/// web config says so.
pub async fn serve(
    ex: &LocalExecutor<'_>,
    listener: Async<TcpListener>,
    srv: Rc<Server>,
    probes: bool,
) {
    if let Err(e) = rustix::net::listen(listener.get_ref(), BACKLOG) {
        log::warn!("cannot deepen the listen queue: {e}");
    }
    let lane = if probes { Lane::Probes } else { Lane::Main };
    let cap = srv.cap(lane);
    let mut accepted = 0u32;
    // Only the main lane's queue closes keep-alive connections.
    let crowded = |v: bool| {
        if lane == Lane::Main {
            srv.crowded.set(v)
        }
    };
    loop {
        // At most cap + 1 sockets: wait for evicted ones to close first.
        while srv.entries(lane) > cap {
            srv.room.changed().await;
        }
        let (stream, peer) = match listener.get_ref().accept() {
            Ok((stream, peer)) => (stream, peer.ip()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Nobody waits: keep-alive is back.
                crowded(false);
                let _ = listener.readable().await;
                continue;
            }
            Err(e) => {
                // Out of fds, most likely: back off instead of spinning.
                log::warn!("accept failed: {e}");
                Timer::after(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Responses go out in one write; don't let Nagle hold them.
        let _ = stream.set_nodelay(true);
        let stream = match Async::new(stream) {
            Ok(stream) => Rc::new(stream),
            Err(e) => {
                log::warn!("cannot watch a new connection: {e}");
                continue;
            }
        };
        if srv.admitted(lane) >= cap && !srv.make_room(lane) {
            // Until the queue is empty, every response closes its
            // connection, so that those waiting get their turn.
            crowded(true);
            let since = Instant::now();
            while srv.admitted(lane) >= cap && !srv.make_room(lane) {
                // A close or a phase change wakes it, and so does a silent
                // connection's becoming evictable, which nothing else marks.
                match srv.next_evictable(lane) {
                    Some(at) => {
                        srv.room
                            .changed()
                            .or(async {
                                Timer::at(at).await;
                            })
                            .await
                    }
                    None => srv.room.changed().await,
                }
            }
            srv.paused(since.elapsed());
        }
        let tls = match probes {
            true => None,
            false => guard::tls(srv.guard.current().as_ref()),
        };
        let key = srv.admit(stream.clone(), tls.is_some(), lane);
        ex.spawn(conn::serve(stream, key, srv.clone(), tls, probes, peer))
            .detach();
        if srv.crowded.get() && !waiting(&listener) {
            // The queue is served: keep-alive is back.
            crowded(false);
        }
        // Let the connections run between bursts of accepts.
        accepted = accepted.wrapping_add(1);
        if accepted.is_multiple_of(16) {
            smol::future::yield_now().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Exchange, Handler, Limits, Request, Response, Server, Status};
    use std::net::{TcpListener, TcpStream};
    use std::rc::Rc;

    struct Empty;

    impl Handler for Empty {
        fn respond(&self, _: &Request, _: &mut Exchange, _: &mut Vec<u8>) -> Response {
            Response::text(Status::Ok)
        }
        fn is_probe(&self, _: &str) -> bool {
            false
        }
    }

    /// Every open connection holds its task's state, `max_connections` of
    /// them at a flood: what only some connections need (bcrypt's wait, a
    /// TLS handshake) is boxed when needed, not inline in every task
    /// (inline, they took it from 648 to 1,648 bytes with TLS built in).
    #[test]
    fn a_connections_task_stays_small() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let stream = Rc::new(async_io::Async::new(s).unwrap());
        let guard = crate::guard::Guard::new(Default::default(), false);
        let srv = Rc::new(Server::new(Box::new(Empty), Limits::default(), guard));
        let key = srv.admit(stream.clone(), false, super::Lane::Main);
        let peer = "127.0.0.1".parse().unwrap();
        let task = super::conn::serve(stream, key, srv, None, false, peer);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 1024, "a connection's task holds {size} bytes");
    }
}
