//! One call's protocol state: what we send, and every frame we read.

use super::{Io, Limits, MAX_GRPC_MESSAGE, Reader, Request, STREAM, Status, write_all};
use crate::error::Error;
use crate::h2::frame::{self, Head};
use crate::hpack;
use base::numbers::digits;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for the response headers (1xx blocks are skipped).
    Headers,
    /// Response headers seen; DATA and then trailers may come.
    Body,
    /// The stream ended.
    Done,
}

/// What one header block said, collected while it is decoded.
#[derive(Debug, Default)]
struct Block {
    status: Option<u16>,
    grpc_content_type: bool,
    grpc_status: Option<u32>,
    message: Vec<u8>,
    pseudo: bool,
}

impl Block {
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if name.first() == Some(&b':') {
            self.pseudo = true;
        }
        match name {
            b":status" => {
                // Three digits, or 0, which no check will accept.
                self.status = Some(match value {
                    [a, b, c] if value.iter().all(u8::is_ascii_digit) => {
                        u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
                    }
                    _ => 0,
                });
            }
            b"content-type" => {
                // application/grpc, optionally +proto or ;params.
                let rest = value.strip_prefix(b"application/grpc");
                self.grpc_content_type =
                    matches!(rest, Some(r) if r.is_empty() || r[0] == b'+' || r[0] == b';');
            }
            b"grpc-status" => {
                // Unparseable counts as UNKNOWN, as gRPC's own clients do.
                let code = std::str::from_utf8(value)
                    .ok()
                    .and_then(|s| s.parse::<u32>().ok());
                self.grpc_status = Some(code.unwrap_or(2));
            }
            b"grpc-message" => {
                self.message.clear();
                percent_decode(value, &mut self.message, MAX_GRPC_MESSAGE);
            }
            _ => {}
        }
    }
}

/// gRPC percent-encodes grpc-message (PROTOCOL-HTTP2.md); decodes up to
/// `max` bytes of it.
fn percent_decode(v: &[u8], out: &mut Vec<u8>, max: usize) {
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut i = 0;
    while i < v.len() && out.len() < max {
        let b = match (v[i], v.get(i + 1).copied(), v.get(i + 2).copied()) {
            (b'%', Some(h), Some(l)) => match (hex(h), hex(l)) {
                (Some(h), Some(l)) => {
                    i += 2;
                    h << 4 | l
                }
                _ => b'%',
            },
            (b, _, _) => b,
        };
        out.push(b);
        i += 1;
    }
}

/// One call's protocol state.
pub(super) struct Call {
    pub(super) limits: Limits,
    pub(super) phase: Phase,
    /// Our send windows (they may go negative after a SETTINGS change).
    pub(super) conn_send: i64,
    pub(super) stream_send: i64,
    pub(super) peer_initial_window: u32,
    pub(super) peer_max_frame: u32,
    /// What the peer may still send us, and what we consumed but have not
    /// yet returned with WINDOW_UPDATE.
    pub(super) conn_recv: i64,
    pub(super) stream_recv: i64,
    pub(super) conn_unacked: u32,
    pub(super) stream_unacked: u32,
    pub(super) body_sent: usize,
    /// A header block under way: whether its HEADERS had END_STREAM.
    pub(super) continuing: Option<bool>,
    pub(super) body_len: u64,
    pub(super) status: Status,
}

impl Call {
    pub(super) fn new(limits: Limits) -> Call {
        Call {
            limits,
            phase: Phase::Headers,
            conn_send: i64::from(frame::DEFAULT_WINDOW),
            stream_send: i64::from(frame::DEFAULT_WINDOW),
            peer_initial_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            conn_recv: i64::from(limits.window),
            stream_recv: i64::from(limits.window),
            conn_unacked: 0,
            stream_unacked: 0,
            body_sent: 0,
            continuing: None,
            body_len: 0,
            status: Status::default(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn run<S: Io + ?Sized>(
        &mut self,
        io: &mut S,
        req: &Request<'_>,
        deadline: Instant,
        reader: &mut Reader,
        wbuf: &mut Vec<u8>,
        block: &mut Vec<u8>,
        hpack: &mut hpack::Decoder,
        on_data: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<Status, Error> {
        self.start(req, deadline, wbuf, block);
        self.send_body(req.body, wbuf);
        write_all(io, wbuf, deadline)?;
        wbuf.clear();
        while self.phase != Phase::Done {
            let head = reader.next(io, deadline, self.limits.max_frame_size)?;
            self.on_frame(&head, reader.payload(&head), wbuf, block, hpack, on_data)?;
            reader.consume(&head);
            self.send_body(req.body, wbuf);
            if !wbuf.is_empty() {
                write_all(io, wbuf, deadline)?;
                wbuf.clear();
            }
        }
        Ok(std::mem::take(&mut self.status))
    }

    /// The preface, our SETTINGS, the connection window, and the request
    /// headers. The body follows as the windows allow.
    pub(super) fn start(
        &mut self,
        req: &Request<'_>,
        deadline: Instant,
        wbuf: &mut Vec<u8>,
        block: &mut Vec<u8>,
    ) {
        wbuf.extend_from_slice(frame::PREFACE);
        frame::write_settings(
            wbuf,
            &[
                (frame::SETTINGS_ENABLE_PUSH, 0),
                (frame::SETTINGS_MAX_CONCURRENT_STREAMS, 0),
                (frame::SETTINGS_INITIAL_WINDOW_SIZE, self.limits.window),
                (frame::SETTINGS_MAX_FRAME_SIZE, self.limits.max_frame_size),
                (
                    frame::SETTINGS_MAX_HEADER_LIST_SIZE,
                    self.limits.max_header_list_size,
                ),
            ],
        );
        // SETTINGS cannot change the connection window; this can.
        let extra = self.limits.window - frame::DEFAULT_WINDOW;
        if extra > 0 {
            frame::write_window_update(wbuf, 0, extra);
        }

        block.clear();
        hpack::encode_field(block, ":method", "POST");
        hpack::encode_field(block, ":scheme", "http");
        hpack::encode_field(block, ":path", req.path);
        hpack::encode_field(block, ":authority", req.authority);
        hpack::encode_field(block, "content-type", "application/grpc");
        hpack::encode_field(block, "te", "trailers");
        hpack::encode_field(block, "user-agent", "gpu-exporter-podres");
        // Lets the server give up when we do. At most 8 digits (gRPC).
        let ms = deadline
            .saturating_duration_since(Instant::now())
            .as_millis()
            .clamp(1, 99_999_999);
        let mut buf = [0u8; 20];
        let timeout = digits(ms as u64, &mut buf);
        let mut value = [0u8; 9];
        value[..timeout.len()].copy_from_slice(timeout);
        value[timeout.len()] = b'm';
        let value = std::str::from_utf8(&value[..timeout.len() + 1]).unwrap_or("1m");
        hpack::encode_field(block, "grpc-timeout", value);

        // HEADERS, then CONTINUATION for whatever passes the peer's
        // (initial, default) frame size.
        let max = frame::DEFAULT_MAX_FRAME_SIZE as usize;
        let end_stream = if req.body.is_empty() {
            frame::FLAG_END_STREAM
        } else {
            0
        };
        let mut chunks = block.chunks(max).peekable();
        let mut kind = frame::HEADERS;
        let mut flags = end_stream;
        if chunks.peek().is_none() {
            frame::write_head(wbuf, 0, kind, flags | frame::FLAG_END_HEADERS, STREAM);
        }
        while let Some(chunk) = chunks.next() {
            if chunks.peek().is_none() {
                flags |= frame::FLAG_END_HEADERS;
            }
            frame::write_head(wbuf, chunk.len(), kind, flags, STREAM);
            wbuf.extend_from_slice(chunk);
            kind = frame::CONTINUATION;
            flags = 0;
        }
    }

    /// Sends as much of the request body as the windows allow.
    pub(super) fn send_body(&mut self, body: &[u8], wbuf: &mut Vec<u8>) {
        while self.body_sent < body.len() {
            let room = self
                .conn_send
                .min(self.stream_send)
                .min(i64::from(self.peer_max_frame));
            if room <= 0 {
                return;
            }
            let n = (body.len() - self.body_sent).min(room as usize);
            let last = self.body_sent + n == body.len();
            let flags = if last { frame::FLAG_END_STREAM } else { 0 };
            frame::write_head(wbuf, n, frame::DATA, flags, STREAM);
            wbuf.extend_from_slice(&body[self.body_sent..self.body_sent + n]);
            self.body_sent += n;
            self.conn_send -= n as i64;
            self.stream_send -= n as i64;
        }
    }

    pub(super) fn on_frame(
        &mut self,
        head: &Head,
        payload: &[u8],
        wbuf: &mut Vec<u8>,
        block: &mut Vec<u8>,
        hpack: &mut hpack::Decoder,
        on_data: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        // Nothing may come between HEADERS and its last CONTINUATION.
        if self.continuing.is_some() && head.kind != frame::CONTINUATION {
            return Err(Error::Protocol("expected CONTINUATION"));
        }
        match head.kind {
            frame::DATA => self.on_data(head, payload, wbuf, on_data),
            frame::HEADERS => self.on_headers(head, payload, block, hpack),
            frame::CONTINUATION => self.on_continuation(head, payload, block, hpack),
            frame::PRIORITY => {
                if head.stream == 0 {
                    return Err(Error::Protocol("PRIORITY on stream 0"));
                }
                if head.len != 5 {
                    return Err(Error::FrameSize("PRIORITY not 5 bytes"));
                }
                Ok(())
            }
            frame::RST_STREAM => {
                let code = frame::rst_code(payload)?;
                match head.stream {
                    STREAM => Err(Error::Reset { code }),
                    0 => Err(Error::Protocol("RST_STREAM on stream 0")),
                    _ => Err(Error::Protocol("RST_STREAM on an idle stream")),
                }
            }
            frame::SETTINGS => self.on_settings(head, payload, wbuf),
            frame::PUSH_PROMISE => Err(Error::Protocol("PUSH_PROMISE with push disabled")),
            frame::PING => {
                if head.stream != 0 {
                    return Err(Error::Protocol("PING on a stream"));
                }
                let opaque: &[u8; 8] = payload
                    .try_into()
                    .map_err(|_| Error::FrameSize("PING not 8 bytes"))?;
                if !head.has(frame::FLAG_ACK) {
                    frame::write_ping_ack(wbuf, opaque);
                }
                Ok(())
            }
            frame::GOAWAY => {
                if head.stream != 0 {
                    return Err(Error::Protocol("GOAWAY on a stream"));
                }
                let (last, code, _debug) = frame::goaway(payload)?;
                // A graceful GOAWAY that covers our stream lets it finish;
                // one that does not means it was never processed.
                if last < STREAM {
                    return Err(Error::GoAway { code });
                }
                Ok(())
            }
            frame::WINDOW_UPDATE => self.on_window_update(head, payload),
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    /// HEADERS: a header block starts; whole unless CONTINUATION follows.
    fn on_headers(
        &mut self,
        head: &Head,
        payload: &[u8],
        block: &mut Vec<u8>,
        hpack: &mut hpack::Decoder,
    ) -> Result<(), Error> {
        self.own_stream(head)?;
        let fragment = frame::headers_fragment(head, payload)?;
        block.clear();
        self.append_block(block, fragment)?;
        let end_stream = head.has(frame::FLAG_END_STREAM);
        if head.has(frame::FLAG_END_HEADERS) {
            self.on_block(block, end_stream, hpack)
        } else {
            self.continuing = Some(end_stream);
            Ok(())
        }
    }

    /// CONTINUATION: more of the header block HEADERS started.
    fn on_continuation(
        &mut self,
        head: &Head,
        payload: &[u8],
        block: &mut Vec<u8>,
        hpack: &mut hpack::Decoder,
    ) -> Result<(), Error> {
        let Some(end_stream) = self.continuing else {
            return Err(Error::Protocol("CONTINUATION without HEADERS"));
        };
        self.own_stream(head)?;
        self.append_block(block, payload)?;
        if head.has(frame::FLAG_END_HEADERS) {
            self.continuing = None;
            self.on_block(block, end_stream, hpack)?;
        }
        Ok(())
    }

    /// WINDOW_UPDATE: more room to send, on the connection or our stream.
    fn on_window_update(&mut self, head: &Head, payload: &[u8]) -> Result<(), Error> {
        let inc = i64::from(frame::window_increment(payload)?);
        if inc == 0 {
            return Err(Error::Protocol("WINDOW_UPDATE of 0"));
        }
        let window = match head.stream {
            0 => &mut self.conn_send,
            STREAM => &mut self.stream_send,
            // Other streams are closed or idle: nothing to update.
            _ => return Ok(()),
        };
        *window += inc;
        if *window > i64::from(frame::MAX_WINDOW) {
            return Err(Error::FlowControl);
        }
        Ok(())
    }

    /// A server may only answer on the stream we opened.
    pub(super) fn own_stream(&self, head: &Head) -> Result<(), Error> {
        if head.stream != STREAM {
            return Err(Error::Protocol("frame on a stream we did not open"));
        }
        if self.phase == Phase::Done {
            return Err(Error::Protocol("frame after END_STREAM"));
        }
        Ok(())
    }

    pub(super) fn append_block(&self, block: &mut Vec<u8>, fragment: &[u8]) -> Result<(), Error> {
        // A compressed block is at most about the size of what it decodes
        // to; twice the list limit leaves room for unlucky Huffman.
        if block.len() + fragment.len() > 2 * self.limits.max_header_list_size as usize {
            return Err(Error::Hpack(hpack::HpackError::HeaderListTooLarge));
        }
        block.extend_from_slice(fragment);
        Ok(())
    }

    pub(super) fn on_block(
        &mut self,
        block: &[u8],
        end_stream: bool,
        hpack: &mut hpack::Decoder,
    ) -> Result<(), Error> {
        let mut b = Block::default();
        // The block is decoded even if we then reject it: the HPACK table
        // must stay in step (and a broken one is an error of its own).
        hpack.decode(block, &mut |n, v| b.field(n, v))?;
        match self.phase {
            Phase::Headers => {
                let status = b
                    .status
                    .ok_or(Error::Protocol("response without :status"))?;
                if (100..200).contains(&status) {
                    if end_stream {
                        return Err(Error::Protocol("informational response ends the stream"));
                    }
                    return Ok(());
                }
                if status != 200 {
                    return Err(Error::HttpStatus(status));
                }
                if !b.grpc_content_type {
                    return Err(Error::NotGrpc);
                }
                if !end_stream {
                    self.phase = Phase::Body;
                    return Ok(());
                }
                // Trailers-only: this block carries the status.
            }
            Phase::Body => {
                if !end_stream {
                    return Err(Error::Protocol("trailers without END_STREAM"));
                }
                if b.pseudo {
                    return Err(Error::Protocol("pseudo-header in trailers"));
                }
            }
            Phase::Done => return Err(Error::Protocol("frame after END_STREAM")),
        }
        self.phase = Phase::Done;
        self.status = Status {
            code: b.grpc_status,
            message: String::from_utf8_lossy(&b.message).into_owned(),
        };
        Ok(())
    }

    pub(super) fn on_data(
        &mut self,
        head: &Head,
        payload: &[u8],
        wbuf: &mut Vec<u8>,
        on_data: &mut dyn FnMut(&[u8]) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if head.stream == 0 {
            return Err(Error::Protocol("DATA on stream 0"));
        }
        self.own_stream(head)?;
        // The whole payload counts against the windows, padding included.
        let len = i64::from(head.len);
        self.conn_recv -= len;
        self.stream_recv -= len;
        if self.conn_recv < 0 || self.stream_recv < 0 {
            return Err(Error::FlowControl);
        }
        if self.phase != Phase::Body {
            return Err(Error::Protocol("DATA before response headers"));
        }
        let data = frame::unpad(head, payload)?;
        self.body_len += data.len() as u64;
        if self.body_len > self.limits.max_body {
            return Err(Error::MessageTooLarge);
        }
        if !data.is_empty() {
            on_data(data)?;
        }
        let end_stream = head.has(frame::FLAG_END_STREAM);
        if end_stream {
            // gRPC needs trailers; without them there is no status.
            self.phase = Phase::Done;
        }
        // Give back what we consumed once half a window is used up. The
        // stream's window is not worth updating once it has ended.
        let half = self.limits.window / 2;
        self.conn_unacked += head.len;
        if self.conn_unacked >= half {
            frame::write_window_update(wbuf, 0, self.conn_unacked);
            self.conn_recv += i64::from(self.conn_unacked);
            self.conn_unacked = 0;
        }
        self.stream_unacked += head.len;
        if self.stream_unacked >= half && !end_stream {
            frame::write_window_update(wbuf, STREAM, self.stream_unacked);
            self.stream_recv += i64::from(self.stream_unacked);
            self.stream_unacked = 0;
        }
        Ok(())
    }

    pub(super) fn on_settings(
        &mut self,
        head: &Head,
        payload: &[u8],
        wbuf: &mut Vec<u8>,
    ) -> Result<(), Error> {
        if head.stream != 0 {
            return Err(Error::Protocol("SETTINGS on a stream"));
        }
        if head.has(frame::FLAG_ACK) {
            if !payload.is_empty() {
                return Err(Error::FrameSize("SETTINGS ack with a payload"));
            }
            return Ok(());
        }
        for (id, value) in frame::settings(payload)? {
            match id {
                frame::SETTINGS_ENABLE_PUSH if value > 1 => {
                    return Err(Error::Protocol("ENABLE_PUSH not 0 or 1"));
                }
                frame::SETTINGS_INITIAL_WINDOW_SIZE => {
                    if value > frame::MAX_WINDOW {
                        return Err(Error::FlowControl);
                    }
                    // Applies to open streams as a delta (§6.9.2).
                    self.stream_send += i64::from(value) - i64::from(self.peer_initial_window);
                    self.peer_initial_window = value;
                }
                frame::SETTINGS_MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_MAX_FRAME_SIZE..1 << 24).contains(&value) {
                        return Err(Error::Protocol("MAX_FRAME_SIZE out of range"));
                    }
                    self.peer_max_frame = value;
                }
                // HEADER_TABLE_SIZE bounds an encoder's dynamic table; ours
                // never uses one. The rest do not concern a client.
                _ => {}
            }
        }
        frame::write_settings_ack(wbuf);
        Ok(())
    }
}
