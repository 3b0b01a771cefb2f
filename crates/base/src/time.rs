//! Time: the wall clock, durations as flags and rules spell them, the
//! civil calendar both ways (RFC 3339 out and in, kernel log stamps in),
//! and the boot time.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Unix seconds now.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Parses `500ms`, `1s`, `5m`, `1h`, `3d`: a whole number and one unit.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 500ms, 1s, 5m, 1h or 3d"))?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?} has no unit of ms, s, m, h or d")),
    };
    n.checked_mul(ms)
        .filter(|&ms| ms <= 365 * 86_400_000)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{s:?} is longer than a year"))
}

/// Spells a duration the way [`parse_duration`] reads it, in its largest
/// exact unit (for PromQL and the log).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// days_from_civil); the caller checks the ranges.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Year, month and day of a day since 1970-01-01 (Howard Hinnant's
/// civil_from_days).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m as u32, d as u32)
}

/// Unix seconds of a UTC civil time; `None` outside the years 1970 to 9999
/// or for a month or day out of range. The caller checks the time of day.
pub fn unix_from_civil(
    (year, month, day): (u32, u32, u32),
    (h, m, s): (u32, u32, u32),
    frac: f64,
) -> Option<f64> {
    if !(1970..=9999).contains(&year) || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(s);
    Some(secs as f64 + frac)
}

/// Unix seconds of an RFC 3339 time, `2024-01-01T00:00:00.123456+00:00`
/// or with a `Z` zone, and of the ISO 8601 form logs also write, with `,`
/// before the fraction.
pub fn parse_iso_time(s: &str) -> Option<f64> {
    let (date, rest) = s.split_once('T')?;
    let mut d = date.split('-');
    let (year, month, day) = (d.next()?, d.next()?, d.next()?);
    if d.next().is_some() || year.len() != 4 {
        return None;
    }
    let (year, month, day) = (
        parse_digits(year, 4)?,
        parse_digits(month, 2)?,
        parse_digits(day, 2)?,
    );
    let time = rest.get(..8)?;
    let (h, m, sec) = parse_clock(time)?;
    let rest = rest.get(8..)?;
    // Fraction: `,123456` or `.123456`, then the zone.
    let frac_len = match rest.as_bytes().first() {
        Some(b',' | b'.') => 1 + rest.bytes().skip(1).take_while(u8::is_ascii_digit).count(),
        _ => 0,
    };
    let (frac, zone) = rest.split_at_checked(frac_len)?;
    let frac = match frac.get(1..) {
        Some(f) if !f.is_empty() => format!("0.{f}").parse::<f64>().ok()?,
        Some(_) => return None,
        None => 0.0,
    };
    let offset = match zone {
        "Z" => 0,
        _ => {
            let sign = match zone.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (zh, zm) = zone.get(1..)?.split_once(':')?;
            let (zh, zm) = (parse_digits(zh, 2)?, parse_digits(zm, 2)?);
            if zh > 23 || zm > 59 {
                return None;
            }
            sign * (zh as i64 * 3600 + zm as i64 * 60)
        }
    };
    unix_from_civil((year, month, day), (h, m, sec), frac).map(|t| t - offset as f64)
}

/// 1 to `max` decimal digits.
pub fn parse_digits(s: &str, max: usize) -> Option<u32> {
    if s.is_empty() || s.len() > max || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `HH:MM:SS`.
pub fn parse_clock(s: &str) -> Option<(u32, u32, u32)> {
    let mut t = s.split(':');
    let (h, m, sec) = (t.next()?, t.next()?, t.next()?);
    if t.next().is_some() || h.len() != 2 || m.len() != 2 || sec.len() != 2 {
        return None;
    }
    let (h, m, sec) = (
        parse_digits(h, 2)?,
        parse_digits(m, 2)?,
        parse_digits(sec, 2)?,
    );
    (h < 24 && m < 60 && sec <= 60).then_some((h, m, sec))
}

/// Now as RFC 3339 UTC with milliseconds: the logger's `ts`.
pub fn now_rfc3339() -> String {
    rfc3339(unix_now())
}

/// Unix seconds as RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: f64) -> String {
    let ms = (t * 1000.0).round() as i64;
    let (secs, ms) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Unix time of boot, from `btime` in /proc/stat: read once, as it never
/// changes while the process runs.
pub fn boot_time() -> Option<f64> {
    static BOOT: OnceLock<Option<f64>> = OnceLock::new();
    *BOOT.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        parse_btime(&stat)
    })
}

fn parse_btime(stat: &str) -> Option<f64> {
    let line = stat.lines().find_map(|l| l.strip_prefix("btime "))?;
    line.trim().parse::<u64>().ok().map(|t| t as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("3d"), Ok(Duration::from_secs(3 * 86400)));
        for bad in [
            "",
            "s",
            "1",
            "1.5s",
            "-1s",
            "1 s",
            "1w",
            "99999999999999999999s",
            "400d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        for d in ["500ms", "1s", "90s", "5m", "1h", "3d"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
    }

    #[test]
    fn civil_times_both_ways() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400.5), "2000-02-29T00:00:00.500Z");
        assert_eq!(rfc3339(1_796_050_000.0), "2026-11-30T14:46:40.000Z");
        for t in [0.0, 951_782_400.5, 1_709_188_200.0, 1_796_050_000.0] {
            let s = rfc3339(t);
            let n = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap();
            let back = unix_from_civil(
                (n(0..4), n(5..7), n(8..10)),
                (n(11..13), n(14..16), n(17..19)),
                0.0,
            );
            assert_eq!(back, Some(t.floor()), "{s}");
        }
        assert_eq!(unix_from_civil((1969, 12, 31), (0, 0, 0), 0.0), None);
        assert_eq!(unix_from_civil((2024, 13, 1), (0, 0, 0), 0.0), None);
    }

    #[test]
    fn boot_time_from_proc_stat() {
        assert_eq!(
            parse_btime("cpu  1 2 3\nintr 5\nbtime 1796049507\nprocesses 9\n"),
            Some(1_796_049_507.0)
        );
        assert_eq!(parse_btime("btime soon\n"), None);
        assert_eq!(parse_btime(""), None);
        let boot = boot_time().unwrap();
        assert!(boot > 1e9 && boot < unix_now(), "{boot}");
    }
}
