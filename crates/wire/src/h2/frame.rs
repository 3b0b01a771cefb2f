//! HTTP/2 frames (RFC 9113 §4 and §6): the 9-byte header, the payload
//! shapes a client reads, and writers for the frames it sends. Parsing
//! borrows from the caller's buffer; writing appends to the caller's.

use std::fmt;

pub const HEADER_LEN: usize = 9;
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The smallest SETTINGS_MAX_FRAME_SIZE, which every peer starts with.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
pub const DEFAULT_WINDOW: u32 = 65_535;
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_ACK: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;
pub const FLAG_PADDED: u8 = 0x8;
pub const FLAG_PRIORITY: u8 = 0x20;

pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Error codes (RFC 9113 §7), as sent in RST_STREAM and GOAWAY.
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;

/// A frame's 9-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    /// With the reserved bit cleared.
    pub stream: u32,
}

impl Head {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// Why a frame's payload was refused; the variant names the connection
/// error code to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// PROTOCOL_ERROR, with what was wrong.
    Protocol(&'static str),
    /// FRAME_SIZE_ERROR: a fixed-size payload of the wrong length.
    Size(&'static str),
}

impl FrameError {
    pub fn code(&self) -> u32 {
        match self {
            FrameError::Protocol(_) => PROTOCOL_ERROR,
            FrameError::Size(_) => FRAME_SIZE_ERROR,
        }
    }
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Protocol(m) => write!(f, "protocol error: {m}"),
            FrameError::Size(m) => write!(f, "frame size error: {m}"),
        }
    }
}

/// The payload of a DATA or HEADERS frame without its padding (§6.1).
pub fn unpad<'a>(head: &Head, payload: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if !head.has(FLAG_PADDED) {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or(FrameError::Size("padded frame without pad length"))?;
    // Padding equal to or longer than what is left is an error.
    rest.len()
        .checked_sub(pad as usize)
        .map(|n| &rest[..n])
        .ok_or(FrameError::Protocol("padding exceeds payload"))
}

/// The header block fragment of a HEADERS frame: padding and the
/// priority fields (which we ignore) removed.
pub fn headers_fragment<'a>(head: &Head, payload: &'a [u8]) -> Result<&'a [u8], FrameError> {
    let rest = unpad(head, payload)?;
    if head.has(FLAG_PRIORITY) {
        return rest
            .get(5..)
            .ok_or(FrameError::Size("headers priority fields missing"));
    }
    Ok(rest)
}

/// The (identifier, value) pairs of a non-ACK SETTINGS payload.
pub fn settings(payload: &[u8]) -> Result<impl Iterator<Item = (u16, u32)> + '_, FrameError> {
    if !payload.len().is_multiple_of(6) {
        return Err(FrameError::Size("settings length not a multiple of 6"));
    }
    Ok(payload.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    }))
}

/// The window size increment of a WINDOW_UPDATE (§6.9).
pub fn window_increment(payload: &[u8]) -> Result<u32, FrameError> {
    let b: [u8; 4] = payload
        .try_into()
        .map_err(|_| FrameError::Size("window update not 4 bytes"))?;
    Ok(u32::from_be_bytes(b) & MAX_WINDOW)
}

/// The error code of a RST_STREAM (§6.4).
pub fn rst_code(payload: &[u8]) -> Result<u32, FrameError> {
    let b: [u8; 4] = payload
        .try_into()
        .map_err(|_| FrameError::Size("rst_stream not 4 bytes"))?;
    Ok(u32::from_be_bytes(b))
}

/// A GOAWAY's (last stream id, error code, debug data) (§6.8).
pub fn goaway(payload: &[u8]) -> Result<(u32, u32, &[u8]), FrameError> {
    if payload.len() < 8 {
        return Err(FrameError::Size("goaway shorter than 8 bytes"));
    }
    let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & MAX_WINDOW;
    let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
    Ok((last, code, &payload[8..]))
}

pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len < 1 << 24);
    let len = (len as u32).to_be_bytes();
    out.extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
    out.extend_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

pub fn write_settings(out: &mut Vec<u8>, values: &[(u16, u32)]) {
    write_head(out, values.len() * 6, SETTINGS, 0, 0);
    for &(id, v) in values {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, SETTINGS, FLAG_ACK, 0);
}

pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

pub fn write_ping_ack(out: &mut Vec<u8>, opaque: &[u8; 8]) {
    write_head(out, 8, PING, FLAG_ACK, 0);
    out.extend_from_slice(opaque);
}

pub fn write_rst(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    write_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(kind: u8, flags: u8) -> Head {
        Head {
            len: 0,
            kind,
            flags,
            stream: 1,
        }
    }

    #[test]
    fn header_round_trip_and_reserved_bit() {
        let mut out = Vec::new();
        write_head(&mut out, 0x01_02_03, HEADERS, 0x25, 7);
        let b: [u8; 9] = out[..].try_into().unwrap();
        assert_eq!(
            Head::parse(&b),
            Head {
                len: 0x01_02_03,
                kind: HEADERS,
                flags: 0x25,
                stream: 7
            }
        );
        // The reserved bit is ignored on receipt.
        let b = [0, 0, 0, 0, 0, 0x80, 0, 0, 1];
        assert_eq!(Head::parse(&b).stream, 1);
    }

    #[test]
    fn padding() {
        let h = head(DATA, FLAG_PADDED);
        assert_eq!(unpad(&h, &[2, b'a', b'b', 0, 0]), Ok(&b"ab"[..]));
        assert_eq!(unpad(&h, &[0, b'a']), Ok(&b"a"[..]));
        assert_eq!(unpad(&h, &[3, b'a', 0, 0]), Ok(&b""[..]));
        assert!(matches!(
            unpad(&h, &[4, 0, 0, 0]),
            Err(FrameError::Protocol(_))
        ));
        assert!(matches!(unpad(&h, &[]), Err(FrameError::Size(_))));
        assert_eq!(unpad(&head(DATA, 0), &[9, 9]), Ok(&[9u8, 9][..]));
    }

    #[test]
    fn headers_with_priority_and_padding() {
        let h = head(HEADERS, FLAG_PADDED | FLAG_PRIORITY);
        let p = [1, 0, 0, 0, 3, 16, 0x88, 0];
        assert_eq!(headers_fragment(&h, &p), Ok(&[0x88u8][..]));
        let h = head(HEADERS, FLAG_PRIORITY);
        assert!(headers_fragment(&h, &[0, 0, 0]).is_err());
    }

    #[test]
    fn fixed_size_payloads() {
        assert_eq!(window_increment(&[0x80, 0, 0, 5]), Ok(5));
        assert!(window_increment(&[0, 0, 5]).is_err());
        assert_eq!(rst_code(&[0, 0, 0, 8]), Ok(CANCEL));
        assert!(rst_code(&[0; 5]).is_err());
        let (last, code, debug) = goaway(&[0, 0, 0, 1, 0, 0, 0, 2, b'x']).unwrap();
        assert_eq!((last, code, debug), (1, 2, &b"x"[..]));
        assert!(goaway(&[0; 7]).is_err());
        let s: Vec<_> = settings(&[0, 4, 0, 1, 0, 0, 0, 5, 0, 0, 0x40, 0])
            .unwrap()
            .collect();
        assert_eq!(s, [(4, 65536), (5, 16384)]);
        assert!(settings(&[0; 5]).is_err());
    }
}
