//! Protobuf's wire format, read: varints, tags, the fields of a message
//! held in memory (groups skipped), a varint read a byte at a time for
//! push parsers, and a budget on what a decoded message may take. What
//! the fields mean is the caller's schema.
//!
//! Unknown fields of every wire type, groups included, can be skipped; a
//! known field with an unexpected wire type is for the caller to treat as
//! unknown, as protobuf's own parsers do.

use std::fmt;

pub mod encode;

/// Why bytes are not a valid message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// The input ended inside a field.
    Truncated,
    /// A varint longer than 10 bytes or past 64 bits.
    BadVarint,
    /// Field number 0, or a tag past 32 bits.
    BadTag,
    /// Wire type 6 or 7.
    BadWireType,
    /// An end-group without its start.
    UnmatchedEndGroup,
    /// Groups nested deeper than we follow.
    TooDeep,
    /// A decoded message passes what is left of its [`Budget`].
    OverBudget,
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProtoError::Truncated => "truncated message",
            ProtoError::BadVarint => "malformed varint",
            ProtoError::BadTag => "invalid field tag",
            ProtoError::BadWireType => "invalid wire type",
            ProtoError::UnmatchedEndGroup => "end-group without start",
            ProtoError::TooDeep => "groups nested too deep",
            ProtoError::OverBudget => "decoded message over the memory budget",
        })
    }
}

/// How deep groups may nest before we stop following them.
pub const MAX_GROUP_DEPTH: u32 = 64;

/// A field's value, borrowed from the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64,
    Fixed32,
    Len(&'a [u8]),
}

/// Reads a varint off the front of `buf`.
pub fn varint(buf: &mut &[u8]) -> Result<u64, ProtoError> {
    let mut v = Varint::default();
    while let Some((&b, rest)) = buf.split_first() {
        *buf = rest;
        if let Some(value) = v.push(b)? {
            return Ok(value);
        }
    }
    Err(ProtoError::Truncated)
}

/// A varint read a byte at a time, for a push parser fed in pieces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Varint {
    value: u64,
    /// Bytes of it seen so far.
    len: u32,
}

impl Varint {
    /// Takes the next byte: the value once it is the last one.
    pub fn push(&mut self, b: u8) -> Result<Option<u64>, ProtoError> {
        // The tenth byte may only carry the 64th bit.
        if self.len == 9 && b > 1 {
            return Err(ProtoError::BadVarint);
        }
        self.value |= u64::from(b & 0x7f) << (7 * self.len);
        self.len += 1;
        if b & 0x80 != 0 {
            if self.len == 10 {
                return Err(ProtoError::BadVarint);
            }
            return Ok(None);
        }
        let v = self.value;
        *self = Varint::default();
        Ok(Some(v))
    }

    /// Whether no varint is half read.
    pub fn is_idle(&self) -> bool {
        self.len == 0
    }
}

/// Splits a tag into (field number, wire type).
pub fn tag(v: u64) -> Result<(u32, u8), ProtoError> {
    let field = v >> 3;
    if field == 0 || field > u64::from(u32::MAX >> 3) {
        return Err(ProtoError::BadTag);
    }
    Ok((field as u32, (v & 7) as u8))
}

fn take<'a>(buf: &mut &'a [u8], n: u64) -> Result<&'a [u8], ProtoError> {
    if n > buf.len() as u64 {
        return Err(ProtoError::Truncated);
    }
    let (head, rest) = buf.split_at(n as usize);
    *buf = rest;
    Ok(head)
}

/// The fields of one message held in memory, in order, as (field number,
/// value). Groups are skipped; iteration stops after the first error.
pub struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Fields { buf }
    }

    fn field(&mut self) -> Result<Option<(u32, Value<'a>)>, ProtoError> {
        loop {
            if self.buf.is_empty() {
                return Ok(None);
            }
            let (field, wire) = tag(varint(&mut self.buf)?)?;
            let value = match wire {
                0 => Value::Varint(varint(&mut self.buf)?),
                1 => {
                    take(&mut self.buf, 8)?;
                    Value::Fixed64
                }
                2 => {
                    let n = varint(&mut self.buf)?;
                    Value::Len(take(&mut self.buf, n)?)
                }
                3 => {
                    self.skip_group()?;
                    continue;
                }
                4 => return Err(ProtoError::UnmatchedEndGroup),
                5 => {
                    take(&mut self.buf, 4)?;
                    Value::Fixed32
                }
                _ => return Err(ProtoError::BadWireType),
            };
            return Ok(Some((field, value)));
        }
    }

    /// Skips past the end-group matching a start-group just read.
    fn skip_group(&mut self) -> Result<(), ProtoError> {
        let mut depth = 1u32;
        while depth > 0 {
            let (_, wire) = tag(varint(&mut self.buf)?)?;
            match wire {
                0 => {
                    varint(&mut self.buf)?;
                }
                1 => {
                    take(&mut self.buf, 8)?;
                }
                2 => {
                    let n = varint(&mut self.buf)?;
                    take(&mut self.buf, n)?;
                }
                3 => {
                    depth += 1;
                    if depth > MAX_GROUP_DEPTH {
                        return Err(ProtoError::TooDeep);
                    }
                }
                4 => depth -= 1,
                5 => {
                    take(&mut self.buf, 4)?;
                }
                _ => return Err(ProtoError::BadWireType),
            }
        }
        Ok(())
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), ProtoError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.field() {
            Ok(f) => f.map(Ok),
            Err(e) => {
                // Stop after the first error.
                self.buf = &[];
                Some(Err(e))
            }
        }
    }
}

/// Bytes a decoded message may still take. Each string and element is
/// charged its length plus a fixed overhead, so a message of many tiny
/// elements cannot grow much past its encoded size.
#[derive(Debug)]
pub struct Budget(usize);

const ELEMENT_COST: usize = 32;

impl Budget {
    pub fn new(bytes: usize) -> Self {
        Budget(bytes)
    }

    /// What is left of it.
    pub fn left(&self) -> usize {
        self.0
    }

    /// Charges an element of `n` bytes.
    pub fn charge(&mut self, n: usize) -> Result<(), ProtoError> {
        self.0 = self
            .0
            .checked_sub(n + ELEMENT_COST)
            .ok_or(ProtoError::OverBudget)?;
        Ok(())
    }

    /// A `string` field, charged. A bad byte is kept visible (U+FFFD),
    /// not fatal: names end up as label values.
    pub fn string(&mut self, b: &[u8]) -> Result<String, ProtoError> {
        self.charge(b.len())?;
        Ok(String::from_utf8_lossy(b).into_owned())
    }
}

/// A `repeated int64` field's value, packed or not, onto `out`.
pub fn int64s(v: Value<'_>, out: &mut Vec<i64>, budget: &mut Budget) -> Result<(), ProtoError> {
    match v {
        Value::Varint(x) => {
            budget.charge(0)?;
            out.push(x as i64);
        }
        Value::Len(mut b) => {
            while !b.is_empty() {
                budget.charge(0)?;
                out.push(varint(&mut b)? as i64);
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_whole_and_a_byte_at_a_time_agree() {
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut b = Vec::new();
            encode::varint(&mut b, v);
            let mut s = &b[..];
            assert_eq!(varint(&mut s), Ok(v));
            assert!(s.is_empty());
            let mut p = Varint::default();
            let (last, head) = b.split_last().unwrap();
            for &x in head {
                assert_eq!(p.push(x), Ok(None));
                assert!(!p.is_idle());
            }
            assert_eq!(p.push(*last), Ok(Some(v)));
            assert!(p.is_idle());
        }
        assert_eq!(varint(&mut &[0x80][..]), Err(ProtoError::Truncated));
        let eleven = [0xff; 10];
        assert_eq!(varint(&mut &eleven[..]), Err(ProtoError::BadVarint));
        let past_64 = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(varint(&mut &past_64[..]), Err(ProtoError::BadVarint));
    }

    #[test]
    fn fields_come_in_order_and_groups_are_skipped() {
        let mut b = Vec::new();
        encode::uint(&mut b, 1, 7);
        encode::varint(&mut b, 2 << 3 | 3);
        encode::bytes(&mut b, 1, b"in a group");
        encode::varint(&mut b, 2 << 3 | 4);
        encode::bytes(&mut b, 3, b"abc");
        encode::packed(&mut b, 4, &[1, -1]);
        let got: Result<Vec<_>, _> = Fields::new(&b).collect();
        let got = got.unwrap();
        assert_eq!(got[..2], [(1, Value::Varint(7)), (3, Value::Len(b"abc"))]);
        let mut ints = Vec::new();
        int64s(got[2].1, &mut ints, &mut Budget::new(1000)).unwrap();
        assert_eq!(ints, [1, -1]);
        assert_eq!(tag(0), Err(ProtoError::BadTag));
        let mut budget = Budget::new(40);
        assert_eq!(budget.string(b"ab\xff").as_deref(), Ok("ab\u{fffd}"));
        assert_eq!(budget.left(), 5);
        assert_eq!(budget.charge(0), Err(ProtoError::OverBudget));
    }
}
