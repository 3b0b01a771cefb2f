//! gzip for responses: `Accept-Encoding` negotiation (RFC 9110 §12.5.3,
//! with q-values, `x-gzip` and `*`), and a compressor that allocates
//! nothing after warm-up: one miniz_oxide state reset per body, CRC-32 by
//! crc32fast, output appended to the caller's reused buffer. `cache.rs`
//! deflates a scrape in two parts with it.

use miniz_oxide::deflate::core::{
    CompressorOxide, TDEFLFlush, TDEFLStatus, compress, create_comp_flags_from_zip_params,
};

/// What the response body is sent as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Identity,
    Gzip,
}

impl Coding {
    /// The header lines the response carries for this coding. `Vary` goes
    /// on every response of a negotiated resource, compressed or not.
    pub fn headers(self) -> &'static str {
        match self {
            Coding::Identity => "Vary: Accept-Encoding\r\n",
            Coding::Gzip => "Content-Encoding: gzip\r\nVary: Accept-Encoding\r\n",
        }
    }
}

/// Parses a qvalue (`0`, `0.5`, `1`, `1.000`) into thousandths.
fn qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Chooses the coding from an `Accept-Encoding` value (RFC 9110 §12.5.3):
/// gzip when `gzip` or `x-gzip` (else `*`) has a non-zero q-value at
/// least that of an explicitly listed identity (or `*`); identity otherwise, including when the header
/// is absent. Case-insensitive; a member with a malformed q-value is
/// ignored. Allocates nothing.
pub fn negotiate(accept_encoding: Option<&[u8]>) -> Coding {
    let Some(value) = accept_encoding else {
        return Coding::Identity;
    };
    let (mut gzip, mut star, mut identity) = (None::<u16>, None::<u16>, None::<u16>);
    for member in value.split(|&b| b == b',') {
        let mut parts = member.split(|&b| b == b';');
        let coding = parts.next().unwrap_or_default().trim_ascii();
        let mut q = Some(1000);
        for p in parts {
            let p = p.trim_ascii();
            if p.len() >= 2 && p[..2].eq_ignore_ascii_case(b"q=") {
                q = qvalue(p[2..].trim_ascii());
            }
        }
        let Some(q) = q else { continue };
        let slot = if coding.eq_ignore_ascii_case(b"gzip") || coding.eq_ignore_ascii_case(b"x-gzip")
        {
            &mut gzip
        } else if coding == b"*" {
            &mut star
        } else if coding.eq_ignore_ascii_case(b"identity") {
            &mut identity
        } else {
            continue;
        };
        // A coding listed twice counts at its highest.
        *slot = Some(slot.map_or(q, |old| old.max(q)));
    }
    let gzip = gzip.or(star).unwrap_or(0);
    // Identity is acceptable by default, but only an explicit q-value for
    // it (or `*`) competes with gzip's.
    let identity = identity.or(star).unwrap_or(0);
    if gzip > 0 && gzip >= identity {
        Coding::Gzip
    } else {
        Coding::Identity
    }
}

/// What the HTTP thread keeps for gzip between responses (one at a time):
/// the deflate state, made at the first gzipped response, and the buffer
/// a compressed body goes to (it swaps places with the plain one).
#[derive(Default)]
pub struct Compressor {
    gzip: Option<Gzip>,
    spare: Vec<u8>,
}

impl Compressor {
    /// Replaces `out[from..]` with one gzip member of it; `out[..from]`
    /// keeps its length (its bytes are not kept: room for the head).
    /// Allocates nothing once both buffers have grown to the largest body.
    pub fn compress(&mut self, out: &mut Vec<u8>, from: usize) {
        let (gzip, spare) = self.parts();
        crate::pool::room(spare, from);
        gzip.member(&out[from..], spare);
        std::mem::swap(out, spare);
    }

    /// The deflate state (made now, the first time) and the spare buffer,
    /// for a body gzipped in parts.
    pub fn parts(&mut self) -> (&mut Gzip, &mut Vec<u8>) {
        (
            self.gzip.get_or_insert_with(|| Gzip::new(1)),
            &mut self.spare,
        )
    }
}

/// gzip's fixed 10-byte header: no name, no mtime, unknown OS.
pub const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// A reusable gzip compressor (miniz_oxide's deflate state is ~300 KiB,
/// allocated once here).
pub struct Gzip {
    state: Box<CompressorOxide>,
}

impl Gzip {
    /// `level` 1 (fast; what the exporter uses) to 9.
    pub fn new(level: u8) -> Gzip {
        let flags = create_comp_flags_from_zip_params(i32::from(level.clamp(1, 9)), -15, 0);
        Gzip {
            state: Box::new(CompressorOxide::new(flags)),
        }
    }

    /// Appends one complete gzip member holding `input` to `out`. Grows
    /// `out` only when its spare capacity is short: after a first body of
    /// the largest size, it allocates nothing.
    pub fn member(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&HEADER);
        self.deflate(input, out, TDEFLFlush::Finish);
        let mut crc = crc32fast::Hasher::new();
        crc.update(input);
        trailer(out, crc, input.len());
    }

    /// Appends `input` as raw deflate, from a fresh dictionary: ended by
    /// the final block (`Finish`), or byte-aligned and open for more
    /// blocks (`Sync`), so that other deflate output may follow it.
    pub fn deflate(&mut self, input: &[u8], out: &mut Vec<u8>, flush: TDEFLFlush) {
        self.state.reset();
        let mut pos = 0;
        loop {
            let start = out.len();
            // Level 1 on text shrinks it; stored blocks cost 5 bytes per
            // 64 KiB. Ask for a generous bound once; keep what we get.
            let want = (input.len() - pos) / 2 + 1024;
            if out.capacity() - start < want {
                out.reserve(input.len() - pos + input.len() / 64 + 1024);
            }
            let cap = out.capacity();
            out.resize(cap, 0);
            let (status, used, written) =
                compress(&mut self.state, &input[pos..], &mut out[start..], flush);
            pos += used;
            out.truncate(start + written);
            match status {
                TDEFLStatus::Done => break,
                // A sync flush is done when the input is and it had room.
                TDEFLStatus::Okay
                    if matches!(flush, TDEFLFlush::Sync)
                        && pos == input.len()
                        && written < cap - start => {}
                TDEFLStatus::Okay => continue, // output full: room is made above
                // Bad parameters or a callback failure; neither happens
                // with a slice output. Keep the stream well-formed anyway.
                _ => break,
            }
            break;
        }
    }
}

/// Appends `input` as deflate's final stored blocks (RFC 1951 §3.2.4):
/// no compression, a copy. After a sync flush the stream is byte-aligned,
/// so each block is a header byte, the length and its complement, then the
/// bytes.
pub fn stored(input: &[u8], out: &mut Vec<u8>) {
    let mut blocks = input.chunks(usize::from(u16::MAX)).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(b) = blocks.next() {
        let last = blocks.peek().is_none();
        let len = b.len() as u16;
        out.push(u8::from(last));
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(b);
    }
}

/// gzip's trailer: the CRC-32 and the length (mod 2^32) of what it holds.
pub fn trailer(out: &mut Vec<u8>, crc: crc32fast::Hasher, len: usize) {
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn n(s: &str) -> Coding {
        negotiate(Some(s.as_bytes()))
    }

    #[test]
    fn negotiation() {
        use Coding::*;
        assert_eq!(negotiate(None), Identity);
        assert_eq!(n(""), Identity);
        assert_eq!(n("gzip"), Gzip);
        assert_eq!(n("GZip"), Gzip);
        assert_eq!(n("x-gzip"), Gzip);
        assert_eq!(n("gzip, deflate, br"), Gzip); // curl --compressed
        assert_eq!(n("deflate, br"), Identity);
        assert_eq!(n("*"), Gzip);
        assert_eq!(n("*;q=0"), Identity);
        assert_eq!(n("gzip;q=0"), Identity);
        assert_eq!(n("gzip; q=0.000"), Identity);
        assert_eq!(n("gzip;q=0, *"), Identity); // gzip's own q wins over *
        assert_eq!(n("x-gzip;q=0, identity"), Identity);
        assert_eq!(n("gzip;q=0.5, identity;q=0.6"), Identity);
        assert_eq!(n("gzip;q=0.6, identity;q=0.5"), Gzip);
        assert_eq!(n("gzip;q=0.5, identity;q=0.5"), Gzip);
        assert_eq!(n("identity;q=0, gzip;q=0.001"), Gzip);
        assert_eq!(n("gzip;q=1.0"), Gzip);
        assert_eq!(n("gzip;Q=1"), Gzip);
        assert_eq!(n("gzip;q=1.001"), Identity); // malformed: ignored
        assert_eq!(n("gzip;q=2"), Identity);
        assert_eq!(n("gzip;q=abc"), Identity);
        assert_eq!(n("gzip;q=0.12345"), Identity);
        assert_eq!(n(" gzip ; q=0.2 "), Gzip);
        assert_eq!(n("gzip;q=0, gzip;q=1"), Gzip);
        assert_eq!(n("br;q=1.0, gzip;q=0.8, *;q=0.1"), Gzip); // Prometheus-like
        assert_eq!(n("gzipx, xgzip"), Identity);
    }

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(b)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn stored_blocks_end_a_sync_flushed_stream_at_any_length() {
        let mut g = Gzip::new(1);
        let text = b"# HELP x\nx 1\n".repeat(500);
        for len in [0, 1, 1000, 65_535, 65_536, 200_001] {
            let tail: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut out = HEADER.to_vec();
            g.deflate(&text, &mut out, TDEFLFlush::Sync);
            stored(&tail, &mut out);
            let mut crc = crc32fast::Hasher::new();
            crc.update(&text);
            crc.update(&tail);
            trailer(&mut out, crc, text.len() + len);
            assert_eq!(gunzip(&out), [&text[..], &tail].concat(), "{len}");
        }
    }

    #[test]
    fn round_trip_and_members() {
        let mut g = Gzip::new(1);
        let mut out = Vec::new();
        for input in [&b""[..], b"a", &[7u8; 200_000], b"# HELP x\nx 1\n"] {
            out.clear();
            g.member(input, &mut out);
            assert_eq!(gunzip(&out), input);
            // A single-member reader reads exactly this member too.
            let mut one = Vec::new();
            flate2::read::GzDecoder::new(&out[..])
                .read_to_end(&mut one)
                .unwrap();
            assert_eq!(one, input);
        }
        // Incompressible input still round-trips.
        let mut x = 1u32;
        let noise: Vec<u8> = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        out.clear();
        g.member(&noise, &mut out);
        assert_eq!(gunzip(&out), noise);
        // Two members read as their concatenation.
        out.clear();
        g.member(b"# cached families\nfoo 1\n", &mut out);
        g.member(b"gpu_exporter_snapshot_age_seconds 0.2\n# EOF\n", &mut out);
        assert_eq!(
            gunzip(&out),
            b"# cached families\nfoo 1\ngpu_exporter_snapshot_age_seconds 0.2\n# EOF\n"
        );
    }
}
