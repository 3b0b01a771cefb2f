//! HPACK (RFC 7541): a decoder with Huffman and the dynamic table, and
//! the small encoder our requests need.
//!
//! The decoder reuses its storage: the dynamic table lives in one byte
//! buffer (oldest entry first, compacted when half of it is dead), and
//! literals are decoded into a scratch buffer. After the first few header
//! blocks a connection decodes headers without allocating.

use crate::huffman::{self, HuffmanError};
use std::collections::VecDeque;
use std::fmt;

/// The static table (RFC 7541 Appendix A); index 1 is `STATIC[0]`.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead in the table size (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The default SETTINGS_HEADER_TABLE_SIZE, which we keep.
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// Why a header block was refused. Any of these is a connection error
/// (COMPRESSION_ERROR): the tables are out of step after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HpackError {
    /// The block ended inside a representation.
    Truncated,
    /// An integer does not fit in 32 bits.
    IntegerOverflow,
    /// Index 0, or past the end of the static and dynamic tables.
    BadIndex,
    Huffman(HuffmanError),
    /// A table size update above what we allowed.
    SizeUpdateTooLarge,
    /// A table size update after the first header field of a block.
    SizeUpdateMisplaced,
    /// The decoded list passes our SETTINGS_MAX_HEADER_LIST_SIZE.
    HeaderListTooLarge,
}

impl fmt::Display for HpackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HpackError::Truncated => f.write_str("truncated header block"),
            HpackError::IntegerOverflow => f.write_str("hpack integer overflow"),
            HpackError::BadIndex => f.write_str("hpack index out of range"),
            HpackError::Huffman(e) => e.fmt(f),
            HpackError::SizeUpdateTooLarge => f.write_str("hpack table size update too large"),
            HpackError::SizeUpdateMisplaced => f.write_str("hpack table size update misplaced"),
            HpackError::HeaderListTooLarge => f.write_str("header list too large"),
        }
    }
}

impl From<HuffmanError> for HpackError {
    fn from(e: HuffmanError) -> Self {
        HpackError::Huffman(e)
    }
}

/// The dynamic table: entries' bytes in one buffer, newest last.
#[derive(Debug, Default)]
struct Table {
    /// Name then value of each live entry, from `start` on.
    bytes: Vec<u8>,
    start: usize,
    /// Absolute position of `bytes[0]`; entries keep absolute offsets so
    /// compaction does not have to rewrite them.
    base: usize,
    /// (absolute offset, name length, value length), oldest first.
    entries: VecDeque<(usize, u32, u32)>,
    /// The RFC's size: name + value + 32 per entry.
    size: usize,
    max_size: usize,
}

impl Table {
    fn reset(&mut self, max_size: usize) {
        self.bytes.clear();
        self.start = 0;
        self.base = 0;
        self.entries.clear();
        self.size = 0;
        self.max_size = max_size;
    }

    /// Entry `i`, 0 being the newest.
    fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let n = self.entries.len();
        let &(off, nl, vl) = self.entries.get(n.checked_sub(i + 1)?)?;
        let at = off - self.base;
        let mid = at + nl as usize;
        Some((&self.bytes[at..mid], &self.bytes[mid..mid + vl as usize]))
    }

    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            let Some((_, nl, vl)) = self.entries.pop_front() else {
                break;
            };
            self.size -= nl as usize + vl as usize + ENTRY_OVERHEAD;
            self.start = match self.entries.front() {
                Some(&(off, _, _)) => off - self.base,
                None => self.bytes.len(),
            };
        }
        if self.entries.is_empty() {
            self.base += self.bytes.len();
            self.bytes.clear();
            self.start = 0;
        }
    }

    fn set_max(&mut self, max: usize) {
        self.max_size = max;
        self.evict_to(max);
    }

    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            // Not an error: the table is emptied (RFC 7541 §4.4).
            self.evict_to(0);
            return;
        }
        self.evict_to(self.max_size - size);
        // Drop the dead prefix once it outweighs the live part, so the
        // buffer stays within about twice the table size.
        if self.start > 0 && self.start >= self.bytes.len() - self.start {
            self.bytes.drain(..self.start);
            self.base += self.start;
            self.start = 0;
        }
        let off = self.base + self.bytes.len();
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(value);
        // Both lengths are below max_size, itself at most u32::MAX.
        self.entries
            .push_back((off, name.len() as u32, value.len() as u32));
        self.size += size;
    }
}

/// A header-block decoder for one connection.
#[derive(Debug)]
pub struct Decoder {
    table: Table,
    /// The largest size the peer may set: our SETTINGS_HEADER_TABLE_SIZE.
    allowed_table_size: usize,
    /// Our SETTINGS_MAX_HEADER_LIST_SIZE.
    max_list_size: usize,
    scratch: Vec<u8>,
}

impl Decoder {
    pub fn new(allowed_table_size: usize, max_list_size: usize) -> Self {
        let mut table = Table::default();
        table.reset(allowed_table_size);
        Decoder {
            table,
            allowed_table_size,
            max_list_size,
            scratch: Vec::new(),
        }
    }

    /// Forgets the dynamic table, for a new connection; keeps the storage.
    pub fn reset(&mut self) {
        self.table.reset(self.allowed_table_size);
    }

    /// The dynamic table's current size, as the RFC counts it.
    pub fn table_size(&self) -> usize {
        self.table.size
    }

    /// Decodes one complete header block, calling `emit` for each field in
    /// order. Field names and values are raw bytes, as sent.
    pub fn decode(
        &mut self,
        mut block: &[u8],
        emit: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut list_size = 0usize;
        let mut fields_seen = false;
        while let Some(&first) = block.first() {
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = integer(&mut block, 7)?;
                let (name, value) = lookup(&self.table, index)?;
                list_size = self.charge(list_size, name.len() + value.len())?;
                emit(name, value);
                fields_seen = true;
            } else if first & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3).
                if fields_seen {
                    return Err(HpackError::SizeUpdateMisplaced);
                }
                let size = integer(&mut block, 5)? as usize;
                if size > self.allowed_table_size {
                    return Err(HpackError::SizeUpdateTooLarge);
                }
                self.table.set_max(size);
            } else {
                // Literal (§6.2): with incremental indexing (01), without
                // indexing (0000) or never indexed (0001).
                let (prefix, indexing) = if first & 0x40 != 0 {
                    (6, true)
                } else {
                    (4, false)
                };
                let index = integer(&mut block, prefix)?;
                self.scratch.clear();
                let limit = self.max_list_size.saturating_sub(list_size);
                if index == 0 {
                    string(&mut block, &mut self.scratch, limit)?;
                } else {
                    let (name, _) = lookup(&self.table, index)?;
                    if name.len() > limit {
                        return Err(HpackError::HeaderListTooLarge);
                    }
                    self.scratch.extend_from_slice(name);
                }
                let name_len = self.scratch.len();
                string(&mut block, &mut self.scratch, limit)?;
                list_size = self.charge(list_size, self.scratch.len())?;
                let (name, value) = self.scratch.split_at(name_len);
                emit(name, value);
                if indexing {
                    self.table.insert(name, value);
                }
                fields_seen = true;
            }
        }
        Ok(())
    }

    fn charge(&self, so_far: usize, field: usize) -> Result<usize, HpackError> {
        let total = so_far + field + ENTRY_OVERHEAD;
        if total > self.max_list_size {
            return Err(HpackError::HeaderListTooLarge);
        }
        Ok(total)
    }
}

/// A field by its index: 1..=61 static, 62 on the dynamic table.
fn lookup(table: &Table, index: u32) -> Result<(&[u8], &[u8]), HpackError> {
    let index = index as usize;
    match index {
        0 => Err(HpackError::BadIndex),
        1..=61 => {
            let (n, v) = STATIC[index - 1];
            Ok((n.as_bytes(), v.as_bytes()))
        }
        _ => table.get(index - 62).ok_or(HpackError::BadIndex),
    }
}

/// Reads a prefixed integer (§5.1) off the front of `buf`.
fn integer(buf: &mut &[u8], prefix: u8) -> Result<u32, HpackError> {
    let (&first, mut rest) = buf.split_first().ok_or(HpackError::Truncated)?;
    let max_prefix = (1u32 << prefix) - 1;
    let mut value = u32::from(first) & max_prefix;
    if value == max_prefix {
        let mut shift = 0u32;
        loop {
            let (&b, r) = rest.split_first().ok_or(HpackError::Truncated)?;
            rest = r;
            let add = u64::from(b & 0x7f) << shift;
            let sum = u64::from(value) + add;
            if shift > 28 || sum > u64::from(u32::MAX) {
                return Err(HpackError::IntegerOverflow);
            }
            value = sum as u32;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
    }
    *buf = rest;
    Ok(value)
}

/// Reads a string literal (§5.2), appending it to `out`; `limit` bounds
/// what it may add.
fn string(buf: &mut &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), HpackError> {
    let huffman_coded = buf.first().ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = integer(buf, 7)? as usize;
    if len > buf.len() {
        return Err(HpackError::Truncated);
    }
    let (raw, rest) = buf.split_at(len);
    *buf = rest;
    if huffman_coded {
        let max = out.len().saturating_add(limit);
        huffman::decode(raw, out, max).map_err(|e| match e {
            HuffmanError::TooLong => HpackError::HeaderListTooLarge,
            e => HpackError::Huffman(e),
        })
    } else if raw.len() > limit {
        Err(HpackError::HeaderListTooLarge)
    } else {
        out.extend_from_slice(raw);
        Ok(())
    }
}

/// Appends a prefixed integer (§5.1); `flags` fills the bits above the
/// prefix.
pub fn encode_integer(out: &mut Vec<u8>, flags: u8, prefix: u8, mut value: usize) {
    let max_prefix = (1usize << prefix) - 1;
    if value < max_prefix {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max_prefix as u8);
    value -= max_prefix;
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn encode_string(out: &mut Vec<u8>, s: &[u8]) {
    encode_integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Appends one request header field. It never touches a dynamic table:
/// an exact static match is indexed, anything else is a literal without
/// indexing (with the static name when there is one), so the encoder has
/// no state to keep in step with the server's decoder.
pub fn encode_field(out: &mut Vec<u8>, name: &str, value: &str) {
    let mut name_index = 0;
    for (i, &(n, v)) in STATIC.iter().enumerate() {
        if n == name {
            if v == value {
                encode_integer(out, 0x80, 7, i + 1);
                return;
            }
            if name_index == 0 {
                name_index = i + 1;
            }
        }
    }
    encode_integer(out, 0x00, 4, name_index);
    if name_index == 0 {
        encode_string(out, name.as_bytes());
    }
    encode_string(out, value.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::huffman::tests::hex;

    fn decode(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut out = Vec::new();
        d.decode(block, &mut |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })?;
        Ok(out)
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// The dynamic table, newest first, as (name, value).
    fn table(d: &Decoder) -> Vec<(String, String)> {
        (0..d.table.entries.len())
            .map(|i| {
                let (n, v) = d.table.get(i).unwrap();
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect()
    }

    // RFC 7541 C.1: integers.
    #[test]
    fn c1_integers() {
        let mut out = Vec::new();
        encode_integer(&mut out, 0, 5, 10);
        assert_eq!(out, [0x0a]);
        out.clear();
        encode_integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
        out.clear();
        encode_integer(&mut out, 0, 8, 42);
        assert_eq!(out, [0x2a]);
        assert_eq!(integer(&mut &[0x1f, 0x9a, 0x0a][..], 5), Ok(1337));
        assert_eq!(
            integer(&mut &[0x1f, 0x9a][..], 5),
            Err(HpackError::Truncated)
        );
        // 2^32 and a run of continuation bytes both overflow.
        assert_eq!(
            integer(&mut &[0x1f, 0xe1, 0xff, 0xff, 0xff, 0x0f][..], 5),
            Err(HpackError::IntegerOverflow)
        );
        assert_eq!(
            integer(&mut &[0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01][..], 5),
            Err(HpackError::IntegerOverflow)
        );
    }

    // C.2: one representation of each kind.
    #[test]
    fn c2_field_representations() {
        let mut d = Decoder::new(4096, 1 << 16);
        let b = hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572");
        assert_eq!(
            decode(&mut d, &b).unwrap(),
            pairs(&[("custom-key", "custom-header")])
        );
        assert_eq!(d.table_size(), 55);

        let mut d = Decoder::new(4096, 1 << 16);
        let b = hex("040c 2f73 616d 706c 652f 7061 7468");
        assert_eq!(
            decode(&mut d, &b).unwrap(),
            pairs(&[(":path", "/sample/path")])
        );
        assert_eq!(d.table_size(), 0);

        let b = hex("1008 7061 7373 776f 7264 0673 6563 7265 74");
        assert_eq!(
            decode(&mut d, &b).unwrap(),
            pairs(&[("password", "secret")])
        );
        assert_eq!(d.table_size(), 0);

        assert_eq!(
            decode(&mut d, &[0x82]).unwrap(),
            pairs(&[(":method", "GET")])
        );
    }

    /// C.3 (plain) and C.4 (Huffman): three requests on one connection.
    fn requests(blocks: [&str; 3]) {
        let mut d = Decoder::new(4096, 1 << 16);
        let r1 = pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ]);
        assert_eq!(decode(&mut d, &hex(blocks[0])).unwrap(), r1);
        assert_eq!(table(&d), pairs(&[(":authority", "www.example.com")]));
        assert_eq!(d.table_size(), 57);

        let mut r2 = r1.clone();
        r2.push(("cache-control".into(), "no-cache".into()));
        assert_eq!(decode(&mut d, &hex(blocks[1])).unwrap(), r2);
        assert_eq!(d.table_size(), 110);

        let r3 = pairs(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ]);
        assert_eq!(decode(&mut d, &hex(blocks[2])).unwrap(), r3);
        assert_eq!(
            table(&d),
            pairs(&[
                ("custom-key", "custom-value"),
                ("cache-control", "no-cache"),
                (":authority", "www.example.com"),
            ])
        );
        assert_eq!(d.table_size(), 164);
    }

    #[test]
    fn c3_requests_without_huffman() {
        requests([
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ]);
    }

    #[test]
    fn c4_requests_with_huffman() {
        requests([
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ]);
    }

    /// C.5 (plain) and C.6 (Huffman): responses with a 256-byte table,
    /// so entries are evicted.
    fn responses(blocks: [&str; 3]) {
        let mut d = Decoder::new(4096, 1 << 16);
        // The server lowers the table to 256 bytes; the RFC example
        // assumes the setting itself, so a size update stands in for it.
        d.table.set_max(256);
        let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
        let r1 = pairs(&[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", date1),
            ("location", "https://www.example.com"),
        ]);
        assert_eq!(decode(&mut d, &hex(blocks[0])).unwrap(), r1);
        assert_eq!(d.table_size(), 222);
        assert_eq!(
            table(&d),
            pairs(&[
                ("location", "https://www.example.com"),
                ("date", date1),
                ("cache-control", "private"),
                (":status", "302"),
            ])
        );

        let r2 = pairs(&[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", date1),
            ("location", "https://www.example.com"),
        ]);
        assert_eq!(decode(&mut d, &hex(blocks[1])).unwrap(), r2);
        // ":status: 302" was evicted to make room for ":status: 307".
        assert_eq!(
            table(&d),
            pairs(&[
                (":status", "307"),
                ("location", "https://www.example.com"),
                ("date", date1),
                ("cache-control", "private"),
            ])
        );
        assert_eq!(d.table_size(), 222);

        let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        let r3 = pairs(&[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", "https://www.example.com"),
            ("content-encoding", "gzip"),
            ("set-cookie", cookie),
        ]);
        assert_eq!(decode(&mut d, &hex(blocks[2])).unwrap(), r3);
        assert_eq!(
            table(&d),
            pairs(&[
                ("set-cookie", cookie),
                ("content-encoding", "gzip"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ])
        );
        assert_eq!(d.table_size(), 215);
    }

    #[test]
    fn c5_responses_without_huffman() {
        responses([
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
             6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
             3d31",
        ]);
    }

    #[test]
    fn c6_responses_with_huffman() {
        responses([
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ]);
    }

    #[test]
    fn size_updates() {
        let mut d = Decoder::new(4096, 1 << 16);
        decode(
            &mut d,
            &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
        )
        .unwrap();
        assert_eq!(d.table_size(), 55);
        // Size 0 empties the table; then back to 4096 is allowed.
        assert!(decode(&mut d, &[0x20]).unwrap().is_empty());
        assert_eq!(d.table_size(), 0);
        assert_eq!(decode(&mut d, &[0xbe]), Err(HpackError::BadIndex));
        let mut up = Vec::new();
        encode_integer(&mut up, 0x20, 5, 4096);
        assert!(decode(&mut d, &up).is_ok());
        // Above our setting, or after a field: refused.
        let mut big = Vec::new();
        encode_integer(&mut big, 0x20, 5, 4097);
        assert_eq!(decode(&mut d, &big), Err(HpackError::SizeUpdateTooLarge));
        assert_eq!(
            decode(&mut d, &[0x82, 0x20]),
            Err(HpackError::SizeUpdateMisplaced)
        );
        // Two updates at the start are fine (§4.2).
        assert!(decode(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82]).is_ok());
    }

    #[test]
    fn oversized_entry_empties_the_table() {
        let mut d = Decoder::new(64, 1 << 16);
        decode(&mut d, &[0x40, 0x01, b'a', 0x01, b'b']).unwrap();
        assert_eq!(d.table_size(), 34);
        let mut b = vec![0x40, 0x01, b'n'];
        encode_string(&mut b, &[b'x'; 40]);
        assert_eq!(decode(&mut d, &b).unwrap()[0].1.len(), 40);
        assert_eq!(d.table_size(), 0);
    }

    #[test]
    fn table_storage_stays_bounded() {
        let mut d = Decoder::new(4096, 1 << 16);
        for i in 0..10_000u32 {
            let mut b = vec![0x40];
            encode_string(&mut b, format!("name-{i}").as_bytes());
            encode_string(&mut b, &vec![b'v'; (i % 300) as usize]);
            let got = decode(&mut d, &b).unwrap();
            assert_eq!(got[0].0, format!("name-{i}"));
            // The newest entry is index 62.
            let again = decode(&mut d, &[0xbe]).unwrap();
            assert_eq!(again, got);
            assert!(d.table_size() <= 4096);
            assert!(
                d.table.bytes.len() <= 2 * 4096 + 400,
                "{}",
                d.table.bytes.len()
            );
        }
    }

    #[test]
    fn header_list_limit() {
        let mut d = Decoder::new(4096, 100);
        // 68 + 32 = 100: fits exactly.
        let mut b = vec![0x00];
        encode_string(&mut b, &[b'n'; 34]);
        encode_string(&mut b, &[b'v'; 34]);
        assert!(decode(&mut d, &b).is_ok());
        b.push(0x82);
        assert_eq!(decode(&mut d, &b), Err(HpackError::HeaderListTooLarge));
        // A huge Huffman string is cut off while decoding, not after.
        let mut h = vec![0x00, 0x01, b'n'];
        let mut coded = Vec::new();
        huffman::encode(&[b'a'; 10_000], &mut coded);
        encode_integer(&mut h, 0x80, 7, coded.len());
        h.extend_from_slice(&coded);
        assert_eq!(decode(&mut d, &h), Err(HpackError::HeaderListTooLarge));
    }

    #[test]
    fn truncation_anywhere_is_an_error_not_a_panic() {
        let full =
            hex("88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab");
        for cut in 0..full.len() {
            let mut d = Decoder::new(4096, 1 << 16);
            let _ = decode(&mut d, &full[..cut]);
        }
    }

    #[test]
    fn encoder_round_trips_grpc_request_headers() {
        let fields = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/v1.PodResourcesLister/List"),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", "10000m"),
        ];
        let mut b = Vec::new();
        for (n, v) in fields {
            encode_field(&mut b, n, v);
        }
        assert_eq!(&b[..2], &[0x83, 0x86]);
        let mut d = Decoder::new(4096, 1 << 16);
        assert_eq!(decode(&mut d, &b).unwrap(), pairs(&fields));
        assert_eq!(d.table_size(), 0);
    }
}
