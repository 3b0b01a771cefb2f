//! A minimal HTTP/2 client (RFC 9113) for one unary gRPC call per
//! connection, over any blocking byte stream.
//!
//! It does what a real server (grpc-go in the kubelet, grpc core in our
//! tests) expects of a client: the preface and SETTINGS, SETTINGS and
//! PING acks, GOAWAY and RST_STREAM, flow control in both directions,
//! CONTINUATION, padding, HPACK, and trailers. It opens one stream (id 1),
//! never pushes, and refuses what a client must refuse (PUSH_PROMISE with
//! push disabled, frames over our size, DATA past our window).
//!
//! Response DATA is handed to the caller's callback straight from the
//! read buffer, and the windows are replenished as it is consumed, so a
//! 64 MiB response streams through a 32 KiB buffer.

use crate::error::Error;
use crate::hpack;
use frame::{HEADER_LEN, Head};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

mod call;
pub mod frame;
pub mod script;

use call::Call;

/// A blocking byte stream whose waits can be bounded. Before every read
/// and write the client sets the time left until its deadline, so a
/// silent or trickling peer cannot hold a call past it.
pub trait Io: Read + Write {
    /// Bounds the next reads and writes to `t`; a timed-out read or write
    /// returns `WouldBlock` or `TimedOut`. Test doubles may do nothing.
    fn set_timeout(&mut self, _t: Duration) -> io::Result<()> {
        Ok(())
    }
}

impl Io for UnixStream {
    fn set_timeout(&mut self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))?;
        self.set_write_timeout(Some(t))
    }
}

/// What we advertise and enforce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// SETTINGS_MAX_FRAME_SIZE; frames larger than this are refused.
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE, enforced while decoding.
    pub max_header_list_size: u32,
    /// Our stream window (SETTINGS_INITIAL_WINDOW_SIZE) and connection
    /// window; replenished whenever half of it has been consumed.
    pub window: u32,
    /// DATA bytes accepted on the stream in all.
    pub max_body: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // The default: grpc servers send 16 KiB frames anyway, and it
            // keeps the read buffer at 32 KiB.
            max_frame_size: frame::DEFAULT_MAX_FRAME_SIZE,
            // A kubelet's headers and trailers are a few hundred bytes.
            max_header_list_size: 64 << 10,
            // 1 MiB in flight: a few round trips per 64 MiB over a unix
            // socket, and nothing is buffered on our side for it.
            window: 1 << 20,
            // A 64 MiB message plus its 5-byte gRPC prefix.
            max_body: (64 << 20) + 5,
        }
    }
}

/// The request: a POST of `body` to `path` with gRPC's headers.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub path: &'a str,
    pub authority: &'a str,
    pub body: &'a [u8],
}

/// What the response's trailers (or its trailers-only headers) said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// `grpc-status`; None when absent.
    pub code: Option<u32>,
    /// `grpc-message`, percent-decoded and cut to 256 bytes.
    pub message: String,
}

const STREAM: u32 = 1;
const MAX_GRPC_MESSAGE: usize = 256;

/// A client's reusable buffers and HPACK state. One call at a time; each
/// call uses a new connection, so a kubelet restart between calls costs
/// nothing but the reconnect.
#[derive(Debug)]
pub struct Client {
    limits: Limits,
    reader: Reader,
    wbuf: Vec<u8>,
    block: Vec<u8>,
    hpack: hpack::Decoder,
}

impl Client {
    pub fn new(limits: Limits) -> Client {
        // Keep the frame size within what the protocol allows.
        let max_frame = limits
            .max_frame_size
            .clamp(frame::DEFAULT_MAX_FRAME_SIZE, (1 << 24) - 1);
        let limits = Limits {
            max_frame_size: max_frame,
            window: limits
                .window
                .clamp(frame::DEFAULT_WINDOW, frame::MAX_WINDOW),
            ..limits
        };
        Client {
            limits,
            // Two frames' worth, so most reads bring several frames.
            reader: Reader::new(2 * (HEADER_LEN + max_frame as usize)),
            wbuf: Vec::with_capacity(1024),
            block: Vec::new(),
            hpack: hpack::Decoder::new(
                hpack::DEFAULT_TABLE_SIZE,
                limits.max_header_list_size as usize,
            ),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Makes one call on a fresh connection `io`: sends the request, hands
    /// each piece of response DATA to `on_data`, and returns the status
    /// from the trailers. Fails at `deadline` at the latest (to the
    /// granularity of one read once the deadline is near).
    pub fn call<S: Io + ?Sized>(
        &mut self,
        io: &mut S,
        req: &Request<'_>,
        deadline: Instant,
        on_data: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<Status, Error> {
        self.reader.clear();
        self.wbuf.clear();
        self.hpack.reset();
        let mut call = Call::new(self.limits);
        let result = call.run(
            io,
            req,
            deadline,
            &mut self.reader,
            &mut self.wbuf,
            &mut self.block,
            &mut self.hpack,
            on_data,
        );
        // Tell the server why we are leaving; best effort, briefly.
        self.wbuf.clear();
        match &result {
            Ok(_) => frame::write_goaway(&mut self.wbuf, 0, frame::NO_ERROR),
            Err(e) => match goaway_code(e) {
                Some(code) => frame::write_goaway(&mut self.wbuf, 0, code),
                None if reachable(e) => {
                    frame::write_rst(&mut self.wbuf, STREAM, frame::CANCEL);
                    frame::write_goaway(&mut self.wbuf, 0, frame::NO_ERROR);
                }
                None => {}
            },
        }
        if !self.wbuf.is_empty() {
            let _ = io.set_timeout(Duration::from_millis(10));
            let _ = io.write(&self.wbuf);
        }
        result
    }
}

/// The GOAWAY code for a connection error we detected.
fn goaway_code(e: &Error) -> Option<u32> {
    match e {
        Error::Protocol(_) => Some(frame::PROTOCOL_ERROR),
        Error::FrameSize(_) => Some(frame::FRAME_SIZE_ERROR),
        Error::FlowControl => Some(frame::FLOW_CONTROL_ERROR),
        Error::Hpack(_) => Some(frame::COMPRESSION_ERROR),
        _ => None,
    }
}

/// Whether the connection may still be up, so a cancel is worth sending.
fn reachable(e: &Error) -> bool {
    !matches!(e, Error::Io(_) | Error::Closed | Error::GoAway { .. })
}

/// The read side: a fixed buffer holding whole frames for the caller.
#[derive(Debug)]
struct Reader {
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
}

impl Reader {
    fn new(cap: usize) -> Reader {
        Reader {
            buf: vec![0; cap].into_boxed_slice(),
            pos: 0,
            end: 0,
        }
    }

    fn clear(&mut self) {
        self.pos = 0;
        self.end = 0;
    }

    /// Waits until a whole frame is buffered and returns its header. The
    /// buffer holds two maximum frames, so after compaction any frame of
    /// allowed size fits.
    fn next<S: Io + ?Sized>(
        &mut self,
        io: &mut S,
        deadline: Instant,
        max_frame: u32,
    ) -> Result<Head, Error> {
        loop {
            let avail = self.end - self.pos;
            let need = if avail >= HEADER_LEN {
                let mut h = [0u8; HEADER_LEN];
                h.copy_from_slice(&self.buf[self.pos..self.pos + HEADER_LEN]);
                let head = Head::parse(&h);
                if head.len > max_frame {
                    // `HTTP/1.1 400 ...` read as a frame header is a huge one.
                    let text = self.buf[self.pos..self.end].starts_with(b"HTTP/");
                    return Err(match text {
                        true => Error::Protocol("not an HTTP/2 server: it answered in HTTP/1"),
                        false => Error::FrameSize("frame larger than SETTINGS_MAX_FRAME_SIZE"),
                    });
                }
                let total = HEADER_LEN + head.len as usize;
                if avail >= total {
                    return Ok(head);
                }
                total
            } else {
                HEADER_LEN
            };
            if self.pos + need > self.buf.len() {
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.pos = 0;
            }
            self.fill(io, deadline)?;
        }
    }

    fn payload(&self, head: &Head) -> &[u8] {
        let start = self.pos + HEADER_LEN;
        &self.buf[start..start + head.len as usize]
    }

    fn consume(&mut self, head: &Head) {
        self.pos += HEADER_LEN + head.len as usize;
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
        }
    }

    fn fill<S: Io + ?Sized>(&mut self, io: &mut S, deadline: Instant) -> Result<(), Error> {
        loop {
            let left = time_left(deadline)?;
            io.set_timeout(left).map_err(|e| Error::Io(e.kind()))?;
            match io.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(Error::Closed),
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) => retry_or_fail(e)?,
            }
        }
    }
}

/// The time left before `deadline`, at least 1 ms (a zero socket timeout
/// means "none"), or Timeout once it has passed.
fn time_left(deadline: Instant) -> Result<Duration, Error> {
    let now = Instant::now();
    if now >= deadline {
        return Err(Error::Timeout);
    }
    Ok((deadline - now).max(Duration::from_millis(1)))
}

/// Timeouts and interruptions are retried (the deadline decides); a
/// reset is the peer leaving; anything else ends the call.
fn retry_or_fail(e: io::Error) -> Result<(), Error> {
    use io::ErrorKind::*;
    match e.kind() {
        WouldBlock | TimedOut | Interrupted => Ok(()),
        ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => Err(Error::Closed),
        k => Err(Error::Io(k)),
    }
}

fn write_all<S: Io + ?Sized>(io: &mut S, mut buf: &[u8], deadline: Instant) -> Result<(), Error> {
    while !buf.is_empty() {
        let left = time_left(deadline)?;
        io.set_timeout(left).map_err(|e| Error::Io(e.kind()))?;
        match io.write(buf) {
            Ok(0) => return Err(Error::Closed),
            Ok(n) => buf = &buf[n..],
            Err(e) => retry_or_fail(e)?,
        }
    }
    loop {
        match io.flush() {
            Ok(()) => return Ok(()),
            Err(e) => retry_or_fail(e)?,
        }
        time_left(deadline)?;
    }
}

#[cfg(test)]
mod tests {
    use super::call::Phase;
    use super::script::*;
    use super::*;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    /// The call's (status, body), and what the client wrote.
    type Outcome = (Result<(Status, Vec<u8>), Error>, Vec<u8>);

    fn run(input: &[u8], chunk: usize) -> Outcome {
        let mut client = Client::new(Limits::default());
        let mut io = Replay::new(input, chunk);
        let mut body = Vec::new();
        let req = Request {
            path: "/v1.PodResourcesLister/List",
            authority: "localhost",
            body: &[0, 0, 0, 0, 0],
        };
        let r = client.call(&mut io, &req, far(), &mut |d| {
            body.extend_from_slice(d);
            Ok(())
        });
        (r.map(|s| (s, body)), io.written)
    }

    type Frames = Vec<(Head, Vec<u8>)>;

    fn ok(input: &[u8]) -> (Status, Vec<u8>, Frames) {
        let (r, written) = run(input, 1000);
        let (s, body) = r.unwrap();
        assert!(written.starts_with(frame::PREFACE));
        (s, body, frames(&written[frame::PREFACE.len()..]))
    }

    fn err(input: &[u8]) -> Error {
        run(input, 1000).0.unwrap_err()
    }

    fn headers_200() -> Vec<u8> {
        block(&[(":status", "200"), ("content-type", "application/grpc")])
    }

    fn trailers(code: &str) -> Vec<u8> {
        block(&[("grpc-status", code)])
    }

    const EH: u8 = frame::FLAG_END_HEADERS;
    const ES: u8 = frame::FLAG_END_STREAM;

    #[test]
    fn request_is_preface_settings_window_headers_data() {
        let (status, body, sent) = ok(&ok_response(b"hello"));
        assert_eq!(status.code, Some(0));
        assert_eq!(body, grpc_message(b"hello"));
        let kinds: Vec<u8> = sent.iter().map(|f| f.0.kind).collect();
        // SETTINGS, WINDOW_UPDATE, HEADERS, DATA, SETTINGS ack, GOAWAY.
        assert_eq!(
            kinds,
            [
                frame::SETTINGS,
                frame::WINDOW_UPDATE,
                frame::HEADERS,
                frame::DATA,
                frame::SETTINGS,
                frame::GOAWAY
            ]
        );
        let settings: Vec<_> = frame::settings(&sent[0].1).unwrap().collect();
        assert!(settings.contains(&(frame::SETTINGS_ENABLE_PUSH, 0)));
        assert!(settings.contains(&(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20)));
        assert_eq!(sent[2].0.flags, EH);
        assert_eq!(sent[3].0.flags, ES);
        assert_eq!(sent[3].1, [0, 0, 0, 0, 0]);
        assert_eq!(sent[4].0.flags, frame::FLAG_ACK);
        // The request headers decode to what gRPC expects.
        let mut d = hpack::Decoder::new(4096, 1 << 16);
        let mut fields = Vec::new();
        d.decode(&sent[2].1, &mut |n, v| {
            fields.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .unwrap();
        let get = |k: &str| fields.iter().find(|f| f.0 == k).map(|f| f.1.as_str());
        assert_eq!(get(":method"), Some("POST"));
        assert_eq!(get(":scheme"), Some("http"));
        assert_eq!(get(":path"), Some("/v1.PodResourcesLister/List"));
        assert_eq!(get(":authority"), Some("localhost"));
        assert_eq!(get("content-type"), Some("application/grpc"));
        assert_eq!(get("te"), Some("trailers"));
        assert!(get("grpc-timeout").unwrap().ends_with('m'));
    }

    #[test]
    fn every_read_size_gives_the_same_answer() {
        let input = ok_response(&[7u8; 40_000]);
        for chunk in [1, 2, 9, 10, 100, 16_393, 70_000] {
            let (r, _) = run(&input, chunk);
            let (s, body) = r.unwrap();
            assert_eq!(s.code, Some(0));
            assert_eq!(body.len(), 40_005);
        }
    }

    #[test]
    fn ping_is_acked_with_its_payload() {
        let mut input = Vec::new();
        frame(&mut input, frame::PING, 0, 0, b"12345678");
        frame(&mut input, frame::PING, frame::FLAG_ACK, 0, b"ignored!");
        input.extend(ok_response(b""));
        let (_, _, sent) = ok(&input);
        let pings: Vec<_> = sent.iter().filter(|f| f.0.kind == frame::PING).collect();
        assert_eq!(pings.len(), 1);
        assert_eq!(pings[0].0.flags, frame::FLAG_ACK);
        assert_eq!(pings[0].1, b"12345678");
        let mut bad = Vec::new();
        frame(&mut bad, frame::PING, 0, 0, b"1234567");
        assert!(matches!(err(&bad), Error::FrameSize(_)));
        let mut bad = Vec::new();
        frame(&mut bad, frame::PING, 0, 1, b"12345678");
        assert!(matches!(err(&bad), Error::Protocol(_)));
    }

    #[test]
    fn continuation_and_padding() {
        let mut input = Vec::new();
        let h = headers_200();
        let (a, b) = h.split_at(3);
        // Padded HEADERS with priority, then two CONTINUATIONs.
        let mut p = vec![4u8];
        p.extend_from_slice(&[0, 0, 0, 0, 16]);
        p.extend_from_slice(a);
        p.extend_from_slice(&[0; 4]);
        frame(
            &mut input,
            frame::HEADERS,
            frame::FLAG_PADDED | frame::FLAG_PRIORITY,
            1,
            &p,
        );
        frame(&mut input, frame::CONTINUATION, 0, 1, &b[..1]);
        frame(&mut input, frame::CONTINUATION, EH, 1, &b[1..]);
        // Padded DATA.
        let msg = grpc_message(b"xyz");
        let mut d = vec![10u8];
        d.extend_from_slice(&msg);
        d.extend_from_slice(&[0; 10]);
        frame(&mut input, frame::DATA, frame::FLAG_PADDED, 1, &d);
        // Trailers split too, with a percent-encoded message.
        let t = block(&[("grpc-status", "0"), ("grpc-message", "all%20good%")]);
        frame(&mut input, frame::HEADERS, ES, 1, &t[..2]);
        frame(&mut input, frame::CONTINUATION, EH, 1, &t[2..]);
        let (s, body, _) = ok(&input);
        assert_eq!(body, msg);
        assert_eq!(s.message, "all good%");
    }

    #[test]
    fn interleaved_frame_during_headers_is_an_error() {
        let mut input = Vec::new();
        let h = headers_200();
        frame(&mut input, frame::HEADERS, 0, 1, &h[..2]);
        frame(&mut input, frame::PING, 0, 0, b"12345678");
        assert_eq!(err(&input), Error::Protocol("expected CONTINUATION"));
        let mut input = Vec::new();
        frame(&mut input, frame::CONTINUATION, EH, 1, &h);
        assert_eq!(err(&input), Error::Protocol("CONTINUATION without HEADERS"));
    }

    #[test]
    fn trailers_only_response() {
        let mut input = Vec::new();
        let h = block(&[
            (":status", "200"),
            ("content-type", "application/grpc"),
            ("grpc-status", "12"),
            ("grpc-message", "unknown%20method"),
        ]);
        frame(&mut input, frame::HEADERS, EH | ES, 1, &h);
        let (s, body, _) = ok(&input);
        assert_eq!(s.code, Some(12));
        assert_eq!(s.message, "unknown method");
        assert!(body.is_empty());
    }

    #[test]
    fn informational_headers_are_skipped() {
        let mut input = Vec::new();
        frame(
            &mut input,
            frame::HEADERS,
            EH,
            1,
            &block(&[(":status", "100")]),
        );
        input.extend(ok_response(b"x"));
        assert_eq!(ok(&input).0.code, Some(0));
    }

    #[test]
    fn bad_statuses_and_content_types() {
        let mut input = Vec::new();
        frame(
            &mut input,
            frame::HEADERS,
            EH,
            1,
            &block(&[(":status", "503")]),
        );
        assert_eq!(err(&input), Error::HttpStatus(503));
        let mut input = Vec::new();
        let h = block(&[(":status", "200"), ("content-type", "text/html")]);
        frame(&mut input, frame::HEADERS, EH, 1, &h);
        assert_eq!(err(&input), Error::NotGrpc);
        let mut input = Vec::new();
        let h = block(&[(":status", "200"), ("content-type", "application/grpcx")]);
        frame(&mut input, frame::HEADERS, EH, 1, &h);
        assert_eq!(err(&input), Error::NotGrpc);
        let mut input = Vec::new();
        frame(&mut input, frame::HEADERS, EH, 1, &block(&[("x", "y")]));
        assert_eq!(err(&input), Error::Protocol("response without :status"));
    }

    #[test]
    fn trailers_rules() {
        // Trailers without END_STREAM.
        let mut input = Vec::new();
        frame(&mut input, frame::HEADERS, EH, 1, &headers_200());
        frame(&mut input, frame::HEADERS, EH, 1, &trailers("0"));
        assert_eq!(err(&input), Error::Protocol("trailers without END_STREAM"));
        // A pseudo-header in trailers.
        let mut input = Vec::new();
        frame(&mut input, frame::HEADERS, EH, 1, &headers_200());
        frame(&mut input, frame::HEADERS, EH | ES, 1, &headers_200());
        assert_eq!(err(&input), Error::Protocol("pseudo-header in trailers"));
        // DATA with END_STREAM and no trailers: no status.
        let mut input = Vec::new();
        frame(&mut input, frame::HEADERS, EH, 1, &headers_200());
        frame(&mut input, frame::DATA, ES, 1, &grpc_message(b""));
        assert_eq!(ok(&input).0.code, None);
        // DATA first.
        let mut input = Vec::new();
        frame(&mut input, frame::DATA, 0, 1, b"x");
        assert_eq!(err(&input), Error::Protocol("DATA before response headers"));
    }

    #[test]
    fn rst_stream_and_goaway() {
        let mut input = Vec::new();
        frame(&mut input, frame::RST_STREAM, 0, 1, &[0, 0, 0, 8]);
        assert_eq!(err(&input), Error::Reset { code: 8 });
        let mut input = Vec::new();
        frame(&mut input, frame::RST_STREAM, 0, 3, &[0, 0, 0, 8]);
        assert!(matches!(err(&input), Error::Protocol(_)));
        // GOAWAY that excludes our stream.
        let mut input = Vec::new();
        frame(
            &mut input,
            frame::GOAWAY,
            0,
            0,
            &[0, 0, 0, 0, 0, 0, 0, 0, b'b', b'y', b'e'],
        );
        assert_eq!(err(&input), Error::GoAway { code: 0 });
        // A graceful GOAWAY that covers it: the response still completes.
        let mut input = Vec::new();
        frame(
            &mut input,
            frame::GOAWAY,
            0,
            0,
            &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0],
        );
        input.extend(ok_response(b"ok"));
        assert_eq!(ok(&input).1, grpc_message(b"ok"));
    }

    #[test]
    fn push_promise_and_foreign_streams_are_refused() {
        let mut input = Vec::new();
        frame(&mut input, frame::PUSH_PROMISE, EH, 1, &[0, 0, 0, 2, 0x82]);
        assert!(matches!(err(&input), Error::Protocol(_)));
        let mut input = Vec::new();
        frame(&mut input, frame::HEADERS, EH, 3, &headers_200());
        assert!(matches!(err(&input), Error::Protocol(_)));
        let mut input = Vec::new();
        frame(&mut input, frame::DATA, 0, 0, b"x");
        assert!(matches!(err(&input), Error::Protocol(_)));
    }

    #[test]
    fn unknown_frames_and_priority_are_ignored() {
        let mut input = Vec::new();
        frame(&mut input, 0xfa, 0xff, 0, b"whatever");
        frame(&mut input, frame::PRIORITY, 0, 1, &[0, 0, 0, 0, 1]);
        input.extend(ok_response(b"z"));
        assert_eq!(ok(&input).1, grpc_message(b"z"));
        let mut input = Vec::new();
        frame(&mut input, frame::PRIORITY, 0, 1, &[0, 0, 0, 0]);
        assert!(matches!(err(&input), Error::FrameSize(_)));
        // An HTTP/1.1 server's answer to the preface is named for what it is.
        let http1 = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        let e = err(http1);
        assert!(e.to_string().contains("not an HTTP/2 server"), "{e}");
    }

    #[test]
    fn settings_are_validated_and_acked() {
        for (id, v) in [
            (frame::SETTINGS_ENABLE_PUSH, 2),
            (frame::SETTINGS_MAX_FRAME_SIZE, 100),
            (frame::SETTINGS_MAX_FRAME_SIZE, 1 << 24),
        ] {
            let mut input = Vec::new();
            settings(&mut input, &[(id, v)]);
            assert!(matches!(err(&input), Error::Protocol(_)), "{id} {v}");
        }
        let mut input = Vec::new();
        settings(
            &mut input,
            &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 1 << 31)],
        );
        assert_eq!(err(&input), Error::FlowControl);
        let mut input = Vec::new();
        frame(&mut input, frame::SETTINGS, 0, 0, &[0; 5]);
        assert!(matches!(err(&input), Error::FrameSize(_)));
        let mut input = Vec::new();
        frame(&mut input, frame::SETTINGS, frame::FLAG_ACK, 0, &[0; 6]);
        assert!(matches!(err(&input), Error::FrameSize(_)));
        let mut input = Vec::new();
        frame(&mut input, frame::SETTINGS, 0, 1, &[]);
        assert!(matches!(err(&input), Error::Protocol(_)));
        // Unknown settings are ignored.
        let mut input = Vec::new();
        settings(&mut input, &[(0x99, 7)]);
        input.extend(ok_response(b""));
        ok(&input);
    }

    #[test]
    fn oversized_frame_is_refused() {
        let mut input = Vec::new();
        frame::write_head(&mut input, 16_385, frame::DATA, 0, 1);
        input.extend(vec![0; 16_385]);
        assert!(matches!(err(&input), Error::FrameSize(_)));
    }

    #[test]
    fn windows_are_replenished_as_data_is_consumed() {
        // 3 MiB through a 1 MiB window.
        let msg = vec![1u8; 3 << 20];
        let (s, body, sent) = ok(&ok_response(&msg));
        assert_eq!(s.code, Some(0));
        assert_eq!(body.len(), msg.len() + 5);
        let (mut conn, mut stream) = (0u64, 0u64);
        for (h, p) in &sent[2..] {
            if h.kind == frame::WINDOW_UPDATE {
                let inc = u64::from(frame::window_increment(p).unwrap());
                if h.stream == 0 {
                    conn += inc
                } else {
                    stream += inc
                }
            }
        }
        // Everything past the first window was given back, on both levels.
        let total = msg.len() as u64 + 5;
        assert!(conn >= total - (1 << 20), "{conn}");
        assert!(stream >= total - (1 << 20), "{stream}");
    }

    #[test]
    fn data_past_the_window_is_a_flow_control_error() {
        let mut client = Client::new(Limits::default());
        let mut call = Call::new(client.limits);
        call.phase = Phase::Body;
        call.stream_recv = 10;
        let head = Head {
            len: 11,
            kind: frame::DATA,
            flags: 0,
            stream: 1,
        };
        let r = call.on_data(&head, &[0; 11], &mut client.wbuf, &mut |_| Ok(()));
        assert_eq!(r, Err(Error::FlowControl));
    }

    #[test]
    fn send_side_waits_for_window() {
        // A 100 KB body: 65535 goes at once (in 16 KiB frames); the rest
        // after WINDOW_UPDATEs on both levels.
        let mut call = Call::new(Limits::default());
        let body = vec![0u8; 100_000];
        let mut w = Vec::new();
        call.send_body(&body, &mut w);
        assert_eq!(call.body_sent, 65_535);
        let wu = |stream| Head {
            len: 4,
            kind: frame::WINDOW_UPDATE,
            flags: 0,
            stream,
        };
        let inc = 50_000u32.to_be_bytes();
        let mut hp = hpack::Decoder::new(4096, 1 << 16);
        call.on_frame(&wu(1), &inc, &mut w, &mut Vec::new(), &mut hp, &mut |_| {
            Ok(())
        })
        .unwrap();
        call.send_body(&body, &mut w);
        assert_eq!(call.body_sent, 65_535);
        call.on_frame(&wu(0), &inc, &mut w, &mut Vec::new(), &mut hp, &mut |_| {
            Ok(())
        })
        .unwrap();
        call.send_body(&body, &mut w);
        assert_eq!(call.body_sent, 100_000);
        let last = frames(&w).pop().unwrap();
        assert_eq!(last.0.flags, ES);
    }

    #[test]
    fn body_limit() {
        let mut client = Client::new(Limits {
            max_body: 100,
            ..Limits::default()
        });
        let input = ok_response(&[0; 200]);
        let mut io = Replay::new(&input, 64);
        let req = Request {
            path: "/",
            authority: "x",
            body: &[],
        };
        let r = client.call(&mut io, &req, far(), &mut |_| Ok(()));
        assert_eq!(r, Err(Error::MessageTooLarge));
        // It cancelled the stream and said goodbye.
        let sent = frames(&io.written[frame::PREFACE.len()..]);
        let n = sent.len();
        assert_eq!(sent[n - 2].0.kind, frame::RST_STREAM);
        assert_eq!(sent[n - 1].0.kind, frame::GOAWAY);
    }

    #[test]
    fn protocol_errors_send_goaway_with_the_code() {
        let mut input = Vec::new();
        frame(
            &mut input,
            frame::HEADERS,
            EH,
            1,
            &[0xff, 0xff, 0xff, 0xff, 0x0f],
        );
        let (r, written) = run(&input, 100);
        assert!(matches!(r, Err(Error::Hpack(_))));
        let sent = frames(&written[frame::PREFACE.len()..]);
        let (h, p) = sent.last().unwrap();
        assert_eq!(h.kind, frame::GOAWAY);
        assert_eq!(frame::goaway(p).unwrap().1, frame::COMPRESSION_ERROR);
    }

    #[test]
    fn eof_is_closed_and_truncation_never_panics() {
        let input = ok_response(&[3u8; 20_000]);
        for cut in (0..input.len()).step_by(97) {
            let (r, _) = run(&input[..cut], 50);
            assert_eq!(r.unwrap_err(), Error::Closed, "cut at {cut}");
        }
    }

    struct Stalled;
    impl Read for Stalled {
        fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
            std::thread::sleep(Duration::from_millis(5));
            Err(io::ErrorKind::WouldBlock.into())
        }
    }
    impl Write for Stalled {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    impl Io for Stalled {}

    #[test]
    fn deadline_is_kept_when_reads_time_out() {
        let mut client = Client::new(Limits::default());
        let req = Request {
            path: "/",
            authority: "x",
            body: &[],
        };
        let start = Instant::now();
        let r = client.call(
            &mut Stalled,
            &req,
            start + Duration::from_millis(50),
            &mut |_| Ok(()),
        );
        assert_eq!(r, Err(Error::Timeout));
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
