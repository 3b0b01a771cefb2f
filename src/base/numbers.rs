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
    // Two digits at a time from a table, as the itoa crate does.
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
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

/// Go-compatible float spelling: exact integers (below 2^53) without a fraction, `NaN`,
/// `+Inf`, `-Inf`, and Rust's shortest round-trip form otherwise.
#[inline]
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    /// Below 2^53 every integer is exact.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
        return;
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"+Inf" } else { b"-Inf" });
        return;
    }
    let magnitude = v.abs();
    if magnitude < EXACT {
        if v < 0.0 {
            out.push(b'-');
        }
        // Integers, then values with up to six decimals (ratios, watts,
        // seconds), spelled from integers. `micros / 1e6` is the double
        // nearest that decimal, so when it equals the value, the decimal
        // reads back as exactly this value.
        let whole = magnitude as u64;
        if whole as f64 == magnitude {
            write_u64(out, whole);
            return;
        }
        let scaled = magnitude * 1e6;
        if scaled < EXACT {
            let micros = (scaled + 0.5) as u64;
            if micros as f64 / 1e6 == magnitude {
                write_u64(out, micros / 1_000_000);
                let mut frac = micros % 1_000_000;
                let mut digits = 6;
                while frac.is_multiple_of(10) {
                    frac /= 10;
                    digits -= 1;
                }
                out.push(b'.');
                let mut buf = [b'0'; 6];
                for d in buf[..digits].iter_mut().rev() {
                    *d = b'0' + (frac % 10) as u8;
                    frac /= 10;
                }
                out.extend_from_slice(&buf[..digits]);
                return;
            }
        }
        if v < 0.0 {
            out.pop();
        }
    }
    // Writing to a Vec with room cannot fail or allocate.
    let _ = write!(out, "{v:?}");
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
    fn integers() {
        for n in [0, 7, 10, 99, 100, 101, 999, 1000, 12345, 1 << 53, u64::MAX] {
            let mut out = Vec::new();
            write_u64(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
        }
    }
}
