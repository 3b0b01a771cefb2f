//! HPACK's static Huffman code (RFC 7541 Appendix B), decode only.
//!
//! The code is canonical: within one bit length the codes are consecutive,
//! and every prefix of a longer code sorts above the codes of its length.
//! So decoding needs, per length, the first code, how many codes there are,
//! and where their symbols start in one table sorted by (length, code).
//! All three are computed at compile time from the table below; decoding is
//! then one shift, one compare and one lookup per input bit, with no
//! allocation but the caller's output buffer.

use std::fmt;

/// (code, length in bits) for symbols 0..=255 and EOS (256), from RFC 7541
/// Appendix B.
#[rustfmt::skip]
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), (0xfffffe4, 28),
    (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28), (0xfffffe8, 28), (0xffffea, 24),
    (0x3ffffffc, 30), (0xfffffe9, 28), (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28),
    (0xfffffec, 28), (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28), (0xffffff4, 28),
    (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), (0xffffff8, 28), (0xffffff9, 28),
    (0xffffffa, 28), (0xffffffb, 28), (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11), (0x3fa, 10), (0x3fb, 10), (0xf9, 8),
    (0x7fb, 11), (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6), (0x0, 5), (0x1, 5), (0x2, 5),
    (0x19, 6), (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6), (0x1e, 6), (0x1f, 6), (0x5c, 7),
    (0xfb, 8), (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10), (0x1ffa, 13), (0x21, 6),
    (0x5d, 7), (0x5e, 7), (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7), (0x63, 7), (0x64, 7),
    (0x65, 7), (0x66, 7), (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7), (0x6b, 7), (0x6c, 7),
    (0x6d, 7), (0x6e, 7), (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7), (0xfc, 8), (0x73, 7),
    (0xfd, 8), (0x1ffb, 13), (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7), (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5), (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13),
    (0xffffffc, 28), (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23), (0x3fffd6, 22),
    (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23), (0x7fffdd, 23), (0x7fffde, 23),
    (0xffffeb, 24), (0x7fffdf, 23), (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22),
    (0x7fffe0, 23), (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23), (0x3fffd9, 22),
    (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24), (0x3fffda, 22), (0x1fffdd, 21),
    (0xfffe9, 20), (0x3fffdb, 22), (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23),
    (0x1fffde, 21), (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24),
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23), (0x1fffe0, 21),
    (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21), (0x7fffed, 23), (0x3fffe1, 22),
    (0x7fffee, 23), (0x7fffef, 23), (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22),
    (0x3fffe4, 22), (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19), (0x3fffe7, 22),
    (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25), (0x3ffffe2, 26), (0x3ffffe3, 26),
    (0x3ffffe4, 26), (0x7ffffde, 27), (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24),
    (0x1ffffed, 25), (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27),
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24), (0x1fffe4, 21),
    (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26), (0xffffffd, 28), (0x7ffffe3, 27),
    (0x7ffffe4, 27), (0x7ffffe5, 27), (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20),
    (0x1fffe6, 21), (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25), (0xfffff4, 24),
    (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23), (0x3ffffeb, 26), (0x7ffffe6, 27),
    (0x3ffffec, 26), (0x3ffffed, 26), (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27),
    (0x7ffffea, 27), (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26), (0x3fffffff, 30),
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

struct Canonical {
    /// The smallest code of each length.
    first: [u32; MAX_LEN + 1],
    /// How many codes have each length.
    count: [u32; MAX_LEN + 1],
    /// Where the symbols of each length start in `symbols`.
    offset: [u16; MAX_LEN + 1],
    /// Every symbol, ordered by (length, code).
    symbols: [u16; 257],
}

const fn canonical() -> Canonical {
    let mut first = [u32::MAX; MAX_LEN + 1];
    let mut count = [0u32; MAX_LEN + 1];
    let mut i = 0;
    while i < CODES.len() {
        let (code, len) = CODES[i];
        let len = len as usize;
        count[len] += 1;
        if code < first[len] {
            first[len] = code;
        }
        i += 1;
    }
    let mut offset = [0u16; MAX_LEN + 1];
    let mut at = 0u16;
    let mut len = 0;
    while len <= MAX_LEN {
        offset[len] = at;
        at += count[len] as u16;
        len += 1;
    }
    let mut symbols = [0u16; 257];
    let mut s = 0;
    while s < CODES.len() {
        let (code, len) = CODES[s];
        let len = len as usize;
        symbols[offset[len] as usize + (code - first[len]) as usize] = s as u16;
        s += 1;
    }
    Canonical {
        first,
        count,
        offset,
        symbols,
    }
}

static TABLE: Canonical = canonical();

/// Why a Huffman-coded string was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HuffmanError {
    /// The EOS symbol appeared inside the string (RFC 7541 §5.2).
    Eos,
    /// The padding was longer than 7 bits or not a prefix of EOS.
    BadPadding,
    /// The output would pass the caller's limit.
    TooLong,
}

impl fmt::Display for HuffmanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HuffmanError::Eos => "huffman string contains EOS",
            HuffmanError::BadPadding => "huffman string has invalid padding",
            HuffmanError::TooLong => "huffman string too long",
        })
    }
}

/// Appends the decoding of `input` to `out`, refusing to let `out` grow
/// past `max_len` bytes in total.
pub fn decode(input: &[u8], out: &mut Vec<u8>, max_len: usize) -> Result<(), HuffmanError> {
    let t = &TABLE;
    let mut code: u32 = 0;
    let mut len: usize = 0;
    for &byte in input {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            // A prefix of a longer code sorts above this length's codes,
            // so `code - first` wraps or exceeds `count` unless it is one.
            let rel = code.wrapping_sub(t.first[len]);
            if rel < t.count[len] {
                let sym = t.symbols[t.offset[len] as usize + rel as usize];
                if sym == EOS {
                    return Err(HuffmanError::Eos);
                }
                if out.len() >= max_len {
                    return Err(HuffmanError::TooLong);
                }
                out.push(sym as u8);
                code = 0;
                len = 0;
            } else if len == MAX_LEN {
                // Only EOS is 30 bits long, and it matched above.
                return Err(HuffmanError::Eos);
            }
        }
    }
    // What is left must be padding: at most 7 bits, all ones (§5.2).
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HuffmanError::BadPadding);
    }
    Ok(())
}

/// The Huffman encoding of `input`, for tests and for callers that want
/// the shorter form; our request encoder sends plain literals.
pub fn encode(input: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in input {
        let (code, len) = CODES[b as usize];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1u64 << bits) - 1;
    }
    if bits > 0 {
        // Pad with the most significant bits of EOS: all ones.
        out.push(((acc << (8 - bits)) | ((1u64 << (8 - bits)) - 1)) as u8);
    }
}

/// The length of `input` once Huffman-coded.
pub fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input
        .iter()
        .map(|&b| usize::from(CODES[b as usize].1))
        .sum();
    bits.div_ceil(8)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Bytes from hex digits, spaces ignored (as the RFC prints them).
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn table_is_canonical_and_complete() {
        let mut seen = [false; 257];
        for &s in TABLE.symbols.iter() {
            assert!(!seen[s as usize], "symbol {s} placed twice");
            seen[s as usize] = true;
        }
        for len in 5..=MAX_LEN {
            let n = TABLE.count[len];
            if n == 0 {
                continue;
            }
            // Consecutive codes within the length.
            let codes: Vec<u32> = CODES
                .iter()
                .filter(|c| c.1 as usize == len)
                .map(|c| c.0)
                .collect();
            let min = *codes.iter().min().unwrap();
            let max = *codes.iter().max().unwrap();
            assert_eq!(max - min + 1, n, "length {len} not consecutive");
        }
        // Kraft equality: a complete prefix code.
        let sum: u64 = CODES.iter().map(|c| 1u64 << (MAX_LEN - c.1 as usize)).sum();
        assert_eq!(sum, 1u64 << MAX_LEN);
    }

    // RFC 7541 Appendix C.4 and C.6 strings.
    const VECTORS: &[(&str, &str)] = &[
        ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        ("no-cache", "a8eb 1064 9cbf"),
        ("custom-key", "25a8 49e9 5ba9 7d7f"),
        ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        ("302", "6402"),
        ("private", "aec3 771a 4b"),
        (
            "Mon, 21 Oct 2013 20:13:21 GMT",
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
        ),
        (
            "https://www.example.com",
            "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
        ),
        (
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ),
    ];

    #[test]
    fn rfc_vectors_decode_and_encode() {
        for (plain, coded) in VECTORS {
            let coded = hex(coded);
            let mut out = Vec::new();
            decode(&coded, &mut out, 1024).unwrap();
            assert_eq!(out, plain.as_bytes());
            let mut enc = Vec::new();
            encode(plain.as_bytes(), &mut enc);
            assert_eq!(enc, coded, "{plain}");
            assert_eq!(encoded_len(plain.as_bytes()), coded.len());
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut out = Vec::new();
        decode(&enc, &mut out, all.len()).unwrap();
        assert_eq!(out, all);
        assert_eq!(
            decode(&enc, &mut Vec::new(), all.len() - 1),
            Err(HuffmanError::TooLong)
        );
    }

    #[test]
    fn padding_and_eos_are_checked() {
        // "0" is 00000 (5 bits): padding 111 is fine, 110 is not.
        assert!(decode(&[0b0000_0111], &mut Vec::new(), 8).is_ok());
        assert_eq!(
            decode(&[0b0000_0110], &mut Vec::new(), 8),
            Err(HuffmanError::BadPadding)
        );
        // A whole byte of ones is 8 bits of padding: too long.
        assert_eq!(
            decode(&[0b0000_0111, 0xff], &mut Vec::new(), 8),
            Err(HuffmanError::BadPadding)
        );
        // EOS itself (30 ones) inside the string.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut Vec::new(), 8),
            Err(HuffmanError::Eos)
        );
        assert!(decode(&[], &mut Vec::new(), 0).is_ok());
    }
}
