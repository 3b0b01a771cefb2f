//! A response's head: its status line and headers, written just before
//! its body in the room the connection left for them.

use super::router::Response;

/// Room for the response head: the longest status line and the server's
/// own headers take under 512 bytes, the web config's at most
/// [`MAX_CONFIGURED`].
pub const HEAD_ROOM: usize = 512 + MAX_CONFIGURED;
/// The most bytes of header lines a web config may add to a response.
const MAX_CONFIGURED: usize = 1024;
#[cfg(feature = "tls")]
const _: () = assert!(webconfig::MAX_HEADER_BYTES <= MAX_CONFIGURED);

/// Whether the connection stays open after the response, as its
/// `Connection` header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connection {
    Close,
    /// HTTP/1.1: open unless said otherwise, so nothing to say.
    KeepAlive,
    /// HTTP/1.0 asked for keep-alive: it is said back.
    KeepAliveHttp10,
}

impl Connection {
    pub fn header(self) -> &'static str {
        match self {
            Connection::Close => "Connection: close\r\n",
            Connection::KeepAliveHttp10 => "Connection: keep-alive\r\n",
            Connection::KeepAlive => "",
        }
    }
}

/// Writes the status line and headers just before the body and returns
/// where the response starts: measured first, then copied piece by piece
/// into place (no formatting machinery, no buffer on the side).
pub fn write_head(
    out: &mut [u8],
    resp: &Response,
    shared: usize,
    connection: Connection,
    more: [&str; 2],
) -> usize {
    let mut digits = [0u8; 20];
    let body_len = base::numbers::digits((out.len() - HEAD_ROOM + shared) as u64, &mut digits);
    // Ours, less those the web config sets (`more[1]`): its win.
    // Split at '\n' rather than "\r\n": the same lines, without a
    // substring searcher set up for every response.
    let ours = resp.headers.split_inclusive('\n').filter(|line| {
        let name = line.split(':').next().unwrap_or("");
        !more[1].split('\n').any(|l| {
            l.split(':')
                .next()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        })
    });
    let status = [
        "HTTP/1.1 ",
        resp.status.line(),
        "\r\nContent-Type: ",
        resp.content_type,
        "\r\nContent-Length: ",
    ];
    let end = [more[0], more[1], connection.header(), "\r\n"];
    let pieces = (status.into_iter().map(str::as_bytes))
        .chain([body_len, b"\r\n"])
        .chain(ours.chain(end).map(str::as_bytes));
    let len: usize = pieces.clone().map(<[u8]>::len).sum();
    // Fits: the longest status, content type and headers of our own are
    // under 512 bytes, and the configured ones at most MAX_CONFIGURED.
    let start = HEAD_ROOM.saturating_sub(len);
    let mut at = start;
    for p in pieces {
        let Some(room) = out[..HEAD_ROOM].get_mut(at..at + p.len()) else {
            break;
        };
        room.copy_from_slice(p);
        at += p.len();
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::router::{Status, WWW_AUTHENTICATE};

    /// The head as sent: from where `write_head` says it starts to the body.
    fn head(resp: &Response, body: usize, shared: usize, c: Connection, more: [&str; 2]) -> String {
        let mut out = vec![b'?'; HEAD_ROOM + body];
        let start = write_head(&mut out, resp, shared, c, more);
        assert!(out[..start].iter().all(|&b| b == b'?'), "nothing before it");
        String::from_utf8(out[start..HEAD_ROOM].to_vec()).unwrap()
    }

    #[test]
    fn the_head_ends_where_the_body_starts_and_counts_the_shared_bytes() {
        let ok = Response::text(Status::Ok);
        assert_eq!(
            head(&ok, 3, 1_000_000, Connection::KeepAlive, ["", ""]),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: 1000003\r\n\r\n"
        );
        assert_eq!(
            head(
                &ok,
                0,
                0,
                Connection::Close,
                ["Vary: Accept-Encoding\r\n", ""]
            ),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: 0\r\nVary: Accept-Encoding\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_header_the_web_config_sets_replaces_ours() {
        let denied = Response {
            headers: WWW_AUTHENTICATE,
            ..Response::text(Status::Unauthorized)
        };
        let theirs = "www-authenticate: Basic realm=\"theirs\"\r\nX-Frame-Options: deny\r\n";
        let h = head(&denied, 17, 0, Connection::KeepAliveHttp10, ["", theirs]);
        assert_eq!(
            h,
            format!(
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Length: 17\r\n{theirs}Connection: keep-alive\r\n\r\n"
            )
        );
        // Without the web config's, ours.
        let h = head(&denied, 17, 0, Connection::KeepAlive, ["", ""]);
        assert!(h.ends_with(&format!("{WWW_AUTHENTICATE}\r\n")), "{h}");
    }
}
