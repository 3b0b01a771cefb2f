//! Reading HTTP/1.1 responses off a socket, for every test (and the
//! scrape bench) that talks to the exporter: one response at a time,
//! never past its end, so the next one on a keep-alive connection stays
//! in the socket.
#![allow(dead_code)] // each user takes its own part

use std::io::Read;
use std::net::TcpStream;

/// The most a response head may take.
const MAX_HEAD: usize = 16 * 1024;

/// The longest a response head may stop part way.
const STUCK_HEAD: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads one response into `buf` (cleared first): its head and, unless
/// `head_only` (a HEAD request), its `Content-Length` of body. Returns the
/// head's length, its blank line included. The head is found by peeking,
/// so nothing past the response is taken off the socket.
pub fn read_response_into(s: &mut TcpStream, buf: &mut Vec<u8>, head_only: bool) -> usize {
    buf.clear();
    buf.resize(MAX_HEAD, 0);
    // A peek of a partial head returns at once: wait for more, bounded.
    let (mut seen, mut since) = (0, std::time::Instant::now());
    let head_len = loop {
        let n = match s.peek(buf) {
            // A stop and continue of this process interrupts a read with a
            // timeout even without a signal handler: read again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            n => n.expect("read a response head"),
        };
        assert!(n > 0, "closed before a response");
        if let Some(h) = buf[..n].windows(4).position(|w| w == b"\r\n\r\n") {
            break h + 4;
        }
        assert!(n < MAX_HEAD, "a response head over {MAX_HEAD} bytes");
        // Part of a head: the rest is on its way.
        if n > seen {
            (seen, since) = (n, std::time::Instant::now());
            std::thread::yield_now();
        } else {
            let stuck = since.elapsed();
            assert!(stuck < STUCK_HEAD, "{n} bytes of a head for {stuck:?}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let head = std::str::from_utf8(&buf[..head_len]).expect("an ASCII response head");
    assert!(head.starts_with("HTTP/1.1 "), "not a response: {head:?}");
    let body = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("Content-Length is always set")
        .parse::<usize>()
        .expect("a numeric Content-Length");
    let len = head_len + if head_only { 0 } else { body };
    buf.resize(len, 0);
    s.read_exact(buf).expect("read the whole response");
    head_len
}
