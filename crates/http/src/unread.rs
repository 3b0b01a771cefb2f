//! What a client has left unread, and a pipelined response held in its
//! slot, not written, until the client has read all but [`UNREAD`] bytes
//! of what it was sent.
//!
//! Without that hold, a client that pipelines and never reads takes
//! response after response until the kernel's send buffer is full, and
//! the kernel grows it (`tcp_wmem`, 4 MiB by default) for such a client
//! too: the HTTP thread renders and copies megabytes into each before its
//! writes block, and a scrape behind 200 of them waits for all of it. A
//! response still goes out in one write, however large; the next one
//! waits, its client counted as one that is not reading (its slot taken
//! first, closed by a newer snapshot or a stop), as a blocked write is.

use crate::server::{Key, Server};
use async_io::Async;
use rustix::ioctl::{Getter, Opcode, ioctl};
use rustix::net::sockopt;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// The most bytes a client may leave unread in the kernel and get another
/// response: under one 64-GPU scrape (570 KB), so a client that does not
/// read takes one such response, where the kernel's buffers take seven.
pub const UNREAD: usize = 256 * 1024;

/// The first wait before looking again whether the client read; it
/// doubles up to [`LAST_LOOK`] (the kernel tells no one when a client
/// reads).
const FIRST_LOOK: Duration = Duration::from_millis(1);
const LAST_LOOK: Duration = Duration::from_millis(100);

/// Waits, while connection `key`'s response holds its slot, until its
/// client has left at most [`UNREAD`] bytes unread, before `deadline`;
/// false when it did not, was evicted or reset the connection (the count
/// then stays as it was).
pub async fn caught_up(
    srv: &Server,
    key: Key,
    stream: &Async<TcpStream>,
    deadline: Instant,
) -> bool {
    let (mut last, mut pause) = (unacked(stream), FIRST_LOOK);
    while last > UNREAD {
        let at = (Instant::now() + pause).min(deadline);
        srv.deadlines.sleep(key.id, at).await;
        let now = unacked(stream);
        let reset = !matches!(sockopt::socket_error(stream), Ok(Ok(())));
        if reset || !srv.answering(key, now < last) || (now > UNREAD && at >= deadline) {
            return false;
        }
        (last, pause) = (now, (pause * 2).min(LAST_LOOK));
    }
    true
}

/// The bytes written to `fd` that its peer has not acknowledged: on
/// loopback, those not yet in the client's receive buffer. 0 where the
/// kernel does not say (nothing is then held).
#[allow(unsafe_code)] // an ioctl rustix has no safe call for; see NVML's ffi.rs
pub fn unacked(fd: impl AsFd) -> usize {
    /// `SIOCOUTQ` (`TIOCOUTQ`): the unacknowledged bytes of a TCP
    /// socket's send queue, written as an int.
    const SIOCOUTQ: Opcode = 0x5411;
    // SAFETY: SIOCOUTQ writes one `c_int` through the pointer it is
    // given, and `Getter<_, c_int>` gives a pointer to its own `c_int`.
    let get = unsafe { Getter::<SIOCOUTQ, std::ffi::c_int>::new() };
    // SAFETY: as above: the opcode writes that `c_int` and nothing else,
    // and on an fd that is not a TCP socket fails without writing.
    let n = unsafe { ioctl(fd, get) };
    n.map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    #[test]
    fn unacked_counts_what_the_peer_has_not_taken() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut server, _) = l.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        assert_eq!(unacked(&server), 0);
        // More than the client's receive buffer takes: the rest waits.
        let chunk = vec![b'x'; 1 << 20];
        let written = server.write(&chunk).unwrap();
        let held = rustix::net::sockopt::socket_recv_buffer_size(&client).unwrap();
        let n = unacked(&server);
        assert!(n <= written && n + held >= written, "{n} of {written}");
        // Read, it falls to nothing.
        let mut got = vec![0; written];
        client.read_exact(&mut got).unwrap();
        let t = Instant::now();
        while unacked(&server) > 0 {
            assert!(t.elapsed() < Duration::from_secs(5), "{}", unacked(&server));
            std::thread::sleep(Duration::from_millis(1));
        }
        // Not a socket: no count, nothing held.
        assert_eq!(unacked(std::fs::File::open("/dev/null").unwrap()), 0);
    }
}
