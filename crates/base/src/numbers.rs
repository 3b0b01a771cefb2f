//! Number spelling into a caller's buffer, on the stack: integers and
//! Go-compatible floats, as the exposition, the status page and the PromQL
//! printer write them.

use std::io::Write;

/// Decimal digits of `n`.
#[inline]
pub fn write_u64(out: &mut Vec<u8>, n: u64) {
    let mut buf = [0u8; 20];
    out.extend_from_slice(digits(n, &mut buf));
}

/// Decimal digits of `n`, spelled into `buf`.
#[inline]
pub fn digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        i -= 2;
        buf[i..i + 2].copy_from_slice(&PAIRS[n as usize * 2..n as usize * 2 + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    &buf[i..]
}

/// The longest spelling [`spell_f64`] writes: `-2.2250738585072014e-308`.
pub const F64_MAX_LEN: usize = 24;

/// Two digits at a time from a table, as the itoa crate does.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

/// Decimal digits of `n` at the start of `buf` (room for 20), returning
/// how many: counted first, then spelled in place from the last.
#[inline]
pub fn digits_into(mut n: u64, buf: &mut [u8]) -> usize {
    let len = n.checked_ilog10().unwrap_or(0) as usize + 1;
    let buf = &mut buf[..len];
    let mut i = len;
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i] = PAIRS[pair];
        buf[i + 1] = PAIRS[pair + 1];
    }
    if n >= 10 {
        buf[0] = PAIRS[n as usize * 2];
        buf[1] = PAIRS[n as usize * 2 + 1];
    } else {
        buf[0] = b'0' + n as u8;
    }
    len
}

/// Go-compatible float spelling: exact integers (below 2^53) without a fraction, `NaN`,
/// `+Inf`, `-Inf`, and Rust's shortest round-trip form otherwise.
#[inline]
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    let mut buf = [0u8; F64_MAX_LEN];
    let n = spell_f64(v, &mut buf);
    out.extend_from_slice(&buf[..n]);
}

/// Below 2^53 every integer is exact.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// `v` as an integer where it is a non-negative one below 2^53, most
/// samples: NaN converts to 0 and the infinities to the ends of the
/// range, which then differ from `v`; -0 converts to 0, which equals it.
#[inline(always)]
pub fn exact_integer(v: f64) -> Option<u64> {
    let whole = v as u64;
    (whole as f64 == v && v < EXACT).then_some(whole)
}

/// [`write_f64`]'s spelling at the start of `buf` (room for
/// [`F64_MAX_LEN`]), returning its length
/// (at most [`F64_MAX_LEN`]): on the stack, without the formatting
/// machinery for every value it can spell from integers.
#[inline]
pub fn spell_f64(v: f64, buf: &mut [u8]) -> usize {
    match exact_integer(v) {
        Some(whole) => digits_into(whole, buf),
        None => spell_other(v, buf),
    }
}

/// [`spell_f64`] of the values that are not non-negative integers below
/// 2^53.
#[inline(never)]
fn spell_other(v: f64, buf: &mut [u8]) -> usize {
    let buf = &mut buf[..F64_MAX_LEN];
    if v.is_nan() {
        buf[..3].copy_from_slice(b"NaN");
        return 3;
    } else if v.is_infinite() {
        buf[..4].copy_from_slice(if v > 0.0 { b"+Inf" } else { b"-Inf" });
        return 4;
    }
    let magnitude = v.abs();
    let sign = usize::from(v < 0.0);
    buf[0] = b'-';
    if magnitude < EXACT {
        // Integers, then values with up to six decimals (ratios, watts,
        // seconds), spelled from integers. `micros / 1e6` is the double
        // nearest that decimal, so when it equals the value, the decimal
        // reads back as exactly this value.
        let whole = magnitude as u64;
        if whole as f64 == magnitude {
            return sign + digits_into(whole, &mut buf[sign..]);
        }
        let scaled = magnitude * 1e6;
        if scaled < EXACT {
            let micros = (scaled + 0.5) as u64;
            if micros as f64 / 1e6 == magnitude {
                let mut n = sign + digits_into(micros / 1_000_000, &mut buf[sign..]);
                let mut frac = micros % 1_000_000;
                let mut digits = 6;
                while frac.is_multiple_of(10) {
                    frac /= 10;
                    digits -= 1;
                }
                buf[n] = b'.';
                n += 1;
                for d in buf[n..n + digits].iter_mut().rev() {
                    *d = b'0' + (frac % 10) as u8;
                    frac /= 10;
                }
                return n + digits;
            }
        }
    } else if let Some(n) = big_integer(magnitude, &mut buf[sign..]) {
        return sign + n;
    }
    let mut rest = buf;
    // F64_MAX_LEN holds every spelling, so this cannot fail.
    let _ = write!(rest, "{v:?}");
    F64_MAX_LEN - rest.len()
}

/// A magnitude from 2^53 up to 2^64 (every one an integer) whose exact
/// value has at most 15 significant digits, as Rust's shortest
/// round-trip form spells it (`{:?}`): no shorter decimal reads back as it, since
/// distinct decimals of at most 15 digits are distinct doubles. Its
/// digits and `.0` below 1e16, `d.ddde<exp>` from there (`3.932928e18`). `None`
/// for the rest, which take the formatting machinery.
#[inline]
fn big_integer(magnitude: f64, buf: &mut [u8]) -> Option<usize> {
    if magnitude >= 18_446_744_073_709_551_616.0 {
        return None;
    }
    let exact = magnitude as u64;
    // The trailing zeros, eight at a time and then four, two and one:
    // these values have a dozen (`3932928000000000000`).
    let (mut sig, mut zeros) = (exact, 0);
    while sig.is_multiple_of(100_000_000) {
        sig /= 100_000_000;
        zeros += 8;
    }
    for (p, n) in [(10_000, 4), (100, 2), (10, 1)] {
        if sig.is_multiple_of(p) {
            sig /= p;
            zeros += n;
        }
    }
    if sig >= 1_000_000_000_000_000 {
        return None;
    }
    if magnitude < 1e16 {
        let n = digits_into(exact, buf);
        buf[n..n + 2].copy_from_slice(b".0");
        return Some(n + 2);
    }
    let mut tmp = [0u8; 20];
    let d = digits(sig, &mut tmp);
    buf[0] = d[0];
    let mut n = 1;
    if d.len() > 1 {
        buf[1] = b'.';
        buf[2..d.len() + 1].copy_from_slice(&d[1..]);
        n = d.len() + 1;
    }
    buf[n] = b'e';
    Some(n + 1 + digits_into((zeros + d.len() - 1) as u64, &mut buf[n + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats() {
        assert_eq!(f(0.0), "0");
        assert_eq!(f(-0.0), "0");
        assert_eq!(f(71.0), "71");
        assert_eq!(f(-3.0), "-3");
        assert_eq!(f(1073741824.0), "1073741824");
        assert_eq!(f(0.25), "0.25");
        assert_eq!(f(1e15), "1000000000000000");
        assert_eq!(f(1e16), "1e16");
        assert_eq!(f(1.5e-7), "1.5e-7");
        assert_eq!(f(f64::NAN), "NaN");
        assert_eq!(f(f64::INFINITY), "+Inf");
        assert_eq!(f(f64::NEG_INFINITY), "-Inf");
        assert_eq!(f(u64::MAX as f64), "1.8446744073709552e19");
        assert_eq!(f(0.97), "0.97");
        assert_eq!(f(-0.000125), "-0.000125");
        assert_eq!(f(520.5), "520.5");
        assert_eq!(f(0.1 + 0.2), "0.30000000000000004");
        // Every spelling reads back as the same value.
        let mut x = 0.123_f64;
        for _ in 0..10_000 {
            x = (x * 7.77 + 0.31) % 1000.0;
            for v in [
                x,
                -x,
                x / 1e4,
                (x * 1e3).round() / 1e3,
                (x * 100.0).round() / 1e6,
            ] {
                assert_eq!(f(v).parse::<f64>().unwrap(), v, "{v:?} as {}", f(v));
            }
        }
        for v in [0.1, 1e300, 5e-324, 123456.789, -2.5e20, 8.9e9 + 0.5, 1e-7] {
            assert_eq!(f(v).parse::<f64>().unwrap(), v);
        }
    }

    #[test]
    fn big_integers_spell_as_rust_does() {
        let mut x = 9_007_199_254_740_992.0_f64;
        let mut n = 0;
        while x < 2e19 {
            for v in [
                x,
                x.next_up(),
                (x / 1e12).round() * 1e12,
                (x / 1e16).round() * 1e16,
                -x,
            ] {
                if v.abs() < 9_007_199_254_740_992.0 {
                    continue;
                }
                assert_eq!(f(v), format!("{v:?}"), "{v:?}");
                n += 1;
            }
            x *= 1.000_37;
        }
        assert!(n > 10_000);
        for v in [
            3.932928e18,
            8.1936e16,
            6.55488e16,
            1e16,
            1e19,
            9.5e15,
            1.8446744073709552e19,
        ] {
            assert_eq!(f(v), format!("{v:?}"), "{v:?}");
        }
    }

    #[test]
    fn integers() {
        for n in [0, 7, 10, 99, 100, 101, 999, 1000, 12345, 1 << 53, u64::MAX] {
            let mut out = Vec::new();
            write_u64(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
            let mut buf = [0u8; 20];
            let len = digits_into(n, &mut buf);
            assert_eq!(&buf[..len], n.to_string().as_bytes());
        }
    }
}
