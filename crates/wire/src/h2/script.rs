//! Frames a test server (or a fuzz target) can send, built with our own
//! writers and HPACK encoder, and an in-memory stream to replay them.
//! For tests and fuzzing only: not in a normal build.

use super::*;
use crate::huffman;

pub fn settings(out: &mut Vec<u8>, values: &[(u16, u32)]) {
    frame::write_settings(out, values);
}

pub fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    frame::write_head(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

/// A header block with every field Huffman-coded and added to the
/// dynamic table, the way grpc servers tend to send them.
pub fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        b.push(0x40);
        for s in [n, v] {
            let mut coded = Vec::new();
            huffman::encode(s.as_bytes(), &mut coded);
            hpack::encode_integer(&mut b, 0x80, 7, coded.len());
            b.extend_from_slice(&coded);
        }
    }
    b
}

/// A gRPC message: the 5-byte prefix and the bytes.
pub fn grpc_message(msg: &[u8]) -> Vec<u8> {
    let mut m = vec![0];
    m.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    m.extend_from_slice(msg);
    m
}

/// A complete, well-behaved response carrying `msg`.
pub fn ok_response(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    settings(&mut out, &[(frame::SETTINGS_MAX_FRAME_SIZE, 16384)]);
    frame(&mut out, frame::SETTINGS, frame::FLAG_ACK, 0, &[]);
    let h = block(&[(":status", "200"), ("content-type", "application/grpc")]);
    frame(&mut out, frame::HEADERS, frame::FLAG_END_HEADERS, 1, &h);
    for chunk in grpc_message(msg).chunks(16384) {
        frame(&mut out, frame::DATA, 0, 1, chunk);
    }
    let t = block(&[("grpc-status", "0")]);
    frame(
        &mut out,
        frame::HEADERS,
        frame::FLAG_END_HEADERS | frame::FLAG_END_STREAM,
        1,
        &t,
    );
    out
}

/// A stream that replays `input` in reads of varying size and keeps
/// what the client writes.
pub struct Replay<'a> {
    pub input: &'a [u8],
    pub written: Vec<u8>,
    pub chunk: usize,
    step: usize,
}

impl<'a> Replay<'a> {
    pub fn new(input: &'a [u8], chunk: usize) -> Self {
        Replay {
            input,
            written: Vec::new(),
            chunk: chunk.max(1),
            step: 0,
        }
    }
}

impl Read for Replay<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Vary the read sizes so frames straddle reads.
        self.step = self.step.wrapping_add(1);
        let n = (self.chunk + self.step % 7)
            .min(buf.len())
            .min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input = &self.input[n..];
        Ok(n)
    }
}

impl Write for Replay<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Io for Replay<'_> {}

/// The frames in `bytes` (the client's output, past the preface).
pub fn frames(mut bytes: &[u8]) -> Vec<(Head, Vec<u8>)> {
    let mut out = Vec::new();
    while bytes.len() >= HEADER_LEN {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&bytes[..HEADER_LEN]);
        let head = Head::parse(&h);
        let end = HEADER_LEN + head.len as usize;
        out.push((head, bytes[HEADER_LEN..end].to_vec()));
        bytes = &bytes[end..];
    }
    out
}
