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
use std::cell::RefCell;
use std::ops::Range;

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
#[derive(Clone, Copy, Debug, PartialEq)]
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

/// A byte class as a table: a lookup where a search of the punctuation
/// cost a call to `memchr` for every byte that is not alphanumeric.
const fn class(punct: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = (b as u8).is_ascii_alphanumeric();
        b += 1;
    }
    let mut i = 0;
    while i < punct.len() {
        t[punct[i] as usize] = true;
        i += 1;
    }
    t
}

/// A method's characters (RFC 9110 §5.6.2).
static TCHAR: [bool; 256] = class(b"!#$%&'*+-.^_`|~");
/// A reg-name's characters but `%` (RFC 3986 §3.2.2).
static REG_NAME: [bool; 256] = class(b"-._~!$&'()*+,;=");

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
    fn run(buf: &[u8], at: usize, ok: impl Fn(u8) -> bool) -> Option<usize> {
        buf[at..].iter().position(|&b| !ok(b)).map(|n| at + n)
    }
    let Some(m_end) = run(buf, start, |b| TCHAR[usize::from(b)]) else {
        return Ok(None);
    };
    if m_end == start || buf[m_end] != b' ' {
        return Err(Status::BadRequest);
    }
    let t_start = m_end + 1;
    let Some(t_end) = run(buf, t_start, |b| b.is_ascii_graphic()) else {
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
                    b if REG_NAME[usize::from(b)] => i += 1,
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

/// The longest head [`Kept`] keeps: a scraper's is a few hundred bytes.
const KEPT_HEAD: usize = 1024;

/// The last head that parsed into a request, and where that request's
/// parts lie in it. A scraper sends the same head on every scrape of a
/// connection, and comparing it with this one costs a tenth of parsing it
/// (a parse was a seventh of a cached scrape's instructions). Heads with
/// credentials are not kept, nor heads longer than [`KEPT_HEAD`].
struct Kept {
    head: Vec<u8>,
    method: Method,
    /// The path, with its query where it has one, and where in it the
    /// query starts (after its `?`).
    target: Range<usize>,
    query: Option<usize>,
    accept: Option<Range<usize>>,
    accept_encoding: Option<Range<usize>>,
    framing: Framing,
}

thread_local! {
    static KEPT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

/// Where `part` lies in `head`, if it does (an empty part anywhere).
fn span(head: &[u8], part: &[u8]) -> Option<Range<usize>> {
    if part.is_empty() {
        return Some(0..0);
    }
    let start = (part.as_ptr() as usize).checked_sub(head.as_ptr() as usize)?;
    (start + part.len() <= head.len()).then_some(start..start + part.len())
}

impl Kept {
    /// The head of `buf` that parsed into `r`, kept in `into`; `None`
    /// where it is not one to keep.
    fn of(buf: &[u8], r: &Request, f: &Framing, mut into: Vec<u8>) -> Option<Kept> {
        let head = &buf[..f.consumed];
        if head.len() > KEPT_HEAD || r.authorization.is_some() {
            return None;
        }
        let opt = |h: Option<&[u8]>| h.map(|h| span(head, h)).map_or(Some(None), |s| s.map(Some));
        let path = span(head, r.path.as_bytes()).filter(|p| !p.is_empty())?;
        let (target, query) = match r.query {
            "" => (path, None),
            q => {
                let q = span(head, q.as_bytes()).filter(|q| q.start == path.end + 1)?;
                (path.start..q.end, Some(q.start - path.start))
            }
        };
        let kept = Kept {
            method: r.method,
            target,
            query,
            accept: opt(r.accept)?,
            accept_encoding: opt(r.accept_encoding)?,
            framing: *f,
            head: {
                into.clear();
                into.extend_from_slice(head);
                into
            },
        };
        Some(kept)
    }

    /// The request at the start of `buf` where its head is the one kept.
    fn again<'a>(&self, buf: &'a [u8]) -> Option<Parsed<'a>> {
        if buf.get(..self.head.len())? != self.head {
            return None;
        }
        let target = std::str::from_utf8(&buf[self.target.clone()]).ok()?;
        let (path, query) = match self.query {
            Some(q) => (target.get(..q - 1)?, target.get(q..)?),
            None => (target, ""),
        };
        let bytes = |r: &Option<Range<usize>>| r.as_ref().map(|r| &buf[r.clone()]);
        let request = Request {
            method: self.method,
            path,
            query,
            accept: bytes(&self.accept),
            accept_encoding: bytes(&self.accept_encoding),
            authorization: None,
        };
        Some(Parsed::Request(request, self.framing))
    }
}

/// Parses the request head at the start of `buf`: as the head kept
/// ([`Kept`]) said where it is the same, else afresh (and kept).
pub fn parse(buf: &[u8]) -> Parsed<'_> {
    if let Some(again) = KEPT.with_borrow(|k| k.as_ref().and_then(|k| k.again(buf))) {
        return again;
    }
    let parsed = parse_afresh(buf);
    if let Parsed::Request(r, f) = &parsed {
        KEPT.with_borrow_mut(|k| {
            let old = k.take().map(|k| k.head).unwrap_or_default();
            *k = Kept::of(buf, r, f, old);
        });
    }
    parsed
}

/// Parses the request head at the start of `buf`.
fn parse_afresh(buf: &[u8]) -> Parsed<'_> {
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
    // A search byte by byte: `split_once` calls `memchr`, which costs
    // more than a short path.
    let (path, query) = match target.bytes().position(|b| b == b'?') {
        Some(i) => (&target[..i], &target[i + 1..]),
        None => (target, ""),
    };
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

    /// A parse's outcome, comparably.
    type Said<'a> = Option<(Method, &'a str, &'a str, [Option<&'a [u8]>; 3], Framing)>;
    fn said<'a>(p: &Parsed<'a>) -> Said<'a> {
        let Parsed::Request(r, f) = p else {
            return None;
        };
        let headers = [r.accept, r.accept_encoding, r.authorization];
        Some((r.method, r.path, r.query, headers, *f))
    }

    fn kept() -> Option<Vec<u8>> {
        KEPT.with_borrow(|k| k.as_ref().map(|k| k.head.clone()))
    }

    #[test]
    fn a_head_kept_parses_as_it_did_afresh() {
        let long = [
            b"GET / HTTP/1.1\r\nHost: x\r\nX: ".as_slice(),
            &[b'a'; KEPT_HEAD],
            b"\r\n\r\n",
        ];
        let long = long.concat();
        // Each head, whether it is kept.
        let heads: [(&[u8], bool); 6] = [
            (b"GET /metrics HTTP/1.1\r\nHost: counts\r\n\r\n", true),
            (b"GET /metrics?collect[]=gpu HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\nAccept-Encoding: gzip\r\n\r\nGET /next", true),
            (b"\r\nHEAD /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
            // The root it names is no part of the head.
            (b"GET http://h:1 HTTP/1.1\r\n\r\n", false),
            (b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YTpi\r\n\r\n", false),
            (&long, false),
        ];
        for (head, keep) in heads {
            let afresh = said(&parse_afresh(head));
            assert!(afresh.is_some(), "{:?}", String::from_utf8_lossy(head));
            // Twice: the second from the head kept, where it is kept.
            for _ in 0..2 {
                assert_eq!(said(&parse(head)), afresh);
            }
            let consumed = afresh.unwrap().4.consumed;
            assert_eq!(kept(), keep.then(|| head[..consumed].to_vec()));
        }
        // Bytes that start like the head kept but differ, or stop short,
        // are parsed afresh.
        let scrape = heads[0].0;
        assert!(matches!(parse(scrape), Parsed::Request(..)));
        let twice = b"GET /metrics HTTP/1.1\r\nHost: counts\r\nHost: y\r\n\r\n";
        assert_eq!(status(twice), Some(Status::BadRequest));
        assert!(matches!(parse(scrape), Parsed::Request(..)));
        assert!(matches!(
            parse(&scrape[..scrape.len() - 1]),
            Parsed::Partial
        ));
        assert_eq!(kept().as_deref(), Some(scrape));
    }
}
