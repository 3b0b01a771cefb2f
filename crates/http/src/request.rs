//! A request head, strictly. The request line is read here, by hand: so
//! that `HTTP/1.x` with x > 1 counts as HTTP/1.1 (RFC 9110 §6.2; httparse
//! refuses it) and the target's form is known (RFC 9112 §3.2). The header
//! fields are httparse's (`parse_headers`), and `Host` is checked as RFC
//! 9112 §3.2 says: missing on HTTP/1.1, repeated or malformed is 400.
//!
//! - origin-form (`/metrics?x`) is routed by its path;
//! - absolute-form (`http://host:port/metrics`) by its path, its
//!   authority taking the place of `Host` (a `Host` line may then be
//!   missing; one that is there must still be valid and single);
//! - `OPTIONS *` and `CONNECT` (authority-form) get 405;
//! - anything else, `*` with another method included, is 400.

use crate::message::{Method, Request, Status};

/// The most a request head may take.
pub const MAX_HEAD: usize = 8 * 1024;
pub const MAX_HEADERS: usize = 64;
/// The header fields parsed into a small array first: a scraper sends a
/// handful, and zeroing all of [`MAX_HEADERS`] cost a fifth of a parse.
const FEW_HEADERS: usize = 16;

/// What the parser made of the buffered bytes.
pub enum Parsed<'a> {
    Request(Request<'a>, Framing),
    Partial,
    /// Answer with this status and close.
    Reject(Status),
}

/// How a request sits on the connection.
#[derive(Debug, PartialEq)]
pub struct Framing {
    /// Bytes the request head took.
    pub consumed: usize,
    pub keep_alive: bool,
    pub http10: bool,
}

/// The request line: its parts, and the bytes it took (with the empty
/// lines before it, which RFC 9112 §2.2 lets a server skip).
struct Line<'a> {
    method: &'a [u8],
    target: &'a str,
    http10: bool,
    len: usize,
}

fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The request line at the start of `buf`; `Ok(None)` while it is
/// incomplete and nothing seen so far is wrong.
fn request_line(buf: &[u8]) -> Result<Option<Line<'_>>, Status> {
    let mut i = 0;
    loop {
        match &buf[i..] {
            [b'\r', b'\n', ..] => i += 2,
            [b'\n', ..] => i += 1,
            [] | [b'\r'] => return Ok(None),
            _ => break,
        }
    }
    let start = i;
    // Bytes from `at` on while `ok` holds; `None` when the buffer ends first.
    let run =
        |at: usize, ok: fn(u8) -> bool| buf[at..].iter().position(|&b| !ok(b)).map(|n| at + n);
    let Some(m_end) = run(start, tchar) else {
        return Ok(None);
    };
    if m_end == start || buf[m_end] != b' ' {
        return Err(Status::BadRequest);
    }
    let t_start = m_end + 1;
    let Some(t_end) = run(t_start, |b| b.is_ascii_graphic()) else {
        return Ok(None);
    };
    if t_end == t_start || buf[t_end] != b' ' {
        return Err(Status::BadRequest);
    }
    // "HTTP/" DIGIT "." DIGIT, then CRLF (or a bare LF, as httparse takes).
    let v = &buf[t_end + 1..];
    let want = b"HTTP/1.";
    let n = v.len().min(want.len());
    if v[..n] != want[..n] {
        // A major version other than 1 (the HTTP/2 preface): 400.
        return Err(Status::BadRequest);
    }
    let rest = match v.get(7) {
        None => return Ok(None),
        Some(d) if d.is_ascii_digit() => &v[8..],
        Some(_) => return Err(Status::BadRequest),
    };
    let eol = match rest {
        [] | [b'\r'] => return Ok(None),
        [b'\r', b'\n', ..] => 2,
        [b'\n', ..] => 1,
        _ => return Err(Status::BadRequest),
    };
    // Every byte is ASCII by now.
    let text = |r: std::ops::Range<usize>| std::str::from_utf8(&buf[r]).unwrap_or_default();
    Ok(Some(Line {
        method: &buf[start..m_end],
        target: text(t_start..t_end),
        http10: v[7] == b'0',
        len: t_end + 1 + 8 + eol,
    }))
}

/// `host [":" port]` as RFC 3986 spells an authority without userinfo:
/// an IP literal in brackets, or a reg-name/IPv4 of unreserved,
/// percent-encoded and sub-delim characters; the port all digits.
/// `empty_ok`: a `Host` line may be empty, an `http` URI's host may not.
fn valid_authority(a: &[u8], empty_ok: bool) -> bool {
    let (host, port) = match a.iter().rposition(|&b| b == b':') {
        Some(i) if !a[i..].contains(&b']') => (&a[..i], &a[i + 1..]),
        _ => (a, &a[a.len()..]),
    };
    if port.len() > 5 || !port.iter().all(u8::is_ascii_digit) {
        return false;
    }
    match host {
        [] => empty_ok && a.is_empty(),
        [b'[', inner @ .., b']'] => {
            !inner.is_empty()
                && inner
                    .iter()
                    .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        }
        _ => {
            let mut i = 0;
            while i < host.len() {
                match host[i] {
                    b'%' if host
                        .get(i + 1..i + 3)
                        .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) =>
                    {
                        i += 3
                    }
                    b if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b) => i += 1,
                    _ => return false,
                }
            }
            true
        }
    }
}

/// Where an absolute-form target points: its authority and its path
/// (with any query), `None` when it is not an `http(s)` URI.
fn absolute(target: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = target.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    Some((authority, path))
}

/// What the head's headers say that a request needs.
#[derive(Default)]
struct Headers<'b> {
    accept: Option<&'b [u8]>,
    accept_encoding: Option<&'b [u8]>,
    authorization: Option<&'b [u8]>,
    close: bool,
    keep_alive: bool,
    hosts: u32,
}

/// The headers a request needs; `None` for a head to refuse with 400:
/// two Hosts or a bad one, two credentials, a body.
fn read_headers<'b>(headers: &[httparse::Header<'b>]) -> Option<Headers<'b>> {
    let mut out = Headers::default();
    let mut lengths = 0;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("host") {
            out.hosts += 1;
            if out.hosts > 1 || !valid_authority(h.value.trim_ascii(), true) {
                return None;
            }
        } else if name.eq_ignore_ascii_case("accept") {
            out.accept = Some(h.value);
        } else if name.eq_ignore_ascii_case("accept-encoding") {
            out.accept_encoding = Some(h.value);
        } else if name.eq_ignore_ascii_case("authorization") {
            // More than one is no credential at all (RFC 9110 §5.3).
            if out.authorization.is_some() {
                return None;
            }
            out.authorization = Some(h.value);
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                out.close |= token.eq_ignore_ascii_case(b"close");
                out.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            // No route takes a body; a non-empty one would desync us.
            lengths += 1;
            if h.value.trim_ascii() != b"0" || lengths > 1 {
                return None;
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return None;
        }
    }
    Some(out)
}

/// Parses the request head at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed<'_> {
    let partial = |too_big: Status| {
        if buf.len() < MAX_HEAD {
            Parsed::Partial
        } else {
            Parsed::Reject(too_big)
        }
    };
    let line = match request_line(buf) {
        // A full buffer without a whole request line is a long URI.
        Ok(None) => return partial(Status::UriTooLong),
        Ok(Some(line)) => line,
        Err(status) => return Parsed::Reject(status),
    };
    let rest = &buf[line.len..];
    let mut few = [httparse::EMPTY_HEADER; FEW_HEADERS];
    let mut many;
    let parsed = match httparse::parse_headers(rest, &mut few) {
        Err(httparse::Error::TooManyHeaders) => {
            many = [httparse::EMPTY_HEADER; MAX_HEADERS];
            httparse::parse_headers(rest, &mut many)
        }
        parsed => parsed,
    };
    let (n, headers) = match parsed {
        Ok(httparse::Status::Complete((n, headers))) => (line.len + n, headers),
        Ok(httparse::Status::Partial) => return partial(Status::HeadersTooLarge),
        Err(httparse::Error::TooManyHeaders) => return Parsed::Reject(Status::HeadersTooLarge),
        Err(_) => return Parsed::Reject(Status::BadRequest),
    };
    let Some(mut h) = read_headers(headers) else {
        return Parsed::Reject(Status::BadRequest);
    };
    let method = match line.method {
        b"GET" => Method::Get,
        b"HEAD" => Method::Head,
        // No tunnels and no server-wide options here.
        b"CONNECT" => return Parsed::Reject(Status::MethodNotAllowed),
        b"OPTIONS" if line.target == "*" => return Parsed::Reject(Status::MethodNotAllowed),
        _ => Method::Other,
    };
    let target = if line.target.starts_with('/') {
        line.target
    } else if let Some((authority, path)) = absolute(line.target) {
        if !valid_authority(authority.as_bytes(), false) {
            return Parsed::Reject(Status::BadRequest);
        }
        // The authority stands in for a missing Host.
        h.hosts = 1;
        path
    } else {
        return Parsed::Reject(Status::BadRequest);
    };
    if h.hosts == 0 && !line.http10 {
        return Parsed::Reject(Status::BadRequest);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    // `http://host` and `http://host?q` name the root.
    let path = if path.is_empty() { "/" } else { path };
    let keep = if line.http10 {
        h.keep_alive && !h.close
    } else {
        !h.close
    };
    let framing = Framing {
        consumed: n,
        keep_alive: keep,
        http10: line.http10,
    };
    Parsed::Request(
        Request {
            method,
            path,
            query,
            accept: h.accept,
            accept_encoding: h.accept_encoding,
            authorization: h.authorization,
        },
        framing,
    )
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

    /// Every one of `reqs` is answered `want`, and closed.
    fn refused(want: Status, reqs: &[&[u8]]) {
        for req in reqs {
            let shown = String::from_utf8_lossy(req);
            assert_eq!(status(req), Some(want), "{shown:?}");
        }
    }

    /// The path a whole request is routed by, and whether it is HTTP/1.0.
    fn routed(req: &[u8]) -> (&str, bool) {
        match parse(req) {
            Parsed::Request(r, f) => (r.path, f.http10),
            Parsed::Partial => panic!("partial: {:?}", String::from_utf8_lossy(req)),
            Parsed::Reject(s) => panic!("{s:?}: {:?}", String::from_utf8_lossy(req)),
        }
    }

    #[test]
    fn rejects() {
        refused(
            Status::BadRequest,
            &[
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
                b"\x00\x01garbage",
                b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
                b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n folded\r\n\r\n",
                b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
                b"GET / http/1.1\r\nHost: x\r\n\r\n",
                b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n",
                b"GET / HTTP/3.0\r\nHost: x\r\n\r\n",
                b"GET / HTTP/1.x\r\nHost: x\r\n\r\n",
                b"GET /\x7f HTTP/1.1\r\nHost: x\r\n\r\n",
                b"G(T / HTTP/1.1\r\n\r\n",
            ],
        );
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(65));
        assert_eq!(status(many.as_bytes()), Some(Status::HeadersTooLarge));
        // Past the small array the first parse uses, up to MAX_HEADERS:
        // parsed whole, the last field read.
        for n in [FEW_HEADERS, FEW_HEADERS + 1, MAX_HEADERS - 1] {
            let head = format!(
                "GET /metrics HTTP/1.1\r\n{}Accept-Encoding: gzip\r\n\r\n",
                "X: y\r\n".repeat(n - 1) + "Host: h\r\n"
            );
            match parse(head.as_bytes()) {
                Parsed::Request(r, f) => {
                    assert_eq!(r.accept_encoding, Some(&b"gzip"[..]), "{n} fields");
                    assert_eq!(f.consumed, head.len());
                }
                _ => panic!("{} fields refused", n + 1),
            }
        }
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
    fn host_is_required_single_and_valid() {
        refused(
            Status::BadRequest,
            &[
                b"GET /metrics HTTP/1.1\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
                b"GET /metrics HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: a b\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: user@a\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: a:port\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: a:123456\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: [::1\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: a/b\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: %zz\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nHost: :80\r\n\r\n",
            ],
        );
        for req in [
            &b"GET /metrics HTTP/1.0\r\n\r\n"[..],
            b"GET /metrics HTTP/1.1\r\nHost: \r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: node-7.example:9400\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHOST: 10.0.0.1\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: [fe80::1]:9400\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nHost: a%41b:\r\n\r\n",
        ] {
            assert_eq!(
                routed(req).0,
                "/metrics",
                "{:?}",
                String::from_utf8_lossy(req)
            );
        }
    }

    #[test]
    fn target_forms_and_versions() {
        // Absolute-form: routed by its path; its authority is the Host.
        assert_eq!(
            routed(b"GET http://h:9400/metrics HTTP/1.1\r\n\r\n").0,
            "/metrics"
        );
        assert_eq!(
            routed(b"GET HTTPS://h/metrics?x=1 HTTP/1.1\r\nHost: other\r\n\r\n").0,
            "/metrics"
        );
        assert_eq!(routed(b"GET http://h HTTP/1.1\r\n\r\n").0, "/");
        assert_eq!(routed(b"GET http://h?x HTTP/1.1\r\n\r\n").0, "/");
        refused(
            Status::BadRequest,
            &[
                b"GET http:///metrics HTTP/1.1\r\n\r\n",
                b"GET http://u@h/metrics HTTP/1.1\r\n\r\n",
                b"GET ftp://h/metrics HTTP/1.1\r\nHost: h\r\n\r\n",
                b"GET metrics HTTP/1.1\r\nHost: h\r\n\r\n",
                b"GET * HTTP/1.1\r\nHost: h\r\n\r\n",
                // A Host line beside an absolute target must still be single.
                b"GET http://h/metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            ],
        );
        // Server-wide OPTIONS and tunnels: 405.
        refused(
            Status::MethodNotAllowed,
            &[
                b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
                b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
                b"CONNECT /metrics HTTP/1.1\r\nHost: h\r\n\r\n",
            ],
        );
        // HTTP/1.x, x > 1, is HTTP/1.1; empty lines before a request are skipped.
        assert_eq!(routed(b"GET /m HTTP/1.2\r\nHost: h\r\n\r\n"), ("/m", false));
        assert_eq!(routed(b"GET /m HTTP/1.9\nHost: h\n\n"), ("/m", false));
        assert_eq!(routed(b"\r\n\nGET /m HTTP/1.0\r\n\r\n"), ("/m", true));
        assert!(matches!(parse(b"GET /m HTTP/1.2\r\n"), Parsed::Partial));
        assert!(matches!(parse(b"GET /m HTTP/1."), Parsed::Partial));
        assert!(matches!(parse(b"GET /m HT"), Parsed::Partial));
        assert!(matches!(parse(b"\r"), Parsed::Partial));
        assert!(matches!(parse(b"GET"), Parsed::Partial));
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
        let Parsed::Request(_, f) =
            parse(b"HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        else {
            panic!()
        };
        assert!(!f.keep_alive && !f.http10);
    }
}
