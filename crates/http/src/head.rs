//! A response's head: its status line and headers, written just before
//! its body in the room the connection left for them.

use crate::message::Response;

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
/// into place (no formatting machinery, no buffer on the side). The
/// pieces are fixed arrays, walked by plain loops: as one iterator chain
/// walked twice they cost a scrape several hundred instructions.
pub fn write_head(
    out: &mut [u8],
    resp: &Response,
    shared: usize,
    connection: Connection,
    more: [&str; 2],
) -> usize {
    let mut digits = [0u8; 20];
    let body_len = base::numbers::digits((out.len() - HEAD_ROOM + shared) as u64, &mut digits);
    let status: [&[u8]; 7] = [
        b"HTTP/1.1 ",
        resp.status.line().as_bytes(),
        b"\r\nContent-Type: ",
        resp.content_type.as_bytes(),
        b"\r\nContent-Length: ",
        body_len,
        b"\r\n",
    ];
    let end = [more[0], more[1], connection.header(), "\r\n"].map(str::as_bytes);
    let mut len = status.iter().chain(&end).map(|p| p.len()).sum::<usize>();
    ours(resp.headers, more[1], |line| len += line.len());
    let start = HEAD_ROOM.saturating_sub(len);
    let room = &mut out[..HEAD_ROOM];
    let mut at = start;
    let mut put = |p: &[u8]| match room.get_mut(at..at + p.len()) {
        Some(to) => {
            to.copy_from_slice(p);
            at += p.len();
        }
        // Past the room: nothing after it is written either.
        None => at = HEAD_ROOM + 1,
    };
    status.iter().for_each(|p| put(p));
    ours(resp.headers, more[1], |line| put(line.as_bytes()));
    end.iter().for_each(|p| put(p));
    start
}

/// Each of the response's own header lines (`headers`) that the web
/// config's (`theirs`) do not replace: a name there wins.
fn ours(headers: &str, theirs: &str, mut f: impl FnMut(&str)) {
    if headers.is_empty() {
        return;
    }
    for line in headers.split_inclusive('\n') {
        let name = line.split(':').next().unwrap_or("");
        let replaced = theirs.split('\n').any(|l| {
            l.split(':')
                .next()
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
        });
        if !replaced {
            f(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Status, WWW_AUTHENTICATE};

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
