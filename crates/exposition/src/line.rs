//! Sample lines spelled on the stack and copied into the output a few
//! kilobytes at a time: the family's name, the target's label set (copied
//! from where it was first written), the extra labels and the value.
//! Every piece is copied with fixed-size moves the compiler inlines, not a
//! `memcpy` call and a capacity check per piece, which is most of what a
//! line cost.

use super::writer::{Target, Writer, head_kind};
use base::numbers::{F64_MAX_LEN, digits_into, exact_integer, spell_f64};
use model::catalogue::{Extra, Family};

/// The lines held before they are copied out, by default.
const LINE: usize = 2048;

/// The longest line spelled here; longer ones take the writer's path.
const MAX_LINE: usize = 256;

/// Room for `,key="4294967295"` after the key.
const NUM_LABEL: usize = 4 + 10;

pub(super) struct Line<const N: usize = LINE> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Line<N> {
    pub(super) fn new() -> Line<N> {
        Line {
            buf: [0; N],
            len: 0,
        }
    }

    /// Copies the lines held into `out`.
    #[inline(always)]
    pub(super) fn flush(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buf[..self.len]);
        self.len = 0;
    }

    /// A family's HELP, TYPE and (OpenMetrics only) UNIT lines, flushed
    /// into `out` first where they do not fit after what it holds; false,
    /// nothing written, where the help needs escaping or they would not
    /// fit in an empty line.
    pub(super) fn head(&mut self, f: &Family, om: bool, out: &mut Vec<u8>) -> bool {
        let (kind, suffix) = head_kind(f, om);
        let (name, suffix, help) = (f.name.as_bytes(), suffix.as_bytes(), f.help.as_bytes());
        let unit = f.unit.filter(|_| om).map_or(&[][..], str::as_bytes);
        let need = 2 * (7 + name.len() + suffix.len() + 2) + help.len() + kind.len();
        let need = need
            + if unit.is_empty() {
                0
            } else {
                9 + name.len() + unit.len()
            };
        if !f.plain_help || need > N {
            return false;
        }
        if self.len + need > N {
            self.flush(out);
        }
        let (buf, mut at) = (&mut self.buf, self.len);
        for (start, rest) in [(b"# HELP ", help), (b"# TYPE ", kind.as_bytes())] {
            for piece in [&start[..], name, suffix, b" ", rest, b"\n"] {
                at = put(buf, at, piece);
            }
        }
        if !unit.is_empty() {
            for piece in [&b"# UNIT "[..], name, b" ", unit, b"\n"] {
                at = put(buf, at, piece);
            }
        }
        self.len = at;
        true
    }
}

/// Copies `src` into `buf` at `at`, returning where it ends; the caller
/// has checked that it fits.
#[inline(always)]
fn put<const N: usize>(buf: &mut [u8; N], at: usize, src: &[u8]) -> usize {
    copy(&mut buf[at..], src);
    at + src.len()
}

/// `,key="n"` into `buf` at `at`, returning where it ends.
#[inline(always)]
fn num_label<const N: usize>(buf: &mut [u8; N], at: usize, k: &str, n: u32) -> usize {
    let at = put(buf, at, b",");
    let at = put(buf, at, k.as_bytes());
    let at = put(buf, at, b"=\"");
    let at = at + digits_into(n as u64, &mut buf[at..]);
    put(buf, at, b"\"")
}

/// Copies `src` to the start of `dst` in at most two overlapping moves of
/// one fixed size, as `memcpy` does inside; only past 64 bytes a call.
#[inline(always)]
fn copy(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    match n {
        0 => {}
        1..=3 => {
            dst[0] = src[0];
            dst[n / 2] = src[n / 2];
            dst[n - 1] = src[n - 1];
        }
        4..=7 => two::<4>(dst, src),
        8..=15 => two::<8>(dst, src),
        16..=31 => two::<16>(dst, src),
        32..=64 => two::<32>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// The first and the last `N` bytes, `N <= len <= 2N`.
#[inline(always)]
fn two<const N: usize>(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let (head, tail): (&[u8; N], &[u8; N]) = match (src[..N].try_into(), src[n - N..].try_into()) {
        (Ok(h), Ok(t)) => (h, t),
        _ => return,
    };
    dst[..N].copy_from_slice(head);
    dst[n - N..].copy_from_slice(tail);
}

impl Writer<'_> {
    /// HELP, TYPE and (OpenMetrics only) UNIT for a family: spelled on
    /// the stack and copied once where its help needs no escaping.
    pub(super) fn head(&mut self, f: &Family) {
        let mut line = Line::<512>::new();
        if line.head(f, self.om, self.out) {
            line.flush(self.out);
        } else {
            self.escaped_head(f);
        }
    }

    /// [`Writer::head`] into `line`, flushed first where full; where its
    /// help needs escaping or it is too long, flushed and then written by
    /// [`Writer::escaped_head`].
    pub(super) fn line_head(&mut self, line: &mut Line, f: &Family) {
        if !line.head(f, self.om, self.out) {
            line.flush(self.out);
            self.escaped_head(f);
        }
    }

    /// One sample of `fam` for target `t`, without pod labels, into
    /// `line` (flushed first where full); false (nothing written) before
    /// the target's label set is written once, or for a line too long.
    /// The caller flushes `line` before writing to the output itself.
    #[inline(always)]
    pub(super) fn line(
        &mut self,
        line: &mut Line,
        fam: &Family,
        t: Target,
        extra: Extra,
        v: f64,
    ) -> bool {
        let Some(&(start, end)) = self.cached.get(t.n) else {
            return false;
        };
        let (name, suffix) = (fam.name.as_bytes(), fam.suffix().as_bytes());
        let extra_len = match extra {
            Extra::None => 0,
            Extra::Label(text) => text.len(),
            Extra::Num(k, _) => k.len() + NUM_LABEL,
            Extra::NumLabel(k, _, text) => k.len() + NUM_LABEL + text.len(),
        };
        let need = name.len() + suffix.len() + (end - start) + extra_len + F64_MAX_LEN + 3;
        if end == start || need > MAX_LINE {
            return false;
        }
        if line.len + need > LINE {
            line.flush(self.out);
        }
        // The cursor stays in a register: kept in `line.len`, it would be
        // stored and loaded again around every piece.
        let (buf, mut at) = (&mut line.buf, line.len);
        at = put(buf, at, name);
        at = put(buf, at, suffix);
        at = put(buf, at, &self.out[start..end]);
        match extra {
            Extra::None => {}
            Extra::Label(text) => at = put(buf, at, text.as_bytes()),
            Extra::Num(k, n) => at = num_label(buf, at, k, n),
            Extra::NumLabel(k, n, text) => {
                at = num_label(buf, at, k, n);
                at = put(buf, at, text.as_bytes());
            }
        }
        at = put(buf, at, b"} ");
        // Half the samples are 0 (counters that never counted, flags),
        // most of the rest integers.
        at = match (v == 0.0, exact_integer(v)) {
            (true, _) => put(buf, at, b"0\n"),
            (false, Some(n)) => {
                let at = at + digits_into(n, &mut buf[at..]);
                put(buf, at, b"\n")
            }
            (false, None) => {
                let at = at + spell_f64(v, &mut buf[at..]);
                put(buf, at, b"\n")
            }
        };
        line.len = at;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length() {
        let src: Vec<u8> = (0..100).collect();
        for n in 0..=100 {
            let mut dst = [0xffu8; 128];
            copy(&mut dst, &src[..n]);
            assert_eq!(&dst[..n], &src[..n]);
            assert!(dst[n..].iter().all(|&b| b == 0xff), "{n}");
        }
    }
}
