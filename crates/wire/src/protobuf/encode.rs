//! A minimal protobuf writer for tests, fixtures and fuzz seeds: not in a
//! normal build.

pub fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    varint(out, u64::from(field) << 3 | 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, v);
}

/// A packed `repeated int64`; none at all when empty.
pub fn packed(out: &mut Vec<u8>, field: u32, vs: &[i64]) {
    if vs.is_empty() {
        return;
    }
    let mut p = Vec::new();
    for &v in vs {
        varint(&mut p, v as u64);
    }
    bytes(out, field, &p);
}

/// A `string` field; proto3 leaves empty scalars out.
pub fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    if !s.is_empty() {
        bytes(out, field, s.as_bytes());
    }
}
